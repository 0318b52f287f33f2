//! Rendering every node's KRaft configuration (what goes into its ConfigMap) from a
//! [`KafkaCluster`], with the semantics of Strimzi's `KafkaBrokerConfigurationBuilder`: the
//! operator-owned control-plane and replication listeners (mutual TLS with the cluster CA), the
//! user's listeners with their TLS and authentication, the authorizer, the controller quorum
//! (static or dynamic, see [`super::voters`]), each broker's rack (its Kubernetes cluster), log directories per volume, and the
//! user's options minus the forbidden ones.

use std::collections::{BTreeMap, BTreeSet};

use super::addressing::node_endpoint;
use super::error::ConfigError;
use super::forbidden;
use super::model::{
    AdvertisedHost, Authentication, CONTROLPLANE_LISTENER, CONTROLPLANE_PORT, KafkaCluster,
    Listener, METRICS_PORT, MetricsReporter, Node, REPLICATION_LISTENER, REPLICATION_PORT,
};
use super::properties;
use super::security;
use super::tls::{self, ClientAuth};
use super::voters;

/// Kafka's rack-aware replica selector (KIP-392): a consumer with `client.rack` fetches from a
/// replica in its own rack, here its own Kubernetes cluster.
const RACK_AWARE_SELECTOR: &str = "org.apache.kafka.common.replica.RackAwareReplicaSelector";

/// Ports a user listener may not take: the operator's own listeners, metrics and JMX (Strimzi's
/// rule), besides everything below 9092.
const RESERVED_PORTS: &[u16] = &[CONTROLPLANE_PORT, REPLICATION_PORT, METRICS_PORT, 9999];
const LOWEST_USER_PORT: u16 = 9092;

/// Options Strimzi sets when the user leaves them out.
const DEFAULTS: &[(&str, &str)] = &[
    // Strimzi forces 1 when users remove it, so that removing it never keeps a stale dynamic
    // value around (and ELR does not change the default under them).
    ("min.insync.replicas", "1"),
];

/// The configuration of one node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeConfig {
    pub properties: BTreeMap<String, String>,
}

impl NodeConfig {
    /// One property's value.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.properties.get(key).map(String::as_str)
    }

    /// The configuration as a Java properties file: sorted, escaped, byte-for-byte stable for
    /// equal input.
    pub fn to_properties_text(&self) -> String {
        properties::to_text(&self.properties)
    }

    /// What of the configuration restarts the node when it changes (it feeds the pod's
    /// revision hash): all of it but a dynamic quorum's bootstrap servers, which a node reads
    /// only to find the quorum when it starts. Adding or moving a controller then restarts
    /// nobody: a node reads the new list at its next start, and any controller of the old list
    /// that still runs answers meanwhile.
    pub fn rolling_text(&self) -> String {
        let mut rolling = self.properties.clone();
        rolling.remove(voters::BOOTSTRAP_SERVERS);
        properties::to_text(&rolling)
    }
}

/// Every node's configuration, and what was left out on the way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    pub nodes: BTreeMap<i32, NodeConfig>,
    /// One line per listener or option that was left out, naming it; shown to the user as a
    /// `Warning` condition.
    pub warnings: Vec<String>,
}

/// Renders the configuration of every node of `cluster`.
///
/// Deterministic: equal input gives equal output, so unchanged clusters never roll.
pub fn render(cluster: &KafkaCluster) -> Result<Rendered, ConfigError> {
    check_nodes(cluster)?;
    check_listeners(&cluster.listeners)?;
    let mut warnings = Vec::new();

    let served: Vec<&Listener> = cluster.listeners.iter().collect();

    let mut user = BTreeMap::new();
    for (key, value) in &cluster.config {
        if forbidden::is_allowed(key, &cluster.listeners) {
            user.insert(key.clone(), value.clone());
        } else {
            warnings.push(format!(
                "configuration option {key:?} is forbidden and ignored: kstretch manages it"
            ));
        }
    }
    for (key, value) in DEFAULTS {
        user.entry((*key).to_owned())
            .or_insert_with(|| (*value).to_owned());
    }
    let providers = tls::provider_options(user.get("config.providers").map(String::as_str));
    user.extend(providers);
    if let Some(authorization) = &cluster.authorization {
        user.extend(security::authorizer_options(authorization));
    }
    if let Some(reporter) = &cluster.metrics_reporter {
        add_metrics_reporter(&mut user, reporter);
    }

    let (quorum_key, quorum_value) = voters::quorum_property(cluster)?;

    let mut nodes = BTreeMap::new();
    for node in &cluster.nodes {
        let mut p = user.clone();
        p.insert("node.id".into(), node.id.to_string());
        p.insert("process.roles".into(), node.process_roles().into());
        p.insert(
            "controller.listener.names".into(),
            CONTROLPLANE_LISTENER.into(),
        );
        p.insert(quorum_key.into(), quorum_value.clone());

        // Every node needs the controller listener's protocol and TLS options, brokers to reach
        // controllers. Nodes talk to each other only over mutual TLS with the cluster CA.
        let mut protocols = vec![format!("{CONTROLPLANE_LISTENER}:SSL")];
        p.extend(tls::listener_options(
            CONTROLPLANE_LISTENER,
            ClientAuth::Required,
            false,
        ));
        let mut listeners = Vec::new();
        let mut advertised = Vec::new();
        let mut bind = |name: &str, port: u16| -> Result<(), ConfigError> {
            listeners.push(format!("{name}://0.0.0.0:{port}"));
            let endpoint = node_endpoint(cluster, node, name, port)?;
            advertised.push(format!("{name}://{endpoint}"));
            Ok(())
        };
        if node.is_controller() {
            // Kafka 4 lets controllers advertise their listener, which KRaft clients of the
            // controller (brokers, admin tools) use.
            bind(CONTROLPLANE_LISTENER, CONTROLPLANE_PORT)?;
        }
        if node.is_broker() {
            bind(REPLICATION_LISTENER, REPLICATION_PORT)?;
            protocols.push(format!("{REPLICATION_LISTENER}:SSL"));
            p.extend(tls::listener_options(
                REPLICATION_LISTENER,
                ClientAuth::Required,
                false,
            ));
            for listener in &served {
                let name = listener.config_name();
                bind(&name, listener.port)?;
                let (protocol, options) = security::user_listener(listener);
                protocols.push(format!("{name}:{protocol}"));
                p.extend(options);
            }
            p.insert(
                "inter.broker.listener.name".into(),
                REPLICATION_LISTENER.into(),
            );
            let reads_node_address = served.iter().any(|l| {
                l.advertised
                    .get(&node.id)
                    .is_some_and(|a| matches!(a.host, AdvertisedHost::NodeAddress { .. }))
            });
            if reads_node_address {
                let providers = p.get("config.providers").cloned().unwrap_or_default();
                p.extend(tls::node_address_provider(&providers));
            }
            // A broker's rack is its Kubernetes cluster: Kafka then places a partition's
            // replicas in as many clusters as it can, so losing one cluster loses no partition.
            if !node.cluster_alias.is_empty() {
                p.insert("broker.rack".into(), node.cluster_alias.clone());
                p.entry("replica.selector.class".into())
                    .or_insert_with(|| RACK_AWARE_SELECTOR.into());
            }
        }
        p.insert("listeners".into(), listeners.join(","));
        p.insert("advertised.listeners".into(), advertised.join(","));
        p.insert("listener.security.protocol.map".into(), protocols.join(","));

        let (log_dirs, metadata_dir) = log_dirs(node)?;
        p.insert("log.dirs".into(), log_dirs.join(","));
        if let Some(dir) = metadata_dir {
            p.insert("metadata.log.dir".into(), dir);
        }
        nodes.insert(node.id, NodeConfig { properties: p });
    }
    Ok(Rendered { nodes, warnings })
}

fn check_nodes(cluster: &KafkaCluster) -> Result<(), ConfigError> {
    let mut seen: BTreeMap<i32, &str> = BTreeMap::new();
    for node in &cluster.nodes {
        if node.id < 0 {
            return Err(ConfigError::InvalidNodeId {
                id: node.id,
                pool: node.pool.clone(),
            });
        }
        if let Some(first) = seen.insert(node.id, &node.pool) {
            return Err(ConfigError::DuplicateNodeId {
                id: node.id,
                first: first.to_owned(),
                second: node.pool.clone(),
            });
        }
        if node.roles.is_empty() {
            return Err(ConfigError::NoRoles {
                node: node.id,
                pool: node.pool.clone(),
            });
        }
    }
    if !cluster.nodes.iter().any(Node::is_controller) {
        return Err(ConfigError::NoControllers {
            kafka: cluster.name.clone(),
        });
    }
    Ok(())
}

fn check_listeners(listeners: &[Listener]) -> Result<(), ConfigError> {
    let mut names = BTreeSet::new();
    let mut ports: BTreeMap<u16, &str> = BTreeMap::new();
    for listener in listeners {
        let valid = (1..=11).contains(&listener.name.len())
            && listener
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        if !valid {
            return Err(ConfigError::InvalidListenerName {
                name: listener.name.clone(),
            });
        }
        if !names.insert(listener.name.as_str()) {
            return Err(ConfigError::DuplicateListenerName {
                name: listener.name.clone(),
            });
        }
        if RESERVED_PORTS.contains(&listener.port) || listener.port < LOWEST_USER_PORT {
            return Err(ConfigError::ForbiddenListenerPort {
                listener: listener.name.clone(),
                port: listener.port,
            });
        }
        if listener.authentication == Authentication::Tls && !listener.tls {
            return Err(ConfigError::CertificateAuthenticationWithoutTls {
                listener: listener.name.clone(),
            });
        }
        if listener.custom_certificate && !listener.tls {
            return Err(ConfigError::CertificateWithoutTls {
                listener: listener.name.clone(),
            });
        }
        if let Some(first) = ports.insert(listener.port, &listener.name) {
            return Err(ConfigError::ListenerPortClash {
                port: listener.port,
                first: first.to_owned(),
                second: listener.name.clone(),
            });
        }
    }
    Ok(())
}

/// The directory of `node`'s metadata log: the volume marked for it, else the first log
/// directory (where Kafka keeps it without `metadata.log.dir`); `None` without volumes.
pub fn metadata_dir(node: &Node) -> Option<String> {
    let (dirs, marked) = log_dirs(node).ok()?;
    marked.or_else(|| dirs.into_iter().next())
}

/// The directories `kafka-storage format` writes a `meta.properties` into: every log
/// directory (the metadata volume is one of them); empty without volumes.
pub fn formatted_dirs(node: &Node) -> Vec<String> {
    log_dirs(node).map(|(dirs, _)| dirs).unwrap_or_default()
}

/// The node's log directories in volume order, and the KRaft metadata directory if a volume is
/// marked for it (otherwise Kafka keeps the metadata log in the first log directory).
fn log_dirs(node: &Node) -> Result<(Vec<String>, Option<String>), ConfigError> {
    if node.volumes.is_empty() {
        return Err(ConfigError::NoVolumes {
            node: node.id,
            pool: node.pool.clone(),
        });
    }
    let marked: Vec<_> = node.volumes.iter().filter(|v| v.kraft_metadata).collect();
    if marked.len() > 1 {
        return Err(ConfigError::SeveralMetadataVolumes {
            node: node.id,
            pool: node.pool.clone(),
            count: marked.len(),
        });
    }
    let mut dirs = Vec::with_capacity(node.volumes.len());
    for volume in &node.volumes {
        let dir = node.log_dir(volume);
        if dirs.contains(&dir) {
            return Err(ConfigError::DuplicateVolume {
                node: node.id,
                pool: node.pool.clone(),
                dir,
            });
        }
        dirs.push(dir);
    }
    Ok((dirs, marked.first().map(|v| node.log_dir(v))))
}

/// The classes of Strimzi's metrics reporter (`io.strimzi:metrics-reporter`, the one Strimzi
/// ran with Kafka 4.0 and 4.1) for Kafka's metrics and for Yammer's.
pub const KAFKA_METRICS_REPORTER: &str = "io.strimzi.kafka.metrics.KafkaPrometheusMetricsReporter";
pub const YAMMER_METRICS_REPORTER: &str =
    "io.strimzi.kafka.metrics.YammerPrometheusMetricsReporter";

/// Strimzi's metrics reporter in `options`: its classes after the user's reporters, its HTTP
/// listener on [`METRICS_PORT`] and its allow list.
fn add_metrics_reporter(options: &mut BTreeMap<String, String>, reporter: &MetricsReporter) {
    for (key, class) in [
        ("metric.reporters", KAFKA_METRICS_REPORTER),
        ("kafka.metrics.reporters", YAMMER_METRICS_REPORTER),
    ] {
        let mut classes: Vec<&str> = options
            .get(key)
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        if !classes.contains(&class) {
            classes.push(class);
        }
        let joined = classes.join(",");
        options.insert(key.to_owned(), joined);
    }
    let listener = format!("http://:{METRICS_PORT}");
    for (key, value) in [
        (
            "prometheus.metrics.reporter.listener.enable",
            "true".to_owned(),
        ),
        ("prometheus.metrics.reporter.listener", listener),
        (
            "prometheus.metrics.reporter.allowlist",
            reporter.allow_list.join(","),
        ),
    ] {
        options.insert(key.to_owned(), value);
    }
}
