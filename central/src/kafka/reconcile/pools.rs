//! The pools stage: each pool's status (its node IDs are recorded as soon as they are desired,
//! as Strimzi does, so an ID is never handed out twice), an Event per scale, and the status of
//! pools lost with a forgotten cluster once its forget operation is done.

use std::collections::BTreeSet;

use kstretch_api::condition::Condition;
use kstretch_api::node_pool::LeavingNodes;
use kstretch_api::{KafkaNodePool, KafkaNodePoolStatus, names};
use kstretch_core::kraft;
use kstretch_core::node_ids;
use kube::ResourceExt;

use super::pass::Pass;
use super::plan::Plan;
use crate::error::Error;
use crate::kafka::forget;
use crate::kafka::resolve::{self, ResolvedPool};
use crate::kafka::status;
use crate::kafka::warning::{Reason, Warning};

/// What the pools' side of a pass writes (decided by [`decide`]).
pub(super) struct Records<'a> {
    /// The status of each pool that runs.
    running: Vec<(&'a KafkaNodePool, KafkaNodePoolStatus)>,
    /// The status of each pool lost with a forgotten cluster, written once its forget
    /// operation exists.
    lost: Vec<(&'a KafkaNodePool, KafkaNodePoolStatus)>,
    /// An Event (reason, message) for each pool that gains or loses nodes.
    events: Vec<(&'a KafkaNodePool, Scaled)>,
    /// The forgotten clusters' operations and what they say.
    forgets: forget::Forgets,
}

/// Every pool's status and Events, and the forgotten clusters' operations (pure).
pub(super) fn decide<'a>(
    kafka_name: &str,
    pools: &[&'a KafkaNodePool],
    plan: &Plan,
    forgets: forget::Forgets,
    now: &str,
) -> Records<'a> {
    let (mut running, mut lost) = (Vec::new(), Vec::new());
    let mut events = Vec::new();
    for pool in pools {
        let name = pool.name_any();
        let Some(r) = plan.resolved.pools.iter().find(|p| p.name == name) else {
            continue;
        };
        let node_ids: Vec<i32> = plan
            .ids
            .get(&r.name)
            .into_iter()
            .flatten()
            .copied()
            .collect();
        let (pool_status, said) = pool_record(kafka_name, pool, r, node_ids, &plan.cluster_id, now);
        running.push((*pool, pool_status));
        events.extend(said.into_iter().map(|scaled| (*pool, scaled)));
    }
    for pool in pools {
        let name = pool.name_any();
        let Some(l) = plan.lost.iter().find(|l| l.pool == name) else {
            continue;
        };
        if plan.resolved.pools.iter().all(|p| p.name != name) {
            let done = forgets.done.contains(&l.alias);
            lost.push((*pool, forget::pool_status(pool, &plan.lost, done, now)));
        }
    }
    Records {
        running,
        lost,
        events,
        forgets,
    }
}

/// Writes every pool's status, sends the pools' Events and creates the forget operations;
/// returns the forgotten clusters whose forget is done.
pub(super) async fn record(pass: &mut Pass<'_>, plan: &Plan) -> Result<BTreeSet<String>, Error> {
    let forgets = forget::decide(pass.kafka, &plan.forgotten, &plan.lost, &plan.operations);
    let records = decide(
        &pass.kafka.name_any(),
        &pass.pools,
        plan,
        forgets,
        &pass.now,
    );
    let client = &pass.ctx.client;
    for (pool, scaled) in records.events {
        let reason = scaled.reason();
        pass.ctx
            .events
            .about(pool, false, reason, "Scale", scaled.message);
    }
    for (pool, pool_status) in records.running {
        status::apply_pool(client, pool, pool_status).await?;
    }
    forget::create(client, &records.forgets.create).await?;
    for (pool, pool_status) in records.lost {
        status::apply_pool(client, pool, pool_status).await?;
    }
    pass.warnings.extend(records.forgets.warnings);
    Ok(records.forgets.done)
}

/// An Event about the nodes a pool gains or loses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Scaled {
    pub(super) gained: bool,
    pub(super) message: String,
}

impl Scaled {
    pub(super) const fn reason(&self) -> &'static str {
        if self.gained {
            "NodesAdded"
        } else {
            "NodesRemoved"
        }
    }
}

/// What is recorded for one pool (pure): its status with `node_ids` after this pass, and an
/// Event for the nodes it gains and for those it loses.
fn pool_record(
    kafka_name: &str,
    pool: &KafkaNodePool,
    r: &ResolvedPool,
    node_ids: Vec<i32>,
    cluster_id: &str,
    now: &str,
) -> (KafkaNodePoolStatus, Vec<Scaled>) {
    let name = &r.name;
    let recorded = pool.status.as_ref().map(|s| s.node_ids.clone());
    let (added, removed) = node_ids::id_changes(recorded.as_deref().unwrap_or_default(), &node_ids);
    let mut events = Vec::new();
    if !added.is_empty() {
        let pods: Vec<String> = added
            .iter()
            .map(|id| kraft::pod_name(kafka_name, name, *id))
            .collect();
        events.push(Scaled {
            gained: true,
            message: format!(
                "nodes {added:?} added to pool {name}: pods {}",
                pods.join(", ")
            ),
        });
    }
    if !removed.is_empty() {
        events.push(Scaled {
            gained: false,
            message: format!(
                "nodes {removed:?} removed from pool {name}; their pods stop once the agents apply the change, and they are unregistered from KRaft when gone"
            ),
        });
    }
    let existing = pool
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    let warnings: Vec<Warning> = r
        .not_acted_on
        .iter()
        .map(|w| Warning::new(Reason::NotActedOn, w.clone()))
        .collect();
    let pool_status = KafkaNodePoolStatus {
        conditions: status::conditions(&existing, Condition::ready(), &warnings, now),
        observed_generation: r.generation,
        replicas: Some(node_ids.len() as i32),
        node_ids,
        cluster_id: Some(cluster_id.to_owned()),
        cluster_alias: Some(r.alias.clone()),
        leaving: r.leaving.as_ref().map(|l| LeavingNodes {
            cluster_alias: l.alias.clone(),
            node_ids: l.ids.iter().copied().collect(),
            started_at: l.started_at.clone().or_else(|| Some(now.to_owned())),
        }),
        roles: resolve::process_roles(&r.roles),
        label_selector: Some(format!(
            "{}={kafka_name},{}={kafka_name}-kafka,{}=Kafka,{}={name}",
            names::CLUSTER,
            names::NAME,
            names::KIND,
            names::POOL_NAME
        )),
    };
    (pool_status, events)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use kstretch_api::{KafkaOperation, KafkaStatus};

    use super::*;
    use crate::kafka::resolve::tests::{kafka, members, pool};

    const NOW: &str = "2026-11-27T17:00:00Z";

    fn resolved_pool(p: &KafkaNodePool) -> ResolvedPool {
        let kafka = kafka(serde_json::json!({}));
        let resolved = resolve::resolve(&kafka, &[p], &members()).unwrap();
        resolved.pools.into_iter().next().unwrap()
    }

    #[test]
    fn a_scaled_pool_records_its_new_ids_and_says_which_pods_come_and_go() {
        let p = pool(
            "dual",
            &["controller", "broker"],
            3,
            serde_json::json!({"status": {"nodeIds": [0, 1, 5], "roles": ["controller", "broker"],
                                          "clusterAlias": "alpha"}}),
        );
        let r = resolved_pool(&p);
        let (pool_status, events) = pool_record("my-cluster", &p, &r, vec![0, 1, 2], "id-1", NOW);
        assert_eq!(pool_status.node_ids, vec![0, 1, 2]);
        assert_eq!(pool_status.replicas, Some(3));
        assert_eq!(pool_status.cluster_id.as_deref(), Some("id-1"));
        assert_eq!(pool_status.cluster_alias.as_deref(), Some("alpha"));
        assert_eq!(
            pool_status.label_selector.as_deref(),
            Some(
                "strimzi.io/cluster=my-cluster,strimzi.io/name=my-cluster-kafka,strimzi.io/kind=Kafka,strimzi.io/pool-name=dual"
            )
        );
        assert!(pool_status.conditions.iter().any(|c| c.is_true()));
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].reason(), "NodesAdded");
        assert!(
            events[0].message.contains("pods my-cluster-dual-2"),
            "{events:?}"
        );
        assert_eq!(events[1].reason(), "NodesRemoved");
        assert!(
            events[1]
                .message
                .starts_with("nodes [5] removed from pool dual")
        );
    }

    #[test]
    fn a_pool_lost_with_a_forgotten_cluster_keeps_its_ids_until_its_forget_is_done() {
        use super::super::fixtures::{nothing_runs, plan_with};
        let forgetting = kafka(serde_json::json!({"metadata": {"annotations": {
            names::FORGOTTEN_CLUSTERS: "beta"}}}));
        let status = KafkaStatus {
            cluster_id: Some("id-1".into()),
            ..KafkaStatus::default()
        };
        let in_alpha = pool(
            "a",
            &["controller", "broker"],
            3,
            serde_json::json!({"status": {"nodeIds": [0, 1, 2], "roles": ["controller", "broker"],
                                          "clusterAlias": "alpha", "clusterId": "id-1"}}),
        );
        let in_beta = pool(
            "b",
            &["broker"],
            2,
            serde_json::json!({"metadata": {"annotations": {names::STRETCH_CLUSTER_ALIAS: "beta"}},
                               "status": {"nodeIds": [3, 4], "roles": ["broker"],
                                          "clusterAlias": "beta", "clusterId": "id-1"}}),
        );
        let pools = [in_alpha, in_beta];
        let records_with = |operations: Vec<KafkaOperation>| {
            let plan = plan_with(&forgetting, &pools, &status, nothing_runs(), operations).unwrap();
            let forgets =
                forget::decide(&forgetting, &plan.forgotten, &plan.lost, &plan.operations);
            let refs: Vec<&KafkaNodePool> = pools.iter().collect();
            let records = decide("my-cluster", &refs, &plan, forgets, NOW);
            let lost: Vec<(String, Vec<i32>)> = records
                .lost
                .iter()
                .map(|(p, s)| (p.name_any(), s.node_ids.clone()))
                .collect();
            (records.forgets, lost)
        };

        // Its operation is created; the lost nodes' IDs stay taken while it runs.
        let (forgets, lost) = records_with(Vec::new());
        assert_eq!(forgets.create.len(), 1);
        assert_eq!(forgets.create[0].name_any(), "my-cluster-forget-beta");
        assert!(forgets.done.is_empty());
        assert_eq!(lost, [("b".to_owned(), vec![3, 4])]);

        let mut completed = forgets.create[0].clone();
        completed.status =
            Some(serde_json::from_value(serde_json::json!({"phase": "Completed"})).unwrap());
        let (forgets, lost) = records_with(vec![completed]);
        assert!(forgets.create.is_empty());
        assert_eq!(forgets.done, ["beta".to_owned()].into());
        assert_eq!(lost, [("b".to_owned(), vec![])]);
    }

    #[test]
    fn a_pool_whose_ids_stay_records_them_without_an_event() {
        let p = pool(
            "dual",
            &["controller", "broker"],
            2,
            serde_json::json!({"status": {"nodeIds": [0, 1], "roles": ["controller", "broker"],
                                          "clusterAlias": "alpha"}}),
        );
        let r = resolved_pool(&p);
        let (pool_status, events) = pool_record("my-cluster", &p, &r, vec![0, 1], "id-1", NOW);
        assert_eq!(pool_status.node_ids, vec![0, 1]);
        assert!(events.is_empty());
    }
}
