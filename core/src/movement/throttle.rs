//! The replication throttle of a batch of moves, as Kafka's own reassignment tool sets it: a
//! rate on every broker that sends or receives, and per topic the replicas it applies to (the
//! current ones lead the copy, the added ones follow). Pure.

use std::collections::{BTreeMap, BTreeSet};

use super::Move;

/// Broker option: bytes per second a throttled leader replica sends.
pub const LEADER_RATE: &str = "leader.replication.throttled.rate";
/// Broker option: bytes per second a throttled follower replica fetches.
pub const FOLLOWER_RATE: &str = "follower.replication.throttled.rate";
/// Topic option: `partition:broker` pairs whose leader side is throttled.
pub const LEADER_REPLICAS: &str = "leader.replication.throttled.replicas";
/// Topic option: `partition:broker` pairs whose follower side is throttled.
pub const FOLLOWER_REPLICAS: &str = "follower.replication.throttled.replicas";

/// What to set for one batch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Throttle {
    /// Brokers that get the rate.
    pub brokers: BTreeSet<i32>,
    /// Per topic: the values of [`LEADER_REPLICAS`] and [`FOLLOWER_REPLICAS`].
    pub topics: BTreeMap<String, (String, String)>,
}

/// The throttle of `batch`: moves that add no replica (a reorder) copy nothing and get none.
pub fn throttle(batch: &[Move]) -> Throttle {
    let mut leaders: BTreeMap<&str, BTreeSet<(i32, i32)>> = BTreeMap::new();
    let mut followers: BTreeMap<&str, BTreeSet<(i32, i32)>> = BTreeMap::new();
    let mut brokers = BTreeSet::new();
    for m in batch {
        let added: Vec<i32> =
            m.to.iter()
                .copied()
                .filter(|b| !m.from.contains(b))
                .collect();
        if added.is_empty() {
            continue;
        }
        for b in &m.from {
            leaders
                .entry(&m.topic)
                .or_default()
                .insert((m.partition, *b));
            brokers.insert(*b);
        }
        for b in added {
            followers
                .entry(&m.topic)
                .or_default()
                .insert((m.partition, b));
            brokers.insert(b);
        }
    }
    let pairs = |set: Option<&BTreeSet<(i32, i32)>>| {
        set.into_iter()
            .flatten()
            .map(|(p, b)| format!("{p}:{b}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let topics = leaders
        .keys()
        .map(|topic| {
            let value = (pairs(leaders.get(topic)), pairs(followers.get(topic)));
            ((*topic).to_owned(), value)
        })
        .collect();
    Throttle { brokers, topics }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moved(topic: &str, partition: i32, from: &[i32], to: &[i32]) -> Move {
        Move {
            topic: topic.to_owned(),
            partition,
            from: from.to_vec(),
            to: to.to_vec(),
            bytes: 10,
        }
    }

    #[test]
    fn current_replicas_lead_added_ones_follow_and_every_broker_involved_is_rate_limited() {
        let t = throttle(&[
            moved("orders", 0, &[1, 2], &[2, 3]),
            moved("orders", 1, &[2, 1], &[2, 4]),
            moved("audit", 0, &[1], &[3]),
        ]);
        assert_eq!(t.brokers, BTreeSet::from([1, 2, 3, 4]));
        assert_eq!(
            t.topics["orders"],
            ("0:1,0:2,1:1,1:2".to_owned(), "0:3,1:4".to_owned())
        );
        assert_eq!(t.topics["audit"], ("0:1".to_owned(), "0:3".to_owned()));
    }

    #[test]
    fn a_reorder_copies_nothing_and_is_not_throttled() {
        assert_eq!(
            throttle(&[moved("orders", 0, &[1, 2], &[2, 1])]),
            Throttle::default()
        );
    }
}
