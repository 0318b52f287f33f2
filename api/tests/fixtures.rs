//! The Strimzi-shaped manifests in `tests/fixtures/strimzi/` (v1 and v1beta2) deserialize into
//! kstretch's types, carry their key fields where expected, and pass the generated schemas
//! without being rejected or pruned.

// Helpers here are test code too; clippy's test allowances only cover `#[test]` functions.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use kstretch_api::connector::ConnectorState;
use kstretch_api::crd::version_schema;
use kstretch_api::kafka::{AuthorizationType, KafkaListenerType};
use kstretch_api::names;
use kstretch_api::schema_check::instance_problems;
use kstretch_api::storage::{KraftMetadata, SingleVolumeStorage};
use kstretch_api::{
    Kafka, KafkaConnect, KafkaConnector, KafkaNodePool, KafkaTopic, ProcessRole, Storage,
    StrimziPodSet, all_crds,
};
use serde::Deserialize;
use serde_json::Value;

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("tests")
        .join("fixtures")
        .join("strimzi")
}

/// One document of a fixture file.
struct Doc {
    file: String,
    version: String,
    value: Value,
}

impl Doc {
    fn kind(&self) -> &str {
        self.value["kind"].as_str().unwrap_or_default()
    }

    fn name(&self) -> &str {
        self.value["metadata"]["name"].as_str().unwrap_or_default()
    }

    fn label(&self) -> String {
        format!(
            "{}/{} {}/{}",
            self.version,
            self.file,
            self.kind(),
            self.name()
        )
    }
}

fn load(version: &str) -> Vec<Doc> {
    let dir = fixtures_dir().join(version);
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| entry.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", dir.display());
    let mut docs = Vec::new();
    for path in files {
        let text = fs::read_to_string(&path).expect("read fixture");
        let file = path
            .file_name()
            .expect("file name")
            .to_string_lossy()
            .into_owned();
        for document in serde_yaml::Deserializer::from_str(&text) {
            let value = Value::deserialize(document)
                .unwrap_or_else(|e| panic!("{file}: invalid YAML: {e}"));
            if value.is_null() {
                continue;
            }
            docs.push(Doc {
                file: file.clone(),
                version: version.to_owned(),
                value,
            });
        }
    }
    docs
}

/// The Strimzi and kstretch documents of the fixtures; the Kubernetes objects that come with
/// an example (a metrics ConfigMap) are Kubernetes' own and not checked here.
fn all_docs() -> Vec<Doc> {
    let mut docs = load("v1");
    docs.extend(load("v1beta2"));
    docs.retain(|d| {
        d.value["apiVersion"]
            .as_str()
            .is_some_and(|v| v.contains('/'))
    });
    docs
}

fn typed<T: serde::de::DeserializeOwned>(doc: &Doc) -> T {
    serde_json::from_value(doc.value.clone())
        .unwrap_or_else(|e| panic!("{}: does not deserialize: {e}", doc.label()))
}

fn find<'a>(docs: &'a [Doc], version: &str, file: &str, kind: &str, name: &str) -> &'a Doc {
    docs.iter()
        .find(|d| d.version == version && d.file == file && d.kind() == kind && d.name() == name)
        .unwrap_or_else(|| panic!("no fixture {version}/{file} {kind}/{name}"))
}

/// Serializes back and checks that no `null` is written anywhere.
fn assert_no_nulls(doc: &Doc, value: &Value) {
    fn walk(value: &Value, path: &str, label: &str) {
        match value {
            Value::Null => panic!("{label}: serializes a null at {path}"),
            Value::Object(map) => map
                .iter()
                .for_each(|(k, v)| walk(v, &format!("{path}.{k}"), label)),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .for_each(|(i, v)| walk(v, &format!("{path}[{i}]"), label)),
            _ => {}
        }
    }
    walk(value, "", &doc.label());
}

#[test]
fn every_fixture_deserializes_into_its_kind_and_serializes_without_nulls() {
    for doc in all_docs() {
        let api_version = doc.value["apiVersion"].as_str().unwrap_or_default();
        assert!(
            api_version.ends_with(&format!("/{}", doc.version)),
            "{}: apiVersion {api_version} in the {} directory",
            doc.label(),
            doc.version
        );
        let back = match doc.kind() {
            "Kafka" => serde_json::to_value(typed::<Kafka>(&doc)),
            "KafkaNodePool" => serde_json::to_value(typed::<KafkaNodePool>(&doc)),
            "KafkaTopic" => serde_json::to_value(typed::<KafkaTopic>(&doc)),
            "KafkaConnector" => serde_json::to_value(typed::<KafkaConnector>(&doc)),
            "KafkaConnect" => serde_json::to_value(typed::<KafkaConnect>(&doc)),
            "StrimziPodSet" => serde_json::to_value(typed::<StrimziPodSet>(&doc)),
            other => panic!("{}: unexpected kind {other}", doc.label()),
        }
        .expect("serializes");
        assert_no_nulls(&doc, &back);
    }
}

#[test]
fn every_kind_is_covered_in_both_versions() {
    let docs = all_docs();
    let covered: BTreeSet<(String, String)> = docs
        .iter()
        .map(|d| (d.version.clone(), d.kind().to_owned()))
        .collect();
    for version in ["v1", "v1beta2"] {
        for kind in [
            "Kafka",
            "KafkaNodePool",
            "KafkaTopic",
            "KafkaConnector",
            "KafkaConnect",
            "StrimziPodSet",
        ] {
            assert!(
                covered.contains(&(version.to_owned(), kind.to_owned())),
                "no {version} fixture of kind {kind}"
            );
        }
    }
}

#[test]
fn names_are_unique_per_file() {
    let docs = all_docs();
    let mut seen = BTreeSet::new();
    for doc in &docs {
        let key = (
            doc.version.clone(),
            doc.file.clone(),
            doc.kind().to_owned(),
            doc.name().to_owned(),
        );
        assert!(seen.insert(key), "{} appears twice", doc.label());
    }
}

#[test]
fn every_fixture_passes_the_schema_without_rejection_or_pruning() {
    let crds = all_crds();
    let mut failures = Vec::new();
    for doc in all_docs() {
        let group = doc.value["apiVersion"]
            .as_str()
            .and_then(|v| v.split('/').next())
            .unwrap_or_default()
            .to_owned();
        let crd = crds
            .iter()
            .find(|c| c.spec.names.kind == doc.kind() && c.spec.group == group)
            .unwrap_or_else(|| panic!("{}: no CRD", doc.label()));
        let schema = version_schema(crd, &doc.version)
            .unwrap_or_else(|| panic!("{}: version not served", doc.label()));
        let schema = serde_json::to_value(schema).expect("schema to JSON");
        for problem in instance_problems(&schema, &doc.value) {
            failures.push(format!("{}: {problem}", doc.label()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn v1_node_pools_carry_roles_and_jbod_kraft_metadata() {
    let docs = load("v1");
    let controllers: KafkaNodePool = typed(find(
        &docs,
        "v1",
        "kafka-persistent.yaml",
        "KafkaNodePool",
        "controllers",
    ));
    assert_eq!(controllers.spec.roles, vec![ProcessRole::Controller]);
    assert_eq!(controllers.spec.replicas, 3);
    assert_eq!(
        controllers
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(names::CLUSTER)),
        Some(&"orders".to_owned())
    );

    let brokers: KafkaNodePool = typed(find(
        &docs,
        "v1",
        "kafka-persistent.yaml",
        "KafkaNodePool",
        "brokers",
    ));
    let Storage::Jbod(jbod) = &brokers.spec.storage else {
        panic!("brokers use jbod storage");
    };
    assert_eq!(jbod.volumes.len(), 2);
    assert_eq!(
        jbod.volumes[0].kraft_metadata(),
        Some(KraftMetadata::Shared)
    );
    assert_eq!(jbod.volumes[1].kraft_metadata(), None);
    let SingleVolumeStorage::PersistentClaim(second) = &jbod.volumes[1] else {
        panic!("volume 1 is a persistent claim");
    };
    assert_eq!((second.id, second.delete_claim), (Some(1), Some(true)));
    assert_eq!(second.size.as_deref(), Some("500Gi"));

    let combined: KafkaNodePool = typed(find(
        &docs,
        "v1",
        "kafka-with-dual-role-nodes.yaml",
        "KafkaNodePool",
        "combined",
    ));
    assert_eq!(
        combined.spec.roles,
        vec![ProcessRole::Controller, ProcessRole::Broker]
    );

    let ephemeral: KafkaNodePool = typed(find(
        &docs,
        "v1",
        "kafka-ephemeral.yaml",
        "KafkaNodePool",
        "controllers",
    ));
    match ephemeral.spec.storage.volumes().as_slice() {
        [SingleVolumeStorage::Ephemeral(e)] => {
            assert_eq!(e.size_limit.as_deref(), Some("2Gi"));
            assert_eq!(e.kraft_metadata, Some(KraftMetadata::Shared));
        }
        other => panic!("unexpected volumes {other:?}"),
    }
}

#[test]
fn v1_stretched_pools_carry_alias_resources_and_jvm_options() {
    let docs = load("v1");
    let pool: KafkaNodePool = typed(find(
        &docs,
        "v1",
        "kafka-stretched.yaml",
        "KafkaNodePool",
        "brokers-west",
    ));
    let annotations = pool.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get(names::STRETCH_CLUSTER_ALIAS)
            .map(String::as_str),
        Some("west")
    );
    assert_eq!(
        annotations.get(names::REMOVE_NODE_IDS).map(String::as_str),
        Some("[3]")
    );
    let resources = pool.spec.resources.expect("resources");
    let requests = resources.requests.expect("requests");
    assert_eq!(
        requests.get("cpu").map(|q| q.0.as_str()),
        Some("2"),
        "integer quantity"
    );
    let jvm = pool.spec.jvm_options.expect("jvm options");
    assert_eq!(jvm.xmx.as_deref(), Some("4g"));
    assert_eq!(
        jvm.xx
            .as_ref()
            .and_then(|xx| xx.get("MaxGCPauseMillis"))
            .map(String::as_str),
        Some("20")
    );
    assert!(pool.spec.template.is_some_and(|t| t.contains_key("pod")));

    let kafka: Kafka = typed(find(
        &docs,
        "v1",
        "kafka-stretched.yaml",
        "Kafka",
        "payments",
    ));
    let spec = &kafka.spec.kafka;
    assert_eq!(spec.listeners.len(), 2);
    assert_eq!(spec.listeners[1].type_, KafkaListenerType::LoadBalancer);
    assert!(spec.listeners[1].authentication.is_some());
    let authorization = spec.authorization.as_ref().expect("authorization");
    assert_eq!(authorization.type_, AuthorizationType::Simple);
    assert_eq!(
        authorization.super_users,
        vec!["CN=payments-admin".to_owned()]
    );
    assert_eq!(
        spec.rack.as_ref().and_then(|r| r.topology_key.as_deref()),
        Some("topology.kubernetes.io/zone")
    );
    assert_eq!(
        spec.config
            .as_ref()
            .and_then(|c| c.get("auto.create.topics.enable")),
        Some(&Value::Bool(false))
    );
}

#[test]
fn v1_kafka_topic_and_connector_fields() {
    let docs = load("v1");
    let topic: KafkaTopic = typed(find(
        &docs,
        "v1",
        "kafka-topic.yaml",
        "KafkaTopic",
        "order-events",
    ));
    assert_eq!(
        (topic.spec.partitions, topic.spec.replicas),
        (Some(12), Some(3))
    );
    let config = topic.spec.config.as_ref().expect("config");
    assert_eq!(
        config.get("retention.ms"),
        Some(&Value::from(604_800_000_u64))
    );
    assert_eq!(config.get("cleanup.policy"), Some(&Value::from("delete")));
    assert_eq!(topic.kafka_topic_name(), Some("order-events"));
    let legacy: KafkaTopic = typed(find(
        &docs,
        "v1",
        "kafka-topic.yaml",
        "KafkaTopic",
        "legacy-audit-log",
    ));
    assert_eq!(legacy.kafka_topic_name(), Some("Legacy_Audit_Log"));

    let connector: KafkaConnector = typed(find(
        &docs,
        "v1",
        "source-connector.yaml",
        "KafkaConnector",
        "license-reader",
    ));
    let spec = &connector.spec;
    assert_eq!(spec.state, Some(ConnectorState::Stopped));
    assert_eq!(spec.effective_state(), ConnectorState::Stopped);
    assert_eq!(spec.tasks_max, Some(2));
    assert_eq!(
        spec.list_offsets
            .as_ref()
            .and_then(|l| l.to_config_map.name.as_deref()),
        Some("license-reader-offsets")
    );
    assert_eq!(
        spec.alter_offsets
            .as_ref()
            .and_then(|a| a.from_config_map.name.as_deref()),
        Some("license-reader-new-offsets")
    );
    assert_eq!(
        spec.auto_restart.as_ref().and_then(|a| a.max_restarts),
        Some(5)
    );
    assert_eq!(
        connector
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(names::CONNECTOR_OFFSETS))
            .map(String::as_str),
        Some(names::CONNECTOR_OFFSETS_ALTER)
    );

    let connect: KafkaConnect = typed(find(
        &docs,
        "v1",
        "kafka-connect.yaml",
        "KafkaConnect",
        "ingest",
    ));
    assert_eq!(
        connect.spec.effective_group_id().as_deref(),
        Some("ingest-connect")
    );
    assert_eq!(
        connect.spec.offset_storage_topic.as_deref(),
        Some("ingest-connect-offsets")
    );
    assert_eq!(
        connect.spec.bootstrap_servers,
        "orders-kafka-bootstrap:9093"
    );
}

#[test]
fn v1_pod_set_holds_full_pods() {
    let docs = load("v1");
    let podset: StrimziPodSet = typed(find(
        &docs,
        "v1",
        "strimzi-pod-set.yaml",
        "StrimziPodSet",
        "orders-brokers",
    ));
    assert_eq!(
        podset.spec.pod_names(),
        vec!["orders-brokers-3", "orders-brokers-4"]
    );
    let pods = podset.spec.typed_pods().expect("typed pods");
    let labels = pods[0].metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get(names::POOL_NAME).map(String::as_str),
        Some("brokers")
    );
    assert_eq!(
        labels.get(names::CONTROLLER_NAME).map(String::as_str),
        Some("orders-brokers")
    );
    let annotations = pods[0].metadata.annotations.clone().unwrap_or_default();
    assert!(annotations.contains_key(names::REVISION));
    let pod_spec = pods[0].spec.as_ref().expect("pod spec");
    assert_eq!(pod_spec.containers[0].name, "kafka");
    assert_eq!(pod_spec.volumes.as_ref().map(Vec::len), Some(7));
    let status = podset.status.expect("status");
    assert_eq!(
        (status.pods, status.ready_pods, status.current_pods),
        (Some(2), Some(1), Some(2))
    );
}

#[test]
fn v1_statuses_read_back() {
    let docs = load("v1");
    let kafka: Kafka = typed(find(
        &docs,
        "v1",
        "kafka-with-status.yaml",
        "Kafka",
        "orders",
    ));
    let status = kafka.status.expect("status");
    assert_eq!(status.registered_node_ids, vec![0, 1, 2, 3, 4, 5, 6]);
    assert_eq!(status.kafka_node_pools.len(), 2);
    assert_eq!(status.listeners[1].certificates.len(), 1);
    assert_eq!(status.listeners[0].addresses[0].port, Some(9092));
    assert!(kstretch_api::condition::is_true(
        &status.conditions,
        "Ready"
    ));

    let pool: KafkaNodePool = typed(find(
        &docs,
        "v1",
        "kafka-with-status.yaml",
        "KafkaNodePool",
        "brokers",
    ));
    let status = pool.status.expect("status");
    assert_eq!(status.node_ids, vec![3, 4, 5]);
    assert_eq!(status.roles, vec![ProcessRole::Broker]);
    assert!(
        status
            .label_selector
            .is_some_and(|s| s.contains("strimzi.io/pool-name=brokers"))
    );

    let topic: KafkaTopic = typed(find(
        &docs,
        "v1",
        "kafka-with-status.yaml",
        "KafkaTopic",
        "order-events",
    ));
    let change = topic
        .status
        .and_then(|s| s.replicas_change)
        .expect("replicas change");
    assert_eq!(change.target_replicas, Some(3));

    let connector: KafkaConnector = typed(find(
        &docs,
        "v1",
        "kafka-with-status.yaml",
        "KafkaConnector",
        "license-reader",
    ));
    let status = connector.status.expect("status");
    assert_eq!(status.topics, vec!["licenses".to_owned()]);
    assert!(
        status
            .connector_status
            .is_some_and(|s| s.contains_key("tasks"))
    );

    let connect: KafkaConnect = typed(find(
        &docs,
        "v1",
        "kafka-with-status.yaml",
        "KafkaConnect",
        "ingest",
    ));
    assert_eq!(connect.status.expect("status").connector_plugins.len(), 2);
}

#[test]
fn v1beta2_legacy_fields_are_read() {
    let docs = load("v1beta2");
    let legacy: Kafka = typed(find(
        &docs,
        "v1beta2",
        "kafka-legacy-replicas-storage.yaml",
        "Kafka",
        "warehouse",
    ));
    assert_eq!(legacy.spec.kafka.replicas, Some(3));
    assert!(
        matches!(legacy.spec.kafka.storage, Some(Storage::Jbod(ref j)) if j.volumes.len() == 1)
    );
    assert!(legacy.spec.kafka.resources.is_some());

    let inventory: Kafka = typed(find(
        &docs,
        "v1beta2",
        "kafka-kraft-node-pools.yaml",
        "Kafka",
        "inventory",
    ));
    let spec = &inventory.spec;
    assert!(
        spec.entity_operator
            .as_ref()
            .is_some_and(|e| e.topic_operator.is_some())
    );
    assert!(spec.cruise_control.is_some());
    assert!(spec.kafka_exporter.is_some());
    assert_eq!(spec.kafka.listeners.len(), 4);
    assert_eq!(spec.kafka.listeners[3].type_, KafkaListenerType::NodePort);
    assert_eq!(
        spec.kafka
            .authorization
            .as_ref()
            .map(|a| a.super_users.len()),
        Some(2)
    );
    let template = spec.kafka.template.as_ref().expect("template");
    assert!(template["pod"]["affinity"]["podAntiAffinity"].is_object());
    assert!(template["pod"]["tolerations"].is_array());

    let source: KafkaConnector = typed(find(
        &docs,
        "v1beta2",
        "source-connector.yaml",
        "KafkaConnector",
        "stock-file-source",
    ));
    assert_eq!(source.spec.pause, Some(true));
    assert_eq!(source.spec.effective_state(), ConnectorState::Paused);

    let connect: KafkaConnect = typed(find(
        &docs,
        "v1beta2",
        "kafka-connect.yaml",
        "KafkaConnect",
        "inventory-connect",
    ));
    assert_eq!(
        connect.spec.effective_group_id().as_deref(),
        Some("inventory-connect")
    );

    let topic: KafkaTopic = typed(find(
        &docs,
        "v1beta2",
        "kafka-topic.yaml",
        "KafkaTopic",
        "stock-defaults",
    ));
    assert_eq!(topic.kafka_topic_name(), Some("stock.defaults"));
    assert_eq!(topic.spec.partitions, None);
}

#[test]
fn schema_rejects_what_strimzi_rejects_and_keeps_what_it_does_not_model() {
    let crds = all_crds();
    let schema_for = |kind: &str| {
        let crd = crds
            .iter()
            .find(|c| c.spec.names.kind == kind)
            .expect("crd");
        serde_json::to_value(version_schema(crd, "v1").expect("v1")).expect("to JSON")
    };
    let docs = load("v1");
    let kafka = find(&docs, "v1", "kafka-persistent.yaml", "Kafka", "orders");
    let pool = find(
        &docs,
        "v1",
        "kafka-persistent.yaml",
        "KafkaNodePool",
        "brokers",
    );

    let mut bad_kafka = kafka.value.clone();
    bad_kafka["spec"]["kafka"]["listeners"][0]["type"] = Value::from("bogus");
    bad_kafka["spec"]["kafka"]["listeners"][1]["port"] = Value::from(80);
    let problems = instance_problems(&schema_for("Kafka"), &bad_kafka).join("\n");
    assert!(problems.contains("listeners[0].type"), "{problems}");
    assert!(problems.contains("listeners[1].port"), "{problems}");

    let mut bad_pool = pool.value.clone();
    bad_pool["spec"]["roles"] = serde_json::json!(["observer"]);
    bad_pool["spec"]["storage"]["volumes"][0]["type"] = Value::from("jbod");
    let problems = instance_problems(&schema_for("KafkaNodePool"), &bad_pool).join("\n");
    assert!(problems.contains(".spec.roles[0]"), "{problems}");
    assert!(problems.contains("volumes[0].type"), "{problems}");

    // Fields kstretch does not model are kept, at any depth.
    let mut extended = kafka.value.clone();
    extended["spec"]["kafka"]["listeners"][0]["networkPolicyPeers"] =
        serde_json::json!([{"podSelector": {"matchLabels": {"app": "x"}}}]);
    extended["spec"]["kafka"]["quotas"] =
        serde_json::json!({"type": "strimzi", "producerByteRate": 1024});
    extended["spec"]["kafka"]["storage"] = serde_json::json!({"type": "persistent-claim", "size": "1Gi", "overrides": [{"broker": 0, "class": "x"}]});
    extended["spec"]["someFutureSection"] = serde_json::json!({"enabled": true});
    assert_eq!(
        instance_problems(&schema_for("Kafka"), &extended),
        Vec::<String>::new()
    );
}
