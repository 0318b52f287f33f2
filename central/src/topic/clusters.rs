//! Which Kafka cluster a `KafkaTopic` (or `KafkaUser`, `KafkaOperation`) belongs to (its `strimzi.io/cluster` label, a `Kafka` in
//! its namespace first), where central reaches it, and the cluster's identity (its ID, and a
//! warning when brokers auto-create topics), learnt once per cluster.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kstretch_api::{Kafka, names};
use kstretch_kadmin::{AdminClient, ConfigResource, Error};
use kube::ResourceExt;

use crate::kafka::checks::KafkaAccess;
use crate::kafka::resolve::ADMIN_BOOTSTRAP_ANNOTATION;

/// The `Kafka` a topic belongs to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KafkaRef {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for KafkaRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Why a topic's cluster cannot be used; the status says it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error(
        "The resource has no {label} label; set it to the name of the Kafka cluster it belongs to",
        label = names::CLUSTER
    )]
    MissingClusterLabel,
    #[error(
        "No Kafka named {name} exists in namespace {namespace} or elsewhere in the namespaces central watches; fix the {label} label",
        label = names::CLUSTER
    )]
    KafkaNotFound { namespace: String, name: String },
    #[error(
        "Kafka {name} exists in several namespaces ({namespaces}) and none in {namespace}; create the resource in the namespace of its Kafka"
    )]
    AmbiguousKafka {
        namespace: String,
        name: String,
        namespaces: String,
    },
    #[error(
        "Kafka {kafka} has no known address yet (it is not reconciled); this resource is reconciled once it is, or set the {ADMIN_BOOTSTRAP_ANNOTATION} annotation on the Kafka"
    )]
    NoAddress { kafka: KafkaRef },
}

impl TargetError {
    pub fn reason(&self) -> &'static str {
        match self {
            TargetError::MissingClusterLabel => "MissingClusterLabel",
            TargetError::KafkaNotFound { .. } => "KafkaNotFound",
            TargetError::AmbiguousKafka { .. } => "AmbiguousKafka",
            TargetError::NoAddress { .. } => "KafkaNotReady",
        }
    }
}

/// The `Kafka` `kt` (a `KafkaTopic` or `KafkaUser`) belongs to: the one named by its label in
/// its own namespace, else the only one of that name.
pub fn kafka_of<R: ResourceExt>(kt: &R, kafkas: &[Arc<Kafka>]) -> Result<KafkaRef, TargetError> {
    let name = kt
        .labels()
        .get(names::CLUSTER)
        .ok_or(TargetError::MissingClusterLabel)?;
    let namespace = kt.namespace().unwrap_or_default();
    let named: Vec<&Arc<Kafka>> = kafkas.iter().filter(|k| k.name_any() == *name).collect();
    if named
        .iter()
        .any(|k| k.namespace().as_deref() == Some(namespace.as_str()))
    {
        return Ok(KafkaRef {
            namespace,
            name: name.clone(),
        });
    }
    match named.as_slice() {
        [only] => Ok(KafkaRef {
            namespace: only.namespace().unwrap_or_default(),
            name: name.clone(),
        }),
        [] => Err(TargetError::KafkaNotFound {
            namespace,
            name: name.clone(),
        }),
        several => Err(TargetError::AmbiguousKafka {
            namespace,
            name: name.clone(),
            namespaces: several
                .iter()
                .map(|k| k.namespace().unwrap_or_default())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// The `Kafka` a labelled resource belongs to (see [`kafka_of`]), taken from `kafkas`.
pub fn found_kafka<R: ResourceExt>(
    resource: &R,
    kafkas: &[Arc<Kafka>],
) -> Result<(KafkaRef, Arc<Kafka>), TargetError> {
    let kafka_ref = kafka_of(resource, kafkas)?;
    let kafka = kafkas
        .iter()
        .find(|k| {
            k.name_any() == kafka_ref.name && k.namespace().as_deref() == Some(&kafka_ref.namespace)
        })
        .cloned()
        .ok_or_else(|| TargetError::KafkaNotFound {
            namespace: kafka_ref.namespace.clone(),
            name: kafka_ref.name.clone(),
        })?;
    Ok((kafka_ref, kafka))
}

/// Central's admin client of `kafka` (dropped after a failure, so the next attempt connects
/// again).
pub async fn admin_of<E: From<Error> + From<TargetError>>(
    access: &KafkaAccess,
    kafka_ref: &KafkaRef,
    kafka: &Arc<Kafka>,
) -> Result<AdminClient, E> {
    let bootstrap = bootstrap_of(kafka_ref, std::slice::from_ref(kafka), access)?;
    Ok(access
        .client(&bootstrap)
        .await
        .inspect_err(|_| access.forget(&bootstrap))?)
}

/// Where central reaches `kafka`: the Kafka's admin-bootstrap annotation, else the address its
/// reconciler worked out.
pub fn bootstrap_of(
    kafka: &KafkaRef,
    kafkas: &[Arc<Kafka>],
    access: &KafkaAccess,
) -> Result<String, TargetError> {
    let annotated = kafkas
        .iter()
        .find(|k| k.name_any() == kafka.name && k.namespace().as_deref() == Some(&kafka.namespace))
        .and_then(|k| k.annotations().get(ADMIN_BOOTSTRAP_ANNOTATION).cloned());
    annotated
        .or_else(|| access.bootstrap(&kafka.namespace, &kafka.name))
        .ok_or_else(|| TargetError::NoAddress {
            kafka: kafka.clone(),
        })
}

/// Cluster IDs by bootstrap address; the first lookup of a cluster also checks whether its
/// brokers auto-create topics, which races with the operator.
#[derive(Debug, Clone, Default)]
pub struct ClusterIds {
    ids: Arc<Mutex<HashMap<String, String>>>,
}

impl ClusterIds {
    pub async fn get(&self, bootstrap: &str, admin: &AdminClient) -> Result<String, Error> {
        if let Some(id) = self.lock().get(bootstrap) {
            return Ok(id.clone());
        }
        let cluster = admin.describe_cluster(false).await?;
        warn_if_auto_create(bootstrap, admin, &cluster).await;
        self.lock()
            .insert(bootstrap.to_owned(), cluster.cluster_id.clone());
        Ok(cluster.cluster_id)
    }

    /// Forgets `bootstrap` (after a failure: the address may now reach another cluster).
    pub fn forget(&self, bootstrap: &str) {
        self.lock().remove(bootstrap);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.ids.lock().unwrap_or_else(|e| e.into_inner())
    }
}

const AUTO_CREATE: &str = "auto.create.topics.enable";

async fn warn_if_auto_create(
    bootstrap: &str,
    admin: &AdminClient,
    cluster: &kstretch_kadmin::ClusterDescription,
) {
    let Some(broker) = cluster.brokers.first() else {
        return;
    };
    match admin
        .describe_configs(&[ConfigResource::Broker(broker.id)])
        .await
    {
        Ok(results) => {
            let enabled = results
                .first()
                .and_then(|r| r.get(AUTO_CREATE))
                .and_then(|e| e.value.as_deref())
                .is_some_and(|v| v == "true");
            if enabled {
                tracing::warn!(
                    %bootstrap,
                    cluster_id = %cluster.cluster_id,
                    "{AUTO_CREATE}=true on this Kafka cluster: applications may create topics before their KafkaTopic is reconciled, with the broker defaults; set it to false"
                );
            }
        }
        Err(e) => tracing::debug!(%bootstrap, error = %e, "cannot read broker configs"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use kstretch_api::{KafkaSpec, KafkaTopic, KafkaTopicSpec};

    use super::*;

    fn kafka(ns: &str, name: &str) -> Arc<Kafka> {
        let mut k = Kafka::new(name, KafkaSpec::default());
        k.metadata.namespace = Some(ns.into());
        Arc::new(k)
    }

    fn topic(ns: &str, cluster: Option<&str>) -> KafkaTopic {
        let mut kt = KafkaTopic::new("t", KafkaTopicSpec::default());
        kt.metadata.namespace = Some(ns.into());
        if let Some(c) = cluster {
            kt.labels_mut().insert(names::CLUSTER.into(), c.into());
        }
        kt
    }

    #[test]
    fn the_kafka_in_the_topics_namespace_wins_then_the_only_one_of_that_name() {
        let kafkas = vec![kafka("a", "my"), kafka("b", "my"), kafka("c", "solo")];
        assert_eq!(
            kafka_of(&topic("b", Some("my")), &kafkas).unwrap(),
            KafkaRef {
                namespace: "b".into(),
                name: "my".into()
            }
        );
        assert_eq!(
            kafka_of(&topic("team", Some("solo")), &kafkas)
                .unwrap()
                .namespace,
            "c"
        );
        let e = kafka_of(&topic("team", Some("my")), &kafkas).unwrap_err();
        assert_eq!(e.reason(), "AmbiguousKafka");
        assert!(e.to_string().contains("a, b"), "{e}");
        let e = kafka_of(&topic("team", Some("nope")), &kafkas).unwrap_err();
        assert_eq!(e.reason(), "KafkaNotFound");
        let e = kafka_of(&topic("team", None), &kafkas).unwrap_err();
        assert_eq!(e.reason(), "MissingClusterLabel");
    }

    #[test]
    fn the_address_comes_from_the_annotation_or_the_reconciler() {
        let mut annotated = Kafka::new("my", KafkaSpec::default());
        annotated.metadata.namespace = Some("a".into());
        annotated
            .annotations_mut()
            .insert(ADMIN_BOOTSTRAP_ANNOTATION.into(), "k:9092".into());
        let kafkas = vec![Arc::new(annotated), kafka("b", "other")];
        let access = KafkaAccess::default();
        let my = KafkaRef {
            namespace: "a".into(),
            name: "my".into(),
        };
        assert_eq!(bootstrap_of(&my, &kafkas, &access).unwrap(), "k:9092");
        let other = KafkaRef {
            namespace: "b".into(),
            name: "other".into(),
        };
        let e = bootstrap_of(&other, &kafkas, &access).unwrap_err();
        assert_eq!(e.reason(), "KafkaNotReady");
        access.set_bootstrap("b", "other", "o:9091");
        assert_eq!(bootstrap_of(&other, &kafkas, &access).unwrap(), "o:9091");
    }
}
