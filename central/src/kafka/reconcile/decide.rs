//! The Kafka side of one pass decided purely (nothing here awaits or holds a client): from
//! what the pass read ([`Facts`]), [`decide`] picks the quorum's one step, the pod to roll,
//! the nodes to unregister and what a ready cluster does; [`super::kafka_side`] does it; from
//! what that did ([`Done`]), [`conclude`] writes the `Kafka`'s status and when to look again.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kstretch_api::KafkaStatus;
use kstretch_api::QuorumStatus;
use kstretch_api::condition::Condition;
use kstretch_api::kafka::{ListenerStatus, UsedNodePoolStatus};
use kstretch_core::kraft::{self, KafkaCluster};
use kstretch_core::versions::Target;
use kube::runtime::controller::Action;

use super::kafka_steps::{self, Metadata, Migration, QuorumStep, RollStep, WhenReady};
use super::pass::{BUSY_REQUEUE, IDLE_REQUEUE, MOVE_RECHECK};
use crate::kafka::answer;
use crate::kafka::external;
use crate::kafka::move_drains::{self, MoveOperation, PoolMove};
use crate::kafka::quorum::Planned;
use crate::kafka::recover;
use crate::kafka::roll::{self, NodeView, Step};
use crate::kafka::status;
use crate::kafka::version;
use crate::kafka::view::KafkaView;
use crate::kafka::warning::{Reason, Warning};
use crate::link::AgentRecord;

/// What the agents reported and Kafka answered this pass (read by [`super::kafka_side`]).
pub(super) struct Observed {
    /// Each member cluster's agent's last record.
    pub(super) records: BTreeMap<String, AgentRecord>,
    /// Every built node with what its agent reported.
    pub(super) views: Vec<NodeView>,
    /// What this pass read of Kafka.
    pub(super) view: KafkaView,
    /// Whether Kafka's registrations are checked this pass.
    pub(super) check_registrations: bool,
    /// Whether a forgotten cluster came back and still runs its old nodes.
    pub(super) returned: bool,
    /// Central's clock, against which Kafka's fetch times say who is live.
    pub(super) now_ms: i64,
}

/// Everything [`decide`] and [`conclude`] look at, as plain values.
pub(super) struct Facts<'a> {
    pub(super) kafka: &'a str,
    pub(super) namespace: &'a str,
    /// The status as the earlier stages left it.
    pub(super) status: &'a KafkaStatus,
    pub(super) cluster: &'a KafkaCluster,
    /// The Kafka version the built nodes run.
    pub(super) kafka_version: &'a str,
    pub(super) target: &'a Target,
    pub(super) wanted_quorum: kraft::QuorumMode,
    /// The voters the quorum moves toward.
    pub(super) desired_controllers: &'a BTreeSet<i32>,
    /// Every node with the broker role central runs (what Kafka must list live).
    pub(super) brokers: BTreeSet<i32>,
    /// The nodes Kafka may keep registered.
    pub(super) registered: BTreeSet<i32>,
    /// The member clusters with objects of this `Kafka`, and those whose agents are connected.
    pub(super) members: Vec<&'a str>,
    pub(super) connected: &'a BTreeSet<String>,
    /// A quorum recovery takes its turn this pass.
    pub(super) recovering: bool,
    pub(super) majority_lost: Option<&'a str>,
    pub(super) refused_services: &'a [String],
    /// The disruption budgets were published closed.
    pub(super) budgets_closed: bool,
    /// A forgotten cluster's nodes are still being replaced.
    pub(super) forgetting: bool,
    pub(super) moves: Vec<PoolMove>,
    pub(super) move_operations: Vec<MoveOperation>,
    /// The user accepts losing partitions' only copies to new disks.
    pub(super) lose_only_copies: bool,
    pub(super) observed: &'a Observed,
}

/// The quorum's one step this pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum QuorumAct {
    /// Nothing to change.
    Settled,
    /// Not settled, and nothing to do about it now; why.
    Busy(String),
    /// A quorum recovery takes its next turn (it says why the quorum is busy).
    Recover,
    /// One voter is added or removed.
    Change(Planned),
}

/// What a ready cluster does this pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ReadySteps {
    /// The moves' drains to create, adopt, abort or delete.
    pub(super) drains: Vec<move_drains::Step>,
    /// The quorum as Kafka reports it (`None`: the last record stands).
    pub(super) quorum: Option<QuorumStatus>,
    pub(super) migration: Migration,
    pub(super) metadata: Metadata,
}

/// What to do this pass, decided before anything is done.
#[derive(Debug)]
pub(super) struct Decision<'a> {
    pub(super) quorum: QuorumAct,
    pub(super) step: Step,
    /// The pod to restart, checked against Kafka's partitions.
    pub(super) restart: Option<&'a NodeView>,
    /// Stale pods wait until one can be restarted safely.
    pub(super) roll_held_back: bool,
    /// Nodes to unregister now, and those that wait.
    pub(super) unregister: BTreeSet<i32>,
    pub(super) unregistration_waits: BTreeSet<i32>,
    /// Whether every broker answered, asked when nothing else keeps the cluster from being
    /// ready.
    pub(super) answered: Option<Result<(), String>>,
    /// `Some` when the cluster is ready.
    pub(super) when_ready: Option<ReadySteps>,
    /// Warnings known before acting.
    pub(super) warnings: Vec<Warning>,
}

/// What the acts of a [`Decision`] did, as far as the status cares.
#[derive(Debug, Default)]
pub(super) struct Done {
    /// Why the quorum is busy after a recovery's turn or a voter change (what it did, or why
    /// it could not).
    pub(super) quorum: Option<String>,
    /// The quorum a finished recovery saw.
    pub(super) recovered: Option<QuorumStatus>,
    /// What the roll did.
    pub(super) rolled: Option<String>,
    /// Nodes decided for unregistration that are still registered (Kafka refused).
    pub(super) not_unregistered: BTreeSet<i32>,
    /// The static quorum was made dynamic ([`Migration::Raise`] done).
    pub(super) migrated: bool,
    /// `metadata.version` was raised ([`Metadata::Raise`] done).
    pub(super) metadata_raised: bool,
    /// What failed while acting.
    pub(super) warnings: Vec<Warning>,
}

/// The pass's status, its `Ready` condition, every warning and when to look again.
pub(super) struct Concluded {
    pub(super) status: KafkaStatus,
    pub(super) ready: Condition,
    pub(super) warnings: Vec<Warning>,
    pub(super) action: Action,
}

/// Decides the Kafka side of this pass (pure).
pub(super) fn decide<'a>(facts: &Facts<'a>) -> Decision<'a> {
    let observed = facts.observed;
    let mut warnings = kafka_steps::rejected_objects(
        &observed.records,
        facts.namespace,
        &format!("{}-", facts.kafka),
    );
    let quorum = quorum_act(facts, &mut warnings);
    let step = roll::next(&observed.views, quorum != QuorumAct::Settled);
    let (restart, roll_held_back) = match kafka_steps::roll_step(
        &step,
        &observed.views,
        &observed.view,
        facts.lose_only_copies,
    ) {
        RollStep::Nothing => (None, false),
        RollStep::Restart(node) => (Some(node), false),
        RollStep::HeldBack(held) => {
            warnings.extend(held);
            (None, true)
        }
    };
    let recorded: BTreeSet<i32> = facts.status.registered_node_ids.iter().copied().collect();
    let unregistration = kafka_steps::unregistration(
        &facts.registered,
        &recorded,
        observed.check_registrations,
        facts.majority_lost.is_some(),
        &observed.view,
    );
    warnings.extend(unregistration.warning);
    warnings.extend(facts.members.iter().filter(|a| !facts.connected.contains(**a)).map(|alias| {
        Warning::new(
            Reason::ClusterUnreachable,
            format!(
                "the agent of Kubernetes cluster {alias} is not connected: its pods are not checked, rolled or scaled down until it is back"
            ),
        )
    }));
    warnings.extend(version::changing(
        kafka_version(facts, &step).as_deref(),
        facts.target,
    ));
    let answered = (step == Step::Done && !facts.recovering && facts.majority_lost.is_none())
        .then(|| answer::brokers_answer(&observed.view, &facts.cluster.cluster_id, &facts.brokers));
    let ready = facts.refused_services.is_empty() && answered == Some(Ok(()));
    let when_ready = ready.then(|| ready_steps(facts, &mut warnings));
    Decision {
        quorum,
        step,
        restart,
        roll_held_back,
        unregister: unregistration.now,
        unregistration_waits: unregistration.waiting,
        answered,
        when_ready,
        warnings,
    }
}

/// A recovery holds every other change of the quorum until it is done; without a majority
/// nothing changes; else a dynamic quorum moves one voter toward the desired controllers.
fn quorum_act(facts: &Facts<'_>, warnings: &mut Vec<Warning>) -> QuorumAct {
    if facts.recovering {
        return QuorumAct::Recover;
    }
    if let Some(why) = facts.majority_lost {
        return QuorumAct::Busy(why.to_owned());
    }
    let observed = facts.observed;
    match kafka_steps::quorum_step(
        facts.cluster,
        facts.status,
        facts.desired_controllers,
        &observed.view,
        observed.now_ms,
    ) {
        QuorumStep::Settled => QuorumAct::Settled,
        QuorumStep::Unknown(why) => QuorumAct::Busy(why),
        QuorumStep::Waiting(why) => {
            warnings.push(Warning::new(Reason::QuorumChangePending, why.clone()));
            QuorumAct::Busy(why)
        }
        QuorumStep::Change(planned) => QuorumAct::Change(planned),
    }
}

/// The Kafka version the status records: the nodes' once the roll is done.
fn kafka_version(facts: &Facts<'_>, step: &Step) -> Option<String> {
    if *step == Step::Done {
        Some(facts.kafka_version.to_owned())
    } else {
        facts.status.kafka_version.clone()
    }
}

/// The steps only a ready cluster takes, and the warnings they have before acting.
fn ready_steps(facts: &Facts<'_>, warnings: &mut Vec<Warning>) -> ReadySteps {
    let drains = move_drains::decide(facts.kafka, &facts.moves, &facts.move_operations);
    warnings.extend(drains.stalled);
    let WhenReady {
        quorum,
        confined,
        migration,
        metadata,
    } = kafka_steps::when_ready(
        facts.status,
        facts.wanted_quorum,
        facts.kafka_version,
        facts.target,
        facts.kafka,
        &facts.observed.view,
    );
    warnings.extend(confined);
    match &migration {
        Migration::Unsupported(warning) => warnings.push(warning.clone()),
        Migration::Waiting(warning) => warnings.extend(warning.clone()),
        Migration::NotDue | Migration::Record | Migration::Raise => {}
    }
    if let Metadata::Pending(warning) = &metadata {
        warnings.push(warning.clone());
    }
    ReadySteps {
        drains: drains.steps,
        quorum,
        migration,
        metadata,
    }
}

/// The status of this pass and when to look again (pure), from the decision and what its
/// acts did. `earlier`: the warnings of the stages before; `shown`: the pools and listeners
/// the status lists.
pub(super) fn conclude(
    facts: &Facts<'_>,
    decision: Decision<'_>,
    done: Done,
    earlier: Vec<Warning>,
    shown: Shown,
    now: &str,
) -> Concluded {
    let busy = match &decision.quorum {
        QuorumAct::Settled => None,
        QuorumAct::Busy(why) => Some(why.clone()),
        QuorumAct::Recover | QuorumAct::Change(_) => Some(done.quorum.clone().unwrap_or_default()),
    };
    let mut warnings = earlier;
    warnings.extend(decision.warnings.iter().cloned());
    if decision.quorum == QuorumAct::Recover {
        warnings.push(Warning::new(
            Reason::QuorumRecovery,
            busy.clone().unwrap_or_default(),
        ));
    }
    warnings.extend(done.warnings.iter().cloned());
    let pending: BTreeSet<i32> = decision
        .unregistration_waits
        .union(&done.not_unregistered)
        .copied()
        .collect();
    if !pending.is_empty() {
        warnings.push(Warning::new(
            Reason::UnregistrationPending,
            format!(
                "nodes {pending:?} are registered in Kafka but belong to no node pool; each is unregistered once its process is gone (fenced)"
            ),
        ));
    }
    let ready = readiness(&Readiness {
        step: &decision.step,
        quorum_busy: busy.as_deref(),
        recovering: facts.recovering,
        majority_lost: facts.majority_lost,
        refused_services: facts.refused_services,
        rolled: done.rolled.as_deref(),
        held_back: decision.roll_held_back,
        answered: decision.answered.clone(),
    });
    let mut kafka_status = facts.status.clone();
    if done.recovered.is_some() {
        kafka_status.quorum = done.recovered.clone();
    }
    kafka_status.registered_node_ids = facts.registered.union(&pending).copied().collect();
    kafka_status.kafka_version = kafka_version(facts, &decision.step);
    let busy_when_ready = decision
        .when_ready
        .as_ref()
        .is_some_and(|r| record_when_ready(&mut kafka_status, r, &done));
    let unsettled =
        kafka_steps::quorum_unsettled(busy.as_deref(), &facts.observed.view, facts.observed.now_ms);
    record_unsettled(&mut kafka_status, unsettled.clone());
    // Closed budgets open at the next pass after the cluster is whole again: soon.
    let settled = ready.is_true()
        && pending.is_empty()
        && unsettled.is_none()
        && !facts.budgets_closed
        && !busy_when_ready;
    kafka_status.conditions =
        status::conditions(&kafka_status.conditions, ready.clone(), &warnings, now);
    kafka_status.kafka_node_pools = shown.pools;
    kafka_status.listeners = shown.listeners;
    if ready.is_true() {
        kafka_status.operator_last_successful_version = Some(env!("CARGO_PKG_VERSION").to_owned());
    }
    let watching = facts.forgetting || facts.observed.returned;
    let action = next_look(settled, &warnings, watching);
    Concluded {
        status: kafka_status,
        ready,
        warnings,
        action,
    }
}

/// The pools and listeners a `Kafka`'s status lists.
pub(super) struct Shown {
    pub(super) pools: Vec<UsedNodePoolStatus>,
    pub(super) listeners: Vec<ListenerStatus>,
}

/// Records what a ready cluster found and did; `true` while one of its steps is due but not
/// done (the quorum not made dynamic, the metadata version not raised).
fn record_when_ready(kafka_status: &mut KafkaStatus, steps: &ReadySteps, done: &Done) -> bool {
    if let Some(quorum) = &steps.quorum {
        kafka_status.quorum = Some(quorum.clone());
    }
    let migrating = match steps.migration {
        Migration::NotDue | Migration::Unsupported(_) => false,
        Migration::Waiting(_) => true,
        Migration::Record => {
            crate::kafka::quorum::record_dynamic(kafka_status);
            false
        }
        Migration::Raise if done.migrated => {
            crate::kafka::quorum::record_dynamic(kafka_status);
            false
        }
        Migration::Raise => true,
    };
    let level = match steps.metadata {
        Metadata::Unknown => None,
        Metadata::Pending(_) => return true,
        Metadata::Record(level) => Some(level),
        Metadata::Raise(level) if done.metadata_raised => Some(level),
        Metadata::Raise(_) => return true,
    };
    if let Some(level) = level {
        kafka_status.kafka_metadata_version = Some(version::metadata_name(level));
    }
    migrating
}

/// Records in `status` why the quorum is not whole, for the next pass's disruption budgets.
fn record_unsettled(status: &mut KafkaStatus, unsettled: Option<String>) {
    match (&mut status.quorum, unsettled) {
        (Some(quorum), unsettled) => quorum.unsettled = unsettled,
        (None, None) => {}
        (quorum @ None, unsettled) => {
            *quorum = Some(QuorumStatus {
                unsettled,
                ..Default::default()
            })
        }
    }
}

/// When to look again: soon while anything is under way; a settled cluster as soon as what it
/// waits for may have changed (its warnings' reasons say; `watching` a forgotten cluster's
/// replacement or return), else at the idle interval.
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

/// What the `Ready` condition is made of.
struct Readiness<'a> {
    step: &'a Step,
    /// Why the quorum is not settled (a recovery's turn, a voter change, no majority).
    quorum_busy: Option<&'a str>,
    recovering: bool,
    majority_lost: Option<&'a str>,
    refused_services: &'a [String],
    /// What the roll did this pass.
    rolled: Option<&'a str>,
    held_back: bool,
    answered: Option<Result<(), String>>,
}

/// The `Ready` condition: a recovery or a lost majority first, then a refused listener
/// Service, then the roll; when nothing is left to do, every broker must have answered.
fn readiness(r: &Readiness<'_>) -> Condition {
    if r.recovering {
        return status::not_ready(
            Reason::QuorumRecovery.as_str(),
            r.quorum_busy.unwrap_or_default(),
        );
    }
    if let Some(why) = r.majority_lost {
        return status::not_ready(recover::QUORUM_MAJORITY_LOST, why);
    }
    if !r.refused_services.is_empty() {
        return status::not_ready(
            external::SERVICE_REFUSED,
            external::refused_message(r.refused_services),
        );
    }
    match (r.step, &r.answered) {
        (Step::Done, Some(Ok(()))) => Condition::ready(),
        (Step::Done, Some(Err(why))) => status::not_ready(answer::BROKERS_UNAVAILABLE, why),
        (Step::Done, None) => status::not_ready(
            answer::BROKERS_UNAVAILABLE,
            "the brokers were not asked whether they answer",
        ),
        (Step::Wait(why), _) => status::not_ready("Deploying", why.clone()),
        (Step::WaitForQuorum, _) => status::not_ready(
            "Deploying",
            Step::wait_for_quorum(r.quorum_busy.unwrap_or_default()),
        ),
        (Step::Restart(_), _) => status::not_ready(
            "RollingUpdate",
            r.rolled
                .or(r.held_back.then_some(RollStep::HELD_BACK))
                .unwrap_or("pods run an outdated revision"),
        ),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::super::fixtures::*;
    use super::*;
    use crate::kafka::view::Unread;
    use crate::kafka::warning::BLOCKED_RECHECK;
    use kstretch_core::node_ids::Role;

    const CB: &[Role] = &[Role::Controller, Role::Broker];

    /// A formed, dynamic, single-cluster Kafka of Kafka 4.1.2 whose nodes 0 (controller and
    /// broker) and 1 (broker) run; each test changes what it looks at.
    struct World {
        status: KafkaStatus,
        cluster: KafkaCluster,
        target: Target,
        desired_controllers: BTreeSet<i32>,
        connected: BTreeSet<String>,
        recovering: bool,
        majority_lost: Option<String>,
        refused: Vec<String>,
        moves: Vec<PoolMove>,
        move_operations: Vec<MoveOperation>,
        observed: Observed,
    }

    fn world() -> World {
        let t = target();
        World {
            status: KafkaStatus {
                registered_node_ids: vec![0, 1],
                kafka_version: Some("4.1.2".into()),
                ..formed()
            },
            cluster: dynamic_cluster(),
            target: t.clone(),
            desired_controllers: BTreeSet::from([0]),
            connected: BTreeSet::from(["alpha".to_owned()]),
            recovering: false,
            majority_lost: None,
            refused: Vec::new(),
            moves: Vec::new(),
            move_operations: Vec::new(),
            observed: Observed {
                records: BTreeMap::new(),
                views: vec![node(0, CB, "new", true), node(1, B, "new", true)],
                view: KafkaView {
                    quorum: Ok(quorum_info(&[0])),
                    features: Ok(features(t.metadata.level, 1)),
                    cluster: Ok(brokers(&[(0, false), (1, false)], true)),
                    topics: Ok(Vec::new()),
                    ..nothing_read()
                },
                check_registrations: false,
                returned: false,
                now_ms: NOW,
            },
        }
    }

    impl World {
        fn facts(&self) -> Facts<'_> {
            Facts {
                kafka: "k",
                namespace: "ns",
                status: &self.status,
                cluster: &self.cluster,
                kafka_version: "4.1.2",
                target: &self.target,
                wanted_quorum: kraft::QuorumMode::Dynamic,
                desired_controllers: &self.desired_controllers,
                brokers: BTreeSet::from([0, 1]),
                registered: BTreeSet::from([0, 1]),
                members: vec!["alpha"],
                connected: &self.connected,
                recovering: self.recovering,
                majority_lost: self.majority_lost.as_deref(),
                refused_services: &self.refused,
                budgets_closed: false,
                forgetting: false,
                moves: self.moves.clone(),
                move_operations: self.move_operations.clone(),
                lose_only_copies: false,
                observed: &self.observed,
            }
        }

        /// Decides, takes `done` as what the acts did, and concludes.
        fn pass(&self, done: impl FnOnce(&Decision<'_>) -> Done) -> (Decision<'_>, Concluded) {
            let facts = self.facts();
            let decision = decide(&facts);
            let concluded = conclude(
                &facts,
                decide(&facts),
                done(&decision),
                Vec::new(),
                Shown {
                    pools: Vec::new(),
                    listeners: Vec::new(),
                },
                "2026-11-29T00:00:00Z",
            );
            (decision, concluded)
        }
    }

    fn said(c: &Condition) -> (&str, &str) {
        (
            c.reason.as_deref().unwrap_or_default(),
            c.message.as_deref().unwrap_or_default(),
        )
    }

    fn reasons(warnings: &[Warning]) -> Vec<Reason> {
        warnings.iter().map(|w| w.reason).collect()
    }

    #[test]
    fn a_cluster_whose_brokers_all_answer_is_ready_and_looked_at_idly() {
        let w = world();
        let (decision, concluded) = w.pass(|_| Done::default());
        assert_eq!(decision.quorum, QuorumAct::Settled);
        assert_eq!(decision.step, Step::Done);
        assert!(decision.restart.is_none() && decision.unregister.is_empty());
        let steps = decision.when_ready.as_ref().expect("ready");
        assert_eq!(steps.metadata, Metadata::Record(w.target.metadata.level));
        assert!(concluded.ready.is_true());
        assert_eq!(concluded.action, Action::requeue(IDLE_REQUEUE));
        assert!(concluded.warnings.is_empty(), "{:?}", concluded.warnings);
        let status = &concluded.status;
        assert_eq!(status.kafka_version.as_deref(), Some("4.1.2"));
        assert!(status.kafka_metadata_version.is_some());
        assert_eq!(status.registered_node_ids, vec![0, 1]);
        assert!(status.operator_last_successful_version.is_some());
    }

    #[test]
    fn a_broker_that_does_not_answer_keeps_the_cluster_from_being_ready() {
        let mut w = world();
        w.observed.view.cluster = Ok(brokers(&[(0, false), (1, true)], true));
        let (decision, concluded) = w.pass(|_| Done::default());
        assert!(decision.when_ready.is_none(), "no ready cluster's steps");
        assert_eq!(said(&concluded.ready).0, answer::BROKERS_UNAVAILABLE);
        assert_eq!(concluded.action, Action::requeue(BUSY_REQUEUE));
    }

    #[test]
    fn a_stale_pod_is_restarted_and_the_status_says_what_the_restart_did() {
        let mut w = world();
        w.observed.views[1] = node(1, B, "old", true);
        w.observed.view.min_isr = Ok(BTreeMap::new());
        let (decision, concluded) = w.pass(|d| Done {
            rolled: d.restart.map(|n| format!("rolling pod {}", n.pod)),
            ..Done::default()
        });
        assert_eq!(decision.step, Step::Restart(vec![1]));
        assert_eq!(decision.restart.map(|n| n.id), Some(1));
        assert_eq!(
            said(&concluded.ready),
            ("RollingUpdate", "rolling pod k-p-1")
        );
        // Not recorded as running the new version until the roll is done.
        assert_eq!(concluded.status.kafka_version.as_deref(), Some("4.1.2"));
        assert_eq!(concluded.action, Action::requeue(BUSY_REQUEUE));
    }

    #[test]
    fn a_roll_that_would_take_partitions_below_their_minimum_waits_and_says_so() {
        let mut w = world();
        w.observed.views[1] = node(1, B, "old", true);
        w.observed.view.topics = Ok(vec![topic("t", &[(&[0, 1], &[1])])]);
        w.observed.view.min_isr = Ok(BTreeMap::from([("t".to_owned(), 1)]));
        let (decision, concluded) = w.pass(|_| Done::default());
        assert!(decision.restart.is_none() && decision.roll_held_back);
        assert_eq!(
            said(&concluded.ready),
            ("RollingUpdate", RollStep::HELD_BACK)
        );
        assert!(reasons(&concluded.warnings).contains(&Reason::RollingUpdateBlocked));
    }

    #[test]
    fn controllers_wait_while_a_voter_changes_and_the_status_says_what_the_change_did() {
        let mut w = world();
        // Voter 2 left the pools: it is removed, and the stale controller 0 waits for that.
        w.observed.view.quorum = Ok(quorum_info(&[0, 2]));
        w.observed.views[0] = node(0, CB, "old", true);
        let (decision, concluded) = w.pass(|_| Done {
            quorum: Some("voter 2 removed".into()),
            ..Done::default()
        });
        assert!(matches!(
            decision.quorum,
            QuorumAct::Change(Planned::Remove(_))
        ));
        assert_eq!(decision.step, Step::WaitForQuorum);
        assert_eq!(
            said(&concluded.ready),
            ("Deploying", &*Step::wait_for_quorum("voter 2 removed"))
        );
        let unsettled = concluded.status.quorum.and_then(|q| q.unsettled);
        assert_eq!(unsettled.as_deref(), Some("voter 2 removed"));
    }

    #[test]
    fn a_recovery_or_a_lost_majority_outranks_everything_and_changes_no_voter() {
        let mut w = world();
        w.recovering = true;
        let recovered = QuorumStatus {
            leader_id: Some(0),
            ..QuorumStatus::default()
        };
        let (decision, concluded) = w.pass(|_| Done {
            quorum: Some("waiting for pod k-p-0 to be replaced".into()),
            recovered: Some(recovered.clone()),
            ..Done::default()
        });
        assert_eq!(decision.quorum, QuorumAct::Recover);
        assert!(decision.when_ready.is_none());
        assert_eq!(
            said(&concluded.ready),
            ("QuorumRecovery", "waiting for pod k-p-0 to be replaced")
        );
        assert!(reasons(&concluded.warnings).contains(&Reason::QuorumRecovery));
        assert_eq!(concluded.status.quorum.unwrap().leader_id, Some(0));

        let mut w = world();
        w.majority_lost = Some("no majority".into());
        let (decision, concluded) = w.pass(|_| Done::default());
        assert_eq!(decision.quorum, QuorumAct::Busy("no majority".into()));
        assert_eq!(
            said(&concluded.ready),
            ("QuorumMajorityLost", "no majority")
        );
    }

    #[test]
    fn a_refused_listener_service_outranks_the_roll_and_the_brokers() {
        let mut w = world();
        w.refused = vec!["listener ext: refused".into()];
        let (decision, concluded) = w.pass(|_| Done::default());
        assert!(decision.when_ready.is_none());
        assert_eq!(said(&concluded.ready).0, external::SERVICE_REFUSED);
    }

    #[test]
    fn a_removed_node_is_unregistered_once_fenced_and_waits_while_kafka_refuses() {
        let mut w = world();
        w.status.registered_node_ids = vec![0, 1, 5];
        w.observed.check_registrations = true;
        w.observed.view.cluster = Ok(brokers(&[(0, false), (1, false), (5, true)], true));
        let (decision, concluded) = w.pass(|_| Done::default());
        assert_eq!(decision.unregister, BTreeSet::from([5]));
        assert_eq!(concluded.status.registered_node_ids, vec![0, 1]);
        assert!(concluded.ready.is_true());

        let (_, refused) = w.pass(|d| Done {
            not_unregistered: d.unregister.clone(),
            warnings: vec![Warning::new(Reason::UnregistrationFailed, "no")],
            ..Done::default()
        });
        assert_eq!(refused.status.registered_node_ids, vec![0, 1, 5]);
        assert!(reasons(&refused.warnings).contains(&Reason::UnregistrationPending));
        assert_eq!(refused.action, Action::requeue(BUSY_REQUEUE));
    }

    #[test]
    fn a_move_starts_its_drain_once_ready_and_a_stalled_one_waits_for_the_user() {
        let mut w = world();
        w.moves = vec![PoolMove {
            pool: "m".into(),
            moving: true,
            started_at: Some("2026-11-29T00:00:00Z".into()),
            draining: BTreeSet::from([1]),
        }];
        let (decision, _) = w.pass(|_| Done::default());
        let drains = &decision.when_ready.as_ref().unwrap().drains;
        assert!(
            matches!(&drains[..], [move_drains::Step::Create { brokers, .. }] if *brokers == BTreeSet::from([1]))
        );

        w.move_operations = vec![MoveOperation {
            name: move_drains::drain_name("k", "m", &BTreeSet::from([1])),
            pool: "m".into(),
            started_at: Some("2026-11-29T00:00:00Z".into()),
            phase: Some(kstretch_api::operation::phase::ABORTED.into()),
            said: "aborted".into(),
            ..Default::default()
        }];
        let (_, concluded) = w.pass(|_| Done::default());
        assert!(reasons(&concluded.warnings).contains(&Reason::PoolMoveStalled));
    }

    #[test]
    fn an_upgrade_raises_the_metadata_version_once_every_node_runs_it() {
        let mut w = world();
        w.status.kafka_metadata_version = Some("old".into());
        let level = w.target.metadata.level;
        w.observed.view.features = Ok(features(level - 1, 1));
        let (decision, failed) = w.pass(|_| Done::default());
        assert_eq!(
            decision.when_ready.as_ref().unwrap().metadata,
            Metadata::Raise(level)
        );
        // Not raised: the old level stands and it is tried again soon.
        assert_eq!(failed.status.kafka_metadata_version.as_deref(), Some("old"));
        assert_eq!(failed.action, Action::requeue(BUSY_REQUEUE));
        let (_, raised) = w.pass(|_| Done {
            metadata_raised: true,
            ..Done::default()
        });
        assert_eq!(
            raised.status.kafka_metadata_version,
            Some(version::metadata_name(level))
        );
        assert_eq!(raised.action, Action::requeue(IDLE_REQUEUE));
        // Nodes that do not all run the target yet say so, and nothing is raised.
        w.status.kafka_version = Some("4.0.0".into());
        w.observed.views[1] = node(1, B, "old", true);
        w.observed.view.min_isr = Ok(BTreeMap::new());
        let (decision, rolling) = w.pass(|_| Done::default());
        assert!(decision.when_ready.is_none());
        assert!(reasons(&rolling.warnings).contains(&Reason::KafkaVersionChanging));
    }

    #[test]
    fn a_cluster_whose_agent_is_gone_warns_and_kafka_that_cannot_be_read_is_not_ready() {
        let mut w = world();
        w.connected.clear();
        w.observed.view = KafkaView::unread(Some("k:9091"), Unread::Unreachable("down".into()));
        let (_, concluded) = w.pass(|_| Done::default());
        assert!(reasons(&concluded.warnings).contains(&Reason::ClusterUnreachable));
        assert!(!concluded.ready.is_true());
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

    #[test]
    fn the_roll_says_what_it_waits_for() {
        let r = Readiness {
            step: &Step::Wait("pod a-1 is not ready".to_owned()),
            quorum_busy: None,
            recovering: false,
            majority_lost: None,
            refused_services: &[],
            rolled: None,
            held_back: false,
            answered: None,
        };
        assert_eq!(said(&readiness(&r)), ("Deploying", "pod a-1 is not ready"));
        let stale = Readiness {
            step: &Step::Restart(vec![1]),
            ..r
        };
        assert_eq!(
            said(&readiness(&stale)),
            ("RollingUpdate", "pods run an outdated revision")
        );
        let unasked = Readiness {
            step: &Step::Done,
            ..stale
        };
        assert_eq!(
            said(&readiness(&unasked)),
            (
                answer::BROKERS_UNAVAILABLE,
                "the brokers were not asked whether they answer"
            )
        );
    }
}
