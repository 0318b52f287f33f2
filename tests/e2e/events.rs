//! End-to-end test of central's Kubernetes Events (events.k8s.io/v1): emitted on transitions
//! only, naming the resource they are about.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kstretch_tests::TestEnv;
use kstretch_tests::topics::{KAFKA, TopicOperator};
use kstretch_tests::wait::{Seen, wait_for};
use kube::Api;
use serde_json::json;

fn describe(events: &[Event]) -> String {
    events
        .iter()
        .map(|e| {
            format!(
                "{:?} {:?} {:?} {:?} {:?}",
                e.regarding.as_ref().and_then(|r| r.kind.clone()),
                e.regarding.as_ref().and_then(|r| r.name.clone()),
                e.type_,
                e.reason,
                e.note
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

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

    let find = |kind: &'static str, name: &'static str, reason: Option<&'static str>| {
        let events = events.clone();
        async move {
            let list = events
                .list(&Default::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default();
            let matching: Vec<Event> = list
                .iter()
                .filter(|e| {
                    e.regarding.as_ref().is_some_and(|r| {
                        r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name)
                    }) && reason.is_none_or(|want| e.reason.as_deref() == Some(want))
                })
                .cloned()
                .collect();
            if matching.is_empty() {
                Seen::NotYet(describe(&list))
            } else {
                Seen::Done(matching)
            }
        }
    };
    let created = wait_for("a TopicCreated event", Duration::from_secs(30), || {
        find("KafkaTopic", "created", Some("TopicCreated"))
    })
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
    let kafka = wait_for("a Kafka event", Duration::from_secs(30), || {
        find("Kafka", KAFKA, None)
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
    let again = match find("Kafka", KAFKA, None).await {
        Seen::Done(list) => list,
        Seen::NotYet(all) => panic!("the event went away:\n{all}"),
    };
    let count: i32 = again.iter().map(|e| e.deprecated_count.unwrap_or(1)).sum();
    assert_eq!(count, 1, "{}", describe(&again));

    op.finish().await;
}
