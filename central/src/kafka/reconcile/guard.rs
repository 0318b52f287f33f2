//! The guard stage: removals that are not safe now wait — controllers still voting in a dynamic
//! quorum, nodes in a member cluster whose agent is away, brokers still holding replicas, the
//! leaving nodes of a moving pool — and names that would not fit are refused.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;

use kstretch_api::{Kafka, KafkaOperation, KafkaStatus, names};
use kstretch_core::kraft;
use kstretch_core::node_ids::{Assignments, Role};
use kube::ResourceExt;

use super::pass::{Flow, Pass, PoolIdsByName, RolesByName};
use super::plan::Plan;
use super::refuse::Cause;
use crate::kafka::context::Context;
use crate::kafka::moving;
use crate::kafka::quorum;
use crate::kafka::resolve::Resolved;
use crate::kafka::view::{self, Wanted};
use crate::kafka::warning::{Reason, Warning};

/// Turns `plan`'s pools into what runs after this pass; refuses a pod name over 63 characters.
/// What Kafka holds and which drains run is read once; what waits is decided from it.
pub(super) async fn guard(pass: &mut Pass<'_>, plan: &mut Plan) -> Flow<()> {
    let (ctx, kafka) = (pass.ctx, pass.kafka);
    let skip_check = kafka
        .annotations()
        .get(names::SKIP_BROKER_SCALEDOWN_CHECK)
        .is_some_and(|v| v == "true");
    let removals = removals_to_check(
        &plan.resolved,
        &plan.assignments,
        &plan.connected,
        skip_check,
    );
    let leaving = moving::leaving_brokers(&plan.resolved, &plan.connected);
    let read = Read::of(
        ctx,
        &plan.operations,
        plan.bootstrap.as_deref(),
        removals
            .values()
            .flatten()
            .chain(&leaving)
            .copied()
            .collect(),
        !leaving.is_empty(),
    )
    .await;
    decide(plan, &pass.status, &removals, &read, &mut pass.warnings);
    match too_long_pod_name(kafka, &plan.resolved, &plan.ids) {
        Some(message) => pass.refused(Cause::NameTooLong.as_str(), &message),
        None => Ok(ControlFlow::Continue(())),
    }
}

/// What the guard reads, once per pass.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Read {
    /// The partition replicas (`topic-partition`) each broker asked about holds, or why that
    /// cannot be known.
    holding: Result<BTreeMap<i32, Vec<String>>, String>,
    /// The brokers that drains of this `Kafka` which have not ended name, or why that cannot be
    /// known.
    in_drains: Result<BTreeSet<i32>, String>,
}

impl Read {
    /// Reads what `brokers` hold, and (with `drains`) which drains among `ops` run.
    async fn of(
        ctx: &Context,
        ops: &[KafkaOperation],
        bootstrap: Option<&str>,
        brokers: BTreeSet<i32>,
        drains: bool,
    ) -> Read {
        let holding = if brokers.is_empty() {
            Ok(BTreeMap::new())
        } else {
            view::read(&ctx.kafka, bootstrap, Wanted::topics())
                .await
                .holding(&brokers)
                .map_err(|e| e.to_string())
        };
        let in_drains = if drains {
            Ok(moving::in_running_drains(ops))
        } else {
            Ok(BTreeSet::new())
        };
        Read { holding, in_drains }
    }
}

/// What waits, decided from what was read (pure): controllers still voting keep their nodes,
/// removals in a cluster whose agent is away or of brokers that hold replicas are reverted,
/// and a moving pool's leaving nodes stay while they are needed (then `plan.draining` says
/// which brokers a drain must empty).
fn decide(
    plan: &mut Plan,
    kafka_status: &KafkaStatus,
    removals: &BTreeMap<String, BTreeSet<i32>>,
    read: &Read,
    warnings: &mut Vec<Warning>,
) {
    let mut roles: RolesByName = plan
        .resolved
        .pools
        .iter()
        .map(|p| (p.name.clone(), p.roles.clone()))
        .collect();
    hold_voters(
        kafka_status,
        &plan.resolved,
        &plan.assignments,
        &mut plan.ids,
        &mut roles,
        warnings,
    );
    guard_removals(
        &plan.resolved,
        &plan.assignments,
        &plan.connected,
        removals,
        read.holding.as_ref(),
        &mut plan.ids,
        &mut roles,
        warnings,
    );
    for pool in &mut plan.resolved.pools {
        if let Some(r) = roles.get(&pool.name) {
            pool.roles = r.clone();
        }
    }
    // Not knowing which drains run is as good as not knowing what the leaving brokers hold.
    let no_drains = BTreeSet::new();
    let (holding, in_drains) = match (&read.holding, &read.in_drains) {
        (Ok(h), Ok(d)) => (Ok(h.keys().copied().collect::<BTreeSet<i32>>()), d),
        (Err(e), _) | (_, Err(e)) => (Err(e), &no_drains),
    };
    plan.draining = moving::keep_leaving(
        &mut plan.resolved,
        kafka_status,
        &plan.connected,
        holding.as_ref().map_err(|e| *e),
        in_drains,
        &mut plan.ids,
        warnings,
    );
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

/// The brokers whose replicas decide whether each pool's removals may go ahead: those it removes
/// (or takes the broker role from) in a cluster whose agent is connected, unless the `Kafka`
/// skips the check.
fn removals_to_check(
    resolved: &Resolved,
    assignments: &Assignments,
    connected: &BTreeSet<String>,
    skip_check: bool,
) -> BTreeMap<String, BTreeSet<i32>> {
    if skip_check {
        return BTreeMap::new();
    }
    resolved
        .pools
        .iter()
        .filter(|pool| connected.contains(&pool.alias))
        .filter(|pool| pool.ids.current_roles.contains(&Role::Broker))
        .filter_map(|pool| {
            let a = assignments.pools.get(&pool.name)?;
            let brokers: BTreeSet<i32> =
                a.to_remove.union(&a.losing_broker_role).copied().collect();
            (!brokers.is_empty()).then(|| (pool.name.clone(), brokers))
        })
        .collect()
}

/// Reverts removals that are not safe now: in a member cluster whose agent is not connected,
/// and of brokers that hold partition replicas (`removals` are those checked; `holding` what
/// they hold, or why that is unknown).
#[allow(clippy::too_many_arguments)]
fn guard_removals(
    resolved: &Resolved,
    assignments: &Assignments,
    connected: &BTreeSet<String>,
    removals: &BTreeMap<String, BTreeSet<i32>>,
    holding: Result<&BTreeMap<i32, Vec<String>>, &String>,
    ids: &mut PoolIdsByName,
    roles: &mut RolesByName,
    warnings: &mut Vec<Warning>,
) {
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
        let Some(brokers) = removals.get(&pool.name) else {
            continue;
        };
        let blocked: Vec<String> = match holding {
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
        ids.insert(pool.name.clone(), a.current.clone());
        roles.insert(pool.name.clone(), pool.current_or_spec_roles());
        warnings.push(Warning::new(
            Reason::ScaleDownBlocked,
            format!(
                "KafkaNodePool {}: the scale-down or broker-role removal is reverted because {}; move the partitions away first (or set the annotation {}=true on the Kafka to skip this check)",
                pool.name,
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

    /// A broker pool of three nodes in alpha scaled down to two: node 2 is to be removed.
    fn scaled_down() -> (Resolved, Assignments) {
        let kafka = kafka(serde_json::json!({}));
        let pools = [
            pool(
                "controllers",
                &["controller"],
                3,
                serde_json::json!({"status": {"nodeIds": [10, 11, 12], "roles": ["controller"],
                                              "clusterAlias": "alpha"}}),
            ),
            pool(
                "brokers",
                &["broker"],
                2,
                serde_json::json!({"status": {"nodeIds": [0, 1, 2], "roles": ["broker"],
                                              "clusterAlias": "alpha"}}),
            ),
        ];
        let pools: Vec<&KafkaNodePool> = pools.iter().collect();
        let resolved = resolve::resolve(&kafka, &pools, &members()).unwrap();
        let ids: Vec<_> = resolved.pools.iter().map(|p| p.ids.clone()).collect();
        let assignments = kstretch_core::node_ids::assign(&ids).unwrap();
        (resolved, assignments)
    }

    #[test]
    fn only_removals_in_connected_clusters_are_checked_unless_skipped() {
        let (resolved, assignments) = scaled_down();
        let alpha = BTreeSet::from(["alpha".to_owned()]);
        let checked = removals_to_check(&resolved, &assignments, &alpha, false);
        assert_eq!(checked["brokers"], BTreeSet::from([2]));
        assert!(removals_to_check(&resolved, &assignments, &alpha, true).is_empty());
        assert!(removals_to_check(&resolved, &assignments, &BTreeSet::new(), false).is_empty());
    }

    #[test]
    fn a_removal_waits_while_its_broker_holds_replicas_or_its_cluster_is_away() {
        let (resolved, assignments) = scaled_down();
        let alpha = BTreeSet::from(["alpha".to_owned()]);
        let removals = removals_to_check(&resolved, &assignments, &alpha, false);
        let run = |connected: &BTreeSet<String>,
                   holding: Result<&BTreeMap<i32, Vec<String>>, &String>| {
            let mut ids = PoolIdsByName::from([("brokers".to_owned(), BTreeSet::from([0, 1]))]);
            let mut roles = RolesByName::new();
            let mut warnings = Vec::new();
            guard_removals(
                &resolved,
                &assignments,
                connected,
                &removals,
                holding,
                &mut ids,
                &mut roles,
                &mut warnings,
            );
            (ids["brokers"].clone(), warnings)
        };
        // Holding nothing: the removal goes ahead.
        let (ids, warnings) = run(&alpha, Ok(&BTreeMap::new()));
        assert_eq!((ids, warnings), (BTreeSet::from([0, 1]), vec![]));
        // Holding replicas: reverted, naming them.
        let held = BTreeMap::from([(2, vec!["orders-0".to_owned(), "orders-1".to_owned()])]);
        let (ids, warnings) = run(&alpha, Ok(&held));
        assert_eq!(ids, BTreeSet::from([0, 1, 2]));
        assert_eq!(warnings[0].reason, Reason::ScaleDownBlocked);
        assert!(
            warnings[0]
                .message
                .contains("broker 2 holds 2 partition replica(s) (orders-0, orders-1)"),
            "{warnings:?}"
        );
        // Unknown counts as holding.
        let e = "timed out".to_owned();
        let (ids, warnings) = run(&alpha, Err(&e));
        assert_eq!(ids, BTreeSet::from([0, 1, 2]));
        assert!(
            warnings[0]
                .message
                .contains("cannot check the brokers' partitions: timed out")
        );
        // Its cluster's agent away: deferred, whatever Kafka says.
        let (ids, warnings) = run(&BTreeSet::new(), Ok(&BTreeMap::new()));
        assert_eq!(ids, BTreeSet::from([0, 1, 2]));
        assert_eq!(warnings[0].reason, Reason::ScaleDownDeferred);
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
