//! Writing `Kafka` and `KafkaNodePool` status through [`crate::status::apply`], only when it
//! changed; their conditions are [`crate::status::conditions`]'.

use kstretch_api::{Kafka, KafkaNodePool, KafkaNodePoolStatus, KafkaStatus};
use kube::Client;

use crate::error::Error;

pub use crate::status::{FIELD_MANAGER, conditions, not_ready, now};

/// Applies `status` to `kafka` unless it is what the resource already has.
pub async fn apply_kafka(client: &Client, kafka: &Kafka, status: KafkaStatus) -> Result<(), Error> {
    Ok(crate::status::apply(client, kafka, status, |k| k.status.as_ref()).await?)
}

/// Applies `status` to `pool` unless it is what the resource already has.
pub async fn apply_pool(
    client: &Client,
    pool: &KafkaNodePool,
    status: KafkaNodePoolStatus,
) -> Result<(), Error> {
    Ok(crate::status::apply(client, pool, status, |p| p.status.as_ref()).await?)
}
