//! End-to-end test of central's Kubernetes Events (events.k8s.io/v1) about topics and a Kafka:
//! emitted on transitions only, naming the resource they are about. (Events about nodes, rolls
//! and podsets are checked in `kafka.rs` and `kafka_nodes.rs`, where those happen.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kstretch_tests::TestEnv;
use kstretch_tests::events::{describe, find, note, wait_event};
use kstretch_tests::topics::{KAFKA, TopicOperator};
use kstretch_tests::wait::wait_for;
use kube::Api;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_created_topic_and_a_kafka_that_is_not_ready_get_one_event_each() {
    let op = TopicOperator::start(
        "events",
        1,
        &TestEnv::get().kafka_bootstrap.clone(),
        &["--topic-full-reconcile-secs", "2"],
    )
    .await;
    let events: Api<Event> = op.namespaces[0].api();
    op.apply_topic(
        0,
        "created",
        json!({"partitions": 1, "replicas": 1}),
        json!({}),
    )
    .await;
    op.wait_ready(0, "created").await;

    let created = wait_event(
        &events,
        "KafkaTopic",
        "created",
        "TopicCreated",
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(created[0].type_.as_deref(), Some("Normal"));
    assert_eq!(
        created[0].reporting_controller.as_deref(),
        Some("kstretch-central")
    );
    let regarding = created[0].regarding.as_ref().unwrap();
    assert_eq!(regarding.namespace.as_deref(), Some(op.ns(0)));
    assert_eq!(
        regarding.api_version.as_deref(),
        Some("kafka.strimzi.io/v1")
    );
    assert!(
        created[0]
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("exists in Kafka with ID")
    );

    // This Kafka has no node pools, so it never becomes ready: one Warning with the reason of
    // its Ready condition, and no more on later reconciles (transitions only).
    let kafka = wait_for("a Kafka event", Duration::from_secs(30), || async {
        find(&events, "Kafka", KAFKA, None).await.into()
    })
    .await;
    assert_eq!(
        kafka[0].type_.as_deref(),
        Some("Warning"),
        "{}",
        describe(&kafka)
    );
    let kafkas: Api<kstretch_api::Kafka> = op.namespaces[0].api();
    let status = kafkas.get(KAFKA).await.unwrap().status.unwrap();
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.status, "False");
    assert_eq!(kafka[0].reason, ready.reason, "{}", describe(&kafka));
    tokio::time::sleep(Duration::from_secs(5)).await;
    let again = match find(&events, "Kafka", KAFKA, None).await {
        Ok(list) => list,
        Err(all) => panic!("the event went away:\n{all}"),
    };
    let count: i32 = again.iter().map(|e| e.deprecated_count.unwrap_or(1)).sum();
    assert_eq!(count, 1, "{}", describe(&again));

    // A replication factor change records its start and its end, not every pass between.
    op.apply_topic(
        0,
        "created",
        json!({"partitions": 1, "replicas": 2}),
        json!({}),
    )
    .await;
    let started = wait_event(
        &events,
        "KafkaTopic",
        "created",
        "ReplicasChangeStarted",
        Duration::from_secs(60),
    )
    .await;
    assert!(note(&started).ends_with("to 2"), "{}", describe(&started));
    let finished = wait_event(
        &events,
        "KafkaTopic",
        "created",
        "ReplicasChangeFinished",
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(
        note(&finished),
        "topic created has replication factor 2",
        "{}",
        describe(&finished)
    );
    let started: i32 = find(
        &events,
        "KafkaTopic",
        "created",
        Some("ReplicasChangeStarted"),
    )
    .await
    .unwrap()
    .iter()
    .map(|e| e.deprecated_count.unwrap_or(1))
    .sum();
    assert_eq!(started, 1);

    // Deleting the KafkaTopic deletes the topic in Kafka, and says so.
    op.delete_topic(0, "created").await;
    let deleted = wait_event(
        &events,
        "KafkaTopic",
        "created",
        "TopicDeleted",
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(deleted[0].type_.as_deref(), Some("Normal"));
    assert_eq!(note(&deleted), "topic created deleted from Kafka");

    op.finish().await;
}
