//! A stretched Kafka on pods that really run: the environment's real nodes (a kubelet and
//! containerd per cluster, `tests/env/nodes.sh`) run the local `apache/kafka` image, and the
//! nodes of alpha and beta reach each other through per-node NodePort Services at each
//! cluster's node address (`nodeport` addressing). Kafka's own protocol, through rdkafka, is
//! the judge: what is produced through a broker of one cluster is consumed through the other.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kstretch_api::Kafka;
use kstretch_tests::TestEnv;
use kstretch_tests::kafka::{broker_ids, consume, create_topic, produce};
use kstretch_tests::stretch::{ALPHA, BETA, Stretch};
use kstretch_tests::wait::{Seen, wait_for};
use kube::Api;
use kube::api::{ListParams, LogParams};
use serde_json::{Value, json};

/// JVMs start slowly on two busy cores; a whole cluster takes a minute or two.
const START_TIMEOUT: Duration = Duration::from_secs(300);

fn real_node_ip(alias: &str) -> String {
    TestEnv::get()
        .clusters
        .iter()
        .find(|c| c.name == alias)
        .map(|c| c.real_node_ip.clone())
        .unwrap_or_else(|| panic!("no cluster {alias} in the environment"))
}

/// The `Kafka`: per-node NodePort Services, reached at each cluster's real node.
fn kafka() -> Value {
    json!({
        "apiVersion": "kafka.strimzi.io/v1", "kind": "Kafka",
        "metadata": {"name": "live", "annotations": {
            "kstretch.io/addressing": "nodeport",
            "kstretch.io/node-port-hosts":
                format!("{ALPHA}={},{BETA}={}", real_node_ip(ALPHA), real_node_ip(BETA)),
        }},
        "spec": {"kafka": {
            "listeners": [{"name": "plain", "port": 9092, "type": "internal", "tls": false}],
            "config": {
                "default.replication.factor": 3, "min.insync.replicas": 2,
                "offsets.topic.replication.factor": 3,
                "transaction.state.log.replication.factor": 3,
                "transaction.state.log.min.isr": 2,
                "num.network.threads": 2, "num.io.threads": 2, "background.threads": 2
            }
        }}
    })
}

/// A pool of combined nodes in `alias`, placed on the real node as a user places pods: a node
/// selector and a toleration in `template.pod`.
fn pool(name: &str, replicas: i32, alias: &str) -> Value {
    let mut annotations = json!({});
    if alias != ALPHA {
        annotations["strimzi.io/stretch-cluster-alias"] = json!(alias);
    }
    json!({
        "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaNodePool",
        "metadata": {"name": name, "labels": {"strimzi.io/cluster": "live"},
                     "annotations": annotations},
        "spec": {
            "replicas": replicas, "roles": ["controller", "broker"],
            "storage": {"type": "ephemeral"},
            "jvmOptions": {"-Xms": "128m", "-Xmx": "320m"},
            "template": {"pod": {
                "nodeSelector": {"kstretch.test/node": "real"},
                "tolerations": [{"key": "kstretch.test/real-node", "operator": "Exists",
                                 "effect": "NoSchedule"}]
            }}
        }
    })
}

fn is_ready(k: &Kafka) -> bool {
    k.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

/// The `plain` listener's bootstrap addresses at `host` (the brokers of one cluster).
fn bootstrap_at(k: &Kafka, host: &str) -> String {
    let listener = k
        .status
        .as_ref()
        .and_then(|s| {
            s.listeners
                .iter()
                .find(|l| l.name.as_deref() == Some("plain"))
        })
        .unwrap_or_else(|| panic!("no plain listener in the status: {:#?}", k.status));
    let servers: Vec<&str> = listener
        .bootstrap_servers
        .as_deref()
        .unwrap_or_default()
        .split(',')
        .filter(|s| s.starts_with(&format!("{host}:")))
        .collect();
    assert!(!servers.is_empty(), "no broker at {host}: {listener:?}");
    servers.join(",")
}

/// Every pod of the test in `alias`: running, ready, on that cluster's real node.
async fn running_pods(stretch: &Stretch, alias: &str, count: usize) -> Vec<Pod> {
    let pods: Api<Pod> = stretch.api(alias);
    let pods = pods.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(pods.len(), count, "pods in {alias}");
    for pod in &pods {
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(
            spec.node_name.as_deref(),
            Some(format!("{alias}-real-0").as_str()),
            "pod {:?} is not on the real node",
            pod.metadata.name
        );
        let status = pod.status.as_ref().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
    }
    pods
}

/// `example` becomes Ready on real pods in both clusters, its brokers answer Kafka's clients,
/// and records produced through alpha's brokers are consumed through beta's.
#[tokio::test]
async fn a_stretched_kafka_on_real_pods_serves_produce_and_consume_across_clusters() {
    let stretch = Stretch::start("running-stretch", &[]).await;
    stretch.apply(kafka()).await;
    stretch.apply(pool("a", 2, ALPHA)).await;
    stretch.apply(pool("b", 1, BETA)).await;
    let k: Kafka = stretch
        .wait_in_alpha("live", "Ready on real pods", START_TIMEOUT, is_ready)
        .await;

    let alpha_pods = running_pods(&stretch, ALPHA, 2).await;
    running_pods(&stretch, BETA, 1).await;
    // Kafka's own log, read as `kubectl logs` reads it (kubelet through the apiserver).
    let pods: Api<Pod> = stretch.api(ALPHA);
    let name = alpha_pods[0].metadata.name.clone().unwrap();
    let log = pods.logs(&name, &LogParams::default()).await.unwrap();
    assert!(log.contains("Kafka Server started"), "{name}'s log:\n{log}");

    let in_alpha = bootstrap_at(&k, &real_node_ip(ALPHA));
    let in_beta = bootstrap_at(&k, &real_node_ip(BETA));
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
    stretch.finish().await;
}
