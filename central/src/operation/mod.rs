//! The operation controller: `KafkaOperation`s (drain a member cluster's brokers, undo a drain,
//! spread, replace a forgotten cluster's replicas, start a quorum recovery) carried out on the
//! Kafka their `strimzi.io/cluster` label names, one safe step per reconciliation. This file
//! wires the controller; `reconcile` holds the pipeline, `spec` its pure reading of the spec,
//! `steps` the Kafka side, `recover` a recovery's start, `status` the status writer. What moves where is decided in
//! `kstretch_core::movement`.

pub mod reconcile;
pub mod recover;
pub mod spec;
pub mod status;
pub mod steps;

use std::sync::Arc;

use kstretch_api::KafkaOperation;
use kube::Api;
use tokio_util::sync::CancellationToken;

pub use crate::controller::Context;

/// Prometheus metrics of the operation controller.
pub type OperationMetrics = crate::metrics::ControllerMetrics;

/// Runs the controller until `shutdown`.
pub async fn run(
    ops: Vec<(Option<String>, Api<KafkaOperation>)>,
    ctx: Arc<Context>,
    shutdown: CancellationToken,
) {
    crate::controller::run(ops, ctx, shutdown, reconcile::apply).await;
}
