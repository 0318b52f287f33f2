//! Kafka node IDs: parsing the `strimzi.io/next-node-ids` / `strimzi.io/remove-node-ids`
//! annotations and assigning IDs to node pools as they scale.

mod assign;
mod changes;
mod range;

pub use assign::{Assignment, AssignmentError, Assignments, PoolIds, Role, assign};
pub use changes::id_changes;
pub use range::{NodeIdRange, RangeError};
