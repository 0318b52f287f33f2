//! The status condition shared by every kind, in Strimzi's form, and pure helpers to update lists
//! of conditions.
//!
//! Strimzi reports `Ready` (status `True`) when a resource is reconciled, `NotReady` (status
//! `True`, with the reason and message of the failure) when it is not, and any number of
//! `Warning` conditions told apart by their `reason`. `lastTransitionTime` is a UTC timestamp in
//! RFC 3339 form with second precision (`2024-06-04T08:44:15Z`); see [`format_timestamp`].

use k8s_openapi::jiff::Timestamp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Condition type: the resource is reconciled and usable.
pub const READY: &str = "Ready";
/// Condition type: the last reconciliation failed (status `True` while it is the case).
pub const NOT_READY: &str = "NotReady";
/// Condition type: something the user should look at; several may exist, one per `reason`.
pub const WARNING: &str = "Warning";

/// Condition status `True`.
pub const TRUE: &str = "True";
/// Condition status `False`.
pub const FALSE: &str = "False";
/// Condition status `Unknown`.
pub const UNKNOWN: &str = "Unknown";

/// Reason of a failure the Kubernetes API returned (a timeout, a 5xx, a conflict), the same for
/// every kind and both binaries.
pub const KUBERNETES_ERROR: &str = "KubernetesError";

/// One observation about the state of a resource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// What this condition is about, for example `Ready`, `NotReady` or `Warning`.
    #[serde(rename = "type", default)]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[serde(default)]
    pub status: String,
    /// When the status last changed, as an RFC 3339 UTC timestamp (`yyyy-MM-ddTHH:mm:ssZ`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    /// A single CamelCase word saying why the condition is in its current status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human-readable explanation of the current status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Condition {
    /// A condition of the given type and status, without reason, message or time.
    pub fn new(type_: impl Into<String>, status: impl Into<String>) -> Self {
        Self {
            type_: type_.into(),
            status: status.into(),
            ..Self::default()
        }
    }

    /// `Ready` with status `True`.
    pub fn ready() -> Self {
        Self::new(READY, TRUE)
    }

    /// `NotReady` with status `True`, carrying why.
    pub fn not_ready(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(NOT_READY, TRUE)
            .with_reason(reason)
            .with_message(message)
    }

    /// `Warning` with status `True`, carrying why.
    pub fn warning(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(WARNING, TRUE)
            .with_reason(reason)
            .with_message(message)
    }

    /// The same condition with `reason` set.
    #[must_use]
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// The same condition with `message` set.
    #[must_use]
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }

    /// Whether the status is `True`.
    pub fn is_true(&self) -> bool {
        self.status == TRUE
    }

    /// Same type, status, reason and message (the transition time is not compared).
    fn same_observation(&self, other: &Self) -> bool {
        self.type_ == other.type_
            && self.status == other.status
            && self.reason == other.reason
            && self.message == other.message
    }
}

/// Formats a timestamp the way Strimzi writes `lastTransitionTime`: UTC, second precision.
pub fn format_timestamp(timestamp: Timestamp) -> String {
    timestamp.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The first condition of the given type.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether a condition of the given type exists with status `True`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(Condition::is_true)
}

/// Sets the condition of `new.type_`, replacing any condition of that type.
///
/// `lastTransitionTime` is kept from the existing condition while the status stays the same, and
/// set to `now` when the status changes or the condition is new (a time already present on `new`
/// is ignored). Returns whether anything visible changed.
pub fn set_condition(conditions: &mut Vec<Condition>, new: Condition, now: &str) -> bool {
    upsert(conditions, new, now, |existing, new| {
        existing.type_ == new.type_
    })
}

/// Adds or updates a `Warning` condition, keyed by its reason (several warnings with different
/// reasons may exist at once). Returns whether anything visible changed.
pub fn set_warning(
    conditions: &mut Vec<Condition>,
    reason: &str,
    message: impl Into<String>,
    now: &str,
) -> bool {
    let new = Condition::warning(reason, message);
    upsert(conditions, new, now, |existing, new| {
        existing.type_ == WARNING && existing.reason == new.reason
    })
}

/// Sets a `Warning` condition per reason of `warnings` (reason, message): the messages of one
/// reason are joined with `; ` in their order (a message given twice once), so that no warning
/// hides another of the same reason. Returns whether anything visible changed.
pub fn set_warnings(
    conditions: &mut Vec<Condition>,
    warnings: &[(String, String)],
    now: &str,
) -> bool {
    let mut by_reason: Vec<(&str, Vec<&str>)> = Vec::new();
    for (reason, message) in warnings {
        match by_reason.iter_mut().find(|(r, _)| r == reason) {
            Some((_, messages)) if messages.contains(&message.as_str()) => {}
            Some((_, messages)) => messages.push(message),
            None => by_reason.push((reason, vec![message])),
        }
    }
    let mut changed = false;
    for (reason, messages) in by_reason {
        changed |= set_warning(conditions, reason, messages.join("; "), now);
    }
    changed
}

/// Removes every condition of the given type. Returns whether any was removed.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// Removes the `Warning` condition with the given reason. Returns whether one was removed.
pub fn remove_warning(conditions: &mut Vec<Condition>, reason: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| !(c.type_ == WARNING && c.reason.as_deref() == Some(reason)));
    conditions.len() != before
}

fn upsert(
    conditions: &mut Vec<Condition>,
    mut new: Condition,
    now: &str,
    same_key: impl Fn(&Condition, &Condition) -> bool,
) -> bool {
    let position = conditions.iter().position(|c| same_key(c, &new));
    let Some(index) = position else {
        new.last_transition_time = Some(now.to_owned());
        conditions.push(new);
        return true;
    };
    let existing = &conditions[index];
    new.last_transition_time = if existing.status == new.status {
        existing
            .last_transition_time
            .clone()
            .or_else(|| Some(now.to_owned()))
    } else {
        Some(now.to_owned())
    };
    let changed = !existing.same_observation(&new)
        || existing.last_transition_time != new.last_transition_time;
    conditions[index] = new;
    // Drop duplicates of the same key that an earlier writer may have left behind.
    let mut seen = false;
    let before = conditions.len();
    let key = conditions[index].clone();
    conditions.retain(|c| {
        if !same_key(c, &key) {
            return true;
        }
        let keep = !seen;
        seen = true;
        keep
    });
    changed || conditions.len() != before
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: &str = "2024-06-04T08:44:15Z";
    const T1: &str = "2024-06-04T09:00:00Z";

    #[test]
    fn new_condition_gets_now() {
        let mut conditions = Vec::new();
        assert!(set_condition(&mut conditions, Condition::ready(), T0));
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].last_transition_time.as_deref(), Some(T0));
    }

    #[test]
    fn same_status_keeps_transition_time() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            Condition::ready().with_message("first"),
            T0,
        );
        let changed = set_condition(
            &mut conditions,
            Condition::ready().with_message("second"),
            T1,
        );
        assert!(changed, "message changed");
        assert_eq!(conditions[0].last_transition_time.as_deref(), Some(T0));
        assert_eq!(conditions[0].message.as_deref(), Some("second"));
    }

    #[test]
    fn identical_condition_is_not_a_change() {
        let mut conditions = Vec::new();
        set_condition(&mut conditions, Condition::ready(), T0);
        assert!(!set_condition(&mut conditions, Condition::ready(), T1));
        assert_eq!(conditions[0].last_transition_time.as_deref(), Some(T0));
    }

    #[test]
    fn status_change_updates_transition_time() {
        let mut conditions = vec![Condition::ready()];
        conditions[0].last_transition_time = Some(T0.to_owned());
        assert!(set_condition(
            &mut conditions,
            Condition::new(READY, FALSE),
            T1
        ));
        assert_eq!(conditions[0].status, FALSE);
        assert_eq!(conditions[0].last_transition_time.as_deref(), Some(T1));
    }

    #[test]
    fn time_on_new_condition_is_ignored() {
        let mut conditions = Vec::new();
        let mut new = Condition::ready();
        new.last_transition_time = Some("1999-01-01T00:00:00Z".to_owned());
        set_condition(&mut conditions, new, T0);
        assert_eq!(conditions[0].last_transition_time.as_deref(), Some(T0));
    }

    #[test]
    fn missing_time_on_existing_condition_is_filled() {
        let mut conditions = vec![Condition::ready()];
        assert!(set_condition(&mut conditions, Condition::ready(), T0));
        assert_eq!(conditions[0].last_transition_time.as_deref(), Some(T0));
    }

    #[test]
    fn other_types_are_untouched_and_duplicates_collapse() {
        let mut conditions = vec![
            Condition::warning("A", "a"),
            Condition::ready(),
            Condition::ready(),
        ];
        set_condition(
            &mut conditions,
            Condition::not_ready("Boom", "it broke"),
            T0,
        );
        set_condition(&mut conditions, Condition::new(READY, FALSE), T0);
        assert_eq!(conditions.len(), 3);
        assert_eq!(conditions[0].type_, WARNING);
        assert_eq!(
            conditions.iter().filter(|c| c.type_ == READY).count(),
            1,
            "duplicate Ready conditions collapse"
        );
        assert!(is_true(&conditions, NOT_READY));
        assert!(!is_true(&conditions, READY));
    }

    #[test]
    fn warnings_are_keyed_by_reason() {
        let mut conditions = Vec::new();
        set_warning(&mut conditions, "ListOffsets", "missing listOffsets", T0);
        set_warning(&mut conditions, "AlterOffsets", "not stopped", T0);
        assert!(!set_warning(
            &mut conditions,
            "ListOffsets",
            "missing listOffsets",
            T1
        ));
        assert_eq!(conditions.len(), 2);
        assert!(remove_warning(&mut conditions, "ListOffsets"));
        assert!(!remove_warning(&mut conditions, "ListOffsets"));
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].reason.as_deref(), Some("AlterOffsets"));
        assert_eq!(conditions[0].last_transition_time.as_deref(), Some(T0));
    }

    #[test]
    fn warnings_of_one_reason_are_joined_not_lost() {
        let mut conditions = Vec::new();
        let w = |r: &str, m: &str| (r.to_owned(), m.to_owned());
        let warnings = [
            w("PoolMoving", "pool a moves"),
            w("Other", "x"),
            w("PoolMoving", "pool b moves"),
            w("PoolMoving", "pool a moves"),
        ];
        assert!(set_warnings(&mut conditions, &warnings, T0));
        assert_eq!(conditions.len(), 2);
        assert_eq!(
            conditions[0].message.as_deref(),
            Some("pool a moves; pool b moves")
        );
        assert!(!set_warnings(&mut conditions, &warnings, T1));
    }

    #[test]
    fn remove_by_type() {
        let mut conditions = vec![Condition::ready(), Condition::warning("A", "a")];
        assert!(remove_condition(&mut conditions, READY));
        assert!(!remove_condition(&mut conditions, READY));
        assert_eq!(conditions.len(), 1);
        assert!(find(&conditions, WARNING).is_some());
    }

    #[test]
    fn timestamp_has_strimzi_format() {
        let ts: Timestamp = "2024-06-04T08:44:15.913138115Z"
            .parse()
            .expect("valid timestamp");
        assert_eq!(format_timestamp(ts), "2024-06-04T08:44:15Z");
    }

    #[test]
    fn serializes_without_nulls() {
        let json = serde_json::to_value(Condition::ready()).expect("serializes");
        assert_eq!(json, serde_json::json!({"type": "Ready", "status": "True"}));
        let back: Condition = serde_json::from_value(serde_json::json!({
            "type": "Warning", "status": "True", "reason": "X",
            "lastTransitionTime": T0
        }))
        .expect("deserializes");
        assert_eq!(back.last_transition_time.as_deref(), Some(T0));
    }
}
