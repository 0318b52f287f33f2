//! Planning one topic: compares a KafkaTopic's spec with the topic Kafka describes and says what
//! to create or change, following Strimzi's rules for what counts as a difference.

use std::collections::{BTreeMap, BTreeSet};

use super::model::{ConfigOp, ConfigSource, CurrentTopic};

/// The topic config that bounds how low the replication factor may usefully go.
pub const MIN_INSYNC_REPLICAS: &str = "min.insync.replicas";
/// Kafka's default for `min.insync.replicas`, used when nothing else is known.
pub const DEFAULT_MIN_INSYNC_REPLICAS: i32 = 1;

/// What the KafkaTopic asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DesiredTopic {
    /// `spec.topicName`, or `metadata.name` when unset.
    pub name: String,
    /// `spec.partitions`; `None` leaves the count to the broker default at creation and never
    /// changes it afterwards.
    pub partitions: Option<i32>,
    /// `spec.replicas`; `None` likewise.
    pub replicas: Option<i16>,
    /// `spec.config`, each value already rendered as Kafka's string form.
    pub config: BTreeMap<String, String>,
    /// `status.topicName`: the topic this resource was reconciled with before, if any.
    pub status_topic_name: Option<String>,
}

/// A CreateTopics request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateTopic {
    pub name: String,
    /// `None`: the broker's `num.partitions`.
    pub partitions: Option<i32>,
    /// `None`: the broker's `default.replication.factor`.
    pub replicas: Option<i16>,
    pub configs: BTreeMap<String, String>,
}

/// A replication-factor change to carry out with partition reassignments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RfChange {
    pub target: i16,
    /// Partitions whose replica count (after any running reassignment) is not `target`.
    pub partitions: Vec<i32>,
}

/// Why part of the spec cannot be applied; reported as `Ready=False`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanProblem {
    #[error(
        "Decreasing partitions not supported: topic {topic} has {current} partitions and \
         spec.partitions asks for {requested}; set spec.partitions to {current} or more \
         (Kafka cannot remove partitions; create a new topic to have fewer)"
    )]
    PartitionDecrease {
        topic: String,
        current: i32,
        requested: i32,
    },
    #[error(
        "Changing spec.topicName is not supported: this KafkaTopic manages topic {from}; set \
         spec.topicName back to {from}, or create a new KafkaTopic for {to}"
    )]
    TopicNameChanged { from: String, to: String },
}

impl PlanProblem {
    /// The condition reason, stable for users' alerting.
    pub fn reason(&self) -> &'static str {
        match self {
            PlanProblem::PartitionDecrease { .. } | PlanProblem::TopicNameChanged { .. } => {
                "NotSupported"
            }
        }
    }
}

/// Something applied as asked but worth telling the user; reported as a `Warning` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanWarning {
    /// Producers with `acks=all` would fail: fewer replicas than must be in sync.
    ReplicasBelowMinIsr { replicas: i16, min_isr: i32 },
}

impl PlanWarning {
    pub fn reason(&self) -> &'static str {
        match self {
            PlanWarning::ReplicasBelowMinIsr { .. } => "ReplicasBelowMinInsyncReplicas",
        }
    }

    pub fn message(&self) -> String {
        match self {
            PlanWarning::ReplicasBelowMinIsr { replicas, min_isr } => format!(
                "The target replication factor ({replicas}) is below the configured \
                 {MIN_INSYNC_REPLICAS} ({min_isr}): producers with acks=all will fail; raise \
                 spec.replicas or lower {MIN_INSYNC_REPLICAS}"
            ),
        }
    }
}

/// Everything to do for one topic. When `create` is set, the rest is empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicPlan {
    pub create: Option<CreateTopic>,
    /// Sorted by config name, so the same inputs give the same request.
    pub config_ops: Vec<ConfigOp>,
    /// CreatePartitions to this total.
    pub increase_partitions_to: Option<i32>,
    pub rf_change: Option<RfChange>,
    pub problems: Vec<PlanProblem>,
    pub warnings: Vec<PlanWarning>,
}

impl TopicPlan {
    /// True when Kafka needs no request at all.
    pub fn has_no_changes(&self) -> bool {
        self.create.is_none()
            && self.config_ops.is_empty()
            && self.increase_partitions_to.is_none()
            && self.rf_change.is_none()
    }
}

/// Plans one topic. `current` is `None` when Kafka has no topic of that name; a topic that
/// exists is adopted and reconciled like any update.
pub fn plan(desired: &DesiredTopic, current: Option<&CurrentTopic>) -> TopicPlan {
    let mut out = TopicPlan::default();
    if let Some(from) = &desired.status_topic_name
        && *from != desired.name
    {
        // Strimzi stops here: acting on either name would be wrong.
        out.problems.push(PlanProblem::TopicNameChanged {
            from: from.clone(),
            to: desired.name.clone(),
        });
        return out;
    }
    out.warnings = min_isr_warning(desired, current).into_iter().collect();
    let Some(current) = current else {
        out.create = Some(CreateTopic {
            name: desired.name.clone(),
            partitions: desired.partitions,
            replicas: desired.replicas,
            configs: desired.config.clone(),
        });
        return out;
    };
    out.config_ops = config_ops(desired, current);

    let have = i32::try_from(current.partitions.len()).unwrap_or(i32::MAX);
    match desired.partitions {
        Some(want) if want > have => out.increase_partitions_to = Some(want),
        Some(want) if want < have => out.problems.push(PlanProblem::PartitionDecrease {
            topic: desired.name.clone(),
            current: have,
            requested: want,
        }),
        _ => {}
    }

    if let Some(target) = desired.replicas {
        // Partitions added by this plan get `target` replicas from CreatePartitions' default
        // only if the broker default matches, so only existing partitions are judged here and
        // the next reconcile catches the new ones.
        let partitions: Vec<i32> = current
            .partitions
            .iter()
            .filter(|p| p.target_replicas().len() != usize::try_from(target).unwrap_or(0))
            .map(|p| p.id)
            .collect();
        if !partitions.is_empty() {
            out.rf_change = Some(RfChange { target, partitions });
        }
    }
    out
}

/// SET every spec key whose value differs from what Kafka reports (from any source, so a spec
/// value equal to an inherited default needs nothing), DELETE every key set on the topic itself
/// that the spec no longer names: changes made directly in Kafka are reverted.
fn config_ops(desired: &DesiredTopic, current: &CurrentTopic) -> Vec<ConfigOp> {
    let mut ops = BTreeSet::new();
    for (name, value) in &desired.config {
        let same = current
            .configs
            .get(name)
            .and_then(|c| c.value.as_deref())
            .is_some_and(|v| v == value);
        if !same {
            ops.insert(ConfigOp::Set {
                name: name.clone(),
                value: value.clone(),
            });
        }
    }
    for (name, c) in &current.configs {
        if c.source == ConfigSource::DynamicTopic && !desired.config.contains_key(name) {
            ops.insert(ConfigOp::Delete { name: name.clone() });
        }
    }
    // Names are unique across SET and DELETE, so sorting the ops sorts by name.
    let mut ops: Vec<ConfigOp> = ops.into_iter().collect();
    ops.sort_by(|a, b| a.name().cmp(b.name()));
    ops
}

/// The spec's `min.insync.replicas` wins, then what Kafka reports for the topic (inherited
/// broker values included), then Kafka's default. Unparsable values give no warning rather than
/// a wrong one.
fn min_isr_warning(desired: &DesiredTopic, current: Option<&CurrentTopic>) -> Option<PlanWarning> {
    let replicas = desired.replicas?;
    let min_isr = match desired.config.get(MIN_INSYNC_REPLICAS) {
        Some(v) => v.trim().parse::<i32>().ok()?,
        None => match current
            .and_then(|c| c.configs.get(MIN_INSYNC_REPLICAS))
            .and_then(|c| c.value.as_deref())
        {
            Some(v) => v.trim().parse::<i32>().ok()?,
            None => DEFAULT_MIN_INSYNC_REPLICAS,
        },
    };
    (i32::from(replicas) < min_isr)
        .then_some(PlanWarning::ReplicasBelowMinIsr { replicas, min_isr })
}
