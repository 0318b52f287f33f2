//! End-to-end tests of the connector operator: the real central against cluster alpha's
//! apiserver and the environment's real Kafka Connect worker (FileStreamSource and
//! FileStreamSink), with Connect's state read over its REST API and sink offsets checked
//! against the consumer group through `rdkafka`.
//!
//! Connector, topic and file names are unique per test and run, so tests share the worker.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use kstretch_tests::TestEnv;
use kstretch_tests::connect::{connector_get, connector_state};
use kstretch_tests::connectors::{ConnectorOperator, reported_state, unique, warning};
use kstretch_tests::events::{note, wait_event};
use kstretch_tests::wait::{Seen, wait_for};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::{Value, json};

const SOURCE: &str = "org.apache.kafka.connect.file.FileStreamSourceConnector";
const SINK: &str = "org.apache.kafka.connect.file.FileStreamSinkConnector";

fn bootstrap() -> String {
    TestEnv::get().kafka_bootstrap.clone()
}

/// A file for a connector (the worker runs on this machine), with `lines` in it.
fn data_file(name: &str, lines: &[&str]) -> PathBuf {
    let dir = std::env::temp_dir().join("kstretch-connector-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.txt"));
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path
}

async fn create_topic(topic: &str) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .create()
        .unwrap();
    let results = admin
        .create_topics(
            &[NewTopic::new(topic, 1, TopicReplication::Fixed(1))],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(20))),
        )
        .await
        .unwrap();
    for r in results {
        r.unwrap_or_else(|(t, e)| panic!("cannot create topic {t}: {e}"));
    }
}

async fn produce(topic: &str, values: &[&str]) {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .create()
        .unwrap();
    for v in values {
        producer
            .send(
                FutureRecord::<(), str>::to(topic).payload(v),
                Duration::from_secs(20),
            )
            .await
            .unwrap_or_else(|(e, _)| panic!("cannot produce to {topic}: {e}"));
    }
}

/// The committed offset of `group` on partition 0 of `topic`, read from Kafka.
fn committed(group: &str, topic: &str) -> Option<i64> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("group.id", group)
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(topic, 0);
    let got = consumer
        .committed_offsets(tpl, Duration::from_secs(10))
        .unwrap();
    match got.find_partition(topic, 0)?.offset() {
        Offset::Offset(o) => Some(o),
        _ => None,
    }
}

async fn wait_committed(group: &str, topic: &str, expected: Option<i64>) {
    wait_for(
        &format!("group {group} committed {expected:?} on {topic}-0"),
        Duration::from_secs(60),
        || async move {
            match committed(group, topic) {
                c if c == expected => Seen::Done(()),
                other => Seen::NotYet(format!("{other:?}")),
            }
        },
    )
    .await
}

/// Waits until Connect's own `GET /connectors/{name}/offsets` satisfies `check`.
async fn wait_connect_offsets(
    op: &ConnectorOperator,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    wait_for(what, Duration::from_secs(60), || async {
        match connector_get(&op.connect_url, name, "offsets").await {
            Some(o) if check(&o) => Seen::Done(o),
            other => Seen::NotYet(format!("{other:?}\n{}", op.logs())),
        }
    })
    .await
}

fn source_spec(file: &std::path::Path, topic: &str, extra: Value) -> Value {
    let mut spec = json!({
        "class": SOURCE, "tasksMax": 1,
        "config": {"file": file.to_str().unwrap(), "topic": topic}
    });
    if let Value::Object(extra) = extra {
        for (k, v) in extra {
            spec[k] = v;
        }
    }
    spec
}

fn annotated(kc: &kstretch_api::KafkaConnector) -> Option<String> {
    kc.metadata
        .annotations
        .as_ref()?
        .get("strimzi.io/connector-offsets")
        .cloned()
}

#[tokio::test]
async fn connector_lifecycle_create_update_states_delete() {
    let op = ConnectorOperator::start("ctr-lifecycle").await;
    let name = unique("src-life");
    let topic = unique("ctr-life");
    create_topic(&topic).await;
    let file = data_file(&name, &["one", "two", "three"]);

    op.apply_connector(&name, source_spec(&file, &topic, json!({})), json!({}))
        .await;
    let kc = op
        .wait_connector(&name, "running, with its topic and tasksMax", |kc| {
            kstretch_tests::connectors::reconciled(kc)
                && reported_state(kc).as_deref() == Some("RUNNING")
                && kc.status.as_ref().is_some_and(|s| {
                    s.topics.contains(&topic)
                        && s.tasks_max == Some(1)
                        && s.conditions
                            .iter()
                            .any(|c| c.type_ == "Ready" && c.status == "True")
                })
        })
        .await;
    assert!(
        kc.metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|f| f == "kstretch.io/kafka-connector")),
        "finalizer set: {:?}",
        kc.metadata
    );
    let tasks = kc
        .status
        .as_ref()
        .unwrap()
        .connector_status
        .as_ref()
        .unwrap()["tasks"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(tasks.len(), 1, "one task in connectorStatus: {tasks:?}");
    let config = connector_get(&op.connect_url, &name, "config")
        .await
        .unwrap();
    assert_eq!(config["connector.class"], SOURCE);
    assert_eq!(config["tasks.max"], "1");
    assert_eq!(config["file"], file.to_str().unwrap());

    // A config change reaches Connect, and the status describes the new generation.
    op.apply_connector(
        &name,
        json!({"class": SOURCE, "tasksMax": 1,
               "config": {"file": file.to_str().unwrap(), "topic": topic, "batch.size": 100}}),
        json!({}),
    )
    .await;
    let kc = op.wait_ready(&name).await;
    assert_eq!(kc.status.unwrap().observed_generation, Some(2));
    let config = connector_get(&op.connect_url, &name, "config")
        .await
        .unwrap();
    assert_eq!(config["batch.size"], "100");

    // spec.state: paused, stopped and back to running.
    for (state, connect) in [
        ("paused", "PAUSED"),
        ("stopped", "STOPPED"),
        ("running", "RUNNING"),
    ] {
        let mut spec = source_spec(&file, &topic, json!({"state": state}));
        spec["config"]["batch.size"] = json!(100);
        op.apply_connector(&name, spec, json!({})).await;
        op.wait_connect_state(&name, connect).await;
        op.wait_connector(&name, &format!("status reports {connect}"), |kc| {
            kstretch_tests::connectors::reconciled(kc)
                && reported_state(kc).as_deref() == Some(connect)
        })
        .await;
    }
    assert!(
        op.metric("kstretch_central_connector_reconciliations_total")
            .await
            .is_some_and(|v| v > 0.0)
    );

    // Deleting the resource removes the connector from Connect.
    op.delete_connector(&name).await;
    wait_for(
        "the connector gone from Kafka Connect",
        Duration::from_secs(30),
        || async {
            match connector_get(&op.connect_url, &name, "").await {
                None => Seen::Done(()),
                Some(c) => Seen::NotYet(format!("{c:?}")),
            }
        },
    )
    .await;
    op.finish().await;
}

#[tokio::test]
async fn connector_bad_input_is_refused_with_a_reason() {
    let op = ConnectorOperator::start("ctr-bad").await;
    let topic = unique("ctr-bad");
    create_topic(&topic).await;

    // A class Connect does not have.
    let unknown = unique("unknown-class");
    op.apply_connector(
        &unknown,
        json!({"class": "org.example.NoSuchConnector", "tasksMax": 1, "config": {"topic": topic}}),
        json!({}),
    )
    .await;
    let kc = op.wait_not_ready(&unknown, "ConnectorClassNotFound").await;
    let message = kc.status.unwrap().conditions[0].message.clone().unwrap();
    assert!(message.contains("org.example.NoSuchConnector"), "{message}");
    assert!(message.contains("FileStreamSourceConnector"), "{message}");
    assert_eq!(connector_get(&op.connect_url, &unknown, "").await, None);

    // Invalid config: Connect's validation message is shown; fixing it makes it ready.
    let invalid = unique("invalid-config");
    let file = data_file(&invalid, &["x"]);
    op.apply_connector(
        &invalid,
        json!({"class": SOURCE, "tasksMax": 1, "config": {"file": file.to_str().unwrap()}}),
        json!({}),
    )
    .await;
    let kc = op.wait_not_ready(&invalid, "InvalidConfig").await;
    let ready = kc
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap()
        .clone();
    assert!(
        ready
            .message
            .as_deref()
            .unwrap()
            .contains("Missing required configuration \"topic\""),
        "{ready:?}"
    );
    assert_eq!(connector_get(&op.connect_url, &invalid, "").await, None);
    op.apply_connector(&invalid, source_spec(&file, &topic, json!({})), json!({}))
        .await;
    op.wait_ready(&invalid).await;

    // Keys the operator sets itself are ignored, with a warning.
    let forbidden = unique("forbidden-keys");
    let mut spec = source_spec(&file, &topic, json!({}));
    spec["config"]["tasks.max"] = json!(5);
    op.apply_connector(&forbidden, spec, json!({})).await;
    let kc = op.wait_ready(&forbidden).await;
    assert!(warning(&kc, "IgnoredConfig").is_some(), "{:?}", kc.status);
    let config = connector_get(&op.connect_url, &forbidden, "config")
        .await
        .unwrap();
    assert_eq!(config["tasks.max"], "1");

    // No strimzi.io/cluster label.
    let unlabelled = unique("no-label");
    op.apply(
        json!({"apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaConnector",
                    "metadata": {"name": unlabelled},
                    "spec": source_spec(&file, &topic, json!({}))}),
    )
    .await;
    op.wait_not_ready(&unlabelled, "MissingClusterLabel").await;

    // A KafkaConnect that does not exist.
    let orphan = unique("no-connect");
    op.apply_connector(
        &orphan,
        source_spec(&file, &topic, json!({})),
        json!({"labels": {"strimzi.io/cluster": "no-such-connect"}}),
    )
    .await;
    let kc = op.wait_not_ready(&orphan, "KafkaConnectNotFound").await;
    assert!(format!("{:?}", kc.status).contains("no-such-connect"));

    // A KafkaConnect that does not manage connectors with resources; enabling it (a change
    // of the KafkaConnect only) makes the connector ready.
    let disabled = unique("resources-off");
    op.apply_connect("connect-off", false).await;
    op.apply_connector(
        &disabled,
        source_spec(&file, &topic, json!({})),
        json!({"labels": {"strimzi.io/cluster": "connect-off"}}),
    )
    .await;
    let kc = op
        .wait_not_ready(&disabled, "ConnectorResourcesDisabled")
        .await;
    assert!(format!("{:?}", kc.status).contains("strimzi.io/use-connector-resources"));
    assert_eq!(connector_get(&op.connect_url, &disabled, "").await, None);
    op.apply_connect("connect-off", true).await;
    op.wait_ready(&disabled).await;
    op.wait_connect_state(&disabled, "RUNNING").await;

    // A KafkaConnect whose Connect cannot be reached.
    let unreachable = unique("connect-down");
    op.apply(
        json!({"apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaConnect",
                    "metadata": {"name": "connect-down", "annotations": {
                        "strimzi.io/use-connector-resources": "true",
                        "kstretch.io/connect-rest-url": "http://127.0.0.1:1"}},
                    "spec": {"bootstrapServers": bootstrap()}}),
    )
    .await;
    op.apply_connector(
        &unreachable,
        source_spec(&file, &topic, json!({})),
        json!({"labels": {"strimzi.io/cluster": "connect-down"}}),
    )
    .await;
    op.wait_not_ready(&unreachable, "ConnectUnreachable").await;
    // Its KafkaConnect deleted, the connector's deletion is not held by the finalizer.
    let connects: kube::Api<kstretch_api::KafkaConnect> = op.namespace.api();
    connects
        .delete("connect-down", &Default::default())
        .await
        .unwrap();
    op.delete_connector(&unreachable).await;

    // The KafkaConnect goes away: deleting the connector does not hang on its finalizer.
    let gone = unique("connect-gone");
    op.apply_connect("connect-gone", true).await;
    op.apply_connector(
        &gone,
        source_spec(&file, &topic, json!({})),
        json!({"labels": {"strimzi.io/cluster": "connect-gone"}}),
    )
    .await;
    op.wait_ready(&gone).await;
    connects
        .delete("connect-gone", &Default::default())
        .await
        .unwrap();
    op.wait_not_ready(&gone, "KafkaConnectNotFound").await;
    op.delete_connector(&gone).await;

    op.finish().await;
}

#[tokio::test]
async fn failed_tasks_are_restarted_automatically_with_backoff() {
    let op = ConnectorOperator::start("ctr-restart").await;
    let topic = unique("ctr-restart");
    create_topic(&topic).await;
    // The sink task cannot open a file in a directory that does not exist: it fails.
    let bad_file = format!("/nonexistent-{}/out.txt", unique("dir"));
    let failing = |auto: Value, file: &str| {
        json!({"class": SINK, "tasksMax": 1, "autoRestart": auto,
               "config": {"file": file, "topics": topic}})
    };

    let name = unique("sink-restart");
    op.apply_connector(
        &name,
        failing(json!({"enabled": true, "maxRestarts": 3}), &bad_file),
        json!({}),
    )
    .await;
    let kc = op
        .wait_connector(&name, "failed task restarted once", |kc| {
            kc.status
                .as_ref()
                .and_then(|s| s.auto_restart.as_ref())
                .is_some_and(|a| a.count == Some(1) && a.last_restart_timestamp.is_some())
        })
        .await;
    let kc = op
        .wait_not_ready(kc.metadata.name.as_deref().unwrap(), "TasksFailed")
        .await;
    // The next restart is due 2 minutes later: the count stays at 1 meanwhile.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let now = op.connectors().get(&name).await.unwrap();
    assert_eq!(
        now.status.as_ref().unwrap().auto_restart,
        kc.status.as_ref().unwrap().auto_restart
    );
    assert!(
        op.metric("kstretch_central_connector_auto_restarts_total")
            .await
            .is_some_and(|v| v >= 1.0)
    );

    // Without autoRestart a failed task is reported, not restarted.
    let manual = unique("sink-manual");
    op.apply_connector(
        &manual,
        failing(json!({"enabled": false}), &bad_file),
        json!({}),
    )
    .await;
    let kc = op.wait_not_ready(&manual, "TasksFailed").await;
    assert!(kc.status.as_ref().unwrap().auto_restart.is_none());
    let message = kc
        .status
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap()
        .message
        .clone()
        .unwrap();
    assert!(
        message.contains("The following tasks have failed: 0"),
        "{message}"
    );

    // Fixing the file makes the connector ready; the restart record stays until it is stable.
    let good = data_file(&unique("sink-out"), &[]);
    op.apply_connector(
        &name,
        failing(
            json!({"enabled": true, "maxRestarts": 3}),
            good.to_str().unwrap(),
        ),
        json!({}),
    )
    .await;
    let kc = op.wait_ready(&name).await;
    assert_eq!(
        kc.status.unwrap().auto_restart.and_then(|a| a.count),
        Some(1)
    );
    op.finish().await;
}

/// Strimzi's restart annotations on a `KafkaConnector`. A sink task fails on a directory that
/// does not exist, and Connect never retries it; once the directory exists, only a restart
/// brings it back. Malformed values are warnings naming them and restart nothing;
/// `strimzi.io/restart-task: "0"` restarts that task, `strimzi.io/restart: includeTasks,onlyFailed`
/// the connector and its failed task; each annotation goes once Connect took the restart, with
/// an Event.
#[tokio::test]
async fn restart_annotations_restart_the_connector_or_one_task_once() {
    let op = ConnectorOperator::start("ctr-restart-anno").await;
    let topic = unique("ctr-restart-anno");
    create_topic(&topic).await;
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(op.connectors().into_client(), op.ns());
    let sink = |file: &std::path::Path| json!({"class": SINK, "tasksMax": 1, "config": {"file": file.to_str().unwrap(), "topics": topic}});
    let missing_dir = || std::env::temp_dir().join(unique("kstretch-restart-dir"));

    let task_dir = missing_dir();
    let by_task = unique("sink-restart-task");
    op.apply_connector(&by_task, sink(&task_dir.join("out.txt")), json!({}))
        .await;
    op.wait_not_ready(&by_task, "TasksFailed").await;
    op.annotate(&by_task, "strimzi.io/restart", Some("true,includeTasks"))
        .await;
    op.annotate(&by_task, "strimzi.io/restart-task", Some("first"))
        .await;
    op.wait_warning(&by_task, "RestartConnector", "\"true,includeTasks\"")
        .await;
    let kc = op
        .wait_warning(&by_task, "RestartConnectorTask", "\"first\"")
        .await;
    assert!(
        kc.metadata
            .annotations
            .as_ref()
            .unwrap()
            .contains_key("strimzi.io/restart-task"),
        "a malformed request stays for the user to fix"
    );
    op.annotate(&by_task, "strimzi.io/restart", None).await;
    std::fs::create_dir_all(&task_dir).unwrap();
    op.annotate(&by_task, "strimzi.io/restart-task", Some("0"))
        .await;
    let kc = op.wait_ready(&by_task).await;
    assert!(warning(&kc, "RestartConnectorTask").is_none());
    op.wait_connector(&by_task, "the restart-task annotation gone", |kc| {
        !kc.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key("strimzi.io/restart-task"))
    })
    .await;
    wait_event(
        &events,
        "KafkaConnector",
        &by_task,
        "ConnectorTaskRestarted",
        Duration::from_secs(30),
    )
    .await;

    let connector_dir = missing_dir();
    let by_connector = unique("sink-restart");
    op.apply_connector(
        &by_connector,
        sink(&connector_dir.join("out.txt")),
        json!({}),
    )
    .await;
    op.wait_not_ready(&by_connector, "TasksFailed").await;
    std::fs::create_dir_all(&connector_dir).unwrap();
    op.annotate(
        &by_connector,
        "strimzi.io/restart",
        Some("includeTasks,onlyFailed"),
    )
    .await;
    op.wait_ready(&by_connector).await;
    op.wait_connector(&by_connector, "the restart annotation gone", |kc| {
        !kc.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key("strimzi.io/restart"))
    })
    .await;
    let restarted = wait_event(
        &events,
        "KafkaConnector",
        &by_connector,
        "ConnectorRestarted",
        Duration::from_secs(30),
    )
    .await;
    assert!(
        note(&restarted).contains("includeTasks=true, onlyFailed=true"),
        "{}",
        note(&restarted)
    );
    op.finish().await;
}

#[tokio::test]
async fn source_connector_offsets_list_alter_reset() {
    let op = ConnectorOperator::start("ctr-src-offsets").await;
    let name = unique("src-offsets");
    let topic = unique("ctr-src-offsets");
    let cm = format!("{name}-offsets");
    create_topic(&topic).await;
    let file = data_file(&name, &["aaaa", "bbbb", "cccc"]);
    let offsets_spec = json!({"listOffsets": {"toConfigMap": {"name": cm}},
                              "alterOffsets": {"fromConfigMap": {"name": cm}}});
    op.apply_connector(
        &name,
        source_spec(&file, &topic, offsets_spec.clone()),
        json!({}),
    )
    .await;
    op.wait_ready(&name).await;
    wait_connect_offsets(&op, &name, "all 3 lines read (position 15)", |o| {
        o.pointer("/offsets/0/offset/position") == Some(&json!(15))
    })
    .await;

    // list: a new ConfigMap, owned by the connector, with Connect's offsets.
    op.offsets_op(&name, "list").await;
    let listed = op.offsets_json(&cm).await;
    assert_eq!(
        listed["offsets"][0]["partition"]["filename"],
        file.to_str().unwrap()
    );
    assert_eq!(listed["offsets"][0]["offset"]["position"], 15);
    let config_map = op.config_maps().get(&cm).await.unwrap();
    let owners = config_map.metadata.owner_references.unwrap();
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0].kind, "KafkaConnector");
    assert_eq!(owners[0].name, name);

    // The user edits the ConfigMap: re-read from the second line.
    let mut edited = listed.clone();
    edited["offsets"][0]["offset"]["position"] = json!(5);
    op.write_offsets_json(&cm, &edited).await;

    // alter is refused while the connector runs; the annotation stays for a retry.
    op.annotate(&name, "strimzi.io/connector-offsets", Some("alter"))
        .await;
    let kc = op.wait_warning(&name, "AlterOffsets", "not stopped").await;
    assert_eq!(annotated(&kc).as_deref(), Some("alter"));
    assert_eq!(
        connector_get(&op.connect_url, &name, "offsets")
            .await
            .unwrap()["offsets"][0]["offset"]["position"],
        15
    );

    // Stop and alter in one change: the connector is stopped first, then altered.
    op.apply_connector(
        &name,
        source_spec(&file, &topic, json!({"state": "stopped", "listOffsets": offsets_spec["listOffsets"], "alterOffsets": offsets_spec["alterOffsets"]})),
        json!({}),
    )
    .await;
    let kc = op
        .wait_connector(&name, "alter done", |kc| annotated(kc).is_none())
        .await;
    op.wait_connector(&name, "AlterOffsets warning gone", |kc| {
        warning(kc, "AlterOffsets").is_none()
    })
    .await;
    assert_eq!(
        connector_state(&op.connect_url, &name).await.as_deref(),
        Some("STOPPED")
    );
    assert!(kc.status.is_some());
    wait_connect_offsets(&op, &name, "position altered to 5", |o| {
        o.pointer("/offsets/0/offset/position") == Some(&json!(5))
    })
    .await;

    // list again shows the edit.
    op.offsets_op(&name, "list").await;
    assert_eq!(
        op.offsets_json(&cm).await["offsets"][0]["offset"]["position"],
        5
    );

    // reset, then list shows none.
    op.offsets_op(&name, "reset").await;
    wait_connect_offsets(&op, &name, "no offsets after reset", |o| {
        o["offsets"].as_array().is_some_and(|a| a.is_empty())
    })
    .await;
    op.offsets_op(&name, "list").await;
    assert_eq!(op.offsets_json(&cm).await, json!({"offsets": []}));
    op.finish().await;
}

#[tokio::test]
async fn offsets_operations_refuse_bad_input() {
    let op = ConnectorOperator::start("ctr-offsets-bad").await;
    let topic = unique("ctr-offsets-bad");
    create_topic(&topic).await;

    // list without listOffsets, alter without alterOffsets: warnings naming the property,
    // the annotation kept.
    let bare = unique("no-offsets-props");
    let file = data_file(&bare, &["x"]);
    op.apply_connector(
        &bare,
        source_spec(&file, &topic, json!({"state": "stopped"})),
        json!({}),
    )
    .await;
    op.wait_ready(&bare).await;
    op.annotate(&bare, "strimzi.io/connector-offsets", Some("list"))
        .await;
    let kc = op
        .wait_warning(&bare, "ListOffsets", "missing property listOffsets")
        .await;
    assert_eq!(annotated(&kc).as_deref(), Some("list"));
    op.annotate(&bare, "strimzi.io/connector-offsets", Some("alter"))
        .await;
    op.wait_warning(&bare, "AlterOffsets", "missing property alterOffsets")
        .await;
    op.annotate(&bare, "strimzi.io/connector-offsets", Some("wipe"))
        .await;
    op.wait_warning(&bare, "ManageOffsets", "\"wipe\"").await;
    // Removing the annotation (the user gives up) clears the warning.
    op.annotate(&bare, "strimzi.io/connector-offsets", None)
        .await;
    op.wait_connector(&bare, "warnings gone", |kc| {
        warning(kc, "ManageOffsets").is_none() && warning(kc, "AlterOffsets").is_none()
    })
    .await;

    // alter from a ConfigMap that does not exist, then from one that is not JSON.
    let alter = unique("alter-missing");
    let cm = format!("{alter}-offsets");
    op.apply_connector(
        &alter,
        source_spec(
            &file,
            &topic,
            json!({"state": "stopped", "alterOffsets": {"fromConfigMap": {"name": cm}}}),
        ),
        json!({"annotations": {"strimzi.io/connector-offsets": "alter"}}),
    )
    .await;
    let kc = op
        .wait_warning(&alter, "AlterOffsets", "does not exist")
        .await;
    assert_eq!(annotated(&kc).as_deref(), Some("alter"));
    op.config_maps()
        .create(
            &Default::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": cm},
                "data": {"offsets.json": "{\"offsets\": [ {not json"}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    op.wait_warning(
        &alter,
        "AlterOffsets",
        "Failed to parse contents of offsets.json as JSON",
    )
    .await;
    // Connect's own refusal is shown: a source offset for a partition it does not know the
    // shape of is still accepted, so refuse with a malformed body Connect rejects.
    op.write_offsets_json(
        &cm,
        &json!({"offsets": [{"partition": null, "offset": {"position": 1}}]}),
    )
    .await;
    let kc = op
        .wait_warning(
            &alter,
            "AlterOffsets",
            "Failed to alter the connector offsets due to",
        )
        .await;
    assert_eq!(annotated(&kc).as_deref(), Some("alter"));

    // reset while running is refused.
    let running = unique("reset-running");
    op.apply_connector(&running, source_spec(&file, &topic, json!({})), json!({}))
        .await;
    op.wait_ready(&running).await;
    op.annotate(&running, "strimzi.io/connector-offsets", Some("reset"))
        .await;
    let kc = op
        .wait_warning(&running, "ResetOffsets", "not stopped")
        .await;
    assert_eq!(annotated(&kc).as_deref(), Some("reset"));

    // list into an existing ConfigMap whose data would exceed 1 MiB: a warning, nothing written.
    let big = unique("list-too-big");
    let big_cm = format!("{big}-offsets");
    op.config_maps()
        .create(
            &Default::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": big_cm},
                "data": {"filler": "f".repeat(1024 * 1024 - 64)}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    op.apply_connector(
        &big,
        source_spec(
            &file,
            &topic,
            json!({"listOffsets": {"toConfigMap": {"name": big_cm}}}),
        ),
        json!({}),
    )
    .await;
    op.wait_ready(&big).await;
    wait_connect_offsets(&op, &big, "the line read", |o| {
        o.pointer("/offsets/0/offset/position").is_some()
    })
    .await;
    op.annotate(&big, "strimzi.io/connector-offsets", Some("list"))
        .await;
    let kc = op.wait_warning(&big, "ListOffsets", "limit").await;
    assert_eq!(annotated(&kc).as_deref(), Some("list"));
    let data = op.config_maps().get(&big_cm).await.unwrap().data.unwrap();
    assert!(!data.contains_key("offsets.json"), "nothing written");
    assert_eq!(data["filler"].len(), 1024 * 1024 - 64);
    op.finish().await;
}

#[tokio::test]
async fn sink_connector_offsets_match_the_consumer_group() {
    let op = ConnectorOperator::start("ctr-sink-offsets").await;
    let name = unique("sink-offsets");
    let topic = unique("ctr-sink-offsets");
    let group = format!("connect-{name}");
    let cm = format!("{name}-offsets");
    create_topic(&topic).await;
    produce(&topic, &["r0", "r1", "r2", "r3", "r4"]).await;
    let out = data_file(&name, &[]);

    // An existing ConfigMap: list replaces offsets.json only, adds no owner.
    op.config_maps()
        .create(
            &Default::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": cm}, "data": {"note": "keep me"}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let spec = |state: &str| {
        json!({"class": SINK, "tasksMax": 1, "state": state,
               "config": {"file": out.to_str().unwrap(), "topics": topic,
                          "consumer.override.auto.offset.reset": "earliest",
                          // The test produces plain strings; the worker's default is JSON.
                          "value.converter": "org.apache.kafka.connect.storage.StringConverter",
                          "key.converter": "org.apache.kafka.connect.storage.StringConverter"},
               "listOffsets": {"toConfigMap": {"name": cm}},
               "alterOffsets": {"fromConfigMap": {"name": cm}}})
    };
    op.apply_connector(&name, spec("running"), json!({})).await;
    op.wait_ready(&name).await;
    wait_for(
        "5 records in the sink file",
        Duration::from_secs(60),
        || async {
            let text = std::fs::read_to_string(&out).unwrap_or_default();
            if text.lines().count() == 5 {
                Seen::Done(())
            } else {
                Seen::NotYet(format!("{text:?}\n{}", op.logs()))
            }
        },
    )
    .await;
    wait_committed(&group, &topic, Some(5)).await;

    op.offsets_op(&name, "list").await;
    let listed = op.offsets_json(&cm).await;
    let entry = &listed["offsets"][0];
    assert_eq!(entry["partition"]["kafka_topic"], topic.as_str());
    assert_eq!(entry["partition"]["kafka_partition"], 0);
    assert_eq!(
        entry["offset"]["kafka_offset"],
        json!(committed(&group, &topic).unwrap())
    );
    let config_map = op.config_maps().get(&cm).await.unwrap();
    assert!(
        config_map
            .metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    );
    assert_eq!(config_map.data.unwrap()["note"], "keep me");

    // Stop and alter to offset 2 in one change: the consumer group follows.
    let mut edited = listed.clone();
    edited["offsets"][0]["offset"]["kafka_offset"] = json!(2);
    op.write_offsets_json(&cm, &edited).await;
    op.apply_connector(
        &name,
        spec("stopped"),
        json!({"annotations": {"strimzi.io/connector-offsets": "alter"}}),
    )
    .await;
    op.wait_connector(&name, "alter done", |kc| annotated(kc).is_none())
        .await;
    wait_committed(&group, &topic, Some(2)).await;
    op.offsets_op(&name, "list").await;
    assert_eq!(
        op.offsets_json(&cm).await["offsets"][0]["offset"]["kafka_offset"],
        2
    );

    // reset removes the group's offsets; list shows none.
    op.offsets_op(&name, "reset").await;
    wait_committed(&group, &topic, None).await;
    op.offsets_op(&name, "list").await;
    assert_eq!(op.offsets_json(&cm).await, json!({"offsets": []}));
    assert!(
        op.metric("kstretch_central_connector_offsets_operations_total")
            .await
            .is_some_and(|v| v >= 1.0)
    );
    op.finish().await;
}
