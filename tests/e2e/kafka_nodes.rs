//! Central against a real Kafka that it configured: the per-node configurations central puts
//! into the member cluster's ConfigMaps are booted as a private KRaft cluster (addresses mapped
//! to loopback, nothing else changed), and central manages that cluster through its admin
//! client: a broker's roll is held back while it would take a partition below
//! `min.insync.replicas`, and a removed broker is unregistered from KRaft, as Kafka's own
//! tools confirm.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::events::v1::Event;
use kstretch_api::{Kafka, KafkaNodePool};
use kstretch_core::kraft::NodeConfig;
use kstretch_tests::events::{describe, note, wait_event};
use kstretch_tests::kafka::registered_by_kafkas_tool;
use kstretch_tests::kraft::PrivateKafka;
use kstretch_tests::ready::kafka_deployed as is_deployed;
use kstretch_tests::stretch::{ALPHA, Stretch};
use kstretch_tests::wait::{Seen, wait_for};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(120);

/// Kafka options for a small test machine, set the way a user would in the `Kafka`.
fn small_machine_config() -> Value {
    json!({
        "default.replication.factor": 3, "min.insync.replicas": 2,
        "offsets.topic.replication.factor": 3, "offsets.topic.num.partitions": 3,
        "transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2,
        "transaction.state.log.num.partitions": 3,
        "auto.create.topics.enable": false, "group.initial.rebalance.delay.ms": 0,
        "num.network.threads": 2, "num.io.threads": 2, "background.threads": 2,
        "num.replica.fetchers": 1, "num.recovery.threads.per.data.dir": 1,
        "log.segment.bytes": 8388608, "log.cleaner.dedupe.buffer.size": 8388608,
        "log.cleaner.threads": 1, "metadata.log.segment.bytes": 8388608,
        "broker.session.timeout.ms": 6000, "broker.heartbeat.interval.ms": 1000,
        "replica.lag.time.max.ms": 5000
    })
}

/// Java properties text (as central writes it) back to a map.
fn parse_properties(text: &str) -> BTreeMap<String, String> {
    let unescape = |s: &str| {
        let mut out = String::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some(other) => out.push(other),
                    None => {}
                }
            } else {
                out.push(c);
            }
        }
        out
    };
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .map(|line| {
            let mut escaped = false;
            let split = line
                .char_indices()
                .find(|(_, c)| {
                    let hit = !escaped && (*c == '=' || *c == ':');
                    escaped = !escaped && *c == '\\';
                    hit
                })
                .map(|(i, _)| i)
                .unwrap_or(line.len());
            let (k, v) = line.split_at(split);
            (
                unescape(k.trim()),
                unescape(v.get(1..).unwrap_or_default().trim_start()),
            )
        })
        .collect()
}

fn conditions(k: &Kafka) -> Vec<kstretch_api::Condition> {
    k.status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default()
}

fn warning(k: &Kafka, reason: &str) -> Option<String> {
    conditions(k)
        .into_iter()
        .find(|c| c.type_ == "Warning" && c.reason.as_deref() == Some(reason))
        .and_then(|c| c.message)
}

async fn wait_kafka(stretch: &Stretch, what: &str, check: impl Fn(&Kafka) -> bool) -> Kafka {
    stretch
        .wait_in_alpha("my-cluster", what, TIMEOUT, check)
        .await
}

/// `(uid, revision)` of every pod in alpha by name.
async fn pods(stretch: &Stretch) -> BTreeMap<String, (String, String)> {
    let api: Api<Pod> = stretch.api(ALPHA);
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let revision =
                p.metadata.annotations.clone().unwrap_or_default()["strimzi.io/revision"].clone();
            (
                p.metadata.name.clone().unwrap(),
                (p.metadata.uid.clone().unwrap(), revision),
            )
        })
        .collect()
}

#[tokio::test]
async fn central_rolls_within_min_isr_and_unregisters_a_removed_broker_of_the_kafka_it_configured()
{
    let stretch = Stretch::start("kafka-nodes", &[]).await;
    stretch
        .apply(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "Kafka",
            // The private cluster formats with the cluster ID alone, which a static quorum
            // allows; this test is about rolling and unregistering, not the quorum.
            "metadata": {"name": "my-cluster",
                         "annotations": {"kstretch.io/controller-quorum": "static"}},
            "spec": {"kafka": {
                "listeners": [{"name": "plain", "port": 9092, "type": "internal", "tls": false}],
                "config": small_machine_config()
            }}
        }))
        .await;
    for (name, role, replicas, ids) in [
        ("controllers", "controller", 1, "[0]"),
        ("brokers", "broker", 3, "[1-3]"),
    ] {
        stretch
            .apply(json!({
                "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaNodePool",
                "metadata": {"name": name, "labels": {"strimzi.io/cluster": "my-cluster"},
                             "annotations": {"strimzi.io/next-node-ids": ids}},
                "spec": {"replicas": replicas, "roles": [role], "storage": {"type": "ephemeral"}}
            }))
            .await;
    }
    let k = wait_kafka(&stretch, "the Kafka to be ready", is_deployed).await;
    let cluster_id = k.status.unwrap().cluster_id.unwrap();

    // Boot exactly what central configured.
    let config_maps: Api<ConfigMap> = stretch.api(ALPHA);
    let mut rendered = BTreeMap::new();
    for (pool, ids) in [("controllers", vec![0]), ("brokers", vec![1, 2, 3])] {
        for id in ids {
            let cm = config_maps
                .get(&format!("my-cluster-{pool}-{id}"))
                .await
                .unwrap();
            let data = cm.data.unwrap();
            assert_eq!(data["cluster.id"], cluster_id);
            rendered.insert(
                id,
                NodeConfig {
                    properties: parse_properties(&data["server.properties"]),
                },
            );
        }
    }
    let mut kafka = PrivateKafka::start(&cluster_id, &rendered).await;
    let bootstrap = kafka.bootstrap();
    let kafkas: Api<Kafka> = stretch.api(ALPHA);
    kafkas
        .patch(
            "my-cluster",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                "kstretch.io/admin-bootstrap-servers": bootstrap,
                // The private nodes' plain listener (they carry the harness's own CA).
                "kstretch.io/admin-security-protocol": "PLAINTEXT"}}})),
        )
        .await
        .unwrap();

    // A topic at min.insync.replicas=2 with broker 3 gone: its ISR is [1, 2], so restarting
    // broker 1 or 2 would take it below the minimum.
    let topic = "guarded";
    let admin = kstretch_tests::kafka::admin(&bootstrap);
    let new = NewTopic::new(topic, 1, TopicReplication::Fixed(3)).set("min.insync.replicas", "2");
    admin
        .create_topics([&new], &AdminOptions::new())
        .await
        .unwrap()[0]
        .as_ref()
        .unwrap();
    kafka.stop_node(3);
    let kadmin = kstretch_kadmin::AdminClient::connect(kstretch_kadmin::AdminConfig::new(
        bootstrap.split(','),
    ))
    .await
    .unwrap();
    wait_for("broker 3 to leave the ISR", TIMEOUT, || async {
        match kadmin.describe_topics(Some(&[topic.to_owned()])).await {
            // Just after the create, the metadata may not list the partition yet.
            Ok(t)
                if t.first()
                    .and_then(|t| t.partitions.first())
                    .is_some_and(|p| p.isr.len() == 2) =>
            {
                Seen::Done(())
            }
            other => Seen::NotYet(format!("{other:?}")),
        }
    })
    .await;

    let before = pods(&stretch).await;
    kafkas
        .patch(
            "my-cluster",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"kafka": {"config": {"num.io.threads": 3}}}})),
        )
        .await
        .unwrap();
    let k = wait_kafka(&stretch, "the roll to stop at brokers 1 and 2", |k| {
        warning(k, "RollingUpdateBlocked").is_some_and(|m| {
            m.contains("my-cluster-brokers-1") && m.contains("my-cluster-brokers-2")
        })
    })
    .await;
    let message = warning(&k, "RollingUpdateBlocked").unwrap();
    assert!(message.contains("guarded-0"), "{message}");
    let mid = pods(&stretch).await;
    for name in ["my-cluster-brokers-1", "my-cluster-brokers-2"] {
        assert_eq!(mid[name], before[name], "{name} was not restarted");
    }
    for name in ["my-cluster-controllers-0", "my-cluster-brokers-3"] {
        wait_for(&format!("{name} to be rolled"), TIMEOUT, || async {
            let now = pods(&stretch).await;
            match now.get(name) {
                Some((uid, revision)) if *uid != before[name].0 && *revision != before[name].1 => {
                    Seen::Done(())
                }
                other => Seen::NotYet(format!("{other:?}")),
            }
        })
        .await;
    }

    // Without the topic nothing holds the roll back.
    let id = kadmin
        .describe_topics(Some(&[topic.to_owned()]))
        .await
        .unwrap()[0]
        .id;
    kadmin.delete_topics_by_id(&[id]).await.unwrap()[0]
        .result
        .as_ref()
        .unwrap();
    wait_kafka(&stretch, "every pod rolled", |k| {
        is_deployed(k) && warning(k, "RollingUpdateBlocked").is_none()
    })
    .await;
    let after = pods(&stretch).await;
    for (name, (uid, revision)) in &after {
        assert_ne!(uid, &before[name].0, "{name} was rolled");
        assert_ne!(revision, &before[name].1, "{name} runs the new revision");
    }

    // Broker 3 is stopped and still registered (fenced); scaling the pool down to 2 removes
    // it, and central unregisters it.
    assert!(registered_by_kafkas_tool(&bootstrap).contains(&3));
    let pools: Api<KafkaNodePool> = stretch.api(ALPHA);
    pools
        .patch(
            "brokers",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}})),
        )
        .await
        .unwrap();
    let k = wait_kafka(&stretch, "broker 3 unregistered", |k| {
        is_deployed(k)
            && k.status
                .as_ref()
                .is_some_and(|s| s.registered_node_ids == [0, 1, 2])
    })
    .await;
    assert!(warning(&k, "UnregistrationPending").is_none());
    let registered = registered_by_kafkas_tool(&bootstrap);
    assert_eq!(
        registered,
        BTreeSet::from([1, 2]),
        "Kafka's own tool lists the brokers"
    );
    assert!(
        stretch
            .central_metric("kstretch_central_kafka_node_unregistrations_total")
            .await
            >= Some(1.0)
    );

    // Each step left an Event on the resource it is about.
    let events: Api<Event> = stretch.api(ALPHA);
    let rolled = wait_event(
        &events,
        "Kafka",
        "my-cluster",
        "PodRolled",
        Duration::from_secs(30),
    )
    .await;
    assert!(
        rolled
            .iter()
            .any(|e| e.note.as_deref().is_some_and(
                |n| n.starts_with("restarted pod my-cluster-controllers-0 in cluster")
            )),
        "{}",
        describe(&rolled)
    );
    let removed = wait_event(
        &events,
        "KafkaNodePool",
        "brokers",
        "NodesRemoved",
        Duration::from_secs(30),
    )
    .await;
    assert!(
        note(&removed).starts_with("nodes [3] removed from pool brokers"),
        "{}",
        describe(&removed)
    );
    let unregistered = wait_event(
        &events,
        "Kafka",
        "my-cluster",
        "NodeUnregistered",
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(
        note(&unregistered),
        "node 3 left the cluster and was unregistered from KRaft"
    );
    drop(kafka);
    stretch.finish().await;
}
