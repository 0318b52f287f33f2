//! Benchmark of central's topic operator against a real Kafka (not a test): how long the real
//! `kstretch-central` takes to make `--topics` new `KafkaTopic`s Ready, their create-to-Ready
//! latency, central's memory, and its CPU while the topics sit idle.
//!
//! Kafka is private to the benchmark (the shared environment's Kafka is used by other tests and
//! must not get thousands of topics): `--replicas` KRaft nodes (node 0 combined broker and
//! controller, the others brokers) run from the environment's jars with their own temporary
//! data directory, deleted at the end. Kubernetes is the environment's cluster alpha: a fresh
//! namespace holds a `Kafka` annotated `kstretch.io/admin-bootstrap-servers` (so central reaches
//! the private Kafka, as in `tests/src/topics.rs`) and the `KafkaTopic`s.
//!
//! Central runs as a topic operator for that namespace only. The benchmark watches the
//! `KafkaTopic`s itself (a kube watcher started before the first create) and records per topic
//! when its create request was sent, when central's finalizer appeared, and when its status
//! first had `observedGeneration == generation` and `Ready=True`. It samples central's
//! `VmRSS` every 100 ms, reads CPU time (utime + stime) of central, the private Kafka, alpha's
//! apiserver and etcd, and the machine, and scrapes central's `/metrics` every second (queue
//! size, per-call durations, batch sizes). Once every topic is Ready it waits until central's
//! timed reconciliation has begun (`--topic-full-reconcile-secs` after central's start) and
//! measures `--idle-secs` of idling. At the end it checks through `rdkafka` metadata that Kafka
//! has every topic with the partitions and replicas asked for (and scans Kafka's log for
//! errors: a broker short of file descriptors logs them and carries on, with topics in its
//! metadata whose logs it could not create), stops central, and measures in a fresh process of
//! its own (`--cache-probe`) what one cache of these `KafkaTopic`s costs, as received and
//! without managed fields, to tell central's memory apart.
//!
//! Partitions: each partition replica needs an open file and up to two memory maps in its Kafka
//! node, so unless `--partitions` says otherwise a topic gets as many as the open-file limit
//! and `vm.max_map_count` allow for `--topics` topics, up to 12.
//!
//! Clean-up, whatever happened (also on Ctrl-C or the deadline): central and Kafka are killed,
//! Kafka's data deleted, the finalizers of the `KafkaTopic`s removed with merge patches and the
//! namespace deleted. Run it with `scripts/bench-topics.sh`.

// Benchmark driver: a failed expectation ends the run, so panicking is the point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::StreamExt;
use kstretch_api::names::TOPIC_OPERATOR_FINALIZER;
use kstretch_api::{Kafka, KafkaTopic};
use kstretch_tests::cluster::TestNamespace;
use kstretch_tests::crds::{self, FIELD_MANAGER};
use kstretch_tests::process::free_port;
use kstretch_tests::topics::{condition, reconciled};
use kstretch_tests::{Cluster, TestEnv};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use serde_json::json;

/// The `Kafka` every topic names.
const KAFKA: &str = "my-cluster";
/// Name prefix of the benchmark's `KafkaTopic`s (and topics).
const PREFIX: &str = "bench-";
/// The partitions a topic gets when the machine allows it (the figure the issue asks for).
const WANTED_PARTITIONS: i32 = 12;
/// File descriptors and memory maps a Kafka node needs besides its partitions.
const FD_RESERVE: u64 = 2_000;
const MAP_RESERVE: u64 = 5_000;

#[derive(Debug, Clone)]
struct Opts {
    topics: usize,
    /// `None`: as many as the machine's limits allow, up to [`WANTED_PARTITIONS`].
    partitions: Option<i32>,
    replicas: i32,
    idle: Duration,
    concurrency: usize,
    full_reconcile_secs: u64,
    kafka_heap: String,
    ready_timeout: Duration,
    /// Time the namespace and the private Kafka are kept after the measurements.
    hold: Duration,
    /// Only create the `KafkaTopic`s, without central or Kafka: the apiserver's share alone.
    writes_only: bool,
    /// Install the crds chart's MutatingAdmissionPolicy, which adds the finalizer at create
    /// (central then skips that write), for the benchmark's namespace.
    finalizer_policy: bool,
    /// Stop (SIGSTOP) the environment's processes the benchmark does not use while creating.
    pause_others: bool,
    deadline: Duration,
    central: PathBuf,
    central_args: Vec<String>,
}

impl Opts {
    fn parse() -> anyhow::Result<Opts> {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
        let mut opts = Opts {
            topics: 10_000,
            partitions: None,
            replicas: 1,
            idle: Duration::from_secs(60),
            concurrency: 48,
            full_reconcile_secs: 120,
            kafka_heap: "1g".into(),
            ready_timeout: Duration::from_secs(900),
            hold: Duration::ZERO,
            writes_only: false,
            finalizer_policy: true,
            pause_others: false,
            deadline: Duration::from_secs(2400),
            central: target.join("release/kstretch-central"),
            central_args: Vec::new(),
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
                "--topics" => opts.topics = usize::try_from(number()?)?.max(1),
                "--partitions" => opts.partitions = Some(i32::try_from(number()?)?.max(1)),
                "--replicas" => opts.replicas = i32::try_from(number()?)?.clamp(1, 5),
                "--idle-secs" => opts.idle = Duration::from_secs(number()?),
                "--concurrency" => opts.concurrency = usize::try_from(number()?)?.max(1),
                "--full-reconcile-secs" => opts.full_reconcile_secs = number()?.max(1),
                "--kafka-heap" => opts.kafka_heap = value,
                "--ready-timeout-s" => opts.ready_timeout = Duration::from_secs(number()?),
                "--deadline-s" => opts.deadline = Duration::from_secs(number()?),
                "--hold-secs" => opts.hold = Duration::from_secs(number()?),
                "--writes-only" => {
                    opts.writes_only = match value.as_str() {
                        "true" => true,
                        "false" => false,
                        _ => bail!("--writes-only takes true or false"),
                    }
                }
                "--finalizer-policy" => {
                    opts.finalizer_policy = match value.as_str() {
                        "true" => true,
                        "false" => false,
                        _ => bail!("--finalizer-policy takes true or false"),
                    }
                }
                "--pause-others" => {
                    opts.pause_others = match value.as_str() {
                        "true" => true,
                        "false" => false,
                        _ => bail!("--pause-others takes true or false"),
                    }
                }
                "--central" => opts.central = PathBuf::from(&value),
                "--central-arg" => opts.central_args.push(value),
                other => bail!(
                    "unknown flag {other}; flags: --topics N --partitions P --replicas R \
                     --idle-secs N --concurrency N --full-reconcile-secs N --kafka-heap SIZE \
                     --ready-timeout-s N --hold-secs N --deadline-s N --central PATH \
                     --central-arg ARG (repeatable, passed on to central) \
                     --writes-only true|false --finalizer-policy true|false \
                     --pause-others true|false"
                ),
            }
        }
        if !opts.central.exists() {
            bail!(
                "{} is missing: build it first (scripts/bench-topics.sh does)",
                opts.central.display()
            );
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

/// How many partition replicas one Kafka node can hold here: each needs an open log file and
/// up to two memory-mapped indexes, bounded by the open-file limit (which children inherit)
/// and `vm.max_map_count`.
#[derive(Debug, Clone)]
struct Budget {
    open_files: Option<u64>,
    max_map_count: Option<u64>,
    per_node: u64,
}

fn partition_budget() -> Budget {
    let open_files = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
        });
    let max_map_count = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|t| t.trim().parse().ok());
    let by_files = open_files.map_or(u64::MAX, |n: u64| n.saturating_sub(FD_RESERVE));
    let by_maps = max_map_count.map_or(u64::MAX, |n: u64| n.saturating_sub(MAP_RESERVE) / 2);
    Budget {
        open_files,
        max_map_count,
        per_node: by_files.min(by_maps),
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
            "kstretch-bench-topics-{name}-{}.log",
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

    /// Fails if the process has exited, with the end of its log.
    fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            bail!(
                "{} exited ({status}); log {}:\n{}",
                self.name,
                self.log.display(),
                lines[lines.len().saturating_sub(40)..].join("\n")
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

/// A line of /proc/<pid>/status in KiB (`VmRSS`, `VmHWM`).
fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// User + system CPU time of a process in seconds (USER_HZ is 100 on Linux).
fn cpu_seconds(pid: u32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = text.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// CPU seconds the whole machine spent busy (all cores; not idle, not waiting for I/O).
fn machine_busy_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().next()?.strip_prefix("cpu ")?;
    let v: Vec<f64> = line
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    let total: f64 = v.iter().take(8).sum();
    let idle = v.get(3)? + v.get(4)?;
    Some((total - idle) / 100.0)
}

/// PID of an environment process from its pidfile (`$STATE/pids/<name>.pid`).
fn env_pid(name: &str) -> Option<u32> {
    let state = TestEnv::get().file.parent()?.to_owned();
    std::fs::read_to_string(state.join("pids").join(format!("{name}.pid")))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The environment's processes the benchmark does not use (cluster beta, the shared Kafka and
/// Connect), stopped with SIGSTOP so that they take no CPU while topics are created; they get
/// SIGCONT when this is dropped, whatever happens to the run.
struct PausedOthers(Vec<u32>);

const OTHERS: &[&str] = &[
    "beta-apiserver",
    "beta-controller-manager",
    "beta-scheduler",
    "beta-kwok",
    "connect",
    "kafka-0",
    "kafka-1",
    "kafka-2",
    "kafka-3",
    "kafka-nodelete",
];

impl PausedOthers {
    fn pause() -> PausedOthers {
        let pids: Vec<u32> = OTHERS.iter().filter_map(|name| env_pid(name)).collect();
        signal("-STOP", &pids);
        PausedOthers(pids)
    }
}

impl Drop for PausedOthers {
    fn drop(&mut self) {
        signal("-CONT", &self.0);
    }
}

fn signal(signal: &str, pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    let status = Command::new("kill")
        .arg(signal)
        .args(pids.iter().map(u32::to_string))
        .status();
    if !status.is_ok_and(|s| s.success()) {
        println!("warning: kill {signal} {pids:?} failed");
    }
}

/// A spawned helper task, aborted when dropped (so an aborted run leaves nothing running).
struct Task<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for Task<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

// ------------------------------------------------------------------------------ private Kafka

/// Logging of the private nodes: warnings only, plus the lines that say a node is up.
const LOG4J2: &str = "\
name = kstretch-bench-kafka
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.target = SYSTEM_OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = STDOUT
logger.raft-server.name = kafka.server.KafkaRaftServer
logger.raft-server.level = INFO
logger.broker-server.name = kafka.server.BrokerServer
logger.broker-server.level = INFO
";

/// The benchmark's own KRaft cluster: node 0 is broker and controller, nodes 1.. brokers; one
/// JVM per node, killed and its data deleted when dropped.
struct BenchKafka {
    root: PathBuf,
    nodes: Vec<Proc>,
    bootstrap: String,
}

impl BenchKafka {
    async fn start(
        nodes: usize,
        partitions: i32,
        replicas: i32,
        heap: &str,
    ) -> anyhow::Result<Self> {
        let env = TestEnv::get();
        let libs = env.kafka_libs();
        let root = std::env::temp_dir().join(format!(
            "kstretch-bench-topics-kafka-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root)?;
        std::fs::write(root.join("log4j2.properties"), LOG4J2)?;
        let controller_port = free_port();
        let broker_ports: Vec<u16> = (0..nodes).map(|_| free_port()).collect();
        let java = |heap: &str, min_heap: &str| {
            let mut command = Command::new("java");
            command
                .arg(format!("-Xmx{heap}"))
                .arg(format!("-Xms{min_heap}"))
                .args([
                    "-XX:+UseG1GC",
                    "-XX:MaxGCPauseMillis=20",
                    "-XX:InitiatingHeapOccupancyPercent=35",
                    "-XX:-UsePerfData",
                    "-XX:+ExitOnOutOfMemoryError",
                    "-Djava.awt.headless=true",
                ])
                .arg(format!(
                    "-Dlog4j2.configurationFile={}",
                    root.join("log4j2.properties").display()
                ))
                .arg("-cp")
                .arg(format!("{}/*", libs.display()))
                .current_dir(&root);
            command
        };
        let cluster_id = kstretch_tests::kraft::random_cluster_id();
        let rf = replicas.min(i32::try_from(nodes).unwrap_or(1));
        let mut configs = Vec::new();
        for (id, port) in broker_ports.iter().enumerate() {
            let dir = root.join(format!("node-{id}"));
            std::fs::create_dir_all(&dir)?;
            let (roles, listeners) = if id == 0 {
                (
                    "broker,controller",
                    format!(
                        "PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}"
                    ),
                )
            } else {
                ("broker", format!("PLAINTEXT://127.0.0.1:{port}"))
            };
            let properties = format!(
                "process.roles={roles}\n\
                 node.id={id}\n\
                 controller.quorum.voters=0@127.0.0.1:{controller_port}\n\
                 controller.listener.names=CONTROLLER\n\
                 listeners={listeners}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
                 inter.broker.listener.name=PLAINTEXT\n\
                 listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
                 log.dirs={data}\n\
                 num.partitions={partitions}\n\
                 default.replication.factor={rf}\n\
                 min.insync.replicas=1\n\
                 offsets.topic.replication.factor={rf}\n\
                 offsets.topic.num.partitions=1\n\
                 transaction.state.log.replication.factor={rf}\n\
                 transaction.state.log.min.isr=1\n\
                 auto.create.topics.enable=false\n\
                 group.initial.rebalance.delay.ms=0\n",
                data = dir.join("data").display(),
            );
            let file = dir.join("server.properties");
            std::fs::write(&file, properties)?;
            configs.push(file);
        }
        for (id, file) in configs.iter().enumerate() {
            let output = java("128m", "64m")
                .arg("kafka.tools.StorageTool")
                .args(["format", "-t", &cluster_id, "-c"])
                .arg(file)
                .output()
                .context("cannot run java")?;
            if !output.status.success() {
                let _ = std::fs::remove_dir_all(&root);
                bail!(
                    "formatting Kafka node {id} failed ({}):\n{}\n{}",
                    output.status,
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                );
            }
        }
        let mut kafka = BenchKafka {
            root: root.clone(),
            nodes: Vec::new(),
            bootstrap: broker_ports
                .iter()
                .map(|p| format!("127.0.0.1:{p}"))
                .collect::<Vec<_>>()
                .join(","),
        };
        for (id, file) in configs.iter().enumerate() {
            let mut command = java(heap, "256m");
            command.arg("kafka.Kafka").arg(file);
            kafka
                .nodes
                .push(Proc::start(&format!("kafka-{id}"), command));
        }
        let expected: BTreeSet<i32> = (0..i32::try_from(nodes)?).collect();
        let started = Instant::now();
        loop {
            let bootstrap = kafka.bootstrap.clone();
            let seen =
                tokio::task::spawn_blocking(move || kstretch_tests::kafka::broker_ids(&bootstrap))
                    .await?;
            if seen.as_ref().is_ok_and(|ids| *ids == expected) {
                return Ok(kafka);
            }
            kafka.check_alive()?;
            if started.elapsed() > Duration::from_secs(180) {
                bail!("the private Kafka did not come up within 180 s: {seen:?}");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    fn check_alive(&mut self) -> anyhow::Result<()> {
        for node in &mut self.nodes {
            node.check_alive()?;
        }
        Ok(())
    }

    fn pids(&self) -> Vec<u32> {
        self.nodes.iter().map(Proc::pid).collect()
    }

    fn cpu_seconds(&self) -> Option<f64> {
        self.pids().into_iter().map(cpu_seconds).sum()
    }

    /// Open files and memory maps of all nodes (what bounds the partitions a node can hold).
    fn files_and_maps(&self) -> (usize, usize) {
        let count = |path: String| -> usize { std::fs::read_dir(&path).map_or(0, Iterator::count) };
        let lines = |path: String| -> usize {
            std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
        };
        self.pids().into_iter().fold((0, 0), |(f, m), pid| {
            (
                f + count(format!("/proc/{pid}/fd")),
                m + lines(format!("/proc/{pid}/maps")),
            )
        })
    }

    /// ERROR lines in the nodes' logs (a node that cannot create a partition's log, e.g. for
    /// lack of file descriptors, logs it and carries on), and the first of them.
    fn errors(&self) -> (usize, Option<String>) {
        let mut count = 0;
        let mut first = None;
        for node in &self.nodes {
            let text = std::fs::read_to_string(&node.log).unwrap_or_default();
            let mut lines = text.lines().peekable();
            while let Some(line) = lines.next() {
                if line.contains("] ERROR ") {
                    count += 1;
                    if first.is_none() {
                        let cause = lines.peek().map_or("", |l| l.trim());
                        first = Some(format!("{}: {line} / {cause}", node.name));
                    }
                }
            }
        }
        (count, first)
    }

    fn hwm_kib(&self) -> Option<u64> {
        self.pids()
            .into_iter()
            .map(|p| status_kib(p, "VmHWM"))
            .sum()
    }
}

impl Drop for BenchKafka {
    fn drop(&mut self) {
        self.nodes.clear();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

// ------------------------------------------------------------------------------ central

struct Central {
    proc: Proc,
    http: String,
    started: Instant,
}

fn start_central(opts: &Opts, kubeconfig: &Path, ns: &str) -> Central {
    let http = free_port();
    let mut command = Command::new(&opts.central);
    command
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--namespace", ns])
        .args(["--topic-namespaces", ns])
        .args(["--http-addr", &format!("127.0.0.1:{http}")])
        .args(["--grpc-addr", &format!("127.0.0.1:{}", free_port())])
        .args([
            "--topic-full-reconcile-secs",
            &opts.full_reconcile_secs.to_string(),
        ])
        .args(&opts.central_args)
        // BENCH_CENTRAL_LOG sets central's log filter.
        .env(
            "RUST_LOG",
            std::env::var("BENCH_CENTRAL_LOG").unwrap_or_else(|_| "info".to_owned()),
        );
    Central {
        proc: Proc::start("central", command),
        http: format!("http://127.0.0.1:{http}"),
        started: Instant::now(),
    }
}

/// Central's `/metrics`, one value per series (`name{labels}`).
type Scrape = BTreeMap<String, f64>;

async fn scrape(http: &reqwest::Client, base: &str) -> Option<Scrape> {
    let body = http
        .get(format!("{base}/metrics"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    Some(
        body.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let (series, value) = l.rsplit_once(' ')?;
                Some((series.to_owned(), value.parse().ok()?))
            })
            .collect(),
    )
}

/// `after - before`, series by series (counters and histograms over a window).
fn delta(before: &Scrape, after: &Scrape) -> Scrape {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .collect()
}

/// The value of label `label` in a series name.
fn label<'a>(series: &'a str, label: &str) -> Option<&'a str> {
    let labels = series.split_once('{')?.1;
    let start = labels.find(&format!("{label}=\""))? + label.len() + 2;
    let rest = &labels[start..];
    Some(&rest[..rest.find('"')?])
}

/// Count, mean and bucket-bound p50 / p99 of one histogram, per `by` label value (`""` when
/// unlabelled), from series `name_count`, `name_sum`, `name_bucket`.
#[derive(Debug, Clone, Default)]
struct HistStats {
    count: f64,
    sum: f64,
    /// (upper bound, cumulative count)
    buckets: Vec<(f64, f64)>,
}

impl HistStats {
    fn mean(&self) -> f64 {
        if self.count > 0.0 {
            self.sum / self.count
        } else {
            f64::NAN
        }
    }

    /// The upper bound of the bucket holding quantile `q`.
    fn quantile_bound(&self, q: f64) -> f64 {
        let mut buckets = self.buckets.clone();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        let want = q * self.count;
        buckets
            .iter()
            .find(|(_, c)| *c >= want && *c > 0.0)
            .map_or(f64::NAN, |(le, _)| *le)
    }
}

fn histograms(scrape: &Scrape, name: &str, by: &str) -> BTreeMap<String, HistStats> {
    let mut out: BTreeMap<String, HistStats> = BTreeMap::new();
    for (series, value) in scrape {
        let Some(rest) = series.strip_prefix(name) else {
            continue;
        };
        let key = if by.is_empty() {
            String::new()
        } else {
            label(series, by).unwrap_or("").to_owned()
        };
        let entry = out.entry(key).or_default();
        if rest.starts_with("_count") {
            entry.count += value;
        } else if rest.starts_with("_sum") {
            entry.sum += value;
        } else if rest.starts_with("_bucket") {
            let le = match label(series, "le") {
                Some("+Inf") => f64::INFINITY,
                Some(v) => v.parse().unwrap_or(f64::NAN),
                None => continue,
            };
            match entry.buckets.iter_mut().find(|(b, _)| *b == le) {
                Some((_, c)) => *c += value,
                None => entry.buckets.push((le, *value)),
            }
        }
    }
    out.retain(|_, h| h.count > 0.0);
    out
}

fn series_sum(scrape: &Scrape, name: &str) -> f64 {
    scrape
        .iter()
        .filter(|(k, _)| *k == name || k.starts_with(&format!("{name}{{")))
        .map(|(_, v)| v)
        .sum()
}

const M: &str = "kstretch_central_topic_";

// ------------------------------------------------------------------------------ observation

/// What the benchmark's watch saw of each topic.
#[derive(Default)]
struct Seen {
    finalized: HashMap<String, Instant>,
    ready: HashMap<String, Instant>,
    /// Watch events so far (every write to a `KafkaTopic` shows as one).
    events: u64,
    /// Events showing a topic that had been Ready as reconciled but not Ready.
    fell_back: u64,
    errors: u64,
}

impl Seen {
    fn observe(&mut self, kt: &KafkaTopic, at: Instant) {
        self.events += 1;
        let name = kt.name_any();
        if kt
            .finalizers()
            .iter()
            .any(|f| f == TOPIC_OPERATOR_FINALIZER)
        {
            self.finalized.entry(name.clone()).or_insert(at);
        }
        if !reconciled(kt) {
            return;
        }
        let ready = condition(kt, "Ready").is_some_and(|c| c.status == "True");
        if ready {
            self.ready.entry(name).or_insert(at);
        } else if self.ready.contains_key(&name) {
            self.fell_back += 1;
        }
    }
}

type Shared<T> = Arc<Mutex<T>>;

/// Watches the namespace's `KafkaTopic`s into `seen`; `init` fires once the initial list is in.
fn watch_topics(
    api: Api<KafkaTopic>,
    seen: Shared<Seen>,
    init: tokio::sync::oneshot::Sender<()>,
) -> Task<()> {
    Task(tokio::spawn(async move {
        let mut init = Some(init);
        let mut events = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
        while let Some(event) = events.next().await {
            let at = Instant::now();
            match event {
                Ok(watcher::Event::Apply(kt) | watcher::Event::InitApply(kt)) => {
                    seen.lock().unwrap().observe(&kt, at);
                }
                Ok(watcher::Event::InitDone) => {
                    if let Some(tx) = init.take() {
                        let _ = tx.send(());
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    let mut s = seen.lock().unwrap();
                    s.errors += 1;
                    if s.errors <= 5 {
                        eprintln!("KafkaTopic watch error (retrying): {e}");
                    }
                }
            }
        }
    }))
}

/// Central's RSS every 100 ms.
#[derive(Default)]
struct Rss {
    samples: Vec<(Instant, u64)>,
}

impl Rss {
    fn peak_between(&self, from: Instant, to: Instant) -> Option<u64> {
        self.samples
            .iter()
            .filter(|(at, _)| *at >= from && *at <= to)
            .map(|(_, k)| *k)
            .max()
    }

    fn median_between(&self, from: Instant, to: Instant) -> Option<u64> {
        let mut v: Vec<u64> = self
            .samples
            .iter()
            .filter(|(at, _)| *at >= from && *at <= to)
            .map(|(_, k)| *k)
            .collect();
        v.sort_unstable();
        v.get(v.len() / 2).copied()
    }
}

fn sample_rss(pid: u32, rss: Shared<Rss>) -> Task<()> {
    Task(tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tick.tick().await;
            if let Some(kib) = status_kib(pid, "VmRSS") {
                rss.lock().unwrap().samples.push((Instant::now(), kib));
            }
        }
    }))
}

/// What the once-a-second scrapes of central's `/metrics` saw.
#[derive(Default)]
struct Scrapes {
    last: Option<Scrape>,
    max_queue: f64,
}

fn poll_metrics(base: String, scrapes: Shared<Scrapes>) -> Task<()> {
    Task(tokio::spawn(async move {
        let http = reqwest::Client::new();
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            if let Some(s) = scrape(&http, &base).await {
                let mut out = scrapes.lock().unwrap();
                let queue = s
                    .get(&format!("{M}max_queue_size"))
                    .copied()
                    .unwrap_or(0.0)
                    .max(s.get(&format!("{M}queue_size")).copied().unwrap_or(0.0));
                out.max_queue = out.max_queue.max(queue);
                out.last = Some(s);
            }
        }
    }))
}

/// CPU seconds of everything that matters, at one moment.
#[derive(Debug, Clone, Copy)]
struct Cpu {
    at: Instant,
    central: Option<f64>,
    kafka: Option<f64>,
    apiserver: Option<f64>,
    etcd: Option<f64>,
    bench: Option<f64>,
    machine: Option<f64>,
}

struct CpuPids {
    central: Option<u32>,
    apiserver: Option<u32>,
    etcd: Option<u32>,
}

fn cpu_now(pids: &CpuPids, kafka: Option<&BenchKafka>) -> Cpu {
    Cpu {
        at: Instant::now(),
        central: pids.central.and_then(cpu_seconds),
        kafka: kafka.and_then(BenchKafka::cpu_seconds),
        apiserver: pids.apiserver.and_then(cpu_seconds),
        etcd: pids.etcd.and_then(cpu_seconds),
        bench: cpu_seconds(std::process::id()),
        machine: machine_busy_seconds(),
    }
}

/// CPU used between two moments: seconds, and share of one core.
#[derive(Debug, Clone, Copy, Default)]
struct CpuUse {
    wall: f64,
    central: Option<f64>,
    kafka: Option<f64>,
    apiserver: Option<f64>,
    etcd: Option<f64>,
    bench: Option<f64>,
    machine: Option<f64>,
}

fn cpu_use(a: &Cpu, b: &Cpu) -> CpuUse {
    let d = |x: Option<f64>, y: Option<f64>| Some(y? - x?);
    CpuUse {
        wall: b.at.duration_since(a.at).as_secs_f64(),
        central: d(a.central, b.central),
        kafka: d(a.kafka, b.kafka),
        apiserver: d(a.apiserver, b.apiserver),
        etcd: d(a.etcd, b.etcd),
        bench: d(a.bench, b.bench),
        machine: d(a.machine, b.machine),
    }
}

// ------------------------------------------------------------------------------ the run

fn topic_name(i: usize) -> String {
    format!("{PREFIX}{i:05}")
}

/// Creates one `KafkaTopic`, retrying what the apiserver refuses for load; returns when the
/// request was sent (the first attempt) and when it was answered.
async fn create_topic(
    api: &Api<KafkaTopic>,
    name: &str,
    partitions: i32,
    replicas: i32,
) -> anyhow::Result<Attempt> {
    let kt: KafkaTopic = serde_json::from_value(json!({
        "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaTopic",
        "metadata": {"name": name, "labels": {"strimzi.io/cluster": KAFKA}},
        "spec": {"partitions": partitions, "replicas": replicas}
    }))?;
    let sent = Instant::now();
    let mut retries = 0;
    loop {
        match api.create(&PostParams::default(), &kt).await {
            Ok(_) => return Ok((sent, Instant::now(), retries)),
            Err(kube::Error::Api(e)) if e.code == 409 => {
                bail!("KafkaTopic {name} exists already")
            }
            Err(e) if retries < 10 => {
                retries += 1;
                if retries == 1 {
                    eprintln!("create {name}: {e}; retrying");
                }
                tokio::time::sleep(Duration::from_millis(200 * u64::from(retries))).await;
            }
            Err(e) => return Err(e).with_context(|| format!("create KafkaTopic {name}")),
        }
    }
}

/// Per topic: create request sent and answered.
type Created = Vec<(Instant, Instant)>;
/// One create: sent, answered, retries.
type Attempt = (Instant, Instant, u32);

#[derive(Default)]
struct Results {
    topics: usize,
    partitions: i32,
    replicas: i32,
    budget: Option<Budget>,
    kafka_start: Duration,
    central_ready: Duration,
    idle_before: Option<u64>,
    create_calls: Duration,
    create_retries: u32,
    create_latency: Vec<f64>,
    all_ready: Duration,
    latencies: Vec<f64>,
    to_finalizer: Vec<f64>,
    finalizer_to_ready: Vec<f64>,
    create_cpu: CpuUse,
    create_peak: Option<u64>,
    max_queue: f64,
    create_metrics: Scrape,
    idle_wait: Duration,
    idle_cpu: CpuUse,
    idle_rss_median: Option<u64>,
    idle_peak: Option<u64>,
    idle_metrics: Scrape,
    idle_events: u64,
    fell_back: u64,
    hwm: Option<u64>,
    rss_anon: Option<u64>,
    rss_file: Option<u64>,
    /// ERROR lines in Kafka's logs and the first of them.
    kafka_errors: (usize, Option<String>),
    kafka_hwm: Option<u64>,
    kafka_topics: usize,
    kafka_matching: usize,
    /// First create → every topic complete in the broker's metadata (polled every 2 s).
    in_kafka: Option<Duration>,
    /// What one cache of the topics costs, as received and without managed fields.
    cache: Vec<CacheProbe>,
    kafka_partitions: usize,
    kafka_files: usize,
    kafka_maps: usize,
}

#[allow(clippy::too_many_lines)]
async fn run(opts: Opts, ns: String, alpha: Cluster) -> anyhow::Result<Results> {
    let env = TestEnv::get();
    let mut out = Results {
        topics: opts.topics,
        replicas: opts.replicas,
        ..Results::default()
    };
    let budget = partition_budget();
    let affordable = i32::try_from(budget.per_node / opts.topics as u64).unwrap_or(i32::MAX);
    out.partitions = match opts.partitions {
        Some(p) => {
            if i64::from(p) * opts.topics as i64 > budget.per_node as i64 {
                println!(
                    "warning: {} topics x {p} partitions exceed what one Kafka node can hold here \
                     (about {} partitions: open files {:?}, vm.max_map_count {:?}); Kafka will \
                     likely fail",
                    opts.topics, budget.per_node, budget.open_files, budget.max_map_count
                );
            }
            p
        }
        None => affordable.clamp(1, WANTED_PARTITIONS),
    };
    println!(
        "partitions per topic: {} ({}; one Kafka node holds about {} partitions here: open files \
         {:?}, vm.max_map_count {:?})",
        out.partitions,
        if opts.partitions.is_some() {
            "asked for"
        } else {
            "the most the machine allows, up to 12"
        },
        budget.per_node,
        budget.open_files,
        budget.max_map_count
    );
    out.budget = Some(budget);

    // Kafka.
    let started = Instant::now();
    let nodes = usize::try_from(opts.replicas)?;
    let mut kafka =
        BenchKafka::start(nodes, out.partitions, opts.replicas, &opts.kafka_heap).await?;
    out.kafka_start = started.elapsed();
    println!(
        "private Kafka: {nodes} node(s) at {} (data in {}), up in {:.1} s",
        kafka.bootstrap,
        kafka.root.display(),
        out.kafka_start.as_secs_f64()
    );

    // The Kafka resource central finds the topics' cluster by.
    let kafkas: Api<Kafka> = Api::namespaced(alpha.client.clone(), &ns);
    kafkas
        .patch(
            KAFKA,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(json!({
                "apiVersion": "kafka.strimzi.io/v1", "kind": "Kafka",
                "metadata": {"name": KAFKA, "annotations": {
                    "kstretch.io/admin-bootstrap-servers": kafka.bootstrap,
                    "kstretch.io/admin-security-protocol": "PLAINTEXT"}},
                "spec": {"kafka": {"listeners": [
                    {"name": "plain", "port": 9092, "type": "internal", "tls": false}]}}
            })),
        )
        .await
        .context("apply the Kafka")?;

    // The benchmark's own watch, complete before anything is created.
    let topics: Api<KafkaTopic> = Api::namespaced(alpha.client.clone(), &ns);
    let seen: Shared<Seen> = Arc::default();
    let (init_tx, init_rx) = tokio::sync::oneshot::channel();
    let _watch = watch_topics(topics.clone(), seen.clone(), init_tx);
    tokio::time::timeout(Duration::from_secs(30), init_rx)
        .await
        .context("the KafkaTopic watch did not start within 30 s")??;

    // Central.
    let mut central = start_central(&opts, &env.clusters[0].kubeconfig, &ns);
    let rss: Shared<Rss> = Arc::default();
    let _rss = sample_rss(central.proc.pid(), rss.clone());
    let http = reqwest::Client::new();
    loop {
        central.proc.check_alive()?;
        let ready = http
            .get(format!("{}/readyz", central.http))
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if ready {
            break;
        }
        if central.started.elapsed() > Duration::from_secs(60) {
            bail!("central was not ready within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    out.central_ready = central.started.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    out.idle_before = status_kib(central.proc.pid(), "VmRSS");
    let scrapes: Shared<Scrapes> = Arc::default();
    let _metrics = poll_metrics(central.http.clone(), scrapes.clone());
    let pids = CpuPids {
        central: Some(central.proc.pid()),
        apiserver: env_pid(&format!("{}-apiserver", env.clusters[0].name)),
        etcd: env_pid("etcd"),
    };
    let before_create = scrape(&http, &central.http).await.unwrap_or_default();
    println!(
        "central ready in {:.1} s (RSS {}); creating {} KafkaTopics ({} partitions, {} \
         replicas), {} at a time",
        out.central_ready.as_secs_f64(),
        mib(out.idle_before),
        opts.topics,
        out.partitions,
        opts.replicas,
        opts.concurrency
    );

    // Create everything; the watch says when each is Ready.
    let paused = opts.pause_others.then(|| {
        let paused = PausedOthers::pause();
        println!(
            "paused {} environment processes the benchmark does not use ({})",
            paused.0.len(),
            OTHERS.join(", ")
        );
        paused
    });
    let cpu0 = cpu_now(&pids, Some(&kafka));
    let t0 = Instant::now();
    let created_count = Arc::new(AtomicUsize::new(0));
    let creator = {
        let (topics, count) = (topics.clone(), created_count.clone());
        let (n, partitions, replicas, c) =
            (opts.topics, out.partitions, opts.replicas, opts.concurrency);
        Task(tokio::spawn(async move {
            let results: Vec<anyhow::Result<(usize, Attempt)>> = futures::stream::iter(0..n)
                .map(|i| {
                    let (topics, count) = (topics.clone(), count.clone());
                    async move {
                        let r = create_topic(&topics, &topic_name(i), partitions, replicas).await?;
                        count.fetch_add(1, Ordering::Relaxed);
                        Ok((i, r))
                    }
                })
                .buffer_unordered(c)
                .collect()
                .await;
            let mut created: Created = vec![(t0, t0); n];
            let mut retries = 0;
            for r in results {
                let (i, (sent, answered, tries)) = r?;
                created[i] = (sent, answered);
                retries += tries;
            }
            anyhow::Ok((created, retries, Instant::now()))
        }))
    };
    let mut creator = Some(creator);
    let mut created: Option<(Created, u32, Instant)> = None;
    let mut last_print = Instant::now();
    loop {
        if let Some(task) = creator.as_mut().filter(|t| t.0.is_finished()) {
            let handle = &mut task.0;
            created = Some(handle.await??);
            creator = None;
            let (_, retries, done) = created.as_ref().unwrap();
            println!(
                "  all {} create requests answered after {:.1} s ({} retried)",
                opts.topics,
                done.duration_since(t0).as_secs_f64(),
                retries
            );
        }
        let ready = seen.lock().unwrap().ready.len();
        if created.is_some() && ready >= opts.topics {
            break;
        }
        let state = || {
            format!(
                "{:.1} s after the first create, {} created, {ready} Ready",
                t0.elapsed().as_secs_f64(),
                created_count.load(Ordering::Relaxed)
            )
        };
        central.proc.check_alive().with_context(state)?;
        kafka.check_alive().with_context(state)?;
        let waited = created
            .as_ref()
            .map_or(Duration::ZERO, |(_, _, done)| done.elapsed());
        if waited > opts.ready_timeout {
            bail!(
                "only {ready} of {} KafkaTopics Ready {} s after the last create",
                opts.topics,
                opts.ready_timeout.as_secs()
            );
        }
        if last_print.elapsed() >= Duration::from_secs(5) {
            last_print = Instant::now();
            progress(t0, &created_count, &seen, &scrapes, central.proc.pid());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (created, retries, created_done) = created.unwrap();
    let cpu1 = cpu_now(&pids, Some(&kafka));
    {
        let s = seen.lock().unwrap();
        let last = s
            .ready
            .iter()
            .filter(|(n, _)| n.starts_with(PREFIX))
            .map(|(_, at)| *at)
            .max()
            .unwrap_or(t0);
        out.all_ready = last.duration_since(t0);
        for (i, (sent, answered)) in created.iter().enumerate() {
            let name = topic_name(i);
            out.create_latency
                .push(answered.duration_since(*sent).as_secs_f64());
            if let Some(ready) = s.ready.get(&name) {
                out.latencies
                    .push(ready.saturating_duration_since(*sent).as_secs_f64());
                if let Some(fin) = s.finalized.get(&name) {
                    out.to_finalizer
                        .push(fin.saturating_duration_since(*sent).as_secs_f64());
                    out.finalizer_to_ready
                        .push(ready.saturating_duration_since(*fin).as_secs_f64());
                }
            }
        }
    }
    // The others resume before the idle measurement, which is the environment as it runs.
    drop(paused);
    out.create_calls = created_done.duration_since(t0);
    out.create_retries = retries;
    out.create_cpu = cpu_use(&cpu0, &cpu1);
    out.create_peak = rss.lock().unwrap().peak_between(t0, cpu1.at);
    out.max_queue = scrapes.lock().unwrap().max_queue;
    let after_create = scrape(&http, &central.http).await.unwrap_or_default();
    out.create_metrics = delta(&before_create, &after_create);
    println!(
        "all {} KafkaTopics Ready after {:.2} s ({:.0} topics/s)",
        opts.topics,
        out.all_ready.as_secs_f64(),
        opts.topics as f64 / out.all_ready.as_secs_f64()
    );

    // Idle, within the first timed pass that starts after every topic exists: central's passes
    // start every `full_reconcile` from its start and each takes the topics it has then.
    let pass_starts = next_pass(
        central.started,
        Instant::now(),
        Duration::from_secs(opts.full_reconcile_secs),
    ) + Duration::from_secs(3);
    let wait_start = Instant::now();
    if pass_starts > wait_start {
        println!(
            "waiting {:.0} s for the first timed pass of central (every {} s) over all the topics",
            (pass_starts - wait_start).as_secs_f64(),
            opts.full_reconcile_secs
        );
    }
    // Meanwhile, until when the broker's metadata has every topic complete (a KRaft broker
    // applies what the controller accepted asynchronously, creating each partition's log); for
    // at least 60 s after the last Ready.
    let census_until = pass_starts.max(wait_start + Duration::from_secs(60));
    let mut in_kafka_count = 0;
    loop {
        central.proc.check_alive()?;
        kafka.check_alive()?;
        if out.in_kafka.is_none() {
            let census = kafka_census(&kafka.bootstrap, out.partitions, opts.replicas).await?;
            in_kafka_count = census.matching;
            if census.matching >= opts.topics {
                out.in_kafka = Some(t0.elapsed());
                println!(
                    "all {} topics complete in the broker's metadata after {:.1} s",
                    opts.topics,
                    t0.elapsed().as_secs_f64()
                );
            }
        }
        let now = Instant::now();
        if now >= pass_starts && (out.in_kafka.is_some() || now >= census_until) {
            break;
        }
        let pause = if out.in_kafka.is_none() { 2000 } else { 500 };
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
    out.idle_wait = wait_start.elapsed();
    if out.in_kafka.is_none() {
        println!(
            "  by then the broker's metadata had {in_kafka_count} of {} topics complete",
            opts.topics
        );
    }
    println!(
        "idling {} s with {} topics",
        opts.idle.as_secs(),
        opts.topics
    );
    let idle_scrape0 = scrape(&http, &central.http).await.unwrap_or_default();
    let events0 = seen.lock().unwrap().events;
    let idle0 = cpu_now(&pids, Some(&kafka));
    let idle_end = idle0.at + opts.idle;
    while Instant::now() < idle_end {
        central.proc.check_alive()?;
        kafka.check_alive()?;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let idle1 = cpu_now(&pids, Some(&kafka));
    let idle_scrape1 = scrape(&http, &central.http).await.unwrap_or_default();
    out.idle_cpu = cpu_use(&idle0, &idle1);
    out.idle_metrics = delta(&idle_scrape0, &idle_scrape1);
    {
        let r = rss.lock().unwrap();
        out.idle_rss_median = r.median_between(idle0.at, idle1.at);
        out.idle_peak = r.peak_between(idle0.at, idle1.at);
    }
    {
        let s = seen.lock().unwrap();
        out.idle_events = s.events - events0;
        out.fell_back = s.fell_back;
    }
    out.hwm = status_kib(central.proc.pid(), "VmHWM");
    out.rss_anon = status_kib(central.proc.pid(), "RssAnon");
    out.rss_file = status_kib(central.proc.pid(), "RssFile");
    out.kafka_errors = kafka.errors();
    out.kafka_hwm = kafka.hwm_kib();
    (out.kafka_files, out.kafka_maps) = kafka.files_and_maps();

    // What Kafka really has.
    let census = kafka_census(&kafka.bootstrap, out.partitions, opts.replicas).await?;
    out.kafka_topics = census.topics;
    out.kafka_matching = census.matching;
    out.kafka_partitions = census.partitions;

    central.proc.stop();
    for slim in [false, true] {
        match probe_cache(&ns, slim).await {
            Ok(probe) => out.cache.push(probe),
            Err(e) => println!("cache probe failed: {e:#}"),
        }
    }
    if !opts.hold.is_zero() {
        println!(
            "central stopped; keeping namespace {ns} and Kafka {} for {} s",
            kafka.bootstrap,
            opts.hold.as_secs()
        );
        tokio::time::sleep(opts.hold).await;
    }
    Ok(out)
}

/// One kind of write, made for every topic.
struct Phase {
    what: &'static str,
    elapsed: Duration,
    latency: Vec<f64>,
    retries: u32,
    cpu: CpuUse,
}

/// The apiserver's share alone: the writes the topic operator needs per topic (the create
/// itself, then the finalizer and the status as central writes them), made by the benchmark
/// with neither central nor Kafka running and nothing watching the topics.
struct WritesOnly {
    topics: usize,
    phases: Vec<Phase>,
}

/// Makes `write` for every topic, `concurrency` at a time, retrying what fails like creates.
async fn phase<F, Fut>(
    what: &'static str,
    opts: &Opts,
    pids: &CpuPids,
    write: F,
) -> anyhow::Result<Phase>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    let cpu0 = cpu_now(pids, None);
    let write = &write;
    let results: Vec<anyhow::Result<(f64, u32)>> = futures::stream::iter(0..opts.topics)
        .map(|i| async move {
            let name = topic_name(i);
            let sent = Instant::now();
            let mut retries = 0;
            loop {
                match write(name.clone()).await {
                    Ok(()) => return Ok((sent.elapsed().as_secs_f64(), retries)),
                    Err(e) if retries < 10 => {
                        retries += 1;
                        if retries == 1 {
                            eprintln!("{what} {name}: {e}; retrying");
                        }
                        tokio::time::sleep(Duration::from_millis(200 * u64::from(retries))).await;
                    }
                    Err(e) => return Err(e).with_context(|| format!("{what} {name}")),
                }
            }
        })
        .buffer_unordered(opts.concurrency)
        .collect()
        .await;
    let cpu1 = cpu_now(pids, None);
    let mut latency = Vec::new();
    let mut retries = 0;
    for r in results {
        let (l, tries) = r?;
        latency.push(l);
        retries += tries;
    }
    Ok(Phase {
        what,
        elapsed: cpu1.at.duration_since(cpu0.at),
        latency,
        retries,
        cpu: cpu_use(&cpu0, &cpu1),
    })
}

async fn run_writes_only(opts: Opts, ns: String, alpha: Cluster) -> anyhow::Result<WritesOnly> {
    let env = TestEnv::get();
    let topics: Api<KafkaTopic> = Api::namespaced(alpha.client.clone(), &ns);
    let pids = CpuPids {
        central: None,
        apiserver: env_pid(&format!("{}-apiserver", env.clusters[0].name)),
        etcd: env_pid("etcd"),
    };
    let partitions = opts.partitions.unwrap_or(1);
    println!(
        "writing {} KafkaTopics, {} at a time, with neither central nor Kafka running",
        opts.topics, opts.concurrency
    );
    let mut phases = Vec::new();
    let api = &topics;
    phases.push(
        phase("create", &opts, &pids, |name| async move {
            let kt: KafkaTopic = serde_json::from_value(json!({
                "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaTopic",
                "metadata": {"name": name, "labels": {"strimzi.io/cluster": KAFKA}},
                "spec": {"partitions": partitions, "replicas": opts.replicas}
            }))
            .map_err(kube::Error::SerdeError)?;
            api.create(&PostParams::default(), &kt).await.map(|_| ())
        })
        .await?,
    );
    println!("  created");
    // With the policy, the create already carried the finalizer: central skips this write.
    if !opts.finalizer_policy {
        // The finalizer as a merge patch (central sends a JSON patch guarded by a test of the
        // resource version; both are one patch of the object's metadata for the apiserver).
        phases.push(
            phase(
                "add finalizer (merge patch)",
                &opts,
                &pids,
                |name| async move {
                    let patch = json!({"metadata": {"finalizers": [TOPIC_OPERATOR_FINALIZER]}});
                    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .map(|_| ())
                },
            )
            .await?,
        );
        println!("  finalizers added");
    }
    let now = "2026-01-01T00:00:00Z";
    phases.push(
        phase("status (merge patch)", &opts, &pids, |name| async move {
            let patch = json!({"status": {
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
                "observedGeneration": 1, "topicName": name,
                "topicId": "AAAAAAAAAAAAAAAAAAAAAA", "clusterId": "bench"}});
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|_| ())
        })
        .await?,
    );
    // The same status change once more, as server-side apply (how central wrote statuses
    // before 3fedc88), to compare the apiserver's cost of the two under the same conditions.
    let later = "2026-01-01T00:00:01Z";
    phases.push(
        phase(
            "status again (server-side apply)",
            &opts,
            &pids,
            |name| async move {
                let patch = json!({"apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaTopic",
                "status": {
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": later}],
                "observedGeneration": 1, "topicName": name,
                "topicId": "AAAAAAAAAAAAAAAAAAAAAA", "clusterId": "bench"}});
                api.patch_status(
                    &name,
                    &PatchParams::apply("kstretch-bench-status").force(),
                    &Patch::Apply(&patch),
                )
                .await
                .map(|_| ())
            },
        )
        .await?,
    );
    phases.push(
        phase(
            "status again (merge patch)",
            &opts,
            &pids,
            |name| async move {
                let patch = json!({"status": {"conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": now}]}});
                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(|_| ())
            },
        )
        .await?,
    );
    Ok(WritesOnly {
        topics: opts.topics,
        phases,
    })
}

fn print_writes_only(opts: &Opts, r: &WritesOnly) {
    println!();
    println!("== bench_topics --writes-only true ==");
    println!("machine: {}", machine());
    println!(
        "the writes of {} KafkaTopics, {} at a time, nothing watching them:",
        r.topics, opts.concurrency
    );
    for p in &r.phases {
        println!();
        println!(
            "{}: {:.2} s ({:.1} per second), p50 / p99 / max {} ({} retries); alpha apiserver \
             {:.2} ms of CPU per topic",
            p.what,
            p.elapsed.as_secs_f64(),
            r.topics as f64 / p.elapsed.as_secs_f64(),
            spread(&p.latency),
            p.retries,
            p.cpu.apiserver.unwrap_or(f64::NAN) * 1000.0 / r.topics as f64
        );
        print_cpu("CPU", &p.cpu);
    }
}

/// What a run produced.
enum Report {
    Full(Box<Results>),
    WritesOnly(WritesOnly),
}

fn progress(
    t0: Instant,
    created: &AtomicUsize,
    seen: &Shared<Seen>,
    scrapes: &Shared<Scrapes>,
    central: u32,
) {
    let (finalized, ready) = {
        let s = seen.lock().unwrap();
        (s.finalized.len(), s.ready.len())
    };
    let (queue, batches) = {
        let s = scrapes.lock().unwrap();
        s.last.as_ref().map_or((f64::NAN, f64::NAN), |m| {
            (
                m.get(&format!("{M}queue_size"))
                    .copied()
                    .unwrap_or(f64::NAN),
                m.get(&format!("{M}batch_size_count"))
                    .copied()
                    .unwrap_or(f64::NAN),
            )
        })
    };
    println!(
        "  {:>6.1} s: created {:>6}, finalizer {:>6}, Ready {:>6}; central queue {queue}, \
         batches {batches}, RSS {}",
        t0.elapsed().as_secs_f64(),
        created.load(Ordering::Relaxed),
        finalized,
        ready,
        mib(status_kib(central, "VmRSS"))
    );
}

/// The first start of central's timed pass (every `every` from `started`) after `now`.
fn next_pass(started: Instant, now: Instant, every: Duration) -> Instant {
    let passes = now.duration_since(started).as_secs_f64() / every.as_secs_f64();
    started + every.mul_f64(passes.floor() + 1.0)
}

/// What the broker's metadata shows of the benchmark's topics.
struct Census {
    topics: usize,
    /// Topics with the partitions and replicas asked for.
    matching: usize,
    partitions: usize,
}

async fn kafka_census(bootstrap: &str, partitions: i32, replicas: i32) -> anyhow::Result<Census> {
    let bootstrap = bootstrap.to_owned();
    tokio::task::spawn_blocking(move || {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        let consumer: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .create()?;
        let metadata = consumer.fetch_metadata(None, Duration::from_secs(60))?;
        let ours: Vec<_> = metadata
            .topics()
            .iter()
            .filter(|t| t.name().starts_with(PREFIX) && t.error().is_none())
            .collect();
        let matching = ours
            .iter()
            .filter(|t| {
                t.partitions().len() == usize::try_from(partitions).unwrap_or(0)
                    && t.partitions()
                        .iter()
                        .all(|p| p.replicas().len() == usize::try_from(replicas).unwrap_or(0))
            })
            .count();
        anyhow::Ok(Census {
            topics: ours.len(),
            matching,
            partitions: ours.iter().map(|t| t.partitions().len()).sum(),
        })
    })
    .await?
}

// ------------------------------------------------------------------------------ cache probe

/// What caching the namespace's `KafkaTopic`s costs one process.
#[derive(Debug, Clone)]
struct CacheProbe {
    slim: bool,
    objects: usize,
    /// RSS growth of a fresh process from before the watch to the filled store.
    rss_bytes: u64,
    /// One object as JSON, as cached.
    json_bytes: usize,
}

/// Runs `bench_topics --cache-probe <ns> full|slim` and reads its answer.
async fn probe_cache(ns: &str, slim: bool) -> anyhow::Result<CacheProbe> {
    let exe = std::env::current_exe()?;
    let mode = if slim { "slim" } else { "full" };
    let ns = ns.to_owned();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(exe)
            .args(["--cache-probe", &ns, mode])
            .output()
    })
    .await??;
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("cache-probe "))
        .with_context(|| {
            format!(
                "no answer ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            )
        })?;
    let field = |name: &str| -> anyhow::Result<u64> {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
            .with_context(|| format!("no {name} in {line}"))?
            .parse()
            .with_context(|| format!("bad {name} in {line}"))
    };
    Ok(CacheProbe {
        slim,
        objects: usize::try_from(field("objects")?)?,
        rss_bytes: field("rss_bytes")?,
        json_bytes: usize::try_from(field("json_bytes")?)?,
    })
}

/// The hidden `--cache-probe` mode: fills a reflector store with the namespace's
/// `KafkaTopic`s, as received (`full`) or without managed fields (`slim`, as the topic
/// operator caches them), and prints the RSS it grew by. Run in a fresh process so that nothing
/// else of the benchmark is counted.
async fn cache_probe(ns: &str, mode: &str) -> anyhow::Result<()> {
    use kube::runtime::reflector;
    let slim = match mode {
        "full" => false,
        "slim" => true,
        _ => bail!("--cache-probe NAMESPACE full|slim"),
    };
    let alpha = Cluster::connect(&TestEnv::get().clusters[0]).await;
    let api: Api<KafkaTopic> = Api::namespaced(alpha.client.clone(), ns);
    let mut one = api
        .list(&ListParams::default().limit(1))
        .await?
        .items
        .pop()
        .context("no KafkaTopic")?;
    if slim {
        one.managed_fields_mut().clear();
    }
    let json_bytes = serde_json::to_vec(&one)?.len();
    drop(one);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let me = std::process::id();
    let before = status_kib(me, "VmRSS").context("VmRSS")?;
    let (store, writer) = reflector::store::<KafkaTopic>();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(move |kt| {
            if slim {
                kt.managed_fields_mut().clear();
            }
        });
    let mut events = std::pin::pin!(reflector::reflector(writer, stream));
    while let Some(event) = events.next().await {
        if matches!(event, Ok(watcher::Event::InitDone)) {
            break;
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = status_kib(me, "VmRSS").context("VmRSS")?;
    println!(
        "cache-probe objects={} rss_bytes={} json_bytes={json_bytes}",
        store.state().len(),
        after.saturating_sub(before) * 1024
    );
    Ok(())
}

// ------------------------------------------------------------------------------ figures

fn mib(kib: Option<u64>) -> String {
    kib.map(|k| format!("{:.1} MiB", k as f64 / 1024.0))
        .unwrap_or_else(|| "n/a".into())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    // Nearest rank.
    let rank = (p * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

/// `p50 / p99 / max` in seconds.
fn spread(values: &[f64]) -> String {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    format!(
        "{:.2} s / {:.2} s / {:.2} s",
        percentile(&v, 0.5),
        percentile(&v, 0.99),
        v.last().copied().unwrap_or(f64::NAN)
    )
}

/// `x s (y % of one core)`.
fn share(seconds: Option<f64>, wall: f64) -> String {
    seconds.map_or("n/a".into(), |s| {
        format!("{s:.1} s ({:.1} % of one core)", 100.0 * s / wall)
    })
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

fn print_cpu(title: &str, c: &CpuUse) {
    println!("{title} ({:.1} s):", c.wall);
    println!("  central         {}", share(c.central, c.wall));
    println!("  private Kafka   {}", share(c.kafka, c.wall));
    println!("  alpha apiserver {}", share(c.apiserver, c.wall));
    println!("  etcd            {}", share(c.etcd, c.wall));
    println!("  this benchmark  {}", share(c.bench, c.wall));
    let listed = [c.central, c.kafka, c.apiserver, c.etcd, c.bench]
        .into_iter()
        .map(|x| x.unwrap_or(0.0))
        .sum::<f64>();
    println!(
        "  everything else {}",
        share(c.machine.map(|m| (m - listed).max(0.0)), c.wall)
    );
    println!(
        "  whole machine   {}",
        c.machine.map_or("n/a".into(), |s| format!(
            "{s:.1} s busy ({:.0} % of all cores)",
            100.0 * s
                / c.wall
                / std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
        ))
    );
}

fn print_metrics(title: &str, m: &Scrape) {
    println!("{title}:");
    println!(
        "  reconciliations {:.0} (successful {:.0}, failed {:.0}), batches {:.0} (mean size {:.1})",
        series_sum(m, &format!("{M}reconciliations_total")),
        series_sum(m, &format!("{M}reconciliations_successful_total")),
        series_sum(m, &format!("{M}reconciliations_failed_total")).max(0.0),
        series_sum(m, &format!("{M}batch_size_count")),
        series_sum(m, &format!("{M}batch_size_sum"))
            / series_sum(m, &format!("{M}batch_size_count")),
    );
    for (reason, value) in m
        .iter()
        .filter(|(k, _)| k.starts_with(&format!("{M}reconciliations_failed_total{{")))
    {
        if *value > 0.0 {
            println!(
                "    failed {}: {value:.0}",
                label(reason, "reason").unwrap_or("?")
            );
        }
    }
    if let Some(batch) = histograms(m, &format!("{M}batch_size"), "").get("") {
        println!(
            "  batch size p50 <= {:.0}, p99 <= {:.0}",
            batch.quantile_bound(0.5),
            batch.quantile_bound(0.99)
        );
    }
    if let Some(d) = histograms(m, &format!("{M}reconciliation_duration_seconds"), "").get("") {
        println!(
            "  batch start -> topic reconciled: mean {:.3} s, p50 <= {} s, p99 <= {} s",
            d.mean(),
            d.quantile_bound(0.5),
            d.quantile_bound(0.99)
        );
    }
    println!("  calls (count, total time, mean, p50 / p99 bucket bound):");
    for (call, h) in histograms(m, &format!("{M}call_duration_seconds"), "call") {
        println!(
            "    {call:<20} {:>7.0} {:>8.2} s {:>8.4} s  <= {} / {} s",
            h.count,
            h.sum,
            h.mean(),
            h.quantile_bound(0.5),
            h.quantile_bound(0.99)
        );
    }
    let errors: f64 = m
        .iter()
        .filter(|(k, _)| {
            k.starts_with(&format!("{M}call_duration_seconds_count{{"))
                && label(k, "outcome") == Some("error")
        })
        .map(|(_, v)| v)
        .sum();
    if errors > 0.0 {
        println!("    ({errors:.0} of these calls failed)");
    }
}

fn print(opts: &Opts, r: &Results) {
    let n = r.topics;
    println!();
    println!("== bench_topics ==");
    println!("machine: {}", machine());
    println!(
        "central: {} build, args --topic-full-reconcile-secs {} {}",
        opts.profile(),
        opts.full_reconcile_secs,
        opts.central_args.join(" ")
    );
    println!(
        "topics: {n} KafkaTopics x {} partitions x {} replicas, created {} at a time; Kafka: {} \
         private KRaft node(s), heap {}",
        r.partitions, r.replicas, opts.concurrency, r.replicas, opts.kafka_heap
    );
    println!(
        "finalizer at admission (crds chart policy): {}; other environment processes while \
         creating: {}",
        if opts.finalizer_policy { "yes" } else { "no" },
        if opts.pause_others {
            "paused (SIGSTOP)"
        } else {
            "running"
        }
    );
    println!();
    println!(
        "all {n} Ready after:              {:.2} s (first create request -> last Ready seen)",
        r.all_ready.as_secs_f64()
    );
    println!(
        "topics per second:                {:.1}",
        n as f64 / r.all_ready.as_secs_f64()
    );
    println!(
        "create -> Ready, p50 / p99 / max: {}  ({} measured)",
        spread(&r.latencies),
        r.latencies.len()
    );
    println!(
        "all {n} complete in the broker:   {}",
        r.in_kafka.map_or(
            "not before the idle phase (polled every 2 s)".to_owned(),
            |d| format!(
                "{:.1} s after the first create (polled every 2 s)",
                d.as_secs_f64()
            )
        )
    );
    println!(
        "  create -> finalizer added:      {}",
        spread(&r.to_finalizer)
    );
    println!(
        "  finalizer -> Ready:             {}",
        spread(&r.finalizer_to_ready)
    );
    println!(
        "  create request itself:          {}  (all answered after {:.1} s, {} retries)",
        spread(&r.create_latency),
        r.create_calls.as_secs_f64(),
        r.create_retries
    );
    println!(
        "central RSS: idle before {}, peak while creating {}, idle with {n} topics {} (median; \
         peak {}), VmHWM {}",
        mib(r.idle_before),
        mib(r.create_peak),
        mib(r.idle_rss_median),
        mib(r.idle_peak),
        mib(r.hwm)
    );
    println!(
        "central RSS at the end: {} anonymous + {} file-backed",
        mib(r.rss_anon),
        mib(r.rss_file)
    );
    println!(
        "central's queue, most waiting at once (1 s scrapes): {:.0}",
        r.max_queue
    );
    println!();
    print_cpu("CPU while creating", &r.create_cpu);
    print_cpu(
        &format!(
            "CPU idle with {n} topics, within a timed pass (after waiting {:.0} s for it)",
            r.idle_wait.as_secs_f64()
        ),
        &r.idle_cpu,
    );
    println!(
        "  KafkaTopic writes seen while idle: {} (topics that fell back from Ready over the \
         run: {})",
        r.idle_events, r.fell_back
    );
    println!();
    print_metrics("central's topic metrics while creating", &r.create_metrics);
    print_metrics("central's topic metrics while idle", &r.idle_metrics);
    println!();
    println!(
        "Kafka has {} of {n} topics ({} with {} partitions x {} replicas; {} partitions in all); \
         Kafka VmHWM {}, {} open files, {} memory maps",
        r.kafka_topics,
        r.kafka_matching,
        r.partitions,
        r.replicas,
        r.kafka_partitions,
        mib(r.kafka_hwm),
        r.kafka_files,
        r.kafka_maps
    );
    for c in &r.cache {
        println!(
            "one cache of these {} KafkaTopics (reflector store, RSS growth of a fresh process), \
             {}: {:.1} MiB ({:.0} bytes per object; {} bytes of JSON each)",
            c.objects,
            if c.slim {
                "without managed fields"
            } else {
                "objects as received"
            },
            c.rss_bytes as f64 / 1024.0 / 1024.0,
            c.rss_bytes as f64 / c.objects.max(1) as f64,
            c.json_bytes
        );
    }
    match &r.kafka_errors {
        (0, _) => println!("Kafka logged no errors"),
        (n, first) => println!(
            "WARNING: Kafka logged {n} errors; the topics may exist in its metadata without \
             their logs, so these figures do not count. First: {}",
            first.as_deref().unwrap_or("?")
        ),
    }
    if let Some(b) = &r.budget {
        println!(
            "(one Kafka node holds about {} partitions here: open files {:?}, vm.max_map_count {:?})",
            b.per_node, b.open_files, b.max_map_count
        );
    }
    println!(
        "private Kafka up in {:.1} s; central ready in {:.1} s",
        r.kafka_start.as_secs_f64(),
        r.central_ready.as_secs_f64()
    );
}

// ------------------------------------------------------------------------------ clean-up

/// Removes every finalizer of the namespace's `KafkaTopic`s (central is stopped by then), then
/// deletes the namespace and waits (bounded) until it is gone.
async fn clean_up(ns: TestNamespace) {
    let started = Instant::now();
    let api: Api<KafkaTopic> = ns.api();
    let mut names = Vec::new();
    let mut params = ListParams::default().limit(1000);
    loop {
        match api.list_metadata(&params).await {
            Ok(list) => {
                names.extend(
                    list.items
                        .into_iter()
                        .filter(|o| !o.finalizers().is_empty())
                        .map(|o| o.name_any()),
                );
                match list.metadata.continue_ {
                    Some(token) if !token.is_empty() => params = params.continue_token(&token),
                    _ => break,
                }
            }
            Err(e) => {
                eprintln!("cannot list the KafkaTopics of {}: {e}", ns.name);
                break;
            }
        }
    }
    let patch = json!({"metadata": {"finalizers": null}});
    let failed = futures::stream::iter(names.iter())
        .map(|name| {
            let (api, patch) = (&api, &patch);
            async move {
                api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .err()
                    .filter(|e| !matches!(e, kube::Error::Api(a) if a.code == 404))
            }
        })
        .buffer_unordered(64)
        .filter_map(|e| async move { e })
        .count()
        .await;
    println!(
        "finalizers removed from {} KafkaTopics in {:.1} s ({failed} failed)",
        names.len() - failed,
        started.elapsed().as_secs_f64()
    );
    let (name, cluster) = (ns.name.clone(), ns.cluster.clone());
    ns.delete().await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(cluster.client.clone());
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(300) {
        if let Ok(None) = namespaces.get_opt(&name).await {
            println!(
                "namespace {name} deleted in {:.1} s",
                started.elapsed().as_secs_f64()
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!("namespace {name} is still being deleted");
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--cache-probe") {
        let (Some(ns), Some(mode)) = (args.get(2), args.get(3)) else {
            bail!("--cache-probe NAMESPACE full|slim");
        };
        return cache_probe(ns, mode).await;
    }
    let opts = Opts::parse()?;
    let env = TestEnv::get();
    let alpha = Cluster::connect(&env.clusters[0]).await;
    crds::install(&alpha).await;
    let ns = alpha.namespace("bench-topics").await;
    let policy = format!("kstretch-topic-finalizer-{}", ns.name);
    if opts.finalizer_policy {
        kstretch_tests::topics::install_finalizer_policy(&policy, &[ns.name.as_str()]);
        kstretch_tests::topics::wait_finalizer_policy(&ns.api()).await;
        println!("finalizer policy {policy}: the finalizer is added at create");
    }
    println!(
        "bench_topics: {} topics, namespace {} in {}, deadline {} s",
        opts.topics,
        ns.name,
        alpha.name,
        opts.deadline.as_secs()
    );
    // The run is a task so that a panic in it still reaches the clean-up below; its processes
    // are killed when the task ends (or is dropped at the deadline or on a signal).
    let task = {
        let (opts, ns, alpha) = (opts.clone(), ns.name.clone(), alpha.clone());
        tokio::spawn(async move {
            if opts.writes_only {
                run_writes_only(opts, ns, alpha)
                    .await
                    .map(Report::WritesOnly)
            } else {
                run(opts, ns, alpha)
                    .await
                    .map(|r| Report::Full(Box::new(r)))
            }
        })
    };
    let abort = task.abort_handle();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let outcome = tokio::select! {
        r = tokio::time::timeout(opts.deadline, task) => Some(r),
        _ = tokio::signal::ctrl_c() => None,
        _ = term.recv() => None,
    };
    abort.abort();
    // Give an aborted task's processes a moment to be killed before the clean-up.
    tokio::time::sleep(Duration::from_millis(500)).await;
    clean_up(ns).await;
    kstretch_tests::topics::delete_finalizer_policy(&policy);
    match outcome {
        Some(Ok(Ok(Ok(Report::Full(results))))) => {
            print(&opts, &results);
            Ok(())
        }
        Some(Ok(Ok(Ok(Report::WritesOnly(results))))) => {
            print_writes_only(&opts, &results);
            Ok(())
        }
        Some(Ok(Ok(Err(e)))) => Err(e),
        Some(Ok(Err(join))) => bail!("the benchmark failed: {join}"),
        Some(Err(_)) => bail!("the benchmark exceeded its deadline of {:?}", opts.deadline),
        None => bail!("interrupted"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_stats_from_a_scrape() {
        let m: Scrape = [
            (
                format!("{M}call_duration_seconds_count{{call=\"a\",outcome=\"ok\"}}"),
                4.0,
            ),
            (
                format!("{M}call_duration_seconds_sum{{call=\"a\",outcome=\"ok\"}}"),
                2.0,
            ),
            (
                format!("{M}call_duration_seconds_bucket{{call=\"a\",outcome=\"ok\",le=\"0.5\"}}"),
                3.0,
            ),
            (
                format!("{M}call_duration_seconds_bucket{{call=\"a\",outcome=\"ok\",le=\"1.0\"}}"),
                4.0,
            ),
            (
                format!("{M}call_duration_seconds_bucket{{call=\"a\",outcome=\"ok\",le=\"+Inf\"}}"),
                4.0,
            ),
        ]
        .into();
        let h = histograms(&m, &format!("{M}call_duration_seconds"), "call");
        let a = &h["a"];
        assert_eq!(a.count, 4.0);
        assert!((a.mean() - 0.5).abs() < 1e-9);
        assert_eq!(a.quantile_bound(0.5), 0.5);
        assert_eq!(a.quantile_bound(0.99), 1.0);
    }

    #[test]
    fn the_idle_phase_waits_for_the_next_timed_pass() {
        let start = Instant::now();
        let every = Duration::from_secs(120);
        let at = |s| start + Duration::from_secs(s);
        assert_eq!(next_pass(start, at(70), every), at(120));
        assert_eq!(next_pass(start, at(130), every), at(240));
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert!(percentile(&[], 0.5).is_nan());
    }
}
