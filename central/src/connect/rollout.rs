//! Where the workers of one Kafka Connect cluster stand, from what the member cluster's agent
//! reports: done, waiting (with why), or one stale worker to restart. Pure. Workers are rolled
//! one at a time and only while every other worker is ready, so the group keeps serving.

use std::collections::BTreeMap;

use kstretch_proto::agent::v1::PodSetStatus;

/// The next step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Every worker exists, is ready and runs the desired revision.
    Done,
    /// Why not yet (pods starting, agent not connected, snapshot not applied yet).
    Wait(String),
    /// Restart this pod (`name`, `uid`): it runs an outdated definition or configuration, or
    /// carries `strimzi.io/manual-rolling-update` (`why` says which).
    Restart {
        pod: String,
        uid: String,
        why: &'static str,
    },
}

/// What the agent of the workers' cluster said.
#[derive(Debug, Clone, Copy)]
pub struct Seen<'a> {
    /// Whether the agent is connected.
    pub connected: bool,
    /// Whether the agent applied the snapshot currently published for its cluster.
    pub applied: bool,
    /// The pod set's report, if any.
    pub pod_set: Option<&'a PodSetStatus>,
}

/// The next step for workers whose desired revisions are `desired` (pod name -> revision).
pub fn next(alias: &str, desired: &BTreeMap<String, String>, seen: Seen<'_>) -> Step {
    if !seen.connected {
        return Step::Wait(format!(
            "the agent of Kubernetes cluster {alias} is not connected; the workers are not checked until it is back"
        ));
    }
    if !seen.applied {
        return Step::Wait(format!(
            "waiting for the agent of cluster {alias} to apply the latest desired state"
        ));
    }
    let reported = seen
        .pod_set
        .map(|s| s.pods_status.as_slice())
        .unwrap_or_default();
    let mut not_ready = Vec::new();
    let mut stale = Vec::new();
    for (pod, revision) in desired {
        match reported
            .iter()
            .find(|p| &p.name == pod && !p.uid.is_empty())
        {
            None => not_ready.push(format!("{pod} does not exist yet")),
            Some(p) if p.terminating => not_ready.push(format!("{pod} is being replaced")),
            Some(p) if p.revision != *revision || p.manual_rolling_update => stale.push(p),
            Some(p) if !p.ready => not_ready.push(format!("{pod} is not ready")),
            Some(_) => {}
        }
    }
    if !not_ready.is_empty() {
        return Step::Wait(format!("workers starting: {}", not_ready.join(", ")));
    }
    match stale.first() {
        Some(p) => Step::Restart {
            pod: p.name.clone(),
            uid: p.uid.clone(),
            why: if p.manual_rolling_update {
                "strimzi.io/manual-rolling-update asks for it"
            } else {
                "KafkaConnect configuration or pod definition changed"
            },
        },
        None => Step::Done,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kstretch_proto::agent::v1::PodStatus;

    fn desired() -> BTreeMap<String, String> {
        [
            ("c-0".to_owned(), "r1".to_owned()),
            ("c-1".to_owned(), "r1".to_owned()),
        ]
        .into()
    }

    fn pod(name: &str, ready: bool, revision: &str) -> PodStatus {
        PodStatus {
            name: name.into(),
            uid: format!("uid-{name}"),
            ready,
            phase: "Running".into(),
            revision: revision.into(),
            ..Default::default()
        }
    }

    fn set(pods: Vec<PodStatus>) -> PodSetStatus {
        PodSetStatus {
            namespace: "ns".into(),
            name: "c".into(),
            pods_status: pods,
            ..Default::default()
        }
    }

    fn seen(s: &PodSetStatus) -> Seen<'_> {
        Seen {
            connected: true,
            applied: true,
            pod_set: Some(s),
        }
    }

    #[test]
    fn waits_for_the_agent_and_the_snapshot() {
        let s = set(vec![]);
        let off = Seen {
            connected: false,
            ..seen(&s)
        };
        assert!(
            matches!(next("beta", &desired(), off), Step::Wait(m) if m.contains("not connected"))
        );
        let stale = Seen {
            applied: false,
            ..seen(&s)
        };
        assert!(matches!(next("beta", &desired(), stale), Step::Wait(m) if m.contains("apply")));
    }

    #[test]
    fn waits_for_missing_or_unready_workers_then_is_done() {
        let s = set(vec![pod("c-0", true, "r1")]);
        assert!(
            matches!(next("a", &desired(), seen(&s)), Step::Wait(m) if m.contains("c-1 does not exist"))
        );
        let s = set(vec![pod("c-0", true, "r1"), pod("c-1", false, "r1")]);
        assert!(
            matches!(next("a", &desired(), seen(&s)), Step::Wait(m) if m.contains("c-1 is not ready"))
        );
        let s = set(vec![pod("c-0", true, "r1"), pod("c-1", true, "r1")]);
        assert_eq!(next("a", &desired(), seen(&s)), Step::Done);
        assert_eq!(
            next(
                "a",
                &BTreeMap::new(),
                Seen {
                    pod_set: None,
                    ..seen(&s)
                }
            ),
            Step::Done,
            "zero workers"
        );
    }

    #[test]
    fn restarts_one_stale_worker_only_when_the_others_are_ready() {
        let s = set(vec![pod("c-0", true, "old"), pod("c-1", true, "old")]);
        assert_eq!(
            next("a", &desired(), seen(&s)),
            Step::Restart {
                pod: "c-0".into(),
                uid: "uid-c-0".into(),
                why: "KafkaConnect configuration or pod definition changed",
            }
        );
        let s = set(vec![pod("c-0", false, "r1"), pod("c-1", true, "old")]);
        assert!(matches!(next("a", &desired(), seen(&s)), Step::Wait(_)));
    }

    #[test]
    fn a_worker_marked_for_a_manual_roll_is_restarted_and_says_why() {
        let marked = PodStatus {
            manual_rolling_update: true,
            ..pod("c-1", true, "r1")
        };
        let s = set(vec![pod("c-0", true, "r1"), marked]);
        assert_eq!(
            next("a", &desired(), seen(&s)),
            Step::Restart {
                pod: "c-1".into(),
                uid: "uid-c-1".into(),
                why: "strimzi.io/manual-rolling-update asks for it",
            }
        );
    }

    #[test]
    fn a_worker_being_deleted_is_waited_for_not_restarted_again() {
        let going = PodStatus {
            terminating: true,
            ..pod("c-1", false, "old")
        };
        let s = set(vec![pod("c-0", true, "old"), going]);
        assert_eq!(
            next("a", &desired(), seen(&s)),
            Step::Wait("workers starting: c-1 is being replaced".into())
        );
    }
}
