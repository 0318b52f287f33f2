//! The connector operator: `KafkaConnector`s reconciled against the Kafka Connect REST API of
//! the `KafkaConnect` their `strimzi.io/cluster` label names. This file wires the controller;
//! `reconcile` holds the pipeline, `plan` its pure decisions, `rest` the Connect client.

pub mod metrics;
pub mod plan;
pub mod reconcile;
pub mod rest;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kstretch_api::connector::AutoRestartStatus;
use kstretch_api::{KafkaConnect, KafkaConnector, names};
use kstretch_runtime::backoff::Backoff;
use kstretch_runtime::watch::Subscription;
use kube::runtime::controller::{self, Action};
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub use metrics::ConnectorMetrics;

/// Finalizer that makes deleting a `KafkaConnector` delete its connector from Connect.
pub const FINALIZER: &str = "kstretch.io/kafka-connector";

/// Command-line flags of the connector operator (flattened into central's).
#[derive(clap::Args, Debug, Clone)]
pub struct ConnectorArgs {
    /// Seconds between reconciliations of an unchanged `KafkaConnector` (refreshes its status
    /// and drives automatic restarts).
    #[arg(long = "connector-resync-secs", env = "KSTRETCH_CONNECTOR_RESYNC_SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub resync_secs: u64,
}

/// Everything a reconciliation needs.
pub struct Context {
    pub client: Client,
    /// Shared by every Connect cluster's client (one connection pool).
    pub http: reqwest::Client,
    pub metrics: ConnectorMetrics,
    pub resync: Duration,
    /// Per connector, the delay before retrying a transient failure.
    retries: Backoff<(String, String)>,
    /// Per connector, the auto-restart record last written: the cached resource may not show
    /// it yet when the next reconciliation starts, and a stale read would restart again at once.
    restarts: Mutex<HashMap<(String, String), AutoRestartStatus>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("resync", &self.resync)
            .finish_non_exhaustive()
    }
}

impl Context {
    pub fn new(client: Client, metrics: ConnectorMetrics, args: &ConnectorArgs) -> Self {
        Self {
            client,
            http: rest::ConnectClient::http_client(),
            metrics,
            resync: Duration::from_secs(args.resync_secs),
            retries: Backoff::new(Duration::from_secs(args.resync_secs.max(1))),
            restarts: Mutex::default(),
        }
    }

    /// The auto-restart record to decide from: the one this process wrote last when the
    /// cached status is older (fewer restarts or an earlier one).
    pub fn previous_restart(&self, kc: &KafkaConnector) -> Option<AutoRestartStatus> {
        let cached = kc.status.as_ref().and_then(|s| s.auto_restart.clone());
        let remembered = self
            .restarts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key(kc))
            .cloned();
        match (cached, remembered) {
            (Some(c), Some(r)) => {
                let newer = (r.count, r.last_restart_timestamp.as_deref())
                    > (c.count, c.last_restart_timestamp.as_deref());
                Some(if newer { r } else { c })
            }
            (c, r) => c.or(r),
        }
    }

    /// Records the auto-restart status just decided (`None` forgets it).
    pub fn remember_restart(&self, kc: &KafkaConnector, status: Option<&AutoRestartStatus>) {
        let mut restarts = self.restarts.lock().unwrap_or_else(|e| e.into_inner());
        match status {
            Some(s) => restarts.insert(key(kc), s.clone()),
            None => restarts.remove(&key(kc)),
        };
    }

    /// 1 s doubling to the resync interval, with jitter.
    fn backoff(&self, kc: &KafkaConnector) -> Duration {
        self.retries.failed(key(kc))
    }

    fn succeeded(&self, kc: &KafkaConnector) {
        self.retries.succeeded(&key(kc));
    }
}

fn key(kc: &KafkaConnector) -> (String, String) {
    (kc.namespace().unwrap_or_default(), kc.name_any())
}

/// Runs the controller until `shutdown`. A change of a `KafkaConnect` (its address, its
/// `use-connector-resources` annotation) reconciles the connectors labelled with its name.
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

fn error_policy(kc: Arc<KafkaConnector>, error: &reconcile::Error, ctx: Arc<Context>) -> Action {
    tracing::warn!(connector = %kc.name_any(), reason = error.reason(), %error, "reconcile failed; retrying");
    ctx.metrics.failed(error.reason());
    Action::requeue(ctx.backoff(&kc))
}
