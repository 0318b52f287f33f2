//! The unidirectional topic operator: `KafkaTopic`s in the watched namespaces are the source of
//! truth for the topics they name. This file owns central's `KafkaTopic` watches and wires them,
//! the queue, the batch workers and the timed pass; `batch` runs one batch and `group` each
//! Kafka cluster's share of it, `decide` and `plan` hold its decisions, `sync` and `replicas`
//! its Kafka side.

pub mod batch;
pub mod clusters;
pub mod context;
pub mod decide;
mod ending;
mod group;
pub mod metrics;
mod plan;
pub mod queue;
mod replicas;
pub mod settings;
pub mod sync;
pub mod warning;
mod work;
pub mod write;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use kstretch_api::{Kafka, KafkaTopic};
use kstretch_core::topics::ResourceRef;
use kstretch_runtime::Health;
use kstretch_runtime::backoff::Backoff;
use kstretch_runtime::watch::{Change, SharedWatch, WatchMetrics, Watched};
use kube::runtime::reflector::{self, Store};
use kube::{Api, Client};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::kafka::checks::KafkaAccess;
pub use clusters::ClusterIds;
pub use context::{Context, TopicStores};
pub use metrics::TopicMetrics;
pub use queue::TopicQueue;
pub use settings::{TopicArgs, TopicSettings};

/// Central's `KafkaTopic` watches, one per namespace the topic operator watches (or one for
/// all), whose every change the topic operator reads (deletions too: they wake the resources
/// naming the same topic) and whose stores everyone else reads, and the `Kafka` store.
#[derive(Debug)]
pub struct Watches {
    kafkas: Store<Kafka>,
    topics: Vec<(Option<String>, SharedWatch<KafkaTopic>)>,
}

impl Watches {
    /// Starts the watches of `namespaces` (`None`: every namespace) into `tasks`.
    pub fn start(
        client: &Client,
        namespaces: Option<&[String]>,
        kafkas: Store<Kafka>,
        health: &Health,
        metrics: &WatchMetrics,
        tasks: &mut JoinSet<()>,
        shutdown: &CancellationToken,
    ) -> Self {
        let apis: Vec<(Option<String>, Api<KafkaTopic>)> = match namespaces {
            Some(list) => list
                .iter()
                .map(|ns| (Some(ns.clone()), Api::namespaced(client.clone(), ns)))
                .collect(),
            None => vec![(None, Api::all(client.clone()))],
        };
        let several = apis.len() > 1;
        let stores: Vec<_> = apis.iter().map(|_| reflector::store()).collect();
        let readers: Vec<Store<KafkaTopic>> = stores.iter().map(|(s, _)| s.clone()).collect();
        let mut topics = Vec::new();
        for ((ns, api), store) in apis.into_iter().zip(stores) {
            let readers = readers.clone();
            let objects = Box::new(move || readers.iter().map(Store::len).sum());
            // One readiness check per namespace when there are several.
            let check = match ns.as_ref().filter(|_| several) {
                Some(ns) => format!("watch:KafkaTopic/{ns}"),
                None => "watch:KafkaTopic".to_owned(),
            };
            let (watch, task) = SharedWatch::start_one_of(
                api,
                store,
                &check,
                objects,
                health,
                metrics,
                shutdown.clone(),
            );
            tasks.spawn(task);
            topics.push((ns, watch));
        }
        Self { kafkas, topics }
    }

    /// The stores of the `KafkaTopic` watches.
    pub fn topics(&self) -> Vec<Watched<KafkaTopic>> {
        self.topics
            .iter()
            .map(|(_, w)| w.watched().clone())
            .collect()
    }
}

/// Runs the topic operator until `shutdown`.
pub async fn run(
    client: Client,
    watches: Watches,
    settings: TopicSettings,
    kafka: KafkaAccess,
    metrics: TopicMetrics,
    health: Health,
    shutdown: CancellationToken,
) {
    let Watches { kafkas, topics } = watches;
    let queue = TopicQueue::new(settings.queue_capacity);
    // Subscribed before anything reads them: what is there now comes first.
    let events: Vec<_> = topics.iter().map(|(_, w)| w.subscribe_changes()).collect();
    let stores = topics
        .into_iter()
        .map(|(ns, watch)| (ns, watch.watched().store().clone()))
        .collect();
    let ctx = Arc::new(Context {
        events: kstretch_runtime::events::Events::new(client.clone(), "kstretch-central"),
        client,
        kafka,
        kafkas,
        topics: TopicStores { stores },
        queue: queue.clone(),
        metrics,
        cluster_ids: ClusterIds::default(),
        seen: Mutex::default(),
        retries: Backoff::new(Duration::from_secs(60)),
        settings,
    });
    tracing::info!(
        namespaces = ?ctx.settings.namespaces,
        batch_size = ctx.settings.batch_size,
        batches_in_flight = ctx.settings.batches_in_flight,
        full_reconcile = ?ctx.settings.full_reconcile,
        "topic operator starting"
    );

    let mut tasks = tokio::task::JoinSet::new();
    for changes in events {
        tasks.spawn(watch_topics(changes, ctx.clone()));
    }
    for _ in 0..ctx.settings.batches_in_flight {
        let ctx = ctx.clone();
        tasks.spawn(async move {
            // Before the Kafka cache is filled every topic would look like it names no Kafka
            // (`KafkaNotFound`, which waits for a change of the topic).
            if !kstretch_runtime::watch::ready(&ctx.kafkas).await {
                return;
            }
            while let Some(keys) = ctx
                .queue
                .next_batch(ctx.settings.batch_size, ctx.settings.linger)
                .await
            {
                batch::run(&ctx, keys).await;
            }
        });
    }
    tasks.spawn(timed_pass(ctx.clone(), health));
    shutdown.cancelled().await;
    queue.close();
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
}

/// Reads one `KafkaTopic` watch's changes into the queue. `push` waits while the queue is full,
/// which pauses reading the watch: backpressure, never an exit.
async fn watch_topics(mut changes: BoxStream<'static, Change<KafkaTopic>>, ctx: Arc<Context>) {
    while let Some(change) = changes.next().await {
        match change {
            Change::Applied(kt) => {
                if ctx.is_news(&kt)
                    && ctx.queue.push(decide::key_of(&kt)).await == queue::Pushed::Deferred
                {
                    ctx.metrics.locked();
                }
            }
            Change::Deleted(kt) => {
                let key = decide::key_of(&kt);
                ctx.forget(&key);
                // Another resource naming the same topic may have waited on this one.
                if let Some(topic) = kt.kafka_topic_name() {
                    for other in ctx
                        .topics
                        .all()
                        .iter()
                        .filter(|o| o.kafka_topic_name() == Some(topic))
                    {
                        ctx.queue.push_now(decide::key_of(other));
                    }
                }
            }
        }
    }
}

/// Reconciles every `KafkaTopic` once per `full_reconcile` interval, a slice each second so the
/// load is spread over the interval rather than one burst; it is how changes made directly in
/// Kafka are reverted. Also keeps the resource and queue gauges current.
async fn timed_pass(ctx: Arc<Context>, health: Health) {
    const TICK: Duration = Duration::from_secs(1);
    let ticks_per_pass = (ctx.settings.full_reconcile.as_secs_f64() / TICK.as_secs_f64()).max(1.0);
    for (_, store) in &ctx.topics.stores {
        if !kstretch_runtime::watch::ready(store).await {
            return;
        }
    }
    health.set_ready("topics", true, "KafkaTopic caches filled");
    let mut keys: Vec<ResourceRef> = Vec::new();
    let mut cursor = 0usize;
    let mut interval = tokio::time::interval(TICK);
    // The watch's initial events just reconciled everything: the first pass starts one
    // interval later, and each pass starts one interval after the previous one.
    let mut next_pass = tokio::time::Instant::now() + ctx.settings.full_reconcile;
    loop {
        interval.tick().await;
        let all = ctx.topics.all();
        let paused = all
            .iter()
            .filter(|t| crate::status::is_paused(t.as_ref()))
            .count();
        ctx.metrics.resources(all.len(), paused);
        ctx.metrics
            .queue(ctx.queue.waiting(), ctx.queue.take_max_waiting());
        if cursor >= keys.len() {
            if tokio::time::Instant::now() < next_pass {
                continue;
            }
            next_pass += ctx.settings.full_reconcile;
            keys = all.iter().map(|t| decide::key_of(t)).collect();
            keys.sort();
            cursor = 0;
        }
        // Rounded up, so every key is covered within the interval.
        let slice = ((keys.len() as f64) / ticks_per_pass).ceil() as usize;
        let end = (cursor + slice.max(1)).min(keys.len());
        for key in &keys[cursor..end] {
            ctx.queue.push(key.clone()).await;
        }
        cursor = end;
    }
}
