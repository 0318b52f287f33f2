//! The `KafkaConnect` reconciler: each Kafka Connect cluster's workers (StrimziPodSet, worker
//! configuration, REST API Service) in the member cluster it is placed in, and its status.
//! `reconcile` holds the pipeline (its I/O), `decide` what it decides; this file wires it into
//! a controller.

pub mod build;
pub mod decide;
pub mod error;
pub mod reconcile;
pub mod rollout;
pub mod security;
pub mod validate;
pub mod warning;

use std::sync::Arc;
use std::time::Duration;

use kstretch_api::KafkaConnect;
use kstretch_runtime::watch::Subscription;
use kube::runtime::controller;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use error::Error;
pub use reconcile::Context;

/// Runs the controller until `shutdown`. `agent_changes` wakes every `KafkaConnect` when an
/// agent connects, disconnects or reports (pods becoming ready are seen that way).
pub async fn run(
    connects: Subscription<KafkaConnect>,
    ctx: Arc<Context>,
    agent_changes: watch::Receiver<u64>,
    shutdown: CancellationToken,
) {
    let controller = connects
        .controller()
        .with_config(controller::Config::default().debounce(Duration::from_millis(300)));
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

crate::owned::owner_context!(Context, KafkaConnect, crate::link::OwnerKind::KafkaConnect);
