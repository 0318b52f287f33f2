//! One reconciliation of one podset: read the caches, plan (see [`super::plan`]), carry out the
//! plan against the apiserver pod by pod, write the status when it changed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::jiff::Timestamp;
use kstretch_api::common::OpaqueObject;
use kstretch_api::{StrimziPodSet, StrimziPodSetStatus, condition, names};
use kstretch_runtime::events::Events;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions,
    PropagationPolicy,
};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use tracing::Instrument;

use super::cached_pod::CachedPod;
use super::error::{
    Error, RequestOutcome, classify_change, classify_create, pod_failure, status_code,
};
use super::health::KindWatch;
use super::metrics::{CauseLabel, Metrics, ReasonLabel, ResultLabel};
use super::plan::{self, DeleteCause, Owner, PodFailure};

/// Field manager of the controller's writes (pods it creates, status it applies).
pub const FIELD_MANAGER: &str = "kstretch-podset-controller";

/// How long to wait before retrying while the caches are still filling.
const NOT_SYNCED_RETRY: Duration = Duration::from_millis(500);
/// How soon to come back after a status write conflicted.
const CONFLICT_RETRY: Duration = Duration::from_secs(1);
/// First and largest retry delay after a failed reconciliation.
const RETRY_BASE: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(300);
/// Pod requests of one reconciliation in flight at once: a podset of a hundred pods is created
/// quickly without one podset flooding the apiserver.
const POD_REQUESTS_IN_FLIGHT: usize = 8;
/// Above this many remembered failure counts, forget those of podsets that no longer exist.
const FAILURE_MEMORY: usize = 1024;

/// What every reconciliation shares.
pub struct Context {
    pub client: Client,
    pub pods: Store<CachedPod>,
    pub podsets: Store<StrimziPodSet>,
    pub pod_watch: Arc<KindWatch>,
    pub podset_watch: Arc<KindWatch>,
    pub metrics: Metrics,
    pub events: Events,
    /// Requeue delay after a successful reconciliation: the periodic resync.
    pub resync: Duration,
    /// Consecutive failures per podset, for the error policy's backoff.
    failures: Mutex<HashMap<ObjectRef<StrimziPodSet>, u32>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("resync", &self.resync)
            .finish_non_exhaustive()
    }
}

impl Context {
    pub fn new(
        client: Client,
        pods: Store<CachedPod>,
        podsets: Store<StrimziPodSet>,
        pod_watch: Arc<KindWatch>,
        podset_watch: Arc<KindWatch>,
        metrics: Metrics,
        resync: Duration,
    ) -> Context {
        let events = Events::new(client.clone(), "kstretch-agent");
        Context {
            client,
            pods,
            podsets,
            pod_watch,
            podset_watch,
            events,
            metrics,
            resync,
            failures: Mutex::new(HashMap::new()),
        }
    }

    fn synced(&self) -> bool {
        self.pod_watch.synced() && self.podset_watch.synced()
    }

    /// Counts one more consecutive failure and returns the count.
    fn note_failure(&self, key: ObjectRef<StrimziPodSet>) -> u32 {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if failures.len() > FAILURE_MEMORY {
            failures.retain(|k, _| self.podsets.get(k).is_some());
        }
        let count = failures.entry(key).or_insert(0);
        *count = count.saturating_add(1);
        *count
    }

    fn clear_failures(&self, key: &ObjectRef<StrimziPodSet>) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        failures.remove(key);
    }
}

/// Reconciles one podset, with a span, metrics and the failure count of the error policy.
pub async fn reconcile(podset: Arc<StrimziPodSet>, ctx: Arc<Context>) -> Result<Action, Error> {
    let namespace = podset.namespace().unwrap_or_default();
    let name = podset.name_any();
    let span = tracing::info_span!("reconcile", %namespace, podset = %name);
    let started = Instant::now();
    let result = reconcile_podset(&podset, &ctx)
        .instrument(span.clone())
        .await;
    let metrics = &ctx.metrics;
    metrics.duration.observe(started.elapsed().as_secs_f64());
    let key = ObjectRef::from_obj(&*podset);
    match &result {
        Ok(_) => {
            metrics
                .reconciliations
                .get_or_create(&ResultLabel { result: "ok" })
                .inc();
            ctx.clear_failures(&key);
        }
        Err(err) => {
            metrics
                .reconciliations
                .get_or_create(&ResultLabel { result: "error" })
                .inc();
            metrics
                .failures
                .get_or_create(&ReasonLabel {
                    reason: err.reason(),
                })
                .inc();
            span.in_scope(|| match err {
                Error::NotSynced => tracing::debug!("caches not synced yet; retrying"),
                _ => tracing::warn!(reason = err.reason(), %err, "reconciliation failed"),
            });
        }
    }
    result
}

/// The error policy: retry soon while the caches fill, otherwise with exponential backoff per
/// podset. Any event of the podset or its pods reconciles it earlier anyway.
pub fn error_policy(podset: Arc<StrimziPodSet>, error: &Error, ctx: Arc<Context>) -> Action {
    match error {
        Error::NotSynced => Action::requeue(NOT_SYNCED_RETRY),
        _ => {
            let attempt = ctx.note_failure(ObjectRef::from_obj(&*podset));
            Action::requeue(kstretch_runtime::backoff::delay(
                attempt, RETRY_BASE, RETRY_MAX,
            ))
        }
    }
}

async fn reconcile_podset(podset: &StrimziPodSet, ctx: &Context) -> Result<Action, Error> {
    // Acting on a partial cache could create pods that exist or miss pods to delete; wait.
    if !ctx.synced() {
        return Err(Error::NotSynced);
    }
    // Pods of a podset being deleted are the garbage collector's; touching them (re-adding an
    // owner reference that an orphaning deletion just removed) would fight it.
    if podset.metadata.deletion_timestamp.is_some() {
        tracing::debug!("podset is being deleted; its pods are left to garbage collection");
        return Ok(Action::await_change());
    }
    let namespace = podset
        .namespace()
        .ok_or_else(|| Error::InvalidPodSet("no namespace".into()))?;
    let owner = Owner {
        name: podset.name_any(),
        uid: podset
            .uid()
            .ok_or_else(|| Error::InvalidPodSet("no UID".into()))?,
    };

    let (desired, mut failures) = plan::desired_pods(&podset.spec.pods);
    let observed = observed_pods(ctx, podset, &namespace, &desired);
    let plan = plan::plan(
        &owner,
        &podset.spec.selector,
        podset.spec.pods.len(),
        &desired,
        &observed,
    );
    failures.extend(plan.failures.iter().cloned());
    if !plan.waiting.is_empty() {
        tracing::debug!(pods = ?plan.waiting, "waiting for pods being deleted before creating them again");
    }

    let creates = plan
        .actions
        .iter()
        .any(|a| matches!(a, plan::Action::Create { .. }));
    let manifests = if creates {
        match read_pods(ctx, &namespace, &owner).await {
            Ok(Some(pods)) => Ok(pods),
            Ok(None) => return Ok(Action::await_change()),
            Err(e) => Err(e.to_string()),
        }
    } else {
        Ok(Vec::new())
    };
    let writer = PodWriter {
        events: &ctx.events,
        pods: Api::namespaced(ctx.client.clone(), &namespace),
        dynamic: Api::namespaced_with(
            ctx.client.clone(),
            &namespace,
            &ApiResource::erase::<Pod>(&()),
        ),
        namespace: &namespace,
        owner: &owner,
        podset,
        manifests: manifests.as_deref().map_err(String::as_str),
        desired: &desired,
        metrics: &ctx.metrics,
    };
    let writer = &writer;
    // Owned actions: a stream of futures borrowing from the plan trips the compiler's
    // higher-ranked lifetime inference when the whole reconcile future must be `Send`.
    let results: Vec<Option<PodFailure>> = stream::iter(plan.actions.iter().cloned())
        .map(|action| async move { writer.apply(&action).await })
        .buffer_unordered(POD_REQUESTS_IN_FLIGHT)
        .collect()
        .await;
    failures.extend(results.into_iter().flatten());
    let handed_over = if plan::asks_manual_roll(podset.metadata.annotations.as_ref()) {
        let marks = plan::pods_to_mark(&owner, &desired, &observed);
        hand_over_manual_roll(ctx, writer, &marks, &mut failures).await
    } else {
        Ok(())
    };
    // Requests finish in any order; a stable order keeps the condition (and so the decision to
    // write the status) stable between passes.
    failures.sort_by(|a, b| a.pod.cmp(&b.pod).then(a.reason.cmp(b.reason)));

    let action = report(ctx, podset, &namespace, &owner.name, plan.counts, failures).await?;
    handed_over.map(|()| action)
}

/// Hands the podset's manual rolling update to its pods `marks` (see [`plan::pods_to_mark`]),
/// then removes the podset's annotation. A pod that could not be marked is a failure of the
/// pass, and the annotation stays for the next one.
async fn hand_over_manual_roll(
    ctx: &Context,
    writer: &PodWriter<'_>,
    marks: &[(String, String)],
    failures: &mut Vec<PodFailure>,
) -> Result<(), Error> {
    let before = failures.len();
    for (pod, uid) in marks {
        failures.extend(writer.mark_for_roll(pod, uid).await);
    }
    if failures.len() > before {
        return Ok(());
    }
    let podsets: Api<StrimziPodSet> = Api::namespaced(ctx.client.clone(), writer.namespace);
    let patch = json!({"metadata": {"annotations": {names::MANUAL_ROLLING_UPDATE: null}}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    match podsets
        .patch(&writer.owner.name, &params, &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {
            let pods: Vec<&str> = marks.iter().map(|(pod, _)| pod.as_str()).collect();
            tracing::info!(
                ?pods,
                "handed the podset's manual rolling update to its pods"
            );
            ctx.events.about(
                writer.podset,
                false,
                "ManualRollingUpdate",
                "Annotate",
                format!(
                    "{} on the podset: its pods {} are marked, and central restarts them one at a time",
                    names::MANUAL_ROLLING_UPDATE,
                    pods.join(", ")
                ),
            );
            Ok(())
        }
        Err(err) if status_code(&err) == Some(404) => Ok(()),
        Err(err) => Err(Error::ManualRoll(err)),
    }
}

/// The `spec.pods` of the podset `owner` as the apiserver has it now; `None` when that podset
/// is gone (deleted, or replaced by one of another UID).
async fn read_pods(
    ctx: &Context,
    namespace: &str,
    owner: &Owner,
) -> Result<Option<Vec<OpaqueObject>>, kube::Error> {
    let api: Api<StrimziPodSet> = Api::namespaced(ctx.client.clone(), namespace);
    let podset = api.get_opt(&owner.name).await?;
    Ok(podset
        .filter(|p| p.metadata.uid.as_deref() == Some(owner.uid.as_str()))
        .map(|p| p.spec.pods))
}

/// The pods of `namespace` the plan can act on (listed in `desired`, or selected by the
/// podset's selector), copied out of the cache: the namespace may hold thousands of others.
fn observed_pods(
    ctx: &Context,
    podset: &StrimziPodSet,
    namespace: &str,
    desired: &[plan::DesiredPod],
) -> Vec<plan::ObservedPod> {
    let listed: HashSet<&str> = desired.iter().map(|d| d.name.as_str()).collect();
    let no_labels = BTreeMap::new();
    ctx.pods
        .state()
        .iter()
        .filter(|pod| pod.metadata.namespace.as_deref() == Some(namespace))
        .filter(|pod| {
            pod.metadata
                .name
                .as_deref()
                .is_some_and(|name| listed.contains(name))
                || plan::selector_matches(
                    &podset.spec.selector,
                    pod.metadata.labels.as_ref().unwrap_or(&no_labels),
                )
        })
        .filter_map(|pod| plan::ObservedPod::from_pod(pod))
        .collect()
}

/// Writes the podset's status if it changed (with an Event per condition that appeared or
/// cleared); the pass fails if a pod could not be brought to its plan.
async fn report(
    ctx: &Context,
    podset: &StrimziPodSet,
    namespace: &str,
    name: &str,
    counts: plan::Counts,
    failures: Vec<PodFailure>,
) -> Result<Action, Error> {
    let now = condition::format_timestamp(Timestamp::now());
    let status = plan::desired_status(
        podset.status.as_ref(),
        podset.metadata.generation,
        counts,
        &failures,
        &now,
    );
    let mut action = Action::requeue(ctx.resync);
    if podset.status.as_ref() != Some(&status) {
        match write_status(ctx, namespace, name, &status).await {
            Ok(()) => {
                ctx.metrics.status_updates.inc();
                for e in plan::status_events(podset.status.as_ref(), &status) {
                    ctx.events
                        .about(podset, e.warning, e.reason, "Reconcile", e.note);
                }
            }
            Err(err) if status_code(&err) == Some(404) => {
                tracing::debug!("podset deleted while writing its status");
                return Ok(Action::await_change());
            }
            Err(err) if status_code(&err) == Some(409) => {
                tracing::debug!("status write conflicted; retrying");
                action = Action::requeue(CONFLICT_RETRY);
            }
            Err(err) => return Err(Error::Status(err)),
        }
    }
    if failures.is_empty() {
        Ok(action)
    } else {
        Err(Error::Pods(failures))
    }
}

/// Writes the status with server-side apply under [`FIELD_MANAGER`]: the controller owns the
/// whole status, and fields it stops sending (a cleared condition) are removed.
async fn write_status(
    ctx: &Context,
    namespace: &str,
    name: &str,
    status: &StrimziPodSetStatus,
) -> Result<(), kube::Error> {
    let api: Api<StrimziPodSet> = Api::namespaced(ctx.client.clone(), namespace);
    let body = json!({
        "apiVersion": plan::POD_SET_API_VERSION,
        "kind": plan::POD_SET_KIND,
        "metadata": {"name": name},
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await?;
    Ok(())
}

/// Carries out the plan's actions for one podset.
struct PodWriter<'a> {
    events: &'a Events,
    pods: Api<Pod>,
    /// Pods are created from the podset's JSON as is, so fields newer than `k8s-openapi` knows
    /// are not lost on the way.
    dynamic: Api<DynamicObject>,
    namespace: &'a str,
    owner: &'a Owner,
    podset: &'a StrimziPodSet,
    /// The podset's `spec.pods` as the apiserver has it now (the cache keeps only names and
    /// revisions), read once when the plan creates pods; or why it could not be read.
    manifests: Result<&'a [OpaqueObject], &'a str>,
    desired: &'a [plan::DesiredPod],
    metrics: &'a Metrics,
}

impl PodWriter<'_> {
    /// Carries out one action; a failure is reported for the condition, never propagated, so
    /// the other pods go on.
    async fn apply(&self, action: &plan::Action) -> Option<PodFailure> {
        let pod = action.pod();
        let result = match action {
            plan::Action::Create { .. } => {
                let manifest = match self.manifest(pod) {
                    Ok(Some(manifest)) => manifest,
                    Ok(None) => {
                        tracing::debug!(
                            pod,
                            "the podset changed since it was planned; its event plans again"
                        );
                        return None;
                    }
                    Err(failure) => return Some(failure),
                };
                self.create(pod, &manifest)
                    .await
                    .map_err(|e| (classify_create(&e), e))
            }
            plan::Action::Delete { uid, cause, .. } => self
                .delete(pod, uid, *cause)
                .await
                .map_err(|e| (classify_change(&e), e)),
            plan::Action::Adopt {
                resource_version,
                owner_references,
                ..
            } => self
                .adopt(pod, resource_version.as_deref(), owner_references)
                .await
                .map_err(|e| (classify_change(&e), e)),
        };
        let (outcome, err) = result.err()?;
        match outcome {
            RequestOutcome::Settled => {
                tracing::debug!(pod, %err, "nothing left to do for the pod");
                None
            }
            RequestOutcome::Rejected | RequestOutcome::Transient => {
                let failure = pod_failure(pod, outcome, &err);
                // The reconciliation's own warning carries the failures; this is the detail.
                tracing::debug!(pod, code = ?status_code(&err), message = %failure.message, "pod request failed");
                Some(failure)
            }
        }
    }

    async fn create(&self, pod: &str, manifest: &DynamicObject) -> Result<(), kube::Error> {
        self.dynamic.create(&post_params(), manifest).await?;
        self.metrics.pods_created.inc();
        tracing::info!(pod, "created pod");
        self.events.about(
            self.podset,
            false,
            "PodCreated",
            "Create",
            format!("created pod {pod}"),
        );
        Ok(())
    }

    async fn delete(&self, pod: &str, uid: &str, cause: DeleteCause) -> Result<(), kube::Error> {
        self.pods.delete(pod, &delete_params(uid)).await?;
        self.metrics
            .pods_deleted
            .get_or_create(&CauseLabel {
                cause: cause.as_str(),
            })
            .inc();
        let note = match cause {
            DeleteCause::Terminal => {
                tracing::info!(
                    pod,
                    "deleted pod in a terminal phase; it is created again once gone"
                );
                format!(
                    "deleted pod {pod}: it ended (Succeeded or Failed); it is created again once gone"
                )
            }
            DeleteCause::Unlisted => {
                tracing::info!(pod, "deleted pod that the podset no longer lists");
                format!("deleted pod {pod}: the podset no longer lists it")
            }
        };
        self.events
            .about(self.podset, false, "PodDeleted", "Delete", note);
        Ok(())
    }

    /// Marks the pod `pod` (of UID `uid`, a precondition) for a manual rolling update.
    async fn mark_for_roll(&self, pod: &str, uid: &str) -> Option<PodFailure> {
        let patch = json!({"metadata": {
            "uid": uid,
            "annotations": {names::MANUAL_ROLLING_UPDATE: "true"},
        }});
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        let err = self
            .pods
            .patch(pod, &params, &Patch::Merge(&patch))
            .await
            .err()?;
        match classify_change(&err) {
            RequestOutcome::Settled => None,
            outcome => Some(pod_failure(pod, outcome, &err)),
        }
    }

    async fn adopt(
        &self,
        pod: &str,
        resource_version: Option<&str>,
        owner_references: &[OwnerReference],
    ) -> Result<(), kube::Error> {
        // The resourceVersion makes this a conditional write: if the pod changed since the
        // cache saw it, 409, and the event of that change brings the podset back.
        let patch = json!({"metadata": {
            "resourceVersion": resource_version,
            "ownerReferences": owner_references,
        }});
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        self.pods.patch(pod, &params, &Patch::Merge(&patch)).await?;
        self.metrics.pods_adopted.inc();
        tracing::info!(pod, "added the podset's owner reference to the pod");
        Ok(())
    }

    /// The pod `name` as it is created, from the podset's current manifests: in the podset's
    /// namespace, controlled by the podset, without the fields the apiserver sets itself.
    /// `None` when the podset no longer lists it at the planned revision.
    fn manifest(&self, name: &str) -> Result<Option<DynamicObject>, PodFailure> {
        let invalid = |message: String| PodFailure {
            pod: name.to_owned(),
            reason: plan::reason::INVALID_POD,
            message,
        };
        let revision = self
            .desired
            .iter()
            .find(|d| d.name == name)
            .and_then(|d| d.revision.as_deref());
        let manifests = self.manifests.map_err(|e| PodFailure {
            pod: name.to_owned(),
            reason: plan::reason::KUBERNETES_API_ERROR,
            message: format!("cannot read the podset's pod manifests to create pod {name}: {e}"),
        })?;
        let Some((index, entry)) = plan::entry_for(manifests, name, revision) else {
            return Ok(None);
        };
        let mut object = entry.clone();
        object.insert("apiVersion".into(), Value::from("v1"));
        object.insert("kind".into(), Value::from("Pod"));
        object.remove("status");
        let metadata = object
            .entry("metadata")
            .or_insert_with(|| Value::Object(Default::default()));
        let Value::Object(metadata) = metadata else {
            return Err(invalid(format!(
                "spec.pods[{index}].metadata is not an object"
            )));
        };
        for server_set in [
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "managedFields",
            "selfLink",
        ] {
            metadata.remove(server_set);
        }
        metadata.insert("namespace".into(), Value::from(self.namespace));
        let reference = serde_json::to_value(self.owner.reference())
            .map_err(|e| invalid(format!("cannot encode the owner reference: {e}")))?;
        metadata.insert("ownerReferences".into(), Value::Array(vec![reference]));
        serde_json::from_value(Value::Object(object))
            .map(Some)
            .map_err(|e| invalid(format!("spec.pods[{index}] is not a valid pod: {e}")))
    }
}

fn post_params() -> PostParams {
    PostParams {
        dry_run: false,
        field_manager: Some(FIELD_MANAGER.to_owned()),
    }
}

/// Deletes exactly the pod that was observed (UID precondition), in the background like Strimzi.
fn delete_params(uid: &str) -> DeleteParams {
    DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        preconditions: Some(Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    }
}
