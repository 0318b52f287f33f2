//! What the topic operator writes to Kubernetes: the `strimzi.io/topic-operator` finalizer
//! (through [`crate::finalizer`]) and `.status`
//! (a merge patch, only when it changed).

use kstretch_api::names::TOPIC_OPERATOR_FINALIZER;
use kstretch_api::{KafkaTopic, KafkaTopicStatus};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

fn api(client: &Client, kt: &KafkaTopic) -> Api<KafkaTopic> {
    Api::namespaced(client.clone(), &kt.namespace().unwrap_or_default())
}

/// Adds the finalizer before the topic is created, so deleting the resource always reaches
/// Kafka.
pub async fn add_finalizer(client: &Client, kt: &KafkaTopic) -> Result<(), kube::Error> {
    crate::finalizer::add(&api(client, kt), kt, TOPIC_OPERATOR_FINALIZER).await
}

/// Removes the finalizer; a resource already gone is fine.
pub async fn remove_finalizer(client: &Client, kt: &KafkaTopic) -> Result<(), kube::Error> {
    crate::finalizer::remove(&api(client, kt), kt, TOPIC_OPERATOR_FINALIZER).await
}

/// Writes `status` unless the resource already has it. A JSON merge patch rather than
/// server-side apply: at tens of thousands of topics the apiserver's managed-fields work for
/// each apply is most of the cost of a status write, and the operator is the status's only
/// writer. Fields the new status drops are set to null so they go.
pub async fn apply_status(
    client: &Client,
    kt: &KafkaTopic,
    status: KafkaTopicStatus,
) -> Result<(), kube::Error> {
    if kt.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let patch = json!({ "status": merge_patch(kt.status.as_ref(), &status)? });
    match api(client, kt)
        .patch_status(
            &kt.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        // Deleted meanwhile: nothing left to report on.
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// `new` as a merge patch over `old`: top-level fields `old` has and `new` lacks become null
/// (lists such as the conditions are replaced whole by a merge patch).
fn merge_patch(
    old: Option<&KafkaTopicStatus>,
    new: &KafkaTopicStatus,
) -> Result<serde_json::Value, kube::Error> {
    let mut value = serde_json::to_value(new).map_err(kube::Error::SerdeError)?;
    if let (Some(old), Some(fields)) = (old, value.as_object_mut()) {
        let old = serde_json::to_value(old).map_err(kube::Error::SerdeError)?;
        for key in old.as_object().into_iter().flat_map(|o| o.keys()) {
            fields.entry(key.clone()).or_insert(serde_json::Value::Null);
        }
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn dropped_status_fields_are_nulled_and_kept_ones_sent() {
        let old = KafkaTopicStatus {
            topic_name: Some("t".into()),
            topic_id: Some("id".into()),
            observed_generation: Some(1),
            ..Default::default()
        };
        let new = KafkaTopicStatus {
            observed_generation: Some(2),
            ..Default::default()
        };
        let patch = merge_patch(Some(&old), &new).unwrap();
        assert_eq!(
            patch,
            json!({"observedGeneration": 2, "topicName": null, "topicId": null})
        );
        assert_eq!(
            merge_patch(None, &old).unwrap(),
            json!({"observedGeneration": 1, "topicName": "t", "topicId": "id"})
        );
    }
}
