//! Installing kstretch's CRDs into a test cluster, the way the chart would.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{Patch, PatchParams};

use crate::Cluster;
use crate::wait::wait_for_object;

/// Field manager of everything the tests apply.
pub const FIELD_MANAGER: &str = "kstretch-tests";

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
