//! A Kafka cluster and its node pools as central sees them, and the rules they must follow.

mod validate;

pub use validate::{PoolShape, Problem, validate_pools};
