//! The plain types the topic decisions work on: a topic as Kafka describes it (partitions,
//! replicas, ongoing reassignments, configs with their source) and the config operations.

use std::collections::BTreeMap;

/// Where a config value comes from, as DescribeConfigs reports it. Only `DynamicTopic` values
/// were set on the topic itself; the others are inherited, so the operator never deletes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConfigSource {
    DynamicTopic,
    DynamicBroker,
    DynamicDefaultBroker,
    StaticBroker,
    Default,
    Other,
}

/// One config of a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigValue {
    /// `None` for sensitive values Kafka does not reveal.
    pub value: Option<String>,
    pub source: ConfigSource,
}

impl ConfigValue {
    pub fn dynamic(value: impl Into<String>) -> Self {
        Self {
            value: Some(value.into()),
            source: ConfigSource::DynamicTopic,
        }
    }

    pub fn inherited(value: impl Into<String>, source: ConfigSource) -> Self {
        Self {
            value: Some(value.into()),
            source,
        }
    }
}

/// A reassignment in progress on one partition (ListPartitionReassignments).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reassignment {
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
}

/// One partition as Kafka describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    pub id: i32,
    /// In preference order: the first one is the preferred leader. While a reassignment runs,
    /// Kafka lists the union of the old and the new replicas here.
    pub replicas: Vec<i32>,
    /// `None` when the partition has no leader right now.
    pub leader: Option<i32>,
    pub reassignment: Option<Reassignment>,
}

impl PartitionState {
    pub fn new(id: i32, replicas: Vec<i32>) -> Self {
        let leader = replicas.first().copied();
        Self {
            id,
            replicas,
            leader,
            reassignment: None,
        }
    }

    /// The replicas the partition will have once any running reassignment ends, so that a
    /// replication-factor change already under way is not seen as still to do.
    pub fn target_replicas(&self) -> Vec<i32> {
        match &self.reassignment {
            Some(r) => self
                .replicas
                .iter()
                .copied()
                .filter(|b| !r.removing.contains(b))
                .collect(),
            None => self.replicas.clone(),
        }
    }
}

/// A topic as Kafka describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentTopic {
    pub topic_id: String,
    pub partitions: Vec<PartitionState>,
    /// Every config DescribeConfigs returned, inherited ones included.
    pub configs: BTreeMap<String, ConfigValue>,
}

/// One IncrementalAlterConfigs operation.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConfigOp {
    Set {
        name: String,
        value: String,
    },
    /// Removes the topic's own value so the broker's (or Kafka's) default applies again.
    Delete {
        name: String,
    },
}

impl ConfigOp {
    pub fn name(&self) -> &str {
        match self {
            ConfigOp::Set { name, .. } | ConfigOp::Delete { name } => name,
        }
    }
}
