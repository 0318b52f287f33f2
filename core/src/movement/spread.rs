//! Partitions whose replicas sit in fewer Kubernetes clusters than they could (topics created
//! before kstretch gave brokers racks, or by hand with an explicit assignment), and the plan
//! that spreads them: losing one cluster must not lose a partition. Pure.

use std::collections::{BTreeMap, BTreeSet};

use super::{Move, Partition, Plan, load};

/// A partition with two or more replicas, all in one cluster, while the brokers run in several:
/// losing that cluster loses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confined {
    /// `topic-partition`.
    pub partition: String,
    /// The cluster (rack) holding every replica.
    pub cluster: String,
}

/// The partitions of `partitions` confined to one of the clusters of `brokers` (broker ID to
/// its rack), sorted by name.
pub fn confined(partitions: &[Partition], brokers: &BTreeMap<i32, String>) -> Vec<Confined> {
    let clusters: BTreeSet<&str> = brokers.values().map(String::as_str).collect();
    if clusters.len() < 2 {
        return Vec::new();
    }
    let mut out: Vec<Confined> = partitions
        .iter()
        .filter(|p| p.replicas.len() >= 2)
        .filter_map(|p| {
            let racks = racks_of(&p.replicas, brokers)?;
            let only = (racks.len() == 1).then(|| racks.into_iter().next())??;
            Some(Confined {
                partition: format!("{}-{}", p.topic, p.partition),
                cluster: only.to_owned(),
            })
        })
        .collect();
    out.sort_by(|a, b| a.partition.cmp(&b.partition));
    out
}

/// The racks of `replicas`; `None` when one of them is not among `brokers` (gone or fenced:
/// a drain's or a removal's business, not a spread's).
fn racks_of<'a>(replicas: &[i32], brokers: &'a BTreeMap<i32, String>) -> Option<BTreeSet<&'a str>> {
    replicas
        .iter()
        .map(|r| brokers.get(r).map(String::as_str))
        .collect()
}

/// The plan that gives every partition replicas in as many clusters as its replication factor
/// and `brokers` allow. The current leader stays; a replica sharing its cluster with another is
/// replaced, the last listed first, by the broker holding the fewest bytes in a cluster the
/// partition does not use yet. Partitions not in sync enough to move
/// ([`Partition::safe_to_move`]) are left alone, named.
pub fn spread(partitions: &[Partition], brokers: &BTreeMap<i32, String>) -> Plan {
    let clusters = brokers.values().collect::<BTreeSet<_>>().len();
    let mut load = load(partitions, brokers);
    let mut plan = Plan::default();
    let mut sorted: Vec<&Partition> = partitions.iter().collect();
    sorted.sort_by(|a, b| (b.size, &a.topic, a.partition).cmp(&(a.size, &b.topic, b.partition)));
    for p in sorted {
        let Some(racks) = racks_of(&p.replicas, brokers) else {
            continue;
        };
        let wanted = p.replicas.len().min(clusters);
        if racks.len() >= wanted {
            continue;
        }
        if !p.safe_to_move() {
            plan.unsafe_partitions
                .push(format!("{}-{}", p.topic, p.partition));
            continue;
        }
        let mut to = p.replicas.clone();
        while used(&to, brokers) < wanted {
            let Some(slot) = replaceable(&to, p.leader, brokers) else {
                break;
            };
            let in_use: BTreeSet<&str> = to
                .iter()
                .filter_map(|r| brokers.get(r))
                .map(String::as_str)
                .collect();
            let pick = load
                .iter()
                .filter(|(b, _)| {
                    brokers
                        .get(b)
                        .is_some_and(|rack| !in_use.contains(rack.as_str()))
                })
                .min_by_key(|(b, bytes)| (**bytes, **b))
                .map(|(b, _)| *b);
            let Some(pick) = pick else { break };
            to[slot] = pick;
            if let Some(l) = load.get_mut(&pick) {
                *l += p.size;
            }
        }
        if to != p.replicas {
            plan.moves.push(Move::of(p, to));
        }
    }
    plan.moves
        .sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    plan.unsafe_partitions.sort();
    plan
}

fn used(replicas: &[i32], brokers: &BTreeMap<i32, String>) -> usize {
    replicas
        .iter()
        .filter_map(|r| brokers.get(r))
        .collect::<BTreeSet<_>>()
        .len()
}

/// The position of the last replica, not the leader, whose cluster holds another replica too.
fn replaceable(
    replicas: &[i32],
    leader: Option<i32>,
    brokers: &BTreeMap<i32, String>,
) -> Option<usize> {
    let rack = |r: &i32| brokers.get(r);
    (0..replicas.len()).rev().find(|i| {
        let r = replicas[*i];
        Some(r) != leader
            && replicas
                .iter()
                .any(|other| *other != r && rack(other) == rack(&r))
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::tests::partition;
    use super::*;

    /// Brokers 0, 1, 2 in alpha; 3, 4, 5 in beta.
    fn two_clusters() -> BTreeMap<i32, String> {
        (0..6)
            .map(|b| (b, if b < 3 { "alpha" } else { "beta" }.to_owned()))
            .collect()
    }

    #[test]
    fn partitions_in_one_cluster_are_named_with_it() {
        let partitions = [
            partition("orders", 0, &[0, 1, 2], 10),
            partition("orders", 1, &[0, 3, 1], 10),
            partition("audit", 0, &[4, 5], 10),
            // One replica is in one cluster whatever happens: not reported.
            partition("scratch", 0, &[2], 10),
        ];
        let found = confined(&partitions, &two_clusters());
        assert_eq!(
            found,
            [
                Confined {
                    partition: "audit-0".into(),
                    cluster: "beta".into()
                },
                Confined {
                    partition: "orders-0".into(),
                    cluster: "alpha".into()
                },
            ]
        );
        let one_cluster: BTreeMap<i32, String> = (0..3).map(|b| (b, "alpha".into())).collect();
        assert!(confined(&partitions, &one_cluster).is_empty());
    }

    #[test]
    fn a_confined_partition_gets_a_replica_elsewhere_and_keeps_its_leader() {
        let mut loaded = partition("orders", 0, &[1, 0, 2], 100);
        loaded.leader = Some(1);
        let partitions = [
            loaded,
            // Broker 3 already holds bytes: 4 is the least loaded in beta.
            partition("audit", 0, &[3, 0, 1], 500),
        ];
        let plan = spread(&partitions, &two_clusters());
        let orders = plan.moves.iter().find(|m| m.topic == "orders").unwrap();
        assert_eq!(
            orders.to,
            [1, 0, 4],
            "the last replica sharing a cluster goes"
        );
        assert_eq!(orders.bytes, 100);
        assert!(plan.leadership.is_empty());
        assert_eq!(plan.moves.len(), 1, "audit already spans both clusters");
    }

    #[test]
    fn partitions_out_of_sync_are_left_alone_and_named() {
        let mut lagging = partition("orders", 0, &[0, 1], 10);
        lagging.isr = [0].into();
        lagging.min_isr = 2;
        let plan = spread(&[lagging], &two_clusters());
        assert!(plan.moves.is_empty());
        assert_eq!(plan.unsafe_partitions, ["orders-0"]);
    }

    #[test]
    fn a_replica_on_a_broker_that_is_gone_is_not_a_spreads_business() {
        let plan = spread(&[partition("orders", 0, &[0, 9], 10)], &two_clusters());
        assert_eq!(plan, Plan::default());
    }

    proptest! {
        /// Whatever the layout: replicas stay distinct, the factor and the leader stay, and
        /// afterwards each partition spans as many clusters as it can.
        #[test]
        fn spreading_keeps_factor_and_leader_and_spans_all_it_can(
            layout in prop::collection::vec(
                (prop::sample::subsequence((0..7).collect::<Vec<i32>>(), 1..=4), 0u64..1000),
                1..20,
            ),
            racks in prop::collection::vec(0..3u8, 7),
        ) {
            let brokers: BTreeMap<i32, String> =
                (0..7).map(|b| (b, format!("c{}", racks[b as usize]))).collect();
            let partitions: Vec<Partition> = layout
                .iter()
                .enumerate()
                .map(|(i, (replicas, size))| partition("t", i as i32, replicas, *size))
                .collect();
            let clusters = brokers.values().collect::<BTreeSet<_>>().len();
            let plan = spread(&partitions, &brokers);
            for m in &plan.moves {
                let before = &partitions[m.partition as usize];
                prop_assert_eq!(m.to.len(), before.replicas.len());
                prop_assert_eq!(m.to.iter().collect::<BTreeSet<_>>().len(), m.to.len());
                prop_assert!(m.to.contains(&before.leader.unwrap()));
                prop_assert_eq!(used(&m.to, &brokers), before.replicas.len().min(clusters));
            }
            let after: Vec<Partition> = partitions
                .iter()
                .map(|p| {
                    let mut p = p.clone();
                    if let Some(m) = plan.moves.iter().find(|m| m.partition == p.partition) {
                        p.replicas = m.to.clone();
                    }
                    p
                })
                .collect();
            prop_assert!(spread(&after, &brokers).moves.is_empty(), "a second pass has nothing to do");
            prop_assert!(confined(&after, &brokers).is_empty());
        }
    }
}
