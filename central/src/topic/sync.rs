//! The Kafka side of a batch, for one cluster: describe the batch's topics and their configs
//! (one request each), plan every topic ([`super::plan`]), then create topics, alter configs,
//! add partitions and change replication factors ([`super::replicas`]) with one request per
//! kind; and deletions by topic ID.

use std::collections::HashMap;
use std::future::Future;

use kstretch_core::topics::{AlterableConfigs, ResourceRef};
use kstretch_kadmin::{
    AdminClient, ConfigChange, ConfigResource, Error, NewPartitions, NewTopic, TopicDescription,
    Uuid,
};

use super::decide::Outcome;
use super::metrics::TopicMetrics;
use super::plan::{self, Described};
use super::replicas;
use super::work::{Acc, next_after, timed};
pub use super::work::{Next, Reconciled, Work};

fn failed(error: &Error) -> Outcome {
    Outcome::not_ready(error.reason(), error.to_string())
}

/// Makes Kafka match every `work` item, with one request per kind for the whole batch:
/// describe, plan (pure), then create, alter configs, add partitions, change replication
/// factors.
pub async fn reconcile(
    admin: &AdminClient,
    alterable: &AlterableConfigs,
    work: Vec<Work>,
    metrics: &TopicMetrics,
) -> Vec<Reconciled> {
    if work.is_empty() {
        return Vec::new();
    }
    let described = match describe(admin, &work, metrics).await {
        Ok(described) => described,
        Err(e) => return all_failed(work, &e),
    };
    let candidates = replicas::candidates(&work, &described.topics);
    let ongoing = replicas::ongoing(admin, &candidates, metrics).await;
    let (mut accs, requests) = plan::batch(&work, described, &ongoing, alterable);
    create_topics(admin, &requests.creates, &mut accs, metrics).await;
    alter_configs_and_partitions(admin, &requests, &mut accs, metrics).await;
    if !requests.rf_work.is_empty() {
        replicas::change(admin, &work, &mut accs, requests.rf_work, metrics).await;
    }
    accs.into_iter().map(Acc::finish).collect()
}

/// The batch's topics as Kafka has them, and the configs of those that exist (one request
/// each).
async fn describe(
    admin: &AdminClient,
    work: &[Work],
    metrics: &TopicMetrics,
) -> Result<Described, Error> {
    let names: Vec<String> = work.iter().map(|w| w.desired.name.clone()).collect();
    let described = timed(
        metrics,
        "describe_topics",
        admin.describe_topics(Some(&names)),
    )
    .await?;
    let topics: HashMap<String, TopicDescription> =
        described.into_iter().map(|t| (t.name.clone(), t)).collect();
    let resources: Vec<ConfigResource> = names
        .iter()
        .filter_map(|n| topics.get(n))
        .map(|t| ConfigResource::Topic(t.name.clone()))
        .collect();
    let mut configs = HashMap::new();
    if !resources.is_empty() {
        let results = timed(
            metrics,
            "describe_configs",
            admin.describe_configs(&resources),
        )
        .await?;
        for r in results {
            if let ConfigResource::Topic(name) = r.resource {
                configs.insert(name, r.result.map(plan::config_values));
            }
        }
    }
    Ok(Described { topics, configs })
}

/// CreateTopics for the topics Kafka does not have.
async fn create_topics(
    admin: &AdminClient,
    creates: &[(usize, NewTopic)],
    accs: &mut [Acc],
    metrics: &TopicMetrics,
) {
    if creates.is_empty() {
        return;
    }
    let topics: Vec<NewTopic> = creates.iter().map(|(_, t)| t.clone()).collect();
    match timed(
        metrics,
        "create_topics",
        admin.create_topics(&topics, false),
    )
    .await
    {
        Ok(results) => {
            for ((i, _), r) in creates.iter().zip(results) {
                let acc = &mut accs[*i];
                match r.result {
                    Ok(created) => acc.topic_id = Some(created.id.to_string()),
                    // Created by someone else since the describe: adopt it on a rerun.
                    Err(Error::TopicAlreadyExists { .. }) => {
                        acc.write_status = false;
                        acc.next = Next::Again;
                    }
                    Err(e) => acc.fail_with(&e),
                }
            }
        }
        Err(e) => creates.iter().for_each(|(i, _)| accs[*i].fail_with(&e)),
    }
}

/// IncrementalAlterConfigs for every topic whose configs differ, then CreatePartitions for
/// every topic that needs more: one request each.
async fn alter_configs_and_partitions(
    admin: &AdminClient,
    requests: &plan::Requests,
    accs: &mut [Acc],
    metrics: &TopicMetrics,
) {
    let changes: Vec<ConfigChange> = requests.changes.iter().map(|(_, c)| c.clone()).collect();
    let request = admin.incremental_alter_configs(&changes, false);
    let answer = async {
        request
            .await
            .map(|rs| rs.into_iter().map(|r| r.result).collect())
    };
    send_for_each(&requests.changes, accs, metrics, "alter_configs", answer).await;
    let increases: Vec<NewPartitions> = requests.increases.iter().map(|(_, p)| p.clone()).collect();
    let request = admin.create_partitions(&increases, false);
    let answer = async {
        request
            .await
            .map(|rs| rs.into_iter().map(|r| r.result).collect())
    };
    send_for_each(
        &requests.increases,
        accs,
        metrics,
        "create_partitions",
        answer,
    )
    .await;
}

/// Sends the one request for `items`, timed as `call`, unless there are none (then `request`
/// is never polled, so nothing is sent), and fails the topics Kafka refused.
async fn send_for_each<T>(
    items: &[(usize, T)],
    accs: &mut [Acc],
    metrics: &TopicMetrics,
    call: &'static str,
    request: impl Future<Output = Result<Vec<Result<(), Error>>, Error>>,
) {
    if items.is_empty() {
        return;
    }
    let answer = timed(metrics, call, request).await;
    fail_refused(items, answer, accs);
}

/// Fails the topic of each item Kafka refused, in the order of `items`, or of every item when
/// the request as a whole failed.
fn fail_refused<T>(
    items: &[(usize, T)],
    answer: Result<Vec<Result<(), Error>>, Error>,
    accs: &mut [Acc],
) {
    match answer {
        Ok(results) => {
            for ((i, _), r) in items.iter().zip(results) {
                if let Err(e) = r {
                    accs[*i].fail_with(&e);
                }
            }
        }
        Err(e) => items.iter().for_each(|(i, _)| accs[*i].fail_with(&e)),
    }
}

fn all_failed(work: Vec<Work>, error: &Error) -> Vec<Reconciled> {
    work.into_iter()
        .map(|w| Reconciled {
            key: w.key,
            outcome: Some(failed(error)),
            next: next_after(error),
        })
        .collect()
}

/// One topic to delete from Kafka.
#[derive(Debug, Clone)]
pub struct Deletion {
    pub key: ResourceRef,
    pub topic: String,
    /// `status.topicId`; when unknown the ID is looked up by name.
    pub topic_id: Option<String>,
}

/// How a deletion ended.
#[derive(Debug, Clone)]
pub enum Deleted {
    /// Deleted now, or no topic had that ID (a topic recreated under the same name since is
    /// somebody else's and stays).
    Gone,
    /// `delete.topic.enable=false`: the topic stays, unmanaged.
    Disabled,
    Failed(Error),
}

/// Kafka's answer to DeleteTopics when `delete.topic.enable=false`.
const TOPIC_DELETION_DISABLED: &str = "TOPIC_DELETION_DISABLED";

/// Deletes topics by ID with one request.
pub async fn delete(
    admin: &AdminClient,
    items: Vec<Deletion>,
    metrics: &TopicMetrics,
) -> Vec<(ResourceRef, Deleted)> {
    let mut out = Vec::new();
    let ids = topic_ids(admin, items, metrics, &mut out).await;
    if ids.is_empty() {
        return out;
    }
    let list: Vec<Uuid> = ids.iter().map(|(_, id)| *id).collect();
    match timed(metrics, "delete_topics", admin.delete_topics_by_id(&list)).await {
        Ok(results) => {
            let by_id: HashMap<Uuid, Result<(), Error>> =
                results.into_iter().map(|r| (r.id, r.result)).collect();
            for (key, id) in ids {
                out.push((key, deleted(id, by_id.get(&id))));
            }
        }
        Err(e) => out.extend(
            ids.into_iter()
                .map(|(key, _)| (key, Deleted::Failed(e.clone()))),
        ),
    }
    out
}

/// The topic ID of each deletion: `status.topicId`, else looked up by name (one request). A
/// topic Kafka does not have is gone already; a failed lookup fails its deletions. Both go to
/// `out`.
async fn topic_ids(
    admin: &AdminClient,
    items: Vec<Deletion>,
    metrics: &TopicMetrics,
    out: &mut Vec<(ResourceRef, Deleted)>,
) -> Vec<(ResourceRef, Uuid)> {
    let mut ids: Vec<(ResourceRef, Uuid)> = Vec::new();
    let mut unknown: Vec<Deletion> = Vec::new();
    for item in items {
        match item
            .topic_id
            .as_deref()
            .and_then(|id| Uuid::parse_str(id).ok())
        {
            Some(id) => ids.push((item.key, id)),
            None => unknown.push(item),
        }
    }
    if unknown.is_empty() {
        return ids;
    }
    let names: Vec<String> = unknown.iter().map(|d| d.topic.clone()).collect();
    match timed(
        metrics,
        "describe_topics",
        admin.describe_topics(Some(&names)),
    )
    .await
    {
        Ok(described) => {
            let by_name: HashMap<&str, Uuid> =
                described.iter().map(|t| (t.name.as_str(), t.id)).collect();
            for d in unknown {
                match by_name.get(d.topic.as_str()) {
                    Some(id) => ids.push((d.key, *id)),
                    None => out.push((d.key, Deleted::Gone)),
                }
            }
        }
        Err(e) => out.extend(
            unknown
                .into_iter()
                .map(|d| (d.key, Deleted::Failed(e.clone()))),
        ),
    }
    ids
}

/// How the deletion of topic `id` ended, from DeleteTopics' answer for it.
fn deleted(id: Uuid, answer: Option<&Result<(), Error>>) -> Deleted {
    match answer {
        Some(Ok(())) | Some(Err(Error::UnknownTopic { .. })) => Deleted::Gone,
        Some(Err(e)) if e.kafka_code_name().as_deref() == Some(TOPIC_DELETION_DISABLED) => {
            Deleted::Disabled
        }
        Some(Err(e)) => Deleted::Failed(e.clone()),
        None => Deleted::Failed(Error::Protocol {
            address: String::new(),
            message: format!("DeleteTopics answered nothing for topic ID {id}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use kstretch_kadmin::{ApiKey, KafkaError, ResponseError};

    use super::*;

    fn kafka(error: ResponseError) -> Error {
        Error::from_kafka(
            ApiKey::DeleteTopics,
            KafkaError {
                error,
                message: None,
            },
        )
    }

    fn acc(name: &str) -> Acc {
        Acc::new(ResourceRef {
            namespace: "ns".into(),
            name: name.into(),
        })
    }

    #[test]
    fn a_deletion_ends_gone_disabled_or_failed() {
        let id = Uuid::nil();
        assert!(matches!(deleted(id, Some(&Ok(()))), Deleted::Gone));
        assert!(matches!(
            deleted(id, Some(&Err(kafka(ResponseError::UnknownTopicId)))),
            Deleted::Gone
        ));
        assert!(matches!(
            deleted(id, Some(&Err(kafka(ResponseError::TopicDeletionDisabled)))),
            Deleted::Disabled
        ));
        assert!(matches!(
            deleted(
                id,
                Some(&Err(kafka(ResponseError::TopicAuthorizationFailed)))
            ),
            Deleted::Failed(Error::Kafka { .. })
        ));
        let Deleted::Failed(e) = deleted(id, None) else {
            panic!("no answer is a failure")
        };
        assert_eq!(e.reason(), "KafkaProtocolError");
    }

    #[test]
    fn refusals_fail_their_own_topic_and_a_failed_request_every_topic() {
        let items = [(0, ()), (2, ())];
        let mut accs = vec![acc("a"), acc("b"), acc("c")];
        let refused = kafka(ResponseError::PolicyViolation);
        fail_refused(&items, Ok(vec![Ok(()), Err(refused)]), &mut accs);
        assert_eq!(accs[0].problem, None);
        assert_eq!(accs[1].problem, None, "not in the request");
        assert_eq!(
            accs[2].problem.as_ref().map(|p| p.reason),
            Some("KafkaError")
        );
        assert_eq!(
            accs[2].next,
            Next::Done,
            "waits for a change of the resource"
        );

        let unreachable = Error::Unreachable {
            address: "b:9092".into(),
            message: "refused".into(),
        };
        fail_refused(&items, Err(unreachable), &mut accs);
        assert_eq!(
            accs[0].problem.as_ref().map(|p| p.reason),
            Some("KafkaUnreachable")
        );
        assert_eq!(
            accs[2].problem.as_ref().map(|p| p.reason),
            Some("KafkaError"),
            "the first failure is the one the status shows"
        );
        assert_eq!(accs[2].next, Next::Retry, "a transient failure is retried");
    }
}
