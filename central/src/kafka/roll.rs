//! Rolling updates: which pod, if any, to restart next so that every pod runs its current
//! revision, one at a time, never while another pod is down, and never taking the controller
//! quorum below a majority. Whether a broker's restart would take a partition below
//! `min.insync.replicas` is asked of Kafka by the caller for the candidate chosen here. Pure.

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
}

impl NodeView {
    fn is_current(&self) -> bool {
        self.reported
            .as_ref()
            .is_some_and(|r| r.revision == self.desired_revision && !r.manual)
    }

    /// Why the pod is restarted, for the agent's log, the pod's deletion and the `Kafka`'s
    /// event.
    pub fn roll_reason(&self) -> &'static str {
        if self.reported.as_ref().is_some_and(|r| r.manual) {
            "strimzi.io/manual-rolling-update asks for it"
        } else {
            "its revision changed"
        }
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
    /// Restart one of these, in order of preference; the caller checks each against Kafka and
    /// restarts the first that is safe.
    Restart(Vec<i32>),
}

/// Decides the next step over every node of one Kafka cluster. `quorum_busy`: why a dynamic
/// controller quorum is not settled, if it is not; controllers that are up then wait, as a
/// restart could take away a voter the change relies on (or, with a new metadata directory,
/// make one more voter to replace).
pub fn next(nodes: &[NodeView], quorum_busy: Option<&str>) -> Step {
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
    let candidates: Vec<i32> = stale
        .iter()
        .filter(|n| {
            // One or two controllers lose the majority whichever restarts: waiting would
            // block the roll forever, so they roll one at a time like the rest.
            !n.roles.contains(&Role::Controller)
                || (quorum_busy.is_none()
                    && (controllers.len() <= 2 || ready_controllers.saturating_sub(1) >= majority))
        })
        .map(|n| n.id)
        .collect();
    if let Some(why) = quorum_busy.filter(|_| candidates.is_empty()) {
        return Step::Wait(format!(
            "controllers restart once the controller quorum is settled: {why}"
        ));
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
pub fn partitions_blocking_restart(
    broker: i32,
    partitions: &[(String, usize, Vec<i32>, usize)],
) -> Vec<String> {
    partitions
        .iter()
        .filter(|(_, replicas, isr, min_isr)| {
            isr.contains(&broker) && isr.len() <= *min_isr && *replicas > *min_isr
        })
        .map(|(name, _, isr, min_isr)| {
            format!("{name} (ISR {isr:?}, min.insync.replicas {min_isr})")
        })
        .collect()
}

/// Which of a restart step's candidates is restarted now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pick<'a> {
    /// The first candidate that is safe to restart.
    Restart(&'a NodeView),
    /// None is: the pods held back, each with the partitions it would take below their
    /// minimum ISR (or why that is unknown); empty when no candidate is reported yet.
    HeldBack(Vec<String>),
}

/// Whether a restart of `candidates` needs Kafka's partitions: a broker that is up is
/// restarted only when no partition drops below its minimum ISR.
pub fn needs_partitions(candidates: &[i32], views: &[NodeView]) -> bool {
    candidates
        .iter()
        .filter_map(|id| views.iter().find(|n| n.id == *id))
        .any(|n| n.roles.contains(&Role::Broker) && n.reported.as_ref().is_some_and(|r| r.ready))
}

/// Picks, in order, the first candidate that is safe to restart (pure). `partitions`: Kafka's
/// partitions with their ISRs, or why they could not be read; asked only when
/// [`needs_partitions`] says so.
pub fn pick<'a>(
    candidates: &[i32],
    views: &'a [NodeView],
    partitions: Option<Result<&[PartitionIsr], &str>>,
) -> Pick<'a> {
    let mut held_back = Vec::new();
    for id in candidates {
        let Some(node) = views.iter().find(|n| n.id == *id) else {
            continue;
        };
        let Some(reported) = &node.reported else {
            continue;
        };
        if reported.ready && node.roles.contains(&Role::Broker) {
            let blocking = match partitions {
                Some(Ok(parts)) => partitions_blocking_restart(node.id, parts),
                Some(Err(e)) => vec![e.to_owned()],
                None => vec!["its partitions were not read".to_owned()],
            };
            if !blocking.is_empty() {
                held_back.push(format!("{} ({})", node.pod, blocking.join(", ")));
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
            }),
            connected: true,
            applied: true,
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
        assert_eq!(next(&nodes, None), Step::Restart(vec![2]));
        assert_eq!(
            marked.roll_reason(),
            "strimzi.io/manual-rolling-update asks for it"
        );
        assert_eq!(nodes[1].roll_reason(), "its revision changed");
        // It waits for a pod that is down, as any roll does.
        let nodes = [node(1, B, Some("new"), false), marked];
        assert!(matches!(next(&nodes, None), Step::Wait(w) if w.contains("c-p-1 is not ready")));
    }

    const C: &[Role] = &[Role::Controller];
    const B: &[Role] = &[Role::Broker];
    const CB: &[Role] = &[Role::Controller, Role::Broker];

    #[test]
    fn nothing_to_do_when_every_pod_is_ready_and_current() {
        let nodes = [node(0, C, Some("new"), true), node(1, B, Some("new"), true)];
        assert_eq!(next(&nodes, None), Step::Done);
    }

    #[test]
    fn controllers_roll_first_then_brokers_one_at_a_time() {
        let nodes = [
            node(3, B, Some("old"), true),
            node(0, C, Some("old"), true),
            node(1, C, Some("new"), true),
            node(2, C, Some("new"), true),
        ];
        assert_eq!(next(&nodes, None), Step::Restart(vec![0, 3]));
    }

    #[test]
    fn nothing_rolls_while_a_pod_is_down_or_missing() {
        let nodes = [
            node(0, CB, Some("old"), true),
            node(1, CB, Some("new"), false),
        ];
        assert!(matches!(next(&nodes, None), Step::Wait(w) if w.contains("c-p-1 is not ready")));
        let nodes = [node(0, CB, Some("old"), true), node(1, CB, None, false)];
        assert!(matches!(next(&nodes, None), Step::Wait(w) if w.contains("does not exist")));
    }

    #[test]
    fn a_stale_pod_that_is_down_is_restarted_first() {
        let nodes = [
            node(0, CB, Some("old"), true),
            node(1, CB, Some("old"), false),
        ];
        assert_eq!(next(&nodes, None), Step::Restart(vec![1]));
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
        assert_eq!(next(&nodes, None), Step::Restart(vec![0, 3]));
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
        assert_eq!(next(&nodes, None), Step::Restart(vec![3]));
        let only_controllers = [
            node(0, C, Some("old"), true),
            node(1, C, Some("new"), true),
            far,
        ];
        assert!(
            matches!(next(&only_controllers, None), Step::Wait(w) if w.contains("quorum majority"))
        );
        // One or two controllers lose the majority whichever restarts: they roll anyway.
        let two = [node(0, C, Some("old"), true), node(1, C, Some("new"), true)];
        assert_eq!(next(&two, None), Step::Restart(vec![0]));
        assert_eq!(
            next(&[node(0, CB, Some("old"), true)], None),
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
        let busy = Some("voter 0 waits to be replaced");
        assert_eq!(next(&nodes, busy), Step::Restart(vec![3]));
        let controllers = &nodes[..3];
        assert!(
            matches!(next(controllers, busy), Step::Wait(w) if w.contains("quorum is settled: voter 0"))
        );
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
        assert!(matches!(next(&nodes, None), Step::Wait(w) if w.contains("not applied")));
    }

    #[test]
    fn unreachable_clusters_are_neither_checked_nor_rolled() {
        let mut far = node(2, B, Some("old"), false);
        far.connected = false;
        far.alias = "beta".into();
        let nodes = [node(0, CB, Some("new"), true), far.clone()];
        assert!(matches!(next(&nodes, None), Step::Wait(w) if w.contains("beta")));
        let nodes = [node(0, CB, Some("old"), true), far];
        assert_eq!(next(&nodes, None), Step::Restart(vec![0]));
    }

    #[test]
    fn a_broker_blocks_its_restart_only_where_the_isr_would_drop_below_the_minimum() {
        let partitions = vec![
            ("t-0".to_string(), 3, vec![1, 2, 3], 2), // 3 in ISR, 2 remain: fine
            ("t-1".to_string(), 3, vec![1, 3], 2),    // would leave 1 < 2: blocks
            ("u-0".to_string(), 2, vec![1, 3], 2),    // rf == min.isr: never available anyway
            ("v-0".to_string(), 3, vec![1, 2], 2),    // 3 not in ISR
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
        let parts = vec![("orders-0".to_owned(), 3, vec![3, 9], 2)];
        assert_eq!(
            pick(&[3, 4], &nodes, Some(Ok(&parts))),
            Pick::Restart(&nodes[1])
        );
        // A broker that is down is restarted without asking Kafka.
        assert_eq!(pick(&[5], &nodes, None), Pick::Restart(&nodes[2]));
    }

    #[test]
    fn candidates_that_would_take_partitions_below_min_isr_are_held_back_naming_them() {
        let nodes = [node(3, B, Some("old"), true), node(4, B, Some("old"), true)];
        let parts = vec![
            ("orders-0".to_owned(), 3, vec![3, 4], 2),
            ("orders-1".to_owned(), 3, vec![4], 2),
        ];
        assert_eq!(
            pick(&[3, 4], &nodes, Some(Ok(&parts))),
            Pick::HeldBack(vec![
                "c-p-3 (orders-0 (ISR [3, 4], min.insync.replicas 2))".to_owned(),
                "c-p-4 (orders-0 (ISR [3, 4], min.insync.replicas 2), orders-1 (ISR [4], min.insync.replicas 2))".to_owned(),
            ])
        );
        // Kafka not answering holds every running broker back.
        assert_eq!(
            pick(&[3], &nodes, Some(Err("cannot reach Kafka: timed out"))),
            Pick::HeldBack(vec!["c-p-3 (cannot reach Kafka: timed out)".to_owned()])
        );
        // A candidate not reported yet is skipped, without a word.
        let unreported = [node(6, B, None, false)];
        assert_eq!(pick(&[6], &unreported, None), Pick::HeldBack(vec![]));
    }
}
