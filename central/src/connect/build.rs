//! The Kubernetes objects of one Kafka Connect cluster, all in its member cluster: the worker
//! configuration ConfigMap `<name>-connect-config` (Strimzi's `kafka-connect.properties`), the
//! StrimziPodSet `<name>-connect` with pods `<name>-connect-<i>`, the REST API Service
//! `<name>-connect-api` and the headless Service `<name>-connect` that gives each worker the
//! DNS name it advertises. Pure: resource in, JSON out.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, HTTPGetAction, Probe,
    SecretVolumeSource, Service, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kstretch_api::{KafkaConnect, StrimziPodSet, names};
use kube::ResourceExt;
use serde_json::{Map, Value, json};

use super::security;
use super::validate::Resolved;
use crate::budget;
use crate::jmx_exporter::{self, PodMetrics};
use crate::logging;
use crate::objects;
use crate::pod_template::{self, PodParts, TEMPLATE_POD};
use crate::probes;
use crate::unserved::Applied;

/// The parts of a `KafkaConnect`'s `template` the workers' objects apply.
pub const CONNECT_TEMPLATE: Applied = &[
    ("pod", TEMPLATE_POD),
    ("podSet", &["metadata"]),
    ("apiService", &["metadata"]),
    ("headlessService", &["metadata"]),
    ("connectContainer", &["env", "securityContext"]),
    ("podDisruptionBudget", &["metadata", "maxUnavailable"]),
];

/// Port of the Connect REST API (Strimzi's `REST_API_PORT`).
pub const REST_API_PORT: u16 = 8083;
/// Name of the REST API port of containers and Services.
pub const REST_API_PORT_NAME: &str = "rest-api";
/// Key of the worker configuration in the ConfigMap (Strimzi's).
pub const CONFIG_KEY: &str = "kafka-connect.properties";
/// Where the ConfigMap is mounted.
pub const CONFIG_DIR: &str = "/opt/kafka/custom-config";
/// Where plugins are looked for (Strimzi's `plugin.path`).
pub const PLUGIN_PATH: &str = "/opt/kafka/plugins";
/// The environment variable with the worker's own DNS name (read by a config provider).
pub const ADVERTISED_HOSTNAME_ENV: &str = "ADVERTISED_HOSTNAME";
/// `strimzi.io/kind` of everything built here.
pub const KIND: &str = "KafkaConnect";

/// `<name>-connect`: the StrimziPodSet, the pods' prefix, the headless Service and the
/// `strimzi.io/name` label.
pub fn component_name(connect: &str) -> String {
    format!("{connect}-connect")
}

/// `<name>-connect-api`: the REST API Service.
pub fn api_service_name(connect: &str) -> String {
    format!("{connect}-connect-api")
}

/// `<name>-connect-config`: the worker configuration ConfigMap.
pub fn config_map_name(connect: &str) -> String {
    format!("{connect}-connect-config")
}

/// The REST API URL written to the status (Strimzi's `KafkaConnectResources.url`).
pub fn rest_url(connect: &str, namespace: &str) -> String {
    format!(
        "http://{}.{namespace}.svc:{REST_API_PORT}",
        api_service_name(connect)
    )
}

/// The label selector of the workers (for the scale subresource).
pub fn label_selector(connect: &str) -> String {
    format!(
        "{}={connect},{}={},{}={KIND}",
        names::CLUSTER,
        names::NAME,
        component_name(connect),
        names::KIND
    )
}

/// Everything built for one Kafka Connect cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Built {
    /// The member cluster everything goes to.
    pub alias: String,
    pub objects: Vec<Value>,
    /// The worker configuration (the ConfigMap's [`CONFIG_KEY`]).
    pub worker_properties: String,
    /// The `strimzi.io/revision` of each pod, by pod name.
    pub revisions: BTreeMap<String, String>,
}

/// The worker configuration, laid out like Strimzi's `KafkaConnectConfigurationBuilder` (the
/// `strimzisecrets` provider is left out: it is Strimzi's own class, not in Kafka's image, and
/// nothing kstretch generates refers to it).
pub fn worker_properties(r: &Resolved) -> String {
    let mut out = String::new();
    let mut section = |title: &str, lines: &[(String, String)]| {
        let _ = writeln!(out, "##########\n# {title}\n##########");
        for (k, v) in lines {
            let _ = writeln!(out, "{}", kstretch_core::kraft::properties::entry(k, v));
        }
        out.push('\n');
    };
    let kv = |k: &str, v: &str| (k.to_owned(), v.to_owned());
    let mut config = r.config.clone();
    section(
        "Bootstrap servers",
        &[kv("bootstrap.servers", &r.bootstrap_servers)],
    );
    section(
        "Internal topics and group ID",
        &[
            kv("group.id", &r.group_id),
            kv("config.storage.topic", &r.config_storage_topic),
            kv("status.storage.topic", &r.status_storage_topic),
            kv("offset.storage.topic", &r.offset_storage_topic),
        ],
    );
    section(
        "REST Listeners",
        &[
            kv(
                "rest.advertised.host.name",
                &format!("${{strimzienv:{ADVERTISED_HOSTNAME_ENV}}}"),
            ),
            kv("rest.advertised.port", &REST_API_PORT.to_string()),
        ],
    );
    section("Plugins", &[kv("plugin.path", PLUGIN_PATH)]);
    let ours = "strimzienv,strimzifile,strimzidir";
    let providers = match config.remove("config.providers") {
        Some(user) if !user.trim().is_empty() => format!("{user},{ours}"),
        _ => ours.to_owned(),
    };
    section(
        "Config providers",
        &[
            kv("config.providers", &providers),
            kv(
                "config.providers.strimzienv.class",
                "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
            ),
            kv("config.providers.strimzienv.param.allowlist.pattern", ".*"),
            kv(
                "config.providers.strimzifile.class",
                "org.apache.kafka.common.config.provider.FileConfigProvider",
            ),
            kv(
                "config.providers.strimzidir.class",
                "org.apache.kafka.common.config.provider.DirectoryConfigProvider",
            ),
            kv(
                "config.providers.strimzidir.param.allowed.paths",
                "/opt/kafka",
            ),
        ],
    );
    for (key, value) in metric_reporters(&mut config, r) {
        section(&format!("{key} configuration"), &[(key.to_owned(), value)]);
    }
    if !config.is_empty() {
        let lines: Vec<_> = config.into_iter().collect();
        section("User provided configuration", &lines);
    }
    if let Some(reporter) = &r.metrics_reporter {
        section(
            "Strimzi Metrics Reporter configuration",
            &reporter_options(reporter),
        );
    }
    section(
        "Kafka Security protocol",
        &security::worker_options(&r.security),
    );
    format!(
        "##############################\n# Generated by kstretch from KafkaConnect; changes are overwritten\n##############################\n\n{out}"
    )
}

/// The keys naming each client's metric reporters (the worker's own, then its admin clients',
/// producers' and consumers'), as Strimzi sets them.
const REPORTER_KEYS: [&str; 4] = [
    "metric.reporters",
    "admin.metric.reporters",
    "producer.metric.reporters",
    "consumer.metric.reporters",
];
/// Kafka's reporter of JMX MBeans, which the JMX exporter reads.
const JMX_REPORTER: &str = "org.apache.kafka.common.metrics.JmxReporter";

/// The metric reporters of each client, taken out of the user's `config`: the user's, then
/// Strimzi's reporter when it serves the metrics, or Kafka's JMX reporter when the JMX exporter
/// does and the user named reporters of their own (without any, Kafka runs the JMX reporter).
fn metric_reporters(
    config: &mut BTreeMap<String, String>,
    r: &Resolved,
) -> Vec<(&'static str, String)> {
    let ours = if r.metrics_reporter.is_some() {
        kstretch_core::kraft::KAFKA_METRICS_REPORTER
    } else if r.metrics.is_some() {
        JMX_REPORTER
    } else {
        return Vec::new();
    };
    REPORTER_KEYS
        .into_iter()
        .filter_map(|key| {
            let user = config.remove(key).filter(|v| !v.trim().is_empty());
            let value = match user {
                Some(user) if user.split(',').any(|c| c.trim() == ours) => user,
                Some(user) => format!("{user},{ours}"),
                None if ours == JMX_REPORTER => return None,
                None => ours.to_owned(),
            };
            Some((key, value))
        })
        .collect()
}

/// Strimzi's reporter in every client of a worker: one HTTP listener on the metrics port, which
/// they share, and the names it serves.
fn reporter_options(reporter: &kstretch_core::kraft::MetricsReporter) -> Vec<(String, String)> {
    let allow_list = reporter.allow_list.join(",");
    let listener = format!("http://:{}", jmx_exporter::PORT);
    ["", "admin.", "producer.", "consumer."]
        .into_iter()
        .flat_map(|client| {
            [
                ("prometheus.metrics.reporter.listener.enable", "true"),
                ("prometheus.metrics.reporter.listener", listener.as_str()),
                ("prometheus.metrics.reporter.allowlist", allow_list.as_str()),
            ]
            .map(|(key, value)| (format!("{client}{key}"), value.to_owned()))
        })
        .collect()
}

/// Builds every object of `connect`, whose workers reach Kafka with the files `material`
/// (see [`security::material`]; empty when Kafka needs none) and serve metrics with the JMX
/// exporter's `rules` when there are any (the init container that brings the exporter is
/// added by [`jmx_exporter::equip`], from the agent's image).
pub fn build(
    connect: &KafkaConnect,
    r: &Resolved,
    material: &BTreeMap<String, Vec<u8>>,
    files: Files<'_>,
) -> Built {
    let name = connect.name_any();
    let namespace = connect.namespace().unwrap_or_default();
    let n = Names {
        connect: &name,
        namespace: &namespace,
        template: connect.spec.template.as_ref(),
    };
    let properties = worker_properties(r);
    let (version, image) = pod_template::version_and_image(
        connect.spec.version.as_deref(),
        connect.spec.image.as_deref(),
    );

    let worker = Worker {
        image: &image,
        version: &version,
        properties: &properties,
        material,
        metrics: if files.rules.is_some() {
            Some(PodMetrics::Exporter)
        } else {
            r.metrics_reporter.as_ref().map(|_| PodMetrics::Reporter)
        },
        logging: files.log4j2.is_some(),
    };
    let mut revisions = BTreeMap::new();
    let pods: Vec<Value> = (0..r.replicas)
        .map(|i| {
            let pod_name = format!("{}-{i}", component_name(&name));
            let (pod, revision) = pod(&n, connect, &pod_name, &worker);
            revisions.insert(pod_name, revision);
            pod
        })
        .collect();

    // The log4j2 file sits next to the worker configuration; a change of it reaches running
    // workers without a restart (log4j2 re-reads it), so it is not part of their revision.
    let mut data = BTreeMap::from([(CONFIG_KEY.to_owned(), properties.clone())]);
    if let Some(log4j2) = files.log4j2 {
        data.insert(logging::FILE.to_owned(), log4j2.to_owned());
    }
    let config_map = objects::to_json(&ConfigMap {
        metadata: n.object_meta(&config_map_name(&name), n.labels(), None),
        data: Some(data),
        ..Default::default()
    });
    let selector = n.selector();
    let pod_set = objects::to_json(&StrimziPodSet {
        metadata: n.object_meta(
            &component_name(&name),
            n.labels(),
            n.template_meta("podSet"),
        ),
        spec: pod_template::podset_spec(selector.clone(), pods),
        status: None,
    });
    let port = || objects::tcp_port(REST_API_PORT_NAME.to_owned(), REST_API_PORT.into());
    let mut api_labels = n.labels();
    api_labels.insert(names::DISCOVERY.to_owned(), json!("true"));
    let api_service = objects::to_json(&Service {
        metadata: n.object_meta(
            &api_service_name(&name),
            api_labels,
            n.template_meta("apiService"),
        ),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_owned()),
            selector: Some(selector.clone()),
            ports: Some(vec![port()]),
            ..Default::default()
        }),
        status: None,
    });
    let headless = objects::to_json(&Service {
        metadata: n.object_meta(
            &component_name(&name),
            n.labels(),
            n.template_meta("headlessService"),
        ),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_owned()),
            publish_not_ready_addresses: Some(true),
            selector: Some(selector),
            ports: Some(vec![port()]),
            ..Default::default()
        }),
        status: None,
    });
    let budget = budget::pod_disruption_budget(&budget::Budget {
        name: component_name(&name),
        namespace: n.namespace,
        labels: objects::strings(&Value::Object(n.labels())),
        selector: n.selector(),
        pods: usize::try_from(r.replicas).unwrap_or(usize::MAX),
        template: n.template,
        closed: false,
    });
    let mut objects = vec![config_map, pod_set, api_service, headless, budget];
    if let Some(rules) = files.rules {
        let labels = objects::strings(&Value::Object(n.labels()));
        let component = component_name(&name);
        objects.push(jmx_exporter::config_map(
            &component,
            n.namespace,
            &labels,
            rules,
        ));
    }
    if !material.is_empty() {
        let files = material.iter().map(|(k, v)| (k.clone(), v.as_slice()));
        objects.push(objects::secret(
            n.object_meta(&security_secret_name(&name), n.labels(), None),
            files,
        ));
    }
    Built {
        alias: r.alias.clone(),
        objects,
        worker_properties: properties,
        revisions,
    }
}

struct Names<'a> {
    connect: &'a str,
    namespace: &'a str,
    template: Option<&'a Map<String, Value>>,
}

impl Names<'_> {
    fn labels(&self) -> Map<String, Value> {
        let mut labels = Map::new();
        for (k, v) in [
            (names::CLUSTER, self.connect.to_owned()),
            (names::NAME, component_name(self.connect)),
            (names::KIND, KIND.to_owned()),
            (names::COMPONENT_TYPE, "kafka-connect".to_owned()),
            (names::APP_NAME, "kafka-connect".to_owned()),
            (names::APP_INSTANCE, self.connect.to_owned()),
            (names::APP_PART_OF, format!("strimzi-{}", self.connect)),
        ] {
            labels.insert(k.to_owned(), Value::String(v));
        }
        labels
    }

    fn selector(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (names::CLUSTER.to_owned(), self.connect.to_owned()),
            (names::NAME.to_owned(), component_name(self.connect)),
            (names::KIND.to_owned(), KIND.to_owned()),
        ])
    }

    /// `template.<key>.metadata` (labels and annotations), as Strimzi's templates take it.
    fn template_meta(&self, key: &str) -> Option<&Map<String, Value>> {
        self.template?.get(key)?.get("metadata")?.as_object()
    }

    /// Metadata with the template's extra labels and annotations (ours win on conflicts).
    fn object_meta(
        &self,
        name: &str,
        mut labels: Map<String, Value>,
        extra: Option<&Map<String, Value>>,
    ) -> ObjectMeta {
        let mut annotations = Map::new();
        merge_extra(&mut labels, &mut annotations, extra);
        let mut meta = objects::meta(
            name,
            self.namespace,
            objects::strings(&Value::Object(labels)),
        );
        meta.annotations =
            (!annotations.is_empty()).then(|| objects::strings(&Value::Object(annotations)));
        meta
    }
}

fn merge_extra(
    labels: &mut Map<String, Value>,
    annotations: &mut Map<String, Value>,
    extra: Option<&Map<String, Value>>,
) {
    let Some(extra) = extra else { return };
    for (target, key) in [(labels, "labels"), (annotations, "annotations")] {
        for (k, v) in extra
            .get(key)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            if v.is_string() {
                target.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
    }
}

/// The Secret with what the workers need to reach a secured Kafka.
pub fn security_secret_name(connect: &str) -> String {
    format!("{}-security", component_name(connect))
}

/// What every worker pod is made of, beside its name.
#[derive(Clone, Copy)]
struct Worker<'a> {
    image: &'a str,
    version: &'a str,
    /// The worker configuration.
    properties: &'a str,
    /// The files to reach a secured Kafka with (see [`security::material`]).
    material: &'a BTreeMap<String, Vec<u8>>,
    /// How the workers serve metrics, if they do.
    metrics: Option<PodMetrics>,
    /// Whether the workers read a log4j2 file of kstretch's (`logging` is set).
    logging: bool,
}

/// What the workers read besides their configuration, each when the `KafkaConnect` asks for it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Files<'a> {
    /// The JMX exporter's rules.
    pub rules: Option<&'a str>,
    /// The log4j2 configuration ([`logging::properties`]).
    pub log4j2: Option<&'a str>,
}

/// One worker pod and its revision (a hash of the definition and the worker configuration,
/// so a configuration change rolls the workers although the pod spec is unchanged).
fn pod(n: &Names<'_>, connect: &KafkaConnect, pod_name: &str, w: &Worker<'_>) -> (Value, String) {
    let Worker {
        image,
        version,
        properties,
        material,
        metrics,
        logging,
    } = *w;
    let component = component_name(n.connect);
    let mut labels = n.labels();
    for (k, v) in [
        (names::POD_NAME, pod_name.to_owned()),
        (names::CONTROLLER, "strimzipodset".to_owned()),
        (names::CONTROLLER_NAME, component.clone()),
    ] {
        labels.insert(k.to_owned(), Value::String(v));
    }
    let mut annotations = Map::new();
    annotations.insert(names::KAFKA_VERSION.to_owned(), json!(version));
    let template_pod = pod_template::template_pod(n.template);
    merge_extra(
        &mut labels,
        &mut annotations,
        template_pod
            .and_then(|p| p.get("metadata"))
            .and_then(Value::as_object),
    );

    // The worker advertises its stable DNS name through the headless Service.
    let hostname = format!("{pod_name}.{component}.{}.svc", n.namespace);
    let mut kafka_env = vec![pod_template::env(ADVERTISED_HOSTNAME_ENV, hostname)];
    kafka_env.extend(pod_template::jvm_env(connect.spec.jvm_options.as_ref()));
    if logging {
        // Only with `logging` set: workers of a `KafkaConnect` without it keep the pod they have.
        kafka_env.push(pod_template::env(
            "KAFKA_LOG4J_OPTS",
            crate::logging::java_option(CONFIG_DIR),
        ));
    }
    let mut ports = vec![ContainerPort {
        name: Some(REST_API_PORT_NAME.to_owned()),
        container_port: REST_API_PORT.into(),
        protocol: Some("TCP".to_owned()),
        ..Default::default()
    }];
    let template_container = n
        .template
        .and_then(|t| t.get("connectContainer"))
        .and_then(Value::as_object);
    let mut mounts = vec![VolumeMount {
        name: "kafka-connect-configurations".to_owned(),
        mount_path: CONFIG_DIR.to_owned(),
        ..Default::default()
    }];
    let mut volumes = vec![Volume {
        name: "kafka-connect-configurations".to_owned(),
        config_map: Some(ConfigMapVolumeSource {
            name: config_map_name(n.connect),
            ..Default::default()
        }),
        ..Default::default()
    }];
    if let Some(how) = metrics {
        jmx_exporter::add_to_container(
            &component,
            how,
            &mut kafka_env,
            &mut ports,
            &mut mounts,
            &mut volumes,
        );
    }
    let mut env: Vec<Value> = kafka_env.iter().map(objects::value).collect();
    if let Some(extra) = template_container
        .and_then(|c| c.get("env"))
        .and_then(Value::as_array)
    {
        // Strimzi keeps its own variables when a template one has the same name.
        for var in extra {
            let name = var.get("name").and_then(Value::as_str);
            if name.is_some_and(|name| !env.iter().any(|e| e["name"] == name)) {
                env.push(var.clone());
            }
        }
    }
    let probe = |delay: i32| Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/health".to_owned()),
            port: IntOrString::String(REST_API_PORT_NAME.to_owned()),
            ..Default::default()
        }),
        initial_delay_seconds: Some(delay),
        timeout_seconds: Some(5),
        period_seconds: Some(10),
        ..Default::default()
    };
    if !material.is_empty() {
        volumes.push(Volume {
            name: "connect-security".to_owned(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(security_secret_name(n.connect)),
                default_mode: Some(0o440),
                ..Default::default()
            }),
            ..Default::default()
        });
        mounts.push(VolumeMount {
            name: "connect-security".to_owned(),
            mount_path: security::CERTS_DIR.to_owned(),
            read_only: Some(true),
            ..Default::default()
        });
    }
    let container = Container {
        name: component.clone(),
        image: Some(image.to_owned()),
        command: Some(vec![
            "/bin/sh".to_owned(),
            "-c".to_owned(),
            format!(
                "{}exec /opt/kafka/bin/connect-distributed.sh {CONFIG_DIR}/{CONFIG_KEY}",
                jmx_exporter::start(metrics)
            ),
        ]),
        ports: Some(ports),
        volume_mounts: Some(mounts),
        readiness_probe: Some(probes::timed(
            probe(60),
            connect.spec.readiness_probe.as_ref(),
        )),
        startup_probe: Some(probes::startup(&probe(0), probes::CONNECT_WORKER_START)),
        liveness_probe: Some(probes::timed(
            probe(60),
            connect.spec.liveness_probe.as_ref(),
        )),
        resources: connect.spec.resources.clone(),
        ..Default::default()
    };
    // The template's environment and security context pass through as the user wrote them,
    // as Strimzi copies them.
    let mut container = objects::value(&container);
    container["env"] = Value::Array(env);
    if let Some(sc) = template_container.and_then(|c| c.get("securityContext")) {
        container["securityContext"] = sc.clone();
    }

    let pod = pod_template::pod(PodParts {
        name: pod_name,
        namespace: n.namespace,
        subdomain: &component,
        container,
        volumes,
        labels,
        annotations,
        template: template_pod,
    });
    // New certificates or a new password restart the workers, which read them at start.
    let mut inputs = vec![properties.as_bytes()];
    inputs.extend(material.values().map(Vec::as_slice));
    pod_template::with_revision(pod, &inputs)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::connect::validate::resolve;
    use crate::kafka::resolve::Members;
    use kstretch_core::versions::DEFAULT_KAFKA_VERSION;

    fn members() -> Members {
        Members {
            own: "alpha".into(),
            all: ["alpha".into(), "beta".into()].into(),
        }
    }

    fn connect(spec: Value) -> KafkaConnect {
        serde_json::from_value(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaConnect",
            "metadata": {"name": "my-connect", "namespace": "ns",
                         "annotations": {"strimzi.io/stretch-cluster-alias": "beta"}},
            "spec": spec
        }))
        .unwrap()
    }

    fn built(spec: Value) -> Built {
        let c = connect(spec);
        build(
            &c,
            &resolve(&c, &members()).unwrap(),
            &BTreeMap::new(),
            Files::default(),
        )
    }

    #[test]
    fn workers_are_checked_as_timed_and_a_liveness_needing_two_successes_is_refused() {
        let mut spec = base();
        spec["livenessProbe"] = json!({"timeoutSeconds": 9});
        spec["readinessProbe"] = json!({"initialDelaySeconds": 1});
        let built = built(spec.clone());
        let pod_set = built
            .objects
            .iter()
            .find(|o| o["kind"] == "StrimziPodSet")
            .unwrap();
        let container = &pod_set["spec"]["pods"][0]["spec"]["containers"][0];
        assert_eq!(container["livenessProbe"]["timeoutSeconds"], 9);
        assert_eq!(container["livenessProbe"]["initialDelaySeconds"], 60);
        assert_eq!(container["readinessProbe"]["initialDelaySeconds"], 1);
        assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/health");
        // A worker still joining its group is not killed: liveness counts once it answers.
        let startup = &container["startupProbe"];
        assert_eq!(startup["httpGet"]["path"], "/health");
        assert_eq!(startup["periodSeconds"], 10);
        assert_eq!(startup["failureThreshold"], 360);

        spec["livenessProbe"] = json!({"successThreshold": 3});
        let problems = resolve(&connect(spec), &members()).unwrap_err();
        assert_eq!(problems[0].reason(), "InvalidProbe");
        assert!(
            problems[0]
                .to_string()
                .contains(".spec.livenessProbe.successThreshold is 3"),
            "{problems:?}"
        );
    }

    #[test]
    fn strimzis_reporter_serves_every_client_of_a_worker_from_its_class_path() {
        let mut spec = base();
        spec["metricsConfig"] = json!({"type": "strimziMetricsReporter",
            "values": {"allowList": ["kafka_connect_.*", "kafka_producer_.*"]}});
        spec["config"] = json!({"metric.reporters": "org.example.Mine"});
        let c = connect(spec);
        let r = resolve(&c, &members()).unwrap();
        let properties = worker_properties(&r);
        let reporter = "io.strimzi.kafka.metrics.KafkaPrometheusMetricsReporter";
        assert!(
            properties.contains(&format!("\nmetric.reporters=org.example.Mine,{reporter}\n")),
            "{properties}"
        );
        for client in ["", "admin.", "producer.", "consumer."] {
            assert!(
                properties.contains(&format!(
                    "\n{client}prometheus.metrics.reporter.listener=http\\://\\:9404\n"
                )) || properties.contains(&format!(
                    "\n{client}prometheus.metrics.reporter.listener=http://:9404\n"
                )),
                "{client}: {properties}"
            );
            assert!(properties.contains(&format!(
                "\n{client}prometheus.metrics.reporter.allowlist=kafka_connect_.*,kafka_producer_.*\n"
            )), "{client}: {properties}");
        }
        assert!(properties.contains(&format!("\nproducer.metric.reporters={reporter}\n")));
        let b = build(&c, &r, &BTreeMap::new(), Files::default());
        let pod_set = b
            .objects
            .iter()
            .find(|o| o["kind"] == "StrimziPodSet")
            .unwrap();
        let container = &pod_set["spec"]["pods"][0]["spec"]["containers"][0];
        let env = container["env"].as_array().unwrap();
        assert!(
            env.iter()
                .any(|e| e["name"] == "CLASSPATH"
                    && e["value"] == "/opt/kstretch/metrics/reporter/*"),
            "{container:#}"
        );
        assert!(
            !env.iter().any(|e| e["name"] == "KAFKA_OPTS"),
            "no Java agent"
        );
        assert!(
            container["ports"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "tcp-prometheus" && p["containerPort"] == 9404)
        );
        // No rules' ConfigMap: the reporter has none.
        assert!(
            !b.objects
                .iter()
                .any(|o| o["metadata"]["name"] == "my-connect-connect-kstretch-metrics")
        );
    }

    #[test]
    fn the_jmx_exporter_keeps_its_mbeans_when_the_user_names_reporters_of_their_own() {
        let mut spec = base();
        spec["metricsConfig"] = json!({"type": "jmxPrometheusExporter", "valueFrom":
            {"configMapKeyRef": {"name": "m", "key": "k"}}});
        let plain = worker_properties(&resolve(&connect(spec.clone()), &members()).unwrap());
        assert!(
            !plain.contains("metric.reporters"),
            "Kafka's default stands: {plain}"
        );
        spec["config"] = json!({"metric.reporters": "org.example.Mine"});
        let own = worker_properties(&resolve(&connect(spec), &members()).unwrap());
        assert!(
            own.contains(
                "\nmetric.reporters=org.example.Mine,org.apache.kafka.common.metrics.JmxReporter\n"
            ),
            "{own}"
        );
        assert!(!own.contains("producer.metric.reporters"), "{own}");
    }

    #[test]
    fn logging_is_a_file_next_to_the_configuration_and_its_changes_restart_no_worker() {
        let c = connect(base());
        let r = resolve(&c, &members()).unwrap();
        let with = |log4j2: Option<&str>| {
            let files = Files {
                log4j2,
                ..Files::default()
            };
            build(&c, &r, &BTreeMap::new(), files)
        };
        let (plain, one, two) = (
            with(None),
            with(Some("rootLogger.level = INFO\n")),
            with(Some("rootLogger.level = DEBUG\n")),
        );
        let config = |b: &Built| {
            b.objects
                .iter()
                .find(|o| {
                    o["kind"] == "ConfigMap" && o["metadata"]["name"] == "my-connect-connect-config"
                })
                .unwrap()["data"]
                .clone()
        };
        assert!(config(&plain)[logging::FILE].is_null());
        assert_eq!(config(&two)[logging::FILE], "rootLogger.level = DEBUG\n");
        let opts = |b: &Built| {
            let pod_set = b
                .objects
                .iter()
                .find(|o| o["kind"] == "StrimziPodSet")
                .unwrap();
            pod_set["spec"]["pods"][0]["spec"]["containers"][0]["env"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["name"] == "KAFKA_LOG4J_OPTS")
                .map(|e| e["value"].clone())
        };
        assert_eq!(
            opts(&plain),
            None,
            "without logging the pods stay as they were"
        );
        assert_eq!(
            opts(&one),
            Some(json!(
                "-Dlog4j2.configurationFile=/opt/kafka/custom-config/log4j2.properties"
            ))
        );
        // Setting logging restarts the workers once (they must read the file); changing it does not.
        assert_ne!(plain.revisions, one.revisions);
        assert_eq!(one.revisions, two.revisions);
    }

    #[test]
    fn workers_with_metrics_serve_the_jmx_exporter_on_port_9404_with_the_rules_they_are_given() {
        let c = connect(base());
        let r = resolve(&c, &members()).unwrap();
        let plain = build(&c, &r, &BTreeMap::new(), Files::default());
        let rules = Files {
            rules: Some("rules: []"),
            ..Files::default()
        };
        let served = build(&c, &r, &BTreeMap::new(), rules);
        let rules = served
            .objects
            .iter()
            .find(|o| {
                o["kind"] == "ConfigMap"
                    && o["metadata"]["name"] == "my-connect-connect-kstretch-metrics"
            })
            .expect("the rules' ConfigMap");
        assert_eq!(rules["data"]["metrics-config.yml"], "rules: []");
        let pod_set = served
            .objects
            .iter()
            .find(|o| o["kind"] == "StrimziPodSet")
            .unwrap();
        let pod = &pod_set["spec"]["pods"][0];
        let container = &pod["spec"]["containers"][0];
        assert!(
            container["ports"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "tcp-prometheus" && p["containerPort"] == 9404),
            "{container:#}"
        );
        let agent = container["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "KSTRETCH_METRICS_AGENT")
            .unwrap();
        assert_eq!(
            agent["value"],
            "-javaagent:/opt/kstretch/metrics/jmx_prometheus_javaagent.jar=9404:/opt/kstretch/metrics-config/metrics-config.yml",
        );
        // Only the worker runs the agent, not a tool run in its container.
        assert_eq!(
            container["command"][2],
            "export KAFKA_OPTS=\"${KAFKA_OPTS:+$KAFKA_OPTS }$KSTRETCH_METRICS_AGENT\"; exec /opt/kafka/bin/connect-distributed.sh /opt/kafka/custom-config/kafka-connect.properties"
        );
        assert!(
            pod["spec"]["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|v| v["configMap"]["name"] == "my-connect-connect-kstretch-metrics")
        );
        // Serving metrics restarts the workers; without them, nothing changes.
        assert_ne!(served.revisions, plain.revisions);
        assert!(plain.objects.iter().all(|o| o["kind"] != "ConfigMap"
            || o["metadata"]["name"] != "my-connect-connect-kstretch-metrics"));
    }

    fn base() -> Value {
        json!({"replicas": 2, "bootstrapServers": "my-cluster-kafka-bootstrap:9092",
               "groupId": "g", "configStorageTopic": "g-configs",
               "statusStorageTopic": "g-status", "offsetStorageTopic": "g-offsets",
               "config": {"config.storage.replication.factor": 3,
                          "config.providers": "mine",
                          "config.providers.mine.class": "x.Y",
                          "weird key": "a=b\\c\nd"}})
    }

    fn properties(text: &str) -> BTreeMap<String, String> {
        // The parts of java.util.Properties the generator uses.
        let mut out = BTreeMap::new();
        for line in text.lines() {
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            let mut key = String::new();
            let mut value = String::new();
            let mut in_key = true;
            let mut chars = line.chars();
            while let Some(c) = chars.next() {
                let c = if c == '\\' {
                    match chars.next() {
                        Some('n') => '\n',
                        Some('t') => '\t',
                        Some('r') => '\r',
                        Some(other) => other,
                        None => break,
                    }
                } else if in_key && c == '=' {
                    in_key = false;
                    continue;
                } else {
                    c
                };
                if in_key { key.push(c) } else { value.push(c) }
            }
            out.insert(key, value);
        }
        out
    }

    /// Workers read the file as ISO-8859-1 (`Properties.load(InputStream)`), so text outside
    /// ASCII must arrive as `\uXXXX`.
    #[test]
    fn non_ascii_configuration_is_written_as_unicode_escapes() {
        let mut spec = base();
        spec["config"]["client.id"] = json!("café ☕");
        let text = built(spec).worker_properties;
        assert!(text.contains("client.id=caf\\u00E9 \\u2615"), "{text}");
        assert!(text.is_ascii(), "{text}");
    }

    #[test]
    fn worker_properties_follow_strimzi() {
        let b = built(base());
        let p = properties(&b.worker_properties);
        let get = |k: &str| p.get(k).map(String::as_str);
        assert_eq!(
            get("bootstrap.servers"),
            Some("my-cluster-kafka-bootstrap:9092")
        );
        assert_eq!(get("group.id"), Some("g"));
        assert_eq!(get("config.storage.topic"), Some("g-configs"));
        assert_eq!(get("status.storage.topic"), Some("g-status"));
        assert_eq!(get("offset.storage.topic"), Some("g-offsets"));
        assert_eq!(
            get("rest.advertised.host.name"),
            Some("${strimzienv:ADVERTISED_HOSTNAME}")
        );
        assert_eq!(get("rest.advertised.port"), Some("8083"));
        assert_eq!(get("plugin.path"), Some("/opt/kafka/plugins"));
        assert_eq!(
            get("config.providers"),
            Some("mine,strimzienv,strimzifile,strimzidir")
        );
        assert_eq!(get("config.providers.mine.class"), Some("x.Y"));
        assert_eq!(get("config.storage.replication.factor"), Some("3"));
        assert_eq!(
            get("key.converter"),
            Some("org.apache.kafka.connect.json.JsonConverter")
        );
        assert_eq!(get("security.protocol"), Some("PLAINTEXT"));
        assert_eq!(get("admin.security.protocol"), Some("PLAINTEXT"));
        assert_eq!(get("weird key"), Some("a=b\\c\nd"), "escaped both ways");
        assert!(
            !p.contains_key("listeners"),
            "the default listener on 8083, like Strimzi"
        );
    }

    #[test]
    fn objects_names_labels_and_placement() {
        let b = built(base());
        assert_eq!(b.alias, "beta");
        let kinds: Vec<(&str, &str)> = b
            .objects
            .iter()
            .map(|o| {
                (
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("ConfigMap", "my-connect-connect-config"),
                ("StrimziPodSet", "my-connect-connect"),
                ("Service", "my-connect-connect-api"),
                ("Service", "my-connect-connect"),
                ("PodDisruptionBudget", "my-connect-connect"),
            ]
        );
        let budget = &b.objects[4]["spec"];
        assert_eq!(
            budget["minAvailable"],
            i64::from(b.revisions.len() as i32) - 1
        );
        assert_eq!(
            budget["selector"]["matchLabels"]["strimzi.io/kind"],
            "KafkaConnect"
        );
        for o in &b.objects {
            let l = &o["metadata"]["labels"];
            assert_eq!(l["strimzi.io/cluster"], "my-connect");
            assert_eq!(l["strimzi.io/kind"], "KafkaConnect");
            assert_eq!(l["strimzi.io/name"], "my-connect-connect");
            assert_eq!(o["metadata"]["namespace"], "ns");
        }
        assert_eq!(
            b.objects[0]["data"][CONFIG_KEY].as_str(),
            Some(b.worker_properties.as_str())
        );
        let api = &b.objects[2]["spec"];
        assert_eq!(api["ports"][0]["port"], 8083);
        assert_eq!(api["selector"]["strimzi.io/kind"], "KafkaConnect");
        assert_eq!(b.objects[3]["spec"]["clusterIP"], "None");
        let pods = b.objects[1]["spec"]["pods"].as_array().unwrap();
        let names: Vec<_> = pods
            .iter()
            .map(|p| p["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["my-connect-connect-0", "my-connect-connect-1"]);
        assert_eq!(b.revisions.len(), 2);
        let pod = &pods[1];
        assert_eq!(pod["spec"]["subdomain"], "my-connect-connect");
        let c = &pod["spec"]["containers"][0];
        assert_eq!(c["image"], format!("apache/kafka:{DEFAULT_KAFKA_VERSION}"));
        assert_eq!(
            c["env"][0],
            json!({"name": "ADVERTISED_HOSTNAME",
                   "value": "my-connect-connect-1.my-connect-connect.ns.svc"})
        );
        assert_eq!(
            pod["spec"]["volumes"][0]["configMap"]["name"],
            "my-connect-connect-config"
        );
        assert_eq!(
            pod["metadata"]["annotations"]["strimzi.io/revision"],
            json!(b.revisions["my-connect-connect-1"])
        );
        assert_eq!(
            label_selector("my-connect"),
            "strimzi.io/cluster=my-connect,strimzi.io/name=my-connect-connect,strimzi.io/kind=KafkaConnect"
        );
        assert_eq!(
            rest_url("my-connect", "ns"),
            "http://my-connect-connect-api.ns.svc:8083"
        );
    }

    #[test]
    fn resources_jvm_options_image_and_template_reach_the_pods() {
        let mut spec = base();
        spec["image"] = json!("my/connect:1");
        spec["resources"] = json!({"limits": {"memory": "2Gi"}});
        spec["jvmOptions"] = json!({"-Xmx": "1g", "-XX": {"UseG1GC": "true"},
                                    "javaSystemProperties": [{"name": "a", "value": "b"}]});
        spec["template"] = json!({
            "pod": {"metadata": {"labels": {"team": "x", "strimzi.io/cluster": "evil"},
                                 "annotations": {"note": "y"}},
                    "nodeSelector": {"zone": "a"}, "tolerations": [{"key": "k"}]},
            "connectContainer": {"env": [{"name": "EXTRA", "value": "1"},
                                         {"name": "ADVERTISED_HOSTNAME", "value": "no"}]},
            "apiService": {"metadata": {"annotations": {"svc": "z"}}},
            "podSet": {"metadata": {"labels": {"ps": "w"}}}
        });
        let b = built(spec);
        let pod = &b.objects[1]["spec"]["pods"][0];
        let c = &pod["spec"]["containers"][0];
        assert_eq!(c["image"], "my/connect:1");
        assert_eq!(c["resources"]["limits"]["memory"], "2Gi");
        let env: Vec<(String, String)> = c["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["name"].as_str().unwrap().into(),
                    e["value"].as_str().unwrap().into(),
                )
            })
            .collect();
        assert_eq!(
            env,
            [
                (
                    "ADVERTISED_HOSTNAME".into(),
                    "my-connect-connect-0.my-connect-connect.ns.svc".into()
                ),
                ("KAFKA_HEAP_OPTS".into(), "-Xmx1g".into()),
                ("KAFKA_OPTS".into(), "-XX:+UseG1GC -Da=b".into()),
                ("EXTRA".into(), "1".into()),
            ]
        );
        assert_eq!(pod["metadata"]["labels"]["team"], "x");
        assert_eq!(
            pod["metadata"]["labels"]["strimzi.io/cluster"],
            "my-connect"
        );
        assert_eq!(pod["metadata"]["annotations"]["note"], "y");
        assert_eq!(pod["spec"]["nodeSelector"]["zone"], "a");
        assert_eq!(pod["spec"]["tolerations"][0]["key"], "k");
        assert_eq!(b.objects[2]["metadata"]["annotations"]["svc"], "z");
        assert_eq!(b.objects[1]["metadata"]["labels"]["ps"], "w");
    }

    #[test]
    fn a_config_change_changes_every_revision_and_scaling_keeps_them() {
        let before = built(base());
        let mut spec = base();
        spec["config"]["offset.flush.interval.ms"] = json!(1000);
        let changed = built(spec);
        assert!(
            before
                .revisions
                .iter()
                .all(|(pod, rev)| changed.revisions[pod] != *rev)
        );
        let mut spec = base();
        spec["replicas"] = json!(3);
        let scaled = built(spec);
        assert_eq!(scaled.revisions.len(), 3);
        for (pod, rev) in &before.revisions {
            assert_eq!(&scaled.revisions[pod], rev);
        }
        let mut spec = base();
        spec["replicas"] = json!(0);
        let none = built(spec);
        assert_eq!(none.objects[1]["spec"]["pods"], json!([]));
    }

    /// What is built today for a plain Connect cluster and one with TLS trust material and the
    /// templates of its podset and Services, pinned: each worker's revision (a change restarts
    /// every worker on upgrade) and a digest of every object. See [`crate::testing::pinned`]
    /// to change it on purpose.
    #[test]
    fn what_is_built_is_pinned() {
        use crate::testing::digests;
        let mut dressed = base();
        dressed["template"] = json!({
            "podSet": {"metadata": {"labels": {"team": "data"}}},
            "apiService": {"metadata": {"annotations": {"note": "api"}}},
            "headlessService": {"metadata": {"labels": {"svc": "headless"}}}});
        let material = BTreeMap::from([("ca.crt".to_owned(), b"CA".to_vec())]);
        let plain = built(base());
        let c = connect(dressed);
        let dressed = build(
            &c,
            &resolve(&c, &members()).unwrap(),
            &material,
            Files::default(),
        );
        let mut tuned = base();
        tuned["resources"] = json!({"requests": {"cpu": "1"}, "limits": {"memory": "2Gi"}});
        tuned["jvmOptions"] = json!({"-Xmx": "1g", "-XX": {"UseG1GC": "true"}});
        tuned["template"] = json!({"connectContainer": {
            "env": [{"name": "EXTRA", "value": "1"},
                    {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
            "securityContext": {"runAsNonRoot": true}}});
        let tuned = built(tuned);
        let mut pinned = serde_json::Map::new();
        for (name, b) in [("plain", plain), ("dressed", dressed), ("tuned", tuned)] {
            let objects = digests("", &b.objects);
            pinned.insert(
                name.to_owned(),
                json!({"revisions": b.revisions, "objects": objects}),
            );
        }
        crate::testing::pinned(
            "src/connect/testdata/pinned-build.json",
            &Value::Object(pinned),
        );
    }
}
