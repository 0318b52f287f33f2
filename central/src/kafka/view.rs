//! What Kafka says of one cluster, read once per reconciliation: only the parts the pass will
//! use ([`Wanted`], decided purely beforehand), each with why it could not be read. Everything
//! the pipeline decides from Kafka's answers is derived here from plain values.

use std::collections::{BTreeMap, BTreeSet};

use kstretch_core::movement::Partition;
use kstretch_core::movement::spread::{self, Confined};
use kstretch_kadmin::{
    AdminClient, ClusterDescription, ConfigResource, Error, QuorumInfo, TopicDescription,
};

use super::checks::KafkaAccess;

/// One partition as the roll checks need it (see [`super::roll::pick`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionIsr {
    /// `<topic>-<index>`.
    pub name: String,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// The topic's `min.insync.replicas`.
    pub min_isr: usize,
}

/// Which parts of Kafka's state a pass reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Wanted {
    /// The registered brokers (DescribeCluster).
    pub cluster: bool,
    /// The metadata quorum (DescribeQuorum).
    pub quorum: bool,
    /// The finalized features (`metadata.version`, `kraft.version`).
    pub features: bool,
    /// Every partition with its replicas and ISR.
    pub topics: bool,
    /// Each topic's `min.insync.replicas` (implies `topics`).
    pub min_isr: bool,
}

impl Wanted {
    /// Only the partitions.
    pub fn topics() -> Wanted {
        Wanted {
            topics: true,
            ..Wanted::default()
        }
    }

    fn any(&self) -> bool {
        self.cluster || self.quorum || self.features || self.topics || self.min_isr
    }
}

/// Why a part of Kafka's state was not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unread {
    /// No address to reach the cluster at.
    #[error("no bootstrap address for the admin client")]
    NoBootstrap,
    /// No connection could be opened.
    #[error("{0}")]
    Unreachable(String),
    /// The request failed.
    #[error("{0}")]
    Failed(String),
    /// The pass did not ask for it.
    #[error("not read in this reconciliation")]
    NotWanted,
}

/// A part of Kafka's state, or why it is not known.
pub type Part<T> = Result<T, Unread>;

/// The registered brokers; `fenced_listed` when Kafka listed fenced ones too (KIP-1073, Kafka
/// 4.0 and later), so that registrations of nodes that are gone can be seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    pub description: ClusterDescription,
    pub fenced_listed: bool,
}

impl Registered {
    /// The brokers that heartbeat.
    pub fn live(&self) -> BTreeSet<i32> {
        self.description
            .brokers
            .iter()
            .filter(|b| !b.fenced)
            .map(|b| b.id)
            .collect()
    }

    /// The unfenced brokers, each with its rack (its Kubernetes cluster).
    pub fn racks(&self) -> BTreeMap<i32, String> {
        self.description
            .brokers
            .iter()
            .filter(|b| !b.fenced)
            .map(|b| (b.id, b.rack.clone().unwrap_or_default()))
            .collect()
    }
}

/// What one pass read of Kafka.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaView {
    pub bootstrap: Option<String>,
    pub cluster: Part<Registered>,
    pub quorum: Part<QuorumInfo>,
    pub features: Part<BTreeMap<String, i16>>,
    pub topics: Part<Vec<TopicDescription>>,
    /// `min.insync.replicas` by topic (1 where a topic does not say).
    pub min_isr: Part<BTreeMap<String, usize>>,
}

impl KafkaView {
    /// A view where nothing was read, each part for `why`.
    pub fn unread(bootstrap: Option<&str>, why: Unread) -> KafkaView {
        KafkaView {
            bootstrap: bootstrap.map(str::to_owned),
            cluster: Err(why.clone()),
            quorum: Err(why.clone()),
            features: Err(why.clone()),
            topics: Err(why.clone()),
            min_isr: Err(why),
        }
    }

    /// Of `brokers`, those holding at least one partition replica, with the partitions
    /// (`topic-partition`) they hold.
    pub fn holding(&self, brokers: &BTreeSet<i32>) -> Part<BTreeMap<i32, Vec<String>>> {
        let mut out: BTreeMap<i32, Vec<String>> = BTreeMap::new();
        for topic in self.topics.as_ref().map_err(Clone::clone)? {
            for p in &topic.partitions {
                for id in p.replicas.iter().filter(|id| brokers.contains(id)) {
                    out.entry(*id)
                        .or_default()
                        .push(format!("{}-{}", topic.name, p.index));
                }
            }
        }
        Ok(out)
    }

    /// Every partition with its ISR and its topic's `min.insync.replicas`, as the roll check
    /// needs them.
    pub fn partitions_isr(&self) -> Part<Vec<PartitionIsr>> {
        let topics = self.topics.as_ref().map_err(Clone::clone)?;
        let min_isr = self.min_isr.as_ref().map_err(Clone::clone)?;
        Ok(topics
            .iter()
            .flat_map(|t| {
                let min_isr = min_isr.get(&t.name).copied().unwrap_or(1);
                t.partitions.iter().map(move |p| PartitionIsr {
                    name: format!("{}-{}", t.name, p.index),
                    replicas: p.replicas.clone(),
                    isr: p.isr.clone(),
                    min_isr,
                })
            })
            .collect())
    }

    /// Partitions whose replicas all sit in one Kubernetes cluster (a broker's rack) while the
    /// brokers run in several: losing that cluster loses them.
    pub fn confined(&self) -> Part<Vec<Confined>> {
        let brokers = self.cluster.as_ref().map_err(Clone::clone)?.racks();
        let partitions: Vec<Partition> = self
            .topics
            .as_ref()
            .map_err(Clone::clone)?
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| Partition {
                    topic: t.name.clone(),
                    partition: p.index,
                    replicas: p.replicas.clone(),
                    isr: p.isr.iter().copied().collect(),
                    leader: Some(p.leader).filter(|l| *l >= 0),
                    size: 0,
                    min_isr: 1,
                })
            })
            .collect();
        Ok(spread::confined(&partitions, &brokers))
    }
}

/// Reads the `wanted` parts of the cluster at `bootstrap`. Once Kafka cannot be reached, the
/// parts left are not asked for (each would wait for the same timeout); a failed client is
/// dropped, so the next pass connects afresh.
pub async fn read(access: &KafkaAccess, bootstrap: Option<&str>, wanted: Wanted) -> KafkaView {
    let Some(b) = bootstrap.filter(|_| wanted.any()) else {
        let why = if wanted.any() {
            Unread::NoBootstrap
        } else {
            Unread::NotWanted
        };
        return KafkaView::unread(bootstrap, why);
    };
    let admin = match access.client(b).await {
        Ok(admin) => admin,
        Err(e) => return KafkaView::unread(bootstrap, Unread::Unreachable(e.to_string())),
    };
    let mut reader = Reader {
        gone: None,
        failed: false,
    };
    let cluster = reader.part(wanted.cluster, registered(&admin)).await;
    let quorum = reader.part(wanted.quorum, admin.describe_quorum()).await;
    let features = reader
        .part(wanted.features, admin.finalized_features())
        .await;
    let topics = reader
        .part(wanted.topics || wanted.min_isr, admin.describe_topics(None))
        .await;
    let min_isr = match &topics {
        Ok(topics) if wanted.min_isr => reader.min_isr(&admin, topics).await,
        Err(e) if wanted.min_isr => Err(e.clone()),
        _ => Err(Unread::NotWanted),
    };
    if reader.failed {
        access.forget(b);
    }
    KafkaView {
        bootstrap: bootstrap.map(str::to_owned),
        cluster,
        quorum,
        features,
        topics,
        min_isr,
    }
}

/// Asks one part after another, until Kafka is found unreachable.
struct Reader {
    /// Why Kafka cannot be reached, once found.
    gone: Option<Unread>,
    failed: bool,
}

impl Reader {
    /// The answer of `call` (not made when not `wanted` or Kafka is gone).
    async fn part<T>(
        &mut self,
        wanted: bool,
        call: impl std::future::Future<Output = Result<T, Error>>,
    ) -> Part<T> {
        if !wanted {
            return Err(Unread::NotWanted);
        }
        if let Some(gone) = &self.gone {
            return Err(gone.clone());
        }
        call.await.map_err(|e| self.failure(e))
    }

    async fn min_isr(
        &mut self,
        admin: &AdminClient,
        topics: &[TopicDescription],
    ) -> Part<BTreeMap<String, usize>> {
        if topics.is_empty() {
            return Ok(BTreeMap::new());
        }
        let resources: Vec<ConfigResource> = topics
            .iter()
            .map(|t| ConfigResource::Topic(t.name.clone()))
            .collect();
        let configs = self.part(true, admin.describe_configs(&resources)).await?;
        Ok(topics
            .iter()
            .zip(configs)
            .map(|(t, config)| {
                let min_isr = config
                    .get("min.insync.replicas")
                    .and_then(|e| e.value.as_deref())
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(1);
                (t.name.clone(), min_isr)
            })
            .collect())
    }

    fn failure(&mut self, e: Error) -> Unread {
        self.failed = true;
        let unread = Unread::Failed(e.to_string());
        if matches!(e, Error::Unreachable { .. } | Error::Timeout { .. }) {
            self.gone = Some(unread.clone());
        }
        unread
    }
}

/// The registered brokers, fenced ones included where Kafka can list them.
async fn registered(admin: &AdminClient) -> Result<Registered, Error> {
    match admin.describe_cluster(true).await {
        Ok(description) => Ok(Registered {
            description,
            fenced_listed: true,
        }),
        // Before KIP-1073 only the live brokers are listed.
        Err(Error::Unsupported { .. }) => Ok(Registered {
            description: admin.describe_cluster(false).await?,
            fenced_listed: false,
        }),
        Err(e) => Err(e),
    }
}
