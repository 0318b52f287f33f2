//! The warnings a `Kafka` shows (its `Warning` conditions, each also an Event once): one
//! [`Reason`] per cause with its one stable reason string, and what a reason asks of the
//! reconciliation's timing, so that when to look again follows from what was found.

use std::time::Duration;

/// A `Kafka` is looked at again this often while a pool moves (or a cluster is forgotten): a
/// drain's progress is not something central watches.
pub const MOVE_RECHECK: Duration = Duration::from_secs(10);
/// A scale-down waiting for its brokers' replicas to move is checked against Kafka again this
/// often: moving them changes nothing central watches.
pub const BLOCKED_RECHECK: Duration = Duration::from_secs(30);
/// While certificate renewals wait for a maintenance window, a `Kafka` is looked at again this
/// often, so a window is not missed by more than this.
pub const WINDOW_RECHECK: Duration = Duration::from_secs(30);

/// Why a `Kafka` warns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// A listener, configuration option or rack setting left out of the nodes' configuration.
    ConfigurationIgnored,
    /// A field Strimzi acts on and kstretch does not ([`crate::unserved`]).
    NotActedOn,
    /// Something Strimzi deprecates (its reason string).
    DeprecatedObjects,
    /// A pool's node-ID annotation that cannot be honoured.
    NodeIdAnnotationIgnored,
    /// A pool moves to another member cluster; what its leaving nodes wait for.
    PoolMoving,
    /// A move's drain was aborted or refused: the move waits for the user.
    PoolMoveStalled,
    /// A scale-down waits while its brokers hold partition replicas.
    ScaleDownBlocked,
    /// A scale-down waits for something else (its cluster's agent, Kafka's answer).
    ScaleDownDeferred,
    /// Controllers stop once they are removed from the quorum's voters.
    VoterRemovalPending,
    /// Partitions whose replicas all sit in one member cluster.
    ReplicasInOneCluster,
    /// The nodes change Kafka version.
    KafkaVersionChanging,
    /// `metadata.version` is not raised yet.
    MetadataVersionPending,
    /// A member cluster is forgotten; its forget operation's progress.
    ClusterForgotten,
    /// Partitions lost with a forgotten cluster.
    PartitionsLost,
    /// A forget operation was aborted or refused.
    ForgetStalled,
    /// The controller quorum is being rebuilt from a survivor.
    QuorumRecovery,
    /// A static quorum cannot be made dynamic on this Kafka version.
    QuorumMigrationUnsupported,
    /// A static quorum is being made dynamic.
    QuorumMigrationPending,
    /// The quorum's voters are changing.
    QuorumChangePending,
    /// A member cluster's agent is not connected.
    ClusterUnreachable,
    /// Removed nodes are not unregistered yet.
    UnregistrationPending,
    /// Unregistering a removed node failed.
    UnregistrationFailed,
    /// A roll waits: it would take partitions below `min.insync.replicas` or the quorum below
    /// a majority.
    RollingUpdateBlocked,
    /// A pod asks for new disks (`strimzi.io/delete-pod-and-pvc`) and holds the only in-sync
    /// copy of partitions.
    NewDisksHeldBack,
    /// An agent could not apply some of the objects.
    ApplyFailed,
    /// Certificate renewals wait for a maintenance window.
    CertificateRenewalPostponed,
    /// A maintenance window is not a Quartz cron expression.
    InvalidMaintenanceTimeWindows,
    /// `kafkaExporter` is set and no exporter runs: what it asks for cannot run, or where it
    /// would run is not known yet.
    KafkaExporterNotDeployed,
}

impl Reason {
    /// The condition's and the Event's reason.
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::ConfigurationIgnored => "ConfigurationIgnored",
            Reason::NotActedOn => crate::unserved::NOT_ACTED_ON,
            Reason::DeprecatedObjects => "DeprecatedObjects",
            Reason::NodeIdAnnotationIgnored => "NodeIdAnnotationIgnored",
            Reason::PoolMoving => "PoolMoving",
            Reason::PoolMoveStalled => "PoolMoveStalled",
            Reason::ScaleDownBlocked => "ScaleDownBlocked",
            Reason::ScaleDownDeferred => "ScaleDownDeferred",
            Reason::VoterRemovalPending => "VoterRemovalPending",
            Reason::ReplicasInOneCluster => "ReplicasInOneCluster",
            Reason::KafkaVersionChanging => "KafkaVersionChanging",
            Reason::MetadataVersionPending => "MetadataVersionPending",
            Reason::ClusterForgotten => "ClusterForgotten",
            Reason::PartitionsLost => "PartitionsLost",
            Reason::ForgetStalled => "ForgetStalled",
            Reason::QuorumRecovery => "QuorumRecovery",
            Reason::QuorumMigrationUnsupported => "QuorumMigrationUnsupported",
            Reason::QuorumMigrationPending => "QuorumMigrationPending",
            Reason::QuorumChangePending => "QuorumChangePending",
            Reason::ClusterUnreachable => "ClusterUnreachable",
            Reason::UnregistrationPending => "UnregistrationPending",
            Reason::UnregistrationFailed => "UnregistrationFailed",
            Reason::RollingUpdateBlocked => "RollingUpdateBlocked",
            Reason::NewDisksHeldBack => "NewDisksHeldBack",
            Reason::ApplyFailed => "ApplyFailed",
            Reason::CertificateRenewalPostponed => "CertificateRenewalPostponed",
            Reason::InvalidMaintenanceTimeWindows => "InvalidMaintenanceTimeWindows",
            Reason::KafkaExporterNotDeployed => "KafkaExporterNotDeployed",
        }
    }

    /// How soon a cluster that shows this warning, and is otherwise settled, is looked at
    /// again: what it waits for changes nothing central watches.
    pub const fn recheck(self) -> Option<Duration> {
        match self {
            Reason::PoolMoving => Some(MOVE_RECHECK),
            Reason::ScaleDownBlocked | Reason::NewDisksHeldBack => Some(BLOCKED_RECHECK),
            Reason::CertificateRenewalPostponed => Some(WINDOW_RECHECK),
            // Waiting for the agent of its cluster to say which image it runs.
            Reason::KafkaExporterNotDeployed => Some(BLOCKED_RECHECK),
            _ => None,
        }
    }
}

impl crate::status::Reason for Reason {
    fn as_str(self) -> &'static str {
        Reason::as_str(self)
    }
}

/// One warning of a `Kafka`: why, and what to tell the user.
pub type Warning = crate::status::Warning<Reason>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_stable_and_the_waiting_ones_are_looked_at_again() {
        assert_eq!(Reason::PoolMoving.as_str(), "PoolMoving");
        assert_eq!(Reason::NotActedOn.as_str(), "NotActedOn");
        assert_eq!(Reason::PoolMoving.recheck(), Some(MOVE_RECHECK));
        assert_eq!(Reason::ScaleDownBlocked.recheck(), Some(BLOCKED_RECHECK));
        assert_eq!(Reason::ConfigurationIgnored.recheck(), None);
    }
}
