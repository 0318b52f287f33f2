//! Replication-factor changes: where each partition's replicas go (keep what exists, keep the
//! leader, add the least-loaded brokers, spread racks) and how far the reassignment has got.

use std::collections::{BTreeMap, BTreeSet};

use super::model::PartitionState;

/// A live broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broker {
    pub id: i32,
    pub rack: Option<String>,
}

/// Why no assignment can be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReassignError {
    #[error("replication factor {requested} is invalid: spec.replicas must be at least 1")]
    InvalidReplicationFactor { requested: i16 },
    #[error(
        "replication factor {requested} needs {requested} brokers but only {available} are \
         live; lower spec.replicas or add brokers"
    )]
    NotEnoughBrokers { requested: i16, available: usize },
}

impl ReassignError {
    pub fn reason(&self) -> &'static str {
        match self {
            ReassignError::InvalidReplicationFactor { .. } => "InvalidReplicationFactor",
            ReassignError::NotEnoughBrokers { .. } => "NotEnoughBrokers",
        }
    }
}

/// `status.replicasChange.state`; `Done` means the status entry is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicasChangeState {
    /// Targets computed but not (all) submitted: submit the missing ones.
    Pending,
    /// Kafka is moving data.
    Ongoing,
    Done,
}

impl ReplicasChangeState {
    pub fn as_str(&self) -> &'static str {
        match self {
            ReplicasChangeState::Pending => "pending",
            ReplicasChangeState::Ongoing => "ongoing",
            ReplicasChangeState::Done => "done",
        }
    }
}

/// Target replicas for every partition, by partition ID. Partitions whose replica count
/// already is `target_rf` keep their replicas untouched; the others lose replicas on brokers
/// that are not live, then drop their last non-leader replicas or gain the least-loaded brokers
/// (brokers in racks the partition does not use first, then fewest replicas of this topic,
/// then lowest ID), so the result is deterministic.
pub fn target_assignments(
    partitions: &[PartitionState],
    target_rf: i16,
    brokers: &[Broker],
) -> Result<BTreeMap<i32, Vec<i32>>, ReassignError> {
    let rf = usize::try_from(target_rf)
        .ok()
        .filter(|rf| *rf >= 1)
        .ok_or(ReassignError::InvalidReplicationFactor {
            requested: target_rf,
        })?;
    let racks: BTreeMap<i32, Option<&str>> =
        brokers.iter().map(|b| (b.id, b.rack.as_deref())).collect();
    if racks.len() < rf {
        return Err(ReassignError::NotEnoughBrokers {
            requested: target_rf,
            available: racks.len(),
        });
    }
    let mut load: BTreeMap<i32, usize> = racks.keys().map(|id| (*id, 0)).collect();
    for p in partitions {
        for b in dedup(&p.target_replicas()) {
            if let Some(n) = load.get_mut(&b) {
                *n += 1;
            }
        }
    }

    let mut sorted: Vec<&PartitionState> = partitions.iter().collect();
    sorted.sort_by_key(|p| p.id);
    let mut out = BTreeMap::new();
    for p in sorted {
        let current = dedup(&p.target_replicas());
        if current.len() == rf {
            out.insert(p.id, current);
            continue;
        }
        let live: Vec<i32> = current
            .iter()
            .copied()
            .filter(|b| racks.contains_key(b))
            .collect();
        let mut replicas = if live.len() > rf {
            shrink(&live, p.leader, rf)
        } else {
            live.clone()
        };
        for b in &live {
            if !replicas.contains(b)
                && let Some(n) = load.get_mut(b)
            {
                *n = n.saturating_sub(1);
            }
        }
        while replicas.len() < rf {
            let used: BTreeSet<&str> = replicas
                .iter()
                .filter_map(|b| racks.get(b).copied().flatten())
                .collect();
            let pick = racks
                .iter()
                .filter(|(id, _)| !replicas.contains(id))
                .min_by_key(|(id, rack)| {
                    let rack_used = rack.is_some_and(|r| used.contains(r));
                    (rack_used, load.get(id).copied().unwrap_or(0), **id)
                })
                .map(|(id, _)| *id);
            // Cannot be None: there are at least `rf` live brokers.
            let Some(pick) = pick else { break };
            replicas.push(pick);
            *load.entry(pick).or_insert(0) += 1;
        }
        out.insert(p.id, replicas);
    }
    Ok(out)
}

/// Keeps the leader and the first replicas in preference order, dropping from the end.
fn shrink(live: &[i32], leader: Option<i32>, rf: usize) -> Vec<i32> {
    let leader = leader.filter(|l| live.contains(l));
    let mut others_left = rf - usize::from(leader.is_some());
    live.iter()
        .copied()
        .filter(|b| {
            if Some(*b) == leader {
                return true;
            }
            if others_left > 0 {
                others_left -= 1;
                return true;
            }
            false
        })
        .collect()
}

fn dedup(replicas: &[i32]) -> Vec<i32> {
    let mut seen = BTreeSet::new();
    replicas
        .iter()
        .copied()
        .filter(|b| seen.insert(*b))
        .collect()
}

/// The reassignments to submit: partitions whose target differs from their replicas and that
/// have no reassignment running.
pub fn to_submit(
    partitions: &[PartitionState],
    targets: &BTreeMap<i32, Vec<i32>>,
) -> BTreeMap<i32, Vec<i32>> {
    partitions
        .iter()
        .filter(|p| p.reassignment.is_none())
        .filter_map(|p| {
            let target = targets.get(&p.id)?;
            (!same_set(&p.replicas, target)).then(|| (p.id, target.clone()))
        })
        .collect()
}

/// How far a replication-factor change has got: `Ongoing` while any target partition is being
/// reassigned, `Done` once every target partition has exactly its target replicas, `Pending`
/// otherwise (something still has to be submitted). Order is ignored: Kafka may list replicas
/// in another order than submitted.
pub fn progress(
    targets: &BTreeMap<i32, Vec<i32>>,
    observed: &[PartitionState],
) -> ReplicasChangeState {
    let by_id: BTreeMap<i32, &PartitionState> = observed.iter().map(|p| (p.id, p)).collect();
    let mut all_done = true;
    for (id, target) in targets {
        match by_id.get(id) {
            Some(p) if p.reassignment.is_some() => return ReplicasChangeState::Ongoing,
            Some(p) if same_set(&p.replicas, target) => {}
            _ => all_done = false,
        }
    }
    if all_done {
        ReplicasChangeState::Done
    } else {
        ReplicasChangeState::Pending
    }
}

fn same_set(a: &[i32], b: &[i32]) -> bool {
    a.iter().collect::<BTreeSet<_>>() == b.iter().collect::<BTreeSet<_>>()
}
