//! Writing `Kafka` and `KafkaNodePool` status: conditions with stable transition times (a
//! `Ready` condition plus one `Warning` per current warning, stale warnings dropped), written
//! through [`crate::status::apply`] only when it changed.

use kstretch_api::condition::{self, Condition, WARNING};
use kstretch_api::{Kafka, KafkaNodePool, KafkaNodePoolStatus, KafkaStatus};
use kube::Client;

use super::error::Error;

pub use crate::status::FIELD_MANAGER;

/// `existing` conditions updated to `ready` and exactly the `warnings` given (by reason), with
/// transition times kept where the status did not change.
pub fn conditions(
    existing: &[Condition],
    ready: Condition,
    warnings: &[(String, String)],
    now: &str,
) -> Vec<Condition> {
    let mut out: Vec<Condition> = existing
        .iter()
        .filter(|c| {
            c.type_ == condition::READY
                || (c.type_ == WARNING
                    && warnings
                        .iter()
                        .any(|(reason, _)| c.reason.as_deref() == Some(reason)))
        })
        .cloned()
        .collect();
    condition::set_condition(&mut out, ready, now);
    condition::set_warnings(&mut out, warnings, now);
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

/// Applies `status` to `kafka` unless it is what the resource already has.
pub async fn apply_kafka(client: &Client, kafka: &Kafka, status: KafkaStatus) -> Result<(), Error> {
    Ok(crate::status::apply(client, kafka, status, |k| k.status.as_ref()).await?)
}

/// Applies `status` to `pool` unless it is what the resource already has.
pub async fn apply_pool(
    client: &Client,
    pool: &KafkaNodePool,
    status: KafkaNodePoolStatus,
) -> Result<(), Error> {
    Ok(crate::status::apply(client, pool, status, |p| p.status.as_ref()).await?)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn warnings_come_and_go_and_ready_keeps_its_transition_time() {
        let first = conditions(
            &[],
            not_ready("Pending", "pods starting"),
            &[("A".into(), "a".into()), ("B".into(), "b".into())],
            "t1",
        );
        assert_eq!(first.len(), 3);
        let second = conditions(
            &first,
            not_ready("Pending", "pods still starting"),
            &[("B".into(), "b".into())],
            "t2",
        );
        assert_eq!(second.len(), 2);
        let ready = second.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(ready.last_transition_time.as_deref(), Some("t1"));
        assert_eq!(ready.message.as_deref(), Some("pods still starting"));
        let warning = second.iter().find(|c| c.type_ == "Warning").unwrap();
        assert_eq!(warning.reason.as_deref(), Some("B"));
        assert_eq!(warning.last_transition_time.as_deref(), Some("t1"));

        let third = conditions(&second, Condition::ready(), &[], "t3");
        assert_eq!(third.len(), 1);
        assert_eq!(third[0].last_transition_time.as_deref(), Some("t3"));
    }
}
