//! End-to-end tests of the topic operator: the real central against cluster alpha's apiserver
//! and the environment's real Kafka, with Kafka's state read independently through `rdkafka`.
//!
//! Topic names carry the test namespace, which is unique per run, so tests share the Kafka.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use kstretch_tests::TestEnv;
use kstretch_tests::topics::{
    self, KAFKA, TopicOperator, add_partitions, condition, replicas, set_topic_configs,
    topic_configs, warning,
};
use kstretch_tests::wait::{Seen, wait_for};
use kube::api::{Patch, PatchParams};
use serde_json::json;

fn bootstrap() -> String {
    TestEnv::get().kafka_bootstrap.clone()
}

/// Waits until Kafka (through rdkafka) satisfies `check` for `topic`.
async fn wait_kafka<T>(
    what: &str,
    topic: &str,
    check: impl Fn(Option<Vec<Vec<i32>>>, &BTreeMap<String, String>) -> Option<T>,
) -> T {
    let bootstrap = bootstrap();
    wait_for(what, Duration::from_secs(60), || {
        let bootstrap = bootstrap.clone();
        let check = &check;
        async move {
            let partitions = replicas(&bootstrap, topic);
            let configs = if partitions.is_some() {
                topic_configs(&bootstrap, topic).await
            } else {
                BTreeMap::new()
            };
            match check(partitions.clone(), &configs) {
                Some(t) => Seen::Done(t),
                None => Seen::NotYet(format!("partitions {partitions:?}, configs {configs:?}")),
            }
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_update_adopt_and_revert_out_of_band_changes() {
    let op = TopicOperator::start(
        "topics-lifecycle",
        1,
        &bootstrap(),
        &["--topic-full-reconcile-secs", "3"],
    )
    .await;
    let topic = format!("{}-orders", op.ns(0));

    // Create.
    op.apply_topic(
        0,
        "orders",
        json!({"topicName": topic, "partitions": 3, "replicas": 2,
               "config": {"retention.ms": 7200000, "cleanup.policy": "delete", "min.insync.replicas": 1}}),
        json!({}),
    )
    .await;
    let kt = op.wait_ready(0, "orders").await;
    let status = kt.status.clone().unwrap();
    assert_eq!(status.topic_name.as_deref(), Some(topic.as_str()));
    assert!(status.topic_id.is_some(), "{status:?}");
    assert_eq!(
        status.cluster_id.as_deref(),
        Some(TestEnv::get().kafka_cluster_id.as_str())
    );
    assert!(
        kt.metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|f| f == "strimzi.io/topic-operator"))
    );
    let ready_since = condition(&kt, "Ready")
        .unwrap()
        .last_transition_time
        .clone();
    wait_kafka("3 partitions with 2 replicas", &topic, |p, c| {
        let p = p?;
        (p.len() == 3
            && p.iter().all(|r| r.len() == 2)
            && c.get("retention.ms").map(String::as_str) == Some("7200000"))
        .then_some(())
    })
    .await;

    // Update: a changed value is SET, a removed key is DELETEd (Kafka's default comes back),
    // partitions grow.
    op.apply_topic(
        0,
        "orders",
        json!({"topicName": topic, "partitions": 5, "replicas": 2,
               "config": {"retention.ms": 3600000, "min.insync.replicas": 1}}),
        json!({}),
    )
    .await;
    op.wait_ready(0, "orders").await;
    wait_kafka("the update in Kafka", &topic, |p, c| {
        (p?.len() == 5
            && c.get("retention.ms").map(String::as_str) == Some("3600000")
            && !c.contains_key("cleanup.policy"))
        .then_some(())
    })
    .await;

    // Out of band: a config changed and one added directly in Kafka are reverted by the timed
    // pass.
    let mut changed = topic_configs(&bootstrap(), &topic).await;
    changed.insert("retention.ms".into(), "1000".into());
    changed.insert("segment.ms".into(), "600000".into());
    set_topic_configs(&bootstrap(), &topic, &changed).await;
    wait_kafka("the out-of-band configs reverted", &topic, |_, c| {
        (c.get("retention.ms").map(String::as_str) == Some("3600000")
            && !c.contains_key("segment.ms"))
        .then_some(())
    })
    .await;
    let kt = op.wait_ready(0, "orders").await;
    assert_eq!(
        condition(&kt, "Ready").unwrap().last_transition_time,
        ready_since,
        "Ready=True never changed, so its transition time stays"
    );

    // Out of band: partitions added directly in Kafka cannot be reverted; the timed pass
    // reports it.
    add_partitions(&bootstrap(), &topic, 7).await;
    let kt = op.wait_not_ready(0, "orders", "NotSupported").await;
    let message = condition(&kt, "Ready").unwrap().message.clone().unwrap();
    assert!(message.contains("7 partitions"), "{message}");
    assert!(message.contains("asks for 5"), "{message}");
    op.apply_topic(
        0,
        "orders",
        json!({"topicName": topic, "partitions": 7, "replicas": 2,
               "config": {"retention.ms": 3600000, "min.insync.replicas": 1}}),
        json!({}),
    )
    .await;
    op.wait_ready(0, "orders").await;

    // Adopt: a topic that exists in Kafka is taken over, its config made to match.
    let adopted = format!("{}-adopted", op.ns(0));
    kstretch_tests::kafka::create_topic(&bootstrap(), &adopted, 1, 1).await;
    set_topic_configs(
        &bootstrap(),
        &adopted,
        &BTreeMap::from([("segment.bytes".to_owned(), "1048576".to_owned())]),
    )
    .await;
    op.apply_topic(
        0,
        "adopted",
        json!({"topicName": adopted, "partitions": 2, "replicas": 1,
               "config": {"retention.bytes": 1048576}}),
        json!({}),
    )
    .await;
    op.wait_ready(0, "adopted").await;
    wait_kafka("the adopted topic matches", &adopted, |p, c| {
        (p?.len() == 2
            && c.get("retention.bytes").map(String::as_str) == Some("1048576")
            && !c.contains_key("segment.bytes"))
        .then_some(())
    })
    .await;

    // Deletion goes to Kafka (by topic ID).
    op.delete_topic(0, "adopted").await;
    wait_kafka("the adopted topic deleted", &adopted, |p, _| {
        p.is_none().then_some(())
    })
    .await;
    assert!(
        op.metric("kstretch_central_topic_reconciliations_successful_total")
            .await
            .unwrap_or(0.0)
            >= 5.0
    );
    op.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_name_what_to_fix_and_clear_once_fixed() {
    let op = TopicOperator::start("topics-refusals", 1, &bootstrap(), &[]).await;
    let topic = format!("{}-t", op.ns(0));
    op.apply_topic(
        0,
        "t",
        json!({"topicName": topic, "partitions": 4, "replicas": 1}),
        json!({}),
    )
    .await;
    op.wait_ready(0, "t").await;

    // Decrease of partitions.
    op.apply_topic(
        0,
        "t",
        json!({"topicName": topic, "partitions": 2, "replicas": 1}),
        json!({}),
    )
    .await;
    let kt = op.wait_not_ready(0, "t", "NotSupported").await;
    let message = condition(&kt, "Ready").unwrap().message.clone().unwrap();
    assert!(message.contains("Decreasing partitions"), "{message}");
    assert_eq!(replicas(&bootstrap(), &topic).unwrap().len(), 4);

    // spec.topicName change: refused, status.topicName keeps the managed topic.
    op.apply_topic(
        0,
        "t",
        json!({"topicName": format!("{topic}-renamed"), "partitions": 4, "replicas": 1}),
        json!({}),
    )
    .await;
    let kt = op.wait_not_ready(0, "t", "NotSupported").await;
    assert_eq!(
        kt.status.as_ref().unwrap().topic_name.as_deref(),
        Some(topic.as_str())
    );
    assert!(replicas(&bootstrap(), &format!("{topic}-renamed")).is_none());

    // A config Kafka rejects: Kafka's own message is shown.
    op.apply_topic(
        0,
        "t",
        json!({"topicName": topic, "partitions": 4, "replicas": 1,
               "config": {"cleanup.policy": "sometimes"}}),
        json!({}),
    )
    .await;
    let kt = op.wait_not_ready(0, "t", "KafkaError").await;
    let message = condition(&kt, "Ready").unwrap().message.clone().unwrap();
    assert!(message.contains("INVALID_CONFIG"), "{message}");
    assert!(message.contains("sometimes"), "{message}");

    // A value central cannot read.
    op.apply_topic(
        0,
        "t",
        json!({"topicName": topic, "partitions": 4, "replicas": 1,
               "config": {"cleanup.policy": {"not": "a value"}}}),
        json!({}),
    )
    .await;
    let kt = op.wait_not_ready(0, "t", "InvalidResource").await;
    let message = condition(&kt, "Ready").unwrap().message.clone().unwrap();
    assert!(message.contains("cleanup.policy"), "{message}");

    // A topic without the cluster label, and one naming no Kafka.
    op.apply(
        0,
        json!({"apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaTopic",
               "metadata": {"name": "unlabelled"}, "spec": {"partitions": 1}}),
    )
    .await;
    op.wait_not_ready(0, "unlabelled", "MissingClusterLabel")
        .await;
    op.apply_topic(
        0,
        "nowhere",
        json!({"partitions": 1}),
        json!({"labels": {"strimzi.io/cluster": "no-such-kafka"}}),
    )
    .await;
    let kt = op.wait_not_ready(0, "nowhere", "KafkaNotFound").await;
    assert!(
        condition(&kt, "Ready")
            .unwrap()
            .message
            .as_deref()
            .unwrap()
            .contains("no-such-kafka")
    );

    // Fixed: Ready again.
    op.apply_topic(
        0,
        "t",
        json!({"topicName": topic, "partitions": 4, "replicas": 1}),
        json!({}),
    )
    .await;
    op.wait_ready(0, "t").await;
    assert!(
        op.metric("kstretch_central_topic_reconciliations_failed_total")
            .await
            .is_some()
    );
    op.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmanaged_paused_and_deletions_that_keep_or_drop_the_topic() {
    let op = TopicOperator::start("topics-deletion", 1, &bootstrap(), &[]).await;
    let ns = op.ns(0).to_owned();
    let kept = format!("{ns}-kept");
    op.apply_topic(
        0,
        "kept",
        json!({"topicName": kept, "partitions": 1, "replicas": 1}),
        json!({}),
    )
    .await;
    op.wait_ready(0, "kept").await;

    // spec.managed: false → Unmanaged; deleting it then leaves the topic in Kafka.
    op.apply_topic(
        0,
        "kept",
        json!({"topicName": kept, "partitions": 1, "replicas": 1, "managed": false}),
        json!({}),
    )
    .await;
    let kt = op
        .wait_topic(0, "kept", "Unmanaged", |kt| {
            topics::reconciled(kt) && condition(kt, "Unmanaged").is_some_and(|c| c.status == "True")
        })
        .await;
    assert!(condition(&kt, "Ready").is_none());
    assert_eq!(kt.status.as_ref().unwrap().topic_name, None);
    op.delete_topic(0, "kept").await;
    assert!(replicas(&bootstrap(), &kept).is_some(), "the topic stays");

    // Paused: changes wait; unpaused, they apply.
    let paused = format!("{ns}-paused");
    op.apply_topic(
        0,
        "paused",
        json!({"topicName": paused, "partitions": 1, "replicas": 1}),
        json!({}),
    )
    .await;
    op.wait_ready(0, "paused").await;
    op.apply_topic(
        0,
        "paused",
        json!({"topicName": paused, "partitions": 3, "replicas": 1}),
        json!({"annotations": {"strimzi.io/pause-reconciliation": "true"}}),
    )
    .await;
    op.wait_topic(0, "paused", "ReconciliationPaused", |kt| {
        topics::reconciled(kt)
            && condition(kt, "ReconciliationPaused").is_some_and(|c| c.status == "True")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(replicas(&bootstrap(), &paused).unwrap().len(), 1);
    assert!(
        op.metric("kstretch_central_topic_resources_paused")
            .await
            .is_some()
    );
    op.apply_topic(
        0,
        "paused",
        json!({"topicName": paused, "partitions": 3, "replicas": 1}),
        json!({"annotations": {"strimzi.io/pause-reconciliation": "false"}}),
    )
    .await;
    op.wait_ready(0, "paused").await;
    assert_eq!(replicas(&bootstrap(), &paused).unwrap().len(), 3);

    // A topic already deleted in Kafka (UNKNOWN_TOPIC_ID) is no error.
    let admin = kstretch_tests::kafka::admin(&bootstrap());
    admin
        .delete_topics(&[paused.as_str()], &rdkafka::admin::AdminOptions::new())
        .await
        .unwrap();
    op.delete_topic(0, "paused").await;

    // Kafka unreachable during deletion: KafkaError, the finalizer stays; reachable again, the
    // deletion completes.
    let doomed = format!("{ns}-doomed");
    op.apply_topic(
        0,
        "doomed",
        json!({"topicName": doomed, "partitions": 1, "replicas": 1}),
        json!({}),
    )
    .await;
    op.wait_ready(0, "doomed").await;
    let kafkas: kube::Api<kstretch_api::Kafka> = op.namespaces[0].api();
    let annotate = |servers: String| json!({"metadata": {"annotations": {"kstretch.io/admin-bootstrap-servers": servers}}});
    let dead = format!("127.0.0.1:{}", kstretch_tests::process::free_port());
    kafkas
        .patch(
            KAFKA,
            &PatchParams::default(),
            &Patch::Merge(annotate(dead)),
        )
        .await
        .unwrap();
    op.topics(0)
        .delete("doomed", &Default::default())
        .await
        .unwrap();
    let kt = op
        .wait_topic(0, "doomed", "Deletion failed", |kt| {
            condition(kt, "Ready").is_some_and(|c| {
                c.reason.as_deref() == Some("KafkaError")
                    && c.message
                        .as_deref()
                        .is_some_and(|m| m.starts_with("Deletion failed"))
            })
        })
        .await;
    assert!(kt.metadata.deletion_timestamp.is_some());
    assert!(replicas(&bootstrap(), &doomed).is_some());
    kafkas
        .patch(
            KAFKA,
            &PatchParams::default(),
            &Patch::Merge(annotate(bootstrap())),
        )
        .await
        .unwrap();
    kstretch_tests::wait::wait_for_deletion(&op.topics(0), "doomed", Duration::from_secs(90)).await;
    wait_kafka("the doomed topic deleted", &doomed, |p, _| {
        p.is_none().then_some(())
    })
    .await;

    // Clean up the topic left on purpose.
    admin
        .delete_topics(&[kept.as_str()], &rdkafka::admin::AdminOptions::new())
        .await
        .unwrap();
    op.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alterable_configs_warns_about_ignored_keys() {
    let op = TopicOperator::start(
        "topics-alterable",
        1,
        &bootstrap(),
        &["--topic-alterable-configs", "retention.ms"],
    )
    .await;
    let topic = format!("{}-a", op.ns(0));
    op.apply_topic(
        0,
        "a",
        json!({"topicName": topic, "partitions": 1, "replicas": 1,
               "config": {"retention.ms": 100000}}),
        json!({}),
    )
    .await;
    op.wait_ready(0, "a").await;
    op.apply_topic(
        0,
        "a",
        json!({"topicName": topic, "partitions": 1, "replicas": 1,
               "config": {"retention.ms": 200000, "segment.ms": 600000}}),
        json!({}),
    )
    .await;
    let kt = op
        .wait_topic(0, "a", "InvalidConfig warning", |kt| {
            topics::reconciled(kt) && warning(kt, "InvalidConfig").is_some()
        })
        .await;
    let message = warning(&kt, "InvalidConfig")
        .unwrap()
        .message
        .clone()
        .unwrap();
    assert!(message.contains("segment.ms"), "{message}");
    assert!(!message.contains("retention.ms"), "{message}");
    wait_kafka("only retention.ms altered", &topic, |_, c| {
        (c.get("retention.ms").map(String::as_str) == Some("200000")
            && !c.contains_key("segment.ms"))
        .then_some(())
    })
    .await;
    op.finish().await;
}
