//! The warnings a `KafkaTopic` shows (its `Warning` conditions): one [`Reason`] per cause with
//! its one stable reason string.

use kstretch_core::topics::{AlterableConfigs, PlanWarning};

/// Why a `KafkaTopic` warns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// A config the operator may not alter is left as Kafka has it (Strimzi's reason).
    InvalidConfig,
    /// Fewer replicas than `min.insync.replicas`: producers with `acks=all` would fail.
    ReplicasBelowMinInsyncReplicas,
}

impl crate::status::Reason for Reason {
    fn as_str(self) -> &'static str {
        match self {
            // Strimzi's reason, as the core crate names it.
            Reason::InvalidConfig => AlterableConfigs::warning_reason(),
            Reason::ReplicasBelowMinInsyncReplicas => "ReplicasBelowMinInsyncReplicas",
        }
    }
}

/// One warning of a `KafkaTopic`.
pub type Warning = crate::status::Warning<Reason>;

/// The warning the topic planner gave.
pub fn of_plan(w: &PlanWarning) -> Warning {
    let reason = match w {
        PlanWarning::ReplicasBelowMinIsr { .. } => Reason::ReplicasBelowMinInsyncReplicas,
    };
    Warning::new(reason, w.message())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::Reason as _;

    #[test]
    fn the_planners_warning_keeps_its_reason() {
        let w = PlanWarning::ReplicasBelowMinIsr {
            replicas: 1,
            min_isr: 2,
        };
        assert_eq!(of_plan(&w).reason.as_str(), w.reason());
        assert_eq!(of_plan(&w).message, w.message());
    }
}
