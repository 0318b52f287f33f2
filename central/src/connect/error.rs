//! Why a `KafkaConnect` reconciliation failed transiently: the same causes, with the same stable
//! reasons, as a `Kafka`'s (a resource the user must fix is reported in its status instead).

pub use crate::error::Error;
