//! The input of KRaft configuration generation: one Kafka cluster with its listeners, user
//! configuration, addressing mode and every node of every pool, already resolved by central
//! from the `Kafka` and `KafkaNodePool` resources.

use std::collections::{BTreeMap, BTreeSet};

use crate::node_ids::Role;

/// Port of the operator-owned KRaft controller listener (as in Strimzi).
pub const CONTROLPLANE_PORT: u16 = 9090;
/// Port of the operator-owned inter-broker listener (as in Strimzi).
pub const REPLICATION_PORT: u16 = 9091;
/// Name of the controller listener in the Kafka configuration.
pub const CONTROLPLANE_LISTENER: &str = "CONTROLPLANE-9090";
/// Name of the inter-broker listener in the Kafka configuration; central's admin client uses it
/// too.
pub const REPLICATION_LISTENER: &str = "REPLICATION-9091";

/// One Kafka cluster, as central resolved it from the `Kafka` and its `KafkaNodePool`s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaCluster {
    /// The `Kafka` resource's name.
    pub name: String,
    pub namespace: String,
    /// The KRaft cluster ID every node's storage is formatted with (not part of the node
    /// configuration: Kafka keeps it in `meta.properties`).
    pub cluster_id: String,
    /// `Kafka.spec.kafka.listeners`.
    pub listeners: Vec<Listener>,
    /// `Kafka.spec.kafka.config`, values already rendered as strings.
    pub config: BTreeMap<String, String>,
    pub addressing: Addressing,
    /// Every node of every pool.
    pub nodes: Vec<Node>,
    /// `Kafka.spec.kafka.authorization`, with kstretch's own principals among the super users;
    /// `None`: every client may do everything.
    pub authorization: Option<Authorization>,
    /// How the nodes find the controller quorum.
    pub quorum: QuorumMode,
    /// `metricsConfig` of type `strimziMetricsReporter`: the metrics every node serves.
    pub metrics_reporter: Option<MetricsReporter>,
}

/// Strimzi's metrics reporter in every node: Kafka's and Yammer's metrics served for Prometheus
/// on [`METRICS_PORT`], those matching the allow list only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsReporter {
    /// Regular expressions of the metric names served.
    pub allow_list: Vec<String>,
}

/// The port nodes serve metrics on (Strimzi's, `tcp-prometheus`).
pub const METRICS_PORT: u16 = 9404;

impl KafkaCluster {
    /// The node with ID `id`, if any.
    pub fn node(&self, id: i32) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// Nodes with the controller role, sorted by ID.
    pub fn controllers(&self) -> Vec<&Node> {
        let mut nodes: Vec<&Node> = self.nodes.iter().filter(|n| n.is_controller()).collect();
        nodes.sort_by_key(|n| n.id);
        nodes
    }

    /// Whether a listener authenticates clients by certificates of the clients CA, which the
    /// nodes must then trust.
    pub fn needs_clients_ca(&self) -> bool {
        self.listeners
            .iter()
            .any(|l| l.authentication == Authentication::Tls)
    }

    /// Nodes with the broker role, sorted by ID.
    pub fn brokers(&self) -> Vec<&Node> {
        let mut nodes: Vec<&Node> = self.nodes.iter().filter(|n| n.is_broker()).collect();
        nodes.sort_by_key(|n| n.id);
        nodes
    }
}

/// One user listener of `Kafka.spec.kafka.listeners`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// The listener's name in the resource (`^[a-z0-9]{1,11}$`).
    pub name: String,
    pub port: u16,
    pub kind: ListenerKind,
    pub tls: bool,
    pub authentication: Authentication,
    /// `configuration.brokerCertChainAndKey`: every broker presents the user's certificate on
    /// this listener (its files named by [`super::tls::listener_cert_files`]) instead of its own.
    pub custom_certificate: bool,
    /// An external (`nodeport`, `loadbalancer`) listener's address on each broker, by node ID:
    /// central fills it once the broker's own Service has its node port or load balancer
    /// address. A broker missing has no configuration yet.
    pub advertised: BTreeMap<i32, Advertised>,
}

/// Where a broker advertises an external listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advertised {
    pub host: AdvertisedHost,
    pub port: u16,
    /// Further names a TLS certificate of the listener carries: the load balancer addresses
    /// clients reach the broker at (its own and its cluster's bootstrap).
    pub names: BTreeSet<String>,
}

/// The host a broker advertises an external listener at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdvertisedHost {
    /// `advertisedHost`, as the user gave it.
    Fixed(String),
    /// The address of the Kubernetes node the pod runs on, which it finds at start (a pod can
    /// be scheduled anywhere) and writes to [`NODE_ADDRESS_DIR`]`/<listener>`, where Kafka
    /// reads it through the [`NODE_ADDRESS_PROVIDER`] config provider. `candidates`: the
    /// address it finds on each node of its cluster, which a TLS listener's certificate names.
    NodeAddress { candidates: BTreeSet<String> },
}

/// Where a broker's start script writes the node address of each `nodeport` listener (one
/// file per Kafka listener name).
pub const NODE_ADDRESS_DIR: &str = "/opt/kafka/init";
/// The config provider that reads [`NODE_ADDRESS_DIR`].
pub const NODE_ADDRESS_PROVIDER: &str = "kstretchnode";

impl Advertised {
    /// The host as Kafka's configuration names it.
    pub fn config_host(&self, listener: &str) -> String {
        match &self.host {
            AdvertisedHost::Fixed(host) => host.clone(),
            AdvertisedHost::NodeAddress { .. } => {
                format!("${{{NODE_ADDRESS_PROVIDER}:{NODE_ADDRESS_DIR}:{listener}}}")
            }
        }
    }
}

/// How a listener authenticates its clients (Strimzi's `authentication`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Authentication {
    /// Anyone who reaches the port (principal `ANONYMOUS`, or the certificate's subject when a
    /// client sends one).
    #[default]
    None,
    /// Mutual TLS: a client certificate issued by the clients CA; the principal is its subject
    /// (`CN=<user>`).
    Tls,
    /// SASL SCRAM-SHA-512 with credentials stored in the KRaft metadata.
    ScramSha512,
    /// Strimzi's `custom`: SASL or not, and the listener's own options (`listenerConfig`), each
    /// set as `listener.name.<listener>.<option>`.
    Custom {
        sasl: bool,
        config: BTreeMap<String, String>,
    },
}

/// Who may do what: the authorizer every node runs and the principals it never checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    /// `authorizer.class.name`; [`STANDARD_AUTHORIZER`] for Strimzi's `simple`.
    pub authorizer_class: String,
    /// Principals (`User:...`) allowed everything: the nodes, kstretch, the user's.
    pub super_users: Vec<String>,
}

/// KRaft's ACL authorizer, which Strimzi's `simple` authorization means.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

impl Listener {
    /// Whether each broker advertises the listener at an address of its own, found outside
    /// Kafka ([`Listener::advertised`]).
    pub fn advertised_per_broker(&self) -> bool {
        matches!(
            self.kind,
            ListenerKind::NodePort
                | ListenerKind::LoadBalancer
                | ListenerKind::Route
                | ListenerKind::Ingress
        )
    }

    /// The name Kafka knows the listener by: `<NAME-UPPERCASE>-<port>`, as Strimzi names it
    /// (so per-listener options such as `listener.name.plain-9092.max.connections` carry over).
    pub fn config_name(&self) -> String {
        format!("{}-{}", self.name.to_uppercase(), self.port)
    }
}

/// `type` of a listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ListenerKind {
    Internal,
    ClusterIp,
    NodePort,
    LoadBalancer,
    Route,
    Ingress,
}

/// One Kafka node (one pod).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub id: i32,
    /// The `KafkaNodePool`'s name.
    pub pool: String,
    pub roles: BTreeSet<Role>,
    /// The Kubernetes cluster the node runs in (`strimzi.io/stretch-cluster-alias`, or the
    /// name of central's own cluster); used by the multi-cluster addressing modes.
    pub cluster_alias: String,
    pub volumes: Vec<Volume>,
}

impl Node {
    pub fn is_broker(&self) -> bool {
        self.roles.contains(&Role::Broker)
    }

    pub fn is_controller(&self) -> bool {
        self.roles.contains(&Role::Controller)
    }

    /// `process.roles` of the node.
    pub fn process_roles(&self) -> &'static str {
        match (self.is_broker(), self.is_controller()) {
            (true, true) => "broker,controller",
            (false, true) => "controller",
            _ => "broker",
        }
    }

    /// The Kafka log directory on `volume`: the volume's mount path plus `kafka-log<id>`, as in
    /// Strimzi, so that a volume moved between node IDs is never mistaken for another node's.
    pub fn log_dir(&self, volume: &Volume) -> String {
        format!("{}/kafka-log{}", volume.mount_path(), self.id)
    }
}

/// One data volume of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Volume {
    /// The JBOD volume ID; `None` for a single ephemeral or persistent-claim volume.
    pub id: Option<i32>,
    /// `kraftMetadata: shared`: the KRaft metadata log lives on this volume.
    pub kraft_metadata: bool,
}

impl Volume {
    /// Where the volume is mounted in the Kafka container (Strimzi's paths).
    pub fn mount_path(&self) -> String {
        match self.id {
            Some(id) => format!("/var/lib/kafka/data-{id}"),
            None => "/var/lib/kafka/data".to_owned(),
        }
    }
}

/// The default KEP-1645 cluster-set domain.
pub const DEFAULT_CLUSTERSET_DOMAIN: &str = "clusterset.local";

/// How nodes find each other, and clients find nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Addressing {
    /// Every pool runs in one Kubernetes cluster: the pod's DNS name under the headless
    /// service, `<pod>.<kafka>-kafka-brokers.<ns>.svc` (Strimzi's naming).
    ClusterDns,
    /// KEP-1645 Multi-Cluster Services: the headless service is exported from every member
    /// cluster and each pod is `<pod>.<cluster-alias>.<kafka>-kafka-brokers.<ns>.svc.<domain>`.
    MultiClusterServices { domain: String },
    /// Each node is exposed by its own LoadBalancer or NodePort service, whose address is known
    /// only once the service exists; central fills the map from what agents report. A node
    /// missing from it has no configuration yet (never a guessed address).
    PerNodeService {
        addresses: BTreeMap<i32, NodeAddress>,
    },
}

impl Addressing {
    /// Multi-Cluster Services with the default `clusterset.local` domain.
    pub fn multi_cluster_services() -> Addressing {
        Addressing::MultiClusterServices {
            domain: DEFAULT_CLUSTERSET_DOMAIN.to_owned(),
        }
    }
}

/// Where a node's per-node service is reachable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeAddress {
    /// Host name or IP address (a LoadBalancer's ingress, or a Kubernetes node's address for a
    /// NodePort service).
    pub host: String,
    /// The externally reachable port of each listener, by Kafka listener name
    /// (`CONTROLPLANE-9090`, `REPLICATION-9091`, `PLAIN-9092`...): NodePort ports differ from
    /// container ports.
    pub ports: BTreeMap<String, u16>,
}

/// How the controllers' voter set is kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum QuorumMode {
    /// The voters are every node's `controller.quorum.voters`; they change only when every
    /// node restarts with a new list. What kstretch created before KIP-853 support.
    #[default]
    Static,
    /// The voters are records of the metadata log, changed one at a time with
    /// AddRaftVoter/RemoveRaftVoter; nodes find the quorum through
    /// `controller.quorum.bootstrap.servers`.
    Dynamic,
}
