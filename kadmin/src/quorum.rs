//! The KRaft metadata quorum: DescribeQuorum on `__cluster_metadata` partition 0.

use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::describe_quorum_response;
use kafka_protocol::messages::{ApiKey, DescribeQuorumRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::client::{AdminClient, Retry, Target};
use crate::error::{Error, KafkaError};

const METADATA_TOPIC: &str = "__cluster_metadata";

/// The state of the metadata quorum, as its leader sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumInfo {
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub high_watermark: i64,
    pub voters: Vec<ReplicaState>,
    pub observers: Vec<ReplicaState>,
    /// Controller endpoints of the voters (DescribeQuorum v2, Kafka 3.9+; empty before).
    pub nodes: Vec<QuorumNode>,
}

/// One replica of the metadata log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaState {
    pub replica_id: i32,
    /// Nil before DescribeQuorum v2.
    pub directory_id: Uuid,
    pub log_end_offset: i64,
    /// Milliseconds since the epoch; `None` when unknown.
    pub last_fetch_timestamp: Option<i64>,
    pub last_caught_up_timestamp: Option<i64>,
}

/// A voter's listeners.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumNode {
    pub id: i32,
    /// (listener name, host, port).
    pub listeners: Vec<(String, String, u16)>,
}

fn replica(r: describe_quorum_response::ReplicaState) -> ReplicaState {
    ReplicaState {
        replica_id: r.replica_id.0,
        directory_id: r.replica_directory_id,
        log_end_offset: r.log_end_offset,
        last_fetch_timestamp: Some(r.last_fetch_timestamp).filter(|t| *t >= 0),
        last_caught_up_timestamp: Some(r.last_caught_up_timestamp).filter(|t| *t >= 0),
    }
}

impl AdminClient {
    /// Describes the metadata quorum. Sent to any broker; KRaft brokers forward it to the
    /// active controller.
    ///
    /// Retry: a read, retried on every transient failure (NOT_LEADER_OR_FOLLOWER during a
    /// controller election included).
    pub async fn describe_quorum(&self) -> Result<QuorumInfo, Error> {
        let request = DescribeQuorumRequest::default().with_topics(vec![
            TopicData::default()
                .with_topic_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
                .with_partitions(vec![PartitionData::default().with_partition_index(0)]),
        ]);
        let config = self.config();
        let mut backoff = config.retry_backoff;
        let mut attempt = 0;
        loop {
            let response = self.call(Target::Any, Retry::Always, 0, &request).await?;
            let partition = response
                .topics
                .into_iter()
                .find(|t| t.topic_name.0.as_str() == METADATA_TOPIC)
                .and_then(|t| t.partitions.into_iter().find(|p| p.partition_index == 0));
            let Some(partition) = partition else {
                return Err(crate::topics::missing(
                    ApiKey::DescribeQuorum,
                    "__cluster_metadata-0",
                ));
            };
            if let Some(kafka) =
                KafkaError::from_code(partition.error_code, partition.error_message.as_ref())
            {
                let error = Error::from_kafka(ApiKey::DescribeQuorum, kafka);
                if error.is_transient() && attempt < config.retries {
                    attempt += 1;
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(std::time::Duration::from_secs(5));
                    continue;
                }
                return Err(error);
            }
            return Ok(QuorumInfo {
                leader_id: partition.leader_id.0,
                leader_epoch: partition.leader_epoch,
                high_watermark: partition.high_watermark,
                voters: partition.current_voters.into_iter().map(replica).collect(),
                observers: partition.observers.into_iter().map(replica).collect(),
                nodes: response
                    .nodes
                    .into_iter()
                    .map(|n| QuorumNode {
                        id: n.node_id.0,
                        listeners: n
                            .listeners
                            .into_iter()
                            .map(|l| (l.name.to_string(), l.host.to_string(), l.port))
                            .collect(),
                    })
                    .collect(),
            });
        }
    }
}
