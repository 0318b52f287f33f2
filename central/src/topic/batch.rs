//! One batch of `KafkaTopic`s, end to end: find each one's Kafka cluster, run each cluster's
//! share ([`super::group`]: decide, add finalizers, talk to Kafka), write finalizers and
//! statuses, and say when each resource needs another look.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kstretch_api::{Kafka, KafkaTopic};
use kstretch_core::topics::ResourceRef;

use super::clusters::{self, KafkaRef, TargetError};
use super::context::Context;
use super::decide::{self, Outcome};
use super::ending::{CONCURRENT_WRITES, Done, Ending, Write};
use super::group;
use super::work::Next;
use super::write;

/// How soon a running reassignment is looked at again.
const REASSIGNMENT_POLL: Duration = Duration::from_secs(3);

/// Runs one batch; every key is in flight in the queue until this returns.
pub async fn run(ctx: &Context, keys: Vec<ResourceRef>) {
    let start = Instant::now();
    ctx.metrics.batch(keys.len());
    let mut ending = Ending::default();
    for ((kafka, bootstrap), topics) in by_cluster(ctx, &keys, &mut ending) {
        group::run(ctx, &kafka, &bootstrap, topics, &mut ending).await;
    }
    let failed_writes = write(ctx, ending.writes).await;
    let elapsed = start.elapsed();
    ctx.queue.release(&keys);
    schedule(ctx, ending.done, &failed_writes, elapsed);
}

/// The batch's resources by the Kafka cluster they belong to and its address. A resource whose
/// cluster cannot be used ends here (see [`untargeted`]).
fn by_cluster(
    ctx: &Context,
    keys: &[ResourceRef],
    ending: &mut Ending,
) -> BTreeMap<(KafkaRef, String), Vec<Arc<KafkaTopic>>> {
    let kafkas: Vec<Arc<Kafka>> = ctx.kafkas.state();
    let mut groups: BTreeMap<(KafkaRef, String), Vec<Arc<KafkaTopic>>> = BTreeMap::new();
    for key in keys {
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
            Err(e) => untargeted(kt, key, &e, ending),
        }
    }
    groups
}

/// A resource whose cluster cannot be used. Being deleted with no cluster to delete from, it is
/// released: holding it would only block its namespace. Otherwise its status says why, retried
/// while the Kafka has no address yet.
fn untargeted(kt: Arc<KafkaTopic>, key: &ResourceRef, e: &TargetError, ending: &mut Ending) {
    let gone = matches!(
        e,
        TargetError::KafkaNotFound { .. } | TargetError::MissingClusterLabel
    );
    if kt.metadata.deletion_timestamp.is_some() && gone {
        tracing::info!(namespace = %key.namespace, name = %key.name, reason = e.reason(),
            "KafkaTopic deleted without a Kafka cluster: finalizer removed");
        ending.release(kt, key.clone());
        return;
    }
    let next = match e {
        TargetError::NoAddress { .. } => Next::Retry,
        _ => Next::Done,
    };
    ending.done(key.clone(), next, Some(e.reason().to_owned()));
    ending.status(kt, Outcome::not_ready(e.reason(), e.to_string()), None);
}

/// Runs the batch's writes concurrently; returns the resources a write failed for.
async fn write(ctx: &Context, writes: Vec<Write>) -> HashSet<ResourceRef> {
    let now = decide_now();
    futures::stream::iter(writes)
        .map(|w| write_one(ctx, &now, w))
        .buffer_unordered(CONCURRENT_WRITES)
        .filter_map(|k| async move { k })
        .collect()
        .await
}

/// One write, timed into the per-call metric; `Some` with the resource's key when it failed.
async fn write_one(ctx: &Context, now: &str, w: Write) -> Option<ResourceRef> {
    let started = Instant::now();
    let (key, call, result) = match w {
        Write::Status(kt, outcome, cluster_id) => {
            let status = decide::status(&kt, &outcome, cluster_id.as_deref(), now);
            let r = write::apply_status(&ctx.client, &kt, status).await;
            (decide::key_of(&kt), "update_status", r)
        }
        Write::Release(kt) => {
            let r = write::remove_finalizer(&ctx.client, &kt).await;
            (decide::key_of(&kt), "remove_finalizer", r)
        }
    };
    ctx.metrics
        .admin_call(call, started.elapsed(), result.is_ok());
    match result {
        Ok(()) => None,
        Err(e) => {
            tracing::warn!(namespace = %key.namespace, name = %key.name, error = %e, "{call} failed; retrying");
            Some(key)
        }
    }
}

/// Counts each resource reconciled and queues its next look; a failed write is retried like
/// any transient error.
fn schedule(
    ctx: &Context,
    done: Vec<Done>,
    failed_writes: &HashSet<ResourceRef>,
    elapsed: Duration,
) {
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

fn decide_now() -> String {
    crate::status::now()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use kstretch_api::KafkaTopicSpec;

    use super::*;

    fn topic(deleting: bool) -> (Arc<KafkaTopic>, ResourceRef) {
        let mut kt = KafkaTopic::new("t", KafkaTopicSpec::default());
        kt.metadata.namespace = Some("ns".into());
        if deleting {
            kt.metadata.deletion_timestamp =
                Some(Time(k8s_openapi::jiff::Timestamp::from_second(1).unwrap()));
        }
        let key = decide::key_of(&kt);
        (Arc::new(kt), key)
    }

    fn not_found() -> TargetError {
        TargetError::KafkaNotFound {
            namespace: "ns".into(),
            name: "my".into(),
        }
    }

    #[test]
    fn a_deletion_without_a_kafka_cluster_is_released() {
        for e in [not_found(), TargetError::MissingClusterLabel] {
            let (kt, key) = topic(true);
            let mut ending = Ending::default();
            untargeted(kt, &key, &e, &mut ending);
            assert!(matches!(ending.writes.as_slice(), [Write::Release(_)]));
            let [done] = ending.done.as_slice() else {
                panic!()
            };
            assert_eq!(
                (&done.key, done.next, &done.failure),
                (&key, Next::Done, &None)
            );
        }
    }

    #[test]
    fn a_resource_without_a_usable_cluster_reports_why_and_waits_for_its_address() {
        let no_address = TargetError::NoAddress {
            kafka: KafkaRef {
                namespace: "ns".into(),
                name: "my".into(),
            },
        };
        let ambiguous = TargetError::AmbiguousKafka {
            namespace: "ns".into(),
            name: "my".into(),
            namespaces: "a, b".into(),
        };
        for (deleting, e, next) in [
            (false, not_found(), Next::Done),
            (false, no_address.clone(), Next::Retry),
            (true, no_address, Next::Retry),
            (true, ambiguous, Next::Done),
        ] {
            let (kt, key) = topic(deleting);
            let mut ending = Ending::default();
            untargeted(kt, &key, &e, &mut ending);
            let [Write::Status(_, outcome, None)] = ending.writes.as_slice() else {
                panic!("{e:?}: a status without a cluster ID")
            };
            assert_eq!(outcome, &Outcome::not_ready(e.reason(), e.to_string()));
            let [done] = ending.done.as_slice() else {
                panic!()
            };
            assert_eq!(done.next, next, "{e:?}");
            assert_eq!(done.failure.as_deref(), Some(e.reason()));
        }
    }
}

/// Batches of topics whose Kafka cannot be used, end to end against
/// [`crate::testing::Apiserver`]: what is written there and when each is looked at again.
#[cfg(test)]
mod against_the_apiserver {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::Mutex;

    use kstretch_runtime::backoff::Backoff;
    use serde_json::{Value, json};

    use super::*;
    use crate::testing::{Apiserver, Write, status_path, store_of};
    use crate::topic::context::TopicStores;
    use crate::topic::{ClusterIds, TopicQueue, TopicSettings};

    fn topic(name: &str, labels: Value) -> KafkaTopic {
        serde_json::from_value(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaTopic",
            "metadata": {"name": name, "namespace": "ns", "labels": labels, "generation": 1},
            "spec": {"partitions": 1, "replicas": 1}
        }))
        .unwrap()
    }

    fn kafka() -> Kafka {
        serde_json::from_value(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "Kafka",
            "metadata": {"name": "no-address", "namespace": "ns"},
            "spec": {"kafka": {"listeners": []}}
        }))
        .unwrap()
    }

    /// Runs one batch of `topics` with `kafkas` in the store; the writes.
    async fn batch(topics: &[KafkaTopic], kafkas: &[Kafka]) -> Vec<Write> {
        let apiserver = Apiserver::default();
        for t in topics {
            apiserver.hold(t);
        }
        let ctx = Context {
            client: apiserver.client(),
            settings: TopicSettings::default(),
            kafka: Default::default(),
            kafkas: store_of(kafkas),
            topics: TopicStores {
                stores: vec![(None, store_of(topics))],
            },
            queue: TopicQueue::new(16),
            metrics: Default::default(),
            events: kstretch_runtime::events::Events::new(apiserver.client(), "kstretch-central"),
            cluster_ids: ClusterIds::default(),
            seen: Mutex::default(),
            retries: Backoff::new(Duration::from_secs(60)),
        };
        let keys = topics.iter().map(decide::key_of).collect();
        tokio::time::timeout(Duration::from_secs(2), run(&ctx, keys))
            .await
            .expect("the batch ended");
        apiserver.writes()
    }

    fn ready_reason(writes: &[Write], name: &str) -> String {
        let path = status_path::<KafkaTopic>("ns", name);
        let patch = writes
            .iter()
            .find(|w| w.path == path)
            .unwrap_or_else(|| panic!("no status of {name}: {writes:#?}"));
        let ready = patch.body["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap();
        assert_eq!(ready["status"], "False");
        ready["reason"].as_str().unwrap().to_owned()
    }

    #[tokio::test]
    async fn topics_whose_kafka_cannot_be_used_say_why_and_touch_nothing_else() {
        let topics = [
            topic("unlabelled", json!({})),
            topic("orphan", json!({"strimzi.io/cluster": "gone"})),
            topic("early", json!({"strimzi.io/cluster": "no-address"})),
        ];

        let writes = batch(&topics, &[kafka()]).await;

        assert_eq!(ready_reason(&writes, "unlabelled"), "MissingClusterLabel");
        assert_eq!(ready_reason(&writes, "orphan"), "KafkaNotFound");
        assert_eq!(ready_reason(&writes, "early"), "KafkaNotReady");
        assert_eq!(writes.len(), 3, "only the three statuses: {writes:#?}");
    }
}
