//! Prometheus metrics of the agent link on central's side: counters of what went over it, and
//! each member cluster's agent as central knows it, read at every scrape.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::registry::Registry;

use super::agents::{AgentRecord, Agents};

use crate::metrics::{ReasonLabel, count_reason};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ClusterLabel {
    pub cluster: String,
}

/// The link's metrics; cheap to clone (every handle shares the same values).
#[derive(Debug, Clone, Default)]
pub struct LinkMetrics {
    pub(crate) connected_agents: Gauge,
    pub(crate) snapshots_sent: Family<ClusterLabel, Counter>,
    pub(crate) apply_errors: Family<ClusterLabel, Counter>,
    pub(crate) protocol_errors: Family<ReasonLabel, Counter>,
    pub(crate) refused_streams: Family<ReasonLabel, Counter>,
    agents: AgentCollector,
}

impl LinkMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        kstretch_runtime::register_metrics!(registry, {
            "link_connected_agents", "Agents with a live stream to central" => m.connected_agents,
            "link_snapshots_sent", "Desired-state snapshots sent to agents, per cluster" => m.snapshots_sent,
            "link_apply_errors", "Objects agents reported they could not apply or delete, per cluster" => m.apply_errors,
            "link_protocol_errors", "Agent messages refused by the link's rules, per reason" => m.protocol_errors,
            "link_refused_streams", "Streams refused because the client certificate names no valid cluster, per reason" => m.refused_streams,
        });
        registry.register_collector(Box::new(m.agents.clone()));
        m
    }

    /// Exports the agents of `agents` and of every cluster of `members` (those never connected
    /// as disconnected) from now on.
    pub fn observe(&self, agents: &Agents, members: BTreeSet<String>) {
        let _ = self.agents.source.set((agents.clone(), members));
    }

    pub(crate) fn snapshot_sent(&self, cluster: &str) {
        self.snapshots_sent
            .get_or_create(&ClusterLabel {
                cluster: cluster.to_owned(),
            })
            .inc();
    }

    pub(crate) fn apply_errors(&self, cluster: &str, n: u64) {
        self.apply_errors
            .get_or_create(&ClusterLabel {
                cluster: cluster.to_owned(),
            })
            .inc_by(n);
    }

    pub(crate) fn protocol_error(&self, reason: &str) {
        count_reason(&self.protocol_errors, reason);
    }

    pub(crate) fn refused(&self, reason: &str) {
        count_reason(&self.refused_streams, reason);
    }
}

/// Each member cluster's agent at scrape time: connected or not, when it last said anything,
/// and the desired-state generation central last sent it against the one it last applied.
#[derive(Debug, Clone, Default)]
struct AgentCollector {
    source: Arc<OnceLock<(Agents, BTreeSet<String>)>>,
}

/// One cluster's values, as exported.
#[derive(Debug, Default, PartialEq)]
struct AgentValues {
    connected: i64,
    last_contact: Option<f64>,
    sent_generation: Option<i64>,
    applied_generation: Option<i64>,
}

fn seconds(at: SystemTime) -> f64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Which of a cluster's values a family exports.
type ValueOf = fn(&AgentValues) -> Option<f64>;

/// The values of every cluster of `members` and of `records`, by alias. Pure.
fn agent_values(
    records: &[AgentRecord],
    members: &BTreeSet<String>,
) -> std::collections::BTreeMap<String, AgentValues> {
    let mut out: std::collections::BTreeMap<String, AgentValues> = members
        .iter()
        .map(|m| (m.clone(), AgentValues::default()))
        .collect();
    for r in records {
        let generation = |g: u64| i64::try_from(g).ok();
        out.insert(
            r.cluster_alias.clone(),
            AgentValues {
                connected: i64::from(r.connected),
                last_contact: Some(seconds(r.last_heartbeat)),
                sent_generation: generation(r.sent_generation),
                applied_generation: r.last_apply.as_ref().and_then(|a| generation(a.generation)),
            },
        );
    }
    out
}

impl Collector for AgentCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some((agents, members)) = self.source.get() else {
            return Ok(());
        };
        let values = agent_values(&agents.list(), members);
        let label = |cluster: &str| ClusterLabel {
            cluster: cluster.to_owned(),
        };
        let families: [(&str, &str, ValueOf); 4] = [
            (
                "agent_connected",
                "1 while the member cluster's agent has a live stream to central, else 0",
                |v| Some(v.connected as f64),
            ),
            (
                "agent_last_contact_timestamp_seconds",
                "When the member cluster's agent last sent central anything",
                |v| v.last_contact,
            ),
            (
                "agent_sent_generation",
                "The desired-state generation central last sent the member cluster's agent",
                |v| v.sent_generation.map(|g| g as f64),
            ),
            (
                "agent_applied_generation",
                "The desired-state generation the member cluster's agent last reported applied",
                |v| v.applied_generation.map(|g| g as f64),
            ),
        ];
        for (name, help, value) in families {
            let gauge = ConstGauge::new(0.0_f64);
            let mut family = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
            for (cluster, v) in &values {
                if let Some(x) = value(v) {
                    let labels = label(cluster);
                    ConstGauge::new(x).encode(family.encode_family(&labels)?)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn every_member_is_exported_and_one_never_seen_counts_as_disconnected() {
        let agents = Agents::new();
        let metrics = LinkMetrics::register(&mut Registry::default());
        metrics.observe(&agents, ["alpha".to_owned(), "beta".to_owned()].into());
        let values = agent_values(&agents.list(), &["alpha".to_owned()].into());
        assert_eq!(values["alpha"], AgentValues::default());

        let mut registry = Registry::with_prefix("kstretch_central");
        let metrics = LinkMetrics::register(&mut registry);
        metrics.observe(&agents, ["alpha".to_owned(), "beta".to_owned()].into());
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("kstretch_central_agent_connected{cluster=\"beta\"} 0"),
            "{text}"
        );
        assert!(
            !text.contains("agent_last_contact_timestamp_seconds{"),
            "{text}"
        );
    }
}
