//! Prometheus metrics of the `KafkaConnect` reconciler.

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
pub struct ConnectMetrics {
    reconciles: Counter,
    errors: Family<ReasonLabel, Counter>,
    invalid: Family<ReasonLabel, Counter>,
    restarts: Counter,
}

impl ConnectMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "connect_reconciles",
            "KafkaConnect reconciliations started",
            m.reconciles.clone(),
        );
        registry.register(
            "connect_reconcile_errors",
            "KafkaConnect reconciliations that failed transiently, per reason",
            m.errors.clone(),
        );
        registry.register(
            "connect_invalid",
            "KafkaConnect reconciliations refused because the resource must be fixed, per reason",
            m.invalid.clone(),
        );
        registry.register(
            "connect_pod_restarts",
            "Connect worker pods restarted by rolling updates",
            m.restarts.clone(),
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
}
