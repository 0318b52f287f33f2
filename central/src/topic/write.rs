//! What the topic operator writes to Kubernetes: the `strimzi.io/topic-operator` finalizer (JSON
//! patches guarded by a `test`, so a concurrent change is never overwritten) and `.status`
//! (server-side apply under central's field manager, only when it changed).

use kstretch_api::names::TOPIC_OPERATOR_FINALIZER;
use kstretch_api::{KafkaTopic, KafkaTopicStatus};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use crate::kafka::status::FIELD_MANAGER;

fn api(client: &Client, kt: &KafkaTopic) -> Api<KafkaTopic> {
    Api::namespaced(client.clone(), &kt.namespace().unwrap_or_default())
}

fn json_patch(ops: serde_json::Value) -> Result<Patch<()>, kube::Error> {
    let patch: json_patch::Patch = serde_json::from_value(ops).map_err(kube::Error::SerdeError)?;
    Ok(Patch::Json(patch))
}

/// Adds the finalizer before the topic is created, so deleting the resource always reaches
/// Kafka.
pub async fn add_finalizer(client: &Client, kt: &KafkaTopic) -> Result<(), kube::Error> {
    let ops = match &kt.metadata.finalizers {
        Some(list) if !list.is_empty() => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": list},
            {"op": "add", "path": "/metadata/finalizers/-", "value": TOPIC_OPERATOR_FINALIZER},
        ]),
        _ => json!([
            {"op": "test", "path": "/metadata/resourceVersion", "value": kt.resource_version()},
            {"op": "add", "path": "/metadata/finalizers", "value": [TOPIC_OPERATOR_FINALIZER]},
        ]),
    };
    api(client, kt)
        .patch(&kt.name_any(), &PatchParams::default(), &json_patch(ops)?)
        .await?;
    Ok(())
}

/// Removes the finalizer; a resource already gone is fine.
pub async fn remove_finalizer(client: &Client, kt: &KafkaTopic) -> Result<(), kube::Error> {
    let Some(index) = kt
        .finalizers()
        .iter()
        .position(|f| f == TOPIC_OPERATOR_FINALIZER)
    else {
        return Ok(());
    };
    let path = format!("/metadata/finalizers/{index}");
    let ops = json!([
        {"op": "test", "path": path, "value": TOPIC_OPERATOR_FINALIZER},
        {"op": "remove", "path": path},
    ]);
    match api(client, kt)
        .patch(&kt.name_any(), &PatchParams::default(), &json_patch(ops)?)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Applies `status` unless the resource already has it.
pub async fn apply_status(
    client: &Client,
    kt: &KafkaTopic,
    status: KafkaTopicStatus,
) -> Result<(), kube::Error> {
    if kt.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let patch = json!({
        "apiVersion": "kafka.strimzi.io/v1",
        "kind": "KafkaTopic",
        "status": status,
    });
    match api(client, kt)
        .patch_status(
            &kt.name_any(),
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        // Deleted meanwhile: nothing left to report on.
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}
