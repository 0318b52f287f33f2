//! The `StrimziPodSet` kind (`core.strimzi.io`): the pods of one node pool in one Kubernetes
//! cluster, each given as a full Pod manifest (no template), so every pod may differ.
//!
//! Used internally: central computes podsets and the agent in each cluster applies them and runs
//! their controller. `spec.pods` entries are kept as opaque JSON objects (the apiserver does not
//! prune them); [`StrimziPodSetSpec::typed_pods`] and [`pod_to_object`] convert to and from
//! `k8s_openapi` Pods.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::OpaqueObject;
use crate::condition::Condition;
use crate::error::Error;
use crate::schema::{keep_unknown_fields, label_selector, opaque_object_list};

/// Desired pods of a podset.
// kube's repeated `printcolumn(type_ = ...)` items look like duplicated attributes to clippy.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "core.strimzi.io",
    version = "v1",
    kind = "StrimziPodSet",
    plural = "strimzipodsets",
    singular = "strimzipodset",
    shortname = "sps",
    category = "strimzi",
    namespaced,
    status = "StrimziPodSetStatus",
    derive = "PartialEq",
    doc = "A set of pods given in full; internal, managed by the operator.",
    printcolumn(
        name = "Pods",
        type_ = "integer",
        json_path = ".status.pods",
        description = "Pods managed by the podset"
    ),
    printcolumn(
        name = "Ready Pods",
        type_ = "integer",
        json_path = ".status.readyPods",
        description = "Managed pods that are ready"
    ),
    printcolumn(
        name = "Current Pods",
        type_ = "integer",
        json_path = ".status.currentPods",
        description = "Managed pods running the current revision"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Age of the podset"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct StrimziPodSetSpec {
    /// Selects the pods of this podset (only `matchLabels` is used).
    #[schemars(schema_with = "label_selector")]
    pub selector: LabelSelector,
    /// The pods, each a full Pod manifest (metadata and spec, no status).
    #[schemars(schema_with = "opaque_object_list")]
    pub pods: Vec<OpaqueObject>,
}

impl StrimziPodSetSpec {
    /// The pods as typed `Pod`s (fields unknown to `k8s_openapi` are dropped).
    pub fn typed_pods(&self) -> Result<Vec<Pod>, Error> {
        self.pods
            .iter()
            .map(|pod| {
                serde_json::from_value(serde_json::Value::Object(pod.clone())).map_err(Error::Json)
            })
            .collect()
    }

    /// The names of the pods, in order (entries without a name are skipped).
    pub fn pod_names(&self) -> Vec<&str> {
        self.pods
            .iter()
            .filter_map(|pod| pod.get("metadata")?.get("name")?.as_str())
            .collect()
    }
}

/// Converts a typed Pod into a podset entry.
pub fn pod_to_object(pod: &Pod) -> Result<OpaqueObject, Error> {
    match serde_json::to_value(pod).map_err(Error::Json)? {
        serde_json::Value::Object(object) => Ok(object),
        other => Err(Error::NotAnObject(other.to_string())),
    }
}

/// Observed state of a podset.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct StrimziPodSetStatus {
    /// Status conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Number of pods managed by the podset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<i32>,
    /// Number of managed pods that are ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_pods: Option<i32>,
    /// Number of managed pods whose revision is the desired one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_pods: Option<i32>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde_json::json;

    #[test]
    fn pods_convert_both_ways() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("my-cluster-broker-3".to_owned()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        };
        let spec = StrimziPodSetSpec {
            selector: LabelSelector::default(),
            pods: vec![pod_to_object(&pod).expect("converts")],
        };
        assert_eq!(spec.pod_names(), vec!["my-cluster-broker-3"]);
        let typed = spec.typed_pods().expect("typed");
        assert_eq!(
            typed[0].metadata.name.as_deref(),
            Some("my-cluster-broker-3")
        );
    }

    #[test]
    fn unknown_pod_fields_survive_in_the_spec() {
        let spec: StrimziPodSetSpec = serde_json::from_value(json!({
            "selector": {"matchLabels": {"strimzi.io/cluster": "c"}},
            "pods": [{"metadata": {"name": "p"}, "spec": {"futureField": {"x": 1}}}]
        }))
        .expect("deserializes");
        let back = serde_json::to_value(&spec).expect("serializes");
        assert_eq!(back["pods"][0]["spec"]["futureField"]["x"], json!(1));
    }
}
