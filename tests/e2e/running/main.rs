//! A stretched Kafka on pods that really run: the environment's real nodes (a kubelet and
//! containerd per cluster, `tests/env/nodes.sh`) run the local `apache/kafka` image, and the
//! nodes of alpha and beta reach each other through per-node NodePort Services at each
//! cluster's node address (`nodeport` addressing). Kafka's own protocol, through rdkafka, is
//! the judge: what is produced through a broker of one cluster is consumed through the other,
//! and a producer with `acks=all` runs through rolls, restarts and central's absence without
//! losing an acknowledged record.
//!
//! The tests run one at a time (each starts three JVMs on a two-core machine).
//!
//! Each file holds the tests of one concern; the harness is `kstretch_tests::{live, clients,
//! moves}`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod charts;
mod drains;
mod lost;
mod restarts;
mod secured;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kstretch_api::{Kafka, KafkaNodePool};
use kstretch_tests::TestEnv;
use kstretch_tests::clients::{
    all_sent, external_listener_serves_clients_outside, full_isr, noise, placed_topic,
    serves_across_clusters, wait_for_acks,
};
use kstretch_tests::kafka::{
    broker_ids, consume, create_topic, produce, produce_with_acks, quorum_by_kafkas_tool,
    run_kafka_tool,
};
use kstretch_tests::live::{
    ONE_AT_A_TIME, START_TIMEOUT, all_brokers, kafka, live_kafka_after, metrics_rules, pod_ready,
    pod_states, pool, running_pods, shown_quorum_is_kafkas, shown_voters, with_metrics,
};
use kstretch_tests::load::{Load, Reader};
use kstretch_tests::moves::{Interruption, pool_moved};
use kstretch_tests::prometheus::{
    STRIMZI_DASHBOARDS_JMX_EXPORTER, dashboards_have_series, scrape, series_from,
    stretched_dashboard_answers,
};
use kstretch_tests::stretch::{ALPHA, BETA, Stretch};
use kstretch_tests::wait::{Seen, wait_for};
use kube::api::{ListParams, LogParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use serde_json::json;

/// `example` becomes Ready on real pods in both clusters, its brokers answer Kafka's clients,
/// and records produced through alpha's brokers are consumed through beta's; then its quorum
/// replaces a controller that lost its disk, a controller pool joins and leaves it, and pools
/// move between the clusters under load.
#[tokio::test]
async fn a_stretched_kafka_on_real_pods_serves_produce_and_consume_across_clusters() {
    let _one = ONE_AT_A_TIME.lock().await;
    // Its nodes serve metrics: the JMX exporter comes from the agent's image.
    kstretch_tests::helm::import_images_once();
    let (mut stretch, k) = live_kafka_after(
        "running-stretch",
        metrics_rules(),
        with_metrics(kafka()),
        json!({"type": "ephemeral"}),
    )
    .await;

    let alpha_pods = running_pods(&stretch, ALPHA, 2).await;
    running_pods(&stretch, BETA, 1).await;
    // Kafka's own log, read as `kubectl logs` reads it (kubelet through the apiserver).
    let pods: Api<Pod> = stretch.api(ALPHA);
    let name = alpha_pods[0].metadata.name.clone().unwrap();
    let log = pods.logs(&name, &LogParams::default()).await.unwrap();
    assert!(log.contains("Kafka Server started"), "{name}'s log:\n{log}");

    serves_across_clusters(&k).await;
    every_node_serves_metrics_to_prometheus(&stretch).await;
    external_listener_serves_clients_outside(&k, "outside").await;
    racks_are_clusters(&k).await;
    the_dynamic_quorum_is_shown_and_a_controller_that_lost_its_disk_is_replaced(&stretch, &k).await;
    a_controller_pool_joins_and_leaves_the_quorum_restarting_nobody(&stretch, &k).await;
    pools_move_to_the_other_cluster_and_back_under_load_losing_nothing(&mut stretch, &k).await;
    // The moved brokers' pods were recreated, on the other cluster's node and back: each
    // found its node's address again.
    let kafkas: Api<Kafka> = stretch.api(ALPHA);
    let k = kafkas.get("live").await.unwrap();
    external_listener_serves_clients_outside(&k, "outside-after-moves").await;
    stretch.finish().await;
}

/// Strimzi's `metricsConfig` (the JMX exporter with the user's rules): Prometheus, which finds
/// pods by their `tcp-prometheus` port through each cluster's apiserver, has the brokers'
/// gauges from the nodes in alpha and in beta, every Kafka metric Strimzi's Kafka and KRaft
/// dashboards query, and the controllers' (one active controller).
async fn every_node_serves_metrics_to_prometheus(stretch: &Stretch) {
    let ns = &stretch.ns;
    let expr =
        format!("kafka_server_replicamanager_underreplicatedpartitions{{namespace=\"{ns}\"}}");
    series_from(&expr, &[ALPHA, BETA]).await;
    wait_for("a series of each broker", START_TIMEOUT, || async {
        match kstretch_tests::prometheus::query(&expr).await {
            Ok(brokers) => {
                let pods: BTreeSet<&str> = brokers
                    .iter()
                    .filter_map(|(labels, _)| labels.get("kubernetes_pod_name").map(String::as_str))
                    .collect();
                if pods.len() == 3 {
                    Seen::Done(())
                } else {
                    Seen::NotYet(format!("{brokers:?}"))
                }
            }
            Err(e) => Seen::NotYet(e),
        }
    })
    .await;
    dashboards_have_series(ns, "live", STRIMZI_DASHBOARDS_JMX_EXPORTER).await;
    wait_for(
        "one active controller in Prometheus",
        START_TIMEOUT,
        || async {
            let expr = format!(
                "sum(kafka_controller_kafkacontroller_activecontrollercount{{namespace=\"{ns}\"}})"
            );
            match kstretch_tests::prometheus::query(&expr).await {
                Ok(series) if series.first().is_some_and(|(_, v)| *v == 1.0) => Seen::Done(()),
                other => Seen::NotYet(format!("{other:?}")),
            }
        },
    )
    .await;
    // Kafka's tools run in a node that serves metrics, as users run them with `kubectl exec`:
    // the exporter's agent is the server's alone, not started again on its taken port.
    let pods: Api<Pod> = stretch.api(ALPHA);
    let brokers = ListParams::default().labels("strimzi.io/broker-role=true");
    let broker = pods.list(&brokers).await.unwrap().items[0].name_any();
    let listed = stretch.exec(
        ALPHA,
        &broker,
        &[
            "kafka-topics.sh",
            "--bootstrap-server",
            "localhost:9092",
            "--list",
        ],
    );
    assert!(
        listed
            .as_ref()
            .is_ok_and(|topics| topics.contains("across")),
        "kafka-topics.sh in {broker}: {listed:?}"
    );
    // kstretch's dashboard of a stretched Kafka answers each query from both clusters (central
    // scraped as well, for its panels).
    let _central = scrape(ns, "central", &stretch.central_http);
    stretched_dashboard_answers(ns, "live", &[ALPHA, BETA]).await;
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
    // A node that is only a controller serves its metrics too (the JMX exporter's rules).
    let controller = format!("live-c-{new_id}");
    let raft_state =
        format!("kafka_server_raftmetrics_current_state{{kubernetes_pod_name=\"{controller}\"}}");
    series_from(&raft_state, &[BETA]).await;

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
    let gone = controller;
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
