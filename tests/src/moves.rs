//! A node pool moved from one member cluster to another on real pods, and checked on the way
//! (the real-pod tests and the move benchmark share it).

use std::collections::BTreeSet;

use crate::clients::full_isr;
use crate::kafka::{quorum_by_kafkas_tool, registered_by_kafkas_tool, run_kafka_tool};
use crate::live::{START_TIMEOUT, kstretch, pod_ready, pod_states, warning};
use crate::stretch::{ALPHA, Stretch};
use crate::wait::{Seen, wait_for};
use k8s_openapi::api::core::v1::Pod;
use kstretch_api::{Kafka, KafkaNodePool, KafkaOperation};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

/// What interrupts a pool move in [`pool_moved`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interruption {
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
pub async fn pool_moved(
    stretch: &mut Stretch,
    bootstrap: &str,
    name: &str,
    from_ids: &[i32],
    to: &str,
    interruption: Interruption,
) -> Vec<i32> {
    let held = crate::kafka::placement(bootstrap).unwrap();
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
    // The drain starts once the new nodes run (and, for a controller pool, joined the voters):
    // on a busy machine that alone takes minutes, so the drain's own run is waited for apart.
    if holds {
        wait_for(
            &format!("drain {drain} to exist"),
            START_TIMEOUT,
            || async {
                match ops.get_opt(&drain).await.unwrap() {
                    Some(_) => Seen::Done(()),
                    None => Seen::NotYet(format!("{:?}", pool_status(&pools, name).await)),
                }
            },
        )
        .await;
    }
    if interruption == Interruption::Central {
        // Central killed mid-move, once it has started the drain: the move goes on from what
        // the pool's status and the operation's record.
        assert!(holds, "central is killed once the move's drain exists");
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
    let placement = crate::kafka::placement(bootstrap).unwrap();
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
pub async fn cli_said(cli: tokio::task::JoinHandle<std::process::Output>) -> (bool, String) {
    let output = cli.await.unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}

/// The move's drain `drain`, crawling at 1 byte/s, is aborted with `kstretch abort` while it
/// has partitions in flight: the cluster is left consistent (every partition of the test's
/// topics at replication factor 3 and fully in sync, no reassignment left running, the same
/// voters) and the `Kafka` says the move stalled.
pub async fn aborted_mid_move(stretch: &Stretch, bootstrap: &str, drain: &str) {
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
    let placement = crate::kafka::placement(bootstrap).unwrap();
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

/// Pool `name`'s status, shown when a wait on its move times out.
async fn pool_status(
    pools: &Api<KafkaNodePool>,
    name: &str,
) -> Option<kstretch_api::KafkaNodePoolStatus> {
    pools.get(name).await.ok().and_then(|p| p.status)
}
