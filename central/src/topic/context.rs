//! What every batch of the topic operator shares: the clients and stores, the settings, and
//! the per-resource bookkeeping (what the last batch saw, the retry backoff).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kstretch_api::{Kafka, KafkaTopic, names};
use kstretch_core::topics::ResourceRef;
use kstretch_runtime::backoff::Backoff;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};

use super::clusters::ClusterIds;
use super::decide;
use super::metrics::TopicMetrics;
use super::queue::TopicQueue;
use super::settings::TopicSettings;
use crate::kafka::checks::KafkaAccess;

/// Everything a batch needs; shared by the workers.
pub struct Context {
    pub client: Client,
    pub settings: TopicSettings,
    pub kafka: KafkaAccess,
    pub kafkas: Store<Kafka>,
    pub topics: TopicStores,
    pub queue: TopicQueue,
    pub metrics: TopicMetrics,
    pub events: kstretch_runtime::events::Events,
    pub cluster_ids: ClusterIds,
    /// Per resource, what the last batch saw (see [`fingerprint`]).
    pub(super) seen: Mutex<HashMap<ResourceRef, u64>>,
    /// Per resource, consecutive transient failures: 1 s doubling to 60 s.
    pub(super) retries: Backoff<ResourceRef>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// Records that a batch is reconciling `kt` as it is now, so the events of the batch's own
    /// writes (finalizer, status) do not queue it again.
    pub(super) fn seen(&self, kt: &KafkaTopic) {
        lock(&self.seen).insert(decide::key_of(kt), fingerprint(kt));
    }

    pub(super) fn is_news(&self, kt: &KafkaTopic) -> bool {
        lock(&self.seen).get(&decide::key_of(kt)) != Some(&fingerprint(kt))
    }

    pub(super) fn forget(&self, key: &ResourceRef) {
        lock(&self.seen).remove(key);
        self.retries.succeeded(key);
    }

    pub(super) fn forget_attempts(&self, key: &ResourceRef) {
        self.retries.succeeded(key);
    }

    pub(super) fn backoff(&self, key: &ResourceRef) -> Duration {
        self.retries.failed(key.clone())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What makes a watch event worth a reconciliation: the resource itself (UID), its spec
/// (generation), deletion, and the labels and annotations that change what the operator does.
/// Status and finalizer changes, which the operator makes itself, are left out.
fn fingerprint(kt: &KafkaTopic) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    kt.uid().hash(&mut h);
    kt.metadata.generation.hash(&mut h);
    kt.metadata.deletion_timestamp.is_some().hash(&mut h);
    kt.labels().get(names::CLUSTER).hash(&mut h);
    for a in [names::PAUSE_RECONCILIATION, names::MANAGED] {
        kt.annotations().get(a).hash(&mut h);
    }
    h.finish()
}

/// The `KafkaTopic` caches, one per watched namespace (or one for all).
#[derive(Clone, Debug)]
pub struct TopicStores {
    pub(super) stores: Vec<(Option<String>, Store<KafkaTopic>)>,
}

impl TopicStores {
    pub fn get(&self, key: &ResourceRef) -> Option<Arc<KafkaTopic>> {
        let object = ObjectRef::new(&key.name).within(&key.namespace);
        self.stores
            .iter()
            .filter(|(ns, _)| ns.as_ref().is_none_or(|ns| *ns == key.namespace))
            .find_map(|(_, s)| s.get(&object))
    }

    pub fn all(&self) -> Vec<Arc<KafkaTopic>> {
        self.stores.iter().flat_map(|(_, s)| s.state()).collect()
    }
}
