//! Draining a member cluster on real pods: its brokers' replicas move out and back, a
//! scale-down waits until they moved, and partitions are spread across clusters.

use std::time::Duration;

use kstretch_api::{Kafka, KafkaNodePool};
use kstretch_tests::clients::{broker_config, full_isr, no_loss, placed_topic, wait_for_acks};
use kstretch_tests::kafka::{
    broker_ids, consume, create_topic, produce, registered_by_kafkas_tool, run_kafka_tool,
};
use kstretch_tests::live::{
    ONE_AT_A_TIME, START_TIMEOUT, all_brokers, completed, in_flight, kstretch, live_kafka_with,
    persistent, pod_states, poke, pool, warning,
};
use kstretch_tests::load::Load;
use kstretch_tests::ready::kafka_ready as is_ready;
use kstretch_tests::stretch::{ALPHA, Stretch};
use kstretch_tests::wait::{Seen, wait_for};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

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
