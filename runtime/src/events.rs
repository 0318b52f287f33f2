//! Kubernetes Events (`events.k8s.io/v1`) for a process's important transitions, through one
//! [`Events`] per controller. Each Event is its own object: a kube `Recorder` kept across Events
//! would fold an Event into the series of an earlier one with the same reason about the same
//! object even when its note differs ("nodes [6] added" hidden behind "nodes [0, 1, 2] added").
//! Callers emit only when something changed (never once per reconcile); publishing runs in the
//! background and is best effort: a failed Event is logged and never fails or slows the
//! reconcile.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

pub use kube::runtime::events::EventType as Type;

/// The Event publisher of one controller, reporting as `controller` (e.g. `kstretch-central`)
/// and, in a pod, as that pod. Cheap to clone.
#[derive(Clone)]
pub struct Events {
    client: kube::Client,
    reporter: Reporter,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events").finish_non_exhaustive()
    }
}

impl Events {
    pub fn new(client: kube::Client, controller: &str) -> Self {
        let reporter = Reporter {
            controller: controller.to_owned(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self { client, reporter }
    }

    /// Publishes an Event about `regarding`.
    pub fn emit(
        &self,
        regarding: ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let recorder = Recorder::new(self.client.clone(), self.reporter.clone());
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

    /// [`Events::emit`] about a typed object: a Warning if `warning`, else Normal.
    pub fn about<K>(&self, regarding: &K, warning: bool, reason: &str, action: &str, note: String)
    where
        K: kube::Resource<DynamicType = ()>,
    {
        let type_ = if warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        self.emit(regarding.object_ref(&()), type_, reason, action, note);
    }
}
