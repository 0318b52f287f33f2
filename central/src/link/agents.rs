//! The agents central knows, keyed by the cluster alias of their certificate: who is connected
//! on which stream, since when, and what each last applied and reported.
//!
//! One stream per cluster: a newer stream of the same alias supersedes the older one (an agent
//! that reconnects before central noticed the old connection died must not be locked out).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use kstretch_proto::agent::v1::{
    ApplyReport, BuildInfo, EXPLICIT_DELETION, Mismatch, NodeStatus, PodSetStatus, ServiceStatus,
};

use super::desired::OwnerEntry;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// What central knows about the agent of one cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRecord {
    /// From the client certificate.
    pub cluster_alias: String,
    /// From the agent's `Hello`.
    pub claimed_cluster_alias: String,
    pub build: BuildInfo,
    pub kubernetes_version: String,
    pub namespaces: Vec<String>,
    pub remote_address: Option<SocketAddr>,
    pub mismatches: Vec<Mismatch>,
    pub connected: bool,
    pub connected_since: SystemTime,
    /// Last message of any kind.
    pub last_heartbeat: SystemTime,
    pub disconnected_at: Option<SystemTime>,
    pub disconnect_reason: String,
    /// Latest snapshot generation sent on the current (or last) stream.
    pub sent_generation: u64,
    /// The agent's report on the last snapshot it applied.
    pub last_apply: Option<ApplyReport>,
    pub last_apply_at: Option<SystemTime>,
    pub podsets: Vec<PodSetStatus>,
    /// Per-node Services and where they are reachable.
    pub services: Vec<ServiceStatus>,
    /// The cluster's Kubernetes nodes and their addresses; `None` until the agent listed them
    /// (or while it may not).
    pub nodes: Option<Vec<NodeStatus>>,
    /// When the agent last reported status (kept across its reconnects); `None` until it has
    /// reported once to this central process.
    pub status_at: Option<SystemTime>,
    /// From the agent's `Hello` (e.g. `explicit-deletion`).
    pub capabilities: Vec<String>,
    /// The image the agent runs, from its `Hello`; empty when it did not say.
    pub image: String,
}

impl AgentRecord {
    /// A record for a stream that just completed its handshake.
    pub fn connected(
        cluster_alias: String,
        claimed_cluster_alias: String,
        build: BuildInfo,
        kubernetes_version: String,
        namespaces: Vec<String>,
        remote_address: Option<SocketAddr>,
        mismatches: Vec<Mismatch>,
    ) -> Self {
        let now = SystemTime::now();
        Self {
            cluster_alias,
            claimed_cluster_alias,
            build,
            kubernetes_version,
            namespaces,
            remote_address,
            mismatches,
            connected: true,
            connected_since: now,
            last_heartbeat: now,
            disconnected_at: None,
            disconnect_reason: String::new(),
            sent_generation: 0,
            last_apply: None,
            last_apply_at: None,
            podsets: Vec::new(),
            services: Vec::new(),
            nodes: None,
            status_at: None,
            capabilities: Vec::new(),
            image: String::new(),
        }
    }

    pub fn with_capabilities(mut self, capabilities: Vec<String>) -> Self {
        self.capabilities = capabilities;
        self
    }

    pub fn with_image(mut self, image: String) -> Self {
        self.image = image;
        self
    }

    /// Whether this agent has carried out the declared deletion of `owner`, with
    /// `current_hash` the hash of the snapshot central holds for its cluster (which declares
    /// it). An agent that predates explicit deletion deletes by absence: applying that
    /// snapshot did it.
    pub fn confirms_deletion(&self, owner: &OwnerEntry, current_hash: Option<&str>) -> bool {
        let Some(report) = &self.last_apply else {
            return false;
        };
        if self.capabilities.iter().any(|c| c == EXPLICIT_DELETION) {
            report.confirmed_deleted.iter().any(|d| {
                d.kind == owner.kind
                    && d.namespace == owner.namespace
                    && d.name == owner.name
                    && d.uid == owner.uid
            })
        } else {
            current_hash == Some(report.hash.as_str())
                && report
                    .results
                    .iter()
                    .all(|r| r.outcome() != kstretch_proto::agent::v1::Outcome::DeleteFailed)
        }
    }
}

#[derive(Debug, Default)]
struct State {
    records: BTreeMap<String, AgentRecord>,
    /// The live stream of each alias: its id and the token that ends it.
    streams: BTreeMap<String, (u64, CancellationToken)>,
    next_stream: u64,
}

/// The registry of agents, shared by every stream and the admin API.
#[derive(Debug, Clone)]
pub struct Agents {
    inner: Arc<Mutex<State>>,
    /// Bumped when an agent connects, disconnects or reports; reconcilers watch it.
    changes: Arc<watch::Sender<u64>>,
}

impl Default for Agents {
    fn default() -> Self {
        Self {
            inner: Arc::default(),
            changes: Arc::new(watch::channel(0).0),
        }
    }
}

impl Agents {
    pub fn new() -> Self {
        Self::default()
    }

    /// Changes whenever an agent connects, disconnects, or reports status or an apply.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    pub(crate) fn notify(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Records a new stream for `record.cluster_alias` and returns its id and the token that
    /// is cancelled when a newer stream of the same alias supersedes it. The previous
    /// stream's token is cancelled, and its last apply report is kept until the new stream
    /// brings one.
    pub(crate) fn connect(&self, mut record: AgentRecord) -> (u64, CancellationToken) {
        let mut state = self.lock();
        state.next_stream += 1;
        let id = state.next_stream;
        let token = CancellationToken::new();
        let alias = record.cluster_alias.clone();
        if let Some((old, old_token)) = state.streams.insert(alias.clone(), (id, token.clone())) {
            tracing::warn!(cluster = %alias, old_stream = old, new_stream = id,
                "a second stream for the same cluster; the older one is closed");
            old_token.cancel();
        }
        if let Some(previous) = state.records.get(&alias) {
            record.last_apply = previous.last_apply.clone();
            record.last_apply_at = previous.last_apply_at;
            record.podsets = previous.podsets.clone();
            record.services = previous.services.clone();
            record.nodes = previous.nodes.clone();
            record.status_at = previous.status_at;
        }
        state.records.insert(alias, record);
        drop(state);
        self.notify();
        (id, token)
    }

    /// Changes the record of `alias` if `stream` is still its live stream.
    pub(crate) fn update(&self, alias: &str, stream: u64, change: impl FnOnce(&mut AgentRecord)) {
        let mut state = self.lock();
        if state.streams.get(alias).map(|(id, _)| *id) != Some(stream) {
            return;
        }
        if let Some(record) = state.records.get_mut(alias) {
            change(record);
        }
    }

    /// Marks `alias` disconnected if `stream` is still its live stream.
    pub(crate) fn disconnect(&self, alias: &str, stream: u64, reason: &str) {
        let mut state = self.lock();
        if state.streams.get(alias).map(|(id, _)| *id) != Some(stream) {
            return;
        }
        state.streams.remove(alias);
        if let Some(record) = state.records.get_mut(alias) {
            record.connected = false;
            record.disconnected_at = Some(SystemTime::now());
            reason.clone_into(&mut record.disconnect_reason);
        }
        drop(state);
        self.notify();
    }

    /// Every agent known since central started, ordered by alias.
    pub fn list(&self) -> Vec<AgentRecord> {
        self.lock().records.values().cloned().collect()
    }

    pub fn get(&self, alias: &str) -> Option<AgentRecord> {
        self.lock().records.get(alias).cloned()
    }

    /// The image each member cluster's agent said it runs (what the metrics jars and Kafka
    /// Exporter come from), by cluster alias; agents that said none are left out.
    pub fn images(&self) -> BTreeMap<String, String> {
        self.lock()
            .records
            .values()
            .filter(|r| !r.image.is_empty())
            .map(|r| (r.cluster_alias.clone(), r.image.clone()))
            .collect()
    }

    /// Aliases with a live stream, ordered.
    pub fn connected(&self) -> Vec<String> {
        self.lock().streams.keys().cloned().collect()
    }

    // A poisoned lock only means a writer panicked mid-update of plain values; keep serving.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The objects of `report` in `namespace` whose names start with `prefix` that the agent could
/// not apply or delete, each as "kind name: message".
pub fn rejected_in(report: &ApplyReport, namespace: &str, prefix: &str) -> Vec<String> {
    use kstretch_proto::agent::v1::Outcome;
    report
        .results
        .iter()
        .filter(|r| matches!(r.outcome(), Outcome::Rejected | Outcome::DeleteFailed))
        .filter_map(|r| {
            let o = r.r#ref.as_ref()?;
            (o.namespace == namespace && o.name.starts_with(prefix))
                .then(|| format!("{} {}: {}", o.kind, o.name, r.message))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn record(alias: &str) -> AgentRecord {
        AgentRecord::connected(
            alias.into(),
            alias.into(),
            BuildInfo::default(),
            "v1.36.3".into(),
            vec![],
            None,
            vec![],
        )
    }

    #[test]
    fn a_newer_stream_supersedes_the_older_one() {
        let agents = Agents::new();
        let (first, first_token) = agents.connect(record("beta"));
        agents.update("beta", first, |r| {
            r.last_apply = Some(ApplyReport {
                generation: 4,
                ..ApplyReport::default()
            })
        });
        let (second, second_token) = agents.connect(record("beta"));
        assert!(first_token.is_cancelled());
        assert!(!second_token.is_cancelled());
        assert_eq!(
            agents.get("beta").unwrap().last_apply.unwrap().generation,
            4,
            "the last report survives a reconnect"
        );

        // The old stream ending does not mark the new one disconnected.
        agents.disconnect("beta", first, "superseded");
        agents.update("beta", first, |r| r.sent_generation = 99);
        let now = agents.get("beta").unwrap();
        assert!(now.connected);
        assert_eq!(now.sent_generation, 0);
        assert_eq!(agents.connected(), ["beta"]);

        agents.disconnect("beta", second, "agent closed the stream");
        let gone = agents.get("beta").unwrap();
        assert!(!gone.connected);
        assert_eq!(gone.disconnect_reason, "agent closed the stream");
        assert!(agents.connected().is_empty());
        assert_eq!(agents.list().len(), 1, "known agents are kept");
    }

    /// An agent that understands explicit deletion confirms it by name and UID; one that
    /// predates it deleted by absence when it applied the snapshot declaring it, unless a
    /// delete failed.
    #[test]
    fn a_deletion_is_confirmed_by_word_or_by_applying_the_snapshot_that_declares_it() {
        use kstretch_proto::agent::v1::{ObjectResult, Outcome, Owner};
        let entry = OwnerEntry {
            kind: "Kafka".into(),
            namespace: "ns".into(),
            name: "c".into(),
            uid: "u1".into(),
            retain: false,
        };
        let proto = |uid: &str| Owner {
            kind: "Kafka".into(),
            namespace: "ns".into(),
            name: "c".into(),
            uid: uid.into(),
            retain: false,
        };
        let mut new = record("beta").with_capabilities(vec![EXPLICIT_DELETION.into()]);
        assert!(
            !new.confirms_deletion(&entry, Some("h")),
            "nothing applied yet"
        );
        new.last_apply = Some(ApplyReport {
            hash: "h".into(),
            confirmed_deleted: vec![proto("u0")],
            ..ApplyReport::default()
        });
        assert!(!new.confirms_deletion(&entry, Some("h")), "another UID");
        new.last_apply = Some(ApplyReport {
            hash: "old".into(),
            confirmed_deleted: vec![proto("u1")],
            ..ApplyReport::default()
        });
        assert!(new.confirms_deletion(&entry, Some("h")));

        let mut old = record("beta");
        old.last_apply = Some(ApplyReport {
            hash: "old".into(),
            ..ApplyReport::default()
        });
        assert!(
            !old.confirms_deletion(&entry, Some("h")),
            "not the declaring snapshot"
        );
        old.last_apply = Some(ApplyReport {
            hash: "h".into(),
            results: vec![ObjectResult {
                outcome: Outcome::DeleteFailed.into(),
                ..ObjectResult::default()
            }],
            ..ApplyReport::default()
        });
        assert!(!old.confirms_deletion(&entry, Some("h")), "a delete failed");
        old.last_apply = Some(ApplyReport {
            hash: "h".into(),
            ..ApplyReport::default()
        });
        assert!(old.confirms_deletion(&entry, Some("h")));
    }
}
