//! Prometheus metrics of the connector operator: reconciliations (total, failed per reason),
//! automatic restarts and offsets operations per outcome.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OffsetsLabels {
    operation: String,
    outcome: String,
}

/// Cheap to clone: every handle shares the same values.
#[derive(Debug, Clone, Default)]
pub struct ConnectorMetrics {
    reconciliations: Counter,
    failed: Family<ReasonLabel, Counter>,
    auto_restarts: Counter,
    offsets: Family<OffsetsLabels, Counter>,
}

impl ConnectorMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        let r = registry.sub_registry_with_prefix("connector");
        r.register(
            "reconciliations",
            "KafkaConnector reconciliations",
            m.reconciliations.clone(),
        );
        r.register(
            "reconciliations_failed",
            "KafkaConnector reconciliations that ended with Ready=False, per reason",
            m.failed.clone(),
        );
        r.register(
            "auto_restarts",
            "Automatic restarts of failed connectors and tasks",
            m.auto_restarts.clone(),
        );
        r.register(
            "offsets_operations",
            "Offsets operations (list, alter, reset) per outcome",
            m.offsets.clone(),
        );
        m
    }

    pub fn reconcile(&self) {
        self.reconciliations.inc();
    }

    pub fn failed(&self, reason: &str) {
        self.failed
            .get_or_create(&ReasonLabel {
                reason: reason.to_owned(),
            })
            .inc();
    }

    pub fn auto_restart(&self) {
        self.auto_restarts.inc();
    }

    pub fn offsets(&self, operation: &str, ok: bool) {
        self.offsets
            .get_or_create(&OffsetsLabels {
                operation: operation.to_owned(),
                outcome: if ok { "success" } else { "failure" }.to_owned(),
            })
            .inc();
    }
}
