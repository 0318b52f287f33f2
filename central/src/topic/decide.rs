//! Pure decisions about one `KafkaTopic`: whether central touches it at all, what it asks of
//! Kafka, and the status that reports an outcome (conditions with stable transition times).

use kstretch_api::condition::{self, Condition, FALSE, READY, TRUE, WARNING};
use kstretch_api::names;
use kstretch_api::topic::ReplicasChangeStatus;
use kstretch_api::{KafkaTopic, KafkaTopicStatus};
use kstretch_core::topics::{DesiredTopic, NamespacePolicy, PlanProblem, ResourceRef};
use kube::ResourceExt;
use serde_json::Value;

use super::warning::Warning;
use crate::status::Refusal;
use crate::status::Warned as _;

/// Condition type of a topic the operator leaves alone on purpose (`strimzi.io/managed` false).
pub const UNMANAGED: &str = "Unmanaged";
/// Condition type of a paused topic (`strimzi.io/pause-reconciliation`).
pub const PAUSED: &str = "ReconciliationPaused";
/// Reason of a spec central cannot read (for example an object as a config value).
pub const INVALID_RESOURCE: &str = "InvalidResource";

/// What the batch does with one `KafkaTopic`.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Managed through another Kafka cluster (another operator instance): not even the status
    /// is written.
    Ignore { theirs: String },
    /// Being deleted, but the topic in Kafka stays: only the finalizer goes.
    Release { why: &'static str },
    /// Being deleted: delete the topic in Kafka (by ID when known), then the finalizer.
    Delete {
        topic: String,
        topic_id: Option<String>,
    },
    /// Nothing to ask Kafka; write this status.
    Report(Outcome),
    /// Make Kafka match `desired`.
    Reconcile {
        desired: DesiredTopic,
        add_finalizer: bool,
    },
}

/// What decides a `KafkaTopic` besides the resource itself.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    /// The Kafka cluster's ID, as Kafka reports it.
    pub cluster_id: &'a str,
    pub policy: &'a NamespacePolicy,
    /// The oldest managed `KafkaTopic` naming the same topic in the same cluster, and how many
    /// do (the single-resource principle).
    pub owner: Option<&'a ResourceRef>,
    pub claimants: usize,
}

/// The main condition of a status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Main {
    Ready,
    /// Why it is not ready: one stable reason string and a message.
    NotReady(Refusal),
    Unmanaged,
    Paused,
}

/// The outcome of a reconciliation, as the status will show it.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub main: Main,
    /// One `Warning` condition each.
    pub warnings: Vec<Warning>,
    /// `None`: not learnt this time; the status keeps what it had.
    pub topic_id: Option<String>,
    /// `None`: keep; `Some(None)`: no change in progress.
    pub replicas_change: Option<Option<ReplicasChangeStatus>>,
}

impl Outcome {
    pub fn main(main: Main) -> Self {
        Self {
            main,
            warnings: Vec::new(),
            topic_id: None,
            replicas_change: None,
        }
    }

    pub fn not_ready(reason: &'static str, message: impl Into<String>) -> Self {
        Self::main(Main::NotReady(Refusal::new(reason, message)))
    }

    pub fn is_ready(&self) -> bool {
        self.main == Main::Ready
    }
}

/// The resource's key in the operator's maps.
pub fn key_of(kt: &KafkaTopic) -> ResourceRef {
    ResourceRef {
        namespace: kt.namespace().unwrap_or_default(),
        name: kt.name_any(),
    }
}

pub fn has_finalizer(kt: &KafkaTopic) -> bool {
    kt.finalizers()
        .iter()
        .any(|f| f == names::TOPIC_OPERATOR_FINALIZER)
}

/// Whether another operator instance, managing another Kafka cluster, wrote this status.
pub fn foreign_cluster<'a>(kt: &'a KafkaTopic, cluster_id: &str) -> Option<&'a str> {
    kt.status
        .as_ref()
        .and_then(|s| s.cluster_id.as_deref())
        .filter(|theirs| *theirs != cluster_id)
}

/// Whether `kt` takes part in the single-resource principle: a managed, policy-abiding resource
/// of this cluster (a resource the policy refuses must not block the one it allows).
pub fn claims_topic(kt: &KafkaTopic, cluster_id: &str, policy: &NamespacePolicy) -> bool {
    let Some(topic) = kt.kafka_topic_name() else {
        return false;
    };
    kt.is_managed()
        && foreign_cluster(kt, cluster_id).is_none()
        && policy
            .check(&kt.namespace().unwrap_or_default(), topic)
            .is_ok()
}

/// Decides what to do with `kt`; the order follows Strimzi's (deletion first, then unmanaged,
/// paused, then the checks that need no Kafka).
pub fn decide(kt: &KafkaTopic, facts: &Facts<'_>) -> Decision {
    if let Some(theirs) = foreign_cluster(kt, facts.cluster_id) {
        return Decision::Ignore {
            theirs: theirs.to_owned(),
        };
    }
    let topic = kt.kafka_topic_name().unwrap_or_default().to_owned();
    let me = key_of(kt);
    let namespace = me.namespace.clone();
    let status_topic = kt.status.as_ref().and_then(|s| s.topic_name.clone());
    let renamed = status_topic.as_ref().is_some_and(|t| *t != topic);
    let policy = facts.policy.check(&namespace, &topic);
    let conflict = facts.owner.filter(|owner| **owner != me);

    if kt.metadata.deletion_timestamp.is_some() {
        // Deleting a topic in Kafka loses data: only when this resource is, beyond doubt, the
        // one managing it.
        let why = if !kt.is_managed() {
            Some("the topic is unmanaged")
        } else if policy.is_err() {
            Some("the namespace policy does not let this resource manage the topic")
        } else if renamed {
            Some("spec.topicName changed since the topic was managed")
        } else if facts.claimants > 1 {
            Some("other KafkaTopics name the same topic")
        } else {
            None
        };
        return match why {
            Some(why) => Decision::Release { why },
            None => Decision::Delete {
                topic,
                topic_id: kt.status.as_ref().and_then(|s| s.topic_id.clone()),
            },
        };
    }
    if !kt.is_managed() {
        return Decision::Report(Outcome::main(Main::Unmanaged));
    }
    if crate::status::is_paused(kt) {
        return Decision::Report(Outcome::main(Main::Paused));
    }
    if let Err(violation) = policy {
        return Decision::Report(Outcome::not_ready(
            violation.reason(),
            violation.to_string(),
        ));
    }
    if let Some(from) = status_topic.filter(|_| renamed) {
        let problem = PlanProblem::TopicNameChanged { from, to: topic };
        return Decision::Report(Outcome::not_ready(problem.reason(), problem.to_string()));
    }
    if let Some(owner) = conflict {
        let conflict = kstretch_core::topics::ResourceConflict {
            topic,
            owner: owner.clone(),
        };
        return Decision::Report(Outcome::not_ready(conflict.reason(), conflict.to_string()));
    }
    match desired_topic(kt, topic) {
        Ok(desired) => Decision::Reconcile {
            desired,
            add_finalizer: !has_finalizer(kt),
        },
        Err(message) => Decision::Report(Outcome::not_ready(INVALID_RESOURCE, message)),
    }
}

/// The spec in the planner's terms; config values in Kafka's string form, as Strimzi writes
/// them (lists joined with commas).
fn desired_topic(kt: &KafkaTopic, name: String) -> Result<DesiredTopic, String> {
    let mut config = std::collections::BTreeMap::new();
    for (key, value) in kt.spec.config.iter().flatten() {
        let value = config_value(value).ok_or_else(|| {
            format!(
                "Invalid value for topic config '{key}': {value}; use a string, number, boolean \
                 or a list of those"
            )
        })?;
        config.insert(key.clone(), value);
    }
    let replicas = match kt.spec.replicas {
        Some(r) => Some(i16::try_from(r).map_err(|_| {
            format!("spec.replicas {r} is out of range; use a value from 1 to 32767")
        })?),
        None => None,
    };
    Ok(DesiredTopic {
        name,
        partitions: kt.spec.partitions,
        replicas,
        config,
        status_topic_name: kt.status.as_ref().and_then(|s| s.topic_name.clone()),
    })
}

fn config_value(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Array(items) => items
            .iter()
            .map(config_value)
            .collect::<Option<Vec<_>>>()
            .map(|v| v.join(",")),
        Value::Null | Value::Object(_) => None,
    }
}

/// The status reporting `outcome` for `kt`: `observedGeneration` always (it shows the operator
/// saw the latest spec), one main condition plus the warnings, transition times kept while a
/// condition's status stays the same.
pub fn status(
    kt: &KafkaTopic,
    outcome: &Outcome,
    cluster_id: Option<&str>,
    now: &str,
) -> KafkaTopicStatus {
    let existing = kt.status.clone().unwrap_or_default();
    let managed = !matches!(outcome.main, Main::Unmanaged);
    let reporting_id = !matches!(outcome.main, Main::Unmanaged | Main::Paused);
    let topic_name = if !managed {
        None
    } else if matches!(outcome.main, Main::NotReady { .. }) && existing.topic_name.is_some() {
        // Keeps the name the resource managed, so a spec.topicName change stays detectable.
        existing.topic_name.clone()
    } else {
        kt.kafka_topic_name().map(str::to_owned)
    };
    let topic_id = if reporting_id {
        outcome.topic_id.clone().or(existing.topic_id.clone())
    } else {
        None
    };
    let main = match &outcome.main {
        Main::Ready => Condition::ready(),
        Main::NotReady(Refusal { reason, message }) => Condition::new(READY, FALSE)
            .with_reason(*reason)
            .with_message(message.clone()),
        Main::Unmanaged => Condition::new(UNMANAGED, TRUE),
        Main::Paused => Condition::new(PAUSED, TRUE),
    };
    let mut conditions: Vec<Condition> = existing
        .conditions
        .iter()
        .filter(|c| {
            (c.type_ == main.type_ && c.status == main.status)
                || (c.type_ == WARNING
                    && outcome
                        .warnings
                        .iter()
                        .any(|w| c.reason.as_deref() == Some(w.reason())))
        })
        .cloned()
        .collect();
    condition::set_condition(&mut conditions, main, now);
    let warnings: Vec<(String, String)> = outcome
        .warnings
        .iter()
        .map(|w| (w.reason().to_owned(), w.message().to_owned()))
        .collect();
    condition::set_warnings(&mut conditions, &warnings, now);
    KafkaTopicStatus {
        conditions,
        observed_generation: kt.metadata.generation,
        topic_name,
        topic_id,
        cluster_id: cluster_id.map(str::to_owned).or(existing.cluster_id),
        replicas_change: match &outcome.replicas_change {
            Some(change) => change.clone(),
            None => existing.replicas_change,
        },
    }
}

/// An Event worth recording about a replication factor change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeEvent {
    pub warning: bool,
    pub reason: &'static str,
    pub note: String,
}

/// The Event a replication factor change deserves, from the status before and the outcome now:
/// it started (or got a new target), failed (a new message), or finished. Nothing while it
/// merely goes on, so a long reassignment records its start and end only.
pub fn replicas_change_event(
    topic: &str,
    before: Option<&ReplicasChangeStatus>,
    outcome: &Outcome,
) -> Option<ChangeEvent> {
    let after = outcome.replicas_change.as_ref()?;
    let target = |c: &ReplicasChangeStatus| {
        c.target_replicas
            .map_or_else(|| "?".to_owned(), |t| t.to_string())
    };
    let failed = |now: &ReplicasChangeStatus| ChangeEvent {
        warning: true,
        reason: "ReplicasChangeFailed",
        note: format!(
            "changing the replication factor of topic {topic} to {} failed: {}",
            target(now),
            now.message.as_deref().unwrap_or_default()
        ),
    };
    let started = |now: &ReplicasChangeStatus| ChangeEvent {
        warning: false,
        reason: "ReplicasChangeStarted",
        note: format!(
            "changing the replication factor of topic {topic} to {}",
            target(now)
        ),
    };
    match (before, after) {
        (None, Some(now)) if now.message.is_some() => Some(failed(now)),
        (None, Some(now)) => Some(started(now)),
        (Some(was), None) => Some(ChangeEvent {
            warning: false,
            reason: "ReplicasChangeFinished",
            note: format!("topic {topic} has replication factor {}", target(was)),
        }),
        (Some(was), Some(now)) if now.message.is_some() && now.message != was.message => {
            Some(failed(now))
        }
        (Some(was), Some(now)) if now.target_replicas != was.target_replicas => Some(started(now)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::collections::BTreeMap;

    use kstretch_api::KafkaTopicSpec;
    use kstretch_core::topics::NamespaceRule;
    use serde_json::json;

    use super::*;

    fn topic(name: &str) -> KafkaTopic {
        let mut kt = KafkaTopic::new(name, KafkaTopicSpec::default());
        kt.metadata.namespace = Some("ns".into());
        kt.metadata.generation = Some(3);
        kt
    }

    fn facts<'a>(policy: &'a NamespacePolicy, owner: Option<&'a ResourceRef>) -> Facts<'a> {
        Facts {
            cluster_id: "c1",
            policy,
            owner,
            claimants: usize::from(owner.is_some()),
        }
    }

    fn with_status(mut kt: KafkaTopic, status: KafkaTopicStatus) -> KafkaTopic {
        kt.status = Some(status);
        kt
    }

    #[test]
    fn a_new_topic_is_reconciled_with_its_config_as_kafka_strings() {
        let mut kt = topic("orders");
        kt.spec.partitions = Some(6);
        kt.spec.replicas = Some(3);
        kt.spec.config = Some(BTreeMap::from([
            ("retention.ms".to_owned(), json!(7200000)),
            ("unclean.leader.election.enable".to_owned(), json!(false)),
            ("cleanup.policy".to_owned(), json!(["compact", "delete"])),
        ]));
        let policy = NamespacePolicy::default();
        let Decision::Reconcile {
            desired,
            add_finalizer,
        } = decide(&kt, &facts(&policy, None))
        else {
            panic!("reconciled")
        };
        assert!(add_finalizer);
        assert_eq!(desired.name, "orders");
        assert_eq!(desired.partitions, Some(6));
        assert_eq!(desired.replicas, Some(3));
        assert_eq!(desired.config["retention.ms"], "7200000");
        assert_eq!(desired.config["unclean.leader.election.enable"], "false");
        assert_eq!(desired.config["cleanup.policy"], "compact,delete");
    }

    #[test]
    fn an_unreadable_config_value_is_refused_naming_the_key() {
        let mut kt = topic("orders");
        kt.spec.config = Some(BTreeMap::from([("x".to_owned(), json!({"a": 1}))]));
        let policy = NamespacePolicy::default();
        let Decision::Report(outcome) = decide(&kt, &facts(&policy, None)) else {
            panic!("refused")
        };
        let Main::NotReady(Refusal { reason, message }) = outcome.main else {
            panic!()
        };
        assert_eq!(reason, INVALID_RESOURCE);
        assert!(message.contains("'x'"), "{message}");
    }

    #[test]
    fn another_clusters_resource_is_ignored() {
        let kt = with_status(
            topic("orders"),
            KafkaTopicStatus {
                cluster_id: Some("other".into()),
                ..Default::default()
            },
        );
        let policy = NamespacePolicy::default();
        assert_eq!(
            decide(&kt, &facts(&policy, None)),
            Decision::Ignore {
                theirs: "other".into()
            }
        );
        assert!(!claims_topic(&kt, "c1", &policy));
    }

    #[test]
    fn unmanaged_paused_conflicting_renamed_and_policy_violating_resources_only_get_a_status() {
        let policy = NamespacePolicy::default();
        let mut unmanaged = topic("a");
        unmanaged.spec.managed = Some(false);
        assert_eq!(
            decide(&unmanaged, &facts(&policy, None)),
            Decision::Report(Outcome::main(Main::Unmanaged))
        );
        let mut annotated = topic("a");
        annotated
            .annotations_mut()
            .insert(names::MANAGED.into(), "false".into());
        assert!(!annotated.is_managed());

        let mut paused = topic("a");
        paused
            .annotations_mut()
            .insert(names::PAUSE_RECONCILIATION.into(), "true".into());
        assert_eq!(
            decide(&paused, &facts(&policy, None)),
            Decision::Report(Outcome::main(Main::Paused))
        );

        let owner = ResourceRef {
            namespace: "other".into(),
            name: "first".into(),
        };
        let Decision::Report(o) = decide(&topic("a"), &facts(&policy, Some(&owner))) else {
            panic!()
        };
        assert!(
            matches!(&o.main, Main::NotReady(Refusal { reason, message }) if *reason == "ResourceConflict" && message.contains("other/first")),
            "{o:?}"
        );

        let renamed = with_status(
            topic("a"),
            KafkaTopicStatus {
                topic_name: Some("old".into()),
                ..Default::default()
            },
        );
        let Decision::Report(o) = decide(&renamed, &facts(&policy, None)) else {
            panic!()
        };
        assert!(matches!(&o.main, Main::NotReady(r) if r.reason == "NotSupported"));

        let strict = NamespacePolicy::new(vec![NamespaceRule {
            namespace: "team".into(),
            prefixes: vec!["a".into()],
            ..Default::default()
        }])
        .unwrap();
        let Decision::Report(o) = decide(&topic("a"), &facts(&strict, None)) else {
            panic!()
        };
        assert!(matches!(&o.main, Main::NotReady(r) if r.reason == "TopicNamespacePolicy"));
        assert!(!claims_topic(&topic("a"), "c1", &strict));
    }

    #[test]
    fn deletion_touches_kafka_only_for_the_sole_managing_resource() {
        let policy = NamespacePolicy::default();
        let deleting = |mut kt: KafkaTopic| {
            kt.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::now(),
                ));
            kt.finalizers_mut()
                .push(names::TOPIC_OPERATOR_FINALIZER.into());
            kt
        };
        let me = ResourceRef {
            namespace: "ns".into(),
            name: "a".into(),
        };
        let owned = with_status(
            topic("a"),
            KafkaTopicStatus {
                topic_id: Some("id-1".into()),
                ..Default::default()
            },
        );
        assert_eq!(
            decide(&deleting(owned), &facts(&policy, Some(&me))),
            Decision::Delete {
                topic: "a".into(),
                topic_id: Some("id-1".into())
            }
        );
        let shared = Facts {
            claimants: 2,
            ..facts(&policy, Some(&me))
        };
        assert!(matches!(
            decide(&deleting(topic("a")), &shared),
            Decision::Release { .. }
        ));
        let mut unmanaged = topic("a");
        unmanaged.spec.managed = Some(false);
        assert!(matches!(
            decide(&deleting(unmanaged), &facts(&policy, None)),
            Decision::Release { .. }
        ));
    }

    #[test]
    fn status_keeps_transition_times_and_drops_stale_conditions() {
        let kt = topic("orders");
        let mut first = Outcome::main(Main::Ready);
        first.topic_id = Some("id".into());
        first.warnings = vec![Warning::new(
            crate::topic::warning::Reason::InvalidConfig,
            "x ignored",
        )];
        let s1 = status(&kt, &first, Some("c1"), "t1");
        assert_eq!(s1.observed_generation, Some(3));
        assert_eq!(s1.topic_name.as_deref(), Some("orders"));
        assert_eq!(s1.topic_id.as_deref(), Some("id"));
        assert_eq!(s1.cluster_id.as_deref(), Some("c1"));
        assert_eq!(s1.conditions.len(), 2);

        let kt = with_status(kt, s1);
        let s2 = status(&kt, &Outcome::main(Main::Ready), Some("c1"), "t2");
        assert_eq!(s2.conditions.len(), 1, "the warning went away");
        assert_eq!(s2.conditions[0].last_transition_time.as_deref(), Some("t1"));
        assert_eq!(s2.topic_id.as_deref(), Some("id"), "kept when not learnt");

        let kt = with_status(kt, s2);
        let s3 = status(&kt, &Outcome::not_ready("KafkaError", "boom"), None, "t3");
        assert_eq!(s3.conditions[0].status, "False");
        assert_eq!(s3.conditions[0].last_transition_time.as_deref(), Some("t3"));
        assert_eq!(s3.cluster_id.as_deref(), Some("c1"));

        let kt = with_status(kt, s3);
        let s4 = status(&kt, &Outcome::main(Main::Unmanaged), Some("c1"), "t4");
        assert_eq!(s4.conditions.len(), 1);
        assert_eq!(s4.conditions[0].type_, UNMANAGED);
        assert_eq!(s4.topic_name, None);
        assert_eq!(s4.topic_id, None);
    }

    fn change(target: i32, message: Option<&str>) -> ReplicasChangeStatus {
        ReplicasChangeStatus {
            target_replicas: Some(target),
            state: Some(kstretch_api::topic::ReplicasChangeState::Ongoing),
            message: message.map(str::to_owned),
            session_id: None,
        }
    }

    fn with_change(change: Option<Option<ReplicasChangeStatus>>) -> Outcome {
        Outcome {
            replicas_change: change,
            ..Outcome::main(Main::Ready)
        }
    }

    #[test]
    fn replicas_change_events_mark_start_failure_and_end_only() {
        let reason = |before: Option<&ReplicasChangeStatus>, after| {
            replicas_change_event("t", before, &with_change(after)).map(|e| (e.reason, e.warning))
        };
        let running = change(3, None);
        assert_eq!(
            reason(None, Some(Some(running.clone()))),
            Some(("ReplicasChangeStarted", false))
        );
        assert_eq!(reason(Some(&running), Some(Some(running.clone()))), None);
        assert_eq!(reason(Some(&running), None), None, "status kept as it was");
        let done = replicas_change_event("t", Some(&running), &with_change(Some(None))).unwrap();
        assert_eq!(done.reason, "ReplicasChangeFinished");
        assert_eq!(done.note, "topic t has replication factor 3");
        assert_eq!(
            reason(Some(&running), Some(Some(change(2, None)))),
            Some(("ReplicasChangeStarted", false)),
            "a new target"
        );
        let broken = change(3, Some("not enough brokers"));
        let failed = replicas_change_event(
            "t",
            Some(&running),
            &with_change(Some(Some(broken.clone()))),
        )
        .unwrap();
        assert!(failed.warning);
        assert!(
            failed.note.ends_with("failed: not enough brokers"),
            "{}",
            failed.note
        );
        assert_eq!(
            reason(Some(&broken), Some(Some(broken.clone()))),
            None,
            "same failure"
        );
        assert_eq!(
            reason(None, Some(Some(broken))),
            Some(("ReplicasChangeFailed", true))
        );
        assert_eq!(reason(None, Some(None)), None);
    }
}
