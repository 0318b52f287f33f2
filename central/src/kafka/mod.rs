//! The `Kafka` and `KafkaNodePool` reconciler: from the resources in the central cluster to the
//! desired state of every member cluster, node IDs, rolling, scale-down checks, unregistration
//! and status. `reconcile` holds the pipeline; this file wires it into a controller.

pub mod addresses;
pub mod adopt;
pub mod answer;
pub mod build;
pub mod checks;
pub mod error;
pub mod forget;
pub mod metrics;
pub mod moving;
pub mod quorum;
pub mod reconcile;
pub mod recover;
pub mod resolve;
pub mod roll;
pub mod security;
pub mod status;
pub mod version;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kstretch_api::{Kafka, KafkaNodePool, names};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub use error::Error;
pub use reconcile::Context;

/// Runs the controller until `shutdown`. `agent_changes` wakes every `Kafka` when an agent
/// connects, disconnects or reports.
pub async fn run(
    kafkas: Api<Kafka>,
    pools: Api<KafkaNodePool>,
    ctx: Arc<Context>,
    agent_changes: watch::Receiver<u64>,
    shutdown: CancellationToken,
) {
    let controller = Controller::new(kafkas.clone(), watcher::Config::default())
        .with_config(controller::Config::default().debounce(Duration::from_millis(300)));
    let store = controller.store();
    let agent_ticks = futures::stream::unfold(agent_changes, |mut changes| async move {
        changes.changed().await.ok().map(|()| ((), changes))
    });
    let opener = open_and_forget_deleted(store, ctx.clone(), shutdown.clone());
    let retries = ctx.retries.clone();
    let run = controller
        .watches(pools, watcher::Config::default(), |pool| {
            let kafka = pool.labels().get(names::CLUSTER)?;
            Some(ObjectRef::new(kafka).within(&pool.namespace()?))
        })
        .reconcile_all_on(agent_ticks)
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .run(
            |kafka, ctx: Arc<Context>| {
                let span = tracing::info_span!("reconcile", namespace = %kafka.namespace().unwrap_or_default(), kafka = %kafka.name_any());
                async move {
                    ctx.metrics.reconcile();
                    if kafka.metadata.deletion_timestamp.is_some() {
                        reconcile::delete(kafka, ctx).await
                    } else {
                        reconcile::apply(kafka, ctx).await
                    }
                }
                .instrument(span)
            },
            error_policy,
            ctx,
        )
        .for_each(move |result| {
            retries.observe(&result);
            futures::future::ready(())
        });
    tokio::join!(run, opener);
}

fn error_policy(kafka: Arc<Kafka>, error: &Error, ctx: Arc<Context>) -> Action {
    tracing::warn!(kafka = %kafka.name_any(), reason = error.reason(), %error, "reconcile failed; retrying");
    ctx.metrics.error(error.reason());
    // An owner that failed before contributing is retained, so start-up can proceed.
    let _ = reconcile::keep_or_retain(&ctx.owners, &reconcile::owner_of(&kafka));
    Action::requeue(ctx.retries.failed(ObjectRef::from_obj(&*kafka)))
}

/// Opens the desired state to agents once every `Kafka` of the first complete list was
/// reconciled (contributed, or was retained) — and, through [`crate::link::Owners::hold`],
/// once every `KafkaConnect` of its controller's first list was too — then keeps forgetting
/// the `Kafka`s central no longer sees. Forgetting deletes nothing: a deletion reaches the
/// agents only through the finalizer's explicit word ([`crate::owned`]).
async fn open_and_forget_deleted(
    store: Store<Kafka>,
    ctx: Arc<Context>,
    shutdown: CancellationToken,
) {
    tokio::select! {
        _ = shutdown.cancelled() => return,
        ready = store.wait_until_ready() => if ready.is_err() { return },
    }
    let initial: Vec<_> = store
        .state()
        .iter()
        .map(|k| reconcile::owner_of(k))
        .collect();
    tracing::info!(
        kafkas = initial.len(),
        "waiting for every Kafka to be reconciled once before agents get snapshots"
    );
    let mut open = false;
    loop {
        let present: BTreeSet<_> = store
            .state()
            .iter()
            .map(|k| reconcile::owner_of(k))
            .collect();
        for gone in ctx
            .owners
            .owners()
            .into_iter()
            // Other kinds' owners are removed by their own controllers.
            .filter(|o| o.kind == crate::link::OwnerKind::Kafka && !present.contains(o))
        {
            tracing::info!(namespace = %gone.namespace, kafka = %gone.name,
                "Kafka no longer seen: its objects are kept in the member clusters, unclaimed");
            if let Err(e) = ctx.owners.forget(&gone) {
                tracing::warn!(error = %e, "cannot publish the desired state without a Kafka no longer seen");
            }
        }
        if !open
            && initial
                .iter()
                .all(|o| ctx.owners.has_seen(o) || !present.contains(o))
        {
            match ctx.owners.open() {
                Ok(()) => {
                    tracing::info!(
                        "every Kafka contributed: the desired state opens (once no other controller holds it)"
                    );
                    open = true;
                }
                Err(e) => tracing::warn!(error = %e, "cannot publish the desired state yet"),
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
    }
}
