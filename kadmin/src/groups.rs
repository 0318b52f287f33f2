//! Consumer groups and partition offsets, as a lag exporter reads them: the groups every broker
//! coordinates, a group's members and committed offsets (from its coordinator), and the earliest
//! and latest offsets of partitions (from their leaders).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::{
    BrokerId, ConsumerProtocolAssignment, DescribeGroupsRequest, FindCoordinatorRequest, GroupId,
    ListGroupsRequest, ListOffsetsRequest, OffsetFetchRequest, TopicName,
    list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic},
    offset_fetch_request::OffsetFetchRequestGroup,
};
use kafka_protocol::protocol::{Decodable, StrBytes};

use crate::client::{AdminClient, Retry, Target};
use crate::error::{Error, KafkaError};

/// One group as a broker lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    pub group_id: String,
    /// `consumer` for consumer groups (`connect` for Connect workers' groups, ...).
    pub protocol_type: String,
    /// `Stable`, `Empty`, ... (Kafka 2.6+).
    pub state: String,
}

/// One group as its coordinator describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupDescription {
    pub state: String,
    pub members: usize,
    /// The partitions assigned to its members (consumer groups only).
    pub assigned: BTreeSet<(String, i32)>,
}

/// The partitions of a consumer group member's assignment (Kafka's consumer protocol: a
/// version, then the assignment); nothing when it cannot be read.
fn assignment(bytes: &bytes::Bytes) -> Vec<(String, i32)> {
    let mut buf = bytes.clone();
    if buf.len() < 2 {
        return Vec::new();
    }
    let version = i16::from_be_bytes([buf[0], buf[1]]);
    let _ = buf.split_to(2);
    match ConsumerProtocolAssignment::decode(&mut buf, version.clamp(0, 3)) {
        Ok(a) => a
            .assigned_partitions
            .into_iter()
            .flat_map(|t| {
                let topic = t.topic.0.to_string();
                t.partitions.into_iter().map(move |p| (topic.clone(), p))
            })
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Which offset of a partition [`AdminClient::list_offsets`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset.
    Earliest,
    /// The high watermark: the offset the next record written will get.
    Latest,
}

impl OffsetSpec {
    fn timestamp(self) -> i64 {
        match self {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
        }
    }
}

/// A partition's offsets, by topic and partition index.
pub type Offsets = BTreeMap<(String, i32), i64>;

/// FindCoordinator v4 and OffsetFetch v8 are the first that take several keys / groups, the
/// shape used here; Kafka 3.0 and later serve them.
const FIND_COORDINATOR_BATCHED: i16 = 4;
const OFFSET_FETCH_GROUPS: i16 = 8;
const GROUP_KEY: i8 = 0;

impl AdminClient {
    /// Every group of the cluster: ListGroups asked of each broker, as each lists only the
    /// groups it coordinates. Sorted by group ID.
    ///
    /// Retry: a read, retried on every transient failure.
    pub async fn list_groups(&self) -> Result<Vec<GroupListing>, Error> {
        self.refresh_brokers().await?;
        let mut groups = Vec::new();
        for (id, _) in self.known_brokers() {
            let response = self
                .call(
                    Target::Broker(id),
                    Retry::Always,
                    0,
                    &ListGroupsRequest::default(),
                )
                .await?;
            groups.extend(response.groups.into_iter().map(|g| GroupListing {
                group_id: g.group_id.0.to_string(),
                protocol_type: g.protocol_type.to_string(),
                state: g.group_state.to_string(),
            }));
        }
        groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        groups.dedup_by(|a, b| a.group_id == b.group_id);
        Ok(groups)
    }

    /// The broker that coordinates `group`.
    ///
    /// Retry: a read, retried on every transient failure (a coordinator not available yet
    /// included).
    pub async fn group_coordinator(&self, group: &str) -> Result<i32, Error> {
        let request = FindCoordinatorRequest::default()
            .with_key_type(GROUP_KEY)
            .with_coordinator_keys(vec![StrBytes::from_string(group.to_owned())]);
        let response = self
            .call(
                Target::Any,
                Retry::Always,
                FIND_COORDINATOR_BATCHED,
                &request,
            )
            .await?;
        let coordinator = response
            .coordinators
            .into_iter()
            .find(|c| c.key.as_str() == group)
            .ok_or_else(|| Error::Protocol {
                address: self.config().bootstrap.join(","),
                message: format!("FindCoordinator answered without the group {group}"),
            })?;
        if let Some(kafka) =
            KafkaError::from_code(coordinator.error_code, coordinator.error_message.as_ref())
        {
            return Err(Error::from_kafka(
                kafka_protocol::messages::ApiKey::FindCoordinator,
                kafka,
            ));
        }
        Ok(coordinator.node_id.0)
    }

    /// `group` as its coordinator describes it now: its state, members and the partitions
    /// assigned to them. A group of the new consumer protocol (KIP-848), which DescribeGroups
    /// does not describe, has none.
    ///
    /// Retry: a read, retried on every transient failure.
    pub async fn describe_group(
        &self,
        group: &str,
        coordinator: i32,
    ) -> Result<GroupDescription, Error> {
        let request = DescribeGroupsRequest::default()
            .with_groups(vec![GroupId(StrBytes::from_string(group.to_owned()))]);
        let response = self
            .call(Target::Broker(coordinator), Retry::Always, 0, &request)
            .await?;
        let Some(described) = response.groups.into_iter().next() else {
            return Ok(GroupDescription::default());
        };
        if let Some(kafka) =
            KafkaError::from_code(described.error_code, described.error_message.as_ref())
        {
            return Err(Error::from_kafka(
                kafka_protocol::messages::ApiKey::DescribeGroups,
                kafka,
            ));
        }
        let consumer = described.protocol_type.as_str() == "consumer";
        let mut assigned = BTreeSet::new();
        for member in &described.members {
            if consumer {
                assigned.extend(assignment(&member.member_assignment));
            }
        }
        Ok(GroupDescription {
            state: described.group_state.to_string(),
            members: described.members.len(),
            assigned,
        })
    }

    /// The offsets `group` committed, for every partition it committed one for, asked of its
    /// coordinator.
    ///
    /// Retry: a read, retried on every transient failure.
    pub async fn committed_offsets(&self, group: &str, coordinator: i32) -> Result<Offsets, Error> {
        let request = OffsetFetchRequest::default().with_groups(vec![
            OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
                .with_topics(None),
        ]);
        let response = self
            .call(
                Target::Broker(coordinator),
                Retry::Always,
                OFFSET_FETCH_GROUPS,
                &request,
            )
            .await?;
        let mut offsets = Offsets::new();
        for answered in response.groups {
            if let Some(kafka) = KafkaError::from_code(answered.error_code, None) {
                return Err(Error::from_kafka(
                    kafka_protocol::messages::ApiKey::OffsetFetch,
                    kafka,
                ));
            }
            for topic in answered.topics {
                for p in topic.partitions {
                    // -1: no offset committed for this partition.
                    if p.error_code == 0 && p.committed_offset >= 0 {
                        offsets.insert(
                            (topic.name.0.to_string(), p.partition_index),
                            p.committed_offset,
                        );
                    }
                }
            }
        }
        Ok(offsets)
    }

    /// The `spec` offset of each partition, asked of its leader (`leaders`: topic and
    /// partition → leader ID). Partitions whose leader answers with an error are left out.
    ///
    /// Retry: a read, retried on every transient failure.
    pub async fn list_offsets(
        &self,
        leaders: &BTreeMap<(String, i32), i32>,
        spec: OffsetSpec,
    ) -> Result<Offsets, Error> {
        let mut by_leader: BTreeMap<i32, BTreeMap<&str, Vec<i32>>> = BTreeMap::new();
        for ((topic, partition), leader) in leaders {
            if *leader >= 0 {
                by_leader
                    .entry(*leader)
                    .or_default()
                    .entry(topic)
                    .or_default()
                    .push(*partition);
            }
        }
        let mut offsets = Offsets::new();
        for (leader, topics) in by_leader {
            let request = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(
                    topics
                        .into_iter()
                        .map(|(name, partitions)| {
                            ListOffsetsTopic::default()
                                .with_name(TopicName(StrBytes::from_string(name.to_owned())))
                                .with_partitions(
                                    partitions
                                        .into_iter()
                                        .map(|p| {
                                            ListOffsetsPartition::default()
                                                .with_partition_index(p)
                                                .with_timestamp(spec.timestamp())
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                );
            let response = self
                .call(Target::Broker(leader), Retry::Always, 1, &request)
                .await?;
            for topic in response.topics {
                for p in topic.partitions {
                    if p.error_code == 0 && p.offset >= 0 {
                        offsets.insert((topic.name.0.to_string(), p.partition_index), p.offset);
                    }
                }
            }
        }
        Ok(offsets)
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
    use kafka_protocol::protocol::Encodable;

    use super::*;

    #[test]
    fn a_members_assignment_is_read_from_the_consumer_protocol() {
        let written = ConsumerProtocolAssignment::default().with_assigned_partitions(vec![
            TopicPartition::default()
                .with_topic(TopicName(StrBytes::from_static_str("orders")))
                .with_partitions(vec![0, 2]),
        ]);
        let mut buf = bytes::BytesMut::new();
        buf.extend_from_slice(&1i16.to_be_bytes());
        written.encode(&mut buf, 1).unwrap();
        assert_eq!(
            assignment(&buf.freeze()),
            [("orders".to_owned(), 0), ("orders".to_owned(), 2)]
        );
        assert!(assignment(&bytes::Bytes::from_static(&[0, 1, 9])).is_empty());
        assert!(assignment(&bytes::Bytes::new()).is_empty());
    }
}
