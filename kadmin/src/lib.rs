//! kstretch's async Kafka admin client, on the `kafka-protocol` crate.
