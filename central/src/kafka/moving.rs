//! A `KafkaNodePool` moving to another member cluster (its `strimzi.io/stretch-cluster-alias`
//! changed while it has nodes): which of the nodes it leaves behind are still needed. The
//! drains that move their partition replicas away are [`super::move_drains`]'s.
//!
//! The pool gets new nodes, with new IDs, in the cluster it moves to ([`super::resolve`]); a
//! leaving node stops only once it holds no replica and is no voter of the quorum, which the
//! quorum reconciliation changes by adding the new controllers before removing old ones.

use std::collections::{BTreeMap, BTreeSet};

use kstretch_api::operation::phase;
use kstretch_api::{KafkaOperation, KafkaStatus};
use kstretch_core::node_ids::Role;

use super::resolve::Resolved;
use crate::kafka::warning::{Reason, Warning};

/// The leaving brokers of moving pools whose cluster's agent is connected: whether they still
/// hold replicas is what [`keep_leaving`] needs to know.
pub fn leaving_brokers(effective: &Resolved, connected: &BTreeSet<String>) -> BTreeSet<i32> {
    effective
        .pools
        .iter()
        .filter(|p| p.ids.current_roles.contains(&Role::Broker))
        .filter_map(|p| p.leaving.as_ref())
        .filter(|l| connected.contains(&l.alias))
        .flat_map(|l| l.ids.iter().copied())
        .collect()
}

/// Keeps, of each moving pool's leaving nodes, those still needed, and drops the rest (they
/// stop, and are unregistered once gone): all while their cluster's agent is away (nothing
/// there can be changed), brokers that hold partition replicas (`holding`; or when that cannot
/// be known), brokers a drain that has not ended names (`in_drains`: it still removes its
/// throttle from them), and controllers that are voters. Kept nodes join `ids` and stay in the
/// pool's `leaving`. Returns, by pool, the brokers that hold replicas. Pure.
pub fn keep_leaving(
    effective: &mut Resolved,
    kafka_status: &KafkaStatus,
    connected: &BTreeSet<String>,
    holding: Result<&BTreeSet<i32>, &String>,
    in_drains: &BTreeSet<i32>,
    ids: &mut BTreeMap<String, BTreeSet<i32>>,
    warnings: &mut Vec<Warning>,
) -> BTreeMap<String, BTreeSet<i32>> {
    let voters: BTreeSet<i32> = kafka_status
        .quorum
        .iter()
        .flat_map(|q| q.voters.iter().map(|v| v.id))
        .collect();

    let no_voters = BTreeSet::new();
    let mut draining = BTreeMap::new();
    for pool in &mut effective.pools {
        let Some(leaving) = pool.leaving.as_ref() else {
            continue;
        };
        let roles = &pool.ids.current_roles;
        let needed = needed(
            &leaving.ids,
            connected.contains(&leaving.alias),
            roles.contains(&Role::Broker).then_some(holding),
            in_drains,
            if roles.contains(&Role::Controller) {
                &voters
            } else {
                &no_voters
            },
        );
        if !needed.draining.is_empty() {
            draining.insert(pool.name.clone(), needed.draining.clone());
        }
        if !needed.kept.is_empty() {
            warnings.push(Warning::new(
                Reason::PoolMoving,
                format!(
                    "KafkaNodePool {} moves from Kubernetes cluster {} to {}: nodes {:?} in {} stop once {}",
                    pool.name,
                    leaving.alias,
                    pool.alias,
                    needed.kept,
                    leaving.alias,
                    needed.waits_for.join(" and ")
                ),
            ));
            ids.entry(pool.name.clone())
                .or_default()
                .extend(&needed.kept);
        }
        pool.leaving = pool.leaving.take().and_then(|mut l| {
            l.ids = needed.kept;
            (!l.ids.is_empty()).then_some(l)
        });
    }
    draining
}

/// Which leaving nodes are still needed, and why.
#[derive(Debug, Default, PartialEq, Eq)]
struct Needed {
    kept: BTreeSet<i32>,
    /// Brokers kept because they hold replicas: what a drain must empty.
    draining: BTreeSet<i32>,
    waits_for: Vec<String>,
}

/// Of `leaving` (nodes of one pool in the cluster it leaves, `connected` or not), those still
/// needed: all while the cluster's agent is away; brokers (`holding`: the brokers that hold
/// replicas, or why that is unknown; `None` for nodes without the broker role) that hold
/// replicas or cannot be checked; and `voters`.
fn needed(
    leaving: &BTreeSet<i32>,
    connected: bool,
    holding: Option<Result<&BTreeSet<i32>, &String>>,
    in_drains: &BTreeSet<i32>,
    voters: &BTreeSet<i32>,
) -> Needed {
    let mut needed = Needed::default();
    if !connected {
        needed.kept = leaving.clone();
        needed
            .waits_for
            .push("the agent of their cluster is connected again".to_owned());
        return needed;
    }
    match holding {
        None => {}
        Some(Ok(holding)) => {
            needed.draining = leaving.intersection(holding).copied().collect();
            if !needed.draining.is_empty() {
                needed.waits_for.push(format!(
                    "brokers {:?} hold no partition replica (a drain moves them)",
                    needed.draining
                ));
            }
            let finishing: BTreeSet<i32> = leaving
                .intersection(in_drains)
                .filter(|b| !needed.draining.contains(b))
                .copied()
                .collect();
            if !finishing.is_empty() {
                needed
                    .waits_for
                    .push(format!("the drain of brokers {finishing:?} has ended"));
                needed.kept.extend(finishing);
            }
        }
        Some(Err(e)) => {
            needed.kept.extend(leaving);
            needed
                .waits_for
                .push(format!("their partitions can be checked ({e})"));
        }
    }
    needed.kept.extend(&needed.draining);
    let voting: BTreeSet<i32> = leaving.intersection(voters).copied().collect();
    if !voting.is_empty() {
        needed.waits_for.push(format!(
            "controllers {voting:?} have left the quorum's voters (after the new controllers joined)"
        ));
        needed.kept.extend(voting);
    }
    needed
}

/// The brokers that drains among a `Kafka`'s operations `ops` which have not ended name (a
/// drain still removes its throttle from them at the end).
pub fn in_running_drains(ops: &[KafkaOperation]) -> BTreeSet<i32> {
    ops.iter()
        .filter(|o| {
            let p = o.status.as_ref().and_then(|s| s.phase.as_deref());
            !phase::ended(p) && p != Some(phase::REFUSED)
        })
        .filter_map(|o| o.spec.drain.as_ref())
        .flat_map(|d| d.node_ids.iter().copied())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[i32]) -> BTreeSet<i32> {
        ids.iter().copied().collect()
    }

    #[test]
    fn a_leaving_node_is_kept_while_it_holds_replicas_votes_or_cannot_be_seen() {
        let leaving = set(&[3, 4]);
        // Brokers: the one holding replicas stays, and is drained.
        let holding = set(&[4, 7]);
        let n = needed(&leaving, true, Some(Ok(&holding)), &set(&[]), &set(&[]));
        assert_eq!((n.kept.clone(), n.draining.clone()), (set(&[4]), set(&[4])));
        assert!(
            n.waits_for[0].contains("brokers {4} hold no partition replica"),
            "{n:?}"
        );
        // Emptied, but the drain still has to take its throttle off them.
        let n = needed(&leaving, true, Some(Ok(&set(&[]))), &set(&[3]), &set(&[]));
        assert_eq!((n.kept.clone(), n.draining.clone()), (set(&[3]), set(&[])));
        assert!(
            n.waits_for[0].contains("drain of brokers {3} has ended"),
            "{n:?}"
        );
        // Nothing to hold: nothing kept, they stop now.
        let n = needed(&leaving, true, Some(Ok(&set(&[]))), &set(&[]), &set(&[]));
        assert_eq!(n, Needed::default());
        // Unknown counts as holding, without a drain (there is nothing to plan it from).
        let e = "timed out".to_owned();
        let n = needed(&leaving, true, Some(Err(&e)), &set(&[]), &set(&[]));
        assert_eq!(
            (n.kept.clone(), n.draining.clone()),
            (leaving.clone(), set(&[]))
        );
        assert!(n.waits_for[0].contains("timed out"), "{n:?}");
        // Controllers: voters stay until the quorum let them go.
        let n = needed(&leaving, true, None, &set(&[]), &set(&[0, 3]));
        assert_eq!(n.kept, set(&[3]));
        assert!(n.waits_for[0].contains("controllers {3}"), "{n:?}");
        // Their cluster's agent away: everything stays, whatever else is true.
        let n = needed(&leaving, false, Some(Ok(&set(&[]))), &set(&[]), &set(&[]));
        assert_eq!(n.kept, leaving);
        assert!(n.waits_for[0].contains("connected again"), "{n:?}");
    }
}
