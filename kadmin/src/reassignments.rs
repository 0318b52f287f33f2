//! Partition reassignments: starting or cancelling them, and listing those in progress.

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, ApiKey, BrokerId, ListPartitionReassignmentsRequest,
};

use crate::client::{AdminClient, IntoTopicName, Retry, Target};
use crate::error::{Error, KafkaError};

/// A reassignment to start (target replicas) or cancel (`None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reassignment {
    pub topic: String,
    pub partition: i32,
    /// The replica list wanted, preferred leader first; `None` cancels a reassignment in
    /// progress.
    pub target: Option<Vec<i32>>,
}

/// The outcome for one partition of [`AdminClient::alter_partition_reassignments`].
#[derive(Debug, Clone)]
pub struct ReassignmentResult {
    pub topic: String,
    pub partition: i32,
    /// NO_REASSIGNMENT_IN_PROGRESS for a cancel with nothing to cancel, and so on.
    pub result: Result<(), Error>,
}

/// A reassignment in progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OngoingReassignment {
    pub topic: String,
    pub partition: i32,
    /// The current replica set (old and new replicas while moving).
    pub replicas: Vec<i32>,
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
}

fn ids(brokers: Vec<BrokerId>) -> Vec<i32> {
    brokers.into_iter().map(|b| b.0).collect()
}

impl AdminClient {
    /// Starts (or cancels) partition reassignments; results per partition, in the order given.
    ///
    /// Retry: every transient failure, including a timeout after sending: asking again for the
    /// same target replicas leaves the same reassignment in place. A repeated *cancel* may
    /// answer NO_REASSIGNMENT_IN_PROGRESS, which means cancelled.
    pub async fn alter_partition_reassignments(
        &self,
        reassignments: &[Reassignment],
    ) -> Result<Vec<ReassignmentResult>, Error> {
        let mut topics: BTreeMap<&str, Vec<ReassignablePartition>> = BTreeMap::new();
        for r in reassignments {
            topics.entry(&r.topic).or_default().push(
                ReassignablePartition::default()
                    .with_partition_index(r.partition)
                    .with_replicas(
                        r.target
                            .as_ref()
                            .map(|t| t.iter().copied().map(BrokerId).collect()),
                    ),
            );
        }
        let request = AlterPartitionReassignmentsRequest::default()
            .with_timeout_ms(self.operation_timeout_ms())
            .with_topics(
                topics
                    .into_iter()
                    .map(|(name, partitions)| {
                        ReassignableTopic::default()
                            .with_name(name.to_owned().into_topic_name())
                            .with_partitions(partitions)
                    })
                    .collect(),
            );
        let response = self.call(Target::Any, Retry::Always, 0, &request).await?;
        let mut answers = BTreeMap::new();
        for topic in response.responses {
            for p in topic.partitions {
                answers.insert((topic.name.0.to_string(), p.partition_index), p);
            }
        }
        Ok(reassignments
            .iter()
            .map(|r| {
                let result = match answers.remove(&(r.topic.clone(), r.partition)) {
                    None => Err(crate::topics::missing(
                        ApiKey::AlterPartitionReassignments,
                        &format!("{}-{}", r.topic, r.partition),
                    )),
                    Some(p) => {
                        match KafkaError::from_code(p.error_code, p.error_message.as_ref()) {
                            None => Ok(()),
                            Some(kafka) => Err(Error::from_kafka(
                                ApiKey::AlterPartitionReassignments,
                                kafka,
                            )),
                        }
                    }
                };
                ReassignmentResult {
                    topic: r.topic.clone(),
                    partition: r.partition,
                    result,
                }
            })
            .collect())
    }

    /// Lists reassignments in progress: all with `None`, else only the given partitions
    /// (topic, partition indexes). Sorted by topic and partition.
    ///
    /// Retry: a read, retried on every transient failure.
    pub async fn list_partition_reassignments(
        &self,
        partitions: Option<&[(String, Vec<i32>)]>,
    ) -> Result<Vec<OngoingReassignment>, Error> {
        let request = ListPartitionReassignmentsRequest::default()
            .with_timeout_ms(self.operation_timeout_ms())
            .with_topics(partitions.map(|p| {
                p.iter()
                    .map(|(topic, indexes)| {
                        ListPartitionReassignmentsTopics::default()
                            .with_name(topic.clone().into_topic_name())
                            .with_partition_indexes(indexes.clone())
                    })
                    .collect()
            }));
        let response = self.call(Target::Any, Retry::Always, 0, &request).await?;
        let mut ongoing: Vec<OngoingReassignment> = response
            .topics
            .into_iter()
            .flat_map(|t| {
                let topic = t.name.0.to_string();
                t.partitions.into_iter().map(move |p| OngoingReassignment {
                    topic: topic.clone(),
                    partition: p.partition_index,
                    replicas: ids(p.replicas),
                    adding: ids(p.adding_replicas),
                    removing: ids(p.removing_replicas),
                })
            })
            .collect();
        ongoing.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        Ok(ongoing)
    }
}
