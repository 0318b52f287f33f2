//! Prometheus metrics of the agent's link to central.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The link's metrics; cheap to clone (every handle shares the same values).
#[derive(Debug, Clone, Default)]
pub struct LinkMetrics {
    connected: Gauge,
    connection_attempts: Counter,
    snapshots_received: Counter,
    objects_applied: Counter,
    apply_errors: Counter,
    objects_deleted: Counter,
    applied_generation: Gauge,
    protocol_errors: Counter,
    unclaimed_objects: Family<Vec<(String, String)>, Gauge>,
}

impl LinkMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        kstretch_runtime::register_metrics!(registry, {
            "link_connected", "1 while the agent has a stream to central, else 0 (the agent works on without it)" => m.connected,
            "link_connection_attempts", "Attempts to open a stream to central" => m.connection_attempts,
            "link_snapshots_received", "Desired-state snapshots received from central" => m.snapshots_received,
            "link_objects_applied", "Objects applied with server-side apply" => m.objects_applied,
            "link_apply_errors", "Objects that could not be applied or deleted" => m.apply_errors,
            "link_objects_deleted", "Objects deleted because a snapshot no longer listed them" => m.objects_deleted,
            "link_applied_generation", "Generation of the last snapshot applied" => m.applied_generation,
            "link_protocol_errors", "Messages exchanged with central that broke the link's rules (either side)" => m.protocol_errors,
            "link_unclaimed_objects", "Objects kept for an owner (kind, namespace, name) that central neither reconciles nor declared deleted" => m.unclaimed_objects,
        });
        m
    }

    /// Replaces the unclaimed-object counts: `(kind, namespace, name) -> objects`.
    pub fn set_unclaimed(
        &self,
        counts: &std::collections::BTreeMap<(String, String, String), u32>,
    ) {
        self.unclaimed_objects.clear();
        for ((kind, namespace, name), n) in counts {
            self.unclaimed_objects
                .get_or_create(&vec![
                    ("kind".to_owned(), kind.clone()),
                    ("namespace".to_owned(), namespace.clone()),
                    ("name".to_owned(), name.clone()),
                ])
                .set(i64::from(*n));
        }
    }

    pub fn set_connected(&self, connected: bool) {
        self.connected.set(i64::from(connected));
    }

    pub fn attempt(&self) {
        self.connection_attempts.inc();
    }

    pub fn snapshot_received(&self) {
        self.snapshots_received.inc();
    }

    pub fn protocol_error(&self) {
        self.protocol_errors.inc();
    }

    pub fn applied(&self, applied: u64, errors: u64, deleted: u64, generation: u64) {
        self.objects_applied.inc_by(applied);
        self.apply_errors.inc_by(errors);
        self.objects_deleted.inc_by(deleted);
        self.applied_generation
            .set(i64::try_from(generation).unwrap_or(i64::MAX));
    }
}
