//! `metricsConfig` of type `jmxPrometheusExporter` on a `Kafka`'s nodes, as Strimzi serves it:
//! the JMX Prometheus exporter as a Java agent in every node (controllers too) on port 9404
//! (`tcp-prometheus`), with the rules of the user's ConfigMap. The exporter's jar comes from
//! the agent's image (an init container copies it out: the Kafka image lacks it), and each
//! member cluster gets the rules in a ConfigMap of its own, which the exporter reads again when
//! it changes: a change of rules rolls nothing. Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource, EnvVar,
    SecurityContext, Volume, VolumeMount,
};
use kstretch_api::common::{ConfigMapKeyRef, MetricsConfig, MetricsType};
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
/// The init container that copies the jar, and where it mounts the jar's volume (not over
/// the image's own directory of it).
pub const INIT_CONTAINER: &str = "metrics-agent";
const INIT_DIR: &str = "/opt/kstretch/metrics-install";
const JAR_VOLUME: &str = "metrics-agent";
const RULES_VOLUME: &str = "metrics-config";
/// Why a `Kafka` is not ready when its metrics cannot be served.
pub const REASON: &str = "InvalidMetricsConfig";

/// The ConfigMap key with the exporter's rules, for a `jmxPrometheusExporter`; `None` without
/// metrics or with a type not served (a warning names it); `Err` when the rules are not named.
pub fn source(config: Option<&MetricsConfig>) -> Result<Option<ConfigMapKeyRef>, Refusal> {
    let Some(config) = config.filter(|c| c.type_ == MetricsType::JmxPrometheusExporter) else {
        return Ok(None);
    };
    match &config.value_from {
        Some(from) => Ok(Some(from.config_map_key_ref.clone())),
        None => Err(Refusal::new(
            REASON,
            ".spec.kafka.metricsConfig of type jmxPrometheusExporter needs valueFrom.configMapKeyRef naming the ConfigMap key with the exporter's rules".to_owned(),
        )),
    }
}

/// The rules in `data` (the ConfigMap's, `None` when it does not exist), or why they cannot be
/// used.
pub fn rules(
    source: &ConfigMapKeyRef,
    data: Option<&BTreeMap<String, String>>,
) -> Result<String, Refusal> {
    let missing = |what: String| {
        Refusal::new(
            REASON,
            format!(
                ".spec.kafka.metricsConfig names {what}; create it with the JMX exporter's rules or fix valueFrom.configMapKeyRef (the nodes run on without metrics changes until then)"
            ),
        )
    };
    let Some(data) = data else {
        return Err(missing(format!(
            "ConfigMap {}, which does not exist",
            source.name
        )));
    };
    data.get(&source.key).cloned().ok_or_else(|| {
        missing(format!(
            "key {} of ConfigMap {}, which it does not have",
            source.key, source.name
        ))
    })
}

/// The ConfigMap a member cluster's nodes read their rules from.
pub fn config_map_name(kafka: &str) -> String {
    format!("{kafka}-kstretch-metrics")
}

pub fn config_map(
    kafka: &str,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    rules: &str,
) -> Value {
    objects::to_json(&ConfigMap {
        metadata: objects::meta(&config_map_name(kafka), namespace, labels.clone()),
        data: Some(BTreeMap::from([(RULES_KEY.to_owned(), rules.to_owned())])),
        ..Default::default()
    })
}

/// What a node's container gets to run the exporter: the Java agent in `KAFKA_OPTS` (after the
/// user's options), its port, the jar's and the rules' volumes.
pub fn add_to_node(
    kafka: &str,
    env: &mut Vec<EnvVar>,
    ports: &mut Vec<ContainerPort>,
    mounts: &mut Vec<VolumeMount>,
    volumes: &mut Vec<Volume>,
) {
    let agent = format!("-javaagent:{JAR_DIR}/{JAR}={PORT}:{RULES_DIR}/{RULES_KEY}");
    match env.iter_mut().find(|e| e.name == "KAFKA_OPTS") {
        Some(opts) => {
            let before = opts.value.take().unwrap_or_default();
            opts.value = Some(format!("{before} {agent}").trim().to_owned());
        }
        None => env.push(EnvVar {
            name: "KAFKA_OPTS".to_owned(),
            value: Some(agent),
            value_from: None,
        }),
    }
    ports.push(ContainerPort {
        name: Some(PORT_NAME.to_owned()),
        container_port: PORT.into(),
        ..Default::default()
    });
    for (name, path) in [(JAR_VOLUME, JAR_DIR), (RULES_VOLUME, RULES_DIR)] {
        mounts.push(VolumeMount {
            name: name.to_owned(),
            mount_path: path.to_owned(),
            read_only: Some(true),
            ..Default::default()
        });
    }
    volumes.push(Volume {
        name: JAR_VOLUME.to_owned(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    });
    volumes.push(Volume {
        name: RULES_VOLUME.to_owned(),
        config_map: Some(ConfigMapVolumeSource {
            name: config_map_name(kafka),
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
) -> Result<(), Refusal> {
    for (alias, list) in objects.iter_mut() {
        if !pods(list).any(serves) {
            continue;
        }
        let Some(image) = images.get(alias).filter(|i| !i.is_empty()) else {
            return Err(Refusal::new(
                REASON,
                format!(
                    ".spec.kafka.metricsConfig: the agent of cluster {alias} has not said which image it runs (its chart sets KSTRETCH_AGENT_IMAGE), and the nodes' JMX exporter is copied from that image; upgrade or configure that agent (the nodes run on unchanged until then)"
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
        let from = source(Some(&jmx)).unwrap().unwrap();
        assert_eq!(from.name, "kafka-metrics");
        assert_eq!(source(None).unwrap(), None);
        let reporter = config(json!({"type": "strimziMetricsReporter"}));
        assert_eq!(source(Some(&reporter)).unwrap(), None);
        let unnamed = source(Some(&config(json!({"type": "jmxPrometheusExporter"})))).unwrap_err();
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
        assert_eq!(rules(&from, Some(&data)).unwrap(), "rules: []");
        let gone = rules(&from, None).unwrap_err();
        assert!(
            gone.message
                .contains("ConfigMap kafka-metrics, which does not exist"),
            "{}",
            gone.message
        );
        let other = BTreeMap::from([("other".to_owned(), String::new())]);
        let no_key = rules(&from, Some(&other)).unwrap_err();
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
        add_to_node("k", &mut env, &mut ports, &mut mounts, &mut volumes);
        assert_eq!(
            env[0].value.as_deref(),
            Some(
                "-Dx=1 -javaagent:/opt/kstretch/metrics/jmx_prometheus_javaagent.jar=9404:/opt/kstretch/metrics-config/metrics-config.yml"
            )
        );
        assert_eq!(ports[0].name.as_deref(), Some("tcp-prometheus"));
        assert_eq!(ports[0].container_port, 9404);
        assert_eq!(
            volumes[1].config_map.as_ref().unwrap().name,
            "k-kstretch-metrics"
        );

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
        let refused = equip(&mut objects, &images).unwrap_err();
        assert!(
            refused.message.contains("the agent of cluster beta"),
            "{}",
            refused.message
        );
        objects.remove("beta");
        equip(&mut objects, &images).unwrap();
        let pods = &objects["alpha"][1]["spec"]["pods"];
        assert_eq!(pods[0]["spec"]["initContainers"][1]["image"], "agent:2");
    }
}
