//! The `Kafka` kind (`kafka.strimzi.io`): cluster-wide settings of a KRaft Kafka cluster whose
//! nodes are defined by `KafkaNodePool` resources.
//!
//! Modelled: what kstretch acts on (versions, listeners, config, authorization, rack, JVM options,
//! metrics, logging, the legacy v1beta2 `replicas`/`resources` used as node-pool fallbacks) and
//! the status it writes. Everything else Strimzi accepts (probes, quotas, tiered storage,
//! `kafkaExporter`, ZooKeeper leftovers of v1beta2 manifests, ...) is kept as written, in the
//! `unmodelled` maps when not modelled, and central names what it does not act on in a
//! `NotActedOn` warning.

use k8s_openapi::api::core::v1::ResourceRequirements;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{ConfigValues, JvmOptions, OpaqueObject};
use crate::condition::Condition;
use crate::schema::{keep_unknown_fields, opaque_object, resource_requirements};
use crate::storage::Storage;

/// Desired state of a Kafka cluster.
// kube's repeated `printcolumn(type_ = ...)` items look like duplicated attributes to clippy.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kafka.strimzi.io",
    version = "v1",
    kind = "Kafka",
    plural = "kafkas",
    singular = "kafka",
    shortname = "k",
    category = "strimzi",
    namespaced,
    status = "KafkaStatus",
    derive = "PartialEq",
    doc = "A Kafka cluster (KRaft); its nodes come from the KafkaNodePool resources labelled with its name.",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status",
        description = "Whether the cluster is reconciled and ready"
    ),
    printcolumn(
        name = "Warnings",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Warning\")].status",
        description = "Whether there are warnings about the cluster"
    ),
    printcolumn(
        name = "Kafka version",
        type_ = "string",
        json_path = ".status.kafkaVersion",
        description = "The Kafka version the cluster runs"
    ),
    printcolumn(
        name = "Metadata version",
        type_ = "string",
        json_path = ".status.kafkaMetadataVersion",
        description = "The KRaft metadata version in use"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct KafkaSpec {
    /// Settings of the Kafka nodes common to every pool.
    pub kafka: KafkaClusterSpec,
    /// The entity operator (topic and user operators).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity_operator: Option<EntityOperatorSpec>,
    /// Cruise Control settings; accepted and kept, not acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object")]
    pub cruise_control: Option<OpaqueObject>,
    /// Kafka Exporter: consumer lag and partition offsets served for Prometheus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka_exporter: Option<KafkaExporterSpec>,
    /// Settings of the cluster certificate authority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object")]
    pub cluster_ca: Option<OpaqueObject>,
    /// Settings of the clients certificate authority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object")]
    pub clients_ca: Option<OpaqueObject>,
    /// Cron expressions of the time windows in which disruptive maintenance may happen.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub maintenance_time_windows: Vec<String>,
    /// What Strimzi's schema has here and kstretch does not model (`zookeeper` of v1beta2 manifests, ...): kept as
    /// written, and named in a `NotActedOn` warning.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unmodelled: OpaqueObject,
}

/// `spec.kafka`: settings shared by all the Kafka nodes of the cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct KafkaClusterSpec {
    /// Kafka version to run, for example `4.1.0`; the operator's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// KRaft metadata version, for example `4.1-IV1`; the default of `version` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_version: Option<String>,
    /// Container image overriding the one the operator picks for `version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Legacy (v1beta2, before node pools): number of nodes. Only used to report that node pools
    /// are required; pools define their own `replicas`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// How clients reach the cluster.
    pub listeners: Vec<GenericKafkaListener>,
    /// Kafka broker configuration (`server.properties` entries). Options the operator manages
    /// itself (listeners, node IDs, log dirs, ...) are ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object")]
    pub config: Option<ConfigValues>,
    /// Legacy (v1beta2): node storage. Not acted on: every pool sets its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<Storage>,
    /// Authorization of client requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<KafkaAuthorization>,
    /// Rack awareness: which node label or environment variable names a node's rack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rack: Option<Rack>,
    /// JVM options, used for pools that do not set their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jvm_options: Option<JvmOptions>,
    /// Legacy (v1beta2): CPU and memory, used for pools that do not set their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "resource_requirements")]
    pub resources: Option<ResourceRequirements>,
    /// Customisation of the generated Kubernetes resources (pods, services, ...), used for pools
    /// that do not set their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object")]
    pub template: Option<OpaqueObject>,
    /// Metrics served to Prometheus by every node, on port 9404.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_config: Option<crate::common::MetricsConfig>,
    /// The nodes' log4j2 configuration; a change of it is applied without restarting them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logging: Option<crate::common::Logging>,
    /// When and how patiently kstretch's liveness check of each node runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub liveness_probe: Option<crate::common::Probe>,
    /// When and how patiently kstretch's readiness check of each node runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness_probe: Option<crate::common::Probe>,
    /// What Strimzi's schema has here and kstretch does not model (`quotas`, ...): kept as
    /// written, and named in a `NotActedOn` warning.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unmodelled: OpaqueObject,
}

/// One listener: a port, how it is exposed and how clients authenticate on it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct GenericKafkaListener {
    /// Listener name, unique in the cluster: lower-case letters and digits, at most 11.
    #[schemars(pattern(r"^[a-z0-9]{1,11}$"))]
    pub name: String,
    /// Port inside the cluster; 9092 and above (some lower ports are reserved by the operator).
    #[schemars(range(min = 9092))]
    pub port: i32,
    /// How the listener is exposed.
    #[serde(rename = "type")]
    pub type_: KafkaListenerType,
    /// Whether the listener uses TLS encryption.
    pub tls: bool,
    /// Client authentication on this listener (`type` tls, scram-sha-512, custom, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object")]
    pub authentication: Option<OpaqueObject>,
    /// Type-specific settings (advertised hosts, certificates, load balancer options, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object")]
    pub configuration: Option<OpaqueObject>,
    /// What Strimzi's schema has here and kstretch does not model (`networkPolicyPeers`): kept as
    /// written, and named in a `NotActedOn` warning.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unmodelled: OpaqueObject,
}

/// How a listener is exposed.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum KafkaListenerType {
    /// Only inside the Kubernetes cluster, through headless services.
    #[serde(rename = "internal")]
    Internal,
    /// OpenShift routes.
    #[serde(rename = "route")]
    Route,
    /// Gateway API TLSRoutes.
    #[serde(rename = "tlsroute")]
    TlsRoute,
    /// Services of type LoadBalancer.
    #[serde(rename = "loadbalancer")]
    LoadBalancer,
    /// Services of type NodePort.
    #[serde(rename = "nodeport")]
    NodePort,
    /// Ingress resources (TLS passthrough).
    #[serde(rename = "ingress")]
    Ingress,
    /// Per-node ClusterIP services.
    #[serde(rename = "cluster-ip")]
    ClusterIp,
}

/// Authorization of client requests.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct KafkaAuthorization {
    /// Which authorizer: `simple` is Kafka's built-in ACL authorizer.
    #[serde(rename = "type")]
    pub type_: AuthorizationType,
    /// Users that bypass ACLs: `CN=...` for a certificate, or a SCRAM user name (`User:` is
    /// added, as Strimzi does).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub super_users: Vec<String>,
    /// Authorizer class, for `custom`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorizer_class: Option<String>,
    /// Whether a `custom` authorizer supports the Kafka Admin API for ACLs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supports_admin_api: Option<bool>,
}

/// Which authorizer a cluster uses.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum AuthorizationType {
    /// Kafka's built-in ACL authorizer.
    #[serde(rename = "simple")]
    Simple,
    /// A user-provided authorizer class.
    #[serde(rename = "custom")]
    Custom,
    /// Open Policy Agent (v1beta2 only; not supported by kstretch).
    #[serde(rename = "opa")]
    Opa,
    /// Keycloak authorization services (v1beta2 only; not supported by kstretch).
    #[serde(rename = "keycloak")]
    Keycloak,
}

/// Rack awareness settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct Rack {
    /// How the rack is found; `topology-label` when absent.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<RackType>,
    /// Node label whose value is the rack (for example `topology.kubernetes.io/zone`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_key: Option<String>,
    /// Environment variable holding the rack, for `environment-variable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_var_name: Option<String>,
}

/// Where a node's rack comes from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum RackType {
    /// A label of the Kubernetes node the pod runs on.
    #[serde(rename = "topology-label")]
    TopologyLabel,
    /// An environment variable of the Kafka container.
    #[serde(rename = "environment-variable")]
    EnvironmentVariable,
}

/// The entity operator: Strimzi's topic and user operators. kstretch's run inside central and
/// reconcile every `KafkaTopic` and `KafkaUser` whether this is set or not; the settings inside
/// are kept so that manifests apply unchanged, and named as not acted on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct EntityOperatorSpec {
    /// Topic operator settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object")]
    pub topic_operator: Option<OpaqueObject>,
    /// User operator settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object")]
    pub user_operator: Option<OpaqueObject>,
    /// What Strimzi's schema has here and kstretch does not model (`template`, `tlsSidecar`): kept as
    /// written, and named in a `NotActedOn` warning.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unmodelled: OpaqueObject,
}

/// `spec.kafkaExporter`: Kafka Exporter, deployed in one member cluster, serving consumer lag
/// and partition offsets on port 9404 (`tcp-prometheus`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct KafkaExporterSpec {
    /// Topics shown: a regular expression matching anywhere in the name (default `.*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_regex: Option<String>,
    /// Topics not shown, though `topicRegex` matches them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_exclude_regex: Option<String>,
    /// Consumer groups shown: a regular expression matching anywhere in the group ID (default
    /// `.*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_regex: Option<String>,
    /// Consumer groups not shown, though `groupRegex` matches them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_exclude_regex: Option<String>,
    /// Offsets and lag of every partition of the topics a group consumes (default); `false`:
    /// only of the partitions assigned to its members now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub show_all_offsets: Option<bool>,
    /// The exporter's log level (`info` by default; `debug`, `trace`, `warn`, `error`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logging: Option<String>,
    /// CPU and memory of the exporter's container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "resource_requirements")]
    pub resources: Option<ResourceRequirements>,
    /// When and how patiently kstretch's liveness check of each exporter runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub liveness_probe: Option<crate::common::Probe>,
    /// When and how patiently kstretch's readiness check of each exporter runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness_probe: Option<crate::common::Probe>,
    /// What Strimzi's schema has here and kstretch does not model (`image`,
    /// `enableSaramaLogging`, `template`): kept as written, and named in a `NotActedOn` warning.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unmodelled: OpaqueObject,
}

/// Observed state of a Kafka cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct KafkaStatus {
    /// Status conditions (`Ready`, `NotReady`, `Warning`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Addresses of the listeners.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listeners: Vec<ListenerStatus>,
    /// The node pools that make up the cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kafka_node_pools: Vec<UsedNodePoolStatus>,
    /// Internal: IDs of every node registered in the cluster, kept until removed nodes are
    /// unregistered from KRaft (see the node unregistration proposal).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registered_node_ids: Vec<i32>,
    /// Kafka cluster ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
    /// Version of the operator that last reconciled the cluster successfully.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_last_successful_version: Option<String>,
    /// Kafka version the cluster runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka_version: Option<String>,
    /// KRaft metadata version in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka_metadata_version: Option<String>,
    /// The KRaft controller quorum, as Kafka last reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quorum: Option<QuorumStatus>,
}

/// The KRaft controller quorum.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct QuorumStatus {
    /// `static`: the voters are every node's `controller.quorum.voters` (`kraft.version` 0);
    /// `dynamic`: they are kept in the metadata log and changed one at a time (KIP-853,
    /// `kraft.version` 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Node ID of the active controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_id: Option<i32>,
    /// The voters, by node ID.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub voters: Vec<QuorumVoterStatus>,
    /// Why the quorum is not whole, while it is not: a voter change is due or under way, or
    /// a voter does not fetch (its controller is down or restarting). Meanwhile the Kafka's
    /// disruption budgets allow no eviction in any member cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsettled: Option<String>,
}

/// One voter of the controller quorum.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct QuorumVoterStatus {
    /// Node ID.
    #[serde(default)]
    pub id: i32,
    /// The ID of its metadata log directory (a dynamic quorum knows each voter by it; a
    /// static one does not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory_id: Option<String>,
}

/// Addresses of one listener.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct ListenerStatus {
    /// Listener name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Bootstrap addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<ListenerAddress>,
    /// Bootstrap addresses as a comma-separated `host:port` list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_servers: Option<String>,
    /// CA certificates (PEM) clients need to trust, for TLS listeners.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub certificates: Vec<String>,
}

/// One `host:port` address.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListenerAddress {
    /// Host name or IP address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

/// A node pool used by the cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsedNodePoolStatus {
    /// Name of the `KafkaNodePool`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Kafka {
    /// The member clusters its `kstretch.io/forgotten-clusters` annotation names, as written
    /// (comma-separated aliases; blanks ignored).
    pub fn forgotten_clusters(&self) -> std::collections::BTreeSet<String> {
        self.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(crate::names::FORGOTTEN_CLUSTERS))
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|a| !a.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod forgotten_tests {
    use super::*;

    #[test]
    fn the_forgotten_clusters_are_read_as_a_list() {
        let mut k = Kafka::new("k", KafkaSpec::default());
        assert!(k.forgotten_clusters().is_empty());
        k.metadata.annotations = Some(
            [(
                crate::names::FORGOTTEN_CLUSTERS.to_owned(),
                "beta, ,gamma".to_owned(),
            )]
            .into(),
        );
        assert_eq!(
            k.forgotten_clusters(),
            ["beta", "gamma"].map(String::from).into()
        );
    }
}
