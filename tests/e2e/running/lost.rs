//! A whole member cluster lost (`tests/env/lose.sh`) under a running Kafka on real pods:
//! forgotten, its quorum majority rebuilt, central itself lost. Ignored by a plain `cargo
//! test`: `scripts/e2e.sh` runs them alone, last.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Secret};
use kstretch_api::{Kafka, KafkaNodePool, KafkaOperation};
use kstretch_tests::clients::{
    full_isr, no_loss, only_registered, placed_topic, placement, wait_for_acks,
};
use kstretch_tests::kafka::quorum_by_kafkas_tool;
use kstretch_tests::live::{
    ClusterLost, ONE_AT_A_TIME, START_TIMEOUT, all_brokers, bootstrap_at, kafka, kstretch,
    live_kafka_with, operations_said, persistent, pods_of, pool, real_node_ip, warning,
};
use kstretch_tests::load::{Load, missing};
use kstretch_tests::ready::{kafka_ready as is_ready, ready_condition};
use kstretch_tests::stretch::{ALPHA, BETA, Stretch};
use kstretch_tests::wait::{Seen, wait_for};
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use serde_json::json;

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
