//! The connector operator: `KafkaConnector`s reconciled against the Kafka Connect REST API of
//! the `KafkaConnect` their `strimzi.io/cluster` label names. This file wires the controller;
//! `reconcile` holds the pipeline, `plan` its pure decisions, `rest` the Connect client.

pub mod context;
pub mod metrics;
pub mod plan;
pub mod reconcile;
pub mod rest;
pub mod warning;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kstretch_api::{KafkaConnect, KafkaConnector, names};
use kstretch_runtime::watch::Subscription;
use kube::ResourceExt;
use kube::runtime::controller::{self, Action};
use kube::runtime::reflector::ObjectRef;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::link::agents::Agents;

pub use context::{ConnectorArgs, Context, FINALIZER, Relays};

pub use metrics::ConnectorMetrics;

/// Runs the controller until `shutdown`. A change of a `KafkaConnect` (its address, its
/// `use-connector-resources` annotation) reconciles the connectors labelled with its name; an
/// agent that connects or disconnects, every connector (their workers may be in its cluster).
pub async fn run(
    connectors: Subscription<KafkaConnector>,
    connects: Subscription<KafkaConnect>,
    ctx: Arc<Context>,
    shutdown: CancellationToken,
) {
    let controller = connectors
        .controller()
        .with_config(controller::Config::default().debounce(Duration::from_millis(200)));
    let store = controller.store();
    tracing::info!(resync = ?ctx.resync, "connector operator starting");
    let controller = match &ctx.relays {
        Some(relays) => controller.reconcile_all_on(connectivity_changes(relays.agents.clone())),
        None => controller,
    };
    controller
        .watches_shared_stream(connects.changes, move |connect| {
            let namespace = connect.namespace();
            let name = connect.name_any();
            store
                .state()
                .into_iter()
                .filter(|kc| {
                    kc.namespace() == namespace
                        && kc.labels().get(names::CLUSTER).map(String::as_str) == Some(&name)
                })
                .map(|kc| ObjectRef::from_obj(kc.as_ref()))
                .collect::<Vec<_>>()
        })
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .run(
            |kc, ctx: Arc<Context>| {
                let span = tracing::info_span!("reconcile", namespace = %kc.namespace().unwrap_or_default(), connector = %kc.name_any());
                async move {
                    ctx.metrics.reconcile();
                    reconcile::apply(kc, ctx).await
                }
                .instrument(span)
            },
            error_policy,
            ctx,
        )
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "reconcile result");
            }
        })
        .await;
}

/// Ticks whenever the set of connected agents changes, so that connectors of workers in a
/// cluster whose agent went or came back say so at once, not at their next resync.
fn connectivity_changes(agents: Agents) -> impl futures::Stream<Item = ()> + Send + Sync + 'static {
    let changes = agents.subscribe();
    let connected = agents.connected();
    futures::stream::unfold(
        (agents, changes, connected),
        |(agents, mut changes, connected)| async move {
            loop {
                changes.changed().await.ok()?;
                let now = agents.connected();
                if now != connected {
                    return Some(((), (agents, changes, now)));
                }
            }
        },
    )
}

fn error_policy(kc: Arc<KafkaConnector>, error: &reconcile::Error, ctx: Arc<Context>) -> Action {
    tracing::warn!(connector = %kc.name_any(), reason = error.reason(), %error, "reconcile failed; retrying");
    ctx.metrics.failed(error.reason());
    Action::requeue(ctx.backoff(&kc))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::link::AgentRecord;
    use kstretch_proto::agent::v1::BuildInfo;

    fn record(alias: &str) -> AgentRecord {
        let build = BuildInfo::default();
        AgentRecord::connected(
            alias.into(),
            alias.into(),
            build,
            "v1".into(),
            vec![],
            None,
            vec![],
        )
    }

    #[tokio::test]
    async fn connectors_wake_when_an_agent_comes_or_goes_not_when_it_reports() {
        let agents = Agents::new();
        let mut ticks = Box::pin(connectivity_changes(agents.clone()));
        let wait = Duration::from_millis(200);
        let (stream, _) = agents.connect(record("beta"));
        let came = tokio::time::timeout(wait, ticks.next()).await;
        assert_eq!(came, Ok(Some(())), "beta came");
        agents.notify();
        let reported = tokio::time::timeout(wait, ticks.next()).await;
        assert!(reported.is_err(), "a report changes nothing");
        agents.disconnect("beta", stream, "gone");
        let went = tokio::time::timeout(wait, ticks.next()).await;
        assert_eq!(went, Ok(Some(())), "beta went");
    }
}
