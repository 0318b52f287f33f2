//! kstretch's async Kafka admin client, on the `kafka-protocol` crate: the public surface.
//!
//! One [`AdminClient`] keeps one connection per broker, negotiates API versions with each, and
//! routes every request to a broker that can answer it. See `docs/adr/0004-kafka-admin-client.md`
//! for why this exists next to rdkafka, and for the routing and retry policy.

mod acls;
mod client;
mod cluster;
mod configs;
mod connection;
mod error;
mod groups;
mod leaders;
mod quorum;
mod quotas;
mod reassignments;
mod scram;
mod tls;
mod topics;

pub use acls::{AclBinding, AclOperation, AclPermission, AclResourceType, PatternType};
pub use client::{AdminClient, AdminConfig};
pub use cluster::{Broker, ClusterDescription};
pub use configs::{
    AlterConfigsResult, ConfigChange, ConfigEntry, ConfigOp, ConfigResource, ConfigSource,
    ResourceConfigs,
};
pub use error::{Error, KafkaError, code_name};
pub use groups::{GroupDescription, GroupListing, OffsetSpec, Offsets};
pub use kafka_protocol::ResponseError;
pub use kafka_protocol::messages::ApiKey;
pub use leaders::ElectionFailure;
pub use quorum::{KRAFT_VERSION, QuorumInfo, QuorumNode, ReplicaState};
pub use reassignments::{OngoingReassignment, Reassignment, ReassignmentResult};
pub use scram::SCRAM_ITERATIONS;
pub use tls::Tls;
pub use topics::{
    CreatePartitionsResult, CreateTopicResult, CreatedTopic, DeleteTopicResult, NewPartitions,
    NewTopic, PartitionDescription, TopicDescription,
};
pub use uuid::Uuid;
