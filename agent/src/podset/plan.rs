//! The pure decisions of the StrimziPodSet controller: from a podset and the pods observed in its
//! namespace, what to create, delete, adopt or wait for, and which status to report.
//!
//! Nothing here talks to Kubernetes, so every rule is unit-tested (and property-tested) with plain
//! `cargo test`. The rules follow Strimzi's `StrimziPodSetController` (1.2.0), with these
//! deliberate differences, each to avoid acting on a guess:
//!
//! - an empty selector selects nothing (Strimzi's selects everything, which is only safe because
//!   its pod informer sees Strimzi-labelled pods alone; ours sees every pod of the namespace);
//! - `matchExpressions` of the selector are honoured (Strimzi ignores them), which can only narrow
//!   what is deleted;
//! - a pod controlled by another object (a controller owner reference that is not this podset's)
//!   is never deleted, adopted or counted; a listed one is reported as an error instead;
//! - one bad pod does not stop the others: failures are collected per pod;
//! - a listed pod that is already being deleted is waited for, and an unlisted one is not
//!   deleted again.

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use kstretch_api::common::OpaqueObject;
use kstretch_api::condition::{self, Condition};
use kstretch_api::{StrimziPodSetStatus, names};

use super::cached_pod::CachedPod;

/// Kind of the owner references the controller writes and follows.
pub const POD_SET_KIND: &str = "StrimziPodSet";
/// `apiVersion` of the owner references the controller writes (the storage version).
pub const POD_SET_API_VERSION: &str = "core.strimzi.io/v1";
/// Value of the [`names::CONTROLLER`] label on pods of a podset (Strimzi's).
pub const CONTROLLER_LABEL_VALUE: &str = "strimzipodset";
/// Condition type of a failed reconciliation, as Strimzi writes it on podsets.
pub const ERROR_CONDITION: &str = "Error";

/// Pod phases after which the containers never run again: such pods are replaced.
const TERMINAL_PHASES: [&str; 2] = ["Failed", "Succeeded"];

/// A condition message is bounded so that a podset with many broken pods keeps a readable (and
/// storable) status.
const MAX_CONDITION_MESSAGE: usize = 4096;

/// Stable reasons of per-pod failures (used as condition reasons and metric labels).
pub mod reason {
    /// A `spec.pods` entry cannot be used (no name, listed twice).
    pub const INVALID_POD: &str = "InvalidPod";
    /// The apiserver refused the pod (invalid spec, quota, admission).
    pub const POD_REJECTED: &str = "PodRejected";
    /// A pod of that name exists and is controlled by another object.
    pub const POD_OWNED_BY_OTHER: &str = "PodOwnedByOther";
    /// A request failed for a reason that may pass (timeouts, 5xx, throttling).
    pub const KUBERNETES_API_ERROR: &str = kstretch_api::condition::KUBERNETES_ERROR;
}

/// The podset as seen by the pods it owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub name: String,
    pub uid: String,
}

impl Owner {
    /// The controller owner reference put on every pod of the podset; `blockOwnerDeletion` makes
    /// a foreground deletion of the podset wait for its pods.
    pub fn reference(&self) -> OwnerReference {
        OwnerReference {
            api_version: POD_SET_API_VERSION.to_owned(),
            kind: POD_SET_KIND.to_owned(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    /// Whether `reference` is exactly this podset (Strimzi compares apiVersion, kind, name and
    /// UID; the controller flag is not compared).
    fn is(&self, reference: &OwnerReference) -> bool {
        reference.api_version == POD_SET_API_VERSION
            && reference.kind == POD_SET_KIND
            && reference.name == self.name
            && reference.uid == self.uid
    }

    /// Whether `reference` names this podset, possibly in another API version or from an earlier
    /// incarnation with the same name: such references are replaced on adoption.
    fn is_same_name(&self, reference: &OwnerReference) -> bool {
        reference.kind == POD_SET_KIND && reference.name == self.name
    }
}

/// One usable entry of `spec.pods`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredPod {
    /// Position in `spec.pods`, to find the full manifest when creating the pod.
    pub index: usize,
    pub name: String,
    /// The `strimzi.io/revision` annotation of the entry.
    pub revision: Option<String>,
}

/// What the podset cache keeps of a `spec.pods` entry: its name and revision, all that the plan
/// ([`desired_pods`]) and the link's report read. The full manifest, most of a podset's memory
/// at a thousand pods, is read from the apiserver only to create a pod. Entries without a
/// usable name keep none, so they are refused as before.
pub fn slim_pod_entry(entry: &OpaqueObject) -> OpaqueObject {
    let mut slim = OpaqueObject::new();
    let Some(metadata) = entry.get("metadata") else {
        return slim;
    };
    let mut kept = OpaqueObject::new();
    if let Some(name) = metadata.get("name").filter(|n| n.is_string()) {
        kept.insert("name".into(), name.clone());
    }
    if let Some(revision) = metadata
        .get("annotations")
        .and_then(|a| a.get(names::REVISION))
        .filter(|r| r.is_string())
    {
        let mut annotations = OpaqueObject::new();
        annotations.insert(names::REVISION.into(), revision.clone());
        kept.insert("annotations".into(), serde_json::Value::Object(annotations));
    }
    slim.insert("metadata".into(), serde_json::Value::Object(kept));
    slim
}

/// The first entry of `pods` named `name`, if its revision is `revision`: the manifest of a
/// pod to create, read fresh; `None` when the podset changed since the plan was made (the
/// change's own event plans again).
pub fn entry_for<'a>(
    pods: &'a [OpaqueObject],
    name: &str,
    revision: Option<&str>,
) -> Option<(usize, &'a OpaqueObject)> {
    let (desired, _) = desired_pods(pods);
    let found = desired.into_iter().find(|d| d.name == name)?;
    (found.revision.as_deref() == revision).then(|| (found.index, &pods[found.index]))
}

/// A per-pod problem: reported in the `Error` condition, never fatal to the other pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFailure {
    pub pod: String,
    pub reason: &'static str,
    pub message: String,
}

/// Reads the names and revisions of `spec.pods`; unusable entries become failures.
pub fn desired_pods(pods: &[OpaqueObject]) -> (Vec<DesiredPod>, Vec<PodFailure>) {
    let mut desired = Vec::with_capacity(pods.len());
    let mut failures = Vec::new();
    let mut seen = HashSet::with_capacity(pods.len());
    for (index, pod) in pods.iter().enumerate() {
        let metadata = pod.get("metadata");
        let name = metadata
            .and_then(|m| m.get("name"))
            .and_then(|n| n.as_str())
            .filter(|n| !n.is_empty());
        let Some(name) = name else {
            failures.push(PodFailure {
                pod: format!("spec.pods[{index}]"),
                reason: reason::INVALID_POD,
                message: format!("spec.pods[{index}] has no metadata.name"),
            });
            continue;
        };
        if !seen.insert(name) {
            failures.push(PodFailure {
                pod: name.to_owned(),
                reason: reason::INVALID_POD,
                message: format!(
                    "pod {name} is listed more than once (spec.pods[{index}]); the first entry is used"
                ),
            });
            continue;
        }
        let revision = metadata
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(names::REVISION))
            .and_then(|r| r.as_str())
            .map(str::to_owned);
        desired.push(DesiredPod {
            index,
            name: name.to_owned(),
            revision,
        });
    }
    (desired, failures)
}

/// What the controller needs to know about an existing pod (see [`CachedPod::trim`] for what
/// the cache keeps).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ObservedPod {
    pub name: String,
    pub uid: String,
    pub resource_version: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub owner_references: Vec<OwnerReference>,
    pub phase: Option<String>,
    pub ready: bool,
    /// `metadata.deletionTimestamp` is set: the pod is going away.
    pub deleting: bool,
    /// The pod's `strimzi.io/revision` annotation.
    pub revision: Option<String>,
    /// The pod carries `strimzi.io/manual-rolling-update: "true"`.
    pub manual_roll: bool,
}

impl ObservedPod {
    /// `None` for a pod without name or UID (never the case for a stored pod).
    pub fn from_pod(pod: &CachedPod) -> Option<ObservedPod> {
        let meta = &pod.metadata;
        let status = pod.status.as_ref();
        Some(ObservedPod {
            name: meta.name.clone()?,
            uid: meta.uid.clone()?,
            resource_version: meta.resource_version.clone(),
            labels: meta.labels.clone().unwrap_or_default(),
            owner_references: meta.owner_references.clone().unwrap_or_default(),
            phase: status.and_then(|s| s.phase.clone()),
            ready: pod.is_ready(),
            deleting: meta.deletion_timestamp.is_some(),
            revision: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(names::REVISION))
                .cloned(),
            manual_roll: asks_manual_roll(meta.annotations.as_ref()),
        })
    }

    fn is_terminal(&self) -> bool {
        self.phase
            .as_deref()
            .is_some_and(|phase| TERMINAL_PHASES.contains(&phase))
    }
}

/// Whether `annotations` (a podset's or a pod's) ask for a manual rolling update: Strimzi's
/// `strimzi.io/manual-rolling-update: "true"`.
pub fn asks_manual_roll(annotations: Option<&BTreeMap<String, String>>) -> bool {
    is_true(annotations, names::MANUAL_ROLLING_UPDATE)
}

/// Whether a pod's `annotations` ask for its disks to be replaced by empty ones: Strimzi's
/// `strimzi.io/delete-pod-and-pvc: "true"`. Central decides when; the agent only reports it.
pub fn asks_new_disks(annotations: Option<&BTreeMap<String, String>>) -> bool {
    is_true(annotations, names::DELETE_POD_AND_PVC)
}

/// Whether annotation `key` is `"true"`.
fn is_true(annotations: Option<&BTreeMap<String, String>>, key: &str) -> bool {
    annotations
        .and_then(|a| a.get(key))
        .is_some_and(|v| v == "true")
}

/// The pods to which a podset annotated for a manual rolling update hands its annotation, by
/// name and UID: each listed pod that exists, is not going away, is not another controller's
/// and is not marked yet. Central rolls marked pods one at a time, as safely as any roll, and
/// a recreated pod carries no mark; so the podset's annotation is removed once they are marked.
pub fn pods_to_mark(
    owner: &Owner,
    desired: &[DesiredPod],
    observed: &[ObservedPod],
) -> Vec<(String, String)> {
    let listed: HashSet<&str> = desired.iter().map(|d| d.name.as_str()).collect();
    let mut marks: Vec<(String, String)> = observed
        .iter()
        .filter(|p| listed.contains(p.name.as_str()) && !p.deleting && !p.manual_roll)
        .filter(|p| !matches!(ownership(owner, &p.owner_references), Ownership::Foreign(_)))
        .map(|p| (p.name.clone(), p.uid.clone()))
        .collect();
    marks.sort();
    marks
}

/// Whether `labels` satisfy `selector`. An empty selector selects nothing, and an unknown
/// operator fails the match: pods are deleted on the basis of this, so doubt means "no".
pub fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let match_labels = selector.match_labels.as_ref();
    let expressions = selector.match_expressions.as_deref().unwrap_or_default();
    if match_labels.is_none_or(BTreeMap::is_empty) && expressions.is_empty() {
        return false;
    }
    let labels_match = match_labels
        .into_iter()
        .flatten()
        .all(|(key, value)| labels.get(key) == Some(value));
    labels_match
        && expressions.iter().all(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            let value = labels.get(&e.key);
            match e.operator.as_str() {
                "In" => value.is_some_and(|v| values.contains(v)),
                "NotIn" => value.is_none_or(|v| !values.contains(v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                _ => false,
            }
        })
}

/// Whether the pod's revision differs from the desired one, as Strimzi's
/// `PodRevision.hasChanged`: both missing is "unchanged", one missing is "changed".
pub fn revision_changed(current: Option<&str>, desired: Option<&str>) -> bool {
    match (current, desired) {
        (None, None) => false,
        (Some(current), desired) => Some(current) != desired,
        (None, Some(_)) => true,
    }
}

/// How an existing pod relates to the podset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// It carries this podset's owner reference.
    Ours,
    /// No controller, or a stale reference to this podset's name: it may be adopted.
    Adoptable,
    /// Controlled by another object (`Kind/name`): never touched.
    Foreign(String),
}

pub fn ownership(owner: &Owner, references: &[OwnerReference]) -> Ownership {
    if references.iter().any(|r| owner.is(r)) {
        return Ownership::Ours;
    }
    match references
        .iter()
        .find(|r| r.controller == Some(true) && !owner.is_same_name(r))
    {
        Some(other) => Ownership::Foreign(format!("{}/{}", other.kind, other.name)),
        None => Ownership::Adoptable,
    }
}

/// The owner references of an adopted pod: stale references to the podset's name (another API
/// version, an earlier UID) are replaced by the current one; others are kept.
pub fn adopted_references(owner: &Owner, references: &[OwnerReference]) -> Vec<OwnerReference> {
    references
        .iter()
        .filter(|r| !owner.is_same_name(r))
        .cloned()
        .chain(std::iter::once(owner.reference()))
        .collect()
}

/// Why a pod is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeleteCause {
    /// Listed, but its phase is `Failed` or `Succeeded`; it is created again once gone.
    Terminal,
    /// Matches the selector but is no longer listed (scale-down, or a stray pod).
    Unlisted,
}

impl DeleteCause {
    pub fn as_str(self) -> &'static str {
        match self {
            DeleteCause::Terminal => "terminal",
            DeleteCause::Unlisted => "unlisted",
        }
    }
}

/// One change to make to the cluster.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create the pod of `spec.pods[index]`.
    Create { name: String, index: usize },
    /// Put the podset's owner reference on the pod, with `resource_version` as precondition.
    Adopt {
        name: String,
        resource_version: Option<String>,
        owner_references: Vec<OwnerReference>,
    },
    /// Delete the pod with this UID (a UID precondition, so a newer pod of the same name is safe).
    Delete {
        name: String,
        uid: String,
        cause: DeleteCause,
    },
}

impl Action {
    pub fn pod(&self) -> &str {
        match self {
            Action::Create { name, .. }
            | Action::Adopt { name, .. }
            | Action::Delete { name, .. } => name,
        }
    }
}

/// The numbers of the podset status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Listed pods plus unlisted pods of the podset that still exist (Strimzi's definition: a
    /// podset is ready when `pods == readyPods == spec.pods.len()`, so pods still being removed
    /// keep it not ready).
    pub pods: i32,
    pub ready_pods: i32,
    pub current_pods: i32,
}

/// Everything one reconciliation decides.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    pub actions: Vec<Action>,
    /// Listed pods that are being deleted: created again once they are gone.
    pub waiting: Vec<String>,
    pub failures: Vec<PodFailure>,
    pub counts: Counts,
}

/// Decides what to do for one podset.
///
/// `spec_len` is the length of `spec.pods` (entries that could not be read still count as pods
/// that do not exist yet); `observed` are the pods of the podset's namespace, in any order
/// (pods neither listed nor selected may be left out: they play no part).
pub fn plan(
    owner: &Owner,
    selector: &LabelSelector,
    spec_len: usize,
    desired: &[DesiredPod],
    observed: &[ObservedPod],
) -> Plan {
    let mut plan = Plan {
        counts: Counts {
            pods: saturating_i32(spec_len),
            ..Counts::default()
        },
        ..Plan::default()
    };
    let by_name: HashMap<&str, &ObservedPod> =
        observed.iter().map(|p| (p.name.as_str(), p)).collect();

    for want in desired {
        let Some(pod) = by_name.get(want.name.as_str()) else {
            plan.actions.push(Action::Create {
                name: want.name.clone(),
                index: want.index,
            });
            continue;
        };
        let ownership = ownership(owner, &pod.owner_references);
        if let Ownership::Foreign(controller) = &ownership {
            plan.failures.push(PodFailure {
                pod: want.name.clone(),
                reason: reason::POD_OWNED_BY_OTHER,
                message: format!(
                    "pod {} exists and is controlled by {controller}; it is left alone",
                    want.name
                ),
            });
            continue;
        }
        if pod.deleting {
            plan.waiting.push(want.name.clone());
        } else if pod.is_terminal() {
            plan.actions.push(Action::Delete {
                name: want.name.clone(),
                uid: pod.uid.clone(),
                cause: DeleteCause::Terminal,
            });
        } else if ownership == Ownership::Adoptable {
            plan.actions.push(Action::Adopt {
                name: want.name.clone(),
                resource_version: pod.resource_version.clone(),
                owner_references: adopted_references(owner, &pod.owner_references),
            });
        }
        if pod.ready {
            plan.counts.ready_pods += 1;
        }
        if !revision_changed(pod.revision.as_deref(), want.revision.as_deref()) {
            plan.counts.current_pods += 1;
        }
    }

    let listed: HashSet<&str> = desired.iter().map(|d| d.name.as_str()).collect();
    let mut unlisted: Vec<&ObservedPod> = observed
        .iter()
        .filter(|p| !listed.contains(p.name.as_str()))
        .filter(|p| selector_matches(selector, &p.labels))
        .filter(|p| !matches!(ownership(owner, &p.owner_references), Ownership::Foreign(_)))
        .collect();
    // Deterministic order: logs and tests read better, and it costs nothing at these sizes.
    unlisted.sort_by(|a, b| a.name.cmp(&b.name));
    for pod in unlisted {
        plan.counts.pods = plan.counts.pods.saturating_add(1);
        if !pod.deleting {
            plan.actions.push(Action::Delete {
                name: pod.name.clone(),
                uid: pod.uid.clone(),
                cause: DeleteCause::Unlisted,
            });
        }
    }
    plan
}

fn saturating_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The status to report: the counts, `observedGeneration`, and an `Error` condition while any
/// pod failed (its `lastTransitionTime` kept while it stays failing). Conditions of other types
/// are dropped: like Strimzi, the controller owns the whole status.
pub fn desired_status(
    current: Option<&StrimziPodSetStatus>,
    generation: Option<i64>,
    counts: Counts,
    failures: &[PodFailure],
    now: &str,
) -> StrimziPodSetStatus {
    let mut conditions: Vec<Condition> = current
        .map(|s| s.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.type_ == ERROR_CONDITION)
        .collect();
    match error_condition(failures) {
        Some(error) => {
            condition::set_condition(&mut conditions, error, now);
        }
        None => conditions.clear(),
    }
    StrimziPodSetStatus {
        conditions,
        observed_generation: generation,
        pods: Some(counts.pods),
        ready_pods: Some(counts.ready_pods),
        current_pods: Some(counts.current_pods),
    }
}

/// The `Error` condition for the failures: the first failure's reason, every failure's message.
pub fn error_condition(failures: &[PodFailure]) -> Option<Condition> {
    let first = failures.first()?;
    let mut message = if failures.len() == 1 {
        first.message.clone()
    } else {
        let all: Vec<&str> = failures.iter().map(|f| f.message.as_str()).collect();
        format!("{} pods failed: {}", failures.len(), all.join("; "))
    };
    truncate(&mut message, MAX_CONDITION_MESSAGE);
    Some(
        Condition::new(ERROR_CONDITION, condition::TRUE)
            .with_reason(first.reason)
            .with_message(message),
    )
}

fn truncate(text: &mut String, max: usize) {
    if text.len() <= max {
        return;
    }
    let mut end = max.saturating_sub(3);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str("...");
}

/// The podsets a pod names itself, as Strimzi finds a pod's podset: its `StrimziPodSet` owner
/// references (the controller first), failing that the `strimzi.io/controller=strimzipodset` and
/// `strimzi.io/controller-name` labels. Empty for a pod that names none; see
/// [`podsets_selecting`] for those.
pub fn podsets_named_by_pod(pod: &ObjectMeta) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let references = pod.owner_references.as_deref().unwrap_or_default();
    let mut podset_references: Vec<&OwnerReference> = references
        .iter()
        .filter(|r| r.kind == POD_SET_KIND && r.api_version.starts_with("core.strimzi.io/"))
        .collect();
    // The controller reference first; any other podset reference is unusual but harmless.
    podset_references.sort_by_key(|r| r.controller != Some(true));
    for r in podset_references {
        if !names.contains(&r.name) {
            names.push(r.name.clone());
        }
    }
    if !names.is_empty() {
        return names;
    }
    if let Some(labels) = pod.labels.as_ref()
        && labels.get(names::CONTROLLER).map(String::as_str) == Some(CONTROLLER_LABEL_VALUE)
        && let Some(name) = labels.get(names::CONTROLLER_NAME)
    {
        return vec![name.clone()];
    }
    Vec::new()
}

/// The podsets (`(name, selector)` of the pod's namespace) whose selector matches the pod's
/// labels: a stray pod must wake the podset that will delete it.
pub fn podsets_selecting<'a>(
    labels: Option<&BTreeMap<String, String>>,
    podsets: impl IntoIterator<Item = (&'a str, &'a LabelSelector)>,
) -> Vec<String> {
    let Some(labels) = labels else {
        return Vec::new();
    };
    podsets
        .into_iter()
        .filter(|(_, selector)| selector_matches(selector, labels))
        .map(|(name, _)| name.to_owned())
        .collect()
}

/// An Event worth recording when a podset's status changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusEvent {
    pub warning: bool,
    pub reason: &'static str,
    pub note: String,
}

/// The Events a status change deserves: all pods became ready, or pods started failing for a
/// new reason. Nothing while a state merely lasts, so a resync records nothing.
pub fn status_events(
    before: Option<&StrimziPodSetStatus>,
    after: &StrimziPodSetStatus,
) -> Vec<StatusEvent> {
    let all_ready = |s: &StrimziPodSetStatus| {
        let pods = s.pods.unwrap_or(0);
        pods > 0 && s.ready_pods == Some(pods)
    };
    let error = |s: &StrimziPodSetStatus| {
        s.conditions
            .iter()
            .find(|c| c.type_ == ERROR_CONDITION)
            .map(|c| (c.reason.clone(), c.message.clone()))
    };
    let mut events = Vec::new();
    if all_ready(after) && !before.is_some_and(all_ready) {
        events.push(StatusEvent {
            warning: false,
            reason: "PodsReady",
            note: format!("all {} pods are ready", after.pods.unwrap_or(0)),
        });
    }
    if let Some((reason, message)) = error(after)
        && before.and_then(error).map(|e| e.0) != Some(reason.clone())
    {
        events.push(StatusEvent {
            warning: true,
            reason: "PodsFailed",
            note: format!(
                "{}: {}",
                reason.unwrap_or_default(),
                message.unwrap_or_default()
            ),
        });
    }
    events
}

#[cfg(test)]
mod tests {
    use super::super::cached_pod::CachedPodStatus;
    use super::*;
    use k8s_openapi::api::core::v1::PodCondition;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelectorRequirement, Time};
    use serde_json::json;

    #[test]
    fn a_slim_podset_plans_exactly_as_the_full_one() {
        let full: Vec<OpaqueObject> = [
            json!({"metadata": {"name": "a-0", "labels": {"x": "y"},
                   "annotations": {"strimzi.io/revision": "r1", "other": "z"}},
                   "spec": {"containers": [{"name": "kafka", "image": "i"}]}}),
            json!({"metadata": {"name": "a-1"}, "spec": {}}),
            json!({"metadata": {"name": "a-0", "annotations": {"strimzi.io/revision": "r2"}}}),
            json!({"metadata": {"labels": {}}}),
            json!({"metadata": {"name": 7, "annotations": {"strimzi.io/revision": 3}}}),
            json!({"metadata": {"name": ""}}),
            json!({"spec": {}}),
        ]
        .into_iter()
        .map(|v| v.as_object().unwrap().clone())
        .collect();
        let slim: Vec<OpaqueObject> = full.iter().map(slim_pod_entry).collect();
        assert_eq!(desired_pods(&slim), desired_pods(&full));
        assert_eq!(
            serde_json::Value::Object(slim[0].clone()),
            json!({"metadata": {"name": "a-0", "annotations": {"strimzi.io/revision": "r1"}}})
        );
    }

    #[test]
    fn the_manifest_to_create_is_the_entry_of_that_name_and_revision_or_none() {
        let pods: Vec<OpaqueObject> = [
            json!({"metadata": {"name": "a-0", "annotations": {"strimzi.io/revision": "r1"}}, "spec": {"n": 0}}),
            json!({"metadata": {"name": "a-1"}, "spec": {"n": 1}}),
        ]
        .into_iter()
        .map(|v| v.as_object().unwrap().clone())
        .collect();
        let (index, entry) = entry_for(&pods, "a-0", Some("r1")).unwrap();
        assert_eq!((index, &entry["spec"]), (0, &json!({"n": 0})));
        assert_eq!(entry_for(&pods, "a-1", None).map(|(i, _)| i), Some(1));
        assert!(
            entry_for(&pods, "a-0", Some("r0")).is_none(),
            "a newer revision"
        );
        assert!(entry_for(&pods, "a-2", None).is_none(), "no longer listed");
    }

    const NOW: &str = "2026-01-01T00:00:00Z";
    const LATER: &str = "2026-01-01T00:05:00Z";

    fn owner() -> Owner {
        Owner {
            name: "my-cluster-broker".into(),
            uid: "uid-podset".into(),
        }
    }

    fn selector() -> LabelSelector {
        LabelSelector {
            match_labels: Some(BTreeMap::from([(
                "strimzi.io/cluster".to_owned(),
                "my-cluster".to_owned(),
            )])),
            match_expressions: None,
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn entry(name: &str, revision: Option<&str>) -> OpaqueObject {
        let mut metadata = json!({"name": name, "labels": {"strimzi.io/cluster": "my-cluster"}});
        if let Some(r) = revision {
            metadata["annotations"] = json!({ names::REVISION: r });
        }
        match json!({"metadata": metadata, "spec": {"containers": [{"name": "kafka", "image": "k"}]}})
        {
            serde_json::Value::Object(o) => o,
            _ => unreachable!(),
        }
    }

    fn desired(names: &[&str]) -> Vec<DesiredPod> {
        names
            .iter()
            .enumerate()
            .map(|(index, name)| DesiredPod {
                index,
                name: (*name).to_owned(),
                revision: Some("r1".into()),
            })
            .collect()
    }

    /// A Running, Ready pod of the podset at revision r1.
    fn ours(name: &str) -> ObservedPod {
        ObservedPod {
            name: name.into(),
            uid: format!("uid-{name}"),
            resource_version: Some("7".into()),
            labels: labels(&[("strimzi.io/cluster", "my-cluster")]),
            owner_references: vec![owner().reference()],
            phase: Some("Running".into()),
            ready: true,
            deleting: false,
            revision: Some("r1".into()),
            manual_roll: false,
        }
    }

    fn run(desired: &[DesiredPod], observed: &[ObservedPod]) -> Plan {
        plan(&owner(), &selector(), desired.len(), desired, observed)
    }

    #[test]
    fn a_manual_roll_of_the_podset_is_handed_to_its_running_pods_once() {
        let desired = desired(&["a-0", "a-1", "a-2"]);
        let marked = ObservedPod {
            manual_roll: true,
            ..ours("a-1")
        };
        let going = ObservedPod {
            deleting: true,
            ..ours("a-2")
        };
        let mut foreign = ours("other-0");
        foreign.owner_references[0].uid = "another-podset".into();
        foreign.owner_references[0].name = "another".into();
        let observed = vec![ours("a-0"), marked, going, foreign, ours("unlisted-9")];
        assert_eq!(
            pods_to_mark(&owner(), &desired, &observed),
            vec![("a-0".to_owned(), "uid-a-0".to_owned())],
            "a marked, a departing, a foreign and an unlisted pod get no mark"
        );
        let annotated =
            |v: &str| BTreeMap::from([(names::MANUAL_ROLLING_UPDATE.to_owned(), v.to_owned())]);
        assert!(asks_manual_roll(Some(&annotated("true"))));
        assert!(!asks_manual_roll(Some(&annotated("false"))));
        assert!(!asks_manual_roll(None));
    }

    fn foreign_controller() -> OwnerReference {
        OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "web".into(),
            uid: "uid-rs".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    #[test]
    fn missing_pods_are_created_in_spec_order() {
        let p = run(&desired(&["a", "b"]), &[]);
        assert_eq!(
            p.actions,
            vec![
                Action::Create {
                    name: "a".into(),
                    index: 0
                },
                Action::Create {
                    name: "b".into(),
                    index: 1
                }
            ]
        );
        assert_eq!(
            p.counts,
            Counts {
                pods: 2,
                ready_pods: 0,
                current_pods: 0
            }
        );
    }

    #[test]
    fn a_settled_podset_needs_nothing() {
        let p = run(&desired(&["a", "b"]), &[ours("a"), ours("b")]);
        assert!(p.actions.is_empty(), "{p:?}");
        assert!(p.failures.is_empty());
        assert_eq!(
            p.counts,
            Counts {
                pods: 2,
                ready_pods: 2,
                current_pods: 2
            }
        );
    }

    #[test]
    fn unlisted_pods_matching_the_selector_are_deleted_and_counted() {
        let mut stray = ours("stray");
        stray.owner_references.clear();
        let p = run(&desired(&["a"]), &[ours("a"), ours("gone"), stray]);
        assert_eq!(
            p.actions,
            vec![
                Action::Delete {
                    name: "gone".into(),
                    uid: "uid-gone".into(),
                    cause: DeleteCause::Unlisted
                },
                Action::Delete {
                    name: "stray".into(),
                    uid: "uid-stray".into(),
                    cause: DeleteCause::Unlisted
                },
            ]
        );
        assert_eq!(p.counts.pods, 3, "pods still being removed are counted");
        assert_eq!(p.counts.ready_pods, 1);
    }

    #[test]
    fn pods_outside_the_selector_are_never_touched() {
        let mut other = ours("other");
        other.labels = labels(&[("strimzi.io/cluster", "another")]);
        other.owner_references.clear();
        let mut unlabelled = ours("bare");
        unlabelled.labels.clear();
        unlabelled.owner_references.clear();
        let p = run(&desired(&["a"]), &[ours("a"), other, unlabelled]);
        assert!(p.actions.is_empty(), "{p:?}");
        assert_eq!(p.counts.pods, 1);
    }

    #[test]
    fn an_empty_selector_deletes_nothing() {
        let empty = LabelSelector::default();
        let empty_map = LabelSelector {
            match_labels: Some(BTreeMap::new()),
            match_expressions: Some(vec![]),
        };
        for sel in [empty, empty_map] {
            let p = plan(&owner(), &sel, 1, &desired(&["a"]), &[ours("a"), ours("b")]);
            assert!(p.actions.is_empty(), "{p:?}");
        }
    }

    #[test]
    fn unlisted_pods_of_another_controller_are_left_alone() {
        let mut pod = ours("web-1");
        pod.owner_references = vec![foreign_controller()];
        let p = run(&desired(&["a"]), &[ours("a"), pod]);
        assert!(p.actions.is_empty(), "{p:?}");
        assert_eq!(p.counts.pods, 1);
    }

    #[test]
    fn unlisted_pods_of_an_earlier_podset_with_the_same_name_are_deleted() {
        let mut pod = ours("old");
        pod.owner_references[0].uid = "uid-earlier".into();
        let p = run(&desired(&[]), &[pod]);
        assert_eq!(p.actions.len(), 1);
        assert!(matches!(
            p.actions[0],
            Action::Delete {
                cause: DeleteCause::Unlisted,
                ..
            }
        ));
    }

    #[test]
    fn terminal_pods_are_deleted_not_recreated_in_the_same_pass() {
        for phase in ["Failed", "Succeeded"] {
            let mut pod = ours("a");
            pod.phase = Some(phase.into());
            pod.ready = false;
            let p = run(&desired(&["a"]), &[pod]);
            assert_eq!(
                p.actions,
                vec![Action::Delete {
                    name: "a".into(),
                    uid: "uid-a".into(),
                    cause: DeleteCause::Terminal
                }],
                "{phase}"
            );
            assert_eq!(p.counts.ready_pods, 0);
        }
    }

    #[test]
    fn pods_being_deleted_are_waited_for() {
        let mut listed = ours("a");
        listed.deleting = true;
        let mut unlisted = ours("b");
        unlisted.deleting = true;
        let mut terminal = ours("c");
        terminal.deleting = true;
        terminal.phase = Some("Failed".into());
        let p = run(&desired(&["a", "c"]), &[listed, unlisted, terminal]);
        assert!(p.actions.is_empty(), "{p:?}");
        assert_eq!(p.waiting, vec!["a".to_owned(), "c".to_owned()]);
        assert_eq!(p.counts.pods, 3);
    }

    #[test]
    fn a_listed_pod_without_owner_reference_is_adopted() {
        let mut pod = ours("a");
        pod.owner_references.clear();
        let p = run(&desired(&["a"]), &[pod]);
        assert_eq!(
            p.actions,
            vec![Action::Adopt {
                name: "a".into(),
                resource_version: Some("7".into()),
                owner_references: vec![owner().reference()],
            }]
        );
        assert_eq!(p.counts.ready_pods, 1, "an adopted pod counts");
    }

    #[test]
    fn adoption_replaces_stale_references_to_the_podset_and_keeps_others() {
        let mut old_version = owner().reference();
        old_version.api_version = "core.strimzi.io/v1beta2".into();
        let mut bystander = foreign_controller();
        bystander.controller = Some(false);
        let mut pod = ours("a");
        pod.owner_references = vec![bystander.clone(), old_version];
        let p = run(&desired(&["a"]), &[pod]);
        let Action::Adopt {
            owner_references, ..
        } = &p.actions[0]
        else {
            panic!("{p:?}")
        };
        assert_eq!(owner_references, &vec![bystander, owner().reference()]);
    }

    #[test]
    fn a_listed_pod_of_another_controller_is_a_failure_and_untouched() {
        let mut pod = ours("a");
        pod.owner_references = vec![foreign_controller()];
        let p = run(&desired(&["a", "b"]), &[pod]);
        assert_eq!(
            p.actions,
            vec![Action::Create {
                name: "b".into(),
                index: 1
            }],
            "the other pods go on"
        );
        assert_eq!(p.failures.len(), 1);
        assert_eq!(p.failures[0].reason, reason::POD_OWNED_BY_OTHER);
        assert!(
            p.failures[0].message.contains("ReplicaSet/web"),
            "{:?}",
            p.failures
        );
        assert_eq!(p.counts.ready_pods, 0);
    }

    #[test]
    fn revision_differences_only_count() {
        let mut stale = ours("a");
        stale.revision = Some("r0".into());
        let mut unannotated = ours("b");
        unannotated.revision = None;
        let p = run(&desired(&["a", "b", "c"]), &[stale, unannotated, ours("c")]);
        assert!(
            p.actions.is_empty(),
            "a revision mismatch never rolls: {p:?}"
        );
        assert_eq!(p.counts.current_pods, 1);
        assert_eq!(p.counts.ready_pods, 3);
    }

    #[test]
    fn revision_comparison_follows_strimzi() {
        assert!(!revision_changed(None, None));
        assert!(!revision_changed(Some("a"), Some("a")));
        assert!(revision_changed(Some("a"), Some("b")));
        assert!(revision_changed(None, Some("a")));
        assert!(revision_changed(Some("a"), None));
    }

    #[test]
    fn spec_entries_without_name_or_duplicated_are_failures() {
        let mut nameless = entry("x", None);
        nameless.remove("metadata");
        let pods = vec![
            entry("a", Some("r1")),
            nameless,
            entry("a", None),
            entry("b", None),
        ];
        let (desired, failures) = desired_pods(&pods);
        assert_eq!(
            desired,
            vec![
                DesiredPod {
                    index: 0,
                    name: "a".into(),
                    revision: Some("r1".into())
                },
                DesiredPod {
                    index: 3,
                    name: "b".into(),
                    revision: None
                },
            ]
        );
        assert_eq!(failures.len(), 2);
        assert!(failures.iter().all(|f| f.reason == reason::INVALID_POD));
        assert!(failures[0].message.contains("spec.pods[1]"), "{failures:?}");
        assert!(failures[1].message.contains("listed more than once"));
        // Unusable entries still count as pods that do not exist yet.
        let p = plan(&owner(), &selector(), pods.len(), &desired, &[]);
        assert_eq!(p.counts.pods, 4);
    }

    #[test]
    fn selector_semantics() {
        let sel = LabelSelector {
            match_labels: Some(BTreeMap::from([("a".to_owned(), "1".to_owned())])),
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "b".into(),
                    operator: "In".into(),
                    values: Some(vec!["x".into(), "y".into()]),
                },
                LabelSelectorRequirement {
                    key: "c".into(),
                    operator: "NotIn".into(),
                    values: Some(vec!["z".into()]),
                },
                LabelSelectorRequirement {
                    key: "d".into(),
                    operator: "Exists".into(),
                    values: None,
                },
                LabelSelectorRequirement {
                    key: "e".into(),
                    operator: "DoesNotExist".into(),
                    values: None,
                },
            ]),
        };
        let ok = labels(&[("a", "1"), ("b", "y"), ("d", "")]);
        assert!(selector_matches(&sel, &ok));
        for bad in [
            labels(&[("a", "2"), ("b", "y"), ("d", "")]),
            labels(&[("b", "y"), ("d", "")]),
            labels(&[("a", "1"), ("b", "q"), ("d", "")]),
            labels(&[("a", "1"), ("b", "y"), ("c", "z"), ("d", "")]),
            labels(&[("a", "1"), ("b", "y")]),
            labels(&[("a", "1"), ("b", "y"), ("d", ""), ("e", "1")]),
        ] {
            assert!(!selector_matches(&sel, &bad), "{bad:?}");
        }
        let unknown = LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "a".into(),
                operator: "Gt".into(),
                values: Some(vec!["0".into()]),
            }]),
        };
        assert!(!selector_matches(&unknown, &labels(&[("a", "1")])));
    }

    #[test]
    fn status_carries_counts_generation_and_an_error_condition() {
        let counts = Counts {
            pods: 3,
            ready_pods: 1,
            current_pods: 2,
        };
        let ok = desired_status(None, Some(4), counts, &[], NOW);
        assert_eq!(ok.observed_generation, Some(4));
        assert_eq!(
            (ok.pods, ok.ready_pods, ok.current_pods),
            (Some(3), Some(1), Some(2))
        );
        assert!(ok.conditions.is_empty());

        let failure = PodFailure {
            pod: "b".into(),
            reason: reason::POD_REJECTED,
            message: "Pod \"b\" is invalid: spec.containers[0].name: Invalid value".into(),
        };
        let failing = desired_status(
            Some(&ok),
            Some(4),
            counts,
            std::slice::from_ref(&failure),
            NOW,
        );
        assert_eq!(failing.conditions.len(), 1);
        let c = &failing.conditions[0];
        assert_eq!(c.type_, ERROR_CONDITION);
        assert_eq!(c.status, "True");
        assert_eq!(c.reason.as_deref(), Some(reason::POD_REJECTED));
        assert_eq!(c.message.as_deref(), Some(failure.message.as_str()));
        assert_eq!(c.last_transition_time.as_deref(), Some(NOW));

        // Still failing later: same status, so nothing to write.
        let again = desired_status(Some(&failing), Some(4), counts, &[failure], LATER);
        assert_eq!(again, failing);

        // Fixed: the condition goes away.
        let fixed = desired_status(Some(&again), Some(5), counts, &[], LATER);
        assert!(fixed.conditions.is_empty());
        assert_eq!(fixed.observed_generation, Some(5));
    }

    #[test]
    fn several_failures_share_one_condition_with_a_bounded_message() {
        let failures: Vec<PodFailure> = (0..200)
            .map(|i| PodFailure {
                pod: format!("p{i}"),
                reason: if i == 0 {
                    reason::POD_REJECTED
                } else {
                    reason::KUBERNETES_API_ERROR
                },
                message: format!("pod p{i}: something long enough to overflow the bound"),
            })
            .collect();
        let c = error_condition(&failures).expect("a condition");
        assert_eq!(c.reason.as_deref(), Some(reason::POD_REJECTED));
        let message = c.message.expect("message");
        assert!(message.starts_with("200 pods failed: pod p0:"), "{message}");
        assert!(message.len() <= MAX_CONDITION_MESSAGE);
        assert!(message.ends_with("..."));
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        let mut s = "ééééé".to_owned();
        truncate(&mut s, 6);
        assert_eq!(s, "é...");
    }

    #[test]
    fn other_conditions_are_dropped_from_the_status() {
        let current = StrimziPodSetStatus {
            conditions: vec![Condition::ready()],
            ..StrimziPodSetStatus::default()
        };
        let status = desired_status(Some(&current), None, Counts::default(), &[], NOW);
        assert!(status.conditions.is_empty());
    }

    fn meta(labels_: &[(&str, &str)], refs: Vec<OwnerReference>) -> ObjectMeta {
        ObjectMeta {
            name: Some("p".into()),
            labels: Some(labels(labels_)),
            owner_references: Some(refs),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn pods_name_their_podset_by_owner_then_labels() {
        let by_owner = meta(
            &[
                (names::CONTROLLER, CONTROLLER_LABEL_VALUE),
                (names::CONTROLLER_NAME, "labelled"),
            ],
            vec![owner().reference()],
        );
        assert_eq!(podsets_named_by_pod(&by_owner), vec!["my-cluster-broker"]);

        let by_labels = meta(
            &[
                (names::CONTROLLER, CONTROLLER_LABEL_VALUE),
                (names::CONTROLLER_NAME, "labelled"),
            ],
            vec![],
        );
        assert_eq!(podsets_named_by_pod(&by_labels), vec!["labelled"]);

        let wrong_value = meta(
            &[
                (names::CONTROLLER, "statefulset"),
                (names::CONTROLLER_NAME, "labelled"),
            ],
            vec![foreign_controller()],
        );
        assert!(podsets_named_by_pod(&wrong_value).is_empty());
        assert!(podsets_named_by_pod(&ObjectMeta::default()).is_empty());
    }

    #[test]
    fn stray_pods_find_the_podsets_that_select_them() {
        let sel = selector();
        let empty = LabelSelector::default();
        let podsets = [("by-selector", &sel), ("empty", &empty)];
        let stray = labels(&[("strimzi.io/cluster", "my-cluster")]);
        assert_eq!(
            podsets_selecting(Some(&stray), podsets),
            vec!["by-selector"]
        );
        let unrelated = labels(&[("app", "web")]);
        assert!(podsets_selecting(Some(&unrelated), podsets).is_empty());
        assert!(podsets_selecting(None, podsets).is_empty());
    }

    #[test]
    fn the_controller_reference_comes_first() {
        let mut other = owner().reference();
        other.name = "second".into();
        other.controller = Some(false);
        let pod = meta(&[], vec![other, owner().reference()]);
        assert_eq!(
            podsets_named_by_pod(&pod),
            vec!["my-cluster-broker".to_owned(), "second".to_owned()]
        );
    }

    #[test]
    fn observed_pods_come_from_trimmed_pods() {
        let mut pod = CachedPod {
            metadata: ObjectMeta {
                name: Some("a".into()),
                uid: Some("u".into()),
                resource_version: Some("9".into()),
                annotations: Some(BTreeMap::from([
                    (names::REVISION.to_owned(), "r1".to_owned()),
                    ("big".to_owned(), "x".repeat(1000)),
                ])),
                deletion_timestamp: Some(Time("2026-01-01T00:00:00Z".parse().expect("time"))),
                ..ObjectMeta::default()
            },
            spec: None,
            status: Some(CachedPodStatus {
                phase: Some("Running".into()),
                conditions: Some(vec![
                    PodCondition {
                        type_: "Initialized".into(),
                        status: "True".into(),
                        ..PodCondition::default()
                    },
                    PodCondition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        message: Some("m".into()),
                        ..PodCondition::default()
                    },
                ]),
                ..CachedPodStatus::default()
            }),
        };
        let before = ObservedPod::from_pod(&pod).expect("observed");
        pod.trim();
        assert_eq!(
            pod.metadata.annotations.as_ref().map(BTreeMap::len),
            Some(1)
        );
        let status = pod.status.as_ref().expect("status");
        assert_eq!(status.conditions.as_ref().map(Vec::len), Some(1));
        let after = ObservedPod::from_pod(&pod).expect("observed");
        assert_eq!(before, after, "trimming loses nothing the controller reads");
        assert!(after.ready && after.deleting);
        assert_eq!(after.revision.as_deref(), Some("r1"));
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        /// An arbitrary pod: a name from a small pool (so names collide with the spec), any
        /// label, owner, phase, readiness, deletion and revision.
        fn observed_pod() -> impl Strategy<Value = ObservedPod> {
            (
                0..8usize,
                prop_oneof![Just("my-cluster"), Just("other"), Just("")],
                0..4u8,
                prop_oneof![
                    Just(None),
                    Just(Some("Pending")),
                    Just(Some("Running")),
                    Just(Some("Failed")),
                    Just(Some("Succeeded"))
                ],
                any::<bool>(),
                any::<bool>(),
                prop_oneof![Just(None), Just(Some("r1")), Just(Some("r0"))],
            )
                .prop_map(
                    |(n, cluster, owner_kind, phase, ready, deleting, revision)| {
                        let mut pod = ours(&format!("p{n}"));
                        pod.labels = if cluster.is_empty() {
                            BTreeMap::new()
                        } else {
                            labels(&[("strimzi.io/cluster", cluster)])
                        };
                        pod.owner_references = match owner_kind {
                            0 => vec![owner().reference()],
                            1 => vec![],
                            2 => vec![foreign_controller()],
                            _ => {
                                let mut stale = owner().reference();
                                stale.uid = "uid-earlier".into();
                                vec![stale]
                            }
                        };
                        pod.phase = phase.map(str::to_owned);
                        pod.ready = ready;
                        pod.deleting = deleting;
                        pod.revision = revision.map(str::to_owned);
                        pod
                    },
                )
        }

        fn cluster() -> impl Strategy<Value = (Vec<DesiredPod>, Vec<ObservedPod>)> {
            (
                proptest::collection::btree_set(0..8usize, 0..8),
                proptest::collection::vec(observed_pod(), 0..10),
            )
                .prop_map(|(wanted, mut observed)| {
                    // Pod names are unique in a namespace.
                    let mut seen = HashSet::new();
                    observed.retain(|p| seen.insert(p.name.clone()));
                    let desired = wanted
                        .into_iter()
                        .enumerate()
                        .map(|(index, n)| DesiredPod {
                            index,
                            name: format!("p{n}"),
                            revision: Some("r1".into()),
                        })
                        .collect();
                    (desired, observed)
                })
        }

        proptest! {
            #[test]
            fn plans_are_safe((desired, observed) in cluster()) {
                let p = run(&desired, &observed);
                let listed: HashSet<&str> = desired.iter().map(|d| d.name.as_str()).collect();
                let by_name: HashMap<&str, &ObservedPod> =
                    observed.iter().map(|o| (o.name.as_str(), o)).collect();
                let mut touched = HashSet::new();
                for action in &p.actions {
                    prop_assert!(touched.insert(action.pod().to_owned()), "one action per pod: {p:?}");
                    match action {
                        Action::Create { name, index } => {
                            prop_assert!(!by_name.contains_key(name.as_str()), "never create an existing pod");
                            prop_assert_eq!(&desired[*index].name, name);
                        }
                        Action::Delete { name, uid, cause } => {
                            let pod = by_name[name.as_str()];
                            prop_assert_eq!(&pod.uid, uid);
                            prop_assert!(!pod.deleting, "never delete twice");
                            prop_assert!(
                                !matches!(ownership(&owner(), &pod.owner_references), Ownership::Foreign(_)),
                                "never delete another controller's pod"
                            );
                            match cause {
                                DeleteCause::Terminal => prop_assert!(listed.contains(name.as_str()) && pod.is_terminal()),
                                DeleteCause::Unlisted => {
                                    prop_assert!(!listed.contains(name.as_str()));
                                    prop_assert!(selector_matches(&selector(), &pod.labels), "never delete outside the selector");
                                }
                            }
                        }
                        Action::Adopt { name, owner_references, .. } => {
                            prop_assert!(listed.contains(name.as_str()));
                            let controllers = owner_references.iter().filter(|r| r.controller == Some(true)).count();
                            prop_assert_eq!(controllers, 1, "exactly one controller after adoption");
                            prop_assert!(owner_references.contains(&owner().reference()));
                        }
                    }
                }
                // Every listed pod is created, exists, or is reported.
                for want in &desired {
                    let handled = by_name.contains_key(want.name.as_str())
                        || p.actions.iter().any(|a| matches!(a, Action::Create { name, .. } if name == &want.name));
                    prop_assert!(handled, "{} is neither present nor created", want.name);
                }
                prop_assert!(p.counts.ready_pods <= p.counts.pods);
                prop_assert!(p.counts.current_pods <= p.counts.pods);
                prop_assert!(p.counts.pods >= i32::try_from(desired.len()).unwrap_or(i32::MAX));
            }

            #[test]
            fn a_settled_cluster_is_a_fixed_point((desired, observed) in cluster()) {
                // Apply the plan the way the cluster would (creations appear Running and owned,
                // deletions vanish, adoptions gain the reference); the next plan only waits.
                let p = run(&desired, &observed);
                let mut next: Vec<ObservedPod> = observed
                    .iter()
                    .filter(|o| !p.actions.iter().any(|a| matches!(a, Action::Delete { uid, .. } if uid == &o.uid)))
                    .filter(|o| !o.deleting)
                    .cloned()
                    .collect();
                for action in &p.actions {
                    match action {
                        Action::Create { name, .. } => next.push(ours(name)),
                        Action::Adopt { name, owner_references, .. } => {
                            if let Some(pod) = next.iter_mut().find(|o| &o.name == name) {
                                pod.owner_references.clone_from(owner_references);
                            }
                        }
                        Action::Delete { .. } => {}
                    }
                }
                // Terminal pods come back as new pods on the pass after their deletion.
                let second = run(&desired, &next);
                for name in second.actions.iter().filter_map(|a| match a {
                    Action::Create { name, .. } => Some(name.clone()),
                    _ => None,
                }) {
                    next.push(ours(&name));
                }
                let third = run(&desired, &next);
                prop_assert!(third.actions.is_empty(), "not settled: {third:?}");
            }
        }
    }

    #[test]
    fn status_events_mark_becoming_ready_and_new_failures_only() {
        let status = |pods: i32, ready: i32, error: Option<&'static str>| StrimziPodSetStatus {
            conditions: error
                .map(|r| {
                    vec![
                        Condition::new(ERROR_CONDITION, condition::TRUE)
                            .with_reason(r)
                            .with_message("quota exceeded"),
                    ]
                })
                .unwrap_or_default(),
            observed_generation: Some(1),
            pods: Some(pods),
            ready_pods: Some(ready),
            current_pods: Some(pods),
        };
        let reasons = |before: Option<&StrimziPodSetStatus>, after: &StrimziPodSetStatus| {
            status_events(before, after)
                .into_iter()
                .map(|e| e.reason)
                .collect::<Vec<_>>()
        };
        assert_eq!(reasons(None, &status(3, 3, None)), ["PodsReady"]);
        assert_eq!(
            reasons(Some(&status(3, 2, None)), &status(3, 3, None)),
            ["PodsReady"]
        );
        assert!(reasons(Some(&status(3, 3, None)), &status(3, 3, None)).is_empty());
        assert!(reasons(Some(&status(3, 3, None)), &status(3, 2, None)).is_empty());
        assert!(
            reasons(None, &status(0, 0, None)).is_empty(),
            "no pods is not ready"
        );
        let failed = status_events(Some(&status(3, 2, None)), &status(3, 2, Some("Forbidden")));
        assert_eq!(failed.len(), 1);
        assert!(failed[0].warning);
        assert_eq!(failed[0].note, "Forbidden: quota exceeded");
        assert!(
            reasons(
                Some(&status(3, 2, Some("Forbidden"))),
                &status(3, 2, Some("Forbidden"))
            )
            .is_empty()
        );
        assert_eq!(
            reasons(
                Some(&status(3, 2, Some("Forbidden"))),
                &status(3, 2, Some("Invalid"))
            ),
            ["PodsFailed"]
        );
    }
}
