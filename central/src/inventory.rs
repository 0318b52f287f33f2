//! Central's in-memory view of the resources it owns, one watch per kind.

use kstretch_api::{Kafka, KafkaConnector, KafkaNodePool, KafkaTopic};
use kstretch_runtime::Health;
use kstretch_runtime::watch::{self, WatchMetrics, Watched};
use kube::{Api, Client};
use tokio_util::sync::CancellationToken;

/// Number of objects of one kind and how many are ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindCount {
    pub kind: String,
    pub total: u64,
    pub ready: u64,
    pub synced: bool,
}

/// The watched kinds, in the order they are reported.
#[derive(Debug, Clone)]
pub struct Inventory {
    kafkas: Watched<Kafka>,
    node_pools: Watched<KafkaNodePool>,
    topics: Watched<KafkaTopic>,
    connectors: Watched<KafkaConnector>,
}

impl Inventory {
    /// Starts one watch per kind, in `namespace` or in all namespaces, and returns the
    /// inventory with the tasks that feed it (the caller spawns them).
    pub fn start(
        client: &Client,
        namespace: Option<&str>,
        health: &Health,
        metrics: &WatchMetrics,
        shutdown: &CancellationToken,
    ) -> (Self, Vec<futures::future::BoxFuture<'static, ()>>) {
        let mut tasks: Vec<futures::future::BoxFuture<'static, ()>> = Vec::new();
        macro_rules! start {
            ($kind:ty) => {{
                let api: Api<$kind> = match namespace {
                    Some(ns) => Api::namespaced(client.clone(), ns),
                    None => Api::all(client.clone()),
                };
                let (watched, task) =
                    watch::watch(api, health.clone(), metrics.clone(), shutdown.clone());
                tasks.push(Box::pin(task));
                watched
            }};
        }
        let inventory = Self {
            kafkas: start!(Kafka),
            node_pools: start!(KafkaNodePool),
            topics: start!(KafkaTopic),
            connectors: start!(KafkaConnector),
        };
        (inventory, tasks)
    }

    /// The watched `Kafka`s (the user operator reads them from here).
    pub fn kafkas(&self) -> &Watched<Kafka> {
        &self.kafkas
    }

    /// The watched `KafkaNodePool`s (the Kafka reconciler reads pools from here).
    pub fn node_pools(&self) -> &Watched<KafkaNodePool> {
        &self.node_pools
    }

    pub fn counts(&self) -> Vec<KindCount> {
        vec![
            count(&self.kafkas, |k| {
                k.status.as_ref().map(|s| s.conditions.as_slice())
            }),
            count(&self.node_pools, |p| {
                p.status.as_ref().map(|s| s.conditions.as_slice())
            }),
            count(&self.topics, |t| {
                t.status.as_ref().map(|s| s.conditions.as_slice())
            }),
            count(&self.connectors, |c| {
                c.status.as_ref().map(|s| s.conditions.as_slice())
            }),
        ]
    }
}

fn count<K>(
    watched: &Watched<K>,
    conditions: impl Fn(&K) -> Option<&[kstretch_api::Condition]>,
) -> KindCount
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    let objects = watched.objects();
    let ready = objects
        .iter()
        .filter(|o| conditions(o).is_some_and(|c| kstretch_api::condition::is_true(c, "Ready")))
        .count();
    KindCount {
        kind: watched.kind().to_owned(),
        total: objects.len() as u64,
        ready: ready as u64,
        synced: watched.synced(),
    }
}
