//! Prometheus metrics of the `Kafka` reconciler: those of every owning controller
//! ([`OwnerMetrics`], prefix `kafka`), and the nodes it unregistered from KRaft.

use std::ops::Deref;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;

use crate::metrics::OwnerMetrics;

/// Cheap to clone: every handle shares the same values.
#[derive(Debug, Clone, Default)]
pub struct KafkaMetrics {
    owner: OwnerMetrics,
    unregistrations: Counter,
}

impl KafkaMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self {
            owner: OwnerMetrics::register(registry, "kafka", "Kafka", "Pods"),
            ..Self::default()
        };
        registry.register(
            "kafka_node_unregistrations",
            "Removed nodes unregistered from KRaft",
            m.unregistrations.clone(),
        );
        m
    }

    pub fn unregistered(&self) {
        self.unregistrations.inc();
    }
}

impl Deref for KafkaMetrics {
    type Target = OwnerMetrics;

    fn deref(&self) -> &OwnerMetrics {
        &self.owner
    }
}
