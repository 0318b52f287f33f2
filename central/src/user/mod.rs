//! The user operator: `KafkaUser`s reconciled against the Kafka their `strimzi.io/cluster`
//! label names, with the semantics of Strimzi's user operator. This file wires the controller;
//! `reconcile` holds the pipeline, `desired` its pure reading of the spec, `secret` the user's
//! Secret and `grants` what Kafka holds for the user.

pub mod desired;
pub mod grants;
pub mod reconcile;
pub mod secret;

use std::sync::Arc;

use kstretch_api::KafkaUser;
use kube::Api;
use tokio_util::sync::CancellationToken;

pub use crate::controller::Context;

/// Finalizer that makes deleting a `KafkaUser` revoke its credentials, ACLs and quotas.
pub use kstretch_api::names::USER_OPERATOR_FINALIZER as FINALIZER;

/// Runs the controller until `shutdown`.
pub async fn run(
    users: Vec<(Option<String>, Api<KafkaUser>)>,
    ctx: Arc<Context>,
    shutdown: CancellationToken,
) {
    crate::controller::run(users, ctx, shutdown, reconcile::apply).await;
}

/// Prometheus metrics of the user operator.
pub type UserMetrics = crate::metrics::ControllerMetrics;
