//! `metricsConfig` on a `Kafka`'s nodes (controllers too) and a `KafkaConnect`'s workers, as
//! Strimzi serves it, on port 9404 (`tcp-prometheus`) of every pod. `jmxPrometheusExporter`: the JMX
//! Prometheus exporter as a Java agent with the rules of the user's ConfigMap, which each member
//! cluster gets in a ConfigMap of its own that the exporter reads again when it changes (a
//! change of rules rolls nothing). `strimziMetricsReporter`: Strimzi's metrics reporter on
//! Kafka's class path, with the allow list of `values` (Kafka's options: core's
//! [`kraft::MetricsReporter`]). The jars of both come from the agent's image (an init container
//! copies them out: the Kafka image lacks them). Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource, EnvVar,
    SecurityContext, Volume, VolumeMount,
};
use kstretch_api::common::{ConfigMapKeyRef, MetricsConfig, MetricsType};
use kstretch_core::kraft;
use serde_json::{Value, json};

use crate::objects;
use crate::status::Refusal;

/// The port and its name, Strimzi's, which its PodMonitors select.
pub const PORT: u16 = 9404;
pub const PORT_NAME: &str = "tcp-prometheus";
/// Where the exporter's jar and rules are in a Kafka container.
const JAR_DIR: &str = "/opt/kstretch/metrics";
const RULES_DIR: &str = "/opt/kstretch/metrics-config";
const RULES_KEY: &str = "metrics-config.yml";
const JAR: &str = "jmx_prometheus_javaagent.jar";
/// The reporter's jars, in a directory of their own: the exporter's jar bundles other versions
/// of the same Prometheus classes, which must not be on Kafka's class path with them.
const REPORTER_DIR: &str = "reporter";
/// The init container that copies the jar, and where it mounts the jar's volume (not over
/// the image's own directory of it).
pub const INIT_CONTAINER: &str = "metrics-agent";
const INIT_DIR: &str = "/opt/kstretch/metrics-install";
const JAR_VOLUME: &str = "metrics-agent";
const RULES_VOLUME: &str = "metrics-config";
/// The exporter's Java agent, apart from `KAFKA_OPTS`: a Kafka tool run in the container
/// (`kubectl exec ... kafka-topics.sh`) reads `KAFKA_OPTS` too, and its agent would fail on the
/// server's taken port. Only the server's start adds it ([`start`]), as Strimzi's start script
/// adds its agent.
pub const AGENT_ENV: &str = "KSTRETCH_METRICS_AGENT";
/// Why a `Kafka` or `KafkaConnect` is not ready when its metrics cannot be served.
pub const REASON: &str = "InvalidMetricsConfig";

/// Whose metrics: where its `metricsConfig` is and what its pods are, for the messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Served {
    pub field: &'static str,
    pub pods: &'static str,
    /// What Strimzi's reporter serves when `values.allowList` does not say (Strimzi's default
    /// for the kind).
    pub allow_list: &'static [&'static str],
}

/// A `Kafka`'s nodes.
pub const KAFKA: Served = Served {
    field: ".spec.kafka.metricsConfig",
    pods: "nodes",
    allow_list: DEFAULT_ALLOW_LIST,
};

/// A `KafkaConnect`'s workers.
pub const CONNECT: Served = Served {
    field: ".spec.metricsConfig",
    pods: "workers",
    allow_list: CONNECT_ALLOW_LIST,
};

/// What Strimzi's reporter serves of a Connect worker by default (Strimzi's list, which its
/// Connect dashboard reads).
pub const CONNECT_ALLOW_LIST: &[&str] = &[
    "kafka_admin_client_admin_client_metrics_connection_count",
    "kafka_connect_connect_coordinator_metrics.*",
    "kafka_connect_connector_metrics.*",
    "kafka_connect_connector_task_metrics.*",
    "kafka_connect_connect_worker_metrics_.*",
    "kafka_connect_connect_worker_rebalance.*",
    "kafka_connect_task_error_metrics.*",
    "kafka_consumer_consumer_coordinator_metrics.*",
    "kafka_consumer_consumer_fetch_manager_metrics.*",
    "kafka_consumer_consumer_metrics.*",
    "kafka_producer_producer_metrics.*",
    "kafka_producer_producer_node_metrics_incoming_byte",
    "kafka_producer_producer_topic.*",
];

/// The ConfigMap key with the exporter's rules, for a `jmxPrometheusExporter`; `None` without
/// metrics or with a type not served (a warning names it); `Err` when the rules are not named.
pub fn source(
    config: Option<&MetricsConfig>,
    served: Served,
) -> Result<Option<ConfigMapKeyRef>, Refusal> {
    let Some(config) = config.filter(|c| c.type_ == MetricsType::JmxPrometheusExporter) else {
        return Ok(None);
    };
    match &config.value_from {
        Some(from) => Ok(Some(from.config_map_key_ref.clone())),
        None => Err(Refusal::new(
            REASON,
            format!(
                "{} of type jmxPrometheusExporter needs valueFrom.configMapKeyRef naming the ConfigMap key with the exporter's rules",
                served.field
            ),
        )),
    }
}

/// The metric names Strimzi's reporter serves of a Kafka node when `values.allowList` does not
/// say (Strimzi's default).
pub const DEFAULT_ALLOW_LIST: &[&str] = &[
    "kafka_cluster_partition.*",
    "kafka_controller_kafkacontroller.*",
    "kafka_controller_controllerstats_uncleanleaderelectionspersec",
    "kafka_log_log_size",
    "kafka_network_requestmetrics.*",
    "kafka_network_socketserver_networkprocessoravgidlepercent",
    "kafka_server_app_info.*",
    "kafka_server_brokertopicmetrics.*",
    "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
    "kafka_server_kafkaserver_brokerstate",
    "kafka_server_kafkaserver_clusterid",
    "kafka_server_kafkaserver_linux.*",
    "kafka_server_raft.*",
    "kafka_server_replicamanager.*",
    "kafka_server_request_queue_size",
    "kafka_server_socket_server.*",
];

/// Strimzi's metrics reporter for a `strimziMetricsReporter`; `None` without metrics or for
/// the exporter; `Err` when `values.allowList` is not a list of patterns Kafka can read.
pub fn reporter(
    config: Option<&MetricsConfig>,
    served: Served,
) -> Result<Option<kraft::MetricsReporter>, Refusal> {
    let Some(config) = config.filter(|c| c.type_ == MetricsType::StrimziMetricsReporter) else {
        return Ok(None);
    };
    let refused =
        |why: String| Refusal::new(REASON, format!("{}.values.allowList {why}", served.field));
    let allow_list = match config.values.as_ref().and_then(|v| v.get("allowList")) {
        None | Some(Value::Null) => served.allow_list.iter().map(|s| (*s).to_owned()).collect(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map(str::to_owned))
            .collect::<Option<Vec<String>>>()
            .ok_or_else(|| refused("must be a list of strings".to_owned()))?,
        Some(_) => return Err(refused("must be a list of strings".to_owned())),
    };
    if allow_list.is_empty() {
        return Err(refused(
            "is empty: name at least one regular expression of the metrics to serve".to_owned(),
        ));
    }
    // The patterns are Java's (the reporter compiles them); only what breaks the list is checked.
    for pattern in &allow_list {
        if pattern.is_empty() || pattern.contains(',') {
            return Err(refused(format!(
                "has {pattern:?}: Kafka reads the list comma-separated, so a pattern can be neither empty nor hold a comma"
            )));
        }
    }
    Ok(Some(kraft::MetricsReporter { allow_list }))
}

/// The rules in `data` (the ConfigMap's, `None` when it does not exist), or why they cannot be
/// used.
pub fn rules(
    source: &ConfigMapKeyRef,
    data: Option<&BTreeMap<String, String>>,
    served: Served,
) -> Result<String, Refusal> {
    crate::config_map::key_text(source, data, |what| {
        Refusal::new(
            REASON,
            format!(
                "{} names {what}; create it with the JMX exporter's rules or fix valueFrom.configMapKeyRef (the {} run on without metrics changes until then)",
                served.field, served.pods
            ),
        )
    })
}

/// The ConfigMap a member cluster's pods of `owner` (a `Kafka`'s name, a `KafkaConnect`'s
/// component) read their rules from.
pub fn config_map_name(owner: &str) -> String {
    format!("{owner}-kstretch-metrics")
}

pub fn config_map(
    owner: &str,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    rules: &str,
) -> Value {
    objects::to_json(&ConfigMap {
        metadata: objects::meta(&config_map_name(owner), namespace, labels.clone()),
        data: Some(BTreeMap::from([(RULES_KEY.to_owned(), rules.to_owned())])),
        ..Default::default()
    })
}

/// How a pod serves metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodMetrics {
    /// The JMX exporter as a Java agent.
    Exporter,
    /// Strimzi's reporter on Kafka's class path (its options are Kafka's).
    Reporter,
}

/// What a start script runs before it starts the server: with the exporter, the Java agent
/// joins the user's `KAFKA_OPTS` for the server alone. Nothing otherwise, so that the script
/// (and the pod's revision) of a node without the exporter is what it was.
pub fn start(how: Option<PodMetrics>) -> &'static str {
    match how {
        Some(PodMetrics::Exporter) => {
            "export KAFKA_OPTS=\"${KAFKA_OPTS:+$KAFKA_OPTS }$KSTRETCH_METRICS_AGENT\"; "
        }
        Some(PodMetrics::Reporter) | None => "",
    }
}

/// What a pod's Kafka container gets to serve metrics: the port, the jars' volume, and for the
/// exporter the Java agent in [`AGENT_ENV`] (see [`start`]) and the rules' volume (`owner`'s,
/// see [`config_map_name`]), for the reporter its jars on `CLASSPATH` (which Kafka's start
/// scripts add to the class path).
pub fn add_to_container(
    owner: &str,
    how: PodMetrics,
    env: &mut Vec<EnvVar>,
    ports: &mut Vec<ContainerPort>,
    mounts: &mut Vec<VolumeMount>,
    volumes: &mut Vec<Volume>,
) {
    if how == PodMetrics::Exporter {
        add_exporter(owner, env, mounts, volumes);
    } else {
        env.push(EnvVar {
            name: "CLASSPATH".to_owned(),
            value: Some(format!("{JAR_DIR}/{REPORTER_DIR}/*")),
            value_from: None,
        });
    }
    ports.push(ContainerPort {
        name: Some(PORT_NAME.to_owned()),
        container_port: PORT.into(),
        ..Default::default()
    });
    mounts.push(VolumeMount {
        name: JAR_VOLUME.to_owned(),
        mount_path: JAR_DIR.to_owned(),
        read_only: Some(true),
        ..Default::default()
    });
    volumes.push(Volume {
        name: JAR_VOLUME.to_owned(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    });
}

/// The exporter's Java agent and rules.
fn add_exporter(
    owner: &str,
    env: &mut Vec<EnvVar>,
    mounts: &mut Vec<VolumeMount>,
    volumes: &mut Vec<Volume>,
) {
    env.push(EnvVar {
        name: AGENT_ENV.to_owned(),
        value: Some(format!(
            "-javaagent:{JAR_DIR}/{JAR}={PORT}:{RULES_DIR}/{RULES_KEY}"
        )),
        value_from: None,
    });
    mounts.push(VolumeMount {
        name: RULES_VOLUME.to_owned(),
        mount_path: RULES_DIR.to_owned(),
        read_only: Some(true),
        ..Default::default()
    });
    volumes.push(Volume {
        name: RULES_VOLUME.to_owned(),
        config_map: Some(ConfigMapVolumeSource {
            name: config_map_name(owner),
            ..Default::default()
        }),
        ..Default::default()
    });
}

/// Gives every pod that serves metrics, in each member cluster of `objects`, the init container
/// that copies the exporter from that cluster's agent image (`images`, by alias, as each agent
/// reported its own). A cluster whose agent reported none cannot run the exporter: refused.
pub fn equip(
    objects: &mut BTreeMap<String, Vec<Value>>,
    images: &BTreeMap<String, String>,
    served: Served,
) -> Result<(), Refusal> {
    for (alias, list) in objects.iter_mut() {
        if !pods(list).any(serves) {
            continue;
        }
        let Some(image) = images.get(alias).filter(|i| !i.is_empty()) else {
            return Err(Refusal::new(
                REASON,
                format!(
                    "{}: the agent of cluster {alias} has not said which image it runs (its chart sets KSTRETCH_AGENT_IMAGE), and the {pods}' JMX exporter is copied from that image; upgrade or configure that agent (the {pods} run on unchanged until then)",
                    served.field,
                    pods = served.pods
                ),
            ));
        };
        add_init_container(list, image);
    }
    Ok(())
}

/// Adds the init container that copies the exporter from the agent's `image` to every pod of
/// `podsets` that serves metrics. Added after the pods' revisions are computed, so a new agent
/// image rolls no Kafka pod (new pods get it).
pub fn add_init_container(podsets: &mut [Value], image: &str) {
    let init = objects::value(&Container {
        name: INIT_CONTAINER.to_owned(),
        image: Some(image.to_owned()),
        args: Some(vec![
            "install-metrics-agent".to_owned(),
            "--to".to_owned(),
            INIT_DIR.to_owned(),
        ]),
        volume_mounts: Some(vec![VolumeMount {
            name: JAR_VOLUME.to_owned(),
            mount_path: INIT_DIR.to_owned(),
            ..Default::default()
        }]),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            ..Default::default()
        }),
        ..Default::default()
    });
    let pods = podsets
        .iter_mut()
        .filter(|o| o["kind"] == "StrimziPodSet")
        .flat_map(|o| o["spec"]["pods"].as_array_mut().into_iter().flatten());
    for pod in pods.filter(|p| serves(p)) {
        match pod["spec"]["initContainers"].as_array_mut() {
            Some(init_containers) => init_containers.push(init.clone()),
            None => pod["spec"]["initContainers"] = json!([init.clone()]),
        }
    }
}

/// The pods of the podsets among `objects`.
fn pods(objects: &[Value]) -> impl Iterator<Item = &Value> {
    objects
        .iter()
        .filter(|o| o["kind"] == "StrimziPodSet")
        .flat_map(|o| o["spec"]["pods"].as_array().into_iter().flatten())
}

/// Whether `pod` runs the exporter (it has the jar's volume).
fn serves(pod: &Value) -> bool {
    pod["spec"]["volumes"]
        .as_array()
        .is_some_and(|v| v.iter().any(|v| v["name"] == JAR_VOLUME))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn config(value: Value) -> MetricsConfig {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_rules_come_from_the_users_config_map_and_missing_ones_are_named() {
        let jmx = config(json!({"type": "jmxPrometheusExporter",
            "valueFrom": {"configMapKeyRef": {"name": "kafka-metrics", "key": "kafka-metrics-config.yml"}}}));
        let from = source(Some(&jmx), KAFKA).unwrap().unwrap();
        assert_eq!(from.name, "kafka-metrics");
        assert_eq!(source(None, KAFKA).unwrap(), None);
        let reporter = config(json!({"type": "strimziMetricsReporter"}));
        assert_eq!(source(Some(&reporter), KAFKA).unwrap(), None);
        let unnamed = source(
            Some(&config(json!({"type": "jmxPrometheusExporter"}))),
            KAFKA,
        )
        .unwrap_err();
        assert_eq!(unnamed.reason, REASON);
        assert!(
            unnamed.message.contains("valueFrom.configMapKeyRef"),
            "{}",
            unnamed.message
        );

        let data = BTreeMap::from([(
            "kafka-metrics-config.yml".to_owned(),
            "rules: []".to_owned(),
        )]);
        assert_eq!(rules(&from, Some(&data), KAFKA).unwrap(), "rules: []");
        let gone = rules(&from, None, KAFKA).unwrap_err();
        assert!(
            gone.message
                .contains("ConfigMap kafka-metrics, which does not exist"),
            "{}",
            gone.message
        );
        let other = BTreeMap::from([("other".to_owned(), String::new())]);
        let no_key = rules(&from, Some(&other), KAFKA).unwrap_err();
        assert!(
            no_key
                .message
                .contains("key kafka-metrics-config.yml of ConfigMap kafka-metrics"),
            "{}",
            no_key.message
        );
    }

    #[test]
    fn a_node_runs_the_exporter_after_the_users_options_and_pods_get_the_jar_from_the_agent() {
        let mut env = vec![EnvVar {
            name: "KAFKA_OPTS".to_owned(),
            value: Some("-Dx=1".to_owned()),
            value_from: None,
        }];
        let (mut ports, mut mounts, mut volumes) = (vec![], vec![], vec![]);
        add_to_container(
            "k",
            PodMetrics::Exporter,
            &mut env,
            &mut ports,
            &mut mounts,
            &mut volumes,
        );
        // The user's options stay as they are, for the tools run in the container too; the
        // agent is the server's alone.
        assert_eq!(env[0].value.as_deref(), Some("-Dx=1"));
        assert_eq!(env[1].name, AGENT_ENV);
        assert_eq!(
            env[1].value.as_deref(),
            Some(
                "-javaagent:/opt/kstretch/metrics/jmx_prometheus_javaagent.jar=9404:/opt/kstretch/metrics-config/metrics-config.yml"
            )
        );
        assert!(start(Some(PodMetrics::Exporter)).contains(&format!("${AGENT_ENV}\"")));
        assert_eq!(start(Some(PodMetrics::Reporter)), "");
        assert_eq!(start(None), "");
        assert_eq!(ports[0].name.as_deref(), Some("tcp-prometheus"));
        assert_eq!(ports[0].container_port, 9404);
        let rules = volumes.iter().find_map(|v| v.config_map.as_ref()).unwrap();
        assert_eq!(rules.name, "k-kstretch-metrics");

        let pod = json!({"metadata": {"name": "k-a-0"},
            "spec": {"volumes": objects::value(&volumes), "containers": []}});
        let plain =
            json!({"metadata": {"name": "k-a-1"}, "spec": {"volumes": [], "containers": []}});
        let mut podsets = vec![json!({"kind": "StrimziPodSet", "spec": {"pods": [pod, plain]}})];
        add_init_container(&mut podsets, "ghcr.io/kstretch/kstretch-agent:1");
        let pods = &podsets[0]["spec"]["pods"];
        let init = &pods[0]["spec"]["initContainers"][0];
        assert_eq!(init["image"], "ghcr.io/kstretch/kstretch-agent:1");
        // Not over the image's own copy of the jar.
        assert_eq!(
            init["volumeMounts"][0]["mountPath"],
            "/opt/kstretch/metrics-install"
        );
        assert_eq!(
            init["args"],
            json!([
                "install-metrics-agent",
                "--to",
                "/opt/kstretch/metrics-install"
            ])
        );
        assert_eq!(pods[1]["spec"].get("initContainers"), None);

        // By member cluster, each with its agent's image; one without is refused.
        let rules = config_map("k", "ns", &BTreeMap::new(), "rules: []");
        let mut objects = BTreeMap::from([
            ("alpha".to_owned(), vec![rules.clone(), podsets[0].clone()]),
            ("beta".to_owned(), vec![rules, podsets[0].clone()]),
        ]);
        let images = BTreeMap::from([("alpha".to_owned(), "agent:2".to_owned())]);
        let refused = equip(&mut objects, &images, KAFKA).unwrap_err();
        assert!(
            refused.message.contains("the agent of cluster beta"),
            "{}",
            refused.message
        );
        objects.remove("beta");
        equip(&mut objects, &images, KAFKA).unwrap();
        let pods = &objects["alpha"][1]["spec"]["pods"];
        assert_eq!(pods[0]["spec"]["initContainers"][1]["image"], "agent:2");
    }

    #[test]
    fn the_reporter_serves_strimzis_allow_list_unless_told_and_refuses_what_kafka_cannot_read() {
        let reporter = |values: Value| {
            let mut c = json!({"type": "strimziMetricsReporter"});
            if !values.is_null() {
                c["values"] = values;
            }
            super::reporter(Some(&serde_json::from_value(c).unwrap()), KAFKA)
        };
        let default = reporter(Value::Null).unwrap().unwrap();
        assert_eq!(default.allow_list.len(), DEFAULT_ALLOW_LIST.len());
        assert!(
            default
                .allow_list
                .contains(&"kafka_server_replicamanager.*".to_owned())
        );
        let chosen = reporter(json!({"allowList": ["kafka_log.*", "jvm_.*"]}))
            .unwrap()
            .unwrap();
        assert_eq!(chosen.allow_list, ["kafka_log.*", "jvm_.*"]);
        for (values, says) in [
            (json!({"allowList": []}), "is empty"),
            (json!({"allowList": "kafka.*"}), "must be a list of strings"),
            (json!({"allowList": ["a{1,2}"]}), "comma-separated"),
        ] {
            let refused = reporter(values).unwrap_err();
            assert_eq!(refused.reason, REASON);
            assert!(refused.message.contains(says), "{}", refused.message);
        }
        // The exporter is not the reporter.
        let exporter: MetricsConfig =
            serde_json::from_value(json!({"type": "jmxPrometheusExporter"})).unwrap();
        assert_eq!(super::reporter(Some(&exporter), KAFKA).unwrap(), None);

        // A node puts the reporter's jars on Kafka's class path and serves its port.
        let (mut env, mut ports, mut mounts, mut volumes) = (vec![], vec![], vec![], vec![]);
        add_to_container(
            "k",
            PodMetrics::Reporter,
            &mut env,
            &mut ports,
            &mut mounts,
            &mut volumes,
        );
        assert_eq!(env[0].name, "CLASSPATH");
        assert_eq!(
            env[0].value.as_deref(),
            Some("/opt/kstretch/metrics/reporter/*")
        );
        assert_eq!(ports[0].container_port, 9404);
        assert_eq!(volumes.len(), 1, "no rules: {volumes:?}");
        assert!(serves(
            &json!({"spec": {"volumes": objects::value(&volumes)}})
        ));
    }
}
