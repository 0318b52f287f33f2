//! The pod of a node or worker of an owning resource (`Kafka` pools, `KafkaConnect`): what
//! kstretch sets, with the scheduling fields of the resource's `template.pod` taken as Strimzi
//! takes them, the Kafka image, the JVM's environment and the pod's revision.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EnvVar, Pod, PodSpec, ResourceRequirements, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kstretch_api::common::JvmOptions;
use kstretch_api::{StrimziPodSetSpec, names};
use kstretch_core::kraft;
use serde_json::{Map, Value, json};

use kstretch_core::versions::DEFAULT_KAFKA_VERSION;

use crate::objects;
use crate::unserved::Applied;

/// The keys of `template.pod` kstretch applies: its metadata's labels and annotations, and the
/// scheduling fields after it, which reach the pod's spec.
pub const TEMPLATE_POD: &[&str] = &[
    "metadata",
    "affinity",
    "tolerations",
    "nodeSelector",
    "priorityClassName",
    "schedulerName",
    "securityContext",
    "terminationGracePeriodSeconds",
    "imagePullSecrets",
    "topologySpreadConstraints",
    "hostAliases",
    "enableServiceLinks",
];

/// The parts of a `KafkaNodePool`'s `template` the node pods apply.
pub const POOL_TEMPLATE: Applied = &[("pod", TEMPLATE_POD)];
/// The parts of a `Kafka`'s `spec.kafka.template` that apply: each pool's pods take its `pod`
/// part unless the pool sets one, and the budgets of the Kafka's pods its `podDisruptionBudget`.
pub const KAFKA_TEMPLATE: Applied = &[
    ("pod", TEMPLATE_POD),
    ("podDisruptionBudget", &["metadata", "maxUnavailable"]),
];

/// The parts of a `Kafka`'s `kafkaExporter.template` its Deployment applies.
pub const EXPORTER_TEMPLATE: Applied = &[("pod", TEMPLATE_POD), ("deployment", &["metadata"])];

/// What one pod is made of.
#[derive(Debug)]
pub struct PodParts<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    /// The headless Service that gives the pod its DNS name.
    pub subdomain: &'a str,
    pub container: Value,
    pub volumes: Vec<Volume>,
    pub labels: Map<String, Value>,
    pub annotations: Map<String, Value>,
    /// The resource's `template.pod`.
    pub template: Option<&'a Map<String, Value>>,
}

/// The pod (pure): kstretch's parts typed, the container and the template's fields as given.
pub fn pod(parts: PodParts<'_>) -> Value {
    let mut pod = objects::to_json(&Pod {
        metadata: ObjectMeta {
            name: Some(parts.name.to_owned()),
            namespace: Some(parts.namespace.to_owned()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            hostname: Some(parts.name.to_owned()),
            subdomain: Some(parts.subdomain.to_owned()),
            volumes: Some(parts.volumes),
            termination_grace_period_seconds: Some(30),
            ..Default::default()
        }),
        status: None,
    });
    // Labels and annotations may come from the template as written; the container too.
    pod["metadata"]["labels"] = Value::Object(parts.labels);
    pod["metadata"]["annotations"] = Value::Object(parts.annotations);
    let spec = &mut pod["spec"];
    spec["containers"] = Value::Array(vec![parts.container]);
    if let Some(template) = parts.template {
        scheduling(spec, template);
    }
    pod
}

/// Sets on a pod's `spec` the scheduling fields of a `template.pod`, as given.
pub fn scheduling(spec: &mut Value, template: &Map<String, Value>) {
    for key in TEMPLATE_POD.iter().filter(|k| **k != "metadata") {
        if let Some(value) = template.get(*key) {
            spec[*key] = value.clone();
        }
    }
}

/// The Kafka version a resource runs (`version`, else [`DEFAULT_KAFKA_VERSION`]) and its
/// image (`image`, else apache/kafka's of that version).
pub fn version_and_image(version: Option<&str>, image: Option<&str>) -> (String, String) {
    let version = version.map_or_else(|| DEFAULT_KAFKA_VERSION.to_owned(), str::to_owned);
    let image = image.map_or_else(|| format!("apache/kafka:{version}"), str::to_owned);
    (version, image)
}

/// The resource's `template.pod`.
pub fn template_pod(template: Option<&Map<String, Value>>) -> Option<&Map<String, Value>> {
    template?.get("pod")?.as_object()
}

/// The environment variable `name` set to `value`.
pub fn env(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.into()),
        value_from: None,
    }
}

/// `KAFKA_HEAP_OPTS` and `KAFKA_OPTS` from `jvmOptions`, as Kafka's start scripts read them.
pub fn jvm_env(jvm: Option<&JvmOptions>) -> Vec<EnvVar> {
    let mut env = Vec::new();
    let Some(jvm) = jvm else { return env };
    let heap: Vec<String> = [("-Xms", &jvm.xms), ("-Xmx", &jvm.xmx)]
        .into_iter()
        .filter_map(|(flag, v)| v.as_ref().map(|v| format!("{flag}{v}")))
        .collect();
    if !heap.is_empty() {
        env.push(self::env("KAFKA_HEAP_OPTS", heap.join(" ")));
    }
    let mut opts: Vec<String> = jvm
        .xx
        .iter()
        .flatten()
        .map(|(k, v)| match v.as_str() {
            "true" => format!("-XX:+{k}"),
            "false" => format!("-XX:-{k}"),
            _ => format!("-XX:{k}={v}"),
        })
        .collect();
    opts.extend(jvm.java_system_properties.iter().filter_map(|p| {
        Some(format!(
            "-D{}={}",
            p.name.as_ref()?,
            p.value.clone().unwrap_or_default()
        ))
    }));
    if !opts.is_empty() {
        env.push(self::env("KAFKA_OPTS", opts.join(" ")));
    }
    env
}

/// Sets the container's `resources`, if the resource gives any.
pub fn set_resources(container: &mut Value, resources: Option<&ResourceRequirements>) {
    if let Some(resources) = resources
        && let Ok(value) = serde_json::to_value(resources)
    {
        container["resources"] = value;
    }
}

/// The spec of a StrimziPodSet that runs `pods` (each a JSON object) and selects them by
/// `selector`.
pub fn podset_spec(selector: BTreeMap<String, String>, pods: Vec<Value>) -> StrimziPodSetSpec {
    StrimziPodSetSpec {
        selector: LabelSelector {
            match_labels: Some(selector),
            ..Default::default()
        },
        pods: pods
            .into_iter()
            .filter_map(|p| match p {
                Value::Object(pod) => Some(pod),
                _ => None,
            })
            .collect(),
    }
}

/// `pod` annotated with its `strimzi.io/revision`, and the revision: a hash of its definition
/// and of `inputs`, what the pod reads at start (configuration, certificates), so a change to
/// them rolls the pod although its spec is unchanged.
pub fn with_revision(mut pod: Value, inputs: &[&[u8]]) -> (Value, String) {
    let definition = serde_json::to_vec(&pod).unwrap_or_default();
    let mut parts = vec![definition.as_slice()];
    parts.extend_from_slice(inputs);
    let revision = kraft::revision(&parts);
    pod["metadata"]["annotations"][names::REVISION] = json!(revision);
    (pod, revision)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_gives_its_scheduling_fields_and_nothing_else() {
        let template = json!({"affinity": {"a": 1}, "terminationGracePeriodSeconds": 5,
                              "metadata": {"labels": {"x": "y"}}, "hostNetwork": true});
        let pod = pod(PodParts {
            name: "p-0",
            namespace: "ns",
            subdomain: "p-brokers",
            container: json!({"name": "kafka"}),
            volumes: vec![],
            labels: Map::new(),
            annotations: Map::new(),
            template: template.as_object(),
        });
        assert_eq!(pod["spec"]["affinity"], json!({"a": 1}));
        assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 5);
        assert_eq!(pod["spec"]["subdomain"], "p-brokers");
        assert!(pod["spec"].get("hostNetwork").is_none());
        assert!(pod["spec"].get("metadata").is_none());
    }

    #[test]
    fn the_default_version_gives_the_default_image_and_a_set_image_is_kept() {
        assert_eq!(
            version_and_image(None, None),
            (
                DEFAULT_KAFKA_VERSION.to_owned(),
                format!("apache/kafka:{DEFAULT_KAFKA_VERSION}")
            )
        );
        assert_eq!(
            version_and_image(Some("4.0.0"), None),
            ("4.0.0".to_owned(), "apache/kafka:4.0.0".to_owned())
        );
        assert_eq!(
            version_and_image(Some("4.0.0"), Some("my/kafka:x")),
            ("4.0.0".to_owned(), "my/kafka:x".to_owned())
        );
    }

    #[test]
    fn jvm_options_become_heap_and_kafka_opts() {
        assert!(jvm_env(None).is_empty());
        let jvm: JvmOptions = serde_json::from_value(json!({
            "-Xms": "512m", "-Xmx": "1g",
            "-XX": {"UseG1GC": "true", "UseZGC": "false", "MaxGCPauseMillis": "20"},
            "javaSystemProperties": [{"name": "a", "value": "b"}, {"value": "nameless"}]
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            jvm_env(Some(&jvm))
                .iter()
                .map(crate::objects::value)
                .collect::<Vec<_>>(),
            [
                json!({"name": "KAFKA_HEAP_OPTS", "value": "-Xms512m -Xmx1g"}),
                json!({"name": "KAFKA_OPTS",
                       "value": "-XX:MaxGCPauseMillis=20 -XX:+UseG1GC -XX:-UseZGC -Da=b"}),
            ]
        );
        let empty: JvmOptions = serde_json::from_value(json!({})).unwrap_or_else(|e| panic!("{e}"));
        assert!(jvm_env(Some(&empty)).is_empty());
    }

    #[test]
    fn the_revision_covers_the_definition_and_the_inputs_and_is_stamped_on_the_pod() {
        let pod = json!({"metadata": {"name": "p-0", "annotations": {}}, "spec": {}});
        let (stamped, revision) = with_revision(pod.clone(), &[b"config"]);
        assert_eq!(
            stamped["metadata"]["annotations"][names::REVISION],
            revision
        );
        assert_eq!(with_revision(pod.clone(), &[b"config"]).1, revision);
        assert_ne!(with_revision(pod.clone(), &[b"config2"]).1, revision);
        assert_ne!(with_revision(pod, &[b"config", b"cert"]).1, revision);
        let other = json!({"metadata": {"name": "p-1", "annotations": {}}, "spec": {}});
        assert_ne!(with_revision(other, &[b"config"]).1, revision);
    }
}
