//! Benchmark of central's Kafka reconciler and agent link against the real environment (not a
//! test): how long the real `kstretch-central` takes to produce and push the desired state of a
//! three-cluster stretched `Kafka` (3 pools × `--replicas` nodes) and a change of it, and how
//! much memory it needs for that.
//!
//! Central runs against cluster alpha (`--member-clusters alpha,beta,gamma`), limited to a fresh
//! namespace. Alpha and beta have real agents limited to that namespace (same name in both
//! clusters); gamma has no apiserver: a raw link client (`kstretch_tests::rawlink`) with an
//! agent certificate for gamma completes the handshake, answers heartbeats, records when each
//! snapshot arrives and how big it is, and reports it applied at once (it applies nothing).
//!
//! Measured from the benchmark's side, independently of central's logs: central's admin API
//! (`ListAgents`, polled every `--poll-ms`) for when a generation was computed (`updated_at`),
//! sent to each agent and reported applied; the raw client for the exact arrival at gamma;
//! watches of the podsets in alpha and beta for when they hold the new definition;
//! `/proc/<central pid>/status` for its memory (VmRSS, VmHWM) and `/proc/<pid>/stat` for its
//! CPU time. After the timings, the real agents are stopped and raw clients with alpha's and
//! beta's certificates read those clusters' snapshots, for their sizes.
//!
//! Processes are killed and both namespaces deleted at the end, whatever happened; everything
//! is bounded by `--deadline-s`. Run it with `scripts/bench-central.sh`.

// Benchmark driver: a failed expectation ends the run, so panicking is the point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kstretch_api::{Kafka, KafkaNodePool, StrimziPodSet};
use kstretch_proto::admin::v1::ListAgentsRequest;
use kstretch_proto::admin::v1::admin_service_client::AdminServiceClient;
use kstretch_proto::agent::v1::Snapshot;
use kstretch_tests::certs::Pki;
use kstretch_tests::cluster::{TEST_NAMESPACE_LABEL, TestNamespace};
use kstretch_tests::crds::{self, FIELD_MANAGER};
use kstretch_tests::process::free_port;
use kstretch_tests::rawlink::{SimulatedMember, SnapshotSeen};
use kstretch_tests::{Cluster, TestEnv};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use prost::Message as _;
use serde_json::{Value, json};

const ALPHA: &str = "alpha";
const BETA: &str = "beta";
const GAMMA: &str = "gamma";
const ALIASES: [&str; 3] = [ALPHA, BETA, GAMMA];
const KAFKA: &str = "my-cluster";
/// Pool name → (roles, cluster alias). Node IDs go to pools in name order: pool-a gets
/// 0..replicas, and so on.
const POOLS: [(&str, &[&str], &str); 3] = [
    ("pool-a", &["controller", "broker"], ALPHA),
    ("pool-b", &["broker"], BETA),
    ("pool-c", &["broker"], GAMMA),
];

#[derive(Debug, Clone)]
struct Opts {
    replicas: usize,
    changes: usize,
    poll: Duration,
    /// How long nothing may change before a phase counts as settled.
    quiet: Duration,
    idle_settle: Duration,
    deadline: Duration,
    central: PathBuf,
    agent: PathBuf,
    /// Whether gamma's raw client answers each snapshot with an ApplyReport.
    gamma_reports: bool,
}

impl Opts {
    fn parse() -> anyhow::Result<Opts> {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
        let mut opts = Opts {
            replicas: 30,
            changes: 5,
            poll: Duration::from_millis(50),
            quiet: Duration::from_secs(3),
            idle_settle: Duration::from_secs(10),
            deadline: Duration::from_secs(900),
            central: target.join("release/kstretch-central"),
            agent: target.join("release/kstretch-agent"),
            gamma_reports: true,
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
                "--replicas" => opts.replicas = usize::try_from(number()?)?.max(1),
                "--changes" => opts.changes = usize::try_from(number()?)?,
                "--poll-ms" => opts.poll = Duration::from_millis(number()?.max(1)),
                "--quiet-s" => opts.quiet = Duration::from_secs(number()?),
                "--idle-settle-s" => opts.idle_settle = Duration::from_secs(number()?),
                "--deadline-s" => opts.deadline = Duration::from_secs(number()?),
                "--central" => opts.central = PathBuf::from(&value),
                "--agent" => opts.agent = PathBuf::from(&value),
                "--gamma-reports" => {
                    opts.gamma_reports = match value.as_str() {
                        "true" => true,
                        "false" => false,
                        _ => bail!("--gamma-reports takes true or false"),
                    }
                }
                other => bail!(
                    "unknown flag {other}; flags: --replicas N --changes N --poll-ms N --quiet-s N \
                     --idle-settle-s N --deadline-s N --central PATH --agent PATH \
                     --gamma-reports true|false"
                ),
            }
        }
        for binary in [&opts.central, &opts.agent] {
            if !binary.exists() {
                bail!(
                    "{} is missing: build it first (scripts/bench-central.sh does)",
                    binary.display()
                );
            }
        }
        Ok(opts)
    }

    /// `release` or `debug`, from the directory central was built into.
    fn profile(&self) -> String {
        self.central
            .parent()
            .and_then(Path::file_name)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|| "?".into())
    }
}

// ------------------------------------------------------------------------------ processes

/// A process of the benchmark, killed when dropped; its output goes to a log file.
struct Proc {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn start(name: &str, mut command: Command) -> Proc {
        let log = std::env::temp_dir().join(format!(
            "kstretch-bench-central-{name}-{}.log",
            std::process::id()
        ));
        let file = std::fs::File::create(&log).expect("log file");
        let child = command
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log file"))
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        Proc {
            name: name.to_owned(),
            child,
            log,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A line of /proc/<pid>/status in KiB (`VmRSS`, `VmHWM`).
    fn status_kib(&self, field: &str) -> Option<u64> {
        status_kib(self.pid(), field)
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

    /// Fails if the process has exited.
    fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "{} exited ({status}); log: {}",
                self.name,
                self.log.display()
            );
        }
        Ok(())
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// Where central listens.
struct CentralAddrs {
    http: String,
    admin: String,
    link: String,
}

fn start_central(opts: &Opts, kubeconfig: &Path, ns: &str, pki: &Pki) -> (Proc, CentralAddrs) {
    let server = pki.server();
    let (http, grpc, link) = (free_port(), free_port(), free_port());
    let mut command = Command::new(&opts.central);
    command
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--namespace", ns])
        .args(["--cluster-alias", ALPHA])
        .args(["--member-clusters", &ALIASES.join(",")])
        .args(["--http-addr", &format!("127.0.0.1:{http}")])
        .args(["--grpc-addr", &format!("127.0.0.1:{grpc}")])
        .args(["--link-addr", &format!("127.0.0.1:{link}")])
        .arg("--tls-ca")
        .arg(&server.ca)
        .arg("--tls-cert")
        .arg(&server.cert)
        .arg("--tls-key")
        .arg(&server.key)
        // BENCH_CENTRAL_LOG sets central's log filter, e.g. to see what triggers reconciles.
        .env(
            "RUST_LOG",
            std::env::var("BENCH_CENTRAL_LOG").unwrap_or_else(|_| "info".to_owned()),
        );
    (
        Proc::start("central", command),
        CentralAddrs {
            http: format!("http://127.0.0.1:{http}"),
            admin: format!("http://127.0.0.1:{grpc}"),
            link: format!("https://127.0.0.1:{link}"),
        },
    )
}

fn start_agent(
    opts: &Opts,
    alias: &str,
    kubeconfig: &Path,
    ns: &str,
    pki: &Pki,
    link: &str,
) -> Proc {
    let mut command = kstretch_tests::stretch::agent_command(
        &opts.agent,
        kubeconfig,
        alias,
        ns,
        link,
        &pki.agent(alias),
        free_port(),
    );
    command.env("RUST_LOG", "info");
    Proc::start(&format!("agent-{alias}"), command)
}

// ------------------------------------------------------------------------------ observation

/// One agent as `ListAgents` showed it.
#[derive(Debug, Clone, PartialEq)]
struct AgentView {
    connected: bool,
    sent: u64,
    applied: u64,
    /// Pods the agent reported Ready, over all its podsets.
    ready_pods: i32,
}

/// One cluster's desired state as `ListAgents` showed it.
#[derive(Debug, Clone, PartialEq)]
struct DesiredView {
    generation: u64,
    objects: u32,
    updated_at: SystemTime,
}

/// What one `ListAgents` answer showed; only answers that differ from the previous are kept.
#[derive(Debug, Clone)]
struct Sample {
    at: Instant,
    agents: BTreeMap<String, AgentView>,
    desired: BTreeMap<String, DesiredView>,
}

impl Sample {
    fn desired_gen(&self, alias: &str) -> u64 {
        self.desired.get(alias).map_or(0, |d| d.generation)
    }
    fn agent(&self, alias: &str) -> Option<&AgentView> {
        self.agents.get(alias)
    }
}

type Timeline = Arc<Mutex<Vec<Sample>>>;

async fn admin_client(url: &str) -> anyhow::Result<AdminServiceClient<tonic::transport::Channel>> {
    let channel = tonic::transport::Endpoint::from_shared(url.to_owned())?
        .connect_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(5))
        .connect()
        .await?;
    Ok(AdminServiceClient::new(channel))
}

async fn list_agents(
    client: &mut AdminServiceClient<tonic::transport::Channel>,
) -> anyhow::Result<Sample> {
    let response = client.list_agents(ListAgentsRequest {}).await?.into_inner();
    let at = Instant::now();
    Ok(Sample {
        at,
        agents: response
            .agents
            .iter()
            .map(|a| {
                (
                    a.cluster_alias.clone(),
                    AgentView {
                        connected: a.connected,
                        sent: a.sent_generation,
                        applied: a.applied_generation,
                        ready_pods: a.podsets.iter().map(|p| p.ready_pods.max(0)).sum(),
                    },
                )
            })
            .collect(),
        desired: response
            .desired
            .iter()
            .map(|d| {
                (
                    d.cluster_alias.clone(),
                    DesiredView {
                        generation: d.generation,
                        objects: d.objects,
                        updated_at: d
                            .updated_at
                            .and_then(|t| SystemTime::try_from(t).ok())
                            .unwrap_or(SystemTime::UNIX_EPOCH),
                    },
                )
            })
            .collect(),
    })
}

/// Polls `ListAgents` into the timeline until aborted.
fn poll_admin(
    mut client: AdminServiceClient<tonic::transport::Channel>,
    every: Duration,
    timeline: Timeline,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tick.tick().await;
            let Ok(sample) = list_agents(&mut client).await else {
                continue;
            };
            let mut t = timeline.lock().unwrap();
            let same = t
                .last()
                .is_some_and(|l| l.agents == sample.agents && l.desired == sample.desired);
            if !same {
                t.push(sample);
            }
        }
    })
}

/// One podset as a watch event showed it.
#[derive(Debug, Clone)]
struct PodSetSeen {
    at: Instant,
    name: String,
    generation: i64,
    pods: usize,
}

type PodSetLog = Arc<Mutex<Vec<PodSetSeen>>>;

/// Watches the podsets of `api` into `log` until aborted.
fn watch_podsets(api: Api<StrimziPodSet>, log: PodSetLog) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher(api, watcher::Config::default()));
        while let Some(event) = events.next().await {
            let at = Instant::now();
            if let Ok(watcher::Event::Apply(ps) | watcher::Event::InitApply(ps)) = event {
                log.lock().unwrap().push(PodSetSeen {
                    at,
                    name: ps.metadata.name.clone().unwrap_or_default(),
                    generation: ps.metadata.generation.unwrap_or_default(),
                    pods: ps.spec.pods.len(),
                });
            }
        }
    })
}

/// RSS sampled every 100 ms; the peak since the last reset.
fn sample_rss(pid: u32, peak: Arc<Mutex<u64>>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            if let Some(kib) = status_kib(pid, "VmRSS") {
                let mut p = peak.lock().unwrap();
                *p = (*p).max(kib);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

/// Median of 10 RSS samples over 5 s.
async fn settled_rss(central: &Proc) -> Option<u64> {
    let mut samples = Vec::new();
    for _ in 0..10 {
        if let Some(kib) = central.status_kib("VmRSS") {
            samples.push(kib);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    samples.sort_unstable();
    samples.get(samples.len() / 2).copied()
}

// ------------------------------------------------------------------------------ manifests

fn kafka(retention_hours: u64) -> Value {
    json!({
        "apiVersion": "kafka.strimzi.io/v1", "kind": "Kafka",
        "metadata": {"name": KAFKA,
                     "annotations": {"strimzi.io/skip-broker-scaledown-check": "true"}},
        "spec": {"kafka": {
            "listeners": [{"name": "plain", "port": 9092, "type": "internal", "tls": false}],
            "config": {
                "offsets.topic.replication.factor": 3,
                "transaction.state.log.replication.factor": 3,
                "transaction.state.log.min.isr": 2,
                "default.replication.factor": 3,
                "min.insync.replicas": 2,
                "log.retention.hours": retention_hours,
            }
        }}
    })
}

fn pool(name: &str, roles: &[&str], alias: &str, replicas: usize) -> Value {
    let mut annotations = json!({});
    // Pools without the annotation run in central's own cluster.
    if alias != ALPHA {
        annotations["strimzi.io/stretch-cluster-alias"] = json!(alias);
    }
    json!({
        "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaNodePool",
        "metadata": {"name": name, "labels": {"strimzi.io/cluster": KAFKA},
                     "annotations": annotations},
        "spec": {"replicas": replicas, "roles": roles,
                 "storage": {"type": "jbod", "volumes": [
                     {"id": 0, "type": "persistent-claim", "size": "100Gi", "deleteClaim": false,
                      "kraftMetadata": "shared"}]}}
    })
}

async fn apply<K>(api: &Api<K>, object: &Value) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let name = object["metadata"]["name"].as_str().context("name")?;
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .with_context(|| format!("apply {name}"))?;
    Ok(())
}

// ------------------------------------------------------------------------------ figures

fn secs(d: Option<Duration>) -> String {
    d.map(|d| format!("{:.3} s", d.as_secs_f64()))
        .unwrap_or_else(|| "n/a".into())
}

fn mib(kib: Option<u64>) -> String {
    kib.map(|k| format!("{:.1} MiB", k as f64 / 1024.0))
        .unwrap_or_else(|| "n/a".into())
}

fn kib(bytes: usize) -> String {
    format!("{:.1} KiB", bytes as f64 / 1024.0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    // Nearest rank.
    let rank = (p * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

/// `p50 / max` of the values that were measured (and how many were not).
fn p50_max(values: &[Option<Duration>]) -> String {
    let mut v: Vec<f64> = values.iter().flatten().map(Duration::as_secs_f64).collect();
    v.sort_by(f64::total_cmp);
    let missing = values.len() - v.len();
    let mut out = format!(
        "{:.3} s / {:.3} s",
        percentile(&v, 0.5),
        v.last().copied().unwrap_or(f64::NAN)
    );
    if missing > 0 {
        out.push_str(&format!(" ({missing} not measured)"));
    }
    out
}

/// Per cluster, when one generation (and everything up to it) was computed, sent and applied.
#[derive(Debug, Clone, Default)]
struct Arrival {
    generation: u64,
    /// Central's `updated_at` of that generation, from the start.
    computed: Option<Duration>,
    /// First `ListAgents` answer showing it sent (alpha, beta) or its arrival (gamma).
    pushed: Option<Duration>,
    /// First `ListAgents` answer showing it applied.
    applied: Option<Duration>,
    /// Podset in the apiserver with the new definition (alpha, beta).
    in_apiserver: Option<Duration>,
}

/// Fills an [`Arrival`] for `alias` and generation `generation` from what was observed since
/// `start` (`wall` is the same moment in wall-clock time).
fn arrival(
    alias: &str,
    generation: u64,
    start: Instant,
    wall: SystemTime,
    timeline: &[Sample],
    gamma: &[SnapshotSeen],
) -> Arrival {
    let since = |at: Instant| at.saturating_duration_since(start);
    let after: Vec<&Sample> = timeline.iter().filter(|s| s.at >= start).collect();
    let computed = after
        .iter()
        .find_map(|s| s.desired.get(alias).filter(|d| d.generation == generation))
        .and_then(|d| d.updated_at.duration_since(wall).ok());
    let pushed = if alias == GAMMA {
        gamma
            .iter()
            .find(|s| s.at >= start && s.generation >= generation)
            .map(|s| since(s.at))
    } else {
        after
            .iter()
            .find(|s| s.agent(alias).is_some_and(|a| a.sent >= generation))
            .map(|s| since(s.at))
    };
    let applied = after
        .iter()
        .find(|s| s.agent(alias).is_some_and(|a| a.applied >= generation))
        .map(|s| since(s.at));
    Arrival {
        generation,
        computed,
        pushed,
        applied,
        in_apiserver: None,
    }
}

/// The first watch event at or after `start` of podset `name` with a generation above
/// `above` and `pods` pods.
fn podset_seen(
    log: &PodSetLog,
    name: &str,
    above: i64,
    pods: usize,
    start: Instant,
) -> Option<Duration> {
    log.lock()
        .unwrap()
        .iter()
        .find(|p| p.at >= start && p.name == name && p.generation > above && p.pods == pods)
        .map(|p| p.at.saturating_duration_since(start))
}

/// Size figures of one snapshot.
struct SnapshotSize {
    objects: usize,
    json_bytes: usize,
    wire_bytes: usize,
    /// Kind → (count, JSON bytes).
    by_kind: BTreeMap<String, (usize, usize)>,
}

fn size_of(snapshot: &Snapshot) -> SnapshotSize {
    let mut by_kind: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for o in &snapshot.objects {
        let kind = o.r#ref.as_ref().map(|r| r.kind.clone()).unwrap_or_default();
        let e = by_kind.entry(kind).or_default();
        e.0 += 1;
        e.1 += o.json.len();
    }
    SnapshotSize {
        objects: snapshot.objects.len(),
        json_bytes: snapshot.objects.iter().map(|o| o.json.len()).sum(),
        wire_bytes: snapshot.encoded_len(),
        by_kind,
    }
}

/// The podsets of `snapshot`: name → number of pods.
fn podsets_in(snapshot: &Snapshot) -> BTreeMap<String, usize> {
    snapshot
        .objects
        .iter()
        .filter(|o| o.r#ref.as_ref().is_some_and(|r| r.kind == "StrimziPodSet"))
        .filter_map(|o| {
            let v: Value = serde_json::from_slice(&o.json).ok()?;
            Some((
                v["metadata"]["name"].as_str()?.to_owned(),
                v["spec"]["pods"].as_array().map_or(0, Vec::len),
            ))
        })
        .collect()
}

fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name")?.split_once(':').map(|x| x.1))
        .map_or("unknown CPU".to_owned(), |m| m.trim().to_owned());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or("?".to_owned(), |k| {
            format!("{:.1} GiB", k as f64 / 1024.0 / 1024.0)
        });
    format!("{cores} cores ({model}), {memory} memory")
}

// ------------------------------------------------------------------------------ the run

/// Waits (polling every 100 ms) until `done` returns Some, or fails after `timeout` with
/// `what` and whatever `state` says.
async fn wait_until<T>(
    what: &str,
    timeout: Duration,
    central: &mut Proc,
    mut done: impl FnMut() -> Option<T>,
    state: impl Fn() -> String,
) -> anyhow::Result<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = done() {
            return Ok(v);
        }
        central.check_alive()?;
        if start.elapsed() > timeout {
            bail!(
                "timed out after {timeout:?} waiting for {what}; last seen: {}",
                state()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until no desired generation has changed for `quiet`.
async fn wait_quiet(
    timeline: &Timeline,
    quiet: Duration,
    central: &mut Proc,
) -> anyhow::Result<()> {
    let gens = || {
        timeline
            .lock()
            .unwrap()
            .last()
            .map(|s| {
                s.desired
                    .iter()
                    .map(|(a, d)| (a.clone(), d.generation))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    let mut last = gens();
    let mut since = Instant::now();
    let start = Instant::now();
    while since.elapsed() < quiet {
        central.check_alive()?;
        if start.elapsed() > Duration::from_secs(120) {
            bail!("central's desired state did not settle within 120 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = gens();
        if now != last {
            last = now;
            since = Instant::now();
        }
    }
    Ok(())
}

fn latest(timeline: &Timeline) -> Option<Sample> {
    timeline.lock().unwrap().last().cloned()
}

#[derive(Default)]
struct Results {
    idle_rss: Option<u64>,
    idle_hwm: Option<u64>,
    create: BTreeMap<String, Arrival>,
    create_objects: BTreeMap<String, u32>,
    create_generations: BTreeMap<String, u64>,
    create_cpu: Option<f64>,
    create_peak: u64,
    after_create_rss: Option<u64>,
    changes: Vec<BTreeMap<String, Arrival>>,
    /// Pods alpha's and beta's agents reported Ready when each change was made.
    changes_ready: Vec<(i32, i32)>,
    changes_cpu: Option<f64>,
    changes_peak: u64,
    final_rss: Option<u64>,
    final_hwm: Option<u64>,
    sizes: BTreeMap<String, SnapshotSize>,
    metrics: Vec<String>,
}

#[allow(clippy::too_many_lines)]
async fn run(opts: Opts, ns: String, alpha: Cluster, beta: Cluster) -> anyhow::Result<Results> {
    let env = TestEnv::get();
    let pki = Pki::new("bench-central");
    let mut out = Results::default();
    let (mut central, addrs) = start_central(&opts, &env.clusters[0].kubeconfig, &ns, &pki);
    let mut agents = BTreeMap::new();
    for (alias, c) in [(ALPHA, &env.clusters[0]), (BETA, &env.clusters[1])] {
        agents.insert(
            alias,
            start_agent(&opts, alias, &c.kubeconfig, &ns, &pki, &addrs.link),
        );
    }

    // Central's admin API answers once it is up.
    let started = Instant::now();
    let admin = loop {
        if let Ok(c) = admin_client(&addrs.admin).await {
            break c;
        }
        central.check_alive()?;
        if started.elapsed() > Duration::from_secs(60) {
            bail!(
                "central's admin API did not come up; log: {}",
                central.log.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let gamma_cert = pki.agent(GAMMA);
    let gamma = loop {
        match SimulatedMember::connect(
            &addrs.link,
            &gamma_cert,
            GAMMA,
            std::slice::from_ref(&ns),
            opts.gamma_reports,
        )
        .await
        {
            Ok(g) => break g,
            Err(e) if started.elapsed() > Duration::from_secs(60) => {
                bail!("gamma's raw client cannot connect: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    let timeline: Timeline = Arc::default();
    let poller = poll_admin(admin, opts.poll, timeline.clone());
    let logs: BTreeMap<&str, PodSetLog> = [(ALPHA, Arc::default()), (BETA, Arc::default())].into();
    let watches = [
        watch_podsets(
            Api::namespaced(alpha.client.clone(), &ns),
            logs[ALPHA].clone(),
        ),
        watch_podsets(
            Api::namespaced(beta.client.clone(), &ns),
            logs[BETA].clone(),
        ),
    ];

    // Everyone connected and holding central's (empty) desired state.
    wait_until(
        "all three members connected with their first (empty) snapshot applied",
        Duration::from_secs(90),
        &mut central,
        || {
            let s = latest(&timeline)?;
            ALIASES
                .iter()
                .all(|a| {
                    let g = s.desired_gen(a);
                    g > 0
                        && s.agent(a).is_some_and(|v| {
                            v.connected
                                && v.sent >= g
                                && ((*a == GAMMA && !opts.gamma_reports) || v.applied >= g)
                        })
                })
                .then_some(())
        },
        || format!("{:?}", latest(&timeline)),
    )
    .await?;
    println!(
        "central {} (pid {}), agents alpha and beta, raw client gamma: all connected after {:.1} s; namespace {ns}",
        opts.central.display(),
        central.pid(),
        started.elapsed().as_secs_f64()
    );
    tokio::time::sleep(opts.idle_settle).await;
    out.idle_rss = settled_rss(&central).await;
    out.idle_hwm = central.status_kib("VmHWM");

    // Pools first, then the Kafka: the reconciler is keyed by the Kafka, so its first
    // reconciliation already sees all three pools and the clock starts at the Kafka.
    let kafkas: Api<Kafka> = Api::namespaced(alpha.client.clone(), &ns);
    let pools: Api<KafkaNodePool> = Api::namespaced(alpha.client.clone(), &ns);
    for (name, roles, alias) in POOLS {
        apply(&pools, &pool(name, roles, alias, opts.replicas)).await?;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let peak = Arc::new(Mutex::new(0u64));
    let sampler = sample_rss(central.pid(), peak.clone());
    let before = latest(&timeline).context("no ListAgents answer yet")?;
    let cpu_before = central.cpu_seconds();
    let (t0, wall0) = (Instant::now(), SystemTime::now());
    apply(&kafkas, &kafka(168)).await?;

    // Done: gamma's last snapshot holds its podset in full, alpha's and beta's podsets are in
    // their apiservers in full, and every agent applied what central last computed.
    let replicas = opts.replicas;
    let complete = |s: &Sample| {
        let gamma_full = gamma.last().is_some_and(|snap| {
            podsets_in(&snap).get(&format!("{KAFKA}-pool-c")) == Some(&replicas)
        });
        let in_apiserver = |alias: &str, pool: &str| {
            logs[alias]
                .lock()
                .unwrap()
                .iter()
                .any(|p| p.name == format!("{KAFKA}-{pool}") && p.pods == replicas)
        };
        gamma_full
            && in_apiserver(ALPHA, "pool-a")
            && in_apiserver(BETA, "pool-b")
            && ALIASES.iter().all(|a| {
                let g = s.desired_gen(a);
                g > before.desired_gen(a)
                    && s.agent(a).is_some_and(|v| {
                        v.sent == g && ((*a == GAMMA && !opts.gamma_reports) || v.applied == g)
                    })
            })
    };
    wait_until(
        "the Kafka's objects in all three clusters",
        Duration::from_secs(300),
        &mut central,
        || latest(&timeline).filter(|s| complete(s)).map(|_| ()),
        || {
            format!(
                "{:?}; gamma: {:?}",
                latest(&timeline),
                gamma.snapshots().last()
            )
        },
    )
    .await?;
    wait_quiet(&timeline, opts.quiet, &mut central).await?;
    out.create_cpu = central.cpu_seconds().zip(cpu_before).map(|(a, b)| a - b);
    out.create_peak = *peak.lock().unwrap();
    {
        let t = timeline.lock().unwrap();
        let last = t.last().cloned().context("no samples")?;
        let g = gamma.snapshots();
        for alias in ALIASES {
            let objects = last.desired.get(alias).map_or(0, |d| d.objects);
            out.create_objects.insert(alias.to_owned(), objects);
            out.create_generations.insert(
                alias.to_owned(),
                last.desired_gen(alias) - before.desired_gen(alias),
            );
            // The first generation with every object of the Kafka: the first with the final
            // count (exact for gamma, whose every snapshot is recorded).
            let full = if alias == GAMMA {
                g.iter()
                    .find(|s| s.at >= t0 && s.objects == objects as usize)
                    .map(|s| s.generation)
            } else {
                t.iter().filter(|s| s.at >= t0).find_map(|s| {
                    s.desired
                        .get(alias)
                        .filter(|d| d.objects == objects)
                        .map(|d| d.generation)
                })
            }
            .unwrap_or_else(|| last.desired_gen(alias));
            let mut a = arrival(alias, full, t0, wall0, &t, &g);
            if let Some((_, pool_name)) = [(ALPHA, "pool-a"), (BETA, "pool-b")]
                .iter()
                .find(|(x, _)| *x == alias)
            {
                a.in_apiserver = podset_seen(
                    &logs[alias],
                    &format!("{KAFKA}-{pool_name}"),
                    0,
                    replicas,
                    t0,
                );
            }
            out.create.insert(alias.to_owned(), a);
        }
    }
    println!(
        "created: gamma {}, alpha {}, beta {}",
        secs(out.create[GAMMA].pushed),
        secs(out.create[ALPHA].applied),
        secs(out.create[BETA].applied)
    );
    out.after_create_rss = settled_rss(&central).await;

    // Changes: one Kafka config value at a time; each changes every node's configuration,
    // so every cluster gets a new snapshot.
    *peak.lock().unwrap() = 0;
    let cpu_before = central.cpu_seconds();
    for i in 0..opts.changes {
        let before = latest(&timeline).context("no samples")?;
        let gamma_before = gamma.snapshots().last().map_or(0, |s| s.generation);
        let podset_gen = |alias: &str, pool: &str| {
            logs[alias]
                .lock()
                .unwrap()
                .iter()
                .filter(|p| p.name == format!("{KAFKA}-{pool}"))
                .map(|p| p.generation)
                .max()
                .unwrap_or(0)
        };
        let (gen_a, gen_b) = (podset_gen(ALPHA, "pool-a"), podset_gen(BETA, "pool-b"));
        let (t, wall) = (Instant::now(), SystemTime::now());
        kafkas
            .patch(
                KAFKA,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"kafka": {"config": {
                    "log.retention.hours": 169 + i as u64
                }}}})),
            )
            .await
            .context("change the Kafka's config")?;
        wait_until(
            &format!("change {} in all three clusters", i + 1),
            Duration::from_secs(120),
            &mut central,
            || {
                let s = latest(&timeline)?;
                let gamma_done = gamma
                    .snapshots()
                    .last()
                    .is_some_and(|g| g.generation > gamma_before);
                let all = ALIASES.iter().all(|a| {
                    let g = s.desired_gen(a);
                    g > before.desired_gen(a)
                        && s.agent(a).is_some_and(|v| {
                            v.sent == g && ((*a == GAMMA && !opts.gamma_reports) || v.applied == g)
                        })
                });
                (gamma_done
                    && all
                    && podset_gen(ALPHA, "pool-a") > gen_a
                    && podset_gen(BETA, "pool-b") > gen_b)
                    .then_some(())
            },
            || format!("{:?}", latest(&timeline)),
        )
        .await?;
        wait_quiet(&timeline, opts.quiet, &mut central).await?;
        let tl = timeline.lock().unwrap().clone();
        let g = gamma.snapshots();
        let mut per = BTreeMap::new();
        for alias in ALIASES {
            // The first generation after the change.
            let next = before.desired_gen(alias) + 1;
            let mut a = arrival(alias, next, t, wall, &tl, &g);
            if alias == ALPHA {
                a.in_apiserver =
                    podset_seen(&logs[ALPHA], &format!("{KAFKA}-pool-a"), gen_a, replicas, t);
            } else if alias == BETA {
                a.in_apiserver =
                    podset_seen(&logs[BETA], &format!("{KAFKA}-pool-b"), gen_b, replicas, t);
            }
            per.insert(alias.to_owned(), a);
        }
        println!(
            "change {}: gamma {}, alpha applied {}, beta applied {}",
            i + 1,
            secs(per[GAMMA].pushed),
            secs(per[ALPHA].applied),
            secs(per[BETA].applied)
        );
        out.changes.push(per);
        let ready = |a: &str| before.agent(a).map_or(0, |v| v.ready_pods);
        out.changes_ready.push((ready(ALPHA), ready(BETA)));
    }
    out.changes_cpu = central.cpu_seconds().zip(cpu_before).map(|(a, b)| a - b);
    out.changes_peak = *peak.lock().unwrap();
    sampler.abort();
    out.final_rss = settled_rss(&central).await;
    out.final_hwm = central.status_kib("VmHWM");
    if let Ok(body) = reqwest::get(format!("{}/metrics", addrs.http))
        .await
        .and_then(reqwest::Response::error_for_status)
    {
        out.metrics = body
            .text()
            .await
            .unwrap_or_default()
            .lines()
            .filter(|l| {
                l.starts_with("kstretch_central_kafka_")
                    || l.starts_with("kstretch_central_link_snapshots_sent")
            })
            .map(str::to_owned)
            .collect();
    }
    poller.abort();
    for w in watches {
        w.abort();
    }

    // Sizes: alpha's and beta's snapshots as central sends them, read with their certificates
    // once the real agents are gone (a second stream of an alias would supersede the first).
    for (alias, mut agent) in agents {
        agent.stop();
        let cert = pki.agent(alias);
        let peek =
            SimulatedMember::connect(&addrs.link, &cert, alias, std::slice::from_ref(&ns), false)
                .await
                .map_err(|e| anyhow::anyhow!("peek at {alias}'s snapshot: {e}"))?;
        let snapshot = wait_until(
            &format!("{alias}'s snapshot"),
            Duration::from_secs(30),
            &mut central,
            || peek.last(),
            || format!("{:?}", peek.ended()),
        )
        .await?;
        out.sizes.insert(alias.to_owned(), size_of(&snapshot));
    }
    if let Some(last) = gamma.last() {
        out.sizes.insert(GAMMA.to_owned(), size_of(&last));
    }
    if let Some(ended) = gamma.ended() {
        println!("note: gamma's stream ended early: {ended}");
    }
    central.stop();
    Ok(out)
}

fn print(opts: &Opts, r: &Results) {
    let n = opts.replicas;
    println!();
    println!("== results ==");
    println!("machine:  {}", machine());
    println!(
        "build:    {} (central {}, agent {})",
        opts.profile(),
        opts.central.display(),
        opts.agent.display()
    );
    println!(
        "scenario: Kafka {KAFKA} with pool-a [controller, broker] x {n} in alpha, pool-b [broker] x {n} in beta, pool-c [broker] x {n} in gamma ({} nodes); gamma is a raw link client{}; ListAgents polled every {} ms",
        3 * n,
        if opts.gamma_reports {
            " that reports every snapshot applied at once"
        } else {
            " that reports nothing"
        },
        opts.poll.as_millis()
    );
    println!();
    println!("-- apply of the Kafka (pools applied 1 s before) --");
    println!(
        "{:<8} {:>8} {:>12} {:>12} {:>12} {:>12} {:>14} {:>12}",
        "cluster",
        "objects",
        "generations",
        "computed",
        "pushed",
        "applied",
        "in apiserver",
        "generation"
    );
    for alias in ALIASES {
        let a = &r.create[alias];
        println!(
            "{:<8} {:>8} {:>12} {:>12} {:>12} {:>12} {:>14} {:>12}",
            alias,
            r.create_objects.get(alias).copied().unwrap_or(0),
            r.create_generations.get(alias).copied().unwrap_or(0),
            secs(a.computed),
            secs(a.pushed),
            secs(a.applied),
            secs(a.in_apiserver),
            a.generation
        );
    }
    println!(
        "(computed: central's updated_at of the first generation with all objects; pushed: first ListAgents answer showing it sent, for gamma its arrival at the raw client; applied: agent's ApplyReport as seen in ListAgents; in apiserver: the podset with {n} pods in the cluster's own watch)"
    );
    println!();
    println!(
        "-- {} changes of spec.kafka.config (log.retention.hours), p50 / max --",
        r.changes.len()
    );
    println!(
        "{:<8} {:>24} {:>24} {:>24} {:>24}",
        "cluster", "computed", "pushed", "applied", "podset in apiserver"
    );
    for alias in ALIASES {
        let col = |f: fn(&Arrival) -> Option<Duration>| -> String {
            p50_max(&r.changes.iter().map(|c| f(&c[alias])).collect::<Vec<_>>())
        };
        println!(
            "{:<8} {:>24} {:>24} {:>24} {:>24}",
            alias,
            col(|a| a.computed),
            col(|a| a.pushed),
            col(|a| a.applied),
            if alias == GAMMA {
                "-".to_owned()
            } else {
                col(|a| a.in_apiserver)
            }
        );
    }
    let all_pushed: Vec<Option<Duration>> = r
        .changes
        .iter()
        .map(|c| {
            ALIASES
                .iter()
                .map(|a| c[*a].pushed)
                .collect::<Option<Vec<_>>>()
                .and_then(|v| v.into_iter().max())
        })
        .collect();
    println!(
        "change pushed to all three clusters: {}",
        p50_max(&all_pushed)
    );
    println!(
        "per change (pods Ready in alpha / beta when it was made; computed, last push, last apply):"
    );
    for (i, c) in r.changes.iter().enumerate() {
        let last = |f: fn(&Arrival) -> Option<Duration>| {
            ALIASES
                .iter()
                .map(|a| f(&c[*a]))
                .collect::<Option<Vec<_>>>()
                .and_then(|v| v.into_iter().max())
        };
        let (ra, rb) = r.changes_ready.get(i).copied().unwrap_or_default();
        println!(
            "  {}: ready {ra:>2} / {rb:>2}; computed {}, pushed {}, applied {}",
            i + 1,
            secs(last(|a| a.computed)),
            secs(last(|a| a.pushed)),
            secs(last(|a| a.applied)),
        );
    }
    println!();
    println!("-- central's memory and CPU --");
    println!(
        "RSS idle (3 members connected, no Kafka):   {}",
        mib(r.idle_rss)
    );
    println!(
        "VmHWM before the Kafka:                     {}",
        mib(r.idle_hwm)
    );
    println!(
        "peak RSS while the Kafka was created:       {} (VmRSS sampled every 100 ms)",
        mib(Some(r.create_peak))
    );
    println!(
        "RSS settled with the Kafka:                 {}",
        mib(r.after_create_rss)
    );
    println!(
        "peak RSS during the changes:                {}",
        mib(Some(r.changes_peak))
    );
    println!(
        "RSS settled at the end:                     {}",
        mib(r.final_rss)
    );
    println!(
        "VmHWM at the end (peak over the whole run): {}",
        mib(r.final_hwm)
    );
    if let Some(c) = r.create_cpu {
        println!("CPU time, creation until settled:           {c:.2} s");
    }
    if let Some(c) = r.changes_cpu {
        println!(
            "CPU time, {} changes until settled:          {c:.2} s",
            r.changes.len()
        );
    }
    println!();
    println!("-- snapshot sizes (final) --");
    println!(
        "{:<8} {:>8} {:>12} {:>12}  by kind (count, JSON)",
        "cluster", "objects", "JSON", "protobuf"
    );
    for (alias, s) in &r.sizes {
        let kinds: Vec<String> = s
            .by_kind
            .iter()
            .map(|(k, (c, b))| format!("{k} {c} {}", kib(*b)))
            .collect();
        println!(
            "{:<8} {:>8} {:>12} {:>12}  {}",
            alias,
            s.objects,
            kib(s.json_bytes),
            kib(s.wire_bytes),
            kinds.join(", ")
        );
    }
    println!();
    for line in &r.metrics {
        println!("{line}");
    }
}

/// The namespace `name` in `cluster` (created, labelled as a test namespace).
async fn same_namespace(cluster: &Cluster, name: &str) -> anyhow::Result<TestNamespace> {
    let ns: Namespace = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {TEST_NAMESPACE_LABEL: "true"}}
    }))?;
    Api::<Namespace>::all(cluster.client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .with_context(|| format!("create namespace {name} in {}", cluster.name))?;
    Ok(TestNamespace {
        name: name.to_owned(),
        cluster: cluster.clone(),
    })
}

/// Deletes the namespace and waits (bounded) until it is gone.
async fn delete_namespace(ns: TestNamespace) {
    let (name, cluster) = (ns.name.clone(), ns.cluster.clone());
    ns.delete().await;
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(180) {
        if let Ok(None) = namespaces.get_opt(&name).await {
            println!("namespace {name} deleted in {}", cluster.name);
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!(
        "namespace {name} is still being deleted in {}",
        cluster.name
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let opts = Opts::parse()?;
    let env = TestEnv::get();
    let alpha = Cluster::connect(&env.clusters[0]).await;
    let beta = Cluster::connect(&env.clusters[1]).await;
    for c in [&alpha, &beta] {
        crds::install(c).await;
        crds::install_service_export(c).await;
    }
    let ns_alpha = alpha.namespace("bench-central").await;
    let ns_beta = match same_namespace(&beta, &ns_alpha.name).await {
        Ok(ns) => ns,
        Err(e) => {
            delete_namespace(ns_alpha).await;
            return Err(e);
        }
    };
    println!(
        "bench_central: 3 pools x {} nodes, {} changes, deadline {} s",
        opts.replicas,
        opts.changes,
        opts.deadline.as_secs()
    );
    // The run is a task so that a panic in it still reaches the clean-up below; its processes
    // are killed when the task ends (or is dropped at the deadline).
    let task = tokio::spawn(run(
        opts.clone(),
        ns_alpha.name.clone(),
        alpha.clone(),
        beta.clone(),
    ));
    let abort = task.abort_handle();
    let outcome = tokio::time::timeout(opts.deadline, task).await;
    abort.abort();
    // Give an aborted task's processes a moment to be killed before their namespaces go.
    tokio::time::sleep(Duration::from_millis(500)).await;
    delete_namespace(ns_alpha).await;
    delete_namespace(ns_beta).await;
    match outcome {
        Ok(Ok(Ok(results))) => {
            print(&opts, &results);
            Ok(())
        }
        Ok(Ok(Err(e))) => Err(e),
        Ok(Err(join)) => bail!("the benchmark failed: {join}"),
        Err(_) => bail!("the benchmark exceeded its deadline of {:?}", opts.deadline),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p50_max_counts_what_was_not_measured() {
        let d = |ms| Some(Duration::from_millis(ms));
        assert_eq!(p50_max(&[d(100), d(300), d(200)]), "0.200 s / 0.300 s");
        assert_eq!(
            p50_max(&[d(100), None]),
            "0.100 s / 0.100 s (1 not measured)"
        );
    }

    #[test]
    fn arrival_takes_the_first_answer_showing_a_generation() {
        let t0 = Instant::now();
        let wall = SystemTime::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let sample = |ms: u64, generation: u64, sent: u64, applied: u64| Sample {
            at: at(ms),
            agents: [(
                ALPHA.to_owned(),
                AgentView {
                    connected: true,
                    sent,
                    applied,
                    ready_pods: 0,
                },
            )]
            .into(),
            desired: [(
                ALPHA.to_owned(),
                DesiredView {
                    generation,
                    objects: 1,
                    updated_at: wall + Duration::from_millis(ms.saturating_sub(10)),
                },
            )]
            .into(),
        };
        let timeline = [
            sample(50, 2, 1, 1),
            sample(100, 3, 3, 2),
            sample(400, 3, 3, 3),
        ];
        let a = arrival(ALPHA, 3, t0, wall, &timeline, &[]);
        assert_eq!(a.pushed, Some(Duration::from_millis(100)));
        assert_eq!(a.applied, Some(Duration::from_millis(400)));
        assert_eq!(a.computed, Some(Duration::from_millis(90)));
    }
}
