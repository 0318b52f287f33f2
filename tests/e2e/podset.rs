//! The StrimziPodSet controller of the real `kstretch-agent` binary against the real environment.
//!
//! Every test starts its own agent, limited to its own namespace (`--namespace`), and checks
//! the outcome through plain kube reads with bounded waits; kwok plays the kubelet (pods become
//! Running and Ready) and the real controller-manager garbage-collects.

// Test code: a failed expectation is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kstretch_api::{Kafka, KafkaNodePool, StrimziPodSet};
use kstretch_tests::cluster::TestNamespace;
use kstretch_tests::crds::{self, FIELD_MANAGER};
use kstretch_tests::process::{Spawned, binary, free_port};
use kstretch_tests::wait::{Seen, wait_for, wait_for_deletion};
use kstretch_tests::{Cluster, TestEnv, wait_for_object};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(60);
const CLUSTER_LABEL: &str = "strimzi.io/cluster";

/// A running agent watching one namespace.
struct Agent {
    process: Spawned,
    http: String,
}

impl Agent {
    fn start(cluster_index: usize, namespace: &str) -> Agent {
        let kubeconfig = TestEnv::get().clusters[cluster_index].kubeconfig.clone();
        Agent::start_with(&kubeconfig, namespace)
    }

    fn start_with(kubeconfig: &Path, namespace: &str) -> Agent {
        let env = TestEnv::get();
        let http_port = free_port();
        let mut command = Command::new(binary("kstretch-agent"));
        command
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--cluster-alias", &env.clusters[0].name])
            .args(["--namespace", namespace])
            .args(["--http-addr", &format!("127.0.0.1:{http_port}")])
            .env("RUST_LOG", "info,kstretch_agent=debug");
        Agent {
            process: Spawned::start("agent", command),
            http: format!("http://127.0.0.1:{http_port}"),
        }
    }

    async fn get(&self, path: &str) -> Result<(u16, String), reqwest::Error> {
        let response = reqwest::get(format!("{}{path}", self.http)).await?;
        let code = response.status().as_u16();
        Ok((code, response.text().await?))
    }

    async fn wait_ready(&self) {
        wait_for("the agent to be ready", TIMEOUT, || async {
            match self.get("/readyz").await {
                Ok((200, _)) => Seen::Done(()),
                Ok((code, body)) => {
                    Seen::NotYet(format!("{code}: {body}\nlog:\n{}", self.process.log_text()))
                }
                Err(e) => Seen::NotYet(format!("{e}\nlog:\n{}", self.process.log_text())),
            }
        })
        .await;
    }

    /// The value of a metric line starting with `series` (name and labels), 0 when absent.
    async fn metric(&self, series: &str) -> f64 {
        let (code, body) = self.get("/metrics").await.expect("metrics");
        assert_eq!(code, 200, "{body}");
        body.lines()
            .find_map(|line| {
                let (name, value) = line.rsplit_once(' ')?;
                (name == series).then(|| value.parse().ok()).flatten()
            })
            .unwrap_or(0.0)
    }
}

/// A test's namespace in one cluster, with the CRDs installed, and its APIs.
struct Setup {
    cluster_index: usize,
    ns: TestNamespace,
    pods: Api<Pod>,
    podsets: Api<StrimziPodSet>,
}

async fn setup(cluster_index: usize, test: &str) -> Setup {
    let env = TestEnv::get();
    let cluster = Cluster::connect(&env.clusters[cluster_index]).await;
    crds::install(&cluster).await;
    let ns = cluster.namespace(test).await;
    Setup {
        cluster_index,
        pods: ns.api(),
        podsets: ns.api(),
        ns,
    }
}

/// A pod manifest of the Kafka cluster `cluster` at `revision`.
fn pod_manifest(name: &str, cluster: &str, revision: &str) -> Value {
    json!({
        "metadata": {
            "name": name,
            "labels": {CLUSTER_LABEL: cluster, "strimzi.io/pod-name": name},
            "annotations": {"strimzi.io/revision": revision},
        },
        "spec": {
            "containers": [{"name": "kafka", "image": "quay.io/strimzi/kafka:latest"}],
        },
    })
}

/// A podset selecting the pods of the Kafka cluster `cluster`.
fn podset_manifest(name: &str, cluster: &str, pods: Vec<Value>) -> Value {
    json!({
        "apiVersion": "core.strimzi.io/v1",
        "kind": "StrimziPodSet",
        "metadata": {
            "name": name,
            // Strimzi's labels, naming a Kafka that does not exist: the agent must not care.
            "labels": {CLUSTER_LABEL: cluster, "strimzi.io/kind": "Kafka"},
        },
        "spec": {"selector": {"matchLabels": {CLUSTER_LABEL: cluster}}, "pods": pods},
    })
}

async fn apply(podsets: &Api<StrimziPodSet>, doc: &Value) -> StrimziPodSet {
    let name = doc["metadata"]["name"].as_str().expect("name");
    podsets
        .patch(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(doc),
        )
        .await
        .unwrap_or_else(|e| panic!("the apiserver rejected podset {name}: {e}"))
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn controlled_by(pod: &Pod, podset: &StrimziPodSet) -> bool {
    pod.metadata
        .owner_references
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|r| {
            r.kind == "StrimziPodSet"
                && r.api_version == "core.strimzi.io/v1"
                && Some(&r.uid) == podset.metadata.uid.as_ref()
                && r.name == podset.metadata.name.clone().unwrap_or_default()
                && r.controller == Some(true)
                && r.block_owner_deletion == Some(true)
        })
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().expect("uid")
}

/// Waits until `name` exists, is Ready and is controlled by `podset`.
async fn wait_pod_ready(pods: &Api<Pod>, name: &str, podset: &StrimziPodSet) -> Pod {
    wait_for_object(pods, name, TIMEOUT, |p| {
        is_ready(p) && controlled_by(p, podset) && p.metadata.deletion_timestamp.is_none()
    })
    .await
}

/// Waits until the podset's status has these counts for its current generation.
async fn wait_status(
    podsets: &Api<StrimziPodSet>,
    name: &str,
    pods: i32,
    ready: i32,
    current: i32,
) -> StrimziPodSet {
    wait_for_object(podsets, name, TIMEOUT, |ps| {
        ps.status.as_ref().is_some_and(|s| {
            s.observed_generation == ps.metadata.generation
                && s.pods == Some(pods)
                && s.ready_pods == Some(ready)
                && s.current_pods == Some(current)
        })
    })
    .await
}

/// Creates a podset with `n` pods and waits until all are Ready and counted.
async fn settled_podset(s: &Setup, name: &str, cluster: &str, n: usize) -> StrimziPodSet {
    let pods = (0..n)
        .map(|i| pod_manifest(&format!("{cluster}-{i}"), cluster, "r1"))
        .collect();
    let podset = apply(&s.podsets, &podset_manifest(name, cluster, pods)).await;
    for i in 0..n {
        wait_pod_ready(&s.pods, &format!("{cluster}-{i}"), &podset).await;
    }
    let count = i32::try_from(n).unwrap();
    wait_status(&s.podsets, name, count, count, count).await
}

/// A bare pod (no owner) created directly, Ready before it is returned.
async fn create_bare_pod(pods: &Api<Pod>, name: &str, cluster: &str) -> Pod {
    let pod: Pod = serde_json::from_value(pod_manifest(name, cluster, "r1")).unwrap();
    pods.create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("cannot create pod {name}: {e}"));
    wait_for_object(pods, name, TIMEOUT, is_ready).await
}

#[tokio::test]
async fn creates_the_pods_with_owner_references_and_reports_their_status() {
    let s = setup(0, "podset-create").await;
    let agent = Agent::start(s.cluster_index, &s.ns.name);
    agent.wait_ready().await;

    let podset = settled_podset(&s, "alpha-broker", "alpha", 3).await;
    let status = podset.status.clone().unwrap();
    assert!(status.conditions.is_empty(), "{status:?}");
    assert_eq!(status.observed_generation, podset.metadata.generation);
    for i in 0..3 {
        let pod = s.pods.get(&format!("alpha-{i}")).await.unwrap();
        assert_eq!(pod.metadata.namespace.as_deref(), Some(s.ns.name.as_str()));
        assert_eq!(
            pod.metadata.owner_references.as_ref().map(Vec::len),
            Some(1),
            "{pod:?}"
        );
        assert_eq!(
            pod.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("strimzi.io/revision"))
                .map(String::as_str),
            Some("r1"),
            "the pod is the podset's manifest"
        );
    }
    assert!(
        agent
            .metric("kstretch_agent_podset_pods_created_total")
            .await
            >= 3.0
    );
    assert!(
        agent
            .metric("kstretch_agent_podset_reconciliations_total{result=\"ok\"}")
            .await
            >= 1.0
    );

    // A new generation is observed.
    let pods: Vec<Value> = (0..4)
        .map(|i| pod_manifest(&format!("alpha-{i}"), "alpha", "r1"))
        .collect();
    let podset = apply(&s.podsets, &podset_manifest("alpha-broker", "alpha", pods)).await;
    wait_pod_ready(&s.pods, "alpha-3", &podset).await;
    let podset = wait_status(&s.podsets, "alpha-broker", 4, 4, 4).await;
    assert_eq!(podset.metadata.generation, Some(2));
    s.ns.delete().await;
}

#[tokio::test]
async fn works_without_any_kafka_resource() {
    let s = setup(1, "podset-no-kafka").await;
    let kafkas: Api<Kafka> = s.ns.api();
    let pools: Api<KafkaNodePool> = s.ns.api();
    assert!(
        kafkas
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(
        pools
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let agent = Agent::start(s.cluster_index, &s.ns.name);
    agent.wait_ready().await;
    // The podset's labels name a Kafka `lonely` that exists nowhere (Strimzi's controller
    // would ignore such a podset); the agent keeps its pods anyway.
    let podset = settled_podset(&s, "lonely-pool", "lonely", 2).await;
    let before = uid(&s.pods.get("lonely-0").await.unwrap());
    s.pods
        .delete("lonely-0", &DeleteParams::default())
        .await
        .unwrap();
    let back = wait_for_object(&s.pods, "lonely-0", TIMEOUT, |p| {
        uid(p) != before && is_ready(p) && controlled_by(p, &podset)
    })
    .await;
    assert_ne!(uid(&back), before);
    s.ns.delete().await;
}

#[tokio::test]
async fn a_deleted_pod_comes_back_ready_with_a_new_uid() {
    let s = setup(0, "podset-recreate").await;
    let agent = Agent::start(s.cluster_index, &s.ns.name);
    agent.wait_ready().await;
    let podset = settled_podset(&s, "re-broker", "re", 3).await;
    let before = uid(&s.pods.get("re-1").await.unwrap());
    let other = uid(&s.pods.get("re-0").await.unwrap());

    s.pods
        .delete("re-1", &DeleteParams::default())
        .await
        .unwrap();
    let back = wait_for_object(&s.pods, "re-1", TIMEOUT, |p| {
        uid(p) != before && is_ready(p) && controlled_by(p, &podset)
    })
    .await;
    assert_ne!(uid(&back), before);
    wait_status(&s.podsets, "re-broker", 3, 3, 3).await;
    assert_eq!(
        uid(&s.pods.get("re-0").await.unwrap()),
        other,
        "the other pods are untouched"
    );
    s.ns.delete().await;
}

#[tokio::test]
async fn unlisted_and_stray_pods_are_deleted_and_others_left_alone() {
    let s = setup(1, "podset-scale-down").await;
    let agent = Agent::start(s.cluster_index, &s.ns.name);
    agent.wait_ready().await;
    settled_podset(&s, "sd-broker", "sd", 3).await;
    let kept = uid(&s.pods.get("sd-0").await.unwrap());

    // Scale down: sd-1 leaves the spec.
    let pods = vec![
        pod_manifest("sd-0", "sd", "r1"),
        pod_manifest("sd-2", "sd", "r1"),
    ];
    apply(&s.podsets, &podset_manifest("sd-broker", "sd", pods)).await;
    wait_for_deletion(&s.pods, "sd-1", TIMEOUT).await;
    wait_status(&s.podsets, "sd-broker", 2, 2, 2).await;

    // A pod of another Kafka cluster first, then a stray pod the selector matches.
    let outsider = create_bare_pod(&s.pods, "outsider", "another-cluster").await;
    let stray: Pod = serde_json::from_value(pod_manifest("sd-stray", "sd", "r1")).unwrap();
    s.pods.create(&PostParams::default(), &stray).await.unwrap();
    wait_for_deletion(&s.pods, "sd-stray", TIMEOUT).await;

    // The outsider existed through all those reconciliations, and one more resync-free second.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let still = s.pods.get("outsider").await.unwrap();
    assert_eq!(uid(&still), uid(&outsider));
    assert!(still.metadata.deletion_timestamp.is_none());
    assert_eq!(uid(&s.pods.get("sd-0").await.unwrap()), kept);
    assert!(
        agent
            .metric("kstretch_agent_podset_pods_deleted_total{cause=\"unlisted\"}")
            .await
            >= 2.0
    );
    s.ns.delete().await;
}

#[tokio::test]
async fn a_failed_pod_is_replaced() {
    let s = setup(0, "podset-failed").await;
    let agent = Agent::start(s.cluster_index, &s.ns.name);
    agent.wait_ready().await;
    let podset = settled_podset(&s, "fail-broker", "fail", 2).await;
    let before = uid(&s.pods.get("fail-0").await.unwrap());

    s.pods
        .patch_status(
            "fail-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Failed"}})),
        )
        .await
        .unwrap();
    let back = wait_for_object(&s.pods, "fail-0", TIMEOUT, |p| {
        uid(p) != before && is_ready(p) && controlled_by(p, &podset)
    })
    .await;
    assert_eq!(
        back.status.and_then(|s| s.phase).as_deref(),
        Some("Running")
    );
    wait_status(&s.podsets, "fail-broker", 2, 2, 2).await;
    assert!(
        agent
            .metric("kstretch_agent_podset_pods_deleted_total{cause=\"terminal\"}")
            .await
            >= 1.0
    );
    s.ns.delete().await;
}

#[tokio::test]
async fn a_listed_pod_without_owner_reference_is_adopted_not_recreated() {
    let s = setup(1, "podset-adopt").await;
    let orphan = create_bare_pod(&s.pods, "adopt-0", "adopt").await;
    assert!(orphan.metadata.owner_references.is_none());
    let agent = Agent::start(s.cluster_index, &s.ns.name);
    agent.wait_ready().await;

    let pods = vec![
        pod_manifest("adopt-0", "adopt", "r1"),
        pod_manifest("adopt-1", "adopt", "r1"),
    ];
    let podset = apply(&s.podsets, &podset_manifest("adopt-pool", "adopt", pods)).await;
    let adopted = wait_pod_ready(&s.pods, "adopt-0", &podset).await;
    assert_eq!(uid(&adopted), uid(&orphan), "adopted, not recreated");
    wait_pod_ready(&s.pods, "adopt-1", &podset).await;
    wait_status(&s.podsets, "adopt-pool", 2, 2, 2).await;
    assert!(
        agent
            .metric("kstretch_agent_podset_pods_adopted_total")
            .await
            >= 1.0
    );
    s.ns.delete().await;
}

#[tokio::test]
async fn a_revision_change_is_counted_and_never_rolls_a_pod() {
    let s = setup(0, "podset-revision").await;
    let agent = Agent::start(s.cluster_index, &s.ns.name);
    agent.wait_ready().await;
    settled_podset(&s, "rev-broker", "rev", 3).await;
    let uids: BTreeMap<String, String> = s
        .pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|p| (p.metadata.name.clone().unwrap(), uid(p)))
        .collect();

    // rev-1 gets a new desired revision: a roll is pending, but rolling is not the agent's job.
    let pods = vec![
        pod_manifest("rev-0", "rev", "r1"),
        pod_manifest("rev-1", "rev", "r2"),
        pod_manifest("rev-2", "rev", "r1"),
    ];
    apply(&s.podsets, &podset_manifest("rev-broker", "rev", pods)).await;
    let podset = wait_status(&s.podsets, "rev-broker", 3, 3, 2).await;
    assert_eq!(podset.metadata.generation, Some(2));
    // Give a wrong controller time to do the wrong thing.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for (name, before) in &uids {
        let pod = s.pods.get(name).await.unwrap();
        assert_eq!(&uid(&pod), before, "{name} was replaced");
        assert!(
            pod.metadata.deletion_timestamp.is_none(),
            "{name} is being deleted"
        );
    }
    wait_status(&s.podsets, "rev-broker", 3, 3, 2).await;
    s.ns.delete().await;
}

#[tokio::test]
async fn a_rejected_pod_is_reported_while_the_other_pods_are_created() {
    let s = setup(1, "podset-rejected").await;
    let agent = Agent::start(s.cluster_index, &s.ns.name);
    agent.wait_ready().await;
    let mut bad = pod_manifest("rej-bad", "rej", "r1");
    bad["spec"]["containers"][0]["name"] = json!("Not_A_Valid_Name");
    let pods = vec![
        pod_manifest("rej-0", "rej", "r1"),
        bad,
        pod_manifest("rej-2", "rej", "r1"),
    ];
    let podset = apply(&s.podsets, &podset_manifest("rej-pool", "rej", pods)).await;
    wait_pod_ready(&s.pods, "rej-0", &podset).await;
    wait_pod_ready(&s.pods, "rej-2", &podset).await;
    let failing = wait_for_object(&s.podsets, "rej-pool", TIMEOUT, |ps| {
        ps.status.as_ref().is_some_and(|s| {
            s.ready_pods == Some(2) && s.pods == Some(3) && !s.conditions.is_empty()
        })
    })
    .await;
    let status = failing.status.unwrap();
    let condition = &status.conditions[0];
    assert_eq!(condition.type_, "Error");
    assert_eq!(condition.status, "True");
    assert_eq!(condition.reason.as_deref(), Some("PodRejected"));
    let message = condition.message.clone().unwrap_or_default();
    assert!(
        message.contains("Pod \"rej-bad\" is invalid")
            && message.contains("spec.containers[0].name")
            && message.contains("Not_A_Valid_Name"),
        "the apiserver's message: {message}"
    );
    assert!(condition.last_transition_time.is_some());
    assert!(
        s.pods.get_opt("rej-bad").await.unwrap().is_none(),
        "the bad pod does not exist"
    );
    assert!(
        agent
            .metric("kstretch_agent_podset_reconcile_failures_total{reason=\"PodRejected\"}")
            .await
            >= 1.0
    );

    // Fixed: the condition goes away.
    let pods = vec![
        pod_manifest("rej-0", "rej", "r1"),
        pod_manifest("rej-2", "rej", "r1"),
    ];
    apply(&s.podsets, &podset_manifest("rej-pool", "rej", pods)).await;
    let fixed = wait_status(&s.podsets, "rej-pool", 2, 2, 2).await;
    assert!(fixed.status.unwrap().conditions.is_empty());
    s.ns.delete().await;
}

#[tokio::test]
async fn deleting_the_podset_garbage_collects_its_pods_without_a_fight() {
    let s = setup(0, "podset-gc").await;
    let agent = Agent::start(s.cluster_index, &s.ns.name);
    agent.wait_ready().await;
    settled_podset(&s, "gc-broker", "gc", 3).await;
    let created = agent
        .metric("kstretch_agent_podset_pods_created_total")
        .await;

    // Foreground: the podset stays (with a deletionTimestamp) until the garbage collector has
    // deleted every pod; the agent must neither recreate them nor block it.
    s.podsets
        .delete("gc-broker", &DeleteParams::foreground())
        .await
        .unwrap();
    for i in 0..3 {
        wait_for_deletion(&s.pods, &format!("gc-{i}"), TIMEOUT).await;
    }
    wait_for_deletion(&s.podsets, "gc-broker", TIMEOUT).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        s.pods
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "no pod came back"
    );
    assert_eq!(
        agent
            .metric("kstretch_agent_podset_pods_created_total")
            .await,
        created
    );

    // Orphaning: the garbage collector removes the owner references and keeps the pods; the
    // agent must not put the references back while the podset is being deleted.
    let podset = settled_podset(&s, "gc-broker", "gc", 2).await;
    let uids: Vec<String> = futures::future::join_all((0..2).map(|i| {
        let pods = s.pods.clone();
        async move { uid(&pods.get(&format!("gc-{i}")).await.unwrap()) }
    }))
    .await;
    s.podsets
        .delete("gc-broker", &DeleteParams::orphan())
        .await
        .unwrap();
    wait_for_deletion(&s.podsets, "gc-broker", TIMEOUT).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    for (i, before) in uids.iter().enumerate() {
        let pod = s.pods.get(&format!("gc-{i}")).await.unwrap();
        assert_eq!(&uid(&pod), before, "orphaned pods stay");
        assert!(!controlled_by(&pod, &podset), "{pod:?}");
    }
    s.ns.delete().await;
}

/// A kubeconfig for `cluster_index` that impersonates `user`, a user without any permission
/// until the test grants one.
fn impersonating_kubeconfig(cluster_index: usize, user: &str) -> PathBuf {
    let source = &TestEnv::get().clusters[cluster_index].kubeconfig;
    let text = std::fs::read_to_string(source).unwrap();
    let mut doc: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    for entry in doc["users"].as_sequence_mut().expect("users") {
        entry["user"]["as"] = serde_yaml::Value::String(user.to_owned());
    }
    let path = std::env::temp_dir().join(format!(
        "kstretch-test-kubeconfig-{user}-{}",
        std::process::id()
    ));
    std::fs::write(&path, serde_yaml::to_string(&doc).unwrap()).unwrap();
    path
}

/// The podset controller's minimal Role, with `podset_verbs` on podsets.
fn agent_role(podset_verbs: &[&str]) -> Role {
    serde_json::from_value(json!({
        "metadata": {"name": "kstretch-agent"},
        "rules": [
            {"apiGroups": [""], "resources": ["pods"],
             "verbs": ["get", "list", "watch", "create", "delete", "patch"]},
            {"apiGroups": ["core.strimzi.io"], "resources": ["strimzipodsets"],
             "verbs": podset_verbs},
            {"apiGroups": ["core.strimzi.io"], "resources": ["strimzipodsets/status"],
             "verbs": ["get", "patch"]},
            {"apiGroups": ["core.strimzi.io"], "resources": ["strimzipodsets/finalizers"],
             "verbs": ["update"]},
        ],
    }))
    .unwrap()
}

/// Gives `user` the [`agent_role`] in the test's namespace.
async fn grant_agent_role(s: &Setup, user: &str, podset_verbs: &[&str]) {
    s.ns.api::<Role>()
        .create(&PostParams::default(), &agent_role(podset_verbs))
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "kstretch-agent"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kstretch-agent"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }))
    .unwrap();
    s.ns.api::<RoleBinding>()
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

/// The cache keeps only the names and revisions of a podset's pods; a pod is created from the
/// manifest read then. An agent that may list and watch podsets but not read one says so in the
/// podset's condition, and creates the pods once it may.
#[tokio::test]
async fn pods_are_created_from_the_manifest_read_then_and_a_failed_read_is_reported() {
    let s = setup(1, "podset-read").await;
    let user = format!("kstretch-e2e-agent-{}", s.ns.name);
    let kubeconfig = impersonating_kubeconfig(s.cluster_index, &user);
    grant_agent_role(&s, &user, &["list", "watch"]).await;
    let agent = Agent::start_with(&kubeconfig, &s.ns.name);
    agent.wait_ready().await;
    let pods = vec![pod_manifest("read-0", "read", "r1")];
    apply(&s.podsets, &podset_manifest("read-pool", "read", pods)).await;
    let failing = wait_for_object(&s.podsets, "read-pool", TIMEOUT, |ps| {
        ps.status.as_ref().is_some_and(|s| !s.conditions.is_empty())
    })
    .await;
    let condition = &failing.status.unwrap().conditions[0];
    assert_eq!(
        (condition.type_.as_str(), condition.reason.as_deref()),
        ("Error", Some("KubernetesError"))
    );
    let message = condition.message.clone().unwrap_or_default();
    assert!(
        message.contains("cannot read the podset's pod manifests to create pod read-0")
            && message.contains("forbidden"),
        "{message}"
    );
    assert!(s.pods.get_opt("read-0").await.unwrap().is_none());

    // Allowed to read it: the pod is created from the podset's full manifest.
    s.ns.api::<Role>()
        .patch(
            "kstretch-agent",
            &PatchParams::default(),
            &Patch::Merge(&agent_role(&["get", "list", "watch"])),
        )
        .await
        .unwrap();
    let settled = wait_status(&s.podsets, "read-pool", 1, 1, 1).await;
    assert!(settled.status.unwrap().conditions.is_empty());
    let pod = s.pods.get("read-0").await.unwrap();
    assert_eq!(
        pod.spec.unwrap().containers[0].image.as_deref(),
        Some("quay.io/strimzi/kafka:latest")
    );
    let _ = std::fs::remove_file(&kubeconfig);
    s.ns.delete().await;
}

#[tokio::test]
async fn readyz_fails_until_the_watches_sync_then_passes() {
    let s = setup(1, "podset-readyz").await;
    // The agent runs as a user without permissions: its watches fail with 403, so it cannot
    // sync, and must say so.
    let user = format!("kstretch-e2e-agent-{}", s.ns.name);
    let kubeconfig = impersonating_kubeconfig(s.cluster_index, &user);
    let agent = Agent::start_with(&kubeconfig, &s.ns.name);
    let body = wait_for(
        "/readyz to report the failing pod watch",
        TIMEOUT,
        || async {
            match agent.get("/readyz").await {
                Ok((503, body))
                    if body.contains("[-] podset-controller/watch:Pod: watch failing") =>
                {
                    Seen::Done(body)
                }
                Ok((code, body)) => Seen::NotYet(format!("{code}: {body}")),
                Err(e) => Seen::NotYet(format!("{e}\nlog:\n{}", agent.process.log_text())),
            }
        },
    )
    .await;
    assert!(body.contains("forbidden"), "{body}");
    let (live, _) = agent.get("/healthz").await.unwrap();
    assert_eq!(
        live, 200,
        "within the failure allowance the agent is not restarted"
    );

    // Grant what the agent needs (this is the minimal Role of the podset controller).
    grant_agent_role(&s, &user, &["get", "list", "watch"]).await;
    agent.wait_ready().await;
    let (code, body) = agent.get("/readyz").await.unwrap();
    assert_eq!(code, 200, "{body}");
    for check in [
        "[+] podset-controller/watch:Pod: watching",
        "[+] podset-controller/watch:StrimziPodSet: watching",
        "[+] podset-controller/apiserver: answering",
    ] {
        assert!(body.contains(check), "{check} missing in\n{body}");
    }
    let (live, body) = agent.get("/healthz").await.unwrap();
    assert_eq!(live, 200, "{body}");
    assert!(body.contains("podset-controller"), "{body}");

    // And with exactly those permissions it does its work.
    settled_podset(&s, "rbac-pool", "rbac", 2).await;
    let _ = std::fs::remove_file(&kubeconfig);
    s.ns.delete().await;
}
