//! The report stage: whether the cluster is ready (every broker answers), the steps only a
//! ready cluster takes (drains, the quorum recorded, partitions confined to one cluster, a
//! static quorum made dynamic, the metadata version raised), the `Kafka`'s status with its
//! warnings (each also an Event, once), and when to look again.

use std::collections::BTreeSet;
use std::time::Duration;

use kstretch_api::condition::Condition;
use kstretch_api::kafka::{ListenerAddress, ListenerStatus, UsedNodePoolStatus};
use kstretch_api::{Kafka, KafkaStatus};
use kstretch_core::kraft;
use kstretch_core::node_ids::Role;
use kstretch_core::versions::Target;
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::kafka_side::Progress;
use super::kafka_steps::{self, Metadata, Migration, WhenReady};
use super::pass::{BUSY_REQUEUE, IDLE_REQUEUE, MOVE_RECHECK, Pass, PoolIdsByName};
use super::plan::Plan;
use crate::error::Error;
use crate::kafka::answer;
use crate::kafka::build::{self, Built};
use crate::kafka::context::Context;
use crate::kafka::external;
use crate::kafka::move_drains;
use crate::kafka::quorum;
use crate::kafka::recover;
use crate::kafka::resolve::Resolved;
use crate::kafka::roll::Step;
use crate::kafka::status;
use crate::kafka::version;
use crate::kafka::view::KafkaView;
use crate::kafka::warning::{Reason, Warning};

/// Writes the `Kafka`'s status and says when to reconcile it again.
pub(super) async fn report(
    pass: &mut Pass<'_>,
    plan: &Plan,
    built: &Built,
    progress: Progress,
    forgotten_done: &BTreeSet<String>,
) -> Result<Action, Error> {
    let answered = brokers_answered(plan, &progress);
    let ready = readiness(
        &progress.step,
        plan.recovering
            .is_some()
            .then(|| progress.quorum_busy.clone().unwrap_or_default()),
        plan.majority_lost.as_deref(),
        &plan.refused_services,
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
        when_ready(pass, plan, built, &progress.view).await?
    } else {
        false
    };
    let budgets_were_closed = built.budgets_closed.is_some();
    record_unsettled(&mut pass.status, progress.quorum_unsettled.clone());
    // Closed budgets open at the next pass after the cluster is whole again: soon.
    let settled = is_ready
        && progress.pending_unregistration.is_empty()
        && progress.quorum_unsettled.is_none()
        && !budgets_were_closed
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
    kafka_status.listeners = listener_statuses(pass, plan, built);
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

/// Records in `status` why the quorum is not whole, for the next pass's disruption budgets.
fn record_unsettled(status: &mut KafkaStatus, unsettled: Option<String>) {
    match (&mut status.quorum, unsettled) {
        (Some(quorum), unsettled) => quorum.unsettled = unsettled,
        (None, None) => {}
        (quorum @ None, unsettled) => {
            *quorum = Some(kstretch_api::QuorumStatus {
                unsettled,
                ..Default::default()
            })
        }
    }
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
fn brokers_answered(plan: &Plan, progress: &Progress) -> Option<Result<(), String>> {
    if progress.step != Step::Done || plan.recovering.is_some() || plan.majority_lost.is_some() {
        return None;
    }
    let brokers = expected_brokers(&plan.resolved, &plan.ids);
    Some(answer::brokers_answer(
        &progress.view,
        &plan.cluster_id,
        &brokers,
    ))
}

/// The `Ready` condition (pure): a recovery or a lost majority first, then the roll; when
/// nothing is left to do, every broker must have answered (`answered`).
fn readiness(
    step: &Step,
    recovering: Option<String>,
    majority_lost: Option<&str>,
    refused_services: &[String],
    rolled: Option<&str>,
    answered: Option<Result<(), String>>,
) -> Condition {
    if let Some(why) = recovering {
        return status::not_ready(Reason::QuorumRecovery.as_str(), why);
    }
    if let Some(why) = majority_lost {
        return status::not_ready(recover::QUORUM_MAJORITY_LOST, why);
    }
    if !refused_services.is_empty() {
        return status::not_ready(
            external::SERVICE_REFUSED,
            external::refused_message(refused_services),
        );
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

/// The steps only a ready cluster takes, decided in [`kafka_steps::when_ready`] from what
/// the pass read; `true` while one of them is due but not done.
async fn when_ready(
    pass: &mut Pass<'_>,
    plan: &Plan,
    built: &Built,
    view: &KafkaView,
) -> Result<bool, Error> {
    let (ctx, kafka) = (pass.ctx, pass.kafka);
    let moves = move_drains::pool_moves(&plan.resolved, &plan.draining);
    move_drains::ensure(
        ctx,
        kafka,
        &pass.pools,
        &moves,
        &plan.operations,
        &mut pass.warnings,
    )
    .await?;
    let WhenReady {
        quorum,
        confined,
        migration,
        metadata,
    } = kafka_steps::when_ready(
        &pass.status,
        plan.wanted_quorum,
        &built.kafka_version,
        &plan.target,
        &kafka.name_any(),
        view,
    );
    if let Some(quorum) = quorum {
        pass.status.quorum = Some(quorum);
    }
    pass.warnings.extend(confined);
    let migrating = migrate(ctx, kafka, view, migration, pass).await;
    let raising = raise_metadata(ctx, kafka, view, &plan.target, metadata, pass).await;
    Ok(migrating || raising)
}

/// Turns the static quorum dynamic when [`Migration::Raise`] says so; the next reconciliation
/// then rolls every node onto `controller.quorum.bootstrap.servers`. `true` while the
/// migration is due but not done.
async fn migrate(
    ctx: &Context,
    kafka: &Kafka,
    view: &KafkaView,
    migration: Migration,
    pass: &mut Pass<'_>,
) -> bool {
    match migration {
        Migration::NotDue => false,
        Migration::Unsupported(warning) => {
            pass.warnings.push(warning);
            false
        }
        Migration::Waiting(warning) => {
            pass.warnings.extend(warning);
            true
        }
        Migration::Record => {
            quorum::record_dynamic(&mut pass.status);
            false
        }
        Migration::Raise => {
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
                    quorum::record_dynamic(&mut pass.status);
                    false
                }
                Err(e) => {
                    ctx.kafka.forget(bootstrap);
                    pass.warnings
                        .push(kafka_steps::migration_pending(&e.to_string()));
                    true
                }
            }
        }
    }
}

/// Records the finalized `metadata.version`, raising it first when [`Metadata::Raise`] says
/// so (every node runs the target's version: the roll is done). `true` while the raise is due
/// but not done.
async fn raise_metadata(
    ctx: &Context,
    kafka: &Kafka,
    view: &KafkaView,
    target: &Target,
    metadata: Metadata,
    pass: &mut Pass<'_>,
) -> bool {
    let level = match metadata {
        Metadata::Unknown => return false,
        Metadata::Pending(warning) => {
            pass.warnings.push(warning);
            return true;
        }
        Metadata::Record(level) => level,
        Metadata::Raise(level) => {
            let bootstrap = view.bootstrap.as_deref().unwrap_or_default();
            let raised =
                async { version::raise_metadata(&ctx.kafka.client(bootstrap).await?, level).await };
            if let Err(e) = raised.await {
                ctx.kafka.forget(bootstrap);
                pass.warnings
                    .push(version::raise_pending(target, &e.to_string()));
                return true;
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
            level
        }
    };
    pass.status.kafka_metadata_version = Some(version::metadata_name(level));
    false
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
fn listener_statuses(pass: &Pass<'_>, plan: &Plan, built: &Built) -> Vec<ListenerStatus> {
    let external = external::statuses(
        &pass.kafka.name_any(),
        &pass.kafka.namespace().unwrap_or_default(),
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
            &[],
            None,
            None,
        );
        assert_eq!(
            reason(&recovering),
            ("QuorumRecovery", "waiting for pod live-a-0 to be replaced")
        );
        let lost = readiness(&Step::Done, None, Some("no majority"), &[], None, None);
        assert_eq!(reason(&lost), ("QuorumMajorityLost", "no majority"));
        // A refused listener Service outranks the roll and the brokers, not the quorum.
        let refused = ["listener ext: refused".to_owned()];
        let at_roll = readiness(&restart, None, None, &refused, None, Some(Ok(())));
        assert_eq!(reason(&at_roll).0, "ListenerServiceRefused");
        assert!(
            reason(&at_roll)
                .1
                .starts_with("listener ext: refused; give the listener")
        );
    }

    #[test]
    fn the_roll_says_what_it_waits_for_or_restarts() {
        let waiting = readiness(
            &Step::Wait("pod a-1 is not ready".to_owned()),
            None,
            None,
            &[],
            None,
            None,
        );
        assert_eq!(reason(&waiting), ("Deploying", "pod a-1 is not ready"));
        let rolling = readiness(
            &Step::Restart(vec![1]),
            None,
            None,
            &[],
            Some("restarted pod a-1"),
            None,
        );
        assert_eq!(reason(&rolling), ("RollingUpdate", "restarted pod a-1"));
        let stale = readiness(&Step::Restart(vec![1]), None, None, &[], None, None);
        assert_eq!(
            reason(&stale),
            ("RollingUpdate", "pods run an outdated revision")
        );
    }

    #[test]
    fn a_cluster_with_nothing_left_to_do_is_ready_when_every_broker_answers() {
        let ready = readiness(&Step::Done, None, None, &[], None, Some(Ok(())));
        assert!(ready.is_true());
        let silent = readiness(
            &Step::Done,
            None,
            None,
            &[],
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
