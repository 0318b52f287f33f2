//! What every reconciliation of a `KafkaConnector` shares: the clients, the retry backoff and
//! the auto-restart records this process wrote last.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use kstretch_api::KafkaConnector;
use kstretch_api::connector::AutoRestartStatus;
use kstretch_runtime::backoff::Backoff;
use kube::{Client, ResourceExt};

use super::metrics::ConnectorMetrics;
use super::plan::RestTarget;
use super::rest::{self, ConnectClient, Relay};
use crate::link::agents::Agents;
use crate::link::connect::{self, ConnectCalls};

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
    /// Events on the `KafkaConnector` for what it asked for (restarts).
    pub events: kstretch_runtime::events::Events,
    pub resync: Duration,
    /// How workers that kstretch runs are called; `None` when central runs without agents.
    pub relays: Option<Relays>,
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

/// The agents of the member clusters, which call the workers kstretch runs there.
#[derive(Debug, Clone)]
pub struct Relays {
    pub agents: Agents,
    pub calls: ConnectCalls,
    /// Central's own cluster: where a KafkaConnect without a stretch alias runs.
    pub own: String,
}

impl Context {
    pub fn new(
        client: Client,
        metrics: ConnectorMetrics,
        args: &ConnectorArgs,
        relays: Option<Relays>,
    ) -> Self {
        Self {
            relays,
            events: kstretch_runtime::events::Events::new(client.clone(), "kstretch-central"),
            client,
            http: rest::ConnectClient::http_client(),
            metrics,
            resync: Duration::from_secs(args.resync_secs),
            retries: Backoff::new(Duration::from_secs(args.resync_secs.max(1))),
            restarts: Mutex::default(),
        }
    }

    /// Central's own cluster when it calls workers through agents.
    pub(super) fn own_cluster(&self) -> Option<&str> {
        self.relays.as_ref().map(|r| r.own.as_str())
    }

    /// A client for the REST API of KafkaConnect `connect` in `namespace`, at `target`.
    pub(super) fn connect_client(
        &self,
        namespace: &str,
        connect: &str,
        target: &RestTarget,
    ) -> ConnectClient {
        let alias = match target {
            RestTarget::Url(url) => return ConnectClient::new(self.http.clone(), url),
            RestTarget::Agent { alias } => alias,
        };
        // Without agents nothing is connected: the calls say so.
        let relays = self.relays.clone().unwrap_or_else(|| Relays {
            agents: Agents::new(),
            calls: ConnectCalls::default(),
            own: String::new(),
        });
        ConnectClient::through(Relay {
            makes_calls: relays
                .agents
                .get(alias)
                .is_none_or(|r| connect::makes_calls(&r)),
            calls: relays.calls,
            alias: alias.clone(),
            namespace: namespace.to_owned(),
            connect: connect.to_owned(),
        })
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
    pub(super) fn backoff(&self, kc: &KafkaConnector) -> Duration {
        self.retries.failed(key(kc))
    }

    pub(super) fn succeeded(&self, kc: &KafkaConnector) {
        self.retries.succeeded(&key(kc));
    }
}

fn key(kc: &KafkaConnector) -> (String, String) {
    (kc.namespace().unwrap_or_default(), kc.name_any())
}
