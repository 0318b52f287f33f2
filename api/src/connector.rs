//! The `KafkaConnector` kind (`kafka.strimzi.io`): a connector running in the Kafka Connect
//! cluster named by its `strimzi.io/cluster` label.
//!
//! Fully modelled, including the v1beta2-only `pause` flag and the offsets operations
//! (`listOffsets`, `alterOffsets`, triggered by the `strimzi.io/connector-offsets` annotation).
//! `status.connectorStatus` is the Connect REST API's answer, kept opaque.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{ConfigValues, OpaqueObject};
use crate::condition::Condition;
use crate::schema::{keep_unknown_fields, opaque_object};

/// Desired state of a connector.
// kube's repeated `printcolumn(type_ = ...)` items look like duplicated attributes to clippy.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kafka.strimzi.io",
    version = "v1",
    kind = "KafkaConnector",
    plural = "kafkaconnectors",
    singular = "kafkaconnector",
    shortname = "kctr",
    category = "strimzi",
    namespaced,
    status = "KafkaConnectorStatus",
    derive = "PartialEq",
    doc = "A Kafka Connect connector, run in the KafkaConnect cluster named by its strimzi.io/cluster label.",
    scale(
        spec_replicas_path = ".spec.tasksMax",
        status_replicas_path = ".status.tasksMax"
    ),
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels.strimzi\\.io/cluster",
        description = "The Kafka Connect cluster the connector runs in"
    ),
    printcolumn(
        name = "Connector class",
        type_ = "string",
        json_path = ".spec.class",
        description = "The connector's class"
    ),
    printcolumn(
        name = "Max Tasks",
        type_ = "integer",
        json_path = ".spec.tasksMax",
        description = "Maximum number of tasks"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status",
        description = "Whether the connector is reconciled"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct KafkaConnectorSpec {
    /// Connector class, for example `org.apache.kafka.connect.file.FileStreamSourceConnector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// Maximum number of tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub tasks_max: Option<i32>,
    /// Automatic restart of failed connectors and tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_restart: Option<AutoRestart>,
    /// Version of the connector plugin to use, when several are installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Connector configuration (`connector.class`, `tasks.max` and `name` are set by the
    /// operator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object")]
    pub config: Option<ConfigValues>,
    /// Desired state; `running` when absent. Offsets can only be altered or reset when
    /// `stopped`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ConnectorState>,
    /// Deprecated (v1beta2): `true` pauses the connector; `state` takes precedence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause: Option<bool>,
    /// Where the `list` offsets operation writes the offsets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_offsets: Option<ListOffsets>,
    /// Where the `alter` offsets operation reads the offsets from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alter_offsets: Option<AlterOffsets>,
}

/// Desired state of a connector.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ConnectorState {
    /// Connector and tasks stopped but configured.
    Paused,
    /// Connector and tasks shut down; offsets can be changed.
    Stopped,
    /// Running.
    Running,
}

impl KafkaConnectorSpec {
    /// The state to reach: `state`, else `paused` when the legacy `pause` flag is set, else
    /// `running`.
    pub fn effective_state(&self) -> ConnectorState {
        match (self.state, self.pause) {
            (Some(state), _) => state,
            (None, Some(true)) => ConnectorState::Paused,
            (None, _) => ConnectorState::Running,
        }
    }
}

/// Automatic restart settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct AutoRestart {
    /// Whether failed connectors and tasks are restarted automatically.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Restarts attempted before giving up; unlimited when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_restarts: Option<i32>,
}

/// Target of the `list` offsets operation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct ListOffsets {
    /// ConfigMap (in the connector's namespace) that receives `offsets.json`.
    pub to_config_map: ConfigMapReference,
}

/// Source of the `alter` offsets operation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct AlterOffsets {
    /// ConfigMap (in the connector's namespace) whose `offsets.json` holds the new offsets.
    pub from_config_map: ConfigMapReference,
}

/// Reference to a ConfigMap in the same namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct ConfigMapReference {
    /// ConfigMap name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Observed state of a connector.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct KafkaConnectorStatus {
    /// Status conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Automatic restart bookkeeping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_restart: Option<AutoRestartStatus>,
    /// The connector's status as reported by the Kafka Connect REST API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object")]
    pub connector_status: Option<OpaqueObject>,
    /// Maximum number of tasks (scale subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks_max: Option<i32>,
    /// Topics the connector uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topics: Vec<String>,
}

/// Automatic restart bookkeeping.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct AutoRestartStatus {
    /// Restarts done so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i32>,
    /// Name of the connector being restarted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connector_name: Option<String>,
    /// When the last restart happened (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_restart_timestamp: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_wins_over_legacy_pause() {
        let mut spec = KafkaConnectorSpec::default();
        assert_eq!(spec.effective_state(), ConnectorState::Running);
        spec.pause = Some(true);
        assert_eq!(spec.effective_state(), ConnectorState::Paused);
        spec.state = Some(ConnectorState::Stopped);
        assert_eq!(spec.effective_state(), ConnectorState::Stopped);
        spec.pause = Some(false);
        spec.state = None;
        assert_eq!(spec.effective_state(), ConnectorState::Running);
    }
}
