//! What one cluster's share of a batch asks of Kafka (pure): from what Kafka described and each
//! topic's [`Work`], every topic's account (problems, warnings, topic ID) and the batched
//! requests: topics to create, configs to alter, partitions to add, replication factors to
//! change.

use std::collections::{BTreeMap, HashMap};

use kstretch_core::topics::{
    self, AlterableConfigs, ConfigSource, ConfigValue, CreateTopic, CurrentTopic, PartitionState,
};
use kstretch_kadmin::{
    ConfigChange, ConfigOp, ConfigResource, Error, NewPartitions, NewTopic, TopicDescription,
};

use super::replicas::{Ongoing, RfWork};
use super::warning::{self, Reason, Warning};
use super::work::{Acc, Next, Work};

/// What Kafka described of the batch's topics that exist.
#[derive(Debug, Default)]
pub struct Described {
    /// By name.
    pub topics: HashMap<String, TopicDescription>,
    /// Each existing topic's configs, or why Kafka could not describe them.
    pub configs: HashMap<String, Result<BTreeMap<String, ConfigValue>, Error>>,
}

/// The batch's Admin requests, each item with the index of its topic in the batch.
#[derive(Debug, Default)]
pub struct Requests {
    pub creates: Vec<(usize, NewTopic)>,
    pub changes: Vec<(usize, ConfigChange)>,
    pub increases: Vec<(usize, NewPartitions)>,
    pub rf_work: Vec<RfWork>,
}

/// Plans every topic of `work`, in order. `ongoing` is the reassignments in flight, or why they
/// could not be listed (which fails only the topics whose replication factor changes).
pub fn batch(
    work: &[Work],
    mut described: Described,
    ongoing: &Result<Ongoing, Error>,
    alterable: &AlterableConfigs,
) -> (Vec<Acc>, Requests) {
    let mut accs = Vec::with_capacity(work.len());
    let mut requests = Requests::default();
    for (i, w) in work.iter().enumerate() {
        accs.push(topic(
            i,
            w,
            &mut described,
            ongoing,
            alterable,
            &mut requests,
        ));
    }
    (accs, requests)
}

/// Plans the `i`th topic of the batch: its account, and its items in `requests`. Its configs
/// are taken out of `described`.
fn topic(
    i: usize,
    w: &Work,
    described: &mut Described,
    ongoing: &Result<Ongoing, Error>,
    alterable: &AlterableConfigs,
    requests: &mut Requests,
) -> Acc {
    let no_reassignments = Ongoing::new();
    let in_flight = ongoing.as_ref().unwrap_or(&no_reassignments);
    let mut acc = Acc::new(w.key.clone());
    let current = match described.topics.get(&w.desired.name) {
        None => None,
        Some(t) => {
            acc.topic_id = Some(t.id.to_string());
            match described.configs.remove(&t.name) {
                Some(Ok(values)) => Some(current_topic(t, values, in_flight)),
                Some(Err(e)) => {
                    acc.fail_with(&e);
                    return acc;
                }
                None => Some(current_topic(t, BTreeMap::new(), in_flight)),
            }
        }
    };
    let plan = topics::plan(&w.desired, current.as_ref());
    for problem in &plan.problems {
        acc.fail(problem.reason(), problem.to_string(), Next::Done);
    }
    acc.warnings
        .extend(plan.warnings.iter().map(warning::of_plan));
    if let Some(create) = plan.create {
        requests.creates.push((i, new_topic(create)));
        return acc;
    }
    let filtered = alterable.filter(plan.config_ops, w.desired.config.keys());
    acc.warnings
        .extend(not_alterable_warning(&filtered.ignored_keys));
    if !filtered.ops.is_empty() {
        requests
            .changes
            .push((i, config_change(&w.desired.name, &filtered.ops)));
    }
    if let Some(total) = plan.increase_partitions_to {
        requests.increases.push((
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
        match ongoing {
            Err(e) => acc.fail_with(e),
            Ok(_) => requests.rf_work.push((i, target, current.partitions)),
        }
    }
    acc
}

/// CreateTopics' item for a planned topic; the broker defaults where the spec says nothing.
fn new_topic(create: CreateTopic) -> NewTopic {
    NewTopic {
        name: create.name,
        partitions: create.partitions.unwrap_or(-1),
        replication_factor: create.replicas.unwrap_or(-1),
        assignment: None,
        configs: create.configs,
    }
}

/// One `Warning` naming every spec config the operator is not allowed to alter.
fn not_alterable_warning(ignored_keys: &[String]) -> Option<Warning> {
    if ignored_keys.is_empty() {
        return None;
    }
    let message = ignored_keys
        .iter()
        .map(|k| AlterableConfigs::warning_message(k))
        .collect::<Vec<_>>()
        .join("; ");
    Some(Warning::new(Reason::InvalidConfig, message))
}

/// IncrementalAlterConfigs' item for one topic.
fn config_change(topic: &str, ops: &[topics::ConfigOp]) -> ConfigChange {
    ConfigChange {
        resource: ConfigResource::Topic(topic.to_owned()),
        ops: ops
            .iter()
            .map(|op| match op {
                topics::ConfigOp::Set { name, value } => ConfigOp::set(name.clone(), value.clone()),
                topics::ConfigOp::Delete { name } => ConfigOp::delete(name.clone()),
            })
            .collect(),
    }
}

/// DescribeConfigs' entries in the planner's terms.
pub fn config_values(entries: Vec<kstretch_kadmin::ConfigEntry>) -> BTreeMap<String, ConfigValue> {
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
    ongoing: &Ongoing,
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use kstretch_core::topics::{DesiredTopic, ResourceRef};
    use kstretch_kadmin::{PartitionDescription, Uuid};

    use super::*;

    const ID: &str = "6ba7b810-9dad-11d1-80b4-00c04fd430c8";

    fn work(desired: DesiredTopic) -> Work {
        Work {
            key: ResourceRef {
                namespace: "ns".into(),
                name: desired.name.clone(),
            },
            desired,
            replicas_change: None,
        }
    }

    /// Topic `name` in Kafka, one partition on broker 1, with `retention.ms` set on it.
    fn described(name: &str) -> Described {
        let topic = TopicDescription {
            name: name.into(),
            id: Uuid::parse_str(ID).unwrap(),
            internal: false,
            partitions: vec![PartitionDescription {
                index: 0,
                leader: 1,
                replicas: vec![1],
                isr: vec![1],
                offline: vec![],
            }],
        };
        let configs = BTreeMap::from([(
            "retention.ms".to_owned(),
            ConfigValue {
                value: Some("1000".into()),
                source: ConfigSource::DynamicTopic,
            },
        )]);
        Described {
            topics: HashMap::from([(name.to_owned(), topic)]),
            configs: HashMap::from([(name.to_owned(), Ok(configs))]),
        }
    }

    fn unreachable() -> Error {
        Error::Unreachable {
            address: "b:9092".into(),
            message: "refused".into(),
        }
    }

    #[test]
    fn a_topic_kafka_lacks_is_created_with_the_broker_defaults_for_what_the_spec_leaves_out() {
        let w = work(DesiredTopic {
            name: "a".into(),
            ..Default::default()
        });
        let (accs, requests) = batch(
            &[w],
            Described::default(),
            &Ok(Ongoing::new()),
            &AlterableConfigs::All,
        );
        assert_eq!(accs.len(), 1);
        assert_eq!(accs[0].problem, None);
        assert_eq!(accs[0].topic_id, None, "learnt from the creation");
        let [(0, create)] = requests.creates.as_slice() else {
            panic!("{requests:?}")
        };
        assert_eq!((create.partitions, create.replication_factor), (-1, -1));
        assert!(requests.changes.is_empty() && requests.increases.is_empty());
    }

    #[test]
    fn an_existing_topic_gets_its_id_its_config_changes_and_more_partitions() {
        let w = work(DesiredTopic {
            name: "a".into(),
            partitions: Some(3),
            config: BTreeMap::from([("retention.ms".to_owned(), "2000".to_owned())]),
            ..Default::default()
        });
        let (accs, requests) = batch(
            &[w],
            described("a"),
            &Ok(Ongoing::new()),
            &AlterableConfigs::All,
        );
        assert_eq!(accs[0].topic_id.as_deref(), Some(ID));
        assert!(requests.creates.is_empty());
        let [(0, change)] = requests.changes.as_slice() else {
            panic!("{requests:?}")
        };
        assert_eq!(change.resource, ConfigResource::Topic("a".into()));
        assert_eq!(change.ops, vec![ConfigOp::set("retention.ms", "2000")]);
        let [(0, increase)] = requests.increases.as_slice() else {
            panic!("{requests:?}")
        };
        assert_eq!(increase.total_count, 3);
    }

    #[test]
    fn configs_kafka_could_not_describe_fail_that_topic_alone() {
        let mut kafka = described("a");
        kafka.configs.insert("a".into(), Err(unreachable()));
        let create = work(DesiredTopic {
            name: "b".into(),
            ..Default::default()
        });
        let (accs, requests) = batch(
            &[
                work(DesiredTopic {
                    name: "a".into(),
                    partitions: Some(3),
                    ..Default::default()
                }),
                create,
            ],
            kafka,
            &Ok(Ongoing::new()),
            &AlterableConfigs::All,
        );
        assert_eq!(
            accs[0].problem.as_ref().map(|p| p.reason),
            Some("KafkaUnreachable")
        );
        assert_eq!(accs[0].next, Next::Retry);
        assert!(requests.increases.is_empty());
        assert_eq!(accs[1].problem, None);
        assert_eq!(requests.creates.len(), 1);
    }

    #[test]
    fn configs_the_operator_may_not_alter_are_warned_about_and_left_alone() {
        let w = work(DesiredTopic {
            name: "a".into(),
            config: BTreeMap::from([("retention.ms".to_owned(), "2000".to_owned())]),
            ..Default::default()
        });
        let (accs, requests) = batch(
            &[w],
            described("a"),
            &Ok(Ongoing::new()),
            &AlterableConfigs::None,
        );
        assert!(requests.changes.is_empty());
        assert_eq!(
            accs[0].warnings,
            vec![Warning::new(
                Reason::InvalidConfig,
                AlterableConfigs::warning_message("retention.ms")
            )]
        );
        assert_eq!(accs[0].problem, None, "a warning, not a failure");
    }

    #[test]
    fn a_replication_factor_change_needs_the_reassignments_in_flight() {
        let w = work(DesiredTopic {
            name: "a".into(),
            replicas: Some(2),
            ..Default::default()
        });
        let (accs, requests) = batch(
            std::slice::from_ref(&w),
            described("a"),
            &Ok(Ongoing::new()),
            &AlterableConfigs::All,
        );
        assert_eq!(accs[0].problem, None);
        let [(0, 2, partitions)] = requests.rf_work.as_slice() else {
            panic!("{requests:?}")
        };
        assert_eq!(partitions[0].replicas, vec![1]);

        let (accs, requests) = batch(
            &[w],
            described("a"),
            &Err(unreachable()),
            &AlterableConfigs::All,
        );
        assert!(requests.rf_work.is_empty());
        assert_eq!(
            accs[0].problem.as_ref().map(|p| p.reason),
            Some("KafkaUnreachable")
        );
    }
}
