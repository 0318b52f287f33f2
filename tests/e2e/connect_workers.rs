//! The KafkaConnect reconciler end to end: the real `kstretch-central` in cluster alpha and
//! real agents in alpha and beta (`kstretch_tests::stretch`). The workers' objects are read
//! from the member clusters with plain kube reads; the generated worker configuration is
//! proven by booting a real Kafka Connect worker from it against the environment's Kafka.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use kstretch_api::{Condition, KafkaConnect, StrimziPodSet};
use kstretch_tests::stretch::{ALPHA, BETA, Stretch};
use kstretch_tests::wait::{Seen, wait_for};
use kstretch_tests::{TestEnv, connect, kafka};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(90);

fn connect_resource(name: &str, alias: Option<&str>, spec: Value) -> Value {
    let mut annotations = json!({"strimzi.io/use-connector-resources": "true"});
    if let Some(alias) = alias {
        annotations["strimzi.io/stretch-cluster-alias"] = json!(alias);
    }
    json!({
        "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaConnect",
        "metadata": {"name": name, "annotations": annotations},
        "spec": spec
    })
}

fn conditions(c: &KafkaConnect) -> Vec<Condition> {
    c.status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default()
}

fn ready(c: &KafkaConnect) -> Option<Condition> {
    conditions(c).into_iter().find(|x| x.type_ == "Ready")
}

fn is_ready(c: &KafkaConnect) -> bool {
    ready(c).is_some_and(|r| r.status == "True")
        && c.status.as_ref().and_then(|s| s.observed_generation) == c.metadata.generation
}

fn refused_with(c: &KafkaConnect, reason: &str) -> bool {
    ready(c).is_some_and(|r| r.status == "False" && r.reason.as_deref() == Some(reason))
        && c.status.as_ref().and_then(|s| s.observed_generation) == c.metadata.generation
}

fn warning(c: &KafkaConnect, reason: &str) -> Option<String> {
    conditions(c)
        .into_iter()
        .find(|x| x.type_ == "Warning" && x.reason.as_deref() == Some(reason))
        .and_then(|x| x.message)
}

async fn wait_connect(
    stretch: &Stretch,
    name: &str,
    what: &str,
    check: impl Fn(&KafkaConnect) -> bool,
) -> KafkaConnect {
    stretch.wait_in_alpha(name, what, TIMEOUT, check).await
}

/// The pod set `name` in cluster `alias` once `check` holds.
async fn wait_pod_set(
    stretch: &Stretch,
    alias: &str,
    name: &str,
    check: impl Fn(&StrimziPodSet) -> bool,
) -> StrimziPodSet {
    let api: Api<StrimziPodSet> = stretch.api(alias);
    wait_for(
        &format!("StrimziPodSet {name} in {alias}"),
        TIMEOUT,
        || async {
            match api.get_opt(name).await {
                Ok(Some(s)) if check(&s) => Seen::Done(s),
                other => Seen::NotYet(format!("{other:#?}\n{}", stretch.logs())),
            }
        },
    )
    .await
}

fn pod_names(set: &StrimziPodSet) -> Vec<String> {
    set.spec
        .pods
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_owned))
        .collect()
}

async fn pods_with_prefix(stretch: &Stretch, alias: &str, prefix: &str) -> BTreeMap<String, Pod> {
    let api: Api<Pod> = stretch.api(alias);
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| Some((p.metadata.name.clone()?, p)))
        .filter(|(n, _)| n.starts_with(prefix))
        .collect()
}

/// `key=value` lines of a properties text (the generator writes no continuations).
fn properties(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

async fn patch_spec(stretch: &Stretch, name: &str, spec: Value) {
    let api: Api<KafkaConnect> = stretch.api(ALPHA);
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": spec})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn workers_run_in_their_member_cluster_scale_roll_and_leave() {
    let stretch = Stretch::start("connect-workers", &[]).await;
    let name = "my-connect";
    stretch
        .apply(connect_resource(
            name,
            Some(BETA),
            json!({"replicas": 2, "bootstrapServers": "my-cluster-kafka-bootstrap:9092",
                   "groupId": "my-connect-group", "configStorageTopic": "my-connect-configs",
                   "statusStorageTopic": "my-connect-status",
                   "offsetStorageTopic": "my-connect-offsets",
                   "resources": {"requests": {"memory": "1Gi"}},
                   "jvmOptions": {"-Xmx": "512m"},
                   "template": {"pod": {"metadata": {"labels": {"team": "data"}}}},
                   "config": {"config.storage.replication.factor": 3,
                              "rest.port": 9999}}),
        ))
        .await;

    let c = wait_connect(&stretch, name, "KafkaConnect Ready", is_ready).await;
    let status = c.status.clone().unwrap();
    assert_eq!(
        status.url.as_deref(),
        Some(format!("http://my-connect-connect-api.{}.svc:8083", stretch.ns).as_str())
    );
    assert_eq!(status.replicas, Some(2));
    assert_eq!(
        status.label_selector.as_deref(),
        Some(
            "strimzi.io/cluster=my-connect,strimzi.io/name=my-connect-connect,strimzi.io/kind=KafkaConnect"
        )
    );
    assert!(
        warning(&c, "ForbiddenConfigIgnored").is_some_and(|m| m.contains("rest.port")),
        "{c:#?}"
    );

    // Everything in beta, nothing in alpha.
    let set = wait_pod_set(&stretch, BETA, "my-connect-connect", |s| {
        s.spec.pods.len() == 2
    })
    .await;
    assert_eq!(
        pod_names(&set),
        ["my-connect-connect-0", "my-connect-connect-1"]
    );
    let labels = set.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels["strimzi.io/kind"], "KafkaConnect");
    assert_eq!(labels["strimzi.io/name"], "my-connect-connect");
    assert_eq!(labels["strimzi.io/cluster"], "my-connect");
    let pod = &set.spec.pods[0];
    assert_eq!(pod["metadata"]["labels"]["team"], "data");
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["resources"]["requests"]["memory"], "1Gi");
    assert!(
        container["env"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "KAFKA_HEAP_OPTS" && e["value"] == "-Xmx512m")
    );
    let config_maps: Api<ConfigMap> = stretch.api(BETA);
    let cm = config_maps.get("my-connect-connect-config").await.unwrap();
    let props = properties(&cm.data.unwrap()["kafka-connect.properties"]);
    assert_eq!(
        props["bootstrap.servers"],
        "my-cluster-kafka-bootstrap:9092"
    );
    assert_eq!(props["group.id"], "my-connect-group");
    assert_eq!(props["config.storage.topic"], "my-connect-configs");
    assert_eq!(props["status.storage.topic"], "my-connect-status");
    assert_eq!(props["offset.storage.topic"], "my-connect-offsets");
    assert_eq!(props["config.storage.replication.factor"], "3");
    assert_eq!(props["rest.advertised.port"], "8083");
    assert!(!props.contains_key("rest.port"), "forbidden key dropped");
    let services: Api<Service> = stretch.api(BETA);
    let api_service = services.get("my-connect-connect-api").await.unwrap();
    let port = &api_service.spec.as_ref().unwrap().ports.as_ref().unwrap()[0];
    assert_eq!((port.name.as_deref(), port.port), (Some("rest-api"), 8083));
    let pods = pods_with_prefix(&stretch, BETA, "my-connect-connect-").await;
    assert_eq!(
        pods.len(),
        2,
        "the agent's pod set controller made the pods"
    );
    let alpha_sets: Api<StrimziPodSet> = stretch.api(ALPHA);
    assert!(
        alpha_sets
            .get_opt("my-connect-connect")
            .await
            .unwrap()
            .is_none()
    );

    // Scale up, then down.
    patch_spec(&stretch, name, json!({"replicas": 3})).await;
    wait_pod_set(&stretch, BETA, "my-connect-connect", |s| {
        s.spec.pods.len() == 3
    })
    .await;
    let c = wait_connect(&stretch, name, "Ready with 3 workers", |c| {
        is_ready(c) && c.status.as_ref().and_then(|s| s.replicas) == Some(3)
    })
    .await;
    assert_eq!(c.status.unwrap().replicas, Some(3));
    patch_spec(&stretch, name, json!({"replicas": 1})).await;
    wait_pod_set(&stretch, BETA, "my-connect-connect", |s| {
        s.spec.pods.len() == 1
    })
    .await;
    wait_connect(&stretch, name, "Ready with 1 worker", |c| {
        is_ready(c) && c.status.as_ref().and_then(|s| s.replicas) == Some(1)
    })
    .await;

    // A configuration change rolls the worker onto the new revision.
    let before = pods_with_prefix(&stretch, BETA, "my-connect-connect-").await;
    let old_uid = before["my-connect-connect-0"].metadata.uid.clone().unwrap();
    patch_spec(
        &stretch,
        name,
        json!({"config": {"offset.flush.interval.ms": 1000}}),
    )
    .await;
    let set = wait_pod_set(&stretch, BETA, "my-connect-connect", |s| {
        s.spec.pods[0]["metadata"]["annotations"]["strimzi.io/revision"]
            != before["my-connect-connect-0"]
                .metadata
                .annotations
                .as_ref()
                .unwrap()["strimzi.io/revision"]
                .as_str()
    })
    .await;
    let revision = set.spec.pods[0]["metadata"]["annotations"]["strimzi.io/revision"]
        .as_str()
        .unwrap()
        .to_owned();
    wait_connect(&stretch, name, "Ready after the roll", is_ready).await;
    let after = pods_with_prefix(&stretch, BETA, "my-connect-connect-").await;
    let pod = &after["my-connect-connect-0"];
    assert_ne!(
        pod.metadata.uid.as_deref(),
        Some(old_uid.as_str()),
        "replaced"
    );
    assert_eq!(
        pod.metadata.annotations.as_ref().unwrap()["strimzi.io/revision"],
        revision
    );
    let cm = config_maps.get("my-connect-connect-config").await.unwrap();
    assert_eq!(
        properties(&cm.data.unwrap()["kafka-connect.properties"])["offset.flush.interval.ms"],
        "1000"
    );

    // Deleting the KafkaConnect removes its objects from the member cluster.
    let api: Api<KafkaConnect> = stretch.api(ALPHA);
    api.delete(name, &DeleteParams::default()).await.unwrap();
    wait_for("the workers' objects to leave beta", TIMEOUT, || async {
        let set = exists::<StrimziPodSet>(&stretch, BETA, "my-connect-connect").await;
        let cm = exists::<ConfigMap>(&stretch, BETA, "my-connect-connect-config").await;
        let svc = exists::<Service>(&stretch, BETA, "my-connect-connect-api").await;
        if !set && !cm && !svc {
            Seen::Done(())
        } else {
            Seen::NotYet(format!(
                "podset {set}, configmap {cm}, service {svc}\n{}",
                stretch.logs()
            ))
        }
    })
    .await;
    stretch.finish().await;
}

async fn exists<K>(stretch: &Stretch, alias: &str, name: &str) -> bool
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = stretch.api(alias);
    api.get_opt(name).await.unwrap().is_some()
}

#[tokio::test]
async fn invalid_connects_are_refused_and_keep_what_runs() {
    let mut stretch = Stretch::start("connect-invalid", &[]).await;
    let spec = |extra: Value| {
        let mut spec = json!({"replicas": 1, "bootstrapServers": "kafka:9092",
                              "groupId": "g", "configStorageTopic": "c",
                              "statusStorageTopic": "s", "offsetStorageTopic": "o"});
        for (k, v) in extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        spec
    };
    let cases = [
        (
            "unknown-alias",
            Some("gamma"),
            spec(json!({})),
            "UnknownClusterAlias",
        ),
        (
            "bad-bootstrap",
            None,
            spec(json!({"bootstrapServers": "kafka"})),
            "InvalidBootstrapServers",
        ),
        (
            "shared-topics",
            None,
            spec(json!({"statusStorageTopic": "c"})),
            "InvalidConfig",
        ),
        (
            "nested-config",
            None,
            spec(json!({"config": {"a": {"b": 1}}})),
            "InvalidConfig",
        ),
        (
            "with-oauth",
            None,
            spec(json!({"authentication": {"type": "oauth"}})),
            "UnsupportedField",
        ),
        (
            "untrusting",
            None,
            spec(
                json!({"tls": {"trustedCertificates": [{"secretName": "my-cluster-cluster-ca-cert"}]}}),
            ),
            "InvalidSecurity",
        ),
        (
            "no-ca-secret",
            None,
            spec(json!({"tls": {"trustedCertificates":
                [{"secretName": "absent-cluster-ca-cert", "certificate": "ca.crt"}]}})),
            "SecretNotFound",
        ),
    ];
    for (name, alias, spec, _) in &cases {
        stretch
            .apply(connect_resource(name, *alias, spec.clone()))
            .await;
    }
    for (name, _, _, reason) in &cases {
        let c = wait_connect(
            &stretch,
            name,
            &format!("{name} refused with {reason}"),
            |c| refused_with(c, reason),
        )
        .await;
        let message = ready(&c).and_then(|r| r.message).unwrap_or_default();
        assert!(!message.is_empty(), "{name}: the message says what to fix");
        for alias in [ALPHA, BETA] {
            let sets: Api<StrimziPodSet> = stretch.api(alias);
            assert!(
                sets.get_opt(&format!("{name}-connect"))
                    .await
                    .unwrap()
                    .is_none(),
                "{name}: nothing built in {alias}"
            );
        }
    }
    assert!(
        ready(
            &stretch
                .api::<KafkaConnect>(ALPHA)
                .get("unknown-alias")
                .await
                .unwrap()
        )
        .unwrap()
        .message
        .unwrap()
        .contains("\"gamma\"")
    );

    // A running Connect cluster that becomes invalid keeps its workers as they are.
    stretch
        .apply(connect_resource("good", None, spec(json!({}))))
        .await;
    wait_connect(&stretch, "good", "good Ready", is_ready).await;
    wait_pod_set(&stretch, ALPHA, "good-connect", |s| s.spec.pods.len() == 1).await;
    // (Negative replicas never get here: the CRD schema refuses them.)
    patch_spec(&stretch, "good", json!({"statusStorageTopic": "c"})).await;
    wait_connect(&stretch, "good", "good refused", |c| {
        refused_with(c, "InvalidConfig")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let set = wait_pod_set(&stretch, ALPHA, "good-connect", |_| true).await;
    assert_eq!(
        pod_names(&set),
        ["good-connect-0"],
        "never deleted on a guess"
    );
    // Across a central restart too: the invalid KafkaConnect is retained, so the first
    // snapshots (published only once it was reconciled) keep its worker.
    let uid = |pods: BTreeMap<String, Pod>| pods["good-connect-0"].metadata.uid.clone().unwrap();
    let before = uid(pods_with_prefix(&stretch, ALPHA, "good-connect-").await);
    stretch.stop_central();
    stretch.start_central();
    tokio::time::sleep(Duration::from_secs(8)).await;
    let set = wait_pod_set(&stretch, ALPHA, "good-connect", |_| true).await;
    assert_eq!(pod_names(&set), ["good-connect-0"], "{}", stretch.logs());
    assert_eq!(
        uid(pods_with_prefix(&stretch, ALPHA, "good-connect-").await),
        before,
        "the worker survived central's restart"
    );
    // Fixed: Ready again.
    patch_spec(
        &stretch,
        "good",
        json!({"replicas": 2, "statusStorageTopic": "s"}),
    )
    .await;
    wait_pod_set(&stretch, ALPHA, "good-connect", |s| s.spec.pods.len() == 2).await;
    wait_connect(&stretch, "good", "good Ready again", is_ready).await;
    stretch.finish().await;
}

/// The generated worker configuration is real: the ConfigMap central sent to the member
/// cluster boots a real Kafka Connect worker against the environment's Kafka once the
/// in-cluster addresses are mapped to loopback (the REST listener on a free local port, the
/// advertised host name through the same environment variable the pods get, the plugin path
/// and the directory provider's allowed path, both under /opt/kafka in the image, to local
/// directories). The worker answers on its REST API, creates the generated
/// group's storage topics and runs a connector.
#[tokio::test]
async fn the_generated_worker_configuration_boots_a_real_worker() {
    let env = TestEnv::get();
    let stretch = Stretch::start("connect-boot", &[]).await;
    let unique = format!("kstretch-boot-{}", stretch.ns);
    // Non-ASCII, one character inside ISO-8859-1 and one outside it: the worker reads its
    // properties file as ISO-8859-1, so only `\uXXXX` escapes bring both through unchanged.
    let group = format!("{unique}-grüppe-€");
    stretch
        .apply(connect_resource(
            "boot",
            Some(BETA),
            json!({"replicas": 1, "bootstrapServers": env.kafka_bootstrap,
                   "groupId": &group,
                   "configStorageTopic": format!("{unique}-configs"),
                   "statusStorageTopic": format!("{unique}-status"),
                   "offsetStorageTopic": format!("{unique}-offsets"),
                   "config": {"config.storage.replication.factor": 3,
                              "offset.storage.replication.factor": 3,
                              "status.storage.replication.factor": 3,
                              "offset.flush.interval.ms": 1000,
                              "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                              "value.converter": "org.apache.kafka.connect.storage.StringConverter"}}),
        ))
        .await;
    let config_maps: Api<ConfigMap> = stretch.api(BETA);
    let generated = wait_for("the worker ConfigMap in beta", TIMEOUT, || async {
        match config_maps.get_opt("boot-connect-config").await {
            Ok(Some(cm)) => {
                Seen::Done(cm.data.unwrap_or_default()["kafka-connect.properties"].clone())
            }
            other => Seen::NotYet(format!("{other:?}\n{}", stretch.logs())),
        }
    })
    .await;

    let dir = std::env::temp_dir().join(format!("{unique}-{}", std::process::id()));
    let (mut worker, url) = connect::boot_worker(&generated, &dir, &BTreeMap::new()).await;
    let http = connect::http();
    let plugins_seen = connect::connector_plugins(&url).await.unwrap();
    assert!(
        plugins_seen
            .iter()
            .any(|p| p.class.ends_with("FileStreamSourceConnector")),
        "{plugins_seen:?}"
    );

    // The worker created the generated group's storage topics in Kafka.
    let expected = [
        format!("{unique}-configs"),
        format!("{unique}-status"),
        format!("{unique}-offsets"),
    ];
    wait_for("the storage topics in Kafka", TIMEOUT, || async {
        let topics = kafka::topic_names(&env.kafka_bootstrap).unwrap_or_default();
        if expected.iter().all(|t| topics.contains(t)) {
            Seen::Done(())
        } else {
            Seen::NotYet(format!("{:?}\n{}", expected, worker.log_tail(20)))
        }
    })
    .await;

    // The worker joined its group under the exact name asked for (Kafka is the judge).
    wait_for("the worker's group in Kafka", TIMEOUT, || async {
        let groups = kafka::group_names(&env.kafka_bootstrap).unwrap_or_default();
        if groups.contains(&group) {
            Seen::Done(())
        } else {
            let ours: Vec<&String> = groups.iter().filter(|g| g.starts_with(&unique)).collect();
            Seen::NotYet(format!("{group:?} among {ours:?}\n{}", worker.log_tail(20)))
        }
    })
    .await;

    // A connector runs in the generated group: a file's lines reach a topic.
    let topic = format!("{unique}-lines");
    kafka::create_topic(&env.kafka_bootstrap, &topic, 1, 3).await;
    let input = dir.join("input.txt");
    std::fs::write(&input, "first\nsecond\n").unwrap();
    let created = http
        .post(format!("{url}/connectors"))
        .json(&json!({"name": "lines", "config": {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "tasks.max": "1", "file": input.display().to_string(), "topic": topic}}))
        .send()
        .await
        .unwrap();
    assert!(
        created.status().is_success(),
        "{:?}: {}",
        created.status(),
        created.text().await.unwrap_or_default()
    );
    let bootstrap = env.kafka_bootstrap.clone();
    let topic_for_read = topic.clone();
    let records = tokio::task::spawn_blocking(move || {
        kafka::consume(&bootstrap, &topic_for_read, 1, 2, Duration::from_secs(60))
    })
    .await
    .unwrap();
    let mut values: Vec<String> = records.into_iter().map(|(_, v)| v).collect();
    values.sort();
    assert_eq!(values, ["first", "second"], "{}", worker.log_tail(30));
    let status = connect::connector_get(&url, "lines", "status")
        .await
        .unwrap();
    assert_eq!(status["connector"]["state"], "RUNNING", "{status}");

    worker.stop();
    let admin = kafka::admin(&env.kafka_bootstrap);
    let mut names: Vec<&str> = expected.iter().map(String::as_str).collect();
    names.push(&topic);
    let _ = admin
        .delete_topics(&names, &rdkafka::admin::AdminOptions::new())
        .await;
    let _ = std::fs::remove_dir_all(&dir);
    stretch.finish().await;
}
