//! A stretched Kafka on pods that really run: the environment's real nodes (a kubelet and
//! containerd per cluster, `tests/env/nodes.sh`) run the local `apache/kafka` image, and the
//! nodes of alpha and beta reach each other through per-node NodePort Services at each
//! cluster's node address (`nodeport` addressing). Kafka's own protocol, through rdkafka, is
//! the judge: what is produced through a broker of one cluster is consumed through the other,
//! and a producer with `acks=all` runs through rolls, restarts and central's absence without
//! losing an acknowledged record.
//!
//! The tests run one at a time (each starts three JVMs on a two-core machine).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, Secret};
use kstretch_api::{Kafka, KafkaNodePool, KafkaOperation};
use kstretch_tests::TestEnv;
use kstretch_tests::helm::{AGENT_RELEASE, CENTRAL_RELEASE, HelmInstall, wait_with_logs};
use kstretch_tests::kafka::{
    broker_ids, consume, create_topic, finalized_by_kafkas_tool, kafka_tool,
    kraft_version_by_kafkas_tool, produce, produce_with_acks, quorum_by_kafkas_tool,
    registered_by_kafkas_tool, run_kafka_tool,
};
use kstretch_tests::load::{Load, Reader, missing};
use kstretch_tests::ready::{kafka_ready as is_ready, ready_condition};
use kstretch_tests::stretch::{ALPHA, BETA, Stretch};
use kstretch_tests::wait::{Seen, wait_for};
use kube::api::{ListParams, LogParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use serde_json::{Value, json};
use tokio::sync::Mutex;

/// One real-pod test at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::const_new(());

/// JVMs start slowly on two busy cores; a whole cluster takes a minute or two.
const START_TIMEOUT: Duration = Duration::from_secs(300);

fn real_node_ip(alias: &str) -> String {
    TestEnv::get()
        .clusters
        .iter()
        .find(|c| c.name == alias)
        .map(|c| c.real_node_ip.clone())
        .unwrap_or_else(|| panic!("no cluster {alias} in the environment"))
}

/// The `Kafka`: per-node NodePort Services, reached at each cluster's real node.
fn kafka() -> Value {
    json!({
        "apiVersion": "kafka.strimzi.io/v1", "kind": "Kafka",
        "metadata": {"name": "live", "annotations": {
            "kstretch.io/addressing": "nodeport",
            "kstretch.io/node-port-hosts":
                format!("{ALPHA}={},{BETA}={}", real_node_ip(ALPHA), real_node_ip(BETA)),
        }},
        "spec": {"kafka": {
            "listeners": [{"name": "plain", "port": 9092, "type": "internal", "tls": false}],
            "config": {
                "default.replication.factor": 3, "min.insync.replicas": 2,
                "offsets.topic.replication.factor": 3,
                "transaction.state.log.replication.factor": 3,
                "transaction.state.log.min.isr": 2,
                "num.network.threads": 2, "num.io.threads": 2, "background.threads": 2
            }
        }}
    })
}

/// A pool of combined nodes in `alias`, placed on the real node as a user places pods: a node
/// selector and a toleration in `template.pod`.
fn pool(name: &str, replicas: i32, alias: &str, storage: Value) -> Value {
    let mut annotations = json!({});
    if alias != ALPHA {
        annotations["strimzi.io/stretch-cluster-alias"] = json!(alias);
    }
    json!({
        "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaNodePool",
        "metadata": {"name": name, "labels": {"strimzi.io/cluster": "live"},
                     "annotations": annotations},
        "spec": {
            "replicas": replicas, "roles": ["controller", "broker"],
            "storage": storage,
            // C1 only: the JIT's second tier costs more CPU than these short runs win back
            // on two cores running several JVMs.
            "jvmOptions": {"-Xms": "128m", "-Xmx": "320m", "-XX": {"TieredStopAtLevel": "1"}},
            "template": {"pod": {
                "nodeSelector": {"kstretch.test/node": "real"},
                "tolerations": [{"key": "kstretch.test/real-node", "operator": "Exists",
                                 "effect": "NoSchedule"}]
            }}
        }
    })
}

/// The `plain` listener's bootstrap addresses at `host` (the brokers of one cluster).
fn bootstrap_at(k: &Kafka, host: &str) -> String {
    listener_at(k, "plain", host)
}

/// Listener `name`'s bootstrap addresses at `host`, from the status.
fn listener_at(k: &Kafka, name: &str, host: &str) -> String {
    let listener = k
        .status
        .as_ref()
        .and_then(|s| s.listeners.iter().find(|l| l.name.as_deref() == Some(name)))
        .unwrap_or_else(|| panic!("no {name} listener in the status: {:#?}", k.status));
    let servers: Vec<&str> = listener
        .bootstrap_servers
        .as_deref()
        .unwrap_or_default()
        .split(',')
        .filter(|s| s.starts_with(&format!("{host}:")))
        .collect();
    assert!(!servers.is_empty(), "no broker at {host}: {listener:?}");
    servers.join(",")
}

/// Every pod of the test in `alias`: running, ready, on that cluster's real node.
async fn running_pods(stretch: &Stretch, alias: &str, count: usize) -> Vec<Pod> {
    let pods: Api<Pod> = stretch.api(alias);
    let pods = pods.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(pods.len(), count, "pods in {alias}");
    for pod in &pods {
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(
            spec.node_name.as_deref(),
            Some(format!("{alias}-real-0").as_str()),
            "pod {:?} is not on the real node",
            pod.metadata.name
        );
        let status = pod.status.as_ref().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
    }
    pods
}

/// `example` becomes Ready on real pods in both clusters, its brokers answer Kafka's clients,
/// and records produced through alpha's brokers are consumed through beta's; then its quorum
/// replaces a controller that lost its disk, a controller pool joins and leaves it, and pools
/// move between the clusters under load.
#[tokio::test]
async fn a_stretched_kafka_on_real_pods_serves_produce_and_consume_across_clusters() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (mut stretch, k) = live_kafka("running-stretch", json!({"type": "ephemeral"})).await;

    let alpha_pods = running_pods(&stretch, ALPHA, 2).await;
    running_pods(&stretch, BETA, 1).await;
    // Kafka's own log, read as `kubectl logs` reads it (kubelet through the apiserver).
    let pods: Api<Pod> = stretch.api(ALPHA);
    let name = alpha_pods[0].metadata.name.clone().unwrap();
    let log = pods.logs(&name, &LogParams::default()).await.unwrap();
    assert!(log.contains("Kafka Server started"), "{name}'s log:\n{log}");

    serves_across_clusters(&k).await;
    racks_are_clusters(&k).await;
    the_dynamic_quorum_is_shown_and_a_controller_that_lost_its_disk_is_replaced(&stretch, &k).await;
    a_controller_pool_joins_and_leaves_the_quorum_restarting_nobody(&stretch, &k).await;
    pools_move_to_the_other_cluster_and_back_under_load_losing_nothing(&mut stretch, &k).await;
    stretch.finish().await;
}

/// The `Kafka` status shows the controller quorum as Kafka's own
/// `kafka-metadata-quorum describe --replication` sees it: dynamic (KIP-853, as kstretch creates
/// clusters now), every combined node a voter with the metadata directory Kafka reports for it,
/// the leader one of them. Then the pod of beta's controller is deleted: its ephemeral storage
/// goes, it formats a new directory (without the initial voter set, which is only for a quorum
/// that has not formed) and central replaces its old voter with the new directory.
async fn the_dynamic_quorum_is_shown_and_a_controller_that_lost_its_disk_is_replaced(
    stretch: &Stretch,
    k: &Kafka,
) {
    let bootstrap = all_brokers(k);
    let before = shown_quorum_is_kafkas(stretch, k, None).await;
    assert_eq!(before.len(), 3, "{before:?}");

    let pods: Api<Pod> = stretch.api(BETA);
    let victim = pods.list(&ListParams::default()).await.unwrap().items[0].name_any();
    let id: i32 = victim.rsplit('-').next().unwrap().parse().unwrap();
    // Central stops handing out the initial voter set once the quorum has formed.
    let configs: Api<k8s_openapi::api::core::v1::ConfigMap> = stretch.api(BETA);
    wait_for(
        "the formed quorum's format arguments",
        Duration::from_secs(120),
        || async {
            let cm = configs.get(&victim).await.unwrap();
            let args = cm.data.unwrap_or_default().remove("format.args");
            match args.as_deref() {
                Some("--no-initial-controllers") => Seen::Done(()),
                other => Seen::NotYet(format!("{other:?}")),
            }
        },
    )
    .await;
    pods.delete(&victim, &Default::default()).await.unwrap();
    let after = shown_quorum_is_kafkas(stretch, k, Some((id, &before[&id]))).await;
    assert_eq!(after.len(), 3, "{after:?}");
    for (voter, dir) in &before {
        if *voter != id {
            assert_eq!(&after[voter], dir, "voter {voter} must keep its directory");
        }
    }
    // The records written before are all still served, and new ones are taken.
    let earlier = bootstrap.clone();
    let read = tokio::task::spawn_blocking(move || {
        consume(&earlier, "across", 3, 200, Duration::from_secs(60))
    })
    .await
    .unwrap();
    assert_eq!(read.len(), 200);
    produce(
        &bootstrap,
        "across",
        &[("after".to_owned(), "replaced".to_owned())],
    )
    .await;
}

/// A controller-only pool of one node in beta: its controller becomes a voter once it has
/// caught up; scaled to 0, it stops only after it was removed from the voters. No other pod
/// restarts for either (their list of bootstrap controllers is read at their next start).
async fn a_controller_pool_joins_and_leaves_the_quorum_restarting_nobody(
    stretch: &Stretch,
    k: &Kafka,
) {
    let bootstrap = all_brokers(k);
    let before = pod_states(stretch).await;
    let voters_by_kafka = || {
        quorum_by_kafkas_tool(&bootstrap)
            .into_iter()
            .filter(|(_, _, status)| status == "Leader" || status == "Follower")
            .map(|(id, _, _)| id)
            .collect::<BTreeSet<i32>>()
    };
    let old_voters = shown_voters(stretch).await;
    let mut controllers = pool("c", 1, BETA, json!({"type": "ephemeral"}));
    controllers["spec"]["roles"] = json!(["controller"]);
    stretch.apply(controllers).await;
    let joined = wait_for(
        "the new controller to vote",
        Duration::from_secs(240),
        || async {
            let voters = shown_voters(stretch).await;
            if voters.len() == old_voters.len() + 1 {
                Seen::Done(voters)
            } else {
                tokio::time::sleep(Duration::from_secs(2)).await;
                Seen::NotYet(format!("voters {voters:?}"))
            }
        },
    )
    .await;
    assert_eq!(voters_by_kafka(), joined, "what Kafka's tool lists");
    let new_id = *joined.difference(&old_voters).next().unwrap();
    let unchanged = |now: &BTreeMap<String, (String, i32, bool)>| {
        for (name, (uid, restarts, _)) in &before {
            assert_eq!(
                now.get(name).map(|(u, r, _)| (u, *r)),
                Some((uid, *restarts)),
                "{name} restarted"
            );
        }
    };
    unchanged(&pod_states(stretch).await);

    let pools: Api<KafkaNodePool> = stretch.api(ALPHA);
    pools
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 0}})),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = stretch.api(BETA);
    let gone = format!("live-c-{new_id}");
    wait_for(
        "the controller to leave the quorum and stop",
        Duration::from_secs(240),
        || async {
            let voters = shown_voters(stretch).await;
            let pod = pods.get_opt(&gone).await.unwrap();
            assert!(
                pod.is_some() || !voters.contains(&new_id),
                "{gone} stopped while it was a voter: {voters:?}"
            );
            if voters == old_voters && pod.is_none() {
                Seen::Done(())
            } else {
                tokio::time::sleep(Duration::from_secs(1)).await;
                Seen::NotYet(format!(
                    "voters {voters:?}, pod {gone} there: {}",
                    pod.is_some()
                ))
            }
        },
    )
    .await;
    assert_eq!(voters_by_kafka(), old_voters, "what Kafka's tool lists");
    unchanged(&pod_states(stretch).await);
}

/// Waits until the status shows a dynamic quorum of three voters (with `replaced`, voter ID and
/// old directory, no longer among them), then checks it against Kafka's own tool (run only
/// then: each run starts a JVM) and returns the voters, ID → directory ID.
async fn shown_quorum_is_kafkas(
    stretch: &Stretch,
    k: &Kafka,
    replaced: Option<(i32, &str)>,
) -> BTreeMap<i32, String> {
    let bootstrap = all_brokers(k);
    let kafkas: Api<Kafka> = stretch.api(ALPHA);
    wait_for(
        "the status to show the quorum Kafka reports",
        Duration::from_secs(240),
        || async {
            let k = kafkas.get(&k.name_any()).await.unwrap();
            let Some(shown) = k.status.and_then(|s| s.quorum) else {
                return Seen::NotYet("no quorum in the status".to_owned());
            };
            let shown_voters: BTreeMap<i32, String> = shown
                .voters
                .iter()
                .map(|v| (v.id, v.directory_id.clone().unwrap_or_default()))
                .collect();
            let swapped = replaced
                .is_none_or(|(id, old)| shown_voters.get(&id).is_some_and(|dir| dir != old));
            if shown.mode.as_deref() != Some("dynamic") || shown_voters.len() != 3 || !swapped {
                tokio::time::sleep(Duration::from_secs(2)).await;
                return Seen::NotYet(format!("status {shown:?}"));
            }
            let voters: BTreeMap<i32, String> = quorum_by_kafkas_tool(&bootstrap)
                .into_iter()
                .filter(|(_, _, status)| status == "Leader" || status == "Follower")
                .map(|(id, dir, _)| (id, dir))
                .collect();
            if shown_voters == voters && shown.leader_id.is_some_and(|l| voters.contains_key(&l)) {
                Seen::Done(voters)
            } else {
                Seen::NotYet(format!("status {shown:?}, Kafka's voters {voters:?}"))
            }
        },
    )
    .await
}

/// The voters the status shows, by node ID.
async fn shown_voters(stretch: &Stretch) -> BTreeSet<i32> {
    let kafkas: Api<Kafka> = stretch.api(ALPHA);
    let k = kafkas.get("live").await.unwrap();
    k.status
        .and_then(|s| s.quorum)
        .map(|q| q.voters.iter().map(|v| v.id).collect())
        .unwrap_or_default()
}

/// Each broker's rack, as Kafka's own tool lists it, is its Kubernetes cluster, and Kafka
/// places the two replicas of every partition of a new topic in both clusters (without racks,
/// its round-robin assignment puts partitions on brokers 0 and 1, both in alpha).
async fn racks_are_clusters(k: &Kafka) {
    let bootstrap = all_brokers(k);
    let listed = run_kafka_tool(
        "org.apache.kafka.tools.ClusterTool",
        &["list-endpoints", "--bootstrap-server", &bootstrap],
    );
    // Lines: "ID HOST PORT RACK STATE ENDPOINT_TYPE" after a header.
    let racks: BTreeMap<i32, String> = listed
        .lines()
        .skip(1)
        .filter_map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            Some((fields.first()?.parse().ok()?, (*fields.get(3)?).to_owned()))
        })
        .collect();
    assert_eq!(
        racks,
        BTreeMap::from([(0, ALPHA.into()), (1, ALPHA.into()), (2, BETA.into())]),
        "{listed}"
    );

    create_topic(&bootstrap, "spread", 12, 2).await;
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    // A broker learns of a new topic a moment after it is created.
    let replicas: Vec<Vec<i32>> = wait_for(
        "the 12 partitions in the metadata",
        START_TIMEOUT,
        || async {
            match consumer.fetch_metadata(Some("spread"), Duration::from_secs(10)) {
                Ok(m) => {
                    let replicas: Vec<Vec<i32>> = m.topics()[0]
                        .partitions()
                        .iter()
                        .map(|p| p.replicas().to_vec())
                        .collect();
                    if replicas.len() == 12 {
                        Seen::Done(replicas)
                    } else {
                        Seen::NotYet(format!("{replicas:?}"))
                    }
                }
                Err(e) => Seen::NotYet(e.to_string()),
            }
        },
    )
    .await;
    assert!(
        replicas.iter().all(|r| r.contains(&2) && r.len() == 2),
        "every partition in both clusters: {replicas:?}"
    );
}

/// Every broker of both clusters is in the metadata either side returns, and records produced
/// through alpha's brokers are consumed, in order, through beta's.
async fn serves_across_clusters(k: &Kafka) {
    let in_alpha = bootstrap_at(k, &real_node_ip(ALPHA));
    let in_beta = bootstrap_at(k, &real_node_ip(BETA));
    // Every broker of both clusters is in the metadata either side returns.
    for bootstrap in [&in_alpha, &in_beta] {
        let ids = wait_for("three brokers in the metadata", START_TIMEOUT, || async {
            match broker_ids(bootstrap) {
                Ok(ids) if ids.len() == 3 => Seen::Done(ids),
                other => Seen::NotYet(format!("{bootstrap}: {other:?}")),
            }
        })
        .await;
        assert_eq!(ids, BTreeSet::from([0, 1, 2]), "{bootstrap}");
    }

    create_topic(&in_alpha, "across", 3, 3).await;
    let records: Vec<(String, String)> = (0..200)
        .map(|i| (format!("k{i:03}"), format!("v{i}")))
        .collect();
    produce(&in_alpha, "across", &records).await;
    let read = tokio::task::spawn_blocking(move || {
        consume(&in_beta, "across", 3, 200, Duration::from_secs(60))
    })
    .await
    .unwrap();
    assert_eq!(read, records, "what beta's brokers serve");
}

/// Claims of the real nodes' provisioner, kept when their pod goes.
fn persistent() -> Value {
    json!({"type": "persistent-claim", "size": "1Gi", "class": "local-path", "deleteClaim": true})
}

/// A `Kafka` named `live` of three combined nodes, two in alpha (`live-a-0`, `live-a-1`) and
/// one in beta (`live-b-2`), Ready.
async fn live_kafka(test: &str, storage: Value) -> (Stretch, Kafka) {
    live_kafka_with(test, storage, Vec::new()).await
}

/// [`live_kafka`] with `extra` pools.
async fn live_kafka_with(test: &str, storage: Value, extra: Vec<Value>) -> (Stretch, Kafka) {
    live_kafka_of(test, kafka(), storage, extra).await
}

/// [`live_kafka_with`] of the `Kafka` `kafka`.
async fn live_kafka_of(
    test: &str,
    kafka: Value,
    storage: Value,
    extra: Vec<Value>,
) -> (Stretch, Kafka) {
    let mut stretch = Stretch::start(test, &[]).await;
    stretch.delete_namespaces_on_panic();
    ready_kafka(stretch, kafka, storage, extra).await
}

/// Applies `kafka` and its pools to `stretch` and waits until it is Ready.
async fn ready_kafka(
    stretch: Stretch,
    kafka: Value,
    storage: Value,
    extra: Vec<Value>,
) -> (Stretch, Kafka) {
    stretch.apply(kafka).await;
    stretch.apply(pool("a", 2, ALPHA, storage.clone())).await;
    stretch.apply(pool("b", 1, BETA, storage)).await;
    for pool in extra {
        stretch.apply(pool).await;
    }
    let k: Kafka = stretch
        .wait_in_alpha("live", "Ready on real pods", START_TIMEOUT, is_ready)
        .await;
    (stretch, k)
}

/// [`live_kafka_of`] with the Secret `secret` in alpha's namespace before the `Kafka`.
async fn live_kafka_of_with_secret(
    test: &str,
    kafka: Value,
    storage: Value,
    secret: Value,
) -> (Stretch, Kafka) {
    let mut stretch = Stretch::start(test, &[]).await;
    stretch.delete_namespaces_on_panic();
    stretch.apply(secret).await;
    ready_kafka(stretch, kafka, storage, Vec::new()).await
}

/// Every broker's `plain` address, from the status.
fn all_brokers(k: &Kafka) -> String {
    format!(
        "{},{}",
        bootstrap_at(k, &real_node_ip(ALPHA)),
        bootstrap_at(k, &real_node_ip(BETA))
    )
}

/// Pod name -> (UID, restarts, ready) in both clusters.
async fn pod_states(stretch: &Stretch) -> BTreeMap<String, (String, i32, bool)> {
    let mut out = BTreeMap::new();
    for alias in [ALPHA, BETA] {
        let pods: Api<Pod> = stretch.api(alias);
        for pod in pods.list(&ListParams::default()).await.unwrap().items {
            let ready = pod_ready(&pod);
            let status = pod.status.clone().unwrap_or_default();
            let restarts = status
                .container_statuses
                .iter()
                .flatten()
                .map(|c| c.restart_count)
                .sum();
            out.insert(
                pod.metadata.name.clone().unwrap(),
                (pod.metadata.uid.clone().unwrap(), restarts, ready),
            );
        }
    }
    out
}

/// Creates `name` with the replicas of each partition as `replicas` lists them.
async fn placed_topic(bootstrap: &str, name: &str, replicas: &[&[i32]]) {
    let topic = rdkafka::admin::NewTopic::new(
        name,
        replicas.len() as i32,
        rdkafka::admin::TopicReplication::Variable(replicas),
    );
    let admin = kstretch_tests::kafka::admin(bootstrap);
    let created = admin
        .create_topics([&topic], &rdkafka::admin::AdminOptions::new())
        .await
        .unwrap();
    assert!(created.iter().all(Result::is_ok), "{created:?}");
}

/// Waits until every partition of `topic` has all its replicas in its ISR.
async fn full_isr(bootstrap: &str, topic: &str) {
    wait_for(
        &format!("every replica of {topic} in sync"),
        START_TIMEOUT,
        || async {
            let consumer: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", bootstrap)
                .create()
                .unwrap();
            match consumer.fetch_metadata(Some(topic), Duration::from_secs(10)) {
                Ok(m) => {
                    let isr: Vec<(i32, Vec<i32>, Vec<i32>)> = m.topics()[0]
                        .partitions()
                        .iter()
                        .map(|p| (p.id(), p.replicas().to_vec(), p.isr().to_vec()))
                        .collect();
                    if !isr.is_empty() && isr.iter().all(|(_, r, isr)| isr.len() == r.len()) {
                        Seen::Done(())
                    } else {
                        Seen::NotYet(format!("(partition, replicas, ISR): {isr:?}"))
                    }
                }
                Err(e) => Seen::NotYet(e.to_string()),
            }
        },
    )
    .await
}

async fn wait_for_acks(load: &Load, more_than: usize) {
    wait_for(
        "the producer to get acknowledgements",
        START_TIMEOUT,
        || async {
            if load.acked() > more_than {
                Seen::Done(())
            } else {
                Seen::NotYet(format!(
                    "{} acknowledged; last failure: {:?}",
                    load.acked(),
                    load.last_failure()
                ))
            }
        },
    )
    .await
}

/// Stops the producer and checks that every send succeeded.
async fn all_sent(load: Load) -> kstretch_tests::load::Sent {
    let sent = load.stop().await;
    assert!(
        sent.failed.is_empty(),
        "{} sends failed, e.g. {:?}",
        sent.failed.len(),
        &sent.failed[..sent.failed.len().min(5)]
    );
    sent
}

/// Stops the producer and checks every send succeeded and every acknowledged key is there.
async fn no_loss(load: Load, bootstrap: &str, topic: &str) {
    let sent = all_sent(load).await;
    let lost = missing(bootstrap, topic, 3, &sent, Duration::from_secs(90)).await;
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged records are missing, e.g. {:?}",
        lost.len(),
        sent.acked.len(),
        &lost[..lost.len().min(5)]
    );
    eprintln!("{} records acknowledged, none lost", sent.acked.len());
}

/// Waits until every pod of `before` is a new one and Ready, and checks that never more than
/// one node was away at once.
async fn rolled_one_at_a_time(stretch: &Stretch, before: &BTreeMap<String, (String, i32, bool)>) {
    let mut worst = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    loop {
        let now = pod_states(stretch).await;
        let away = before
            .keys()
            .filter(|name| now.get(*name).is_none_or(|(_, _, ready)| !ready))
            .count();
        worst = worst.max(away);
        let replaced = before
            .iter()
            .all(|(name, (uid, _, _))| now.get(name).is_some_and(|(u, _, r)| u != uid && *r));
        if replaced {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the roll did not finish: before {before:?}, now {now:?}\n{}",
            stretch.logs()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(worst <= 1, "{worst} nodes were away at once");
}

/// One live Kafka under an idempotent producer (`acks=all`, `min.insync.replicas=2`) the whole
/// time, created with a static controller quorum (as kstretch created every cluster before
/// KIP-853 support, kept by the annotation `kstretch.io/controller-quorum: static`): central is
/// killed (every pod keeps running and serving, nothing restarts when it returns); the
/// annotation is removed and central migrates the quorum to a dynamic one, which rolls every
/// node one at a time onto `controller.quorum.bootstrap.servers`; Kafka is upgraded to the
/// environment's next version (another roll, then `metadata.version` raised) and a downgrade
/// past it is refused; then a deleted pod and a killed Kafka process come back on their data. No send fails, and a consumer reading
/// afterwards finds every acknowledged record. (One Kafka for all of it: each costs minutes to
/// start on two cores.)
#[tokio::test]
async fn a_kafka_outlives_central_rolls_and_restarts_without_losing_an_acknowledged_record() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut static_quorum = kafka();
    static_quorum["metadata"]["annotations"]["kstretch.io/controller-quorum"] = json!("static");
    let (mut stretch, k) = live_kafka_of("running-roll", static_quorum, persistent(), vec![]).await;
    let bootstrap = all_brokers(&k);
    let shown = k.status.as_ref().and_then(|s| s.quorum.clone());
    assert!(
        shown
            .as_ref()
            .is_none_or(|q| q.mode.as_deref() == Some("static")),
        "{shown:?}"
    );
    create_topic(&bootstrap, "rolled", 3, 3).await;
    full_isr(&bootstrap, "rolled").await;
    let load = Load::start(&bootstrap, "rolled", Duration::from_millis(20));
    wait_for_acks(&load, 50).await;

    without_central_nothing_restarts(&mut stretch, &load).await;

    let before = pod_states(&stretch).await;
    assert_eq!(before.len(), 3, "{before:?}");
    let kafkas: Api<Kafka> = stretch.api(ALPHA);
    kafkas
        .patch(
            "live",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"kstretch.io/controller-quorum": null}}}),
            ),
        )
        .await
        .unwrap();
    rolled_one_at_a_time(&stretch, &before).await;
    let k: Kafka = stretch
        .wait_in_alpha("live", "Ready after the roll", START_TIMEOUT, is_ready)
        .await;
    let acked = load.acked();
    wait_for_acks(&load, acked + 50).await;
    // Kafka's own tool: every voter now known by its metadata directory, as the status shows.
    shown_quorum_is_kafkas(&stretch, &k, None).await;
    assert_eq!(kraft_version_by_kafkas_tool(&bootstrap), "1");

    upgraded_and_not_downgraded(&stretch, &bootstrap, &load).await;
    a_deleted_pod_and_a_killed_process_keep_their_data(&stretch, &bootstrap).await;
    let acked = load.acked();
    wait_for_acks(&load, acked + 50).await;
    no_loss(load, &bootstrap, "rolled").await;
    stretch.finish().await;
}

/// Kafka upgraded under the producer: `spec.kafka.version` set to the environment's next
/// version rolls every node one at a time onto that version's image; once all run it, central
/// raises `metadata.version` (as Kafka's own tool of that version reads it) and the status
/// shows both versions. Going back to the old version is then refused, since Kafka cannot lower
/// the metadata version, and restarts nobody; asking for the new one again clears it.
async fn upgraded_and_not_downgraded(stretch: &Stretch, bootstrap: &str, load: &Load) {
    let (next, next_libs) = TestEnv::get().kafka_next();
    let kafkas: Api<Kafka> = stretch.api(ALPHA);
    let set_version = |version: String| {
        let kafkas = kafkas.clone();
        async move {
            let patch = json!({"spec": {"kafka": {"version": version}}});
            kafkas
                .patch("live", &PatchParams::default(), &Patch::Merge(patch))
                .await
                .unwrap();
        }
    };
    let k = kafkas.get("live").await.unwrap();
    let status = k.status.clone().unwrap_or_default();
    let old = status
        .kafka_version
        .clone()
        .expect("the status shows the version");
    let old_metadata = status
        .kafka_metadata_version
        .clone()
        .expect("and the metadata version");
    assert_ne!(old, next, "the environment's next Kafka version is its own");

    let before = pod_states(stretch).await;
    let started = std::time::Instant::now();
    set_version(next.clone()).await;
    rolled_one_at_a_time(stretch, &before).await;
    let release = next.rsplit_once('.').map_or(next.as_str(), |(r, _)| r);
    let k: Kafka = stretch
        .wait_in_alpha(
            "live",
            "upgraded, metadata.version raised",
            START_TIMEOUT,
            |k: &Kafka| {
                let s = k.status.clone().unwrap_or_default();
                is_ready(k)
                    && s.kafka_version.as_deref() == Some(next.as_str())
                    && s.kafka_metadata_version
                        .as_deref()
                        .is_some_and(|mv| mv.starts_with(&format!("{release}-")))
            },
        )
        .await;
    let shown = k.status.unwrap().kafka_metadata_version.unwrap();
    let finalized = finalized_by_kafkas_tool(&next_libs, bootstrap, "metadata.version");
    assert_eq!(finalized, shown, "Kafka's metadata.version and the status");
    for alias in [ALPHA, BETA] {
        let pods: Api<Pod> = stretch.api(alias);
        for pod in pods.list(&ListParams::default()).await.unwrap() {
            let image = pod.spec.as_ref().unwrap().containers[0]
                .image
                .clone()
                .unwrap();
            assert!(
                image.ends_with(&format!(":{next}")),
                "{} runs {image}",
                pod.name_any()
            );
        }
    }
    // Straight to standard error, past the test harness's capture: wanted in every run.
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "upgraded {} nodes from Kafka {old} ({old_metadata}) to {next} ({shown}) in {:.0} s under the producer",
        before.len(),
        started.elapsed().as_secs_f64()
    );
    let acked = load.acked();
    wait_for_acks(load, acked + 50).await;

    let before = pod_states(stretch).await;
    set_version(old.clone()).await;
    let k: Kafka = stretch
        .wait_in_alpha(
            "live",
            "the downgrade refused",
            START_TIMEOUT,
            |k: &Kafka| refused_because(k).as_deref() == Some("KafkaDowngradeRefused"),
        )
        .await;
    let message = ready_condition(&k)
        .and_then(|c| c.message.clone())
        .unwrap_or_default();
    assert!(
        message.contains(&shown) && message.contains(&old),
        "{message}"
    );
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        pod_states(stretch).await,
        before,
        "pods changed on a refused downgrade"
    );
    set_version(next).await;
    stretch
        .wait_in_alpha(
            "live",
            "Ready again at the new version",
            START_TIMEOUT,
            is_ready,
        )
        .await;
    assert_eq!(
        pod_states(stretch).await,
        before,
        "pods changed when the refusal cleared"
    );
}

/// The reason of a `Ready=False` condition.
fn refused_because(k: &Kafka) -> Option<String> {
    let ready = ready_condition(k)?;
    (ready.status == "False")
        .then(|| ready.reason.clone())
        .flatten()
}

/// Central killed: every pod keeps running and serving, produce goes on, and nothing restarts
/// when central comes back.
async fn without_central_nothing_restarts(stretch: &mut Stretch, load: &Load) {
    let before = pod_states(stretch).await;
    stretch.stop_central();
    let acked = load.acked();
    wait_for_acks(load, acked + 250).await;
    assert_eq!(
        pod_states(stretch).await,
        before,
        "pods changed without central"
    );

    stretch.start_central();
    let k: Kafka = stretch
        .wait_in_alpha("live", "Ready again", START_TIMEOUT, is_ready)
        .await;
    let generation = k.metadata.generation;
    // Long enough for central to have reconciled and checked everything once more.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let k: Kafka = stretch
        .wait_in_alpha("live", "still Ready", START_TIMEOUT, is_ready)
        .await;
    assert_eq!(k.metadata.generation, generation);
    assert_eq!(
        pod_states(stretch).await,
        before,
        "pods changed when central returned"
    );
}

/// The host path of the claim `data-<pod>` in `alias` (the provisioner's directory).
async fn claim_dir(stretch: &Stretch, alias: &str, pod: &str) -> (String, PathBuf) {
    let claims: Api<PersistentVolumeClaim> = stretch.api(alias);
    let claim = claims.get(&format!("data-{pod}")).await.unwrap();
    let volume = claim.spec.unwrap().volume_name.unwrap();
    let pvs: Api<PersistentVolume> = Api::all(stretch.clusters[alias].client.clone());
    let pv = pvs.get(&volume).await.unwrap();
    let path = pv.spec.unwrap().host_path.unwrap().path;
    (claim.metadata.uid.unwrap(), PathBuf::from(path))
}

/// Inode and length of the first segment of `topic-0` in the node's log directory.
fn segment(dir: &std::path::Path, id: i32, topic: &str) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let file = dir
        .join(format!("kafka-log{id}"))
        .join(format!("{topic}-0"))
        .join("00000000000000000000.log");
    let meta = std::fs::metadata(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    (meta.ino(), meta.len())
}

/// The processes of pod `uid` on the machine (the real nodes share its process table).
fn pod_processes(uid: &str, comm: &str) -> Vec<i32> {
    let marker = format!("pod{uid}");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm)
                && std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
                    .is_ok_and(|c| c.contains(&marker))
        })
        .collect()
}

/// A deleted Kafka pod, and separately a killed Kafka process, come back on the data of their
/// claim (the same segment file, not a copy fetched again) and rejoin the ISR.
async fn a_deleted_pod_and_a_killed_process_keep_their_data(stretch: &Stretch, bootstrap: &str) {
    create_topic(bootstrap, "kept", 3, 3).await;
    let records: Vec<(String, String)> = (0..100)
        .map(|i| (format!("k{i:03}"), format!("v{i}")))
        .collect();
    produce(bootstrap, "kept", &records).await;
    let (claim_uid, dir) = claim_dir(stretch, BETA, "live-b-2").await;
    let (inode, len) = segment(&dir, 2, "kept");
    assert!(len > 0, "the segment of kept-0 on node 2 is empty");

    // The pod deleted: a new pod, the same claim, the same segment file.
    let before = pod_states(stretch).await;
    let pods: Api<Pod> = stretch.api(BETA);
    pods.delete("live-b-2", &Default::default()).await.unwrap();
    wait_for("live-b-2 back and Ready", START_TIMEOUT, || async {
        let now = pod_states(stretch).await;
        match now.get("live-b-2") {
            Some((uid, _, true)) if *uid != before["live-b-2"].0 => Seen::Done(()),
            other => Seen::NotYet(format!("{other:?}")),
        }
    })
    .await;
    full_isr(bootstrap, "kept").await;
    let (claim_after, dir_after) = claim_dir(stretch, BETA, "live-b-2").await;
    assert_eq!((claim_after, &dir_after), (claim_uid.clone(), &dir));
    let (inode_after, len_after) = segment(&dir, 2, "kept");
    assert_eq!(inode_after, inode, "the segment was written anew");
    assert!(len_after >= len);

    // Kafka's process killed: the container restarts in the same pod, on the same data.
    let uid = pod_states(stretch).await["live-b-2"].0.clone();
    let java = pod_processes(&uid, "java");
    assert_eq!(java.len(), 1, "Kafka's process of pod {uid}: {java:?}");
    std::process::Command::new("kill")
        .args(["-KILL", &java[0].to_string()])
        .status()
        .unwrap();
    wait_for(
        "live-b-2's container restarted and Ready",
        START_TIMEOUT,
        || async {
            let now = pod_states(stretch).await;
            match now.get("live-b-2") {
                Some((u, restarts, true)) if *u == uid && *restarts >= 1 => Seen::Done(()),
                other => Seen::NotYet(format!("{other:?}")),
            }
        },
    )
    .await;
    full_isr(bootstrap, "kept").await;
    assert_eq!(
        segment(&dir, 2, "kept").0,
        inode,
        "the segment was written anew"
    );
    let (b, t) = (bootstrap.to_owned(), "kept");
    let read = tokio::task::spawn_blocking(move || consume(&b, t, 3, 100, Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(read, records);
}

fn warning(k: &Kafka, reason: &str) -> Option<String> {
    k.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == "Warning" && c.reason.as_deref() == Some(reason))
            .and_then(|c| c.message.clone())
    })
}

/// Each operation's phase and Ready condition, a line each, for failure messages.
async fn operations_said(ops: &Api<KafkaOperation>) -> String {
    match ops.list(&ListParams::default()).await {
        Ok(list) => list
            .items
            .iter()
            .map(|o| {
                let status = o.status.clone().unwrap_or_default();
                let ready = status.conditions.iter().find(|c| c.type_ == "Ready");
                format!(
                    "{}: {:?} {:?}: {:?}",
                    o.name_any(),
                    status.phase,
                    ready.and_then(|c| c.reason.clone()),
                    ready.and_then(|c| c.message.clone())
                )
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Err(e) => format!("operations not listed: {e}"),
    }
}

/// Beta is drained for maintenance and undrained with `kstretch`, under an idempotent
/// producer: a drain that would leave too few brokers is refused, a dry run only plans, after
/// the drain no broker of beta holds or leads a replica, and after the undrain every partition
/// is where it was (Kafka's metadata, through rdkafka, is the judge); a topic placed in alpha
/// only is reported and spread across both clusters. Then a broker pool's
/// scale-down is refused while its broker holds replicas; once Kafka's own reassignment tool
/// has moved them, the node is removed and unregistered, as Kafka's cluster tool confirms.
#[tokio::test]
async fn beta_is_drained_and_undrained_and_a_scale_down_waits_until_the_replicas_moved() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut extra = pool("x", 1, ALPHA, persistent());
    extra["spec"]["roles"] = json!(["broker"]);
    let (mut stretch, k) = live_kafka_with("running-scaledown", persistent(), vec![extra]).await;
    drained_and_undrained(&mut stretch, &k).await;
    let pools: Api<KafkaNodePool> = stretch.api(ALPHA);
    let x = pools.get("x").await.unwrap();
    let id = x.status.unwrap().node_ids[0];
    let bootstrap = all_brokers(&k);
    // One partition with a replica on the broker to remove, one without.
    let brokers = broker_ids(&bootstrap).unwrap();
    assert_eq!(brokers.len(), 4, "{brokers:?}");
    let others: Vec<i32> = brokers.into_iter().filter(|n| *n != id).collect();
    let with_it = [id, others[0], others[1]];
    placed_topic(&bootstrap, "moving", &[&with_it, &others]).await;
    full_isr(&bootstrap, "moving").await;

    pools
        .patch(
            "x",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 0}})),
        )
        .await
        .unwrap();
    let k: Kafka = stretch
        .wait_in_alpha("live", "ScaleDownBlocked", START_TIMEOUT, |k| {
            warning(k, "ScaleDownBlocked").is_some()
        })
        .await;
    let message = warning(&k, "ScaleDownBlocked").unwrap();
    assert!(message.contains(&format!("broker {id} holds")), "{message}");
    assert_eq!(
        pod_states(&stretch).await.len(),
        4,
        "the broker's pod stays"
    );

    // The replicas moved with Kafka's own tool: every partition the broker holds (the
    // consumers of the drain above created __consumer_offsets there too).
    let plan = std::env::temp_dir().join(format!("{}-moving.json", stretch.ns));
    let moves: Vec<String> = kstretch_tests::kafka::placement(&bootstrap)
        .unwrap()
        .into_iter()
        .filter(|(_, (replicas, _))| replicas.contains(&id))
        .map(|((topic, partition), (replicas, _))| {
            let spare = others.iter().find(|b| !replicas.contains(b)).unwrap();
            let to: Vec<i32> = replicas
                .iter()
                .map(|b| if *b == id { *spare } else { *b })
                .collect();
            format!(r#"{{"topic":"{topic}","partition":{partition},"replicas":{to:?}}}"#)
        })
        .collect();
    std::fs::write(
        &plan,
        format!(r#"{{"version":1,"partitions":[{}]}}"#, moves.join(",")),
    )
    .unwrap();
    let plan = plan.display().to_string();
    let reassign = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand";
    let file_args = [
        "--bootstrap-server",
        &bootstrap,
        "--reassignment-json-file",
        &plan,
    ];
    run_kafka_tool(reassign, &[&file_args[..], &["--execute"]].concat());
    wait_for("the reassignment to complete", START_TIMEOUT, || async {
        let out = run_kafka_tool(reassign, &[&file_args[..], &["--verify"]].concat());
        if out.contains("is completed") && !out.contains("still in progress") {
            Seen::Done(())
        } else {
            Seen::NotYet(out)
        }
    })
    .await;

    stretch
        .wait_in_alpha(
            "x",
            "node removed from pool x",
            START_TIMEOUT,
            |p: &KafkaNodePool| p.status.as_ref().is_some_and(|s| s.node_ids.is_empty()),
        )
        .await;
    wait_for(
        &format!("broker {id} unregistered, as Kafka's cluster tool reports"),
        START_TIMEOUT,
        || async {
            let registered = registered_by_kafkas_tool(&bootstrap);
            if registered.contains(&id) {
                Seen::NotYet(format!("registered: {registered:?}"))
            } else {
                Seen::Done(())
            }
        },
    )
    .await;
    // Kafka fences the broker as its process stops, a little before kubelet reports the pod gone.
    wait_for("the broker's pod gone", START_TIMEOUT, || async {
        let pods = pod_states(&stretch).await;
        if pods.len() == 3 {
            Seen::Done(())
        } else {
            Seen::NotYet(format!("{pods:?}"))
        }
    })
    .await;
    let k: Kafka = stretch
        .wait_in_alpha("live", "Ready without the broker", START_TIMEOUT, is_ready)
        .await;
    assert!(warning(&k, "ScaleDownBlocked").is_none());
    assert!(!k.status.unwrap().registered_node_ids.contains(&id));
    stretch.finish().await;
}

/// A broker pool moves from alpha to beta and back, then beta's combined pool (a controller of
/// the quorum) to alpha and back, each time by changing its
/// `strimzi.io/stretch-cluster-alias`, under an idempotent producer (`acks=all`) and a consumer
/// group member reading the whole time: new nodes with new IDs start where the pool now
/// belongs, central drains the leaving brokers with a `KafkaOperation` of its own, and each
/// leaving node stops (and is unregistered) once it holds no replica. Central is killed once
/// the first move's drain exists; the move completes after it returns. The way back, started
/// with `kstretch move-pool --throttle 1 --wait`, crawls and its drain is aborted mid-move: the
/// cluster stays consistent and the CLI says the move stalled and what to do. The move is
/// undone with `kstretch move-pool`, then made again without a throttle: it runs at central's
/// default, and the aborted drain of the undone move, which has the same name, does not hold
/// it. A topic of one replica (below the brokers' `min.insync.replicas`) on the leaving broker
/// moves with it, every record kept. No send fails, the consumer sees every acknowledged
/// record exactly once, and the longest produce stall is printed. (Part of the stretched
/// Kafka's test: each new Kafka costs minutes on two cores.)
async fn pools_move_to_the_other_cluster_and_back_under_load_losing_nothing(
    stretch: &mut Stretch,
    k: &Kafka,
) {
    let mut moving = pool("m", 1, ALPHA, json!({"type": "ephemeral"}));
    moving["spec"]["roles"] = json!(["broker"]);
    stretch.apply(moving).await;
    let bootstrap = all_brokers(k);
    let pools: Api<KafkaNodePool> = stretch.api(ALPHA);
    let first = stretch
        .wait_in_alpha("m", "pool m's node", START_TIMEOUT, |p: &KafkaNodePool| {
            p.status.as_ref().is_some_and(|s| s.node_ids.len() == 1)
        })
        .await
        .status
        .unwrap()
        .node_ids;
    wait_for("pool m's broker to register", START_TIMEOUT, || async {
        match broker_ids(&bootstrap) {
            Ok(brokers) if brokers.contains(&first[0]) => Seen::Done(()),
            other => Seen::NotYet(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(first.len(), 1, "{first:?}");
    // Every partition has a replica on the pool's broker, one of them its leader.
    let m = first[0];
    placed_topic(&bootstrap, "moved", &[&[m, 0, 2], &[1, m, 2], &[2, 1, m]]).await;
    full_isr(&bootstrap, "moved").await;
    let load = Load::start(&bootstrap, "moved", Duration::from_millis(20));
    let reader = Reader::start(&bootstrap, "moved", "move-readers");
    wait_for_acks(&load, 50).await;

    let in_beta = pool_moved(
        stretch,
        &bootstrap,
        "m",
        &first,
        BETA,
        Interruption::Central,
    )
    .await;
    // The drain put the replicas wherever they fit best; a topic on the new brokers gives the
    // way back something to move.
    let n = in_beta[0];
    placed_topic(&bootstrap, "back", &[&[n, 0, 2], &[1, n, 2]]).await;
    full_isr(&bootstrap, "back").await;
    // 32 KiB of hex noise each, 1.6 MiB a partition: more than a follower's first fetch takes
    // (1 MiB a partition), so a drain throttled to a byte a second cannot finish it.
    let mut state = 0x2545_F491_4F6C_DD1D;
    let records: Vec<(String, String)> = (0..100)
        .map(|i| {
            let value: String = (0..2048)
                .map(|_| format!("{:016x}", noise(&mut state)))
                .collect();
            (format!("k{i:03}"), format!("v{i}-{value}"))
        })
        .collect();
    produce(&bootstrap, "back", &records).await;
    let stalled = pool_moved(
        stretch,
        &bootstrap,
        "m",
        &in_beta,
        ALPHA,
        Interruption::Abort,
    )
    .await;
    // Undone: the pool's broker in beta never left, its new one in alpha leaves.
    let undone = pool_moved(stretch, &bootstrap, "m", &stalled, BETA, Interruption::None).await;
    assert_eq!(undone, in_beta, "the undo keeps the nodes that stayed");
    // One replica, below the brokers' min.insync.replicas (2), so acks=1; it can never have
    // two replicas in sync, yet moves once its one is.
    placed_topic(&bootstrap, "scratch", &[&[n]]).await;
    let scratch: Vec<(String, String)> = (0..200)
        .map(|i| (format!("s{i:03}"), format!("scratch {i}")))
        .collect();
    produce_with_acks(&bootstrap, "scratch", &scratch, "1").await;
    pool_moved(
        stretch,
        &bootstrap,
        "m",
        &in_beta,
        ALPHA,
        Interruption::None,
    )
    .await;
    let all = bootstrap.clone();
    let read = tokio::task::spawn_blocking(move || {
        consume(&all, "scratch", 1, 200, Duration::from_secs(60))
    })
    .await
    .unwrap();
    assert_eq!(
        read.len(),
        200,
        "the one-replica topic moved with every record"
    );
    // Then the pool of beta's controller (a combined node, a voter): the new node in alpha
    // joins the voters before the old one leaves them, and back.
    let b = pools.get("b").await.unwrap().status.unwrap().node_ids;
    let in_alpha = pool_moved(stretch, &bootstrap, "b", &b, ALPHA, Interruption::None).await;
    pool_moved(
        stretch,
        &bootstrap,
        "b",
        &in_alpha,
        BETA,
        Interruption::None,
    )
    .await;
    evictions_take_one_node_at_a_time_across_clusters(stretch).await;
    let (all, topic) = (bootstrap.clone(), "back");
    let read =
        tokio::task::spawn_blocking(move || consume(&all, topic, 2, 100, Duration::from_secs(60)))
            .await
            .unwrap();
    assert_eq!(
        read.len(),
        100,
        "what the pool's brokers held in beta is served from alpha"
    );

    let sent = all_sent(load).await;
    let (lost, twice) = reader.finish(&sent, Duration::from_secs(90)).await;
    assert!(
        lost.is_empty() && twice.is_empty(),
        "of {} acknowledged records the consumer group missed {} (e.g. {:?}) and saw {} twice (e.g. {:?})",
        sent.acked.len(),
        lost.len(),
        &lost[..lost.len().min(5)],
        twice.len(),
        &twice[..twice.len().min(5)]
    );
    // Straight to standard error, past the test harness's capture: the figure is wanted in
    // every run's output.
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "pool moves (broker pool alpha → beta → alpha aborted and undone → alpha, controller pool beta → alpha → beta): {} records acknowledged, none lost or duplicated; longest produce stall {:?}",
        sent.acked.len(),
        sent.longest_wait
    );
}

/// Voluntary evictions, as `kubectl drain` makes them, under the move test's producer: a Kafka
/// pod evicted in alpha goes (its podset brings it back); while it is away, beta's budget
/// refuses an eviction (429) although every pod there is ready, since no apiserver sees both
/// clusters; once the pod is back and ready, beta's budget allows one again. Then `kubectl
/// drain` of alpha's real node evicts one Kafka pod and waits (the rest are refused), and once
/// the node is uncordoned every pod is ready again.
async fn evictions_take_one_node_at_a_time_across_clusters(stretch: &Stretch) {
    use kube::api::EvictParams;
    let budget = |alias: &str| {
        let api: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> = stretch.api(alias);
        async move {
            api.get("live-kafka")
                .await
                .unwrap()
                .status
                .unwrap_or_default()
        }
    };
    let kafka_pods = |alias: &str| {
        let api: Api<Pod> = stretch.api(alias);
        async move {
            api.list(&ListParams::default().labels("strimzi.io/name=live-kafka"))
                .await
                .unwrap()
                .items
        }
    };
    let all_ready = || async {
        let mut pods = kafka_pods(ALPHA).await;
        pods.extend(kafka_pods(BETA).await);
        let waiting: Vec<String> = pods
            .iter()
            .filter(|p| !pod_ready(p))
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        let open = budget(ALPHA).await.disruptions_allowed == Some(1)
            && budget(BETA).await.disruptions_allowed == Some(1);
        if waiting.is_empty() && open {
            Seen::Done(())
        } else {
            Seen::NotYet(format!("not ready: {waiting:?}; budgets open: {open}"))
        }
    };
    wait_for(
        "every Kafka pod ready and both budgets open",
        START_TIMEOUT,
        all_ready,
    )
    .await;
    let evicted = kafka_pods(ALPHA).await[0].metadata.name.clone().unwrap();
    let alpha: Api<Pod> = stretch.api(ALPHA);
    alpha
        .evict(&evicted, &EvictParams::default())
        .await
        .unwrap();
    wait_for("beta's budget to close", START_TIMEOUT, || async {
        match budget(BETA).await.disruptions_allowed {
            Some(0) => Seen::Done(()),
            n => Seen::NotYet(format!("{n:?} disruption(s) allowed in beta")),
        }
    })
    .await;
    let in_beta = kafka_pods(BETA).await[0].metadata.name.clone().unwrap();
    // Answered as `kubectl drain` sees it: kube's default client would retry the 429.
    let env = TestEnv::get()
        .clusters
        .iter()
        .find(|c| c.name == BETA)
        .unwrap();
    let once = kstretch_tests::cluster::Cluster::connect_without_retries(env).await;
    let beta: Api<Pod> = Api::namespaced(once.client, &stretch.ns);
    let pdbs: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> = stretch.api(BETA);
    let seen = kstretch_tests::wait::shown(&pdbs.get("live-kafka").await.unwrap());
    let pods_then = pod_states(stretch).await;
    match beta.evict(&in_beta, &EvictParams::default()).await {
        Err(kube::Error::Api(e)) if e.code == 429 => {}
        other => panic!(
            "evicting {in_beta} in beta while {evicted} in alpha is away: {:?}\nbeta's budget:\n{seen}\npods: {pods_then:?}",
            other.map(|_| ())
        ),
    }
    wait_for(
        "the evicted pod back and both budgets open",
        START_TIMEOUT,
        all_ready,
    )
    .await;

    // A node drained for maintenance: one Kafka pod goes, the drain waits for it.
    let node = kafka_pods(ALPHA).await[0]
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap();
    let before: BTreeMap<String, String> = kafka_pods(ALPHA)
        .await
        .iter()
        .map(|p| {
            (
                p.metadata.name.clone().unwrap(),
                p.metadata.uid.clone().unwrap(),
            )
        })
        .collect();
    let kubectl = |args: &[&str]| {
        let mut command = std::process::Command::new(kstretch_tests::charts::tool("kubectl"));
        command
            .arg("--kubeconfig")
            .arg(stretch.kubeconfig(ALPHA))
            .args(args);
        async move {
            tokio::task::spawn_blocking(move || command.output().expect("kubectl runs"))
                .await
                .unwrap()
        }
    };
    let drained = kubectl(&[
        "drain",
        &node,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=40s",
        "--pod-selector=strimzi.io/name=live-kafka",
    ])
    .await;
    let uncordoned = kubectl(&["uncordon", &node]).await;
    assert!(uncordoned.status.success(), "{uncordoned:?}");
    let said = String::from_utf8_lossy(&drained.stderr).into_owned()
        + &String::from_utf8_lossy(&drained.stdout);
    assert!(
        !drained.status.success()
            && said.contains("Cannot evict pod as it would violate the pod's disruption budget"),
        "kubectl drain {node} evicts one Kafka pod and then waits:\n{said}"
    );
    let gone = kafka_pods(ALPHA)
        .await
        .iter()
        .filter(|p| {
            before.get(p.metadata.name.as_deref().unwrap_or_default()) != p.metadata.uid.as_ref()
        })
        .count();
    assert_eq!(
        gone, 1,
        "one Kafka pod of {before:?} was evicted by the drain:\n{said}"
    );
    wait_for("every pod back after the drain", START_TIMEOUT, all_ready).await;
}

/// What interrupts a pool move in [`pool_moved`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Interruption {
    None,
    /// Central is killed and started again once the move's drain exists.
    Central,
    /// Started with `kstretch move-pool --throttle 1 --wait`, the move's drain runs at a byte a
    /// second and is aborted with `kstretch abort` while partitions are in flight; the CLI
    /// says the move stalled, and the move is left so.
    Abort,
}

/// Points pool `name` (whose nodes are `from_ids`) at cluster `to` and waits until the move
/// is done: new nodes there (voters, for a controller pool, as Kafka's tool lists them), a
/// drain of the old brokers completed if they held replicas, the old nodes stopped and
/// unregistered. Returns the pool's new node IDs (an aborted move's, once it stalled).
async fn pool_moved(
    stretch: &mut Stretch,
    bootstrap: &str,
    name: &str,
    from_ids: &[i32],
    to: &str,
    interruption: Interruption,
) -> Vec<i32> {
    let held = kstretch_tests::kafka::placement(bootstrap).unwrap();
    let holds = held
        .values()
        .any(|(replicas, _)| replicas.iter().any(|r| from_ids.contains(r)));
    let started_at = std::time::Instant::now();
    let pools: Api<KafkaNodePool> = stretch.api(ALPHA);
    let controllers = pools
        .get(name)
        .await
        .unwrap()
        .spec
        .roles
        .contains(&kstretch_api::ProcessRole::Controller);
    // A move is started and followed by `kstretch move-pool --wait`, as a user would; the one
    // that central's restart interrupts by the annotation.
    let mut cli = None;
    if interruption != Interruption::Central {
        let mut args = vec!["move-pool", name, "--to", to, "--wait"];
        if interruption == Interruption::Abort {
            args.extend(["--throttle", "1"]);
        }
        let mut command = stretch.kstretch_command(&args);
        cli = Some(tokio::task::spawn_blocking(move || {
            command.output().expect("kstretch runs")
        }));
    } else {
        let alias = if to == ALPHA { Value::Null } else { json!(to) };
        let annotations = json!({"strimzi.io/stretch-cluster-alias": alias});
        pools
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": annotations}})),
            )
            .await
            .unwrap();
    }
    let started = stretch
        .wait_in_alpha(
            name,
            "the move to start",
            START_TIMEOUT,
            |p: &KafkaNodePool| {
                // An undo whose leaving nodes hold nothing may be over before it is seen.
                p.status.as_ref().is_some_and(|s| {
                    s.cluster_alias.as_deref() == Some(to)
                        && match &s.leaving {
                            Some(l) => l.node_ids == from_ids,
                            None => s.node_ids.iter().all(|id| !from_ids.contains(id)),
                        }
                })
            },
        )
        .await;
    let status = started.status.unwrap();
    let new: Vec<i32> = status
        .node_ids
        .iter()
        .filter(|id| !from_ids.contains(id))
        .copied()
        .collect();
    assert_eq!(new.len(), from_ids.len(), "{status:?}");
    let ops: Api<KafkaOperation> = stretch.api(ALPHA);
    let ids: Vec<String> = from_ids.iter().map(i32::to_string).collect();
    let drain = format!("live-{name}-move-{}", ids.join("-"));
    if let Some(cli) = cli.take_if(|_| interruption == Interruption::Abort) {
        assert!(holds, "an abort needs replicas to move");
        aborted_mid_move(stretch, bootstrap, &drain).await;
        let (ok, text) = cli_said(cli).await;
        eprintln!("kstretch move-pool {name} --to {to} --throttle 1 --wait:\n{text}");
        assert!(
            !ok && text.contains("copies at 1 B/s per broker")
                && text.contains(&format!("the move of KafkaNodePool {name} to {to} stalled"))
                && text.contains(&format!("kubectl delete kafkaoperation {drain}"))
                && text.contains(&format!("kstretch move-pool {name} --to")),
            "kstretch move-pool {name} --to {to} --throttle 1 --wait:\n{text}"
        );
        return new;
    }
    if interruption == Interruption::Central {
        // Central killed mid-move, once it has started the drain: the move goes on from what
        // the pool's status and the operation's record.
        wait_for(
            &format!("drain {drain} to exist"),
            START_TIMEOUT,
            || async {
                match ops.get_opt(&drain).await.unwrap() {
                    Some(_) => Seen::Done(()),
                    None => Seen::NotYet("not yet".to_owned()),
                }
            },
        )
        .await;
        stretch.stop_central();
        stretch.start_central();
    }
    let stretch = &*stretch;
    wait_for(
        &format!("drain {drain} to complete"),
        START_TIMEOUT,
        || async {
            if !holds {
                return Seen::Done(());
            }
            match ops.get_opt(&drain).await.unwrap() {
                Some(op)
                    if op.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Completed") =>
                {
                    Seen::Done(())
                }
                other => Seen::NotYet(format!("{:?}", other.map(|o| o.status))),
            }
        },
    )
    .await;
    let done = stretch
        .wait_in_alpha(
            name,
            "the leaving nodes to go",
            START_TIMEOUT,
            |p: &KafkaNodePool| {
                p.status
                    .as_ref()
                    .is_some_and(|s| s.leaving.is_none() && s.node_ids == new)
            },
        )
        .await;
    assert_eq!(done.status.unwrap().node_ids, new);
    wait_for(
        "the old brokers unregistered and their pods gone",
        START_TIMEOUT,
        || async {
            let registered = registered_by_kafkas_tool(bootstrap);
            let pods = pod_states(stretch).await;
            let old_pods: Vec<String> = from_ids
                .iter()
                .map(|id| format!("live-{name}-{id}"))
                .collect();
            let left: Vec<&String> = old_pods.iter().filter(|p| pods.contains_key(*p)).collect();
            if from_ids.iter().any(|id| registered.contains(id)) || !left.is_empty() {
                Seen::NotYet(format!("registered {registered:?}, old pods left {left:?}"))
            } else {
                Seen::Done(())
            }
        },
    )
    .await;
    let there: Api<Pod> = stretch.api(to);
    for id in &new {
        let pod = there.get(&format!("live-{name}-{id}")).await.unwrap();
        assert!(pod_ready(&pod), "live-{name}-{id} runs in {to}");
    }
    if controllers {
        let voters: BTreeSet<i32> = quorum_by_kafkas_tool(bootstrap)
            .into_iter()
            .filter(|(_, _, status)| status == "Leader" || status == "Follower")
            .map(|(id, _, _)| id)
            .collect();
        assert!(
            new.iter().all(|id| voters.contains(id))
                && from_ids.iter().all(|id| !voters.contains(id)),
            "the voters are the new controllers, not the old: {voters:?}"
        );
    }
    let placement = kstretch_tests::kafka::placement(bootstrap).unwrap();
    assert!(
        placement
            .values()
            .all(|(replicas, _)| replicas.iter().all(|r| !from_ids.contains(r))),
        "no replica left on {from_ids:?}: {placement:?}"
    );
    if let Some(cli) = cli {
        let (ok, text) = cli_said(cli).await;
        eprintln!("kstretch move-pool {name} --to {to} --wait:\n{text}");
        assert!(
            ok && text.contains(&format!("moved to {to}: nodes {new:?}"))
                && text.contains("copies at 50 MiB/s per broker (central's default)"),
            "kstretch move-pool {name} --to {to} --wait:\n{text}"
        );
        let pool = pools.get(name).await.unwrap();
        assert!(
            !pool.annotations().contains_key("kstretch.io/move-throttle"),
            "no throttle is left from an earlier move"
        );
        if holds {
            let done = ops.get(&drain).await.unwrap().status.unwrap();
            assert_eq!(done.replication_throttle, Some(50 * 1024 * 1024), "{drain}");
        }
    }
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "pool {name} moved to {to} (nodes {from_ids:?} → {new:?}) in {:.0} s",
        started_at.elapsed().as_secs_f64()
    );
    new
}

/// Whether `kstretch` succeeded, and what it printed.
async fn cli_said(cli: tokio::task::JoinHandle<std::process::Output>) -> (bool, String) {
    let output = cli.await.unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}

/// The move's drain `drain`, crawling at 1 byte/s, is aborted with `kstretch abort` while it
/// has partitions in flight: the cluster is left consistent (every partition of the test's
/// topics at replication factor 3 and fully in sync, no reassignment left running, the same
/// voters) and the `Kafka` says the move stalled.
async fn aborted_mid_move(stretch: &Stretch, bootstrap: &str, drain: &str) {
    let ops: Api<KafkaOperation> = stretch.api(ALPHA);
    let voters = || {
        quorum_by_kafkas_tool(bootstrap)
            .into_iter()
            .filter(|(_, _, status)| status == "Leader" || status == "Follower")
            .map(|(id, _, _)| id)
            .collect::<BTreeSet<i32>>()
    };
    let voters_before = voters();
    wait_for(
        &format!("drain {drain} to have partitions in flight"),
        START_TIMEOUT,
        || async {
            let op = ops.get_opt(drain).await.unwrap();
            let status = op.and_then(|o| o.status);
            match &status {
                Some(s) if s.phase.as_deref() == Some("Running") && !s.in_flight.is_empty() => {
                    Seen::Done(())
                }
                _ => Seen::NotYet(format!("{status:?}")),
            }
        },
    )
    .await;
    let (ok, out) = kstretch(stretch, &["abort", drain]).await;
    assert!(ok, "{out}");
    wait_for(&format!("drain {drain} aborted"), START_TIMEOUT, || async {
        let status = ops.get_opt(drain).await.unwrap().and_then(|o| o.status);
        match &status {
            Some(s) if s.phase.as_deref() == Some("Aborted") && s.in_flight.is_empty() => {
                Seen::Done(())
            }
            _ => Seen::NotYet(format!("{status:?}")),
        }
    })
    .await;
    stretch
        .wait_in_alpha(
            "live",
            "the move shown stalled",
            START_TIMEOUT,
            |k: &Kafka| warning(k, "PoolMoveStalled").is_some_and(|m| m.contains(drain)),
        )
        .await;
    let listed = run_kafka_tool(
        "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
        &["--bootstrap-server", bootstrap, "--list"],
    );
    assert!(
        listed.contains("No partition reassignments found"),
        "reassignments left running after the abort:\n{listed}"
    );
    for topic in ["moved", "back"] {
        full_isr(bootstrap, topic).await;
    }
    let placement = kstretch_tests::kafka::placement(bootstrap).unwrap();
    let short: Vec<_> = placement
        .iter()
        .filter(|((topic, _), (replicas, _))| {
            ["moved", "back"].contains(&topic.as_str()) && replicas.len() != 3
        })
        .collect();
    assert!(short.is_empty(), "partitions not at 3 replicas: {short:?}");
    assert_eq!(voters(), voters_before, "the voters after the abort");
    let op = ops.get(drain).await.unwrap();
    assert_eq!(
        op.spec.replication_throttle,
        Some(1),
        "the throttle asked for"
    );
}

/// Benchmark, not a test (`scripts/bench-move.sh` runs it): a one-broker pool in alpha holds
/// one replica of every partition of a topic filled with `KSTRETCH_BENCH_MOVE_MIB` MiB
/// (default 1024) of incompressible records over `KSTRETCH_BENCH_MOVE_PARTITIONS` partitions
/// (default 12, replication factor 2); it moves to beta with its drain at
/// `KSTRETCH_BENCH_MOVE_THROTTLE` bytes/s per broker (default 50 MiB/s). Prints the drain's
/// plan (bytes, the seconds the copying alone takes at the throttle), the drain's own time and
/// the whole move's.
#[tokio::test]
#[ignore = "benchmark: scripts/bench-move.sh"]
async fn bench_pool_move() {
    let _one = ONE_AT_A_TIME.lock().await;
    let setting = |name: &str, default: u64| {
        std::env::var(name).ok().map_or(default, |v| {
            v.parse()
                .unwrap_or_else(|e| panic!("{name}={v:?} is not a number: {e}"))
        })
    };
    let mib = setting("KSTRETCH_BENCH_MOVE_MIB", 1024);
    let partitions = setting("KSTRETCH_BENCH_MOVE_PARTITIONS", 12) as i32;
    let throttle = setting("KSTRETCH_BENCH_MOVE_THROTTLE", 50 * 1024 * 1024);
    let mut moving = pool("m", 1, ALPHA, persistent());
    moving["spec"]["roles"] = json!(["broker"]);
    moving["metadata"]["annotations"]["kstretch.io/move-throttle"] = json!(throttle.to_string());
    let (mut stretch, k) = live_kafka_with("bench-move", persistent(), vec![moving]).await;
    let bootstrap = all_brokers(&k);
    let pools: Api<KafkaNodePool> = stretch.api(ALPHA);
    let m = pools.get("m").await.unwrap().status.unwrap().node_ids[0];
    let replicas: Vec<[i32; 2]> = (0..partitions).map(|p| [m, p % 3]).collect();
    let replicas: Vec<&[i32]> = replicas.iter().map(|r| &r[..]).collect();
    placed_topic(&bootstrap, "bulk", &replicas).await;
    let filled_at = std::time::Instant::now();
    let (servers, total) = (bootstrap.clone(), mib * 1024 * 1024);
    tokio::task::spawn_blocking(move || fill(&servers, "bulk", partitions, total))
        .await
        .unwrap();
    let fill_secs = filled_at.elapsed().as_secs_f64();

    let started = std::time::Instant::now();
    pool_moved(
        &mut stretch,
        &bootstrap,
        "m",
        &[m],
        BETA,
        Interruption::None,
    )
    .await;
    let move_secs = started.elapsed().as_secs_f64();
    let ops: Api<KafkaOperation> = stretch.api(ALPHA);
    let drain = ops
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|o| o.name_any().starts_with("live-m-move-"))
        .and_then(|o| o.status)
        .expect("the move's drain");
    let plan = drain.plan.clone().unwrap_or_default();
    let at = |t: &Option<String>| {
        let text = t.as_deref().expect("drain times");
        epoch_seconds(text)
    };
    let drain_secs = at(&drain.completed_at) - at(&drain.started_at);
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "bench-move: {mib} MiB over {partitions} partitions (filled in {fill_secs:.0} s); drain throttle {throttle} B/s per broker; plan: {} partitions, {} bytes, {} s of copying at the throttle; drain took {drain_secs:.0} s; whole move (new broker started, drain, old broker stopped and unregistered) {move_secs:.0} s",
        plan.partitions,
        plan.bytes,
        plan.seconds_at_throttle
    );
    stretch.finish().await;
}

/// Seconds since the epoch of an RFC 3339 time as central writes it (`2026-11-25T06:17:03Z`).
fn epoch_seconds(text: &str) -> f64 {
    let parsed: k8s_openapi::jiff::Timestamp = text
        .parse()
        .unwrap_or_else(|e| panic!("{text:?} is not a time: {e}"));
    parsed.as_millisecond() as f64 / 1000.0
}

/// The next number of a xorshift64 sequence: bytes no compression shrinks.
fn noise(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Produces `total` bytes of incompressible 64 KiB records round-robin over `partitions`
/// partitions of `topic` (`acks=1`: a fill, not a test of durability).
fn fill(bootstrap: &str, topic: &str, partitions: i32, total: u64) {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "1")
        .set("compression.type", "none")
        .set("linger.ms", "20")
        .set("batch.size", "1048576")
        .set("queue.buffering.max.kbytes", "262144")
        .create()
        .unwrap();
    const SIZE: usize = 64 * 1024;
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut value = vec![0u8; SIZE];
    let mut sent = 0u64;
    let mut n = 0i32;
    while sent < total {
        for chunk in value.chunks_mut(8) {
            chunk.copy_from_slice(&noise(&mut state).to_le_bytes()[..chunk.len()]);
        }
        let mut record = BaseRecord::<(), [u8]>::to(topic)
            .payload(&value[..])
            .partition(n % partitions);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((e, back)) => {
                    assert!(
                        matches!(
                            e,
                            rdkafka::error::KafkaError::MessageProduction(
                                rdkafka::types::RDKafkaErrorCode::QueueFull
                            )
                        ),
                        "{e}"
                    );
                    record = back;
                    producer.poll(Duration::from_millis(50));
                }
            }
        }
        producer.poll(Duration::ZERO);
        sent += SIZE as u64;
        n += 1;
    }
    producer.flush(Duration::from_secs(300)).unwrap();
}

/// Runs `kstretch` with the central cluster's kubeconfig and the test's namespace, off the
/// test's runtime (the producer keeps sending meanwhile).
async fn kstretch(stretch: &Stretch, args: &[&str]) -> (bool, String) {
    let mut command = stretch.kstretch_command(args);
    let output = tokio::task::spawn_blocking(move || command.output().expect("kstretch runs"))
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!("kstretch {}:\n{text}", args.join(" "));
    (output.status.success(), text)
}

/// See [`beta_is_drained_and_undrained_and_a_scale_down_waits_until_the_replicas_moved`].
async fn drained_and_undrained(stretch: &mut Stretch, k: &Kafka) {
    let bootstrap = all_brokers(k);
    create_topic(&bootstrap, "drained", 3, 3).await;
    create_topic(&bootstrap, "bulk", 6, 3).await;
    full_isr(&bootstrap, "drained").await;
    // About 3 MiB, so that a batch at the test's throttle takes a while.
    let bulk: Vec<(String, String)> = (0..3000)
        .map(|i| (format!("bulk-{i}"), "x".repeat(1024)))
        .collect();
    produce(&bootstrap, "bulk", &bulk).await;
    let load = Load::start(&bootstrap, "drained", Duration::from_millis(20));
    wait_for_acks(&load, 50).await;
    let pools: Api<KafkaNodePool> = stretch.api(ALPHA);
    let beta = pools.get("b").await.unwrap().status.unwrap().node_ids[0];

    let (ok, out) = kstretch(stretch, &["drain", "alpha", "--kafka", "live", "--wait"]).await;
    assert!(
        !ok && out.contains("NotEnoughBrokers") && out.contains("only 1 brokers would remain"),
        "{out}"
    );
    let (ok, out) = kstretch(stretch, &["drain", "beta", "--kafka", "live", "--dry-run"]).await;
    assert!(
        ok && out.contains("dry run: ") && out.contains("partition(s) move"),
        "{out}"
    );

    // The drain, throttled, with central killed while its first batch is in flight.
    let before = kstretch_tests::kafka::placement(&bootstrap).unwrap();
    let throttle = "65536";
    let (ok, out) = kstretch(
        stretch,
        &["drain", "beta", "--kafka", "live", "--throttle", throttle],
    )
    .await;
    assert!(ok, "{out}");
    let drain = out.split_whitespace().nth(1).unwrap().to_owned();
    let moving = in_flight(stretch, &drain).await;
    let receiving = moving.status.unwrap().throttled_brokers;
    wait_for("the throttle set on a broker", START_TIMEOUT, || async {
        let rate = broker_config(
            &bootstrap,
            receiving[0],
            "follower.replication.throttled.rate",
        )
        .await;
        if rate.as_deref() == Some(throttle) {
            Seen::Done(())
        } else {
            Seen::NotYet(format!("{rate:?}"))
        }
    })
    .await;
    stretch.stop_central();
    tokio::time::sleep(Duration::from_secs(3)).await;
    stretch.start_central();
    completed(stretch, &drain).await;
    assert_eq!(
        broker_config(
            &bootstrap,
            receiving[0],
            "follower.replication.throttled.rate"
        )
        .await,
        None,
        "the throttle is lifted"
    );
    let drained = kstretch_tests::kafka::placement(&bootstrap).unwrap();
    for ((topic, partition), (replicas, leader)) in &drained {
        assert!(
            !replicas.contains(&beta) && *leader != beta,
            "{topic}-{partition} still on beta's broker {beta}: {replicas:?}, leader {leader}"
        );
        assert_eq!(replicas.len(), before[&(topic.clone(), *partition)].0.len());
    }
    let acked = load.acked();
    wait_for_acks(&load, acked + 50).await;
    let (ok, out) = kstretch(stretch, &["spread", "--kafka", "live", "--dry-run"]).await;
    assert!(
        !ok && out.contains("DrainInEffect") && out.contains("undrain it first"),
        "a spread would refill the drained cluster: {out}"
    );

    // An undrain aborted mid-batch leaves every partition at its replication factor.
    let (ok, out) = kstretch(
        stretch,
        &["undrain", "beta", "--kafka", "live", "--throttle", throttle],
    )
    .await;
    assert!(ok, "{out}");
    let undrain = out.split_whitespace().nth(1).unwrap().to_owned();
    in_flight(stretch, &undrain).await;
    let (ok, out) = kstretch(stretch, &["abort", &undrain, "--wait"]).await;
    assert!(ok && out.contains("were cancelled"), "{out}");
    for ((topic, partition), (replicas, _)) in kstretch_tests::kafka::placement(&bootstrap).unwrap()
    {
        assert_eq!(
            replicas.len(),
            3,
            "{topic}-{partition} after the abort: {replicas:?}"
        );
    }

    let (ok, out) = kstretch(stretch, &["undrain", "beta", "--kafka", "live", "--wait"]).await;
    assert!(ok && out.contains("Completed"), "{out}");
    let after = kstretch_tests::kafka::placement(&bootstrap).unwrap();
    for (partition, (replicas, leader)) in &after {
        assert_eq!(replicas, &before[partition].0, "{partition:?} is not back");
        assert_eq!(
            *leader, replicas[0],
            "{partition:?} is not led by its preferred replica"
        );
    }
    let (ok, out) = kstretch(stretch, &["operations", "--kafka", "live"]).await;
    assert!(
        ok && out.lines().filter(|l| l.contains(" Completed ")).count() == 2
            && out.contains(" Refused ")
            && out.contains(" Aborted ")
            && !out.contains("plan-drain"),
        "{out}"
    );
    spread_across_clusters(stretch, &bootstrap, beta).await;
    let acked = load.acked();
    wait_for_acks(&load, acked + 50).await;
    no_loss(load, &bootstrap, "drained").await;
    // What follows needs a broker holding one known partition only.
    let admin = kstretch_tests::kafka::admin(&bootstrap);
    let deleted = admin
        .delete_topics(
            &["drained", "bulk", "confined"],
            &rdkafka::admin::AdminOptions::new(),
        )
        .await
        .unwrap();
    assert!(deleted.iter().all(Result::is_ok), "{deleted:?}");
    wait_for("the topics deleted", START_TIMEOUT, || async {
        let left = kstretch_tests::kafka::placement(&bootstrap).unwrap();
        if left
            .keys()
            .any(|(t, _)| ["drained", "bulk", "confined"].contains(&t.as_str()))
        {
            Seen::NotYet(format!("{:?}", left.keys()))
        } else {
            Seen::Done(())
        }
    })
    .await;
}

/// A topic placed by hand on alpha's brokers only is named in a `Warning` on the `Kafka`;
/// `kstretch spread` gives each partition a replica on beta's broker `beta` (leaders stay, the
/// records stay) and the warning goes.
async fn spread_across_clusters(stretch: &Stretch, bootstrap: &str, beta: i32) {
    let pools: Api<KafkaNodePool> = stretch.api(ALPHA);
    let alpha = pools.get("a").await.unwrap().status.unwrap().node_ids;
    placed_topic(
        bootstrap,
        "confined",
        &[&[alpha[0], alpha[1]], &[alpha[1], alpha[0]]],
    )
    .await;
    let records: Vec<(String, String)> = (0..200)
        .map(|i| (format!("k{i}"), format!("v{i}")))
        .collect();
    produce(bootstrap, "confined", &records).await;

    let warning = |k: &Kafka| {
        k.status.as_ref().and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.reason.as_deref() == Some("ReplicasInOneCluster"))
                .and_then(|c| c.message.clone())
        })
    };
    poke(stretch).await;
    let k = stretch
        .wait_in_alpha(
            "live",
            "the confined partitions named",
            START_TIMEOUT,
            |k: &Kafka| {
                warning(k).is_some_and(|m| {
                    m.contains("confined-0 (alpha)") && m.contains("confined-1 (alpha)")
                })
            },
        )
        .await;
    assert!(
        warning(&k)
            .unwrap()
            .contains("kstretch spread --kafka live")
    );

    let (ok, out) = kstretch(
        stretch,
        &[
            "spread",
            "--kafka",
            "live",
            "--topic",
            "confined",
            "--dry-run",
        ],
    )
    .await;
    assert!(ok && out.contains("dry run: 2 partition(s) move"), "{out}");
    let before = kstretch_tests::kafka::placement(bootstrap).unwrap();
    let (ok, out) = kstretch(stretch, &["spread", "--kafka", "live", "--wait"]).await;
    assert!(ok && out.contains("Completed"), "{out}");
    let after = kstretch_tests::kafka::placement(bootstrap).unwrap();
    for partition in [0, 1] {
        let key = ("confined".to_owned(), partition);
        let (replicas, leader) = &after[&key];
        assert!(
            replicas.contains(&beta) && replicas.len() == 2,
            "{key:?}: {replicas:?}"
        );
        assert_eq!(*leader, before[&key].1, "{key:?} kept its leader");
    }
    let read = consume(bootstrap, "confined", 2, 200, Duration::from_secs(60));
    assert_eq!(read.len(), 200, "every record is still there");

    poke(stretch).await;
    stretch
        .wait_in_alpha("live", "the warning gone", START_TIMEOUT, |k: &Kafka| {
            warning(k).is_none_or(|m| !m.contains("confined-"))
        })
        .await;
}

/// Makes central reconcile the `Kafka` `live` now (any change does).
async fn poke(stretch: &Stretch) {
    let kafkas: Api<Kafka> = stretch.api(ALPHA);
    let at = format!("{:?}", std::time::SystemTime::now());
    kafkas
        .patch(
            "live",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"test.kstretch.io/poke": at}}})),
        )
        .await
        .unwrap();
}

/// Waits until operation `name` has reassignments in flight.
async fn in_flight(stretch: &Stretch, name: &str) -> KafkaOperation {
    stretch
        .wait_in_alpha(
            name,
            "a batch in flight",
            START_TIMEOUT,
            |o: &KafkaOperation| o.status.as_ref().is_some_and(|s| !s.in_flight.is_empty()),
        )
        .await
}

/// Waits until operation `name` has completed.
async fn completed(stretch: &Stretch, name: &str) -> KafkaOperation {
    stretch
        .wait_in_alpha(
            name,
            "the operation completed",
            START_TIMEOUT,
            |o: &KafkaOperation| {
                o.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Completed")
            },
        )
        .await
}

/// A dynamic broker option as Kafka reports it (rdkafka's admin client).
async fn broker_config(bootstrap: &str, broker: i32, name: &str) -> Option<String> {
    let admin = kstretch_tests::kafka::admin(bootstrap);
    let described = admin
        .describe_configs(
            [&rdkafka::admin::ResourceSpecifier::Broker(broker)],
            &rdkafka::admin::AdminOptions::new(),
        )
        .await
        .unwrap();
    let resource = described.into_iter().next().unwrap().unwrap();
    resource
        .entries
        .into_iter()
        .find(|e| e.name == name && e.source == rdkafka::admin::ConfigSource::DynamicBroker)
        .and_then(|e| e.value)
}

/// The pod's `Ready` condition is true.
fn pod_ready(pod: &Pod) -> bool {
    pod.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

/// Pods of `pods` that run on `alias`'s real node and are ready, by name.
fn ready_on_real_node(pods: &[Pod], alias: &str) -> Vec<String> {
    pods.iter()
        .filter(|p| {
            let node = p.spec.as_ref().and_then(|s| s.node_name.as_deref());
            node == Some(format!("{alias}-real-0").as_str()) && pod_ready(p)
        })
        .filter_map(|p| p.metadata.name.clone())
        .collect()
}

/// kstretch installed with `helm install` as a user installs it: central (two replicas, one
/// leading) in alpha and an agent in each cluster run as pods on the real nodes, from the
/// images packed from this build, with the charts' RBAC, probes and generated link
/// certificates. A stretched Kafka under them becomes Ready and serves across the clusters,
/// and deleting it removes its pods in both clusters.
#[tokio::test]
async fn kstretch_installed_with_its_charts_runs_in_pods_and_runs_a_stretched_kafka() {
    let _one = ONE_AT_A_TIME.lock().await;
    let install = HelmInstall::start("running-helm").await;

    let centrals = install.pods(ALPHA, CENTRAL_RELEASE).await;
    assert_eq!(
        ready_on_real_node(&centrals, ALPHA).len(),
        2,
        "central's pods: {centrals:#?}"
    );
    for alias in [ALPHA, BETA] {
        let agents = install.pods(alias, AGENT_RELEASE).await;
        assert_eq!(
            ready_on_real_node(&agents, alias).len(),
            1,
            "{alias}'s agent: {agents:#?}"
        );
    }
    // One replica leads: it holds the Lease and carries the label the Services select.
    let leader = wait_with_logs(&install, "a central leader", START_TIMEOUT, || async {
        let leaders: Vec<String> = install
            .pods(ALPHA, CENTRAL_RELEASE)
            .await
            .into_iter()
            .filter(|p| {
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("kstretch.io/leader"))
                    == Some(&"true".to_owned())
            })
            .filter_map(|p| p.metadata.name)
            .collect();
        match leaders.as_slice() {
            [one] => Seen::Done(one.clone()),
            other => Seen::NotYet(format!("pods labelled leader: {other:?}")),
        }
    })
    .await;
    let lease = install
        .api::<Lease>(ALPHA)
        .get("kstretch-central")
        .await
        .unwrap();
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity),
        Some(leader),
        "the Lease's holder is the labelled pod"
    );

    install.apply(kafka()).await;
    install
        .apply(pool("a", 2, ALPHA, json!({"type": "ephemeral"})))
        .await;
    install
        .apply(pool("b", 1, BETA, json!({"type": "ephemeral"})))
        .await;
    let kafkas: Api<Kafka> = install.api(ALPHA);
    let k = wait_with_logs(&install, "live to be Ready", START_TIMEOUT, || async {
        match kafkas.get_opt("live").await {
            Ok(Some(k)) if is_ready(&k) => Seen::Done(k),
            other => Seen::NotYet(format!("{other:#?}")),
        }
    })
    .await;
    serves_across_clusters(&k).await;

    // Deleting the Kafka removes its pods in both clusters, through the agents in pods.
    kafkas.delete("live", &Default::default()).await.unwrap();
    wait_with_logs(
        &install,
        "the Kafka's pods to go",
        START_TIMEOUT,
        || async {
            let mut left = Vec::new();
            for alias in [ALPHA, BETA] {
                let pods: Api<Pod> = install.api(alias);
                let listed = pods
                    .list(&ListParams::default().labels("strimzi.io/cluster=live"))
                    .await
                    .unwrap();
                left.extend(listed.items.into_iter().filter_map(|p| p.metadata.name));
            }
            if left.is_empty() {
                Seen::Done(())
            } else {
                Seen::NotYet(format!("still there: {left:?}"))
            }
        },
    )
    .await;
    install.finish().await;
}

/// [`kafka`] with the listeners of Strimzi's `kafka-persistent` example: plain on 9092, TLS on
/// 9093.
fn kafka_persistent_shape() -> Value {
    let mut spec = kafka();
    spec["spec"]["kafka"]["listeners"] = json!([
        {"name": "plain", "port": 9092, "type": "internal", "tls": false},
        {"name": "tls", "port": 9093, "type": "internal", "tls": true}
    ]);
    spec
}

/// Key `key` of `secret` as text.
fn secret_text(secret: &Secret, key: &str) -> String {
    String::from_utf8(secret.data.as_ref().unwrap()[key].0.clone()).unwrap()
}

/// A fresh directory for the test's client files (removed by the test when it passes).
fn client_dir(stretch: &Stretch) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kstretch-{}", stretch.ns));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Client properties for Kafka's own tools over TLS, trusting the PEM CA certificates `ca`.
fn tls_client_config(dir: &std::path::Path, name: &str, ca: &str) -> String {
    let ca_file = dir.join(format!("{name}-ca.crt"));
    std::fs::write(&ca_file, ca).unwrap();
    client_config(
        dir,
        name,
        &[
            ("security.protocol", "SSL".to_owned()),
            ("ssl.truststore.type", "PEM".to_owned()),
            ("ssl.truststore.location", ca_file.display().to_string()),
        ],
    )
}

/// Client properties in `dir`: `lines`, each `key=value` (values escaped as Java reads them).
fn client_config(dir: &std::path::Path, name: &str, lines: &[(&str, String)]) -> String {
    let text: String = lines
        .iter()
        .map(|(k, v)| format!("{k}={}\n", v.replace('\\', "\\\\").replace('\n', "\\n")))
        .collect();
    let path = dir.join(format!("{name}.properties"));
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// Strimzi's `kafka-persistent` example shape (a plain listener on 9092, a TLS one on 9093)
/// is Ready without warnings; Kafka's own clients trusting `ca.crt` of
/// `<cluster>-cluster-ca-cert` produce and consume on 9093, and fail when they trust another
/// CA; the nodes' replication listener refuses plaintext and TLS without a client
/// certificate; no Secret of the member cluster beta holds the CA key, but beta has the CA
/// certificate Secret, whose `ca.p12` Java clients trust.
#[tokio::test]
async fn a_tls_listener_is_served_with_the_cluster_ca_and_nodes_speak_only_mutual_tls() {
    let _one = ONE_AT_A_TIME.lock().await;
    // A listener that presents the user's own certificate (`brokerCertChainAndKey`), issued by
    // a CA of the user's for the addresses clients reach the brokers at.
    let user_ca = kstretch_tests::certs::Pki::new("listener-ca");
    let ips: Vec<std::net::IpAddr> = [ALPHA, BETA]
        .iter()
        .map(|alias| real_node_ip(alias).parse().unwrap())
        .collect();
    let listener_cert = user_ca.server_for_ips("external", &ips);
    let mut shape = kafka_persistent_shape();
    shape["spec"]["kafka"]["listeners"]
        .as_array_mut()
        .unwrap()
        .push(
            json!({"name": "own", "port": 9096, "type": "internal", "tls": true,
            "configuration": {"brokerCertChainAndKey":
                {"secretName": "listener-cert", "certificate": "tls.crt", "key": "tls.key"}}}),
        );
    let (stretch, k) = live_kafka_of_with_secret(
        "running-tls",
        shape,
        json!({"type": "ephemeral"}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "listener-cert"},
               "stringData": {"tls.crt": listener_cert.cert_pem, "tls.key": listener_cert.key_pem}}),
    )
    .await;
    let conditions = &k.status.as_ref().unwrap().conditions;
    assert!(
        conditions.iter().all(|c| c.type_ != "Warning"),
        "Ready without warnings: {conditions:#?}"
    );

    let secrets: Api<Secret> = stretch.api(ALPHA);
    let data = secret_text;
    let ca = data(
        &secrets.get("live-cluster-ca-cert").await.unwrap(),
        "ca.crt",
    );
    let ca_key = data(&secrets.get("live-cluster-ca").await.unwrap(), "ca.key");
    let dir = client_dir(&stretch);
    let trusted = tls_client_config(&dir, "trusted", &ca);
    let tls_alpha = listener_at(&k, "tls", &real_node_ip(ALPHA));
    let tls_beta = listener_at(&k, "tls", &real_node_ip(BETA));

    // Kafka's own clients over TLS: a topic, 100 records produced (acks=all) through alpha's
    // brokers and consumed through beta's.
    run_kafka_tool(
        "org.apache.kafka.tools.TopicCommand",
        &[
            "--bootstrap-server",
            &tls_alpha,
            "--command-config",
            &trusted,
            "--create",
            "--topic",
            "secured",
            "--partitions",
            "3",
            "--replication-factor",
            "3",
        ],
    );
    let produced = run_kafka_tool(
        "org.apache.kafka.tools.ProducerPerformance",
        &[
            "--topic",
            "secured",
            "--num-records",
            "100",
            "--record-size",
            "64",
            "--throughput",
            "-1",
            "--producer-props",
            &format!("bootstrap.servers={tls_alpha}"),
            "acks=all",
            "--producer.config",
            &trusted,
        ],
    );
    assert!(produced.contains("100 records sent"), "{produced}");
    let consumed = run_kafka_tool(
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        &[
            "--bootstrap-server",
            &tls_beta,
            "--consumer.config",
            &trusted,
            "--topic",
            "secured",
            "--from-beginning",
            "--max-messages",
            "100",
            "--timeout-ms",
            "60000",
        ],
    );
    assert_eq!(consumed.lines().count(), 100, "records read back over TLS");

    // A client that trusts another CA does not get in.
    let other = kstretch_tests::certs::Pki::new("untrusted");
    let untrusted = tls_client_config(&dir, "untrusted", &other.ca_pem());
    let refused = kafka_tool(
        "org.apache.kafka.tools.TopicCommand",
        &[
            "--bootstrap-server",
            &tls_alpha,
            "--command-config",
            &untrusted,
            "--list",
        ],
    );
    assert!(
        refused.is_err(),
        "a client trusting another CA listed topics: {refused:?}"
    );

    // The listener with the user's certificate: a client trusting only the user's CA gets in.
    let own = tls_client_config(&dir, "own", &user_ca.ca_pem());
    run_kafka_tool(
        "org.apache.kafka.tools.TopicCommand",
        &[
            "--bootstrap-server",
            &listener_at(&k, "own", &real_node_ip(BETA)),
            "--command-config",
            &own,
            "--list",
        ],
    );

    // The replication listener, as reached from outside its pod: no plaintext, and TLS only
    // with a certificate of the cluster CA.
    let services: Api<k8s_openapi::api::core::v1::Service> = stretch.api(ALPHA);
    let service = services.get("live-a-0").await.unwrap();
    let node_port = service
        .spec
        .unwrap()
        .ports
        .unwrap()
        .into_iter()
        .find(|p| p.name.as_deref() == Some("tcp-replication"))
        .and_then(|p| p.node_port)
        .unwrap();
    let replication = format!("{}:{node_port}", real_node_ip(ALPHA));
    let r = replication.clone();
    let plaintext = tokio::task::spawn_blocking(move || broker_ids(&r))
        .await
        .unwrap();
    assert!(
        plaintext.is_err(),
        "plaintext metadata from the replication port: {plaintext:?}"
    );
    let anonymous = kafka_tool(
        "org.apache.kafka.tools.TopicCommand",
        &[
            "--bootstrap-server",
            &replication,
            "--command-config",
            &trusted,
            "--list",
        ],
    );
    assert!(
        anonymous.is_err(),
        "TLS without a client certificate was let in: {anonymous:?}"
    );

    // The member cluster beta has its node's certificate and the CA certificate, never the
    // CA key.
    let beta: Api<Secret> = stretch.api(BETA);
    let in_beta = beta.list(&ListParams::default()).await.unwrap().items;
    let node = in_beta
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some("live-b-2"))
        .expect("the node's Secret in beta");
    assert_eq!(data(node, "ca.crt"), ca);
    for secret in &in_beta {
        for (key, value) in secret.data.iter().flatten() {
            assert!(
                key != "ca.key" && !String::from_utf8_lossy(&value.0).contains(ca_key.trim()),
                "Secret {:?} in beta holds the CA key",
                secret.metadata.name
            );
        }
    }

    // Clients in beta find the CA certificate there too, as a PKCS#12 trust store as well.
    let copy = in_beta
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some("live-cluster-ca-cert"))
        .expect("the CA certificate Secret in beta");
    assert_eq!(data(copy, "ca.crt"), ca);
    let p12 = dir.join("ca.p12");
    std::fs::write(&p12, &copy.data.as_ref().unwrap()["ca.p12"].0).unwrap();
    let from_p12 = client_config(
        &dir,
        "p12",
        &[
            ("security.protocol", "SSL".to_owned()),
            ("ssl.truststore.type", "PKCS12".to_owned()),
            ("ssl.truststore.location", p12.display().to_string()),
            ("ssl.truststore.password", data(copy, "ca.password")),
        ],
    );
    let listed = run_kafka_tool(
        "org.apache.kafka.tools.TopicCommand",
        &[
            "--bootstrap-server",
            &tls_beta,
            "--command-config",
            &from_p12,
            "--list",
        ],
    );
    assert!(listed.contains("secured"), "{listed}");

    // Deleted by the user, the Kafka takes the CA and certificates kstretch generated along.
    let kafkas: Api<Kafka> = stretch.api(ALPHA);
    kafkas.delete("live", &Default::default()).await.unwrap();
    wait_for(
        "the generated Secrets to go with the Kafka",
        START_TIMEOUT,
        || async {
            let mut left = Vec::new();
            for name in [
                "live-cluster-ca-cert",
                "live-cluster-ca",
                "live-clients-ca-cert",
                "live-clients-ca",
                "live-kstretch-node-certs",
            ] {
                if secrets.get_opt(name).await.unwrap().is_some() {
                    left.push(name);
                }
            }
            if left.is_empty() {
                Seen::Done(())
            } else {
                Seen::NotYet(format!("left: {left:?}"))
            }
        },
    )
    .await;
    stretch.finish().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `kafka-persistent` shape with a SCRAM listener (9094), a listener that authenticates by
/// certificate (9095) and simple authorization. The plain and TLS listeners admit anonymous
/// clients, which the test makes a super user so its load and tools keep working.
fn secured_kafka() -> Value {
    let mut spec = kafka_persistent_shape();
    let listeners = spec["spec"]["kafka"]["listeners"].as_array_mut().unwrap();
    listeners.push(
        json!({"name": "scram", "port": 9094, "type": "internal", "tls": false,
        "authentication": {"type": "scram-sha-512"}}),
    );
    listeners.push(
        json!({"name": "mtls", "port": 9095, "type": "internal", "tls": true,
        "authentication": {"type": "tls"}}),
    );
    spec["spec"]["kafka"]["authorization"] = json!({"type": "simple", "superUsers": ["ANONYMOUS"]});
    spec
}

/// A `KafkaUser` of `live` authenticating by `authentication`, who may produce to and consume
/// from `topic` only.
fn kafka_user(name: &str, authentication: &str, topic: &str) -> Value {
    json!({
        "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaUser",
        "metadata": {"name": name, "labels": {"strimzi.io/cluster": "live"}},
        "spec": {
            "authentication": {"type": authentication},
            "authorization": {"type": "simple", "acls": [
                {"resource": {"type": "topic", "name": topic},
                 "operations": ["Read", "Write", "Describe"]},
                {"resource": {"type": "group", "name": "*"}, "operations": ["Read"]}
            ]}
        }
    })
}

/// Kafka's console consumer reading up to `count` records of `topic` at `bootstrap` with the
/// client properties `config`: the records it printed (ProducerPerformance's payloads, upper
/// case letters) and everything it wrote, for the assertion messages.
fn consume_as(
    bootstrap: &str,
    config: &str,
    topic: &str,
    count: usize,
    timeout_ms: u32,
) -> (usize, String) {
    let result = kafka_tool(
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        &[
            "--bootstrap-server",
            bootstrap,
            "--consumer.config",
            config,
            "--topic",
            topic,
            "--from-beginning",
            "--max-messages",
            &count.to_string(),
            "--timeout-ms",
            &timeout_ms.to_string(),
        ],
    );
    let output = match result {
        Ok(out) | Err(out) => out,
    };
    let records = output
        .lines()
        .filter(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_uppercase()))
        .count();
    (records, output)
}

/// Asserts that the client `config` reads `count` records of `topic`.
fn reads(bootstrap: &str, config: &str, topic: &str, count: usize) {
    let (records, output) = consume_as(bootstrap, config, topic, count, 60_000);
    assert_eq!(
        records, count,
        "records of {topic} read with {config}: {output}"
    );
}

/// Asserts that the client `config` reads nothing of `topic`, and that Kafka said why
/// (`because`, a part of the client's error).
fn refused(bootstrap: &str, config: &str, topic: &str, because: &str) {
    let (records, output) = consume_as(bootstrap, config, topic, 1, 20_000);
    assert_eq!(records, 0, "{config} read {topic}: {output}");
    assert!(
        output.contains(because),
        "{config} on {topic}: no {because:?} in {output}"
    );
}

/// Produces `count` records to `topic` with Kafka's producer (acks=all) and `config`.
fn produced(bootstrap: &str, config: &str, topic: &str, count: usize) -> String {
    run_kafka_tool(
        "org.apache.kafka.tools.ProducerPerformance",
        &[
            "--topic",
            topic,
            "--num-records",
            &count.to_string(),
            "--record-size",
            "32",
            "--throughput",
            "-1",
            "--producer-props",
            &format!("bootstrap.servers={bootstrap}"),
            "acks=all",
            "--producer.config",
            config,
        ],
    )
}

/// `KafkaUser`s with Kafka's own clients as the judge: a `tls` user (its Secret's `user.p12`)
/// and a `scram-sha-512` user (its Secret's `sasl.jaas.config`) produce and consume their own
/// topic and cannot read the other's; a wrong password and a certificate of another CA are
/// refused; deleting a user revokes its access.
async fn users_are_authenticated_and_authorized(stretch: &Stretch, k: &Kafka) {
    create_topic(&all_brokers(k), "alice-topic", 1, 3).await;
    create_topic(&all_brokers(k), "bob-topic", 1, 3).await;
    stretch
        .apply(kafka_user("alice", "tls", "alice-topic"))
        .await;
    stretch
        .apply(kafka_user("bob", "scram-sha-512", "bob-topic"))
        .await;
    let users: Api<kstretch_api::KafkaUser> = stretch.api(ALPHA);
    for (name, username) in [("alice", "CN=alice"), ("bob", "bob")] {
        let user = wait_for(
            &format!("KafkaUser {name} Ready"),
            START_TIMEOUT,
            || async {
                let u = users.get(name).await.unwrap();
                let ready = u.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True")
                });
                if ready {
                    Seen::Done(u)
                } else {
                    Seen::NotYet(format!("{:?}", u.status))
                }
            },
        )
        .await;
        let status = user.status.unwrap();
        assert_eq!(status.username.as_deref(), Some(username));
        assert_eq!(status.secret.as_deref(), Some(name));
    }

    let secrets: Api<Secret> = stretch.api(ALPHA);
    let dir = client_dir(stretch);
    let cluster_ca = secret_text(
        &secrets.get("live-cluster-ca-cert").await.unwrap(),
        "ca.crt",
    );
    let ca_file = dir.join("cluster-ca.crt");
    std::fs::write(&ca_file, &cluster_ca).unwrap();
    let trust = [
        ("ssl.truststore.type", "PEM".to_owned()),
        ("ssl.truststore.location", ca_file.display().to_string()),
    ];

    // alice: mutual TLS with the keystore of her Secret.
    let alice_secret = secrets.get("alice").await.unwrap();
    let p12 = dir.join("alice.p12");
    std::fs::write(&p12, &alice_secret.data.as_ref().unwrap()["user.p12"].0).unwrap();
    let mut alice_lines = vec![("security.protocol", "SSL".to_owned())];
    alice_lines.extend(trust.clone());
    alice_lines.extend([
        ("ssl.keystore.type", "PKCS12".to_owned()),
        ("ssl.keystore.location", p12.display().to_string()),
        (
            "ssl.keystore.password",
            secret_text(&alice_secret, "user.password"),
        ),
    ]);
    let alice = client_config(&dir, "alice", &alice_lines);
    let mtls = listener_at(k, "mtls", &real_node_ip(ALPHA));
    let out = produced(&mtls, &alice, "alice-topic", 20);
    assert!(out.contains("20 records sent"), "{out}");
    reads(&mtls, &alice, "alice-topic", 20);

    // bob: SCRAM-SHA-512 with the JAAS line of his Secret.
    let bob_secret = secrets.get("bob").await.unwrap();
    let bob = client_config(
        &dir,
        "bob",
        &[
            ("security.protocol", "SASL_PLAINTEXT".to_owned()),
            ("sasl.mechanism", "SCRAM-SHA-512".to_owned()),
            (
                "sasl.jaas.config",
                secret_text(&bob_secret, "sasl.jaas.config"),
            ),
        ],
    );
    let scram = listener_at(k, "scram", &real_node_ip(BETA));
    let out = produced(&scram, &bob, "bob-topic", 20);
    assert!(out.contains("20 records sent"), "{out}");
    reads(&scram, &bob, "bob-topic", 20);

    // The ACLs: neither reads the other's topic.
    refused(&mtls, &alice, "bob-topic", "TopicAuthorization");
    refused(&scram, &bob, "alice-topic", "TopicAuthorization");

    // A wrong password and a certificate of another CA (with alice's name) get nowhere.
    let wrong = client_config(
        &dir,
        "wrong",
        &[
            ("security.protocol", "SASL_PLAINTEXT".to_owned()),
            ("sasl.mechanism", "SCRAM-SHA-512".to_owned()),
            (
                "sasl.jaas.config",
                "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"bob\" password=\"not-his\";".to_owned(),
            ),
        ],
    );
    refused(&scram, &wrong, "bob-topic", "Authentication failed");
    let other = kstretch_tests::certs::Pki::new("other-clients").client_with_cn("alice");
    let mut forged_lines = vec![("security.protocol", "SSL".to_owned())];
    forged_lines.extend(trust.clone());
    forged_lines.extend([
        ("ssl.keystore.type", "PEM".to_owned()),
        ("ssl.keystore.certificate.chain", other.cert_pem.clone()),
        ("ssl.keystore.key", other.key_pem.clone()),
    ]);
    let forged = client_config(&dir, "forged", &forged_lines);
    refused(&mtls, &forged, "alice-topic", "SslAuthenticationException");

    // Deleting bob revokes his credential: his own Secret no longer gets him in.
    users.delete("bob", &Default::default()).await.unwrap();
    wait_for("KafkaUser bob gone", START_TIMEOUT, || async {
        match users.get_opt("bob").await.unwrap() {
            None => Seen::Done(()),
            Some(u) => Seen::NotYet(format!("finalizers {:?}", u.finalizers())),
        }
    })
    .await;
    refused(&scram, &bob, "bob-topic", "Authentication failed");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `KafkaConnect` of the secured cluster whose workers trust the cluster CA and authenticate
/// with a `KafkaUser`'s certificate: the worker configuration and the Secret central ships to
/// the workers' cluster, booted as a real worker, join the cluster over mutual TLS under the
/// user's ACLs (the worker creates its storage topics).
async fn connect_workers_reach_the_secured_kafka(stretch: &Stretch, k: &Kafka) {
    let all = |kind: &str| {
        json!({"resource": {"type": kind, "name": "connect-", "patternType": "prefix"},
               "operations": ["All"]})
    };
    stretch
        .apply(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaUser",
            "metadata": {"name": "connect", "labels": {"strimzi.io/cluster": "live"}},
            "spec": {"authentication": {"type": "tls"},
                     "authorization": {"type": "simple", "acls": [all("topic"), all("group"),
                        {"resource": {"type": "cluster"},
                         "operations": ["Describe", "DescribeConfigs"]}]}}
        }))
        .await;
    let secrets: Api<Secret> = stretch.api(ALPHA);
    wait_for("the connect user's Secret", START_TIMEOUT, || async {
        match secrets.get_opt("connect").await.unwrap() {
            Some(_) => Seen::Done(()),
            None => Seen::NotYet(String::new()),
        }
    })
    .await;
    stretch
        .apply(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaConnect",
            "metadata": {"name": "secure"},
            "spec": {
                "replicas": 0,
                "bootstrapServers": listener_at(k, "mtls", &real_node_ip(ALPHA)),
                "groupId": "connect-group", "configStorageTopic": "connect-configs",
                "statusStorageTopic": "connect-status", "offsetStorageTopic": "connect-offsets",
                "tls": {"trustedCertificates":
                    [{"secretName": "live-cluster-ca-cert", "certificate": "ca.crt"}]},
                "authentication": {"type": "tls", "certificateAndKey":
                    {"secretName": "connect", "certificate": "user.crt", "key": "user.key"}},
                "config": {"config.storage.replication.factor": 3,
                           "offset.storage.replication.factor": 3,
                           "status.storage.replication.factor": 3}
            }
        }))
        .await;
    let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> = stretch.api(ALPHA);
    let (generated, shipped) = wait_for(
        "the workers' configuration and Secret",
        START_TIMEOUT,
        || async {
            let cm = config_maps.get_opt("secure-connect-config").await.unwrap();
            let secret = secrets.get_opt("secure-connect-security").await.unwrap();
            match (cm, secret) {
                (Some(cm), Some(secret)) => Seen::Done((
                    cm.data.unwrap_or_default()["kafka-connect.properties"].clone(),
                    secret
                        .data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, v.0))
                        .collect::<BTreeMap<String, Vec<u8>>>(),
                )),
                other => Seen::NotYet(format!("{:?}", (other.0.is_some(), other.1.is_some()))),
            }
        },
    )
    .await;
    assert_eq!(
        shipped.keys().collect::<Vec<_>>(),
        ["ca.crt", "user.crt", "user.key"]
    );
    assert!(generated.contains("security.protocol=SSL"), "{generated}");
    let dir = client_dir(stretch).join("connect");
    let (mut worker, _url) = kstretch_tests::connect::boot_worker(&generated, &dir, &shipped).await;
    let bootstrap = all_brokers(k);
    wait_for("the workers' storage topics", START_TIMEOUT, || async {
        let topics = kstretch_tests::kafka::topic_names(&bootstrap).unwrap_or_default();
        if ["connect-configs", "connect-status", "connect-offsets"]
            .iter()
            .all(|t| topics.contains(*t))
        {
            Seen::Done(())
        } else {
            Seen::NotYet(worker.log_tail(20))
        }
    })
    .await;
    worker.stop();
}

/// A secured cluster (SCRAM and certificate listeners, simple authorization) serves its
/// `KafkaUser`s (see [`users_are_authenticated_and_authorized`]) and Connect workers (see
/// [`connect_workers_reach_the_secured_kafka`]); then
/// `strimzi.io/force-renew` on `live-cluster-ca-cert` of the running cluster while an idempotent
/// producer with `acks=all` sends: a new CA certificate of the same key (generation 1), the old
/// one kept as `ca-<expiry>.crt`, every node rolled one at a time to trust both, no failed
/// send, no lost acknowledged record; a client trusting only the new certificate connects.
#[tokio::test]
async fn users_are_served_and_a_forced_ca_renewal_rolls_the_nodes_and_loses_no_acknowledged_record()
{
    let _one = ONE_AT_A_TIME.lock().await;
    let (stretch, k) = live_kafka_of("running-renew", secured_kafka(), persistent(), vec![]).await;
    users_are_authenticated_and_authorized(&stretch, &k).await;
    connect_workers_reach_the_secured_kafka(&stretch, &k).await;

    let bootstrap = all_brokers(&k);
    create_topic(&bootstrap, "renewed", 3, 3).await;
    full_isr(&bootstrap, "renewed").await;
    let load = Load::start(&bootstrap, "renewed", Duration::from_millis(20));
    wait_for_acks(&load, 50).await;

    let secrets: Api<Secret> = stretch.api(ALPHA);
    let old = secrets.get("live-cluster-ca-cert").await.unwrap();
    let text = secret_text;
    let old_ca = text(&old, "ca.crt");
    let before = pod_states(&stretch).await;
    secrets
        .patch(
            "live-cluster-ca-cert",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"strimzi.io/force-renew": "true"}}})),
        )
        .await
        .unwrap();
    // Central looks at the CA in every reconciliation; a change of the Kafka starts one now
    // rather than at the next periodic one.
    let kafkas: Api<Kafka> = stretch.api(ALPHA);
    kafkas
        .patch(
            "live",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"kstretch.test/nudge": "1"}}})),
        )
        .await
        .unwrap();

    let renewed = wait_for("the renewed CA certificate", START_TIMEOUT, || async {
        let s = secrets.get("live-cluster-ca-cert").await.unwrap();
        match s
            .annotations()
            .get("strimzi.io/ca-cert-generation")
            .map(String::as_str)
        {
            Some("1") => Seen::Done(s),
            other => Seen::NotYet(format!("generation {other:?}")),
        }
    })
    .await;
    assert!(!renewed.annotations().contains_key("strimzi.io/force-renew"));
    let new_ca = text(&renewed, "ca.crt");
    assert_ne!(new_ca, old_ca);
    let kept: Vec<&String> = renewed
        .data
        .as_ref()
        .unwrap()
        .keys()
        .filter(|k| k.starts_with("ca-") && k.ends_with(".crt"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(text(&renewed, kept[0]), old_ca);

    // Every node restarts, one at a time, to trust both certificates.
    rolled_one_at_a_time(&stretch, &before).await;
    let k: Kafka = stretch
        .wait_in_alpha("live", "Ready after the renewal", START_TIMEOUT, is_ready)
        .await;
    let acked = load.acked();
    wait_for_acks(&load, acked + 50).await;
    no_loss(load, &bootstrap, "renewed").await;

    let dir = client_dir(&stretch);
    let only_new = tls_client_config(&dir, "new", &new_ca);
    run_kafka_tool(
        "org.apache.kafka.tools.TopicCommand",
        &[
            "--bootstrap-server",
            &listener_at(&k, "tls", &real_node_ip(BETA)),
            "--command-config",
            &only_new,
            "--list",
        ],
    );
    stretch.finish().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs one of the environment's scripts (`tests/env/<script>`) and fails with its output.
fn env_script(script: &str, args: &[&str]) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("env")
        .join(script);
    let output = std::process::Command::new(&path)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        output.status.success(),
        "{} {args:?} failed:\n{}{}",
        path.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// While it lives, a cluster is lost; a test that fails meanwhile brings it back, so the
/// environment is whole for what runs next.
struct ClusterLost(&'static str);

impl ClusterLost {
    fn now(alias: &'static str) -> ClusterLost {
        env_script("lose.sh", &[alias]);
        ClusterLost(alias)
    }

    fn back(self) {
        std::mem::forget(self);
        env_script("up.sh", &[]);
    }
}

impl Drop for ClusterLost {
    fn drop(&mut self) {
        eprintln!(
            "bringing cluster {} back after a failure: tests/env/up.sh",
            self.0
        );
        env_script("up.sh", &[]);
    }
}

/// (partition, replicas, ISR) of every partition of `topic`, as rdkafka reads Kafka's metadata.
fn placement(bootstrap: &str, topic: &str) -> Vec<(i32, Vec<i32>, Vec<i32>)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let metadata = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    let mut out: Vec<_> = metadata.topics()[0]
        .partitions()
        .iter()
        .map(|p| (p.id(), p.replicas().to_vec(), p.isr().to_vec()))
        .collect();
    out.sort();
    out
}

/// Cluster beta is lost for good (its node, pods and control plane stopped) under an
/// idempotent producer whose partitions each kept two replicas in alpha: writes go on. `kstretch
/// forget` refuses a cluster whose agent is connected and, off a terminal, asks for `--yes`;
/// then it forgets beta: every partition with a replica in beta gets it back in alpha (one below
/// `min.insync.replicas` too), the one whose only replica was there is reported lost, beta's
/// node is no longer registered and its controller is no voter (Kafka's own tools are the
/// judge). Beta then comes back on the data it kept: its agent deletes the forgotten Kafka's
/// pods there and nothing of it registers again. No acknowledged record is lost.
#[tokio::test]
#[ignore = "stops a whole cluster: scripts/e2e.sh runs it alone, after everything else"]
async fn cluster_lost_beta_is_forgotten_and_its_return_brings_nothing_back() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut extra = pool("x", 1, ALPHA, persistent());
    extra["spec"]["roles"] = json!(["broker"]);
    let (mut stretch, k) = live_kafka_with("running-lost", persistent(), vec![extra]).await;
    let pools: Api<KafkaNodePool> = stretch.api(ALPHA);
    let mut ids = BTreeMap::new();
    for name in ["a", "b", "x"] {
        let pool = pools.get(name).await.unwrap();
        ids.insert(name, pool.status.unwrap().node_ids);
    }
    let (a0, a1, b, x) = (ids["a"][0], ids["a"][1], ids["b"][0], ids["x"][0]);
    let bootstrap = all_brokers(&k);
    let in_alpha = bootstrap_at(&k, &real_node_ip(ALPHA));
    placed_topic(
        &bootstrap,
        "kept",
        &[&[a0, a1, b], &[b, a0, x], &[a1, x, b]],
    )
    .await;
    placed_topic(&bootstrap, "below", &[&[b, a0]]).await;
    placed_topic(&bootstrap, "gone", &[&[b]]).await;
    full_isr(&bootstrap, "kept").await;
    let load = Load::start(&in_alpha, "kept", Duration::from_millis(20));
    wait_for_acks(&load, 100).await;

    stretch.stop_agent(BETA);
    let lost = ClusterLost::now(BETA);
    let at_loss = load.acked();
    wait_for_acks(&load, at_loss + 300).await;

    let (ok, out) = kstretch(&stretch, &["forget", ALPHA, "--kafka", "live", "--yes"]).await;
    assert!(!ok && out.contains("is connected"), "{out}");
    let (ok, out) = kstretch(&stretch, &["forget", BETA, "--kafka", "live"]).await;
    assert!(!ok && out.contains("add --yes"), "{out}");
    let (ok, out) = kstretch(
        &stretch,
        &["forget", BETA, "--kafka", "live", "--yes", "--wait"],
    )
    .await;
    assert!(ok && out.contains("forgotten by Kafka live"), "{out}");

    let alpha: BTreeSet<i32> = [a0, a1, x].into();
    for topic in ["kept", "below"] {
        let placed = placement(&in_alpha, topic);
        for (partition, replicas, isr) in &placed {
            let want = if topic == "kept" { 3 } else { 2 };
            assert_eq!(replicas.len(), want, "{topic}-{partition}: {placed:?}");
            assert!(replicas.iter().all(|r| alpha.contains(r)), "{placed:?}");
            assert!(!isr.is_empty(), "{topic}-{partition}: {placed:?}");
        }
    }
    let k: Kafka = stretch
        .wait_in_alpha("live", "beta's node out of Kafka", START_TIMEOUT, |k| {
            warning(k, "PartitionsLost").is_some() && warning(k, "ClusterForgotten").is_none()
        })
        .await;
    let said = warning(&k, "PartitionsLost").unwrap();
    assert!(said.contains("gone-0") && !said.contains("kept"), "{said}");
    only_registered(&in_alpha, &alpha, "beta's broker unregistered").await;
    wait_for(
        "beta's controller out of the voters",
        START_TIMEOUT,
        || async {
            let voters: BTreeSet<i32> = quorum_by_kafkas_tool(&in_alpha)
                .into_iter()
                .filter(|(_, _, status)| status == "Leader" || status == "Follower")
                .map(|(id, _, _)| id)
                .collect();
            if voters == [a0, a1].into() {
                Seen::Done(())
            } else {
                Seen::NotYet(format!("voters: {voters:?}"))
            }
        },
    )
    .await;
    let b_status = pools.get("b").await.unwrap().status.unwrap();
    assert!(b_status.node_ids.is_empty(), "{b_status:?}");
    let more = load.acked();
    wait_for_acks(&load, more + 100).await;

    // Beta comes back on what it kept: the forgotten Kafka's pods there are deleted.
    lost.back();
    stretch.start_agent(BETA);
    wait_for(
        "beta to run none of the forgotten Kafka's pods",
        START_TIMEOUT,
        || async {
            let pods: Api<Pod> = stretch.api(BETA);
            match pods.list(&ListParams::default()).await {
                Ok(list) if list.items.is_empty() => Seen::Done(()),
                Ok(list) => Seen::NotYet(format!(
                    "pods: {:?}\n{}",
                    list.items.iter().map(|p| p.name_any()).collect::<Vec<_>>(),
                    stretch.logs()
                )),
                Err(e) => Seen::NotYet(e.to_string()),
            }
        },
    )
    .await;
    only_registered(&in_alpha, &alpha, "nothing of beta registered again").await;
    no_loss(load, &in_alpha, "kept").await;
    stretch.finish().await;
}

/// Cluster beta, which runs two of the three controllers (the quorum's majority), is lost for
/// good under an idempotent `acks=all` producer writing through alpha. Without a quorum
/// nothing in Kafka can change: a recovery is refused while beta is not forgotten, and the
/// forget waits, saying why (`QuorumMajorityLost`). `kstretch recover-quorum` (refused off a
/// terminal without `--yes`; a dry run names the survivor) then rebuilds the quorum from
/// alpha's controller: central restarts its pod with the recovery before Kafka starts, the
/// node leads alone, partitions left without a leader are elected uncleanly, and the forget
/// completes. Kafka's own tools list only alpha's voter and brokers, and beta's pods are
/// deleted when it comes back.
///
/// The data loss this implies, stated: what only beta's controllers had written to the
/// metadata log is gone (here nothing: no metadata changed in the last moments before the
/// loss); `gone`, whose only replica was in beta, is offline for good; a partition elected
/// uncleanly loses what its new leader had not replicated, but with `acks=all` and
/// `min.insync.replicas` 2 every acknowledged record was on its alpha replica, so no
/// acknowledged record is lost (checked). Sends made while no controller could shrink an ISR
/// fail instead of being acknowledged: unavailability, not loss.
#[tokio::test]
#[ignore = "stops a whole cluster: scripts/e2e.sh runs it alone, after everything else"]
async fn cluster_lost_with_the_quorum_majority_is_rebuilt_from_the_survivor() {
    let _one = ONE_AT_A_TIME.lock().await;
    let started = std::time::Instant::now();
    let stage = |what: &str| eprintln!("[{:>4} s] {what}", started.elapsed().as_secs());
    // The recovery runs in a container of the agent's image on alpha's real node.
    kstretch_tests::helm::import_images();
    let mut k = kafka();
    k["spec"]["kafka"]["config"] = json!({
        "default.replication.factor": 2, "min.insync.replicas": 2,
        "offsets.topic.replication.factor": 2, "transaction.state.log.replication.factor": 2,
        "transaction.state.log.min.isr": 2,
        "num.network.threads": 2, "num.io.threads": 2, "background.threads": 2
    });
    let mut x = pool("x", 1, ALPHA, persistent());
    x["spec"]["roles"] = json!(["broker"]);
    let mut stretch = Stretch::start("running-recover", &[]).await;
    stretch.delete_namespaces_on_panic();
    stretch.apply(k).await;
    // The survivor's pod stops for the recovery without a quorum to shut down cleanly with:
    // its grace period is time spent waiting.
    let mut a = pool("a", 1, ALPHA, persistent());
    a["spec"]["template"]["pod"]["terminationGracePeriodSeconds"] = json!(5);
    stretch.apply(a).await;
    stretch.apply(pool("b", 2, BETA, persistent())).await;
    stretch.apply(x).await;
    let k: Kafka = stretch
        .wait_in_alpha("live", "Ready on real pods", START_TIMEOUT, is_ready)
        .await;
    let pools: Api<KafkaNodePool> = stretch.api(ALPHA);
    let mut ids = BTreeMap::new();
    for name in ["a", "b", "x"] {
        ids.insert(
            name,
            pools.get(name).await.unwrap().status.unwrap().node_ids,
        );
    }
    let (a0, b0, b1, x0) = (ids["a"][0], ids["b"][0], ids["b"][1], ids["x"][0]);
    let bootstrap = all_brokers(&k);
    let in_alpha = bootstrap_at(&k, &real_node_ip(ALPHA));
    placed_topic(&bootstrap, "kept", &[&[a0, b0], &[b1, x0], &[x0, a0]]).await;
    placed_topic(&bootstrap, "gone", &[&[b0]]).await;
    full_isr(&bootstrap, "kept").await;
    let load = Load::start(&in_alpha, "kept", Duration::from_millis(20));
    wait_for_acks(&load, 100).await;
    stage("Ready, producing");

    stretch.stop_agent(BETA);
    let lost = ClusterLost::now(BETA);
    stage("beta lost");
    let (ok, out) = kstretch(
        &stretch,
        &["recover-quorum", "--kafka", "live", "--yes", "--wait"],
    )
    .await;
    assert!(!ok && out.contains("QuorumMajoritySurvives"), "{out}");
    let (ok, out) = kstretch(&stretch, &["forget", BETA, "--kafka", "live", "--yes"]).await;
    assert!(ok, "{out}");
    let ops: Api<KafkaOperation> = stretch.api(ALPHA);
    wait_for("the forget to wait for a quorum", START_TIMEOUT, || async {
        let said = ops
            .get_opt("live-forget-beta")
            .await
            .ok()
            .flatten()
            .and_then(|o| {
                o.status?
                    .conditions
                    .into_iter()
                    .find(|c| c.type_ == "Ready")
            });
        match said {
            Some(c) if c.reason.as_deref() == Some("QuorumMajorityLost") => Seen::Done(()),
            other => Seen::NotYet(format!("{other:?}")),
        }
    })
    .await;
    let k: Kafka = stretch
        .wait_in_alpha(
            "live",
            "the Kafka to say its quorum is lost",
            START_TIMEOUT,
            |k| {
                ready_condition(k)
                    .is_some_and(|c| c.reason.as_deref() == Some("QuorumMajorityLost"))
            },
        )
        .await;
    let said = ready_condition(&k)
        .and_then(|c| c.message.clone())
        .unwrap_or_default();
    assert!(
        said.contains("kstretch recover-quorum --kafka live"),
        "{said}"
    );
    stage("the forget and the Kafka wait for a quorum");
    let (ok, out) = kstretch(
        &stretch,
        &["recover-quorum", "--kafka", "live", "--dry-run"],
    )
    .await;
    assert!(
        ok && out.contains(&format!(
            "from node {a0} (pod live-a-{a0} in cluster alpha)"
        )),
        "{out}"
    );
    let (ok, out) = kstretch(&stretch, &["recover-quorum", "--kafka", "live"]).await;
    assert!(!ok && out.contains("add --yes"), "{out}");
    let (ok, out) = kstretch(
        &stretch,
        &["recover-quorum", "--kafka", "live", "--yes", "--wait"],
    )
    .await;
    assert!(
        ok && out.contains(&format!("rebuilt from node {a0}")),
        "{out}"
    );

    stage("quorum rebuilt");
    let voters: BTreeSet<i32> = quorum_by_kafkas_tool(&in_alpha)
        .into_iter()
        .filter(|(_, _, status)| status == "Leader" || status == "Follower")
        .map(|(id, _, _)| id)
        .collect();
    assert_eq!(voters, [a0].into(), "Kafka's tool lists the voters");
    let alpha: BTreeSet<i32> = [a0, x0].into();
    let kafkas: Api<Kafka> = stretch.api(ALPHA);
    let k: Kafka = wait_for(
        "beta forgotten after the recovery",
        START_TIMEOUT,
        || async {
            match kafkas.get("live").await {
                Ok(k)
                    if warning(&k, "PartitionsLost").is_some()
                        && warning(&k, "ClusterForgotten").is_none() =>
                {
                    Seen::Done(k)
                }
                Ok(k) => Seen::NotYet(format!(
                    "Kafka conditions: {:#?}\noperations:\n{}\n{}",
                    k.status.map(|s| s.conditions).unwrap_or_default(),
                    operations_said(&ops).await,
                    stretch.logs()
                )),
                Err(e) => Seen::NotYet(e.to_string()),
            }
        },
    )
    .await;
    let said = warning(&k, "PartitionsLost").unwrap();
    assert!(said.contains("gone-0") && !said.contains("kept"), "{said}");
    for (partition, replicas, isr) in placement(&in_alpha, "kept") {
        assert_eq!(replicas.len(), 2, "kept-{partition}: {replicas:?}");
        assert!(
            replicas.iter().all(|r| alpha.contains(r)),
            "kept-{partition}: {replicas:?}"
        );
        assert!(!isr.is_empty(), "kept-{partition}: ISR {isr:?}");
    }
    only_registered(&in_alpha, &alpha, "beta's brokers unregistered").await;
    let recovery = ops
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find_map(|o| o.status?.recovery)
        .unwrap();
    eprintln!(
        "rebuilt from node {a0} (lost voters {:?}): {:?}; elected uncleanly: {:?}",
        recovery.lost_voters, recovery.written, recovery.unclean_elections
    );
    assert_eq!(recovery.lost_voters, vec![b0, b1]);
    // Writes go on: a new producer is served at once. (The one that kept sending through the
    // outage may take longer: librdkafka bumps its epoch each time sends time out, and was
    // seen stalled for minutes after the recovery; its acknowledged records are checked.)
    stage("beta forgotten");
    let fresh = Load::start_keyed(&in_alpha, "kept", Duration::from_millis(20), "s");
    wait_for_acks(&fresh, 100).await;
    stage("a new producer is served");
    // The producer that sent through the outage stops; what it still waits for when beta is
    // back (a stalled producer may wait up to its three-minute timeout) is left unresolved:
    // only acknowledged records are checked.
    let throughout = tokio::spawn(load.stop_within(Duration::from_secs(30)));

    lost.back();
    stretch.start_agent(BETA);
    wait_for(
        "beta to run none of the forgotten Kafka's pods",
        START_TIMEOUT,
        || async {
            let pods: Api<Pod> = stretch.api(BETA);
            match pods.list(&ListParams::default()).await {
                Ok(list) if list.items.is_empty() => Seen::Done(()),
                Ok(list) => Seen::NotYet(format!(
                    "pods: {:?}",
                    list.items.iter().map(|p| p.name_any()).collect::<Vec<_>>()
                )),
                Err(e) => Seen::NotYet(e.to_string()),
            }
        },
    )
    .await;
    stage("beta back, running nothing");
    let (throughout, fresh) = (throughout.await.unwrap(), fresh.stop().await);
    stage("producers stopped");
    let mut sent = throughout;
    sent.acked.extend(fresh.acked);
    sent.failed.extend(fresh.failed);
    sent.unresolved += fresh.unresolved;
    let missing = missing(&in_alpha, "kept", 3, &sent, Duration::from_secs(90)).await;
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged records are missing, e.g. {:?}",
        missing.len(),
        sent.acked.len(),
        &missing[..missing.len().min(5)]
    );
    eprintln!(
        "{} records acknowledged by both producers, none lost; {} sends failed while Kafka could not take them, {} left unresolved",
        sent.acked.len(),
        sent.failed.len(),
        sent.unresolved
    );
    stretch.finish().await;
}

/// Waits until Kafka's own tool lists exactly `brokers` as registered.
async fn only_registered(bootstrap: &str, brokers: &BTreeSet<i32>, what: &str) {
    wait_for(what, START_TIMEOUT, || async {
        let registered = registered_by_kafkas_tool(bootstrap);
        if registered == *brokers {
            Seen::Done(())
        } else {
            Seen::NotYet(format!("registered: {registered:?}"))
        }
    })
    .await;
}

/// Name -> (UID, restarts) of the test's pods in cluster `alias`.
async fn pods_of(stretch: &Stretch, alias: &str) -> BTreeMap<String, (String, i32)> {
    let pods: Api<Pod> = stretch.api(alias);
    pods.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|pod| {
            let restarts = pod
                .status
                .iter()
                .flat_map(|s| s.container_statuses.iter().flatten())
                .map(|c| c.restart_count)
                .sum();
            (
                pod.name_any(),
                (pod.metadata.uid.clone().unwrap(), restarts),
            )
        })
        .collect()
}

/// Central's own cluster (alpha) is lost for good while its Kafka runs in beta, under a
/// producer. A new central is started in beta with the next term, the resources are applied
/// there again (as GitOps would) with the Kafka's Secrets restored from a backup, and beta's
/// agent is pointed at it: it adopts the running Kafka (the same cluster ID and node IDs, no
/// pod replaced or restarted) and creates a topic. Alpha comes back with the old central: beta's
/// agent, pointed at it, refuses it (its term is older) and nothing changes. No acknowledged
/// record is lost.
#[tokio::test]
#[ignore = "stops a whole cluster: scripts/e2e.sh runs it alone, after everything else"]
async fn cluster_lost_is_centrals_and_a_new_central_adopts_the_running_kafka() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut stretch = Stretch::start("running-central-lost", &[]).await;
    stretch.delete_namespaces_on_panic();
    // One node is enough to show that nothing of it changes (and starts fastest).
    let mut single = kafka();
    single["spec"]["kafka"]["config"] = json!({
        "default.replication.factor": 1, "min.insync.replicas": 1,
        "offsets.topic.replication.factor": 1, "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "num.network.threads": 2, "num.io.threads": 2, "background.threads": 2
    });
    let b = pool("b", 1, BETA, persistent());
    stretch.apply(single.clone()).await;
    stretch.apply(b.clone()).await;
    let k: Kafka = stretch
        .wait_in_alpha("live", "Ready on real pods", START_TIMEOUT, is_ready)
        .await;
    let cluster_id = k.status.as_ref().unwrap().cluster_id.clone().unwrap();
    let pools: Api<KafkaNodePool> = stretch.api(ALPHA);
    let node_ids = pools.get("b").await.unwrap().status.unwrap().node_ids;
    let in_beta = bootstrap_at(&k, &real_node_ip(BETA));
    let load = Load::start(&in_beta, "kept", Duration::from_millis(20));
    wait_for_acks(&load, 100).await;
    let before = pods_of(&stretch, BETA).await;
    assert_eq!(before.len(), 1, "{before:?}");

    // The backup a user keeps of central's Secrets of the Kafka: its CAs (with their keys) and
    // its nodes' certificates.
    let secrets: Api<Secret> = stretch.api(ALPHA);
    let of_kafka = ListParams::default().labels("strimzi.io/cluster=live");
    let backup: Vec<Secret> = secrets.list(&of_kafka).await.unwrap().items;
    assert!(
        backup.iter().any(|s| s.name_any() == "live-cluster-ca"),
        "{:?}",
        backup.iter().map(|s| s.name_any()).collect::<Vec<_>>()
    );

    stretch.stop_agent(ALPHA);
    stretch.stop_central();
    let old_link = stretch.link_port();
    let lost = ClusterLost::now(ALPHA);

    for secret in backup {
        let mut restored = json!({"apiVersion": "v1", "kind": "Secret",
                                  "metadata": {"name": secret.name_any()},
                                  "data": secret.data.unwrap_or_default()});
        if let Some(labels) = secret.metadata.labels {
            restored["metadata"]["labels"] = json!(labels);
        }
        if let Some(annotations) = secret.metadata.annotations {
            restored["metadata"]["annotations"] = json!(annotations);
        }
        stretch.apply_in(BETA, restored).await;
    }
    stretch.apply_in(BETA, single).await;
    stretch.apply_in(BETA, b).await;
    stretch.start_central_in(BETA, 2);
    stretch.stop_agent(BETA);
    stretch.start_agent(BETA);
    let adopted: Kafka = stretch
        .wait_in(
            BETA,
            "live",
            "adopted by the new central",
            START_TIMEOUT,
            is_ready,
        )
        .await;
    assert_eq!(
        adopted.status.as_ref().unwrap().cluster_id.as_deref(),
        Some(cluster_id.as_str())
    );
    let in_beta_pools: Api<KafkaNodePool> = stretch.api(BETA);
    let adopted_ids = in_beta_pools
        .get("b")
        .await
        .unwrap()
        .status
        .unwrap()
        .node_ids;
    assert_eq!(adopted_ids, node_ids);
    assert_eq!(
        pods_of(&stretch, BETA).await,
        before,
        "no pod replaced or restarted"
    );

    stretch
        .apply_in(
            BETA,
            json!({"apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaTopic",
                   "metadata": {"name": "made-by-the-new-central",
                                "labels": {"strimzi.io/cluster": "live"}},
                   "spec": {"partitions": 3, "replicas": 1}}),
        )
        .await;
    wait_for(
        "the new central's topic in Kafka",
        START_TIMEOUT,
        || async {
            let consumer: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", &in_beta)
                .create()
                .unwrap();
            match consumer.fetch_metadata(Some("made-by-the-new-central"), Duration::from_secs(10))
            {
                Ok(m) if m.topics()[0].partitions().len() == 3 => Seen::Done(()),
                Ok(m) => Seen::NotYet(format!("{:?}", m.topics()[0].error())),
                Err(e) => Seen::NotYet(e.to_string()),
            }
        },
    )
    .await;
    let acked = load.acked();
    wait_for_acks(&load, acked + 100).await;

    // Alpha comes back, and with it the old central (term 1); beta's agent pointed at it.
    lost.back();
    let new_link = stretch.link_port();
    let old = stretch.spawn_central(ALPHA, 1, old_link);
    stretch.use_link_port(old_link);
    stretch.stop_agent(BETA);
    stretch.start_agent(BETA);
    wait_for(
        "beta's agent to refuse the old central",
        START_TIMEOUT,
        || async {
            let log = stretch.agents[BETA].log_text();
            if log.contains("older than the term 2") {
                Seen::Done(())
            } else {
                Seen::NotYet(format!(
                    "agent: {}\nold central: {}",
                    stretch.agents[BETA].log_tail(20),
                    old.log_tail(20)
                ))
            }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        pods_of(&stretch, BETA).await,
        before,
        "the old central changed nothing"
    );
    drop(old);
    stretch.use_link_port(new_link);
    stretch.stop_agent(BETA);
    stretch.start_agent(BETA);
    no_loss(load, &in_beta, "kept").await;
    stretch.finish().await;
}
