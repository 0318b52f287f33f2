//! The `KafkaTopic` kind (`kafka.strimzi.io`): a Kafka topic managed from Kubernetes, belonging
//! to the `Kafka` named by its `strimzi.io/cluster` label.
//!
//! Fully modelled (as in Strimzi 1.x); `spec` still keeps unknown fields so that manifests with
//! fields from other Strimzi versions apply.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::ConfigValues;
use crate::condition::Condition;
use crate::schema::{keep_unknown_fields, opaque_object};

/// Desired state of a topic.
// kube's repeated `printcolumn(type_ = ...)` items look like duplicated attributes to clippy.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kafka.strimzi.io",
    version = "v1",
    kind = "KafkaTopic",
    plural = "kafkatopics",
    singular = "kafkatopic",
    shortname = "kt",
    category = "strimzi",
    namespaced,
    status = "KafkaTopicStatus",
    derive = "PartialEq",
    doc = "A Kafka topic, kept in sync with the Kafka cluster named by its strimzi.io/cluster label.",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels.strimzi\\.io/cluster",
        description = "The Kafka cluster the topic belongs to"
    ),
    printcolumn(
        name = "Partitions",
        type_ = "integer",
        json_path = ".spec.partitions",
        description = "Desired number of partitions"
    ),
    printcolumn(
        name = "Replication factor",
        type_ = "integer",
        json_path = ".spec.replicas",
        description = "Desired number of replicas of each partition"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status",
        description = "Whether the topic is reconciled"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct KafkaTopicSpec {
    /// Topic name in Kafka; `metadata.name` when absent (needed for names Kubernetes does not
    /// allow, such as upper case or underscores). Cannot be changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_name: Option<String>,
    /// Number of partitions; the broker's `num.partitions` when absent. Can only grow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub partitions: Option<i32>,
    /// Replication factor; the broker's `default.replication.factor` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 32767))]
    pub replicas: Option<i32>,
    /// Topic configuration (for example `retention.ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object")]
    pub config: Option<ConfigValues>,
    /// `false` stops managing the topic: the operator leaves it alone, and deleting the
    /// KafkaTopic then leaves the topic in Kafka. Strimzi's `strimzi.io/managed: "false"`
    /// annotation does the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed: Option<bool>,
}

/// Observed state of a topic.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct KafkaTopicStatus {
    /// Status conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The topic's name in Kafka.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_name: Option<String>,
    /// The topic's ID in Kafka.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_id: Option<String>,
    /// ID of the Kafka cluster the topic was reconciled with: a resource carrying another
    /// cluster's ID is left alone (another operator instance manages it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
    /// A change of the replication factor in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas_change: Option<ReplicasChangeStatus>,
}

/// Progress of a replication factor change.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct ReplicasChangeStatus {
    /// The replication factor being reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_replicas: Option<i32>,
    /// Whether the change is waiting to start or running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ReplicasChangeState>,
    /// Details, for example why the change failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// ID of the reassignment session carrying the change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// State of a replication factor change.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReplicasChangeState {
    /// Requested, not started yet.
    Pending,
    /// Reassignment running.
    Ongoing,
}

impl KafkaTopic {
    /// Whether the operator manages the topic: neither `spec.managed: false` nor the
    /// `strimzi.io/managed: "false"` annotation.
    pub fn is_managed(&self) -> bool {
        self.spec.managed != Some(false)
            && self
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(crate::names::MANAGED))
                .is_none_or(|v| v != "false")
    }

    /// The topic's name in Kafka: `spec.topicName`, or `metadata.name` when absent.
    pub fn kafka_topic_name(&self) -> Option<&str> {
        self.spec
            .topic_name
            .as_deref()
            .or(self.metadata.name.as_deref())
    }
}
