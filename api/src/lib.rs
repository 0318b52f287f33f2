//! kstretch's API: the Strimzi-compatible custom resources (`kafka.strimzi.io` `Kafka`,
//! `KafkaNodePool`, `KafkaTopic`, `KafkaUser`, `KafkaConnect`, `KafkaConnector`; `core.strimzi.io`
//! `StrimziPodSet`; kstretch's own `kstretch.io` `KafkaOperation`), their CRDs and the helpers shared by every component that reads or writes
//! them.
//!
//! The operator reads and writes `v1`; the CRDs also serve Strimzi's older `v1beta2` with the
//! same schema, and keep every field Strimzi accepts even where kstretch does not model it
//! (see `docs/adr/0001-crd-versions-and-unknown-fields.md`).

pub mod common;
pub mod condition;
pub mod connect;
pub mod connector;
pub mod crd;
pub mod crd_yaml;
mod error;
pub mod kafka;
pub mod names;
pub mod node_pool;
pub mod operation;
pub mod owner;
pub mod pod_set;
pub mod schema;
pub mod schema_check;
pub mod storage;
pub mod topic;
pub mod user;

pub use condition::Condition;
pub use connect::{KafkaConnect, KafkaConnectSpec, KafkaConnectStatus};
pub use connector::{KafkaConnector, KafkaConnectorSpec, KafkaConnectorStatus};
pub use crd::all_crds;
pub use error::Error;
pub use kafka::{
    Kafka, KafkaExporterSpec, KafkaSpec, KafkaStatus, QuorumStatus, QuorumVoterStatus,
};
pub use node_pool::{KafkaNodePool, KafkaNodePoolSpec, KafkaNodePoolStatus, ProcessRole};
pub use operation::{KafkaOperation, KafkaOperationSpec, KafkaOperationStatus};
pub use pod_set::{StrimziPodSet, StrimziPodSetSpec, StrimziPodSetStatus};
pub use storage::{SingleVolumeStorage, Storage};
pub use topic::{KafkaTopic, KafkaTopicSpec, KafkaTopicStatus};
pub use user::{KafkaUser, KafkaUserSpec, KafkaUserStatus};
