#![allow(clippy::unwrap_used, clippy::expect_used)]
//! End-to-end tests of kstretch's Kafka admin client (`kstretch-kadmin`) against the real Kafka
//! of the test environment, checked through rdkafka as the independent reference.
//!
//! The Kafka is shared with other tests: every test uses its own topic names, deletes the topics
//! it creates, changes no broker configuration (broker-level alterations are validate-only) and
//! unregisters only broker IDs that were never registered.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kstretch_kadmin::{
    AdminClient, AdminConfig, ConfigChange, ConfigOp, ConfigResource, ConfigSource, Error,
    NewPartitions, NewTopic, Reassignment, ResponseError, Uuid,
};
use kstretch_tests::wait::{Seen, wait_for};
use kstretch_tests::{TestEnv, kafka};
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminOptions, ResourceSpecifier};
use rdkafka::consumer::{BaseConsumer, Consumer};

const TIMEOUT: Duration = Duration::from_secs(60);

fn config() -> AdminConfig {
    AdminConfig::new(TestEnv::get().kafka_bootstrap.split(','))
        .with_client_id("kstretch-e2e-kadmin")
        .with_request_timeout(Duration::from_secs(30))
}

async fn client() -> AdminClient {
    AdminClient::connect(config()).await.unwrap()
}

/// A topic name no other test (or earlier run) uses.
fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("kadmin-{prefix}-{}-{nanos}", std::process::id())
}

/// Partition index to (leader, replicas, isr), as rdkafka sees a topic.
type RdPartitions = BTreeMap<i32, (i32, Vec<i32>, Vec<i32>)>;

/// The topic's partitions as rdkafka sees them; `None` when the topic is not in the metadata.
fn rd_partitions(name: &str) -> Option<RdPartitions> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &TestEnv::get().kafka_bootstrap)
        .set("allow.auto.create.topics", "false")
        .create()
        .unwrap();
    let metadata = consumer
        .fetch_metadata(Some(name), Duration::from_secs(10))
        .unwrap();
    let topic = metadata.topics().iter().find(|t| t.name() == name)?;
    if topic.error().is_some() {
        return None;
    }
    Some(
        topic
            .partitions()
            .iter()
            .map(|p| {
                (
                    p.id(),
                    (p.leader(), p.replicas().to_vec(), p.isr().to_vec()),
                )
            })
            .collect(),
    )
}

/// Waits until rdkafka sees `name` with `partitions` partitions and returns them.
async fn rd_wait_topic(name: &str, partitions: usize) -> RdPartitions {
    wait_for(
        &format!("rdkafka to see {name} with {partitions} partitions"),
        TIMEOUT,
        || async {
            match rd_partitions(name) {
                Some(p)
                    if p.len() == partitions && p.values().all(|(leader, _, _)| *leader >= 0) =>
                {
                    Seen::Done(p)
                }
                other => Seen::NotYet(format!("{other:?}")),
            }
        },
    )
    .await
}

async fn rd_wait_gone(name: &str) {
    wait_for(
        &format!("rdkafka to stop seeing {name}"),
        TIMEOUT,
        || async {
            match rd_partitions(name) {
                None => Seen::Done(()),
                Some(p) => Seen::NotYet(format!("{p:?}")),
            }
        },
    )
    .await
}

/// A topic's config entries as rdkafka describes them: name -> (value, source).
async fn rd_topic_configs(name: &str) -> BTreeMap<String, (Option<String>, String)> {
    let admin = kafka::admin(&TestEnv::get().kafka_bootstrap);
    let results = admin
        .describe_configs([&ResourceSpecifier::Topic(name)], &AdminOptions::new())
        .await
        .unwrap();
    let resource = results.into_iter().next().unwrap().unwrap();
    resource
        .entries
        .into_iter()
        .map(|e| (e.name, (e.value, format!("{:?}", e.source))))
        .collect()
}

/// Deletes topics through rdkafka (cleanup that does not depend on the client under test).
async fn rd_delete(names: &[&str]) {
    let admin = kafka::admin(&TestEnv::get().kafka_bootstrap);
    let _ = admin.delete_topics(names, &AdminOptions::new()).await;
}

#[tokio::test]
async fn describe_cluster_lists_the_brokers_of_the_environment() {
    let env = TestEnv::get();
    let admin = client().await;
    for include_fenced in [false, true] {
        let cluster = admin.describe_cluster(include_fenced).await.unwrap();
        assert_eq!(cluster.cluster_id, env.kafka_cluster_id);
        let ids: Vec<i32> = cluster.brokers.iter().map(|b| b.id).collect();
        assert_eq!(ids, env.kafka_broker_ids);
        for broker in &cluster.brokers {
            assert!(!broker.fenced, "{broker:?}");
            let address = format!("{}:{}", broker.host, broker.port);
            assert_eq!(Some(address), env.broker_address(broker.id), "{broker:?}");
        }
        let controller = cluster.controller_id.unwrap();
        assert!(ids.contains(&controller), "{cluster:?}");
    }
    // The independent view agrees.
    let rd_ids: Vec<i32> = kafka::broker_ids(&env.kafka_bootstrap)
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(rd_ids, env.kafka_broker_ids);
    let known: Vec<i32> = admin
        .known_brokers()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(known, env.kafka_broker_ids);
}

#[tokio::test]
async fn describe_quorum_shows_the_controller_as_leader() {
    let env = TestEnv::get();
    let quorum = client().await.describe_quorum().await.unwrap();
    assert_eq!(quorum.leader_id, 0, "{quorum:?}");
    assert!(quorum.leader_epoch >= 0);
    assert!(quorum.high_watermark > 0, "{quorum:?}");
    let voters: Vec<i32> = quorum.voters.iter().map(|v| v.replica_id).collect();
    assert_eq!(voters, [0], "{quorum:?}");
    let mut observers: Vec<i32> = quorum.observers.iter().map(|o| o.replica_id).collect();
    observers.sort();
    assert_eq!(observers, env.kafka_broker_ids, "{quorum:?}");
    let leader = &quorum.voters[0];
    assert!(leader.log_end_offset > 0);
}

#[tokio::test]
async fn unregistering_a_never_registered_broker_is_a_typed_error() {
    let admin = client().await;
    let e = admin.unregister_broker(4242).await.unwrap_err();
    assert!(matches!(e, Error::BrokerNotRegistered { .. }), "{e}");
    assert_eq!(e.reason(), "KafkaBrokerNotRegistered");
    assert_eq!(
        e.kafka_code_name().as_deref(),
        Some("BROKER_ID_NOT_REGISTERED")
    );
    assert!(e.kafka().unwrap().message.is_some(), "{e}");
    // Nothing changed for the real brokers.
    let ids: Vec<i32> = admin
        .describe_cluster(false)
        .await
        .unwrap()
        .brokers
        .iter()
        .map(|b| b.id)
        .collect();
    assert_eq!(ids, TestEnv::get().kafka_broker_ids);
}

#[tokio::test]
async fn an_unreachable_bootstrap_fails_quickly_and_typed() {
    // A port nobody listens on.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    drop(listener);
    let start = Instant::now();
    let config = AdminConfig::new([address.clone()])
        .with_retries(2, Duration::from_millis(50))
        .with_connect_timeout(Duration::from_secs(2));
    let e = AdminClient::connect(config).await.unwrap_err();
    assert!(matches!(e, Error::Unreachable { .. }), "{e}");
    assert_eq!(e.reason(), "KafkaUnreachable");
    assert!(e.to_string().contains(&address), "{e}");
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test]
async fn a_dead_bootstrap_address_is_skipped() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = listener.local_addr().unwrap().to_string();
    drop(listener);
    let mut bootstrap = vec![dead];
    bootstrap.extend(TestEnv::get().kafka_bootstrap.split(',').map(str::to_owned));
    let admin = AdminClient::connect(AdminConfig::new(bootstrap))
        .await
        .unwrap();
    assert_eq!(admin.known_brokers().len(), 3);
}

#[tokio::test]
async fn a_listener_that_is_not_kafka_is_a_protocol_error() {
    // Kafka Connect's REST port answers HTTP.
    let url = &TestEnv::get().connect_url;
    let address = url.trim_start_matches("http://").trim_end_matches('/');
    let config = AdminConfig::new([address]).with_retries(0, Duration::from_millis(10));
    let e = AdminClient::connect(config).await.unwrap_err();
    assert!(matches!(e, Error::Protocol { .. }), "{e}");
    assert_eq!(e.reason(), "KafkaProtocolError");
}

#[tokio::test]
async fn a_bad_config_is_rejected_before_connecting() {
    let e = AdminClient::connect(AdminConfig::new(Vec::<String>::new()))
        .await
        .unwrap_err();
    assert_eq!(e.reason(), "KafkaConfigInvalid");
}

#[tokio::test]
async fn describe_topics_matches_rdkafka() {
    let env = TestEnv::get();
    let name = unique("describe");
    kafka::create_topic(&env.kafka_bootstrap, &name, 3, 3).await;
    let expected = rd_wait_topic(&name, 3).await;
    let admin = client().await;
    // Wait for every replica to be in sync in both views before comparing them.
    let topic = wait_for("kadmin to see the topic fully in sync", TIMEOUT, || async {
        let topics = admin
            .describe_topics(Some(std::slice::from_ref(&name)))
            .await
            .unwrap();
        match topics.into_iter().next() {
            Some(t) if t.partitions.iter().all(|p| p.isr.len() == 3) => Seen::Done(t),
            other => Seen::NotYet(format!("{other:?}")),
        }
    })
    .await;
    let expected = wait_for(
        "rdkafka to see the topic fully in sync",
        TIMEOUT,
        || async {
            match rd_partitions(&name) {
                Some(p) if p.values().all(|(_, _, isr)| isr.len() == 3) => Seen::Done(p),
                other => Seen::NotYet(format!("{other:?} (first: {expected:?})")),
            }
        },
    )
    .await;
    assert_eq!(topic.name, name);
    assert!(!topic.id.is_nil());
    assert!(!topic.internal);
    assert_eq!(topic.partitions.len(), 3);
    for p in &topic.partitions {
        let (leader, replicas, isr) = &expected[&p.index];
        assert_eq!(p.leader, *leader, "partition {}", p.index);
        assert_eq!(&p.replicas, replicas, "partition {}", p.index);
        let (mut a, mut b) = (p.isr.clone(), isr.clone());
        a.sort();
        b.sort();
        assert_eq!(a, b, "partition {}", p.index);
        assert!(p.offline.is_empty());
    }
    // All topics include it; a name that does not exist is left out.
    let all = admin.describe_topics(None).await.unwrap();
    assert!(all.iter().any(|t| t.name == name && t.id == topic.id));
    let missing = admin
        .describe_topics(Some(&[unique("missing")]))
        .await
        .unwrap();
    assert!(missing.is_empty(), "{missing:?}");
    // Asking about a missing topic must not create it.
    assert!(rd_partitions(&unique("never")).is_none());
    rd_delete(&[&name]).await;
}

#[tokio::test]
async fn create_topics_is_seen_by_rdkafka_with_its_configs() {
    let admin = client().await;
    let name = unique("create");
    let topic = NewTopic::new(&name, 2, 3)
        .with_config("min.insync.replicas", "2")
        .with_config("retention.ms", "3600000");
    let results = admin
        .create_topics(std::slice::from_ref(&topic), false)
        .await
        .unwrap();
    assert_eq!(results.len(), 1);
    let created = results[0].result.as_ref().unwrap();
    assert_eq!(results[0].name, name);
    assert!(!created.id.is_nil());
    assert_eq!((created.partitions, created.replication_factor), (2, 3));

    let partitions = rd_wait_topic(&name, 2).await;
    assert!(
        partitions
            .values()
            .all(|(_, replicas, _)| replicas.len() == 3)
    );
    let configs = rd_topic_configs(&name).await;
    assert_eq!(configs["min.insync.replicas"].0.as_deref(), Some("2"));
    assert_eq!(configs["retention.ms"].0.as_deref(), Some("3600000"));

    // kadmin's own description has the same ID.
    let described = admin
        .describe_topics(Some(std::slice::from_ref(&name)))
        .await
        .unwrap();
    assert_eq!(described[0].id, created.id);

    // Again: TOPIC_ALREADY_EXISTS, typed, with Kafka's name and message.
    let again = admin.create_topics(&[topic], false).await.unwrap();
    let e = again[0].result.as_ref().unwrap_err();
    assert!(matches!(e, Error::TopicAlreadyExists { .. }), "{e}");
    assert_eq!(e.kafka_code_name().as_deref(), Some("TOPIC_ALREADY_EXISTS"));
    assert!(e.kafka().unwrap().message.is_some());
    rd_delete(&[&name]).await;
}

#[tokio::test]
async fn create_topics_reports_per_topic_errors_and_validate_only_creates_nothing() {
    let admin = client().await;
    let good = unique("validate");
    let too_many_replicas = unique("rf");
    let bad_config = unique("badcfg");
    let results = admin
        .create_topics(
            &[
                NewTopic::new(&good, 1, 1),
                NewTopic::new(&too_many_replicas, 1, 5),
                NewTopic::new(&bad_config, 1, 1).with_config("cleanup.policy", "shred"),
            ],
            true,
        )
        .await
        .unwrap();
    let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, [&good, &too_many_replicas, &bad_config]);
    assert!(results[0].result.is_ok(), "{:?}", results[0]);
    let e = results[1].result.as_ref().unwrap_err();
    assert_eq!(
        e.kafka().unwrap().error,
        ResponseError::InvalidReplicationFactor
    );
    assert_eq!(e.reason(), "KafkaError");
    let e = results[2].result.as_ref().unwrap_err();
    assert_eq!(
        e.kafka_code_name().as_deref(),
        Some("INVALID_CONFIG"),
        "{e}"
    );
    // validate_only: nothing exists afterwards.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(rd_partitions(&good).is_none());
    assert!(
        admin
            .describe_topics(Some(&[good]))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn create_topics_with_an_explicit_assignment_places_replicas() {
    let admin = client().await;
    let name = unique("assign");
    let assignment = BTreeMap::from([(0, vec![2, 3]), (1, vec![3, 1])]);
    let results = admin
        .create_topics(
            &[NewTopic::new(&name, 0, 0).with_assignment(assignment)],
            false,
        )
        .await
        .unwrap();
    results[0].result.as_ref().unwrap();
    let partitions = rd_wait_topic(&name, 2).await;
    assert_eq!(partitions[&0].1, [2, 3]);
    assert_eq!(partitions[&1].1, [3, 1]);
    rd_delete(&[&name]).await;
}

#[tokio::test]
async fn delete_topics_by_id_removes_exactly_that_topic() {
    let env = TestEnv::get();
    let admin = client().await;
    let name = unique("delete");
    kafka::create_topic(&env.kafka_bootstrap, &name, 1, 1).await;
    rd_wait_topic(&name, 1).await;
    let id = admin
        .describe_topics(Some(std::slice::from_ref(&name)))
        .await
        .unwrap()[0]
        .id;
    let unknown = Uuid::from_u128(0x6b61_646d_696e_0000_0000_0000_0000_0001);
    let results = admin.delete_topics_by_id(&[id, unknown]).await.unwrap();
    assert_eq!(results[0].id, id);
    results[0].result.as_ref().unwrap();
    assert_eq!(results[0].name.as_deref(), Some(name.as_str()));
    let e = results[1].result.as_ref().unwrap_err();
    assert!(matches!(e, Error::UnknownTopic { .. }), "{e}");
    assert_eq!(e.kafka_code_name().as_deref(), Some("UNKNOWN_TOPIC_ID"));
    rd_wait_gone(&name).await;
}

#[tokio::test]
async fn create_partitions_grows_a_topic_and_reports_errors() {
    let env = TestEnv::get();
    let admin = client().await;
    let name = unique("partitions");
    kafka::create_topic(&env.kafka_bootstrap, &name, 1, 2).await;
    rd_wait_topic(&name, 1).await;

    // validate_only changes nothing.
    let grow = NewPartitions {
        topic: name.clone(),
        total_count: 3,
        assignments: None,
    };
    let results = admin
        .create_partitions(std::slice::from_ref(&grow), true)
        .await
        .unwrap();
    results[0].result.as_ref().unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(rd_partitions(&name).unwrap().len(), 1);

    let results = admin.create_partitions(&[grow], false).await.unwrap();
    results[0].result.as_ref().unwrap();
    let partitions = rd_wait_topic(&name, 3).await;
    assert!(
        partitions
            .values()
            .all(|(_, replicas, _)| replicas.len() == 2)
    );

    // Explicit placement of a fourth; shrinking and a missing topic are per-topic errors.
    let missing = unique("nosuch");
    let results = admin
        .create_partitions(
            &[
                NewPartitions {
                    topic: name.clone(),
                    total_count: 4,
                    assignments: Some(vec![vec![3, 1]]),
                },
                NewPartitions {
                    topic: missing.clone(),
                    total_count: 2,
                    assignments: None,
                },
            ],
            false,
        )
        .await
        .unwrap();
    results[0].result.as_ref().unwrap();
    let e = results[1].result.as_ref().unwrap_err();
    assert!(matches!(e, Error::UnknownTopic { .. }), "{e}");
    let partitions = rd_wait_topic(&name, 4).await;
    assert_eq!(partitions[&3].1, [3, 1]);
    let results = admin
        .create_partitions(
            &[NewPartitions {
                topic: name.clone(),
                total_count: 2,
                assignments: None,
            }],
            false,
        )
        .await
        .unwrap();
    let e = results[0].result.as_ref().unwrap_err();
    assert_eq!(
        e.kafka_code_name().as_deref(),
        Some("INVALID_PARTITIONS"),
        "{e}"
    );
    assert!(e.kafka().unwrap().message.is_some());
    rd_delete(&[&name]).await;
}

#[tokio::test]
async fn describe_configs_reads_topic_and_broker_min_insync_replicas() {
    let env = TestEnv::get();
    let admin = client().await;
    let name = unique("configs");
    let created = admin
        .create_topics(
            &[NewTopic::new(&name, 1, 3).with_config("min.insync.replicas", "2")],
            false,
        )
        .await
        .unwrap();
    created[0].result.as_ref().unwrap();
    rd_wait_topic(&name, 1).await;

    let missing = unique("nosuch");
    let resources = [
        ConfigResource::Topic(name.clone()),
        ConfigResource::Broker(1),
        ConfigResource::Broker(2),
        ConfigResource::BrokerDefault,
        ConfigResource::Topic(missing),
    ];
    let results = admin.describe_configs(&resources).await.unwrap();
    assert_eq!(results.len(), resources.len());
    for (r, asked) in results.iter().zip(&resources) {
        assert_eq!(&r.resource, asked);
    }
    let min_isr = results[0].get("min.insync.replicas").unwrap();
    assert_eq!(min_isr.value.as_deref(), Some("2"));
    assert_eq!(min_isr.source, ConfigSource::DynamicTopic);
    assert!(!min_isr.is_default);
    let retention = results[0].get("retention.ms").unwrap();
    assert!(retention.is_default || retention.source != ConfigSource::DynamicTopic);

    // Broker 1's own view (asked from broker 1), against rdkafka's.
    let broker_min_isr = results[1].get("min.insync.replicas").unwrap();
    let rd = kafka::admin(&env.kafka_bootstrap)
        .describe_configs([&ResourceSpecifier::Broker(1)], &AdminOptions::new())
        .await
        .unwrap()
        .into_iter()
        .next()
        .unwrap()
        .unwrap();
    let rd_min_isr = rd.get("min.insync.replicas").unwrap();
    assert_eq!(broker_min_isr.value, rd_min_isr.value);
    assert_eq!(broker_min_isr.read_only, rd_min_isr.is_read_only);
    assert_eq!(broker_min_isr.is_default, rd_min_isr.is_default);
    let broker_id = results[2]
        .get("broker.id")
        .or(results[2].get("node.id"))
        .unwrap();
    assert_eq!(broker_id.value.as_deref(), Some("2"));
    assert!(broker_id.read_only);
    results[3].result.as_ref().unwrap();

    let e = results[4].result.as_ref().unwrap_err();
    assert!(matches!(e, Error::UnknownTopic { .. }), "{e}");
    assert_eq!(
        e.kafka_code_name().as_deref(),
        Some("UNKNOWN_TOPIC_OR_PARTITION")
    );

    // A broker that does not exist cannot be asked.
    let e = admin
        .describe_configs(&[ConfigResource::Broker(99)])
        .await
        .unwrap_err();
    assert!(matches!(e, Error::UnknownBroker(99)), "{e}");
    assert_eq!(e.reason(), "KafkaBrokerUnknown");
    rd_delete(&[&name]).await;
}

#[tokio::test]
async fn incremental_alter_configs_is_seen_by_rdkafka() {
    let env = TestEnv::get();
    let admin = client().await;
    let name = unique("alter");
    kafka::create_topic(&env.kafka_bootstrap, &name, 1, 1).await;
    rd_wait_topic(&name, 1).await;
    let topic = ConfigResource::Topic(name.clone());

    let set = [ConfigChange {
        resource: topic.clone(),
        ops: vec![
            ConfigOp::set("retention.ms", "7200000"),
            ConfigOp::set("min.insync.replicas", "1"),
        ],
    }];
    let results = admin.incremental_alter_configs(&set, false).await.unwrap();
    results[0].result.as_ref().unwrap();
    let seen = wait_for("rdkafka to see retention.ms", TIMEOUT, || async {
        let configs = rd_topic_configs(&name).await;
        match configs["retention.ms"].0.as_deref() {
            Some("7200000") => Seen::Done(configs),
            other => Seen::NotYet(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(seen["retention.ms"].1, "DynamicTopic");

    let delete = [ConfigChange {
        resource: topic.clone(),
        ops: vec![ConfigOp::delete("retention.ms")],
    }];
    admin
        .incremental_alter_configs(&delete, false)
        .await
        .unwrap()[0]
        .result
        .as_ref()
        .unwrap();
    wait_for(
        "rdkafka to see retention.ms back to its default",
        TIMEOUT,
        || async {
            let configs = rd_topic_configs(&name).await;
            match &configs["retention.ms"] {
                (_, source) if source != "DynamicTopic" => Seen::Done(()),
                other => Seen::NotYet(format!("{other:?}")),
            }
        },
    )
    .await;
    let mine = admin
        .describe_configs(std::slice::from_ref(&topic))
        .await
        .unwrap();
    assert_ne!(
        mine[0].get("retention.ms").unwrap().source,
        ConfigSource::DynamicTopic
    );
    assert_eq!(
        mine[0].get("min.insync.replicas").unwrap().value.as_deref(),
        Some("1")
    );

    // Per-resource errors: a bad value, an unknown topic. Broker changes are validate-only so
    // the shared brokers keep their configuration; they travel to that broker.
    let missing = unique("nosuch");
    let results = admin
        .incremental_alter_configs(
            &[
                ConfigChange {
                    resource: topic.clone(),
                    ops: vec![ConfigOp::set("min.insync.replicas", "many")],
                },
                ConfigChange {
                    resource: ConfigResource::Topic(missing),
                    ops: vec![ConfigOp::set("retention.ms", "1")],
                },
                ConfigChange {
                    resource: ConfigResource::Broker(2),
                    ops: vec![ConfigOp::set("log.cleaner.threads", "2")],
                },
            ],
            true,
        )
        .await
        .unwrap();
    let e = results[0].result.as_ref().unwrap_err();
    assert_eq!(
        e.kafka_code_name().as_deref(),
        Some("INVALID_CONFIG"),
        "{e}"
    );
    assert!(e.kafka().unwrap().message.is_some());
    let e = results[1].result.as_ref().unwrap_err();
    assert!(matches!(e, Error::UnknownTopic { .. }), "{e}");
    results[2].result.as_ref().unwrap();
    let broker = admin
        .describe_configs(&[ConfigResource::Broker(2)])
        .await
        .unwrap();
    let threads = broker[0].get("log.cleaner.threads").unwrap();
    assert_ne!(threads.source, ConfigSource::DynamicBroker, "{threads:?}");
    rd_delete(&[&name]).await;
}

#[tokio::test]
async fn partition_reassignment_moves_a_replica() {
    let admin = client().await;
    let name = unique("reassign");
    let results = admin
        .create_topics(
            &[NewTopic::new(&name, 0, 0).with_assignment(BTreeMap::from([(0, vec![1])]))],
            false,
        )
        .await
        .unwrap();
    results[0].result.as_ref().unwrap();
    assert_eq!(rd_wait_topic(&name, 1).await[&0].1, [1]);

    // Nothing to cancel yet; a broker that does not exist is refused.
    let results = admin
        .alter_partition_reassignments(&[Reassignment {
            topic: name.clone(),
            partition: 0,
            target: None,
        }])
        .await
        .unwrap();
    let e = results[0].result.as_ref().unwrap_err();
    assert_eq!(
        e.kafka_code_name().as_deref(),
        Some("NO_REASSIGNMENT_IN_PROGRESS"),
        "{e}"
    );
    let results = admin
        .alter_partition_reassignments(&[Reassignment {
            topic: name.clone(),
            partition: 0,
            target: Some(vec![42]),
        }])
        .await
        .unwrap();
    let e = results[0].result.as_ref().unwrap_err();
    assert!(e.kafka().is_some(), "{e}");

    let results = admin
        .alter_partition_reassignments(&[Reassignment {
            topic: name.clone(),
            partition: 0,
            target: Some(vec![2]),
        }])
        .await
        .unwrap();
    assert_eq!(results[0].topic, name);
    results[0].result.as_ref().unwrap();
    wait_for("the reassignment to finish", TIMEOUT, || async {
        let ongoing = admin
            .list_partition_reassignments(Some(&[(name.clone(), vec![0])]))
            .await
            .unwrap();
        let replicas = rd_partitions(&name).map(|p| p[&0].1.clone());
        match (&ongoing[..], replicas.as_deref()) {
            ([], Some([2])) => Seen::Done(()),
            other => Seen::NotYet(format!("{other:?}")),
        }
    })
    .await;
    let described = admin
        .describe_topics(Some(std::slice::from_ref(&name)))
        .await
        .unwrap();
    assert_eq!(described[0].partitions[0].replicas, [2]);
    // Listing all reassignments works too (others' may be in progress).
    admin.list_partition_reassignments(None).await.unwrap();
    rd_delete(&[&name]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_share_one_client() {
    let admin = client().await;
    let tasks: Vec<_> = (0..24)
        .map(|i| {
            let admin = admin.clone();
            tokio::spawn(async move {
                match i % 3 {
                    0 => admin.describe_cluster(false).await.map(|c| c.brokers.len()),
                    1 => admin.describe_quorum().await.map(|q| q.voters.len()),
                    _ => admin
                        .describe_configs(&[ConfigResource::Broker(1 + i % 3)])
                        .await
                        .map(|r| usize::from(r[0].result.is_ok())),
                }
            })
        })
        .collect();
    for (i, task) in tasks.into_iter().enumerate() {
        let n = task.await.unwrap().unwrap();
        let expected = [3, 1, 1][i % 3];
        assert_eq!(n, expected, "task {i}");
    }
}

/// A group's committed offsets and the partitions' offsets as kstretch's admin client reads
/// them (what Kafka Exporter serves) match what rdkafka committed and produced; the agent's
/// `kafka-exporter` serves the lag under Kafka Exporter's names, -1 for a partition of a
/// consumed topic without a committed offset.
#[tokio::test]
async fn group_offsets_and_the_kafka_exporters_lag_match_what_rdkafka_committed() {
    use kstretch_kadmin::OffsetSpec;
    use kstretch_tests::process::{Spawned, binary, free_port};
    use rdkafka::consumer::CommitMode;
    use rdkafka::{Offset, TopicPartitionList};

    let bootstrap = TestEnv::get().kafka_bootstrap.clone();
    let topic = unique("lag");
    let group = format!("{topic}-group");
    let admin = client().await;
    admin
        .create_topics(&[NewTopic::new(&topic, 3, 1)], false)
        .await
        .unwrap();
    rd_wait_topic(&topic, 3).await;
    let records: Vec<(String, String)> = (0..90)
        .map(|i| (format!("k{i}"), format!("v{i}")))
        .collect();
    kafka::produce(&bootstrap, &topic, &records).await;

    // The group commits 10 on partition 0 and everything on partition 1; nothing on 2.
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", &group)
        .create()
        .unwrap();
    let (_, high1) = consumer
        .fetch_watermarks(&topic, 1, Duration::from_secs(10))
        .unwrap();
    let mut commit = TopicPartitionList::new();
    commit
        .add_partition_offset(&topic, 0, Offset::Offset(10))
        .unwrap();
    commit
        .add_partition_offset(&topic, 1, Offset::Offset(high1))
        .unwrap();
    consumer.commit(&commit, CommitMode::Sync).unwrap();

    let listed = admin.list_groups().await.unwrap();
    assert!(listed.iter().any(|g| g.group_id == group), "{listed:?}");
    let coordinator = admin.group_coordinator(&group).await.unwrap();
    let committed = admin.committed_offsets(&group, coordinator).await.unwrap();
    assert_eq!(
        committed,
        BTreeMap::from([((topic.clone(), 0), 10), ((topic.clone(), 1), high1)])
    );
    assert_eq!(
        admin
            .describe_group(&group, coordinator)
            .await
            .unwrap()
            .members,
        0
    );
    let leaders: BTreeMap<(String, i32), i32> = rd_partitions(&topic)
        .unwrap()
        .into_iter()
        .map(|(p, (leader, _, _))| ((topic.clone(), p), leader))
        .collect();
    let newest = admin
        .list_offsets(&leaders, OffsetSpec::Latest)
        .await
        .unwrap();
    let oldest = admin
        .list_offsets(&leaders, OffsetSpec::Earliest)
        .await
        .unwrap();
    for p in 0..3 {
        let (low, high) = consumer
            .fetch_watermarks(&topic, p, Duration::from_secs(10))
            .unwrap();
        assert_eq!(newest[&(topic.clone(), p)], high, "partition {p}");
        assert_eq!(oldest[&(topic.clone(), p)], low, "partition {p}");
    }
    let high0 = newest[&(topic.clone(), 0)];

    let port = free_port();
    let mut command = std::process::Command::new(binary("kstretch-agent"));
    command
        .args(["kafka-exporter", "--bootstrap", &bootstrap])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--topic-regex", &format!("^{topic}$")])
        .args(["--group-regex", &format!("^{group}$")]);
    let exporter = Spawned::start("kafka-exporter", command);
    let url = format!("http://127.0.0.1:{port}/metrics");
    let text = wait_for("the exporter's metrics", TIMEOUT, || async {
        match reqwest::get(&url).await {
            Ok(r) if r.status().is_success() => Seen::Done(r.text().await.unwrap()),
            Ok(r) => Seen::NotYet(format!(
                "{}: {}",
                r.status(),
                r.text().await.unwrap_or_default()
            )),
            Err(e) => Seen::NotYet(e.to_string()),
        }
    })
    .await;
    let sample = |name: &str, p: i32| {
        format!("{name}{{consumergroup=\"{group}\",partition=\"{p}\",topic=\"{topic}\"}} ")
    };
    let value = |line: String| {
        text.lines()
            .find_map(|l| l.strip_prefix(&line))
            .unwrap_or_else(|| panic!("{line} missing:\n{text}\n{}", exporter.log_tail(20)))
            .to_owned()
    };
    assert_eq!(
        value(sample("kafka_consumergroup_lag", 0)),
        (high0 - 10).to_string()
    );
    assert_eq!(value(sample("kafka_consumergroup_lag", 1)), "0");
    assert_eq!(value(sample("kafka_consumergroup_lag", 2)), "-1");
    assert_eq!(value(sample("kafka_consumergroup_current_offset", 2)), "-1");
    assert_eq!(
        value(format!(
            "kafka_consumergroup_lag_sum{{consumergroup=\"{group}\",topic=\"{topic}\"}} "
        )),
        (high0 - 10).to_string()
    );
    assert_eq!(
        value(format!("kafka_topic_partitions{{topic=\"{topic}\"}} ")),
        "3"
    );
    // The topic filter holds: no other topic is shown.
    assert!(
        text.lines()
            .filter(|l| l.starts_with("kafka_topic_partitions{"))
            .count()
            == 1,
        "{text}"
    );
    rd_delete(&[&topic]).await;
}
