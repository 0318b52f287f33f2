//! The Kafka side of an operation, kept thin: what Kafka holds now (replicas, leaders, sizes,
//! `min.insync.replicas`, brokers and their racks, reassignments in flight), and each step that
//! changes it (leadership first, a throttled batch of reassignments, throttle removal, cancel).
//! What to do is decided by `kstretch_core::movement`.

use std::collections::{BTreeMap, BTreeSet};

use kstretch_core::movement::throttle::{
    FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS, Throttle,
};
use kstretch_core::movement::{LeaderChange, Move, Partition};
use kstretch_kadmin::{AdminClient, ConfigChange, ConfigOp, ConfigResource, Error, Reassignment};

/// What Kafka holds now.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub partitions: Vec<Partition>,
    /// Registered, unfenced brokers and their racks (a broker's rack is its cluster's alias).
    pub brokers: BTreeMap<i32, String>,
    /// Every registered broker, fenced ones too, and its rack (before KIP-1073 only the
    /// unfenced ones are known).
    pub registered: BTreeMap<i32, String>,
}

pub fn name(topic: &str, partition: i32) -> String {
    format!("{topic}-{partition}")
}

/// Reads the partitions of every topic with their sizes and `min.insync.replicas`, and the
/// brokers.
pub async fn observe(admin: &AdminClient) -> Result<Observed, Error> {
    // One listing gives both, fenced brokers included (KIP-1073); before it, only live ones.
    let (brokers, registered) = match admin.describe_cluster(true).await {
        Ok(cluster) => {
            let rack = |b: &kstretch_kadmin::Broker| (b.id, b.rack.clone().unwrap_or_default());
            let live = cluster
                .brokers
                .iter()
                .filter(|b| !b.fenced)
                .map(rack)
                .collect();
            (live, cluster.brokers.iter().map(rack).collect())
        }
        Err(Error::Unsupported { .. }) => {
            let live: BTreeMap<i32, String> = crate::kafka::checks::broker_racks(admin).await?;
            (live.clone(), live)
        }
        Err(e) => return Err(e),
    };
    let topics = admin.describe_topics(None).await?;
    let ids: Vec<i32> = brokers.keys().copied().collect();
    let sizes = admin.partition_sizes(&ids).await?;
    let resources: Vec<ConfigResource> = topics
        .iter()
        .map(|t| ConfigResource::Topic(t.name.clone()))
        .collect();
    let mut min_isr: BTreeMap<String, usize> = BTreeMap::new();
    for described in admin.describe_configs(&resources).await? {
        let ConfigResource::Topic(topic) = described.resource else {
            continue;
        };
        let value = described
            .result?
            .iter()
            .find(|e| e.name == "min.insync.replicas")
            .and_then(|e| e.value.as_deref()?.parse().ok())
            .unwrap_or(1);
        min_isr.insert(topic, value);
    }
    let mut partitions = Vec::new();
    for t in topics {
        for p in t.partitions {
            partitions.push(Partition {
                topic: t.name.clone(),
                partition: p.index,
                size: sizes.get(&(t.name.clone(), p.index)).copied().unwrap_or(0),
                replicas: p.replicas,
                isr: p.isr.into_iter().collect(),
                leader: Some(p.leader).filter(|l| *l >= 0),
                min_isr: min_isr.get(&t.name).copied().unwrap_or(1),
            });
        }
    }
    Ok(Observed {
        partitions,
        brokers,
        registered,
    })
}

/// `topic-partition` of every reassignment in flight (cheap: what a running operation polls).
pub async fn moving(admin: &AdminClient) -> Result<BTreeSet<String>, Error> {
    Ok(admin
        .list_partition_reassignments(None)
        .await?
        .iter()
        .map(|r| name(&r.topic, r.partition))
        .collect())
}

/// Moves leadership: replicas reordered where the order differs (no data moves), then a
/// preferred election. Returns the partitions whose election did not happen yet.
pub async fn lead(
    admin: &AdminClient,
    changes: &[LeaderChange],
    current: &[Partition],
) -> Result<Vec<String>, Error> {
    let order: BTreeMap<(&str, i32), &Vec<i32>> = current
        .iter()
        .map(|p| ((p.topic.as_str(), p.partition), &p.replicas))
        .collect();
    let reorder: Vec<Reassignment> = changes
        .iter()
        .filter(|c| order.get(&(c.topic.as_str(), c.partition)) != Some(&&c.replicas))
        .map(|c| Reassignment {
            topic: c.topic.clone(),
            partition: c.partition,
            target: Some(c.replicas.clone()),
        })
        .collect();
    reassign(admin, &reorder).await?;
    let partitions: Vec<(String, i32)> = changes
        .iter()
        .map(|c| (c.topic.clone(), c.partition))
        .collect();
    let failed = admin.elect_preferred_leaders(&partitions).await?;
    Ok(failed
        .iter()
        .map(|f| format!("{} ({})", name(&f.topic, f.partition), f.error))
        .collect())
}

/// Throttles (with `t`, the batch's [`throttle`]) and starts one batch. The throttle is set
/// first, so no byte moves unthrottled.
pub async fn start_batch(
    admin: &AdminClient,
    batch: &[Move],
    t: &Throttle,
    rate: u64,
) -> Result<(), Error> {
    let mut changes: Vec<ConfigChange> = t
        .brokers
        .iter()
        .map(|b| ConfigChange {
            resource: ConfigResource::Broker(*b),
            ops: vec![
                ConfigOp::set(LEADER_RATE, rate.to_string()),
                ConfigOp::set(FOLLOWER_RATE, rate.to_string()),
            ],
        })
        .collect();
    changes.extend(
        t.topics
            .iter()
            .map(|(topic, (leaders, followers))| ConfigChange {
                resource: ConfigResource::Topic(topic.clone()),
                ops: vec![
                    ConfigOp::set(LEADER_REPLICAS, leaders.clone()),
                    ConfigOp::set(FOLLOWER_REPLICAS, followers.clone()),
                ],
            }),
    );
    alter(admin, &changes).await?;
    let reassignments: Vec<Reassignment> = batch
        .iter()
        .map(|m| Reassignment {
            topic: m.topic.clone(),
            partition: m.partition,
            target: Some(m.to.clone()),
        })
        .collect();
    reassign(admin, &reassignments).await
}

/// Removes the throttle settings from `topics` and `brokers` (a topic deleted meanwhile has
/// nothing left to remove, and a broker that left the cluster cannot be asked: its rate
/// applies to no throttled replica any more).
pub async fn unthrottle(
    admin: &AdminClient,
    topics: &[String],
    brokers: &[i32],
) -> Result<(), Error> {
    let present: BTreeSet<i32> = admin
        .describe_cluster(false)
        .await?
        .brokers
        .iter()
        .map(|b| b.id)
        .collect();
    let mut changes: Vec<ConfigChange> = brokers
        .iter()
        .filter(|b| present.contains(b))
        .map(|b| ConfigChange {
            resource: ConfigResource::Broker(*b),
            ops: vec![
                ConfigOp::delete(LEADER_RATE),
                ConfigOp::delete(FOLLOWER_RATE),
            ],
        })
        .collect();
    changes.extend(topics.iter().map(|topic| ConfigChange {
        resource: ConfigResource::Topic(topic.clone()),
        ops: vec![
            ConfigOp::delete(LEADER_REPLICAS),
            ConfigOp::delete(FOLLOWER_REPLICAS),
        ],
    }));
    for result in admin.incremental_alter_configs(&changes, false).await? {
        match result.result {
            Err(e) if is_gone(&e) => {}
            other => other?,
        }
    }
    Ok(())
}

/// Cancels the reassignments of `partitions` still in flight; cancelled partitions keep their
/// old replicas.
pub async fn cancel(admin: &AdminClient, partitions: &[(String, i32)]) -> Result<(), Error> {
    let cancels: Vec<Reassignment> = partitions
        .iter()
        .map(|(topic, partition)| Reassignment {
            topic: topic.clone(),
            partition: *partition,
            target: None,
        })
        .collect();
    for result in admin.alter_partition_reassignments(&cancels).await? {
        match result.result {
            // Finished before the cancel arrived, or its topic is gone: nothing to undo.
            Err(e) if is_gone(&e) || is_no_reassignment(&e) => {}
            other => other?,
        }
    }
    Ok(())
}

async fn reassign(admin: &AdminClient, reassignments: &[Reassignment]) -> Result<(), Error> {
    if reassignments.is_empty() {
        return Ok(());
    }
    for result in admin.alter_partition_reassignments(reassignments).await? {
        result.result?;
    }
    Ok(())
}

async fn alter(admin: &AdminClient, changes: &[ConfigChange]) -> Result<(), Error> {
    for result in admin.incremental_alter_configs(changes, false).await? {
        result.result?;
    }
    Ok(())
}

fn is_gone(e: &Error) -> bool {
    e.kafka().is_some_and(|k| {
        matches!(
            k.error,
            kstretch_kadmin::ResponseError::UnknownTopicOrPartition
                | kstretch_kadmin::ResponseError::UnknownTopicId
        )
    })
}

fn is_no_reassignment(e: &Error) -> bool {
    e.kafka()
        .is_some_and(|k| k.error == kstretch_kadmin::ResponseError::NoReassignmentInProgress)
}
