//! End-to-end tests of the topic operator: the real central against cluster alpha's apiserver
//! and the environment's real Kafka, with Kafka's state read independently through `rdkafka`.
//!
//! Topic names carry the test namespace, which is unique per run, so tests share the Kafka
//! (and the delete.topic.enable=false Kafka, whose topics stay forever). The replication
//! throttle one test sets on the shared brokers slows only its own topic's replicas, and is
//! taken off even when the test fails.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use kstretch_api::KafkaTopic;
use kstretch_api::topic::ReplicasChangeState;
use kstretch_tests::TestEnv;
use kstretch_tests::topics::{
    self, BrokerThrottle, KAFKA, TopicOperator, add_partitions, condition, in_sync_replicas,
    reconciled, replicas, set_topic_configs, topic_configs, warning,
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
    let annotate = |servers: String| json!({"metadata": {"annotations": {"kstretch.io/admin-bootstrap-servers": servers, "kstretch.io/admin-security-protocol": "PLAINTEXT"}}});
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

/// The `Ready` condition's message (empty when there is none).
fn ready_message(kt: &KafkaTopic) -> String {
    condition(kt, "Ready")
        .and_then(|c| c.message.clone())
        .unwrap_or_default()
}

/// How many times central made Admin call `call`, successful or not (`None`: never).
async fn calls(op: &TopicOperator, call: &str) -> Option<f64> {
    let series = "kstretch_central_topic_call_duration_seconds_count";
    let mut total = None;
    for outcome in ["ok", "error"] {
        let labels = format!("{{call=\"{call}\",outcome=\"{outcome}\"}}");
        if let Some(n) = op.metric(&format!("{series}{labels}")).await {
            total = Some(total.unwrap_or(0.0) + n);
        }
    }
    total
}

fn is_ready(kt: &KafkaTopic) -> bool {
    reconciled(kt) && condition(kt, "Ready").is_some_and(|c| c.status == "True")
}

/// Waits until `name` (namespace 0) is Ready with no replication-factor change left in its
/// status, and Kafka shows every partition of `topic` with `rf` replicas.
async fn wait_replication_factor(op: &TopicOperator, name: &str, topic: &str, rf: usize) {
    let bootstrap = bootstrap();
    op.wait_topic(
        0,
        name,
        &format!("{name} Ready with replication factor {rf} in Kafka"),
        |kt| {
            is_ready(kt)
                && kt.status.as_ref().unwrap().replicas_change.is_none()
                && replicas(&bootstrap, topic)
                    .is_some_and(|p| !p.is_empty() && p.iter().all(|r| r.len() == rf))
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_disabled_in_kafka_leaves_the_topic_unmanaged() {
    let env = TestEnv::get();
    let op = TopicOperator::start("topics-nodelete", 1, &env.kafka_nodelete_bootstrap, &[]).await;
    // The namespace is unique per run, and so is the topic, which can never be deleted.
    let topic = format!("{}-undeletable", op.ns(0));
    op.apply_topic(
        0,
        "undeletable",
        json!({"topicName": topic, "partitions": 1, "replicas": 1}),
        json!({}),
    )
    .await;
    let kt = op.wait_ready(0, "undeletable").await;
    assert_eq!(
        kt.status.as_ref().unwrap().cluster_id.as_deref(),
        Some(env.kafka_nodelete_cluster_id.as_str())
    );
    assert!(replicas(&env.kafka_nodelete_bootstrap, &topic).is_some());

    // Kafka answers TOPIC_DELETION_DISABLED: the finalizer goes all the same, the topic stays.
    op.delete_topic(0, "undeletable").await;
    assert!(
        replicas(&env.kafka_nodelete_bootstrap, &topic).is_some(),
        "the topic stays in the cluster that refuses deletion"
    );
    op.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_topic_one_resource_across_namespaces() {
    let op = TopicOperator::start("topics-conflict", 2, &bootstrap(), &[]).await;
    let ns0 = op.ns(0).to_owned();
    let topic = format!("{ns0}-shared");
    let spec = json!({"topicName": topic, "partitions": 1, "replicas": 1});
    op.apply_topic(0, "first", spec.clone(), json!({})).await;
    op.wait_ready(0, "first").await;

    // Creation timestamps have one-second resolution: "second" is strictly younger.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // The Kafka lives in namespace 0; the label resolves to the only Kafka of that name.
    op.apply_topic(1, "second", spec.clone(), json!({})).await;
    let kt = op.wait_not_ready(1, "second", "ResourceConflict").await;
    let message = ready_message(&kt);
    assert!(message.contains(&format!("{ns0}/first")), "{message}");
    assert!(message.contains(&topic), "{message}");
    let first = op.topics(0).get("first").await.unwrap();
    assert!(is_ready(&first), "{:?}", first.status);

    // Several resources name the topic: deleting the owner does not delete the topic.
    op.delete_topic(0, "first").await;
    assert!(
        replicas(&bootstrap(), &topic).is_some(),
        "the topic stays while another KafkaTopic names it"
    );
    // The conflict clears without a change to "second".
    let generation = kt.metadata.generation;
    let kt = op.wait_ready(1, "second").await;
    assert_eq!(kt.metadata.generation, generation);
    assert_eq!(
        kt.status.as_ref().unwrap().topic_name.as_deref(),
        Some(topic.as_str())
    );

    // The last one deleted takes the topic with it.
    op.delete_topic(1, "second").await;
    wait_kafka("the shared topic deleted", &topic, |p, _| {
        p.is_none().then_some(())
    })
    .await;
    op.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_policy_refuses_only_the_violating_resource() {
    let mut op = TopicOperator::prepare("topics-policy", 2, &bootstrap(), &[]).await;
    let (ns0, ns1) = (op.ns(0).to_owned(), op.ns(1).to_owned());
    let dir = std::env::temp_dir().join(format!("kstretch-{ns0}"));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("policy.yaml");
    std::fs::write(
        &policy,
        format!(
            "- namespace: {ns0}\n  topicNamePrefixes: [\"{ns0}-a.\"]\n\
             - namespace: {ns1}\n  otherTopics: true\n"
        ),
    )
    .unwrap();
    op.args.push("--topic-namespace-policy".into());
    op.args.push(policy.display().to_string());
    op.start_central();
    let allowed = format!("{ns0}-a.x");

    // Namespace 1 names a topic of namespace 0's prefix: refused, nothing in Kafka.
    op.apply_topic(
        1,
        "intruder",
        json!({"topicName": allowed, "partitions": 1, "replicas": 1}),
        json!({}),
    )
    .await;
    let kt = op
        .wait_not_ready(1, "intruder", "TopicNamespacePolicy")
        .await;
    let message = ready_message(&kt);
    assert!(message.contains(&ns0), "{message}");
    assert!(message.contains(&allowed), "{message}");
    assert!(replicas(&bootstrap(), &allowed).is_none());

    // Namespace 0 may: the refused resource does not block it (no ResourceConflict).
    op.apply_topic(
        0,
        "owner",
        json!({"topicName": allowed, "partitions": 1, "replicas": 1}),
        json!({}),
    )
    .await;
    op.wait_ready(0, "owner").await;
    assert!(replicas(&bootstrap(), &allowed).is_some());

    // Namespace 0 outside its prefixes: refused.
    let outside = format!("{ns0}-b");
    op.apply_topic(
        0,
        "outside",
        json!({"topicName": outside, "partitions": 1, "replicas": 1}),
        json!({}),
    )
    .await;
    let kt = op
        .wait_not_ready(0, "outside", "TopicNamespacePolicy")
        .await;
    let message = ready_message(&kt);
    assert!(message.contains(&outside), "{message}");
    assert!(message.contains(&ns0), "{message}");
    assert!(replicas(&bootstrap(), &outside).is_none());

    // The refused resource keeps its refusal; deleting it leaves the owner's topic alone.
    let kt = op.topics(1).get("intruder").await.unwrap();
    assert_eq!(
        condition(&kt, "Ready").unwrap().reason.as_deref(),
        Some("TopicNamespacePolicy")
    );
    op.delete_topic(1, "intruder").await;
    assert!(replicas(&bootstrap(), &allowed).is_some());
    op.finish().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_illegal_namespace_policy_stops_central_at_start_up() {
    let env = TestEnv::get();
    let dir = std::env::temp_dir().join(format!(
        "kstretch-illegal-policy-{}-{}",
        std::process::id(),
        kstretch_tests::process::free_port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("overlapping.yaml");
    std::fs::write(
        &policy,
        "- namespace: team-a\n  topicNamePrefixes: [x.]\n\
         - namespace: team-b\n  topicNamePrefixes: [x.y]\n",
    )
    .unwrap();
    let mut child = std::process::Command::new(kstretch_tests::process::binary("kstretch-central"))
        .arg("--kubeconfig")
        .arg(&env.clusters[0].kubeconfig)
        .arg("--topic-namespace-policy")
        .arg(&policy)
        .args([
            "--http-addr",
            &format!("127.0.0.1:{}", kstretch_tests::process::free_port()),
        ])
        .args([
            "--grpc-addr",
            &format!("127.0.0.1:{}", kstretch_tests::process::free_port()),
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start central");
    let exited = wait_for("central to exit", Duration::from_secs(10), || {
        let status = child.try_wait().expect("try_wait");
        async move {
            match status {
                Some(status) => Seen::Done(status),
                None => Seen::NotYet("still running".into()),
            }
        }
    })
    .await;
    let output = child.wait_with_output().expect("central's output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!exited.success(), "{exited}: {text}");
    assert!(text.contains("overlapping.yaml"), "{text}");
    assert!(text.contains("disjoint"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_of_another_cluster_is_ignored() {
    let op = TopicOperator::start(
        "topics-foreign",
        1,
        &bootstrap(),
        &["--topic-full-reconcile-secs", "2"],
    )
    .await;
    let topic = format!("{}-foreign", op.ns(0));
    let spec =
        |partitions: i32| json!({"topicName": topic, "partitions": partitions, "replicas": 1});
    op.apply_topic(0, "foreign", spec(1), json!({})).await;
    op.wait_ready(0, "foreign").await;
    let status_cluster = |id: &str| Patch::Merge(json!({"status": {"clusterId": id}}));

    // Another operator instance, managing another Kafka cluster, wrote the status: central
    // leaves the resource alone, spec changes and timed passes included.
    op.topics(0)
        .patch_status(
            "foreign",
            &PatchParams::default(),
            &status_cluster("another-cluster"),
        )
        .await
        .unwrap();
    op.apply_topic(0, "foreign", spec(3), json!({})).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(replicas(&bootstrap(), &topic).unwrap().len(), 1);
    let kt = op.topics(0).get("foreign").await.unwrap();
    let status = kt.status.as_ref().unwrap();
    assert_eq!(status.cluster_id.as_deref(), Some("another-cluster"));
    assert_ne!(
        status.observed_generation, kt.metadata.generation,
        "not even the status is written"
    );
    assert!(
        op.metric("kstretch_central_topic_foreign_cluster_resources_total")
            .await
            .unwrap_or(0.0)
            > 0.0
    );

    // The status names this cluster again: the next timed pass takes the resource back.
    op.topics(0)
        .patch_status(
            "foreign",
            &PatchParams::default(),
            &status_cluster(&TestEnv::get().kafka_cluster_id),
        )
        .await
        .unwrap();
    op.wait_ready(0, "foreign").await;
    assert_eq!(replicas(&bootstrap(), &topic).unwrap().len(), 3);
    op.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_factor_changes_by_reassignment() {
    let op = TopicOperator::start("topics-rf", 1, &bootstrap(), &[]).await;
    let topic = format!("{}-rf", op.ns(0));
    let spec = |replicas: i32, min_insync_replicas: Option<i32>| {
        let mut spec = json!({"topicName": topic, "partitions": 3, "replicas": replicas});
        if let Some(n) = min_insync_replicas {
            spec["config"] = json!({"min.insync.replicas": n});
        }
        spec
    };
    op.apply_topic(0, "rf", spec(1, None), json!({})).await;
    wait_replication_factor(&op, "rf", &topic, 1).await;

    // Up, then down.
    op.apply_topic(0, "rf", spec(3, None), json!({})).await;
    wait_replication_factor(&op, "rf", &topic, 3).await;
    op.apply_topic(0, "rf", spec(2, None), json!({})).await;
    wait_replication_factor(&op, "rf", &topic, 2).await;

    // Fewer replicas than min.insync.replicas: applied, with a warning.
    op.apply_topic(0, "rf", spec(2, Some(3)), json!({})).await;
    let kt = op
        .wait_topic(0, "rf", "ReplicasBelowMinInsyncReplicas warning", |kt| {
            reconciled(kt) && warning(kt, "ReplicasBelowMinInsyncReplicas").is_some()
        })
        .await;
    assert!(is_ready(&kt), "{:?}", kt.status);
    let message = warning(&kt, "ReplicasBelowMinInsyncReplicas")
        .unwrap()
        .message
        .clone()
        .unwrap();
    assert!(message.contains("min.insync.replicas (3)"), "{message}");

    // More replicas than brokers (the Kafka has 3): pending, with the reason.
    op.apply_topic(0, "rf", spec(4, None), json!({})).await;
    let kt = op.wait_not_ready(0, "rf", "NotEnoughBrokers").await;
    assert!(warning(&kt, "ReplicasBelowMinInsyncReplicas").is_none());
    let change = kt.status.as_ref().unwrap().replicas_change.clone().unwrap();
    assert_eq!(change.state, Some(ReplicasChangeState::Pending));
    assert_eq!(change.target_replicas, Some(4));
    let message = change.message.unwrap_or_default();
    assert!(message.contains("only 3"), "{message}");
    assert!(
        replicas(&bootstrap(), &topic)
            .unwrap()
            .iter()
            .all(|r| r.len() == 2)
    );

    // Back within reach: Ready, the pending change gone.
    op.apply_topic(0, "rf", spec(2, None), json!({})).await;
    wait_replication_factor(&op, "rf", &topic, 2).await;
    op.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replication_factor_change_in_progress_survives_a_restart_of_central() {
    let mut op = TopicOperator::start("topics-rf-restart", 1, &bootstrap(), &[]).await;
    let topic = format!("{}-slow", op.ns(0));
    // Central removes topic configs the spec does not name, so the throttled replicas are in
    // the spec.
    let spec = |replicas: i32| {
        json!({"topicName": topic, "partitions": 3, "replicas": replicas,
               "config": {"leader.replication.throttled.replicas": "*",
                          "follower.replication.throttled.replicas": "*"}})
    };
    op.apply_topic(0, "slow", spec(1), json!({})).await;
    wait_replication_factor(&op, "slow", &topic, 1).await;

    // Data to copy (10 MiB), copied at 1 KiB/s: the reassignment runs until the throttle goes.
    let value = "x".repeat(64 * 1024);
    let records: Vec<(String, String)> =
        (0..160).map(|i| (format!("k{i}"), value.clone())).collect();
    kstretch_tests::kafka::produce(&bootstrap(), &topic, &records).await;
    let throttle = BrokerThrottle::start(&bootstrap(), 1024).await;

    op.apply_topic(0, "slow", spec(2), json!({})).await;
    let ongoing = |kt: &KafkaTopic| {
        reconciled(kt)
            && kt
                .status
                .as_ref()
                .and_then(|s| s.replicas_change.as_ref())
                .is_some_and(|c| {
                    c.state == Some(ReplicasChangeState::Ongoing) && c.target_replicas == Some(2)
                })
    };
    op.wait_topic(0, "slow", "replicasChange ongoing", ongoing)
        .await;
    let behind = |isr: Option<Vec<Vec<i32>>>| isr.unwrap().iter().any(|p| p.len() < 2);
    assert!(
        behind(in_sync_replicas(&bootstrap(), &topic)),
        "a new replica is still catching up"
    );
    assert!(calls(&op, "alter_reassignments").await.is_some());

    // A new central learns the change from Kafka: still ongoing, nothing submitted again.
    op.stop_central();
    op.start_central();
    wait_for(
        "the new central to look at the reassignments",
        Duration::from_secs(60),
        || async {
            match calls(&op, "list_reassignments").await {
                Some(n) if n >= 2.0 => Seen::Done(()),
                other => Seen::NotYet(format!("{other:?}\n{}", op.logs())),
            }
        },
    )
    .await;
    let kt = op.topics(0).get("slow").await.unwrap();
    assert!(ongoing(&kt), "{:?}", kt.status);
    assert!(behind(in_sync_replicas(&bootstrap(), &topic)));
    assert!(
        calls(&op, "alter_reassignments").await.is_none(),
        "the running reassignment is not submitted again"
    );

    // Throttle off: the copy ends, and so does the change.
    throttle.remove().await;
    wait_replication_factor(&op, "slow", &topic, 2).await;
    assert!(
        in_sync_replicas(&bootstrap(), &topic)
            .unwrap()
            .iter()
            .all(|p| p.len() == 2)
    );
    op.finish().await;
}

/// A 1×1 `KafkaTopic` `name` for the topic `<namespace>-<name>` (unique per run).
fn topic_object(
    namespace: &str,
    name: &str,
    labels: serde_json::Value,
    annotations: serde_json::Value,
) -> KafkaTopic {
    serde_json::from_value(json!({
        "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaTopic",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"topicName": format!("{namespace}-{name}"), "partitions": 1, "replicas": 1}
    }))
    .expect("a KafkaTopic")
}

fn finalizers(kt: &KafkaTopic) -> Vec<String> {
    kt.metadata.finalizers.clone().unwrap_or_default()
}

/// The chart's MutatingAdmissionPolicy puts the finalizer on at create, so central skips that
/// write; outside the policy's namespaces, and for resources no operator would take (no cluster
/// label, unmanaged), nothing is added and central adds the finalizer itself where it must.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_policy_adds_the_finalizer_at_create_and_central_skips_that_write() {
    let mut op = TopicOperator::prepare("topics-admission", 2, &bootstrap(), &[]).await;
    let policy = format!("kstretch-topic-finalizer-{}", op.ns(0));
    topics::install_finalizer_policy(&policy, &[op.ns(0)]);
    let cluster_label = json!({"strimzi.io/cluster": topics::KAFKA});

    let selected = op.topics(0);
    topics::wait_finalizer_policy(&selected).await;

    // Central is not running yet: whatever finalizer is there came from admission.
    let post = kube::api::PostParams::default();
    let a = selected
        .create(
            &post,
            &topic_object(op.ns(0), "a", cluster_label.clone(), json!({})),
        )
        .await
        .unwrap();
    assert_eq!(finalizers(&a), ["strimzi.io/topic-operator"]);
    let unlabelled = selected
        .create(
            &post,
            &topic_object(op.ns(0), "unlabelled", json!({}), json!({})),
        )
        .await
        .unwrap();
    assert!(finalizers(&unlabelled).is_empty(), "{unlabelled:?}");
    let unmanaged = selected
        .create(
            &post,
            &topic_object(
                op.ns(0),
                "unmanaged",
                cluster_label.clone(),
                json!({"strimzi.io/managed": "false"}),
            ),
        )
        .await
        .unwrap();
    assert!(finalizers(&unmanaged).is_empty(), "{unmanaged:?}");
    let b = op
        .topics(1)
        .create(
            &post,
            &topic_object(op.ns(1), "b", cluster_label.clone(), json!({})),
        )
        .await
        .unwrap();
    assert!(finalizers(&b).is_empty(), "not a selected namespace: {b:?}");

    op.start_central();
    op.wait_ready(0, "a").await;
    op.wait_not_ready(0, "unlabelled", "MissingClusterLabel")
        .await;
    op.wait_topic(0, "unmanaged", "KafkaTopic unmanaged Unmanaged", |kt| {
        reconciled(kt) && condition(kt, "Unmanaged").is_some_and(|c| c.status == "True")
    })
    .await;
    // Central added exactly one finalizer: b's, in the namespace the policy does not select.
    let b = op.wait_ready(1, "b").await;
    assert_eq!(finalizers(&b), ["strimzi.io/topic-operator"]);
    let added =
        r#"kstretch_central_topic_call_duration_seconds_count{call="add_finalizer",outcome="ok"}"#;
    assert_eq!(op.metric(added).await, Some(1.0), "{}", op.logs());

    // The finalizer from admission works like central's own: deleting removes the topic.
    let topic = a.spec.topic_name.clone().expect("topicName");
    assert!(
        replicas(&bootstrap(), &topic).is_some(),
        "topic {topic} in Kafka"
    );
    op.delete_topic(0, "a").await;
    wait_kafka("topic a deleted from Kafka", &topic, |partitions, _| {
        partitions.is_none().then_some(())
    })
    .await;

    topics::delete_finalizer_policy(&policy);
    op.finish().await;
}
