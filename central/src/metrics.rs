//! The two counters every simple controller of central exports: reconciliations, and those
//! that ended in `Ready=False`, per reason.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: String,
}

/// A controller's counters. Cheap to clone: every handle shares the values.
#[derive(Debug, Clone, Default)]
pub struct ControllerMetrics {
    reconciliations: Counter,
    failed: Family<ReasonLabel, Counter>,
}

impl ControllerMetrics {
    /// Registers `<prefix>_reconciliations` and `<prefix>_reconciliations_failed`; `kind`
    /// names what is reconciled in the help texts.
    pub fn register(registry: &mut Registry, prefix: &str, kind: &str) -> Self {
        let m = Self::default();
        let r = registry.sub_registry_with_prefix(prefix);
        r.register(
            "reconciliations",
            format!("{kind} reconciliations"),
            m.reconciliations.clone(),
        );
        r.register(
            "reconciliations_failed",
            format!("{kind} reconciliations that ended with Ready=False, per reason"),
            m.failed.clone(),
        );
        m
    }

    pub fn reconciled(&self) {
        self.reconciliations.inc();
    }

    pub fn failed(&self, reason: &str) {
        self.failed
            .get_or_create(&ReasonLabel {
                reason: reason.to_owned(),
            })
            .inc();
    }
}
