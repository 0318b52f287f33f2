//! What central's controllers of Kafka-side resources share (the user operator, the operation
//! controller): one context (the client, the `Kafka` cache, Kafka access, metrics, backoff),
//! one error type, and one run loop with a span per reconciliation and one error policy.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kstretch_api::Kafka;
use kstretch_runtime::backoff::Backoff;
use kube::runtime::controller::{self, Action};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::kafka::checks::KafkaAccess;
use crate::metrics::ControllerMetrics;
use crate::topic::clusters::TargetError;

/// Everything a reconciliation needs.
pub struct Context {
    pub client: Client,
    /// Every `Kafka` central watches (the store of its one `Kafka` watch; no watch of its own).
    pub kafkas: Store<Kafka>,
    /// Admin clients and where each `Kafka` is reached, shared with the Kafka reconciler.
    pub access: KafkaAccess,
    pub metrics: ControllerMetrics,
    /// Backoff of failed reconciliations, per (namespace, name).
    pub retries: Backoff<(String, String)>,
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
        metrics: ControllerMetrics,
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

/// A failure to retry with backoff.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API error: {0}")]
    Kube(#[from] kube::Error),
    #[error("Kafka: {0}")]
    Kafka(#[from] kstretch_kadmin::Error),
    #[error("{0}")]
    Target(#[from] TargetError),
}

impl Error {
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Kube(_) => kstretch_api::condition::KUBERNETES_ERROR,
            Error::Kafka(_) => "KafkaError",
            Error::Target(e) => e.reason(),
        }
    }
}

/// The backoff key of a resource.
pub fn key<K: ResourceExt>(resource: &K) -> (String, String) {
    (
        resource.namespace().unwrap_or_default(),
        resource.name_any(),
    )
}

/// Runs the controller of `K` with `reconcile` until `shutdown`, watching each of `apis` (one
/// per namespace, or one over every namespace) into one store.
pub async fn run<K, F, Fut>(
    apis: Vec<(Option<String>, Api<K>)>,
    ctx: Arc<Context>,
    shutdown: CancellationToken,
    reconcile: F,
) where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
    F: Fn(Arc<K>, Arc<Context>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<Action, Error>> + Send + 'static,
{
    let kind = K::kind(&());
    tracing::info!(%kind, "controller starting");
    kstretch_runtime::reflect::controller(apis, watcher::Config::default())
        .with_config(controller::Config::default().debounce(Duration::from_millis(200)))
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .run(
            |resource, ctx: Arc<Context>| {
                let span = tracing::info_span!("reconcile", kind = %K::kind(&()), namespace = %resource.namespace().unwrap_or_default(), name = %resource.name_any());
                ctx.metrics.reconciled();
                reconcile(resource, ctx).instrument(span)
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

fn error_policy<K: ResourceExt>(resource: Arc<K>, error: &Error, ctx: Arc<Context>) -> Action {
    tracing::warn!(name = %resource.name_any(), reason = error.reason(), %error, "reconcile failed; retrying");
    ctx.metrics.failed(error.reason());
    Action::requeue(ctx.retries.failed(key(resource.as_ref())))
}
