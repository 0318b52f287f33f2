//! Data safety measured: a steady idempotent producer with `acks=all` that keeps every key Kafka
//! acknowledged (and every send that failed, and the longest wait for an acknowledgement), a
//! consumer group member reading all along, and the check that a consumer reading afterwards
//! finds each acknowledged key.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use rdkafka::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};

/// What the producer was told.
#[derive(Debug, Default)]
pub struct Sent {
    pub acked: BTreeSet<String>,
    /// `key: error` of every send Kafka did not acknowledge.
    pub failed: Vec<String>,
    /// The longest time a send waited for its acknowledgement (the longest produce stall).
    pub longest_wait: Duration,
}

/// A producer sending one record every `interval` until stopped.
#[derive(Debug)]
pub struct Load {
    stop: Arc<AtomicBool>,
    acked: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<Sent>,
}

impl Load {
    /// Starts sending keys `r00000000`, `r00000001`... to `topic` through `bootstrap`. Each
    /// send may take up to three minutes (the producer retries through leader changes), so a
    /// failure means Kafka refused, not that a roll was slow.
    pub fn start(bootstrap: &str, topic: &str, interval: Duration) -> Load {
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("acks", "all")
            .set("enable.idempotence", "true")
            .set("message.timeout.ms", "180000")
            .set("linger.ms", "5")
            .create()
            .unwrap_or_else(|e| panic!("cannot create a producer for {bootstrap}: {e}"));
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(AtomicUsize::new(0));
        let topic = topic.to_owned();
        let task = tokio::spawn(run(producer, topic, interval, stop.clone(), acked.clone()));
        Load { stop, acked, task }
    }

    /// How many records Kafka acknowledged so far.
    pub fn acked(&self) -> usize {
        self.acked.load(Ordering::Relaxed)
    }

    /// Stops sending, waits for every outstanding send and returns what happened.
    pub async fn stop(self) -> Sent {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.expect("the producer task panicked")
    }
}

async fn run(
    producer: FutureProducer,
    topic: String,
    interval: Duration,
    stop: Arc<AtomicBool>,
    acked: Arc<AtomicUsize>,
) -> Sent {
    let mut sent = Sent::default();
    let mut pending = FuturesUnordered::new();
    let mut tick = tokio::time::interval(interval);
    let mut n = 0u64;
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        if stopping && pending.is_empty() {
            return sent;
        }
        tokio::select! {
            _ = tick.tick(), if !stopping => {
                let key = format!("r{n:08}");
                n += 1;
                let producer = producer.clone();
                let topic = topic.clone();
                pending.push(async move {
                    let sent_at = std::time::Instant::now();
                    let record = FutureRecord::to(&topic).key(&key).payload(&key);
                    let result = producer.send(record, Duration::from_secs(0)).await;
                    (key, sent_at.elapsed(), result.map(|_| ()).map_err(|(e, _)| e.to_string()))
                });
            }
            Some((key, waited, result)) = pending.next(), if !pending.is_empty() => match result {
                Ok(()) => {
                    sent.longest_wait = sent.longest_wait.max(waited);
                    sent.acked.insert(key);
                    acked.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => sent.failed.push(format!("{key}: {e}")),
            },
            // Stop was asked between checks: go round again.
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
}

/// The acknowledged keys a consumer of `topic` (partitions `0..partitions`, from the
/// beginning) does not find within `timeout`.
pub async fn missing(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    sent: &Sent,
    timeout: Duration,
) -> Vec<String> {
    let (bootstrap, topic, count) = (bootstrap.to_owned(), topic.to_owned(), sent.acked.len());
    let read = tokio::task::spawn_blocking(move || {
        crate::kafka::consume(&bootstrap, &topic, partitions, count, timeout)
    })
    .await
    .expect("the consumer panicked");
    let found: BTreeSet<String> = read.into_iter().map(|(key, _)| key).collect();
    sent.acked.difference(&found).cloned().collect()
}

/// A consumer group member reading `topic` from the beginning the whole time, as an
/// application would, committing as it goes.
#[derive(Debug)]
pub struct Reader {
    stop: Arc<AtomicBool>,
    keys: Arc<std::sync::Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Reader {
    pub fn start(bootstrap: &str, topic: &str, group: &str) -> Reader {
        use rdkafka::consumer::{Consumer, StreamConsumer};
        use rdkafka::message::Message;
        let consumer: StreamConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", group)
            .set("auto.offset.reset", "earliest")
            .set("enable.auto.commit", "true")
            .create()
            .unwrap_or_else(|e| panic!("cannot create a consumer for {bootstrap}: {e}"));
        consumer
            .subscribe(&[topic])
            .unwrap_or_else(|e| panic!("cannot subscribe to {topic}: {e}"));
        let stop = Arc::new(AtomicBool::new(false));
        let keys = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (stopping, read) = (stop.clone(), keys.clone());
        let task = tokio::spawn(async move {
            while !stopping.load(Ordering::Relaxed) {
                match tokio::time::timeout(Duration::from_millis(500), consumer.recv()).await {
                    Ok(Ok(message)) => read.lock().unwrap().push(
                        String::from_utf8_lossy(message.key().unwrap_or_default()).into_owned(),
                    ),
                    Ok(Err(e)) => eprintln!("the group consumer: {e}"),
                    Err(_) => {}
                }
            }
        });
        Reader { stop, keys, task }
    }

    /// Reads on until it has seen every key of `sent.acked` (or `timeout` passes), then stops
    /// and returns the acknowledged keys it never saw and the keys it saw more than once.
    pub async fn finish(self, sent: &Sent, timeout: Duration) -> (Vec<String>, Vec<String>) {
        let deadline = tokio::time::Instant::now() + timeout;
        let missing = |keys: &[String]| -> Vec<String> {
            let seen: BTreeSet<&String> = keys.iter().collect();
            sent.acked
                .iter()
                .filter(|k| !seen.contains(k))
                .cloned()
                .collect()
        };
        while tokio::time::Instant::now() < deadline
            && !missing(&self.keys.lock().unwrap()).is_empty()
        {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.expect("the group consumer panicked");
        let keys = self.keys.lock().unwrap().clone();
        let mut seen = BTreeSet::new();
        let twice = keys.iter().filter(|k| !seen.insert(*k)).cloned().collect();
        (missing(&keys), twice)
    }
}
