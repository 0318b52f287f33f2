//! kstretch's real-environment test harness: access to the simulated Kubernetes clusters, the
//! real Kafka and Kafka Connect that `tests/env/up.sh` starts, and helpers to wait on them.
//!
//! Every end-to-end test takes [`TestEnv::get`], works in its own [`TestNamespace`]s with unique
//! names (so tests run in parallel), and checks results through an independent path: plain
//! kube reads, `rdkafka` for Kafka, HTTP for Connect.

// Test support code: a failed expectation is a test failure, so panicking is the point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod central;
pub mod certs;
pub mod charts;
pub mod clients;
pub mod cluster;
pub mod connect;
pub mod connectors;
pub mod crds;
pub mod env;
pub mod events;
pub mod fixtures;
pub mod helm;
pub mod kafka;
pub mod kraft;
pub mod live;
pub mod load;
pub mod moves;
pub mod process;
pub mod prometheus;
pub mod rawlink;
pub mod ready;
pub mod rotation;
pub mod stretch;
pub mod topics;
pub mod wait;

pub use cluster::{Cluster, TestNamespace};
pub use env::TestEnv;
pub use wait::{wait_for, wait_for_object};
