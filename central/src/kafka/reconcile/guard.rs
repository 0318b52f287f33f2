//! The guard stage: removals that are not safe now wait — controllers still voting in a dynamic
//! quorum, nodes in a member cluster whose agent is away, brokers still holding replicas, the
//! leaving nodes of a moving pool — and names that would not fit are refused.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;

use kstretch_api::{Kafka, KafkaStatus, names};
use kstretch_core::kraft;
use kstretch_core::node_ids::{Assignments, Role};
use kube::ResourceExt;

use super::pass::{Flow, Pass, PoolIdsByName, RolesByName};
use super::plan::Plan;
use crate::kafka::checks;
use crate::kafka::context::Context;
use crate::kafka::moving;
use crate::kafka::quorum;
use crate::kafka::resolve::Resolved;
use crate::kafka::warning::{Reason, Warning};

/// Turns `plan`'s pools into what runs after this pass; refuses a pod name over 63 characters.
pub(super) async fn guard(pass: &mut Pass<'_>, plan: &mut Plan) -> Flow<()> {
    let (ctx, kafka) = (pass.ctx, pass.kafka);
    let mut roles: RolesByName = plan
        .resolved
        .pools
        .iter()
        .map(|p| (p.name.clone(), p.roles.clone()))
        .collect();
    hold_voters(
        &pass.status,
        &plan.resolved,
        &plan.assignments,
        &mut plan.ids,
        &mut roles,
        &mut pass.warnings,
    );
    guard_removals(
        ctx,
        kafka,
        &plan.resolved,
        &plan.assignments,
        &plan.connected,
        plan.bootstrap.as_deref(),
        &mut plan.ids,
        &mut roles,
        &mut pass.warnings,
    )
    .await;
    for pool in &mut plan.resolved.pools {
        if let Some(r) = roles.get(&pool.name) {
            pool.roles = r.clone();
        }
    }
    plan.draining = moving::keep_leaving(
        ctx,
        kafka,
        &mut plan.resolved,
        &pass.status,
        &plan.connected,
        plan.bootstrap.as_deref(),
        &mut plan.ids,
        &mut pass.warnings,
    )
    .await;
    match too_long_pod_name(kafka, &plan.resolved, &plan.ids) {
        Some(message) => pass.refused("NameTooLong", &message).await,
        None => Ok(ControlFlow::Continue(())),
    }
}

/// Derived names must fit once the pools have their new IDs.
fn too_long_pod_name(kafka: &Kafka, resolved: &Resolved, ids: &PoolIdsByName) -> Option<String> {
    let (pool, id) = resolved.pools.iter().find_map(|p| {
        ids.get(&p.name)?
            .iter()
            .find(|id| kraft::pod_name(&kafka.name_any(), &p.name, **id).len() > 63)
            .map(|id| (p.name.clone(), *id))
    })?;
    let name = kraft::pod_name(&kafka.name_any(), &pool, id);
    Some(format!(
        "the pod name {name} derived from Kafka {} and KafkaNodePool {pool} has {} characters, more than 63: shorten the Kafka or the pool name",
        kafka.name_any(),
        name.len()
    ))
}

/// Keeps the nodes of a pool that would remove controllers which are still voters of a
/// dynamic quorum: a voter is removed from the quorum first (see [`super::kafka_side`]), so that
/// stopping it never costs the quorum a live member.
fn hold_voters(
    kafka_status: &KafkaStatus,
    resolved: &Resolved,
    assignments: &Assignments,
    ids: &mut PoolIdsByName,
    roles: &mut RolesByName,
    warnings: &mut Vec<Warning>,
) {
    if quorum::mode(kafka_status) != kraft::QuorumMode::Dynamic {
        return;
    }
    let voters: BTreeSet<i32> = kafka_status
        .quorum
        .iter()
        .flat_map(|q| q.voters.iter().map(|v| v.id))
        .collect();
    for pool in &resolved.pools {
        let Some(a) = assignments.pools.get(&pool.name) else {
            continue;
        };
        let leaving: Vec<i32> = a.to_remove.intersection(&voters).copied().collect();
        if leaving.is_empty() || !pool.ids.current_roles.contains(&Role::Controller) {
            continue;
        }
        ids.insert(pool.name.clone(), a.current.clone());
        roles.insert(pool.name.clone(), pool.current_or_spec_roles());
        warnings.push(Warning::new(
            Reason::VoterRemovalPending,
            format!(
                "KafkaNodePool {}: controllers {leaving:?} stop once they are removed from the quorum's voters, one at a time",
                pool.name
            ),
        ));
    }
}

/// Reverts removals that are not safe now: in a member cluster whose agent is not connected,
/// and brokers that still hold partition replicas (unless the `Kafka` says to skip the check).
#[allow(clippy::too_many_arguments)]
async fn guard_removals(
    ctx: &Context,
    kafka: &Kafka,
    resolved: &Resolved,
    assignments: &Assignments,
    connected: &BTreeSet<String>,
    bootstrap: Option<&str>,
    ids: &mut PoolIdsByName,
    roles: &mut RolesByName,
    warnings: &mut Vec<Warning>,
) {
    let skip_check = kafka
        .annotations()
        .get(names::SKIP_BROKER_SCALEDOWN_CHECK)
        .is_some_and(|v| v == "true");
    let mut to_check: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
    for pool in &resolved.pools {
        let Some(a) = assignments.pools.get(&pool.name) else {
            continue;
        };
        if a.to_remove.is_empty() && a.losing_broker_role.is_empty() {
            continue;
        }
        if !connected.contains(&pool.alias) {
            ids.insert(pool.name.clone(), a.current.clone());
            roles.insert(pool.name.clone(), pool.current_or_spec_roles());
            warnings.push(Warning::new(
                Reason::ScaleDownDeferred,
                format!(
                    "KafkaNodePool {}: removing nodes {:?} waits until the agent of cluster {} is connected",
                    pool.name,
                    a.to_remove.union(&a.losing_broker_role).collect::<Vec<_>>(),
                    pool.alias
                ),
            ));
            continue;
        }
        if skip_check {
            continue;
        }
        let brokers: BTreeSet<i32> = if pool.ids.current_roles.contains(&Role::Broker) {
            a.to_remove.union(&a.losing_broker_role).copied().collect()
        } else {
            BTreeSet::new()
        };
        if !brokers.is_empty() {
            to_check.insert(pool.name.clone(), brokers);
        }
    }
    if to_check.is_empty() {
        return;
    }
    let all: BTreeSet<i32> = to_check.values().flatten().copied().collect();
    let holding = checks::holding_replicas_at(&ctx.kafka, bootstrap, &all).await;
    for (pool_name, brokers) in to_check {
        let Some(pool) = resolved.pools.iter().find(|p| p.name == pool_name) else {
            continue;
        };
        let Some(a) = assignments.pools.get(&pool_name) else {
            continue;
        };
        let blocked: Vec<String> = match &holding {
            Ok(holding) => brokers
                .iter()
                .filter_map(|id| {
                    holding.get(id).map(|parts| {
                        let shown: Vec<&str> = parts.iter().take(3).map(String::as_str).collect();
                        format!(
                            "broker {id} holds {} partition replica(s) ({}{})",
                            parts.len(),
                            shown.join(", "),
                            if parts.len() > 3 { ", ..." } else { "" }
                        )
                    })
                })
                .collect(),
            Err(e) => vec![format!("cannot check the brokers' partitions: {e}")],
        };
        if blocked.is_empty() {
            continue;
        }
        ids.insert(pool_name.clone(), a.current.clone());
        roles.insert(pool_name.clone(), pool.current_or_spec_roles());
        warnings.push(Warning::new(
            Reason::ScaleDownBlocked,
            format!(
                "KafkaNodePool {pool_name}: the scale-down or broker-role removal is reverted because {}; move the partitions away first (or set the annotation {}=true on the Kafka to skip this check)",
                blocked.join("; "),
                names::SKIP_BROKER_SCALEDOWN_CHECK
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use kstretch_api::KafkaNodePool;

    use super::*;
    use crate::kafka::resolve::{
        self,
        tests::{kafka, members, pool},
    };

    fn ids_of(resolved: &Resolved, ids: &[i32]) -> PoolIdsByName {
        resolved
            .pools
            .iter()
            .map(|p| (p.name.clone(), ids.iter().copied().collect()))
            .collect()
    }

    #[test]
    fn a_new_node_id_that_makes_a_pod_name_over_63_characters_is_named_with_its_length() {
        let kafka = kafka(serde_json::json!({}));
        // my-cluster-<pool>-0 has 63 characters: fits, as resolve checked; node 10 does not.
        let long = "p".repeat(50);
        let pools = [pool(
            &long,
            &["controller", "broker"],
            2,
            serde_json::json!({}),
        )];
        let pools: Vec<&KafkaNodePool> = pools.iter().collect();
        let resolved = resolve::resolve(&kafka, &pools, &members()).unwrap();
        assert_eq!(
            too_long_pod_name(&kafka, &resolved, &ids_of(&resolved, &[0, 1])),
            None
        );
        let message = too_long_pod_name(&kafka, &resolved, &ids_of(&resolved, &[0, 10])).unwrap();
        let name = format!("my-cluster-{long}-10");
        assert!(
            message.contains(&format!("{name} derived from Kafka my-cluster")),
            "{message}"
        );
        assert!(message.contains(&format!("has {} characters", name.len())));
    }

    #[test]
    fn pod_names_that_fit_are_not_refused() {
        let kafka = kafka(serde_json::json!({}));
        let pools = [pool(
            "dual",
            &["controller", "broker"],
            2,
            serde_json::json!({}),
        )];
        let pools: Vec<&KafkaNodePool> = pools.iter().collect();
        let resolved = resolve::resolve(&kafka, &pools, &members()).unwrap();
        assert_eq!(
            too_long_pod_name(&kafka, &resolved, &ids_of(&resolved, &[0, 1, 2])),
            None
        );
    }
}
