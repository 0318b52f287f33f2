//! Leadership and replica sizes, what partition movements need besides reassignments:
//! preferred-leader elections (ElectLeaders) and the bytes each broker holds per partition
//! (DescribeLogDirs).

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{ApiKey, DescribeLogDirsRequest, ElectLeadersRequest};

use crate::client::{AdminClient, IntoTopicName, Retry, Target};
use crate::error::{Error, KafkaError};

/// Kafka's election type for "make the first replica the leader".
const PREFERRED: i8 = 0;
/// Kafka's election type for "elect any live replica, in sync or not" (KIP-460).
const UNCLEAN: i8 = 1;

/// A partition whose preferred leader could not be elected.
#[derive(Debug, Clone)]
pub struct ElectionFailure {
    pub topic: String,
    pub partition: i32,
    pub error: Error,
}

impl AdminClient {
    /// Makes each partition's first replica its leader. Returns the partitions where that did
    /// not happen (PREFERRED_LEADER_NOT_AVAILABLE while the replica catches up, and so on); a
    /// partition already led by its preferred replica is not a failure.
    ///
    /// Retry: every transient failure: electing the same leader again changes nothing.
    pub async fn elect_preferred_leaders(
        &self,
        partitions: &[(String, i32)],
    ) -> Result<Vec<ElectionFailure>, Error> {
        self.elect(PREFERRED, partitions).await
    }

    /// Gives each partition that has no leader one of its live replicas, in sync or not: what
    /// that replica had not replicated is lost. Returns the partitions where no leader was
    /// elected (no live replica); a partition that has a leader is not a failure.
    ///
    /// Retry: every transient failure: a partition that got a leader needs no election again.
    pub async fn elect_unclean_leaders(
        &self,
        partitions: &[(String, i32)],
    ) -> Result<Vec<ElectionFailure>, Error> {
        self.elect(UNCLEAN, partitions).await
    }

    async fn elect(
        &self,
        election_type: i8,
        partitions: &[(String, i32)],
    ) -> Result<Vec<ElectionFailure>, Error> {
        if partitions.is_empty() {
            return Ok(Vec::new());
        }
        let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (topic, partition) in partitions {
            topics.entry(topic).or_default().push(*partition);
        }
        let request = ElectLeadersRequest::default()
            .with_election_type(election_type)
            .with_timeout_ms(self.operation_timeout_ms())
            .with_topic_partitions(Some(
                topics
                    .into_iter()
                    .map(|(topic, partitions)| {
                        TopicPartitions::default()
                            .with_topic(topic.to_owned().into_topic_name())
                            .with_partitions(partitions)
                    })
                    .collect(),
            ));
        // v1 is the first with the election type.
        let response = self.call(Target::Any, Retry::Always, 1, &request).await?;
        let mut failures = Vec::new();
        for topic in response.replica_election_results {
            for p in topic.partition_result {
                let Some(kafka) = KafkaError::from_code(p.error_code, p.error_message.as_ref())
                else {
                    continue;
                };
                if kafka.error == ResponseError::ElectionNotNeeded {
                    continue;
                }
                failures.push(ElectionFailure {
                    topic: topic.topic.0.to_string(),
                    partition: p.partition_id,
                    error: Error::from_kafka(ApiKey::ElectLeaders, kafka),
                });
            }
        }
        Ok(failures)
    }

    /// The size in bytes of every partition replica the given brokers hold, the largest when
    /// several report one (a lagging replica is smaller). Replicas being moved between a
    /// broker's own log directories are not counted twice.
    ///
    /// Retry: a read, retried on every transient failure.
    pub async fn partition_sizes(
        &self,
        brokers: &[i32],
    ) -> Result<BTreeMap<(String, i32), u64>, Error> {
        let mut sizes: BTreeMap<(String, i32), u64> = BTreeMap::new();
        // All topics of all log directories.
        let request = DescribeLogDirsRequest::default().with_topics(None);
        for broker in brokers {
            let response = self
                .call(Target::Broker(*broker), Retry::Always, 1, &request)
                .await?;
            for dir in response.results {
                if let Some(kafka) = KafkaError::from_code(dir.error_code, None) {
                    // An offline log directory holds nothing this broker serves.
                    tracing::debug!(broker, dir = %dir.log_dir.as_str(), error = %kafka.name(), "log directory not described");
                    continue;
                }
                for topic in dir.topics {
                    for p in topic.partitions.iter().filter(|p| !p.is_future_key) {
                        let size = u64::try_from(p.partition_size).unwrap_or(0);
                        let entry = sizes
                            .entry((topic.name.0.to_string(), p.partition_index))
                            .or_default();
                        *entry = (*entry).max(size);
                    }
                }
            }
        }
        Ok(sizes)
    }
}
