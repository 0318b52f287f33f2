//! Prometheus metrics of the StrimziPodSet controller (prefix `<binary>_podset_`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    /// `ok` or `error`.
    pub result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CauseLabel {
    /// `terminal` or `unlisted`.
    pub cause: &'static str,
}

/// Every metric of the controller; cheap to clone (shared handles).
#[derive(Debug, Clone)]
pub struct Metrics {
    pub reconciliations: Family<ResultLabel, Counter>,
    pub failures: Family<ReasonLabel, Counter>,
    pub duration: Histogram,
    pub pods_created: Counter,
    pub pods_deleted: Family<CauseLabel, Counter>,
    pub pods_adopted: Counter,
    pub status_updates: Counter,
}

impl Metrics {
    pub fn register(registry: &mut Registry) -> Metrics {
        let metrics = Metrics {
            reconciliations: Family::default(),
            failures: Family::default(),
            // 1 ms .. ~33 s: a reconcile is a few apiserver round trips.
            duration: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            pods_created: Counter::default(),
            pods_deleted: Family::default(),
            pods_adopted: Counter::default(),
            status_updates: Counter::default(),
        };
        let r = registry.sub_registry_with_prefix("podset");
        kstretch_runtime::register_metrics!(r, {
            "reconciliations", "Podset reconciliations by result" => metrics.reconciliations,
            "reconcile_failures", "Failed podset reconciliations by reason" => metrics.failures,
            "reconcile_duration_seconds", "Duration of podset reconciliations" => metrics.duration,
            "pods_created", "Pods created by the podset controller" => metrics.pods_created,
            "pods_deleted", "Pods deleted by the podset controller, by cause" => metrics.pods_deleted,
            "pods_adopted", "Existing pods given their podset's owner reference" => metrics.pods_adopted,
            "status_updates", "Podset status writes" => metrics.status_updates,
        });
        metrics
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_exposed_with_the_podset_prefix() {
        let mut registry = Registry::with_prefix("kstretch_agent");
        let m = Metrics::register(&mut registry);
        m.reconciliations
            .get_or_create(&ResultLabel { result: "ok" })
            .inc();
        m.failures
            .get_or_create(&ReasonLabel {
                reason: "PodRejected",
            })
            .inc();
        m.pods_deleted
            .get_or_create(&CauseLabel { cause: "terminal" })
            .inc();
        m.duration.observe(0.01);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        for line in [
            "kstretch_agent_podset_reconciliations_total{result=\"ok\"} 1",
            "kstretch_agent_podset_reconcile_failures_total{reason=\"PodRejected\"} 1",
            "kstretch_agent_podset_pods_deleted_total{cause=\"terminal\"} 1",
            "kstretch_agent_podset_reconcile_duration_seconds_count 1",
        ] {
            assert!(text.contains(line), "{line} missing in\n{text}");
        }
    }
}
