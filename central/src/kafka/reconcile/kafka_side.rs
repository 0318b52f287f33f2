//! The Kafka side of a pass, its I/O: what the agents report and what Kafka says read once
//! ([`observe`]), the one quorum step, the roll's restart, the unregistrations and a ready
//! cluster's steps done as [`super::decide`] decided them, then the status it concludes and
//! the Events that announce it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kstretch_api::condition::Condition;
use kstretch_api::kafka::{ListenerAddress, ListenerStatus, UsedNodePoolStatus};
use kstretch_api::{Kafka, names};
use kstretch_core::kraft::{self, REPLICATION_LISTENER};
use kstretch_core::node_ids::Role;
use kstretch_core::versions::Target;
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::decide::{self, Decision, Done, Facts, Observed, QuorumAct, Shown};
use super::kafka_steps::{self, Metadata, Migration, migration_pending};
use super::pass::{Pass, PoolIdsByName};
use super::plan::Plan;
use crate::error::Error;
use crate::kafka::build::{self, Built};
use crate::kafka::context::Context;
use crate::kafka::external;
use crate::kafka::forget;
use crate::kafka::move_drains;
use crate::kafka::quorum;
use crate::kafka::recover;
use crate::kafka::resolve::Resolved;
use crate::kafka::roll::NodeView;
use crate::kafka::version;
use crate::kafka::view::{self, KafkaView};
use crate::kafka::warning::{Reason, Warning};
use crate::link::AgentRecord;
use crate::link::restart::{PodToRestart, replaced};

/// How long the agent has to answer a restart.
const RESTART_TIMEOUT: Duration = Duration::from_secs(30);

/// The Kafka side of this pass: read, decide, act, conclude; the status is left in `pass`
/// for the one write of the pass.
pub(super) async fn run(
    pass: &mut Pass<'_>,
    plan: &Plan,
    built: &Built,
    forgotten_done: &BTreeSet<String>,
) -> Result<Action, Error> {
    let (ctx, kafka) = (pass.ctx, pass.kafka);
    let registered = registered_ids(plan, forgotten_done);
    let observed = observe(pass, plan, built, &registered).await;
    let earlier = std::mem::take(&mut pass.warnings);
    let (name, namespace) = (kafka.name_any(), kafka.namespace().unwrap_or_default());
    let facts = Facts {
        kafka: &name,
        namespace: &namespace,
        status: &pass.status,
        cluster: &built.cluster,
        kafka_version: &built.kafka_version,
        target: &plan.target,
        wanted_quorum: plan.wanted_quorum,
        desired_controllers: &plan.desired_controllers,
        brokers: expected_brokers(&plan.resolved, &plan.ids),
        registered,
        members: built.objects.keys().map(String::as_str).collect(),
        connected: &plan.connected,
        recovering: plan.recovering.is_some(),
        majority_lost: plan.majority_lost.as_deref(),
        refused_services: &plan.refused_services,
        budgets_closed: built.budgets_closed.is_some(),
        forgetting: plan.forgotten.iter().any(|c| !forgotten_done.contains(c)),
        moves: move_drains::pool_moves(&plan.resolved, &plan.draining),
        move_operations: move_drains::read_all(&plan.operations),
        lose_only_copies: kafka
            .annotations()
            .get(names::SKIP_BROKER_SCALEDOWN_CHECK)
            .is_some_and(|v| v == "true"),
        observed: &observed,
    };
    let decision = decide::decide(&facts);
    let done = act(ctx, kafka, &pass.pools, plan, &observed, &decision).await?;
    let shown = Shown {
        pools: plan
            .resolved
            .pools
            .iter()
            .map(|p| UsedNodePoolStatus {
                name: Some(p.name.clone()),
            })
            .collect(),
        listeners: listener_statuses(kafka, plan, built),
    };
    let concluded = decide::conclude(&facts, decision, done, earlier, shown, &pass.now);
    announce_readiness(ctx, kafka, &pass.status.conditions, &concluded.ready);
    announce_warnings(ctx, kafka, &pass.status.conditions, &concluded.warnings);
    pass.status = concluded.status;
    pass.warnings = concluded.warnings;
    Ok(concluded.action)
}

/// Reads what the agents last reported and what of Kafka this pass may use.
async fn observe(
    pass: &Pass<'_>,
    plan: &Plan,
    built: &Built,
    registered: &BTreeSet<i32>,
) -> Observed {
    let (ctx, kafka) = (pass.ctx, pass.kafka);
    // What each member cluster's agent last reported, read once for this reconciliation.
    let records: BTreeMap<String, AgentRecord> = built
        .objects
        .keys()
        .filter_map(|alias| ctx.agents.get(alias).map(|r| (alias.clone(), r)))
        .collect();
    let namespace = kafka.namespace().unwrap_or_default();
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
    let recorded: BTreeSet<i32> = pass.status.registered_node_ids.iter().copied().collect();
    // A removal to finish is checked every time; otherwise only now and then (KIP-1073 lists
    // registrations central never recorded, e.g. from before it ran). A forgotten cluster
    // that came back runs its old nodes until its agent deletes them; a broker of them that
    // registers again is looked for meanwhile, not at the next idle check.
    let check_registrations = plan.majority_lost.is_none()
        && (&recorded != registered || returned || ctx.registration_checks.due(&pass.owner));
    let quiet = plan.recovering.is_none() && plan.majority_lost.is_none();
    let quorum_may_change =
        built.cluster.quorum == kraft::QuorumMode::Dynamic && quorum::formed(&pass.status);
    let wanted = kafka_steps::wanted(&views, quiet, quorum_may_change, check_registrations);
    let view = view::read(&ctx.kafka, bootstrap.as_deref(), wanted).await;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default();
    Observed {
        records,
        views,
        view,
        check_registrations,
        returned,
        now_ms,
    }
}

/// Does what `decision` says, in order: the quorum's step, the roll's restart, the
/// unregistrations, then a ready cluster's drains, quorum migration and metadata raise.
async fn act(
    ctx: &Context,
    kafka: &Kafka,
    pools: &[&kstretch_api::KafkaNodePool],
    plan: &Plan,
    observed: &Observed,
    decision: &Decision<'_>,
) -> Result<Done, Error> {
    let mut done = Done::default();
    let bootstrap = observed.view.bootstrap.as_deref();
    match (&decision.quorum, &plan.recovering) {
        (QuorumAct::Recover, Some(r)) => {
            let turn = recover::advance(ctx, kafka, r, &observed.views, bootstrap).await?;
            done.quorum = Some(turn.why);
            done.recovered = turn.quorum;
        }
        (QuorumAct::Change(planned), _) => {
            let cluster_id = &plan.cluster_id;
            done.quorum =
                Some(change_quorum(ctx, kafka, &observed.view, cluster_id, planned).await);
        }
        _ => {}
    }
    if let Some(node) = decision.restart {
        let namespace = kafka.namespace().unwrap_or_default();
        done.rolled = Some(restart(ctx, kafka, &namespace, node).await);
    }
    if !decision.unregister.is_empty() {
        let (failed, warnings) = unregister(ctx, kafka, &observed.view, &decision.unregister).await;
        done.not_unregistered = failed;
        done.warnings.extend(warnings);
    }
    if let Some(steps) = &decision.when_ready {
        move_drains::carry_out(ctx, kafka, pools, &steps.drains).await?;
        if steps.migration == Migration::Raise {
            done.migrated = migrate(ctx, kafka, &observed.view, &mut done.warnings).await;
        }
        if let Metadata::Raise(level) = steps.metadata {
            done.metadata_raised = raise_metadata(
                ctx,
                kafka,
                &observed.view,
                &plan.target,
                level,
                &mut done.warnings,
            )
            .await;
        }
    }
    Ok(done)
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

/// Adds or removes the voter `planned`; says what changed or why it did not.
async fn change_quorum(
    ctx: &Context,
    kafka: &Kafka,
    view: &KafkaView,
    cluster_id: &str,
    planned: &quorum::Planned,
) -> String {
    let bootstrap = view.bootstrap.as_deref().unwrap_or_default();
    let changed = match ctx.kafka.client(bootstrap).await {
        Ok(admin) => quorum::change(&admin, cluster_id, planned).await,
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

/// Unregisters the nodes `now`; returns those still registered and why. Failures are
/// warnings, retried next time, and never block anything else.
async fn unregister(
    ctx: &Context,
    kafka: &Kafka,
    view: &KafkaView,
    now: &BTreeSet<i32>,
) -> (BTreeSet<i32>, Vec<Warning>) {
    let bootstrap = view.bootstrap.as_deref().unwrap_or_default();
    let admin = match ctx.kafka.client(bootstrap).await {
        Ok(admin) => admin,
        Err(e) => {
            let warning = Warning::new(
                Reason::UnregistrationFailed,
                format!("cannot reach Kafka to unregister nodes {now:?}: {e}"),
            );
            return (now.clone(), vec![warning]);
        }
    };
    let (mut failed, mut warnings) = (BTreeSet::new(), Vec::new());
    for &id in now {
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
                failed.insert(id);
            }
        }
    }
    (failed, warnings)
}

/// Turns the static quorum dynamic ([`Migration::Raise`]); the next reconciliation then rolls
/// every node onto `controller.quorum.bootstrap.servers`. `true` once done.
async fn migrate(
    ctx: &Context,
    kafka: &Kafka,
    view: &KafkaView,
    warnings: &mut Vec<Warning>,
) -> bool {
    let bootstrap = view.bootstrap.as_deref().unwrap_or_default();
    let migrated = async { quorum::migrate(&ctx.kafka.client(bootstrap).await?).await };
    match migrated.await {
        Ok(()) => {
            tracing::info!("controller quorum made dynamic");
            ctx.events.about(
                kafka,
                false,
                "QuorumMigrated",
                "Quorum",
                "the controller quorum is dynamic now (kraft.version 1): every node restarts, one at a time, to find it through controller.quorum.bootstrap.servers".to_owned(),
            );
            true
        }
        Err(e) => {
            ctx.kafka.forget(bootstrap);
            warnings.push(migration_pending(&e.to_string()));
            false
        }
    }
}

/// Raises the finalized `metadata.version` to `level` ([`Metadata::Raise`]: every node runs
/// the target's version, the roll is done). `true` once done.
async fn raise_metadata(
    ctx: &Context,
    kafka: &Kafka,
    view: &KafkaView,
    target: &Target,
    level: i16,
    warnings: &mut Vec<Warning>,
) -> bool {
    let bootstrap = view.bootstrap.as_deref().unwrap_or_default();
    let raised =
        async { version::raise_metadata(&ctx.kafka.client(bootstrap).await?, level).await };
    if let Err(e) = raised.await {
        ctx.kafka.forget(bootstrap);
        warnings.push(version::raise_pending(target, &e.to_string()));
        return false;
    }
    tracing::info!(metadata_version = %target.metadata, "metadata.version raised");
    ctx.events.about(
        kafka,
        false,
        "MetadataVersionRaised",
        "Upgrade",
        format!(
            "every node runs Kafka {}: metadata.version raised to {}",
            target.version, target.metadata
        ),
    );
    true
}

/// An Event when the cluster becomes ready or stops being so (`before`: the conditions the
/// status had).
fn announce_readiness(ctx: &Context, kafka: &Kafka, before: &[Condition], ready: &Condition) {
    let is_ready = ready.is_true();
    let was_ready = before
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status == "True");
    if was_ready == Some(is_ready) {
        return;
    }
    let (type_, reason) = if is_ready {
        (kstretch_runtime::events::Type::Normal, "Ready".to_owned())
    } else {
        let reason = ready
            .reason
            .clone()
            .unwrap_or_else(|| "NotReady".to_owned());
        (kstretch_runtime::events::Type::Warning, reason)
    };
    ctx.events.emit(
        kube::Resource::object_ref(kafka, &()),
        type_,
        &reason,
        "Reconcile",
        ready
            .message
            .clone()
            .unwrap_or_else(|| "the Kafka cluster is ready".to_owned()),
    );
}

/// Each warning whose reason the status does not show yet is also an Event (once, while it
/// stands), so `kubectl describe` and event-based alerts see it.
fn announce_warnings(ctx: &Context, kafka: &Kafka, before: &[Condition], warnings: &[Warning]) {
    let shown = |reason: &str| {
        before
            .iter()
            .any(|c| c.type_ == "Warning" && c.reason.as_deref() == Some(reason))
    };
    let mut announced = BTreeSet::new();
    for w in warnings {
        let reason = w.reason.as_str();
        if shown(reason) || !announced.insert(reason) {
            continue;
        }
        ctx.events.emit(
            kube::Resource::object_ref(kafka, &()),
            kstretch_runtime::events::Type::Warning,
            reason,
            "Reconcile",
            w.message.clone(),
        );
    }
}

/// The IDs of every node with the broker role that central runs (what Kafka must list live).
fn expected_brokers(effective: &Resolved, ids: &PoolIdsByName) -> BTreeSet<i32> {
    effective
        .pools
        .iter()
        .filter(|p| p.roles.contains(&Role::Broker))
        .filter_map(|p| ids.get(&p.name))
        .flatten()
        .copied()
        .collect()
}

/// Each served listener's bootstrap addresses; a `nodeport` listener's in every member
/// cluster with brokers.
fn listener_statuses(kafka: &Kafka, plan: &Plan, built: &Built) -> Vec<ListenerStatus> {
    let external = external::statuses(
        &kafka.name_any(),
        &kafka.namespace().unwrap_or_default(),
        &plan.resolved.external,
        &build::brokers(&plan.resolved, &plan.ids),
        plan.agent_reports.reports(),
    );
    let mut statuses: Vec<ListenerStatus> = built
        .cluster
        .listeners
        .iter()
        .filter(|l| !l.advertised_per_broker())
        .filter_map(|l| {
            let servers = kraft::bootstrap_servers(&built.cluster, &l.name).ok()?;
            let addresses = servers
                .split(',')
                .filter_map(|s| {
                    let (host, port) = s.rsplit_once(':')?;
                    Some(ListenerAddress {
                        host: Some(host.trim_matches(['[', ']']).to_owned()),
                        port: port.parse().ok(),
                    })
                })
                .collect();
            Some(ListenerStatus {
                name: Some(l.name.clone()),
                addresses,
                bootstrap_servers: Some(servers),
                certificates: Vec::new(),
            })
        })
        .collect();
    statuses.extend(external);
    statuses
}
