//! The Kafka/KafkaNodePool reconciler end to end: the real `kstretch-central` in cluster alpha
//! and real agents in alpha and beta (`kstretch_tests::stretch`). Results are read from the
//! member clusters with plain kube reads, and from Kafka with rdkafka or Kafka's own tools.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::networking::v1::Ingress;
use kstretch_api::{Kafka, KafkaNodePool, StrimziPodSet};
use kstretch_tests::events::{describe, wait_event};
use kstretch_tests::prometheus;
use kstretch_tests::ready::kafka_deployed as is_deployed;
use kstretch_tests::stretch::{ALPHA, BETA, Stretch};
use kstretch_tests::wait::{Seen, wait_for};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(90);

fn kafka(extra_annotations: Value) -> Value {
    json!({
        "apiVersion": "kafka.strimzi.io/v1", "kind": "Kafka",
        "metadata": {"name": "my-cluster", "annotations": extra_annotations},
        "spec": {"kafka": {
            "listeners": [{"name": "plain", "port": 9092, "type": "internal", "tls": false}],
            "config": {"offsets.topic.replication.factor": 3},
            "resources": {"requests": {"memory": "1Gi"}}
        }}
    })
}

fn pool(
    name: &str,
    roles: &[&str],
    replicas: i32,
    alias: Option<&str>,
    annotations: Value,
) -> Value {
    let mut annotations = annotations;
    if let Some(alias) = alias {
        annotations["strimzi.io/stretch-cluster-alias"] = json!(alias);
    }
    json!({
        "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaNodePool",
        "metadata": {"name": name, "labels": {"strimzi.io/cluster": "my-cluster"},
                     "annotations": annotations},
        "spec": {"replicas": replicas, "roles": roles,
                 "storage": {"type": "jbod", "volumes": [
                     {"id": 0, "type": "persistent-claim", "size": "1Gi", "deleteClaim": false,
                      "kraftMetadata": "shared"}]}}
    })
}

fn condition<'a>(
    conditions: &'a [kstretch_api::Condition],
    type_: &str,
) -> Option<&'a kstretch_api::Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

fn kafka_conditions(k: &Kafka) -> Vec<kstretch_api::Condition> {
    k.status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default()
}

/// Waits until the `Kafka` satisfies `check`; shows its status and the logs otherwise.
async fn wait_kafka(stretch: &Stretch, what: &str, check: impl Fn(&Kafka) -> bool) -> Kafka {
    stretch
        .wait_in_alpha("my-cluster", what, TIMEOUT, check)
        .await
}

async fn wait_pool(
    stretch: &Stretch,
    name: &str,
    what: &str,
    check: impl Fn(&KafkaNodePool) -> bool,
) -> KafkaNodePool {
    stretch.wait_in_alpha(name, what, TIMEOUT, check).await
}

fn ready_reason(k: &Kafka) -> Option<String> {
    condition(&kafka_conditions(k), "Ready").and_then(|c| c.reason.clone())
}

/// The message of the `Ready` condition (there must be one).
fn ready_message(k: &Kafka) -> String {
    condition(&kafka_conditions(k), "Ready")
        .and_then(|c| c.message.clone())
        .expect("a Ready condition with a message")
}

fn warning(k: &Kafka, reason: &str) -> Option<String> {
    kafka_conditions(k)
        .into_iter()
        .find(|c| c.type_ == "Warning" && c.reason.as_deref() == Some(reason))
        .and_then(|c| c.message)
}

fn node_ids(p: &KafkaNodePool) -> Vec<i32> {
    p.status
        .as_ref()
        .map(|s| s.node_ids.clone())
        .unwrap_or_default()
}

async fn pod_names(stretch: &Stretch, alias: &str) -> BTreeSet<String> {
    let pods: Api<Pod> = stretch.api(alias);
    pods.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.name)
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// A stretched Kafka: controllers in alpha (central's own cluster, no annotation), brokers in
/// beta. Every member cluster gets its podset, per-node configs, claims and services; the pods
/// run; pools and Kafka report IDs, roles, cluster ID and listeners; `kubectl scale` works.
#[tokio::test]
async fn a_stretched_kafka_runs_its_pools_in_their_clusters_and_reports_status() {
    let stretch = Stretch::start("kafka-stretch", &[]).await;
    stretch.apply(kafka(json!({}))).await;
    stretch
        .apply(pool("controllers", &["controller"], 3, None, json!({})))
        .await;
    stretch
        .apply(pool("brokers", &["broker"], 3, Some(BETA), json!({})))
        .await;

    let k = wait_kafka(&stretch, "the Kafka to be ready", is_deployed).await;
    let status = k.status.clone().unwrap();
    let cluster_id = status.cluster_id.clone().expect("cluster id");
    assert_eq!(cluster_id.len(), 22);
    assert_eq!(status.observed_generation, k.metadata.generation);
    assert_eq!(status.registered_node_ids, [0, 1, 2, 3, 4, 5]);
    assert_eq!(status.kafka_version.as_deref(), Some("4.1.2"));
    assert_eq!(
        status.listeners[0].bootstrap_servers.as_deref(),
        Some(
            format!(
                "my-cluster-kafka-bootstrap.{}.svc.clusterset.local:9092",
                stretch.ns
            )
            .as_str()
        )
    );
    let pools: Vec<_> = status
        .kafka_node_pools
        .iter()
        .filter_map(|p| p.name.clone())
        .collect();
    assert_eq!(pools, ["brokers", "controllers"]);

    // Pools take IDs in name order, lowest first (as in Strimzi): brokers 0-2, controllers 3-5.
    let controllers = wait_pool(&stretch, "controllers", "controller IDs", |p| {
        node_ids(p) == [3, 4, 5]
    })
    .await;
    let brokers = wait_pool(&stretch, "brokers", "broker IDs", |p| {
        node_ids(p) == [0, 1, 2]
    })
    .await;
    let bs = brokers.status.clone().unwrap();
    assert_eq!(bs.cluster_id.as_deref(), Some(cluster_id.as_str()));
    assert_eq!(bs.replicas, Some(3));
    assert_eq!(bs.roles, [kstretch_api::ProcessRole::Broker]);
    assert_eq!(
        bs.label_selector.as_deref(),
        Some(
            "strimzi.io/cluster=my-cluster,strimzi.io/name=my-cluster-kafka,strimzi.io/kind=Kafka,strimzi.io/pool-name=brokers"
        )
    );
    assert!(
        condition(&controllers.status.unwrap().conditions, "Ready")
            .is_some_and(|c| c.status == "True")
    );

    assert_eq!(
        pod_names(&stretch, ALPHA).await,
        set(&[
            "my-cluster-controllers-3",
            "my-cluster-controllers-4",
            "my-cluster-controllers-5"
        ])
    );
    assert_eq!(
        pod_names(&stretch, BETA).await,
        set(&[
            "my-cluster-brokers-0",
            "my-cluster-brokers-1",
            "my-cluster-brokers-2"
        ])
    );
    let cms: Api<ConfigMap> = stretch.api(BETA);
    let cm = cms.get("my-cluster-brokers-1").await.unwrap();
    let config = &cm.data.unwrap()["server.properties"];
    assert!(config.contains("node.id=1"), "{config}");
    assert!(config.contains("process.roles=broker"), "{config}");
    assert!(
        config.contains(&format!(
            "controller.quorum.bootstrap.servers=my-cluster-controllers-3.alpha.my-cluster-kafka-brokers.{}.svc.clusterset.local:9090",
            stretch.ns
        )),
        "{config}"
    );
    let claims: Api<PersistentVolumeClaim> = stretch.api(BETA);
    claims
        .get("data-0-my-cluster-brokers-2")
        .await
        .expect("a claim per node and volume");
    for alias in [ALPHA, BETA] {
        let services: Api<Service> = stretch.api(alias);
        let headless = services.get("my-cluster-kafka-brokers").await.unwrap();
        assert_eq!(headless.spec.unwrap().cluster_ip.as_deref(), Some("None"));
        services.get("my-cluster-kafka-bootstrap").await.unwrap();
    }
    let podsets: Api<StrimziPodSet> = stretch.api(ALPHA);
    assert!(
        podsets
            .get_opt("my-cluster-brokers")
            .await
            .unwrap()
            .is_none(),
        "brokers run in beta only"
    );

    // `kubectl scale` through the scale subresource: the new broker comes up in beta.
    let pools: Api<KafkaNodePool> = stretch.api(ALPHA);
    pools
        .patch_scale(
            "brokers",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .unwrap();
    wait_pool(&stretch, "brokers", "4 brokers", |p| {
        node_ids(p) == [0, 1, 2, 6]
    })
    .await;
    let scale = pools.get_scale("brokers").await.unwrap();
    assert_eq!(scale.status.unwrap().replicas, 4);
    wait_kafka(&stretch, "the Kafka to be ready with 4 brokers", |k| {
        is_deployed(k)
            && k.status
                .as_ref()
                .is_some_and(|s| s.registered_node_ids.len() == 7)
    })
    .await;
    assert!(
        pod_names(&stretch, BETA)
            .await
            .contains("my-cluster-brokers-6")
    );

    // The scale-up is told where a user looks: Events on the pool (central) and on the podset
    // that made the pod (beta's agent).
    let alpha_events: Api<Event> = stretch.api(ALPHA);
    let added = wait_event(
        &alpha_events,
        "KafkaNodePool",
        "brokers",
        "NodesAdded",
        Duration::from_secs(30),
    )
    .await;
    assert!(
        added.iter().any(|e| e
            .note
            .as_deref()
            .is_some_and(|n| n == "nodes [6] added to pool brokers: pods my-cluster-brokers-6")),
        "{}",
        describe(&added)
    );
    let beta_events: Api<Event> = stretch.api(BETA);
    let created = wait_event(
        &beta_events,
        "StrimziPodSet",
        "my-cluster-brokers",
        "PodCreated",
        Duration::from_secs(30),
    )
    .await;
    assert!(
        created
            .iter()
            .any(|e| e.note.as_deref() == Some("created pod my-cluster-brokers-6")),
        "{}",
        describe(&created)
    );
    assert_eq!(
        created[0].reporting_controller.as_deref(),
        Some("kstretch-agent")
    );
    wait_event(
        &beta_events,
        "StrimziPodSet",
        "my-cluster-brokers",
        "PodsReady",
        Duration::from_secs(30),
    )
    .await;
    stretch.finish().await;
}

/// One central and its agents over a list of namespaces (`--namespace=a,b`, as Strimzi's
/// `STRIMZI_NAMESPACE`): the `Kafka` in each listed namespace is reconciled and runs, in both
/// member clusters; the same `Kafka` in a third namespace is left alone (no status, no finalizer,
/// no podset anywhere), and central's store of `Kafka`s holds the two listed ones only.
#[tokio::test]
async fn one_central_runs_a_kafka_in_each_listed_namespace_and_leaves_a_third_alone() {
    let mut stretch = Stretch::start("kafka-ns", &[]).await;
    let second = stretch.namespace_in_both("b").await;
    let third = stretch.namespace_in_both("c").await;
    let listed = format!("{},{second}", stretch.ns);
    stretch.stop_central();
    stretch.start_central_watching(&listed);
    for alias in [ALPHA, BETA] {
        stretch.start_agent_watching(alias, &listed);
    }
    let alpha = stretch.clusters[ALPHA].client.clone();
    for ns in [stretch.ns.clone(), second.clone(), third.clone()] {
        kstretch_tests::cluster::apply(&alpha, &ns, kafka(json!({}))).await;
        let controllers = pool("controllers", &["controller"], 3, None, json!({}));
        kstretch_tests::cluster::apply(&alpha, &ns, controllers).await;
        let brokers = pool("brokers", &["broker"], 3, Some(BETA), json!({}));
        kstretch_tests::cluster::apply(&alpha, &ns, brokers).await;
    }

    for ns in [&stretch.ns, &second] {
        let kafkas: Api<Kafka> = Api::namespaced(alpha.clone(), ns);
        wait_for(
            &format!("the Kafka in {ns} to be ready"),
            TIMEOUT,
            || async {
                match kafkas.get_opt("my-cluster").await {
                    Ok(Some(k)) if is_deployed(&k) => Seen::Done(()),
                    other => Seen::NotYet(format!("{other:?}\n{}", stretch.logs())),
                }
            },
        )
        .await;
        for (alias, podset) in [
            (ALPHA, "my-cluster-controllers"),
            (BETA, "my-cluster-brokers"),
        ] {
            let podsets: Api<StrimziPodSet> =
                Api::namespaced(stretch.clusters[alias].client.clone(), ns);
            assert!(
                podsets.get_opt(podset).await.unwrap().is_some(),
                "{podset} in {alias}/{ns}"
            );
        }
    }

    // The third namespace: nothing read it, nothing was written there.
    let kafka = Api::<Kafka>::namespaced(alpha.clone(), &third)
        .get("my-cluster")
        .await
        .unwrap();
    assert!(kafka.status.is_none(), "{:?}", kafka.status);
    assert!(
        kafka.metadata.finalizers.unwrap_or_default().is_empty(),
        "central claimed the Kafka of an unlisted namespace"
    );
    for alias in [ALPHA, BETA] {
        let podsets: Api<StrimziPodSet> =
            Api::namespaced(stretch.clusters[alias].client.clone(), &third);
        let listed = podsets.list(&ListParams::default()).await.unwrap();
        assert!(listed.items.is_empty(), "podsets in {alias}/{third}");
    }
    assert_eq!(
        stretch
            .central_metric(r#"kstretch_central_watched_objects{kind="Kafka"}"#)
            .await,
        Some(2.0)
    );
    stretch.finish().await;
}

/// A `Kafka` whose nodes (kwok pods) run no Kafka: the broker scale-down check is skipped,
/// and the environment's Kafka (which knows none of these IDs) answers the roll checks.
fn kafka_without_its_own_brokers() -> Value {
    kafka(json!({"strimzi.io/skip-broker-scaledown-check": "true",
                 "kstretch.io/admin-bootstrap-servers": env_bootstrap(),
                 "kstretch.io/admin-security-protocol": "PLAINTEXT"}))
}

fn env_bootstrap() -> String {
    kstretch_tests::TestEnv::get().kafka_bootstrap.clone()
}

async fn annotate<K>(api: &Api<K>, name: &str, annotations: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": annotations}})),
    )
    .await
    .unwrap();
}

async fn scale(stretch: &Stretch, pool: &str, replicas: i32) {
    let pools: Api<KafkaNodePool> = stretch.api(ALPHA);
    pools
        .patch(
            pool,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .unwrap();
}

async fn podset_pods(stretch: &Stretch, alias: &str, podset: &str) -> Vec<String> {
    let api: Api<StrimziPodSet> = stretch.api(alias);
    api.get(podset)
        .await
        .unwrap()
        .spec
        .pod_names()
        .into_iter()
        .map(str::to_owned)
        .collect()
}

/// Node IDs follow `strimzi.io/next-node-ids` and `strimzi.io/remove-node-ids` (lists and
/// ranges); a removed node's pod goes, its claim stays (`deleteClaim: false`); bad input (an
/// unknown cluster alias, a pool of another Kafka cluster ID) is a `Ready=False` condition
/// that changes nothing in the member clusters.
#[tokio::test]
async fn node_ids_follow_the_annotations_and_bad_input_changes_nothing() {
    let stretch = Stretch::start("kafka-ids", &[]).await;
    stretch.apply(kafka_without_its_own_brokers()).await;
    stretch
        .apply(pool(
            "dual",
            &["controller", "broker"],
            1,
            None,
            json!({"strimzi.io/next-node-ids": "[10-12]"}),
        ))
        .await;
    wait_pool(&stretch, "dual", "ID 10", |p| node_ids(p) == [10]).await;
    scale(&stretch, "dual", 3).await;
    wait_pool(&stretch, "dual", "IDs 10-12", |p| {
        node_ids(p) == [10, 11, 12]
    })
    .await;
    wait_kafka(&stretch, "ready with 3 nodes", is_deployed).await;

    let pools: Api<KafkaNodePool> = stretch.api(ALPHA);
    annotate(
        &pools,
        "dual",
        json!({"strimzi.io/remove-node-ids": "[11]"}),
    )
    .await;
    scale(&stretch, "dual", 2).await;
    wait_pool(&stretch, "dual", "ID 11 removed", |p| {
        node_ids(p) == [10, 12]
    })
    .await;
    wait_for("pod 11 to go", TIMEOUT, || async {
        let pods = pod_names(&stretch, ALPHA).await;
        if pods == set(&["my-cluster-dual-10", "my-cluster-dual-12"]) {
            Seen::Done(())
        } else {
            Seen::NotYet(format!("{pods:?}\n{}", stretch.logs()))
        }
    })
    .await;
    let claims: Api<PersistentVolumeClaim> = stretch.api(ALPHA);
    claims
        .get("data-0-my-cluster-dual-11")
        .await
        .expect("the claim of a removed node stays when deleteClaim is false");
    wait_kafka(&stretch, "ready with 2 nodes", |k| {
        let ids = &k.status.as_ref().unwrap().registered_node_ids;
        // The environment's Kafka brokers 1-3 belong to no pool here and stay listed.
        is_deployed(k) && ids.contains(&10) && ids.contains(&12) && !ids.contains(&11)
    })
    .await;

    // An unknown member cluster: refused, nothing changes.
    let pods_before = podset_pods(&stretch, ALPHA, "my-cluster-dual").await;
    assert_eq!(pods_before, ["my-cluster-dual-10", "my-cluster-dual-12"]);
    stretch
        .apply(pool("far", &["broker"], 1, Some("gamma"), json!({})))
        .await;
    let k = wait_kafka(&stretch, "UnknownClusterAlias", |k| {
        ready_reason(k).as_deref() == Some("UnknownClusterAlias")
    })
    .await;
    let message = ready_message(&k);
    assert!(
        message.contains("gamma") && message.contains("alpha, beta"),
        "{message}"
    );
    let far = wait_pool(&stretch, "far", "the pool to be refused too", |p| {
        p.status
            .as_ref()
            .is_some_and(|s| condition(&s.conditions, "Ready").is_some_and(|c| c.status == "False"))
    })
    .await;
    assert!(node_ids(&far).is_empty(), "a refused pool gets no IDs");
    assert_eq!(
        podset_pods(&stretch, ALPHA, "my-cluster-dual").await,
        pods_before
    );
    pools.delete("far", &Default::default()).await.unwrap();
    wait_kafka(&stretch, "ready again", is_deployed).await;

    // A malformed ID annotation is reported (condition and Event) for as long as it stands,
    // not only on the reconciliation that first saw it.
    annotate(&pools, "dual", json!({"strimzi.io/next-node-ids": "[x"})).await;
    let ignored = |k: &Kafka| warning(k, "NodeIdAnnotationIgnored");
    wait_kafka(&stretch, "the annotation reported", |k| {
        ignored(k).is_some_and(|m| m.contains("strimzi.io/next-node-ids ignored"))
    })
    .await;
    let events: Api<Event> = stretch.api(ALPHA);
    wait_event(
        &events,
        "Kafka",
        "my-cluster",
        "NodeIdAnnotationIgnored",
        TIMEOUT,
    )
    .await;
    let kafkas: Api<Kafka> = stretch.api(ALPHA);
    annotate(&kafkas, "my-cluster", json!({"test.kstretch.io/poke": "1"})).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        ignored(&kafkas.get("my-cluster").await.unwrap()).is_some(),
        "still reported after another reconciliation"
    );
    annotate(&pools, "dual", json!({"strimzi.io/next-node-ids": null})).await;
    wait_kafka(&stretch, "the warning gone with the annotation", |k| {
        ignored(k).is_none()
    })
    .await;

    // Moving node 12 to another pool, by the annotation procedure: the old pool removes it,
    // then the new pool takes it.
    annotate(
        &pools,
        "dual",
        json!({"strimzi.io/remove-node-ids": "[12]"}),
    )
    .await;
    scale(&stretch, "dual", 1).await;
    wait_pool(&stretch, "dual", "node 12 leaves dual", |p| {
        node_ids(p) == [10]
    })
    .await;
    stretch
        .apply(pool(
            "movers",
            &["broker"],
            1,
            None,
            json!({"strimzi.io/next-node-ids": "[12]"}),
        ))
        .await;
    wait_pool(&stretch, "movers", "node 12 joins movers", |p| {
        node_ids(p) == [12]
    })
    .await;
    wait_kafka(&stretch, "ready after the move", is_deployed).await;
    // The pool's status is written before the pass publishes its pod: the Kafka may still show
    // the last pass's condition for a moment.
    wait_for("node 12's pod in movers", TIMEOUT, || async {
        let pods = pod_names(&stretch, ALPHA).await;
        if pods.contains("my-cluster-movers-12") {
            Seen::Done(())
        } else {
            Seen::NotYet(format!("{pods:?}"))
        }
    })
    .await;

    // Two pools claiming one ID: refused, nothing changes.
    let movers_pods = podset_pods(&stretch, ALPHA, "my-cluster-movers").await;
    let duplicate = json!({"status": {"nodeIds": [10]}});
    pools
        .patch_status("movers", &PatchParams::default(), &Patch::Merge(&duplicate))
        .await
        .unwrap();
    let k = wait_kafka(&stretch, "DuplicateNodeId", |k| {
        ready_reason(k).as_deref() == Some("DuplicateNodeId")
    })
    .await;
    let message = ready_message(&k);
    assert!(message.contains("node ID 10"), "{message}");
    assert_eq!(
        podset_pods(&stretch, ALPHA, "my-cluster-movers").await,
        movers_pods
    );
    pools.delete("movers", &Default::default()).await.unwrap();
    wait_kafka(&stretch, "ready without the duplicate", is_deployed).await;

    // A pool that belongs to another Kafka cluster ID.
    let pods_before = podset_pods(&stretch, ALPHA, "my-cluster-dual").await;
    let status_patch = json!({"status": {"clusterId": "AAAAAAAAAAAAAAAAAAAAAA"}});
    pools
        .patch_status(
            "dual",
            &PatchParams::default(),
            &Patch::Merge(&status_patch),
        )
        .await
        .unwrap();
    let k = wait_kafka(&stretch, "ClusterIdMismatch", |k| {
        ready_reason(k).as_deref() == Some("ClusterIdMismatch")
    })
    .await;
    let message = ready_message(&k);
    assert!(message.contains("AAAAAAAAAAAAAAAAAAAAAA"), "{message}");
    assert_eq!(
        podset_pods(&stretch, ALPHA, "my-cluster-dual").await,
        pods_before
    );
    stretch.finish().await;
}

/// Brokers mapped onto the environment's real Kafka (brokers 1-3): a scale-down is reverted
/// with a warning while the broker to remove holds partition replicas; with
/// `strimzi.io/skip-broker-scaledown-check` it proceeds, and the removed broker, still running
/// in Kafka, is not unregistered behind its back.
#[tokio::test]
async fn a_scale_down_is_reverted_while_the_broker_holds_replicas() {
    let stretch = Stretch::start("kafka-scaledown", &[]).await;
    let bootstrap = env_bootstrap();
    let topic = format!("scaledown-{}", stretch.ns);
    kstretch_tests::kafka::create_topic(&bootstrap, &topic, 3, 3).await;

    stretch
        .apply(kafka(
            json!({"kstretch.io/admin-bootstrap-servers": bootstrap,
                   "kstretch.io/admin-security-protocol": "PLAINTEXT"}),
        ))
        .await;
    stretch
        .apply(pool(
            "controllers",
            &["controller"],
            1,
            None,
            json!({"strimzi.io/next-node-ids": "[0]"}),
        ))
        .await;
    stretch
        .apply(pool(
            "brokers",
            &["broker"],
            3,
            Some(BETA),
            json!({"strimzi.io/next-node-ids": "[1-3]"}),
        ))
        .await;
    wait_pool(&stretch, "brokers", "brokers 1-3", |p| {
        node_ids(p) == [1, 2, 3]
    })
    .await;
    wait_kafka(&stretch, "ready", is_deployed).await;

    scale(&stretch, "brokers", 2).await;
    let k = wait_kafka(&stretch, "ScaleDownBlocked", |k| {
        warning(k, "ScaleDownBlocked").is_some()
    })
    .await;
    let message = warning(&k, "ScaleDownBlocked").unwrap();
    assert!(message.contains("broker 3 holds"), "{message}");
    let brokers = wait_pool(&stretch, "brokers", "IDs kept", |p| {
        p.status
            .as_ref()
            .is_some_and(|s| s.observed_generation == p.metadata.generation)
    })
    .await;
    assert_eq!(node_ids(&brokers), [1, 2, 3]);
    assert_eq!(
        podset_pods(&stretch, BETA, "my-cluster-brokers")
            .await
            .len(),
        3
    );

    let kafkas: Api<Kafka> = stretch.api(ALPHA);
    annotate(
        &kafkas,
        "my-cluster",
        json!({"strimzi.io/skip-broker-scaledown-check": "true"}),
    )
    .await;
    wait_pool(&stretch, "brokers", "broker 3 removed", |p| {
        node_ids(p) == [1, 2]
    })
    .await;
    let k = wait_kafka(
        &stretch,
        "broker 3 pending unregistration while it runs",
        |k| warning(k, "UnregistrationPending").is_some_and(|m| m.contains('3')),
    )
    .await;
    assert!(
        warning(&k, "ScaleDownBlocked").is_none(),
        "the warning is gone"
    );
    assert!(k.status.unwrap().registered_node_ids.contains(&3));
    let registered = kstretch_tests::kafka::broker_ids(&bootstrap).unwrap();
    assert!(
        registered.contains(&3),
        "a running broker is never unregistered: {registered:?}"
    );

    let admin = kstretch_tests::kafka::admin(&bootstrap);
    let _ = admin
        .delete_topics(&[topic.as_str()], &rdkafka::admin::AdminOptions::new())
        .await;
    stretch.finish().await;
}

/// With the agent of beta gone, the `Kafka` says so, and a scale-down of beta's pool waits
/// (nothing destructive happens there without a current instruction); once the agent is back
/// the scale-down happens. Meanwhile the environment's Prometheus, scraping this central with
/// the rules the chart ships, fires `KstretchAgentDisconnected` for beta, has the `Kafka`'s
/// exported warning, and answers every query of the chart's dashboard.
#[tokio::test]
async fn an_unreachable_cluster_is_reported_and_its_scale_down_waits() {
    let mut stretch = Stretch::start("kafka-unreachable", &[]).await;
    stretch.apply(kafka_without_its_own_brokers()).await;
    stretch
        .apply(pool(
            "controllers",
            &["controller"],
            1,
            None,
            json!({"strimzi.io/next-node-ids": "[50]"}),
        ))
        .await;
    stretch
        .apply(pool(
            "brokers",
            &["broker"],
            3,
            Some(BETA),
            json!({"strimzi.io/next-node-ids": "[60-62]"}),
        ))
        .await;
    wait_kafka(&stretch, "ready", is_deployed).await;
    // The environment's Prometheus scrapes this central and evaluates kstretch's shipped rules.
    let _scraped = prometheus::scrape(&stretch.ns, "central", &stretch.central_http);
    let test = stretch.ns.clone();
    prometheus::series_from(
        &format!(
            "kstretch_central_agent_connected{{test=\"{}\"}} == 1",
            stretch.ns
        ),
        &[ALPHA, BETA],
    )
    .await;

    stretch.stop_agent(BETA);
    let k = wait_kafka(&stretch, "ClusterUnreachable", |k| {
        warning(k, "ClusterUnreachable").is_some()
    })
    .await;
    assert!(warning(&k, "ClusterUnreachable").unwrap().contains("beta"));
    assert!(!is_deployed(&k));

    scale(&stretch, "brokers", 2).await;
    let k = wait_kafka(&stretch, "ScaleDownDeferred", |k| {
        warning(k, "ScaleDownDeferred").is_some()
    })
    .await;
    assert!(warning(&k, "ScaleDownDeferred").unwrap().contains("62"));
    let pools: Api<KafkaNodePool> = stretch.api(ALPHA);
    assert_eq!(node_ids(&pools.get("brokers").await.unwrap()), [60, 61, 62]);

    // A minute without beta's agent fires kstretch's alert, and the Kafka is exported
    // as not Ready with its warning.
    prometheus::firing(
        "KstretchAgentDisconnected",
        &[("test", test.as_str()), ("cluster", BETA)],
        Duration::from_secs(150),
    )
    .await;
    prometheus::some_series(&format!(
        "kstretch_central_kafka_warnings{{test=\"{0}\",reason=\"ClusterUnreachable\"}} > 0 \
         and on (test) kstretch_central_kafka_ready{{test=\"{0}\"}} == 0",
        stretch.ns
    ))
    .await;
    // Every query of the dashboard the chart ships returns data, its variable filled.
    for query in prometheus::dashboard_queries(&stretch.ns) {
        prometheus::some_series(&query).await;
    }

    stretch.start_agent(BETA);
    wait_pool(
        &stretch,
        "brokers",
        "the scale-down after the agent is back",
        |p| node_ids(p) == [60, 61],
    )
    .await;
    wait_for("broker 62's pod to go", TIMEOUT, || async {
        let pods = pod_names(&stretch, BETA).await;
        if pods.contains("my-cluster-brokers-62") {
            Seen::NotYet(format!("{pods:?}"))
        } else {
            Seen::Done(())
        }
    })
    .await;
    stretch.finish().await;
}

/// Central restarted while a `Kafka` is invalid: its pods are kept (central does not know
/// what it wants, so nothing is deleted), while other clusters are served; a pool pointed at
/// another cluster whose agent is away is refused, and once the agent is back starts moving
/// there, keeping its old nodes; deleting the `Kafka`
/// removes its pods and services but keeps claims without `deleteClaim`.
#[tokio::test]
async fn an_invalid_kafka_keeps_its_pods_across_a_central_restart_and_deletion_cleans_up() {
    let mut stretch = Stretch::start("kafka-retain", &[]).await;
    stretch.apply(kafka(json!({}))).await;
    stretch
        .apply(pool("dual", &["controller", "broker"], 2, None, json!({})))
        .await;
    wait_kafka(&stretch, "ready", is_deployed).await;
    let pods: Api<Pod> = stretch.api(ALPHA);
    let uid = |p: Pod| p.metadata.uid.unwrap();
    let before = uid(pods.get("my-cluster-dual-0").await.unwrap());

    stretch.stop_central();
    stretch
        .apply(pool("far", &["broker"], 1, Some("gamma"), json!({})))
        .await;
    stretch.start_central();
    wait_kafka(&stretch, "UnknownClusterAlias after the restart", |k| {
        ready_reason(k).as_deref() == Some("UnknownClusterAlias")
    })
    .await;
    // The agents got a snapshot that retains the cluster: wait for it to be applied, then
    // check the pods are still the same ones.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        uid(pods.get("my-cluster-dual-0").await.unwrap()),
        before,
        "the pod was kept"
    );
    assert!(
        pod_names(&stretch, ALPHA)
            .await
            .contains("my-cluster-dual-1")
    );

    let pools: Api<KafkaNodePool> = stretch.api(ALPHA);
    pools.delete("far", &Default::default()).await.unwrap();
    wait_kafka(&stretch, "ready again", is_deployed).await;
    assert_eq!(uid(pods.get("my-cluster-dual-0").await.unwrap()), before);

    // Pointing a pool that runs nodes at another cluster moves it: new nodes (new IDs) start
    // there, and the old ones keep running with their data until their partitions have moved
    // and they left the quorum. No Kafka runs on kwok's pods, so that cannot be checked: they
    // stay. Pointing it back swaps the roles; no old pod is touched either way.
    let dual = wait_pool(&stretch, "dual", "its cluster recorded", |p| {
        p.status.as_ref().and_then(|s| s.cluster_alias.as_deref()) == Some(ALPHA)
    })
    .await;
    assert_eq!(node_ids(&dual), [0, 1]);
    let alias = |value: Value| json!({"metadata": {"annotations": {"strimzi.io/stretch-cluster-alias": value}}});
    // Toward a cluster whose agent is away, the move does not start (its new nodes could not):
    // refused, nothing marked leaving; it starts once the agent is back.
    let output = stretch
        .kstretch_command(&["move-pool", "dual", "--to", ALPHA])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && said.contains("already runs in alpha: nothing to move"),
        "{said}"
    );
    // Asked as a user would, `kstretch move-pool --wait` says so and fails.
    stretch.stop_agent(BETA);
    let mut command = stretch.kstretch_command(&["move-pool", "dual", "--to", BETA, "--wait"]);
    let output = tokio::task::spawn_blocking(move || command.output().expect("kstretch runs"))
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success()
            && said.contains("refused: PoolMoveTargetUnreachable: KafkaNodePool dual is to move"),
        "{said}"
    );
    let k = wait_kafka(
        &stretch,
        "the move to a disconnected cluster refused",
        |k| ready_reason(k).as_deref() == Some("PoolMoveTargetUnreachable"),
    )
    .await;
    let message = ready_message(&k);
    assert!(
        message.contains("the agent of beta is not connected"),
        "{message}"
    );
    let dual = pools.get("dual").await.unwrap();
    let status = dual.status.unwrap();
    assert_eq!(
        (status.leaving, status.cluster_alias.as_deref()),
        (None, Some(ALPHA))
    );
    assert_eq!(uid(pods.get("my-cluster-dual-0").await.unwrap()), before);
    stretch.start_agent(BETA);
    let leaving = |p: &KafkaNodePool| {
        p.status.as_ref().and_then(|s| {
            let l = s.leaving.as_ref()?;
            Some((
                s.cluster_alias.clone()?,
                l.cluster_alias.clone(),
                l.node_ids.clone(),
            ))
        })
    };
    let moving = wait_pool(&stretch, "dual", "the move to start", |p| {
        leaving(p) == Some((BETA.to_owned(), ALPHA.to_owned(), vec![0, 1]))
    })
    .await;
    assert_eq!(node_ids(&moving), [0, 1, 2, 3]);
    let k = wait_kafka(&stretch, "the move shown", |k| {
        warning(k, "PoolMoving").is_some()
    })
    .await;
    let message = warning(&k, "PoolMoving").unwrap();
    assert!(
        message.contains(
            "moves from Kubernetes cluster alpha to beta: nodes {0, 1} in alpha stop once"
        ),
        "{message}"
    );
    wait_for("the new nodes' pods in beta", TIMEOUT, || async {
        let pods = pod_names(&stretch, BETA).await;
        if pods.contains("my-cluster-dual-2") && pods.contains("my-cluster-dual-3") {
            Seen::Done(())
        } else {
            Seen::NotYet(format!("{pods:?}"))
        }
    })
    .await;
    assert_eq!(uid(pods.get("my-cluster-dual-0").await.unwrap()), before);
    pools
        .patch(
            "dual",
            &PatchParams::default(),
            &Patch::Merge(alias(Value::Null)),
        )
        .await
        .unwrap();
    wait_pool(
        &stretch,
        "dual",
        "the move undone: beta's nodes leaving",
        |p| leaving(p) == Some((ALPHA.to_owned(), BETA.to_owned(), vec![2, 3])),
    )
    .await;
    assert_eq!(uid(pods.get("my-cluster-dual-0").await.unwrap()), before);

    let kafkas: Api<Kafka> = stretch.api(ALPHA);
    kafkas
        .delete("my-cluster", &Default::default())
        .await
        .unwrap();
    wait_for("the Kafka's pods and services to go", TIMEOUT, || async {
        let left = pod_names(&stretch, ALPHA).await;
        let services: Api<Service> = stretch.api(ALPHA);
        let svc = services
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len();
        if left.is_empty() && svc == 0 {
            Seen::Done(())
        } else {
            Seen::NotYet(format!("pods {left:?}, {svc} services\n{}", stretch.logs()))
        }
    })
    .await;
    let claims: Api<PersistentVolumeClaim> = stretch.api(ALPHA);
    claims
        .get("data-0-my-cluster-dual-0")
        .await
        .expect("claims stay without deleteClaim");
    stretch.finish().await;
}

/// `kstretch drain beta --move-nodes-to alpha` moves every node pool of the `Kafka` that runs in
/// beta to alpha (kwok's pods run no Kafka, so the moves only start: new nodes in alpha, the
/// old ones kept as leaving); a cluster without pools, the drained cluster as the target, and a
/// dry run of it are refused, changing nothing.
#[tokio::test]
async fn draining_a_cluster_with_move_nodes_to_moves_each_of_its_pools() {
    let stretch = Stretch::start("kafka-evacuate", &[]).await;
    stretch.apply(kafka(json!({}))).await;
    stretch
        .apply(pool("controllers", &["controller"], 1, None, json!({})))
        .await;
    for name in ["b1", "b2"] {
        stretch
            .apply(pool(name, &["broker"], 1, Some(BETA), json!({})))
            .await;
    }
    wait_kafka(&stretch, "ready", is_deployed).await;
    for name in ["b1", "b2"] {
        wait_pool(&stretch, name, "placed in beta", |p| {
            p.status.as_ref().and_then(|s| s.cluster_alias.as_deref()) == Some(BETA)
        })
        .await;
    }
    let run = |args: &[&str]| {
        let output = stretch.kstretch_command(args).output().unwrap();
        let text = String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr);
        (output.status.success(), text)
    };
    let kafka_args = ["--kafka", "my-cluster"];
    let (ok, out) = run(&[
        &["drain", "gamma", "--move-nodes-to", ALPHA][..],
        &kafka_args,
    ]
    .concat());
    assert!(
        !ok && out.contains("has no node pool running in cluster gamma (its pools: "),
        "{out}"
    );
    let (ok, out) = run(&[&["drain", BETA, "--move-nodes-to", BETA][..], &kafka_args].concat());
    assert!(!ok && out.contains("the cluster being drained"), "{out}");
    let args = ["drain", BETA, "--move-nodes-to", ALPHA, "--dry-run"];
    let (ok, out) = run(&[&args[..], &kafka_args].concat());
    assert!(!ok && out.contains("cannot be used with"), "{out}");
    let pools: Api<KafkaNodePool> = stretch.api(ALPHA);
    for name in ["b1", "b2"] {
        let p = pools.get(name).await.unwrap();
        assert!(!p.annotations().contains_key("kstretch.io/move-throttle"));
        assert_eq!(p.annotations()["strimzi.io/stretch-cluster-alias"], BETA);
    }

    let args = [
        "drain",
        BETA,
        "--move-nodes-to",
        ALPHA,
        "--throttle",
        "1048576",
    ];
    let (ok, out) = run(&[&args[..], &kafka_args].concat());
    assert!(
        ok && out.contains("b1, b2 move from beta to alpha"),
        "{out}"
    );
    for name in ["b1", "b2"] {
        let moving = wait_pool(&stretch, name, "its move to start", |p| {
            p.status.as_ref().is_some_and(|s| {
                s.cluster_alias.as_deref() == Some(ALPHA)
                    && s.leaving.as_ref().is_some_and(|l| l.cluster_alias == BETA)
            })
        })
        .await;
        assert_eq!(moving.annotations()["kstretch.io/move-throttle"], "1048576");
    }
    wait_for("the new nodes' pods in alpha", TIMEOUT, || async {
        let pods = pod_names(&stretch, ALPHA).await;
        if pods
            .iter()
            .filter(|p| p.starts_with("my-cluster-b"))
            .count()
            == 2
        {
            Seen::Done(())
        } else {
            Seen::NotYet(format!("{pods:?}"))
        }
    })
    .await;
    assert_eq!(
        pod_names(&stretch, BETA).await.len(),
        2,
        "the old nodes stay"
    );
    stretch.finish().await;
}

/// Resources that cannot make a cluster are refused with a condition that names every problem
/// and says what to fix; nothing is created for them.
#[tokio::test]
async fn invalid_layouts_are_refused_with_every_problem_named() {
    let stretch = Stretch::start("kafka-invalid", &[]).await;
    stretch.apply(kafka(json!({}))).await;
    let k = wait_kafka(&stretch, "NoNodePools", |k| {
        ready_reason(k).as_deref() == Some("NoNodePools")
    })
    .await;
    let message = ready_message(&k);
    assert!(
        message.contains("strimzi.io/cluster=my-cluster"),
        "{message}"
    );

    stretch
        .apply(pool("brokers", &["broker"], 2, None, json!({})))
        .await;
    stretch
        .apply(pool(
            "a-pool-name-that-is-far-too-long-for-the-derived-pod-names",
            &["broker"],
            1,
            None,
            json!({}),
        ))
        .await;
    let message_of = |k: &Kafka| {
        condition(&kafka_conditions(k), "Ready")
            .and_then(|c| c.message.clone())
            .unwrap_or_default()
    };
    let k = wait_kafka(&stretch, "both problems named", |k| {
        let m = message_of(k);
        m.contains("no node with the controller role") && m.contains("more than 63")
    })
    .await;
    assert_eq!(
        ready_reason(&k).as_deref(),
        Some("NameTooLong"),
        "the first problem gives the reason"
    );
    let podsets: Api<StrimziPodSet> = stretch.api(ALPHA);
    assert!(
        podsets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "nothing was created"
    );
    stretch.finish().await;
}

/// Authentication and authorization that kstretch cannot configure (`oauth`, `opa`), a
/// listener certificate whose Secret is missing, a `metricsConfig` whose rules are not named
/// or whose ConfigMap or key is missing, and `external` logging likewise, are refused (a
/// metrics type nobody knows is refused by the CRD itself): `Ready=False` with the reason,
/// naming the field, and the running cluster is kept as it was (same pods, configuration without the listener). Before, a `scram-sha-512` listener
/// was served as `PLAINTEXT`. (TLS, `tls`, `scram-sha-512`, `custom` and `simple` are served.)
#[tokio::test]
async fn protection_that_cannot_be_configured_is_refused_and_what_runs_is_kept() {
    let stretch = Stretch::start("kafka-security", &[]).await;
    stretch.apply(kafka(json!({}))).await;
    stretch
        .apply(pool("dual", &["controller", "broker"], 2, None, json!({})))
        .await;
    wait_kafka(&stretch, "ready", is_deployed).await;
    let pods: Api<Pod> = stretch.api(ALPHA);
    let cms: Api<ConfigMap> = stretch.api(ALPHA);
    let uid = |p: Pod| p.metadata.uid.unwrap();
    let before = uid(pods.get("my-cluster-dual-0").await.unwrap());
    let config = || async {
        cms.get("my-cluster-dual-0").await.unwrap().data.unwrap()["server.properties"].clone()
    };
    let config_before = config().await;

    // A ConfigMap that exists without the key a metricsConfig names.
    stretch
        .apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "other-rules"}, "data": {"other.yml": "rules: []"}}))
        .await;
    let plain = json!({"name": "plain", "port": 9092, "type": "internal", "tls": false});
    let cases = [
        (
            json!({"listeners": [plain.clone(), {"name": "oauth", "port": 9094,
                "type": "internal", "tls": true, "authentication": {"type": "oauth"}}]}),
            ".spec.kafka.listeners[1].authentication (type oauth)",
            "UnsupportedField",
        ),
        (
            json!({"listeners": [plain.clone()], "authorization": {"type": "opa"}}),
            ".spec.kafka.authorization (type opa)",
            "UnsupportedField",
        ),
        (
            json!({"listeners": [plain.clone(), {"name": "own", "port": 9094,
                "type": "internal", "tls": true, "configuration": {"brokerCertChainAndKey":
                    {"secretName": "absent", "certificate": "tls.crt", "key": "tls.key"}}}]}),
            "names Secret absent key tls.crt, which does not exist",
            "SecretNotFound",
        ),
        (
            json!({"listeners": [plain.clone()], "metricsConfig": {"type": "jmxPrometheusExporter"}}),
            "needs valueFrom.configMapKeyRef",
            "InvalidMetricsConfig",
        ),
        (
            json!({"listeners": [plain.clone()], "metricsConfig": {"type": "jmxPrometheusExporter",
                "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "rules.yml"}}}}),
            "names ConfigMap absent, which does not exist",
            "InvalidMetricsConfig",
        ),
        (
            json!({"listeners": [plain.clone()], "metricsConfig": {"type": "jmxPrometheusExporter",
                "valueFrom": {"configMapKeyRef": {"name": "other-rules", "key": "rules.yml"}}}}),
            "names key rules.yml of ConfigMap other-rules, which it does not have",
            "InvalidMetricsConfig",
        ),
        (
            json!({"listeners": [plain.clone()], "metricsConfig": {"type": "strimziMetricsReporter",
                "values": {"allowList": []}}}),
            ".spec.kafka.metricsConfig.values.allowList is empty",
            "InvalidMetricsConfig",
        ),
        (
            json!({"listeners": [plain.clone()], "logging": {"type": "external"}}),
            ".spec.kafka.logging is external without valueFrom",
            "InvalidLoggingConfig",
        ),
        (
            json!({"listeners": [plain.clone()], "logging": {"type": "external",
                "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "log4j2.properties"}}}}),
            ".spec.kafka.logging names ConfigMap absent, which does not exist",
            "InvalidLoggingConfig",
        ),
        // The routing objects go to the member cluster first; neither API is served here.
        (
            json!({"listeners": [plain.clone(), {"name": "external", "port": 9094,
                "type": "route", "tls": true, "configuration": {
                    "bootstrap": {"host": "bootstrap.apps.example.com"},
                    "hostTemplate": "broker-{nodeId}.apps.example.com"}}]}),
            "listener external: cluster alpha does not serve route.openshift.io/v1 Route",
            "ListenerApiNotServed",
        ),
        (
            json!({"listeners": [plain.clone(), {"name": "gateway", "port": 9094,
                "type": "tlsroute", "tls": true, "configuration": {
                    "parentRefs": [{"name": "kafka-gateway", "sectionName": "tls"}],
                    "bootstrap": {"host": "bootstrap.example.com"},
                    "hostTemplate": "broker-{nodeId}.example.com"}}]}),
            "listener gateway: cluster alpha does not serve gateway.networking.k8s.io/v1 TLSRoute",
            "ListenerApiNotServed",
        ),
        (
            json!({"listeners": [plain.clone(), {"name": "ingress", "port": 9094,
                "type": "ingress", "tls": false, "configuration": {
                    "bootstrap": {"host": "bootstrap.example.com"}}}]}),
            ".spec.kafka.listeners[1].tls must be true",
            "InvalidListener",
        ),
    ];
    for (change, field, reason) in cases {
        let mut k = kafka(json!({}));
        for (key, value) in change.as_object().unwrap() {
            k["spec"]["kafka"][key] = value.clone();
        }
        stretch.apply(k).await;
        let refused = wait_kafka(&stretch, &format!("refused naming {field}"), |k| {
            ready_reason(k).as_deref() == Some(reason)
                && condition(&kafka_conditions(k), "Ready")
                    .and_then(|c| c.message.as_deref())
                    .is_some_and(|m| m.contains(field))
        })
        .await;
        assert_eq!(
            refused.status.unwrap().observed_generation,
            refused.metadata.generation,
            "the refusal is about this generation"
        );
        // The agents got the snapshot that retains the cluster by now; give a wrong one time
        // to show.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(uid(pods.get("my-cluster-dual-0").await.unwrap()), before);
        let now = config().await;
        assert_eq!(now, config_before, "the configuration is kept");
        assert!(
            !now.contains("9093") && !now.contains("9094"),
            "no refused listener is served: {now}"
        );
    }

    stretch.apply(kafka(json!({}))).await;
    wait_kafka(&stretch, "ready again", is_deployed).await;
    assert_eq!(
        uid(pods.get("my-cluster-dual-0").await.unwrap()),
        before,
        "nothing rolled"
    );
    // A metrics type that neither Strimzi nor kstretch knows never reaches central.
    let mut unknown = kafka(json!({}));
    unknown["spec"]["kafka"]["metricsConfig"] = json!({"type": "prometheusExporter"});
    let refused = stretch.try_apply(unknown).await.unwrap_err();
    assert!(
        refused.contains("spec.kafka.metricsConfig.type") && refused.contains("Unsupported value"),
        "{refused}"
    );

    // Ingress is served by every apiserver: Strimzi's Ingresses (TLS passed through) in front
    // of ClusterIP Services, each broker advertised at its host on 443.
    let mut k = kafka(json!({}));
    k["spec"]["kafka"]["listeners"] = json!([plain, {"name": "external", "port": 9094,
        "type": "ingress", "tls": true, "configuration": {"class": "nginx",
            "bootstrap": {"host": "bootstrap.kafka.example.com"},
            "hostTemplate": "broker-{nodeId}.kafka.example.com"}}]);
    stretch.apply(k).await;
    // (The pods would roll next; kwok's pods run no Kafka to check the roll is safe with.)
    // Strimzi deprecates the type, and says so as it does.
    wait_kafka(
        &stretch,
        "the ingress listener's bootstrap in status, and Strimzi's deprecation warning",
        |k| {
            k.status.as_ref().is_some_and(|s| {
                s.listeners.iter().any(|l| {
                    l.bootstrap_servers.as_deref() == Some("bootstrap.kafka.example.com:443")
                }) && s.conditions.iter().any(|c| {
                    c.type_ == "Warning"
                        && c.reason.as_deref() == Some("DeprecatedObjects")
                        && c.message.as_deref() == Some("ingress type listeners are deprecated.")
                })
            })
        },
    )
    .await;
    let ingresses: Api<Ingress> = stretch.api(ALPHA);
    let bootstrap = ingresses.get("my-cluster-kafka-bootstrap").await.unwrap();
    let rules = bootstrap.spec.unwrap().rules.unwrap();
    assert_eq!(
        rules[0].host.as_deref(),
        Some("bootstrap.kafka.example.com")
    );
    assert_eq!(
        bootstrap.metadata.annotations.unwrap()["nginx.ingress.kubernetes.io/ssl-passthrough"],
        "true"
    );
    let node = ingresses.get("my-cluster-dual-1").await.unwrap();
    let spec = node.spec.unwrap();
    assert_eq!(spec.ingress_class_name.as_deref(), Some("nginx"));
    assert_eq!(
        spec.rules.unwrap()[0].host.as_deref(),
        Some("broker-1.kafka.example.com")
    );
    let services: Api<Service> = stretch.api(ALPHA);
    let service = services.get("my-cluster-dual-1").await.unwrap();
    assert_eq!(service.spec.unwrap().type_.as_deref(), Some("ClusterIP"));
    wait_for(
        "broker 0 advertised at its host on 443",
        TIMEOUT,
        || async {
            let now = config().await;
            if now.contains("EXTERNAL-9094://broker-0.kafka.example.com:443") {
                Seen::Done(())
            } else {
                Seen::NotYet(now)
            }
        },
    )
    .await;
    stretch.finish().await;
}

/// `loadbalancer` addressing: every node gets a LoadBalancer Service in its cluster first; its
/// configuration waits (`AddressPending`) until the load balancer has an address — here given
/// by the test environment's MetalLB, from each cluster's own network — and then advertises it.
#[tokio::test]
async fn per_node_load_balancers_are_created_first_and_their_addresses_configured() {
    let stretch = Stretch::start("kafka-lb", &[]).await;
    stretch
        .apply(kafka(json!({"kstretch.io/addressing": "loadbalancer"})))
        .await;
    stretch
        .apply(pool("dual", &["controller", "broker"], 1, None, json!({})))
        .await;
    stretch
        .apply(pool("brokers", &["broker"], 1, Some(BETA), json!({})))
        .await;
    // Brokers pool sorts first: brokers-0 in beta, dual-1 in alpha.
    let mut addresses = Vec::new();
    for (alias, name) in [(BETA, "my-cluster-brokers-0"), (ALPHA, "my-cluster-dual-1")] {
        let services: Api<Service> = stretch.api(alias);
        let (spec, ip) = wait_for(
            &format!("Service {name} in {alias} with an address"),
            TIMEOUT,
            || async {
                let svc = services.get_opt(name).await;
                let ip = svc
                    .as_ref()
                    .ok()
                    .and_then(Option::as_ref)
                    .and_then(|s| s.status.as_ref()?.load_balancer.as_ref()?.ingress.clone())
                    .and_then(|i| i.first()?.ip.clone());
                match (svc, ip) {
                    (Ok(Some(s)), Some(ip)) => Seen::Done((s.spec.unwrap(), ip)),
                    (other, _) => Seen::NotYet(format!("{other:?}\n{}", stretch.logs())),
                }
            },
        )
        .await;
        assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"));
        assert_eq!(spec.selector.unwrap()["strimzi.io/pod-name"], name);
        addresses.push((alias, name, ip));
    }
    wait_kafka(&stretch, "ready with load balancer addresses", is_deployed).await;
    // The one controller, in alpha.
    let controller = addresses[1].2.clone();
    for (alias, name, ip) in addresses {
        let cms: Api<ConfigMap> = stretch.api(alias);
        let config = cms.get(name).await.unwrap().data.unwrap()["server.properties"].clone();
        let config = config.replace('\\', "");
        assert!(
            config.contains(&format!("REPLICATION-9091://{ip}:9091")),
            "{name} advertises its Service's address {ip}: {config}"
        );
        assert!(
            config.contains(&format!(
                "controller.quorum.bootstrap.servers={controller}:9090"
            )),
            "{config}"
        );
    }
    stretch.finish().await;
}

/// `nodeport` addressing: per-node NodePort Services, whose ports the apiserver allocates, are
/// advertised at each member cluster's host from `kstretch.io/node-port-hosts`.
#[tokio::test]
async fn per_node_node_ports_are_advertised_at_the_cluster_host() {
    let stretch = Stretch::start("kafka-nodeport", &[]).await;
    stretch
        .apply(kafka(json!({"kstretch.io/addressing": "nodeport",
                            "kstretch.io/node-port-hosts": "alpha=nodes.alpha.example,beta=nodes.beta.example"})))
        .await;
    stretch
        .apply(pool("dual", &["controller", "broker"], 1, None, json!({})))
        .await;
    stretch
        .apply(pool("brokers", &["broker"], 1, Some(BETA), json!({})))
        .await;
    wait_kafka(&stretch, "ready with node ports", is_deployed).await;
    let services: Api<Service> = stretch.api(BETA);
    let svc = services.get("my-cluster-brokers-0").await.unwrap();
    let node_port = svc
        .spec
        .unwrap()
        .ports
        .unwrap()
        .iter()
        .find(|p| p.name.as_deref() == Some("tcp-replication"))
        .unwrap()
        .node_port
        .unwrap();
    let cms: Api<ConfigMap> = stretch.api(BETA);
    let config =
        cms.get("my-cluster-brokers-0").await.unwrap().data.unwrap()["server.properties"].clone();
    let advertised = config
        .lines()
        .find(|l| l.starts_with("advertised.listeners"))
        .unwrap()
        .replace('\\', "");
    assert!(
        advertised.contains(&format!(
            "REPLICATION-9091://nodes.beta.example:{node_port}"
        )),
        "{advertised}"
    );

    // A cluster without a host is refused.
    let kafkas: Api<Kafka> = stretch.api(ALPHA);
    kafkas
        .patch("my-cluster", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": {"kstretch.io/node-port-hosts": "alpha=nodes.alpha.example"}}})))
        .await
        .unwrap();
    let k = wait_kafka(&stretch, "InvalidAddressing", |k| {
        ready_reason(k).as_deref() == Some("InvalidAddressing")
    })
    .await;
    let message = ready_message(&k);
    assert!(message.contains("no host for cluster(s) beta"), "{message}");
    stretch.finish().await;
}

/// A removed node's claims go only with `deleteClaim: true`; deleting a whole pool removes its
/// podset, pods and node IDs, and keeps claims without `deleteClaim`.
#[tokio::test]
async fn claims_go_with_their_node_only_when_delete_claim_is_set() {
    let stretch = Stretch::start("kafka-claims", &[]).await;
    stretch.apply(kafka_without_its_own_brokers()).await;
    stretch
        .apply(pool(
            "dual",
            &["controller", "broker"],
            1,
            None,
            json!({"strimzi.io/next-node-ids": "[70]"}),
        ))
        .await;
    let mut disposable = pool(
        "disposable",
        &["broker"],
        2,
        Some(BETA),
        json!({"strimzi.io/next-node-ids": "[80-81]"}),
    );
    disposable["spec"]["storage"] = json!({"type": "jbod", "volumes": [
        {"id": 0, "type": "persistent-claim", "size": "1Gi", "deleteClaim": true},
        {"id": 1, "type": "persistent-claim", "size": "1Gi", "deleteClaim": false}]});
    stretch.apply(disposable).await;
    wait_kafka(&stretch, "ready", is_deployed).await;
    let claims: Api<PersistentVolumeClaim> = stretch.api(BETA);
    let claim_names = || async {
        claims
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|c| c.metadata.deletion_timestamp.is_none())
            .filter_map(|c| c.metadata.name)
            .collect::<BTreeSet<_>>()
    };
    assert_eq!(
        claim_names().await,
        set(&[
            "data-0-my-cluster-disposable-80",
            "data-0-my-cluster-disposable-81",
            "data-1-my-cluster-disposable-80",
            "data-1-my-cluster-disposable-81"
        ])
    );

    scale(&stretch, "disposable", 1).await;
    wait_for("node 81's deleteClaim volume to go", TIMEOUT, || async {
        let names = claim_names().await;
        if names
            == set(&[
                "data-0-my-cluster-disposable-80",
                "data-1-my-cluster-disposable-80",
                "data-1-my-cluster-disposable-81",
            ])
        {
            Seen::Done(())
        } else {
            Seen::NotYet(format!("{names:?}\n{}", stretch.logs()))
        }
    })
    .await;

    let pools: Api<KafkaNodePool> = stretch.api(ALPHA);
    pools
        .delete("disposable", &Default::default())
        .await
        .unwrap();
    wait_kafka(&stretch, "the pool's nodes gone from the Kafka", |k| {
        let ids = &k.status.as_ref().unwrap().registered_node_ids;
        is_deployed(k) && ids.contains(&70) && !ids.contains(&80)
    })
    .await;
    wait_for(
        "the pool's pods and deleteClaim claims to go",
        TIMEOUT,
        || async {
            let pods = pod_names(&stretch, BETA).await;
            let names = claim_names().await;
            if pods.is_empty()
                && names
                    == set(&[
                        "data-1-my-cluster-disposable-80",
                        "data-1-my-cluster-disposable-81",
                    ])
            {
                Seen::Done(())
            } else {
                Seen::NotYet(format!("pods {pods:?}, claims {names:?}"))
            }
        },
    )
    .await;
    stretch.finish().await;
}

/// `KafkaUser`s that cannot be served get `Ready=False` with a reason and a message naming
/// what to fix, and are looked at again once fixed: no `strimzi.io/cluster` label, an unknown
/// `Kafka`, a rule without operations, ACLs on a `Kafka` without authorization, a password
/// Secret that does not exist. A refused user whose Kafka does not exist is deleted at once.
#[tokio::test]
async fn kafka_users_that_cannot_be_served_are_refused_naming_what_to_fix() {
    let stretch = Stretch::start("kafka-users", &[]).await;
    stretch.apply(kafka(json!({}))).await;
    let user = |name: &str, cluster: Option<&str>, spec: Value| {
        let labels = cluster.map_or(json!({}), |c| json!({"strimzi.io/cluster": c}));
        json!({"apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaUser",
               "metadata": {"name": name, "labels": labels}, "spec": spec})
    };
    let read_acl = json!({"type": "simple", "acls": [
        {"resource": {"type": "topic", "name": "t"}, "operations": ["Read"]}]});
    let cases = [
        (
            user("unlabelled", None, json!({})),
            "MissingClusterLabel",
            "strimzi.io/cluster",
        ),
        (
            user("lost", Some("nope"), json!({})),
            "KafkaNotFound",
            "No Kafka named nope",
        ),
        (
            user(
                "no-ops",
                Some("my-cluster"),
                json!({"authorization": {"type": "simple", "acls": [
                    {"resource": {"type": "topic", "name": "t"}}]}}),
            ),
            "InvalidAcl",
            ".spec.authorization.acls[0] has no operations",
        ),
        (
            user(
                "unenforced",
                Some("my-cluster"),
                json!({"authorization": read_acl}),
            ),
            "AuthorizationNotEnabled",
            "has no .spec.kafka.authorization",
        ),
        (
            user(
                "no-password",
                Some("my-cluster"),
                json!({"authentication": {"type": "scram-sha-512", "password":
                    {"valueFrom": {"secretKeyRef": {"name": "absent", "key": "pw"}}}}}),
            ),
            "PasswordSecretMissing",
            "Secret absent key pw, which does not exist",
        ),
    ];
    let users: Api<kstretch_api::KafkaUser> = stretch.api(ALPHA);
    for (resource, reason, text) in cases {
        let name = resource["metadata"]["name"].as_str().unwrap().to_owned();
        stretch.apply(resource).await;
        wait_for(
            &format!("KafkaUser {name} refused with {reason}"),
            TIMEOUT,
            || async {
                let u = users.get(&name).await.unwrap();
                let ready = u
                    .status
                    .as_ref()
                    .and_then(|s| condition(&s.conditions, "Ready").cloned());
                match ready {
                    Some(c)
                        if c.status == "False"
                            && c.reason.as_deref() == Some(reason)
                            && c.message.as_deref().is_some_and(|m| m.contains(text)) =>
                    {
                        Seen::Done(())
                    }
                    other => Seen::NotYet(format!("{other:?}")),
                }
            },
        )
        .await;
    }
    // A user whose Kafka does not exist has nothing to revoke: deleting it lets it go.
    users.delete("lost", &Default::default()).await.unwrap();
    wait_for("KafkaUser lost deleted", TIMEOUT, || async {
        match users.get_opt("lost").await.unwrap() {
            None => Seen::Done(()),
            Some(u) => Seen::NotYet(format!("{:?}", u.metadata.finalizers)),
        }
    })
    .await;
    stretch.finish().await;
}

/// The fields of Strimzi 1.2.0's `packaging/examples` that kstretch does not act on, applied
/// in those examples' shapes (`tests/fixtures/strimzi/v1/not-acted-on.yaml`): each is named by
/// its path in a `NotActedOn` warning of its `Kafka` or `KafkaConnect`, and nothing the
/// examples ask for that kstretch serves (listeners, authentication, authorization, the entity
/// operator, storage) is named. Nothing is dropped without a word.
#[tokio::test]
async fn fields_of_strimzi_examples_kstretch_does_not_act_on_are_named() {
    use kstretch_api::KafkaConnect;
    use kstretch_tests::fixtures;

    let stretch = Stretch::start("not-acted-on", &[]).await;
    let manifests: Vec<_> = fixtures::load("v1")
        .into_iter()
        .filter(|m| m.file.ends_with("not-acted-on.yaml"))
        .collect();
    for m in &manifests {
        stretch.apply(m.doc.clone()).await;
    }
    let named = |conditions: Option<Vec<kstretch_api::Condition>>| -> BTreeSet<String> {
        conditions
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.type_ == "Warning" && c.reason.as_deref() == Some("NotActedOn"))
            .flat_map(|c| {
                c.message
                    .unwrap_or_default()
                    .split("; ")
                    .filter_map(|m| {
                        m.split_once(" is not acted on: ")
                            .map(|(p, _)| p.to_owned())
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let kafkas = [
        // Its JMX exporter is served, and the other's reporter; and their Kafka Exporter
        // (topicRegex, groupRegex).
        ("metrics", &[][..]),
        ("reporter", &[]),
        ("balanced", &[".spec.cruiseControl"]),
        (
            "oauth",
            &[
                ".spec.kafka.template.kafkaContainer",
                ".spec.kafka.template.pod.volumes",
            ],
        ),
    ];
    for (name, paths) in kafkas {
        let wanted: BTreeSet<String> = paths.iter().map(|p| p.to_string()).collect();
        stretch
            .wait_in_alpha(
                name,
                "its fields not acted on named",
                TIMEOUT,
                |k: &Kafka| {
                    // Reconciled (a Kafka of served fields only has nothing to wait for).
                    k.status
                        .as_ref()
                        .is_some_and(|s| s.observed_generation.is_some())
                        && named(k.status.as_ref().map(|s| s.conditions.clone())) == wanted
                },
            )
            .await;
    }
    // The built workers are refused: kstretch builds no image, and workers without the
    // plugins would fail their connectors.
    stretch
        .wait_in_alpha("built", "its build refused", TIMEOUT, |c: &KafkaConnect| {
            c.status.as_ref().is_some_and(|s| {
                s.conditions.iter().any(|c| {
                    c.type_ == "Ready"
                        && c.status == "False"
                        && c.reason.as_deref() == Some("BuildNotSupported")
                        && c.message.as_deref().is_some_and(|m| {
                            m.contains("kafka-connect-file") && m.contains(".spec.image")
                        })
                })
            })
        })
        .await;
    // The measured workers' JMX exporter is served: nothing named.
    stretch
        .wait_in_alpha(
            "measured",
            "its fields not acted on named",
            TIMEOUT,
            |c: &KafkaConnect| {
                c.status
                    .as_ref()
                    .is_some_and(|s| s.observed_generation.is_some())
                    && named(c.status.as_ref().map(|s| s.conditions.clone())).is_empty()
            },
        )
        .await;
    stretch.finish().await;
}
