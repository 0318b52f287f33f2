//! Prometheus metrics of the `Kafka` reconciler.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: String,
}

/// Cheap to clone: every handle shares the same values.
#[derive(Debug, Clone, Default)]
pub struct KafkaMetrics {
    reconciles: Counter,
    errors: Family<ReasonLabel, Counter>,
    invalid: Family<ReasonLabel, Counter>,
    restarts: Counter,
    unregistrations: Counter,
}

impl KafkaMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "kafka_reconciles",
            "Kafka reconciliations started",
            m.reconciles.clone(),
        );
        registry.register(
            "kafka_reconcile_errors",
            "Kafka reconciliations that failed transiently, per reason",
            m.errors.clone(),
        );
        registry.register(
            "kafka_invalid",
            "Kafka reconciliations refused because the resources must be fixed, per reason",
            m.invalid.clone(),
        );
        registry.register(
            "kafka_pod_restarts",
            "Pods restarted by rolling updates",
            m.restarts.clone(),
        );
        registry.register(
            "kafka_node_unregistrations",
            "Removed nodes unregistered from KRaft",
            m.unregistrations.clone(),
        );
        m
    }

    pub fn reconcile(&self) {
        self.reconciles.inc();
    }

    pub fn error(&self, reason: &str) {
        self.errors
            .get_or_create(&ReasonLabel {
                reason: reason.to_owned(),
            })
            .inc();
    }

    pub fn invalid(&self, reason: &str) {
        self.invalid
            .get_or_create(&ReasonLabel {
                reason: reason.to_owned(),
            })
            .inc();
    }

    pub fn restarted(&self) {
        self.restarts.inc();
    }

    pub fn unregistered(&self) {
        self.unregistrations.inc();
    }
}
