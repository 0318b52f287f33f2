//! The reconciliation's ends that need neither Kafka nor agents, against
//! [`crate::testing::Apiserver`]: what it writes there, the [`Action`] it ends with, and what it
//! leaves for the agents.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use kstretch_api::{Kafka, KafkaNodePool, names};
use kstretch_runtime::backoff::Backoff;
use kube::Resource;
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use super::apply;
use super::pass::REFUSED_RECHECK;
use crate::kafka::context::{Context, owner_of};
use crate::kafka::resolve::tests::{kafka, members, pool};
use crate::link::{Agents, DesiredStates, OwnerKind, Owners, Part};
use crate::testing::{self, Apiserver, Write, nothing_published, ready_at, requests};

/// The apiserver, the reconciler's context over it, and the member clusters' desired states.
struct World {
    apiserver: Apiserver,
    desired: DesiredStates,
    ctx: Arc<Context>,
}

/// An apiserver holding `kafka` and `pools`, and a context whose pool store lists `pools`
/// and whose desired states are published (every owner kind released).
fn world(kafka: &Kafka, pools: &[KafkaNodePool]) -> World {
    let apiserver = Apiserver::default();
    apiserver.hold(kafka);
    for p in pools {
        apiserver.hold(p);
    }
    let store = testing::store_of(pools);
    let desired = DesiredStates::new();
    let owners = Owners::new(desired.clone(), members().all, [OwnerKind::Kafka]);
    owners.release(OwnerKind::Kafka).unwrap();
    let ctx = Context {
        client: apiserver.client(),
        events: kstretch_runtime::events::Events::new(apiserver.client(), "kstretch-central"),
        pools: store,
        owners,
        agents: Agents::new(),
        restarts: Default::default(),
        members: members(),
        kafka: Default::default(),
        metrics: Default::default(),
        registration_checks: Default::default(),
        retries: Arc::new(Backoff::new(crate::owned::RETRY_CAP)),
    };
    World {
        apiserver,
        desired,
        ctx: Arc::new(ctx),
    }
}

impl World {
    /// One reconciliation of `kafka`, which must end within two seconds.
    async fn reconcile(&self, kafka: &Kafka) -> Action {
        let pass = apply(Arc::new(kafka.clone()), self.ctx.clone());
        tokio::time::timeout(Duration::from_secs(2), pass)
            .await
            .expect("the reconciliation ended")
            .unwrap()
    }

    /// The writes, once what is sent in the background (Events) had time to arrive.
    async fn writes_settled(&self) -> Vec<Write> {
        tokio::time::sleep(Duration::from_millis(200)).await;
        self.apiserver.writes()
    }

    /// The writes, once an Event arrived and anything else had time to.
    async fn writes_after_event(&self) -> Vec<Write> {
        self.apiserver
            .writes_once("an Event posted", |w| !events(w).is_empty())
            .await;
        self.writes_settled().await
    }
}

/// `my-cluster` (see [`kafka`]) as central claimed it, with `extra` merged in.
fn claimed(extra: Value) -> Kafka {
    let mut k = kafka(extra);
    k.metadata.uid = Some("kafka-uid".into());
    k.metadata.finalizers = Some(vec![names::MEMBER_OBJECTS_FINALIZER.to_owned()]);
    k
}

fn status_path<K: Resource<DynamicType = ()>>(name: &str) -> String {
    testing::status_path::<K>("kafka", name)
}

const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/kafka/events";
const SECRETS: &str = "/api/v1/namespaces/kafka/secrets";

fn sorted(mut requests: Vec<(String, String)>) -> Vec<(String, String)> {
    requests.sort();
    requests
}

fn patch(path: String) -> (String, String) {
    ("PATCH".to_owned(), path)
}

fn post(path: &str) -> (String, String) {
    ("POST".to_owned(), path.to_owned())
}

fn events(writes: &[Write]) -> Vec<&Value> {
    testing::posted_to(writes, EVENTS)
}

fn dual_pool(status: Value) -> KafkaNodePool {
    pool(
        "dual",
        &["controller", "broker"],
        1,
        json!({"status": status}),
    )
}

#[tokio::test]
async fn a_paused_kafka_only_says_so_in_its_status_and_waits_for_a_change() {
    let paused =
        claimed(json!({"metadata": {"annotations": {(names::PAUSE_RECONCILIATION): "true"}}}));
    let world = world(&paused, &[dual_pool(json!(null))]);

    let action = world.reconcile(&paused).await;

    assert_eq!(action, Action::await_change());
    let writes = world.writes_settled().await;
    let kafka_status = status_path::<Kafka>("my-cluster");
    assert_eq!(
        requests(&writes),
        [patch(kafka_status.clone())],
        "nothing but the Kafka's status is written"
    );
    let ready = ready_at(&writes, &kafka_status);
    assert_eq!(ready["status"], "Unknown");
    assert_eq!(ready["reason"], "ReconciliationPaused");
    assert!(
        ready["message"]
            .as_str()
            .unwrap()
            .contains(names::PAUSE_RECONCILIATION)
    );
    assert_eq!(
        world.ctx.owners.get(&owner_of(&paused)),
        Some(Part::Retain),
        "what runs is kept as it is"
    );
    assert!(nothing_published(&world.desired));
}

#[tokio::test]
async fn a_pass_over_a_cached_copy_behind_the_apiserver_keeps_the_stored_status() {
    // The apiserver holds the status written a moment ago (a rebuilt quorum's one voter); the
    // watch has not brought it yet.
    let stored = claimed(json!({
        "metadata": {"annotations": {(names::PAUSE_RECONCILIATION): "true"}},
        "status": {"clusterId": "kept-id", "quorum": {"voters": [{"id": 0}]}}
    }));
    let world = world(&stored, &[dual_pool(json!(null))]);
    let mut cached = stored.clone();
    cached.status = None;

    world.reconcile(&cached).await;

    let writes = world.writes_settled().await;
    let patch = writes
        .iter()
        .find(|w| w.path == status_path::<Kafka>("my-cluster"))
        .unwrap();
    assert_eq!(patch.body["status"]["clusterId"], "kept-id");
    assert_eq!(patch.body["status"]["quorum"]["voters"], json!([{"id": 0}]));
}

/// `my-cluster` with a pool of controllers and one of brokers whose replicas are negative.
fn invalid() -> (Kafka, Vec<KafkaNodePool>) {
    let pools = vec![
        pool("brokers", &["broker"], -1, json!({})),
        pool("controllers", &["controller"], 1, json!({})),
    ];
    (claimed(json!({})), pools)
}

#[tokio::test]
async fn an_invalid_pool_refuses_the_kafka_and_every_pool_with_one_warning_event() {
    let (kafka, pools) = invalid();
    let world = world(&kafka, &pools);

    let action = world.reconcile(&kafka).await;

    assert_eq!(action, Action::requeue(REFUSED_RECHECK));
    let writes = world.writes_after_event().await;
    let kafka_status = status_path::<Kafka>("my-cluster");
    assert_eq!(
        requests(&writes),
        sorted(vec![
            patch(kafka_status.clone()),
            patch(status_path::<KafkaNodePool>("brokers")),
            patch(status_path::<KafkaNodePool>("controllers")),
            post(EVENTS),
        ]),
        "the statuses and one Event, nothing else (no CA was made)"
    );
    let ready = ready_at(&writes, &kafka_status);
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["reason"], "InvalidReplicas");
    let message = ready["message"].as_str().unwrap();
    assert!(
        message.contains("KafkaNodePool brokers has a negative .spec.replicas (-1)"),
        "{message}"
    );
    for name in ["brokers", "controllers"] {
        let pool_ready = ready_at(&writes, &status_path::<KafkaNodePool>(name));
        assert_eq!(
            (
                &pool_ready["status"],
                &pool_ready["reason"],
                &pool_ready["message"]
            ),
            (&ready["status"], &ready["reason"], &ready["message"]),
            "pool {name}"
        );
    }
    let event = events(&writes)[0];
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["reason"], "InvalidReplicas");
    assert_eq!(event["note"], message);
    assert_eq!(
        (&event["regarding"]["kind"], &event["regarding"]["name"]),
        (&json!("Kafka"), &json!("my-cluster"))
    );
    assert_eq!(world.ctx.owners.get(&owner_of(&kafka)), Some(Part::Retain));
    assert!(nothing_published(&world.desired));
}

#[tokio::test]
async fn a_refusal_already_reported_posts_no_second_event() {
    let (mut kafka, pools) = invalid();
    let world = world(&kafka, &pools);
    world.reconcile(&kafka).await;
    let first = world.writes_after_event().await;
    let refused = first
        .iter()
        .find(|w| w.path == status_path::<Kafka>("my-cluster"))
        .unwrap();
    // The apiserver holds the refused status (this apiserver's patches change nothing).
    kafka.status = Some(serde_json::from_value(refused.body["status"].clone()).unwrap());
    world.apiserver.hold(&kafka);

    let action = world.reconcile(&kafka).await;

    assert_eq!(action, Action::requeue(REFUSED_RECHECK));
    assert_eq!(events(&world.writes_settled().await).len(), 1);
}

#[tokio::test]
async fn a_pool_of_another_kafka_cluster_is_refused_and_nothing_is_published() {
    let kafka = claimed(json!({"status": {"clusterId": "this-cluster-id"}}));
    let stranger = dual_pool(json!({
        "clusterId": "other-cluster-id", "nodeIds": [0], "roles": ["controller", "broker"]
    }));
    let world = world(&kafka, &[stranger]);

    let action = world.reconcile(&kafka).await;

    assert_eq!(action, Action::requeue(REFUSED_RECHECK));
    let writes = world.writes_after_event().await;
    let kafka_status = status_path::<Kafka>("my-cluster");
    assert_eq!(
        requests(&writes),
        sorted(vec![
            patch(kafka_status.clone()),
            patch(status_path::<KafkaNodePool>("dual")),
            post(EVENTS),
            post(SECRETS),
            post(SECRETS),
            post(SECRETS),
            post(SECRETS),
        ]),
        "the two CAs (certificate and key each) are made before the cluster ID is checked"
    );
    let mut made: Vec<&str> = writes
        .iter()
        .filter(|w| w.path == SECRETS)
        .map(|w| w.body["metadata"]["name"].as_str().unwrap())
        .collect();
    made.sort_unstable();
    assert_eq!(
        made,
        [
            "my-cluster-clients-ca",
            "my-cluster-clients-ca-cert",
            "my-cluster-cluster-ca",
            "my-cluster-cluster-ca-cert"
        ]
    );
    let ready = ready_at(&writes, &kafka_status);
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["reason"], "ClusterIdMismatch");
    let message = ready["message"].as_str().unwrap();
    assert!(
        message.contains(
            "KafkaNodePool dual belongs to Kafka cluster ID other-cluster-id but Kafka my-cluster has cluster ID this-cluster-id"
        ),
        "{message}"
    );
    let pool_ready = ready_at(&writes, &status_path::<KafkaNodePool>("dual"));
    assert_eq!(pool_ready["reason"], "ClusterIdMismatch");
    assert_eq!(events(&writes)[0]["reason"], "ClusterIdMismatch");
    assert_eq!(
        world.ctx.owners.get(&owner_of(&kafka)),
        Some(Part::Retain),
        "no objects for the agents, only what runs kept"
    );
    assert!(nothing_published(&world.desired));
}
