//! Central's in-memory view of the resources it owns, for `kstretch status`: counts read from
//! the stores of central's watches.

use kstretch_api::{Kafka, KafkaConnector, KafkaNodePool, KafkaTopic};
use kstretch_runtime::watch::Watched;

/// Number of objects of one kind and how many are ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindCount {
    pub kind: String,
    pub total: u64,
    pub ready: u64,
    pub synced: bool,
}

/// The watched kinds, in the order they are reported: the stores of central's one watch per
/// kind (see `crate::wiring`), read, not watched again.
#[derive(Debug, Clone)]
pub struct Inventory {
    kafkas: Watched<Kafka>,
    node_pools: Watched<KafkaNodePool>,
    /// One per namespace the topic operator watches (or one for all).
    topics: Vec<Watched<KafkaTopic>>,
    connectors: Watched<KafkaConnector>,
}

impl Inventory {
    pub fn new(
        kafkas: Watched<Kafka>,
        node_pools: Watched<KafkaNodePool>,
        topics: Vec<Watched<KafkaTopic>>,
        connectors: Watched<KafkaConnector>,
    ) -> Self {
        Self {
            kafkas,
            node_pools,
            topics,
            connectors,
        }
    }

    pub fn counts(&self) -> Vec<KindCount> {
        vec![
            count(std::slice::from_ref(&self.kafkas), |k| {
                k.status.as_ref().map(|s| s.conditions.as_slice())
            }),
            count(std::slice::from_ref(&self.node_pools), |p| {
                p.status.as_ref().map(|s| s.conditions.as_slice())
            }),
            count(&self.topics, |t| {
                t.status.as_ref().map(|s| s.conditions.as_slice())
            }),
            count(std::slice::from_ref(&self.connectors), |c| {
                c.status.as_ref().map(|s| s.conditions.as_slice())
            }),
        ]
    }
}

/// The count of a kind over its stores.
fn count<K>(
    watched: &[Watched<K>],
    conditions: impl Fn(&K) -> Option<&[kstretch_api::Condition]>,
) -> KindCount
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    let objects: Vec<_> = watched.iter().flat_map(Watched::objects).collect();
    let ready = objects
        .iter()
        .filter(|o| conditions(o).is_some_and(|c| kstretch_api::condition::is_true(c, "Ready")))
        .count();
    KindCount {
        kind: K::kind(&()).into_owned(),
        total: objects.len() as u64,
        ready: ready as u64,
        synced: watched.iter().all(Watched::synced),
    }
}
