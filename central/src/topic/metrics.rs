//! Prometheus metrics of the topic operator, in the spirit of Strimzi's: reconciliations
//! (total, successful, failed, locked), duration of each Admin and Kubernetes call, queue and
//! batch sizes, resources, paused resources and resources of another cluster.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::metrics::{ReasonLabel, count_reason};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    call: String,
    outcome: String,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn call_histogram() -> Histogram {
    // 1 ms .. ~16 s
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// Cheap to clone: every handle shares the same values.
#[derive(Debug, Clone)]
pub struct TopicMetrics {
    reconciliations: Counter,
    successful: Counter,
    failed: Family<ReasonLabel, Counter>,
    locked: Counter,
    duration: Histogram,
    calls: Histograms<CallLabels>,
    queue_size: Gauge,
    max_queue_size: Gauge,
    batch_size: Histogram,
    resources: Gauge,
    paused: Gauge,
    foreign: Counter,
}

impl Default for TopicMetrics {
    fn default() -> Self {
        Self {
            reconciliations: Counter::default(),
            successful: Counter::default(),
            failed: Family::default(),
            locked: Counter::default(),
            duration: Histogram::new(exponential_buckets(0.005, 2.0, 14)),
            calls: Family::new_with_constructor(call_histogram),
            queue_size: Gauge::default(),
            max_queue_size: Gauge::default(),
            batch_size: Histogram::new(exponential_buckets(1.0, 2.0, 14)),
            resources: Gauge::default(),
            paused: Gauge::default(),
            foreign: Counter::default(),
        }
    }
}

impl TopicMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        let r = registry.sub_registry_with_prefix("topic");
        kstretch_runtime::register_metrics!(r, {
            "reconciliations", "KafkaTopic reconciliations" => m.reconciliations,
            "reconciliations_successful", "KafkaTopic reconciliations that ended with the status the resource asks for" => m.successful,
            "reconciliations_failed", "KafkaTopic reconciliations that ended with Ready=False, per reason" => m.failed,
            "reconciliations_locked", "KafkaTopic events that arrived while the same resource was being reconciled (it runs again afterwards)" => m.locked,
            "reconciliation_duration_seconds", "Time from a batch's start to the end of each KafkaTopic's reconciliation" => m.duration,
            "call_duration_seconds", "Duration of the Kafka Admin and Kubernetes calls of the topic operator, per call" => m.calls,
            "queue_size", "KafkaTopics waiting to be reconciled" => m.queue_size,
            "max_queue_size", "Most KafkaTopics waiting at once since the previous scrape interval" => m.max_queue_size,
            "batch_size", "KafkaTopics per reconciliation batch" => m.batch_size,
            "resources", "KafkaTopics watched" => m.resources,
            "resources_paused", "KafkaTopics with strimzi.io/pause-reconciliation=true" => m.paused,
            "foreign_cluster_resources", "KafkaTopics skipped because their status names another Kafka cluster" => m.foreign,
        });
        m
    }

    pub fn reconciled(&self, duration: Duration, failure: Option<&str>) {
        self.reconciliations.inc();
        self.duration.observe(duration.as_secs_f64());
        match failure {
            None => {
                self.successful.inc();
            }
            Some(reason) => count_reason(&self.failed, reason),
        }
    }

    pub fn locked(&self) {
        self.locked.inc();
    }

    pub fn admin_call(&self, call: &'static str, duration: Duration, ok: bool) {
        self.calls
            .get_or_create(&CallLabels {
                call: call.to_owned(),
                outcome: if ok { "ok" } else { "error" }.to_owned(),
            })
            .observe(duration.as_secs_f64());
    }

    pub fn queue(&self, waiting: usize, max_waiting: usize) {
        self.queue_size.set(to_i64(waiting));
        self.max_queue_size.set(to_i64(max_waiting));
    }

    pub fn batch(&self, size: usize) {
        self.batch_size.observe(size as f64);
    }

    pub fn resources(&self, total: usize, paused: usize) {
        self.resources.set(to_i64(total));
        self.paused.set(to_i64(paused));
    }

    pub fn foreign(&self) {
        self.foreign.inc();
    }
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
