//! Assigning Kafka node IDs to node pools as they scale, with Strimzi's rules: IDs are unique
//! across all pools of a cluster, a new node takes the lowest free ID (gaps are filled), a
//! scale-down removes the highest ID, and the pool annotations can name the IDs to add or
//! remove. The annotations are read only when the pool's replica count changes.

use std::collections::{BTreeMap, BTreeSet};

use super::range::NodeIdRange;

/// KRaft process role of a pool's nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    Controller,
    Broker,
}

/// What the assignment needs to know of one pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolIds {
    pub name: String,
    /// `spec.replicas`.
    pub replicas: u32,
    /// `status.nodeIds`; `None` for a pool that has never been reconciled. Without the
    /// leaving nodes.
    pub current: Option<Vec<i32>>,
    /// Nodes the pool still runs in the Kubernetes cluster it is moving away from: their IDs
    /// are taken (by this pool) but not counted toward its replicas.
    pub leaving: Vec<i32>,
    /// `spec.roles`.
    pub roles: BTreeSet<Role>,
    /// `status.roles`, the roles the nodes run with today.
    pub current_roles: BTreeSet<Role>,
    /// The `strimzi.io/next-node-ids` annotation, verbatim.
    pub next_node_ids: Option<String>,
    /// The `strimzi.io/remove-node-ids` annotation, verbatim.
    pub remove_node_ids: Option<String>,
}

/// The outcome for one pool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignment {
    /// IDs the pool has today.
    pub current: BTreeSet<i32>,
    /// IDs the pool should have.
    pub desired: BTreeSet<i32>,
    pub to_add: BTreeSet<i32>,
    pub to_remove: BTreeSet<i32>,
    /// Nodes that stay in the pool but lose the broker role; they must hold no partition
    /// replicas before the change is applied.
    pub losing_broker_role: BTreeSet<i32>,
}

/// Assignments of every pool, by pool name, and the annotation problems met on the way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignments {
    pub pools: BTreeMap<String, Assignment>,
    /// One line per annotation that could not be used, naming the pool; the assignment then
    /// falls back to the default choice. Shown to the user as a `Warning` condition.
    pub warnings: Vec<String>,
}

/// Why no assignment can be made; nothing may change until the user fixes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssignmentError {
    #[error("node ID {id} is used by both node pools {first} and {second}")]
    DuplicateNodeId {
        id: i32,
        first: String,
        second: String,
    },
    #[error("node pool {pool} lists node ID {id} twice in its status")]
    DuplicateInPool { id: i32, pool: String },
    #[error("node pool {pool} has a negative node ID {id} in its status")]
    NegativeNodeId { id: i32, pool: String },
    #[error("no free node ID is left for node pool {pool}")]
    Exhausted { pool: String },
}

impl AssignmentError {
    /// Stable reason for conditions and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::DuplicateNodeId { .. } | Self::DuplicateInPool { .. } => "DuplicateNodeId",
            Self::NegativeNodeId { .. } => "InvalidNodeId",
            Self::Exhausted { .. } => "NodeIdsExhausted",
        }
    }
}

/// Computes the node IDs of every pool of one Kafka cluster.
///
/// Pools are handled in the order given (callers pass them sorted by name so that the result is
/// deterministic). IDs being removed stay reserved during this pass, so an ID moved between
/// pools is freed by one reconciliation and taken by a later one, as in Strimzi.
pub fn assign(pools: &[PoolIds]) -> Result<Assignments, AssignmentError> {
    let mut in_use: BTreeMap<i32, &str> = BTreeMap::new();
    for pool in pools {
        let mut seen = BTreeSet::new();
        for &id in pool.current.iter().flatten().chain(&pool.leaving) {
            if id < 0 {
                return Err(AssignmentError::NegativeNodeId {
                    id,
                    pool: pool.name.clone(),
                });
            }
            if !seen.insert(id) {
                return Err(AssignmentError::DuplicateInPool {
                    id,
                    pool: pool.name.clone(),
                });
            }
            if let Some(first) = in_use.insert(id, &pool.name) {
                return Err(AssignmentError::DuplicateNodeId {
                    id,
                    first: first.to_owned(),
                    second: pool.name.clone(),
                });
            }
        }
    }
    let mut used: BTreeSet<i32> = in_use.keys().copied().collect();

    let mut result = Assignments::default();
    // A malformed annotation is reported as long as it stands, not only when a scale uses it.
    for pool in pools {
        annotation(
            pool,
            "next-node-ids",
            &pool.next_node_ids,
            &mut result.warnings,
        );
        annotation(
            pool,
            "remove-node-ids",
            &pool.remove_node_ids,
            &mut result.warnings,
        );
    }
    for pool in pools {
        let current: BTreeSet<i32> = pool.current.iter().flatten().copied().collect();
        let wanted = pool.replicas as usize;
        let mut assignment = Assignment {
            current: current.clone(),
            desired: current.clone(),
            ..Assignment::default()
        };
        if wanted > current.len() {
            let preferred = annotation(
                pool,
                "next-node-ids",
                &pool.next_node_ids,
                &mut result.warnings,
            );
            let has_preference = preferred.as_ref().is_some_and(|r| !r.is_empty());
            let mut preferred = preferred.iter().flat_map(NodeIdRange::ids);
            for _ in current.len()..wanted {
                let id = match preferred.by_ref().find(|id| !used.contains(id)) {
                    Some(id) => id,
                    None => {
                        if has_preference {
                            note_fallback(pool, "next-node-ids", &mut result.warnings);
                        }
                        lowest_free(&used).ok_or_else(|| AssignmentError::Exhausted {
                            pool: pool.name.clone(),
                        })?
                    }
                };
                used.insert(id);
                assignment.to_add.insert(id);
                assignment.desired.insert(id);
            }
        } else if wanted < current.len() {
            let preferred = annotation(
                pool,
                "remove-node-ids",
                &pool.remove_node_ids,
                &mut result.warnings,
            );
            let has_preference = preferred.as_ref().is_some_and(|r| !r.is_empty());
            let mut preferred = preferred.iter().flat_map(NodeIdRange::ids);
            for _ in wanted..current.len() {
                let id = match preferred
                    .by_ref()
                    .find(|id| assignment.desired.contains(id))
                {
                    Some(id) => id,
                    None => {
                        if has_preference {
                            note_fallback(pool, "remove-node-ids", &mut result.warnings);
                        }
                        match assignment.desired.last() {
                            Some(&highest) => highest,
                            None => break,
                        }
                    }
                };
                assignment.desired.remove(&id);
                assignment.to_remove.insert(id);
            }
        }
        if pool.current.is_some()
            && pool.current_roles.contains(&Role::Broker)
            && !pool.roles.contains(&Role::Broker)
        {
            assignment.losing_broker_role =
                assignment.desired.intersection(&current).copied().collect();
        }
        result.pools.insert(pool.name.clone(), assignment);
    }
    result.warnings.dedup();
    Ok(result)
}

/// The lowest ID not in `used`, filling gaps first.
fn lowest_free(used: &BTreeSet<i32>) -> Option<i32> {
    let mut next = 0i32;
    for &id in used {
        if id != next {
            break;
        }
        next = next.checked_add(1)?;
    }
    Some(next)
}

fn annotation(
    pool: &PoolIds,
    name: &str,
    value: &Option<String>,
    warnings: &mut Vec<String>,
) -> Option<NodeIdRange> {
    match NodeIdRange::parse(value.as_deref()?) {
        Ok(range) => Some(range),
        Err(err) => {
            let message = format!(
                "node pool {}: annotation strimzi.io/{name} ignored: {err}",
                pool.name
            );
            if !warnings.contains(&message) {
                warnings.push(message);
            }
            None
        }
    }
}

fn note_fallback(pool: &PoolIds, name: &str, warnings: &mut Vec<String>) {
    let default = if name == "next-node-ids" {
        "the lowest free ID"
    } else {
        "the highest ID"
    };
    let message = format!(
        "node pool {}: no usable ID left in annotation strimzi.io/{name}; used {default} instead",
        pool.name
    );
    if !warnings.contains(&message) {
        warnings.push(message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pool(name: &str, replicas: u32, current: Option<&[i32]>) -> PoolIds {
        PoolIds {
            name: name.into(),
            replicas,
            current: current.map(<[i32]>::to_vec),
            roles: [Role::Broker].into(),
            current_roles: if current.is_some() {
                [Role::Broker].into()
            } else {
                BTreeSet::new()
            },
            next_node_ids: None,
            remove_node_ids: None,
            leaving: Vec::new(),
        }
    }

    fn set(ids: &[i32]) -> BTreeSet<i32> {
        ids.iter().copied().collect()
    }

    #[test]
    fn new_pools_count_up_from_zero_across_pools() {
        let result = assign(&[pool("a", 3, None), pool("b", 2, None)]).unwrap();
        assert_eq!(result.pools["a"].desired, set(&[0, 1, 2]));
        assert_eq!(result.pools["b"].desired, set(&[3, 4]));
        assert!(result.warnings.is_empty());
    }

    #[test]
    fn a_moving_pool_gets_new_ids_while_its_leaving_ones_stay_taken() {
        let mut moving = pool("a", 2, Some(&[]));
        moving.leaving = vec![0, 1];
        let result = assign(&[moving.clone(), pool("b", 1, Some(&[2]))]).unwrap();
        assert_eq!(result.pools["a"].desired, set(&[3, 4]));
        assert_eq!(result.pools["a"].to_remove, set(&[]));
        // Another pool cannot hold a leaving ID either.
        let e = assign(&[moving, pool("b", 1, Some(&[1]))]).unwrap_err();
        assert_eq!(e.reason(), "DuplicateNodeId");
    }

    #[test]
    fn scale_up_fills_gaps_first() {
        let result =
            assign(&[pool("a", 4, Some(&[0, 1])), pool("b", 3, Some(&[4, 5, 6]))]).unwrap();
        assert_eq!(result.pools["a"].to_add, set(&[2, 3]));
        assert_eq!(result.pools["b"].to_add, set(&[]));
    }

    #[test]
    fn scale_down_removes_the_highest_id() {
        let result = assign(&[
            pool("a", 2, Some(&[0, 1, 2])),
            pool("b", 2, Some(&[3, 4, 5])),
        ])
        .unwrap();
        assert_eq!(result.pools["a"].to_remove, set(&[2]));
        assert_eq!(result.pools["b"].to_remove, set(&[5]));
        assert_eq!(result.pools["b"].desired, set(&[3, 4]));
    }

    #[test]
    fn next_node_ids_are_used_when_scaling_up() {
        let mut a = pool("a", 5, Some(&[0, 1, 2]));
        a.next_node_ids = Some("[1000-1010]".into());
        let result = assign(&[a]).unwrap();
        assert_eq!(result.pools["a"].to_add, set(&[1000, 1001]));
        assert!(result.warnings.is_empty());
    }

    #[test]
    fn used_ids_in_the_range_are_skipped_without_a_warning() {
        let mut a = pool("a", 4, Some(&[1000, 1001, 1002]));
        a.next_node_ids = Some("[1000-1010]".into());
        let result = assign(&[a]).unwrap();
        assert_eq!(result.pools["a"].to_add, set(&[1003]));
        assert!(result.warnings.is_empty());
    }

    #[test]
    fn an_exhausted_next_range_falls_back_with_a_warning() {
        let mut a = pool("a", 3, Some(&[0, 1]));
        a.next_node_ids = Some("[1]".into());
        let result = assign(&[a]).unwrap();
        assert_eq!(result.pools["a"].to_add, set(&[2]));
        assert_eq!(
            result.warnings,
            [
                "node pool a: no usable ID left in annotation strimzi.io/next-node-ids; used the lowest free ID instead"
            ]
        );
    }

    #[test]
    fn remove_node_ids_pick_what_goes() {
        let mut a = pool("a", 1, Some(&[0, 1, 2]));
        a.remove_node_ids = Some("[1, 7, 0]".into());
        let result = assign(&[a]).unwrap();
        assert_eq!(result.pools["a"].to_remove, set(&[0, 1]));
        assert_eq!(result.pools["a"].desired, set(&[2]));
    }

    #[test]
    fn annotations_change_nothing_without_scaling_but_a_malformed_one_is_reported() {
        let mut a = pool("a", 3, Some(&[0, 1, 2]));
        a.next_node_ids = Some("not a list".into());
        a.remove_node_ids = Some("[0]".into());
        let result = assign(&[a]).unwrap();
        assert_eq!(result.pools["a"].desired, set(&[0, 1, 2]));
        assert_eq!(result.warnings.len(), 1, "{:?}", result.warnings);
        assert!(result.warnings[0].contains("strimzi.io/next-node-ids ignored"));
    }

    #[test]
    fn an_invalid_annotation_is_ignored_with_a_warning_when_scaling() {
        let mut a = pool("a", 2, Some(&[0, 1, 2]));
        a.remove_node_ids = Some("0,1".into());
        let result = assign(&[a]).unwrap();
        assert_eq!(result.pools["a"].to_remove, set(&[2]));
        assert_eq!(result.warnings.len(), 1);
        assert!(
            result.warnings[0]
                .starts_with("node pool a: annotation strimzi.io/remove-node-ids ignored:")
        );
    }

    #[test]
    fn an_invalid_annotation_is_reported_while_it_stands_even_without_a_scale() {
        let mut a = pool("a", 3, Some(&[0, 1, 2]));
        a.next_node_ids = Some("[x]".into());
        let result = assign(std::slice::from_ref(&a)).unwrap();
        assert_eq!(result.warnings.len(), 1, "{:?}", result.warnings);
        assert!(result.warnings[0].contains("strimzi.io/next-node-ids ignored"));
        // Scaling up with it: still one warning, and the lowest free ID.
        a.replicas = 4;
        let result = assign(&[a]).unwrap();
        assert_eq!(result.warnings.len(), 1, "{:?}", result.warnings);
        assert_eq!(result.pools["a"].to_add, set(&[3]));
    }

    #[test]
    fn moving_a_node_frees_it_first_and_takes_it_on_the_next_pass() {
        let mut small = pool("small", 2, Some(&[0, 1, 3]));
        small.remove_node_ids = Some("[3]".into());
        let mut big = pool("big", 3, Some(&[2, 4]));
        big.next_node_ids = Some("[3]".into());
        // Both scaled at once: 3 is still reserved by `small` during this pass.
        let first = assign(&[big.clone(), small.clone()]).unwrap();
        assert_eq!(first.pools["small"].to_remove, set(&[3]));
        assert_eq!(first.pools["big"].to_add, set(&[5]));
        // The documented procedure: scale `small` down, then `big` up.
        small.current = Some(vec![0, 1]);
        big.replicas = 3;
        let second = assign(&[big, small]).unwrap();
        assert_eq!(second.pools["big"].to_add, set(&[3]));
    }

    #[test]
    fn duplicate_ids_are_an_error_naming_both_pools() {
        let err = assign(&[pool("a", 2, Some(&[0, 1])), pool("b", 2, Some(&[1, 2]))]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "node ID 1 is used by both node pools a and b"
        );
        assert_eq!(err.reason(), "DuplicateNodeId");
        let err = assign(&[pool("a", 2, Some(&[4, 4]))]).unwrap_err();
        assert_eq!(err.reason(), "DuplicateNodeId");
        let err = assign(&[pool("a", 1, Some(&[-1]))]).unwrap_err();
        assert_eq!(err.reason(), "InvalidNodeId");
    }

    #[test]
    fn nodes_losing_the_broker_role_are_reported() {
        let mut a = pool("a", 2, Some(&[0, 1, 2]));
        a.roles = [Role::Controller].into();
        a.current_roles = [Role::Controller, Role::Broker].into();
        let result = assign(&[a]).unwrap();
        // Node 2 goes away; 0 and 1 stay but stop being brokers.
        assert_eq!(result.pools["a"].losing_broker_role, set(&[0, 1]));
    }

    #[test]
    fn lowest_free_fills_gaps() {
        assert_eq!(lowest_free(&set(&[])), Some(0));
        assert_eq!(lowest_free(&set(&[0, 1, 4, 5, 6])), Some(2));
        assert_eq!(lowest_free(&set(&[1])), Some(0));
        assert_eq!(lowest_free(&set(&[0, 1, 2])), Some(3));
    }

    fn arb_pools() -> impl Strategy<Value = Vec<PoolIds>> {
        // Disjoint current IDs per pool, built from one shuffled pool of IDs.
        (
            proptest::collection::vec(
                (
                    0u32..6,
                    proptest::option::of(0usize..5),
                    proptest::option::of("[0-9, \\-\\[\\]]{0,12}"),
                    proptest::option::of("[0-9, \\-\\[\\]]{0,12}"),
                ),
                1..5,
            ),
            Just((0..40).collect::<Vec<i32>>()).prop_shuffle(),
        )
            .prop_map(|(specs, ids)| {
                let mut ids = ids.into_iter();
                specs
                    .into_iter()
                    .enumerate()
                    .map(|(i, (replicas, current, next, remove))| {
                        let current = current.map(|n| ids.by_ref().take(n).collect::<Vec<_>>());
                        PoolIds {
                            name: format!("pool-{i}"),
                            replicas,
                            current_roles: [Role::Broker].into(),
                            roles: [Role::Broker].into(),
                            current,
                            next_node_ids: next,
                            remove_node_ids: remove,
                            leaving: Vec::new(),
                        }
                    })
                    .collect()
            })
    }

    proptest! {
        #[test]
        fn assignments_are_consistent(pools in arb_pools()) {
            let result = assign(&pools).unwrap();
            let mut all_desired = BTreeSet::new();
            for pool in &pools {
                let a = &result.pools[&pool.name];
                // Every pool ends up with exactly the replicas it asks for.
                prop_assert_eq!(a.desired.len(), pool.replicas as usize);
                // Desired = current + added - removed, and added/removed are disjoint from it as they should be.
                let mut expected = a.current.clone();
                expected.extend(&a.to_add);
                for id in &a.to_remove { expected.remove(id); }
                prop_assert_eq!(&a.desired, &expected);
                prop_assert!(a.to_add.is_disjoint(&a.current));
                prop_assert!(a.to_remove.is_subset(&a.current));
                // Only one direction per pass.
                prop_assert!(a.to_add.is_empty() || a.to_remove.is_empty());
                // No ID is desired by two pools.
                for id in &a.desired {
                    prop_assert!(all_desired.insert(*id), "id {} desired twice", id);
                }
            }
            // New IDs never take an ID that some pool still has.
            let current: BTreeSet<i32> = result.pools.values().flat_map(|a| a.current.iter().copied()).collect();
            for a in result.pools.values() {
                prop_assert!(a.to_add.is_disjoint(&current));
            }
        }
    }
}
