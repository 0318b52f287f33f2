//! The `KafkaConnect` kind (`kafka.strimzi.io`): a Kafka Connect cluster whose connectors are
//! `KafkaConnector` resources (with the `strimzi.io/use-connector-resources` annotation).
//!
//! Modelled: what kstretch needs to reach and describe the Connect cluster (replicas, version,
//! bootstrap servers, group and topic names, config, resources, JVM options, metrics, logging)
//! and the status. `tls`, `authentication` and `template` are opaque; `build`, `plugins`,
//! probes, tracing and rack are kept as written.

use k8s_openapi::api::core::v1::ResourceRequirements;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{ConfigValues, JvmOptions, OpaqueObject};
use crate::condition::Condition;
use crate::schema::{keep_unknown_fields, opaque_object, resource_requirements};

/// Desired state of a Kafka Connect cluster.
// kube's repeated `printcolumn(type_ = ...)` items look like duplicated attributes to clippy.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kafka.strimzi.io",
    version = "v1",
    kind = "KafkaConnect",
    plural = "kafkaconnects",
    singular = "kafkaconnect",
    shortname = "kc",
    category = "strimzi",
    namespaced,
    status = "KafkaConnectStatus",
    derive = "PartialEq",
    doc = "A Kafka Connect cluster.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.labelSelector"
    ),
    printcolumn(
        name = "Desired replicas",
        type_ = "integer",
        json_path = ".spec.replicas",
        description = "How many Kafka Connect workers the cluster should have"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status",
        description = "Whether the Connect cluster is reconciled and ready"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct KafkaConnectSpec {
    /// Kafka version of the Connect workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Number of workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Container image overriding the one picked for `version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Kafka bootstrap servers (`host:port` list) the workers connect to.
    pub bootstrap_servers: String,
    /// Connect group ID (v1; in v1beta2 it was `config.group.id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    /// Topic storing connector configurations (v1; in v1beta2 `config.config.storage.topic`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_storage_topic: Option<String>,
    /// Topic storing connector and task statuses (v1; in v1beta2 `config.status.storage.topic`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_storage_topic: Option<String>,
    /// Topic storing source connector offsets (v1; in v1beta2 `config.offset.storage.topic`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset_storage_topic: Option<String>,
    /// TLS settings for the connection to Kafka (trusted certificates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object")]
    pub tls: Option<OpaqueObject>,
    /// Authentication to Kafka.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object")]
    pub authentication: Option<OpaqueObject>,
    /// Worker configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object")]
    pub config: Option<ConfigValues>,
    /// CPU and memory of each worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "resource_requirements")]
    pub resources: Option<ResourceRequirements>,
    /// JVM options of the workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jvm_options: Option<JvmOptions>,
    /// Customisation of the generated Kubernetes resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object")]
    pub template: Option<OpaqueObject>,
    /// Metrics served to Prometheus by every worker, on port 9404.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_config: Option<crate::common::MetricsConfig>,
    /// The workers' log4j2 configuration; a change of it is applied without restarting them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logging: Option<crate::common::Logging>,
    /// When and how patiently kstretch's liveness check of each worker runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub liveness_probe: Option<crate::common::Probe>,
    /// When and how patiently kstretch's readiness check of each worker runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness_probe: Option<crate::common::Probe>,
    /// What Strimzi's schema has here and kstretch does not model (`build`, `rack`, ...): kept as
    /// written, and named in a `NotActedOn` warning.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unmodelled: OpaqueObject,
}

impl KafkaConnectSpec {
    /// The Connect group ID: `groupId`, else the v1beta2 `config.group.id`.
    pub fn effective_group_id(&self) -> Option<String> {
        self.group_id
            .clone()
            .or_else(|| self.config_string("group.id"))
    }

    fn config_string(&self, key: &str) -> Option<String> {
        let value = self.config.as_ref()?.get(key)?;
        match value {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Null => None,
            other => Some(other.to_string()),
        }
    }
}

/// Observed state of a Kafka Connect cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct KafkaConnectStatus {
    /// Status conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// URL of the Connect REST API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Connector plugins installed in the workers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connector_plugins: Vec<ConnectorPlugin>,
    /// Current number of workers (scale subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Label selector of the worker pods (scale subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
}

/// A connector plugin available in the workers.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectorPlugin {
    /// Plugin class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// `source` or `sink` (or another type Connect reports).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Plugin version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn group_id_falls_back_to_v1beta2_config() {
        let mut spec: KafkaConnectSpec = serde_json::from_value(json!({
            "bootstrapServers": "b:9092",
            "config": {"group.id": "legacy"}
        }))
        .expect("deserializes");
        assert_eq!(spec.effective_group_id().as_deref(), Some("legacy"));
        spec.group_id = Some("v1".to_owned());
        assert_eq!(spec.effective_group_id().as_deref(), Some("v1"));
    }
}
