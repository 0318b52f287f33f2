//! Types shared by several kinds: JVM options, probes' timing, metrics, free-form configuration
//! maps and opaque objects.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A free-form Kafka / Kafka Connect / topic configuration: keys are property names, values are
/// strings, numbers or booleans exactly as the user wrote them.
pub type ConfigValues = BTreeMap<String, Value>;

/// An object kstretch passes through or ignores without modelling it (for example `template`).
pub type OpaqueObject = serde_json::Map<String, Value>;

/// JVM options of the Kafka or Kafka Connect containers.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JvmOptions {
    /// Maximum heap size (`-Xmx`), for example `2048m` or `2G`.
    #[serde(rename = "-Xmx", default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(r"^[0-9]+[mMgG]?$"))]
    pub xmx: Option<String>,
    /// Initial heap size (`-Xms`), for example `2048m` or `2G`.
    #[serde(rename = "-Xms", default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(r"^[0-9]+[mMgG]?$"))]
    pub xms: Option<String>,
    /// Advanced runtime options passed as `-XX:` flags (`"true"`/`"false"` toggle boolean flags).
    #[serde(rename = "-XX", default, skip_serializing_if = "Option::is_none")]
    pub xx: Option<BTreeMap<String, String>>,
    /// Whether garbage-collection logging is enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gc_logging_enabled: Option<bool>,
    /// Extra Java system properties (`-Dname=value`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub java_system_properties: Vec<SystemProperty>,
}

/// When and how patiently a container is checked (Strimzi's `Probe`): each field set replaces
/// kstretch's own timing of the check; the check itself is kstretch's.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    /// Seconds after the container starts before the first check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub initial_delay_seconds: Option<i32>,
    /// Seconds each check may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub timeout_seconds: Option<i32>,
    /// Seconds between checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub period_seconds: Option<i32>,
    /// Consecutive successes that count after a failure (must be 1 for liveness).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub success_threshold: Option<i32>,
    /// Consecutive failures that count as failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub failure_threshold: Option<i32>,
}

/// One Java system property.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SystemProperty {
    /// Property name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Property value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// `metricsConfig`: how the nodes' metrics are served to Prometheus (port 9404,
/// `tcp-prometheus`, as Strimzi serves them).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricsConfig {
    /// `jmxPrometheusExporter` (the JMX Prometheus exporter with the rules of `valueFrom`) or
    /// `strimziMetricsReporter`.
    #[serde(rename = "type")]
    pub type_: MetricsType,
    /// `jmxPrometheusExporter`: the ConfigMap key holding the exporter's rules (YAML).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<ConfigMapValue>,
    /// `strimziMetricsReporter`: its settings (`allowList`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::opaque_object")]
    pub values: Option<OpaqueObject>,
}

/// The kinds of `metricsConfig`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum MetricsType {
    #[serde(rename = "jmxPrometheusExporter")]
    JmxPrometheusExporter,
    #[serde(rename = "strimziMetricsReporter")]
    StrimziMetricsReporter,
}

/// Where a `metricsConfig`'s rules or an `external` logging configuration are kept.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapValue {
    pub config_map_key_ref: ConfigMapKeyRef,
}

/// `logging`: the log4j2 configuration of the nodes (or workers), as Strimzi takes it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Logging {
    /// `inline` (Strimzi's default configuration with `loggers` on top) or `external` (the
    /// whole configuration from `valueFrom`).
    #[serde(rename = "type")]
    pub type_: LoggingType,
    /// `inline`: log4j2 properties, e.g. `rootLogger.level: DEBUG` or
    /// `logger.<name>.name`/`logger.<name>.level`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub loggers: BTreeMap<String, String>,
    /// `external`: the ConfigMap key holding a log4j2 properties file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<ConfigMapValue>,
}

/// The kinds of `logging`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum LoggingType {
    #[serde(rename = "inline")]
    Inline,
    #[serde(rename = "external")]
    External,
}

/// A key of a ConfigMap in the resource's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapKeyRef {
    pub name: String,
    pub key: String,
    /// Kubernetes' `optional`; the rules are required whatever it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn jvm_options_use_strimzi_keys() {
        let options: JvmOptions = serde_json::from_value(json!({
            "-Xmx": "2g", "-Xms": "1g", "-XX": {"UseG1GC": "true"},
            "gcLoggingEnabled": false,
            "javaSystemProperties": [{"name": "a", "value": "b"}]
        }))
        .expect("deserializes");
        assert_eq!(options.xmx.as_deref(), Some("2g"));
        assert_eq!(options.xms.as_deref(), Some("1g"));
        assert_eq!(
            options
                .xx
                .as_ref()
                .and_then(|xx| xx.get("UseG1GC"))
                .map(String::as_str),
            Some("true")
        );
        assert_eq!(options.java_system_properties.len(), 1);
        let back = serde_json::to_value(&options).expect("serializes");
        assert_eq!(back["-Xmx"], json!("2g"));
        assert_eq!(
            serde_json::to_value(JvmOptions::default()).expect("serializes"),
            json!({})
        );
    }
}
