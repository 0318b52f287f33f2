//! Reading and changing the real Kafka through `rdkafka`, independently of kstretch's own
//! Kafka client.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};

/// An admin client on `bootstrap`.
pub fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap_or_else(|e| panic!("cannot create a Kafka admin client for {bootstrap}: {e}"))
}

/// Creates a topic and fails the test if Kafka refuses.
pub async fn create_topic(bootstrap: &str, name: &str, partitions: i32, replicas: i32) {
    let admin = admin(bootstrap);
    let topic = NewTopic::new(name, partitions, TopicReplication::Fixed(replicas));
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let results = admin
        .create_topics([&topic], &options)
        .await
        .unwrap_or_else(|e| panic!("CreateTopics {name} failed: {e}"));
    for r in results {
        if let Err((topic, code)) = r {
            panic!("Kafka refused to create {topic}: {code}");
        }
    }
}

/// Topic names in the metadata that the brokers at `bootstrap` return. With a single broker's
/// address this is what that broker itself knows.
pub fn topic_names(bootstrap: &str) -> Result<BTreeSet<String>, rdkafka::error::KafkaError> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        // A fresh client knows only the bootstrap broker, so the one metadata request below
        // goes to it; no background refresh may race it to another broker.
        .set("topic.metadata.refresh.interval.ms", "-1")
        .create()?;
    let metadata = consumer.fetch_metadata(None, Duration::from_secs(10))?;
    Ok(metadata
        .topics()
        .iter()
        .filter(|t| t.error().is_none())
        .map(|t| t.name().to_owned())
        .collect())
}

/// The names of the groups (consumer groups, Connect groups) Kafka knows at `bootstrap`.
pub fn group_names(bootstrap: &str) -> Result<BTreeSet<String>, rdkafka::error::KafkaError> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    let groups = consumer.fetch_group_list(None, Duration::from_secs(10))?;
    Ok(groups
        .groups()
        .iter()
        .map(|g| g.name().to_owned())
        .collect())
}

/// Broker IDs in the cluster metadata returned by `bootstrap`.
pub fn broker_ids(bootstrap: &str) -> Result<BTreeSet<i32>, rdkafka::error::KafkaError> {
    Ok(brokers(bootstrap)?
        .into_iter()
        .map(|(id, _, _)| id)
        .collect())
}

/// Every broker (ID, host, port) in the cluster metadata returned by `bootstrap`.
pub fn brokers(bootstrap: &str) -> Result<Vec<(i32, String, i32)>, rdkafka::error::KafkaError> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    let metadata = consumer.fetch_metadata(None, Duration::from_secs(10))?;
    Ok(metadata
        .brokers()
        .iter()
        .map(|b| (b.id(), b.host().to_owned(), b.port()))
        .collect())
}

/// Per (topic, partition): its replicas (preferred leader first) and its leader.
pub type Placement = BTreeMap<(String, i32), (Vec<i32>, i32)>;

/// Every partition's replicas and leader, as Kafka's metadata reports them to rdkafka.
pub fn placement(bootstrap: &str) -> Result<Placement, rdkafka::error::KafkaError> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    let metadata = consumer.fetch_metadata(None, Duration::from_secs(10))?;
    Ok(metadata
        .topics()
        .iter()
        .flat_map(|t| {
            t.partitions().iter().map(|p| {
                (
                    (t.name().to_owned(), p.id()),
                    (p.replicas().to_vec(), p.leader()),
                )
            })
        })
        .collect())
}

/// Produces `records` (key, value) to `topic` with `acks=all` and fails the test unless every
/// one is acknowledged.
pub async fn produce(bootstrap: &str, topic: &str, records: &[(String, String)]) {
    produce_with_acks(bootstrap, topic, records, "all").await;
}

/// [`produce`] with `acks` (`all` makes the producer idempotent; `1` serves a topic with fewer
/// replicas than `min.insync.replicas`, which refuses `acks=all`).
pub async fn produce_with_acks(
    bootstrap: &str,
    topic: &str,
    records: &[(String, String)],
    acks: &str,
) {
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", acks)
        .set("enable.idempotence", (acks == "all").to_string())
        .set("message.timeout.ms", "60000")
        .create()
        .unwrap_or_else(|e| panic!("cannot create a Kafka producer for {bootstrap}: {e}"));
    let deliveries: Vec<_> = records
        .iter()
        .map(|(key, value)| {
            producer.send(
                FutureRecord::to(topic).key(key).payload(value),
                Duration::from_secs(30),
            )
        })
        .collect();
    for (delivery, (key, _)) in futures::future::join_all(deliveries)
        .await
        .into_iter()
        .zip(records)
    {
        if let Err((e, _)) = delivery {
            panic!("producing {key} to {topic} failed: {e}");
        }
    }
}

/// The end offset (high watermark) of `partition` of `topic`: how many records it ever held.
pub fn end_offset(bootstrap: &str, topic: &str, partition: i32) -> i64 {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap_or_else(|e| panic!("cannot create a Kafka consumer for {bootstrap}: {e}"));
    consumer
        .fetch_watermarks(topic, partition, Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("cannot read the offsets of {topic}-{partition}: {e}"))
        .1
}

/// Reads every record of `topic`'s partitions `0..partitions` from the beginning until `count`
/// have arrived (or `timeout` passes), without a consumer group, and returns them as (key,
/// value) sorted by key.
pub fn consume(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    count: usize,
    timeout: Duration,
) -> Vec<(String, String)> {
    consume_until(bootstrap, topic, partitions, timeout, |records| {
        records.len() >= count
    })
}

/// Reads `topic` (partitions `0..partitions`, from the beginning) until `enough` says so of
/// what was read, or `timeout`; the records as (key, value), sorted.
pub fn consume_until(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    timeout: Duration,
    mut enough: impl FnMut(&[(String, String)]) -> bool,
) -> Vec<(String, String)> {
    use rdkafka::message::Message;
    use rdkafka::{Offset, TopicPartitionList};
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "kstretch-tests-unused")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap_or_else(|e| panic!("cannot create a Kafka consumer for {bootstrap}: {e}"));
    let mut assignment = TopicPartitionList::new();
    for partition in 0..partitions {
        assignment
            .add_partition_offset(topic, partition, Offset::Beginning)
            .expect("partition offset");
    }
    consumer.assign(&assignment).expect("assign partitions");
    let deadline = std::time::Instant::now() + timeout;
    let mut records = Vec::new();
    while !enough(&records) && std::time::Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(500)) {
            Some(Ok(message)) => records.push((
                String::from_utf8_lossy(message.key().unwrap_or_default()).into_owned(),
                String::from_utf8_lossy(message.payload().unwrap_or_default()).into_owned(),
            )),
            Some(Err(e)) => eprintln!("consuming {topic}: {e}"),
            None => {}
        }
    }
    records.sort();
    records
}

/// Runs one of Kafka's own tools (`class`, e.g. `org.apache.kafka.tools.ClusterTool`) with the
/// environment's jars and returns its standard output; fails the test if the tool fails.
pub fn run_kafka_tool(class: &str, args: &[&str]) -> String {
    kafka_tool(class, args).unwrap_or_else(|e| panic!("{class} {args:?} failed: {e}"))
}

/// Runs one of Kafka's own command-line tools on the host: its standard output, or, when it
/// fails, its standard output and error.
pub fn kafka_tool(class: &str, args: &[&str]) -> Result<String, String> {
    kafka_tool_of(&crate::env::TestEnv::get().kafka_libs(), class, args)
}

/// [`kafka_tool`] of the Kafka whose jars are in `libs`.
pub fn kafka_tool_of(libs: &Path, class: &str, args: &[&str]) -> Result<String, String> {
    let output = std::process::Command::new("java")
        .args(["-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp"])
        .arg(format!("{}/*", libs.display()))
        .arg(class)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {class}: {e}"));
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    if output.status.success() {
        Ok(text)
    } else {
        Err(format!(
            "{text}\n{}",
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// Kafka's own `kafka-features describe`: the finalized `kraft.version`.
pub fn kraft_version_by_kafkas_tool(bootstrap: &str) -> String {
    finalized_by_kafkas_tool(
        &crate::env::TestEnv::get().kafka_libs(),
        bootstrap,
        "kraft.version",
    )
}

/// Kafka's own `kafka-features describe` from the jars in `libs` (a tool names only the
/// metadata versions its own release knows): the finalized level of `feature`.
pub fn finalized_by_kafkas_tool(libs: &Path, bootstrap: &str, feature: &str) -> String {
    let args = ["--bootstrap-server", bootstrap, "describe"];
    let text = kafka_tool_of(libs, "org.apache.kafka.tools.FeatureCommand", &args)
        .unwrap_or_else(|e| panic!("FeatureCommand {args:?} failed: {e}"));
    let line = text
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(feature))
        .unwrap_or_else(|| panic!("no {feature} in:\n{text}"));
    line.split("FinalizedVersionLevel:")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no finalized level in {line:?}"))
        .to_owned()
}

/// Kafka's own `kafka-metadata-quorum describe --replication`: (node ID, directory ID,
/// status) of every replica of the metadata log.
pub fn quorum_by_kafkas_tool(bootstrap: &str) -> BTreeSet<(i32, String, String)> {
    parse_quorum(&run_kafka_tool(
        "org.apache.kafka.tools.MetadataQuorumCommand",
        &["--bootstrap-server", bootstrap, "describe", "--replication"],
    ))
}

/// The replicas of `kafka-metadata-quorum describe --replication`'s output `text`.
pub fn parse_quorum(text: &str) -> BTreeSet<(i32, String, String)> {
    // Header, then "NodeId DirectoryId LogEndOffset Lag LastFetch LastCaughtUp Status".
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            Some((
                cols.first()?.parse().ok()?,
                (*cols.get(1)?).to_owned(),
                (*cols.last()?).to_owned(),
            ))
        })
        .collect()
}

/// Broker IDs Kafka's own `kafka-cluster list-endpoints --include-fenced-brokers` reports
/// (not kstretch's client, not rdkafka, which lists live brokers only).
pub fn registered_by_kafkas_tool(bootstrap: &str) -> BTreeSet<i32> {
    let text = run_kafka_tool(
        "org.apache.kafka.tools.ClusterTool",
        &[
            "list-endpoints",
            "--bootstrap-server",
            bootstrap,
            "--include-fenced-brokers",
        ],
    );
    // Lines: "ID HOST PORT RACK STATE ENDPOINT_TYPE" after a header.
    text.lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}
