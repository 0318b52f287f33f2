//! Plain values the pure deciders' tests share: nodes as their agents report them, what Kafka
//! answers, a formed dynamic quorum.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use kstretch_api::{KafkaStatus, QuorumStatus};
use kstretch_core::kraft::{self, KafkaCluster};
use kstretch_core::node_ids::Role;
use kstretch_core::versions::{self, Target};
use kstretch_kadmin::{
    Broker, ClusterDescription, PartitionDescription, QuorumInfo, ReplicaState, TopicDescription,
    Uuid,
};

use kstretch_api::{Kafka, KafkaNodePool, KafkaOperation};
use kstretch_proto::agent::v1::PodSetStatus;

use super::pass::AgentReports;
use super::plan::{self, Ask, Early, Plan, Secrets};
use crate::kafka::resolve::tests::members;
use crate::kafka::roll::{NodeView, Reported};
use crate::kafka::view::{KafkaView, Registered, Unread};
use crate::pki::{self, CaKind};

pub(super) const C: &[Role] = &[Role::Controller];
pub(super) const B: &[Role] = &[Role::Broker];

pub(super) fn node(id: i32, roles: &[Role], revision: &str, ready: bool) -> NodeView {
    NodeView {
        id,
        alias: "alpha".into(),
        pod: format!("k-p-{id}"),
        roles: roles.iter().copied().collect(),
        desired_revision: "new".into(),
        reported: Some(Reported {
            uid: format!("u{id}"),
            ready,
            revision: revision.into(),
            manual: false,
            new_disks: false,
            terminating: false,
        }),
        connected: true,
        applied: true,
        claims: vec![format!("data-k-p-{id}")],
    }
}

pub(super) fn nothing_read() -> KafkaView {
    KafkaView::unread(Some("k:9091"), Unread::NotWanted)
}

pub(super) fn brokers(listed: &[(i32, bool)], fenced_listed: bool) -> Registered {
    Registered {
        description: ClusterDescription {
            cluster_id: "id".into(),
            controller_id: None,
            brokers: listed
                .iter()
                .map(|&(id, fenced)| Broker {
                    id,
                    host: format!("b{id}"),
                    port: 9092,
                    rack: Some(if id < 10 { "alpha" } else { "beta" }.into()),
                    fenced,
                })
                .collect(),
        },
        fenced_listed,
    }
}

pub(super) fn topic(name: &str, partitions: &[(&[i32], &[i32])]) -> TopicDescription {
    TopicDescription {
        name: name.into(),
        id: Uuid::from_u128(1),
        internal: false,
        partitions: partitions
            .iter()
            .enumerate()
            .map(|(i, (replicas, isr))| PartitionDescription {
                index: i as i32,
                leader: isr.first().copied().unwrap_or(-1),
                replicas: replicas.to_vec(),
                isr: isr.to_vec(),
                offline: Vec::new(),
            })
            .collect(),
    }
}

pub(super) fn replica(id: i32, directory: u128, fetched: i64) -> ReplicaState {
    ReplicaState {
        replica_id: id,
        directory_id: Uuid::from_u128(directory),
        log_end_offset: 10,
        last_fetch_timestamp: Some(fetched),
        last_caught_up_timestamp: Some(fetched),
    }
}

pub(super) const NOW: i64 = 1_000_000;

pub(super) fn quorum_info(voters: &[i32]) -> QuorumInfo {
    QuorumInfo {
        leader_id: voters[0],
        leader_epoch: 1,
        high_watermark: 10,
        voters: voters
            .iter()
            .map(|id| replica(*id, 100 + *id as u128, NOW))
            .collect(),
        observers: Vec::new(),
        nodes: Vec::new(),
    }
}

pub(super) fn dynamic_cluster() -> KafkaCluster {
    KafkaCluster {
        name: "k".into(),
        namespace: "ns".into(),
        cluster_id: "id".into(),
        listeners: Vec::new(),
        config: BTreeMap::new(),
        addressing: kraft::Addressing::multi_cluster_services(),
        nodes: Vec::new(),
        authorization: None,
        quorum: kraft::QuorumMode::Dynamic,
        metrics_reporter: None,
    }
}

pub(super) fn formed() -> KafkaStatus {
    KafkaStatus {
        quorum: Some(QuorumStatus {
            mode: Some("dynamic".into()),
            leader_id: Some(0),
            ..QuorumStatus::default()
        }),
        ..KafkaStatus::default()
    }
}

pub(super) fn target() -> Target {
    versions::target("4.1.2", None, None).unwrap()
}

pub(super) fn features(metadata: i16, kraft: i16) -> BTreeMap<String, i16> {
    BTreeMap::from([
        ("metadata.version".to_owned(), metadata),
        ("kraft.version".to_owned(), kraft),
    ])
}

/// What `kafka` and `pools` with `status` plan to, with agents that reported `podsets`.
pub(super) fn plan_of(
    kafka: &Kafka,
    pools: &[KafkaNodePool],
    status: &KafkaStatus,
    podsets: BTreeMap<String, Vec<PodSetStatus>>,
) -> Result<Plan, Early> {
    plan_with(kafka, pools, status, podsets, Vec::new())
}

/// [`plan_of`], with the `Kafka`'s `operations`.
pub(super) fn plan_with(
    kafka: &Kafka,
    pools: &[KafkaNodePool],
    status: &KafkaStatus,
    podsets: BTreeMap<String, Vec<PodSetStatus>>,
    operations: Vec<KafkaOperation>,
) -> Result<Plan, Early> {
    let pools: Vec<&KafkaNodePool> = pools.iter().collect();
    let members = members();
    let ask = Ask {
        kafka,
        pools: &pools,
        members: &members,
        status,
    };
    let agents = AgentReports::reported(podsets);
    let asked = plan::asked(&ask, &agents)?;
    let secrets = Secrets {
        ca: pki::test_ca(kafka, CaKind::Cluster),
        clients_ca: pki::test_ca(kafka, CaKind::Clients),
        admin_tls: None,
        maintenance: crate::kafka::maintenance::at(&[], 0),
    };
    plan::decide(&ask, asked, secrets, operations, agents)
}

pub(super) fn nothing_runs() -> BTreeMap<String, Vec<PodSetStatus>> {
    [
        ("alpha".to_owned(), Vec::new()),
        ("beta".to_owned(), Vec::new()),
    ]
    .into()
}
