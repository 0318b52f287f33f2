//! One reconciliation's working state (the [`Pass`] each stage takes and hands on), what a
//! stage gives the next one ([`Flow`]), and what the stages share: the requeue intervals and
//! small helpers.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::time::Duration;

use kstretch_api::{Kafka, KafkaNodePool, KafkaStatus};
use kstretch_core::kraft;
use kstretch_core::node_ids::Role;
use kstretch_proto::agent::v1::{ApplyReport, NodeStatus, PodSetStatus, ServiceStatus};
use kube::runtime::controller::Action;

use kube::ResourceExt;

use crate::error::Error;
use crate::kafka::addresses::{self, NodeRef};
use crate::kafka::build;
use crate::kafka::context::Context;
use crate::kafka::external;
use crate::kafka::resolve::{PerNode, Resolved};
use crate::kafka::warning::Warning;
use crate::link::Owner;
use crate::status::Refusal;

/// Requeue while something is under way (pods starting, a roll, a pending unregistration).
pub(super) const BUSY_REQUEUE: Duration = Duration::from_secs(5);
/// Requeue of a settled cluster, so Kafka-side drift (registrations) is noticed.
pub(super) const IDLE_REQUEUE: Duration = Duration::from_secs(300);
/// A refused `Kafka` is checked again after this even without a change: a refusal can come
/// from a stale view of another kind (pools listed by the shared store after the controller's
/// own watch saw them, as after a CRD reinstall), which no later event would correct.
pub(super) const REFUSED_RECHECK: Duration = Duration::from_secs(30);
pub(super) use crate::kafka::warning::MOVE_RECHECK;

/// One reconciliation's working state, handed from stage to stage.
pub(super) struct Pass<'a> {
    pub(super) ctx: &'a Context,
    pub(super) kafka: &'a Kafka,
    /// The `Kafka`'s pools, as the shared store lists them.
    pub(super) pools: Vec<&'a KafkaNodePool>,
    pub(super) owner: Owner,
    /// This reconciliation's time, for the conditions it changes.
    pub(super) now: String,
    /// The status being assembled; written by the stage that ends the pass.
    pub(super) status: KafkaStatus,
    /// Warning conditions (reason, message) gathered on the way, in the order found.
    pub(super) warnings: Vec<Warning>,
}

/// What a stage gives the next one, or how the reconciliation ends here.
pub(super) type Flow<T> = Result<ControlFlow<End, T>, Error>;

/// How a pass that stops early ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum End {
    /// The `Kafka` cannot be used as it is; the reason is one stable string of a typed cause.
    Refused(Refusal),
    /// It waits for something (a new cluster's ID stored, agents' reports, objects applied).
    Wait(Action),
}

pub use crate::owned::keep_or_retain;

/// A random UUID as Kafka makes them (cluster and metadata directory IDs).
pub(super) fn random_uuid() -> u128 {
    use ring::rand::{SecureRandom, SystemRandom};
    let mut bytes = [0u8; 16];
    if SystemRandom::new().fill(&mut bytes).is_err() {
        // The OS RNG failing is not recoverable in a meaningful way; fall back to a
        // time-and-counter mix, still unique per cluster.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        bytes = nanos.to_le_bytes();
    }
    kraft::kafka_uuid(bytes)
}

pub(super) type PoolIdsByName = BTreeMap<String, BTreeSet<i32>>;
pub(super) type RolesByName = BTreeMap<String, BTreeSet<Role>>;

/// Fills in the per-node Service addresses the agents reported; returns the nodes still waiting.
pub(super) fn address_nodes(
    kafka: &Kafka,
    effective: &mut Resolved,
    ids: &PoolIdsByName,
    per_node: &PerNode,
    agents: &AgentReports,
) -> Vec<String> {
    let nodes: Vec<NodeRef> = effective
        .pools
        .iter()
        .flat_map(|p| {
            ids.get(&p.name).into_iter().flatten().map(|&id| NodeRef {
                id,
                pool: p.name.clone(),
                alias: p.alias_of(id).to_owned(),
            })
        })
        .collect();
    let reported: BTreeMap<String, Vec<_>> = nodes
        .iter()
        .map(|n| n.alias.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter_map(|alias| Some((alias.clone(), agents.services.get(&alias)?.clone())))
        .collect();
    let (addresses, pending) = addresses::node_addresses(
        &kafka.name_any(),
        &kafka.namespace().unwrap_or_default(),
        &nodes,
        per_node,
        &effective.listeners,
        &reported,
    );
    effective.addressing = kraft::Addressing::PerNodeService { addresses };
    pending
}

/// What the agents last reported, by member cluster: which are connected, their per-node and
/// listener Services, their nodes (`None` while not listed), their podsets, their last apply
/// and their images. Read once at the start of a pass; what follows decides from it.
#[derive(Debug, Clone, Default)]
pub(super) struct AgentReports {
    /// The member clusters whose agents have a live stream now.
    pub(super) connected: BTreeSet<String>,
    /// The member clusters whose agents reported their status to this central process.
    reported: BTreeSet<String>,
    /// The connected agents that reported.
    live: BTreeSet<String>,
    services: BTreeMap<String, Vec<ServiceStatus>>,
    nodes: BTreeMap<String, Option<Vec<NodeStatus>>>,
    podsets: BTreeMap<String, Vec<PodSetStatus>>,
    pub(super) last_apply: BTreeMap<String, ApplyReport>,
    /// The image each agent said it runs (see [`crate::link::Agents::images`]).
    pub(super) images: BTreeMap<String, String>,
}

impl AgentReports {
    pub(super) fn read(ctx: &Context) -> AgentReports {
        let mut out = AgentReports {
            connected: ctx.agents.connected().into_iter().collect(),
            images: ctx.agents.images(),
            ..AgentReports::default()
        };
        for r in ctx.agents.list() {
            let alias = r.cluster_alias.clone();
            if r.status_at.is_some() {
                out.reported.insert(alias.clone());
                if r.connected {
                    out.live.insert(alias.clone());
                }
            }
            out.services.insert(alias.clone(), r.services);
            out.nodes.insert(alias.clone(), r.nodes);
            out.podsets.insert(alias.clone(), r.podsets);
            if let Some(report) = r.last_apply {
                out.last_apply.insert(alias, report);
            }
        }
        out
    }

    /// Connected agents that reported `podsets` (by member cluster) and nothing else.
    #[cfg(test)]
    pub(super) fn reported(podsets: BTreeMap<String, Vec<PodSetStatus>>) -> AgentReports {
        let aliases: BTreeSet<String> = podsets.keys().cloned().collect();
        AgentReports {
            connected: aliases.clone(),
            reported: aliases.clone(),
            live: aliases,
            podsets,
            ..AgentReports::default()
        }
    }

    /// The podsets the agent of member cluster `alias` last reported.
    pub(super) fn podsets(&self, alias: &str) -> &[PodSetStatus] {
        self.podsets.get(alias).map_or(&[], Vec::as_slice)
    }

    /// The podsets of the agents that reported, by member cluster: what runs there.
    pub(super) fn reported_podsets(&self) -> BTreeMap<String, Vec<PodSetStatus>> {
        self.podsets_of(&self.reported)
    }

    /// The podsets of the connected agents that reported: where a node may be down now.
    pub(super) fn live_podsets(&self) -> BTreeMap<String, Vec<PodSetStatus>> {
        self.podsets_of(&self.live)
    }

    fn podsets_of(&self, aliases: &BTreeSet<String>) -> BTreeMap<String, Vec<PodSetStatus>> {
        self.podsets
            .iter()
            .filter(|(alias, _)| aliases.contains(*alias))
            .map(|(alias, podsets)| (alias.clone(), podsets.clone()))
            .collect()
    }

    pub(super) fn reports(&self) -> external::Reports<'_> {
        external::Reports {
            services: &self.services,
            nodes: &self.nodes,
            podsets: &self.podsets,
            applied: &self.last_apply,
        }
    }
}

/// Fills in where each broker advertises each external listener and the node addresses of
/// its cluster; returns why brokers and clusters do not advertise one yet.
pub(super) fn advertise_external(
    kafka: &Kafka,
    effective: &mut Resolved,
    ids: &PoolIdsByName,
    reports: &AgentReports,
) -> Vec<external::Unadvertised> {
    if effective.external.is_empty() {
        return Vec::new();
    }
    let brokers = build::brokers(effective, ids);
    effective.cluster_nodes = reports
        .nodes
        .iter()
        .filter_map(|(alias, nodes)| Some((alias.clone(), nodes.clone()?)))
        .collect();
    external::advertise(
        &kafka.name_any(),
        &kafka.namespace().unwrap_or_default(),
        &effective.external,
        &mut effective.listeners,
        &brokers,
        reports.reports(),
    )
}
