//! What a manifest asks for that Strimzi acts on and kstretch does not (yet): each such field of
//! a `Kafka`, `KafkaNodePool` or `KafkaConnect` named by its path, with what happens instead,
//! for a `NotActedOn` warning. Nothing a manifest asks for is dropped without a word. Pure.
//!
//! Fields kstretch does not model at all come from the specs' `unmodelled` maps; the modelled
//! ones it keeps without acting on are listed here by hand. A `template` is checked against the
//! parts its builder applies ([`Applied`], from the builder's own table). `KafkaConnector` needs
//! nothing here: kstretch acts on every field of it.

use crate::kafka::external::{bootstrap_keys, broker_keys, served_configuration};
use kstretch_api::common::{JvmOptions, OpaqueObject};
use kstretch_api::connect::KafkaConnectSpec;
use kstretch_api::kafka::{KafkaClusterSpec, KafkaSpec};
use kstretch_api::node_pool::KafkaNodePoolSpec;
use serde_json::Value;

/// The warning reason.
pub const NOT_ACTED_ON: &str = "NotActedOn";

/// The parts of a `template` a builder applies, each with the keys of it that it takes.
pub type Applied = &'static [(&'static str, &'static [&'static str])];

/// Fields Strimzi acts on and kstretch does not model, by the object they are in, with what
/// happens instead. A field not listed is one kstretch does not know.
const KAFKA_SPEC: &[(&str, &str)] = &[
    ("zookeeper", "kstretch runs KRaft only"),
    (
        "jmxTrans",
        "JmxTrans is not deployed (Strimzi removed it too)",
    ),
];
const KAFKA_CLUSTER: &[(&str, &str)] = &[
    (
        "quotas",
        "no quota plugin is configured; Kafka's own client quotas (kafka-configs) still apply",
    ),
    ("tieredStorage", "no remote log storage is configured"),
    ("jmxOptions", "JMX is not exposed"),
    (
        "brokerRackInitImage",
        "no init container runs; each broker's rack is its Kubernetes cluster's alias",
    ),
];
const CONNECT: &[(&str, &str)] = &[
    ("tracing", "the workers are not instrumented"),
    (
        "rack",
        "the workers have no rack; consumers fetch from leaders",
    ),
    ("clientRackInitImage", "no init container runs"),
    ("jmxOptions", "JMX is not exposed"),
    (
        "plugins",
        "no plugin image is mounted: plugins must be in the image the workers run (spec.image)",
    ),
    (
        "externalConfiguration",
        "no environment variable or volume is added from it",
    ),
];
const LISTENER: &[(&str, &str)] = &[(
    "networkPolicyPeers",
    "kstretch creates no NetworkPolicy; every client that reaches the pods may connect",
)];
/// The keys of a listener's `configuration` kstretch reads.
const LISTENER_CONFIGURATION: &[&str] = &["brokerCertChainAndKey"];
/// The keys of `clusterCa` / `clientsCa` kstretch reads; `certificateExpirationPolicy` is
/// served when it is `renew-certificate`, and for the clients CA `replace-key` too.
const CA: &[&str] = &[
    "generateCertificateAuthority",
    "validityDays",
    "renewalDays",
];

/// What of `kafka`'s spec is not acted on, each a sentence naming the field's path.
pub fn kafka(spec: &KafkaSpec, template: Applied, exporter_template: Applied) -> Vec<String> {
    let mut out = unmodelled(".spec", &spec.unmodelled, KAFKA_SPEC);
    out.extend(cluster(&spec.kafka, template));
    if let Some(eo) = &spec.entity_operator {
        let path = ".spec.entityOperator";
        for (key, part) in [
            ("topicOperator", &eo.topic_operator),
            ("userOperator", &eo.user_operator),
        ] {
            for field in part.iter().flat_map(|p| p.keys()) {
                out.push(not_acted_on(
                    &format!("{path}.{key}.{field}"),
                    "kstretch's topic and user operators run inside central with its own settings, and reconcile every KafkaTopic and KafkaUser",
                ));
            }
        }
        for field in eo.unmodelled.keys() {
            out.push(not_acted_on(
                &format!("{path}.{field}"),
                "no entity operator pod runs",
            ));
        }
    }
    if spec.cruise_control.is_some() {
        out.push(not_acted_on(
            ".spec.cruiseControl",
            "Cruise Control is not deployed",
        ));
    }
    if let Some(exporter) = &spec.kafka_exporter {
        out.extend(kafka_exporter(exporter, exporter_template));
    }
    for (key, ca) in [
        ("clusterCa", &spec.cluster_ca),
        ("clientsCa", &spec.clients_ca),
    ] {
        out.extend(ca.iter().flat_map(|ca| certificate_authority(key, ca)));
    }
    out
}

/// Fields of `kafkaExporter` kstretch keeps without acting on, with what happens instead.
const KAFKA_EXPORTER: &[(&str, &str)] = &[
    (
        "image",
        "kstretch's Kafka Exporter runs from the agent's image of the member cluster",
    ),
    (
        "enableSaramaLogging",
        "kstretch's Kafka Exporter does not use Sarama; its Kafka client logs at the level of logging",
    ),
];

/// What of `kafkaExporter` is not acted on: its unmodelled fields, and of its `template` the
/// parts the exporter's Deployment does not apply.
fn kafka_exporter(spec: &kstretch_api::KafkaExporterSpec, applied: Applied) -> Vec<String> {
    let path = ".spec.kafkaExporter";
    let mut fields = spec.unmodelled.clone();
    let template = fields.remove("template");
    let mut out = unmodelled(path, &fields, KAFKA_EXPORTER);
    match template {
        Some(Value::Object(template)) => out.extend(template_parts(
            &format!("{path}.template"),
            Some(&template),
            applied,
        )),
        Some(_) => out.push(not_acted_on(
            &format!("{path}.template"),
            "it is not an object",
        )),
        None => {}
    }
    out
}

/// What of `spec.kafka` is not acted on.
fn cluster(spec: &KafkaClusterSpec, template: Applied) -> Vec<String> {
    let path = ".spec.kafka";
    let mut out = unmodelled(path, &spec.unmodelled, KAFKA_CLUSTER);
    if spec.storage.is_some() {
        out.push(not_acted_on(
            &format!("{path}.storage"),
            "each KafkaNodePool's own storage is used",
        ));
    }
    if let Some(authorization) = &spec.authorization
        && authorization.supports_admin_api.is_some()
    {
        out.push(not_acted_on(
            &format!("{path}.authorization.supportsAdminApi"),
            "KafkaUser ACLs are written through Kafka's Admin API whenever authorization is set",
        ));
    }
    out.extend(gc_logging(path, spec.jvm_options.as_ref()));
    for (i, listener) in spec.listeners.iter().enumerate() {
        let at = format!("{path}.listeners[{i}]");
        out.extend(unmodelled(&at, &listener.unmodelled, LISTENER));
        let t = listener.type_;
        let known =
            |k: &str| LISTENER_CONFIGURATION.contains(&k) || served_configuration(t).contains(&k);
        let configuration = listener.configuration.iter().flatten();
        for (key, value) in configuration {
            let at = format!("{at}.configuration.{key}");
            if !known(key) {
                out.push(not_acted_on(&at, "the listener is served without it"));
                continue;
            }
            let (parts, served_keys) = match key.as_str() {
                "bootstrap" => (vec![(at.clone(), value)], &bootstrap_keys(t)[..]),
                "brokers" => (
                    value
                        .as_array()
                        .into_iter()
                        .flatten()
                        .enumerate()
                        .map(|(i, b)| (format!("{at}[{i}]"), b))
                        .collect(),
                    &broker_keys(t)[..],
                ),
                _ => continue,
            };
            for (part_at, part) in parts {
                let unserved = part.as_object().into_iter().flatten().map(|(k, _)| k);
                for k in unserved.filter(|k| !served_keys.contains(&k.as_str())) {
                    out.push(not_acted_on(
                        &format!("{part_at}.{k}"),
                        "the listener's Services are made without it",
                    ));
                }
            }
        }
    }
    out.extend(template_parts(
        &format!("{path}.template"),
        spec.template.as_ref(),
        template,
    ));
    out
}

/// What of a `KafkaNodePool`'s spec is not acted on.
pub fn pool(spec: &KafkaNodePoolSpec, template: Applied) -> Vec<String> {
    let mut out = unmodelled(".spec", &spec.unmodelled, &[]);
    out.extend(gc_logging(".spec", spec.jvm_options.as_ref()));
    out.extend(template_parts(
        ".spec.template",
        spec.template.as_ref(),
        template,
    ));
    out
}

/// What of a `KafkaConnect`'s spec is not acted on.
pub fn connect(spec: &KafkaConnectSpec, template: Applied) -> Vec<String> {
    let mut fields = spec.unmodelled.clone();
    // Refused, not warned about (`connect::validate`): no image is built.
    fields.remove("build");
    let mut out = unmodelled(".spec", &fields, CONNECT);
    out.extend(gc_logging(".spec", spec.jvm_options.as_ref()));
    out.extend(template_parts(
        ".spec.template",
        spec.template.as_ref(),
        template,
    ));
    out
}

fn not_acted_on(path: &str, instead: &str) -> String {
    format!("{path} is not acted on: {instead}")
}

/// Every field of `fields` (the unmodelled ones at `path`), with what `known` says happens
/// instead.
fn unmodelled(path: &str, fields: &OpaqueObject, known: &[(&str, &str)]) -> Vec<String> {
    fields
        .keys()
        .map(|field| {
            let instead = known
                .iter()
                .find(|(k, _)| k == field)
                .map_or("kstretch does not know this field", |(_, instead)| instead);
            not_acted_on(&format!("{path}.{field}"), instead)
        })
        .collect()
}

fn gc_logging(path: &str, jvm: Option<&JvmOptions>) -> Option<String> {
    jvm.and_then(|j| j.gc_logging_enabled).map(|_| {
        not_acted_on(
            &format!("{path}.jvmOptions.gcLoggingEnabled"),
            "garbage collection is logged as the Kafka image's scripts set it",
        )
    })
}

/// The parts of `template` (at `path`) the builder does not apply, and the keys of applied
/// parts it does not take.
fn template_parts(path: &str, template: Option<&OpaqueObject>, applied: Applied) -> Vec<String> {
    let mut out = Vec::new();
    for (part, value) in template.into_iter().flatten() {
        match applied.iter().find(|(p, _)| p == part) {
            None => out.push(not_acted_on(
                &format!("{path}.{part}"),
                "kstretch does not apply this part of the template",
            )),
            Some((_, taken)) => {
                let keys = value.as_object().into_iter().flat_map(|o| o.keys());
                for key in keys.filter(|k| !taken.contains(&k.as_str())) {
                    out.push(not_acted_on(
                        &format!("{path}.{part}.{key}"),
                        "kstretch does not apply it",
                    ));
                }
            }
        }
    }
    out
}

/// What of `clusterCa` / `clientsCa` (`key`) is not acted on.
fn certificate_authority(key: &str, ca: &OpaqueObject) -> Vec<String> {
    let path = format!(".spec.{key}");
    ca.iter()
        .filter(|(field, _)| !CA.contains(&field.as_str()))
        .filter_map(|(field, value)| {
            let instead = match field.as_str() {
                "certificateExpirationPolicy" if value == &Value::from("renew-certificate") => {
                    return None;
                }
                "certificateExpirationPolicy"
                    if key == "clientsCa" && value == &Value::from("replace-key") =>
                {
                    return None;
                }
                "certificateExpirationPolicy" => {
                    "a generated CA's certificate is renewed with its key kept (renew-certificate); kstretch does not replace the cluster CA's key yet"
                }
                "generateSecretOwnerReference" => {
                    "generated CA Secrets are deleted with the Kafka when it is deleted, whatever it says"
                }
                _ => "kstretch does not know this field",
            };
            Some(not_acted_on(&format!("{path}.{field}"), instead))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use kstretch_api::{Kafka, KafkaConnect, KafkaNodePool};
    use serde_json::json;

    use super::*;

    const APPLIED: Applied = &[("pod", &["affinity", "metadata"])];
    const EXPORTER_APPLIED: Applied = &[
        ("pod", &["affinity", "metadata"]),
        ("deployment", &["metadata"]),
    ];

    fn kafka_spec(spec: Value) -> KafkaSpec {
        let k: Kafka = serde_json::from_value(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "Kafka",
            "metadata": {"name": "k"}, "spec": spec
        }))
        .unwrap();
        k.spec
    }

    fn named(warnings: &[String], path: &str) -> bool {
        warnings
            .iter()
            .any(|w| w.starts_with(&format!("{path} is not acted on: ")))
    }

    fn listeners() -> Value {
        json!([{"name": "plain", "port": 9092, "type": "internal", "tls": false}])
    }

    #[test]
    fn a_kafka_of_served_fields_only_gets_no_warning() {
        let spec = kafka_spec(json!({
            "kafka": {"version": "4.1.2", "listeners": listeners(),
                      "config": {"a": 1}, "authorization": {"type": "simple"},
                      "jvmOptions": {"-Xmx": "1g"},
                      "template": {"pod": {"affinity": {}, "metadata": {"labels": {"a": "b"}}}}},
            "entityOperator": {"topicOperator": {}, "userOperator": {}},
            "clusterCa": {"generateCertificateAuthority": true, "validityDays": 30,
                          "certificateExpirationPolicy": "renew-certificate"}
        }));
        assert_eq!(
            kafka(&spec, APPLIED, EXPORTER_APPLIED),
            Vec::<String>::new()
        );
    }

    #[test]
    fn every_kafka_field_strimzi_acts_on_and_kstretch_does_not_is_named() {
        let spec = kafka_spec(json!({
            "kafka": {
                "listeners": [
                    {"name": "plain", "port": 9092, "type": "internal", "tls": false,
                     "configuration": {"useServiceDnsDomain": true},
                     "networkPolicyPeers": [{}]},
                    {"name": "ext", "port": 9094, "type": "nodeport", "tls": false,
                     "configuration": {"bootstrap": {"nodePort": 32100}}}
                ],
                "metricsConfig": {"type": "strimziMetricsReporter"},
                "logging": {"type": "inline"}, "quotas": {"type": "kafka"},
                "tieredStorage": {"type": "custom"}, "livenessProbe": {}, "readinessProbe": {},
                "jmxOptions": {}, "brokerRackInitImage": "i", "madeUp": 1,
                "storage": {"type": "ephemeral"},
                "authorization": {"type": "custom", "authorizerClass": "A",
                                  "supportsAdminApi": true},
                "jvmOptions": {"gcLoggingEnabled": true},
                "template": {"pod": {"affinity": {}, "volumes": []},
                             "kafkaContainer": {"volumeMounts": []}}
            },
            "zookeeper": {"replicas": 3},
            "entityOperator": {"topicOperator": {"watchedNamespace": "x"},
                               "userOperator": {"secretPrefix": "p-"}, "template": {}},
            "cruiseControl": {},
            "kafkaExporter": {"topicRegex": ".*", "showAllOffsets": false, "logging": "debug",
                              "image": "x", "enableSaramaLogging": true,
                              "template": {"pod": {"affinity": {}, "volumes": []},
                                           "service": {}}},
            "maintenanceTimeWindows": ["* * 0-1 ? * SUN *"],
            "clusterCa": {"certificateExpirationPolicy": "replace-key"},
            "clientsCa": {"generateSecretOwnerReference": false,
                          "certificateExpirationPolicy": "replace-key"}
        }));
        let w = kafka(&spec, APPLIED, EXPORTER_APPLIED);
        for path in [
            ".spec.kafka.listeners[0].configuration.useServiceDnsDomain",
            ".spec.kafka.listeners[0].networkPolicyPeers",
            ".spec.kafka.quotas",
            ".spec.kafka.tieredStorage",
            ".spec.kafka.jmxOptions",
            ".spec.kafka.brokerRackInitImage",
            ".spec.kafka.madeUp",
            ".spec.kafka.storage",
            ".spec.kafka.authorization.supportsAdminApi",
            ".spec.kafka.jvmOptions.gcLoggingEnabled",
            ".spec.kafka.template.pod.volumes",
            ".spec.kafka.template.kafkaContainer",
            ".spec.zookeeper",
            ".spec.entityOperator.topicOperator.watchedNamespace",
            ".spec.entityOperator.userOperator.secretPrefix",
            ".spec.entityOperator.template",
            ".spec.cruiseControl",
            ".spec.kafkaExporter.image",
            ".spec.kafkaExporter.enableSaramaLogging",
            ".spec.kafkaExporter.template.pod.volumes",
            ".spec.kafkaExporter.template.service",
            ".spec.clusterCa.certificateExpirationPolicy",
            ".spec.clientsCa.generateSecretOwnerReference",
        ] {
            assert!(named(&w, path), "{path} not named in {w:#?}");
        }
        assert_eq!(w.len(), 23, "nothing else: {w:#?}");
        for served in [
            "topicRegex",
            "showAllOffsets",
            "logging",
            "template.pod.affinity",
        ] {
            let path = format!(".spec.kafkaExporter.{served}");
            assert!(!named(&w, &path), "{path} is served: {w:#?}");
        }
        assert!(
            !named(&w, ".spec.kafka.metricsConfig"),
            "the reporter is served"
        );
        assert!(!named(&w, ".spec.kafka.logging"), "logging is served");
        assert!(!named(&w, ".spec.kafka.livenessProbe"), "probes are served");
        assert!(
            !named(&w, ".spec.clientsCa.certificateExpirationPolicy"),
            "the clients CA's replace-key is served: {w:#?}"
        );
        assert!(
            w.iter()
                .any(|m| m.contains("madeUp is not acted on: kstretch does not know this field"))
        );
        // The nodeport listener is left out whole (a warning of its own), not key by key.
        assert!(!w.iter().any(|m| m.contains("listeners[1]")), "{w:#?}");
    }

    #[test]
    fn pool_and_connect_fields_are_named_too() {
        let p: KafkaNodePool = serde_json::from_value(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaNodePool",
            "metadata": {"name": "p"},
            "spec": {"replicas": 1, "roles": ["broker"], "storage": {"type": "ephemeral"},
                     "jvmOptions": {"gcLoggingEnabled": false}, "later": {},
                     "template": {"pod": {"affinity": {}, "dnsPolicy": "None"},
                                  "podSet": {"metadata": {}}}}
        }))
        .unwrap();
        let w = pool(&p.spec, APPLIED);
        for path in [
            ".spec.later",
            ".spec.jvmOptions.gcLoggingEnabled",
            ".spec.template.pod.dnsPolicy",
            ".spec.template.podSet",
        ] {
            assert!(named(&w, path), "{path} not named in {w:#?}");
        }
        assert_eq!(w.len(), 4, "{w:#?}");

        let c: KafkaConnect = serde_json::from_value(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaConnect",
            "metadata": {"name": "c"},
            "spec": {"bootstrapServers": "k:9092",
                     "tracing": {}, "rack": {}, "clientRackInitImage": "i", "jmxOptions": {},
                     "livenessProbe": {}, "readinessProbe": {}, "build": {}, "plugins": [],
                     "externalConfiguration": {},
                     "template": {"pod": {"affinity": {}}, "initContainer": {}}}
        }))
        .unwrap();
        let w = connect(&c.spec, APPLIED);
        for field in [
            "tracing",
            "rack",
            "clientRackInitImage",
            "jmxOptions",
            "plugins",
            "externalConfiguration",
            "template.initContainer",
        ] {
            assert!(
                named(&w, &format!(".spec.{field}")),
                "{field} not named in {w:#?}"
            );
        }
        assert_eq!(w.len(), 7, "{w:#?}");
        assert!(!named(&w, ".spec.livenessProbe"), "served: {w:#?}");
        // Refused instead (connect::validate).
        assert!(!named(&w, ".spec.build"), "{w:#?}");
    }
}
