//! The one writer of `.status` for central's `kafka.strimzi.io` kinds that take server-side
//! apply (the topic operator merges instead, see `topic::write`).

use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

/// Whether `resource` carries `strimzi.io/pause-reconciliation: "true"`: nothing is changed for
/// it until the annotation goes.
pub fn is_paused<K: kube::Resource>(resource: &K) -> bool {
    resource
        .annotations()
        .get(kstretch_api::names::PAUSE_RECONCILIATION)
        .is_some_and(|v| v == "true")
}

/// Central's field manager for everything it applies.
pub const FIELD_MANAGER: &str = "kstretch-central";

/// Server-side applies `status` to the namespaced `resource` unless `current` shows it already
/// has it.
pub async fn apply<K, S>(
    client: &Client,
    resource: &K,
    status: S,
    current: impl Fn(&K) -> Option<&S>,
) -> Result<(), kube::Error>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    S: PartialEq + serde::Serialize,
{
    if current(resource) == Some(&status) {
        return Ok(());
    }
    let api: Api<K> = Api::namespaced(client.clone(), &resource.namespace().unwrap_or_default());
    let patch = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": serde_json::to_value(&status).map_err(kube::Error::SerdeError)?,
    });
    api.patch_status(
        &resource.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(())
}
