//! A private KRaft cluster run from configurations that `kstretch_core::kraft::render`
//! produced: every node's addresses mapped to loopback and its directories (data and
//! certificates) into a temporary directory (nothing else changed), a throwaway cluster CA and
//! a loopback certificate for the nodes' mutual TLS, storage formatted, one JVM per node, all
//! killed on drop.
//! Tests that must stop and start brokers use it instead of the shared environment's Kafka.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use kstretch_core::kraft::{
    Addressing, CA_FILE, CERT_FILE, CERTS_DIR, KEY_FILE, KafkaCluster, Listener, ListenerKind,
    Node, NodeConfig, QuorumMode, REPLICATION_LISTENER, Volume,
};
use kstretch_core::node_ids::Role;
use kstretch_kadmin::{AdminClient, KRAFT_VERSION};

use crate::certs::Pki;

use crate::env::TestEnv;
use crate::process::{Spawned, free_port};
use crate::wait::{Seen, wait_for};

/// The properties the loopback mapping rewrites; every other one is passed on byte for byte.
pub const MAPPED_KEYS: &[&str] = &[
    "listeners",
    "advertised.listeners",
    "controller.quorum.voters",
    "log.dirs",
    "metadata.log.dir",
];

/// How long nodes get to format, start, and have every broker registered and unfenced.
const START_TIMEOUT: Duration = Duration::from_secs(180);

/// Logging of the private nodes: warnings only, plus the lines that say a node is up, so the
/// log printed for a failed test stays readable.
const LOG4J2: &str = "\
name = kstretch-private-kafka
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

/// Loopback port of each node's listener, by (node ID, listener name).
pub type PortMap = BTreeMap<(i32, String), u16>;

/// A running private Kafka cluster.
#[derive(Debug)]
pub struct PrivateKafka {
    root: PathBuf,
    libs: PathBuf,
    rendered: BTreeMap<i32, NodeConfig>,
    mapped: BTreeMap<i32, NodeConfig>,
    ports: PortMap,
    nodes: BTreeMap<i32, Spawned>,
}

impl PrivateKafka {
    /// Maps `rendered` (node ID to its configuration) onto loopback, formats every node's
    /// storage with `cluster_id`, starts every node, and waits until every broker is registered
    /// and unfenced. Any layout works: controller-only, broker-only and combined nodes.
    pub async fn start(cluster_id: &str, rendered: &BTreeMap<i32, NodeConfig>) -> PrivateKafka {
        let env = TestEnv::get();
        let libs = env.kafka_libs();
        let root = unique_dir();
        std::fs::create_dir_all(&root).expect("private Kafka directory");
        std::fs::write(root.join("log4j2.properties"), LOG4J2).expect("log4j2.properties");

        let ports = allocate_ports(rendered);
        let mapped: BTreeMap<i32, NodeConfig> = rendered
            .iter()
            .map(|(id, config)| (*id, map_node(*id, config, &ports, &root)))
            .collect();
        // Every node presents the same loopback certificate, as every address is 127.0.0.1.
        let pki = Pki::new("private-kafka");
        let cert = pki.loopback_node();
        for (id, config) in &mapped {
            let dir = node_dir(&root, *id);
            let certs = certs_dir(&root, *id);
            std::fs::create_dir_all(&certs).expect("certificate directory");
            for (file, pem) in [
                (CERT_FILE, &cert.cert_pem),
                (KEY_FILE, &cert.key_pem),
                (CA_FILE, &cert.ca_pem),
            ] {
                std::fs::write(certs.join(file), pem).expect("certificate file");
            }
            std::fs::write(dir.join("server.properties"), config.to_properties_text())
                .expect("server.properties");
        }
        let mut kafka = PrivateKafka {
            root,
            libs,
            rendered: rendered.clone(),
            mapped,
            ports,
            nodes: BTreeMap::new(),
        };
        kafka.format(cluster_id).await;
        for id in kafka.rendered.keys().copied().collect::<Vec<_>>() {
            kafka.start_node(id);
        }
        let brokers = kafka.broker_ids();
        kafka.wait_for_brokers(&brokers).await;
        kafka
    }

    /// Formats every node in parallel (the static quorum needs nothing but the cluster ID).
    async fn format(&self, cluster_id: &str) {
        let commands: Vec<(i32, Command)> = self
            .mapped
            .keys()
            .map(|id| {
                let mut command = self.java("128m");
                command
                    .arg("kafka.tools.StorageTool")
                    .arg("format")
                    .arg("-t")
                    .arg(cluster_id)
                    .arg("-c")
                    .arg(node_dir(&self.root, *id).join("server.properties"));
                (*id, command)
            })
            .collect();
        let handles: Vec<_> = commands
            .into_iter()
            .map(|(id, mut command)| tokio::task::spawn_blocking(move || (id, command.output())))
            .collect();
        for handle in handles {
            let (id, output) = handle.await.expect("format task");
            let output = output.unwrap_or_else(|e| panic!("cannot run java: {e}"));
            assert!(
                output.status.success(),
                "formatting node {id} failed ({}):\n{}\n{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }

    fn java(&self, heap: &str) -> Command {
        let mut command = Command::new("java");
        command
            .arg(format!("-Xmx{heap}"))
            .args([
                "-Xms64m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-XX:-UsePerfData",
                "-XX:+ExitOnOutOfMemoryError",
                "-Djava.awt.headless=true",
            ])
            .arg(format!(
                "-Dlog4j2.configurationFile={}",
                self.root.join("log4j2.properties").display()
            ))
            .arg("-cp")
            .arg(format!("{}/*", self.libs.display()))
            .current_dir(&self.root);
        command
    }

    /// Starts node `id` (again) with its mapped configuration; does not wait.
    pub fn start_node(&mut self, id: i32) {
        assert!(
            self.mapped.contains_key(&id),
            "no node {id} in this cluster"
        );
        if let Some(mut old) = self.nodes.remove(&id) {
            old.stop();
        }
        let mut command = self.java("256m");
        command
            .arg("kafka.Kafka")
            .arg(node_dir(&self.root, id).join("server.properties"));
        let spawned = Spawned::start(&format!("kafka-private-{id}"), command);
        self.nodes.insert(id, spawned);
    }

    /// Kills node `id` (SIGKILL: the abrupt failure tests want to see handled).
    pub fn stop_node(&mut self, id: i32) {
        if let Some(mut node) = self.nodes.remove(&id) {
            node.stop();
        }
    }

    /// Whether node `id`'s process was started and has not been stopped.
    pub fn is_running(&self, id: i32) -> bool {
        self.nodes.contains_key(&id)
    }

    /// Waits until the brokers the cluster reports (registered and unfenced) are exactly
    /// `expected`.
    pub async fn wait_for_brokers(&self, expected: &BTreeSet<i32>) {
        let bootstrap = self.bootstrap();
        let what = format!("brokers {expected:?} to be registered and unfenced at {bootstrap}");
        wait_for(&what, START_TIMEOUT, || {
            let bootstrap = bootstrap.clone();
            async move {
                let seen =
                    tokio::task::spawn_blocking(move || crate::kafka::broker_ids(&bootstrap))
                        .await
                        .expect("metadata task");
                match seen {
                    Ok(ids) if &ids == expected => Seen::Done(()),
                    Ok(ids) => Seen::NotYet(format!("brokers {ids:?}")),
                    Err(e) => Seen::NotYet(format!("metadata: {e}")),
                }
            }
        })
        .await;
    }

    /// IDs of the nodes with the broker role.
    pub fn broker_ids(&self) -> BTreeSet<i32> {
        self.rendered
            .iter()
            .filter(|(_, c)| c.get("inter.broker.listener.name").is_some())
            .map(|(id, _)| *id)
            .collect()
    }

    /// IDs of the nodes with the controller role.
    pub fn controller_ids(&self) -> BTreeSet<i32> {
        self.rendered
            .iter()
            .filter(|(_, c)| {
                c.get("process.roles")
                    .is_some_and(|r| r.split(',').any(|r| r == "controller"))
            })
            .map(|(id, _)| *id)
            .collect()
    }

    /// Bootstrap servers for clients: every broker's first user listener (the replication
    /// listener if there is none), on loopback.
    pub fn bootstrap(&self) -> String {
        let listener = self
            .broker_ids()
            .into_iter()
            .next()
            .and_then(|id| {
                listener_names(self.rendered[&id].get("listeners"))
                    .into_iter()
                    .find(|n| n != REPLICATION_LISTENER && !n.starts_with("CONTROLPLANE"))
            })
            .unwrap_or_else(|| REPLICATION_LISTENER.to_owned());
        self.bootstrap_on(&listener)
    }

    /// Bootstrap servers of every broker's listener `listener` (Kafka listener name).
    pub fn bootstrap_on(&self, listener: &str) -> String {
        self.broker_ids()
            .into_iter()
            .filter_map(|id| self.address(id, listener))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `127.0.0.1:<port>` of node `id`'s listener `listener`, if it has it.
    pub fn address(&self, id: i32, listener: &str) -> Option<String> {
        self.ports
            .get(&(id, listener.to_owned()))
            .map(|p| format!("127.0.0.1:{p}"))
    }

    /// The controllers' listener addresses (for `bootstrap.controllers` clients).
    pub fn controller_bootstrap(&self) -> String {
        self.controller_ids()
            .into_iter()
            .filter_map(|id| {
                let name = self.mapped[&id]
                    .get("controller.listener.names")?
                    .split(',')
                    .next()?
                    .to_owned();
                self.address(id, &name)
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The configuration `render` produced for node `id`.
    pub fn rendered(&self, id: i32) -> &NodeConfig {
        &self.rendered[&id]
    }

    /// The configuration node `id` actually runs with.
    pub fn mapped(&self, id: i32) -> &NodeConfig {
        &self.mapped[&id]
    }

    /// The node's process log so far.
    pub fn log(&self, id: i32) -> String {
        self.nodes
            .get(&id)
            .map(Spawned::log_text)
            .unwrap_or_default()
    }

    /// The temporary directory holding every node's configuration and data.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

impl Drop for PrivateKafka {
    fn drop(&mut self) {
        // Processes first (each Spawned kills its JVM and prints its log if the test failed),
        // then their data.
        self.nodes.clear();
        if std::thread::panicking() {
            eprintln!("private Kafka data kept in {}", self.root.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

/// A fresh KRaft cluster ID: 16 random bytes, URL-safe base64 without padding, as
/// `kafka-storage random-uuid` prints (never starting with `-`, which would read as an option).
pub fn random_cluster_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut bytes = Vec::with_capacity(16);
    for _ in 0..2 {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default(),
        );
        bytes.extend_from_slice(&hasher.finish().to_be_bytes());
    }
    bytes[0] &= 0x7f;
    base64_url(&bytes)
}

fn base64_url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

fn unique_dir() -> PathBuf {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    std::env::temp_dir().join(format!(
        "kstretch-kraft-{}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        free_port()
    ))
}

/// Where node `id` finds what a pod finds in [`CERTS_DIR`].
pub fn certs_dir(root: &Path, id: i32) -> PathBuf {
    node_dir(root, id).join("certs")
}

fn node_dir(root: &Path, id: i32) -> PathBuf {
    root.join(format!("node-{id}"))
}

/// Names of the listeners in a `listeners` / `advertised.listeners` value, in order.
fn listener_names(value: Option<&str>) -> Vec<String> {
    value
        .unwrap_or_default()
        .split(',')
        .filter(|l| !l.is_empty())
        .filter_map(|l| l.split_once("://").map(|(name, _)| name.to_owned()))
        .collect()
}

/// One free loopback port per node and bound listener, all distinct.
pub fn allocate_ports(rendered: &BTreeMap<i32, NodeConfig>) -> PortMap {
    let mut used = BTreeSet::new();
    let mut ports = PortMap::new();
    for (id, config) in rendered {
        for name in listener_names(config.get("listeners")) {
            let port = loop {
                let port = free_port();
                if used.insert(port) {
                    break port;
                }
            };
            ports.insert((*id, name), port);
        }
    }
    ports
}

/// Node `id`'s configuration with every endpoint on loopback and every directory under
/// `root`; nothing else changes. Panics if the rendered configuration is inconsistent (an
/// advertised listener that is not bound, a voter whose address is not what that controller
/// advertises), which is a generator bug.
pub fn map_node(id: i32, rendered: &NodeConfig, ports: &PortMap, root: &Path) -> NodeConfig {
    let port = |node: i32, name: &str| -> u16 {
        *ports
            .get(&(node, name.to_owned()))
            .unwrap_or_else(|| panic!("node {node} binds no listener {name}"))
    };
    let mut mapped = rendered.clone();
    let p = &mut mapped.properties;
    for key in ["listeners", "advertised.listeners"] {
        if let Some(value) = p.get_mut(key) {
            *value = listener_names(Some(value))
                .iter()
                .map(|name| format!("{name}://127.0.0.1:{}", port(id, name)))
                .collect::<Vec<_>>()
                .join(",");
        }
    }
    if let Some(value) = p.get_mut("controller.quorum.voters") {
        let controller_listener = rendered
            .get("controller.listener.names")
            .and_then(|n| n.split(',').next())
            .expect("controller.listener.names");
        *value = value
            .split(',')
            .map(|voter| {
                let (voter_id, _) = voter.split_once('@').expect("voter id@host:port");
                let voter_id: i32 = voter_id.parse().expect("voter id");
                format!(
                    "{voter_id}@127.0.0.1:{}",
                    port(voter_id, controller_listener)
                )
            })
            .collect::<Vec<_>>()
            .join(",");
    }
    let dir = |path: &str| -> String {
        node_dir(root, id)
            .join(path.trim_start_matches('/'))
            .display()
            .to_string()
    };
    if let Some(value) = p.get_mut("log.dirs") {
        *value = value.split(',').map(dir).collect::<Vec<_>>().join(",");
    }
    if let Some(value) = p.get_mut("metadata.log.dir") {
        *value = dir(value);
    }
    let certs = certs_dir(root, id).display().to_string();
    for value in p.values_mut() {
        if value.contains(CERTS_DIR) {
            *value = value.replace(CERTS_DIR, &certs);
        }
    }
    mapped
}

/// Checks that every controller's voter address is what that controller advertises, across
/// all nodes: the loopback mapping relies on it, and so do real clusters.
pub fn assert_voters_match_advertised(rendered: &BTreeMap<i32, NodeConfig>) {
    for (id, config) in rendered {
        let Some(voters) = config.get("controller.quorum.voters") else {
            continue;
        };
        for voter in voters.split(',') {
            let (voter_id, endpoint) = voter.split_once('@').expect("voter id@host:port");
            let voter_id: i32 = voter_id.parse().expect("voter id");
            let controller = &rendered[&voter_id];
            let name = controller
                .get("controller.listener.names")
                .and_then(|n| n.split(',').next())
                .expect("controller.listener.names");
            let advertised = controller
                .get("advertised.listeners")
                .unwrap_or_default()
                .split(',')
                .find_map(|l| l.strip_prefix(&format!("{name}://")));
            assert_eq!(
                advertised,
                Some(endpoint),
                "node {id} lists voter {voter_id} at {endpoint}, which is not what it advertises"
            );
        }
    }
}

// Layouts for tests of private clusters.

/// Options a user would put in `Kafka.spec.kafka.config`, sized for a small test machine, plus
/// one forbidden option that must be dropped.
pub fn user_config() -> BTreeMap<String, String> {
    [
        ("default.replication.factor", "3"),
        ("min.insync.replicas", "2"),
        ("offsets.topic.replication.factor", "3"),
        ("offsets.topic.num.partitions", "3"),
        ("transaction.state.log.replication.factor", "3"),
        ("transaction.state.log.min.isr", "2"),
        ("transaction.state.log.num.partitions", "3"),
        ("share.coordinator.state.topic.replication.factor", "3"),
        ("share.coordinator.state.topic.min.isr", "2"),
        ("auto.create.topics.enable", "false"),
        ("group.initial.rebalance.delay.ms", "0"),
        ("num.network.threads", "2"),
        ("num.io.threads", "2"),
        ("background.threads", "2"),
        ("num.replica.fetchers", "1"),
        ("num.recovery.threads.per.data.dir", "1"),
        ("log.segment.bytes", "8388608"),
        ("log.cleaner.dedupe.buffer.size", "8388608"),
        ("log.cleaner.threads", "1"),
        ("metadata.log.segment.bytes", "8388608"),
        ("broker.session.timeout.ms", "9000"),
        ("broker.heartbeat.interval.ms", "1000"),
        ("listeners", "PLAINTEXT://:9092"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// A node of pool `pool` in cluster `alias`.
pub fn node(id: i32, pool: &str, alias: &str, roles: &[Role], volumes: &[Volume]) -> Node {
    Node {
        id,
        pool: pool.to_owned(),
        roles: roles.iter().copied().collect(),
        cluster_alias: alias.to_owned(),
        volumes: volumes.to_vec(),
    }
}

/// A cluster `boot` in namespace `kafka` with a plaintext and a TLS listener, [`user_config`]
/// and a static quorum (made dynamic with [`make_quorum_dynamic`]).
pub fn cluster(addressing: Addressing, nodes: Vec<Node>) -> KafkaCluster {
    KafkaCluster {
        name: "boot".into(),
        namespace: "kafka".into(),
        cluster_id: random_cluster_id(),
        listeners: vec![
            Listener {
                name: "plain".into(),
                port: 9092,
                kind: ListenerKind::Internal,
                tls: false,
                authentication: Default::default(),
                custom_certificate: false,
                advertised: BTreeMap::new(),
            },
            Listener {
                name: "tls".into(),
                port: 9093,
                kind: ListenerKind::Internal,
                tls: true,
                authentication: Default::default(),
                custom_certificate: false,
                advertised: BTreeMap::new(),
            },
        ],
        config: user_config(),
        addressing,
        nodes,
        authorization: None,
        quorum: QuorumMode::Static,
        metrics_reporter: None,
    }
}

/// Raises `kraft.version` to 1: the voters are then records of the metadata log. Every voter
/// must first have told the leader its directory: retried until it has.
pub async fn make_quorum_dynamic(admin: &AdminClient, bootstrap: &str) {
    crate::wait::wait_for("kraft.version 1", Duration::from_secs(60), || async {
        match admin.upgrade_feature(KRAFT_VERSION, 1).await {
            Ok(()) => crate::wait::Seen::Done(()),
            Err(e) => crate::wait::Seen::NotYet(e.to_string()),
        }
    })
    .await;
    assert_eq!(crate::kafka::kraft_version_by_kafkas_tool(bootstrap), "1");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> NodeConfig {
        NodeConfig {
            properties: pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    #[test]
    fn maps_only_addresses_and_directories() {
        let controller = config(&[
            ("node.id", "0"),
            ("controller.listener.names", "CONTROLPLANE-9090"),
            ("listeners", "CONTROLPLANE-9090://0.0.0.0:9090"),
            ("advertised.listeners", "CONTROLPLANE-9090://c-0.svc:9090"),
            ("controller.quorum.voters", "0@c-0.svc:9090"),
            ("log.dirs", "/var/lib/kafka/data-0/kafka-log0"),
            ("metadata.log.dir", "/var/lib/kafka/data-0/kafka-log0"),
            ("num.partitions", "3"),
        ]);
        let broker = config(&[
            ("node.id", "1"),
            ("controller.listener.names", "CONTROLPLANE-9090"),
            (
                "listeners",
                "REPLICATION-9091://0.0.0.0:9091,PLAIN-9092://0.0.0.0:9092",
            ),
            (
                "advertised.listeners",
                "REPLICATION-9091://b-1.svc:9091,PLAIN-9092://b-1.svc:9092",
            ),
            ("controller.quorum.voters", "0@c-0.svc:9090"),
            ("log.dirs", "/var/lib/kafka/data/kafka-log1"),
        ]);
        let rendered: BTreeMap<i32, NodeConfig> = [(0, controller), (1, broker)].into();
        assert_voters_match_advertised(&rendered);
        let ports: PortMap = [
            ((0, "CONTROLPLANE-9090".to_owned()), 1000),
            ((1, "REPLICATION-9091".to_owned()), 1001),
            ((1, "PLAIN-9092".to_owned()), 1002),
        ]
        .into();
        let root = Path::new("/tmp/r");
        let c = map_node(0, &rendered[&0], &ports, root);
        assert_eq!(
            c.get("listeners"),
            Some("CONTROLPLANE-9090://127.0.0.1:1000")
        );
        assert_eq!(
            c.get("advertised.listeners"),
            Some("CONTROLPLANE-9090://127.0.0.1:1000")
        );
        assert_eq!(c.get("controller.quorum.voters"), Some("0@127.0.0.1:1000"));
        assert_eq!(
            c.get("metadata.log.dir"),
            Some("/tmp/r/node-0/var/lib/kafka/data-0/kafka-log0")
        );
        assert_eq!(c.get("num.partitions"), Some("3"));
        let b = map_node(1, &rendered[&1], &ports, root);
        assert_eq!(
            b.get("advertised.listeners"),
            Some("REPLICATION-9091://127.0.0.1:1001,PLAIN-9092://127.0.0.1:1002")
        );
        assert_eq!(b.get("controller.quorum.voters"), Some("0@127.0.0.1:1000"));
        assert_eq!(
            b.get("log.dirs"),
            Some("/tmp/r/node-1/var/lib/kafka/data/kafka-log1")
        );
        for key in rendered[&1].properties.keys() {
            if !MAPPED_KEYS.contains(&key.as_str()) {
                assert_eq!(b.properties[key], rendered[&1].properties[key]);
            }
        }
    }

    #[test]
    fn allocates_distinct_ports() {
        let node = config(&[(
            "listeners",
            "REPLICATION-9091://0.0.0.0:9091,PLAIN-9092://0.0.0.0:9092",
        )]);
        let rendered: BTreeMap<i32, NodeConfig> = [(1, node.clone()), (2, node)].into();
        let ports = allocate_ports(&rendered);
        assert_eq!(ports.len(), 4);
        assert_eq!(ports.values().collect::<BTreeSet<_>>().len(), 4);
    }

    #[test]
    fn cluster_ids_look_like_kafkas() {
        let id = random_cluster_id();
        assert_eq!(id.len(), 22, "{id}");
        assert!(!id.starts_with('-'));
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        assert_ne!(id, random_cluster_id());
        assert_eq!(base64_url(&[0xfb, 0xff]), "-_8");
    }
}
