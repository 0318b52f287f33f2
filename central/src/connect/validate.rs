//! From a `KafkaConnect` to the effective settings of its workers (Strimzi's semantics for
//! `groupId`, the storage topics, replicas and the user `config`), or every problem that makes
//! it unusable. Pure.

use std::collections::BTreeMap;

use kstretch_api::{KafkaConnect, names};
use kube::ResourceExt;
use serde_json::Value;

use super::security;
use crate::kafka::resolve::Members;

/// Replicas when `spec.replicas` is not set (v1beta2 resources may omit it; Strimzi's default).
pub const DEFAULT_REPLICAS: u32 = 3;
/// Group ID and storage topics when neither the v1 fields nor the v1beta2 `config` keys set
/// them (the defaults Strimzi applied before v1 made the fields required).
pub const DEFAULT_GROUP_ID: &str = "connect-cluster";
pub const DEFAULT_CONFIG_STORAGE_TOPIC: &str = "connect-cluster-configs";
pub const DEFAULT_STATUS_STORAGE_TOPIC: &str = "connect-cluster-status";
pub const DEFAULT_OFFSET_STORAGE_TOPIC: &str = "connect-cluster-offsets";

/// `config` keys with these prefixes are set by the operator and ignored when users set them
/// (Strimzi's `KafkaConnectSpec.FORBIDDEN_PREFIXES`).
pub const FORBIDDEN_PREFIXES: &[&str] = &[
    "group.id",
    "config.storage.topic",
    "offset.storage.topic",
    "status.storage.topic",
    "ssl.",
    "sasl.",
    "security.",
    "listeners",
    "plugin.path",
    "rest.",
    "bootstrap.servers",
    "consumer.interceptor.classes",
    "producer.interceptor.classes",
    "prometheus.metrics.reporter.",
];
/// Exact keys allowed although a forbidden prefix matches them
/// (`KafkaConnectSpec.FORBIDDEN_PREFIX_EXCEPTIONS`).
pub const FORBIDDEN_PREFIX_EXCEPTIONS: &[&str] = &[
    "ssl.endpoint.identification.algorithm",
    "ssl.cipher.suites",
    "ssl.protocol",
    "ssl.enabled.protocols",
];
/// Values used when `config` does not set them (Strimzi's `KafkaConnectConfiguration.DEFAULTS`).
pub const CONFIG_DEFAULTS: &[(&str, &str)] = &[
    (
        "key.converter",
        "org.apache.kafka.connect.json.JsonConverter",
    ),
    (
        "value.converter",
        "org.apache.kafka.connect.json.JsonConverter",
    ),
];

/// Warning reasons.
pub const WARNING_FORBIDDEN_CONFIG: &str = "ForbiddenConfigIgnored";
pub const WARNING_DEFAULT_GROUP: &str = "DefaultGroupIdAndTopics";

/// The effective settings of a valid `KafkaConnect`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The member cluster the workers run in.
    pub alias: String,
    pub replicas: u32,
    pub bootstrap_servers: String,
    pub group_id: String,
    pub config_storage_topic: String,
    pub status_storage_topic: String,
    pub offset_storage_topic: String,
    /// The user's `config` that is passed to the workers (forbidden keys removed, defaults
    /// added), sorted by key.
    pub config: BTreeMap<String, String>,
    /// `(reason, message)` of every warning.
    pub warnings: Vec<(String, String)>,
    /// How the workers reach Kafka (`spec.tls`, `spec.authentication`).
    pub security: security::Security,
}

/// Why a `KafkaConnect` cannot be used as it is; reported as `Ready=False`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error(
        "annotation {annotation}={alias:?} names no member cluster; known clusters: {known}",
        annotation = names::STRETCH_CLUSTER_ALIAS
    )]
    UnknownClusterAlias { alias: String, known: String },
    #[error("spec.replicas is {0}; set 0 or more workers")]
    NegativeReplicas(i32),
    #[error("spec.bootstrapServers is empty; set the host:port list of the Kafka cluster")]
    MissingBootstrapServers,
    #[error("spec.bootstrapServers entry {0:?} is not host:port with a port from 1 to 65535")]
    InvalidBootstrapServers(String),
    #[error(
        "spec.config.{key} is {kind}; configuration values must be strings, numbers or booleans"
    )]
    InvalidConfigValue { key: String, kind: &'static str },
    #[error(
        "the config, status and offset storage topics must be three different topics, but {topic:?} is used twice; set spec.configStorageTopic, spec.statusStorageTopic and spec.offsetStorageTopic to distinct names"
    )]
    SharedStorageTopic { topic: String },
    #[error(transparent)]
    Security(#[from] security::Problem),
}

impl Invalid {
    /// Stable reason for the `Ready=False` condition and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::UnknownClusterAlias { .. } => "UnknownClusterAlias",
            Self::NegativeReplicas(_) => "InvalidReplicas",
            Self::MissingBootstrapServers => "MissingBootstrapServers",
            Self::InvalidBootstrapServers(_) => "InvalidBootstrapServers",
            Self::InvalidConfigValue { .. } | Self::SharedStorageTopic { .. } => "InvalidConfig",
            Self::Security(security::Problem::Unsupported(_)) => "UnsupportedField",
            Self::Security(security::Problem::Invalid(_)) => "InvalidSecurity",
        }
    }
}

/// Whether `key` is set by the operator (Strimzi's prefix rules; keys compared in lower case).
pub fn is_forbidden(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    FORBIDDEN_PREFIXES.iter().any(|p| lower.starts_with(p))
        && !FORBIDDEN_PREFIX_EXCEPTIONS.contains(&lower.as_str())
}

/// Validates `connect` and computes its effective settings.
pub fn resolve(connect: &KafkaConnect, members: &Members) -> Result<Resolved, Vec<Invalid>> {
    let spec = &connect.spec;
    let mut problems = Vec::new();

    let alias = connect
        .annotations()
        .get(names::STRETCH_CLUSTER_ALIAS)
        .map(|a| a.trim().to_owned())
        .unwrap_or_else(|| members.own.clone());
    if !members.all.contains(&alias) {
        problems.push(Invalid::UnknownClusterAlias {
            alias: alias.clone(),
            known: members.all.iter().cloned().collect::<Vec<_>>().join(", "),
        });
    }

    let replicas = match spec.replicas {
        None => DEFAULT_REPLICAS,
        Some(r) => u32::try_from(r).unwrap_or_else(|_| {
            problems.push(Invalid::NegativeReplicas(r));
            0
        }),
    };

    let bootstrap_servers = spec.bootstrap_servers.trim().to_owned();
    if bootstrap_servers.is_empty() {
        problems.push(Invalid::MissingBootstrapServers);
    }
    for entry in bootstrap_servers.split(',').map(str::trim) {
        if entry.is_empty() {
            continue;
        }
        let valid = entry.rsplit_once(':').is_some_and(|(host, port)| {
            !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0)
        });
        if !valid {
            problems.push(Invalid::InvalidBootstrapServers(entry.to_owned()));
        }
    }

    let security = security::read(connect).unwrap_or_else(|problem| {
        problems.push(problem.into());
        security::Security::default()
    });

    let mut user: BTreeMap<String, String> = BTreeMap::new();
    for (key, value) in spec.config.iter().flatten() {
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Null => continue,
            Value::Array(_) => {
                problems.push(Invalid::InvalidConfigValue {
                    key: key.clone(),
                    kind: "a list",
                });
                continue;
            }
            Value::Object(_) => {
                problems.push(Invalid::InvalidConfigValue {
                    key: key.clone(),
                    kind: "an object",
                });
                continue;
            }
        };
        user.insert(key.clone(), text);
    }

    // v1 fields first; v1beta2 resources set these in `config` (where they are otherwise
    // forbidden), and resources setting neither get Strimzi's old defaults.
    let mut defaulted = Vec::new();
    let mut pick = |field: &Option<String>, key: &str, default: &str| {
        field
            .clone()
            .or_else(|| user.get(key).cloned())
            .unwrap_or_else(|| {
                defaulted.push(key.to_owned());
                default.to_owned()
            })
    };
    let group_id = pick(&spec.group_id, "group.id", DEFAULT_GROUP_ID);
    let config_storage_topic = pick(
        &spec.config_storage_topic,
        "config.storage.topic",
        DEFAULT_CONFIG_STORAGE_TOPIC,
    );
    let status_storage_topic = pick(
        &spec.status_storage_topic,
        "status.storage.topic",
        DEFAULT_STATUS_STORAGE_TOPIC,
    );
    let offset_storage_topic = pick(
        &spec.offset_storage_topic,
        "offset.storage.topic",
        DEFAULT_OFFSET_STORAGE_TOPIC,
    );
    for (i, topic) in [
        &config_storage_topic,
        &status_storage_topic,
        &offset_storage_topic,
    ]
    .iter()
    .enumerate()
    {
        if [
            &config_storage_topic,
            &status_storage_topic,
            &offset_storage_topic,
        ][..i]
            .contains(topic)
        {
            problems.push(Invalid::SharedStorageTopic {
                topic: (*topic).clone(),
            });
        }
    }

    let mut warnings = Vec::new();
    if !defaulted.is_empty() {
        warnings.push((
            WARNING_DEFAULT_GROUP.to_owned(),
            format!(
                "{} not set, so Strimzi's defaults are used; two Connect clusters sharing a Kafka cluster with these defaults would join each other's group: set spec.groupId, spec.configStorageTopic, spec.statusStorageTopic and spec.offsetStorageTopic",
                defaulted.join(", ")
            ),
        ));
    }
    // The v1beta2 keys that were taken into the settings above are not "ignored".
    let legacy_taken = |key: &str| match key {
        "group.id" => spec.group_id.is_none(),
        "config.storage.topic" => spec.config_storage_topic.is_none(),
        "status.storage.topic" => spec.status_storage_topic.is_none(),
        "offset.storage.topic" => spec.offset_storage_topic.is_none(),
        _ => false,
    };
    let ignored: Vec<String> = user
        .keys()
        .filter(|k| is_forbidden(k) && !legacy_taken(k))
        .cloned()
        .collect();
    user.retain(|k, _| !is_forbidden(k));
    if !ignored.is_empty() {
        warnings.push((
            WARNING_FORBIDDEN_CONFIG.to_owned(),
            format!(
                "spec.config sets {} which the operator manages; ignored (forbidden prefixes: {})",
                ignored.join(", "),
                FORBIDDEN_PREFIXES.join(", ")
            ),
        ));
    }
    for (key, value) in CONFIG_DEFAULTS {
        user.entry((*key).to_owned())
            .or_insert_with(|| (*value).to_owned());
    }

    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(Resolved {
        alias,
        replicas,
        bootstrap_servers,
        group_id,
        config_storage_topic,
        status_storage_topic,
        offset_storage_topic,
        config: user,
        warnings,
        security,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::json;

    fn members() -> Members {
        Members {
            own: "alpha".into(),
            all: ["alpha".into(), "beta".into()].into(),
        }
    }

    fn connect(spec: Value, annotations: Value) -> KafkaConnect {
        serde_json::from_value(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaConnect",
            "metadata": {"name": "my-connect", "namespace": "ns", "annotations": annotations},
            "spec": spec
        }))
        .unwrap()
    }

    fn reasons(e: &[Invalid]) -> Vec<&'static str> {
        e.iter().map(Invalid::reason).collect()
    }

    #[test]
    fn v1_fields_win_and_forbidden_keys_are_ignored_with_a_warning() {
        let c = connect(
            json!({"replicas": 2, "bootstrapServers": "k:9092", "groupId": "g",
                   "configStorageTopic": "c", "statusStorageTopic": "s", "offsetStorageTopic": "o",
                   "config": {"group.id": "old", "rest.port": 1, "ssl.protocol": "TLSv1.3",
                              "config.storage.replication.factor": 3, "key.converter": "x.K",
                              "SASL.mechanism": "PLAIN", "nothing": null}}),
            json!({"strimzi.io/stretch-cluster-alias": "beta"}),
        );
        let r = resolve(&c, &members()).unwrap();
        assert_eq!(r.alias, "beta");
        assert_eq!(r.replicas, 2);
        assert_eq!(
            (
                r.group_id.as_str(),
                r.config_storage_topic.as_str(),
                r.status_storage_topic.as_str(),
                r.offset_storage_topic.as_str()
            ),
            ("g", "c", "s", "o")
        );
        assert_eq!(
            r.config,
            BTreeMap::from([
                ("config.storage.replication.factor".into(), "3".into()),
                ("key.converter".into(), "x.K".into()),
                ("ssl.protocol".into(), "TLSv1.3".into()),
                (
                    "value.converter".into(),
                    "org.apache.kafka.connect.json.JsonConverter".into()
                ),
            ])
        );
        assert_eq!(r.warnings.len(), 1);
        assert_eq!(r.warnings[0].0, WARNING_FORBIDDEN_CONFIG);
        assert!(
            r.warnings[0]
                .1
                .contains("SASL.mechanism, group.id, rest.port")
        );
    }

    #[test]
    fn v1beta2_config_keys_and_defaults() {
        let c = connect(
            json!({"bootstrapServers": "k:9092", "config": {"group.id": "legacy",
                   "offset.storage.topic": "legacy-offsets"}}),
            json!({}),
        );
        let r = resolve(&c, &members()).unwrap();
        assert_eq!(r.alias, "alpha", "no annotation: central's own cluster");
        assert_eq!(r.replicas, DEFAULT_REPLICAS);
        assert_eq!(r.group_id, "legacy");
        assert_eq!(r.offset_storage_topic, "legacy-offsets");
        assert_eq!(r.config_storage_topic, DEFAULT_CONFIG_STORAGE_TOPIC);
        assert!(!r.config.contains_key("group.id"));
        let reasons: Vec<_> = r.warnings.iter().map(|w| w.0.as_str()).collect();
        assert_eq!(
            reasons,
            [WARNING_DEFAULT_GROUP],
            "legacy keys are not 'ignored'"
        );
        assert!(r.warnings[0].1.contains("config.storage.topic"));
    }

    #[test]
    fn every_problem_is_reported() {
        let c = connect(
            json!({"replicas": -1, "bootstrapServers": "k:9092,nohost,k:0,k:99999",
                   "groupId": "g", "configStorageTopic": "t", "statusStorageTopic": "t",
                   "offsetStorageTopic": "o", "authentication": {"type": "oauth"},
                   "config": {"a": {"b": 1}, "l": [1]}}),
            json!({"strimzi.io/stretch-cluster-alias": "gamma"}),
        );
        let e = resolve(&c, &members()).unwrap_err();
        assert_eq!(
            reasons(&e),
            [
                "UnknownClusterAlias",
                "InvalidReplicas",
                "InvalidBootstrapServers",
                "InvalidBootstrapServers",
                "InvalidBootstrapServers",
                "UnsupportedField",
                "InvalidConfig",
                "InvalidConfig",
                "InvalidConfig",
            ]
        );
        let text: Vec<String> = e.iter().map(ToString::to_string).collect();
        assert!(text[0].contains("\"gamma\"") && text[0].contains("alpha, beta"));
        assert!(text[8].contains("\"t\" is used twice"));
    }

    #[test]
    fn empty_bootstrap_servers_are_refused() {
        let c = connect(json!({"bootstrapServers": " "}), json!({}));
        assert_eq!(
            reasons(&resolve(&c, &members()).unwrap_err()),
            ["MissingBootstrapServers"]
        );
    }

    #[test]
    fn forbidden_prefixes_follow_strimzi() {
        for key in [
            "group.id",
            "listeners.https.ssl.keystore",
            "rest.advertised.host.name",
            "plugin.path",
            "security.protocol",
            "producer.interceptor.classes",
        ] {
            assert!(is_forbidden(key), "{key}");
        }
        for key in [
            "ssl.endpoint.identification.algorithm",
            "producer.ssl.truststore.location",
            "config.storage.replication.factor",
            "key.converter",
            "connector.client.config.override.policy",
        ] {
            assert!(!is_forbidden(key), "{key}");
        }
    }
}
