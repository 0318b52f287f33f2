//! The report stage: whether the cluster is ready (every broker answers), the steps only a
//! ready cluster takes (drains, the quorum recorded, partitions confined to one cluster, a
//! static quorum made dynamic, the metadata version raised), the `Kafka`'s status with its
//! warnings (each also an Event, once), and when to look again.

use std::collections::BTreeSet;
use std::time::Duration;

use kstretch_api::condition::Condition;
use kstretch_api::kafka::{ListenerAddress, ListenerStatus, UsedNodePoolStatus};
use kstretch_api::{Kafka, KafkaStatus, names};
use kstretch_core::kraft;
use kstretch_core::node_ids::Role;
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::kafka_side::Progress;
use super::pass::{BUSY_REQUEUE, IDLE_REQUEUE, MOVE_RECHECK, Pass, PoolIdsByName};
use super::plan::Plan;
use crate::error::Error;
use crate::kafka::answer;
use crate::kafka::build::Built;
use crate::kafka::checks;
use crate::kafka::context::Context;
use crate::kafka::move_drains;
use crate::kafka::quorum;
use crate::kafka::recover;
use crate::kafka::resolve::Resolved;
use crate::kafka::roll::Step;
use crate::kafka::status;
use crate::kafka::version;
use crate::kafka::warning::{Reason, Warning};

/// Writes the `Kafka`'s status and says when to reconcile it again.
pub(super) async fn report(
    pass: &mut Pass<'_>,
    plan: &Plan,
    built: &Built,
    progress: Progress,
    forgotten_done: &BTreeSet<String>,
) -> Result<Action, Error> {
    let answered = brokers_answered(pass, plan, &progress).await;
    let ready = readiness(
        &progress.step,
        plan.recovering
            .is_some()
            .then(|| progress.quorum_busy.clone().unwrap_or_default()),
        plan.majority_lost.as_deref(),
        progress.rolled.as_deref(),
        answered,
    );
    let is_ready = ready.is_true();
    if progress.step == Step::Done {
        pass.status.kafka_version = Some(built.kafka_version.clone());
    }
    pass.warnings.extend(version::changing(
        pass.status.kafka_version.as_deref(),
        &plan.target,
    ));
    let busy_when_ready = if is_ready {
        when_ready(pass, plan, built, progress.bootstrap.as_deref()).await?
    } else {
        false
    };
    let settled = is_ready
        && progress.pending_unregistration.is_empty()
        && progress.quorum_busy.is_none()
        && !busy_when_ready;
    announce_readiness(pass, &ready);
    announce_warnings(
        pass.ctx,
        pass.kafka,
        &pass.status.conditions,
        &pass.warnings,
    );
    let mut kafka_status = std::mem::take(&mut pass.status);
    kafka_status.conditions =
        status::conditions(&kafka_status.conditions, ready, &pass.warnings, &pass.now);
    kafka_status.kafka_node_pools = plan
        .resolved
        .pools
        .iter()
        .map(|p| UsedNodePoolStatus {
            name: Some(p.name.clone()),
        })
        .collect();
    kafka_status.listeners = listener_statuses(built);
    if is_ready {
        kafka_status.operator_last_successful_version = Some(env!("CARGO_PKG_VERSION").to_owned());
    }
    pass.status = kafka_status;
    let forgetting = plan.forgotten.iter().any(|c| !forgotten_done.contains(c));
    Ok(next_look(
        settled,
        &pass.warnings,
        forgetting || progress.returned,
    ))
}

/// When to look again (pure): soon while anything is under way; a settled cluster as soon as
/// what it waits for may have changed (its warnings' reasons say; `watching` a forgotten
/// cluster's replacement or return), else at the idle interval.
fn next_look(settled: bool, warnings: &[Warning], watching: bool) -> Action {
    if !settled {
        return Action::requeue(BUSY_REQUEUE);
    }
    let recheck = warnings
        .iter()
        .filter_map(|w| w.reason.recheck())
        .chain(watching.then_some(MOVE_RECHECK))
        .fold(IDLE_REQUEUE, Duration::min);
    Action::requeue(recheck)
}

/// Whether every broker answers, asked only when nothing else keeps the cluster from being
/// ready (`None` otherwise).
async fn brokers_answered(
    pass: &Pass<'_>,
    plan: &Plan,
    progress: &Progress,
) -> Option<Result<(), String>> {
    if progress.step != Step::Done || plan.recovering.is_some() || plan.majority_lost.is_some() {
        return None;
    }
    let brokers = expected_brokers(&plan.resolved, &plan.ids);
    Some(
        answer::brokers_answer(
            &pass.ctx.kafka,
            progress.bootstrap.as_deref(),
            &plan.cluster_id,
            &brokers,
        )
        .await,
    )
}

/// The `Ready` condition (pure): a recovery or a lost majority first, then the roll; when
/// nothing is left to do, every broker must have answered (`answered`).
fn readiness(
    step: &Step,
    recovering: Option<String>,
    majority_lost: Option<&str>,
    rolled: Option<&str>,
    answered: Option<Result<(), String>>,
) -> Condition {
    if let Some(why) = recovering {
        return status::not_ready(Reason::QuorumRecovery.as_str(), why);
    }
    if let Some(why) = majority_lost {
        return status::not_ready(recover::QUORUM_MAJORITY_LOST, why);
    }
    match (step, answered) {
        (Step::Done, Some(Ok(()))) => Condition::ready(),
        (Step::Done, Some(Err(why))) => status::not_ready(answer::BROKERS_UNAVAILABLE, why),
        (Step::Done, None) => status::not_ready(
            answer::BROKERS_UNAVAILABLE,
            "the brokers were not asked whether they answer",
        ),
        (Step::Wait(why), _) => status::not_ready("Deploying", why.clone()),
        (Step::Restart(_), _) => status::not_ready(
            "RollingUpdate",
            rolled.unwrap_or("pods run an outdated revision"),
        ),
    }
}

/// The steps only a ready cluster takes; `true` while one of them is due but not done.
async fn when_ready(
    pass: &mut Pass<'_>,
    plan: &Plan,
    built: &Built,
    bootstrap: Option<&str>,
) -> Result<bool, Error> {
    let (ctx, kafka) = (pass.ctx, pass.kafka);
    let moves = move_drains::pool_moves(&plan.resolved, &plan.draining);
    move_drains::ensure(ctx, kafka, &pass.pools, &moves, &mut pass.warnings).await?;
    observe_quorum(ctx, bootstrap, &mut pass.status).await;
    pass.warnings
        .extend(confined_partitions(ctx, kafka, bootstrap, &pass.status).await);
    let mut migrating = false;
    if plan.wanted_quorum == kraft::QuorumMode::Dynamic {
        migrating = migrate_static_quorum(
            ctx,
            kafka,
            &built.kafka_version,
            bootstrap,
            &mut pass.status,
            &mut pass.warnings,
        )
        .await;
    }
    let raising = version::raise_metadata(
        ctx,
        kafka,
        bootstrap,
        &plan.target,
        &mut pass.status,
        &mut pass.warnings,
    )
    .await;
    Ok(migrating || raising)
}

/// An Event when the cluster becomes ready or stops being so.
fn announce_readiness(pass: &Pass<'_>, ready: &Condition) {
    let is_ready = ready.is_true();
    let was_ready = pass
        .status
        .conditions
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
    pass.ctx.events.emit(
        kube::Resource::object_ref(pass.kafka, &()),
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

/// A warning naming the partitions whose replicas all sit in one Kubernetes cluster; when
/// Kafka cannot say, the last such warning stands.
async fn confined_partitions(
    ctx: &Context,
    kafka: &Kafka,
    bootstrap: Option<&str>,
    kafka_status: &KafkaStatus,
) -> Option<Warning> {
    let found = async {
        let bootstrap = bootstrap.ok_or_else(|| "no bootstrap address".to_owned())?;
        let admin = ctx
            .kafka
            .client(bootstrap)
            .await
            .map_err(|e| e.to_string())?;
        checks::confined_partitions(&admin)
            .await
            .map_err(|e| e.to_string())
    };
    let confined = match found.await {
        Ok(confined) => confined,
        Err(e) => {
            tracing::debug!(error = %e, "cannot read where the partitions are");
            return kafka_status
                .conditions
                .iter()
                .find(|c| c.reason.as_deref() == Some(Reason::ReplicasInOneCluster.as_str()))
                .map(|c| {
                    Warning::new(
                        Reason::ReplicasInOneCluster,
                        c.message.clone().unwrap_or_default(),
                    )
                });
        }
    };
    if confined.is_empty() {
        return None;
    }
    const SHOWN: usize = 10;
    let mut named: Vec<String> = confined
        .iter()
        .take(SHOWN)
        .map(|c| format!("{} ({})", c.partition, c.cluster))
        .collect();
    if confined.len() > SHOWN {
        named.push(format!("and {} more", confined.len() - SHOWN));
    }
    Some(Warning::new(
        Reason::ReplicasInOneCluster,
        format!(
            "{} partition(s) have every replica in one Kubernetes cluster and are lost with it: {}; spread them with `kstretch spread --kafka {}`",
            confined.len(),
            named.join(", "),
            kafka.name_any()
        ),
    ))
}

/// Records the controller quorum as Kafka reports it; on failure the last record stands (the
/// brokers just answered, so this is a passing hiccup, not worth a condition).
async fn observe_quorum(ctx: &Context, bootstrap: Option<&str>, kafka_status: &mut KafkaStatus) {
    let Some(bootstrap) = bootstrap else {
        return;
    };
    let observed = async { quorum::observe(&ctx.kafka.client(bootstrap).await?).await };
    match observed.await {
        Ok(q) => kafka_status.quorum = Some(q),
        Err(e) => tracing::debug!(error = %e, "cannot read the controller quorum"),
    }
}

/// Turns the static quorum of a ready cluster dynamic where its Kafka version can (see
/// [`quorum::migrate`]); the next reconciliation then rolls every node onto
/// `controller.quorum.bootstrap.servers`. Where it cannot, a warning says why and the quorum
/// stays static. `true` while the migration is due but not done.
async fn migrate_static_quorum(
    ctx: &Context,
    kafka: &Kafka,
    version: &str,
    bootstrap: Option<&str>,
    kafka_status: &mut KafkaStatus,
    warnings: &mut Vec<Warning>,
) -> bool {
    if quorum::mode(kafka_status) != kraft::QuorumMode::Static {
        return false;
    }
    if !quorum::can_migrate(version) {
        warnings.push(Warning::new(
            Reason::QuorumMigrationUnsupported,
            format!(
                "the controller quorum is static and Kafka {version} cannot make it dynamic (Kafka 4.1 and later can): controllers are added or removed only by restarting every node; upgrade Kafka, or set the annotation {}=static to keep it static without this warning",
                names::CONTROLLER_QUORUM
            ),
        ));
        return false;
    }
    let Some(bootstrap) = bootstrap else {
        return true;
    };
    let migrated = async { quorum::migrate(&ctx.kafka.client(bootstrap).await?).await };
    match migrated.await {
        Ok(now) => {
            if now {
                tracing::info!("controller quorum made dynamic");
                ctx.events.about(
kafka,
                    false,
                    "QuorumMigrated",
                    "Quorum",
                    "the controller quorum is dynamic now (kraft.version 1): every node restarts, one at a time, to find it through controller.quorum.bootstrap.servers".to_owned(),
                );
            }
            quorum::record_dynamic(kafka_status);
            false
        }
        Err(e) => {
            ctx.kafka.forget(bootstrap);
            warnings.push(Warning::new(
                Reason::QuorumMigrationPending,
                format!("the static controller quorum is not made dynamic yet: {e}; retried"),
            ));
            true
        }
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

fn listener_statuses(built: &Built) -> Vec<ListenerStatus> {
    built
        .cluster
        .listeners
        .iter()
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
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::kafka::warning::BLOCKED_RECHECK;

    fn reason(c: &Condition) -> (&str, &str) {
        (
            c.reason.as_deref().unwrap_or_default(),
            c.message.as_deref().unwrap_or_default(),
        )
    }

    #[test]
    fn a_recovery_or_a_lost_majority_outranks_the_roll_and_the_brokers() {
        let restart = Step::Restart(vec![0]);
        let recovering = readiness(
            &restart,
            Some("waiting for pod live-a-0 to be replaced".to_owned()),
            Some("lost"),
            None,
            None,
        );
        assert_eq!(
            reason(&recovering),
            ("QuorumRecovery", "waiting for pod live-a-0 to be replaced")
        );
        let lost = readiness(&Step::Done, None, Some("no majority"), None, None);
        assert_eq!(reason(&lost), ("QuorumMajorityLost", "no majority"));
    }

    #[test]
    fn the_roll_says_what_it_waits_for_or_restarts() {
        let waiting = readiness(
            &Step::Wait("pod a-1 is not ready".to_owned()),
            None,
            None,
            None,
            None,
        );
        assert_eq!(reason(&waiting), ("Deploying", "pod a-1 is not ready"));
        let rolling = readiness(
            &Step::Restart(vec![1]),
            None,
            None,
            Some("restarted pod a-1"),
            None,
        );
        assert_eq!(reason(&rolling), ("RollingUpdate", "restarted pod a-1"));
        let stale = readiness(&Step::Restart(vec![1]), None, None, None, None);
        assert_eq!(
            reason(&stale),
            ("RollingUpdate", "pods run an outdated revision")
        );
    }

    #[test]
    fn a_cluster_with_nothing_left_to_do_is_ready_when_every_broker_answers() {
        let ready = readiness(&Step::Done, None, None, None, Some(Ok(())));
        assert!(ready.is_true());
        let silent = readiness(
            &Step::Done,
            None,
            None,
            None,
            Some(Err("broker 2 is not live".to_owned())),
        );
        assert!(!silent.is_true());
        assert_eq!(
            reason(&silent),
            (answer::BROKERS_UNAVAILABLE, "broker 2 is not live")
        );
    }

    #[test]
    fn a_settled_cluster_is_looked_at_again_when_what_it_waits_for_may_have_changed() {
        let moving = Warning::new(Reason::PoolMoving, "moving".to_owned());
        let blocked = Warning::new(Reason::ScaleDownBlocked, "blocked".to_owned());
        let forgotten = Warning::new(Reason::ClusterForgotten, "forgotten".to_owned());
        assert_eq!(
            next_look(false, std::slice::from_ref(&moving), false),
            Action::requeue(BUSY_REQUEUE)
        );
        assert_eq!(next_look(true, &[], false), Action::requeue(IDLE_REQUEUE));
        assert_eq!(
            next_look(true, std::slice::from_ref(&forgotten), false),
            Action::requeue(IDLE_REQUEUE)
        );
        assert_eq!(
            next_look(true, std::slice::from_ref(&blocked), false),
            Action::requeue(BLOCKED_RECHECK)
        );
        assert_eq!(
            next_look(true, &[blocked, moving], false),
            Action::requeue(MOVE_RECHECK)
        );
        assert_eq!(
            next_look(true, &[forgotten], true),
            Action::requeue(MOVE_RECHECK)
        );
    }
}
