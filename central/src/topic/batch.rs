//! One batch of `KafkaTopic`s, end to end: find each one's Kafka cluster, decide (pure), add
//! finalizers, talk to Kafka with one request per kind and cluster, write finalizers and
//! statuses, and say when each resource needs another look.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kstretch_api::{Kafka, KafkaTopic};
use kstretch_core::topics::{ResourceRef, TopicResource, resolve_ownership};
use kube::ResourceExt;

use super::Context;
use super::clusters::{self, KafkaRef, TargetError};
use super::decide::{self, Decision, Facts, Main, Outcome};
use super::sync::{self, Deleted, Deletion, Next, Work};
use super::write;

/// Kubernetes writes of one batch in flight at once.
const CONCURRENT_WRITES: usize = 32;
/// How soon a running reassignment is looked at again.
const REASSIGNMENT_POLL: Duration = Duration::from_secs(3);

/// A Kubernetes write the batch ends with.
enum Write {
    Status(Arc<KafkaTopic>, Outcome, Option<String>),
    Release(Arc<KafkaTopic>),
}

/// What one batch did with one resource.
struct Done {
    key: ResourceRef,
    next: Next,
    failure: Option<String>,
}

/// Runs one batch; every key is in flight in the queue until this returns.
pub async fn run(ctx: &Context, keys: Vec<ResourceRef>) {
    let start = Instant::now();
    ctx.metrics.batch(keys.len());
    let kafkas: Vec<Arc<Kafka>> = ctx.kafkas.state();
    let mut writes: Vec<Write> = Vec::new();
    let mut done: Vec<Done> = Vec::new();
    let mut groups: BTreeMap<(KafkaRef, String), Vec<Arc<KafkaTopic>>> = BTreeMap::new();

    for key in &keys {
        let Some(kt) = ctx.topics.get(key) else {
            continue;
        };
        ctx.seen(&kt);
        let target = clusters::kafka_of(kt.as_ref(), &kafkas).and_then(|kafka| {
            let bootstrap = clusters::bootstrap_of(&kafka, &kafkas, &ctx.kafka)?;
            Ok((kafka, bootstrap))
        });
        match target {
            Ok(group) => groups.entry(group).or_default().push(kt),
            Err(e) => {
                let gone = matches!(
                    e,
                    TargetError::KafkaNotFound { .. } | TargetError::MissingClusterLabel
                );
                if kt.metadata.deletion_timestamp.is_some() && gone {
                    // No cluster to delete from: holding the resource would only block its
                    // namespace.
                    tracing::info!(namespace = %key.namespace, name = %key.name, reason = e.reason(),
                        "KafkaTopic deleted without a Kafka cluster: finalizer removed");
                    writes.push(Write::Release(kt));
                    done.push(ok(key));
                } else {
                    let next = match e {
                        TargetError::NoAddress { .. } => Next::Retry,
                        _ => Next::Done,
                    };
                    done.push(Done {
                        key: key.clone(),
                        next,
                        failure: Some(e.reason().to_owned()),
                    });
                    writes.push(Write::Status(
                        kt,
                        Outcome::not_ready(e.reason(), e.to_string()),
                        None,
                    ));
                }
            }
        }
    }

    for ((kafka, bootstrap), topics) in groups {
        run_group(ctx, &kafka, &bootstrap, topics, &mut writes, &mut done).await;
    }

    // Writes of one batch run concurrently; a failed write is retried like any transient error.
    let now = decide_now();
    let failed_writes: HashSet<ResourceRef> = futures::stream::iter(writes)
        .map(|w| {
            let client = ctx.client.clone();
            let now = now.clone();
            let metrics = ctx.metrics.clone();
            async move {
                let started = Instant::now();
                let (key, call, result) = match w {
                    Write::Status(kt, outcome, cluster_id) => {
                        let status = decide::status(&kt, &outcome, cluster_id.as_deref(), &now);
                        let r = write::apply_status(&client, &kt, status).await;
                        (decide::key_of(&kt), "update_status", r)
                    }
                    Write::Release(kt) => {
                        let r = write::remove_finalizer(&client, &kt).await;
                        (decide::key_of(&kt), "remove_finalizer", r)
                    }
                };
                metrics.admin_call(call, started.elapsed(), result.is_ok());
                match result {
                    Ok(()) => None,
                    Err(e) => {
                        tracing::warn!(namespace = %key.namespace, name = %key.name, error = %e, "{call} failed; retrying");
                        Some(key)
                    }
                }
            }
        })
        .buffer_unordered(CONCURRENT_WRITES)
        .filter_map(|k| async move { k })
        .collect()
        .await;

    let elapsed = start.elapsed();
    ctx.queue.release(&keys);
    for d in done {
        let next = if failed_writes.contains(&d.key) {
            Next::Retry
        } else {
            d.next
        };
        ctx.metrics.reconciled(elapsed, d.failure.as_deref());
        match next {
            Next::Done => ctx.forget_attempts(&d.key),
            Next::Soon => {
                ctx.forget_attempts(&d.key);
                ctx.queue.push_after(d.key, REASSIGNMENT_POLL);
            }
            Next::Retry => {
                let delay = ctx.backoff(&d.key);
                ctx.queue.push_after(d.key, delay);
            }
            Next::Again => {
                ctx.queue.push_now(d.key);
            }
        }
    }
}

fn ok(key: &ResourceRef) -> Done {
    Done {
        key: key.clone(),
        next: Next::Done,
        failure: None,
    }
}

fn decide_now() -> String {
    crate::kafka::status::now()
}

/// One Kafka cluster's share of a batch.
async fn run_group(
    ctx: &Context,
    kafka: &KafkaRef,
    bootstrap: &str,
    topics: Vec<Arc<KafkaTopic>>,
    writes: &mut Vec<Write>,
    done: &mut Vec<Done>,
) {
    let connected = match ctx.kafka.client(bootstrap).await {
        Ok(admin) => match ctx.cluster_ids.get(bootstrap, &admin).await {
            Ok(id) => Ok((admin, id)),
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    let (admin, cluster_id) = match connected {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(%kafka, %bootstrap, error = %e, topics = topics.len(), "Kafka unavailable for topics; retrying");
            ctx.kafka.forget(bootstrap);
            ctx.cluster_ids.forget(bootstrap);
            for kt in topics {
                // A deletion that cannot reach Kafka keeps its finalizer, reported as Strimzi does.
                let outcome = if kt.metadata.deletion_timestamp.is_some() {
                    Outcome::not_ready("KafkaError", format!("Deletion failed: {e}"))
                } else {
                    Outcome::not_ready(e.reason(), e.to_string())
                };
                done.push(Done {
                    key: decide::key_of(&kt),
                    next: Next::Retry,
                    failure: Some(e.reason().to_owned()),
                });
                writes.push(Write::Status(kt, outcome, None));
            }
            return;
        }
    };

    // The single-resource principle: every managed resource of this cluster naming one of the
    // batch's topics takes part, not only the batch's.
    let names: HashSet<&str> = topics.iter().filter_map(|t| t.kafka_topic_name()).collect();
    let kafkas = ctx.kafkas.state();
    let claimants: Vec<TopicResource> = ctx
        .topics
        .all()
        .iter()
        .filter(|t| t.kafka_topic_name().is_some_and(|n| names.contains(n)))
        .filter(|t| clusters::kafka_of(t.as_ref(), &kafkas).as_ref() == Ok(kafka))
        .filter(|t| decide::claims_topic(t, &cluster_id, &ctx.settings.policy))
        .map(|t| TopicResource {
            reference: decide::key_of(t),
            uid: t.uid().unwrap_or_default(),
            created: t
                .metadata
                .creation_timestamp
                .as_ref()
                .map_or(0, |c| c.0.as_second()),
            topic_name: t.kafka_topic_name().unwrap_or_default().to_owned(),
        })
        .collect();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for c in &claimants {
        *counts.entry(c.topic_name.as_str()).or_default() += 1;
    }
    let ownership = resolve_ownership(&claimants);

    let mut work: Vec<(Arc<KafkaTopic>, Work, bool)> = Vec::new();
    let mut deletions: Vec<(Arc<KafkaTopic>, Deletion)> = Vec::new();
    for kt in topics {
        let key = decide::key_of(&kt);
        let topic = kt.kafka_topic_name().unwrap_or_default().to_owned();
        let facts = Facts {
            cluster_id: &cluster_id,
            policy: &ctx.settings.policy,
            owner: ownership.owners.get(&topic),
            claimants: counts.get(topic.as_str()).copied().unwrap_or(0),
        };
        match decide::decide(&kt, &facts) {
            Decision::Ignore { theirs } => {
                ctx.metrics.foreign();
                tracing::warn!(namespace = %key.namespace, name = %key.name, theirs = %theirs, ours = %cluster_id,
                    "KafkaTopic belongs to another Kafka cluster (status.clusterId): ignored");
                done.push(ok(&key));
            }
            Decision::Release { why } => {
                tracing::info!(namespace = %key.namespace, name = %key.name, %topic, why,
                    "KafkaTopic deleted; the topic stays in Kafka");
                writes.push(Write::Release(kt));
                done.push(ok(&key));
            }
            Decision::Delete { topic, topic_id } => deletions.push((
                kt,
                Deletion {
                    key,
                    topic,
                    topic_id,
                },
            )),
            Decision::Report(outcome) => {
                let failure = failure_of(&outcome);
                writes.push(Write::Status(kt, outcome, Some(cluster_id.clone())));
                done.push(Done {
                    key,
                    next: Next::Done,
                    failure,
                });
            }
            Decision::Reconcile {
                desired,
                add_finalizer,
            } => {
                let replicas_change = kt.status.as_ref().and_then(|s| s.replicas_change.clone());
                work.push((
                    kt,
                    Work {
                        key,
                        desired,
                        replicas_change,
                    },
                    add_finalizer,
                ));
            }
        }
    }

    // The finalizer goes on before anything exists in Kafka, so a deletion always reaches it.
    let finalized: Vec<(Arc<KafkaTopic>, Work, Result<(), kube::Error>)> =
        futures::stream::iter(work)
            .map(|(kt, w, add)| {
                let client = ctx.client.clone();
                let metrics = ctx.metrics.clone();
                async move {
                    if !add {
                        return (kt, w, Ok(()));
                    }
                    let started = Instant::now();
                    let r = write::add_finalizer(&client, &kt).await;
                    metrics.admin_call("add_finalizer", started.elapsed(), r.is_ok());
                    (kt, w, r)
                }
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
                // A concurrent change (the patch's test failed) is picked up again at once.
                let conflict = matches!(&e, kube::Error::Api(a) if a.code == 409 || a.code == 422);
                tracing::debug!(namespace = %w.key.namespace, name = %w.key.name, error = %e, "adding the finalizer failed");
                done.push(Done {
                    key: w.key,
                    next: if conflict { Next::Again } else { Next::Retry },
                    failure: Some(kstretch_api::condition::KUBERNETES_ERROR.to_owned()),
                });
            }
        }
    }

    let reconciled = sync::reconcile(&admin, &ctx.settings.alterable, work, &ctx.metrics).await;
    let mut unavailable = false;
    for r in reconciled {
        let Some(kt) = ready.remove(&r.key) else {
            continue;
        };
        let failure = r.outcome.as_ref().and_then(failure_of);
        unavailable |= matches!(
            failure.as_deref(),
            Some("KafkaUnreachable" | "KafkaTimeout" | "KafkaDisconnected")
        );
        if let Some(outcome) = r.outcome {
            let first_id = kt.status.as_ref().is_none_or(|s| s.topic_id.is_none());
            if let (true, Some(id)) = (first_id, &outcome.topic_id) {
                kstretch_runtime::events::about(
                    &ctx.client,
                    "kstretch-central",
                    kt.as_ref(),
                    false,
                    "TopicCreated",
                    "CreateTopic",
                    format!(
                        "topic {} exists in Kafka with ID {id} (created, or adopted if it existed)",
                        kt.kafka_topic_name().unwrap_or_default()
                    ),
                );
            }
            let topic = kt.kafka_topic_name().unwrap_or_default();
            let before = kt.status.as_ref().and_then(|s| s.replicas_change.as_ref());
            if let Some(e) = decide::replicas_change_event(topic, before, &outcome) {
                kstretch_runtime::events::about(
                    &ctx.client,
                    "kstretch-central",
                    kt.as_ref(),
                    e.warning,
                    e.reason,
                    "ChangeReplicas",
                    e.note,
                );
            }
            writes.push(Write::Status(kt, outcome, Some(cluster_id.clone())));
        }
        done.push(Done {
            key: r.key,
            next: r.next,
            failure,
        });
    }

    if !deletions.is_empty() {
        let (kts, items): (Vec<_>, Vec<_>) = deletions.into_iter().unzip();
        let by_key: HashMap<ResourceRef, Arc<KafkaTopic>> = kts
            .into_iter()
            .map(|kt| (decide::key_of(&kt), kt))
            .collect();
        for (key, deleted) in sync::delete(&admin, items, &ctx.metrics).await {
            let Some(kt) = by_key.get(&key).cloned() else {
                continue;
            };
            match deleted {
                Deleted::Gone => {
                    let note = format!(
                        "topic {} deleted from Kafka",
                        kt.kafka_topic_name().unwrap_or_default()
                    );
                    kstretch_runtime::events::about(
                        &ctx.client,
                        "kstretch-central",
                        kt.as_ref(),
                        false,
                        "TopicDeleted",
                        "DeleteTopic",
                        note,
                    );
                    writes.push(Write::Release(kt));
                    done.push(ok(&key));
                }
                Deleted::Disabled => {
                    tracing::warn!(namespace = %key.namespace, name = %key.name,
                        "Kafka refuses topic deletion (delete.topic.enable=false): the topic stays in Kafka, unmanaged");
                    let note = format!(
                        "Kafka refuses topic deletion (delete.topic.enable=false): topic {} stays in Kafka, no longer managed",
                        kt.kafka_topic_name().unwrap_or_default()
                    );
                    kstretch_runtime::events::about(
                        &ctx.client,
                        "kstretch-central",
                        kt.as_ref(),
                        true,
                        "TopicNotDeleted",
                        "DeleteTopic",
                        note,
                    );
                    writes.push(Write::Release(kt));
                    done.push(ok(&key));
                }
                Deleted::Failed(e) => {
                    unavailable |= matches!(
                        e.reason(),
                        "KafkaUnreachable" | "KafkaTimeout" | "KafkaDisconnected"
                    );
                    writes.push(Write::Status(
                        kt,
                        Outcome::not_ready("KafkaError", format!("Deletion failed: {e}")),
                        Some(cluster_id.clone()),
                    ));
                    done.push(Done {
                        key,
                        next: Next::Retry,
                        failure: Some("KafkaError".to_owned()),
                    });
                }
            }
        }
    }
    if unavailable {
        // The brokers may have moved: reconnect from the bootstrap list next time.
        ctx.kafka.forget(bootstrap);
        ctx.cluster_ids.forget(bootstrap);
    }
}

fn failure_of(outcome: &Outcome) -> Option<String> {
    match &outcome.main {
        Main::NotReady { reason, .. } => Some(reason.clone()),
        _ => None,
    }
}
