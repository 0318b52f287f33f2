//! Prometheus metrics of the `Kafka` reconciler: those of every owning controller
//! ([`OwnerMetrics`], prefix `kafka`), the nodes it unregistered from KRaft, and each `Kafka`'s
//! status as last written (Ready or not, its warnings by reason), for alerts.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Deref;
use std::sync::{Arc, Mutex};

use kstretch_api::kafka::KafkaStatus;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::metrics::OwnerMetrics;

#[derive(Debug, Clone, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct KafkaLabels {
    namespace: String,
    kafka: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CaLabels {
    namespace: String,
    kafka: String,
    ca: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WarningLabels {
    namespace: String,
    kafka: String,
    reason: String,
}

/// Cheap to clone: every handle shares the same values.
#[derive(Debug, Clone, Default)]
pub struct KafkaMetrics {
    owner: OwnerMetrics,
    unregistrations: Counter,
    ready: Family<KafkaLabels, Gauge>,
    warnings: Family<WarningLabels, Gauge>,
    ca_expiry: Family<CaLabels, Gauge>,
    /// The warning reasons exported per `Kafka`, so that those gone are removed.
    shown: Arc<Mutex<BTreeMap<KafkaLabels, BTreeSet<String>>>>,
}

impl KafkaMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self {
            owner: OwnerMetrics::register(registry, "kafka", "Kafka", "Pods"),
            ..Self::default()
        };
        kstretch_runtime::register_metrics!(registry, {
            "kafka_node_unregistrations", "Removed nodes unregistered from KRaft" => m.unregistrations,
            "kafka_ready", "1 while the Kafka's Ready condition is True, else 0" => m.ready,
            "kafka_warnings", "The Kafka's Warning conditions, per reason" => m.warnings,
            "kafka_ca_expiry_timestamp_seconds", "When the Kafka's cluster or clients CA certificate expires" => m.ca_expiry,
        });
        m
    }

    pub fn unregistered(&self) {
        self.unregistrations.inc();
    }

    /// Exports the status just written for `Kafka` `namespace/name`.
    pub fn observe(&self, namespace: &str, name: &str, status: &KafkaStatus) {
        let key = KafkaLabels {
            namespace: namespace.to_owned(),
            kafka: name.to_owned(),
        };
        let ready = status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        self.ready.get_or_create(&key).set(i64::from(ready));
        let mut counts: BTreeMap<String, i64> = BTreeMap::new();
        for c in status.conditions.iter().filter(|c| c.type_ == "Warning") {
            *counts
                .entry(c.reason.clone().unwrap_or_default())
                .or_default() += 1;
        }
        let mut shown = self.shown.lock().unwrap_or_else(|e| e.into_inner());
        let before = shown.remove(&key).unwrap_or_default();
        for gone in before.iter().filter(|r| !counts.contains_key(*r)) {
            self.warnings.remove(&warning(&key, gone));
        }
        for (reason, n) in &counts {
            self.warnings.get_or_create(&warning(&key, reason)).set(*n);
        }
        shown.insert(key, counts.into_keys().collect());
    }

    /// Exports when the `ca` (`cluster` or `clients`) CA of `Kafka` `namespace/name` expires.
    pub fn ca_expires(&self, namespace: &str, name: &str, ca: &str, unix_seconds: i64) {
        self.ca_expiry
            .get_or_create(&ca_labels(namespace, name, ca))
            .set(unix_seconds);
    }

    /// Stops exporting `Kafka` `namespace/name` (it is gone).
    pub fn forget(&self, namespace: &str, name: &str) {
        let key = KafkaLabels {
            namespace: namespace.to_owned(),
            kafka: name.to_owned(),
        };
        self.ready.remove(&key);
        for ca in ["cluster", "clients"] {
            self.ca_expiry.remove(&ca_labels(namespace, name, ca));
        }
        let mut shown = self.shown.lock().unwrap_or_else(|e| e.into_inner());
        for reason in shown.remove(&key).unwrap_or_default() {
            self.warnings.remove(&warning(&key, &reason));
        }
    }
}

fn ca_labels(namespace: &str, kafka: &str, ca: &str) -> CaLabels {
    CaLabels {
        namespace: namespace.to_owned(),
        kafka: kafka.to_owned(),
        ca: ca.to_owned(),
    }
}

fn warning(key: &KafkaLabels, reason: &str) -> WarningLabels {
    WarningLabels {
        namespace: key.namespace.clone(),
        kafka: key.kafka.clone(),
        reason: reason.to_owned(),
    }
}

impl Deref for KafkaMetrics {
    type Target = OwnerMetrics;

    fn deref(&self) -> &OwnerMetrics {
        &self.owner
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use kstretch_api::condition::Condition;

    fn condition(type_: &str, status: &str, reason: &str) -> Condition {
        Condition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            reason: Some(reason.to_owned()),
            ..Default::default()
        }
    }

    fn exported(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        text
    }

    #[test]
    fn readiness_and_warnings_follow_the_status_and_go_with_the_kafka() {
        let mut registry = Registry::default();
        let m = KafkaMetrics::register(&mut registry);
        let mut status = KafkaStatus {
            conditions: vec![
                condition("Ready", "True", "Ready"),
                condition("Warning", "True", "PoolMoveStalled"),
            ],
            ..Default::default()
        };
        m.observe("ns", "k", &status);
        let text = exported(&registry);
        assert!(
            text.contains("kafka_ready{namespace=\"ns\",kafka=\"k\"} 1"),
            "{text}"
        );
        assert!(
            text.contains(
                "kafka_warnings{namespace=\"ns\",kafka=\"k\",reason=\"PoolMoveStalled\"} 1"
            ),
            "{text}"
        );

        status.conditions = vec![condition("Ready", "False", "InvalidListener")];
        m.observe("ns", "k", &status);
        let text = exported(&registry);
        assert!(
            text.contains("kafka_ready{namespace=\"ns\",kafka=\"k\"} 0"),
            "{text}"
        );
        assert!(
            !text.contains("PoolMoveStalled"),
            "a warning gone is removed: {text}"
        );

        m.ca_expires("ns", "k", "cluster", 1_900_000_000);
        let text = exported(&registry);
        assert!(
            text.contains("kafka_ca_expiry_timestamp_seconds{namespace=\"ns\",kafka=\"k\",ca=\"cluster\"} 1900000000"),
            "{text}"
        );
        m.forget("ns", "k");
        assert!(!exported(&registry).contains("kafka=\"k\""));
    }
}
