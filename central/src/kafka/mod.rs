//! The `Kafka` and `KafkaNodePool` reconciler: from the resources in the central cluster to the
//! desired state of every member cluster, node IDs, rolling, scale-down checks, unregistration
//! and status. `reconcile` holds the pipeline; this file wires it into a controller.

pub mod addresses;
pub mod adopt;
pub mod answer;
pub mod build;
pub mod checks;
pub mod context;
pub mod exporter;
pub mod external;
pub mod forget;
pub mod maintenance;
pub mod metrics;
pub mod move_drains;
pub mod moving;
pub mod operations;
pub mod quorum;
pub mod reconcile;
pub mod recover;
pub mod resolve;
pub mod roll;
pub mod routes;
pub mod security;
pub mod status;
pub mod version;
pub mod view;
pub mod warning;

use std::sync::Arc;
use std::time::Duration;

use kstretch_api::{Kafka, KafkaNodePool, names};
use kstretch_runtime::watch::Subscription;
use kube::ResourceExt;
use kube::runtime::controller;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use crate::error::Error;
pub use context::Context;

/// Runs the controller until `shutdown`, a `Kafka` also woken by changes of its pools and, when
/// an agent connects, disconnects or reports, by `agent_changes`. Both kinds are read from
/// central's shared watches.
pub async fn run(
    kafkas: Subscription<Kafka>,
    pools: Subscription<KafkaNodePool>,
    ctx: Arc<Context>,
    agent_changes: watch::Receiver<u64>,
    shutdown: CancellationToken,
) {
    let controller = kafkas
        .controller()
        .with_config(controller::Config::default().debounce(Duration::from_millis(300)))
        .watches_shared_stream(pools.changes, |pool| {
            let kafka = pool.labels().get(names::CLUSTER)?;
            Some(ObjectRef::new(kafka).within(&pool.namespace()?))
        });
    crate::owned::run(
        controller,
        ctx,
        agent_changes,
        shutdown,
        reconcile::apply,
        reconcile::delete,
    )
    .await;
}

crate::owned::owner_context!(Context, Kafka, crate::link::OwnerKind::Kafka);
