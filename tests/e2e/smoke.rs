//! Smoke tests of the real environment and kstretch's CRDs: every piece later features stand on
//! (apiserver + CRDs, scheduler, kwok, garbage collector, Kafka, Connect) works.

// Test code: a failed expectation is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kstretch_api::KafkaNodePool;
use kstretch_tests::crds::{self, FIELD_MANAGER};
use kstretch_tests::fixtures::{self, Manifest};
use kstretch_tests::wait::{Seen, wait_for, wait_for_deletion};
use kstretch_tests::{Cluster, TestEnv, connect, kafka, wait_for_object};
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::pinned_kind;
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(60);

/// Applies every fixture of `version` with strict field validation in a fresh namespace of each
/// cluster and checks the apiserver stored every field the manifest had.
async fn fixtures_apply_in_every_cluster(version: &str) {
    // The Strimzi kinds (an example's ConfigMap is Kubernetes' own).
    let manifests: Vec<Manifest> = fixtures::load(version)
        .into_iter()
        .filter(|m| m.api_version().contains('/'))
        .collect();
    let kinds: std::collections::BTreeSet<&str> = manifests.iter().map(Manifest::kind).collect();
    for kind in [
        "Kafka",
        "KafkaNodePool",
        "KafkaTopic",
        "KafkaConnect",
        "KafkaConnector",
        "StrimziPodSet",
    ] {
        assert!(kinds.contains(kind), "no {version} fixture of kind {kind}");
    }
    for cluster in Cluster::all().await {
        crds::install(&cluster).await;
        let ns = cluster.namespace(&format!("fixtures-{version}")).await;
        let mut uids: std::collections::BTreeMap<(String, String), String> = Default::default();
        for m in &manifests {
            let wanted_version = m.api_version().rsplit('/').next().unwrap_or_default();
            assert_eq!(
                wanted_version,
                version,
                "{}: {} has apiVersion {}",
                m.file.display(),
                m.name(),
                m.api_version()
            );
            let (group, ver) = m.api_version().split_once('/').expect("group/version");
            let gvk = GroupVersionKind::gvk(group, ver, m.kind());
            let (resource, _) = pinned_kind(&cluster.client, &gvk)
                .await
                .unwrap_or_else(|e| panic!("{}: {gvk:?} is not served: {e}", cluster.name));
            let api: Api<DynamicObject> =
                Api::namespaced_with(cluster.client.clone(), &ns.name, &resource);
            let params = PatchParams::apply(FIELD_MANAGER).validation_strict();
            // The namespace is the test's, not the manifest's; status goes through /status,
            // as an operator would write it.
            let mut wanted = m.doc.clone();
            if let Some(md) = wanted["metadata"].as_object_mut() {
                // Server-owned fields of an exported object (`kubectl get -o yaml`).
                for key in [
                    "namespace",
                    "resourceVersion",
                    "uid",
                    "generation",
                    "creationTimestamp",
                    "managedFields",
                ] {
                    md.remove(key);
                }
            }
            // Owner references name the UIDs of the objects this test created (a made-up UID
            // would get the object garbage-collected at once); unknown owners are dropped.
            if let Some(refs) = wanted
                .get_mut("metadata")
                .and_then(|md| md.get_mut("ownerReferences"))
                .and_then(|r| r.as_array_mut())
            {
                refs.retain_mut(|r| {
                    let key = (
                        r["kind"].as_str().unwrap_or_default().to_owned(),
                        r["name"].as_str().unwrap_or_default().to_owned(),
                    );
                    match uids.get(&key) {
                        Some(uid) => {
                            r["uid"] = json!(uid);
                            true
                        }
                        None => false,
                    }
                });
            }
            let no_owners = wanted
                .pointer("/metadata/ownerReferences")
                .and_then(|r| r.as_array())
                .is_some_and(Vec::is_empty);
            if no_owners && let Some(md) = wanted["metadata"].as_object_mut() {
                md.remove("ownerReferences");
            }
            let status = wanted.as_object_mut().and_then(|o| o.remove("status"));
            let context = |e: kube::Error| {
                format!(
                    "{}: {} {} from {} was rejected: {e}",
                    cluster.name,
                    m.kind(),
                    m.name(),
                    m.file.display()
                )
            };
            api.patch(m.name(), &params, &Patch::Apply(&wanted))
                .await
                .unwrap_or_else(|e| panic!("{}", context(e)));
            if let Some(status) = &status {
                let status_doc = json!({
                    "apiVersion": m.api_version(),
                    "kind": m.kind(),
                    "metadata": {"name": m.name()},
                    "status": status,
                });
                api.patch_status(m.name(), &params, &Patch::Apply(&status_doc))
                    .await
                    .unwrap_or_else(|e| panic!("status: {}", context(e)));
                wanted["status"] = status.clone();
            }
            let stored = api.get(m.name()).await.expect("stored object");
            let stored = serde_json::to_value(&stored).expect("json");
            uids.insert(
                (m.kind().to_owned(), m.name().to_owned()),
                stored["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            );
            let missing = fixtures::missing_fields(&wanted, &stored);
            assert!(
                missing.is_empty(),
                "{}: {} {} from {} lost fields: {missing:#?}",
                cluster.name,
                m.kind(),
                m.name(),
                m.file.display()
            );
        }
        ns.delete().await;
    }
}

#[tokio::test]
async fn crds_accept_strimzi_v1_manifests_in_every_cluster() {
    fixtures_apply_in_every_cluster("v1").await;
}

#[tokio::test]
async fn crds_accept_strimzi_v1beta2_manifests_in_every_cluster() {
    fixtures_apply_in_every_cluster("v1beta2").await;
}

#[tokio::test]
async fn a_v1beta2_object_reads_back_as_v1() {
    let cluster = &Cluster::all().await[0];
    crds::install(cluster).await;
    let ns = cluster.namespace("v1beta2-as-v1").await;
    let gvk = GroupVersionKind::gvk("kafka.strimzi.io", "v1beta2", "KafkaNodePool");
    let (old, _) = pinned_kind(&cluster.client, &gvk)
        .await
        .expect("v1beta2 served");
    let old_api: Api<DynamicObject> = Api::namespaced_with(cluster.client.clone(), &ns.name, &old);
    let pool = json!({
        "apiVersion": "kafka.strimzi.io/v1beta2",
        "kind": "KafkaNodePool",
        "metadata": {"name": "brokers", "labels": {"strimzi.io/cluster": "my-cluster"}},
        "spec": {"replicas": 3, "roles": ["broker"], "storage": {"type": "ephemeral"}}
    });
    old_api
        .patch(
            "brokers",
            &PatchParams::apply(FIELD_MANAGER),
            &Patch::Apply(&pool),
        )
        .await
        .expect("v1beta2 pool applied");
    let pools: Api<KafkaNodePool> = ns.api();
    let typed = pools
        .get("brokers")
        .await
        .expect("read through the v1 Rust type");
    assert_eq!(typed.spec.replicas, 3);
    ns.delete().await;
}

#[tokio::test]
async fn node_pool_scale_subresource_works() {
    let cluster = &Cluster::all().await[0];
    crds::install(cluster).await;
    let ns = cluster.namespace("knp-scale").await;
    let pools: Api<KafkaNodePool> = ns.api();
    let pool: KafkaNodePool = serde_json::from_value(json!({
        "apiVersion": "kafka.strimzi.io/v1",
        "kind": "KafkaNodePool",
        "metadata": {"name": "brokers", "labels": {"strimzi.io/cluster": "my-cluster"}},
        "spec": {"replicas": 3, "roles": ["broker"], "storage": {"type": "ephemeral"}}
    }))
    .expect("pool");
    pools
        .create(&PostParams::default(), &pool)
        .await
        .expect("pool created");
    // What `kubectl scale knp/brokers --replicas=5` sends.
    pools
        .patch_scale(
            "brokers",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .expect("scale patched");
    let scaled = pools.get("brokers").await.expect("pool");
    assert_eq!(scaled.spec.replicas, 5);

    // The status side of the scale subresource comes from .status.replicas/.labelSelector.
    pools
        .patch_status(
            "brokers",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "replicas": 5,
                "labelSelector": "strimzi.io/cluster=my-cluster,strimzi.io/pool-name=brokers"
            }})),
        )
        .await
        .expect("status patched");
    let scale = pools.get_scale("brokers").await.expect("scale");
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(5));
    let status = scale.status.expect("scale status");
    assert_eq!(status.replicas, 5);
    assert_eq!(
        status.selector.as_deref(),
        Some("strimzi.io/cluster=my-cluster,strimzi.io/pool-name=brokers")
    );
    ns.delete().await;
}

fn pod_ready(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    status.and_then(|s| s.phase.as_deref()) == Some("Running")
        && status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn test_pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "registry.invalid/kafka:test"}]}
    }))
    .expect("pod")
}

#[tokio::test]
async fn a_pod_becomes_running_and_ready_in_every_cluster() {
    for cluster in Cluster::all().await {
        let ns = cluster.namespace("pod-ready").await;
        let pods: Api<Pod> = ns.api();
        pods.create(&PostParams::default(), &test_pod("p"))
            .await
            .unwrap_or_else(|e| panic!("{}: pod create: {e}", cluster.name));
        let pod = wait_for_object(&pods, "p", TIMEOUT, pod_ready).await;
        let node = pod.spec.and_then(|s| s.node_name).unwrap_or_default();
        assert!(
            node.starts_with(&cluster.name),
            "{}: scheduled on {node}, not one of this cluster's kwok nodes",
            cluster.name
        );
        ns.delete().await;
    }
}

#[tokio::test]
async fn deleting_an_owner_garbage_collects_its_pod() {
    for cluster in Cluster::all().await {
        let ns = cluster.namespace("gc").await;
        let owners: Api<ConfigMap> = ns.api();
        let owner = owners
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "owner"}})).expect("cm"),
            )
            .await
            .expect("owner created");
        let mut pod = test_pod("owned");
        pod.metadata.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: "owner".into(),
                uid: owner.metadata.uid.clone().expect("uid"),
                controller: Some(true),
                block_owner_deletion: None,
            },
        ]);
        let pods: Api<Pod> = ns.api();
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("pod created");
        owners
            .delete("owner", &DeleteParams::background())
            .await
            .expect("owner deleted");
        wait_for_deletion(&pods, "owned", TIMEOUT).await;
        ns.delete().await;
    }
}

#[tokio::test]
async fn a_topic_created_through_rdkafka_is_listed_by_every_broker() {
    let env = TestEnv::get();
    let topic = format!(
        "smoke-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis()
    );
    kafka::create_topic(&env.kafka_bootstrap, &topic, 3, 3).await;
    for id in &env.kafka_broker_ids {
        let address = env.broker_address(*id).expect("broker address");
        wait_for(
            &format!("broker {id} ({address}) to list {topic}"),
            TIMEOUT,
            || {
                let result = kafka::topic_names(&address);
                let topic = topic.clone();
                async move {
                    match result {
                        Ok(names) if names.contains(&topic) => Seen::Done(()),
                        Ok(names) => Seen::NotYet(format!("topics: {names:?}")),
                        Err(e) => Seen::NotYet(format!("metadata error: {e}")),
                    }
                }
            },
        )
        .await;
    }
    let brokers = kafka::broker_ids(&env.kafka_bootstrap).expect("metadata");
    let expected: std::collections::BTreeSet<i32> = env.kafka_broker_ids.iter().copied().collect();
    assert_eq!(brokers, expected);
}

#[tokio::test]
async fn connect_lists_the_filestream_plugins() {
    let env = TestEnv::get();
    let plugins = connect::connector_plugins(&env.connect_url)
        .await
        .unwrap_or_else(|e| panic!("Connect REST API at {} failed: {e}", env.connect_url));
    for class in [
        "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "org.apache.kafka.connect.file.FileStreamSinkConnector",
    ] {
        assert!(
            plugins.iter().any(|p| p.class == class),
            "{class} missing from {plugins:#?}"
        );
    }
}
