//! The KRaft metadata quorum: DescribeQuorum on `__cluster_metadata` partition 0, voter
//! changes (KIP-853 AddRaftVoter / RemoveRaftVoter) and the finalized feature levels that say
//! whether the quorum is dynamic (`kraft.version`).

use std::collections::BTreeMap;

use kafka_protocol::messages::add_raft_voter_request::Listener;
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::describe_quorum_response;
use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::{
    AddRaftVoterRequest, ApiKey, DescribeQuorumRequest, RemoveRaftVoterRequest, TopicName,
    UpdateFeaturesRequest,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::client::{AdminClient, Retry, Target};
use crate::connection::api_versions_request;
use crate::error::{Error, KafkaError};

const METADATA_TOPIC: &str = "__cluster_metadata";

/// The feature whose level says how the quorum's voters are known: 0 from every node's
/// `controller.quorum.voters` (static), 1 from the metadata log (dynamic, KIP-853).
pub const KRAFT_VERSION: &str = "kraft.version";

/// UpdateFeatures' upgrade type that only raises a level.
const UPGRADE: i8 = 1;

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

    /// The finalized level of every feature, as the answering node knows it (ApiVersions).
    /// A feature at level 0 may be missing: read a missing one as 0.
    ///
    /// Retry: a read, retried on every transient failure.
    pub async fn finalized_features(&self) -> Result<BTreeMap<String, i16>, Error> {
        // v3 is the first with finalized features.
        let response = self
            .call(Target::Any, Retry::Always, 3, &api_versions_request())
            .await?;
        Ok(response
            .finalized_features
            .into_iter()
            .map(|f| (f.name.to_string(), f.max_version_level))
            .collect())
    }

    /// Raises `feature` to `level` (UpdateFeatures, upgrade only). Raising a feature to the
    /// level it has is a no-op, so a repeated request is harmless.
    ///
    /// Retry: every transient failure.
    pub async fn upgrade_feature(&self, feature: &str, level: i16) -> Result<(), Error> {
        let request = UpdateFeaturesRequest::default()
            .with_timeout_ms(self.operation_timeout_ms())
            .with_feature_updates(vec![
                FeatureUpdateKey::default()
                    .with_feature(StrBytes::from_string(feature.to_owned()))
                    .with_max_version_level(level)
                    .with_upgrade_type(UPGRADE),
            ]);
        // v1 is the first with the upgrade type.
        let response = self.call(Target::Any, Retry::Always, 1, &request).await?;
        match response
            .results
            .into_iter()
            .find_map(|r| KafkaError::from_code(r.error_code, r.error_message.as_ref()))
        {
            Some(kafka) => Err(Error::from_kafka(ApiKey::UpdateFeatures, kafka)),
            None => Ok(()),
        }
    }

    /// Makes the observer `id`, whose metadata log directory is `directory_id`, a voter of the
    /// quorum of cluster `cluster_id`. `listeners` are its controller listeners as (name, host,
    /// port); the first of the leader's `controller.listener.names` must be among them. Kafka
    /// answers REQUEST_TIMED_OUT while the observer has not caught up or another voter change
    /// is pending, UNSUPPORTED_VERSION (as [`Error::Unsupported`]) on a static quorum and
    /// DUPLICATE_VOTER when `id` already votes.
    ///
    /// Retry: only when the request provably did not run; the caller reads the quorum again.
    pub async fn add_raft_voter(
        &self,
        cluster_id: &str,
        id: i32,
        directory_id: Uuid,
        listeners: &[(String, String, u16)],
    ) -> Result<(), Error> {
        let request = AddRaftVoterRequest::default()
            .with_cluster_id(Some(StrBytes::from_string(cluster_id.to_owned())))
            .with_timeout_ms(self.operation_timeout_ms())
            .with_voter_id(id)
            .with_voter_directory_id(directory_id)
            .with_listeners(
                listeners
                    .iter()
                    .map(|(name, host, port)| {
                        Listener::default()
                            .with_name(StrBytes::from_string(name.clone()))
                            .with_host(StrBytes::from_string(host.clone()))
                            .with_port(*port)
                    })
                    .collect(),
            );
        self.call(Target::Any, Retry::UnlessSent, 0, &request)
            .await
            .map(|_| ())
    }

    /// Removes the voter `id` with metadata log directory `directory_id` from the quorum of
    /// cluster `cluster_id`; it goes on as an observer while it runs. VOTER_NOT_FOUND when no
    /// voter has that ID and directory.
    ///
    /// Retry: only when the request provably did not run; the caller reads the quorum again.
    pub async fn remove_raft_voter(
        &self,
        cluster_id: &str,
        id: i32,
        directory_id: Uuid,
    ) -> Result<(), Error> {
        let request = RemoveRaftVoterRequest::default()
            .with_cluster_id(Some(StrBytes::from_string(cluster_id.to_owned())))
            .with_voter_id(id)
            .with_voter_directory_id(directory_id);
        self.call(Target::Any, Retry::UnlessSent, 0, &request)
            .await
            .map(|_| ())
    }
}
