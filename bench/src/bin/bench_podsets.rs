//! Benchmark of the agent's StrimziPodSet controller against the real environment (not a test).
//!
//! Starts a release `kstretch-agent` limited to a fresh namespace of one cluster, creates
//! `--podsets` podsets of `--pods` pods each, waits until every pod is Ready, measures the
//! agent's resident memory (VmRSS from /proc) while idle, then deletes `--deletions` random pods
//! in batches and measures, per pod, the time from the delete request to its replacement being
//! Ready (split into: old pod gone, new pod created, new pod Ready), and the agent's peak RSS
//! under that churn. Prints the figures; everything is bounded by `--deadline-s`; the namespace
//! (and the nodes below) are deleted at the end, whatever happened.
//!
//! With `--kwok PATH --kwok-stages DIR` the pods run on three tainted nodes of the benchmark's
//! own, played by a kwok process the benchmark starts and stops: the environment's kwok v0.8.0
//! deletes terminating pods by name without a UID precondition, and under churn it deletes the
//! replacements the agent has just created (see `docs/benchmarks.md`). The apiserver,
//! scheduler and controller-manager are the environment's.
//!
//! Run it with `scripts/bench-podsets.sh`, which builds what it needs (including that kwok).

// Benchmark driver: a failed expectation ends the run, so panicking is the point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hasher};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kstretch_api::StrimziPodSet;
use kstretch_tests::cluster::TestNamespace;
use kstretch_tests::crds::{self, FIELD_MANAGER};
use kstretch_tests::process::free_port;
use kstretch_tests::{Cluster, TestEnv};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::watcher;
use serde_json::{Value, json};

#[derive(Debug, Clone)]
struct Opts {
    cluster: usize,
    podsets: usize,
    pods: usize,
    deletions: usize,
    batch: usize,
    batch_interval: Duration,
    idle_settle: Duration,
    deadline: Duration,
    agent: PathBuf,
    /// A kwok binary to run for the benchmark's own fake nodes (see the module docs).
    kwok: Option<PathBuf>,
    /// The stage files of that kwok.
    kwok_stages: Option<PathBuf>,
}

impl Opts {
    fn parse() -> anyhow::Result<Opts> {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
        let mut opts = Opts {
            cluster: 0,
            podsets: 100,
            pods: 10,
            deletions: 200,
            batch: 20,
            batch_interval: Duration::from_secs(1),
            idle_settle: Duration::from_secs(15),
            deadline: Duration::from_secs(900),
            agent: target.join("release/kstretch-agent"),
            kwok: None,
            kwok_stages: None,
        };
        let mut args = std::env::args().skip(1);
        while let Some(flag) = args.next() {
            let value = args
                .next()
                .with_context(|| format!("{flag} needs a value"))?;
            let number = || -> anyhow::Result<u64> {
                value
                    .parse()
                    .with_context(|| format!("{flag} {value}: not a number"))
            };
            match flag.as_str() {
                "--cluster" => opts.cluster = usize::try_from(number()?)?,
                "--podsets" => opts.podsets = usize::try_from(number()?)?,
                "--pods" => opts.pods = usize::try_from(number()?)?,
                "--deletions" => opts.deletions = usize::try_from(number()?)?,
                "--batch" => opts.batch = usize::try_from(number()?)?.max(1),
                "--batch-interval-ms" => opts.batch_interval = Duration::from_millis(number()?),
                "--idle-settle-s" => opts.idle_settle = Duration::from_secs(number()?),
                "--deadline-s" => opts.deadline = Duration::from_secs(number()?),
                "--agent" => opts.agent = PathBuf::from(&value),
                "--kwok" => opts.kwok = Some(PathBuf::from(&value)),
                "--kwok-stages" => opts.kwok_stages = Some(PathBuf::from(&value)),
                other => bail!(
                    "unknown flag {other}; flags: --cluster N --podsets N --pods N --deletions N \
                     --batch N --batch-interval-ms N --idle-settle-s N --deadline-s N --agent PATH \
                     --kwok PATH --kwok-stages DIR"
                ),
            }
        }
        if opts.kwok.is_some() != opts.kwok_stages.is_some() {
            bail!("--kwok and --kwok-stages go together");
        }
        if opts.deletions > opts.podsets * opts.pods {
            bail!("--deletions exceeds the number of pods");
        }
        Ok(opts)
    }
}

/// The agent process, killed when dropped.
struct AgentProcess {
    child: Child,
    http: String,
    log: PathBuf,
}

impl AgentProcess {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A line of /proc/<pid>/status in KiB (`VmRSS`, `VmHWM`).
    fn status_kib(&self, field: &str) -> Option<u64> {
        let text = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
    }

    /// User + system CPU time in seconds (USER_HZ is 100 on Linux).
    fn cpu_seconds(&self) -> Option<f64> {
        let text = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).ok()?;
        // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
        let rest = text.rsplit_once(')')?.1;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let utime: f64 = fields.get(11)?.parse().ok()?;
        let stime: f64 = fields.get(12)?.parse().ok()?;
        Some((utime + stime) / 100.0)
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_agent(opts: &Opts, kubeconfig: &std::path::Path, namespace: &str) -> AgentProcess {
    assert!(
        opts.agent.exists(),
        "{} is missing: build it with `cargo build --release -p kstretch-agent`",
        opts.agent.display()
    );
    let port = free_port();
    let log = std::env::temp_dir().join(format!("kstretch-bench-agent-{}.log", std::process::id()));
    let file = std::fs::File::create(&log).expect("log file");
    let child = Command::new(&opts.agent)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--cluster-alias", "bench"])
        .args(["--namespace", namespace])
        .args(["--http-addr", &format!("127.0.0.1:{port}")])
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("log file"))
        .stderr(file)
        .spawn()
        .expect("start the agent");
    AgentProcess {
        child,
        http: format!("http://127.0.0.1:{port}"),
        log,
    }
}

/// A Kafka-like pod of moderate size (about 2 KB of JSON).
fn pod(podset: &str, index: usize, nodes: Option<&str>) -> Value {
    let name = format!("{podset}-{index}");
    let mut pod = json!({
        "metadata": {
            "name": name,
            "labels": {
                "strimzi.io/cluster": podset,
                "strimzi.io/kind": "Kafka",
                "strimzi.io/name": format!("{podset}-kafka"),
                "strimzi.io/pool-name": "pool",
                "strimzi.io/pod-name": name,
                "strimzi.io/controller": "strimzipodset",
                "strimzi.io/controller-name": podset,
                "strimzi.io/broker-role": "true",
                "app.kubernetes.io/name": "kafka",
                "app.kubernetes.io/instance": podset,
                "app.kubernetes.io/managed-by": "strimzi-cluster-operator",
            },
            "annotations": {
                "strimzi.io/revision": "0123abcd",
                "strimzi.io/kafka-version": "4.1.2",
                "strimzi.io/configuration-hash": "feedbeef",
            },
        },
        "spec": {
            "hostname": name,
            "containers": [{
                "name": "kafka",
                "image": "quay.io/strimzi/kafka:latest-kafka-4.1.2",
                "command": ["/opt/kafka/kafka_run.sh"],
                "env": [
                    {"name": "KAFKA_METRICS_ENABLED", "value": "false"},
                    {"name": "STRIMZI_KAFKA_GC_LOG_ENABLED", "value": "false"},
                    {"name": "KAFKA_HEAP_OPTS", "value": "-Xms512m -Xmx512m"},
                    {"name": "STRIMZI_NODE_ID", "value": index.to_string()},
                ],
                "ports": [
                    {"containerPort": 9090, "name": "tcp-ctrlplane", "protocol": "TCP"},
                    {"containerPort": 9091, "name": "tcp-replication", "protocol": "TCP"},
                    {"containerPort": 9092, "name": "tcp-clients", "protocol": "TCP"},
                ],
                "resources": {
                    "requests": {"cpu": "10m", "memory": "16Mi"},
                    "limits": {"memory": "1Gi"},
                },
                "readinessProbe": {"exec": {"command": ["/opt/kafka/kafka_readiness.sh"]}},
                "volumeMounts": [{"name": "data", "mountPath": "/var/lib/kafka/data"}],
            }],
            "volumes": [{"name": "data", "emptyDir": {}}],
        },
    });
    if let Some(id) = nodes {
        pod["spec"]["nodeSelector"] = json!({BENCH_LABEL: id});
        pod["spec"]["tolerations"] =
            json!([{"key": BENCH_LABEL, "operator": "Equal", "value": id, "effect": "NoSchedule"}]);
    }
    pod
}

fn podset(name: &str, pods: usize, nodes: Option<&str>) -> Value {
    json!({
        "apiVersion": "core.strimzi.io/v1",
        "kind": "StrimziPodSet",
        "metadata": {"name": name, "labels": {"strimzi.io/cluster": name, "strimzi.io/kind": "Kafka"}},
        "spec": {
            "selector": {"matchLabels": {"strimzi.io/cluster": name}},
            "pods": (0..pods).map(|i| pod(name, i, nodes)).collect::<Vec<_>>(),
        },
    })
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// One deleted pod on its way back.
#[derive(Debug, Clone)]
struct Pending {
    old_uid: String,
    deleted_at: Instant,
    gone_at: Option<Instant>,
    created_at: Option<Instant>,
}

/// The timings of one replaced pod, in seconds: from the delete request to the old pod gone,
/// to the first new pod created, and to a new pod Ready.
#[derive(Debug, Clone, Copy)]
struct Sample {
    total: f64,
    to_gone: f64,
    to_created: f64,
    to_ready: f64,
}

/// What the benchmark's own pod watch has seen.
#[derive(Debug, Default)]
struct Tracker {
    /// Ready pods: name → UID.
    ready: HashMap<String, String>,
    /// Last UID seen per pod name.
    uids: HashMap<String, String>,
    pending: HashMap<String, Pending>,
    samples: Vec<Sample>,
    /// Pods under churn that are gone and not yet created again: name → when they went.
    gone: HashMap<String, Instant>,
    /// Every "pod gone → pod of that name created" interval during the churn, whoever deleted
    /// the pod: the agent's reaction time.
    reactions: Vec<f64>,
    /// Replacement pods deleted by something other than the benchmark (kwok, see the docs).
    replacements_killed: usize,
    churning: bool,
}

impl Tracker {
    fn applied(&mut self, pod: &Pod, now: Instant) {
        let (Some(name), Some(uid)) = (pod.metadata.name.clone(), pod.metadata.uid.clone()) else {
            return;
        };
        let new_uid = self.uids.get(&name) != Some(&uid);
        if new_uid {
            self.uids.insert(name.clone(), uid.clone());
            if let Some(went) = self.gone.remove(&name) {
                self.reactions
                    .push(now.saturating_duration_since(went).as_secs_f64());
            }
        }
        let ready = is_ready(pod) && pod.metadata.deletion_timestamp.is_none();
        if ready {
            self.ready.insert(name.clone(), uid.clone());
        } else if self.ready.get(&name) == Some(&uid) {
            self.ready.remove(&name);
        }
        let Some(p) = self.pending.get_mut(&name) else {
            return;
        };
        if uid == p.old_uid {
            return;
        }
        // A new pod of that name: the old one is gone even if its deletion event was missed.
        let gone = *p.gone_at.get_or_insert(now);
        let created = *p.created_at.get_or_insert(now);
        if ready {
            let secs = |a: Instant, b: Instant| b.saturating_duration_since(a).as_secs_f64();
            self.samples.push(Sample {
                total: secs(p.deleted_at, now),
                to_gone: secs(p.deleted_at, gone),
                to_created: secs(p.deleted_at, created),
                to_ready: secs(created, now),
            });
            self.pending.remove(&name);
        }
    }

    fn deleted(&mut self, pod: &Pod, now: Instant) {
        let (Some(name), Some(uid)) = (pod.metadata.name.as_ref(), pod.metadata.uid.as_ref())
        else {
            return;
        };
        if self.ready.get(name) == Some(uid) {
            self.ready.remove(name);
        }
        if self.churning {
            self.gone.insert(name.clone(), now);
        }
        match self.pending.get_mut(name) {
            Some(p) if &p.old_uid == uid => {
                p.gone_at.get_or_insert(now);
            }
            // A replacement (not the pod the benchmark deleted) went away.
            Some(_) => self.replacements_killed += 1,
            // A replacement deleted after it was measured.
            None if self.churning => self.replacements_killed += 1,
            None => {}
        }
    }
}

/// Watches the namespace's pods into the tracker until the task is aborted.
fn track(pods: Api<Pod>, tracker: Arc<Mutex<Tracker>>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher(pods, watcher::Config::default()));
        while let Some(event) = events.next().await {
            let now = Instant::now();
            let mut t = tracker.lock().unwrap();
            match event {
                Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => {
                    t.applied(&pod, now);
                }
                Ok(watcher::Event::Delete(pod)) => t.deleted(&pod, now),
                Ok(watcher::Event::Init | watcher::Event::InitDone) => {}
                Err(e) => eprintln!("bench pod watch: {e}"),
            }
        }
    })
}

/// Polls `done` every 100 ms until it holds or `timeout` passes.
async fn wait_until(
    what: &str,
    timeout: Duration,
    mut done: impl FnMut() -> bool,
) -> anyhow::Result<()> {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > timeout {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// A uniform random sequence from the standard library's randomly seeded hasher (xorshift).
struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(0);
        Rng(h.finish() | 1)
    }
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        usize::try_from(self.0 % u64::try_from(n).unwrap()).unwrap()
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    // Nearest rank.
    let rank = (p * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

fn summary(mut values: Vec<f64>) -> String {
    values.sort_by(f64::total_cmp);
    format!(
        "p50 {:.3} s  p99 {:.3} s  max {:.3} s",
        percentile(&values, 0.50),
        percentile(&values, 0.99),
        values.last().copied().unwrap_or(f64::NAN)
    )
}

fn mib(kib: Option<u64>) -> String {
    kib.map(|k| format!("{:.1} MiB", k as f64 / 1024.0))
        .unwrap_or_else(|| "n/a".into())
}

/// Label, taint key and kwok annotation value of the benchmark's own nodes.
const BENCH_LABEL: &str = "kstretch.io/bench";

/// A kwok process playing the kubelet for the benchmark's nodes only, killed when dropped.
struct KwokProcess {
    child: Child,
    log: PathBuf,
}

impl Drop for KwokProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const BENCH_NODES: usize = 3;

fn node_name(id: &str, i: usize) -> String {
    format!("{id}-node-{i}")
}

/// Creates the benchmark's nodes (tainted, so only its pods go there) and starts a kwok that
/// manages them alone, then waits until they are Ready.
async fn start_bench_nodes(
    opts: &Opts,
    cluster: &Cluster,
    kubeconfig: &std::path::Path,
    id: &str,
) -> anyhow::Result<KwokProcess> {
    let (Some(kwok), Some(stages)) = (&opts.kwok, &opts.kwok_stages) else {
        bail!("no kwok given");
    };
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    for i in 0..BENCH_NODES {
        let name = node_name(id, i);
        let node: Node = serde_json::from_value(json!({
            "metadata": {
                "name": name,
                "annotations": {"kwok.x-k8s.io/node": id, "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {
                    "type": "kwok",
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    BENCH_LABEL: id,
                },
            },
            "spec": {"taints": [{"key": BENCH_LABEL, "value": id, "effect": "NoSchedule"}]},
            "status": {
                "allocatable": {"cpu": "128", "memory": "512Gi", "pods": "1100"},
                "capacity": {"cpu": "128", "memory": "512Gi", "pods": "1100"},
            },
        }))?;
        nodes
            .create(&PostParams::default(), &node)
            .await
            .with_context(|| format!("create node {name}"))?;
    }
    let mut files: Vec<String> = std::fs::read_dir(stages)
        .with_context(|| format!("read {}", stages.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| p.display().to_string())
        .collect();
    files.sort();
    let port = free_port();
    let log = std::env::temp_dir().join(format!("kstretch-bench-kwok-{}.log", std::process::id()));
    let file = std::fs::File::create(&log)?;
    let child = Command::new(kwok)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--config={}", files.join(",")))
        .arg("--manage-all-nodes=false")
        .arg(format!(
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node={id}"
        ))
        .arg("--manage-nodes-with-label-selector=")
        .arg("--node-ip=127.0.0.1")
        .arg(format!("--node-port={port}"))
        .arg(format!("--server-address=127.0.0.1:{port}"))
        .arg("--cidr=10.200.0.1/16")
        .arg("--node-lease-duration-seconds=40")
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .spawn()
        .with_context(|| format!("start {}", kwok.display()))?;
    let process = KwokProcess { child, log };
    let started = Instant::now();
    loop {
        let list = nodes
            .list(&ListParams::default().labels(&format!("{BENCH_LABEL}={id}")))
            .await?;
        let ready = list
            .items
            .iter()
            .filter(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        if ready == BENCH_NODES {
            return Ok(process);
        }
        if started.elapsed() > Duration::from_secs(60) {
            bail!(
                "the benchmark's nodes are not Ready after 60 s; kwok log: {}",
                process.log.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn delete_bench_nodes(cluster: &Cluster, id: &str) {
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    for i in 0..BENCH_NODES {
        let _ = nodes
            .delete(&node_name(id, i), &DeleteParams::default())
            .await;
    }
}

/// Deletes the namespace and waits (bounded) until it is gone, so that the benchmark's kwok
/// can still finish the deletion of its pods.
async fn delete_namespace(cluster: &Cluster, ns: TestNamespace) {
    let name = ns.name.clone();
    ns.delete().await;
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(180) {
        match namespaces.get_opt(&name).await {
            Ok(None) => {
                println!("namespace {name} deleted");
                return;
            }
            _ => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
    println!("namespace {name} is still being deleted");
}

async fn run(
    opts: Opts,
    cluster: Cluster,
    ns: TestNamespace,
    nodes: Option<String>,
) -> anyhow::Result<()> {
    let env = TestEnv::get();
    let kubeconfig = env.clusters[opts.cluster].kubeconfig.clone();
    let pods_api: Api<Pod> = ns.api();
    let podsets_api: Api<StrimziPodSet> = ns.api();
    let total_pods = opts.podsets * opts.pods;

    let agent = start_agent(&opts, &kubeconfig, &ns.name);
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()?;
    let ready_url = format!("{}/readyz", agent.http);
    let started = Instant::now();
    loop {
        if let Ok(r) = http.get(&ready_url).send().await
            && r.status().is_success()
        {
            break;
        }
        if started.elapsed() > Duration::from_secs(60) {
            bail!(
                "the agent did not become ready; log: {}",
                agent.log.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "agent {} (pid {}) ready in {:.1} s; cluster {}, namespace {}",
        opts.agent.display(),
        agent.pid(),
        started.elapsed().as_secs_f64(),
        cluster.name,
        ns.name
    );
    let rss_start = agent.status_kib("VmRSS");

    let tracker = Arc::new(Mutex::new(Tracker::default()));
    let watch = track(pods_api.clone(), tracker.clone());

    // Create every podset (ten requests in flight).
    let created = Instant::now();
    let names: Vec<String> = (0..opts.podsets).map(|i| format!("bench-{i:03}")).collect();
    // Owned names: futures borrowing them trip higher-ranked lifetime inference in a spawned task.
    stream::iter(names.clone())
        .map(|name| {
            let api = podsets_api.clone();
            let pods = opts.pods;
            let nodes = nodes.clone();
            async move {
                api.patch(
                    &name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(&podset(&name, pods, nodes.as_deref())),
                )
                .await
                .with_context(|| format!("apply podset {name}"))
            }
        })
        .buffer_unordered(10)
        .try_collect::<Vec<_>>()
        .await?;
    let applied = created.elapsed();
    wait_until(
        &format!("{total_pods} Ready pods"),
        Duration::from_secs(600),
        || tracker.lock().unwrap().ready.len() >= total_pods,
    )
    .await?;
    println!(
        "created {} podsets x {} pods: applied in {:.1} s, all {total_pods} pods Ready after {:.1} s",
        opts.podsets,
        opts.pods,
        applied.as_secs_f64(),
        created.elapsed().as_secs_f64()
    );

    // Idle: let status writes and resyncs settle, then sample.
    tokio::time::sleep(opts.idle_settle).await;
    let mut idle = Vec::new();
    for _ in 0..10 {
        if let Some(kib) = agent.status_kib("VmRSS") {
            idle.push(kib);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    idle.sort_unstable();
    let idle_median = idle.get(idle.len() / 2).copied();
    let idle_hwm = agent.status_kib("VmHWM");
    let cpu_before = agent.cpu_seconds();

    // Churn: random distinct pods, deleted in batches.
    let mut candidates: Vec<String> = tracker.lock().unwrap().ready.keys().cloned().collect();
    candidates.sort();
    let mut rng = Rng::new();
    let mut victims = Vec::with_capacity(opts.deletions);
    for _ in 0..opts.deletions {
        let i = rng.below(candidates.len());
        victims.push(candidates.swap_remove(i));
    }
    let peak = Arc::new(Mutex::new(0u64));
    let sampler = {
        let peak = peak.clone();
        let pid = agent.pid();
        tokio::spawn(async move {
            loop {
                let status =
                    std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
                if let Some(kib) = status
                    .lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
                {
                    let mut p = peak.lock().unwrap();
                    *p = (*p).max(kib);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let churn = Instant::now();
    tracker.lock().unwrap().churning = true;
    for batch in victims.chunks(opts.batch) {
        let mut requests = Vec::new();
        {
            let mut t = tracker.lock().unwrap();
            for name in batch {
                let uid = t.ready.get(name).cloned().context("victim not ready")?;
                t.pending.insert(
                    name.clone(),
                    Pending {
                        old_uid: uid.clone(),
                        deleted_at: Instant::now(),
                        gone_at: None,
                        created_at: None,
                    },
                );
                requests.push((name.clone(), uid));
            }
        }
        let deletes = requests.into_iter().map(|(name, uid)| {
            let api = pods_api.clone();
            async move {
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: Some(uid),
                        resource_version: None,
                    }),
                    ..DeleteParams::default()
                };
                api.delete(&name, &params)
                    .await
                    .with_context(|| format!("delete pod {name}"))
            }
        });
        futures::future::try_join_all(deletes).await?;
        tokio::time::sleep(opts.batch_interval).await;
    }
    wait_until(
        "every deleted pod to be replaced and Ready",
        Duration::from_secs(300),
        || {
            let t = tracker.lock().unwrap();
            t.pending.is_empty() && t.ready.len() >= total_pods
        },
    )
    .await?;
    let churn_secs = churn.elapsed().as_secs_f64();
    sampler.abort();
    watch.abort();
    let cpu_after = agent.cpu_seconds();
    let (samples, reactions, killed) = {
        let t = tracker.lock().unwrap();
        (
            t.samples.clone(),
            t.reactions.clone(),
            t.replacements_killed,
        )
    };
    let peak_rss = *peak.lock().unwrap();
    let metrics = http
        .get(format!("{}/metrics", agent.http))
        .send()
        .await?
        .text()
        .await?;
    let metric_lines: BTreeMap<&str, &str> = metrics
        .lines()
        .filter(|l| l.starts_with("kstretch_agent_podset_"))
        .filter_map(|l| l.rsplit_once(' '))
        .collect();

    println!();
    println!("== results ==");
    println!(
        "podsets x pods:              {} x {} = {total_pods} pods (cluster {})",
        opts.podsets, opts.pods, cluster.name
    );
    println!("agent RSS at start:          {}", mib(rss_start));
    println!(
        "agent RSS idle:              {} (median of 10 samples over 5 s, {} s after all pods were Ready)",
        mib(idle_median),
        opts.idle_settle.as_secs()
    );
    println!(
        "agent peak RSS so far:       {} (VmHWM, includes the creation of all pods)",
        mib(idle_hwm)
    );
    println!(
        "churn:                       {} pods deleted in batches of {}, one batch every {} ms; all replaced in {:.1} s",
        samples.len(),
        opts.batch,
        opts.batch_interval.as_millis(),
        churn_secs
    );
    println!(
        "deletion -> replacement Ready:           {}",
        summary(samples.iter().map(|s| s.total).collect())
    );
    println!(
        "  deletion -> old pod gone (kwok):       {}",
        summary(samples.iter().map(|s| s.to_gone).collect())
    );
    println!(
        "  deletion -> replacement created:       {}",
        summary(samples.iter().map(|s| s.to_created).collect())
    );
    println!(
        "  replacement created -> Ready:          {}",
        summary(samples.iter().map(|s| s.to_ready).collect())
    );
    println!(
        "pod gone -> pod created again (agent):   {} ({} gaps)",
        summary(reactions.clone()),
        reactions.len()
    );
    println!("replacement pods deleted by kwok:        {killed}");
    println!(
        "agent peak RSS under churn:  {} (VmRSS sampled every 100 ms)",
        mib(Some(peak_rss))
    );
    if let (Some(a), Some(b)) = (cpu_before, cpu_after) {
        println!("agent CPU during churn:      {:.2} s", b - a);
    }
    for key in [
        "kstretch_agent_podset_pods_created_total",
        "kstretch_agent_podset_status_updates_total",
        "kstretch_agent_podset_reconciliations_total{result=\"ok\"}",
        "kstretch_agent_podset_reconciliations_total{result=\"error\"}",
        "kstretch_agent_podset_reconcile_duration_seconds_count",
        "kstretch_agent_podset_reconcile_duration_seconds_sum",
    ] {
        println!("{key} {}", metric_lines.get(key).copied().unwrap_or("0"));
    }
    if samples.len() != opts.deletions {
        bail!(
            "{} of {} deleted pods were measured",
            samples.len(),
            opts.deletions
        );
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let opts = Opts::parse()?;
    let env = TestEnv::get();
    let cluster = Cluster::connect(
        env.clusters
            .get(opts.cluster)
            .context("no such cluster in the environment")?,
    )
    .await;
    crds::install(&cluster).await;
    let ns = cluster.namespace("bench-podsets").await;
    println!(
        "bench_podsets: {} podsets x {} pods, {} deletions, deadline {} s",
        opts.podsets,
        opts.pods,
        opts.deletions,
        opts.deadline.as_secs()
    );
    let nodes = match &opts.kwok {
        None => None,
        Some(_) => {
            let id = ns.name.clone();
            let kubeconfig = env.clusters[opts.cluster].kubeconfig.clone();
            match start_bench_nodes(&opts, &cluster, &kubeconfig, &id).await {
                Ok(kwok) => {
                    println!(
                        "own kwok (pid {}) and {BENCH_NODES} nodes {id}-node-*",
                        kwok.child.id()
                    );
                    Some((id, kwok))
                }
                Err(e) => {
                    delete_bench_nodes(&cluster, &id).await;
                    delete_namespace(&cluster, ns).await;
                    return Err(e);
                }
            }
        }
    };
    // The run is a task so that a panic in it still reaches the clean-up below.
    let task = tokio::spawn(run(
        opts.clone(),
        cluster.clone(),
        ns.clone(),
        nodes.as_ref().map(|(id, _)| id.clone()),
    ));
    let outcome = tokio::time::timeout(opts.deadline, task).await;
    delete_namespace(&cluster, ns).await;
    if let Some((id, kwok)) = nodes {
        delete_bench_nodes(&cluster, &id).await;
        drop(kwok);
    }
    match outcome {
        Ok(Ok(result)) => result,
        Ok(Err(join)) => bail!("the benchmark failed: {join}"),
        Err(_) => bail!("the benchmark exceeded its deadline of {:?}", opts.deadline),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&values, 0.50), 50.0);
        assert_eq!(percentile(&values, 0.99), 99.0);
        assert_eq!(percentile(&[3.0], 0.99), 3.0);
        assert!(percentile(&[], 0.5).is_nan());
    }

    fn pod(name: &str, uid: &str, ready: bool) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "uid": uid},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
        }))
        .unwrap()
    }

    #[test]
    fn the_tracker_times_a_replacement_and_counts_kills() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut t = Tracker::default();
        t.applied(&pod("p", "u1", true), at(0));
        t.churning = true;
        t.pending.insert(
            "p".into(),
            Pending {
                old_uid: "u1".into(),
                deleted_at: at(0),
                gone_at: None,
                created_at: None,
            },
        );
        t.deleted(&pod("p", "u1", true), at(100));
        t.applied(&pod("p", "u2", false), at(130));
        // kwok deletes the replacement; the agent creates another.
        t.deleted(&pod("p", "u2", false), at(150));
        t.applied(&pod("p", "u3", false), at(170));
        t.applied(&pod("p", "u3", true), at(400));
        assert_eq!(t.replacements_killed, 1);
        assert!(t.pending.is_empty());
        let s = t.samples[0];
        assert!((s.total - 0.4).abs() < 1e-9, "{s:?}");
        assert!((s.to_gone - 0.1).abs() < 1e-9, "{s:?}");
        assert!((s.to_created - 0.13).abs() < 1e-9, "{s:?}");
        assert_eq!(t.reactions.len(), 2);
        assert!((t.reactions[0] - 0.03).abs() < 1e-9);
        assert!((t.reactions[1] - 0.02).abs() < 1e-9);
        assert_eq!(t.ready.get("p").map(String::as_str), Some("u3"));
    }
}
