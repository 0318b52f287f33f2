//! kstretch's domain logic with no Kubernetes client and no network in it, so that it is
//! unit-tested with plain `cargo test` and property-tested.

pub mod cluster;
pub mod cron;
pub mod kraft;
pub mod movement;
pub mod node_ids;
pub mod quorum;
pub mod topics;
pub mod versions;
