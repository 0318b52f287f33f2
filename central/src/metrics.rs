//! The counters central's controllers export: the two of every simple controller
//! (reconciliations, and those that ended in `Ready=False`, per reason), and those of the
//! controllers that own objects in member clusters (`Kafka`, `KafkaConnect`), with their
//! reconciliations' durations.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReasonLabel {
    pub reason: String,
}

/// Counts one more of `reason` in `family`.
pub(crate) fn count_reason(family: &Family<ReasonLabel, Counter>, reason: &str) {
    family
        .get_or_create(&ReasonLabel {
            reason: reason.to_owned(),
        })
        .inc();
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
        kstretch_runtime::register_metrics!(r, {
            "reconciliations", format!("{kind} reconciliations") => m.reconciliations,
            "reconciliations_failed", format!("{kind} reconciliations that ended with Ready=False, per reason") => m.failed,
        });
        m
    }

    pub fn reconciled(&self) {
        self.reconciliations.inc();
    }

    pub fn failed(&self, reason: &str) {
        count_reason(&self.failed, reason);
    }
}

/// The counters of a controller whose resources own objects in member clusters, and how long
/// its reconciliations take. Cheap to clone: every handle shares the values.
#[derive(Debug, Clone)]
pub struct OwnerMetrics {
    reconciles: Counter,
    errors: Family<ReasonLabel, Counter>,
    invalid: Family<ReasonLabel, Counter>,
    restarts: Counter,
    duration: Histogram,
}

impl Default for OwnerMetrics {
    fn default() -> Self {
        Self {
            reconciles: Counter::default(),
            errors: Family::default(),
            invalid: Family::default(),
            restarts: Counter::default(),
            // 5 ms to about 80 s: a pass that waits on Kafka's admin API is the slow one.
            duration: Histogram::new(exponential_buckets(0.005, 2.0, 15)),
        }
    }
}

impl OwnerMetrics {
    /// Registers `<prefix>_reconciles`, `<prefix>_reconcile_errors`, `<prefix>_invalid` and
    /// `<prefix>_pod_restarts`; `kind` names what is reconciled and `pods` what is restarted
    /// in the help texts.
    pub fn register(registry: &mut Registry, prefix: &str, kind: &str, pods: &str) -> Self {
        let m = Self::default();
        let r = registry.sub_registry_with_prefix(prefix);
        kstretch_runtime::register_metrics!(r, {
            "reconciles", format!("{kind} reconciliations started") => m.reconciles,
            "reconcile_errors", format!("{kind} reconciliations that failed transiently, per reason") => m.errors,
            "invalid", format!("{kind} reconciliations refused because the resources must be fixed, per reason") => m.invalid,
            "pod_restarts", format!("{pods} restarted by rolling updates") => m.restarts,
            "reconcile_duration_seconds", format!("How long {kind} reconciliations took") => m.duration,
        });
        m
    }

    pub fn reconcile(&self) {
        self.reconciles.inc();
    }

    pub fn error(&self, reason: &str) {
        count_reason(&self.errors, reason);
    }

    pub fn invalid(&self, reason: &str) {
        count_reason(&self.invalid, reason);
    }

    pub fn restarted(&self) {
        self.restarts.inc();
    }

    /// Records how long one reconciliation took.
    pub fn took(&self, elapsed: std::time::Duration) {
        self.duration.observe(elapsed.as_secs_f64());
    }
}
