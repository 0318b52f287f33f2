//! Kafka's own clients against a Kafka on real pods, as the tests' independent judge: topics
//! placed on given brokers, records produced and read back (plain, TLS, SCRAM), partitions
//! in sync, no acknowledged record lost.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use crate::kafka::{
    broker_ids, brokers, consume, create_topic, kafka_tool, produce, registered_by_kafkas_tool,
    run_kafka_tool,
};
use crate::live::{START_TIMEOUT, bootstrap_at, listener_at, real_node_ip};
use crate::load::{Load, missing};
use crate::stretch::{ALPHA, BETA, Stretch};
use crate::wait::{Seen, wait_for};
use kstretch_api::Kafka;
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

/// Every broker of both clusters is in the metadata either side returns, and records produced
/// through alpha's brokers are consumed, in order, through beta's.
pub async fn serves_across_clusters(k: &Kafka) {
    let in_alpha = bootstrap_at(k, &real_node_ip(ALPHA));
    let in_beta = bootstrap_at(k, &real_node_ip(BETA));
    // Every broker of both clusters is in the metadata either side returns.
    for bootstrap in [&in_alpha, &in_beta] {
        let ids = wait_for("three brokers in the metadata", START_TIMEOUT, || async {
            match broker_ids(bootstrap) {
                Ok(ids) if ids.len() == 3 => Seen::Done(ids),
                other => Seen::NotYet(format!("{bootstrap}: {other:?}")),
            }
        })
        .await;
        assert_eq!(ids, BTreeSet::from([0, 1, 2]), "{bootstrap}");
    }

    create_topic(&in_alpha, "across", 3, 3).await;
    let records: Vec<(String, String)> = (0..200)
        .map(|i| (format!("k{i:03}"), format!("v{i}")))
        .collect();
    produce(&in_alpha, "across", &records).await;
    let read = tokio::task::spawn_blocking(move || {
        consume(&in_beta, "across", 3, 200, Duration::from_secs(60))
    })
    .await
    .unwrap();
    assert_eq!(read, records, "what beta's brokers serve");
}

/// The external `nodeport` listener serves clients outside both clusters: its status names a
/// bootstrap at each cluster's real node, the metadata either returns names every broker at a
/// node address and a node port of its own (not the port inside the pod), and records
/// produced (idempotent, `acks=all`) through alpha's bootstrap are consumed through beta's.
pub async fn external_listener_serves_clients_outside(k: &Kafka, topic: &str) {
    let nodes = [real_node_ip(ALPHA), real_node_ip(BETA)];
    let in_alpha = listener_at(k, "external", &nodes[0]);
    let in_beta = listener_at(k, "external", &nodes[1]);
    // As many brokers as the internal listener shows (three, four with a moved pool).
    let inside = bootstrap_at(k, &nodes[0]);
    for bootstrap in [&in_alpha, &in_beta] {
        let brokers = wait_for("every broker at a node port", START_TIMEOUT, || async {
            let expected = broker_ids(&inside).map(|ids| ids.len()).unwrap_or_default();
            match brokers(bootstrap) {
                Ok(b) if b.len() >= 3 && b.len() == expected => Seen::Done(b),
                other => Seen::NotYet(format!("{bootstrap} ({expected} expected): {other:?}")),
            }
        })
        .await;
        for (id, host, port) in &brokers {
            assert!(
                nodes.contains(host),
                "broker {id} at {host}:{port}: {brokers:?}"
            );
            assert!(
                (30000..=32767).contains(port),
                "broker {id} at {host}:{port}"
            );
        }
    }
    create_topic(&in_alpha, topic, 3, 3).await;
    let records: Vec<(String, String)> = (0..100)
        .map(|i| (format!("k{i:03}"), format!("v{i}")))
        .collect();
    produce(&in_alpha, topic, &records).await;
    let topic = topic.to_owned();
    let read = tokio::task::spawn_blocking(move || {
        consume(&in_beta, &topic, 3, 100, Duration::from_secs(60))
    })
    .await
    .unwrap();
    assert_eq!(read, records, "what beta's external bootstrap serves");
}

/// The external TLS `nodeport` listener: Kafka's own clients outside both clusters, trusting
/// only the CA certificate of `live-cluster-ca-cert` and verifying host names (their default),
/// produce (`acks=all`) through alpha's node and consume through beta's: every broker's
/// certificate names the node address it advertises.
pub async fn external_tls_listener_is_verified_at_node_addresses(stretch: &Stretch, k: &Kafka) {
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> = stretch.api(ALPHA);
    let ca = crate::live::secret_text(
        &secrets.get("live-cluster-ca-cert").await.unwrap(),
        "ca.crt",
    );
    let dir = client_dir(stretch);
    let trusted = tls_client_config(&dir, "external-tls", &ca);
    let in_alpha = listener_at(k, "tlsext", &real_node_ip(ALPHA));
    let in_beta = listener_at(k, "tlsext", &real_node_ip(BETA));
    create_topic(&bootstrap_at(k, &real_node_ip(ALPHA)), "outside-tls", 3, 3).await;
    produced(&in_alpha, &trusted, "outside-tls", 50);
    reads(&in_beta, &trusted, "outside-tls", 50);
}

/// Creates `name` with the replicas of each partition as `replicas` lists them.
pub async fn placed_topic(bootstrap: &str, name: &str, replicas: &[&[i32]]) {
    let topic = rdkafka::admin::NewTopic::new(
        name,
        replicas.len() as i32,
        rdkafka::admin::TopicReplication::Variable(replicas),
    );
    let admin = crate::kafka::admin(bootstrap);
    let created = admin
        .create_topics([&topic], &rdkafka::admin::AdminOptions::new())
        .await
        .unwrap();
    assert!(created.iter().all(Result::is_ok), "{created:?}");
}

/// Waits until every partition of `topic` has all its replicas in its ISR.
pub async fn full_isr(bootstrap: &str, topic: &str) {
    wait_for(
        &format!("every replica of {topic} in sync"),
        START_TIMEOUT,
        || async {
            let consumer: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", bootstrap)
                .create()
                .unwrap();
            match consumer.fetch_metadata(Some(topic), Duration::from_secs(10)) {
                Ok(m) => {
                    let isr: Vec<(i32, Vec<i32>, Vec<i32>)> = m.topics()[0]
                        .partitions()
                        .iter()
                        .map(|p| (p.id(), p.replicas().to_vec(), p.isr().to_vec()))
                        .collect();
                    if !isr.is_empty() && isr.iter().all(|(_, r, isr)| isr.len() == r.len()) {
                        Seen::Done(())
                    } else {
                        Seen::NotYet(format!("(partition, replicas, ISR): {isr:?}"))
                    }
                }
                Err(e) => Seen::NotYet(e.to_string()),
            }
        },
    )
    .await
}

pub async fn wait_for_acks(load: &Load, more_than: usize) {
    wait_for(
        "the producer to get acknowledgements",
        START_TIMEOUT,
        || async {
            if load.acked() > more_than {
                Seen::Done(())
            } else {
                Seen::NotYet(format!(
                    "{} acknowledged; last failure: {:?}",
                    load.acked(),
                    load.last_failure()
                ))
            }
        },
    )
    .await
}

/// Stops the producer and checks that every send succeeded.
pub async fn all_sent(load: Load) -> crate::load::Sent {
    let sent = load.stop().await;
    assert!(
        sent.failed.is_empty(),
        "{} sends failed, e.g. {:?}",
        sent.failed.len(),
        &sent.failed[..sent.failed.len().min(5)]
    );
    sent
}

/// Stops the producer and checks every send succeeded and every acknowledged key is there.
pub async fn no_loss(load: Load, bootstrap: &str, topic: &str) {
    let sent = all_sent(load).await;
    let lost = missing(bootstrap, topic, 3, &sent, Duration::from_secs(90)).await;
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged records are missing, e.g. {:?}",
        lost.len(),
        sent.acked.len(),
        &lost[..lost.len().min(5)]
    );
    eprintln!("{} records acknowledged, none lost", sent.acked.len());
}

/// The next number of a xorshift64 sequence: bytes no compression shrinks.
pub fn noise(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Produces `total` bytes of incompressible 64 KiB records round-robin over `partitions`
/// partitions of `topic` (`acks=1`: a fill, not a test of durability).
pub fn fill(bootstrap: &str, topic: &str, partitions: i32, total: u64) {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "1")
        .set("compression.type", "none")
        .set("linger.ms", "20")
        .set("batch.size", "1048576")
        .set("queue.buffering.max.kbytes", "262144")
        .create()
        .unwrap();
    const SIZE: usize = 64 * 1024;
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut value = vec![0u8; SIZE];
    let mut sent = 0u64;
    let mut n = 0i32;
    while sent < total {
        for chunk in value.chunks_mut(8) {
            chunk.copy_from_slice(&noise(&mut state).to_le_bytes()[..chunk.len()]);
        }
        let mut record = BaseRecord::<(), [u8]>::to(topic)
            .payload(&value[..])
            .partition(n % partitions);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((e, back)) => {
                    assert!(
                        matches!(
                            e,
                            rdkafka::error::KafkaError::MessageProduction(
                                rdkafka::types::RDKafkaErrorCode::QueueFull
                            )
                        ),
                        "{e}"
                    );
                    record = back;
                    producer.poll(Duration::from_millis(50));
                }
            }
        }
        producer.poll(Duration::ZERO);
        sent += SIZE as u64;
        n += 1;
    }
    producer.flush(Duration::from_secs(300)).unwrap();
}

/// A dynamic broker option as Kafka reports it (rdkafka's admin client).
pub async fn broker_config(bootstrap: &str, broker: i32, name: &str) -> Option<String> {
    let admin = crate::kafka::admin(bootstrap);
    let described = admin
        .describe_configs(
            [&rdkafka::admin::ResourceSpecifier::Broker(broker)],
            &rdkafka::admin::AdminOptions::new(),
        )
        .await
        .unwrap();
    let resource = described.into_iter().next().unwrap().unwrap();
    resource
        .entries
        .into_iter()
        .find(|e| e.name == name && e.source == rdkafka::admin::ConfigSource::DynamicBroker)
        .and_then(|e| e.value)
}

/// A fresh directory for the test's client files (removed by the test when it passes).
pub fn client_dir(stretch: &Stretch) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kstretch-{}", stretch.ns));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Client properties for Kafka's own tools over TLS, trusting the PEM CA certificates `ca`.
pub fn tls_client_config(dir: &std::path::Path, name: &str, ca: &str) -> String {
    let ca_file = dir.join(format!("{name}-ca.crt"));
    std::fs::write(&ca_file, ca).unwrap();
    client_config(
        dir,
        name,
        &[
            ("security.protocol", "SSL".to_owned()),
            ("ssl.truststore.type", "PEM".to_owned()),
            ("ssl.truststore.location", ca_file.display().to_string()),
        ],
    )
}

/// Client properties in `dir`: `lines`, each `key=value` (values escaped as Java reads them).
pub fn client_config(dir: &std::path::Path, name: &str, lines: &[(&str, String)]) -> String {
    let text: String = lines
        .iter()
        .map(|(k, v)| format!("{k}={}\n", v.replace('\\', "\\\\").replace('\n', "\\n")))
        .collect();
    let path = dir.join(format!("{name}.properties"));
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// Kafka's console consumer reading up to `count` records of `topic` at `bootstrap` with the
/// client properties `config`: the records it printed (ProducerPerformance's payloads, upper
/// case letters) and everything it wrote, for the assertion messages.
pub fn consume_as(
    bootstrap: &str,
    config: &str,
    topic: &str,
    count: usize,
    timeout_ms: u32,
) -> (usize, String) {
    let result = kafka_tool(
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        &[
            "--bootstrap-server",
            bootstrap,
            "--consumer.config",
            config,
            "--topic",
            topic,
            "--from-beginning",
            "--max-messages",
            &count.to_string(),
            "--timeout-ms",
            &timeout_ms.to_string(),
        ],
    );
    let output = match result {
        Ok(out) | Err(out) => out,
    };
    let records = output
        .lines()
        .filter(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_uppercase()))
        .count();
    (records, output)
}

/// Asserts that the client `config` reads `count` records of `topic`.
pub fn reads(bootstrap: &str, config: &str, topic: &str, count: usize) {
    let (records, output) = consume_as(bootstrap, config, topic, count, 60_000);
    assert_eq!(
        records, count,
        "records of {topic} read with {config}: {output}"
    );
}

/// Asserts that the client `config` reads nothing of `topic`, and that Kafka said why
/// (`because`, a part of the client's error).
pub fn refused(bootstrap: &str, config: &str, topic: &str, because: &str) {
    let (records, output) = consume_as(bootstrap, config, topic, 1, 20_000);
    assert_eq!(records, 0, "{config} read {topic}: {output}");
    assert!(
        output.contains(because),
        "{config} on {topic}: no {because:?} in {output}"
    );
}

/// Produces `count` records to `topic` with Kafka's producer (acks=all) and `config`.
pub fn produced(bootstrap: &str, config: &str, topic: &str, count: usize) -> String {
    run_kafka_tool(
        "org.apache.kafka.tools.ProducerPerformance",
        &[
            "--topic",
            topic,
            "--num-records",
            &count.to_string(),
            "--record-size",
            "32",
            "--throughput",
            "-1",
            "--producer-props",
            &format!("bootstrap.servers={bootstrap}"),
            "acks=all",
            "--producer.config",
            config,
        ],
    )
}

/// The brokers `(id, host, port)` that the metadata at `bootstrap` names, as Kafka's own
/// `kafka-broker-api-versions` reads it with the client properties `config`.
pub fn brokers_as(bootstrap: &str, config: &str) -> Vec<(i32, String, u16)> {
    let out = run_kafka_tool(
        "org.apache.kafka.tools.BrokerApiVersionsCommand",
        &["--bootstrap-server", bootstrap, "--command-config", config],
    );
    // One line per broker: `<host>:<port> (id: <id> rack: ...) -> (`.
    let mut brokers: Vec<(i32, String, u16)> = out
        .lines()
        .filter_map(|line| {
            let (address, rest) = line.split_once(" (id: ")?;
            let id = rest.split_whitespace().next()?.parse().ok()?;
            let (host, port) = address.rsplit_once(':')?;
            Some((id, host.to_owned(), port.parse().ok()?))
        })
        .collect();
    brokers.sort();
    brokers
}

/// (partition, replicas, ISR) of every partition of `topic`, as rdkafka reads Kafka's metadata.
pub fn placement(bootstrap: &str, topic: &str) -> Vec<(i32, Vec<i32>, Vec<i32>)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let metadata = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    let mut out: Vec<_> = metadata.topics()[0]
        .partitions()
        .iter()
        .map(|p| (p.id(), p.replicas().to_vec(), p.isr().to_vec()))
        .collect();
    out.sort();
    out
}

/// Waits until Kafka's own tool lists exactly `brokers` as registered.
pub async fn only_registered(bootstrap: &str, brokers: &BTreeSet<i32>, what: &str) {
    wait_for(what, START_TIMEOUT, || async {
        let registered = registered_by_kafkas_tool(bootstrap);
        if registered == *brokers {
            Seen::Done(())
        } else {
            Seen::NotYet(format!("registered: {registered:?}"))
        }
    })
    .await;
}
