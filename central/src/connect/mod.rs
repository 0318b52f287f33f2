//! The `KafkaConnect` reconciler: each Kafka Connect cluster's workers (StrimziPodSet, worker
//! configuration, REST API Service) in the member cluster it is placed in, and its status.
//! `reconcile` holds the pipeline; this file wires it into a controller.

pub mod build;
pub mod error;
pub mod metrics;
pub mod reconcile;
pub mod rollout;
pub mod security;
pub mod validate;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kstretch_api::KafkaConnect;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub use error::Error;
pub use reconcile::Context;

use crate::link::OwnerKind;

/// Runs the controller until `shutdown`. `agent_changes` wakes every `KafkaConnect` when an
/// agent connects, disconnects or reports (pods becoming ready are seen that way).
pub async fn run(
    connects: Api<KafkaConnect>,
    ctx: Arc<Context>,
    agent_changes: watch::Receiver<u64>,
    shutdown: CancellationToken,
) {
    let controller = Controller::new(connects, watcher::Config::default())
        .with_config(controller::Config::default().debounce(Duration::from_millis(300)));
    let store = controller.store();
    let agent_ticks = futures::stream::unfold(agent_changes, |mut changes| async move {
        changes.changed().await.ok().map(|()| ((), changes))
    });
    let releaser = release_and_forget_deleted(store, ctx.clone(), shutdown.clone());
    let retries = ctx.retries.clone();
    let run = controller
        .reconcile_all_on(agent_ticks)
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .run(
            |connect, ctx: Arc<Context>| {
                let span = tracing::info_span!("reconcile_connect", namespace = %connect.namespace().unwrap_or_default(), connect = %connect.name_any());
                async move {
                    ctx.metrics.reconcile();
                    if connect.metadata.deletion_timestamp.is_some() {
                        reconcile::delete(connect, ctx).await
                    } else {
                        reconcile::apply(connect, ctx).await
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
    tokio::join!(run, releaser);
}

fn error_policy(connect: Arc<KafkaConnect>, error: &Error, ctx: Arc<Context>) -> Action {
    tracing::warn!(connect = %connect.name_any(), reason = error.reason(), %error, "KafkaConnect reconcile failed; retrying");
    ctx.metrics.error(error.reason());
    // An owner that failed before contributing is retained, so start-up can proceed.
    let _ = reconcile::keep_or_retain(&ctx.owners, &reconcile::owner_of(&connect));
    Action::requeue(ctx.retries.failed(ObjectRef::from_obj(&*connect)))
}

/// Releases this controller's hold on the desired state once every `KafkaConnect` of the first
/// complete list contributed (or was retained, or is gone), then keeps forgetting the
/// `KafkaConnect`s central no longer sees (which deletes nothing: deletion goes through the
/// finalizer, see [`crate::owned`]).
async fn release_and_forget_deleted(
    store: Store<KafkaConnect>,
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
        .map(|c| reconcile::owner_of(c))
        .collect();
    tracing::info!(
        connects = initial.len(),
        "waiting for every KafkaConnect to be reconciled once before agents get snapshots"
    );
    let mut released = false;
    loop {
        let present: BTreeSet<_> = store
            .state()
            .iter()
            .map(|c| reconcile::owner_of(c))
            .collect();
        for gone in ctx
            .owners
            .owners()
            .into_iter()
            .filter(|o| o.kind == OwnerKind::KafkaConnect && !present.contains(o))
        {
            tracing::info!(namespace = %gone.namespace, connect = %gone.name,
                "KafkaConnect no longer seen: its workers are kept, unclaimed");
            if let Err(e) = ctx.owners.forget(&gone) {
                tracing::warn!(error = %e, "cannot publish the desired state without a KafkaConnect no longer seen");
            }
        }
        if !released
            && initial
                .iter()
                .all(|o| ctx.owners.has_seen(o) || !present.contains(o))
        {
            match ctx.owners.release(reconcile::HOLD) {
                Ok(()) => {
                    tracing::info!("every KafkaConnect contributed to the desired state");
                    released = true;
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
