//! Prometheus metrics of the connector operator: reconciliations (total, failed per reason),
//! automatic restarts and offsets operations per outcome.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::metrics::ControllerMetrics;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OffsetsLabels {
    operation: String,
    outcome: String,
}

/// Cheap to clone: every handle shares the same values.
#[derive(Debug, Clone, Default)]
pub struct ConnectorMetrics {
    controller: ControllerMetrics,
    auto_restarts: Counter,
    offsets: Family<OffsetsLabels, Counter>,
}

impl ConnectorMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self {
            controller: ControllerMetrics::register(registry, "connector", "KafkaConnector"),
            ..Self::default()
        };
        let r = registry.sub_registry_with_prefix("connector");
        kstretch_runtime::register_metrics!(r, {
            "auto_restarts", "Automatic restarts of failed connectors and tasks" => m.auto_restarts,
            "offsets_operations", "Offsets operations (list, alter, reset) per outcome" => m.offsets,
        });
        m
    }

    pub fn reconcile(&self) {
        self.controller.reconciled();
    }

    pub fn failed(&self, reason: &str) {
        self.controller.failed(reason);
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
