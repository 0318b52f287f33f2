//! Data safety measured: a steady idempotent producer with `acks=all` that keeps every key Kafka
//! acknowledged (and every send that failed, and the longest wait for an acknowledgement), a
//! consumer group member reading all along, and the check that a consumer reading afterwards
//! finds each acknowledged key.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

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
    /// Sends given up on at a [`Load::stop_within`] deadline, neither acknowledged nor failed
    /// (nothing is claimed about them).
    pub unresolved: usize,
}

/// A producer sending one record every `interval` until stopped.
#[derive(Debug)]
pub struct Load {
    /// Set on stopping: when the producer gives up on the sends still waiting.
    stop: Arc<std::sync::Mutex<Option<Instant>>>,
    acked: Arc<AtomicUsize>,
    last_failure: Arc<std::sync::Mutex<Option<String>>>,
    task: tokio::task::JoinHandle<Sent>,
}

impl Load {
    /// Starts sending keys `r00000000`, `r00000001`... to `topic` through `bootstrap`. Each
    /// send may take up to three minutes (the producer retries through leader changes), so a
    /// failure means Kafka refused, not that a roll was slow.
    pub fn start(bootstrap: &str, topic: &str, interval: Duration) -> Load {
        Load::start_keyed(bootstrap, topic, interval, "r")
    }

    /// [`Load::start`] with keys `<prefix>00000000`...: a second producer on the same topic.
    pub fn start_keyed(bootstrap: &str, topic: &str, interval: Duration, prefix: &str) -> Load {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", bootstrap)
            .set("acks", "all")
            .set("enable.idempotence", "true")
            .set("message.timeout.ms", "180000")
            .set("linger.ms", "5");
        // librdkafka's own account of the producer (e.g. `eos,broker`), to stderr.
        if let Ok(debug) = std::env::var("KSTRETCH_RDKAFKA_DEBUG") {
            config
                .set("debug", debug)
                .set_log_level(rdkafka::config::RDKafkaLogLevel::Debug);
        }
        let producer: FutureProducer<LogToStderr> = config
            .create_with_context(LogToStderr)
            .unwrap_or_else(|e| panic!("cannot create a producer for {bootstrap}: {e}"));
        let stop = Arc::new(std::sync::Mutex::new(None));
        let acked = Arc::new(AtomicUsize::new(0));
        let last_failure = Arc::new(std::sync::Mutex::new(None));
        let topic = topic.to_owned();
        let task = tokio::spawn(run(
            producer,
            topic,
            prefix.to_owned(),
            interval,
            stop.clone(),
            acked.clone(),
            last_failure.clone(),
        ));
        Load {
            stop,
            acked,
            last_failure,
            task,
        }
    }

    /// How many records Kafka acknowledged so far.
    pub fn acked(&self) -> usize {
        self.acked.load(Ordering::Relaxed)
    }

    /// The latest send Kafka did not acknowledge (`key: error`), for what a wait shows.
    pub fn last_failure(&self) -> Option<String> {
        self.last_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Stops sending, waits for every outstanding send and returns what happened.
    pub async fn stop(self) -> Sent {
        // Longer than any send may wait (`message.timeout.ms`).
        self.stop_within(Duration::from_secs(200)).await
    }

    /// Stops sending and waits for the outstanding sends until `grace` has passed; those
    /// still waiting then are counted as unresolved. For a producer that may stall for
    /// minutes after an outage whose end the test does not need to watch.
    pub async fn stop_within(self, grace: Duration) -> Sent {
        *self.stop.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now() + grace);
        self.task.await.expect("the producer task panicked")
    }
}

/// Prints what librdkafka logs, so a test's output shows it.
#[derive(Debug, Clone, Copy)]
pub struct LogToStderr;

impl rdkafka::ClientContext for LogToStderr {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, log_message: &str) {
        eprintln!("librdkafka {level:?} {fac}: {log_message}");
    }
}

async fn run(
    producer: FutureProducer<LogToStderr>,
    topic: String,
    prefix: String,
    interval: Duration,
    stop: Arc<std::sync::Mutex<Option<Instant>>>,
    acked: Arc<AtomicUsize>,
    last_failure: Arc<std::sync::Mutex<Option<String>>>,
) -> Sent {
    let mut sent = Sent::default();
    let mut pending = FuturesUnordered::new();
    let mut tick = tokio::time::interval(interval);
    let mut n = 0u64;
    loop {
        let give_up_at = *stop.lock().unwrap_or_else(|e| e.into_inner());
        let stopping = give_up_at.is_some();
        if stopping && pending.is_empty() {
            return sent;
        }
        if give_up_at.is_some_and(|at| Instant::now() >= at) {
            sent.unresolved = pending.len();
            return sent;
        }
        tokio::select! {
            _ = tick.tick(), if !stopping => {
                let key = format!("{prefix}{n:08}");
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
                Err(e) => {
                    let failure = format!("{key}: {e}");
                    *last_failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(failure.clone());
                    sent.failed.push(failure);
                }
            },
            // Stop was asked between checks: go round again.
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
}

/// The acknowledged keys a consumer of `topic` (partitions `0..partitions`, from the
/// beginning) does not find within `timeout`. It reads until it has found every one: the log
/// may also hold records whose sends failed (timed out after Kafka had written them), so a
/// count of records says nothing.
pub async fn missing(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    sent: &Sent,
    timeout: Duration,
) -> Vec<String> {
    let (bootstrap, topic) = (bootstrap.to_owned(), topic.to_owned());
    let acked = sent.acked.clone();
    let read = tokio::task::spawn_blocking(move || {
        let mut found = BTreeSet::new();
        let mut seen = 0;
        crate::kafka::consume_until(&bootstrap, &topic, partitions, timeout, |records| {
            for (key, _) in &records[seen..] {
                if acked.contains(key) {
                    found.insert(key.clone());
                }
            }
            seen = records.len();
            found.len() == acked.len()
        })
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
