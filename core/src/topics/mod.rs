//! The topic operator's decisions, free of Kubernetes and Kafka clients: what to change on a
//! topic so that Kafka matches its KafkaTopic, which configs may be altered, where replicas go on
//! a replication-factor change, which KafkaTopic owns a topic and which namespace may name it.

mod alterable;
mod model;
mod plan;
mod policy;
mod reassign;

pub use alterable::{AlterableConfigs, FilteredOps};
pub use model::{ConfigOp, ConfigSource, ConfigValue, CurrentTopic, PartitionState, Reassignment};
pub use plan::{
    CreateTopic, DEFAULT_MIN_INSYNC_REPLICAS, DesiredTopic, MIN_INSYNC_REPLICAS, PlanProblem,
    PlanWarning, RfChange, TopicPlan, plan,
};
pub use policy::{
    NamespacePolicy, NamespaceRule, Ownership, PolicyError, PolicyViolation, ResourceConflict,
    ResourceRef, TopicResource, resolve_ownership,
};
pub use reassign::{
    Broker, ReassignError, ReplicasChangeState, progress, target_assignments, to_submit,
};

#[cfg(test)]
mod tests;
