//! From a `KafkaConnect` to the effective settings of its workers (Strimzi's semantics for
//! `groupId`, the storage topics, replicas and the user `config`), or every problem that makes
//! it unusable. Pure.

use std::collections::BTreeMap;

use kstretch_api::common::{ConfigMapKeyRef, ConfigValues};
use kstretch_api::{KafkaConnect, KafkaConnectSpec, names};
use kstretch_core::kraft;
use kube::ResourceExt;
use serde_json::Value;

use super::security;
use super::warning::{Reason, Warning};
use crate::jmx_exporter;
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
    pub warnings: Vec<Warning>,
    /// How the workers reach Kafka (`spec.tls`, `spec.authentication`).
    pub security: security::Security,
    /// The ConfigMap key with the JMX exporter's rules, when the workers serve metrics with it.
    pub metrics: Option<ConfigMapKeyRef>,
    /// Strimzi's metrics reporter, when the workers serve metrics with it.
    pub metrics_reporter: Option<kraft::MetricsReporter>,
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
    #[error("{0}")]
    Metrics(String),
    #[error("{0}")]
    Logging(String),
    #[error("{0}")]
    Probe(String),
    #[error(
        ".spec.build asks for an image built with the plugins {plugins}; kstretch builds no images (it has no image build or registry to rely on): build an image FROM the Kafka image with these plugins under /opt/kafka/plugins, set it as .spec.image and remove .spec.build"
    )]
    Build { plugins: String },
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
            Self::Metrics(_) => jmx_exporter::REASON,
            Self::Logging(_) => crate::logging::REASON,
            Self::Probe(_) => crate::probes::REASON,
            Self::Build { .. } => "BuildNotSupported",
        }
    }
}

/// Whether `key` is set by the operator (Strimzi's prefix rules; keys compared in lower case).
pub fn is_forbidden(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    FORBIDDEN_PREFIXES.iter().any(|p| lower.starts_with(p))
        && !FORBIDDEN_PREFIX_EXCEPTIONS.contains(&lower.as_str())
}

/// Strimzi's `build`, refused: workers without the plugins it names would run connectors that
/// fail to load.
fn build(spec: &KafkaConnectSpec) -> Option<Invalid> {
    let build = spec.unmodelled.get("build")?;
    let names: Vec<&str> = build["plugins"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["name"].as_str())
        .collect();
    let plugins = if names.is_empty() {
        "(none named)".to_owned()
    } else {
        names.join(", ")
    };
    Some(Invalid::Build { plugins })
}

/// Validates `connect` and computes its effective settings.
pub fn resolve(connect: &KafkaConnect, members: &Members) -> Result<Resolved, Vec<Invalid>> {
    let spec = &connect.spec;
    // Each step's problems are recorded and a stand-in taken, so that every problem is
    // reported: with any, the result is an error.
    let mut problems = Vec::new();
    let alias = alias(connect, members).unwrap_or_else(|problem| {
        problems.push(problem);
        String::new()
    });
    let replicas = replicas(spec.replicas).unwrap_or_else(|problem| {
        problems.push(problem);
        0
    });
    let bootstrap_servers = bootstrap_servers(&spec.bootstrap_servers).unwrap_or_else(|found| {
        problems.extend(found);
        String::new()
    });
    let security = security::read(connect).unwrap_or_else(|problem| {
        problems.push(problem.into());
        security::Security::default()
    });
    let (user, found) = user_config(spec.config.as_ref());
    problems.extend(found);
    let (group, defaulted) = GroupAndTopics::of(spec, &user);
    problems.extend(group.shared_topics());
    let metrics = jmx_exporter::source(spec.metrics_config.as_ref(), jmx_exporter::CONNECT)
        .unwrap_or_else(|refusal| {
            problems.push(Invalid::Metrics(refusal.message));
            None
        });
    let metrics_reporter =
        jmx_exporter::reporter(spec.metrics_config.as_ref(), jmx_exporter::CONNECT).unwrap_or_else(
            |refusal| {
                problems.push(Invalid::Metrics(refusal.message));
                None
            },
        );
    problems.extend(crate::logging::invalid(".spec", spec.logging.as_ref()).map(Invalid::Logging));
    problems
        .extend(crate::probes::invalid(".spec", spec.liveness_probe.as_ref()).map(Invalid::Probe));
    problems.extend(build(spec));

    let mut warnings = Vec::new();
    warnings.extend(default_group_warning(&defaulted));
    let (config, ignored) = worker_config(spec, user);
    warnings.extend(ignored);

    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(Resolved {
        alias,
        replicas,
        bootstrap_servers,
        group_id: group.group_id,
        config_storage_topic: group.config_storage_topic,
        status_storage_topic: group.status_storage_topic,
        offset_storage_topic: group.offset_storage_topic,
        config,
        warnings,
        security,
        metrics,
        metrics_reporter,
    })
}

/// The member cluster the workers run in: the stretch alias annotation's, else central's own
/// (`own`); whether it is a member is checked by [`validate`].
pub fn placed_in(connect: &KafkaConnect, own: &str) -> String {
    connect
        .annotations()
        .get(names::STRETCH_CLUSTER_ALIAS)
        .map(|a| a.trim().to_owned())
        .unwrap_or_else(|| own.to_owned())
}

fn alias(connect: &KafkaConnect, members: &Members) -> Result<String, Invalid> {
    let alias = placed_in(connect, &members.own);
    if !members.all.contains(&alias) {
        return Err(Invalid::UnknownClusterAlias {
            alias,
            known: members.all.iter().cloned().collect::<Vec<_>>().join(", "),
        });
    }
    Ok(alias)
}

/// `spec.replicas`, else [`DEFAULT_REPLICAS`].
fn replicas(replicas: Option<i32>) -> Result<u32, Invalid> {
    match replicas {
        None => Ok(DEFAULT_REPLICAS),
        Some(r) => u32::try_from(r).map_err(|_| Invalid::NegativeReplicas(r)),
    }
}

/// `spec.bootstrapServers`, trimmed, if it is a list of `host:port`; else every problem.
fn bootstrap_servers(value: &str) -> Result<String, Vec<Invalid>> {
    let bootstrap_servers = value.trim().to_owned();
    let mut problems = Vec::new();
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
    if problems.is_empty() {
        Ok(bootstrap_servers)
    } else {
        Err(problems)
    }
}

/// The user's `config` as text (a `null` is no setting), and a problem for each value that is
/// a list or an object.
fn user_config(config: Option<&ConfigValues>) -> (BTreeMap<String, String>, Vec<Invalid>) {
    let mut user = BTreeMap::new();
    let mut problems = Vec::new();
    for (key, value) in config.into_iter().flatten() {
        let invalid = |kind| Invalid::InvalidConfigValue {
            key: key.clone(),
            kind,
        };
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Null => continue,
            Value::Array(_) => {
                problems.push(invalid("a list"));
                continue;
            }
            Value::Object(_) => {
                problems.push(invalid("an object"));
                continue;
            }
        };
        user.insert(key.clone(), text);
    }
    (user, problems)
}

/// The group ID and storage topics of the workers.
#[derive(Debug, PartialEq, Eq)]
struct GroupAndTopics {
    group_id: String,
    config_storage_topic: String,
    status_storage_topic: String,
    offset_storage_topic: String,
}

impl GroupAndTopics {
    /// The v1 fields first; v1beta2 resources set these in `config` (`user`, where they are
    /// otherwise forbidden), and resources setting neither get Strimzi's old defaults. With the
    /// `config` keys of those that were defaulted.
    fn of(spec: &KafkaConnectSpec, user: &BTreeMap<String, String>) -> (Self, Vec<String>) {
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
        let group = GroupAndTopics {
            group_id: pick(&spec.group_id, "group.id", DEFAULT_GROUP_ID),
            config_storage_topic: pick(
                &spec.config_storage_topic,
                "config.storage.topic",
                DEFAULT_CONFIG_STORAGE_TOPIC,
            ),
            status_storage_topic: pick(
                &spec.status_storage_topic,
                "status.storage.topic",
                DEFAULT_STATUS_STORAGE_TOPIC,
            ),
            offset_storage_topic: pick(
                &spec.offset_storage_topic,
                "offset.storage.topic",
                DEFAULT_OFFSET_STORAGE_TOPIC,
            ),
        };
        (group, defaulted)
    }

    /// A problem for each storage topic that an earlier one already names.
    fn shared_topics(&self) -> Vec<Invalid> {
        let topics = [
            &self.config_storage_topic,
            &self.status_storage_topic,
            &self.offset_storage_topic,
        ];
        topics
            .iter()
            .enumerate()
            .filter(|(i, topic)| topics[..*i].contains(topic))
            .map(|(_, topic)| Invalid::SharedStorageTopic {
                topic: (*topic).clone(),
            })
            .collect()
    }
}

/// The warning that the `config` keys `defaulted` took Strimzi's defaults, if any did.
fn default_group_warning(defaulted: &[String]) -> Option<Warning> {
    (!defaulted.is_empty()).then(|| {
        Warning::new(
            Reason::DefaultGroupIdAndTopics,
            format!(
                "{} not set, so Strimzi's defaults are used; two Connect clusters sharing a Kafka cluster with these defaults would join each other's group: set spec.groupId, spec.configStorageTopic, spec.statusStorageTopic and spec.offsetStorageTopic",
                defaulted.join(", ")
            ),
        )
    })
}

/// The user's `config` as the workers get it, forbidden keys removed and
/// [`CONFIG_DEFAULTS`] added, and the warning naming the forbidden keys it ignored, if any.
fn worker_config(
    spec: &KafkaConnectSpec,
    mut user: BTreeMap<String, String>,
) -> (BTreeMap<String, String>, Option<Warning>) {
    // The v1beta2 keys that were taken into the group and topics are not "ignored".
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
    for (key, value) in CONFIG_DEFAULTS {
        user.entry((*key).to_owned())
            .or_insert_with(|| (*value).to_owned());
    }
    let warning = (!ignored.is_empty()).then(|| {
        Warning::new(
            Reason::ForbiddenConfigIgnored,
            format!(
                "spec.config sets {} which the operator manages; ignored (forbidden prefixes: {})",
                ignored.join(", "),
                FORBIDDEN_PREFIXES.join(", ")
            ),
        )
    });
    (user, warning)
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
        assert_eq!(r.warnings[0].reason, Reason::ForbiddenConfigIgnored);
        assert!(
            r.warnings[0]
                .message
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
        let reasons: Vec<_> = r.warnings.iter().map(|w| w.reason).collect();
        assert_eq!(
            reasons,
            [Reason::DefaultGroupIdAndTopics],
            "legacy keys are not 'ignored'"
        );
        assert!(r.warnings[0].message.contains("config.storage.topic"));
    }

    #[test]
    fn a_build_is_refused_naming_its_plugins_and_what_to_do_instead() {
        let build = json!({"output": {"type": "docker", "image": "r.example.com/c:latest"},
                           "plugins": [{"name": "kafka-connect-file", "artifacts": []},
                                       {"name": "debezium-postgres", "artifacts": []}]});
        let c = connect(
            json!({"bootstrapServers": "k:9092", "build": build}),
            json!({}),
        );
        let problems = resolve(&c, &members()).unwrap_err();
        assert_eq!(reasons(&problems), ["BuildNotSupported"]);
        let message = problems[0].to_string();
        assert!(
            message.contains("plugins kafka-connect-file, debezium-postgres")
                && message.contains("set it as .spec.image and remove .spec.build"),
            "{message}"
        );
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
    fn metrics_need_their_rules_named_and_the_reporter_serves_strimzis_connect_list() {
        let base = json!({"bootstrapServers": "k:9092"});
        let with = |metrics: Value| {
            let mut spec = base.clone();
            spec["metricsConfig"] = metrics;
            resolve(&connect(spec, json!({})), &members())
        };
        let served = with(json!({"type": "jmxPrometheusExporter", "valueFrom":
            {"configMapKeyRef": {"name": "connect-metrics", "key": "metrics-config.yml"}}}))
        .unwrap();
        assert_eq!(
            served.metrics.map(|m| (m.name, m.key)),
            Some(("connect-metrics".into(), "metrics-config.yml".into()))
        );
        let unnamed = with(json!({"type": "jmxPrometheusExporter"})).unwrap_err();
        assert_eq!(reasons(&unnamed), ["InvalidMetricsConfig"]);
        assert!(
            unnamed[0].to_string().starts_with(
                ".spec.metricsConfig of type jmxPrometheusExporter needs valueFrom.configMapKeyRef"
            ),
            "{}",
            unnamed[0]
        );
        let reporter = with(json!({"type": "strimziMetricsReporter"})).unwrap();
        assert_eq!(reporter.metrics, None);
        let allow_list = reporter.metrics_reporter.unwrap().allow_list;
        assert_eq!(allow_list.len(), jmx_exporter::CONNECT_ALLOW_LIST.len());
        assert!(allow_list.contains(&"kafka_connect_connect_worker_metrics_.*".to_owned()));
        assert!(
            !reporter
                .warnings
                .iter()
                .any(|w| w.reason == Reason::NotActedOn),
            "{:?}",
            reporter.warnings
        );
        let own = with(json!({"type": "strimziMetricsReporter",
            "values": {"allowList": ["kafka_connect_.*"]}}))
        .unwrap();
        assert_eq!(
            own.metrics_reporter.unwrap().allow_list,
            ["kafka_connect_.*"]
        );
        let empty = with(json!({"type": "strimziMetricsReporter", "values": {"allowList": []}}))
            .unwrap_err();
        assert_eq!(reasons(&empty), ["InvalidMetricsConfig"]);
        assert_eq!(
            resolve(&connect(base, json!({})), &members())
                .unwrap()
                .metrics,
            None
        );
    }

    #[test]
    fn logging_that_cannot_be_read_is_refused_naming_what_to_fix() {
        let with = |logging: Value| {
            resolve(
                &connect(
                    json!({"bootstrapServers": "k:9092", "logging": logging}),
                    json!({}),
                ),
                &members(),
            )
        };
        assert!(with(json!({"type": "inline", "loggers": {"rootLogger.level": "DEBUG"}})).is_ok());
        let unnamed = with(json!({"type": "external"})).unwrap_err();
        assert_eq!(reasons(&unnamed), ["InvalidLoggingConfig"]);
        assert!(
            unnamed[0]
                .to_string()
                .starts_with(".spec.logging is external without valueFrom"),
            "{}",
            unnamed[0]
        );
        let both = with(
            json!({"type": "external", "loggers": {"rootLogger.level": "DEBUG"},
            "valueFrom": {"configMapKeyRef": {"name": "logs", "key": "log4j2.properties"}}}),
        )
        .unwrap_err();
        assert_eq!(reasons(&both), ["InvalidLoggingConfig"]);
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

    #[test]
    fn the_alias_is_trimmed_and_must_name_a_member_cluster() {
        let with = |alias: &str| {
            connect(
                json!({"bootstrapServers": "k:9092"}),
                json!({"strimzi.io/stretch-cluster-alias": alias}),
            )
        };
        assert_eq!(alias(&with(" beta "), &members()).unwrap(), "beta");
        let no_annotation = connect(json!({"bootstrapServers": "k:9092"}), json!({}));
        assert_eq!(alias(&no_annotation, &members()).unwrap(), "alpha");
        assert_eq!(
            alias(&with("gamma"), &members()).unwrap_err(),
            Invalid::UnknownClusterAlias {
                alias: "gamma".into(),
                known: "alpha, beta".into()
            }
        );
    }

    #[test]
    fn replicas_default_to_strimzis_and_are_never_negative() {
        assert_eq!(replicas(None).unwrap(), DEFAULT_REPLICAS);
        assert_eq!(replicas(Some(0)).unwrap(), 0);
        assert_eq!(
            replicas(Some(-2)).unwrap_err(),
            Invalid::NegativeReplicas(-2)
        );
    }

    #[test]
    fn bootstrap_servers_are_trimmed_and_every_entry_needs_a_host_and_a_port() {
        assert_eq!(
            bootstrap_servers(" a:9092, ,b:9093 ").unwrap(),
            "a:9092, ,b:9093"
        );
        assert_eq!(
            bootstrap_servers("").unwrap_err(),
            [Invalid::MissingBootstrapServers]
        );
        assert_eq!(
            bootstrap_servers(":9092,a,a:0,a:x,[::1]:9092").unwrap_err(),
            [":9092", "a", "a:0", "a:x"].map(|e| Invalid::InvalidBootstrapServers(e.to_owned()))
        );
    }

    #[test]
    fn config_values_become_text_and_lists_and_objects_are_refused() {
        let config: ConfigValues = serde_json::from_value(json!({
            "s": "x", "n": 1.5, "b": false, "z": null, "l": [1], "o": {"a": 1}}))
        .unwrap();
        let (user, problems) = user_config(Some(&config));
        assert_eq!(
            user,
            BTreeMap::from([
                ("b".into(), "false".into()),
                ("n".into(), "1.5".into()),
                ("s".into(), "x".into()),
            ])
        );
        assert_eq!(
            problems,
            [
                Invalid::InvalidConfigValue {
                    key: "l".into(),
                    kind: "a list"
                },
                Invalid::InvalidConfigValue {
                    key: "o".into(),
                    kind: "an object"
                },
            ]
        );
        assert_eq!(user_config(None), (BTreeMap::new(), vec![]));
    }

    #[test]
    fn each_storage_topic_named_before_is_a_problem_and_defaults_are_named() {
        let spec = connect(
            json!({"bootstrapServers": "k:9092", "statusStorageTopic": "t"}),
            json!({}),
        )
        .spec;
        let user = BTreeMap::from([
            ("config.storage.topic".to_owned(), "t".to_owned()),
            ("offset.storage.topic".to_owned(), "t".to_owned()),
        ]);
        let (group, defaulted) = GroupAndTopics::of(&spec, &user);
        assert_eq!(group.group_id, DEFAULT_GROUP_ID);
        assert_eq!(defaulted, ["group.id"]);
        assert_eq!(
            group.shared_topics(),
            [
                Invalid::SharedStorageTopic { topic: "t".into() },
                Invalid::SharedStorageTopic { topic: "t".into() },
            ]
        );
        let warning = default_group_warning(&defaulted).unwrap();
        assert_eq!(warning.reason, Reason::DefaultGroupIdAndTopics);
        assert!(
            warning.message.starts_with("group.id not set"),
            "{}",
            warning.message
        );
        assert_eq!(default_group_warning(&[]), None);
    }

    #[test]
    fn forbidden_keys_are_dropped_and_named_unless_taken_as_v1beta2_settings() {
        let v1 = connect(
            json!({"bootstrapServers": "k:9092", "groupId": "g"}),
            json!({}),
        )
        .spec;
        let user = BTreeMap::from([
            ("group.id".to_owned(), "old".to_owned()),
            ("offset.storage.topic".to_owned(), "o".to_owned()),
            ("value.converter".to_owned(), "mine".to_owned()),
        ]);
        let (config, warning) = worker_config(&v1, user);
        assert_eq!(
            config,
            BTreeMap::from([
                (
                    "key.converter".into(),
                    "org.apache.kafka.connect.json.JsonConverter".into()
                ),
                ("value.converter".into(), "mine".into()),
            ])
        );
        let Warning { reason, message } = warning.unwrap();
        assert_eq!(reason, Reason::ForbiddenConfigIgnored);
        assert!(
            message.starts_with("spec.config sets group.id which"),
            "offset.storage.topic was taken as the v1beta2 setting: {message}"
        );
        let (_, none) = worker_config(&v1, BTreeMap::new());
        assert_eq!(none, None);
    }
}
