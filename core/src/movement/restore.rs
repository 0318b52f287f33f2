//! Putting partitions back where a record says they were (undoing a drain): the moves and
//! leader changes that restore each recorded replica list, in its order. Pure.

use std::collections::{BTreeMap, BTreeSet};

use super::{LeaderChange, Move, Partition, Plan};

/// A partition's recorded replicas, preferred leader first, by (topic, partition).
pub type Placement = BTreeMap<(String, i32), Vec<i32>>;

/// The plan back to `recorded`, and the recorded partitions it cannot restore.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Restore {
    pub plan: Plan,
    /// `topic-partition` of recorded partitions whose recorded brokers are not all registered
    /// any more: they stay where they are.
    pub unrestorable: Vec<String>,
}

/// What moves every partition of `partitions` that `recorded` names back to its recorded
/// replicas (and leader) when every recorded broker is in `brokers`. Partitions not in sync
/// enough to move ([`Partition::safe_to_move`]) are left and named, as the planner does;
/// partitions no longer in Kafka are not mentioned.
pub fn restore(partitions: &[Partition], recorded: &Placement, brokers: &BTreeSet<i32>) -> Restore {
    let mut out = Restore::default();
    for p in partitions {
        let Some(want) = recorded.get(&(p.topic.clone(), p.partition)) else {
            continue;
        };
        let name = format!("{}-{}", p.topic, p.partition);
        if !want.iter().all(|b| brokers.contains(b)) {
            out.unrestorable.push(name);
            continue;
        }
        let led_as_recorded = p.leader == want.first().copied();
        if *want == p.replicas && led_as_recorded {
            continue;
        }
        if !p.safe_to_move() {
            out.plan.unsafe_partitions.push(name);
            continue;
        }
        let same_set = want.iter().collect::<BTreeSet<_>>() == p.replicas.iter().collect();
        if same_set {
            out.plan.leadership.push(LeaderChange {
                topic: p.topic.clone(),
                partition: p.partition,
                replicas: want.clone(),
            });
        } else {
            let added = want.iter().filter(|b| !p.replicas.contains(b)).count() as u64;
            out.plan.moves.push(Move {
                topic: p.topic.clone(),
                partition: p.partition,
                from: p.replicas.clone(),
                to: want.clone(),
                bytes: p.size * added,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(topic: &str, id: i32, replicas: &[i32], leader: i32) -> Partition {
        Partition {
            topic: topic.to_owned(),
            partition: id,
            replicas: replicas.to_vec(),
            isr: replicas.iter().copied().collect(),
            leader: Some(leader),
            size: 100,
            min_isr: 1,
        }
    }

    fn recorded(entries: &[(&str, i32, &[i32])]) -> Placement {
        entries
            .iter()
            .map(|(t, p, r)| (((*t).to_owned(), *p), r.to_vec()))
            .collect()
    }

    #[test]
    fn moved_partitions_go_back_in_their_order_and_reordered_ones_get_their_leader_back() {
        let partitions = [
            partition("orders", 0, &[1, 2, 4], 1),
            partition("orders", 1, &[2, 3], 3),
            partition("orders", 2, &[3, 1], 3),
            partition("audit", 0, &[1, 2], 1),
        ];
        let was = recorded(&[
            ("orders", 0, &[3, 1, 2]),
            ("orders", 1, &[2, 3]),
            ("orders", 2, &[3, 1]),
        ]);
        let r = restore(&partitions, &was, &BTreeSet::from([1, 2, 3, 4]));
        assert_eq!(r.plan.moves.len(), 1);
        let m = &r.plan.moves[0];
        assert_eq!(
            (m.partition, m.to.clone(), m.bytes),
            (0, vec![3, 1, 2], 100)
        );
        // Same replicas in the same order, led by the wrong one: an election only.
        assert_eq!(r.plan.leadership.len(), 1);
        assert_eq!(r.plan.leadership[0].partition, 1);
        assert!(r.unrestorable.is_empty() && r.plan.unsafe_partitions.is_empty());
    }

    #[test]
    fn partitions_whose_brokers_left_or_that_are_not_in_sync_stay_and_are_named() {
        let mut lagging = partition("orders", 1, &[1, 2], 1);
        lagging.isr = BTreeSet::from([1]);
        lagging.min_isr = 2;
        let partitions = [partition("orders", 0, &[1, 2], 1), lagging];
        let was = recorded(&[("orders", 0, &[9, 1]), ("orders", 1, &[3, 1])]);
        let r = restore(&partitions, &was, &BTreeSet::from([1, 2, 3]));
        assert_eq!(r.unrestorable, vec!["orders-0"]);
        assert_eq!(r.plan.unsafe_partitions, vec!["orders-1"]);
        assert!(r.plan.moves.is_empty());
    }
}
