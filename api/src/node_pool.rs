//! The `KafkaNodePool` kind (`kafka.strimzi.io`): a group of Kafka nodes with the same roles,
//! storage and resources, belonging to the `Kafka` named by its `strimzi.io/cluster` label.
//!
//! Modelled: replicas, roles, storage, resources, JVM options and the status kstretch writes
//! (node IDs, roles, scale subresource fields). `template` is kept opaque. The Kubernetes cluster
//! a pool runs in is the `strimzi.io/stretch-cluster-alias` annotation (see [`crate::names`]).

use k8s_openapi::api::core::v1::ResourceRequirements;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{JvmOptions, OpaqueObject};
use crate::condition::Condition;
use crate::schema::{keep_unknown_fields, opaque_object, resource_requirements};
use crate::storage::Storage;

/// Desired state of a node pool.
// kube's repeated `printcolumn(type_ = ...)` items look like duplicated attributes to clippy.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "kafka.strimzi.io",
    version = "v1",
    kind = "KafkaNodePool",
    plural = "kafkanodepools",
    singular = "kafkanodepool",
    shortname = "knp",
    category = "strimzi",
    namespaced,
    status = "KafkaNodePoolStatus",
    derive = "PartialEq",
    doc = "A pool of Kafka nodes with the same roles, storage and resources.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.labelSelector"
    ),
    printcolumn(
        name = "Desired replicas",
        type_ = "integer",
        json_path = ".spec.replicas",
        description = "How many nodes the pool should have"
    ),
    printcolumn(
        name = "Roles",
        type_ = "string",
        json_path = ".status.roles",
        description = "KRaft roles of the nodes in the pool"
    ),
    printcolumn(
        name = "NodeIds",
        type_ = "string",
        json_path = ".status.nodeIds",
        description = "Kafka node IDs assigned to the pool"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct KafkaNodePoolSpec {
    /// Number of nodes in the pool.
    #[schemars(range(min = 0))]
    pub replicas: i32,
    /// KRaft roles of the nodes: `controller`, `broker` or both.
    pub roles: Vec<ProcessRole>,
    /// Storage of each node.
    pub storage: Storage,
    /// CPU and memory of each node; `Kafka.spec.kafka.resources` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "resource_requirements")]
    pub resources: Option<ResourceRequirements>,
    /// JVM options; `Kafka.spec.kafka.jvmOptions` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jvm_options: Option<JvmOptions>,
    /// Customisation of the generated pods, services and claims. Each part (`pod`,
    /// `kafkaContainer`, ...) the pool does not set is `Kafka.spec.kafka.template`'s, as Strimzi
    /// takes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object")]
    pub template: Option<OpaqueObject>,
    /// What Strimzi's schema has here and kstretch does not model (fields of later Strimzi versions): kept as
    /// written, and named in a `NotActedOn` warning.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unmodelled: OpaqueObject,
}

/// A KRaft process role.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ProcessRole {
    /// Member of the KRaft controller quorum.
    Controller,
    /// Hosts partitions and serves clients.
    Broker,
}

impl ProcessRole {
    /// The role as Kafka's `process.roles` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ProcessRole::Controller => "controller",
            ProcessRole::Broker => "broker",
        }
    }
}

/// Observed state of a node pool.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct KafkaNodePoolStatus {
    /// Status conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Node IDs assigned to the pool's nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_ids: Vec<i32>,
    /// ID of the Kafka cluster the pool belongs to (guards against moving a pool to another
    /// cluster by relabelling it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
    /// The Kubernetes cluster (stretch alias) the pool's nodes run in, recorded when they are
    /// created: a changed `strimzi.io/stretch-cluster-alias` is then told apart from where the
    /// nodes and their data are (kstretch's addition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_alias: Option<String>,
    /// While the pool moves to another Kubernetes cluster (its alias annotation was changed):
    /// the nodes still running where it was, listed in `nodeIds` too. Each stops once its
    /// partitions have moved and it has left the controller quorum (kstretch's addition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leaving: Option<LeavingNodes>,
    /// KRaft roles the nodes currently have.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<ProcessRole>,
    /// Current number of nodes (scale subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Label selector of the pool's pods (scale subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
}

/// Nodes of a pool that still run in the Kubernetes cluster the pool is moving away from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeavingNodes {
    /// The stretch alias of the cluster they run in.
    pub cluster_alias: String,
    pub node_ids: Vec<i32>,
    /// When this move (or its undo, which is a move of its own) started. The operations
    /// central creates for the move carry it (annotation `kstretch.io/move-started-at`), so an
    /// operation of an earlier move is told apart from this one's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
}
