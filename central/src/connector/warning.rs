//! The warnings a `KafkaConnector` shows (its `Warning` conditions): one [`Reason`] per cause
//! with its one stable reason string.

/// Why a `KafkaConnector` warns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// `config` sets keys the operator sets itself: they are ignored.
    IgnoredConfig,
    /// Listing the connector's offsets failed.
    ListOffsets,
    /// Altering the connector's offsets failed.
    AlterOffsets,
    /// Resetting the connector's offsets failed.
    ResetOffsets,
    /// The offsets annotation names no operation kstretch knows.
    ManageOffsets,
    /// `strimzi.io/restart` is malformed, or the restart failed.
    RestartConnector,
    /// `strimzi.io/restart-task` is malformed, or the task's restart failed.
    RestartConnectorTask,
}

impl crate::status::Reason for Reason {
    fn as_str(self) -> &'static str {
        match self {
            Reason::IgnoredConfig => "IgnoredConfig",
            Reason::ListOffsets => "ListOffsets",
            Reason::AlterOffsets => "AlterOffsets",
            Reason::ResetOffsets => "ResetOffsets",
            Reason::ManageOffsets => "ManageOffsets",
            Reason::RestartConnector => "RestartConnector",
            Reason::RestartConnectorTask => "RestartConnectorTask",
        }
    }
}

/// One warning of a `KafkaConnector`.
pub type Warning = crate::status::Warning<Reason>;
