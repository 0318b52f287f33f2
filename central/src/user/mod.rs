//! The user operator: `KafkaUser`s reconciled against the Kafka their `strimzi.io/cluster`
//! label names, with the semantics of Strimzi's user operator. This file wires the controller;
//! `reconcile` holds the pipeline, `desired` its pure reading of the spec, `secret` the user's
//! Secret and `grants` what Kafka holds for the user.

pub mod desired;
pub mod grants;
pub mod reconcile;
pub mod secret;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kstretch_api::{Kafka, KafkaUser};
use kstretch_runtime::backoff::Backoff;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::kafka::checks::KafkaAccess;

/// Finalizer that makes deleting a `KafkaUser` revoke its credentials, ACLs and quotas.
pub use kstretch_api::names::USER_OPERATOR_FINALIZER as FINALIZER;

/// Everything a reconciliation needs.
pub struct Context {
    pub client: Client,
    /// Every `Kafka` central watches (the inventory's cache; no watch of its own).
    pub kafkas: Store<Kafka>,
    /// Admin clients and where each `Kafka` is reached, shared with the Kafka reconciler.
    pub access: KafkaAccess,
    pub metrics: UserMetrics,
    retries: Backoff<(String, String)>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").finish_non_exhaustive()
    }
}

impl Context {
    pub fn new(
        client: Client,
        kafkas: Store<Kafka>,
        access: KafkaAccess,
        metrics: UserMetrics,
    ) -> Self {
        Self {
            client,
            kafkas,
            access,
            metrics,
            retries: Backoff::new(Duration::from_secs(60)),
        }
    }
}

/// Runs the controller until `shutdown`.
pub async fn run(users: Api<KafkaUser>, ctx: Arc<Context>, shutdown: CancellationToken) {
    tracing::info!("user operator starting");
    Controller::new(users, watcher::Config::default())
        .with_config(controller::Config::default().debounce(Duration::from_millis(200)))
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .run(
            |user, ctx: Arc<Context>| {
                let span = tracing::info_span!("reconcile", namespace = %user.namespace().unwrap_or_default(), user = %user.name_any());
                async move {
                    ctx.metrics.reconciliations.inc();
                    reconcile::apply(user, ctx).await
                }
                .instrument(span)
            },
            error_policy,
            ctx,
        )
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "reconcile result");
            }
        })
        .await;
}

fn error_policy(user: Arc<KafkaUser>, error: &reconcile::Error, ctx: Arc<Context>) -> Action {
    tracing::warn!(user = %user.name_any(), reason = error.reason(), %error, "reconcile failed; retrying");
    ctx.metrics.failed(error.reason());
    Action::requeue(ctx.retries.failed(reconcile::key(&user)))
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: String,
}

/// Prometheus metrics of the user operator. Cheap to clone: every handle shares the values.
#[derive(Debug, Clone, Default)]
pub struct UserMetrics {
    reconciliations: Counter,
    failed: Family<ReasonLabel, Counter>,
}

impl UserMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        let r = registry.sub_registry_with_prefix("user");
        r.register(
            "reconciliations",
            "KafkaUser reconciliations",
            m.reconciliations.clone(),
        );
        r.register(
            "reconciliations_failed",
            "KafkaUser reconciliations that ended with Ready=False, per reason",
            m.failed.clone(),
        );
        m
    }

    pub fn failed(&self, reason: &str) {
        self.failed
            .get_or_create(&ReasonLabel {
                reason: reason.to_owned(),
            })
            .inc();
    }
}
