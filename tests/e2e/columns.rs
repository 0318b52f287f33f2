//! End-to-end test of the CRDs' printer columns: `kubectl get k,knp,kt,sps` against the real
//! apiserver (cluster alpha) shows readiness and the important numbers, as Strimzi's do.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use kstretch_tests::crds::{self, FIELD_MANAGER};
use kstretch_tests::{Cluster, TestEnv};
use kube::Api;
use kube::api::{Patch, PatchParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::{Value, json};

/// Applies `object` and writes `status` to its status subresource (as the operator would).
async fn apply_with_status(
    cluster: &Cluster,
    ns: &str,
    plural: &str,
    object: Value,
    status: Value,
) {
    let api_version = object["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.split_once('/').unwrap();
    let kind = object["kind"].as_str().unwrap();
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
    let api: Api<DynamicObject> = Api::namespaced_with(cluster.client.clone(), ns, &resource);
    let name = object["metadata"]["name"].as_str().unwrap().to_owned();
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&object),
    )
    .await
    .unwrap_or_else(|e| panic!("apply {kind} {name}: {e}"));
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": status})),
    )
    .await
    .unwrap_or_else(|e| panic!("status of {kind} {name}: {e}"));
}

fn kubectl_get(kubeconfig: &std::path::Path, ns: &str, kind: &str) -> Vec<Vec<String>> {
    let env = TestEnv::get();
    let kubectl = env
        .bin_dir
        .as_ref()
        .map(|d| d.join("kubectl"))
        .unwrap_or_else(|| "kubectl".into());
    let out = Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["get", kind, "-n", ns])
        .output()
        .expect("run kubectl");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "kubectl get {kind}: {}{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Columns are separated by at least two spaces (names themselves hold single spaces).
    stdout
        .lines()
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

fn ready(status: &str) -> Value {
    json!({"conditions": [{"type": "Ready", "status": status,
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
}

#[tokio::test]
async fn kubectl_get_shows_readiness_and_the_important_numbers() {
    let env = TestEnv::get();
    let alpha = Cluster::connect(&env.clusters[0]).await;
    crds::install(&alpha).await;
    let ns = alpha.namespace("columns").await;
    let kubeconfig = &env.clusters[0].kubeconfig;
    let meta = |name: &str| {
        json!({"name": name, "namespace": ns.name,
        "labels": {"strimzi.io/cluster": "my-cluster"}})
    };

    let mut kafka_status = ready("True");
    kafka_status["kafkaVersion"] = json!("4.1.0");
    kafka_status["kafkaMetadataVersion"] = json!("4.1-IV1");
    apply_with_status(
        &alpha,
        &ns.name,
        "kafkas",
        json!({"apiVersion": "kafka.strimzi.io/v1", "kind": "Kafka", "metadata": meta("my-cluster"),
               "spec": {"kafka": {"listeners": [
                   {"name": "plain", "port": 9092, "type": "internal", "tls": false}]}}}),
        kafka_status,
    )
    .await;
    apply_with_status(
        &alpha,
        &ns.name,
        "kafkanodepools",
        json!({"apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaNodePool", "metadata": meta("brokers"),
               "spec": {"replicas": 3, "roles": ["broker"],
                        "storage": {"type": "ephemeral"}}}),
        json!({"roles": ["broker"], "nodeIds": [0, 1, 2], "replicas": 3}),
    )
    .await;
    apply_with_status(
        &alpha,
        &ns.name,
        "kafkatopics",
        json!({"apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaTopic", "metadata": meta("orders"),
               "spec": {"partitions": 12, "replicas": 3}}),
        ready("True"),
    )
    .await;
    apply_with_status(
        &alpha,
        &ns.name,
        "strimzipodsets",
        json!({"apiVersion": "core.strimzi.io/v1", "kind": "StrimziPodSet",
               "metadata": meta("my-cluster-brokers"),
               "spec": {"selector": {"matchLabels": {"strimzi.io/cluster": "my-cluster"}}, "pods": []}}),
        json!({"pods": 3, "readyPods": 2, "currentPods": 3}),
    )
    .await;

    let k = kubectl_get(kubeconfig, &ns.name, "k");
    assert_eq!(
        k[0],
        [
            "NAME",
            "READY",
            "WARNINGS",
            "KAFKA VERSION",
            "METADATA VERSION"
        ],
        "{k:?}"
    );
    assert_eq!(k[1], ["my-cluster", "True", "4.1.0", "4.1-IV1"], "{k:?}");

    let knp = kubectl_get(kubeconfig, &ns.name, "knp");
    assert_eq!(
        knp[0],
        ["NAME", "DESIRED REPLICAS", "ROLES", "NODEIDS"],
        "{knp:?}"
    );
    assert_eq!(
        knp[1],
        ["brokers", "3", "[\"broker\"]", "[0,1,2]"],
        "{knp:?}"
    );

    let kt = kubectl_get(kubeconfig, &ns.name, "kt");
    assert_eq!(
        kt[0],
        [
            "NAME",
            "CLUSTER",
            "PARTITIONS",
            "REPLICATION FACTOR",
            "READY"
        ],
        "{kt:?}"
    );
    assert_eq!(kt[1], ["orders", "my-cluster", "12", "3", "True"], "{kt:?}");

    let sps = kubectl_get(kubeconfig, &ns.name, "sps");
    assert_eq!(
        sps[0],
        ["NAME", "PODS", "READY PODS", "CURRENT PODS", "AGE"],
        "{sps:?}"
    );
    assert_eq!(
        sps[1][..4],
        ["my-cluster-brokers", "3", "2", "3"],
        "{sps:?}"
    );

    ns.delete().await;
}
