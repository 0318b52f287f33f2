//! Topics: describing them (Metadata), creating, deleting by ID, and adding partitions.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest,
};
use uuid::Uuid;

use crate::client::{AdminClient, IntoTopicName, Retry, Target};
use crate::error::{Error, KafkaError};

/// A topic as the cluster metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicDescription {
    pub name: String,
    pub id: Uuid,
    pub internal: bool,
    /// Sorted by index.
    pub partitions: Vec<PartitionDescription>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionDescription {
    pub index: i32,
    /// -1 when the partition has no leader.
    pub leader: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub offline: Vec<i32>,
}

/// A topic to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    pub name: String,
    /// -1 for the broker default (`num.partitions`); ignored with an explicit assignment.
    pub partitions: i32,
    /// -1 for the broker default (`default.replication.factor`); ignored with an explicit
    /// assignment.
    pub replication_factor: i16,
    /// Partition index to broker IDs; when set, Kafka places the replicas exactly so.
    pub assignment: Option<BTreeMap<i32, Vec<i32>>>,
    pub configs: BTreeMap<String, String>,
}

impl NewTopic {
    pub fn new(name: impl Into<String>, partitions: i32, replication_factor: i16) -> NewTopic {
        NewTopic {
            name: name.into(),
            partitions,
            replication_factor,
            assignment: None,
            configs: BTreeMap::new(),
        }
    }

    /// Places the replicas explicitly (partition index to broker IDs).
    pub fn with_assignment(mut self, assignment: BTreeMap<i32, Vec<i32>>) -> NewTopic {
        self.assignment = Some(assignment);
        self
    }

    pub fn with_config(mut self, name: impl Into<String>, value: impl Into<String>) -> NewTopic {
        self.configs.insert(name.into(), value.into());
        self
    }

    fn to_request(&self) -> CreatableTopic {
        let (partitions, replication_factor, assignments) = match &self.assignment {
            // Kafka wants -1/-1 when an assignment is given.
            Some(assignment) => (
                -1,
                -1,
                assignment
                    .iter()
                    .map(|(index, brokers)| {
                        CreatableReplicaAssignment::default()
                            .with_partition_index(*index)
                            .with_broker_ids(brokers.iter().copied().map(BrokerId).collect())
                    })
                    .collect(),
            ),
            None => (self.partitions, self.replication_factor, Vec::new()),
        };
        CreatableTopic::default()
            .with_name(self.name.clone().into_topic_name())
            .with_num_partitions(partitions)
            .with_replication_factor(replication_factor)
            .with_assignments(assignments)
            .with_configs(
                self.configs
                    .iter()
                    .map(|(name, value)| {
                        CreatableTopicConfig::default()
                            .with_name(name.clone().into())
                            .with_value(Some(value.clone().into()))
                    })
                    .collect(),
            )
    }
}

/// What Kafka created (or, with `validate_only`, would create).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedTopic {
    /// Nil with `validate_only`.
    pub id: Uuid,
    pub partitions: i32,
    pub replication_factor: i16,
}

/// The outcome for one topic of [`AdminClient::create_topics`].
#[derive(Debug, Clone)]
pub struct CreateTopicResult {
    pub name: String,
    /// [`Error::TopicAlreadyExists`] when it exists; other Kafka errors keep code and message.
    pub result: Result<CreatedTopic, Error>,
}

/// The outcome for one topic of [`AdminClient::delete_topics_by_id`].
#[derive(Debug, Clone)]
pub struct DeleteTopicResult {
    pub id: Uuid,
    /// As Kafka reported it.
    pub name: Option<String>,
    /// [`Error::UnknownTopic`] when no topic has this ID.
    pub result: Result<(), Error>,
}

/// A partition count increase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPartitions {
    pub topic: String,
    /// The total number of partitions wanted (not the number to add).
    pub total_count: i32,
    /// Broker IDs for each new partition, in order; `None` lets Kafka place them.
    pub assignments: Option<Vec<Vec<i32>>>,
}

/// The outcome for one topic of [`AdminClient::create_partitions`].
#[derive(Debug, Clone)]
pub struct CreatePartitionsResult {
    pub topic: String,
    pub result: Result<(), Error>,
}

fn item_result(
    api: ApiKey,
    code: i16,
    message: Option<&kafka_protocol::protocol::StrBytes>,
) -> Result<(), Error> {
    match KafkaError::from_code(code, message) {
        None => Ok(()),
        Some(kafka) => Err(Error::from_kafka(api, kafka)),
    }
}

impl AdminClient {
    /// Describes the named topics, or all with `None`. Named topics that do not exist are left
    /// out of the result. Topics are sorted by name.
    ///
    /// Retry: a read; transient failures and LEADER_NOT_AVAILABLE (a topic still being created)
    /// are retried.
    pub async fn describe_topics(
        &self,
        names: Option<&[String]>,
    ) -> Result<Vec<TopicDescription>, Error> {
        let request = AdminClient::metadata_request(names);
        let config = self.config();
        let mut backoff = config.retry_backoff;
        let mut attempt = 0;
        loop {
            // v10 is the first with topic IDs.
            let response = self.metadata(&request, 10).await?;
            let mut topics = Vec::new();
            let mut retriable = None;
            for topic in response.topics {
                let name = topic.name.map(|n| n.0.to_string()).unwrap_or_default();
                if let Some(kafka) = KafkaError::from_code(topic.error_code, None) {
                    match kafka.error {
                        ResponseError::UnknownTopicOrPartition | ResponseError::UnknownTopicId => {
                            continue;
                        }
                        _ if kafka.is_retriable() => {
                            retriable = Some(Error::from_kafka(ApiKey::Metadata, kafka));
                            continue;
                        }
                        _ => return Err(Error::from_kafka(ApiKey::Metadata, kafka)),
                    }
                }
                let mut partitions: Vec<PartitionDescription> = topic
                    .partitions
                    .into_iter()
                    .map(|p| PartitionDescription {
                        index: p.partition_index,
                        leader: p.leader_id.0,
                        replicas: p.replica_nodes.into_iter().map(|b| b.0).collect(),
                        isr: p.isr_nodes.into_iter().map(|b| b.0).collect(),
                        offline: p.offline_replicas.into_iter().map(|b| b.0).collect(),
                    })
                    .collect();
                partitions.sort_by_key(|p| p.index);
                topics.push(TopicDescription {
                    name,
                    id: topic.topic_id,
                    internal: topic.is_internal,
                    partitions,
                });
            }
            match retriable {
                Some(error) if attempt < config.retries => {
                    attempt += 1;
                    tracing::debug!(%error, attempt, "retrying Metadata for a topic in transition");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(std::time::Duration::from_secs(5));
                }
                Some(error) => return Err(error),
                None => {
                    topics.sort_by(|a, b| a.name.cmp(&b.name));
                    return Ok(topics);
                }
            }
        }
    }

    /// Creates topics; with `validate_only` Kafka only checks them. Results are per topic, in
    /// the order given.
    ///
    /// Retry: only when the request provably did not run (see `Retry::UnlessSent`): repeating a
    /// CreateTopics that did run would report TOPIC_ALREADY_EXISTS for a topic this call
    /// created. After a timeout the caller re-reads the topics.
    pub async fn create_topics(
        &self,
        topics: &[NewTopic],
        validate_only: bool,
    ) -> Result<Vec<CreateTopicResult>, Error> {
        let request = CreateTopicsRequest::default()
            .with_topics(topics.iter().map(NewTopic::to_request).collect())
            .with_timeout_ms(self.operation_timeout_ms())
            .with_validate_only(validate_only);
        // v5 answers with the actual partition count and replication factor, v7 with topic IDs.
        let response = self
            .call(Target::Any, Retry::UnlessSent, 5, &request)
            .await?;
        let mut by_name: BTreeMap<String, _> = response
            .topics
            .into_iter()
            .map(|t| (t.name.0.to_string(), t))
            .collect();
        Ok(topics
            .iter()
            .map(|topic| {
                let result = match by_name.remove(&topic.name) {
                    None => Err(missing(ApiKey::CreateTopics, &topic.name)),
                    Some(t) => {
                        item_result(ApiKey::CreateTopics, t.error_code, t.error_message.as_ref())
                            .map(|()| CreatedTopic {
                                id: t.topic_id,
                                partitions: t.num_partitions,
                                replication_factor: t.replication_factor,
                            })
                    }
                };
                CreateTopicResult {
                    name: topic.name.clone(),
                    result,
                }
            })
            .collect())
    }

    /// Deletes topics by ID (so a topic re-created under the same name is never hit). Results
    /// are per ID, in the order given.
    ///
    /// Retry: only when the request provably did not run; a repeat of a delete that ran answers
    /// UNKNOWN_TOPIC_ID, indistinguishable from a wrong ID.
    pub async fn delete_topics_by_id(&self, ids: &[Uuid]) -> Result<Vec<DeleteTopicResult>, Error> {
        let request = DeleteTopicsRequest::default()
            .with_topics(
                ids.iter()
                    .map(|id| DeleteTopicState::default().with_topic_id(*id))
                    .collect(),
            )
            .with_timeout_ms(self.operation_timeout_ms());
        // v6 is the first that deletes by ID.
        let response = self
            .call(Target::Any, Retry::UnlessSent, 6, &request)
            .await?;
        let mut by_id: BTreeMap<Uuid, _> = response
            .responses
            .into_iter()
            .map(|r| (r.topic_id, r))
            .collect();
        Ok(ids
            .iter()
            .map(|id| match by_id.remove(id) {
                None => DeleteTopicResult {
                    id: *id,
                    name: None,
                    result: Err(missing(ApiKey::DeleteTopics, &id.to_string())),
                },
                Some(r) => DeleteTopicResult {
                    id: *id,
                    name: r.name.map(|n| n.0.to_string()),
                    result: item_result(
                        ApiKey::DeleteTopics,
                        r.error_code,
                        r.error_message.as_ref(),
                    ),
                },
            })
            .collect())
    }

    /// Raises partition counts; with `validate_only` Kafka only checks. Results per topic, in
    /// the order given.
    ///
    /// Retry: only when the request provably did not run; a repeat of one that ran answers
    /// INVALID_PARTITIONS ("already has N partitions").
    pub async fn create_partitions(
        &self,
        increases: &[NewPartitions],
        validate_only: bool,
    ) -> Result<Vec<CreatePartitionsResult>, Error> {
        let request = CreatePartitionsRequest::default()
            .with_topics(
                increases
                    .iter()
                    .map(|p| {
                        CreatePartitionsTopic::default()
                            .with_name(p.topic.clone().into_topic_name())
                            .with_count(p.total_count)
                            .with_assignments(p.assignments.as_ref().map(|a| {
                                a.iter()
                                    .map(|brokers| {
                                        CreatePartitionsAssignment::default().with_broker_ids(
                                            brokers.iter().copied().map(BrokerId).collect(),
                                        )
                                    })
                                    .collect()
                            }))
                    })
                    .collect(),
            )
            .with_timeout_ms(self.operation_timeout_ms())
            .with_validate_only(validate_only);
        let response = self
            .call(Target::Any, Retry::UnlessSent, 0, &request)
            .await?;
        let mut by_name: BTreeMap<String, _> = response
            .results
            .into_iter()
            .map(|r| (r.name.0.to_string(), r))
            .collect();
        Ok(increases
            .iter()
            .map(|p| CreatePartitionsResult {
                topic: p.topic.clone(),
                result: match by_name.remove(&p.topic) {
                    None => Err(missing(ApiKey::CreatePartitions, &p.topic)),
                    Some(r) => item_result(
                        ApiKey::CreatePartitions,
                        r.error_code,
                        r.error_message.as_ref(),
                    ),
                },
            })
            .collect())
    }
}

/// The broker's answer left out an item that was asked for.
pub(crate) fn missing(api: ApiKey, item: &str) -> Error {
    Error::Protocol {
        address: String::new(),
        message: format!("{api:?} response has no result for {item}"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn an_explicit_assignment_overrides_counts() {
        let topic = NewTopic::new("t", 3, 2)
            .with_assignment(BTreeMap::from([(0, vec![1, 2]), (1, vec![2, 3])]))
            .with_config("min.insync.replicas", "2");
        let request = topic.to_request();
        assert_eq!(request.num_partitions, -1);
        assert_eq!(request.replication_factor, -1);
        assert_eq!(request.assignments.len(), 2);
        assert_eq!(
            request.assignments[1].broker_ids,
            [BrokerId(2), BrokerId(3)]
        );
        assert_eq!(request.configs[0].name.as_str(), "min.insync.replicas");
        let plain = NewTopic::new("t", 3, 2).to_request();
        assert_eq!((plain.num_partitions, plain.replication_factor), (3, 2));
        assert!(plain.assignments.is_empty());
    }

    #[test]
    fn item_errors_keep_code_and_message() {
        let message = "Topic 't' already exists.".to_owned().into();
        let e = item_result(ApiKey::CreateTopics, 36, Some(&message)).unwrap_err();
        assert!(matches!(e, Error::TopicAlreadyExists { .. }));
        let kafka = e.kafka().unwrap();
        assert_eq!(kafka.name(), "TOPIC_ALREADY_EXISTS");
        assert_eq!(kafka.message.as_deref(), Some("Topic 't' already exists."));
        assert!(item_result(ApiKey::CreateTopics, 0, None).is_ok());
        assert_eq!(
            missing(ApiKey::DeleteTopics, "x").reason(),
            "KafkaProtocolError"
        );
    }
}
