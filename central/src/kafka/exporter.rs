//! `spec.kafkaExporter`: Kafka Exporter for a `Kafka`, as Strimzi deploys it (a Deployment
//! `<kafka>-kafka-exporter` serving consumer lag and partition offsets on port 9404,
//! `tcp-prometheus`), in one member cluster. The exporter is `kstretch-agent kafka-exporter`
//! from the agent's image of that cluster; it reaches the brokers on their replication listener
//! with a client certificate of the cluster CA (`CN=<kafka>-kafka-exporter`, a super user when
//! authorization is on, as in Strimzi), kept in the Secret `<kafka>-kafka-exporter-certs`.
//! Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, HTTPGetAction, PodSpec, PodTemplateSpec, Probe, SecretVolumeSource,
    Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kstretch_api::{Kafka, KafkaExporterSpec, names};
use kube::ResourceExt;
use serde_json::Value;

use crate::jmx_exporter::{PORT, PORT_NAME};
use crate::kafka::resolve::Resolved;
use crate::objects;
use crate::pki::Pem;
use crate::pod_template;
use crate::probes;

const CERTS_DIR: &str = "/etc/kafka-exporter/certs";
const CERT_KEY: &str = "kafka-exporter.crt";
const KEY_KEY: &str = "kafka-exporter.key";
const CA_KEY: &str = "ca.crt";
/// Changes with the certificate, so that the Deployment rolls the pod onto a new one.
const CERT_HASH_ANNOTATION: &str = "kstretch.io/certificate-hash";
const LOG_LEVELS: &[&str] = &["error", "warn", "warning", "info", "debug", "trace"];

/// The exporter's name, that of its Deployment and pods' `strimzi.io/name`.
pub fn name(kafka: &str) -> String {
    format!("{kafka}-kafka-exporter")
}

/// The member cluster the exporter runs in: the first (by name) that runs brokers, so that
/// its bootstrap Service has endpoints there. `None` without brokers.
pub fn cluster(resolved: &Resolved) -> Option<String> {
    resolved
        .pools
        .iter()
        .filter(|p| p.roles.contains(&kstretch_core::node_ids::Role::Broker))
        .map(|p| p.alias.clone())
        .min()
}

/// Why no exporter is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotDeployed {
    /// What `kafkaExporter` asks for cannot run (a regex, a log level).
    Invalid(String),
    /// No node pool runs brokers.
    NoBrokers,
    /// The agent of the cluster it runs in has not reported its image (yet): what runs there
    /// is kept.
    NoImage { alias: String },
}

impl NotDeployed {
    /// What the warning says.
    pub fn message(&self) -> String {
        match self {
            NotDeployed::Invalid(problem) => format!("{problem}; Kafka Exporter is not deployed"),
            NotDeployed::NoBrokers => {
                "no node pool runs brokers: Kafka Exporter is not deployed".to_owned()
            }
            NotDeployed::NoImage { alias } => format!(
                "Kafka Exporter runs in cluster {alias} from its agent's image, and that agent has not reported its image yet"
            ),
        }
    }
}

/// The member cluster the exporter of `kafka` runs in and its objects there, from the agents'
/// images by cluster; or why none is built.
pub fn deploy(
    kafka: &Kafka,
    spec: &KafkaExporterSpec,
    resolved: &Resolved,
    images: &BTreeMap<String, String>,
    ca_trusted: &str,
    access: (&Pem, &str),
) -> Result<(String, Vec<Value>), NotDeployed> {
    if let Some(problem) = invalid(spec) {
        return Err(NotDeployed::Invalid(problem));
    }
    let alias = cluster(resolved).ok_or(NotDeployed::NoBrokers)?;
    let Some(image) = images.get(&alias) else {
        return Err(NotDeployed::NoImage { alias });
    };
    let (identity, bootstrap) = access;
    let objects = objects(&Inputs {
        kafka,
        spec,
        image,
        bootstrap,
        ca_trusted,
        identity,
    });
    Ok((alias, objects))
}

/// Of `objects` (what a cluster got before), the exporter's of `kafka`: kept while its agent's
/// image is unknown (just after central restarts), rather than removed.
pub fn kept(kafka: &str, objects: &[Value]) -> Vec<Value> {
    let name = name(kafka);
    let secret = format!("{name}-certs");
    objects
        .iter()
        .filter(|o| {
            (o["kind"] == "Deployment" && o["metadata"]["name"] == name.as_str())
                || (o["kind"] == "Secret" && o["metadata"]["name"] == secret.as_str())
        })
        .cloned()
        .collect()
}

/// What the exporter is built from.
struct Inputs<'a> {
    kafka: &'a Kafka,
    spec: &'a KafkaExporterSpec,
    /// The agent's image of the member cluster it runs in.
    image: &'a str,
    /// The brokers' replication listener, `host:port,...`.
    bootstrap: &'a str,
    /// The cluster CA certificates the brokers' certificates are checked against.
    ca_trusted: &'a str,
    identity: &'a Pem,
}

/// The exporter's Secret and Deployment.
fn objects(inputs: &Inputs<'_>) -> Vec<Value> {
    let kafka = inputs.kafka.name_any();
    let namespace = inputs.kafka.namespace().unwrap_or_default();
    let name = name(&kafka);
    let secret_name = format!("{name}-certs");
    let secret = objects::secret(
        objects::meta(&secret_name, &namespace, labels(&kafka)),
        [
            (CA_KEY.to_owned(), inputs.ca_trusted.as_bytes()),
            (CERT_KEY.to_owned(), inputs.identity.cert.as_bytes()),
            (KEY_KEY.to_owned(), inputs.identity.key.as_bytes()),
        ],
    );
    let template = inputs
        .spec
        .unmodelled
        .get("template")
        .and_then(Value::as_object);
    let template_pod = template
        .and_then(|t| t.get("pod"))
        .and_then(Value::as_object);
    let mut pod_labels = labels(&kafka);
    let mut annotations = BTreeMap::from([(
        CERT_HASH_ANNOTATION.to_owned(),
        kstretch_core::kraft::revision(&[
            inputs.identity.cert.as_bytes(),
            inputs.ca_trusted.as_bytes(),
        ]),
    )]);
    if let Some(metadata) = template_pod.and_then(|p| p.get("metadata")) {
        pod_labels.extend(objects::strings(&metadata["labels"]));
        annotations.extend(objects::strings(&metadata["annotations"]));
    }
    let pod = PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(pod_labels),
            annotations: Some(annotations),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            containers: vec![container(inputs)],
            volumes: Some(vec![Volume {
                name: "certs".to_owned(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(secret_name),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    };
    let mut deployment_labels = labels(&kafka);
    let deployment_metadata = template
        .and_then(|t| t.get("deployment"))
        .map(|d| &d["metadata"]);
    if let Some(metadata) = deployment_metadata {
        deployment_labels.extend(objects::strings(&metadata["labels"]));
    }
    let mut deployment = objects::to_json(&Deployment {
        metadata: ObjectMeta {
            annotations: deployment_metadata
                .map(|m| objects::strings(&m["annotations"]))
                .filter(|a| !a.is_empty()),
            ..objects::meta(&name, &namespace, deployment_labels)
        },
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(selector(&kafka)),
                ..Default::default()
            },
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".to_owned()),
                ..Default::default()
            }),
            template: pod,
            ..Default::default()
        }),
        status: None,
    });
    // The template's scheduling fields, as given (as for the nodes' pods).
    if let Some(t) = template_pod {
        pod_template::scheduling(&mut deployment["spec"]["template"]["spec"], t);
    }
    vec![secret, deployment]
}

fn container(inputs: &Inputs<'_>) -> Container {
    let spec = inputs.spec;
    let file = |key: &str| format!("{CERTS_DIR}/{key}");
    let mut args: Vec<String> = ["kafka-exporter", "--bootstrap", inputs.bootstrap]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    for (flag, value) in [
        ("--tls-ca", Some(file(CA_KEY))),
        ("--tls-cert", Some(file(CERT_KEY))),
        ("--tls-key", Some(file(KEY_KEY))),
        ("--topic-regex", spec.topic_regex.clone()),
        ("--topic-exclude-regex", spec.topic_exclude_regex.clone()),
        ("--group-regex", spec.group_regex.clone()),
        ("--group-exclude-regex", spec.group_exclude_regex.clone()),
        (
            "--show-all-offsets",
            spec.show_all_offsets.map(|b| b.to_string()),
        ),
        ("--log", Some(log_filter(spec.logging.as_deref()))),
        ("--listen", Some(format!("0.0.0.0:{PORT}"))),
    ] {
        if let Some(value) = value {
            args.push(flag.to_owned());
            args.push(value);
        }
    }
    let probe = |initial: i32| Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/healthz".to_owned()),
            port: IntOrString::String(PORT_NAME.to_owned()),
            ..Default::default()
        }),
        initial_delay_seconds: Some(initial),
        timeout_seconds: Some(5),
        ..Default::default()
    };
    let mut container = Container {
        name: name(&inputs.kafka.name_any()),
        image: Some(inputs.image.to_owned()),
        args: Some(args),
        ports: Some(vec![ContainerPort {
            name: Some(PORT_NAME.to_owned()),
            container_port: PORT.into(),
            protocol: Some("TCP".to_owned()),
            ..Default::default()
        }]),
        liveness_probe: Some(probes::timed(probe(15), spec.liveness_probe.as_ref())),
        readiness_probe: Some(probes::timed(probe(5), spec.readiness_probe.as_ref())),
        volume_mounts: Some(vec![VolumeMount {
            name: "certs".to_owned(),
            mount_path: CERTS_DIR.to_owned(),
            read_only: Some(true),
            ..Default::default()
        }]),
        ..Default::default()
    };
    if spec.resources.is_some() {
        container.resources = spec.resources.clone();
    }
    container
}

/// Strimzi's `logging` level as the exporter's log filter: a level kstretch knows, else
/// `info` (validated before: see [`invalid`]).
fn log_filter(logging: Option<&str>) -> String {
    match logging.map(str::to_ascii_lowercase).as_deref() {
        Some("warning") => "warn".to_owned(),
        Some(level) if LOG_LEVELS.contains(&level) => level.to_owned(),
        _ => "info".to_owned(),
    }
}

/// What makes `spec` unusable, in the words of a condition: a regex that does not compile
/// a log level that is none or a liveness probe Kubernetes refuses; `None` when it can run.
pub fn invalid(spec: &KafkaExporterSpec) -> Option<String> {
    for (field, value) in [
        ("topicRegex", &spec.topic_regex),
        ("topicExcludeRegex", &spec.topic_exclude_regex),
        ("groupRegex", &spec.group_regex),
        ("groupExcludeRegex", &spec.group_exclude_regex),
    ] {
        if let Some(value) = value
            && let Err(e) = regex::Regex::new(value)
        {
            return Some(format!(
                ".spec.kafkaExporter.{field} {value:?} is not a regular expression: {e}"
            ));
        }
    }
    if let Some(level) = &spec.logging
        && !LOG_LEVELS.contains(&level.to_ascii_lowercase().as_str())
    {
        return Some(format!(
            ".spec.kafkaExporter.logging {level:?} is not a log level: use one of {}",
            LOG_LEVELS.join(", ")
        ));
    }
    probes::invalid(".spec.kafkaExporter", spec.liveness_probe.as_ref())
}

fn selector(kafka: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (names::CLUSTER.to_owned(), kafka.to_owned()),
        (names::KIND.to_owned(), "Kafka".to_owned()),
        (names::NAME.to_owned(), name(kafka)),
    ])
}

/// Strimzi's labels of the exporter's objects and pods.
fn labels(kafka: &str) -> BTreeMap<String, String> {
    let mut labels = selector(kafka);
    for (key, value) in [
        (names::COMPONENT_TYPE, "kafka-exporter".to_owned()),
        (names::APP_NAME, "kafka-exporter".to_owned()),
        (names::APP_INSTANCE, kafka.to_owned()),
        (names::APP_PART_OF, format!("strimzi-{kafka}")),
    ] {
        labels.insert(key.to_owned(), value);
    }
    labels
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::kafka::resolve::resolve;
    use crate::kafka::resolve::tests::{kafka, members, pool};

    fn setup(exporter: Value) -> (Kafka, Resolved) {
        let k = kafka(json!({"spec": {"kafkaExporter": exporter}}));
        let controllers = pool("c", &["controller"], 1, json!({}));
        let brokers = pool(
            "b",
            &["broker"],
            1,
            json!({"metadata": {"annotations": {"strimzi.io/stretch-cluster-alias": "beta"}}}),
        );
        let resolved = resolve(&k, &[&controllers, &brokers], &members()).unwrap();
        (k, resolved)
    }

    fn identity() -> Pem {
        Pem {
            cert: "CERT".into(),
            key: "KEY".into(),
        }
    }

    #[test]
    fn the_exporter_runs_where_brokers_run_from_that_agents_image_with_strimzis_names() {
        let (k, resolved) = setup(json!({
            "topicRegex": "orders.*", "groupExcludeRegex": "^tmp", "showAllOffsets": false,
            "logging": "debug", "resources": {"limits": {"memory": "64Mi"}},
            "template": {"pod": {"metadata": {"labels": {"team": "a"}},
                                 "tolerations": [{"key": "k"}]}}
        }));
        let images = BTreeMap::from([("beta".to_owned(), "agent:1".to_owned())]);
        let spec = k.spec.kafka_exporter.clone().unwrap();
        let (alias, objects) =
            deploy(&k, &spec, &resolved, &images, "CA", (&identity(), "b:9091")).unwrap();
        assert_eq!(alias, "beta");
        let [secret, deployment] = objects.as_slice() else {
            panic!("{objects:#?}")
        };
        assert_eq!(
            secret["metadata"]["name"],
            "my-cluster-kafka-exporter-certs"
        );
        assert_eq!(deployment["kind"], "Deployment");
        assert_eq!(deployment["metadata"]["name"], "my-cluster-kafka-exporter");
        let pod = &deployment["spec"]["template"];
        let labels = &pod["metadata"]["labels"];
        assert_eq!(labels["strimzi.io/kind"], "Kafka");
        assert_eq!(labels["strimzi.io/name"], "my-cluster-kafka-exporter");
        assert_eq!(labels["strimzi.io/component-type"], "kafka-exporter");
        assert_eq!(labels["team"], "a");
        assert_eq!(pod["spec"]["tolerations"], json!([{"key": "k"}]));
        let container = &pod["spec"]["containers"][0];
        assert_eq!(container["image"], "agent:1");
        assert_eq!(container["ports"][0]["name"], "tcp-prometheus");
        assert_eq!(container["ports"][0]["containerPort"], 9404);
        assert_eq!(container["resources"]["limits"]["memory"], "64Mi");
        let args: Vec<&str> = container["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        for pair in [
            ["--bootstrap", "b:9091"],
            ["--topic-regex", "orders.*"],
            ["--group-exclude-regex", "^tmp"],
            ["--show-all-offsets", "false"],
            ["--log", "debug"],
        ] {
            assert!(args.windows(2).any(|w| w == pair), "{pair:?} in {args:?}");
        }
        assert_eq!(args[0], "kafka-exporter");
        assert!(
            !args.contains(&"--group-regex"),
            "Strimzi's default is the exporter's"
        );

        // A new certificate rolls the pod (the Deployment sees a new template).
        let renewed = Pem {
            cert: "CERT2".into(),
            key: "KEY2".into(),
        };
        let (_, again) = deploy(&k, &spec, &resolved, &images, "CA", (&renewed, "b:9091")).unwrap();
        let hash = |o: &Value| {
            o["spec"]["template"]["metadata"]["annotations"][CERT_HASH_ANNOTATION].clone()
        };
        assert_ne!(hash(&again[1]), hash(deployment));
    }

    #[test]
    fn what_cannot_run_is_said_and_nothing_is_deployed() {
        let access = (&identity(), "b:9091");
        let images = BTreeMap::from([("beta".to_owned(), "agent:1".to_owned())]);
        let (k, resolved) = setup(json!({"groupRegex": "(unclosed"}));
        let spec = k.spec.kafka_exporter.clone().unwrap();
        let err = deploy(&k, &spec, &resolved, &images, "CA", access)
            .unwrap_err()
            .message();
        assert!(
            err.starts_with(
                ".spec.kafkaExporter.groupRegex \"(unclosed\" is not a regular expression"
            ),
            "{err}"
        );
        let (k, resolved) = setup(json!({"logging": "loud"}));
        let spec = k.spec.kafka_exporter.clone().unwrap();
        let err = deploy(&k, &spec, &resolved, &images, "CA", access)
            .unwrap_err()
            .message();
        assert!(err.contains("\"loud\" is not a log level"), "{err}");
        let (k, resolved) = setup(json!({}));
        let spec = k.spec.kafka_exporter.clone().unwrap();
        let err = deploy(&k, &spec, &resolved, &BTreeMap::new(), "CA", access).unwrap_err();
        assert_eq!(
            err,
            NotDeployed::NoImage {
                alias: "beta".into()
            }
        );
        assert!(err.message().contains("not reported its image"), "{err:?}");

        // What ran before stays while the image is unknown; nothing else of the cluster's.
        let (_, built) = deploy(&k, &spec, &resolved, &images, "CA", access).unwrap();
        let mut before = built.clone();
        before.push(json!({"kind": "Service", "metadata": {"name": "my-cluster-kafka-exporter"}}));
        assert_eq!(kept("my-cluster", &before), built);
    }
}
