//! One `KafkaConnector` reconciliation: resolve its Connect cluster, create or update the
//! connector, reach its state, run a requested offsets operation, restart it when it failed,
//! and write the status; on deletion, remove the connector from Connect.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::jiff::Timestamp;
use kstretch_api::condition::{self, Condition};
use kstretch_api::connector::{AutoRestartStatus, ConnectorState};
use kstretch_api::{KafkaConnect, KafkaConnector, KafkaConnectorStatus, names};
use kstretch_runtime::backoff::Retries;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use super::context::{Context, FINALIZER};
use super::plan::{self, AutoRestartDecision, ListWrite, OffsetsOp, SpecError, StateAction};
use super::rest::{ConnectClient, RestError};
use super::warning::{Reason, Warning};
use crate::status;

/// Failures that end a reconciliation early (retried with backoff by the controller).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("cannot encode the status: {0}")]
    Encode(#[from] serde_json::Error),
}

impl Error {
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Kube(_) => kstretch_api::condition::KUBERNETES_ERROR,
            Error::Encode(_) => "StatusEncoding",
        }
    }
}

/// Why the connector is not ready this time.
#[derive(Debug, thiserror::Error)]
enum Failure {
    /// The user must change the spec (or Connect's plugins): wait for a change.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// Connect failed or is unreachable: retry with backoff.
    #[error(transparent)]
    Rest(#[from] RestError),
    /// Connect cannot pause a failed connector.
    #[error(
        "Connector {0} cannot be paused since it is in failed state; restart it or fix its configuration"
    )]
    CannotPauseFailed(String),
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

/// What a successful pass through Connect saw.
struct Observed {
    status: Value,
    topics: Vec<String>,
    auto_restart: Option<AutoRestartStatus>,
    warnings: Vec<Warning>,
    /// When an automatic restart becomes due, if sooner than the resync.
    retry_in: Option<Duration>,
}

fn api<K>(ctx: &Context, kc: &KafkaConnector) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    Api::namespaced(ctx.client.clone(), &kc.namespace().unwrap_or_default())
}

/// Reconciles `kc`.
pub async fn apply(kc: Arc<KafkaConnector>, ctx: Arc<Context>) -> Result<Action, Error> {
    let namespace = kc.namespace().unwrap_or_default();
    let name = kc.name_any();
    let connect_name = plan::connect_name(kc.labels()).map(str::to_owned);
    let connect = match &connect_name {
        Ok(n) => api::<KafkaConnect>(&ctx, &kc).get_opt(n).await?,
        Err(_) => None,
    };
    let target = connect_name.and_then(|n| {
        let target = plan::rest_target(&namespace, &n, connect.as_ref(), ctx.own_cluster())?;
        Ok(ctx.connect_client(&namespace, &n, &target))
    });

    if kc.metadata.deletion_timestamp.is_some() {
        return delete(&kc, &ctx, target, connect.as_ref()).await;
    }
    if crate::status::is_paused(kc.as_ref()) {
        let existing = kc.status.clone().unwrap_or_default();
        let status = KafkaConnectorStatus {
            conditions: status::conditions(
                &[],
                Condition::new("ReconciliationPaused", condition::TRUE),
                status::NO_WARNINGS,
                &now(),
            ),
            ..existing
        };
        write_status(&ctx, &kc, status).await?;
        return Ok(Action::requeue(ctx.resync));
    }

    let client = match target {
        Ok(client) => client,
        Err(e) => {
            tracing::info!(reason = e.reason(), %e, "connector not reconciled");
            refuse(&ctx, &kc, e.reason(), &e.to_string(), Vec::new()).await?;
            return Ok(Action::requeue(ctx.resync));
        }
    };
    if !kc.finalizers().iter().any(|f| f == FINALIZER) {
        add_finalizer(&ctx, &kc).await?;
    }
    let mut warnings = Vec::new();
    let desired = match plan::desired_config(&name, &kc.spec) {
        Ok(d) => d,
        Err(e) => {
            refuse(&ctx, &kc, e.reason(), &e.to_string(), warnings).await?;
            return Ok(Action::requeue(ctx.resync));
        }
    };
    if !desired.ignored.is_empty() {
        warnings.push(Warning::new(
            Reason::IgnoredConfig,
            format!(
                "spec.config sets {}, which the operator sets itself (from metadata.name, spec.class, spec.tasksMax and spec.version); remove them",
                desired.ignored.join(", ")
            ),
        ));
    }

    match sync(&ctx, &kc, &client, &desired, warnings.clone()).await {
        Ok(observed) => {
            ctx.succeeded(&kc);
            let ready = plan::ready_from_status(&observed.status);
            if !ready.is_true() {
                ctx.metrics
                    .failed(ready.reason.as_deref().unwrap_or("NotReady"));
            }
            let existing = kc.status.clone().unwrap_or_default();
            let status = KafkaConnectorStatus {
                conditions: status::conditions(
                    &existing.conditions,
                    ready,
                    &observed.warnings,
                    &now(),
                ),
                observed_generation: kc.metadata.generation,
                auto_restart: observed.auto_restart,
                connector_status: observed.status.as_object().cloned(),
                tasks_max: plan::tasks_max(&kc.spec, Some(&observed.status)),
                topics: observed.topics,
            };
            write_status(&ctx, &kc, status).await?;
            Ok(Action::requeue(
                observed.retry_in.map_or(ctx.resync, |r| r.min(ctx.resync)),
            ))
        }
        Err(Failure::Kube(e)) => Err(e.into()),
        Err(Failure::Spec(e)) => {
            tracing::info!(reason = e.reason(), %e, "connector refused");
            refuse(&ctx, &kc, e.reason(), &e.to_string(), warnings).await?;
            Ok(Action::requeue(ctx.resync))
        }
        Err(Failure::CannotPauseFailed(n)) => {
            let e = Failure::CannotPauseFailed(n);
            refuse(&ctx, &kc, "CannotPauseFailed", &e.to_string(), warnings).await?;
            Ok(Action::requeue(ctx.resync))
        }
        Err(Failure::Rest(e)) => {
            tracing::warn!(reason = e.reason(), %e, "Kafka Connect call failed; retrying");
            refuse(&ctx, &kc, e.reason(), &e.to_string(), warnings).await?;
            Ok(Action::requeue(ctx.backoff(&kc)))
        }
    }
}

/// Creates or updates the connector, reaches its state, runs the offsets operation, restarts
/// it when failed, and reads its status and topics.
async fn sync(
    ctx: &Context,
    kc: &KafkaConnector,
    client: &ConnectClient,
    desired: &plan::DesiredConfig,
    mut warnings: Vec<Warning>,
) -> Result<Observed, Failure> {
    let name = kc.name_any();
    let target = kc.spec.effective_state();
    let actual = client.config(&name).await?;
    if actual.as_ref() != Some(&desired.config) {
        check_config(client, desired).await?;
        let written = match &actual {
            None => {
                tracing::info!(state = plan::connect_state(target), "creating connector");
                client
                    .create(&name, &desired.config, plan::connect_state(target))
                    .await
            }
            Some(_) => {
                tracing::info!("updating connector config");
                client.put_config(&name, &desired.config).await
            }
        };
        match written {
            // Connect checks the config again when it is written (400 with its message).
            Err(RestError::Api {
                status: 400,
                message,
                ..
            }) => return Err(SpecError::InvalidConfig(message).into()),
            other => other?,
        }
    }

    let status = status_with_backoff(client, &name).await?;
    let current = plan::connector_state(&status)
        .unwrap_or_default()
        .to_owned();
    match plan::state_action(&current, target) {
        StateAction::Nothing => {}
        StateAction::Pause => {
            tracing::info!("pausing connector");
            client.pause(&name).await?;
        }
        StateAction::Resume => {
            tracing::info!("resuming connector");
            client.resume(&name).await?;
        }
        StateAction::Stop => {
            tracing::info!("stopping connector");
            client.stop(&name).await?;
            wait_for_state(client, &name, "STOPPED").await?;
        }
        StateAction::CannotPauseFailed => return Err(Failure::CannotPauseFailed(name)),
    }

    match plan::offsets_op(
        kc.annotations()
            .get(names::CONNECTOR_OFFSETS)
            .map(String::as_str),
    ) {
        Ok(None) => {}
        Ok(Some(op)) => {
            let outcome = offsets(ctx, kc, client, op).await?;
            ctx.metrics.offsets(op.label(), outcome.is_none());
            match outcome {
                None => remove_offsets_annotation(ctx, kc).await?,
                Some(message) => {
                    tracing::warn!(operation = op.label(), %message, "offsets operation failed");
                    warnings.push(Warning::new(op.warning_reason(), message));
                }
            }
        }
        Err(message) => warnings.push(Warning::new(Reason::ManageOffsets, message)),
    }
    warnings.extend(restarts_asked(ctx, kc, client).await?);

    let mut status = status_with_backoff(client, &name).await?;
    let previous = ctx.previous_restart(kc);
    let mut retry_in = None;
    let auto_restart = match plan::auto_restart(
        kc.spec.auto_restart.as_ref(),
        previous.as_ref(),
        plan::is_failing(&status),
        Timestamp::now(),
    ) {
        AutoRestartDecision::None | AutoRestartDecision::Reset => None,
        AutoRestartDecision::Keep {
            status,
            retry_in_secs,
        } => {
            retry_in = retry_in_secs.map(|s| Duration::from_secs(s.unsigned_abs()));
            Some(status)
        }
        AutoRestartDecision::Restart { next } => {
            tracing::info!(count = ?next.count, "auto-restarting failed connector and tasks");
            ctx.metrics.auto_restart();
            // A failed restart still counts (Strimzi's behaviour), so the backoff applies.
            match client.restart(&name, true, true).await {
                Ok(()) => status = status_with_backoff(client, &name).await?,
                Err(e) => tracing::warn!(%e, "auto-restart failed"),
            }
            Some(next)
        }
    };
    ctx.remember_restart(kc, auto_restart.as_ref());
    let topics = client.topics(&name).await?;
    Ok(Observed {
        status,
        topics,
        auto_restart,
        warnings,
        retry_in,
    })
}

/// The class must be installed and Connect's validation must pass before a write.
async fn check_config(
    client: &ConnectClient,
    desired: &plan::DesiredConfig,
) -> Result<(), Failure> {
    let class = desired
        .config
        .get("connector.class")
        .cloned()
        .unwrap_or_default();
    let installed: Vec<String> = client
        .plugins()
        .await?
        .into_iter()
        .map(|p| p.class)
        .collect();
    plan::class_installed(&class, &installed)?;
    let validation = client.validate(&class, &desired.config).await?;
    if validation.error_count > 0 {
        return Err(SpecError::InvalidConfig(validation.errors().join("; ")).into());
    }
    Ok(())
}

/// The connector's status; right after a create Connect may not have one yet (404).
async fn status_with_backoff(client: &ConnectClient, name: &str) -> Result<Value, RestError> {
    let mut retries = Retries::new(Duration::from_millis(200), Duration::from_secs(10));
    for _ in 0..6 {
        match client.status(name).await {
            Err(e) if e.is_not_found() => tokio::time::sleep(retries.next_delay()).await,
            other => return other,
        }
    }
    client.status(name).await
}

/// Waits (bounded) until Connect reports `state`; offsets need a connector really stopped.
async fn wait_for_state(client: &ConnectClient, name: &str, state: &str) -> Result<(), RestError> {
    for _ in 0..40 {
        let status = client.status(name).await?;
        if plan::connector_state(&status) == Some(state) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(())
}

/// Runs an offsets operation; `Some(message)` is the warning of a failure (the annotation
/// stays so the next reconciliation retries).
async fn offsets(
    ctx: &Context,
    kc: &KafkaConnector,
    client: &ConnectClient,
    op: OffsetsOp,
) -> Result<Option<String>, Failure> {
    let name = kc.name_any();
    let namespace = kc.namespace().unwrap_or_default();
    let config_maps: Api<ConfigMap> = api(ctx, kc);
    match op {
        OffsetsOp::List => {
            let Some(cm_name) = kc
                .spec
                .list_offsets
                .as_ref()
                .and_then(|l| l.to_config_map.name.clone())
            else {
                return Ok(Some(plan::missing_property_message(op)));
            };
            let offsets = match client.offsets(&name).await {
                Ok(o) => o,
                Err(e) => return Ok(Some(failed(op, &e.connect_message()))),
            };
            let existing = config_maps.get_opt(&cm_name).await?;
            let write = match plan::list_write(
                &namespace,
                &cm_name,
                existing.as_ref(),
                owner(kc),
                &offsets,
            ) {
                Ok(w) => w,
                Err(message) => return Ok(Some(message)),
            };
            let written = match write {
                ListWrite::Create(cm) => config_maps.create(&PostParams::default(), &cm).await,
                ListWrite::Update(cm) => {
                    config_maps
                        .replace(&cm_name, &PostParams::default(), &cm)
                        .await
                }
            };
            match written {
                Ok(_) => Ok(None),
                // A concurrent change of the ConfigMap: the next reconciliation retries.
                Err(kube::Error::Api(e)) => Ok(Some(failed(op, &e.message))),
                Err(e) => Err(e.into()),
            }
        }
        OffsetsOp::Alter => {
            let Some(cm_name) = kc
                .spec
                .alter_offsets
                .as_ref()
                .and_then(|a| a.from_config_map.name.clone())
            else {
                return Ok(Some(plan::missing_property_message(op)));
            };
            if let Some(message) = not_stopped(kc, client, op).await? {
                return Ok(Some(message));
            }
            let cm = config_maps.get_opt(&cm_name).await?;
            let body = match plan::alter_body(&namespace, &cm_name, cm.as_ref()) {
                Ok(b) => b,
                Err(message) => return Ok(Some(failed(op, &message))),
            };
            match client.alter_offsets(&name, &body).await {
                Ok(()) => {
                    tracing::info!("offsets altered");
                    Ok(None)
                }
                Err(e) => Ok(Some(failed(op, &e.connect_message()))),
            }
        }
        OffsetsOp::Reset => {
            if let Some(message) = not_stopped(kc, client, op).await? {
                return Ok(Some(message));
            }
            match client.reset_offsets(&name).await {
                Ok(()) => {
                    tracing::info!("offsets reset");
                    Ok(None)
                }
                Err(e) => Ok(Some(failed(op, &e.connect_message()))),
            }
        }
    }
}

fn failed(op: OffsetsOp, message: &str) -> String {
    format!(
        "Failed to {} the connector offsets due to {message:?}.",
        op.label()
    )
}

/// Alter and reset need `spec.state: stopped` and a connector Connect reports stopped.
async fn not_stopped(
    kc: &KafkaConnector,
    client: &ConnectClient,
    op: OffsetsOp,
) -> Result<Option<String>, RestError> {
    if kc.spec.effective_state() != ConnectorState::Stopped {
        return Ok(Some(format!(
            "Failed to {} the connector offsets: the connector is not stopped; set spec.state to stopped (in the same change if you like: the connector is stopped first)",
            op.label()
        )));
    }
    let status = client.status(&kc.name_any()).await?;
    if plan::connector_state(&status) != Some("STOPPED") {
        return Ok(Some(failed(op, "Connector is not in STOPPED state")));
    }
    Ok(None)
}

fn owner(kc: &KafkaConnector) -> OwnerReference {
    OwnerReference {
        api_version: "kafka.strimzi.io/v1".to_owned(),
        kind: "KafkaConnector".to_owned(),
        name: kc.name_any(),
        uid: kc.uid().unwrap_or_default(),
        controller: Some(false),
        block_owner_deletion: Some(false),
    }
}

/// Deletes the connector from Connect, then releases the finalizer. When there is no Connect
/// to ask (the KafkaConnect is gone, being deleted, or not managing connectors) there is
/// nothing to delete: the finalizer goes, so namespace deletion never hangs on it.
async fn delete(
    kc: &KafkaConnector,
    ctx: &Context,
    target: Result<ConnectClient, plan::TargetError>,
    connect: Option<&KafkaConnect>,
) -> Result<Action, Error> {
    if !kc.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(Action::await_change());
    }
    let connect_going = connect.is_some_and(|c| c.metadata.deletion_timestamp.is_some());
    match target {
        Ok(client) if !connect_going => {
            if let Err(e) = client.delete(&kc.name_any()).await {
                tracing::warn!(reason = e.reason(), %e, "cannot delete the connector from Kafka Connect; retrying");
                ctx.metrics.failed(e.reason());
                return Ok(Action::requeue(ctx.backoff(kc)));
            }
            tracing::info!("connector deleted from Kafka Connect");
        }
        Ok(_) => tracing::info!("KafkaConnect is being deleted; releasing the connector"),
        Err(e) => tracing::info!(
            reason = e.reason(),
            "no Kafka Connect to delete the connector from; releasing it"
        ),
    }
    remove_finalizer(ctx, kc).await?;
    ctx.succeeded(kc);
    ctx.remember_restart(kc, None);
    Ok(Action::await_change())
}

/// `Ready=False` with `reason`; Connect's status, topics and restart bookkeeping are kept.
async fn refuse(
    ctx: &Context,
    kc: &KafkaConnector,
    reason: &str,
    message: &str,
    warnings: Vec<Warning>,
) -> Result<(), Error> {
    ctx.metrics.failed(reason);
    let existing = kc.status.clone().unwrap_or_default();
    let status = KafkaConnectorStatus {
        conditions: status::conditions(
            &existing.conditions,
            status::not_ready(reason, message),
            &warnings,
            &now(),
        ),
        observed_generation: kc.metadata.generation,
        ..existing
    };
    write_status(ctx, kc, status).await
}

fn now() -> String {
    condition::format_timestamp(Timestamp::now())
}

fn json_patch(ops: Value) -> Result<Patch<()>, kube::Error> {
    let patch: json_patch::Patch = serde_json::from_value(ops).map_err(kube::Error::SerdeError)?;
    Ok(Patch::Json(patch))
}

async fn add_finalizer(ctx: &Context, kc: &KafkaConnector) -> Result<(), kube::Error> {
    crate::finalizer::add(&api::<KafkaConnector>(ctx, kc), kc, FINALIZER).await
}

async fn remove_finalizer(ctx: &Context, kc: &KafkaConnector) -> Result<(), kube::Error> {
    crate::finalizer::remove(&api::<KafkaConnector>(ctx, kc), kc, FINALIZER).await
}

/// Carries out `strimzi.io/restart` and `strimzi.io/restart-task`, each once: the annotation
/// goes once Connect took the restart. A malformed value or a failed restart is a warning and
/// the annotation stays (a failed restart is tried again at the next reconciliation).
async fn restarts_asked(
    ctx: &Context,
    kc: &KafkaConnector,
    client: &ConnectClient,
) -> Result<Vec<Warning>, kube::Error> {
    let name = kc.name_any();
    let annotation = |key: &str| kc.annotations().get(key).map(String::as_str);
    let mut warnings = Vec::new();
    match plan::restart_request(annotation(names::RESTART)) {
        Ok(None) => {}
        Ok(Some(r)) => {
            tracing::info!(
                include_tasks = r.include_tasks,
                only_failed = r.only_failed,
                "restarting connector on request"
            );
            let done = client.restart(&name, r.include_tasks, r.only_failed).await;
            let asked = Asked {
                key: names::RESTART,
                event: "ConnectorRestarted",
                done: format!(
                    "restarted connector {name} (includeTasks={}, onlyFailed={})",
                    r.include_tasks, r.only_failed
                ),
                warning: Reason::RestartConnector,
                failed: format!("Failed to restart connector {name}."),
            };
            warnings.extend(asked.settle(ctx, kc, done).await?);
        }
        Err(message) => warnings.push(Warning::new(Reason::RestartConnector, message)),
    }
    match plan::restart_task(annotation(names::RESTART_TASK)) {
        Ok(None) => {}
        Ok(Some(task)) => {
            tracing::info!(task, "restarting connector task on request");
            let done = client.restart_task(&name, task).await;
            let asked = Asked {
                key: names::RESTART_TASK,
                event: "ConnectorTaskRestarted",
                done: format!("restarted task {task} of connector {name}"),
                warning: Reason::RestartConnectorTask,
                failed: format!("Failed to restart connector task {name}:{task}."),
            };
            warnings.extend(asked.settle(ctx, kc, done).await?);
        }
        Err(message) => warnings.push(Warning::new(Reason::RestartConnectorTask, message)),
    }
    Ok(warnings)
}

/// A restart an annotation asked for, and what to say of its outcome.
struct Asked {
    key: &'static str,
    event: &'static str,
    done: String,
    warning: Reason,
    failed: String,
}

impl Asked {
    /// Done: the annotation goes, with an Event. Failed: a warning, and the annotation stays.
    async fn settle(
        self,
        ctx: &Context,
        kc: &KafkaConnector,
        done: Result<(), RestError>,
    ) -> Result<Option<Warning>, kube::Error> {
        match done {
            Ok(()) => {
                remove_annotation(ctx, kc, self.key).await?;
                let note = format!("{} as {} asked", self.done, self.key);
                ctx.events.about(kc, false, self.event, "Restart", note);
                Ok(None)
            }
            Err(e) => Ok(Some(Warning::new(
                self.warning,
                format!("{} {e}", self.failed),
            ))),
        }
    }
}

/// Success removes `strimzi.io/connector-offsets`, so the operation runs once per request.
async fn remove_offsets_annotation(ctx: &Context, kc: &KafkaConnector) -> Result<(), kube::Error> {
    remove_annotation(ctx, kc, names::CONNECTOR_OFFSETS).await
}

/// Removes the request annotation `key`, so that what it asked for runs once.
async fn remove_annotation(
    ctx: &Context,
    kc: &KafkaConnector,
    key: &str,
) -> Result<(), kube::Error> {
    let patch = json!({"metadata": {"annotations": {key: null}}});
    api::<KafkaConnector>(ctx, kc)
        .patch(
            &kc.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    Ok(())
}

/// Writes `status` unless the resource already has it. The whole status is replaced (a JSON
/// patch `add` of `/status`): a merge patch would keep keys Connect no longer reports, such as
/// a failed task's `trace`.
async fn write_status(
    ctx: &Context,
    kc: &KafkaConnector,
    status: KafkaConnectorStatus,
) -> Result<(), Error> {
    if kc.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let ops = json!([{"op": "add", "path": "/status", "value": serde_json::to_value(&status)?}]);
    match api::<KafkaConnector>(ctx, kc)
        .patch_status(&kc.name_any(), &PatchParams::default(), &json_patch(ops)?)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The reconciliation's ends before and at Connect's REST API, against
/// [`crate::testing::Apiserver`] (Connect itself is not there: its address refuses connections).
#[cfg(test)]
mod against_the_apiserver {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::connector::context::{ConnectorArgs, Relays};
    use crate::testing::{Apiserver, status_path};

    const RESYNC: Duration = Duration::from_secs(60);

    fn connector(labels: Value, annotations: Value) -> KafkaConnector {
        serde_json::from_value(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaConnector",
            "metadata": {"name": "sink", "namespace": "ns", "labels": labels,
                         "annotations": annotations, "generation": 1},
            "spec": {"class": "org.example.Sink", "tasksMax": 1}
        }))
        .unwrap()
    }

    fn connect(annotations: Value) -> KafkaConnect {
        serde_json::from_value(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaConnect",
            "metadata": {"name": "my-connect", "namespace": "ns", "annotations": annotations},
            "spec": {"bootstrapServers": "my-cluster-kafka-bootstrap:9092"}
        }))
        .unwrap()
    }

    /// One reconciliation of `kc` with `held` in the apiserver: the action and the `Ready`
    /// condition of the status written.
    async fn reconciled(kc: &KafkaConnector, held: Option<&KafkaConnect>) -> (Action, Value) {
        reconciled_with(kc, held, None).await
    }

    async fn reconciled_with(
        kc: &KafkaConnector,
        held: Option<&KafkaConnect>,
        relays: Option<Relays>,
    ) -> (Action, Value) {
        let apiserver = Apiserver::default();
        apiserver.hold(kc);
        if let Some(c) = held {
            apiserver.hold(c);
        }
        let args = ConnectorArgs {
            resync_secs: RESYNC.as_secs(),
        };
        let ctx = Context::new(apiserver.client(), Default::default(), &args, relays);
        let pass = apply(Arc::new(kc.clone()), Arc::new(ctx));
        let action = tokio::time::timeout(Duration::from_secs(10), pass)
            .await
            .expect("the reconciliation ended")
            .unwrap();
        let path = status_path::<KafkaConnector>("ns", "sink");
        let writes = apiserver.writes();
        let patch = writes
            .iter()
            .find(|w| w.path == path)
            .unwrap_or_else(|| panic!("no status written: {writes:#?}"));
        // A JSON patch that adds the whole status.
        let ready = patch.body[0]["value"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready" || c["type"] == "ReconciliationPaused")
            .cloned()
            .unwrap();
        (action, ready)
    }

    #[tokio::test]
    async fn a_connector_without_its_connect_label_says_so() {
        let (action, ready) = reconciled(&connector(json!({}), json!({})), None).await;
        assert_eq!(action, Action::requeue(RESYNC));
        assert_eq!(ready["reason"], "MissingClusterLabel");
    }

    #[tokio::test]
    async fn a_connector_of_a_connect_that_is_missing_or_does_not_use_resources_says_which() {
        let labelled = connector(json!({"strimzi.io/cluster": "my-connect"}), json!({}));
        let (_, ready) = reconciled(&labelled, None).await;
        assert_eq!(ready["reason"], "KafkaConnectNotFound");
        let (_, ready) = reconciled(&labelled, Some(&connect(json!({})))).await;
        assert_eq!(ready["reason"], "ConnectorResourcesDisabled");
    }

    #[tokio::test]
    async fn an_unreachable_connect_is_retried_sooner_than_the_resync() {
        let labelled = connector(json!({"strimzi.io/cluster": "my-connect"}), json!({}));
        let c = connect(json!({
            (names::USE_CONNECTOR_RESOURCES): "true",
            (plan::CONNECT_REST_URL_ANNOTATION): "http://127.0.0.1:1"
        }));
        let (action, ready) = reconciled(&labelled, Some(&c)).await;
        assert_eq!(ready["reason"], "ConnectUnreachable");
        assert_ne!(action, Action::requeue(RESYNC));
    }

    #[tokio::test]
    async fn a_connector_of_workers_whose_agent_is_away_says_so_and_is_retried() {
        let labelled = connector(json!({"strimzi.io/cluster": "my-connect"}), json!({}));
        let mut c = connect(json!({
            (names::USE_CONNECTOR_RESOURCES): "true",
            (names::STRETCH_CLUSTER_ALIAS): "beta"
        }));
        c.status = Some(kstretch_api::KafkaConnectStatus {
            url: Some("http://my-connect-connect-api.ns.svc:8083".into()),
            ..Default::default()
        });
        let relays = Relays {
            agents: crate::link::agents::Agents::new(),
            calls: crate::link::connect::ConnectCalls::default(),
            own: "alpha".into(),
        };
        let (action, ready) = reconciled_with(&labelled, Some(&c), Some(relays)).await;
        assert_eq!(ready["reason"], "ConnectUnreachable");
        assert_eq!(
            ready["message"],
            "cannot reach Kafka Connect at the workers of KafkaConnect my-connect in cluster beta (through its agent): the agent of cluster \"beta\" is not connected"
        );
        assert_ne!(action, Action::requeue(RESYNC));
    }

    #[tokio::test]
    async fn a_paused_connector_only_says_so() {
        let paused = connector(
            json!({"strimzi.io/cluster": "my-connect"}),
            json!({(names::PAUSE_RECONCILIATION): "true"}),
        );
        let (action, ready) = reconciled(&paused, None).await;
        assert_eq!(action, Action::requeue(RESYNC));
        assert_eq!(ready["type"], "ReconciliationPaused");
    }
}
