//! Replication-factor changes through partition reassignments, for one cluster's share of a
//! batch: which topics need Kafka's reassignments listed, the target replicas, their submission
//! and the `status.replicasChange` that reports them. Everything is derived again from what
//! Kafka reports on each pass (targets from the current replicas, progress from the
//! reassignments in flight), so a restart of central loses nothing.

use std::collections::{BTreeMap, HashMap};

use kstretch_api::topic::{ReplicasChangeState as StatusState, ReplicasChangeStatus};
use kstretch_core::topics::{self, Broker, PartitionState, Reassignment, ReplicasChangeState};
use kstretch_kadmin::{AdminClient, ClusterDescription, Error, TopicDescription};

use super::metrics::TopicMetrics;
use super::work::{Acc, Next, Work, timed};

/// Reassignments in flight, by topic and partition.
pub type Ongoing = HashMap<(String, i32), Reassignment>;

/// One topic whose replication factor is to change: its index in the batch, the target and its
/// partitions as Kafka describes them.
pub type RfWork = (usize, i16, Vec<PartitionState>);

/// The topics whose reassignments are worth asking for, with their partitions: those whose
/// replication factor is, or was (`status.replicasChange`), changing.
pub fn candidates(
    work: &[Work],
    described: &HashMap<String, TopicDescription>,
) -> Vec<(String, Vec<i32>)> {
    work.iter()
        .filter_map(|w| {
            let t = described.get(&w.desired.name)?;
            let target = usize::try_from(w.desired.replicas?).ok()?;
            let differs = t.partitions.iter().any(|p| p.replicas.len() != target);
            (differs || w.replicas_change.is_some()).then(|| {
                (
                    t.name.clone(),
                    t.partitions.iter().map(|p| p.index).collect(),
                )
            })
        })
        .collect()
}

/// The reassignments in flight for the candidates' partitions (one request, none without
/// candidates).
pub async fn ongoing(
    admin: &AdminClient,
    candidates: &[(String, Vec<i32>)],
    metrics: &TopicMetrics,
) -> Result<Ongoing, Error> {
    let mut ongoing = Ongoing::new();
    if candidates.is_empty() {
        return Ok(ongoing);
    }
    let list = timed(
        metrics,
        "list_reassignments",
        admin.list_partition_reassignments(Some(candidates)),
    )
    .await?;
    for r in list {
        ongoing.insert(
            (r.topic, r.partition),
            Reassignment {
                adding: r.adding,
                removing: r.removing,
            },
        );
    }
    Ok(ongoing)
}

/// Submits what each topic of `rf_work` still needs moved, and reports where each change
/// stands in its account.
pub async fn change(
    admin: &AdminClient,
    work: &[Work],
    accs: &mut [Acc],
    rf_work: Vec<RfWork>,
    metrics: &TopicMetrics,
) {
    let brokers = match timed(metrics, "describe_cluster", admin.describe_cluster(false)).await {
        Ok(cluster) => live_brokers(cluster),
        Err(e) => {
            rf_work.iter().for_each(|(i, _, _)| accs[*i].fail_with(&e));
            return;
        }
    };
    let (submit, mut states) = targets(work, accs, rf_work, &brokers);
    if !submit.is_empty() {
        submit_reassignments(admin, &submit, accs, &mut states, metrics).await;
    }
    report(accs, states);
}

/// A reassignment to submit, with the index of its topic in the batch.
type Submit = (usize, kstretch_kadmin::Reassignment);
/// Per topic index, the target replication factor and where its change stands.
type States = BTreeMap<usize, (i16, ReplicasChangeState)>;

fn live_brokers(cluster: ClusterDescription) -> Vec<Broker> {
    cluster
        .brokers
        .into_iter()
        .filter(|b| !b.fenced)
        .map(|b| Broker {
            id: b.id,
            rack: b.rack,
        })
        .collect()
}

/// Per topic, the target replicas and what of them is still to submit; a topic no assignment
/// can be made for is reported pending with the reason, and waits for a change of its
/// resource.
fn targets(
    work: &[Work],
    accs: &mut [Acc],
    rf_work: Vec<RfWork>,
    brokers: &[Broker],
) -> (Vec<Submit>, States) {
    let mut submit: Vec<Submit> = Vec::new();
    let mut states = States::new();
    for (i, target, partitions) in rf_work {
        let acc = &mut accs[i];
        let targets = match topics::target_assignments(&partitions, target, brokers) {
            Ok(t) => t,
            Err(e) => {
                acc.replicas_change = Some(Some(ReplicasChangeStatus {
                    target_replicas: Some(i32::from(target)),
                    state: Some(StatusState::Pending),
                    message: Some(e.to_string()),
                    session_id: None,
                }));
                acc.fail(e.reason(), e.to_string(), Next::Done);
                continue;
            }
        };
        let to_submit = topics::to_submit(&partitions, &targets);
        let state = if to_submit.is_empty() {
            topics::progress(&targets, &partitions)
        } else {
            ReplicasChangeState::Ongoing
        };
        for (partition, replicas) in to_submit {
            submit.push((
                i,
                kstretch_kadmin::Reassignment {
                    topic: work[i].desired.name.clone(),
                    partition,
                    target: Some(replicas),
                },
            ));
        }
        states.insert(i, (target, state));
    }
    (submit, states)
}

/// AlterPartitionReassignments for every topic at once; a topic Kafka refuses stays pending.
async fn submit_reassignments(
    admin: &AdminClient,
    submit: &[Submit],
    accs: &mut [Acc],
    states: &mut States,
    metrics: &TopicMetrics,
) {
    let list: Vec<kstretch_kadmin::Reassignment> = submit.iter().map(|(_, r)| r.clone()).collect();
    match timed(
        metrics,
        "alter_reassignments",
        admin.alter_partition_reassignments(&list),
    )
    .await
    {
        Ok(results) => {
            for ((i, _), r) in submit.iter().zip(results) {
                if let Err(e) = r.result {
                    accs[*i].fail_with(&e);
                    states.insert(
                        *i,
                        (
                            states.get(i).map_or(0, |s| s.0),
                            ReplicasChangeState::Pending,
                        ),
                    );
                }
            }
        }
        Err(e) => submit.iter().for_each(|(i, _)| {
            accs[*i].fail_with(&e);
            if let Some(s) = states.get_mut(i) {
                s.1 = ReplicasChangeState::Pending;
            }
        }),
    }
}

/// `status.replicasChange` of each topic: gone once done; otherwise pending or ongoing, with the
/// topic's problem as the message, and looked at again soon.
fn report(accs: &mut [Acc], states: States) {
    for (i, (target, state)) in states {
        let acc = &mut accs[i];
        acc.replicas_change = Some(match state {
            ReplicasChangeState::Done => None,
            ReplicasChangeState::Pending | ReplicasChangeState::Ongoing => {
                if acc.next == Next::Done {
                    acc.next = Next::Soon;
                }
                Some(ReplicasChangeStatus {
                    target_replicas: Some(i32::from(target)),
                    state: Some(if state == ReplicasChangeState::Ongoing {
                        StatusState::Ongoing
                    } else {
                        StatusState::Pending
                    }),
                    message: acc.problem.as_ref().map(|p| p.message.clone()),
                    session_id: None,
                })
            }
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use kstretch_core::topics::{DesiredTopic, ResourceRef};
    use kstretch_kadmin::{PartitionDescription, Uuid};

    use super::*;

    fn work(name: &str, replicas: Option<i16>) -> Work {
        Work {
            key: ResourceRef {
                namespace: "ns".into(),
                name: name.into(),
            },
            desired: DesiredTopic {
                name: name.into(),
                replicas,
                ..Default::default()
            },
            replicas_change: None,
        }
    }

    /// Topic `name` in Kafka: two partitions on broker 1.
    fn described(name: &str) -> (String, TopicDescription) {
        let partition = |index| PartitionDescription {
            index,
            leader: 1,
            replicas: vec![1],
            isr: vec![1],
            offline: vec![],
        };
        let topic = TopicDescription {
            name: name.into(),
            id: Uuid::nil(),
            internal: false,
            partitions: vec![partition(0), partition(1)],
        };
        (name.to_owned(), topic)
    }

    fn partitions() -> Vec<PartitionState> {
        (0..2)
            .map(|id| PartitionState {
                id,
                replicas: vec![1],
                leader: Some(1),
                reassignment: None,
            })
            .collect()
    }

    fn brokers(ids: &[i32]) -> Vec<Broker> {
        ids.iter().map(|&id| Broker { id, rack: None }).collect()
    }

    fn change(target: i32) -> ReplicasChangeStatus {
        ReplicasChangeStatus {
            target_replicas: Some(target),
            state: Some(StatusState::Ongoing),
            message: None,
            session_id: None,
        }
    }

    #[test]
    fn reassignments_are_listed_only_for_topics_whose_replication_factor_is_or_was_changing() {
        let kafka = HashMap::from([described("grow"), described("same"), described("was")]);
        let mut was = work("was", Some(1));
        was.replicas_change = Some(change(2));
        let work = [
            work("grow", Some(2)),
            work("same", Some(1)),
            was,
            work("unset", None),
            work("absent", Some(3)),
        ];
        assert_eq!(
            candidates(&work, &kafka),
            vec![
                ("grow".to_owned(), vec![0, 1]),
                ("was".to_owned(), vec![0, 1])
            ]
        );
    }

    #[test]
    fn a_change_without_enough_brokers_is_reported_pending_and_submits_nothing() {
        let work = [work("a", Some(2))];
        let mut accs = vec![Acc::new(work[0].key.clone())];
        let (submit, states) =
            targets(&work, &mut accs, vec![(0, 2, partitions())], &brokers(&[1]));
        assert!(submit.is_empty() && states.is_empty());
        assert_eq!(
            accs[0].problem.as_ref().map(|p| p.reason),
            Some("NotEnoughBrokers")
        );
        assert_eq!(
            accs[0].next,
            Next::Done,
            "waits for a change of the resource"
        );
        let status = accs[0].replicas_change.clone().flatten().unwrap();
        assert_eq!(status.state, Some(StatusState::Pending));
        assert_eq!(status.target_replicas, Some(2));
        assert!(status.message.is_some());
    }

    #[test]
    fn a_change_submits_every_partition_not_yet_moving() {
        let work = [work("a", Some(2))];
        let mut accs = vec![Acc::new(work[0].key.clone())];
        let mut moving = partitions();
        moving[1].reassignment = Some(Reassignment {
            adding: vec![2],
            removing: vec![],
        });
        let (submit, states) = targets(&work, &mut accs, vec![(0, 2, moving)], &brokers(&[1, 2]));
        let [(0, r)] = submit.as_slice() else {
            panic!("{submit:?}")
        };
        assert_eq!((r.topic.as_str(), r.partition), ("a", 0));
        assert_eq!(r.target.as_ref().map(Vec::len), Some(2));
        assert_eq!(states.get(&0), Some(&(2, ReplicasChangeState::Ongoing)));
        assert_eq!(accs[0].problem, None);
    }

    #[test]
    fn the_status_shows_a_running_change_and_drops_a_finished_one() {
        let key = |name: &str| ResourceRef {
            namespace: "ns".into(),
            name: name.into(),
        };
        let mut accs = vec![
            Acc::new(key("done")),
            Acc::new(key("on")),
            Acc::new(key("refused")),
        ];
        accs[2].fail("KafkaError", "no", Next::Retry);
        let states = States::from([
            (0, (2, ReplicasChangeState::Done)),
            (1, (2, ReplicasChangeState::Ongoing)),
            (2, (3, ReplicasChangeState::Pending)),
        ]);
        report(&mut accs, states);
        assert_eq!(accs[0].replicas_change, Some(None));
        assert_eq!(accs[0].next, Next::Done);
        assert_eq!(accs[1].replicas_change, Some(Some(change(2))));
        assert_eq!(
            accs[1].next,
            Next::Soon,
            "looked at again to report the end"
        );
        let pending = accs[2].replicas_change.clone().flatten().unwrap();
        assert_eq!(pending.state, Some(StatusState::Pending));
        assert_eq!(pending.message.as_deref(), Some("no"));
        assert_eq!(accs[2].next, Next::Retry, "a retry is sooner than soon");
    }
}
