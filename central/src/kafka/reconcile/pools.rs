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

/// Writes every pool's status; returns the forgotten clusters whose forget is done.
pub(super) async fn record(pass: &mut Pass<'_>, plan: &Plan) -> Result<BTreeSet<String>, Error> {
    for pool in &pass.pools {
        let name = pool.name_any();
        if let Some(r) = plan.resolved.pools.iter().find(|p| p.name == name) {
            record_pool(pass, pool, r, plan).await?;
        }
    }
    let forgotten_done = if plan.forgotten.is_empty() {
        BTreeSet::new()
    } else {
        forget::ensure_operations(
            pass.ctx,
            pass.kafka,
            &plan.forgotten,
            &plan.lost,
            &mut pass.warnings,
        )
        .await?
    };
    for pool in &pass.pools {
        let name = pool.name_any();
        let Some(l) = plan.lost.iter().find(|l| l.pool == name) else {
            continue;
        };
        if plan.resolved.pools.iter().all(|p| p.name != name) {
            let done = forgotten_done.contains(&l.alias);
            let pool_status = forget::pool_status(pool, &plan.lost, done, &pass.now);
            status::apply_pool(&pass.ctx.client, pool, pool_status).await?;
        }
    }
    Ok(forgotten_done)
}

/// One pool's status as resolved in `r`, with an Event for the nodes it gains or loses.
async fn record_pool(
    pass: &Pass<'_>,
    pool: &KafkaNodePool,
    r: &ResolvedPool,
    plan: &Plan,
) -> Result<(), Error> {
    let name = pool.name_any();
    let kafka_name = pass.kafka.name_any();
    let node_ids: Vec<i32> = plan.ids.get(&name).into_iter().flatten().copied().collect();
    let recorded = pool.status.as_ref().map(|s| s.node_ids.clone());
    let (added, removed) = node_ids::id_changes(recorded.as_deref().unwrap_or_default(), &node_ids);
    if !added.is_empty() {
        let pods: Vec<String> = added
            .iter()
            .map(|id| kraft::pod_name(&kafka_name, &name, *id))
            .collect();
        pass.ctx.events.about(
            pool,
            false,
            "NodesAdded",
            "Scale",
            format!(
                "nodes {added:?} added to pool {name}: pods {}",
                pods.join(", ")
            ),
        );
    }
    if !removed.is_empty() {
        pass.ctx.events.about(
pool,
            false,
            "NodesRemoved",
            "Scale",
            format!(
                "nodes {removed:?} removed from pool {name}; their pods stop once the agents apply the change, and they are unregistered from KRaft when gone"
            ),
        );
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
        conditions: status::conditions(&existing, Condition::ready(), &warnings, &pass.now),
        observed_generation: r.generation,
        replicas: Some(node_ids.len() as i32),
        node_ids,
        cluster_id: Some(plan.cluster_id.clone()),
        cluster_alias: Some(r.alias.clone()),
        leaving: r.leaving.as_ref().map(|l| LeavingNodes {
            cluster_alias: l.alias.clone(),
            node_ids: l.ids.iter().copied().collect(),
            started_at: l.started_at.clone().or_else(|| Some(pass.now.clone())),
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
    status::apply_pool(&pass.ctx.client, pool, pool_status).await
}
