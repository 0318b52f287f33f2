//! The one writer of `.status` for central's `kafka.strimzi.io` kinds that take server-side
//! apply (the topic operator merges instead, see `topic::write`), and their conditions: a
//! `Ready` condition plus one `Warning` per current warning, stale warnings dropped, transition
//! times kept while nothing changed.

use kstretch_api::condition::{self, Condition, WARNING};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};

/// Whether `resource` carries `strimzi.io/pause-reconciliation: "true"`: nothing is changed for
/// it until the annotation goes.
pub fn is_paused<K: kube::Resource>(resource: &K) -> bool {
    resource
        .annotations()
        .get(kstretch_api::names::PAUSE_RECONCILIATION)
        .is_some_and(|v| v == "true")
}

/// Why a resource cannot be served as it is: one stable reason string (from a typed cause) and
/// a message telling the user what to fix. Shown as `Ready=False`; never retried blindly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: &'static str,
    pub message: String,
}

impl Refusal {
    pub fn new(reason: &'static str, message: impl Into<String>) -> Refusal {
        Refusal {
            reason,
            message: message.into(),
        }
    }

    /// One refusal for every problem a validation found: the first one's reason, every
    /// message.
    pub fn of_all<P: std::fmt::Display>(
        problems: &[P],
        reason: impl Fn(&P) -> &'static str,
    ) -> Refusal {
        let message = problems
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        Refusal::new(problems.first().map_or("Invalid", reason), message)
    }
}

/// The conditions of a paused resource (see [`is_paused`]): Ready is `Unknown`, saying why.
pub fn paused(conditions: &[Condition], now: &str) -> Vec<Condition> {
    let ready = Condition::new(kstretch_api::condition::READY, kstretch_api::condition::UNKNOWN)
        .with_reason("ReconciliationPaused")
        .with_message(format!(
            "reconciliation is paused by the annotation {}=true; nothing is changed until it is removed",
            kstretch_api::names::PAUSE_RECONCILIATION
        ));
    self::conditions(conditions, ready, NO_WARNINGS, now)
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
    let patch = serde_json::to_value(StatusPatch {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        status: &status,
    })
    .map_err(kube::Error::SerdeError)?;
    api.patch_status(
        &resource.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(())
}

/// The body of a server-side apply of a resource's status: its type and the status alone.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusPatch<'a, S> {
    api_version: String,
    kind: String,
    status: &'a S,
}

/// A warning as a status shows it: a `Warning` condition with this reason and message.
pub trait Warned {
    fn reason(&self) -> &str;
    fn message(&self) -> &str;
}

/// The reasons one kind of resource warns for, each with its one stable reason string (an enum
/// per kind: `kafka::warning::Reason`, `connect::warning::Reason`, ...).
pub trait Reason: Copy {
    fn as_str(self) -> &'static str;
}

/// One warning: why (one of its kind's [`Reason`]s), and what to tell the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning<R> {
    pub reason: R,
    pub message: String,
}

impl<R> Warning<R> {
    pub fn new(reason: R, message: impl Into<String>) -> Self {
        Warning {
            reason,
            message: message.into(),
        }
    }
}

impl<R: Reason> Warned for Warning<R> {
    fn reason(&self) -> &str {
        self.reason.as_str()
    }

    fn message(&self) -> &str {
        &self.message
    }
}

/// The reason of no warning: a status written without warnings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoReason {}

impl Reason for NoReason {
    fn as_str(self) -> &'static str {
        match self {}
    }
}

/// For a status written without warnings.
pub const NO_WARNINGS: &[Warning<NoReason>] = &[];

/// `existing` conditions updated to `ready` and exactly the `warnings` given (by reason), with
/// transition times kept where the status did not change.
pub fn conditions<W: Warned>(
    existing: &[Condition],
    ready: Condition,
    warnings: &[W],
    now: &str,
) -> Vec<Condition> {
    let mut out: Vec<Condition> = existing
        .iter()
        .filter(|c| {
            c.type_ == condition::READY
                || (c.type_ == WARNING
                    && warnings
                        .iter()
                        .any(|w| c.reason.as_deref() == Some(w.reason())))
        })
        .cloned()
        .collect();
    condition::set_condition(&mut out, ready, now);
    let pairs: Vec<(String, String)> = warnings
        .iter()
        .map(|w| (w.reason().to_owned(), w.message().to_owned()))
        .collect();
    condition::set_warnings(&mut out, &pairs, now);
    out
}

/// `Ready=False` with why (kstretch reports `Ready=False` rather than Strimzi's separate
/// `NotReady` condition, so one condition answers "is it ready?").
pub fn not_ready(reason: impl Into<String>, message: impl Into<String>) -> Condition {
    Condition::new(condition::READY, condition::FALSE)
        .with_reason(reason)
        .with_message(message)
}

/// Now, as conditions write it.
pub fn now() -> String {
    condition::format_timestamp(k8s_openapi::jiff::Timestamp::now())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[derive(Debug, Clone, Copy)]
    enum Test {
        A,
        B,
    }

    impl Reason for Test {
        fn as_str(self) -> &'static str {
            match self {
                Test::A => "A",
                Test::B => "B",
            }
        }
    }

    #[test]
    fn warnings_come_and_go_and_ready_keeps_its_transition_time() {
        let first = conditions(
            &[],
            not_ready("Pending", "pods starting"),
            &[Warning::new(Test::A, "a"), Warning::new(Test::B, "b")],
            "t1",
        );
        assert_eq!(first.len(), 3);
        let second = conditions(
            &first,
            not_ready("Pending", "pods still starting"),
            &[Warning::new(Test::B, "b")],
            "t2",
        );
        assert_eq!(second.len(), 2);
        let ready = second.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(ready.last_transition_time.as_deref(), Some("t1"));
        assert_eq!(ready.message.as_deref(), Some("pods still starting"));
        let warning = second.iter().find(|c| c.type_ == "Warning").unwrap();
        assert_eq!(warning.reason.as_deref(), Some("B"));
        assert_eq!(warning.last_transition_time.as_deref(), Some("t1"));

        let third = conditions(&second, Condition::ready(), NO_WARNINGS, "t3");
        assert_eq!(third.len(), 1);
        assert_eq!(third[0].last_transition_time.as_deref(), Some("t3"));
    }
}
