//! The planner on typical moves, its refusals, and properties over arbitrary clusters.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;

pub(super) fn partition(topic: &str, id: i32, replicas: &[i32], size: u64) -> Partition {
    Partition {
        topic: topic.to_owned(),
        partition: id,
        replicas: replicas.to_vec(),
        isr: replicas.iter().copied().collect(),
        leader: replicas.first().copied(),
        size,
        min_isr: 1,
    }
}

fn brokers(pairs: &[(i32, &str)]) -> BTreeMap<i32, String> {
    pairs.iter().map(|(b, r)| (*b, (*r).to_owned())).collect()
}

/// A pool moves from cluster `old` (brokers 0, 1) to `new` (brokers 3, 4); broker 2 stays in
/// `other`.
#[test]
fn a_pool_moving_to_another_cluster_takes_its_replicas_along() {
    let partitions = [
        partition("orders", 0, &[0, 2], 100),
        partition("orders", 1, &[2, 1], 50),
        partition("orders", 2, &[2, 3], 10),
    ];
    let target = brokers(&[(2, "other"), (3, "new"), (4, "new")]);
    let plan = plan(&partitions, &target).unwrap();
    // orders-2 has nothing on a leaving broker: it stays.
    assert_eq!(
        plan.moves.iter().map(|m| m.partition).collect::<Vec<_>>(),
        [0, 1]
    );
    // orders-0's leader (0) leaves; 2 takes over first, then the data moves.
    assert_eq!(
        plan.leadership,
        [LeaderChange {
            topic: "orders".into(),
            partition: 0,
            replicas: vec![2, 0]
        }]
    );
    let to = |p: i32| {
        plan.moves
            .iter()
            .find(|m| m.partition == p)
            .unwrap()
            .to
            .clone()
    };
    assert_eq!(to(0)[0], 2, "the staying replica is preferred");
    assert!(to(0).iter().all(|b| target.contains_key(b)));
    assert_eq!(to(1)[0], 2, "the leader that stays stays first");
    assert_eq!(plan.bytes(), 150);
    // Each of 3 and 4 receives one replica; at 10 B/s the larger, 100 B, takes 10 s.
    assert_eq!(plan.seconds_at(10), 10);
}

#[test]
fn new_replicas_go_to_clusters_the_partition_does_not_use_then_to_the_emptiest_broker() {
    let partitions = [
        partition("t", 0, &[0, 1, 2], 10),
        partition("big", 0, &[3, 4], 1000),
    ];
    // Broker 0 (alpha) leaves; alpha keeps 1, beta has 2 and 3, gamma has 4 and 5.
    let target = brokers(&[
        (1, "alpha"),
        (2, "beta"),
        (3, "beta"),
        (4, "gamma"),
        (5, "gamma"),
    ]);
    let plan = plan(&partitions, &target).unwrap();
    // t-0 uses alpha (1) and beta (2): gamma it is, and 5 holds less than 4.
    assert_eq!(plan.moves[0].to, [1, 2, 5]);
}

#[test]
fn partitions_below_min_isr_are_left_and_named() {
    let mut p = partition("t", 0, &[0, 1, 2], 10);
    p.isr = [1].into();
    p.min_isr = 2;
    let plan = plan(&[p], &brokers(&[(1, "a"), (2, "b"), (3, "c")])).unwrap();
    assert!(plan.moves.is_empty());
    assert_eq!(plan.unsafe_partitions, ["t-0"]);
}

#[test]
fn a_partition_with_fewer_replicas_than_min_isr_moves_when_all_are_in_sync() {
    let target = brokers(&[(1, "a"), (2, "b"), (3, "c")]);
    // Replication factor 1 under min.insync.replicas 2: it can never have two in sync.
    let mut single = partition("scratch", 0, &[0], 10);
    single.min_isr = 2;
    let plan = plan(&[single.clone()], &target).unwrap();
    assert!(plan.unsafe_partitions.is_empty(), "{plan:?}");
    assert_eq!(plan.moves.len(), 1);
    assert_eq!(plan.moves[0].to.len(), 1);
    // Two replicas, both in sync, under min.insync.replicas 3: moves too.
    let mut pair = partition("pair", 0, &[0, 1], 10);
    pair.min_isr = 3;
    assert_eq!(plan_of(&pair, &target).moves.len(), 1);
    // But one whose only replica dropped out of the ISR (it is offline) waits.
    single.isr.clear();
    assert_eq!(plan_of(&single, &target).unsafe_partitions, ["scratch-0"]);
    // As does one of two replicas with one out of sync under min.insync.replicas 2.
    pair.min_isr = 2;
    pair.isr = [1].into();
    assert_eq!(plan_of(&pair, &target).unsafe_partitions, ["pair-0"]);
    // At min.insync.replicas with a replica out of sync: safe, as before.
    let mut three = partition("three", 0, &[0, 1, 2], 10);
    three.min_isr = 2;
    three.isr = [1, 2].into();
    assert!(three.safe_to_move());
    assert_eq!(plan_of(&three, &target).moves.len(), 1);
}

fn plan_of(p: &Partition, target: &BTreeMap<i32, String>) -> Plan {
    plan(std::slice::from_ref(p), target).unwrap()
}

#[test]
fn too_few_brokers_and_no_target_are_refused() {
    let err = plan(
        &[partition("t", 3, &[0, 1, 2], 1)],
        &brokers(&[(1, "a"), (2, "b")]),
    )
    .unwrap_err();
    assert_eq!(err.reason(), "NotEnoughBrokers");
    assert!(
        err.to_string()
            .contains("t-3 has 3 replicas but only 2 brokers"),
        "{err}"
    );
    assert_eq!(
        plan(&[], &BTreeMap::new()).unwrap_err().reason(),
        "NoTargetBrokers"
    );
}

#[test]
fn batches_hold_at_most_the_limits_smallest_first() {
    let partitions: Vec<Partition> = (0..5)
        .map(|i| partition("t", i, &[0], 10 * (i as u64 + 1)))
        .collect();
    let plan = plan(&partitions, &brokers(&[(1, "a")])).unwrap();
    let batches = plan.batches(2, 45);
    let sizes: Vec<Vec<u64>> = batches
        .iter()
        .map(|b| b.iter().map(|m| m.bytes).collect())
        .collect();
    assert_eq!(sizes, [vec![10, 20], vec![30], vec![40], vec![50]]);
}

/// Arbitrary clusters: up to 8 brokers in up to 3 racks, some leaving, and partitions of
/// replication factor up to 3 on them.
fn arb_case() -> impl Strategy<Value = (Vec<Partition>, BTreeMap<i32, String>)> {
    (1usize..=8, 1usize..=3)
        .prop_flat_map(|(n, racks)| {
            let rack_of = proptest::collection::vec(0..racks, n);
            let leaving = proptest::collection::vec(any::<bool>(), n);
            let parts = proptest::collection::vec(
                (
                    proptest::sample::subsequence((0..n as i32).collect::<Vec<_>>(), 1..=n.min(3)),
                    0u64..1000,
                    any::<bool>(),
                ),
                0..12,
            );
            (Just(n), rack_of, leaving, parts)
        })
        .prop_map(|(n, rack_of, leaving, parts)| {
            let target: BTreeMap<i32, String> = (0..n)
                .filter(|b| !leaving[*b] || (0..n).all(|o| leaving[o]) && *b == 0)
                .map(|b| (b as i32, format!("r{}", rack_of[b])))
                .collect();
            let partitions = parts
                .into_iter()
                .enumerate()
                .map(|(i, (mut replicas, size, rotate))| {
                    if rotate {
                        replicas.rotate_left(1);
                    }
                    partition("p", i as i32, &replicas, size)
                })
                .collect();
            (partitions, target)
        })
}

proptest! {
    #[test]
    fn every_plan_keeps_the_replication_factor_on_target_brokers_and_moves_only_what_must(
        (partitions, target) in arb_case()
    ) {
        let Ok(plan) = plan(&partitions, &target) else {
            // Refused only when a partition has more replicas than the target has brokers.
            prop_assert!(partitions.iter().any(|p| p.replicas.len() > target.len()));
            return Ok(());
        };
        for p in &partitions {
            let leaves = p.replicas.iter().any(|r| !target.contains_key(r));
            let m = plan.moves.iter().find(|m| m.partition == p.partition);
            prop_assert_eq!(m.is_some(), leaves, "only partitions with a leaving replica move");
            let Some(m) = m else { continue };
            prop_assert_eq!(m.to.len(), p.replicas.len());
            let distinct: BTreeSet<i32> = m.to.iter().copied().collect();
            prop_assert_eq!(distinct.len(), m.to.len());
            prop_assert!(m.to.iter().all(|b| target.contains_key(b)));
            // Every staying replica stays.
            prop_assert!(p.replicas.iter().filter(|r| target.contains_key(r)).all(|r| m.to.contains(r)));
            // New replicas add as many racks as they can.
            let keep_racks: BTreeSet<&String> = p.replicas.iter().filter_map(|r| target.get(r)).collect();
            let free_racks = target
                .values()
                .collect::<BTreeSet<_>>()
                .difference(&keep_racks)
                .count();
            let racks: BTreeSet<&String> = m.to.iter().filter_map(|r| target.get(r)).collect();
            let kept = p.replicas.iter().filter(|r| target.contains_key(r)).count();
            prop_assert!(racks.len() >= keep_racks.len() + free_racks.min(p.replicas.len() - kept),
                "racks {:?} kept {:?}", racks, keep_racks);
            // A preferred leader that stays stays first.
            if target.contains_key(&p.replicas[0]) {
                prop_assert_eq!(m.to[0], p.replicas[0]);
            }
        }
        prop_assert_eq!(plan.clone(), super::plan(&partitions, &target).unwrap(), "deterministic");
    }
}

/// Cluster `lost` (brokers 3, 4) is gone for good; brokers 0, 1, 2 survive in `a`.
#[test]
fn lost_replicas_are_replaced_on_survivors_even_below_min_isr_and_lost_partitions_are_named() {
    let shrunk = |topic: &str, id: i32, replicas: &[i32], isr: &[i32]| Partition {
        isr: isr.iter().copied().collect(),
        leader: isr.first().copied(),
        min_isr: 2,
        ..partition(topic, id, replicas, 10)
    };
    let partitions = [
        // Still at min.insync.replicas: one lost replica to replace.
        shrunk("orders", 0, &[0, 1, 3], &[0, 1]),
        // Below it: a move off running brokers would leave it; a lost replica is replaced.
        shrunk("orders", 1, &[3, 0, 4], &[0]),
        // Nothing survived in sync: lost, named, left.
        shrunk("orders", 2, &[3, 4], &[]),
        // Untouched.
        shrunk("orders", 3, &[0, 1, 2], &[0, 1, 2]),
    ];
    let lost = BTreeSet::from([3, 4]);
    let target = brokers(&[(0, "a"), (1, "a"), (2, "a")]);
    let plan = replace_lost(&partitions, &lost, &target).unwrap();
    let to = |p: i32| {
        plan.moves
            .iter()
            .find(|m| m.partition == p)
            .map(|m| m.to.clone())
    };
    assert_eq!(to(0), Some(vec![0, 1, 2]));
    let one = to(1).unwrap();
    assert_eq!(one[0], 0, "the surviving in-sync replica leads");
    assert_eq!(
        one.iter().collect::<BTreeSet<_>>(),
        BTreeSet::from([&0, &1, &2])
    );
    assert_eq!(to(2), None);
    assert_eq!(to(3), None);
    assert_eq!(plan.lost_partitions, ["orders-2"]);
    assert!(plan.unsafe_partitions.is_empty(), "{plan:?}");
    // The same brokers leaving while they still run: orders-1 waits for its ISR instead.
    let moving = plan_of_running(&partitions, &target);
    assert_eq!(moving.unsafe_partitions, ["orders-1", "orders-2"]);
}

fn plan_of_running(partitions: &[Partition], target: &BTreeMap<i32, String>) -> Plan {
    plan(partitions, target).unwrap()
}

/// A survivor that is away for a moment (fenced, so not in the target) keeps its replica.
#[test]
fn a_surviving_replica_outside_the_target_stays_and_too_few_survivors_are_refused() {
    let partitions = [partition("logs", 0, &[0, 1, 3], 10)];
    let lost = BTreeSet::from([3]);
    let target = brokers(&[(0, "a"), (2, "a")]);
    let plan = replace_lost(&partitions, &lost, &target).unwrap();
    assert_eq!(plan.moves[0].to, vec![0, 1, 2]);
    let err = replace_lost(&partitions, &lost, &brokers(&[(0, "a")])).unwrap_err();
    assert_eq!(err.reason(), "NotEnoughBrokers");
}
