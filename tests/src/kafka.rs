//! Reading and changing the real Kafka through `rdkafka`, independently of kstretch's own
//! Kafka client.

use std::collections::BTreeSet;
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

/// Broker IDs in the cluster metadata returned by `bootstrap`.
pub fn broker_ids(bootstrap: &str) -> Result<BTreeSet<i32>, rdkafka::error::KafkaError> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    let metadata = consumer.fetch_metadata(None, Duration::from_secs(10))?;
    Ok(metadata.brokers().iter().map(|b| b.id()).collect())
}
