//! The Kafka side of a batch, for one cluster: describe the batch's topics and their configs
//! (one request each), plan every topic, then create topics, alter configs, add partitions and
//! start replication-factor reassignments with one request per kind; and deletions by topic ID.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::time::Instant;

use kstretch_api::topic::{ReplicasChangeState as StatusState, ReplicasChangeStatus};
use kstretch_core::topics::{
    self, AlterableConfigs, Broker, ConfigSource, ConfigValue, CurrentTopic, DesiredTopic,
    PartitionState, Reassignment, ReplicasChangeState, ResourceRef,
};
use kstretch_kadmin::{
    AdminClient, ConfigChange, ConfigOp, ConfigResource, Error, NewPartitions, NewTopic,
    TopicDescription, Uuid,
};

use super::decide::{Main, Outcome};
use super::metrics::TopicMetrics;

/// One topic to make match its `KafkaTopic`.
#[derive(Debug, Clone)]
pub struct Work {
    pub key: ResourceRef,
    pub desired: DesiredTopic,
    /// `status.replicasChange`: a change central started, possibly before a restart.
    pub replicas_change: Option<ReplicasChangeStatus>,
}

/// When the topic needs another look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Nothing until the resource changes or the timed pass comes.
    Done,
    /// A reassignment is running: look again shortly to report its end.
    Soon,
    /// Failed transiently: retry with backoff.
    Retry,
    /// The world moved under the batch (the topic appeared meanwhile): run it again now.
    Again,
}

/// The result for one topic. `outcome` is `None` when the status must not be written.
#[derive(Debug, Clone)]
pub struct Reconciled {
    pub key: ResourceRef,
    pub outcome: Option<Outcome>,
    pub next: Next,
}

/// Times one Admin call into the per-call duration metric.
async fn timed<T>(
    metrics: &TopicMetrics,
    call: &'static str,
    f: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    let start = Instant::now();
    let result = f.await;
    metrics.admin_call(call, start.elapsed(), result.is_ok());
    result
}

/// Transient errors are retried with backoff; Kafka refusing the request (invalid config,
/// policy, replication factor) waits for a change of the resource, or the timed pass.
fn next_after(error: &Error) -> Next {
    match error.kafka() {
        Some(kafka) if !kafka.is_retriable() => Next::Done,
        _ => Next::Retry,
    }
}

fn failed(error: &Error) -> Outcome {
    Outcome::not_ready(error.reason(), error.to_string())
}

/// Everything learnt and decided for one topic while the batch runs.
struct Acc {
    key: ResourceRef,
    problem: Option<(String, String)>,
    warnings: Vec<(String, String)>,
    topic_id: Option<String>,
    replicas_change: Option<Option<ReplicasChangeStatus>>,
    next: Next,
    write_status: bool,
}

impl Acc {
    fn new(key: ResourceRef) -> Self {
        Self {
            key,
            problem: None,
            warnings: Vec::new(),
            topic_id: None,
            replicas_change: None,
            next: Next::Done,
            write_status: true,
        }
    }

    /// Records a failure; the first one is what the status shows.
    fn fail(&mut self, reason: impl Into<String>, message: impl Into<String>, next: Next) {
        if self.problem.is_none() {
            self.problem = Some((reason.into(), message.into()));
        }
        if next == Next::Retry || self.next == Next::Done {
            self.next = next;
        }
    }

    fn fail_with(&mut self, error: &Error) {
        self.fail(error.reason(), error.to_string(), next_after(error));
    }

    fn finish(self) -> Reconciled {
        let main = match self.problem {
            Some((reason, message)) => Main::NotReady { reason, message },
            None => Main::Ready,
        };
        Reconciled {
            key: self.key,
            outcome: self.write_status.then_some(Outcome {
                main,
                warnings: self.warnings,
                topic_id: self.topic_id,
                replicas_change: self.replicas_change,
            }),
            next: self.next,
        }
    }
}

/// Makes Kafka match every `work` item, with one request per kind for the whole batch.
pub async fn reconcile(
    admin: &AdminClient,
    alterable: &AlterableConfigs,
    work: Vec<Work>,
    metrics: &TopicMetrics,
) -> Vec<Reconciled> {
    if work.is_empty() {
        return Vec::new();
    }
    let names: Vec<String> = work.iter().map(|w| w.desired.name.clone()).collect();
    let described = match timed(
        metrics,
        "describe_topics",
        admin.describe_topics(Some(&names)),
    )
    .await
    {
        Ok(topics) => topics,
        Err(e) => return all_failed(work, &e),
    };
    let described: HashMap<String, TopicDescription> =
        described.into_iter().map(|t| (t.name.clone(), t)).collect();
    let existing: Vec<&TopicDescription> = names.iter().filter_map(|n| described.get(n)).collect();

    let mut configs: HashMap<String, Result<BTreeMap<String, ConfigValue>, Error>> = HashMap::new();
    if !existing.is_empty() {
        let resources: Vec<ConfigResource> = existing
            .iter()
            .map(|t| ConfigResource::Topic(t.name.clone()))
            .collect();
        match timed(
            metrics,
            "describe_configs",
            admin.describe_configs(&resources),
        )
        .await
        {
            Ok(results) => {
                for r in results {
                    if let ConfigResource::Topic(name) = r.resource {
                        configs.insert(name, r.result.map(config_values));
                    }
                }
            }
            Err(e) => return all_failed(work, &e),
        }
    }

    // Reassignments are asked only for topics whose replication factor is, or was, changing.
    let rf_candidates: Vec<(String, Vec<i32>)> = work
        .iter()
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
        .collect();
    let mut ongoing: HashMap<(String, i32), Reassignment> = HashMap::new();
    let mut reassignments_error = None;
    if !rf_candidates.is_empty() {
        match timed(
            metrics,
            "list_reassignments",
            admin.list_partition_reassignments(Some(&rf_candidates)),
        )
        .await
        {
            Ok(list) => {
                for r in list {
                    ongoing.insert(
                        (r.topic, r.partition),
                        Reassignment {
                            adding: r.adding,
                            removing: r.removing,
                        },
                    );
                }
            }
            Err(e) => reassignments_error = Some(e),
        }
    }

    let mut accs: Vec<Acc> = Vec::with_capacity(work.len());
    let mut creates: Vec<(usize, NewTopic)> = Vec::new();
    let mut changes: Vec<(usize, ConfigChange)> = Vec::new();
    let mut increases: Vec<(usize, NewPartitions)> = Vec::new();
    let mut rf_work: Vec<(usize, i16, Vec<PartitionState>)> = Vec::new();
    for (i, w) in work.iter().enumerate() {
        let mut acc = Acc::new(w.key.clone());
        let current = match described.get(&w.desired.name) {
            None => None,
            Some(t) => {
                acc.topic_id = Some(t.id.to_string());
                match configs.remove(&t.name) {
                    Some(Ok(values)) => Some(current_topic(t, values, &ongoing)),
                    Some(Err(e)) => {
                        acc.fail_with(&e);
                        accs.push(acc);
                        continue;
                    }
                    None => Some(current_topic(t, BTreeMap::new(), &ongoing)),
                }
            }
        };
        let plan = topics::plan(&w.desired, current.as_ref());
        for problem in &plan.problems {
            acc.fail(problem.reason(), problem.to_string(), Next::Done);
        }
        acc.warnings.extend(
            plan.warnings
                .iter()
                .map(|w| (w.reason().to_owned(), w.message())),
        );
        if let Some(create) = plan.create {
            creates.push((
                i,
                NewTopic {
                    name: create.name,
                    partitions: create.partitions.unwrap_or(-1),
                    replication_factor: create.replicas.unwrap_or(-1),
                    assignment: None,
                    configs: create.configs,
                },
            ));
            accs.push(acc);
            continue;
        }
        let filtered = alterable.filter(plan.config_ops, w.desired.config.keys());
        if !filtered.ignored_keys.is_empty() {
            let message = filtered
                .ignored_keys
                .iter()
                .map(|k| AlterableConfigs::warning_message(k))
                .collect::<Vec<_>>()
                .join("; ");
            acc.warnings
                .push((AlterableConfigs::warning_reason().to_owned(), message));
        }
        if !filtered.ops.is_empty() {
            changes.push((
                i,
                ConfigChange {
                    resource: ConfigResource::Topic(w.desired.name.clone()),
                    ops: filtered
                        .ops
                        .iter()
                        .map(|op| match op {
                            topics::ConfigOp::Set { name, value } => {
                                ConfigOp::set(name.clone(), value.clone())
                            }
                            topics::ConfigOp::Delete { name } => ConfigOp::delete(name.clone()),
                        })
                        .collect(),
                },
            ));
        }
        if let Some(total) = plan.increase_partitions_to {
            increases.push((
                i,
                NewPartitions {
                    topic: w.desired.name.clone(),
                    total_count: total,
                    assignments: None,
                },
            ));
        }
        if let (Some(target), Some(current)) = (w.desired.replicas, current)
            && (plan.rf_change.is_some() || w.replicas_change.is_some())
        {
            match &reassignments_error {
                Some(e) => acc.fail_with(e),
                None => rf_work.push((i, target, current.partitions)),
            }
        }
        accs.push(acc);
    }

    if !creates.is_empty() {
        let topics: Vec<NewTopic> = creates.iter().map(|(_, t)| t.clone()).collect();
        match timed(
            metrics,
            "create_topics",
            admin.create_topics(&topics, false),
        )
        .await
        {
            Ok(results) => {
                for ((i, _), r) in creates.iter().zip(results) {
                    let acc = &mut accs[*i];
                    match r.result {
                        Ok(created) => acc.topic_id = Some(created.id.to_string()),
                        // Created by someone else since the describe: adopt it on a rerun.
                        Err(Error::TopicAlreadyExists { .. }) => {
                            acc.write_status = false;
                            acc.next = Next::Again;
                        }
                        Err(e) => acc.fail_with(&e),
                    }
                }
            }
            Err(e) => creates.iter().for_each(|(i, _)| accs[*i].fail_with(&e)),
        }
    }
    if !changes.is_empty() {
        let list: Vec<ConfigChange> = changes.iter().map(|(_, c)| c.clone()).collect();
        match timed(
            metrics,
            "alter_configs",
            admin.incremental_alter_configs(&list, false),
        )
        .await
        {
            Ok(results) => {
                for ((i, _), r) in changes.iter().zip(results) {
                    if let Err(e) = r.result {
                        accs[*i].fail_with(&e);
                    }
                }
            }
            Err(e) => changes.iter().for_each(|(i, _)| accs[*i].fail_with(&e)),
        }
    }
    if !increases.is_empty() {
        let list: Vec<NewPartitions> = increases.iter().map(|(_, p)| p.clone()).collect();
        match timed(
            metrics,
            "create_partitions",
            admin.create_partitions(&list, false),
        )
        .await
        {
            Ok(results) => {
                for ((i, _), r) in increases.iter().zip(results) {
                    if let Err(e) = r.result {
                        accs[*i].fail_with(&e);
                    }
                }
            }
            Err(e) => increases.iter().for_each(|(i, _)| accs[*i].fail_with(&e)),
        }
    }
    if !rf_work.is_empty() {
        change_replication_factors(admin, &work, &mut accs, rf_work, metrics).await;
    }
    accs.into_iter().map(Acc::finish).collect()
}

/// Replication-factor changes through partition reassignments. Everything is derived again from
/// what Kafka reports on each pass (targets from the current replicas, progress from the
/// reassignments in flight), so a restart of central loses nothing.
async fn change_replication_factors(
    admin: &AdminClient,
    work: &[Work],
    accs: &mut [Acc],
    rf_work: Vec<(usize, i16, Vec<PartitionState>)>,
    metrics: &TopicMetrics,
) {
    let brokers = match timed(metrics, "describe_cluster", admin.describe_cluster(false)).await {
        Ok(cluster) => cluster
            .brokers
            .into_iter()
            .filter(|b| !b.fenced)
            .map(|b| Broker {
                id: b.id,
                rack: b.rack,
            })
            .collect::<Vec<_>>(),
        Err(e) => {
            rf_work.iter().for_each(|(i, _, _)| accs[*i].fail_with(&e));
            return;
        }
    };
    let mut submit: Vec<(usize, kstretch_kadmin::Reassignment)> = Vec::new();
    let mut states: BTreeMap<usize, (i16, ReplicasChangeState)> = BTreeMap::new();
    for (i, target, partitions) in rf_work {
        let acc = &mut accs[i];
        let targets = match topics::target_assignments(&partitions, target, &brokers) {
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
    if !submit.is_empty() {
        let list: Vec<kstretch_kadmin::Reassignment> =
            submit.iter().map(|(_, r)| r.clone()).collect();
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
                    message: acc.problem.as_ref().map(|(_, m)| m.clone()),
                    session_id: None,
                })
            }
        });
    }
}

fn all_failed(work: Vec<Work>, error: &Error) -> Vec<Reconciled> {
    work.into_iter()
        .map(|w| Reconciled {
            key: w.key,
            outcome: Some(failed(error)),
            next: next_after(error),
        })
        .collect()
}

fn config_values(entries: Vec<kstretch_kadmin::ConfigEntry>) -> BTreeMap<String, ConfigValue> {
    use kstretch_kadmin::ConfigSource as K;
    entries
        .into_iter()
        .map(|e| {
            let source = match e.source {
                K::DynamicTopic => ConfigSource::DynamicTopic,
                K::DynamicBroker => ConfigSource::DynamicBroker,
                K::DynamicDefaultBroker => ConfigSource::DynamicDefaultBroker,
                K::StaticBroker => ConfigSource::StaticBroker,
                K::Default => ConfigSource::Default,
                _ => ConfigSource::Other,
            };
            (
                e.name,
                ConfigValue {
                    value: e.value,
                    source,
                },
            )
        })
        .collect()
}

fn current_topic(
    t: &TopicDescription,
    configs: BTreeMap<String, ConfigValue>,
    ongoing: &HashMap<(String, i32), Reassignment>,
) -> CurrentTopic {
    CurrentTopic {
        topic_id: t.id.to_string(),
        partitions: t
            .partitions
            .iter()
            .map(|p| PartitionState {
                id: p.index,
                replicas: p.replicas.clone(),
                leader: (p.leader >= 0).then_some(p.leader),
                reassignment: ongoing.get(&(t.name.clone(), p.index)).cloned(),
            })
            .collect(),
        configs,
    }
}

/// One topic to delete from Kafka.
#[derive(Debug, Clone)]
pub struct Deletion {
    pub key: ResourceRef,
    pub topic: String,
    /// `status.topicId`; when unknown the ID is looked up by name.
    pub topic_id: Option<String>,
}

/// How a deletion ended.
#[derive(Debug, Clone)]
pub enum Deleted {
    /// Deleted now, or no topic had that ID (a topic recreated under the same name since is
    /// somebody else's and stays).
    Gone,
    /// `delete.topic.enable=false`: the topic stays, unmanaged.
    Disabled,
    Failed(Error),
}

/// Kafka's answer to DeleteTopics when `delete.topic.enable=false`.
const TOPIC_DELETION_DISABLED: &str = "TOPIC_DELETION_DISABLED";

/// Deletes topics by ID with one request.
pub async fn delete(
    admin: &AdminClient,
    items: Vec<Deletion>,
    metrics: &TopicMetrics,
) -> Vec<(ResourceRef, Deleted)> {
    let mut out = Vec::new();
    let mut ids: Vec<(ResourceRef, Uuid)> = Vec::new();
    let mut unknown: Vec<Deletion> = Vec::new();
    for item in items {
        match item
            .topic_id
            .as_deref()
            .and_then(|id| Uuid::parse_str(id).ok())
        {
            Some(id) => ids.push((item.key, id)),
            None => unknown.push(item),
        }
    }
    if !unknown.is_empty() {
        let names: Vec<String> = unknown.iter().map(|d| d.topic.clone()).collect();
        match timed(
            metrics,
            "describe_topics",
            admin.describe_topics(Some(&names)),
        )
        .await
        {
            Ok(described) => {
                let by_name: HashMap<&str, Uuid> =
                    described.iter().map(|t| (t.name.as_str(), t.id)).collect();
                for d in unknown {
                    match by_name.get(d.topic.as_str()) {
                        Some(id) => ids.push((d.key, *id)),
                        None => out.push((d.key, Deleted::Gone)),
                    }
                }
            }
            Err(e) => out.extend(
                unknown
                    .into_iter()
                    .map(|d| (d.key, Deleted::Failed(e.clone()))),
            ),
        }
    }
    if ids.is_empty() {
        return out;
    }
    let list: Vec<Uuid> = ids.iter().map(|(_, id)| *id).collect();
    match timed(metrics, "delete_topics", admin.delete_topics_by_id(&list)).await {
        Ok(results) => {
            let by_id: HashMap<Uuid, Result<(), Error>> =
                results.into_iter().map(|r| (r.id, r.result)).collect();
            for (key, id) in ids {
                let deleted = match by_id.get(&id) {
                    Some(Ok(())) | Some(Err(Error::UnknownTopic { .. })) => Deleted::Gone,
                    Some(Err(e))
                        if e.kafka_code_name().as_deref() == Some(TOPIC_DELETION_DISABLED) =>
                    {
                        Deleted::Disabled
                    }
                    Some(Err(e)) => Deleted::Failed(e.clone()),
                    None => Deleted::Failed(Error::Protocol {
                        address: String::new(),
                        message: format!("DeleteTopics answered nothing for topic ID {id}"),
                    }),
                };
                out.push((key, deleted));
            }
        }
        Err(e) => out.extend(
            ids.into_iter()
                .map(|(key, _)| (key, Deleted::Failed(e.clone()))),
        ),
    }
    out
}
