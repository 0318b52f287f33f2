//! Adding and removing one finalizer on any resource: JSON patches guarded by a `test`, so a
//! concurrent change of the finalizers is never overwritten. The one writer of finalizers for
//! every controller of central.

use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

fn json_patch(ops: serde_json::Value) -> Result<Patch<()>, kube::Error> {
    let patch: json_patch::Patch = serde_json::from_value(ops).map_err(kube::Error::SerdeError)?;
    Ok(Patch::Json(patch))
}

/// Adds `finalizer` to `obj` unless it has it.
pub async fn add<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    if obj.finalizers().iter().any(|f| f == finalizer) {
        return Ok(());
    }
    let ops = match &obj.meta().finalizers {
        Some(list) if !list.is_empty() => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": list},
            {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer},
        ]),
        _ => json!([
            {"op": "test", "path": "/metadata/resourceVersion", "value": obj.resource_version()},
            {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]},
        ]),
    };
    api.patch(&obj.name_any(), &PatchParams::default(), &json_patch(ops)?)
        .await?;
    Ok(())
}

/// Removes `finalizer` from `obj`; a resource already gone, or without it, is fine.
pub async fn remove<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let Some(index) = obj.finalizers().iter().position(|f| f == finalizer) else {
        return Ok(());
    };
    let path = format!("/metadata/finalizers/{index}");
    let ops = json!([
        {"op": "test", "path": path, "value": finalizer},
        {"op": "remove", "path": path},
    ]);
    match api
        .patch(&obj.name_any(), &PatchParams::default(), &json_patch(ops)?)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}
