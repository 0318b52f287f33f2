//! The `KafkaOperation` kind (`kstretch.io`, kstretch's own): a long-running change to where a
//! Kafka's data lives (drain a Kubernetes cluster for maintenance, undo a drain, spread
//! partitions across clusters), carried out by
//! central one safe step at a time. Its plan and progress live in its status, so the operation
//! survives a central restart and is visible to `kubectl` as well as `kstretch`.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::condition::Condition;

/// The group of kstretch's own kinds.
pub const GROUP: &str = "kstretch.io";

/// `spec.replicationThrottle` when an operation names none: 50 MiB/s per broker.
pub const DEFAULT_REPLICATION_THROTTLE: u64 = 50 * 1024 * 1024;

#[allow(clippy::duplicated_attributes)]
/// What to do to the Kafka named by the `strimzi.io/cluster` label. Exactly one of `drain`,
/// `undrain`, `spread`, `forget` and `recoverQuorum` is set; the spec is read once, when the
/// operation starts.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kstretch.io",
    version = "v1alpha1",
    kind = "KafkaOperation",
    plural = "kafkaoperations",
    singular = "kafkaoperation",
    shortname = "kop",
    category = "kstretch",
    namespaced,
    status = "KafkaOperationStatus",
    derive = "PartialEq",
    doc = "A long-running change to where a Kafka's partitions live (drain a Kubernetes cluster, undo a drain, spread partitions across clusters), planned and carried out by kstretch central.",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels.strimzi\\.io/cluster",
        description = "The Kafka cluster operated on"
    ),
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Pending, Planned, Running, Completed, Aborted or Refused"
    ),
    printcolumn(
        name = "Left",
        type_ = "integer",
        json_path = ".status.partitionsLeft",
        description = "Partitions still to move"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct KafkaOperationSpec {
    /// Moves every partition replica and all leadership off the brokers of one Kubernetes
    /// cluster; the pods keep running (maintenance). Undone by an `undrain`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain: Option<Drain>,
    /// Puts the partitions a completed drain moved back where they were, leaders included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undrain: Option<Undrain>,
    /// Gives every partition replicas in as many Kubernetes clusters as its replication factor
    /// allows (partitions whose replicas all sit in one cluster are lost with it); leaders stay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<Spread>,
    /// Restores the replication factor of every partition that had replicas on the brokers of
    /// a forgotten Kubernetes cluster (lost for good), on the brokers that survive. Central
    /// creates it when the `Kafka` names the cluster in `kstretch.io/forgotten-clusters`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forget: Option<Forget>,
    /// Rebuilds a dynamic controller quorum whose majority was lost for good with forgotten
    /// Kubernetes clusters, from one surviving controller, which becomes the only voter. What
    /// only the lost voters had written is lost; partitions left without a leader get an
    /// unclean election. Never started by central itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recover_quorum: Option<RecoverQuorum>,
    /// Plan only: the status shows what would move, how many bytes and how long at the
    /// throttle; nothing changes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// Bytes per second each broker may spend copying moved replicas (Kafka's replication
    /// throttle). Default 50 MiB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_throttle: Option<i64>,
    /// Stops the operation at a consistent point: reassignments in flight are cancelled (their
    /// partitions keep their old replicas) and the throttle is removed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub abort: bool,
}

/// The phases of an operation (`.status.phase`).
pub mod phase {
    /// Waiting for an older operation on the same Kafka to end.
    pub const PENDING: &str = "Pending";
    /// A dry run's plan is in the status; nothing was changed.
    pub const PLANNED: &str = "Planned";
    pub const RUNNING: &str = "Running";
    pub const COMPLETED: &str = "Completed";
    pub const ABORTED: &str = "Aborted";
    /// The operation cannot be carried out as asked; the `Ready` condition says why.
    pub const REFUSED: &str = "Refused";

    /// Whether the operation has ended (nothing more happens to it).
    pub fn ended(phase: Option<&str>) -> bool {
        matches!(phase, Some(PLANNED | COMPLETED | ABORTED))
    }
}

/// The lost cluster whose replicas are replaced.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Forget {
    /// The alias of the forgotten Kubernetes cluster.
    pub cluster: String,
    /// The node IDs its pools had (central records them, so brokers already unregistered or
    /// never registered are still known as lost).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_ids: Vec<i32>,
}

/// The surviving controller a quorum is rebuilt from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecoverQuorum {
    /// Its node ID; may be left out when exactly one voter survives (central then takes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<i32>,
}

/// Drain one member cluster, or chosen brokers (exactly one of the two).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Drain {
    /// The alias of the Kubernetes cluster to drain (`strimzi.io/stretch-cluster-alias`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    /// The node IDs of the brokers to drain (central drains the nodes a moving pool leaves
    /// behind so).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_ids: Vec<i32>,
}

/// Undo a drain.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Undrain {
    /// The name of the completed drain operation (same namespace) whose placement to restore.
    pub drain: String,
}

/// Spread partitions across clusters (`spread: {}` for every topic).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Spread {
    /// Only the partitions of these topics (default: every topic).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topics: Vec<String>,
}

/// Of `ops` (one Kafka's operations), the completed drains that moved something and that no
/// completed undrain has undone: their clusters are meant to hold no partitions.
pub fn drains_in_effect(ops: &[KafkaOperation]) -> Vec<&KafkaOperation> {
    use kube::ResourceExt;
    let completed = |o: &KafkaOperation| {
        o.status.as_ref().and_then(|s| s.phase.as_deref()) == Some(phase::COMPLETED)
    };
    let undone: Vec<&str> = ops
        .iter()
        .filter(|o| completed(o))
        .filter_map(|o| o.spec.undrain.as_ref().map(|u| u.drain.as_str()))
        .collect();
    // A drain of chosen brokers (a pool move's) is not a cluster meant to stay empty.
    ops.iter()
        .filter(|o| o.spec.drain.as_ref().is_some_and(|d| !d.cluster.is_empty()))
        .filter(|o| completed(o))
        .filter(|o| !undone.contains(&o.name_any().as_str()))
        .filter(|o| o.status.as_ref().is_some_and(|s| !s.placement.is_empty()))
        .collect()
}

/// Where the operation stands.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KafkaOperationStatus {
    /// `Pending` (waiting for its turn), `Planned` (a dry run), `Running`, `Completed`,
    /// `Aborted`, or `Refused` (see the `Ready` condition's message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The plan as first made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanSummary>,
    /// Partitions still to move or to be led elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions_left: Option<i64>,
    /// `topic-partition` of the reassignments this operation has in flight.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub in_flight: Vec<String>,
    /// Batches of reassignments submitted so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batches: Option<i64>,
    /// The throttle in force, in bytes per second per broker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_throttle: Option<i64>,
    /// Topics and brokers that hold throttle settings of this operation (removed at the end).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub throttled_topics: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub throttled_brokers: Vec<i32>,
    /// A drain's record of the partitions it moves, as they were before it started: topic →
    /// `partition=replica,replica,...` (preferred leader first). What an undrain restores.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub placement: BTreeMap<String, Vec<String>>,
    /// The brokers a drain emptied (their node IDs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drained_brokers: Vec<i32>,
    /// A quorum recovery's progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<QuorumRecoveryStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
}

/// Where a quorum recovery stands.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuorumRecoveryStatus {
    /// The surviving controller the quorum is rebuilt from.
    pub node_id: i32,
    /// Its Kubernetes cluster and pod.
    pub cluster: String,
    pub pod: String,
    /// The voters lost for good (in forgotten clusters).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost_voters: Vec<i32>,
    /// The UID of the pod that was restarted to run the recovery before Kafka starts; unset
    /// until central restarts it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarted_pod_uid: Option<String>,
    /// What the recovery wrote, as its tool reported it (voters before, epoch, offset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written: Option<String>,
    /// `topic-partition` of the partitions that had no leader afterwards and were given one by
    /// an unclean election (records their new leader had not replicated are lost).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unclean_elections: Vec<String>,
}

/// What the plan moves.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanSummary {
    /// Partitions whose replicas move.
    pub partitions: i64,
    /// Partitions whose leadership moves first.
    pub leadership_changes: i64,
    /// Bytes copied.
    pub bytes: i64,
    /// Seconds the copying takes at the throttle (the busiest receiving broker deciding).
    pub seconds_at_throttle: i64,
    /// Partitions left where they are because they are below `min.insync.replicas`, or (for an
    /// undrain) because a recorded broker is gone: `topic-partition`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_alone: Vec<String>,
}
