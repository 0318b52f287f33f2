//! Installing kstretch's CRDs into a test cluster, the way the chart would.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{Patch, PatchParams};

use crate::cluster::Cluster;
use crate::wait::wait_for_object;

pub use crate::cluster::FIELD_MANAGER;

/// Applies every CRD of `kstretch_api::all_crds()` (idempotent, so parallel tests may all call
/// it) and waits until each is `Established`.
pub async fn install(cluster: &Cluster) {
    let api: Api<CustomResourceDefinition> = Api::all(cluster.client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let crds = kstretch_api::all_crds();
    for crd in &crds {
        let name = crd.metadata.name.clone().expect("CRD has a name");
        api.patch(&name, &params, &Patch::Apply(crd))
            .await
            .unwrap_or_else(|e| panic!("{}: the apiserver rejected CRD {name}: {e}", cluster.name));
    }
    for crd in &crds {
        let name = crd.metadata.name.clone().expect("CRD has a name");
        wait_for_object(&api, &name, Duration::from_secs(30), is_established).await;
    }
}

pub fn is_established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conds| {
            conds
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}

/// Installs the Multi-Cluster Services `ServiceExport` CRD (KEP-1645), which a cluster with an
/// MCS implementation has; the schema keeps every field (only the kind matters to kstretch).
pub async fn install_service_export(cluster: &Cluster) {
    let api: Api<CustomResourceDefinition> = Api::all(cluster.client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "serviceexports.multicluster.x-k8s.io"},
        "spec": {
            "group": "multicluster.x-k8s.io",
            "scope": "Namespaced",
            "names": {"kind": "ServiceExport", "plural": "serviceexports",
                      "singular": "serviceexport", "listKind": "ServiceExportList"},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                          "subresources": {"status": {}},
                          "schema": {"openAPIV3Schema": {"type": "object",
                              "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .expect("ServiceExport CRD");
    let name = "serviceexports.multicluster.x-k8s.io";
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&crd),
    )
    .await
    .unwrap_or_else(|e| panic!("{}: cannot install {name}: {e}", cluster.name));
    wait_for_object(&api, name, Duration::from_secs(30), is_established).await;
}
