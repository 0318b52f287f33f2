//! The partition movement planner: where every partition's replicas go when brokers leave (a
//! pool moves to another Kubernetes cluster, a cluster is drained or forgotten) or when a
//! partition should span more clusters ([`spread`]), and in what
//! order the moves run. Each broker's Kubernetes cluster is its rack. The plan keeps every
//! partition's replication factor, moves only partitions that have a replica on a leaving
//! broker, puts new replicas in clusters the partition does not use yet (then on the brokers
//! holding the fewest bytes), moves leadership off leaving brokers before any data moves, and
//! leaves alone, naming them, partitions that are not in sync enough to move
//! ([`Partition::safe_to_move`]: moving them would lean on replicas that are not in sync).
//! Pure.

pub mod restore;
pub mod spread;
#[cfg(test)]
mod tests;
pub mod throttle;

use std::collections::{BTreeMap, BTreeSet};

/// A partition as Kafka reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    pub topic: String,
    pub partition: i32,
    /// The replicas, preferred leader first.
    pub replicas: Vec<i32>,
    /// The in-sync replicas.
    pub isr: BTreeSet<i32>,
    pub leader: Option<i32>,
    /// Bytes of one replica (the largest a replica reports).
    pub size: u64,
    /// The topic's `min.insync.replicas`.
    pub min_isr: usize,
}

impl Partition {
    /// Whether the partition is in sync enough to move: at least `min.insync.replicas` of its
    /// replicas are, or all of them. A partition with fewer replicas than
    /// `min.insync.replicas` (replication factor 1 under a broker default of 2) can never reach
    /// that many, yet moving it is as safe as it gets when its every replica is in sync: Kafka
    /// copies the new replicas before it drops the old ones.
    pub fn safe_to_move(&self) -> bool {
        let in_sync = self
            .replicas
            .iter()
            .filter(|r| self.isr.contains(r))
            .count();
        in_sync >= self.min_isr.min(self.replicas.len())
    }
}

/// One partition's move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    pub topic: String,
    pub partition: i32,
    pub from: Vec<i32>,
    /// The new replicas, preferred leader first.
    pub to: Vec<i32>,
    /// Bytes copied: one replica per broker added.
    pub bytes: u64,
}

impl Move {
    /// `p` moving to `to`: one replica's bytes copied per broker added.
    fn of(p: &Partition, to: Vec<i32>) -> Move {
        let added = to.iter().filter(|b| !p.replicas.contains(b)).count() as u64;
        Move {
            topic: p.topic.clone(),
            partition: p.partition,
            from: p.replicas.clone(),
            to,
            bytes: p.size * added,
        }
    }
}

/// A partition whose leader leaves while another of its replicas stays: its replicas are
/// reordered (same set) so the staying one is preferred, and a preferred election moves the
/// leadership before any data moves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderChange {
    pub topic: String,
    pub partition: i32,
    /// The replicas reordered, the new leader first.
    pub replicas: Vec<i32>,
}

/// What to do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub leadership: Vec<LeaderChange>,
    pub moves: Vec<Move>,
    /// Partitions left where they are because they are not in sync enough to move
    /// ([`Partition::safe_to_move`]): `topic-partition`, for the operator to report.
    pub unsafe_partitions: Vec<String>,
    /// Partitions whose every in-sync replica was on a lost broker ([`replace_lost`]): offline
    /// until a lost broker returns, which it never does; `topic-partition`.
    pub lost_partitions: Vec<String>,
}

impl Plan {
    /// Bytes the plan copies.
    pub fn bytes(&self) -> u64 {
        self.moves.iter().map(|m| m.bytes).sum()
    }

    /// Seconds the copying takes at `throttle` bytes per second per broker, the busiest
    /// receiving broker deciding (rounded up; 0 without moves).
    pub fn seconds_at(&self, throttle: u64) -> u64 {
        let mut per_broker: BTreeMap<i32, u64> = BTreeMap::new();
        for m in &self.moves {
            for added in m.to.iter().filter(|b| !m.from.contains(b)) {
                *per_broker.entry(*added).or_default() += m.bytes / added_count(m);
            }
        }
        let busiest = per_broker.values().copied().max().unwrap_or(0);
        busiest.div_ceil(throttle.max(1))
    }

    /// The moves in batches of at most `max_partitions` partitions and `max_bytes` bytes (a
    /// partition larger than `max_bytes` is a batch of its own), smallest first so progress
    /// shows early.
    pub fn batches(&self, max_partitions: usize, max_bytes: u64) -> Vec<Vec<Move>> {
        let mut moves = self.moves.clone();
        moves.sort_by(|a, b| {
            (a.bytes, &a.topic, a.partition).cmp(&(b.bytes, &b.topic, b.partition))
        });
        let mut out: Vec<Vec<Move>> = Vec::new();
        let mut bytes = 0u64;
        for m in moves {
            let fits = out.last().is_some_and(|batch| {
                batch.len() < max_partitions.max(1) && bytes.saturating_add(m.bytes) <= max_bytes
            });
            if !fits {
                out.push(Vec::new());
                bytes = 0;
            }
            bytes = bytes.saturating_add(m.bytes);
            if let Some(batch) = out.last_mut() {
                batch.push(m);
            }
        }
        out
    }
}

/// Bytes each of `brokers` holds in `partitions`.
fn load(partitions: &[Partition], brokers: &BTreeMap<i32, String>) -> BTreeMap<i32, u64> {
    let mut load: BTreeMap<i32, u64> = brokers.keys().map(|b| (*b, 0)).collect();
    for p in partitions {
        for r in &p.replicas {
            if let Some(l) = load.get_mut(r) {
                *l += p.size;
            }
        }
    }
    load
}

fn added_count(m: &Move) -> u64 {
    (m.to.iter().filter(|b| !m.from.contains(b)).count() as u64).max(1)
}

/// Why no plan can be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error(
        "{topic}-{partition} has {replicas} replicas but only {brokers} brokers would remain; add brokers to the target or lower the topic's replication factor"
    )]
    NotEnoughBrokers {
        topic: String,
        partition: i32,
        replicas: usize,
        brokers: usize,
    },
    #[error("no broker would remain: the target has none")]
    NoTarget,
}

impl PlanError {
    pub fn reason(&self) -> &'static str {
        match self {
            PlanError::NotEnoughBrokers { .. } => "NotEnoughBrokers",
            PlanError::NoTarget => "NoTargetBrokers",
        }
    }
}

/// The plan that moves every partition of `partitions` off the brokers not in `target` (broker
/// ID to its rack, the alias of its Kubernetes cluster).
pub fn plan(partitions: &[Partition], target: &BTreeMap<i32, String>) -> Result<Plan, PlanError> {
    place(partitions, target, &Leaving::NotInTarget)
}

/// The plan that gives every partition with a replica on a `lost` broker (gone for good: its
/// Kubernetes cluster was forgotten) its replication factor back on `target`. Unlike a move
/// off brokers that still run, a partition below `min.insync.replicas` is restored too (its
/// lost replicas never come back, so waiting would not help), copying from a surviving
/// in-sync replica; one with none left is lost and only named.
pub fn replace_lost(
    partitions: &[Partition],
    lost: &BTreeSet<i32>,
    target: &BTreeMap<i32, String>,
) -> Result<Plan, PlanError> {
    place(partitions, target, &Leaving::Lost(lost))
}

/// Which replicas leave.
enum Leaving<'a> {
    /// Every replica on a broker outside the target (the broker still runs).
    NotInTarget,
    /// The replicas on these brokers (gone); the others stay, in the target or not.
    Lost(&'a BTreeSet<i32>),
}

impl Leaving<'_> {
    fn stays(&self, replica: i32, target: &BTreeMap<i32, String>) -> bool {
        match self {
            Leaving::NotInTarget => target.contains_key(&replica),
            Leaving::Lost(lost) => !lost.contains(&replica),
        }
    }
}

fn place(
    partitions: &[Partition],
    target: &BTreeMap<i32, String>,
    leaving: &Leaving<'_>,
) -> Result<Plan, PlanError> {
    if target.is_empty() {
        return Err(PlanError::NoTarget);
    }
    // Bytes each target broker holds, updated as replicas are placed.
    let mut load = load(partitions, target);
    let mut sorted: Vec<&Partition> = partitions.iter().collect();
    // The largest first: they have the most to gain from the least-loaded brokers.
    sorted.sort_by(|a, b| (b.size, &a.topic, a.partition).cmp(&(a.size, &b.topic, b.partition)));
    let mut plan = Plan::default();
    for p in sorted {
        let keep: Vec<i32> = p
            .replicas
            .iter()
            .copied()
            .filter(|r| leaving.stays(*r, target))
            .collect();
        if keep.len() == p.replicas.len() {
            continue;
        }
        let room = keep.len() + target.keys().filter(|b| !keep.contains(b)).count();
        if p.replicas.len() > room {
            return Err(PlanError::NotEnoughBrokers {
                topic: p.topic.clone(),
                partition: p.partition,
                replicas: p.replicas.len(),
                brokers: room,
            });
        }
        let name = format!("{}-{}", p.topic, p.partition);
        match leaving {
            Leaving::NotInTarget if !p.safe_to_move() => {
                plan.unsafe_partitions.push(name);
                continue;
            }
            Leaving::Lost(_) if !keep.iter().any(|r| p.isr.contains(r)) => {
                plan.lost_partitions.push(name);
                continue;
            }
            _ => {}
        }
        let leader_leaves = p.leader.is_some_and(|l| !leaving.stays(l, target));
        // The new leader: the first staying replica that is in sync.
        let staying_leader = keep.iter().copied().find(|r| p.isr.contains(r));
        if leader_leaves && let Some(new_leader) = staying_leader {
            let mut replicas = vec![new_leader];
            replicas.extend(p.replicas.iter().copied().filter(|r| *r != new_leader));
            plan.leadership.push(LeaderChange {
                topic: p.topic.clone(),
                partition: p.partition,
                replicas,
            });
        }
        let mut to = match staying_leader.filter(|_| leader_leaves) {
            Some(first) => {
                let mut v = vec![first];
                v.extend(keep.iter().copied().filter(|r| *r != first));
                v
            }
            None => keep.clone(),
        };
        let mut racks: BTreeSet<&str> = to
            .iter()
            .filter_map(|r| target.get(r))
            .map(String::as_str)
            .collect();
        while to.len() < p.replicas.len() {
            let pick = load
                .iter()
                .filter(|(b, _)| !to.contains(b))
                .min_by_key(|(b, bytes)| {
                    let rack = target.get(b).map(String::as_str).unwrap_or_default();
                    (racks.contains(rack), **bytes, **b)
                })
                .map(|(b, _)| *b);
            let Some(pick) = pick else { break };
            to.push(pick);
            if let Some(rack) = target.get(&pick) {
                racks.insert(rack);
            }
            if let Some(l) = load.get_mut(&pick) {
                *l += p.size;
            }
        }
        plan.moves.push(Move::of(p, to));
    }
    let by_name = |t: &String, p: &i32| (t.clone(), *p);
    plan.moves.sort_by_key(|m| by_name(&m.topic, &m.partition));
    plan.leadership
        .sort_by_key(|l| by_name(&l.topic, &l.partition));
    plan.unsafe_partitions.sort();
    plan.lost_partitions.sort();
    Ok(plan)
}
