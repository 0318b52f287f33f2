//! The Kafka-side steps of one pass, decided purely from plain values: what to read of Kafka,
//! the quorum's next voter change, the pod to roll, the nodes to unregister, and what a ready
//! cluster records and raises. [`super::decide`] puts them together.

use std::collections::{BTreeMap, BTreeSet};

use kstretch_api::{KafkaStatus, QuorumStatus, names};
use kstretch_core::kraft::{self, KafkaCluster};
use kstretch_core::versions::Target;

use crate::kafka::build::Built;
use crate::kafka::quorum::{self, Planned};
use crate::kafka::roll::{self, HeldWhy, NodeView, Pick, Reported, Step};
use crate::kafka::version;
use crate::kafka::view::{KafkaView, Unread, Wanted};
use crate::kafka::warning::{Reason, Warning};
use crate::link::AgentRecord;

/// Every built node with what its agent last reported.
pub(super) fn node_views(
    records: &BTreeMap<String, AgentRecord>,
    namespace: &str,
    kafka: &str,
    built: &Built,
    connected: &BTreeSet<String>,
    applied: &BTreeSet<String>,
) -> Vec<NodeView> {
    built
        .nodes
        .values()
        .map(|n| {
            let podset = format!("{kafka}-{}", n.pool);
            let reported = records
                .get(&n.alias)
                .and_then(|r| {
                    r.podsets
                        .iter()
                        .find(|s| s.namespace == namespace && s.name == podset)
                })
                .and_then(|s| s.pods_status.iter().find(|p| p.name == n.pod))
                .filter(|p| !p.uid.is_empty())
                .map(|p| Reported {
                    uid: p.uid.clone(),
                    ready: p.ready,
                    revision: p.revision.clone(),
                    manual: p.manual_rolling_update,
                    new_disks: p.delete_pod_and_pvc,
                    terminating: p.terminating,
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
                claims: n.claims.clone(),
            }
        })
        .collect()
}

/// What the pass reads of Kafka: the registrations when they are checked or the cluster may be
/// ready; the quorum when a dynamic one may change (`quorum_may_change`) or the cluster may be
/// ready; the partitions (with their `min.insync.replicas`) when a broker that is up may roll.
/// `quiet`: no quorum recovery runs and the majority is not lost.
pub(super) fn wanted(
    views: &[NodeView],
    quiet: bool,
    quorum_may_change: bool,
    check_registrations: bool,
) -> Wanted {
    // The roll as if the quorum were settled: it restarts no fewer nodes than the real one.
    let roll = roll::next(views, false);
    let may_be_ready = quiet && roll == Step::Done;
    let may_roll_a_broker = matches!(&roll, Step::Restart(c) if roll::needs_partitions(c, views));
    Wanted {
        cluster: may_be_ready || check_registrations,
        quorum: may_be_ready || (quiet && quorum_may_change),
        features: may_be_ready,
        topics: may_be_ready || may_roll_a_broker,
        min_isr: may_roll_a_broker,
    }
}

/// The quorum's step this pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum QuorumStep {
    /// Nothing to change.
    Settled,
    /// A change is due but waits; why (also a warning).
    Waiting(String),
    /// Kafka could not say; why.
    Unknown(String),
    /// One voter to add or remove.
    Change(Planned),
}

/// Moves a dynamic quorum that has formed one voter toward `desired`, from the quorum `view`
/// read. `now_ms`: central's clock, against which Kafka's fetch times say who is live.
pub(super) fn quorum_step(
    cluster: &KafkaCluster,
    kafka_status: &KafkaStatus,
    desired: &BTreeSet<i32>,
    view: &KafkaView,
    now_ms: i64,
) -> QuorumStep {
    if cluster.quorum != kraft::QuorumMode::Dynamic || !quorum::formed(kafka_status) {
        return QuorumStep::Settled;
    }
    let info = match &view.quorum {
        Ok(info) => info,
        Err(Unread::NoBootstrap) => {
            return QuorumStep::Unknown("no bootstrap address to read the quorum at".to_owned());
        }
        Err(e) => {
            return QuorumStep::Unknown(format!(
                "cannot read or change the controller quorum: {e}"
            ));
        }
    };
    match quorum::plan_change(info, cluster, desired, now_ms) {
        Planned::Settled => QuorumStep::Settled,
        Planned::Waiting(why) => QuorumStep::Waiting(why),
        change => QuorumStep::Change(change),
    }
}

/// Why the quorum is not whole now, for the disruption budgets (pure): why it is `busy` (a
/// change due or under way, a recovery, no majority), else the voters that do not fetch; `None`
/// when it is whole or was not read this pass.
pub(super) fn quorum_unsettled(
    busy: Option<&str>,
    view: &KafkaView,
    now_ms: i64,
) -> Option<String> {
    if let Some(why) = busy {
        return Some(why.to_owned());
    }
    let silent = quorum::silent_voters(view.quorum.as_ref().ok()?, now_ms);
    (!silent.is_empty()).then(|| {
        format!("voters {silent:?} do not fetch the metadata log: their controllers are down or restarting")
    })
}

/// What the roll does this pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RollStep<'a> {
    /// No pod is stale, or the roll waits for something `step` says.
    Nothing,
    /// Restart this pod.
    Restart(&'a NodeView),
    /// Stale pods wait until one can be restarted safely (warnings name what holds them).
    HeldBack(Vec<Warning>),
}

impl RollStep<'_> {
    /// What the `Ready` condition says of a roll that waits.
    pub(super) const HELD_BACK: &'static str = "pods wait to restart (an outdated revision, a manual rolling update or new disks) until one can be restarted safely";
}

/// The first of a restart step's candidates that is safe to restart, checked against the
/// partitions `view` read. `lose_only_copies`: see [`roll::pick`].
pub(super) fn roll_step<'a>(
    step: &Step,
    views: &'a [NodeView],
    view: &KafkaView,
    lose_only_copies: bool,
) -> RollStep<'a> {
    let Step::Restart(candidates) = step else {
        return RollStep::Nothing;
    };
    let partitions = roll::needs_partitions(candidates, views).then(|| {
        view.partitions_isr().map_err(|e| match e {
            Unread::Unreachable(e) => format!("cannot reach Kafka: {e}"),
            Unread::Failed(e) => format!("cannot check its partitions: {e}"),
            other => other.to_string(),
        })
    });
    let partitions = partitions
        .as_ref()
        .map(|p| p.as_deref().map_err(String::as_str));
    match roll::pick(candidates, views, partitions, lose_only_copies) {
        Pick::Restart(node) if node.reported.is_some() => RollStep::Restart(node),
        Pick::Restart(_) => RollStep::Nothing,
        Pick::HeldBack(held_back) => {
            let (mut min_isr, mut only_copy) = (Vec::new(), Vec::new());
            for held in held_back {
                match held.why {
                    HeldWhy::MinIsr(parts) => {
                        min_isr.push(format!("{} ({})", held.pod, parts.join(", ")));
                    }
                    HeldWhy::OnlyCopy(parts) => {
                        only_copy.push(format!("{} ({})", held.pod, parts.join(", ")));
                    }
                }
            }
            let mut warnings = Vec::new();
            if !only_copy.is_empty() {
                warnings.push(Warning::new(
                    Reason::NewDisksHeldBack,
                    format!(
                        "pods asking for new disks (strimzi.io/delete-pod-and-pvc) hold the only in-sync copy of partitions, whose records would be lost: {}. They get new disks once another replica is in sync; to accept the loss, annotate the Kafka with {}: \"true\"",
                        only_copy.join("; "),
                        names::SKIP_BROKER_SCALEDOWN_CHECK
                    ),
                ));
            }
            if !min_isr.is_empty() {
                warnings.push(Warning::new(
                    Reason::RollingUpdateBlocked,
                    format!(
                        "pods waiting to roll would take partitions below min.insync.replicas: {}",
                        min_isr.join("; ")
                    ),
                ));
            }
            RollStep::HeldBack(warnings)
        }
    }
}

/// Registered nodes that belong to no pool: those to unregister now and those that wait.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Unregistration {
    pub(super) now: BTreeSet<i32>,
    pub(super) waiting: BTreeSet<i32>,
    pub(super) warning: Option<Warning>,
}

/// Which nodes registered in Kafka but no longer among `desired` are unregistered now: those
/// fenced (their process is gone); those still heartbeating wait, as unregistering them would
/// only be undone by their next registration. `recorded`: the registrations the status lists;
/// `check`: whether Kafka's registrations are looked at this pass (else nothing changes, and
/// without a majority they wait for a controller).
pub(super) fn unregistration(
    desired: &BTreeSet<i32>,
    recorded: &BTreeSet<i32>,
    check: bool,
    majority_lost: bool,
    view: &KafkaView,
) -> Unregistration {
    let fallback: BTreeSet<i32> = recorded.difference(desired).copied().collect();
    let waiting_for = |warning: Option<Warning>| Unregistration {
        now: BTreeSet::new(),
        waiting: fallback.clone(),
        warning: warning.filter(|_| !fallback.is_empty()),
    };
    if majority_lost {
        return waiting_for(None);
    }
    if !check {
        return Unregistration::default();
    }
    let registered = match &view.cluster {
        Ok(registered) => registered,
        Err(Unread::NoBootstrap | Unread::NotWanted) => return waiting_for(None),
        Err(Unread::Unreachable(e)) => {
            return waiting_for(Some(Warning::new(
                Reason::UnregistrationFailed,
                format!("cannot reach Kafka to unregister nodes {fallback:?}: {e}"),
            )));
        }
        Err(Unread::Failed(e)) => {
            return waiting_for(Some(Warning::new(
                Reason::UnregistrationFailed,
                format!("cannot list the registered nodes: {e}"),
            )));
        }
    };
    // Before KIP-1073 Kafka lists only live brokers: the registrations are the status's.
    let candidates: BTreeSet<i32> = if registered.fenced_listed {
        registered
            .description
            .brokers
            .iter()
            .map(|b| b.id)
            .filter(|id| !desired.contains(id))
            .collect()
    } else {
        fallback.clone()
    };
    let live = registered.live();
    let (now, waiting) = candidates.iter().partition(|id| !live.contains(id));
    Unregistration {
        now,
        waiting,
        warning: None,
    }
}

/// What a ready cluster records and raises, from what the pass read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct WhenReady {
    /// The quorum as Kafka reports it (`None`: the last record stands).
    pub(super) quorum: Option<QuorumStatus>,
    /// Partitions confined to one cluster, or the last such warning when Kafka cannot say.
    pub(super) confined: Option<Warning>,
    pub(super) migration: Migration,
    pub(super) metadata: Metadata,
}

/// Turning a static quorum dynamic where its Kafka version can.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Migration {
    /// Not static, or not asked for.
    NotDue,
    /// Kafka says it is dynamic already: recorded.
    Record,
    /// Raise `kraft.version` now; the next pass rolls every node onto the quorum's bootstrap.
    Raise,
    /// This Kafka version cannot: the quorum stays static, with a warning.
    Unsupported(Warning),
    /// Due but not done this pass (a warning when there is something to say).
    Waiting(Option<Warning>),
}

/// The finalized `metadata.version` once every node runs the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Metadata {
    /// Nothing to read it at.
    Unknown,
    /// At or above the target: recorded at this level.
    Record(i16),
    /// Raised to this level now.
    Raise(i16),
    /// Kafka could not say; a warning why, retried.
    Pending(Warning),
}

/// What a ready cluster does (see [`WhenReady`]); `kafka_status` is the status before this
/// pass's reads, `version` the Kafka the nodes run.
pub(super) fn when_ready(
    kafka_status: &KafkaStatus,
    wanted_quorum: kraft::QuorumMode,
    version: &str,
    target: &Target,
    kafka: &str,
    view: &KafkaView,
) -> WhenReady {
    let quorum = match (&view.quorum, &view.features) {
        (Ok(info), Ok(features)) => Some(quorum::observed(info, features)),
        _ => None,
    };
    let mode = quorum
        .as_ref()
        .and_then(|q| q.mode.as_deref())
        .or_else(|| kafka_status.quorum.as_ref().and_then(|q| q.mode.as_deref()));
    let migration = if wanted_quorum == kraft::QuorumMode::Dynamic && mode != Some("dynamic") {
        migration(version, view)
    } else {
        Migration::NotDue
    };
    WhenReady {
        quorum,
        confined: confined(kafka_status, kafka, view),
        migration,
        metadata: metadata(target, view),
    }
}

fn migration(version: &str, view: &KafkaView) -> Migration {
    if !quorum::can_migrate(version) {
        return Migration::Unsupported(Warning::new(
            Reason::QuorumMigrationUnsupported,
            format!(
                "the controller quorum is static and Kafka {version} cannot make it dynamic (Kafka 4.1 and later can): controllers are added or removed only by restarting every node; upgrade Kafka, or set the annotation {}=static to keep it static without this warning",
                names::CONTROLLER_QUORUM
            ),
        ));
    }
    match &view.features {
        Ok(features) if quorum::migration_due(features) => Migration::Raise,
        Ok(_) => Migration::Record,
        Err(Unread::NoBootstrap) => Migration::Waiting(None),
        Err(e) => Migration::Waiting(Some(migration_pending(&e.to_string()))),
    }
}

/// The warning while a static quorum is not made dynamic yet, for `why`; retried.
pub(super) fn migration_pending(why: &str) -> Warning {
    Warning::new(
        Reason::QuorumMigrationPending,
        format!("the static controller quorum is not made dynamic yet: {why}; retried"),
    )
}

fn metadata(target: &Target, view: &KafkaView) -> Metadata {
    match &view.features {
        Ok(features) => match version::metadata_step(features, target) {
            Ok(level) => Metadata::Record(level),
            Err(level) => Metadata::Raise(level),
        },
        Err(Unread::NoBootstrap) => Metadata::Unknown,
        Err(e) => Metadata::Pending(version::raise_pending(target, &e.to_string())),
    }
}

/// A warning naming the partitions whose replicas all sit in one Kubernetes cluster; when
/// Kafka cannot say, the last such warning stands.
fn confined(kafka_status: &KafkaStatus, kafka: &str, view: &KafkaView) -> Option<Warning> {
    let confined = match view.confined() {
        Ok(confined) => confined,
        Err(_) => {
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
            "{} partition(s) have every replica in one Kubernetes cluster and are lost with it: {}; spread them with `kstretch spread --kafka {kafka}`",
            confined.len(),
            named.join(", "),
        ),
    ))
}

/// Objects of this `Kafka` (`namespace`, names starting `prefix`) that an agent could not
/// apply (or delete), from its last report.
pub(super) fn rejected_objects(
    records: &BTreeMap<String, AgentRecord>,
    namespace: &str,
    prefix: &str,
) -> Vec<Warning> {
    let mut out = Vec::new();
    for (alias, record) in records {
        let Some(report) = &record.last_apply else {
            continue;
        };
        let failed = crate::link::agents::rejected_in(report, namespace, prefix);
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use kstretch_api::condition::Condition;

    use super::super::fixtures::*;
    use super::*;

    #[test]
    fn a_pass_reads_only_what_it_may_use() {
        let ready = [node(0, C, "new", true), node(1, B, "new", true)];
        let all = wanted(&ready, true, false, false);
        assert_eq!(
            all,
            Wanted {
                cluster: true,
                quorum: true,
                features: true,
                topics: true,
                min_isr: false
            }
        );
        // Pods still starting: nothing, unless the registrations are due a check.
        let starting = [node(0, C, "new", false), node(1, B, "new", true)];
        assert_eq!(wanted(&starting, true, false, false), Wanted::default());
        assert!(wanted(&starting, true, false, true).cluster);
        // A dynamic quorum that may change is read while pods start, not during a recovery.
        assert!(wanted(&starting, true, true, false).quorum);
        assert!(!wanted(&starting, false, true, false).quorum);
        // A broker that is up and stale: its partitions and their min.insync.replicas.
        let stale = [node(0, C, "new", true), node(1, B, "old", true)];
        let roll = wanted(&stale, true, false, false);
        assert!(roll.topics && roll.min_isr && !roll.features);
    }

    #[test]
    fn the_quorum_moves_one_voter_toward_the_desired_controllers() {
        let cluster = dynamic_cluster();
        let view = KafkaView {
            quorum: Ok(quorum_info(&[0, 1, 2])),
            ..nothing_read()
        };
        let desired = BTreeSet::from([0, 1]);
        // Static, or not formed yet: nothing to change.
        let static_cluster = KafkaCluster {
            quorum: kraft::QuorumMode::Static,
            ..dynamic_cluster()
        };
        assert_eq!(
            quorum_step(&static_cluster, &formed(), &desired, &view, NOW),
            QuorumStep::Settled
        );
        assert_eq!(
            quorum_step(&cluster, &KafkaStatus::default(), &desired, &view, NOW),
            QuorumStep::Settled
        );
        let QuorumStep::Change(Planned::Remove(member)) =
            quorum_step(&cluster, &formed(), &desired, &view, NOW)
        else {
            panic!("voter 2 is removed");
        };
        assert_eq!((member.id, member.directory), (2, 102));
        let settled = BTreeSet::from([0, 1, 2]);
        assert_eq!(
            quorum_step(&cluster, &formed(), &settled, &view, NOW),
            QuorumStep::Settled
        );
        // A controller to add that has no address yet waits.
        let mut joining = quorum_info(&[0, 1, 2]);
        joining.observers = vec![replica(3, 103, NOW)];
        let view = KafkaView {
            quorum: Ok(joining),
            ..nothing_read()
        };
        let more = BTreeSet::from([0, 1, 2, 3]);
        assert_eq!(
            quorum_step(&cluster, &formed(), &more, &view, NOW),
            QuorumStep::Waiting("controller 3 has no address yet".into())
        );
    }

    #[test]
    fn a_quorum_kafka_cannot_describe_is_not_settled() {
        let failed = KafkaView {
            quorum: Err(Unread::Failed("timed out".into())),
            ..nothing_read()
        };
        assert_eq!(
            quorum_step(
                &dynamic_cluster(),
                &formed(),
                &BTreeSet::new(),
                &failed,
                NOW
            ),
            QuorumStep::Unknown("cannot read or change the controller quorum: timed out".into())
        );
        let no_address = KafkaView::unread(None, Unread::NoBootstrap);
        assert_eq!(
            quorum_step(
                &dynamic_cluster(),
                &formed(),
                &BTreeSet::new(),
                &no_address,
                NOW
            ),
            QuorumStep::Unknown("no bootstrap address to read the quorum at".into())
        );
    }

    #[test]
    fn a_broker_rolls_only_when_no_partition_drops_below_its_minimum_isr() {
        let views = [node(1, B, "old", true), node(2, B, "new", true)];
        let step = Step::Restart(vec![1]);
        let at_minimum = KafkaView {
            topics: Ok(vec![topic("t", &[(&[1, 2, 3], &[1, 2])])]),
            min_isr: Ok(BTreeMap::from([("t".to_owned(), 2)])),
            ..nothing_read()
        };
        let RollStep::HeldBack(warnings) = roll_step(&step, &views, &at_minimum, false) else {
            panic!("held back");
        };
        let [warning] = &warnings[..] else {
            panic!("held back");
        };
        assert_eq!(warning.reason, Reason::RollingUpdateBlocked);
        assert!(
            warning
                .message
                .contains("k-p-1 (t-0 (ISR [1, 2], min.insync.replicas 2))"),
            "{}",
            warning.message
        );
        let in_sync = KafkaView {
            topics: Ok(vec![topic("t", &[(&[1, 2, 3], &[1, 2, 3])])]),
            min_isr: Ok(BTreeMap::from([("t".to_owned(), 2)])),
            ..nothing_read()
        };
        assert_eq!(
            roll_step(&step, &views, &in_sync, false),
            RollStep::Restart(&views[0])
        );
        // Kafka not answering holds every broker that is up, and says why.
        let unreachable = KafkaView::unread(Some("k:9091"), Unread::Unreachable("refused".into()));
        let RollStep::HeldBack(warnings) = roll_step(&step, &views, &unreachable, false) else {
            panic!("held back");
        };
        let [warning] = &warnings[..] else {
            panic!("held back");
        };
        assert!(warning.message.contains("cannot reach Kafka: refused"));
        // A broker that is down anyway needs no partitions.
        let down = [node(1, B, "old", false)];
        assert_eq!(
            roll_step(&step, &down, &unreachable, false),
            RollStep::Restart(&down[0])
        );
        assert_eq!(
            roll_step(&Step::Done, &views, &in_sync, false),
            RollStep::Nothing
        );
    }

    #[test]
    fn new_disks_wait_naming_the_only_copies_and_how_to_accept_their_loss() {
        let mut asking = node(1, B, "new", true);
        asking.reported.as_mut().unwrap().new_disks = true;
        let views = [asking, node(2, B, "new", true)];
        let step = roll::next(&views, false);
        assert_eq!(step, Step::Restart(vec![1]));
        let only_here = KafkaView {
            topics: Ok(vec![topic("solo", &[(&[1], &[1])])]),
            min_isr: Ok(BTreeMap::from([("solo".to_owned(), 1)])),
            ..nothing_read()
        };
        let RollStep::HeldBack(warnings) = roll_step(&step, &views, &only_here, false) else {
            panic!("held back");
        };
        let [warning] = &warnings[..] else {
            panic!("{warnings:?}");
        };
        assert_eq!(warning.reason, Reason::NewDisksHeldBack);
        assert!(
            warning
                .message
                .contains("k-p-1 (solo-0 (replicas [1], ISR [1]))")
                && warning.message.contains(names::SKIP_BROKER_SCALEDOWN_CHECK),
            "{}",
            warning.message
        );
        assert_eq!(
            roll_step(&step, &views, &only_here, true),
            RollStep::Restart(&views[0])
        );
        assert_eq!(views[0].claims_to_replace(), vec!["data-k-p-1".to_owned()]);
    }

    #[test]
    fn only_fenced_nodes_are_unregistered_and_live_ones_wait() {
        let desired = BTreeSet::from([0, 1]);
        let recorded = BTreeSet::from([0, 1, 4]);
        let view = KafkaView {
            cluster: Ok(brokers(
                &[(0, false), (1, false), (3, true), (4, false), (5, true)],
                true,
            )),
            ..nothing_read()
        };
        let u = unregistration(&desired, &recorded, true, false, &view);
        assert_eq!(u.now, BTreeSet::from([3, 5]));
        assert_eq!(u.waiting, BTreeSet::from([4]));
        assert_eq!(u.warning, None);
        // Not checked this pass: nothing changes.
        assert_eq!(
            unregistration(&desired, &recorded, false, false, &view),
            Unregistration::default()
        );
        // Without a majority the recorded ones wait for a controller.
        let lost = unregistration(&desired, &recorded, true, true, &view);
        assert_eq!((lost.now.len(), lost.waiting), (0, BTreeSet::from([4])));
    }

    #[test]
    fn before_kip_1073_the_status_says_which_nodes_are_registered() {
        let desired = BTreeSet::from([0]);
        let recorded = BTreeSet::from([0, 2, 3]);
        let view = KafkaView {
            cluster: Ok(brokers(&[(0, false), (3, false)], false)),
            ..nothing_read()
        };
        let u = unregistration(&desired, &recorded, true, false, &view);
        assert_eq!(
            (u.now, u.waiting),
            (BTreeSet::from([2]), BTreeSet::from([3]))
        );
    }

    #[test]
    fn registrations_kafka_cannot_list_wait_with_a_warning() {
        let desired = BTreeSet::from([0]);
        let recorded = BTreeSet::from([0, 2]);
        let unreachable = KafkaView::unread(Some("k:9091"), Unread::Unreachable("refused".into()));
        let u = unregistration(&desired, &recorded, true, false, &unreachable);
        assert_eq!(u.waiting, BTreeSet::from([2]));
        let warning = u.warning.unwrap();
        assert_eq!(warning.reason, Reason::UnregistrationFailed);
        assert_eq!(
            warning.message,
            "cannot reach Kafka to unregister nodes {2}: refused"
        );
        let failed = KafkaView {
            cluster: Err(Unread::Failed("denied".into())),
            ..nothing_read()
        };
        let u = unregistration(&desired, &recorded, true, false, &failed);
        assert_eq!(
            u.warning.unwrap().message,
            "cannot list the registered nodes: denied"
        );
        // Nothing to unregister: nothing to warn about.
        let u = unregistration(&desired, &desired, true, false, &failed);
        assert_eq!(u, Unregistration::default());
    }

    /// What a ready, formed, dynamic cluster of Kafka 4.1.2 does over `view`.
    fn ready_over(view: &KafkaView) -> WhenReady {
        when_ready(
            &formed(),
            kraft::QuorumMode::Dynamic,
            "4.1.2",
            &target(),
            "k",
            view,
        )
    }

    #[test]
    fn a_ready_cluster_records_its_quorum_and_raises_its_metadata_version() {
        let t = target();
        let view = KafkaView {
            quorum: Ok(quorum_info(&[0])),
            features: Ok(features(t.metadata.level - 1, 1)),
            cluster: Ok(brokers(&[(0, false)], true)),
            topics: Ok(Vec::new()),
            ..nothing_read()
        };
        let ready = ready_over(&view);
        assert_eq!(ready.quorum.unwrap().voters.len(), 1);
        assert_eq!(ready.migration, Migration::NotDue);
        assert_eq!(ready.metadata, Metadata::Raise(t.metadata.level));
        assert_eq!(ready.confined, None);
        let raised = KafkaView {
            features: Ok(features(t.metadata.level, 1)),
            ..view
        };
        let ready = ready_over(&raised);
        assert_eq!(ready.metadata, Metadata::Record(t.metadata.level));
        // Kafka cannot say: a warning, retried.
        let failed = KafkaView {
            features: Err(Unread::Failed("timed out".into())),
            ..raised
        };
        let ready = ready_over(&failed);
        let Metadata::Pending(warning) = ready.metadata else {
            panic!("pending");
        };
        assert_eq!(warning.reason, Reason::MetadataVersionPending);
        assert_eq!(ready.quorum, None);
    }

    #[test]
    fn a_static_quorum_is_made_dynamic_where_its_kafka_can() {
        let t = target();
        let static_view = KafkaView {
            quorum: Ok(quorum_info(&[0])),
            features: Ok(features(t.metadata.level, 0)),
            ..nothing_read()
        };
        let status = KafkaStatus::default();
        let migration = |version: &str, wanted: kraft::QuorumMode, view: &KafkaView| {
            when_ready(&status, wanted, version, &t, "k", view).migration
        };
        assert_eq!(
            migration("4.1.2", kraft::QuorumMode::Dynamic, &static_view),
            Migration::Raise
        );
        assert_eq!(
            migration("4.1.2", kraft::QuorumMode::Static, &static_view),
            Migration::NotDue
        );
        let Migration::Unsupported(warning) =
            migration("4.0.1", kraft::QuorumMode::Dynamic, &static_view)
        else {
            panic!("unsupported");
        };
        assert_eq!(warning.reason, Reason::QuorumMigrationUnsupported);
        // Kafka's features say dynamic while the quorum was read before: recorded.
        let dynamic_features = KafkaView {
            quorum: Err(Unread::Failed("timed out".into())),
            features: Ok(features(t.metadata.level, 1)),
            ..nothing_read()
        };
        assert_eq!(
            migration("4.1.2", kraft::QuorumMode::Dynamic, &dynamic_features),
            Migration::Record
        );
        let Migration::Waiting(Some(warning)) = migration(
            "4.1.2",
            kraft::QuorumMode::Dynamic,
            &KafkaView::unread(Some("k:9091"), Unread::Failed("timed out".into())),
        ) else {
            panic!("waiting");
        };
        assert_eq!(warning.reason, Reason::QuorumMigrationPending);
    }

    #[test]
    fn partitions_in_one_cluster_are_named_and_the_last_warning_stands_when_kafka_cannot_say() {
        let t = target();
        let view = KafkaView {
            cluster: Ok(brokers(&[(0, false), (1, false), (10, false)], true)),
            topics: Ok(vec![topic(
                "t",
                &[(&[0, 1], &[0, 1]), (&[0, 10], &[0, 10])],
            )]),
            ..nothing_read()
        };
        let ready = ready_over(&view);
        let warning = ready.confined.unwrap();
        assert_eq!(warning.reason, Reason::ReplicasInOneCluster);
        assert!(
            warning.message.starts_with("1 partition(s)")
                && warning.message.contains("t-0 (alpha)")
                && warning.message.contains("kstretch spread --kafka k"),
            "{}",
            warning.message
        );
        let mut status = formed();
        status.conditions = vec![Condition {
            type_: "Warning".into(),
            status: "True".into(),
            reason: Some("ReplicasInOneCluster".into()),
            message: Some("before".into()),
            ..Condition::default()
        }];
        let unknown = nothing_read();
        let ready = when_ready(
            &status,
            kraft::QuorumMode::Dynamic,
            "4.1.2",
            &t,
            "k",
            &unknown,
        );
        assert_eq!(ready.confined.unwrap().message, "before");
    }
}
