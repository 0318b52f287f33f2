//! The warnings a `KafkaConnect` shows (its `Warning` conditions): one [`Reason`] per cause
//! with its one stable reason string.

/// Why a `KafkaConnect` warns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// `config` sets keys the operator manages: they are ignored.
    ForbiddenConfigIgnored,
    /// The group ID and storage topics took Strimzi's defaults.
    DefaultGroupIdAndTopics,
    /// A field Strimzi acts on and kstretch does not ([`crate::unserved`]).
    NotActedOn,
    /// The agent could not apply objects of the workers.
    ApplyFailed,
}

impl crate::status::Reason for Reason {
    fn as_str(self) -> &'static str {
        match self {
            Reason::ForbiddenConfigIgnored => "ForbiddenConfigIgnored",
            Reason::DefaultGroupIdAndTopics => "DefaultGroupIdAndTopics",
            Reason::NotActedOn => crate::unserved::NOT_ACTED_ON,
            Reason::ApplyFailed => "ApplyFailed",
        }
    }
}

/// One warning of a `KafkaConnect`.
pub type Warning = crate::status::Warning<Reason>;
