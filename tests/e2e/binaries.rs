//! kstretch's own processes against the real environment: central, agent and the CLI start,
//! become ready, serve metrics and report what they watch.

// Test code: a failed expectation is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::Duration;

use kstretch_tests::crds::{self, FIELD_MANAGER};
use kstretch_tests::process::{Spawned, binary, free_port};
use kstretch_tests::wait::{Seen, wait_for};
use kstretch_tests::{Cluster, TestEnv};
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::pinned_kind;
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(60);

async fn http_get(url: &str) -> Result<(u16, String), reqwest::Error> {
    let response = reqwest::get(url).await?;
    let code = response.status().as_u16();
    Ok((code, response.text().await?))
}

async fn wait_ready(process: &Spawned, http: &str) {
    wait_for(
        &format!("{} to be ready", process.name),
        TIMEOUT,
        || async {
            match http_get(&format!("{http}/readyz")).await {
                Ok((200, _)) => Seen::Done(()),
                Ok((code, body)) => {
                    Seen::NotYet(format!("{code}: {body}\nlog:\n{}", process.log_text()))
                }
                Err(e) => Seen::NotYet(format!("{e}\nlog:\n{}", process.log_text())),
            }
        },
    )
    .await;
}

async fn apply(cluster: &Cluster, namespace: &str, doc: serde_json::Value) {
    let (group, version) = doc["apiVersion"]
        .as_str()
        .and_then(|v| v.split_once('/'))
        .expect("apiVersion");
    let gvk = GroupVersionKind::gvk(group, version, doc["kind"].as_str().expect("kind"));
    let (resource, _) = pinned_kind(&cluster.client, &gvk)
        .await
        .expect("served kind");
    let api: Api<DynamicObject> =
        Api::namespaced_with(cluster.client.clone(), namespace, &resource);
    let name = doc["metadata"]["name"].as_str().expect("name");
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER),
        &Patch::Apply(&doc),
    )
    .await
    .expect("applied");
}

#[tokio::test]
async fn central_and_cli_report_the_resources_of_a_namespace() {
    let env = TestEnv::get();
    let cluster = Cluster::connect(&env.clusters[0]).await;
    crds::install(&cluster).await;
    let ns = cluster.namespace("central-status").await;

    let (http_port, grpc_port) = (free_port(), free_port());
    let mut command = Command::new(binary("kstretch-central"));
    command
        .arg("--kubeconfig")
        .arg(&env.clusters[0].kubeconfig)
        .args(["--namespace", &ns.name])
        .args(["--http-addr", &format!("127.0.0.1:{http_port}")])
        .args(["--grpc-addr", &format!("127.0.0.1:{grpc_port}")]);
    let central = Spawned::start("central", command);
    let http = format!("http://127.0.0.1:{http_port}");
    wait_ready(&central, &http).await;

    apply(&cluster, &ns.name, json!({
        "apiVersion": "kafka.strimzi.io/v1", "kind": "Kafka",
        "metadata": {"name": "my-cluster"},
        "spec": {"kafka": {"listeners": [{"name": "plain", "port": 9092, "type": "internal", "tls": false}]}}
    })).await;
    for pool in ["controller", "broker"] {
        apply(
            &cluster,
            &ns.name,
            json!({
                "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaNodePool",
                "metadata": {"name": pool, "labels": {"strimzi.io/cluster": "my-cluster"}},
                "spec": {"replicas": 1, "roles": [pool], "storage": {"type": "ephemeral"}}
            }),
        )
        .await;
    }

    let central_addr = format!("http://127.0.0.1:{grpc_port}");
    let table = wait_for(
        "kstretch status to count 1 Kafka and 2 pools",
        TIMEOUT,
        || async {
            let out = Command::new(binary("kstretch"))
                .args(["--central", &central_addr, "status"])
                .output()
                .expect("run kstretch");
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            let counts = |kind: &str| {
                stdout
                    .lines()
                    .find(|l| l.split_whitespace().next() == Some(kind))
                    .map(|l| l.split_whitespace().skip(1).take(1).collect::<String>())
            };
            if out.status.success()
                && counts("Kafka").as_deref() == Some("1")
                && counts("KafkaNodePool").as_deref() == Some("2")
            {
                Seen::Done(stdout)
            } else {
                Seen::NotYet(format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)))
            }
        },
    )
    .await;
    assert!(table.contains("kubernetes  v1.36"), "{table}");

    let (code, metrics) = http_get(&format!("{http}/metrics")).await.expect("metrics");
    assert_eq!(code, 200);
    assert!(
        metrics.contains("kstretch_central_watched_objects{kind=\"KafkaNodePool\"} 2"),
        "{metrics}"
    );
    ns.delete().await;
}

#[tokio::test]
async fn agent_becomes_ready_and_counts_podsets() {
    let env = TestEnv::get();
    let cluster = Cluster::connect(&env.clusters[1]).await;
    crds::install(&cluster).await;
    let ns = cluster.namespace("agent-ready").await;
    let http_port = free_port();
    let mut command = Command::new(binary("kstretch-agent"));
    command
        .arg("--kubeconfig")
        .arg(&env.clusters[1].kubeconfig)
        .args(["--cluster-alias", &cluster.name])
        .args(["--namespace", &ns.name])
        .args(["--http-addr", &format!("127.0.0.1:{http_port}")]);
    let agent = Spawned::start("agent", command);
    let http = format!("http://127.0.0.1:{http_port}");
    wait_ready(&agent, &http).await;

    apply(
        &cluster,
        &ns.name,
        json!({
            "apiVersion": "core.strimzi.io/v1", "kind": "StrimziPodSet",
            "metadata": {"name": "my-cluster-broker"},
            "spec": {"selector": {"matchLabels": {"strimzi.io/cluster": "my-cluster"}}, "pods": []}
        }),
    )
    .await;
    wait_for("the agent to count the podset", TIMEOUT, || async {
        match http_get(&format!("{http}/metrics")).await {
            Ok((200, body))
                if body.contains("kstretch_agent_watched_objects{kind=\"StrimziPodSet\"} 1") =>
            {
                Seen::Done(())
            }
            Ok((code, body)) => Seen::NotYet(format!("{code}: {body}")),
            Err(e) => Seen::NotYet(e.to_string()),
        }
    })
    .await;
    ns.delete().await;
}

/// Runs `kstretch` with `kubeconfig` in `namespace`; its exit status and output.
fn kstretch_as(kubeconfig: &std::path::Path, namespace: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(binary("kstretch"))
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["-n", namespace])
        .output()
        .expect("kstretch runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Who may start, list or abort an operation is Kubernetes' RBAC in the central cluster: a
/// caller allowed only to read gets a refusal in words for `drain` and `abort`, and nothing is
/// created; listing works. An undrain without a completed drain is refused by the CLI, and so
/// are moves of a pool the caller may not change, of a pool that does not exist, or with a
/// throttle of nothing.
#[tokio::test]
async fn operations_are_started_only_by_callers_rbac_allows() {
    let env = TestEnv::get();
    let cluster = Cluster::connect(&env.clusters[0]).await;
    crds::install(&cluster).await;
    let ns = cluster.namespace("operations-rbac").await;
    for doc in [
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "operations-reader"},
               "rules": [{"apiGroups": ["kstretch.io"], "resources": ["kafkaoperations"],
                          "verbs": ["get", "list", "watch"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "operations-reader"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                           "name": "operations-reader"},
               "subjects": [{"kind": "ServiceAccount", "name": "reader",
                             "namespace": ns.name}]}),
    ] {
        kstretch_tests::cluster::apply(&cluster.client, &ns.name, doc).await;
    }
    let token = kstretch_tests::charts::token(&cluster, &ns.name, "reader").await;
    let reader = std::env::temp_dir().join(format!("{}-reader.kubeconfig", ns.name));
    kstretch_tests::charts::write_token_kubeconfig(&env.clusters[0].kubeconfig, &token, &reader);
    let admin = &env.clusters[0].kubeconfig;

    let (ok, out) = kstretch_as(&reader, &ns.name, &["drain", "beta", "--kafka", "k"]);
    assert!(
        !ok && out.contains("Kubernetes refused") && out.contains("kafkaoperations.kstretch.io"),
        "{out}"
    );
    let (ok, out) = kstretch_as(&reader, &ns.name, &["abort", "some-operation"]);
    assert!(!ok && out.contains("Kubernetes refused"), "{out}");
    let (ok, out) = kstretch_as(&reader, &ns.name, &["operations"]);
    assert!(
        ok && out.starts_with("NAME") && out.lines().count() == 1,
        "{out}"
    );
    let (ok, out) = kstretch_as(admin, &ns.name, &["undrain", "beta", "--kafka", "k"]);
    assert!(
        !ok && out.contains("has no completed drain of cluster beta left to undo"),
        "{out}"
    );
    let ops: Api<kstretch_api::KafkaOperation> = ns.api();
    let left = ops.list(&Default::default()).await.unwrap().items;
    assert!(left.is_empty(), "nothing is created: {left:?}");

    // Moving a pool is a change to the pool: RBAC on kafkanodepools decides, and the CLI
    // refuses what it can see is wrong before changing anything.
    let (ok, out) = kstretch_as(&reader, &ns.name, &["move-pool", "brokers", "--to", "beta"]);
    assert!(
        !ok && out.contains("Kubernetes refused") && out.contains("kafkanodepools"),
        "{out}"
    );
    let (ok, out) = kstretch_as(admin, &ns.name, &["move-pool", "nosuch", "--to", "beta"]);
    assert!(
        !ok && out.contains("there is no KafkaNodePool nosuch in namespace"),
        "{out}"
    );
    let args = ["move-pool", "nosuch", "--to", "beta", "--throttle", "0"];
    let (ok, out) = kstretch_as(admin, &ns.name, &args);
    assert!(!ok && out.contains("--throttle must be"), "{out}");
    let _ = std::fs::remove_file(reader);
    ns.delete().await;
}
