//! Finding the Kubernetes Events (events.k8s.io/v1) kstretch recorded about an object.

use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::Api;

use crate::wait::{Seen, wait_for};

/// One line per Event: what it is about, its type, reason and note.
pub fn describe(events: &[Event]) -> String {
    events
        .iter()
        .map(|e| {
            format!(
                "{:?} {:?} {:?} {:?} {:?}",
                e.regarding.as_ref().and_then(|r| r.kind.clone()),
                e.regarding.as_ref().and_then(|r| r.name.clone()),
                e.type_,
                e.reason,
                e.note
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The Events about `kind`/`name` (with `reason`, if given) now; `Err` lists all of them.
pub async fn find(
    events: &Api<Event>,
    kind: &str,
    name: &str,
    reason: Option<&str>,
) -> Result<Vec<Event>, String> {
    let list = events
        .list(&Default::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let matching: Vec<Event> =
        list.iter()
            .filter(|e| {
                e.regarding.as_ref().is_some_and(|r| {
                    r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name)
                }) && reason.is_none_or(|want| e.reason.as_deref() == Some(want))
            })
            .cloned()
            .collect();
    if matching.is_empty() {
        Err(describe(&list))
    } else {
        Ok(matching)
    }
}

/// Waits (up to `timeout`) for an Event about `kind`/`name` with `reason`.
pub async fn wait_event(
    events: &Api<Event>,
    kind: &str,
    name: &str,
    reason: &str,
    timeout: Duration,
) -> Vec<Event> {
    wait_for(
        &format!("a {reason} event about {kind} {name}"),
        timeout,
        || async {
            match find(events, kind, name, Some(reason)).await {
                Ok(found) => Seen::Done(found),
                Err(all) => Seen::NotYet(all),
            }
        },
    )
    .await
}

/// The note of the first Event in `events`.
pub fn note(events: &[Event]) -> &str {
    events
        .first()
        .and_then(|e| e.note.as_deref())
        .unwrap_or_default()
}
