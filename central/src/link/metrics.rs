//! Prometheus metrics of the agent link on central's side.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

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
        m
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
