//! kstretch installed from its Helm charts, end to end: the charts are rendered for a fresh
//! namespace and applied to alpha (central and an agent) and beta (an agent); the real binaries
//! run on the ServiceAccount tokens the charts create, with the certificates the central chart
//! generated. The main reconcile flows pass with exactly that RBAC, and requests outside it are
//! forbidden (HTTP 403).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Debug;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kstretch_api::{Kafka, KafkaTopic, StrimziPodSet};
use kstretch_tests::TestEnv;
use kstretch_tests::charts::{AGENT_SA, CENTRAL_SA, ChartInstall, LEASE};
use kstretch_tests::ready::kafka_deployed;
use kstretch_tests::stretch::{ALPHA, BETA};
use kstretch_tests::wait::{Seen, wait_for, wait_for_deletion};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(90);

fn ready(conditions: &[kstretch_api::Condition]) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// The user a client's token authenticates as.
async fn whoami(client: &Client) -> String {
    Api::<SelfSubjectReview>::all(client.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .expect("SelfSubjectReview")
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .unwrap_or_default()
}

/// `result` must be the apiserver's 403 Forbidden.
fn assert_forbidden<T: Debug>(what: &str, result: Result<T, kube::Error>) {
    match result {
        Err(kube::Error::Api(status)) if status.code == 403 => {}
        other => panic!("{what}: expected 403 Forbidden, got {other:?}"),
    }
}

async fn wait_podset_ready(install: &ChartInstall, alias: &str, name: &str, pods: i32) {
    let api: Api<StrimziPodSet> = install.api(alias);
    wait_for(
        &format!("podset {name} in {alias} with {pods} ready pods"),
        TIMEOUT,
        || async {
            match api.get_opt(name).await {
                Ok(Some(ps)) if ps.status.as_ref().and_then(|s| s.ready_pods) == Some(pods) => {
                    Seen::Done(())
                }
                other => Seen::NotYet(format!("{other:#?}\n{}", install.logs())),
            }
        },
    )
    .await;
}

/// Central and the agents on the charts' tokens: a stretched Kafka (controllers in alpha,
/// brokers in beta) becomes Ready with its podsets and pods, a KafkaTopic is created in the real
/// Kafka and deleted again through its finalizer, and nothing is denied on the way. Outside
/// their grants, the same tokens get 403.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chart_rbac_runs_the_main_flows_and_forbids_everything_else() {
    let install = ChartInstall::start("charts-rbac").await;
    let ns = install.ns.clone();

    // The processes' credentials are the charts' ServiceAccounts, nothing more.
    assert_eq!(
        whoami(&install.central_client).await,
        format!("system:serviceaccount:{ns}:{CENTRAL_SA}")
    );
    for client in install.agent_clients.values() {
        assert_eq!(
            whoami(client).await,
            format!("system:serviceaccount:{ns}:{AGENT_SA}")
        );
    }

    // A stretched Kafka, applied by the user (admin).
    install
        .apply(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "Kafka",
            "metadata": {"name": "my-cluster"},
            "spec": {"kafka": {
                "listeners": [{"name": "plain", "port": 9092, "type": "internal", "tls": false}],
                "config": {"offsets.topic.replication.factor": 3}}}
        }))
        .await;
    for (pool, roles, alias) in [
        ("controllers", json!(["controller"]), None),
        ("brokers", json!(["broker"]), Some(BETA)),
    ] {
        let annotations = match alias {
            Some(a) => json!({"strimzi.io/stretch-cluster-alias": a}),
            None => json!({}),
        };
        install
            .apply(json!({
                "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaNodePool",
                "metadata": {"name": pool, "labels": {"strimzi.io/cluster": "my-cluster"},
                             "annotations": annotations},
                "spec": {"replicas": 3, "roles": roles,
                         "storage": {"type": "jbod", "volumes": [
                             {"id": 0, "type": "persistent-claim", "size": "1Gi",
                              "deleteClaim": false, "kraftMetadata": "shared"}]}}
            }))
            .await;
    }
    let kafkas: Api<Kafka> = install.api(ALPHA);
    let kafka = wait_for("the Kafka to be deployed", TIMEOUT, || async {
        match kafkas.get_opt("my-cluster").await {
            Ok(Some(k)) if kafka_deployed(&k) => Seen::Done(k),
            other => Seen::NotYet(format!("{other:#?}\n{}", install.logs())),
        }
    })
    .await;
    let status = kafka.status.unwrap();
    assert_eq!(status.observed_generation, kafka.metadata.generation);
    assert_eq!(status.cluster_id.as_deref().map(str::len), Some(22));
    wait_podset_ready(&install, BETA, "my-cluster-brokers", 3).await;
    wait_podset_ready(&install, ALPHA, "my-cluster-controllers", 3).await;
    let beta_pods: Api<Pod> = install.api(BETA);
    let names: Vec<String> = beta_pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    for broker in 0..3 {
        assert!(
            names.contains(&format!("my-cluster-brokers-{broker}")),
            "{names:?}"
        );
    }
    let beta_configs: Api<ConfigMap> = install.api(BETA);
    beta_configs
        .get("my-cluster-brokers-1")
        .await
        .expect("the agent applied the per-node ConfigMap");

    // The topic operator on the chart's RBAC: finalizer added, topic created in the real Kafka,
    // status written; deletion goes through the finalizer.
    let env = TestEnv::get();
    install
        .apply(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "Kafka",
            "metadata": {"name": "events", "annotations": {
                "kstretch.io/admin-bootstrap-servers": env.kafka_bootstrap,
                "kstretch.io/admin-security-protocol": "PLAINTEXT"}},
            "spec": {"kafka": {"listeners": [
                {"name": "plain", "port": 9092, "type": "internal", "tls": false}]}}
        }))
        .await;
    let topic_name = format!("{ns}-orders");
    install
        .apply(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaTopic",
            "metadata": {"name": "orders", "labels": {"strimzi.io/cluster": "events"}},
            "spec": {"topicName": topic_name, "partitions": 1, "replicas": 1}
        }))
        .await;
    let topics: Api<KafkaTopic> = install.api(ALPHA);
    let kt = wait_for("the KafkaTopic to be Ready", TIMEOUT, || async {
        match topics.get_opt("orders").await {
            Ok(Some(kt)) if kt.status.as_ref().is_some_and(|s| ready(&s.conditions)) => {
                Seen::Done(kt)
            }
            other => Seen::NotYet(format!("{other:#?}\n{}", install.logs())),
        }
    })
    .await;
    assert!(
        kt.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"strimzi.io/topic-operator".to_owned())
    );
    assert_eq!(
        kstretch_tests::topics::replicas(&env.kafka_bootstrap, &topic_name).map(|p| p.len()),
        Some(1),
        "the topic exists in Kafka"
    );
    topics
        .delete("orders", &DeleteParams::default())
        .await
        .unwrap();
    wait_for_deletion(&topics, "orders", TIMEOUT).await;
    wait_for("the topic to be deleted from Kafka", TIMEOUT, || async {
        match kstretch_tests::topics::replicas(&env.kafka_bootstrap, &topic_name) {
            None => Seen::Done(()),
            Some(p) => Seen::NotYet(format!("still there: {p:?}")),
        }
    })
    .await;

    if install.leader_election {
        let lease: Api<Lease> = install.api(ALPHA);
        let lease = lease.get(LEASE).await.expect("central's Lease");
        assert!(
            lease
                .spec
                .and_then(|s| s.holder_identity)
                .is_some_and(|h| !h.is_empty()),
            "central holds the Lease"
        );
    }

    // Nothing on the way was refused by RBAC.
    let logs = install.all_logs();
    assert!(
        !logs.contains("forbidden") && !logs.contains("Forbidden"),
        "an RBAC denial in the logs:\n{logs}"
    );

    // Outside the grants: 403. The agent's token reads no Strimzi user resource, and nothing
    // outside its namespace.
    let agent = install.agent_clients[BETA].clone();
    assert_forbidden(
        "agent: list Secrets in kube-system",
        Api::<Secret>::namespaced(agent.clone(), "kube-system")
            .list(&ListParams::default())
            .await,
    );
    assert_forbidden(
        "agent: list pods in every namespace",
        Api::<Pod>::all(agent.clone())
            .list(&ListParams::default())
            .await,
    );
    assert_forbidden(
        "agent: list Kafkas in its own namespace",
        Api::<Kafka>::namespaced(install.agent_clients[ALPHA].clone(), &ns)
            .list(&ListParams::default())
            .await,
    );
    let configmap: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "not-allowed"}})).unwrap();
    assert_forbidden(
        "agent: create a ConfigMap in default",
        Api::<ConfigMap>::namespaced(agent.clone(), "default")
            .create(&PostParams::default(), &configmap)
            .await,
    );
    // Central's token: no Secrets, no pods, nothing outside its namespace.
    let central = install.central_client.clone();
    assert_forbidden(
        "central: get a Secret in kube-system",
        Api::<Secret>::namespaced(central.clone(), "kube-system")
            .get("anything")
            .await,
    );
    assert_forbidden(
        "central: list Secrets in its own namespace",
        Api::<Secret>::namespaced(central.clone(), &ns)
            .list(&ListParams::default())
            .await,
    );
    assert_forbidden(
        "central: list pods in its own namespace",
        Api::<Pod>::namespaced(central.clone(), &ns)
            .list(&ListParams::default())
            .await,
    );
    assert_forbidden(
        "central: list Kafkas in every namespace",
        Api::<Kafka>::all(central.clone())
            .list(&ListParams::default())
            .await,
    );
    assert_forbidden(
        "central: delete a ConfigMap",
        Api::<ConfigMap>::namespaced(central.clone(), &ns)
            .delete("my-cluster-controllers-3", &DeleteParams::default())
            .await,
    );
    // ... while what it is granted works with the same token.
    Api::<Kafka>::namespaced(central, &ns)
        .list(&ListParams::default())
        .await
        .expect("central lists Kafkas in its namespace");

    install.finish().await;
}
