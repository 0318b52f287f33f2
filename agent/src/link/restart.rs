//! Carrying out central's `RestartPod`: deleting one pod of a StrimziPodSet, with a UID
//! precondition, so that the podset controller recreates it from the podset's current
//! definition. This is the only way the agent deletes a pod on central's behalf; the decision
//! (which pod, when, whether the cluster can afford it) is central's.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kstretch_proto::agent::v1::{RestartOutcome, RestartPod, RestartResult};
use kube::api::{DeleteParams, Preconditions};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, ResourceExt};

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
    Decision::Delete
}

/// Deletes pods on central's request.
#[derive(Clone)]
pub struct Restarter {
    client: Client,
    scope: Scope,
    pods: Store<CachedPod>,
}

impl std::fmt::Debug for Restarter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Restarter")
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl Restarter {
    pub fn new(client: Client, scope: Scope, pods: Store<CachedPod>) -> Self {
        Self {
            client,
            scope,
            pods,
        }
    }

    pub async fn restart(&self, request: RestartPod) -> RestartResult {
        let cached: Option<Arc<CachedPod>> = self
            .pods
            .get(&ObjectRef::new(&request.name).within(&request.namespace));
        let (outcome, message) = match decide(&request, &self.scope, cached.as_deref()) {
            Decision::Refuse(refusal) => (RestartOutcome::Refused, refusal.to_string()),
            Decision::Gone(why) => (RestartOutcome::Gone, why),
            Decision::Delete => self.delete(&request).await,
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

    async fn delete(&self, request: &RestartPod) -> (RestartOutcome, String) {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &request.namespace);
        let params = DeleteParams {
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
}
