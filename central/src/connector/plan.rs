//! The connector operator's pure decisions: the configuration sent to Connect, the state
//! transition to make, automatic restarts and their backoff, the offsets annotation and JSON,
//! the ConfigMap written by `list`, and the status conditions. No I/O here.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use kstretch_api::condition::{self, Condition};
use kstretch_api::connector::{AutoRestart, AutoRestartStatus, ConnectorState};
use kstretch_api::{KafkaConnect, KafkaConnectorSpec, names};
use serde_json::Value;

use super::warning::Reason;
use crate::status::not_ready;

/// `KafkaConnect` annotation overriding the REST API address central uses (for a central
/// running outside the cluster); it wins over `status.url`.
pub const CONNECT_REST_URL_ANNOTATION: &str = "kstretch.io/connect-rest-url";

/// Why a connector's Connect cluster cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("Resource lacks label '{label}': No connect cluster in which to create this connector; set it to the name of a KafkaConnect in this namespace", label = names::CLUSTER)]
    MissingClusterLabel,
    #[error("KafkaConnect resource '{name}' identified by label '{label}' does not exist in namespace {namespace}.", label = names::CLUSTER)]
    KafkaConnectNotFound { namespace: String, name: String },
    #[error("KafkaConnect {name} is not configured with annotation {annotation}; set it to \"true\" so its connectors are managed with KafkaConnector resources", annotation = names::USE_CONNECTOR_RESOURCES)]
    ConnectorResourcesDisabled { name: String },
    #[error(
        "KafkaConnect {name} has no REST API address yet (status.url is empty); the connector is reconciled once it has, or set the {CONNECT_REST_URL_ANNOTATION} annotation on the KafkaConnect"
    )]
    NoRestUrl { name: String },
}

impl TargetError {
    pub fn reason(&self) -> &'static str {
        match self {
            TargetError::MissingClusterLabel => "MissingClusterLabel",
            TargetError::KafkaConnectNotFound { .. } => "KafkaConnectNotFound",
            TargetError::ConnectorResourcesDisabled { .. } => "ConnectorResourcesDisabled",
            TargetError::NoRestUrl { .. } => "KafkaConnectNotReady",
        }
    }
}

/// The name of the `KafkaConnect` the connector's `strimzi.io/cluster` label names.
pub fn connect_name(labels: &BTreeMap<String, String>) -> Result<&str, TargetError> {
    labels
        .get(names::CLUSTER)
        .map(String::as_str)
        .filter(|n| !n.is_empty())
        .ok_or(TargetError::MissingClusterLabel)
}

/// Where central reaches a Connect cluster's REST API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestTarget {
    /// At this address: the override annotation's, or `status.url` when central runs without
    /// agents (in the workers' Kubernetes cluster, with its DNS).
    Url(String),
    /// Through the agent of the member cluster `alias`, where kstretch runs the workers.
    Agent { alias: String },
}

/// Where central reaches the Connect REST API of `connect` (in `namespace`, named `name`):
/// the override annotation, else through the agent of the cluster its workers run in
/// (`own`: central's own cluster, where they run without a stretch alias; `None` when central
/// runs without agents: then at `status.url`). The KafkaConnect must manage its connectors
/// with resources (`strimzi.io/use-connector-resources: "true"`) and have been built
/// (`status.url` set).
pub fn rest_target(
    namespace: &str,
    name: &str,
    connect: Option<&KafkaConnect>,
    own: Option<&str>,
) -> Result<RestTarget, TargetError> {
    let Some(connect) = connect else {
        return Err(TargetError::KafkaConnectNotFound {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        });
    };
    let annotations = connect.metadata.annotations.as_ref();
    let enabled = annotations
        .and_then(|a| a.get(names::USE_CONNECTOR_RESOURCES))
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    if !enabled {
        return Err(TargetError::ConnectorResourcesDisabled {
            name: name.to_owned(),
        });
    }
    let trimmed = |u: &String| u.trim().trim_end_matches('/').to_owned();
    if let Some(url) = annotations
        .and_then(|a| a.get(CONNECT_REST_URL_ANNOTATION))
        .filter(|u| !u.trim().is_empty())
    {
        return Ok(RestTarget::Url(trimmed(url)));
    }
    let url = connect
        .status
        .as_ref()
        .and_then(|s| s.url.as_ref())
        .filter(|u| !u.is_empty())
        .ok_or_else(|| TargetError::NoRestUrl {
            name: name.to_owned(),
        })?;
    Ok(match own {
        Some(own) => RestTarget::Agent {
            alias: crate::connect::validate::placed_in(connect, own),
        },
        None => RestTarget::Url(trimmed(url)),
    })
}

/// Keys of `spec.config` that the operator sets itself (Strimzi's forbidden options).
pub const FORBIDDEN_CONFIG: [&str; 4] = [
    "name",
    "connector.class",
    "tasks.max",
    "connector.plugin.version",
];

/// Kubernetes refuses a ConfigMap whose data (keys and values) exceeds 1 MiB.
pub const CONFIG_MAP_LIMIT: usize = 1024 * 1024;

/// Why a spec cannot be turned into a connector configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error(
        "spec.class is missing; set it to the connector's class, for example org.apache.kafka.connect.file.FileStreamSourceConnector"
    )]
    MissingClass,
    #[error("Connector class {class} is not installed in Kafka Connect; available: {available}")]
    UnknownClass { class: String, available: String },
    #[error("Connector configuration is invalid: {0}")]
    InvalidConfig(String),
}

impl SpecError {
    pub fn reason(&self) -> &'static str {
        match self {
            SpecError::MissingClass => "MissingConnectorClass",
            SpecError::UnknownClass { .. } => "ConnectorClassNotFound",
            SpecError::InvalidConfig(_) => "InvalidConfig",
        }
    }
}

/// The configuration Connect should hold, and the user's keys the operator overrode.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DesiredConfig {
    pub config: BTreeMap<String, String>,
    pub ignored: Vec<String>,
}

fn config_string(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// `spec.config` as Connect's string map, plus `name`, `connector.class`, `tasks.max` and
/// `connector.plugin.version` from the spec (user values for those are ignored, as Strimzi
/// does).
pub fn desired_config(name: &str, spec: &KafkaConnectorSpec) -> Result<DesiredConfig, SpecError> {
    let class = spec
        .class
        .as_deref()
        .filter(|c| !c.trim().is_empty())
        .ok_or(SpecError::MissingClass)?;
    let mut out = DesiredConfig::default();
    for (key, value) in spec.config.iter().flatten() {
        if FORBIDDEN_CONFIG.contains(&key.as_str()) {
            out.ignored.push(key.clone());
            continue;
        }
        if let Some(v) = config_string(value) {
            out.config.insert(key.clone(), v);
        }
    }
    if let Some(tasks) = spec.tasks_max {
        out.config.insert("tasks.max".into(), tasks.to_string());
    }
    if let Some(version) = &spec.version {
        out.config
            .insert("connector.plugin.version".into(), version.clone());
    }
    out.config.insert("name".into(), name.to_owned());
    out.config
        .insert("connector.class".into(), class.to_owned());
    Ok(out)
}

/// Whether `class` names an installed connector plugin: Connect accepts the full class name,
/// the simple name, and the simple name without its `Connector` suffix.
pub fn class_installed(class: &str, installed: &[String]) -> Result<(), SpecError> {
    let known = installed.iter().any(|full| {
        let simple = full.rsplit('.').next().unwrap_or(full);
        class == full || class == simple || Some(class) == simple.strip_suffix("Connector")
    });
    if known {
        return Ok(());
    }
    Err(SpecError::UnknownClass {
        class: class.to_owned(),
        available: if installed.is_empty() {
            "none".to_owned()
        } else {
            installed.join(", ")
        },
    })
}

/// The Connect name of a state (`initial_state` of a create).
pub fn connect_state(state: ConnectorState) -> &'static str {
    match state {
        ConnectorState::Running => "RUNNING",
        ConnectorState::Paused => "PAUSED",
        ConnectorState::Stopped => "STOPPED",
    }
}

/// What to ask Connect so the connector reaches its target state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateAction {
    Nothing,
    Pause,
    Resume,
    Stop,
    /// Connect cannot pause a failed connector; the user must fix or restart it.
    CannotPauseFailed,
}

/// Strimzi's transitions: from RUNNING, PAUSED, STOPPED or FAILED towards the target;
/// UNASSIGNED and RESTARTING are transient and left alone.
pub fn state_action(current: &str, target: ConnectorState) -> StateAction {
    use ConnectorState::*;
    match (current, target) {
        ("RUNNING", Paused) | ("STOPPED", Paused) => StateAction::Pause,
        ("RUNNING", Stopped) | ("PAUSED", Stopped) | ("FAILED", Stopped) => StateAction::Stop,
        ("PAUSED", Running) | ("STOPPED", Running) => StateAction::Resume,
        ("FAILED", Paused) => StateAction::CannotPauseFailed,
        _ => StateAction::Nothing,
    }
}

/// `$.connector.state` of a Connect status.
pub fn connector_state(status: &Value) -> Option<&str> {
    status.pointer("/connector/state").and_then(Value::as_str)
}

/// IDs of the tasks Connect reports `FAILED`.
pub fn failed_tasks(status: &Value) -> Vec<String> {
    status
        .get("tasks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|t| t.get("state").and_then(Value::as_str) == Some("FAILED"))
        .filter_map(|t| t.get("id").map(|id| config_string(id).unwrap_or_default()))
        .collect()
}

/// Whether the connector or any of its tasks failed.
pub fn is_failing(status: &Value) -> bool {
    connector_state(status) == Some("FAILED") || !failed_tasks(status).is_empty()
}

/// Strimzi's auto-restart backoff: `n² + n` minutes after the n-th restart, at most 60.
pub fn backoff_minutes(count: i32) -> i64 {
    let n = i64::from(count.max(0));
    (n * n + n).min(60)
}

/// What to do about automatic restarts this reconciliation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AutoRestartDecision {
    /// Not enabled, or nothing failed and nothing recorded.
    None,
    /// Restart the connector and its failed tasks now; the status becomes `next`.
    Restart { next: AutoRestartStatus },
    /// Keep the recorded status (waiting for the backoff, out of restarts, or not yet stable);
    /// `retry_in_secs` says when a restart becomes due, if one will.
    Keep {
        status: AutoRestartStatus,
        retry_in_secs: Option<i64>,
    },
    /// Stable long enough since the last restart: forget the restarts.
    Reset,
}

fn minutes_since(timestamp: Option<&str>, now: Timestamp) -> Option<(i64, i64)> {
    let last: Timestamp = timestamp?.parse().ok()?;
    let secs = now.as_second() - last.as_second();
    Some((secs.div_euclid(60), secs))
}

/// Strimzi's `autoRestartFailedConnectorAndTasks`: restart at once on the first failure, then
/// after the backoff, at most `maxRestarts` times; reset the count once the connector stayed
/// healthy longer than the backoff of its count.
pub fn auto_restart(
    settings: Option<&AutoRestart>,
    previous: Option<&AutoRestartStatus>,
    failing: bool,
    now: Timestamp,
) -> AutoRestartDecision {
    if !settings.is_some_and(|s| s.enabled.unwrap_or(false)) {
        return AutoRestartDecision::None;
    }
    let max = settings.and_then(|s| s.max_restarts);
    let count = previous.and_then(|p| p.count).unwrap_or(0);
    let since = previous.and_then(|p| minutes_since(p.last_restart_timestamp.as_deref(), now));
    if failing {
        let next = AutoRestartStatus {
            count: Some(count + 1),
            connector_name: previous.and_then(|p| p.connector_name.clone()),
            last_restart_timestamp: Some(condition::format_timestamp(now)),
        };
        let Some((minutes, secs)) = since else {
            return AutoRestartDecision::Restart { next };
        };
        let allowed = max.is_none_or(|m| count < m);
        if allowed && minutes >= backoff_minutes(count) {
            return AutoRestartDecision::Restart { next };
        }
        let retry_in_secs = allowed.then(|| (backoff_minutes(count) * 60 - secs).max(1));
        return AutoRestartDecision::Keep {
            status: previous.cloned().unwrap_or_default(),
            retry_in_secs,
        };
    }
    match (previous, since) {
        (Some(_), Some((minutes, _))) if count > 0 && minutes > backoff_minutes(count) => {
            AutoRestartDecision::Reset
        }
        (Some(p), _) => AutoRestartDecision::Keep {
            status: p.clone(),
            retry_in_secs: None,
        },
        (None, _) => AutoRestartDecision::None,
    }
}

/// An offsets operation requested through `strimzi.io/connector-offsets`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetsOp {
    List,
    Alter,
    Reset,
}

impl OffsetsOp {
    /// The reason of the `Warning` condition reporting this operation's failure.
    pub fn warning_reason(self) -> Reason {
        match self {
            OffsetsOp::List => Reason::ListOffsets,
            OffsetsOp::Alter => Reason::AlterOffsets,
            OffsetsOp::Reset => Reason::ResetOffsets,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            OffsetsOp::List => "list",
            OffsetsOp::Alter => "alter",
            OffsetsOp::Reset => "reset",
        }
    }
}

/// The requested operation; `Err` carries the warning message of an unknown value.
pub fn offsets_op(annotation: Option<&str>) -> Result<Option<OffsetsOp>, String> {
    match annotation.map(str::trim) {
        None | Some("") | Some("none") => Ok(None),
        Some(names::CONNECTOR_OFFSETS_LIST) => Ok(Some(OffsetsOp::List)),
        Some(names::CONNECTOR_OFFSETS_ALTER) => Ok(Some(OffsetsOp::Alter)),
        Some(names::CONNECTOR_OFFSETS_RESET) => Ok(Some(OffsetsOp::Reset)),
        Some(other) => Err(format!(
            "Encountered error getting connector offsets annotation. The {} annotation has the unknown value {other:?}; use list, alter or reset",
            names::CONNECTOR_OFFSETS
        )),
    }
}

/// A restart the user asked for with `strimzi.io/restart` (Connect's options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartRequest {
    pub include_tasks: bool,
    pub only_failed: bool,
}

/// Reads `strimzi.io/restart` as Strimzi does: unset, blank or containing `false` asks for
/// nothing; `true` restarts the connector; `includeTasks` and/or `onlyFailed` (comma-separated,
/// any case) pass Connect's options. `Err` is the warning of a value that mixes `true` with
/// options or names anything else; the annotation then stays and nothing restarts.
pub fn restart_request(annotation: Option<&str>) -> Result<Option<RestartRequest>, String> {
    let Some(value) = annotation.filter(|v| !v.trim().is_empty() && !v.contains("false")) else {
        return Ok(None);
    };
    let mut request = RestartRequest {
        include_tasks: false,
        only_failed: false,
    };
    let (mut flag, mut options) = (false, false);
    for part in value.split(',').map(str::trim) {
        if part.eq_ignore_ascii_case("true") {
            flag = true;
        } else if part.eq_ignore_ascii_case(names::RESTART_INCLUDE_TASKS) {
            (options, request.include_tasks) = (true, true);
        } else if part.eq_ignore_ascii_case(names::RESTART_ONLY_FAILED) {
            (options, request.only_failed) = (true, true);
        } else {
            return Err(invalid_restart(value));
        }
    }
    if flag && options {
        return Err(invalid_restart(value));
    }
    Ok(Some(request))
}

fn invalid_restart(value: &str) -> String {
    format!(
        "Invalid annotation format: {} is {value:?}; use \"true\", or {} and/or {} separated by a comma",
        names::RESTART,
        names::RESTART_INCLUDE_TASKS,
        names::RESTART_ONLY_FAILED
    )
}

/// Reads `strimzi.io/restart-task`: the ID of the task to restart once. `Err` is the warning
/// of a value that is not a task ID; the annotation then stays.
pub fn restart_task(annotation: Option<&str>) -> Result<Option<u32>, String> {
    match annotation.map(str::trim) {
        None | Some("") => Ok(None),
        Some(id) => id.parse::<u32>().map(Some).map_err(|_| {
            format!(
                "Invalid annotation format: {} is {id:?}; use the ID of the task to restart, e.g. \"0\"",
                names::RESTART_TASK
            )
        }),
    }
}

/// Warning when the property an operation needs is missing (Strimzi's message).
pub fn missing_property_message(op: OffsetsOp) -> String {
    let (verb, property) = match op {
        OffsetsOp::List => ("list", "listOffsets"),
        OffsetsOp::Alter => ("alter", "alterOffsets"),
        OffsetsOp::Reset => ("reset", "state"),
    };
    format!(
        "Failed to {verb} the connector offsets due to missing property {property} in KafkaConnector CR."
    )
}

/// The request body of `alter`: the `offsets.json` entry of the ConfigMap, checked to be JSON.
pub fn alter_body(
    namespace: &str,
    name: &str,
    config_map: Option<&ConfigMap>,
) -> Result<Value, String> {
    let key = names::CONNECTOR_OFFSETS_CONFIG_MAP_KEY;
    let Some(cm) = config_map else {
        return Err(format!(
            "Encountered error fetching offsets to use in alter operation. ConfigMap {namespace}/{name} does not exist."
        ));
    };
    let Some(text) = cm.data.as_ref().and_then(|d| d.get(key)) else {
        return Err(format!(
            "Encountered error fetching offsets to use in alter operation. Data field {key} is missing."
        ));
    };
    serde_json::from_str(text)
        .map_err(|e| format!("Failed to parse contents of {key} as JSON: {e}"))
}

/// Size of a ConfigMap's data as the apiserver counts it against its 1 MiB limit.
pub fn data_size(cm: &ConfigMap) -> usize {
    let text: usize = cm
        .data
        .iter()
        .flatten()
        .map(|(k, v)| k.len() + v.len())
        .sum();
    let binary: usize = cm
        .binary_data
        .iter()
        .flatten()
        .map(|(k, v)| k.len() + v.0.len())
        .sum();
    text + binary
}

/// What `list` writes.
#[derive(Debug, Clone, PartialEq)]
pub enum ListWrite {
    /// A new ConfigMap, owned by the connector (deleted with it).
    Create(ConfigMap),
    /// The existing ConfigMap with `offsets.json` replaced; its other keys and owners kept.
    Update(ConfigMap),
}

/// The ConfigMap `list` writes, or the message of the warning when it would exceed the limit
/// (nothing is written then: never a partial list).
pub fn list_write(
    namespace: &str,
    name: &str,
    existing: Option<&ConfigMap>,
    owner: OwnerReference,
    offsets: &str,
) -> Result<ListWrite, String> {
    let key = names::CONNECTOR_OFFSETS_CONFIG_MAP_KEY.to_owned();
    let (write, cm) = match existing {
        Some(found) => {
            let mut cm = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(name.to_owned()),
                    namespace: Some(namespace.to_owned()),
                    resource_version: found.metadata.resource_version.clone(),
                    ..ObjectMeta::default()
                },
                data: found.data.clone(),
                binary_data: found.binary_data.clone(),
                ..ConfigMap::default()
            };
            cm.data
                .get_or_insert_with(BTreeMap::new)
                .insert(key, offsets.to_owned());
            (true, cm)
        }
        None => (
            false,
            ConfigMap {
                metadata: ObjectMeta {
                    name: Some(name.to_owned()),
                    namespace: Some(namespace.to_owned()),
                    owner_references: Some(vec![owner]),
                    ..ObjectMeta::default()
                },
                data: Some(BTreeMap::from([(key, offsets.to_owned())])),
                ..ConfigMap::default()
            },
        ),
    };
    let size = data_size(&cm);
    if size > CONFIG_MAP_LIMIT {
        return Err(format!(
            "Failed to list the connector offsets: they would make ConfigMap {namespace}/{name} {size} bytes, over the {CONFIG_MAP_LIMIT}-byte limit of a ConfigMap; nothing was written{}",
            if write {
                " (the ConfigMap's other keys count too: move them elsewhere)"
            } else {
                ""
            }
        ));
    }
    Ok(if write {
        ListWrite::Update(cm)
    } else {
        ListWrite::Create(cm)
    })
}

/// Readiness from Connect's status: failed connector or tasks make it not ready.
pub fn ready_from_status(status: &Value) -> Condition {
    if connector_state(status) == Some("FAILED") {
        return not_ready(
            "ConnectorFailed",
            "Connector has failed, see connectorStatus for more details.",
        );
    }
    let failed = failed_tasks(status);
    if !failed.is_empty() {
        return not_ready(
            "TasksFailed",
            format!(
                "The following tasks have failed: {}, see connectorStatus for more details.",
                failed.join(", ")
            ),
        );
    }
    Condition::ready()
}

/// `status.tasksMax`: the spec's, else the number of tasks Connect reports.
pub fn tasks_max(spec: &KafkaConnectorSpec, status: Option<&Value>) -> Option<i32> {
    spec.tasks_max.or_else(|| {
        status
            .and_then(|s| s.get("tasks"))
            .and_then(Value::as_array)
            .map(|t| i32::try_from(t.len()).unwrap_or(i32::MAX))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::conditions;
    use k8s_openapi::ByteString;
    use serde_json::json;

    fn spec(value: Value) -> KafkaConnectorSpec {
        serde_json::from_value(value).unwrap()
    }

    fn owner() -> OwnerReference {
        OwnerReference {
            api_version: "kafka.strimzi.io/v1".into(),
            kind: "KafkaConnector".into(),
            name: "c".into(),
            uid: "u".into(),
            ..OwnerReference::default()
        }
    }

    fn connect(annotations: Value, status: Value) -> KafkaConnect {
        serde_json::from_value(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaConnect",
            "metadata": {"name": "kc", "namespace": "ns", "annotations": annotations},
            "spec": {"bootstrapServers": "b:9092"},
            "status": status
        }))
        .unwrap()
    }

    #[test]
    fn the_rest_target_needs_connector_resources_and_prefers_the_override() {
        let labels = BTreeMap::from([(names::CLUSTER.to_owned(), "kc".to_owned())]);
        assert_eq!(connect_name(&labels), Ok("kc"));
        assert_eq!(
            connect_name(&BTreeMap::new()).unwrap_err().reason(),
            "MissingClusterLabel"
        );
        assert_eq!(
            rest_target("ns", "kc", None, None).unwrap_err().reason(),
            "KafkaConnectNotFound"
        );
        let off = connect(
            json!({}),
            json!({"url": "http://kc-connect-api.ns.svc:8083"}),
        );
        let e = rest_target("ns", "kc", Some(&off), None).unwrap_err();
        assert_eq!(e.reason(), "ConnectorResourcesDisabled");
        assert!(e.to_string().contains("strimzi.io/use-connector-resources"));
        let on = connect(
            json!({"strimzi.io/use-connector-resources": "true"}),
            json!({"url": "http://kc-connect-api.ns.svc:8083"}),
        );
        assert_eq!(
            rest_target("ns", "kc", Some(&on), None).unwrap(),
            RestTarget::Url("http://kc-connect-api.ns.svc:8083".into())
        );
        let overridden = connect(
            json!({"strimzi.io/use-connector-resources": "true",
                   "kstretch.io/connect-rest-url": "http://127.0.0.1:18083/"}),
            json!({"url": "http://kc-connect-api.ns.svc:8083"}),
        );
        assert_eq!(
            rest_target("ns", "kc", Some(&overridden), Some("alpha")).unwrap(),
            RestTarget::Url("http://127.0.0.1:18083".into())
        );
        let pending = connect(
            json!({"strimzi.io/use-connector-resources": "true"}),
            json!({}),
        );
        assert_eq!(
            rest_target("ns", "kc", Some(&pending), Some("alpha"))
                .unwrap_err()
                .reason(),
            "KafkaConnectNotReady"
        );
    }

    #[test]
    fn with_agents_the_workers_are_called_through_the_agent_of_their_cluster() {
        let own = connect(
            json!({"strimzi.io/use-connector-resources": "true"}),
            json!({"url": "http://kc-connect-api.ns.svc:8083"}),
        );
        assert_eq!(
            rest_target("ns", "kc", Some(&own), Some("alpha")).unwrap(),
            RestTarget::Agent {
                alias: "alpha".into()
            }
        );
        let in_beta = connect(
            json!({"strimzi.io/use-connector-resources": "true",
                   "strimzi.io/stretch-cluster-alias": "beta"}),
            json!({"url": "http://kc-connect-api.ns.svc:8083"}),
        );
        assert_eq!(
            rest_target("ns", "kc", Some(&in_beta), Some("alpha")).unwrap(),
            RestTarget::Agent {
                alias: "beta".into()
            }
        );
    }

    #[test]
    fn desired_config_sets_operator_keys_and_ignores_forbidden_ones() {
        let s = spec(json!({
            "class": "FileStreamSource", "tasksMax": 2, "version": "4.1.2",
            "config": {"file": "/tmp/x", "topic": "t", "batch.size": 10, "flag": true,
                       "gone": null, "name": "other", "tasks.max": 9}
        }));
        let d = desired_config("c1", &s).unwrap();
        assert_eq!(d.ignored, vec!["name".to_owned(), "tasks.max".to_owned()]);
        assert_eq!(d.config["name"], "c1");
        assert_eq!(d.config["connector.class"], "FileStreamSource");
        assert_eq!(d.config["tasks.max"], "2");
        assert_eq!(d.config["connector.plugin.version"], "4.1.2");
        assert_eq!(d.config["batch.size"], "10");
        assert_eq!(d.config["flag"], "true");
        assert!(!d.config.contains_key("gone"));
        assert_eq!(
            desired_config("c", &spec(json!({}))),
            Err(SpecError::MissingClass)
        );
        assert_eq!(
            desired_config("c", &spec(json!({"class": " "})))
                .unwrap_err()
                .reason(),
            "MissingConnectorClass"
        );
    }

    #[test]
    fn class_aliases_are_accepted() {
        let installed = vec!["org.apache.kafka.connect.file.FileStreamSourceConnector".to_owned()];
        for ok in [
            "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "FileStreamSourceConnector",
            "FileStreamSource",
        ] {
            assert!(class_installed(ok, &installed).is_ok(), "{ok}");
        }
        let e = class_installed("org.example.Nope", &installed).unwrap_err();
        assert_eq!(e.reason(), "ConnectorClassNotFound");
        assert!(e.to_string().contains("org.example.Nope"));
        assert!(e.to_string().contains("FileStreamSourceConnector"));
        assert!(
            class_installed("X", &[])
                .unwrap_err()
                .to_string()
                .contains("none")
        );
    }

    #[test]
    fn state_transitions_follow_strimzi() {
        use ConnectorState::*;
        assert_eq!(state_action("RUNNING", Running), StateAction::Nothing);
        assert_eq!(state_action("RUNNING", Paused), StateAction::Pause);
        assert_eq!(state_action("RUNNING", Stopped), StateAction::Stop);
        assert_eq!(state_action("PAUSED", Running), StateAction::Resume);
        assert_eq!(state_action("PAUSED", Stopped), StateAction::Stop);
        assert_eq!(state_action("STOPPED", Running), StateAction::Resume);
        assert_eq!(state_action("STOPPED", Paused), StateAction::Pause);
        assert_eq!(state_action("FAILED", Stopped), StateAction::Stop);
        assert_eq!(
            state_action("FAILED", Paused),
            StateAction::CannotPauseFailed
        );
        assert_eq!(state_action("FAILED", Running), StateAction::Nothing);
        assert_eq!(state_action("UNASSIGNED", Stopped), StateAction::Nothing);
        assert_eq!(connect_state(Stopped), "STOPPED");
    }

    #[test]
    fn failures_are_read_from_connect_status() {
        let ok =
            json!({"connector": {"state": "RUNNING"}, "tasks": [{"id": 0, "state": "RUNNING"}]});
        assert!(!is_failing(&ok));
        assert_eq!(ready_from_status(&ok), Condition::ready());
        let task = json!({"connector": {"state": "RUNNING"},
                          "tasks": [{"id": 0, "state": "FAILED"}, {"id": 1, "state": "FAILED"}]});
        assert_eq!(failed_tasks(&task), vec!["0".to_owned(), "1".to_owned()]);
        let c = ready_from_status(&task);
        assert_eq!(c.reason.as_deref(), Some("TasksFailed"));
        assert!(c.message.unwrap().contains("0, 1"));
        let conn = json!({"connector": {"state": "FAILED"}, "tasks": []});
        assert!(is_failing(&conn));
        assert_eq!(
            ready_from_status(&conn).reason.as_deref(),
            Some("ConnectorFailed")
        );
    }

    #[test]
    fn backoff_is_n_squared_plus_n_capped_at_an_hour() {
        let got: Vec<i64> = (0..10).map(backoff_minutes).collect();
        assert_eq!(got, vec![0, 2, 6, 12, 20, 30, 42, 56, 60, 60]);
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn restarted(count: i32, when: &str) -> AutoRestartStatus {
        AutoRestartStatus {
            count: Some(count),
            connector_name: None,
            last_restart_timestamp: Some(when.to_owned()),
        }
    }

    #[test]
    fn auto_restart_needs_enabling() {
        let now = at("2024-01-01T00:00:00Z");
        assert_eq!(
            auto_restart(None, None, true, now),
            AutoRestartDecision::None
        );
        let off = AutoRestart {
            enabled: Some(false),
            max_restarts: None,
        };
        assert_eq!(
            auto_restart(Some(&off), None, true, now),
            AutoRestartDecision::None
        );
    }

    #[test]
    fn auto_restart_backs_off_and_stops_at_max() {
        let on = AutoRestart {
            enabled: Some(true),
            max_restarts: Some(2),
        };
        let now = at("2024-01-01T00:10:00Z");
        // First failure: at once.
        match auto_restart(Some(&on), None, true, now) {
            AutoRestartDecision::Restart { next } => {
                assert_eq!(next.count, Some(1));
                assert_eq!(
                    next.last_restart_timestamp.as_deref(),
                    Some("2024-01-01T00:10:00Z")
                );
            }
            other => panic!("{other:?}"),
        }
        // One restart 1 minute ago: the next waits for 2 minutes.
        let prev = restarted(1, "2024-01-01T00:09:00Z");
        assert_eq!(
            auto_restart(Some(&on), Some(&prev), true, now),
            AutoRestartDecision::Keep {
                status: prev.clone(),
                retry_in_secs: Some(60)
            }
        );
        let prev = restarted(1, "2024-01-01T00:08:00Z");
        assert!(matches!(
            auto_restart(Some(&on), Some(&prev), true, now),
            AutoRestartDecision::Restart { next } if next.count == Some(2)
        ));
        // maxRestarts reached: never again.
        let prev = restarted(2, "2024-01-01T00:00:00Z");
        assert_eq!(
            auto_restart(Some(&on), Some(&prev), true, at("2024-01-02T00:00:00Z")),
            AutoRestartDecision::Keep {
                status: prev.clone(),
                retry_in_secs: None
            }
        );
    }

    #[test]
    fn auto_restart_resets_once_stable() {
        let on = AutoRestart {
            enabled: Some(true),
            max_restarts: None,
        };
        let prev = restarted(2, "2024-01-01T00:00:00Z");
        // Healthy, but only 6 minutes: not yet stable.
        assert!(matches!(
            auto_restart(Some(&on), Some(&prev), false, at("2024-01-01T00:06:00Z")),
            AutoRestartDecision::Keep { .. }
        ));
        assert_eq!(
            auto_restart(Some(&on), Some(&prev), false, at("2024-01-01T00:07:00Z")),
            AutoRestartDecision::Reset
        );
        assert_eq!(
            auto_restart(Some(&on), None, false, at("2024-01-01T00:07:00Z")),
            AutoRestartDecision::None
        );
    }

    #[test]
    fn offsets_annotation_values() {
        assert_eq!(offsets_op(None), Ok(None));
        assert_eq!(offsets_op(Some("list")), Ok(Some(OffsetsOp::List)));
        assert_eq!(offsets_op(Some("alter")), Ok(Some(OffsetsOp::Alter)));
        assert_eq!(offsets_op(Some("reset")), Ok(Some(OffsetsOp::Reset)));
        assert!(offsets_op(Some("wipe")).unwrap_err().contains("\"wipe\""));
        assert_eq!(
            missing_property_message(OffsetsOp::List),
            "Failed to list the connector offsets due to missing property listOffsets in KafkaConnector CR."
        );
        assert!(missing_property_message(OffsetsOp::Alter).contains("alterOffsets"));
    }

    fn cm(data: &[(&str, &str)]) -> ConfigMap {
        ConfigMap {
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..ConfigMap::default()
        }
    }

    #[test]
    fn alter_body_reads_and_checks_offsets_json() {
        assert!(
            alter_body("ns", "m", None)
                .unwrap_err()
                .contains("ConfigMap ns/m does not exist")
        );
        assert!(
            alter_body("ns", "m", Some(&cm(&[("other", "{}")])))
                .unwrap_err()
                .contains("Data field offsets.json is missing")
        );
        assert!(
            alter_body("ns", "m", Some(&cm(&[("offsets.json", "{not json")])))
                .unwrap_err()
                .contains("Failed to parse contents of offsets.json as JSON")
        );
        let body = alter_body(
            "ns",
            "m",
            Some(&cm(&[("offsets.json", r#"{"offsets": []}"#)])),
        )
        .unwrap();
        assert_eq!(body, json!({"offsets": []}));
    }

    #[test]
    fn list_creates_an_owned_config_map() {
        match list_write("ns", "m", None, owner(), "{}").unwrap() {
            ListWrite::Create(cm) => {
                assert_eq!(cm.metadata.owner_references.unwrap()[0].name, "c");
                assert_eq!(cm.data.unwrap()["offsets.json"], "{}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn list_keeps_other_keys_and_adds_no_owner_to_an_existing_config_map() {
        let mut existing = cm(&[("offsets.json", "old"), ("notes", "keep me")]);
        existing.metadata.resource_version = Some("42".into());
        existing.binary_data = Some(BTreeMap::from([("bin".to_owned(), ByteString(vec![1, 2]))]));
        match list_write("ns", "m", Some(&existing), owner(), "{\"offsets\":[]}").unwrap() {
            ListWrite::Update(cm) => {
                assert!(cm.metadata.owner_references.is_none());
                assert_eq!(cm.metadata.resource_version.as_deref(), Some("42"));
                let data = cm.data.unwrap();
                assert_eq!(data["offsets.json"], "{\"offsets\":[]}");
                assert_eq!(data["notes"], "keep me");
                assert!(cm.binary_data.unwrap().contains_key("bin"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn list_over_the_limit_writes_nothing() {
        let big = "x".repeat(CONFIG_MAP_LIMIT);
        let e = list_write("ns", "m", None, owner(), &big).unwrap_err();
        assert!(e.contains("over the 1048576-byte limit"), "{e}");
        // Other keys of an existing ConfigMap count too.
        let existing = cm(&[("big", &"y".repeat(CONFIG_MAP_LIMIT - 10))]);
        let e = list_write("ns", "m", Some(&existing), owner(), "{\"offsets\": []}").unwrap_err();
        assert!(e.contains("other keys"), "{e}");
    }

    #[test]
    fn conditions_keep_only_current_warnings() {
        let now = "2024-01-01T00:00:00Z";
        let existing = conditions(
            &[],
            Condition::ready(),
            &[crate::connector::warning::Warning::new(
                Reason::ListOffsets,
                "m",
            )],
            now,
        );
        assert_eq!(existing.len(), 2);
        let next = conditions(
            &existing,
            Condition::ready(),
            crate::status::NO_WARNINGS,
            "2024-01-01T01:00:00Z",
        );
        assert_eq!(next.len(), 1);
        assert_eq!(next[0].last_transition_time.as_deref(), Some(now));
    }

    #[test]
    fn tasks_max_prefers_the_spec() {
        let status = json!({"tasks": [{"id": 0}, {"id": 1}]});
        assert_eq!(
            tasks_max(&spec(json!({"tasksMax": 3})), Some(&status)),
            Some(3)
        );
        assert_eq!(tasks_max(&spec(json!({})), Some(&status)), Some(2));
        assert_eq!(tasks_max(&spec(json!({})), None), None);
    }

    #[test]
    fn restart_annotations_read_as_strimzi_reads_them() {
        let asks = |include_tasks, only_failed| {
            Ok(Some(RestartRequest {
                include_tasks,
                only_failed,
            }))
        };
        assert_eq!(restart_request(None), Ok(None));
        assert_eq!(restart_request(Some(" ")), Ok(None));
        assert_eq!(restart_request(Some("false")), Ok(None));
        assert_eq!(restart_request(Some("true")), asks(false, false));
        assert_eq!(restart_request(Some("includeTasks")), asks(true, false));
        assert_eq!(restart_request(Some("onlyfailed")), asks(false, true));
        assert_eq!(
            restart_request(Some("includeTasks, onlyFailed")),
            asks(true, true)
        );
        for bad in ["true,includeTasks", "includeTasks,wrongArg", "yes"] {
            let err = restart_request(Some(bad)).unwrap_err();
            assert!(
                err.contains(bad) && err.contains("strimzi.io/restart"),
                "{err}"
            );
        }
        assert_eq!(restart_task(None), Ok(None));
        assert_eq!(restart_task(Some("2")), Ok(Some(2)));
        let err = restart_task(Some("-1")).unwrap_err();
        assert!(
            err.contains("strimzi.io/restart-task") && err.contains("\"-1\""),
            "{err}"
        );
    }
}
