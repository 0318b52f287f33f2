//! The Kafka-side stage: what the agents report read once, the controller quorum moved a step
//! (or a quorum recovery advanced), one stale pod rolled when that is safe, and nodes that left
//! unregistered from KRaft once their process is gone.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kstretch_api::Kafka;
use kstretch_api::KafkaStatus;
use kstretch_core::kraft::{self, REPLICATION_LISTENER};
use kube::ResourceExt;

use super::pass::Pass;
use super::plan::Plan;
use crate::error::Error;
use crate::kafka::build::Built;
use crate::kafka::checks;
use crate::kafka::context::Context;
use crate::kafka::forget;
use crate::kafka::quorum;
use crate::kafka::recover;
use crate::kafka::roll::{self, NodeView, Pick, Reported, Step};
use crate::kafka::warning::{Reason, Warning};
use crate::link::AgentRecord;
use crate::link::restart::{PodToRestart, replaced};

/// How long the agent has to answer a restart.
const RESTART_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the Kafka-side steps left the cluster.
pub(super) struct Progress {
    /// Where central's admin client reaches the cluster, now that its nodes are built.
    pub(super) bootstrap: Option<String>,
    /// Why the quorum is not settled (a change or a recovery under way, no majority).
    pub(super) quorum_busy: Option<String>,
    pub(super) step: Step,
    /// What the roll did or why it waits, when a pod is stale.
    pub(super) rolled: Option<String>,
    /// Registered nodes that belong to no pool and are not unregistered yet.
    pub(super) pending_unregistration: BTreeSet<i32>,
    /// Whether a forgotten cluster came back and still runs its old nodes.
    pub(super) returned: bool,
}

/// Takes this pass's Kafka-side steps; they never end it, what fails is a warning.
pub(super) async fn advance(
    pass: &mut Pass<'_>,
    plan: &Plan,
    built: &Built,
    forgotten_done: &BTreeSet<String>,
) -> Result<Progress, Error> {
    let (ctx, kafka) = (pass.ctx, pass.kafka);
    // What each member cluster's agent last reported, read once for this reconciliation.
    let records: BTreeMap<String, AgentRecord> = built
        .objects
        .keys()
        .filter_map(|alias| ctx.agents.get(alias).map(|r| (alias.clone(), r)))
        .collect();
    pass.warnings.extend(rejected_objects(&records, kafka));
    let bootstrap = bootstrap(ctx, kafka, plan, built);
    let applied: BTreeSet<String> = records
        .iter()
        .filter(|(alias, r)| {
            let published = ctx.owners.published_hash(alias);
            published.is_some() && published == r.last_apply.as_ref().map(|a| a.hash.clone())
        })
        .map(|(alias, _)| alias.clone())
        .collect();
    let views = node_views(&records, kafka, built, &plan.connected, &applied);
    let quorum_busy = quorum_step(pass, plan, built, &views, bootstrap.as_deref()).await?;
    let step = roll::next(&views, quorum_busy.as_deref());
    let rolled = roll_one(
        ctx,
        kafka,
        &kafka.namespace().unwrap_or_default(),
        &step,
        &views,
        bootstrap.as_deref(),
        &mut pass.warnings,
    )
    .await;
    let returned = forget::returning(&ctx.agents, kafka, &plan.forgotten);
    let pending_unregistration =
        unregistration(pass, plan, forgotten_done, returned, bootstrap.as_deref()).await;
    for alias in built
        .objects
        .keys()
        .filter(|a| !plan.connected.contains(*a))
    {
        pass.warnings.push(Warning::new(
            Reason::ClusterUnreachable,
            format!(
                "the agent of Kubernetes cluster {alias} is not connected: its pods are not checked, rolled or scaled down until it is back"
            ),
        ));
    }
    if !pending_unregistration.is_empty() {
        pass.warnings.push(Warning::new(
            Reason::UnregistrationPending,
            format!(
                "nodes {pending_unregistration:?} are registered in Kafka but belong to no node pool; each is unregistered once its process is gone (fenced)"
            ),
        ));
    }
    Ok(Progress {
        bootstrap,
        quorum_busy,
        step,
        rolled,
        pending_unregistration,
        returned,
    })
}

/// The admin bootstrap: with per-node Services it is known only now that their addresses are.
/// The topic operator reaches this cluster where the reconciler does.
fn bootstrap(ctx: &Context, kafka: &Kafka, plan: &Plan, built: &Built) -> Option<String> {
    let bootstrap = plan
        .bootstrap
        .clone()
        .or_else(|| kraft::bootstrap_servers(&built.cluster, REPLICATION_LISTENER).ok());
    if let Some(bootstrap) = &bootstrap {
        ctx.kafka.secure(bootstrap, plan.admin_tls.as_ref());
        ctx.kafka.set_bootstrap(
            &kafka.namespace().unwrap_or_default(),
            &kafka.name_any(),
            bootstrap,
        );
    }
    bootstrap
}

/// A recovery holds every other change of the quorum until it is done; without a majority
/// nothing changes. `Some` says why the quorum is not settled.
async fn quorum_step(
    pass: &mut Pass<'_>,
    plan: &Plan,
    built: &Built,
    views: &[NodeView],
    bootstrap: Option<&str>,
) -> Result<Option<String>, Error> {
    let (ctx, kafka) = (pass.ctx, pass.kafka);
    Ok(match (&plan.recovering, &plan.majority_lost) {
        (Some(r), _) => {
            let why = recover::advance(ctx, kafka, r, views, bootstrap, &mut pass.status).await?;
            pass.warnings
                .push(Warning::new(Reason::QuorumRecovery, why.clone()));
            Some(why)
        }
        (None, Some(why)) => Some(why.clone()),
        (None, None) => {
            advance_quorum(
                ctx,
                kafka,
                &built.cluster,
                &plan.desired_controllers,
                &pass.status,
                bootstrap,
                &mut pass.warnings,
            )
            .await
        }
    })
}

/// Unregisters nodes that left; returns those still registered. A forgotten cluster's nodes
/// stay registered until their replicas are replaced.
async fn unregistration(
    pass: &mut Pass<'_>,
    plan: &Plan,
    forgotten_done: &BTreeSet<String>,
    returned: bool,
    bootstrap: Option<&str>,
) -> BTreeSet<i32> {
    let all_ids: BTreeSet<i32> = plan
        .ids
        .values()
        .flatten()
        .chain(
            plan.lost
                .iter()
                .filter(|l| !forgotten_done.contains(&l.alias))
                .flat_map(|l| l.ids.iter()),
        )
        .copied()
        .collect();
    let recorded: BTreeSet<i32> = pass.status.registered_node_ids.iter().copied().collect();
    // A removal to finish is checked every time; otherwise only now and then (KIP-1073 lists
    // registrations central never recorded, e.g. from before it ran).
    // A forgotten cluster that came back runs its old nodes until its agent deletes them; a
    // broker of them that registers again is looked for meanwhile, not at the next idle check.
    let pending = if plan.majority_lost.is_none()
        && (recorded != all_ids || returned || pass.ctx.registration_checks.due(&pass.owner))
    {
        unregister(
            pass.ctx,
            pass.kafka,
            bootstrap,
            &all_ids,
            &pass.status.registered_node_ids,
            &mut pass.warnings,
        )
        .await
    } else if plan.majority_lost.is_some() {
        // Kept for when a controller can unregister them.
        recorded.difference(&all_ids).copied().collect()
    } else {
        BTreeSet::new()
    };
    pass.status.registered_node_ids = all_ids.union(&pending).copied().collect();
    pending
}

/// Moves a dynamic quorum one voter toward `desired` (see [`quorum::advance`]); `Some` says why
/// the quorum is not settled yet, and controllers then do not roll.
async fn advance_quorum(
    ctx: &Context,
    kafka: &Kafka,
    cluster: &kraft::KafkaCluster,
    desired: &BTreeSet<i32>,
    kafka_status: &KafkaStatus,
    bootstrap: Option<&str>,
    warnings: &mut Vec<Warning>,
) -> Option<String> {
    if cluster.quorum != kraft::QuorumMode::Dynamic || !quorum::formed(kafka_status) {
        return None;
    }
    let Some(bootstrap) = bootstrap else {
        return Some("no bootstrap address to read the quorum at".to_owned());
    };
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default();
    let progress = match ctx.kafka.client(bootstrap).await {
        Ok(admin) => quorum::advance(&admin, cluster, desired, now_ms).await,
        Err(e) => Err(e),
    };
    match progress {
        Ok(quorum::Progress::Settled) => None,
        Ok(quorum::Progress::Changed(what)) => {
            tracing::info!(change = %what, "controller quorum changed");
            ctx.events
                .about(kafka, false, "QuorumChanged", "Quorum", what.clone());
            Some(what)
        }
        Ok(quorum::Progress::Waiting(why)) => {
            warnings.push(Warning::new(Reason::QuorumChangePending, why.clone()));
            Some(why)
        }
        Err(e) => {
            ctx.kafka.forget(bootstrap);
            Some(format!("cannot read or change the controller quorum: {e}"))
        }
    }
}

/// Objects of this `Kafka` that an agent could not apply (or delete), from its last report.
fn rejected_objects(records: &BTreeMap<String, AgentRecord>, kafka: &Kafka) -> Vec<Warning> {
    let ns = kafka.namespace().unwrap_or_default();
    let prefix = format!("{}-", kafka.name_any());
    let mut out = Vec::new();
    for (alias, record) in records {
        let Some(report) = &record.last_apply else {
            continue;
        };
        let failed = crate::link::agents::rejected_in(report, &ns, &prefix);
        if !failed.is_empty() {
            out.push(Warning::new(
                Reason::ApplyFailed,
                format!(
                    "the agent of cluster {alias} could not apply {} object(s) of snapshot {}: {}",
                    failed.len(),
                    report.generation,
                    failed.join("; ")
                ),
            ));
        }
    }
    out
}

/// Every built node with what its agent last reported.
fn node_views(
    records: &BTreeMap<String, AgentRecord>,
    kafka: &Kafka,
    built: &Built,
    connected: &BTreeSet<String>,
    applied: &BTreeSet<String>,
) -> Vec<NodeView> {
    let ns = kafka.namespace().unwrap_or_default();
    built
        .nodes
        .values()
        .map(|n| {
            let podset = format!("{}-{}", kafka.name_any(), n.pool);
            let reported = records
                .get(&n.alias)
                .and_then(|r| {
                    r.podsets
                        .iter()
                        .find(|s| s.namespace == ns && s.name == podset)
                })
                .and_then(|s| s.pods_status.iter().find(|p| p.name == n.pod))
                .filter(|p| !p.uid.is_empty())
                .map(|p| Reported {
                    uid: p.uid.clone(),
                    ready: p.ready,
                    revision: p.revision.clone(),
                });
            NodeView {
                id: n.id,
                alias: n.alias.clone(),
                pod: n.pod.clone(),
                roles: n.roles.clone(),
                desired_revision: n.revision.clone(),
                reported,
                connected: connected.contains(&n.alias),
                applied: applied.contains(&n.alias),
            }
        })
        .collect()
}

/// Restarts the first candidate that is safe ([`roll::pick`], over Kafka's partitions read
/// once when a broker that is up is among them); returns what it did or why it waits.
async fn roll_one(
    ctx: &Context,
    kafka: &Kafka,
    namespace: &str,
    step: &Step,
    views: &[NodeView],
    bootstrap: Option<&str>,
    warnings: &mut Vec<Warning>,
) -> Option<String> {
    let Step::Restart(candidates) = step else {
        return None;
    };
    let partitions = if roll::needs_partitions(candidates, views) {
        Some(partitions(ctx, bootstrap).await)
    } else {
        None
    };
    let partitions = partitions
        .as_ref()
        .map(|p| p.as_deref().map_err(String::as_str));
    match roll::pick(candidates, views, partitions) {
        Pick::Restart(node) => {
            let Some(reported) = &node.reported else {
                return None;
            };
            let pod = PodToRestart {
                namespace: namespace.to_owned(),
                name: node.pod.clone(),
                uid: reported.uid.clone(),
                reason: "its revision changed".to_owned(),
            };
            Some(restart(ctx, kafka, node, pod).await)
        }
        Pick::HeldBack(held_back) => {
            if !held_back.is_empty() {
                warnings.push(Warning::new(
                    Reason::RollingUpdateBlocked,
                    format!(
                        "pods waiting to roll would take partitions below min.insync.replicas: {}",
                        held_back.join("; ")
                    ),
                ));
            }
            Some(
                "pods run an outdated revision; waiting until one can be restarted safely"
                    .to_owned(),
            )
        }
    }
}

/// Kafka's partitions with their ISRs, or why they cannot be read.
async fn partitions(
    ctx: &Context,
    bootstrap: Option<&str>,
) -> Result<Vec<checks::PartitionIsr>, String> {
    let b = bootstrap.ok_or("no bootstrap address for the admin client")?;
    let admin = ctx
        .kafka
        .client(b)
        .await
        .map_err(|e| format!("cannot reach Kafka: {e}"))?;
    checks::partitions(&admin).await.map_err(|e| {
        ctx.kafka.forget(b);
        format!("cannot check its partitions: {e}")
    })
}

async fn restart(ctx: &Context, kafka: &Kafka, node: &NodeView, pod: PodToRestart) -> String {
    match ctx
        .restarts
        .restart(&node.alias, pod, RESTART_TIMEOUT)
        .await
    {
        Ok(result) if replaced(&result) => {
            ctx.metrics.restarted();
            tracing::info!(pod = %node.pod, cluster = %node.alias, "rolled pod");
            ctx.events.about(
                kafka,
                false,
                "PodRolled",
                "RollingUpdate",
                format!(
                    "restarted pod {} in cluster {}: its revision changed",
                    node.pod, node.alias
                ),
            );
            format!("rolling pod {} in cluster {}", node.pod, node.alias)
        }
        Ok(result) => format!(
            "the agent of {} did not restart {}: {}",
            node.alias, node.pod, result.message
        ),
        Err(e) => format!("cannot restart {}: {e}", node.pod),
    }
}

/// Unregisters every registered broker that is no longer a node of the cluster and is fenced
/// (its process is gone); returns the IDs still waiting. Failures are warnings, retried next
/// time, and never block anything else.
async fn unregister(
    ctx: &Context,
    kafka: &Kafka,
    bootstrap: Option<&str>,
    desired: &BTreeSet<i32>,
    recorded: &[i32],
    warnings: &mut Vec<Warning>,
) -> BTreeSet<i32> {
    let recorded: BTreeSet<i32> = recorded.iter().copied().collect();
    let fallback: BTreeSet<i32> = recorded.difference(desired).copied().collect();
    let Some(bootstrap) = bootstrap else {
        return fallback;
    };
    let admin = match ctx.kafka.client(bootstrap).await {
        Ok(a) => a,
        Err(e) => {
            if !fallback.is_empty() {
                warnings.push(Warning::new(
                    Reason::UnregistrationFailed,
                    format!("cannot reach Kafka to unregister nodes {fallback:?}: {e}"),
                ));
            }
            return fallback;
        }
    };
    let described = admin.describe_cluster(true).await;
    let (candidates, live): (BTreeSet<i32>, BTreeSet<i32>) = match described {
        Ok(d) => (
            d.brokers
                .iter()
                .map(|b| b.id)
                .filter(|id| !desired.contains(id))
                .collect(),
            d.brokers
                .iter()
                .filter(|b| !b.fenced)
                .map(|b| b.id)
                .collect(),
        ),
        Err(kstretch_kadmin::Error::Unsupported { .. }) => {
            // Before KIP-1073: the IDs recorded in the status, minus the live brokers.
            match admin.describe_cluster(false).await {
                Ok(d) => (fallback.clone(), d.brokers.iter().map(|b| b.id).collect()),
                Err(e) => {
                    ctx.kafka.forget(bootstrap);
                    warnings.push(Warning::new(
                        Reason::UnregistrationFailed,
                        format!("cannot list the registered nodes: {e}"),
                    ));
                    return fallback;
                }
            }
        }
        Err(e) => {
            ctx.kafka.forget(bootstrap);
            if !fallback.is_empty() {
                warnings.push(Warning::new(
                    Reason::UnregistrationFailed,
                    format!("cannot list the registered nodes: {e}"),
                ));
            }
            return fallback;
        }
    };
    let (fenced, mut pending) = fenced_and_live(&candidates, &live);
    for id in fenced {
        match admin.unregister_broker(id).await {
            Ok(()) | Err(kstretch_kadmin::Error::BrokerNotRegistered { .. }) => {
                ctx.metrics.unregistered();
                tracing::info!(node = id, "unregistered a removed node from KRaft");
                ctx.events.about(
                    kafka,
                    false,
                    "NodeUnregistered",
                    "Unregister",
                    format!("node {id} left the cluster and was unregistered from KRaft"),
                );
            }
            Err(e) => {
                warnings.push(Warning::new(
                    Reason::UnregistrationFailed,
                    format!("cannot unregister node {id}: {e}"),
                ));
                pending.insert(id);
            }
        }
    }
    pending
}

/// Of the registered nodes no pool has (`candidates`), those to unregister now (fenced: their
/// process is gone) and those that wait (still heartbeating: unregistering them would only be
/// undone by their next registration). Pure.
fn fenced_and_live(
    candidates: &BTreeSet<i32>,
    live: &BTreeSet<i32>,
) -> (BTreeSet<i32>, BTreeSet<i32>) {
    candidates.iter().partition(|id| !live.contains(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_fenced_nodes_are_unregistered_and_live_ones_wait() {
        let candidates = BTreeSet::from([3, 4, 5]);
        let live = BTreeSet::from([0, 1, 4]);
        assert_eq!(
            fenced_and_live(&candidates, &live),
            (BTreeSet::from([3, 5]), BTreeSet::from([4]))
        );
    }
}
