//! The pod as the agent caches it: its metadata and the few status fields the podset
//! controller and the link read, decoded from the watch without the rest.
//!
//! The agent watches every pod of its scope. A `k8s_openapi` `Pod` is 2.4 KB before any of its
//! fields holds anything (its spec alone is 1.5 KB of empty options), and decoding one builds
//! its whole spec only for the cache to drop it; this type never decodes the spec, and what it
//! decodes and does not need is dropped by [`CachedPod::trim`] before the pod enters the cache.
//! Nothing is ever written back from it: pods are created from their podset's manifests and
//! adopted with a patch.

use std::borrow::Cow;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{ContainerState, ContainerStatus, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kstretch_api::names;
use serde::Deserialize;

/// A pod as cached: fields the watch carries that are not here are never decoded.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct CachedPod {
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: Option<CachedPodSpec>,
    pub status: Option<CachedPodStatus>,
}

/// What is read of a pod's spec: where it is scheduled.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CachedPodSpec {
    pub node_name: Option<String>,
}

/// What is read of a pod's status.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CachedPodStatus {
    pub phase: Option<String>,
    /// Where the link calls a Kafka Connect worker for central (`ConnectCall`).
    #[serde(rename = "podIP")]
    pub pod_ip: Option<String>,
    pub conditions: Option<Vec<PodCondition>>,
    pub init_container_statuses: Option<Vec<ContainerStatus>>,
    pub container_statuses: Option<Vec<ContainerStatus>>,
}

/// The same resource as `k8s_openapi`'s `Pod` (core/v1, `pods`), so one `Api` lists and
/// watches it.
impl kube::Resource for CachedPod {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("Pod")
    }

    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }

    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }

    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("pods")
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl CachedPod {
    /// Drops what was decoded but is never read, before the pod enters the cache: managed
    /// fields, annotations other than the revision, a manual roll's and a new disk's,
    /// conditions other than `Ready` (and its text, which changes on every probe), container
    /// statuses with nothing to say.
    pub fn trim(&mut self) {
        let meta = &mut self.metadata;
        meta.managed_fields = None;
        if let Some(annotations) = meta.annotations.as_mut() {
            annotations.retain(|key, _| {
                key == names::REVISION
                    || key == names::MANUAL_ROLLING_UPDATE
                    || key == names::DELETE_POD_AND_PVC
            });
            if annotations.is_empty() {
                meta.annotations = None;
            }
        }
        if let Some(status) = self.status.as_mut() {
            let ready = status
                .conditions
                .take()
                .unwrap_or_default()
                .into_iter()
                .filter(|c| c.type_ == "Ready")
                .map(|c| PodCondition {
                    type_: c.type_,
                    status: c.status,
                    ..PodCondition::default()
                })
                .collect();
            status.conditions = Some(ready);
            // What the link reports of the containers (`link::status::containers_say`), kept
            // only for those that have something to say: a healthy pod keeps none.
            status.init_container_statuses = saying(status.init_container_statuses.take());
            status.container_statuses = saying(status.container_statuses.take());
        }
    }

    /// The node the pod is scheduled to, if it is.
    pub fn node_name(&self) -> Option<&str> {
        self.spec.as_ref()?.node_name.as_deref()
    }

    /// Whether the pod's `Ready` condition is `True`.
    pub fn is_ready(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|conditions| {
                conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
    }
}

/// Whether a container's state says more than "running" or "starting": it ended with a
/// message or an error, or waits for another reason than being started.
pub fn says_something(state: &ContainerState) -> bool {
    state.terminated.as_ref().is_some_and(|t| {
        t.exit_code != 0 || t.message.as_ref().is_some_and(|m| !m.trim().is_empty())
    }) || state.waiting.as_ref().is_some_and(|w| {
        w.reason
            .as_deref()
            .is_some_and(|r| !["ContainerCreating", "PodInitializing"].contains(&r))
    })
}

/// The container statuses that say something, with only what is read.
fn saying(statuses: Option<Vec<ContainerStatus>>) -> Option<Vec<ContainerStatus>> {
    let kept: Vec<ContainerStatus> = statuses?
        .into_iter()
        .filter_map(|c| {
            let state = c.state?;
            says_something(&state).then(|| ContainerStatus {
                name: c.name,
                state: Some(state),
                last_state: c.last_state.map(|s| ContainerState {
                    terminated: s.terminated,
                    ..Default::default()
                }),
                ..Default::default()
            })
        })
        .collect();
    (!kept.is_empty()).then_some(kept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;
    use serde_json::json;

    #[test]
    fn a_watched_pod_decodes_without_its_spec_and_trims_to_what_is_read() {
        let mut pod: CachedPod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "a", "namespace": "ns", "uid": "u", "resourceVersion": "9",
                         "annotations": {(names::REVISION): "r1", "big": "x".repeat(1000)},
                         "managedFields": [{"manager": "m"}]},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running", "hostIP": "10.0.0.1", "conditions": [
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "True", "message": "m",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "containerStatuses": [{"name": "kafka", "image": "i", "imageID": "x",
                    "ready": true, "restartCount": 0, "state": {"running": {}}}]}
        }))
        .unwrap();
        assert!(pod.is_ready());
        pod.trim();
        assert_eq!(
            pod.metadata.annotations,
            Some([(names::REVISION.to_owned(), "r1".to_owned())].into())
        );
        assert!(pod.metadata.managed_fields.is_none());
        let status = pod.status.as_ref().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert_eq!(
            status.conditions,
            Some(vec![PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..PodCondition::default()
            }])
        );
        assert_eq!(
            status.container_statuses, None,
            "a running container says nothing"
        );
        assert!(pod.is_ready());
        assert!(
            std::mem::size_of::<CachedPod>()
                < std::mem::size_of::<k8s_openapi::api::core::v1::Pod>() / 4
        );
    }

    #[test]
    fn it_is_the_core_v1_pods_resource() {
        assert_eq!(CachedPod::api_version(&()), "v1");
        assert_eq!(CachedPod::kind(&()), "Pod");
        assert_eq!(
            CachedPod::url_path(&(), Some("ns")),
            "/api/v1/namespaces/ns/pods"
        );
    }
}
