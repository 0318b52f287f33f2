//! One Kafka cluster's share of a batch: connect, apply the single-resource principle, decide
//! each resource (pure, [`decide`]), add finalizers, reconcile and delete topics in Kafka
//! ([`sync`]), and record what came of it: Events, and the batch's [`Ending`].

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use kstretch_api::{Kafka, KafkaTopic};
use kstretch_core::topics::{
    NamespacePolicy, Ownership, ResourceRef, TopicResource, resolve_ownership,
};
use kstretch_kadmin::{AdminClient, Error};
use kube::ResourceExt;

use super::clusters::{self, KafkaRef};
use super::context::Context;
use super::decide::{self, Decision, Facts, Main, Outcome};
use super::ending::{CONCURRENT_WRITES, Ending};
use super::sync::{self, Deleted, Deletion, Next, Reconciled, Work};
use super::write;

/// Runs the share of `kafka`, reached at `bootstrap`: `topics` all belong to it.
pub(super) async fn run(
    ctx: &Context,
    kafka: &KafkaRef,
    bootstrap: &str,
    topics: Vec<Arc<KafkaTopic>>,
    ending: &mut Ending,
) {
    let (admin, cluster_id) = match connect(ctx, bootstrap).await {
        Ok(connected) => connected,
        Err(e) => return unreachable(ctx, kafka, bootstrap, topics, &e, ending),
    };
    let kafkas = ctx.kafkas.state();
    let all = ctx.topics.all();
    let policy = &ctx.settings.policy;
    let claims = Claims::of(&topics, &all, &kafkas, kafka, &cluster_id, policy);
    let decided = decide_all(ctx, topics, &cluster_id, &claims, ending);
    let (ready, work) = add_finalizers(ctx, decided.work, ending).await;
    let reconciled = sync::reconcile(&admin, &ctx.settings.alterable, work, &ctx.metrics).await;
    let mut unavailable = report(ctx, ready, reconciled, &cluster_id, ending);
    unavailable |= delete(ctx, &admin, decided.deletions, &cluster_id, ending).await;
    if unavailable {
        // The brokers may have moved: reconnect from the bootstrap list next time.
        forget_connection(ctx, bootstrap);
    }
}

/// The cluster's Admin client and its ID.
async fn connect(ctx: &Context, bootstrap: &str) -> Result<(AdminClient, String), Error> {
    let admin = ctx.kafka.client(bootstrap).await?;
    let id = ctx.cluster_ids.get(bootstrap, &admin).await?;
    Ok((admin, id))
}

fn forget_connection(ctx: &Context, bootstrap: &str) {
    ctx.kafka.forget(bootstrap);
    ctx.cluster_ids.forget(bootstrap);
}

/// The cluster cannot be reached: every resource is retried, its status saying why.
fn unreachable(
    ctx: &Context,
    kafka: &KafkaRef,
    bootstrap: &str,
    topics: Vec<Arc<KafkaTopic>>,
    e: &Error,
    ending: &mut Ending,
) {
    tracing::warn!(%kafka, %bootstrap, error = %e, topics = topics.len(), "Kafka unavailable for topics; retrying");
    forget_connection(ctx, bootstrap);
    for kt in topics {
        let outcome = unreachable_outcome(&kt, e);
        ending.done(
            decide::key_of(&kt),
            Next::Retry,
            Some(e.reason().to_owned()),
        );
        ending.status(kt, outcome, None);
    }
}

/// What the status of `kt` says when its cluster cannot be reached; a deletion that cannot
/// reach Kafka keeps its finalizer, reported as Strimzi does.
fn unreachable_outcome(kt: &KafkaTopic, e: &Error) -> Outcome {
    if kt.metadata.deletion_timestamp.is_some() {
        Outcome::not_ready("KafkaError", format!("Deletion failed: {e}"))
    } else {
        Outcome::not_ready(e.reason(), e.to_string())
    }
}

/// The single-resource principle for one cluster: every managed resource of the cluster naming
/// one of the batch's topics takes part, not only the batch's.
struct Claims<'a> {
    ownership: Ownership,
    /// Per topic name, how many resources claim it.
    counts: HashMap<String, usize>,
    cluster_id: &'a str,
    policy: &'a NamespacePolicy,
}

impl<'a> Claims<'a> {
    /// The claims on the topics of `batch` among `all` the resources: those of `kafka` (as
    /// found among `kafkas`) that [`decide::claims_topic`].
    fn of(
        batch: &[Arc<KafkaTopic>],
        all: &[Arc<KafkaTopic>],
        kafkas: &[Arc<Kafka>],
        kafka: &KafkaRef,
        cluster_id: &'a str,
        policy: &'a NamespacePolicy,
    ) -> Self {
        let names: HashSet<&str> = batch.iter().filter_map(|t| t.kafka_topic_name()).collect();
        let claimants: Vec<TopicResource> = all
            .iter()
            .filter(|t| t.kafka_topic_name().is_some_and(|n| names.contains(n)))
            .filter(|t| clusters::kafka_of(t.as_ref(), kafkas).as_ref() == Ok(kafka))
            .filter(|t| decide::claims_topic(t, cluster_id, policy))
            .map(|t| topic_resource(t))
            .collect();
        let mut counts: HashMap<String, usize> = HashMap::new();
        for c in &claimants {
            *counts.entry(c.topic_name.clone()).or_default() += 1;
        }
        Claims {
            ownership: resolve_ownership(&claimants),
            counts,
            cluster_id,
            policy,
        }
    }

    /// What decides a resource naming `topic`, besides the resource itself.
    fn facts(&self, topic: &str) -> Facts<'_> {
        Facts {
            cluster_id: self.cluster_id,
            policy: self.policy,
            owner: self.ownership.owners.get(topic),
            claimants: self.counts.get(topic).copied().unwrap_or(0),
        }
    }
}

fn topic_resource(t: &KafkaTopic) -> TopicResource {
    TopicResource {
        reference: decide::key_of(t),
        uid: t.uid().unwrap_or_default(),
        created: t
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(0, |c| c.0.as_second()),
        topic_name: t.kafka_topic_name().unwrap_or_default().to_owned(),
    }
}

/// What the decisions leave for Kafka.
#[derive(Default)]
struct ForKafka {
    /// Topics to reconcile, each with whether its finalizer must go on first.
    work: Vec<(Arc<KafkaTopic>, Work, bool)>,
    deletions: Vec<(Arc<KafkaTopic>, Deletion)>,
}

/// Decides every resource; what needs no Kafka ends here.
fn decide_all(
    ctx: &Context,
    topics: Vec<Arc<KafkaTopic>>,
    cluster_id: &str,
    claims: &Claims<'_>,
    ending: &mut Ending,
) -> ForKafka {
    let mut for_kafka = ForKafka::default();
    for kt in topics {
        let topic = kt.kafka_topic_name().unwrap_or_default().to_owned();
        let decision = decide::decide(&kt, &claims.facts(&topic));
        for_kafka.follow(ctx, kt, &topic, decision, cluster_id, ending);
    }
    for_kafka
}

impl ForKafka {
    /// Acts on the decision about `kt` (naming `topic`): ends it, or keeps it for Kafka.
    fn follow(
        &mut self,
        ctx: &Context,
        kt: Arc<KafkaTopic>,
        topic: &str,
        decision: Decision,
        cluster_id: &str,
        ending: &mut Ending,
    ) {
        let key = decide::key_of(&kt);
        match decision {
            Decision::Ignore { theirs } => {
                ctx.metrics.foreign();
                tracing::warn!(namespace = %key.namespace, name = %key.name, theirs = %theirs, ours = %cluster_id,
                    "KafkaTopic belongs to another Kafka cluster (status.clusterId): ignored");
                ending.done(key, Next::Done, None);
            }
            Decision::Release { why } => {
                tracing::info!(namespace = %key.namespace, name = %key.name, %topic, why,
                    "KafkaTopic deleted; the topic stays in Kafka");
                ending.release(kt, key);
            }
            Decision::Delete { topic, topic_id } => {
                let deletion = Deletion {
                    key,
                    topic,
                    topic_id,
                };
                self.deletions.push((kt, deletion));
            }
            Decision::Report(outcome) => {
                let failure = failure_of(&outcome);
                ending.status(kt, outcome, Some(cluster_id));
                ending.done(key, Next::Done, failure);
            }
            Decision::Reconcile {
                desired,
                add_finalizer,
            } => {
                let replicas_change = kt.status.as_ref().and_then(|s| s.replicas_change.clone());
                let work = Work {
                    key,
                    desired,
                    replicas_change,
                };
                self.work.push((kt, work, add_finalizer));
            }
        }
    }
}

/// Adds the finalizers that are missing, before anything exists in Kafka, so a deletion always
/// reaches it. Returns the resources ready for Kafka, by key, and their work; a resource whose
/// finalizer could not be added ends here.
async fn add_finalizers(
    ctx: &Context,
    work: Vec<(Arc<KafkaTopic>, Work, bool)>,
    ending: &mut Ending,
) -> (HashMap<ResourceRef, Arc<KafkaTopic>>, Vec<Work>) {
    let finalized: Vec<(Arc<KafkaTopic>, Work, Result<(), kube::Error>)> =
        futures::stream::iter(work)
            .map(|(kt, w, add)| async move {
                if !add {
                    return (kt, w, Ok(()));
                }
                let started = Instant::now();
                let r = write::add_finalizer(&ctx.client, &kt).await;
                ctx.metrics
                    .admin_call("add_finalizer", started.elapsed(), r.is_ok());
                (kt, w, r)
            })
            .buffer_unordered(CONCURRENT_WRITES)
            .collect()
            .await;
    let mut ready: HashMap<ResourceRef, Arc<KafkaTopic>> = HashMap::new();
    let mut work = Vec::new();
    for (kt, w, r) in finalized {
        match r {
            Ok(()) => {
                ready.insert(w.key.clone(), kt);
                work.push(w);
            }
            Err(e) => {
                tracing::debug!(namespace = %w.key.namespace, name = %w.key.name, error = %e, "adding the finalizer failed");
                let failure = kstretch_api::condition::KUBERNETES_ERROR.to_owned();
                ending.done(w.key, after_finalizer_error(&e), Some(failure));
            }
        }
    }
    (ready, work)
}

/// A concurrent change (the patch's test failed) is picked up again at once; anything else is
/// retried with backoff.
fn after_finalizer_error(e: &kube::Error) -> Next {
    let conflict = matches!(e, kube::Error::Api(a) if a.code == 409 || a.code == 422);
    if conflict { Next::Again } else { Next::Retry }
}

/// Records what came of each reconciled resource: its Events, its status (unless it must not be
/// written) and its next look. Returns whether Kafka looked unavailable.
fn report(
    ctx: &Context,
    mut ready: HashMap<ResourceRef, Arc<KafkaTopic>>,
    reconciled: Vec<Reconciled>,
    cluster_id: &str,
    ending: &mut Ending,
) -> bool {
    let mut unavailable = false;
    for r in reconciled {
        let Some(kt) = ready.remove(&r.key) else {
            continue;
        };
        let failure = r.outcome.as_ref().and_then(failure_of);
        unavailable |= is_unavailable(failure.as_deref());
        if let Some(outcome) = r.outcome {
            reconcile_events(ctx, &kt, &outcome);
            ending.status(kt, outcome, Some(cluster_id));
        }
        ending.done(r.key, r.next, failure);
    }
    unavailable
}

/// The Events of one reconciliation: the topic's first ID, and a replication-factor change
/// starting, failing or finishing.
fn reconcile_events(ctx: &Context, kt: &KafkaTopic, outcome: &Outcome) {
    if let Some(note) = created_note(kt, outcome) {
        ctx.events
            .about(kt, false, "TopicCreated", "CreateTopic", note);
    }
    let topic = kt.kafka_topic_name().unwrap_or_default();
    let before = kt.status.as_ref().and_then(|s| s.replicas_change.as_ref());
    if let Some(e) = decide::replicas_change_event(topic, before, outcome) {
        ctx.events
            .about(kt, e.warning, e.reason, "ChangeReplicas", e.note);
    }
}

/// The note of the `TopicCreated` Event, when `outcome` brings the resource its first topic ID.
fn created_note(kt: &KafkaTopic, outcome: &Outcome) -> Option<String> {
    let first_id = kt.status.as_ref().is_none_or(|s| s.topic_id.is_none());
    let id = outcome.topic_id.as_ref().filter(|_| first_id)?;
    Some(format!(
        "topic {} exists in Kafka with ID {id} (created, or adopted if it existed)",
        kt.kafka_topic_name().unwrap_or_default()
    ))
}

/// Deletes the topics of resources being deleted (one request) and releases those done with.
/// Returns whether Kafka looked unavailable.
async fn delete(
    ctx: &Context,
    admin: &AdminClient,
    deletions: Vec<(Arc<KafkaTopic>, Deletion)>,
    cluster_id: &str,
    ending: &mut Ending,
) -> bool {
    if deletions.is_empty() {
        return false;
    }
    let (kts, items): (Vec<_>, Vec<_>) = deletions.into_iter().unzip();
    let by_key: HashMap<ResourceRef, Arc<KafkaTopic>> = kts
        .into_iter()
        .map(|kt| (decide::key_of(&kt), kt))
        .collect();
    let mut unavailable = false;
    for (key, deleted) in sync::delete(admin, items, &ctx.metrics).await {
        let Some(kt) = by_key.get(&key).cloned() else {
            continue;
        };
        unavailable |= after_deletion(ctx, kt, key, deleted, cluster_id, ending);
    }
    unavailable
}

/// Records how the deletion of the topic of `kt` ended: a topic gone, or one Kafka refuses to
/// delete, releases the resource; a failure keeps its finalizer and is retried. Returns whether
/// Kafka looked unavailable.
fn after_deletion(
    ctx: &Context,
    kt: Arc<KafkaTopic>,
    key: ResourceRef,
    deleted: Deleted,
    cluster_id: &str,
    ending: &mut Ending,
) -> bool {
    let topic = kt.kafka_topic_name().unwrap_or_default();
    match deleted {
        Deleted::Gone => {
            let note = format!("topic {topic} deleted from Kafka");
            ctx.events
                .about(kt.as_ref(), false, "TopicDeleted", "DeleteTopic", note);
            ending.release(kt, key);
            false
        }
        Deleted::Disabled => {
            tracing::warn!(namespace = %key.namespace, name = %key.name,
                "Kafka refuses topic deletion (delete.topic.enable=false): the topic stays in Kafka, unmanaged");
            let note = format!(
                "Kafka refuses topic deletion (delete.topic.enable=false): topic {topic} stays in Kafka, no longer managed"
            );
            ctx.events
                .about(kt.as_ref(), true, "TopicNotDeleted", "DeleteTopic", note);
            ending.release(kt, key);
            false
        }
        Deleted::Failed(e) => {
            let outcome = Outcome::not_ready("KafkaError", format!("Deletion failed: {e}"));
            ending.status(kt, outcome, Some(cluster_id));
            ending.done(key, Next::Retry, Some("KafkaError".to_owned()));
            is_unavailable(Some(e.reason()))
        }
    }
}

/// Records an Event about `kt`.
/// Whether a failure says the brokers could not be reached, so the cluster's connection is
/// made again from its bootstrap list.
fn is_unavailable(reason: Option<&str>) -> bool {
    matches!(
        reason,
        Some("KafkaUnreachable" | "KafkaTimeout" | "KafkaDisconnected")
    )
}

fn failure_of(outcome: &Outcome) -> Option<String> {
    match &outcome.main {
        Main::NotReady(r) => Some(r.reason.to_owned()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use kstretch_api::{KafkaSpec, KafkaTopicSpec, KafkaTopicStatus, names};

    use super::*;

    fn kafka(ns: &str, name: &str) -> Arc<Kafka> {
        let mut k = Kafka::new(name, KafkaSpec::default());
        k.metadata.namespace = Some(ns.into());
        Arc::new(k)
    }

    /// `ns/name` of Kafka `cluster`, naming topic `topic`, created at `created` seconds.
    fn topic(ns: &str, name: &str, cluster: &str, topic: &str, created: i64) -> Arc<KafkaTopic> {
        let mut kt = KafkaTopic::new(
            name,
            KafkaTopicSpec {
                topic_name: Some(topic.into()),
                ..Default::default()
            },
        );
        kt.metadata.namespace = Some(ns.into());
        kt.metadata.creation_timestamp = Some(Time(
            k8s_openapi::jiff::Timestamp::from_second(created).unwrap(),
        ));
        kt.labels_mut()
            .insert(names::CLUSTER.into(), cluster.into());
        Arc::new(kt)
    }

    fn reference(ns: &str, name: &str) -> ResourceRef {
        ResourceRef {
            namespace: ns.into(),
            name: name.into(),
        }
    }

    fn unreachable_kafka() -> Error {
        Error::Unreachable {
            address: "b:9092".into(),
            message: "refused".into(),
        }
    }

    #[test]
    fn every_managed_resource_of_the_cluster_naming_a_batch_topic_claims_it() {
        let kafkas = [kafka("a", "my"), kafka("a", "other")];
        let mine = KafkaRef {
            namespace: "a".into(),
            name: "my".into(),
        };
        let batch = [topic("a", "new", "my", "t", 20)];
        let mut unmanaged = (*topic("a", "unmanaged", "my", "t", 1)).clone();
        unmanaged.spec.managed = Some(false);
        let all = [
            batch[0].clone(),
            // No Kafka "my" in b: the only one of that name, in a.
            topic("b", "old", "my", "t", 10),
            topic("a", "elsewhere", "other", "t", 5),
            Arc::new(unmanaged),
            topic("a", "unrelated", "my", "u", 1),
        ];
        let policy = NamespacePolicy::default();
        let claims = Claims::of(&batch, &all, &kafkas, &mine, "c1", &policy);
        let facts = claims.facts("t");
        assert_eq!(facts.claimants, 2);
        assert_eq!(facts.owner, Some(&reference("b", "old")), "the oldest");
        assert_eq!(facts.cluster_id, "c1");
        assert_eq!(claims.facts("u").claimants, 0, "not a topic of the batch");
        assert_eq!(claims.facts("u").owner, None);
    }

    #[test]
    fn a_finalizer_lost_to_a_concurrent_change_is_tried_again_at_once() {
        let api = |code| {
            kube::Error::Api(
                kube::core::Status::failure("x", "y")
                    .with_code(code)
                    .boxed(),
            )
        };
        assert_eq!(after_finalizer_error(&api(409)), Next::Again);
        assert_eq!(after_finalizer_error(&api(422)), Next::Again);
        assert_eq!(after_finalizer_error(&api(500)), Next::Retry);
    }

    #[test]
    fn the_created_event_comes_with_the_first_topic_id_only() {
        let kt = topic("a", "new", "my", "t", 1);
        let with_id = Outcome {
            topic_id: Some("id-1".into()),
            ..Outcome::main(Main::Ready)
        };
        let note = created_note(&kt, &with_id).unwrap();
        assert!(
            note.starts_with("topic t exists in Kafka with ID id-1"),
            "{note}"
        );
        assert_eq!(created_note(&kt, &Outcome::main(Main::Ready)), None);
        let mut known = (*kt).clone();
        known.status = Some(KafkaTopicStatus {
            topic_id: Some("id-1".into()),
            ..Default::default()
        });
        assert_eq!(created_note(&known, &with_id), None);
    }

    #[test]
    fn an_unreachable_cluster_fails_a_deletion_as_strimzi_reports_it() {
        let e = unreachable_kafka();
        let kt = topic("a", "t", "my", "t", 1);
        assert_eq!(
            unreachable_outcome(&kt, &e),
            Outcome::not_ready("KafkaUnreachable", e.to_string())
        );
        let mut deleting = (*kt).clone();
        deleting.metadata.deletion_timestamp =
            Some(Time(k8s_openapi::jiff::Timestamp::from_second(2).unwrap()));
        assert_eq!(
            unreachable_outcome(&deleting, &e),
            Outcome::not_ready("KafkaError", format!("Deletion failed: {e}"))
        );
    }

    #[test]
    fn only_connection_failures_make_the_cluster_reconnect() {
        for reason in ["KafkaUnreachable", "KafkaTimeout", "KafkaDisconnected"] {
            assert!(is_unavailable(Some(reason)), "{reason}");
        }
        assert!(!is_unavailable(Some("KafkaError")));
        assert!(!is_unavailable(None));
    }
}
