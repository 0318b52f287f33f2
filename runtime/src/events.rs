//! Kubernetes Events (`events.k8s.io/v1`) for a process's important transitions. Callers emit
//! only when something changed (never once per reconcile); publishing runs in the background
//! and is best effort: a failed Event is logged and never fails or slows the reconcile.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

pub use kube::runtime::events::EventType as Type;

/// Publishes an Event about `regarding` from `controller` (e.g. `kstretch-central`).
pub fn emit(
    client: &kube::Client,
    controller: &str,
    regarding: ObjectReference,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) {
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: controller.to_owned(),
            instance: std::env::var("POD_NAME").ok(),
        },
    );
    let event = Event {
        type_,
        reason: reason.to_owned(),
        note: Some(note),
        action: action.to_owned(),
        secondary: None,
    };
    tokio::spawn(async move {
        if let Err(e) = recorder.publish(&event, &regarding).await {
            tracing::debug!(reason = %event.reason, "cannot publish an Event: {e}");
        }
    });
}

/// [`emit`] about a typed object: a Warning if `warning`, else Normal.
pub fn about<K>(
    client: &kube::Client,
    controller: &str,
    regarding: &K,
    warning: bool,
    reason: &str,
    action: &str,
    note: String,
) where
    K: kube::Resource<DynamicType = ()>,
{
    let type_ = if warning {
        EventType::Warning
    } else {
        EventType::Normal
    };
    emit(
        client,
        controller,
        regarding.object_ref(&()),
        type_,
        reason,
        action,
        note,
    );
}
