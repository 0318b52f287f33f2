//! A Kafka on pods that really run, for the real-pod tests: the `live` Kafka and its pools
//! started and made Ready, its pods and their states, the CLI run against it, its operations,
//! a cluster lost and brought back. The tests run one at a time ([`ONE_AT_A_TIME`]): each starts
//! three JVMs on a two-core machine.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use crate::TestEnv;
use crate::kafka::quorum_by_kafkas_tool;
use crate::ready::{kafka_ready as is_ready, ready_condition};
use crate::stretch::{ALPHA, BETA, Stretch};
use crate::wait::{Seen, wait_for};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod, Secret};
use kstretch_api::{Kafka, KafkaOperation};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::Mutex;

/// One real-pod test at a time.
pub static ONE_AT_A_TIME: Mutex<()> = Mutex::const_new(());

/// JVMs start slowly on two busy cores; a whole cluster takes a minute or two.
pub const START_TIMEOUT: Duration = Duration::from_secs(300);

pub fn real_node_ip(alias: &str) -> String {
    TestEnv::get()
        .clusters
        .iter()
        .find(|c| c.name == alias)
        .map(|c| c.real_node_ip.clone())
        .unwrap_or_else(|| panic!("no cluster {alias} in the environment"))
}

/// The `Kafka`: per-node NodePort Services, reached at each cluster's real node, and an
/// external `nodeport` listener as Strimzi users expose Kafka to clients outside Kubernetes.
pub fn kafka() -> Value {
    json!({
        "apiVersion": "kafka.strimzi.io/v1", "kind": "Kafka",
        "metadata": {"name": "live", "annotations": {
            "kstretch.io/addressing": "nodeport",
            "kstretch.io/node-port-hosts":
                format!("{ALPHA}={},{BETA}={}", real_node_ip(ALPHA), real_node_ip(BETA)),
        }},
        "spec": {"kafka": {
            "listeners": [
                {"name": "plain", "port": 9092, "type": "internal", "tls": false},
                {"name": "external", "port": 9094, "type": "nodeport", "tls": false}
            ],
            "config": {
                "default.replication.factor": 3, "min.insync.replicas": 2,
                "offsets.topic.replication.factor": 3,
                "transaction.state.log.replication.factor": 3,
                "transaction.state.log.min.isr": 2,
                "num.network.threads": 2, "num.io.threads": 2, "background.threads": 2,
                // The log cleaner holds its dedupe buffer on the heap (128 MiB by default):
                // two fifths of these nodes' 320 MiB, which left too little for the JMX
                // exporter's scrapes once a starved machine made them overlap (OutOfMemoryError).
                "log.cleaner.dedupe.buffer.size": 16_777_216
            }
        }}
    })
}

/// A pool of combined nodes in `alias`, placed on the real node as a user places pods: a node
/// selector and a toleration in `template.pod`.
pub fn pool(name: &str, replicas: i32, alias: &str, storage: Value) -> Value {
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
            "storage": storage,
            // C1 only: the JIT's second tier costs more CPU than these short runs win back
            // on two cores running several JVMs.
            "jvmOptions": {"-Xms": "128m", "-Xmx": "320m", "-XX": {"TieredStopAtLevel": "1"}},
            // The spare node of a cluster (cordoned until a test moves a pod there) is
            // tolerated too, as a second node of the cluster.
            "template": {"pod": {
                "nodeSelector": {"kstretch.test/node": "real"},
                "tolerations": [{"key": "kstretch.test/real-node", "operator": "Exists",
                                 "effect": "NoSchedule"},
                                {"key": "kstretch.test/spare-node", "operator": "Exists",
                                 "effect": "NoSchedule"}]
            }}
        }
    })
}

/// The `plain` listener's bootstrap addresses at `host` (the brokers of one cluster).
pub fn bootstrap_at(k: &Kafka, host: &str) -> String {
    listener_at(k, "plain", host)
}

/// Listener `name`'s bootstrap addresses at `host`, from the status.
pub fn listener_at(k: &Kafka, name: &str, host: &str) -> String {
    listener_where(k, name, &format!("{host}:"))
}

/// Listener `name`'s bootstrap addresses on the network of `alias`'s real node (a node port
/// there, or a load balancer address of that cluster), from the status.
pub fn listener_in(k: &Kafka, name: &str, alias: &str) -> String {
    let node = real_node_ip(alias);
    let network = node.rsplit_once('.').map(|(n, _)| n).unwrap_or(&node);
    listener_where(k, name, &format!("{network}."))
}

fn listener_where(k: &Kafka, name: &str, prefix: &str) -> String {
    let listener = k
        .status
        .as_ref()
        .and_then(|s| s.listeners.iter().find(|l| l.name.as_deref() == Some(name)))
        .unwrap_or_else(|| panic!("no {name} listener in the status: {:#?}", k.status));
    let servers: Vec<&str> = listener
        .bootstrap_servers
        .as_deref()
        .unwrap_or_default()
        .split(',')
        .filter(|s| s.starts_with(prefix))
        .collect();
    assert!(!servers.is_empty(), "no broker at {prefix}*: {listener:?}");
    servers.join(",")
}

/// The spare real node of `alias` (see tests/env/nodes.sh): its name and address.
pub async fn spare_node(stretch: &Stretch, alias: &str) -> (String, String) {
    let nodes: Api<Node> = Api::all(stretch.clusters[alias].client.clone());
    let spare = nodes
        .list(&ListParams::default().labels("kstretch.test/spare=true"))
        .await
        .unwrap()
        .items;
    let node = spare.first().unwrap_or_else(|| {
        panic!("{alias} has no spare real node: run tests/env/up.sh with {alias} in KSTRETCH_SPARE_NODES")
    });
    let ip = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
        .map(|a| a.address.clone())
        .unwrap_or_else(|| panic!("spare node without an InternalIP: {node:?}"));
    (node.name_any(), ip)
}

/// Cordons (`false`) or uncordons (`true`) node `name` of `alias`, as `kubectl cordon` does.
pub async fn schedulable(stretch: &Stretch, alias: &str, name: &str, yes: bool) {
    let nodes: Api<Node> = Api::all(stretch.clusters[alias].client.clone());
    nodes
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": !yes}})),
        )
        .await
        .unwrap();
}

/// Every pod of the test in `alias`: running, ready, on that cluster's real node.
pub async fn running_pods(stretch: &Stretch, alias: &str, count: usize) -> Vec<Pod> {
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
        // Nothing killed a node while it started (a liveness check before it listened did,
        // on a busy machine).
        assert_eq!(
            restarts(pod),
            0,
            "pod {:?} restarted while the Kafka came up: {:?}",
            pod.metadata.name,
            status
                .container_statuses
                .iter()
                .flatten()
                .map(|c| &c.last_state)
                .collect::<Vec<_>>()
        );
    }
    pods
}

/// How often the containers of `pod` restarted.
pub fn restarts(pod: &Pod) -> i32 {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    statuses
        .into_iter()
        .flatten()
        .map(|c| c.restart_count)
        .sum()
}

/// Waits until the status shows a dynamic quorum of three voters (with `replaced`, voter ID and
/// old directory, no longer among them), then checks it against Kafka's own tool (run only
/// then: each run starts a JVM) and returns the voters, ID → directory ID.
pub async fn shown_quorum_is_kafkas(
    stretch: &Stretch,
    k: &Kafka,
    replaced: Option<(i32, &str)>,
) -> BTreeMap<i32, String> {
    let bootstrap = all_brokers(k);
    let kafkas: Api<Kafka> = stretch.api(ALPHA);
    wait_for(
        "the status to show the quorum Kafka reports",
        Duration::from_secs(240),
        || async {
            let k = kafkas.get(&k.name_any()).await.unwrap();
            let Some(shown) = k.status.and_then(|s| s.quorum) else {
                return Seen::NotYet("no quorum in the status".to_owned());
            };
            let shown_voters: BTreeMap<i32, String> = shown
                .voters
                .iter()
                .map(|v| (v.id, v.directory_id.clone().unwrap_or_default()))
                .collect();
            let swapped = replaced
                .is_none_or(|(id, old)| shown_voters.get(&id).is_some_and(|dir| dir != old));
            if shown.mode.as_deref() != Some("dynamic") || shown_voters.len() != 3 || !swapped {
                tokio::time::sleep(Duration::from_secs(2)).await;
                return Seen::NotYet(format!("status {shown:?}"));
            }
            let voters: BTreeMap<i32, String> = quorum_by_kafkas_tool(&bootstrap)
                .into_iter()
                .filter(|(_, _, status)| status == "Leader" || status == "Follower")
                .map(|(id, dir, _)| (id, dir))
                .collect();
            if shown_voters == voters && shown.leader_id.is_some_and(|l| voters.contains_key(&l)) {
                Seen::Done(voters)
            } else {
                Seen::NotYet(format!("status {shown:?}, Kafka's voters {voters:?}"))
            }
        },
    )
    .await
}

/// The voters the status shows, by node ID.
pub async fn shown_voters(stretch: &Stretch) -> BTreeSet<i32> {
    let kafkas: Api<Kafka> = stretch.api(ALPHA);
    let k = kafkas.get("live").await.unwrap();
    k.status
        .and_then(|s| s.quorum)
        .map(|q| q.voters.iter().map(|v| v.id).collect())
        .unwrap_or_default()
}

/// Claims of the real nodes' provisioner, kept when their pod goes.
pub fn persistent() -> Value {
    json!({"type": "persistent-claim", "size": "1Gi", "class": "local-path", "deleteClaim": true})
}

/// A `Kafka` named `live` of three combined nodes, two in alpha (`live-a-0`, `live-a-1`) and
/// one in beta (`live-b-2`), Ready.
pub async fn live_kafka(test: &str, storage: Value) -> (Stretch, Kafka) {
    live_kafka_with(test, storage, Vec::new()).await
}

/// [`live_kafka`] with `extra` pools.
pub async fn live_kafka_with(test: &str, storage: Value, extra: Vec<Value>) -> (Stretch, Kafka) {
    live_kafka_of(test, kafka(), storage, extra).await
}

/// [`live_kafka_with`] of the `Kafka` `kafka`.
pub async fn live_kafka_of(
    test: &str,
    kafka: Value,
    storage: Value,
    extra: Vec<Value>,
) -> (Stretch, Kafka) {
    let mut stretch = Stretch::start(test, &[]).await;
    stretch.delete_namespaces_on_panic();
    ready_kafka(stretch, kafka, storage, extra).await
}

/// Applies `kafka` and its pools to `stretch` and waits until it is Ready.
pub async fn ready_kafka(
    stretch: Stretch,
    kafka: Value,
    storage: Value,
    extra: Vec<Value>,
) -> (Stretch, Kafka) {
    stretch.apply(kafka).await;
    stretch.apply(pool("a", 2, ALPHA, storage.clone())).await;
    stretch.apply(pool("b", 1, BETA, storage)).await;
    for pool in extra {
        stretch.apply(pool).await;
    }
    let k: Kafka = stretch
        .wait_in_alpha("live", "Ready on real pods", START_TIMEOUT, is_ready)
        .await;
    (stretch, k)
}

/// [`live_kafka_of`] with the Secret `secret` in alpha's namespace before the `Kafka`.
pub async fn live_kafka_of_with_secret(
    test: &str,
    kafka: Value,
    storage: Value,
    secret: Value,
) -> (Stretch, Kafka) {
    live_kafka_after(test, secret, kafka, storage).await
}

/// [`live_kafka_of`] of `kafka`, with `first` (a Secret, a ConfigMap it names) applied before.
pub async fn live_kafka_after(
    test: &str,
    first: Value,
    kafka: Value,
    storage: Value,
) -> (Stretch, Kafka) {
    let mut stretch = Stretch::start(test, &[]).await;
    stretch.delete_namespaces_on_panic();
    stretch.apply(first).await;
    ready_kafka(stretch, kafka, storage, Vec::new()).await
}

/// The JMX Prometheus exporter's rules of `examples/kafka-metrics.yaml` (ConfigMap
/// `kafka-metrics`, key `kafka-metrics-config.yml`, as Strimzi's `kafka-metrics.yaml` example
/// keeps them), which name Kafka's metrics as Strimzi's dashboards query them.
pub fn metrics_rules() -> Value {
    serde_yaml::from_str(include_str!("../../examples/kafka-metrics.yaml"))
        .expect("examples/kafka-metrics.yaml is a ConfigMap")
}

/// The JMX Prometheus exporter's rules for Connect workers, `examples/kafka-connect-metrics.yaml`
/// (ConfigMap `connect-metrics`, key `metrics-config.yml`).
pub fn connect_metrics_rules() -> Value {
    serde_yaml::from_str(include_str!("../../examples/kafka-connect-metrics.yaml"))
        .expect("examples/kafka-connect-metrics.yaml is a ConfigMap")
}

/// `kafka` serving metrics with the JMX exporter and [`metrics_rules`], as Strimzi's example.
pub fn with_metrics(mut kafka: Value) -> Value {
    kafka["spec"]["kafka"]["metricsConfig"] = json!({
        "type": "jmxPrometheusExporter",
        "valueFrom": {"configMapKeyRef": {"name": "kafka-metrics", "key": "kafka-metrics-config.yml"}}
    });
    kafka
}

/// Every broker's `plain` address, from the status.
pub fn all_brokers(k: &Kafka) -> String {
    format!(
        "{},{}",
        bootstrap_at(k, &real_node_ip(ALPHA)),
        bootstrap_at(k, &real_node_ip(BETA))
    )
}

/// Pod name -> (UID, restarts, ready) in both clusters, of the Kafka's nodes and whatever else
/// runs there but Kafka Exporter (a Deployment's pod, which gets a new name when it rolls).
pub async fn pod_states(stretch: &Stretch) -> BTreeMap<String, (String, i32, bool)> {
    let mut out = BTreeMap::new();
    let not_exporter = ListParams::default().labels("strimzi.io/component-type!=kafka-exporter");
    for alias in [ALPHA, BETA] {
        let pods: Api<Pod> = stretch.api(alias);
        for pod in pods.list(&not_exporter).await.unwrap().items {
            let ready = pod_ready(&pod);
            let status = pod.status.clone().unwrap_or_default();
            let restarts = status
                .container_statuses
                .iter()
                .flatten()
                .map(|c| c.restart_count)
                .sum();
            out.insert(
                pod.metadata.name.clone().unwrap(),
                (pod.metadata.uid.clone().unwrap(), restarts, ready),
            );
        }
    }
    out
}

/// The names of the pods in `alias`, sorted.
pub async fn pod_names(stretch: &Stretch, alias: &str) -> Vec<String> {
    let pods: Api<Pod> = stretch.api(alias);
    let mut names: Vec<String> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    names.sort();
    names
}

/// Waits until every pod of `before` is a new one and Ready, and checks that never more than
/// one node was away at once.
pub async fn rolled_one_at_a_time(
    stretch: &Stretch,
    before: &BTreeMap<String, (String, i32, bool)>,
) {
    let mut worst = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    loop {
        let now = pod_states(stretch).await;
        let away = before
            .keys()
            .filter(|name| now.get(*name).is_none_or(|(_, _, ready)| !ready))
            .count();
        worst = worst.max(away);
        let replaced = before
            .iter()
            .all(|(name, (uid, _, _))| now.get(name).is_some_and(|(u, _, r)| u != uid && *r));
        if replaced {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the roll did not finish: before {before:?}, now {now:?}\n{}",
            stretch.logs()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(worst <= 1, "{worst} nodes were away at once");
}

/// The reason of a `Ready=False` condition.
pub fn refused_because(k: &Kafka) -> Option<String> {
    let ready = ready_condition(k)?;
    (ready.status == "False")
        .then(|| ready.reason.clone())
        .flatten()
}

/// The host path of the claim `data-<pod>` in `alias` (the provisioner's directory).
pub async fn claim_dir(stretch: &Stretch, alias: &str, pod: &str) -> (String, PathBuf) {
    let claims: Api<PersistentVolumeClaim> = stretch.api(alias);
    let claim = claims.get(&format!("data-{pod}")).await.unwrap();
    let volume = claim.spec.unwrap().volume_name.unwrap();
    let pvs: Api<PersistentVolume> = Api::all(stretch.clusters[alias].client.clone());
    let pv = pvs.get(&volume).await.unwrap();
    let path = pv.spec.unwrap().host_path.unwrap().path;
    (claim.metadata.uid.unwrap(), PathBuf::from(path))
}

/// Inode and length of the first segment of `topic-0` in the node's log directory.
pub fn segment(dir: &std::path::Path, id: i32, topic: &str) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let file = dir
        .join(format!("kafka-log{id}"))
        .join(format!("{topic}-0"))
        .join("00000000000000000000.log");
    let meta = std::fs::metadata(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    (meta.ino(), meta.len())
}

/// The processes of pod `uid` on the machine (the real nodes share its process table).
pub fn pod_processes(uid: &str, comm: &str) -> Vec<i32> {
    let marker = format!("pod{uid}");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm)
                && std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
                    .is_ok_and(|c| c.contains(&marker))
        })
        .collect()
}

pub fn warning(k: &Kafka, reason: &str) -> Option<String> {
    k.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == "Warning" && c.reason.as_deref() == Some(reason))
            .and_then(|c| c.message.clone())
    })
}

/// Each operation's phase and Ready condition, a line each, for failure messages.
pub async fn operations_said(ops: &Api<KafkaOperation>) -> String {
    match ops.list(&ListParams::default()).await {
        Ok(list) => list
            .items
            .iter()
            .map(|o| {
                let status = o.status.clone().unwrap_or_default();
                let ready = status.conditions.iter().find(|c| c.type_ == "Ready");
                format!(
                    "{}: {:?} {:?}: {:?}",
                    o.name_any(),
                    status.phase,
                    ready.and_then(|c| c.reason.clone()),
                    ready.and_then(|c| c.message.clone())
                )
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Err(e) => format!("operations not listed: {e}"),
    }
}

/// Runs `kstretch` with the central cluster's kubeconfig and the test's namespace, off the
/// test's runtime (the producer keeps sending meanwhile).
pub async fn kstretch(stretch: &Stretch, args: &[&str]) -> (bool, String) {
    let mut command = stretch.kstretch_command(args);
    let output = tokio::task::spawn_blocking(move || command.output().expect("kstretch runs"))
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!("kstretch {}:\n{text}", args.join(" "));
    (output.status.success(), text)
}

/// Makes central reconcile the `Kafka` `live` now (any change does).
pub async fn poke(stretch: &Stretch) {
    let kafkas: Api<Kafka> = stretch.api(ALPHA);
    let at = format!("{:?}", std::time::SystemTime::now());
    kafkas
        .patch(
            "live",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"test.kstretch.io/poke": at}}})),
        )
        .await
        .unwrap();
}

/// Waits until operation `name` has reassignments in flight.
pub async fn in_flight(stretch: &Stretch, name: &str) -> KafkaOperation {
    stretch
        .wait_in_alpha(
            name,
            "a batch in flight",
            START_TIMEOUT,
            |o: &KafkaOperation| o.status.as_ref().is_some_and(|s| !s.in_flight.is_empty()),
        )
        .await
}

/// Waits until operation `name` has completed.
pub async fn completed(stretch: &Stretch, name: &str) -> KafkaOperation {
    stretch
        .wait_in_alpha(
            name,
            "the operation completed",
            START_TIMEOUT,
            |o: &KafkaOperation| {
                o.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Completed")
            },
        )
        .await
}

/// The pod's `Ready` condition is true.
pub fn pod_ready(pod: &Pod) -> bool {
    pod.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

/// Pods of `pods` that run on `alias`'s real node and are ready, by name.
pub fn ready_on_real_node(pods: &[Pod], alias: &str) -> Vec<String> {
    pods.iter()
        .filter(|p| {
            let node = p.spec.as_ref().and_then(|s| s.node_name.as_deref());
            node == Some(format!("{alias}-real-0").as_str()) && pod_ready(p)
        })
        .filter_map(|p| p.metadata.name.clone())
        .collect()
}

/// [`kafka`] with the listeners of Strimzi's `kafka-persistent` example: plain on 9092, TLS on
/// 9093.
pub fn kafka_persistent_shape() -> Value {
    let mut spec = kafka();
    spec["spec"]["kafka"]["listeners"] = json!([
        {"name": "plain", "port": 9092, "type": "internal", "tls": false},
        {"name": "tls", "port": 9093, "type": "internal", "tls": true}
    ]);
    spec
}

/// Key `key` of `secret` as text.
pub fn secret_text(secret: &Secret, key: &str) -> String {
    String::from_utf8(secret.data.as_ref().unwrap()[key].0.clone()).unwrap()
}

/// Runs one of the environment's scripts (`tests/env/<script>`) and fails with its output.
pub fn env_script(script: &str, args: &[&str]) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("env")
        .join(script);
    let output = std::process::Command::new(&path)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        output.status.success(),
        "{} {args:?} failed:\n{}{}",
        path.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// While it lives, a cluster is lost; a test that fails meanwhile brings it back, so the
/// environment is whole for what runs next.
#[derive(Debug)]
pub struct ClusterLost(&'static str);

impl ClusterLost {
    pub fn now(alias: &'static str) -> ClusterLost {
        env_script("lose.sh", &[alias]);
        ClusterLost(alias)
    }

    pub fn back(self) {
        std::mem::forget(self);
        env_script("up.sh", &[]);
    }
}

impl Drop for ClusterLost {
    fn drop(&mut self) {
        eprintln!(
            "bringing cluster {} back after a failure: tests/env/up.sh",
            self.0
        );
        env_script("up.sh", &[]);
    }
}

/// Name -> (UID, restarts) of the test's pods in cluster `alias`.
pub async fn pods_of(stretch: &Stretch, alias: &str) -> BTreeMap<String, (String, i32)> {
    let pods: Api<Pod> = stretch.api(alias);
    pods.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|pod| {
            let restarts = pod
                .status
                .iter()
                .flat_map(|s| s.container_statuses.iter().flatten())
                .map(|c| c.restart_count)
                .sum();
            (
                pod.name_any(),
                (pod.metadata.uid.clone().unwrap(), restarts),
            )
        })
        .collect()
}
