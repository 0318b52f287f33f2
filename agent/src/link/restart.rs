//! Carrying out central's `RestartPod`: deleting one pod of a StrimziPodSet, with a UID
//! precondition, so that the podset controller recreates it from the podset's current
//! definition. This is the only way the agent deletes a pod on central's behalf; the decision
//! (which pod, when, whether the cluster can afford it) is central's.
//!
//! A request that names claims also replaces the pod's disks (`strimzi.io/delete-pod-and-pvc`):
//! only for a pod that carries the annotation in this cluster, and only its own data claims.
//! The claims are deleted first, so the new pod cannot start on them; once they are gone the
//! desired state is applied again, which creates them empty.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kstretch_proto::agent::v1::{RestartOutcome, RestartPod, RestartResult, Snapshot};
use kube::api::{DeleteParams, Preconditions};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;

use crate::podset::cached_pod::CachedPod;

use super::objects::Scope;

/// Why a pod is not deleted before the apiserver is asked; pure, so each rule is tested.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("namespace {0:?} is not one of the agent's namespaces")]
    NamespaceNotManaged(String),
    #[error("the request names no pod or no UID")]
    Incomplete,
    #[error("pod {0} is not owned by a StrimziPodSet; the agent restarts only podset pods")]
    NotAPodSetPod(String),
    #[error(
        "pod {0} does not carry strimzi.io/delete-pod-and-pvc: \"true\"; the agent deletes a pod's claims only when it does"
    )]
    NotMarkedForNewDisks(String),
    #[error("claim {claim} is not a data claim of pod {pod} (data-{pod} or data-<n>-{pod})")]
    NotThePodsClaim { claim: String, pod: String },
}

/// What to do with a request, given the pod as the agent's cache holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Delete,
    /// The pod is gone or was already replaced: nothing to delete.
    Gone(String),
    Refuse(Refusal),
}

/// Decides on `request` against the cached pod (`None` when the cache has no such pod).
pub fn decide(request: &RestartPod, scope: &Scope, cached: Option<&CachedPod>) -> Decision {
    if request.name.is_empty() || request.uid.is_empty() || request.namespace.is_empty() {
        return Decision::Refuse(Refusal::Incomplete);
    }
    if !scope.allows(&request.namespace) {
        return Decision::Refuse(Refusal::NamespaceNotManaged(request.namespace.clone()));
    }
    let Some(pod) = cached else {
        return Decision::Gone(format!("pod {} does not exist", request.name));
    };
    let uid = pod.uid().unwrap_or_default();
    if uid != request.uid {
        return Decision::Gone(format!(
            "pod {} was already replaced (UID {uid}, asked for {})",
            request.name, request.uid
        ));
    }
    let owned_by_podset = pod
        .owner_references()
        .iter()
        .any(|o| o.kind == "StrimziPodSet" && o.api_version.starts_with("core.strimzi.io/"));
    if !owned_by_podset {
        return Decision::Refuse(Refusal::NotAPodSetPod(request.name.clone()));
    }
    if !request.claims.is_empty() {
        if !crate::podset::plan::asks_new_disks(pod.metadata.annotations.as_ref()) {
            return Decision::Refuse(Refusal::NotMarkedForNewDisks(request.name.clone()));
        }
        if let Some(claim) = request
            .claims
            .iter()
            .find(|c| !is_data_claim_of(c, &request.name))
        {
            return Decision::Refuse(Refusal::NotThePodsClaim {
                claim: claim.clone(),
                pod: request.name.clone(),
            });
        }
    }
    Decision::Delete
}

/// Strimzi's names for a pod's data claims: `data-<pod>` (one volume) or `data-<id>-<pod>`
/// (a JBOD volume).
fn is_data_claim_of(claim: &str, pod: &str) -> bool {
    let Some(rest) = claim
        .strip_prefix("data-")
        .and_then(|c| c.strip_suffix(pod))
    else {
        return false;
    };
    rest.is_empty()
        || rest
            .strip_suffix('-')
            .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
}

/// How often, and how long, a deleted claim is looked for before the desired state is applied
/// again. The claim goes once its pod has (the pod's graceful shutdown first).
const CLAIM_GONE_POLL: Duration = Duration::from_secs(2);
const CLAIM_GONE_WAIT: Duration = Duration::from_secs(600);

/// Deletes pods on central's request.
#[derive(Clone)]
pub struct Restarter {
    client: Client,
    scope: Scope,
    pods: Store<CachedPod>,
    /// The latest snapshot, handed to the applier again to create deleted claims anew.
    snapshots: Arc<watch::Sender<Option<Arc<Snapshot>>>>,
}

impl std::fmt::Debug for Restarter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Restarter")
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl Restarter {
    pub fn new(
        client: Client,
        scope: Scope,
        pods: Store<CachedPod>,
        snapshots: Arc<watch::Sender<Option<Arc<Snapshot>>>>,
    ) -> Self {
        Self {
            client,
            scope,
            pods,
            snapshots,
        }
    }

    pub async fn restart(&self, request: RestartPod) -> RestartResult {
        let cached: Option<Arc<CachedPod>> = self
            .pods
            .get(&ObjectRef::new(&request.name).within(&request.namespace));
        let (outcome, message) = match decide(&request, &self.scope, cached.as_deref()) {
            Decision::Refuse(refusal) => (RestartOutcome::Refused, refusal.to_string()),
            Decision::Gone(why) => (RestartOutcome::Gone, why),
            Decision::Delete if request.claims.is_empty() => self.delete_pod(&request, false).await,
            Decision::Delete => self.delete_with_claims(&request).await,
        };
        match outcome {
            RestartOutcome::Deleted => tracing::info!(
                pod = %request.name, namespace = %request.namespace, reason = %request.reason,
                "pod deleted on central's request; its podset recreates it"
            ),
            _ => tracing::warn!(
                pod = %request.name, namespace = %request.namespace, outcome = ?outcome,
                %message, "restart request not carried out"
            ),
        }
        RestartResult {
            request_id: request.request_id,
            outcome: outcome.into(),
            message,
        }
    }

    /// Deletes the pod with the UID precondition (`dry_run`: only checks that it would).
    async fn delete_pod(&self, request: &RestartPod, dry_run: bool) -> (RestartOutcome, String) {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &request.namespace);
        let params = DeleteParams {
            dry_run,
            preconditions: Some(Preconditions {
                uid: Some(request.uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(&request.name, &params).await {
            Ok(_) => (RestartOutcome::Deleted, String::new()),
            // 404: gone meanwhile; 409: the UID precondition failed, so it was replaced.
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {
                (RestartOutcome::Gone, status.message)
            }
            Err(kube::Error::Api(status)) => (RestartOutcome::Failed, status.message),
            Err(e) => (RestartOutcome::Failed, e.to_string()),
        }
    }
}

impl Restarter {
    /// The pod's claims, then the pod: a claim in use only goes once its pod has, and the pod
    /// the podset creates meanwhile cannot be scheduled on a claim that is being deleted. The
    /// apiserver checks the pod's UID first (dry run), so a replaced pod keeps its claims.
    async fn delete_with_claims(&self, request: &RestartPod) -> (RestartOutcome, String) {
        let checked = self.delete_pod(request, true).await;
        if checked.0 != RestartOutcome::Deleted {
            return checked;
        }
        let claims: Api<PersistentVolumeClaim> =
            Api::namespaced(self.client.clone(), &request.namespace);
        let mut deleted = Vec::new();
        for name in &request.claims {
            match claims.delete(name, &DeleteParams::default()).await {
                Ok(either) => {
                    let uid = either.either(|c| c.uid(), |_| None).unwrap_or_default();
                    deleted.push((name.clone(), uid));
                }
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(kube::Error::Api(status)) => {
                    return (
                        RestartOutcome::Failed,
                        format!("claim {name}: {}", status.message),
                    );
                }
                Err(e) => return (RestartOutcome::Failed, format!("claim {name}: {e}")),
            }
        }
        let outcome = self.delete_pod(request, false).await;
        let restarter = self.clone();
        let pod = request.name.clone();
        tokio::spawn(async move { restarter.create_claims_again(&pod, claims, deleted).await });
        match outcome {
            (RestartOutcome::Deleted, _) => (
                RestartOutcome::Deleted,
                format!(
                    "pod deleted with its claims {:?}; they are created again, empty, once gone",
                    request.claims
                ),
            ),
            other => other,
        }
    }

    /// Waits until each deleted claim is gone (or replaced), then hands the latest snapshot to
    /// the applier again, which creates them from central's desired state.
    async fn create_claims_again(
        &self,
        pod: &str,
        claims: Api<PersistentVolumeClaim>,
        deleted: Vec<(String, String)>,
    ) {
        let start = tokio::time::Instant::now();
        for (name, uid) in &deleted {
            loop {
                match claims.get_opt(name).await {
                    Ok(None) => break,
                    Ok(Some(c)) if c.uid().as_deref() != Some(uid.as_str()) => break,
                    Ok(Some(_)) | Err(_) if start.elapsed() < CLAIM_GONE_WAIT => {
                        tokio::time::sleep(CLAIM_GONE_POLL).await;
                    }
                    _ => {
                        tracing::warn!(%pod, claim = %name, "claim still not gone; the next snapshot creates it again");
                        return;
                    }
                }
            }
        }
        tracing::info!(%pod, claims = ?deleted.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            "claims gone; applying the desired state again to create them empty");
        self.snapshots.send_modify(|_| {});
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::json;

    fn request() -> RestartPod {
        RestartPod {
            request_id: "r1".into(),
            namespace: "kafka".into(),
            name: "c-b-1".into(),
            uid: "u1".into(),
            reason: "revision changed".into(),
            claims: Vec::new(),
        }
    }

    fn pod(uid: &str, owner_kind: &str) -> CachedPod {
        serde_json::from_value(json!({
            "metadata": {"name": "c-b-1", "namespace": "kafka", "uid": uid,
                "ownerReferences": [{"apiVersion": "core.strimzi.io/v1", "kind": owner_kind,
                                     "name": "c-b", "uid": "ps"}]}
        }))
        .unwrap()
    }

    #[test]
    fn deletes_the_podset_pod_with_the_uid_central_saw() {
        let p = pod("u1", "StrimziPodSet");
        assert_eq!(decide(&request(), &Scope::All, Some(&p)), Decision::Delete);
    }

    #[test]
    fn a_replaced_or_missing_pod_is_gone_not_deleted_again() {
        let p = pod("u2", "StrimziPodSet");
        assert!(matches!(
            decide(&request(), &Scope::All, Some(&p)),
            Decision::Gone(m) if m.contains("already replaced")
        ));
        assert!(matches!(
            decide(&request(), &Scope::All, None),
            Decision::Gone(_)
        ));
    }

    #[test]
    fn refuses_outside_its_namespaces_foreign_pods_and_incomplete_requests() {
        let scope = Scope::Namespaces(["other".to_owned()].into());
        let p = pod("u1", "StrimziPodSet");
        assert_eq!(
            decide(&request(), &scope, Some(&p)),
            Decision::Refuse(Refusal::NamespaceNotManaged("kafka".into()))
        );
        let foreign = pod("u1", "ReplicaSet");
        assert_eq!(
            decide(&request(), &Scope::All, Some(&foreign)),
            Decision::Refuse(Refusal::NotAPodSetPod("c-b-1".into()))
        );
        let mut incomplete = request();
        incomplete.uid.clear();
        assert_eq!(
            decide(&incomplete, &Scope::All, Some(&p)),
            Decision::Refuse(Refusal::Incomplete)
        );
    }

    fn marked(uid: &str) -> CachedPod {
        let mut p = pod(uid, "StrimziPodSet");
        p.metadata.annotations = Some(
            [(
                "strimzi.io/delete-pod-and-pvc".to_owned(),
                "true".to_owned(),
            )]
            .into(),
        );
        p
    }

    #[test]
    fn claims_go_only_with_a_pod_marked_for_new_disks_and_only_its_own() {
        let mut wipe = request();
        wipe.claims = vec!["data-c-b-1".into(), "data-0-c-b-1".into()];
        assert_eq!(
            decide(&wipe, &Scope::All, Some(&marked("u1"))),
            Decision::Delete
        );
        assert_eq!(
            decide(&wipe, &Scope::All, Some(&pod("u1", "StrimziPodSet"))),
            Decision::Refuse(Refusal::NotMarkedForNewDisks("c-b-1".into()))
        );
        for foreign in [
            "data-c-b-11",
            "data-x-c-b-1",
            "logs-c-b-1",
            "data--c-b-1",
            "c-b-1",
        ] {
            wipe.claims = vec![foreign.into()];
            assert_eq!(
                decide(&wipe, &Scope::All, Some(&marked("u1"))),
                Decision::Refuse(Refusal::NotThePodsClaim {
                    claim: foreign.into(),
                    pod: "c-b-1".into()
                }),
                "{foreign}"
            );
        }
    }
}
