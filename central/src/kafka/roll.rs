//! Rolling updates: which pod, if any, to restart next so that every pod runs its current
//! revision, one at a time, never while another pod is down, and never taking the controller
//! quorum below a majority. Whether a broker's restart would take a partition below
//! `min.insync.replicas` is asked of Kafka by the caller for the candidate chosen here. A pod
//! marked for new disks (`strimzi.io/delete-pod-and-pvc`) rolls the same way, with its claims,
//! and only when no partition's last in-sync replica and no quorum majority goes with them.
//! Pure.

use std::collections::BTreeSet;

use kstretch_core::node_ids::Role;

use super::view::PartitionIsr;

/// What the agent last reported of a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reported {
    pub uid: String,
    pub ready: bool,
    pub revision: String,
    /// The pod carries `strimzi.io/manual-rolling-update: "true"`: it rolls like a pod of an
    /// old revision.
    pub manual: bool,
    /// The pod carries `strimzi.io/delete-pod-and-pvc: "true"`: it rolls with its claims.
    pub new_disks: bool,
    /// The pod is being deleted: restarting it again would do nothing more.
    pub terminating: bool,
}

/// One node as central sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    pub id: i32,
    pub alias: String,
    pub pod: String,
    pub roles: BTreeSet<Role>,
    pub desired_revision: String,
    /// `None`: the pod does not exist (or the agent has not reported it).
    pub reported: Option<Reported>,
    /// Whether the agent of the node's cluster is connected now.
    pub connected: bool,
    /// Whether that agent has applied the desired state published now: until it has, a
    /// restarted pod would come back with its old definition.
    pub applied: bool,
    /// The pod's PersistentVolumeClaims, deleted with it when it asks for new disks.
    pub claims: Vec<String>,
}

impl NodeView {
    fn is_current(&self) -> bool {
        self.reported
            .as_ref()
            .is_some_and(|r| r.revision == self.desired_revision && !r.manual && !r.new_disks)
    }

    /// Whether the pod asks for new disks (`strimzi.io/delete-pod-and-pvc`).
    pub fn wants_new_disks(&self) -> bool {
        self.reported.as_ref().is_some_and(|r| r.new_disks)
    }

    /// The claims to delete with the pod when it restarts now.
    pub fn claims_to_replace(&self) -> Vec<String> {
        if self.wants_new_disks() {
            self.claims.clone()
        } else {
            Vec::new()
        }
    }

    /// Why the pod is restarted, for the agent's log, the pod's deletion and the `Kafka`'s
    /// event.
    pub fn roll_reason(&self) -> &'static str {
        match &self.reported {
            Some(r) if r.new_disks => {
                "strimzi.io/delete-pod-and-pvc asks for it: its claims are deleted with it and it comes back on new, empty disks"
            }
            Some(r) if r.manual => "strimzi.io/manual-rolling-update asks for it",
            _ => "its revision changed",
        }
    }

    fn is_controller(&self) -> bool {
        self.roles.contains(&Role::Controller)
    }

    fn is_ready(&self) -> bool {
        self.reported.as_ref().is_some_and(|r| r.ready)
    }
}

/// The next step of the roll.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Every pod is ready and current.
    Done,
    /// Nothing may be restarted now; why.
    Wait(String),
    /// Only controllers are stale, and they wait until the controller quorum is settled (the
    /// caller knows why it is not: [`Step::wait_for_quorum`] says it).
    WaitForQuorum,
    /// Restart one of these, in order of preference; the caller checks each against Kafka and
    /// restarts the first that is safe.
    Restart(Vec<i32>),
}

impl Step {
    /// Why controllers wait for a quorum that is not settled, for the reason `busy`.
    pub fn wait_for_quorum(busy: &str) -> String {
        format!("controllers restart once the controller quorum is settled: {busy}")
    }
}

/// Decides the next step over every node of one Kafka cluster. `quorum_busy`: whether a
/// dynamic controller quorum is not settled; controllers that are up then wait, as a restart
/// could take away a voter the change relies on (or, with a new metadata directory, make one
/// more voter to replace).
pub fn next(nodes: &[NodeView], quorum_busy: bool) -> Step {
    let unreachable: BTreeSet<&str> = nodes
        .iter()
        .filter(|n| !n.connected)
        .map(|n| n.alias.as_str())
        .collect();
    let reachable: Vec<&NodeView> = nodes.iter().filter(|n| n.connected).collect();
    if let Some(n) = reachable.iter().find(|n| !n.applied && !n.is_current()) {
        return Step::Wait(format!(
            "cluster {} has not applied the current desired state yet",
            n.alias
        ));
    }

    // A pod already going (restarted a moment ago) is waited for, not restarted again.
    if let Some(going) = reachable
        .iter()
        .find(|n| n.reported.as_ref().is_some_and(|r| r.terminating))
    {
        return Step::Wait(format!("pod {} is being replaced", going.pod));
    }
    // A stale pod that is down anyway is restarted first: that cannot make things worse.
    let stale_down: Vec<i32> = reachable
        .iter()
        .filter(|n| n.reported.is_some() && !n.is_ready() && !n.is_current())
        .map(|n| n.id)
        .collect();
    if !stale_down.is_empty() {
        return Step::Restart(stale_down);
    }
    if let Some(down) = reachable.iter().find(|n| !n.is_ready()) {
        let why = if down.reported.is_none() {
            "does not exist yet"
        } else {
            "is not ready"
        };
        return Step::Wait(format!("pod {} {why}", down.pod));
    }

    let mut stale: Vec<&NodeView> = reachable
        .iter()
        .copied()
        .filter(|n| !n.is_current())
        .collect();
    if stale.is_empty() {
        return if unreachable.is_empty() {
            Step::Done
        } else {
            Step::Wait(format!(
                "cluster(s) {} unreachable: their pods are not checked or rolled",
                unreachable.into_iter().collect::<Vec<_>>().join(", ")
            ))
        };
    }

    // Controllers first (as Strimzi does), then combined nodes, then brokers; by ID.
    stale.sort_by_key(|n| {
        let rank = match (
            n.roles.contains(&Role::Controller),
            n.roles.contains(&Role::Broker),
        ) {
            (true, false) => 0,
            (true, true) => 1,
            _ => 2,
        };
        (rank, n.id)
    });
    let controllers: Vec<&NodeView> = nodes
        .iter()
        .filter(|n| n.roles.contains(&Role::Controller))
        .collect();
    let majority = controllers.len() / 2 + 1;
    let ready_controllers = controllers
        .iter()
        .filter(|n| n.connected && n.is_ready())
        .count();
    // One or two controllers lose the majority whichever restarts: waiting would block the
    // roll forever, so they roll one at a time like the rest. Not onto new disks: the other
    // controller alone does not hold a majority of the metadata log.
    let too_few = controllers.len() <= 2;
    let candidates: Vec<i32> = stale
        .iter()
        .filter(|n| {
            !n.is_controller()
                || (!quorum_busy
                    && ((too_few && !n.wants_new_disks())
                        || ready_controllers.saturating_sub(1) >= majority))
        })
        .map(|n| n.id)
        .collect();
    if candidates.is_empty()
        && let Some(n) = stale
            .iter()
            .find(|n| too_few && n.is_controller() && n.wants_new_disks())
    {
        return Step::Wait(format!(
            "pod {} asks for new disks (strimzi.io/delete-pod-and-pvc), but its controller is one of {} and its metadata log would go with them: add controllers first, or remove the annotation",
            n.pod,
            controllers.len()
        ));
    }
    if quorum_busy && candidates.is_empty() {
        return Step::WaitForQuorum;
    }
    if candidates.is_empty() {
        return Step::Wait(format!(
            "restarting a controller now would leave {} of {} controllers ready, below the quorum majority of {majority}",
            ready_controllers.saturating_sub(1),
            controllers.len()
        ));
    }
    Step::Restart(candidates)
}

/// Whether restarting the broker `broker` keeps every partition at or above
/// `min.insync.replicas`: returns the partitions it would take below. A partition whose
/// replication factor is not above its `min.insync.replicas` is never available through a
/// restart anyway and does not block (as in Strimzi).
pub fn partitions_blocking_restart(broker: i32, partitions: &[PartitionIsr]) -> Vec<String> {
    partitions
        .iter()
        .filter(|p| {
            p.isr.contains(&broker) && p.isr.len() <= p.min_isr && p.replicas.len() > p.min_isr
        })
        .map(|p| {
            format!(
                "{} (ISR {:?}, min.insync.replicas {})",
                p.name, p.isr, p.min_isr
            )
        })
        .collect()
}

/// The partitions whose records only `broker` holds in sync: it is a replica and no other
/// replica is in their ISR. New disks for it would lose those records.
pub fn partitions_only_on(broker: i32, partitions: &[PartitionIsr]) -> Vec<String> {
    partitions
        .iter()
        .filter(|p| p.replicas.contains(&broker) && p.isr.iter().all(|r| *r == broker))
        .map(|p| format!("{} (replicas {:?}, ISR {:?})", p.name, p.replicas, p.isr))
        .collect()
}

/// Why a candidate is not restarted now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeldWhy {
    /// Its restart would take these partitions below their minimum ISR (or why that is not
    /// known).
    MinIsr(Vec<String>),
    /// It asks for new disks and holds the only in-sync copy of these partitions.
    OnlyCopy(Vec<String>),
}

/// A candidate held back, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub pod: String,
    pub why: HeldWhy,
}

/// Which of a restart step's candidates is restarted now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pick<'a> {
    /// The first candidate that is safe to restart.
    Restart(&'a NodeView),
    /// None is: the pods held back and why; empty when no candidate is reported yet.
    HeldBack(Vec<Held>),
}

/// Whether a restart of `candidates` needs Kafka's partitions: a broker that is up is
/// restarted only when no partition drops below its minimum ISR, and one that asks for new
/// disks only when it holds no partition's last in-sync copy.
pub fn needs_partitions(candidates: &[i32], views: &[NodeView]) -> bool {
    candidates
        .iter()
        .filter_map(|id| views.iter().find(|n| n.id == *id))
        .any(|n| {
            n.roles.contains(&Role::Broker)
                && n.reported
                    .as_ref()
                    .is_some_and(|r| r.ready || (r.new_disks && !n.claims.is_empty()))
        })
}

/// Picks, in order, the first candidate that is safe to restart (pure). `partitions`: Kafka's
/// partitions with their ISRs, or why they could not be read; asked only when
/// [`needs_partitions`] says so. `lose_only_copies`: the `Kafka` accepts losing the records of
/// a broker whose disks are replaced (Strimzi's `strimzi.io/skip-broker-scaledown-check`).
pub fn pick<'a>(
    candidates: &[i32],
    views: &'a [NodeView],
    partitions: Option<Result<&[PartitionIsr], &str>>,
    lose_only_copies: bool,
) -> Pick<'a> {
    let mut held_back = Vec::new();
    for id in candidates {
        let Some(node) = views.iter().find(|n| n.id == *id) else {
            continue;
        };
        let Some(reported) = &node.reported else {
            continue;
        };
        if !node.roles.contains(&Role::Broker) {
            return Pick::Restart(node);
        }
        let parts = match partitions {
            Some(Ok(parts)) => Ok(parts),
            Some(Err(e)) => Err(e.to_owned()),
            None => Err("its partitions were not read".to_owned()),
        };
        let held = |why| Held {
            pod: node.pod.clone(),
            why,
        };
        if !node.claims_to_replace().is_empty() && !lose_only_copies {
            let only = parts
                .as_ref()
                .map(|p| partitions_only_on(node.id, p))
                .unwrap_or_else(|e| vec![e.clone()]);
            if !only.is_empty() {
                held_back.push(held(HeldWhy::OnlyCopy(only)));
                continue;
            }
        }
        if reported.ready {
            let blocking = parts
                .map(|p| partitions_blocking_restart(node.id, p))
                .unwrap_or_else(|e| vec![e]);
            if !blocking.is_empty() {
                held_back.push(held(HeldWhy::MinIsr(blocking)));
                continue;
            }
        }
        return Pick::Restart(node);
    }
    Pick::HeldBack(held_back)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn node(id: i32, roles: &[Role], revision: Option<&str>, ready: bool) -> NodeView {
        NodeView {
            id,
            alias: "alpha".into(),
            pod: format!("c-p-{id}"),
            roles: roles.iter().copied().collect(),
            desired_revision: "new".into(),
            reported: revision.map(|r| Reported {
                uid: format!("u{id}"),
                ready,
                revision: r.into(),
                manual: false,
                new_disks: false,
                terminating: false,
            }),
            connected: true,
            applied: true,
            claims: vec![format!("data-c-p-{id}")],
        }
    }

    #[test]
    fn a_pod_marked_for_a_manual_roll_rolls_like_an_old_one_and_says_why() {
        let mut marked = node(2, B, Some("new"), true);
        if let Some(r) = marked.reported.as_mut() {
            r.manual = true;
        }
        let nodes = [
            node(0, C, Some("new"), true),
            node(1, B, Some("new"), true),
            marked.clone(),
        ];
        assert_eq!(next(&nodes, false), Step::Restart(vec![2]));
        assert_eq!(
            marked.roll_reason(),
            "strimzi.io/manual-rolling-update asks for it"
        );
        assert_eq!(nodes[1].roll_reason(), "its revision changed");
        // It waits for a pod that is down, as any roll does.
        let nodes = [node(1, B, Some("new"), false), marked];
        assert!(matches!(next(&nodes, false), Step::Wait(w) if w.contains("c-p-1 is not ready")));
    }

    const C: &[Role] = &[Role::Controller];
    const B: &[Role] = &[Role::Broker];
    const CB: &[Role] = &[Role::Controller, Role::Broker];

    #[test]
    fn nothing_to_do_when_every_pod_is_ready_and_current() {
        let nodes = [node(0, C, Some("new"), true), node(1, B, Some("new"), true)];
        assert_eq!(next(&nodes, false), Step::Done);
    }

    #[test]
    fn controllers_roll_first_then_brokers_one_at_a_time() {
        let nodes = [
            node(3, B, Some("old"), true),
            node(0, C, Some("old"), true),
            node(1, C, Some("new"), true),
            node(2, C, Some("new"), true),
        ];
        assert_eq!(next(&nodes, false), Step::Restart(vec![0, 3]));
    }

    #[test]
    fn nothing_rolls_while_a_pod_is_down_or_missing() {
        let nodes = [
            node(0, CB, Some("old"), true),
            node(1, CB, Some("new"), false),
        ];
        assert!(matches!(next(&nodes, false), Step::Wait(w) if w.contains("c-p-1 is not ready")));
        let nodes = [node(0, CB, Some("old"), true), node(1, CB, None, false)];
        assert!(matches!(next(&nodes, false), Step::Wait(w) if w.contains("does not exist")));
    }

    #[test]
    fn a_stale_pod_that_is_down_is_restarted_first() {
        let nodes = [
            node(0, CB, Some("old"), true),
            node(1, CB, Some("old"), false),
        ];
        assert_eq!(next(&nodes, false), Step::Restart(vec![1]));
    }

    #[test]
    fn a_pod_being_deleted_is_waited_for_not_restarted_again() {
        let mut going = node(1, CB, Some("old"), false);
        going.reported.as_mut().unwrap().terminating = true;
        let nodes = [node(0, CB, Some("old"), true), going];
        assert_eq!(
            next(&nodes, false),
            Step::Wait("pod c-p-1 is being replaced".to_owned())
        );
    }

    #[test]
    fn a_controller_is_not_restarted_when_that_loses_the_majority() {
        // Three controllers, all ready: one may restart (two of three remain).
        let nodes = [
            node(0, C, Some("old"), true),
            node(1, C, Some("new"), true),
            node(2, C, Some("new"), true),
            node(3, B, Some("old"), true),
        ];
        assert_eq!(next(&nodes, false), Step::Restart(vec![0, 3]));
        // Controller 2's cluster is unreachable: it is not known to be ready, and restarting
        // controller 0 would leave one of three.
        let mut far = node(2, C, Some("new"), true);
        far.connected = false;
        let nodes = [
            node(0, C, Some("old"), true),
            node(1, C, Some("new"), true),
            far.clone(),
            node(3, B, Some("old"), true),
        ];
        assert_eq!(next(&nodes, false), Step::Restart(vec![3]));
        let only_controllers = [
            node(0, C, Some("old"), true),
            node(1, C, Some("new"), true),
            far,
        ];
        assert!(
            matches!(next(&only_controllers, false), Step::Wait(w) if w.contains("quorum majority"))
        );
        // One or two controllers lose the majority whichever restarts: they roll anyway.
        let two = [node(0, C, Some("old"), true), node(1, C, Some("new"), true)];
        assert_eq!(next(&two, false), Step::Restart(vec![0]));
        assert_eq!(
            next(&[node(0, CB, Some("old"), true)], false),
            Step::Restart(vec![0])
        );
    }

    #[test]
    fn controllers_wait_while_the_dynamic_quorum_changes_and_brokers_do_not() {
        let nodes = [
            node(0, C, Some("old"), true),
            node(1, C, Some("new"), true),
            node(2, C, Some("new"), true),
            node(3, B, Some("old"), true),
        ];
        let busy = true;
        assert_eq!(next(&nodes, busy), Step::Restart(vec![3]));
        let controllers = &nodes[..3];
        assert!(matches!(next(controllers, busy), Step::WaitForQuorum));
        // A stale controller that is down anyway is restarted whatever the quorum does.
        let down = [
            node(0, C, Some("old"), false),
            node(1, C, Some("new"), true),
        ];
        assert_eq!(next(&down, busy), Step::Restart(vec![0]));
    }

    #[test]
    fn nothing_rolls_before_the_cluster_has_the_new_definition() {
        let mut behind = node(1, B, Some("old"), false);
        behind.applied = false;
        let nodes = [node(0, CB, Some("new"), true), behind];
        assert!(matches!(next(&nodes, false), Step::Wait(w) if w.contains("not applied")));
    }

    #[test]
    fn unreachable_clusters_are_neither_checked_nor_rolled() {
        let mut far = node(2, B, Some("old"), false);
        far.connected = false;
        far.alias = "beta".into();
        let nodes = [node(0, CB, Some("new"), true), far.clone()];
        assert!(matches!(next(&nodes, false), Step::Wait(w) if w.contains("beta")));
        let nodes = [node(0, CB, Some("old"), true), far];
        assert_eq!(next(&nodes, false), Step::Restart(vec![0]));
    }

    fn part(name: &str, replicas: &[i32], isr: &[i32], min_isr: usize) -> PartitionIsr {
        PartitionIsr {
            name: name.to_owned(),
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            min_isr,
        }
    }

    #[test]
    fn a_broker_blocks_its_restart_only_where_the_isr_would_drop_below_the_minimum() {
        let partitions = vec![
            part("t-0", &[1, 2, 3], &[1, 2, 3], 2), // 3 in ISR, 2 remain: fine
            part("t-1", &[1, 2, 3], &[1, 3], 2),    // would leave 1 < 2: blocks
            part("u-0", &[1, 3], &[1, 3], 2),       // rf == min.isr: never available anyway
            part("v-0", &[1, 2, 3], &[1, 2], 2),    // 3 not in ISR
        ];
        let blocking = partitions_blocking_restart(3, &partitions);
        assert_eq!(blocking.len(), 1);
        assert!(blocking[0].starts_with("t-1"), "{blocking:?}");
    }

    #[test]
    fn the_first_candidate_that_keeps_every_partition_in_sync_is_restarted() {
        let nodes = [
            node(3, B, Some("old"), true),
            node(4, B, Some("old"), true),
            node(5, B, Some("old"), false),
        ];
        assert!(needs_partitions(&[3, 4], &nodes));
        assert!(!needs_partitions(&[5], &nodes));
        // Broker 3 is the last in-sync replica above min.insync.replicas 2 of orders-0.
        let parts = vec![part("orders-0", &[3, 9, 8], &[3, 9], 2)];
        assert_eq!(
            pick(&[3, 4], &nodes, Some(Ok(&parts)), false),
            Pick::Restart(&nodes[1])
        );
        // A broker that is down is restarted without asking Kafka.
        assert_eq!(pick(&[5], &nodes, None, false), Pick::Restart(&nodes[2]));
    }

    #[test]
    fn candidates_that_would_take_partitions_below_min_isr_are_held_back_naming_them() {
        let nodes = [node(3, B, Some("old"), true), node(4, B, Some("old"), true)];
        let parts = vec![
            part("orders-0", &[3, 4, 8], &[3, 4], 2),
            part("orders-1", &[4, 3, 8], &[4], 2),
        ];
        assert_eq!(
            pick(&[3, 4], &nodes, Some(Ok(&parts)), false),
            Pick::HeldBack(vec![
                held(3, &["orders-0 (ISR [3, 4], min.insync.replicas 2)"]),
                held(
                    4,
                    &[
                        "orders-0 (ISR [3, 4], min.insync.replicas 2)",
                        "orders-1 (ISR [4], min.insync.replicas 2)"
                    ]
                ),
            ])
        );
        // Kafka not answering holds every running broker back.
        assert_eq!(
            pick(
                &[3],
                &nodes,
                Some(Err("cannot reach Kafka: timed out")),
                false
            ),
            Pick::HeldBack(vec![held(3, &["cannot reach Kafka: timed out"])])
        );
        // A candidate not reported yet is skipped, without a word.
        let unreported = [node(6, B, None, false)];
        assert_eq!(pick(&[6], &unreported, None, false), Pick::HeldBack(vec![]));
    }

    fn held(id: i32, parts: &[&str]) -> Held {
        Held {
            pod: format!("c-p-{id}"),
            why: HeldWhy::MinIsr(parts.iter().map(|p| (*p).to_owned()).collect()),
        }
    }

    fn wants_new_disks(mut n: NodeView) -> NodeView {
        if let Some(r) = n.reported.as_mut() {
            r.new_disks = true;
        }
        n
    }

    #[test]
    fn a_pod_asking_for_new_disks_rolls_with_its_claims_and_says_why() {
        let nodes = [
            node(0, CB, Some("new"), true),
            node(1, CB, Some("new"), true),
            wants_new_disks(node(2, CB, Some("new"), true)),
        ];
        assert_eq!(next(&nodes, false), Step::Restart(vec![2]));
        assert_eq!(nodes[2].claims_to_replace(), vec!["data-c-p-2".to_owned()]);
        assert!(
            nodes[2]
                .roll_reason()
                .contains("strimzi.io/delete-pod-and-pvc")
        );
        assert!(
            nodes[1].claims_to_replace().is_empty(),
            "a restart keeps its disks"
        );
        // A controller's new disks wait while the quorum changes, as its restart does.
        assert!(matches!(next(&nodes, true), Step::WaitForQuorum));
    }

    #[test]
    fn new_disks_never_take_the_metadata_log_of_one_of_two_controllers() {
        let two = [
            node(0, CB, Some("new"), true),
            wants_new_disks(node(1, CB, Some("new"), true)),
        ];
        let Step::Wait(why) = next(&two, false) else {
            panic!("waits");
        };
        assert!(
            why.contains("c-p-1 asks for new disks") && why.contains("add controllers"),
            "{why}"
        );
        // A broker of such a cluster gets its new disks.
        let with_broker = [
            node(0, C, Some("new"), true),
            wants_new_disks(node(5, B, Some("new"), true)),
        ];
        assert_eq!(next(&with_broker, false), Step::Restart(vec![5]));
    }

    #[test]
    fn new_disks_wait_while_the_broker_holds_a_partitions_only_in_sync_copy() {
        let nodes = [
            wants_new_disks(node(3, B, Some("new"), true)),
            node(4, B, Some("new"), true),
        ];
        assert!(needs_partitions(&[3], &nodes));
        let only_here = vec![
            part("solo-0", &[3], &[3], 1),
            part("lagging-0", &[3, 4], &[3], 1),
            part("offline-0", &[3, 4], &[], 1),
            part("safe-0", &[3, 4], &[3, 4], 1),
            part("elsewhere-0", &[4], &[4], 1),
        ];
        assert_eq!(
            partitions_only_on(3, &only_here),
            vec![
                "solo-0 (replicas [3], ISR [3])".to_owned(),
                "lagging-0 (replicas [3, 4], ISR [3])".to_owned(),
                "offline-0 (replicas [3, 4], ISR [])".to_owned(),
            ]
        );
        let Pick::HeldBack(held) = pick(&[3], &nodes, Some(Ok(&only_here)), false) else {
            panic!("held back");
        };
        assert!(matches!(&held[..], [Held { why: HeldWhy::OnlyCopy(p), .. }] if p.len() == 3));
        // The Kafka's skip annotation accepts the loss; not a partition below its minimum ISR.
        assert!(matches!(
            pick(&[3], &nodes, Some(Ok(&only_here)), true),
            Pick::HeldBack(h) if matches!(&h[0].why, HeldWhy::MinIsr(p) if p[0].starts_with("lagging-0"))
        ));
        let lost_anyway = [&only_here[..1], &only_here[2..]].concat();
        assert_eq!(
            pick(&[3], &nodes, Some(Ok(&lost_anyway)), true),
            Pick::Restart(&nodes[0])
        );
        // Unknown partitions hold it back, even when its broker is down.
        let mut down = wants_new_disks(node(3, B, Some("new"), false));
        down.reported.as_mut().unwrap().ready = false;
        assert!(needs_partitions(&[3], std::slice::from_ref(&down)));
        assert!(matches!(
            pick(&[3], std::slice::from_ref(&down), None, false),
            Pick::HeldBack(h) if matches!(&h[0].why, HeldWhy::OnlyCopy(_))
        ));
        let safe = vec![part("safe-0", &[3, 4], &[3, 4], 1)];
        assert_eq!(
            pick(&[3], &nodes, Some(Ok(&safe)), false),
            Pick::Restart(&nodes[0])
        );
    }
}
