//! The guard (pure): removals that are not safe now wait — controllers still voting in a
//! dynamic quorum, nodes in a member cluster whose agent is away, brokers still holding
//! replicas, the leaving nodes of a moving pool — and names that would not fit are refused.
//! What it must know from Kafka ([`Questions`]) is asked before, and answered ([`Held`]) by
//! the caller.

use std::collections::{BTreeMap, BTreeSet};

use kstretch_api::{Kafka, KafkaStatus, names};
use kstretch_core::kraft;
use kstretch_core::node_ids::{Assignments, Role};
use kube::ResourceExt;

use super::pass::{PoolIdsByName, RolesByName};
use super::plan::Plan;
use super::refuse::Cause;
use crate::kafka::moving;
use crate::kafka::quorum;
use crate::kafka::resolve::Resolved;
use crate::kafka::warning::{Reason, Warning};
use crate::status::Refusal;

/// What the guard must know from Kafka before it decides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Questions {
    /// Per pool, the brokers it removes (or takes the broker role from) whose replicas decide
    /// whether that may go ahead.
    removals: BTreeMap<String, BTreeSet<i32>>,
    /// The brokers of moving pools that are leaving.
    leaving: BTreeSet<i32>,
}

impl Questions {
    /// What `plan` asks of Kafka: the replicas of the brokers it removes in connected clusters
    /// (unless the `Kafka` skips that check) and of the leaving brokers of moving pools.
    pub(super) fn of(kafka: &Kafka, plan: &Plan) -> Questions {
        let skip_check = kafka
            .annotations()
            .get(names::SKIP_BROKER_SCALEDOWN_CHECK)
            .is_some_and(|v| v == "true");
        Questions {
            removals: removals_to_check(
                &plan.resolved,
                &plan.assignments,
                &plan.connected,
                skip_check,
            ),
            leaving: moving::leaving_brokers(&plan.resolved, &plan.connected),
        }
    }

    /// The brokers whose replicas are asked about.
    pub(super) fn brokers(&self) -> BTreeSet<i32> {
        self.removals
            .values()
            .flatten()
            .chain(&self.leaving)
            .copied()
            .collect()
    }

    /// Whether the drains that run matter: only while pools move.
    pub(super) fn drains(&self) -> bool {
        !self.leaving.is_empty()
    }
}

/// The answers to [`Questions`], read once per pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Held {
    /// The partition replicas (`topic-partition`) each broker asked about holds, or why that
    /// cannot be known.
    pub(super) holding: Result<BTreeMap<i32, Vec<String>>, String>,
    /// The brokers that drains of this `Kafka` which have not ended name, or why that cannot be
    /// known.
    pub(super) in_drains: Result<BTreeSet<i32>, String>,
}

/// Turns `plan`'s pools into what runs after this pass (pure), from what Kafka answered;
/// refuses a pod name over 63 characters.
pub(super) fn guard(
    kafka: &Kafka,
    plan: &mut Plan,
    kafka_status: &KafkaStatus,
    questions: &Questions,
    held: &Held,
) -> Result<(), Refusal> {
    let mut warnings = std::mem::take(&mut plan.warnings);
    decide(plan, kafka_status, &questions.removals, held, &mut warnings);
    plan.warnings = warnings;
    match too_long_pod_name(kafka, &plan.resolved, &plan.ids) {
        Some(message) => Err(Refusal::new(Cause::NameTooLong.as_str(), message)),
        None => Ok(()),
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
    read: &Held,
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
    fn a_planned_scale_down_asks_what_its_broker_holds_and_waits_while_it_holds_replicas() {
        use super::super::fixtures::{nothing_runs, plan_of};
        let k = kafka(serde_json::json!({}));
        let status = KafkaStatus {
            cluster_id: Some("id-1".into()),
            ..KafkaStatus::default()
        };
        let brokers = pool(
            "brokers",
            &["broker"],
            2,
            serde_json::json!({"status": {"nodeIds": [0, 1, 2], "roles": ["broker"],
                                          "clusterAlias": "alpha", "clusterId": "id-1"}}),
        );
        let controllers = pool(
            "controllers",
            &["controller"],
            3,
            serde_json::json!({"status": {"nodeIds": [10, 11, 12], "roles": ["controller"],
                                          "clusterAlias": "alpha", "clusterId": "id-1"}}),
        );
        let pools = [brokers, controllers];
        let guarded = |holding: BTreeMap<i32, Vec<String>>| {
            let mut plan = plan_of(&k, &pools, &status, nothing_runs()).unwrap();
            let questions = Questions::of(&k, &plan);
            assert_eq!(questions.brokers(), BTreeSet::from([2]));
            assert!(!questions.drains());
            let held = Held {
                holding: Ok(holding),
                in_drains: Ok(BTreeSet::new()),
            };
            guard(&k, &mut plan, &status, &questions, &held).unwrap();
            (plan.ids["brokers"].clone(), plan.warnings)
        };
        let (ids, warnings) = guarded(BTreeMap::new());
        assert_eq!((ids, warnings), (BTreeSet::from([0, 1]), vec![]));
        let (ids, warnings) = guarded(BTreeMap::from([(2, vec!["orders-0".to_owned()])]));
        assert_eq!(ids, BTreeSet::from([0, 1, 2]));
        assert_eq!(warnings.len(), 1);
        assert_eq!(warnings[0].reason, Reason::ScaleDownBlocked);
        assert!(
            warnings[0]
                .message
                .contains("broker 2 holds 1 partition replica(s) (orders-0)")
        );
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
