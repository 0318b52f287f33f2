//! Absent is not deleted: a central that does not see a `Kafka` (another namespace scope, the
//! CRDs reinstalled) makes no agent delete anything, and adopts what runs when it sees the
//! `Kafka` again; a real deletion reaches every member cluster on central's explicit word, also
//! across a central restart and for an agent that was away; `kstretch remove-unclaimed` removes
//! the objects of the one owner it names. Real central, agents and apiservers; results read
//! with plain kube reads.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kstretch_api::{Kafka, KafkaNodePool, StrimziPodSet};
use kstretch_tests::ready::kafka_deployed as is_deployed;
use kstretch_tests::stretch::{ALPHA, BETA, Stretch};
use kstretch_tests::wait::{Seen, wait_for};
use kube::api::{DeleteParams, ListParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(120);

/// The CRDs are shared by every test of this binary: the test that deletes them runs alone.
static CRDS: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

fn kafka(name: &str) -> Value {
    json!({
        "apiVersion": "kafka.strimzi.io/v1", "kind": "Kafka",
        "metadata": {"name": name},
        "spec": {"kafka": {
            "listeners": [{"name": "plain", "port": 9092, "type": "internal", "tls": false}],
            "config": {"offsets.topic.replication.factor": 1}
        }}
    })
}

fn pool(
    kafka: &str,
    name: &str,
    roles: &[&str],
    replicas: i32,
    alias: &str,
    ids: Option<&str>,
) -> Value {
    let mut annotations = json!({});
    if alias != ALPHA {
        annotations["strimzi.io/stretch-cluster-alias"] = json!(alias);
    }
    if let Some(ids) = ids {
        annotations["strimzi.io/next-node-ids"] = json!(ids);
    }
    json!({
        "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaNodePool",
        "metadata": {"name": name, "labels": {"strimzi.io/cluster": kafka},
                     "annotations": annotations},
        "spec": {"replicas": replicas, "roles": roles,
                 "storage": {"type": "jbod", "volumes": [
                     {"id": 0, "type": "persistent-claim", "size": "1Gi", "deleteClaim": false,
                      "kraftMetadata": "shared"}]}}
    })
}

/// A stretched Kafka `name`: a controller in alpha, two brokers in beta (pools named after it,
/// as pool names are unique in a namespace).
async fn stretched(stretch: &Stretch, name: &str) {
    stretch.apply(kafka(name)).await;
    stretch
        .apply(pool(
            name,
            &format!("{name}-controllers"),
            &["controller"],
            1,
            ALPHA,
            None,
        ))
        .await;
    stretch
        .apply(pool(
            name,
            &format!("{name}-brokers"),
            &["broker"],
            2,
            BETA,
            None,
        ))
        .await;
    wait_ready(stretch, name).await;
}

async fn wait_ready(stretch: &Stretch, name: &str) -> Kafka {
    stretch
        .wait_in_alpha(name, &format!("Kafka {name} ready"), TIMEOUT, is_deployed)
        .await
}

/// Every pod, podset, ConfigMap, Service and claim of Kafka `name` in cluster `alias`, by
/// kind and name, with its UID.
async fn objects_of(stretch: &Stretch, alias: &str, name: &str) -> BTreeMap<String, String> {
    let selector = ListParams::default().labels(&format!("strimzi.io/cluster={name}"));
    let mut out = BTreeMap::new();
    macro_rules! collect {
        ($kind:ty, $label:expr) => {
            let api: Api<$kind> = stretch.api(alias);
            for o in api.list(&selector).await.unwrap().items {
                if o.meta().deletion_timestamp.is_none() {
                    out.insert(format!("{}/{}", $label, o.name_any()), o.uid().unwrap());
                }
            }
        };
    }
    collect!(Pod, "Pod");
    collect!(StrimziPodSet, "StrimziPodSet");
    collect!(ConfigMap, "ConfigMap");
    collect!(Service, "Service");
    collect!(PersistentVolumeClaim, "PersistentVolumeClaim");
    out
}

/// Both clusters' objects of Kafka `name`.
async fn both(stretch: &Stretch, name: &str) -> BTreeMap<String, String> {
    let mut all = BTreeMap::new();
    for alias in [ALPHA, BETA] {
        for (k, v) in objects_of(stretch, alias, name).await {
            all.insert(format!("{alias}:{k}"), v);
        }
    }
    all
}

fn count(objects: &BTreeMap<String, String>, kind: &str) -> usize {
    objects
        .keys()
        .filter(|k| k.contains(&format!(":{kind}/")))
        .count()
}

/// Central restarted with a namespace scope that excludes the Kafka: a minute later every
/// object is still there with the same UID in both clusters, `kstretch agents` lists them as
/// kept for an owner central does not know; restarted with the right scope, central adopts
/// them and no pod is restarted.
#[tokio::test]
async fn a_central_that_does_not_see_a_kafka_deletes_nothing_and_adopts_it_again() {
    let _shared = CRDS.read().await;
    let mut stretch = Stretch::start("absent-scope", &[]).await;
    stretch_and_check_scope(&mut stretch).await;
    stretch.finish().await;
}

async fn stretch_and_check_scope(stretch: &mut Stretch) {
    stretched(stretch, "my-cluster").await;
    let before = both(stretch, "my-cluster").await;
    assert_eq!(count(&before, "Pod"), 3, "{before:#?}");
    assert!(count(&before, "ConfigMap") >= 3 && count(&before, "Service") >= 2);

    stretch.stop_central();
    stretch.start_central_watching(&format!("{}-elsewhere", stretch.ns));
    // The agents reconnect and get snapshots that do not list the Kafka.
    wait_for(
        "both agents to apply a snapshot of the narrowed central",
        TIMEOUT,
        || async {
            let (ok, text) = stretch.cli(&["agents"]);
            let kept = text.matches(&format!("{}/my-cluster", stretch.ns)).count();
            if ok && kept == 2 {
                Seen::Done(())
            } else {
                Seen::NotYet(format!("{text}\n{}", stretch.logs()))
            }
        },
    )
    .await;
    // A deletion would follow the snapshot's apply at once; this covers several of the
    // agents' status rounds (2 s) and Kubernetes' garbage collection of dependents.
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(
        both(stretch, "my-cluster").await,
        before,
        "nothing was deleted or replaced"
    );
    let (_, text) = stretch.cli(&["agents"]);
    for alias in [ALPHA, BETA] {
        assert!(
            text.lines().any(|l| l.starts_with(alias)
                && l.contains("Kafka")
                && l.contains(&format!("{}/my-cluster", stretch.ns))),
            "{alias} reports the Kafka's objects as kept:\n{text}"
        );
    }

    stretch.stop_central();
    stretch.start_central();
    wait_ready(stretch, "my-cluster").await;
    wait_for(
        "the agents to report nothing unclaimed",
        TIMEOUT,
        || async {
            let (_, text) = stretch.cli(&["agents"]);
            if text.contains("kept for an owner") {
                Seen::NotYet(text)
            } else {
                Seen::Done(())
            }
        },
    )
    .await;
    assert_eq!(
        both(stretch, "my-cluster").await,
        before,
        "adopted: the same pods and objects"
    );
}

/// Deleting the `Kafka` removes its objects in every member cluster, also when central
/// restarts in between and when an agent was away at the time: the `Kafka` waits, being
/// deleted, until every agent confirmed. Claims without `deleteClaim` stay.
#[tokio::test]
async fn a_deletion_reaches_every_cluster_across_a_central_restart_and_a_late_agent() {
    let _shared = CRDS.read().await;
    let mut stretch = Stretch::start("absent-delete", &[]).await;
    stretched(&stretch, "my-cluster").await;
    stretch.stop_agent(BETA);
    let kafkas: Api<Kafka> = stretch.api(ALPHA);
    kafkas
        .delete("my-cluster", &DeleteParams::default())
        .await
        .unwrap();
    only_claims_left(&stretch, ALPHA, "my-cluster").await;
    let pending = stretch
        .wait_in_alpha(
            "my-cluster",
            "DeletionPending naming beta",
            TIMEOUT,
            |k: &Kafka| {
                k.status.as_ref().is_some_and(|s| {
                    s.conditions.iter().any(|c| {
                        c.reason.as_deref() == Some("DeletionPending")
                            && c.message.as_deref().is_some_and(|m| m.contains("beta"))
                    })
                })
            },
        )
        .await;
    assert!(pending.metadata.deletion_timestamp.is_some());

    stretch.stop_central();
    stretch.start_central();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let beta = objects_of(&stretch, BETA, "my-cluster").await;
    assert_eq!(
        count_prefixed(&beta, "Pod/"),
        2,
        "beta's pods wait for its agent: {beta:#?}"
    );
    assert!(
        kafkas.get_opt("my-cluster").await.unwrap().is_some(),
        "still being deleted"
    );

    stretch.start_agent(BETA);
    only_claims_left(&stretch, BETA, "my-cluster").await;
    wait_for("the Kafka to go", TIMEOUT, || async {
        match kafkas.get_opt("my-cluster").await.unwrap() {
            None => Seen::Done(()),
            Some(k) => Seen::NotYet(format!("{:#?}\n{}", k.status, stretch.logs())),
        }
    })
    .await;
    let claims = objects_of(&stretch, BETA, "my-cluster").await;
    assert_eq!(
        count_prefixed(&claims, "PersistentVolumeClaim/"),
        2,
        "claims stay"
    );
    stretch.finish().await;
}

/// Waits until only claims (kept without deleteClaim) are left of Kafka `name` in `alias`.
async fn only_claims_left(stretch: &Stretch, alias: &str, name: &str) {
    wait_for(
        &format!("{name}'s objects in {alias} to go"),
        TIMEOUT,
        || async {
            let left = objects_of(stretch, alias, name).await;
            if left.keys().all(|k| k.starts_with("PersistentVolumeClaim/")) {
                Seen::Done(())
            } else {
                Seen::NotYet(format!("{left:#?}\n{}", stretch.logs()))
            }
        },
    )
    .await;
}

fn count_prefixed(objects: &BTreeMap<String, String>, prefix: &str) -> usize {
    objects.keys().filter(|k| k.starts_with(prefix)).count()
}

/// `kstretch remove-unclaimed` refuses an owner the agent does not report, lists without
/// `--yes`, and with it removes the named owner's objects in the named cluster only (claims
/// kept); the other owner, and the same owner in the other cluster, keep everything.
#[tokio::test]
async fn the_removal_command_removes_only_the_named_owners_unclaimed_objects() {
    let _shared = CRDS.read().await;
    let mut stretch = Stretch::start("absent-remove", &[]).await;
    for name in ["one", "two"] {
        stretched(&stretch, name).await;
    }
    let two_before = both(&stretch, "two").await;
    let one_before = both(&stretch, "one").await;
    stretch.stop_central();
    stretch.start_central_watching(&format!("{}-elsewhere", stretch.ns));
    wait_for("beta to report both owners unclaimed", TIMEOUT, || async {
        let (_, text) = stretch.cli(&["agents"]);
        let beta = text
            .lines()
            .filter(|l| l.starts_with(BETA) && l.contains("Kafka "))
            .count();
        if beta == 2 {
            Seen::Done(())
        } else {
            Seen::NotYet(format!("{text}\n{}", stretch.logs()))
        }
    })
    .await;

    let beta_kubeconfig = stretch.kubeconfig(BETA);
    let kubeconfig = beta_kubeconfig.to_str().unwrap();
    let ns = stretch.ns.clone();
    let (ok, text) = stretch.cli(&[
        "remove-unclaimed",
        "--cluster",
        BETA,
        "-n",
        &ns,
        "--kubeconfig",
        kubeconfig,
        "three",
    ]);
    assert!(
        !ok && text.contains("reports no unclaimed objects of Kafka"),
        "{text}"
    );

    let (ok, text) = stretch.cli(&[
        "remove-unclaimed",
        "--cluster",
        BETA,
        "-n",
        &ns,
        "--kubeconfig",
        kubeconfig,
        "one",
    ]);
    assert!(
        ok && text.contains("would delete StrimziPodSet/one-one-brokers"),
        "{text}"
    );
    assert_eq!(
        both(&stretch, "one").await,
        one_before,
        "nothing without --yes"
    );

    let (ok, text) = stretch.cli(&[
        "remove-unclaimed",
        "--cluster",
        BETA,
        "-n",
        &ns,
        "--kubeconfig",
        kubeconfig,
        "one",
        "--yes",
    ]);
    assert!(
        ok && text.contains("deleted StrimziPodSet/one-one-brokers"),
        "{text}"
    );
    only_claims_left(&stretch, BETA, "one").await;
    let one_after = both(&stretch, "one").await;
    assert_eq!(count_prefixed(&one_after, "beta:PersistentVolumeClaim/"), 2);
    let alpha_of = |m: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        m.iter()
            .filter(|(k, _)| k.starts_with("alpha:"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    assert_eq!(
        alpha_of(&one_after),
        alpha_of(&one_before),
        "alpha keeps one's objects"
    );
    assert_eq!(
        both(&stretch, "two").await,
        two_before,
        "two keeps everything"
    );
    stretch.finish().await;
}

/// The `kafka.strimzi.io` CRDs deleted and reinstalled in central's cluster while the Kafka
/// runs, the `Kafka` and pools re-applied from manifests that no longer carry the node-ID
/// annotations: the same cluster ID and node IDs, no pod restarted, nothing deleted.
#[tokio::test]
async fn the_crds_reinstalled_in_the_central_cluster_restart_nothing() {
    let _alone = CRDS.write().await;
    let stretch = Stretch::start("absent-crds", &[]).await;
    stretch.apply(kafka("my-cluster")).await;
    let controllers = pool(
        "my-cluster",
        "controllers",
        &["controller"],
        1,
        ALPHA,
        Some("[20]"),
    );
    let brokers = pool(
        "my-cluster",
        "brokers",
        &["broker"],
        2,
        BETA,
        Some("[10-11]"),
    );
    stretch.apply(controllers.clone()).await;
    stretch.apply(brokers.clone()).await;
    let ready = wait_ready(&stretch, "my-cluster").await;
    let cluster_id = ready.status.unwrap().cluster_id.unwrap();
    let before = both(&stretch, "my-cluster").await;
    assert!(
        before.contains_key("beta:Pod/my-cluster-brokers-10"),
        "{before:#?}"
    );

    let alpha = stretch.clusters[ALPHA].client.clone();
    let crds: Api<CustomResourceDefinition> = Api::all(alpha.clone());
    let ours: Vec<String> = crds
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .filter(|n| n.ends_with(".kafka.strimzi.io"))
        .collect();
    // Resources left by other tests whose central is gone would hold the CRDs forever; this
    // test runs alone, so no central of another test is running.
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(alpha.clone());
    for ns in namespaces.list(&ListParams::default()).await.unwrap().items {
        let name = ns.name_any();
        if name != stretch.ns {
            kstretch_tests::cluster::release_all_finalizers(&alpha, &name).await;
        }
    }
    for name in &ours {
        crds.delete(name, &DeleteParams::default()).await.unwrap();
    }
    wait_for("the kafka.strimzi.io CRDs to be gone", TIMEOUT, || async {
        let mut left = Vec::new();
        for name in &ours {
            if crds.get_opt(name).await.unwrap().is_some() {
                left.push(name.clone());
            }
        }
        if left.is_empty() {
            Seen::Done(())
        } else {
            Seen::NotYet(format!("{left:?}\n{}", stretch.logs()))
        }
    })
    .await;
    kstretch_tests::crds::install(&stretch.clusters[ALPHA]).await;
    let strip = |mut p: Value| {
        p["metadata"]["annotations"]
            .as_object_mut()
            .unwrap()
            .remove("strimzi.io/next-node-ids");
        p
    };
    stretch.apply(kafka("my-cluster")).await;
    stretch.apply(strip(controllers)).await;
    stretch.apply(strip(brokers)).await;

    let ready = wait_ready(&stretch, "my-cluster").await;
    assert_eq!(
        ready.status.unwrap().cluster_id.as_deref(),
        Some(cluster_id.as_str())
    );
    for (name, ids) in [("controllers", vec![20]), ("brokers", vec![10, 11])] {
        let p = stretch
            .wait_in_alpha(name, "the pool's node IDs", TIMEOUT, |p: &KafkaNodePool| {
                p.status.as_ref().is_some_and(|s| !s.node_ids.is_empty())
            })
            .await;
        assert_eq!(p.status.unwrap().node_ids, ids, "pool {name}");
    }
    // Long enough for a roll or a prune to have started.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        both(&stretch, "my-cluster").await,
        before,
        "the same pods and objects"
    );
    stretch.finish().await;
}

/// An agent of the previous version (no `explicit-deletion` capability; it deletes by absence)
/// confirms a deletion by applying the snapshot that declares it: the `Kafka` is released once
/// that agent reported the declaring snapshot applied, and that snapshot names the deleted
/// owner with its UID. Played by a raw link client with beta's certificate.
#[tokio::test]
async fn an_agent_of_the_previous_version_confirms_by_applying_the_declaring_snapshot() {
    let _shared = CRDS.read().await;
    let mut stretch = Stretch::start("absent-compat", &[]).await;
    stretched(&stretch, "my-cluster").await;
    let kafkas: Api<Kafka> = stretch.api(ALPHA);
    let uid = kafkas.get("my-cluster").await.unwrap().uid().unwrap();
    stretch.stop_agent(BETA);
    let old_agent = kstretch_tests::rawlink::SimulatedMember::connect(
        &stretch.link_url(),
        &stretch.agent_cert(BETA),
        BETA,
        std::slice::from_ref(&stretch.ns),
        true,
    )
    .await
    .expect("the old agent connects");
    kafkas
        .delete("my-cluster", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the Kafka to be released", TIMEOUT, || async {
        match kafkas.get_opt("my-cluster").await.unwrap() {
            None => Seen::Done(()),
            Some(k) => Seen::NotYet(format!("{:#?}\n{}", k.status, stretch.logs())),
        }
    })
    .await;
    let seen = old_agent.log.lock().unwrap().declared_deleted.clone();
    assert!(
        seen.iter()
            .any(|d| d == &format!("Kafka {}/my-cluster {uid}", stretch.ns)),
        "the old agent was sent the declared deletion: {seen:?}"
    );
    drop(old_agent);
    stretch.finish().await;
}
