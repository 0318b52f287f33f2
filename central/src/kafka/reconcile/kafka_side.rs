//! The Kafka-side stage: what the agents report and what Kafka says read once, then the
//! controller quorum moved a step (or a quorum recovery advanced), one stale pod rolled when
//! that is safe, and nodes that left unregistered from KRaft once their process is gone — each
//! decided in [`super::kafka_steps`] and done here.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kstretch_api::{Kafka, names};
use kstretch_core::kraft::{self, REPLICATION_LISTENER};
use kube::ResourceExt;

use super::kafka_steps::{self, QuorumStep, RollStep, Unregistration};
use super::pass::Pass;
use super::plan::Plan;
use crate::error::Error;
use crate::kafka::build::Built;
use crate::kafka::context::Context;
use crate::kafka::forget;
use crate::kafka::quorum;
use crate::kafka::recover;
use crate::kafka::roll::{self, NodeView, Step};
use crate::kafka::view::{self, KafkaView};
use crate::kafka::warning::{Reason, Warning};
use crate::link::AgentRecord;
use crate::link::restart::{PodToRestart, replaced};

/// How long the agent has to answer a restart.
const RESTART_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the Kafka-side steps left the cluster.
pub(super) struct Progress {
    /// What this pass read of Kafka, for the steps of a ready cluster.
    pub(super) view: KafkaView,
    /// Why the quorum is not settled (a change or a recovery under way, no majority).
    pub(super) quorum_busy: Option<String>,
    /// Why the quorum is not whole (`quorum_busy`, or a voter that does not fetch), for the
    /// disruption budgets.
    pub(super) quorum_unsettled: Option<String>,
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
    let namespace = kafka.namespace().unwrap_or_default();
    pass.warnings.extend(kafka_steps::rejected_objects(
        &records,
        &namespace,
        &format!("{}-", kafka.name_any()),
    ));
    let bootstrap = bootstrap(ctx, kafka, plan, built);
    let applied: BTreeSet<String> = records
        .iter()
        .filter(|(alias, r)| {
            let published = ctx.owners.published_hash(alias);
            published.is_some() && published == r.last_apply.as_ref().map(|a| a.hash.clone())
        })
        .map(|(alias, _)| alias.clone())
        .collect();
    let views = kafka_steps::node_views(
        &records,
        &namespace,
        &kafka.name_any(),
        built,
        &plan.connected,
        &applied,
    );
    let returned = forget::returning(&ctx.agents, kafka, &plan.forgotten);
    let desired_ids = registered_ids(plan, forgotten_done);
    let recorded: BTreeSet<i32> = pass.status.registered_node_ids.iter().copied().collect();
    // A removal to finish is checked every time; otherwise only now and then (KIP-1073 lists
    // registrations central never recorded, e.g. from before it ran). A forgotten cluster
    // that came back runs its old nodes until its agent deletes them; a broker of them that
    // registers again is looked for meanwhile, not at the next idle check.
    let check_registrations = plan.majority_lost.is_none()
        && (recorded != desired_ids || returned || ctx.registration_checks.due(&pass.owner));
    let quiet = plan.recovering.is_none() && plan.majority_lost.is_none();
    let quorum_may_change =
        built.cluster.quorum == kraft::QuorumMode::Dynamic && quorum::formed(&pass.status);
    let wanted = kafka_steps::wanted(&views, quiet, quorum_may_change, check_registrations);
    let view = view::read(&ctx.kafka, bootstrap.as_deref(), wanted).await;

    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default();
    let quorum_busy = quorum_step(pass, plan, built, &views, &view, now_ms).await?;
    let quorum_unsettled = kafka_steps::quorum_unsettled(quorum_busy.as_deref(), &view, now_ms);
    let step = roll::next(&views, quorum_busy.as_deref());
    let lose_only_copies = kafka
        .annotations()
        .get(names::SKIP_BROKER_SCALEDOWN_CHECK)
        .is_some_and(|v| v == "true");
    let rolled = match kafka_steps::roll_step(&step, &views, &view, lose_only_copies) {
        RollStep::Nothing => None,
        RollStep::Restart(node) => Some(restart(ctx, kafka, &namespace, node).await),
        RollStep::HeldBack(warnings) => {
            pass.warnings.extend(warnings);
            Some(RollStep::HELD_BACK.to_owned())
        }
    };
    let decided = kafka_steps::unregistration(
        &desired_ids,
        &recorded,
        check_registrations,
        plan.majority_lost.is_some(),
        &view,
    );
    let pending_unregistration = unregister(pass, &view, decided).await;
    pass.status.registered_node_ids = desired_ids
        .union(&pending_unregistration)
        .copied()
        .collect();
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
        view,
        quorum_busy,
        quorum_unsettled,
        step,
        rolled,
        pending_unregistration,
        returned,
    })
}

/// The nodes Kafka may keep registered: every pool's, and a forgotten cluster's until their
/// replicas are replaced.
fn registered_ids(plan: &Plan, forgotten_done: &BTreeSet<String>) -> BTreeSet<i32> {
    plan.ids
        .values()
        .flatten()
        .chain(
            plan.lost
                .iter()
                .filter(|l| !forgotten_done.contains(&l.alias))
                .flat_map(|l| l.ids.iter()),
        )
        .copied()
        .collect()
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
/// nothing changes. `Some` says why the quorum is not settled; controllers then do not roll.
async fn quorum_step(
    pass: &mut Pass<'_>,
    plan: &Plan,
    built: &Built,
    views: &[NodeView],
    view: &KafkaView,
    now_ms: i64,
) -> Result<Option<String>, Error> {
    let (ctx, kafka) = (pass.ctx, pass.kafka);
    if let Some(r) = &plan.recovering {
        let bootstrap = view.bootstrap.as_deref();
        let why = recover::advance(ctx, kafka, r, views, bootstrap, &mut pass.status).await?;
        pass.warnings
            .push(Warning::new(Reason::QuorumRecovery, why.clone()));
        return Ok(Some(why));
    }
    if let Some(why) = &plan.majority_lost {
        return Ok(Some(why.clone()));
    }
    let cluster = &built.cluster;
    Ok(
        match kafka_steps::quorum_step(
            cluster,
            &pass.status,
            &plan.desired_controllers,
            view,
            now_ms,
        ) {
            QuorumStep::Settled => None,
            QuorumStep::Unknown(why) => Some(why),
            QuorumStep::Waiting(why) => {
                pass.warnings
                    .push(Warning::new(Reason::QuorumChangePending, why.clone()));
                Some(why)
            }
            QuorumStep::Change(planned) => {
                Some(change_quorum(ctx, kafka, view, cluster, &planned).await)
            }
        },
    )
}

/// Adds or removes the voter `planned`; says what changed or why it did not.
async fn change_quorum(
    ctx: &Context,
    kafka: &Kafka,
    view: &KafkaView,
    cluster: &kraft::KafkaCluster,
    planned: &quorum::Planned,
) -> String {
    let bootstrap = view.bootstrap.as_deref().unwrap_or_default();
    let changed = match ctx.kafka.client(bootstrap).await {
        Ok(admin) => quorum::change(&admin, &cluster.cluster_id, planned).await,
        Err(e) => Err(e),
    };
    match changed {
        Ok(what) => {
            let what = what.unwrap_or_default();
            tracing::info!(change = %what, "controller quorum changed");
            ctx.events
                .about(kafka, false, "QuorumChanged", "Quorum", what.clone());
            what
        }
        Err(e) => {
            tracing::warn!(error = %e, "controller quorum change failed; trying again");
            ctx.kafka.forget(bootstrap);
            format!("cannot read or change the controller quorum: {e}")
        }
    }
}

/// Asks the agent of `node`'s cluster to restart its pod; says what it did.
async fn restart(ctx: &Context, kafka: &Kafka, namespace: &str, node: &NodeView) -> String {
    let Some(reported) = &node.reported else {
        return format!("pod {} does not exist", node.pod);
    };
    let pod = PodToRestart {
        namespace: namespace.to_owned(),
        name: node.pod.clone(),
        uid: reported.uid.clone(),
        reason: node.roll_reason().to_owned(),
        claims: node.claims_to_replace(),
    };
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
                    "restarted pod {} in cluster {}: {}",
                    node.pod,
                    node.alias,
                    node.roll_reason()
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

/// Unregisters the nodes `decided` now; returns those still registered. Failures are
/// warnings, retried next time, and never block anything else.
async fn unregister(
    pass: &mut Pass<'_>,
    view: &KafkaView,
    decided: Unregistration,
) -> BTreeSet<i32> {
    let (ctx, kafka) = (pass.ctx, pass.kafka);
    let Unregistration {
        now,
        mut waiting,
        warning,
    } = decided;
    pass.warnings.extend(warning);
    if now.is_empty() {
        return waiting;
    }
    let bootstrap = view.bootstrap.as_deref().unwrap_or_default();
    let admin = match ctx.kafka.client(bootstrap).await {
        Ok(admin) => admin,
        Err(e) => {
            pass.warnings.push(Warning::new(
                Reason::UnregistrationFailed,
                format!("cannot reach Kafka to unregister nodes {now:?}: {e}"),
            ));
            waiting.extend(now);
            return waiting;
        }
    };
    for id in now {
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
                pass.warnings.push(Warning::new(
                    Reason::UnregistrationFailed,
                    format!("cannot unregister node {id}: {e}"),
                ));
                waiting.insert(id);
            }
        }
    }
    waiting
}
