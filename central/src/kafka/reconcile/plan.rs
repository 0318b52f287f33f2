//! The plan stage: what the `Kafka` and its pools ask for, resolved and validated (refused
//! when it cannot be built), its CAs and central's admin TLS, the cluster ID, and the node IDs
//! each pool gets — with what is adopted from running nodes and what a forgotten cluster lost.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;

use kstretch_api::{Kafka, KafkaOperation};
use kstretch_core::kraft::{self, REPLICATION_LISTENER};
use kstretch_core::node_ids::{self, Assignments, Role};
use kstretch_core::versions::Target;
use kstretch_kadmin::Tls;
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::pass::{
    AgentReports, BUSY_REQUEUE, End, Flow, Pass, PoolIdsByName, RolesByName, address_nodes,
    keep_or_retain, random_uuid,
};
use super::refuse::Cause;
use crate::error::Error;
use crate::kafka::adopt::{self, Adoption};
use crate::kafka::context::Context;
use crate::kafka::forget::{self, Lost};
use crate::kafka::maintenance::{self, Maintenance};
use crate::kafka::operations;
use crate::kafka::quorum;
use crate::kafka::recover::{self, Recovering};
use crate::kafka::resolve::{self, ADMIN_BOOTSTRAP_ANNOTATION, Resolved};
use crate::kafka::status;
use crate::kafka::version;
use crate::kafka::warning::{Reason, Warning};
use crate::pki::{self, CaKind, CertError};

/// What the later stages build from.
pub(super) struct Plan {
    /// The member clusters whose agents are connected now.
    pub(super) connected: BTreeSet<String>,
    /// The member clusters the `Kafka` says are lost for good.
    pub(super) forgotten: BTreeSet<String>,
    /// The nodes the forgotten clusters held.
    pub(super) lost: Vec<Lost>,
    pub(super) recovering: Option<Recovering>,
    /// Why the quorum has no majority, when it has none: nothing in Kafka can change then.
    pub(super) majority_lost: Option<String>,
    /// The pools as asked for; [`super::guard`] makes them what runs after this pass.
    pub(super) resolved: Resolved,
    pub(super) assignments: Assignments,
    /// Each pool's node IDs after this pass (changed by [`super::guard`] too).
    pub(super) ids: PoolIdsByName,
    /// The voters the quorum moves toward: the controllers asked for, not those kept for now.
    pub(super) desired_controllers: BTreeSet<i32>,
    pub(super) cluster_id: String,
    /// Where central's admin client reaches the cluster, if known before it is built.
    pub(super) bootstrap: Option<String>,
    pub(super) admin_tls: Option<Tls>,
    pub(super) target: Target,
    pub(super) wanted_quorum: kraft::QuorumMode,
    pub(super) ca: pki::Ca,
    pub(super) clients_ca: pki::Ca,
    /// The maintenance windows now: whether renewals that are only due may run.
    pub(super) maintenance: Maintenance,
    /// Set by [`super::guard`]: per pool, the leaving nodes kept while their replicas move.
    pub(super) draining: BTreeMap<String, BTreeSet<i32>>,
    /// The `Kafka`'s operations, listed once for this pass.
    pub(super) operations: Vec<KafkaOperation>,
    /// Set by [`super::publish`]: what the agents reported, when the listeners need it.
    pub(super) agent_reports: AgentReports,
    /// Set by [`super::publish`]: the listeners' Services that the apiserver of their member
    /// cluster refused (see [`crate::kafka::external::refused`]).
    pub(super) refused_services: Vec<String>,
}

/// The plan of this reconciliation, or its refusal.
pub(super) async fn plan(pass: &mut Pass<'_>) -> Flow<Plan> {
    let connected: BTreeSet<String> = pass.ctx.agents.connected().into_iter().collect();
    let Asked {
        mut resolved,
        forgotten,
        target,
        wanted_quorum,
    } = proceed!(asked(pass, &connected).await);
    let Secrets {
        ca,
        clients_ca,
        admin_tls,
        maintenance,
    } = proceed!(secrets(pass).await);
    let operations = operations::list(&pass.ctx.client, pass.kafka).await?;
    // A quorum recovery exists only for a Kafka that forgot a cluster holding its majority.
    let recovering = if forgotten.is_empty() {
        None
    } else {
        recover::running(&operations)
    };
    // Without a quorum nothing in Kafka can change: what needs the controller waits instead of
    // timing out, and the `Kafka` says what to do.
    let majority_lost = recover::majority_lost(pass.kafka, pass.pools.iter().copied());
    forget::freeze(&mut resolved, &forgotten);
    let pool_ids: Vec<_> = resolved.pools.iter().map(|p| p.ids.clone()).collect();
    let mut assignments = match node_ids::assign(&pool_ids) {
        Ok(a) => a,
        Err(e) => {
            let message = e.to_string();
            return pass.refused(e.reason(), &message);
        }
    };
    let lost = forget::split(&mut resolved, &mut assignments, &forgotten);
    pass.warnings.extend(
        assignments
            .warnings
            .iter()
            .map(|w| Warning::new(Reason::NodeIdAnnotationIgnored, w.clone())),
    );
    let bootstrap = admin_bootstrap(pass.kafka, &resolved)
        .or_else(|| running_brokers_bootstrap(pass.ctx, pass.kafka, &resolved, &assignments));
    if let Some(b) = &bootstrap {
        pass.ctx.kafka.secure(b, admin_tls.as_ref());
    }
    let (ids, roles) = desired_ids_and_roles(&resolved, &assignments);
    let desired_controllers = controllers_of(&ids, &roles);
    let cluster_id =
        proceed!(cluster_id(pass, &resolved, wanted_quorum, &desired_controllers).await);
    Ok(ControlFlow::Continue(Plan {
        connected,
        forgotten,
        lost,
        recovering,
        majority_lost,
        resolved,
        assignments,
        ids,
        desired_controllers,
        cluster_id,
        bootstrap,
        admin_tls,
        target,
        wanted_quorum,
        ca,
        clients_ca,
        maintenance,
        draining: BTreeMap::new(),
        operations,
        agent_reports: AgentReports::default(),
        refused_services: Vec::new(),
    }))
}

/// What the `Kafka` and its pools ask for, validated.
struct Asked {
    resolved: Resolved,
    forgotten: BTreeSet<String>,
    target: Target,
    wanted_quorum: kraft::QuorumMode,
}

async fn asked(pass: &mut Pass<'_>, connected: &BTreeSet<String>) -> Flow<Asked> {
    let (ctx, kafka) = (pass.ctx, pass.kafka);
    let resolved = resolve::resolve(kafka, &pass.pools, &ctx.members).and_then(|r| {
        let unreachable = resolve::moves_to_unreachable(&r, &pass.pools, connected);
        if unreachable.is_empty() {
            Ok(r)
        } else {
            Err(unreachable)
        }
    });
    let mut resolved = match resolved {
        Ok(r) => r,
        Err(invalid) => {
            let reason = invalid.first().map_or("Invalid", |i| i.reason());
            let message = invalid
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ");
            return pass.refused(reason, &message);
        }
    };
    let forgotten = match forget::forgotten(kafka, &ctx.members) {
        Ok(f) => f,
        Err(message) => {
            return pass.refused(Cause::InvalidAnnotation.as_str(), &message);
        }
    };
    if let Some(action) = adopt_what_runs(pass, &mut resolved, &forgotten).await? {
        return Ok(ControlFlow::Break(End::Wait(action)));
    }
    // Refused before anything is built: a version Kafka cannot take never reaches a pod.
    let target = match version::target(kafka, &pass.status) {
        Ok(target) => target,
        Err(e) => {
            let message = e.to_string();
            return pass.refused(e.reason(), &message);
        }
    };
    let wanted_quorum = match quorum::wanted(kafka) {
        Ok(mode) => mode,
        Err(message) => {
            return pass.refused(Cause::InvalidAnnotation.as_str(), &message);
        }
    };
    Ok(ControlFlow::Continue(Asked {
        resolved,
        forgotten,
        target,
        wanted_quorum,
    }))
}

/// The CAs (the clients CA exists for KafkaUsers, as in Strimzi), and central's client
/// identity under the cluster CA for every admin connection.
struct Secrets {
    ca: pki::Ca,
    clients_ca: pki::Ca,
    admin_tls: Option<Tls>,
    maintenance: Maintenance,
}

async fn secrets(pass: &mut Pass<'_>) -> Flow<Secrets> {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let maintenance = maintenance::at(&pass.kafka.spec.maintenance_time_windows, now);
    let renew_now = maintenance.windows.open();
    let (ca, clients_ca) = match both_cas(&pass.ctx.client, pass.kafka, renew_now).await {
        Ok(cas) => cas,
        Err(CertError::Refused(r)) => return pass.refused(r.reason, &r.message),
        Err(CertError::Kube(e)) => return Err(e.into()),
    };
    let namespace = pass.kafka.namespace().unwrap_or_default();
    for (kind, ca) in [("cluster", &ca), ("clients", &clients_ca)] {
        if let Some(expiry) = pki::expires_at(&ca.pem.cert) {
            let name = pass.kafka.name_any();
            pass.ctx.metrics.ca_expires(&namespace, &name, kind, expiry);
        }
    }
    let admin_tls = match resolve::admin_uses_tls(pass.kafka) {
        Ok(false) => None,
        Ok(true) => match pass
            .ctx
            .kafka
            .tls_for(&namespace, &pass.kafka.name_any(), &ca)
        {
            Ok(tls) => Some(tls),
            Err(r) => return pass.refused(r.reason, &r.message),
        },
        Err(message) => {
            return pass.refused(Cause::InvalidAnnotation.as_str(), &message);
        }
    };
    Ok(ControlFlow::Continue(Secrets {
        ca,
        clients_ca,
        admin_tls,
        maintenance,
    }))
}

/// The cluster ID, and a new cluster's first voters: chosen once and stored before any node
/// can be formatted with them. A pool of another Kafka cluster is refused.
async fn cluster_id(
    pass: &mut Pass<'_>,
    resolved: &Resolved,
    wanted_quorum: kraft::QuorumMode,
    desired_controllers: &BTreeSet<i32>,
) -> Flow<String> {
    let cluster_id = match pass
        .status
        .cluster_id
        .clone()
        .or_else(|| resolved.pools.iter().find_map(|p| p.cluster_id.clone()))
    {
        Some(id) => id,
        None => {
            // Recorded before anything is built with it (this pass ends with it written): a
            // node formatted with an ID the status lost would belong to no cluster.
            let id = new_cluster_id();
            tracing::info!(cluster_id = %id, "new Kafka cluster");
            pass.status.cluster_id = Some(id);
            if wanted_quorum == kraft::QuorumMode::Dynamic {
                quorum::start_dynamic(&mut pass.status, desired_controllers, random_uuid);
            }
            return Ok(ControlFlow::Break(End::Wait(Action::requeue(BUSY_REQUEUE))));
        }
    };
    pass.status.cluster_id = Some(cluster_id.clone());
    if let Some(pool) = resolved
        .pools
        .iter()
        .find(|p| p.cluster_id.as_ref().is_some_and(|id| *id != cluster_id))
    {
        let message = format!(
            "KafkaNodePool {} belongs to Kafka cluster ID {} but Kafka {} has cluster ID {cluster_id}; a pool cannot move between Kafka clusters: delete and recreate the pool (its data is not usable in this cluster)",
            pool.name,
            pool.cluster_id.as_deref().unwrap_or_default(),
            pass.kafka.name_any()
        );
        return pass.refused(Cause::ClusterIdMismatch.as_str(), &message);
    }
    Ok(ControlFlow::Continue(cluster_id))
}

/// Takes the cluster ID and node IDs of what already runs for a `Kafka` or pool that central
/// has no record of (a resource re-created after its CRD was reinstalled, a lost status), from
/// the podsets the agents report: nothing that runs gets a new identity. `Some` when it must
/// wait for agents that have not reported yet.
async fn adopt_what_runs(
    pass: &mut Pass<'_>,
    resolved: &mut Resolved,
    forgotten: &BTreeSet<String>,
) -> Result<Option<Action>, Error> {
    let (ctx, kafka) = (pass.ctx, pass.kafka);
    let kafka_status = &mut pass.status;
    // A status without a cluster ID while the pools have one was lost (the cache lag is
    // handled before): what runs also tells the quorum's mode.
    let status_lost = kafka_status.cluster_id.is_none();
    let unknown_cluster = status_lost && resolved.pools.iter().all(|p| p.cluster_id.is_none());
    // A forgotten cluster never reports: its pools are not waited for.
    let pools: Vec<_> = resolved
        .pools
        .iter()
        .filter(|p| status_lost || p.ids.current.is_none())
        .filter(|p| !forgotten.contains(&p.alias))
        .cloned()
        .collect();
    if pools.is_empty() {
        return Ok(None);
    }
    let reports: BTreeMap<String, Vec<kstretch_proto::agent::v1::PodSetStatus>> = ctx
        .agents
        .list()
        .into_iter()
        .filter(|r| r.status_at.is_some())
        .map(|r| (r.cluster_alias, r.podsets))
        .collect();
    match adopt::adopt(
        &kafka.name_any(),
        &kafka.namespace().unwrap_or_default(),
        &pools,
        &reports,
    ) {
        Adoption::Awaiting(aliases) => {
            keep_or_retain(&ctx.owners, &pass.owner)?;
            let message = format!(
                "waiting for the agents of {} to report what runs there, so that running nodes keep their cluster ID and node IDs",
                aliases.join(", ")
            );
            kafka_status.conditions = status::conditions(
                &kafka_status.conditions,
                status::not_ready("AwaitingMemberClusters", message),
                crate::status::NO_WARNINGS,
                &pass.now,
            );
            Ok(Some(Action::requeue(BUSY_REQUEUE)))
        }
        Adoption::Found {
            cluster_id,
            controller_quorum,
            node_ids,
        } => {
            if let Some(id) = cluster_id.filter(|_| unknown_cluster) {
                tracing::info!(cluster_id = %id, "adopting the cluster ID of the running nodes");
                kafka_status.cluster_id = Some(id);
            }
            if status_lost && controller_quorum.as_deref() == Some("dynamic") {
                quorum::adopt_dynamic(kafka_status);
            }
            for pool in &mut resolved.pools {
                let Some(ids) = node_ids.get(&pool.name).filter(|ids| !ids.is_empty()) else {
                    continue;
                };
                if pool.ids.current.is_none() {
                    tracing::info!(pool = %pool.name, ?ids, "adopting the node IDs of the running pods");
                    pool.ids.current = Some(ids.clone());
                    pool.ids.current_roles = pool.roles.clone();
                }
            }
            Ok(None)
        }
    }
}

/// A new KRaft cluster ID: 16 random bytes, base64url without padding (Kafka's `Uuid` form).
fn new_cluster_id() -> String {
    kraft::uuid_text(random_uuid())
}

/// The cluster CA and the clients CA of `kafka`.
async fn both_cas(
    client: &kube::Client,
    kafka: &Kafka,
    renew_now: bool,
) -> Result<(pki::Ca, pki::Ca), CertError> {
    Ok((
        pki::ca(client, kafka, CaKind::Cluster, renew_now).await?,
        pki::ca(client, kafka, CaKind::Clients, renew_now).await?,
    ))
}

/// Where central's admin client reaches the cluster.
fn admin_bootstrap(kafka: &Kafka, resolved: &Resolved) -> Option<String> {
    if let Some(servers) = kafka.annotations().get(ADMIN_BOOTSTRAP_ANNOTATION) {
        return Some(servers.clone());
    }
    let cluster = kraft::KafkaCluster {
        name: kafka.name_any(),
        namespace: kafka.namespace().unwrap_or_default(),
        cluster_id: String::new(),
        listeners: resolved.listeners.clone(),
        config: BTreeMap::new(),
        addressing: resolved.addressing.clone(),
        nodes: Vec::new(),
        authorization: None,
        quorum: kraft::QuorumMode::Static,
        metrics_reporter: None,
    };
    // With per-node Services the addresses are known only once the nodes are built: none yet.
    kraft::bootstrap_servers(&cluster, REPLICATION_LISTENER)
        .ok()
        .filter(|servers| !servers.is_empty())
}

fn desired_ids_and_roles(
    resolved: &Resolved,
    assignments: &Assignments,
) -> (PoolIdsByName, RolesByName) {
    let ids = assignments
        .pools
        .iter()
        .map(|(name, a)| (name.clone(), a.desired.clone()))
        .collect();
    let roles = resolved
        .pools
        .iter()
        .map(|p| (p.name.clone(), p.roles.clone()))
        .collect();
    (ids, roles)
}

/// The controllers among `ids`, by the pools' `roles`.
fn controllers_of(ids: &PoolIdsByName, roles: &RolesByName) -> BTreeSet<i32> {
    ids.iter()
        .filter(|(pool, _)| {
            roles
                .get(*pool)
                .is_some_and(|r| r.contains(&Role::Controller))
        })
        .flat_map(|(_, ids)| ids.iter().copied())
        .collect()
}

/// With per-node Services, before this reconciliation's nodes are built: the brokers that run
/// now, at the addresses their Services were reported with, so that a scale-down can be checked
/// against Kafka (without them it could never be).
fn running_brokers_bootstrap(
    ctx: &Context,
    kafka: &Kafka,
    resolved: &Resolved,
    assignments: &Assignments,
) -> Option<String> {
    let per_node = resolved.per_node.as_ref()?;
    let brokers: PoolIdsByName = resolved
        .pools
        .iter()
        .filter(|p| p.current_or_spec_roles().contains(&Role::Broker))
        .filter_map(|p| {
            Some((
                p.name.clone(),
                assignments.pools.get(&p.name)?.current.clone(),
            ))
        })
        .collect();
    let mut known = resolved.clone();
    address_nodes(ctx, kafka, &mut known, &brokers, per_node);
    let kraft::Addressing::PerNodeService { addresses } = &known.addressing else {
        return None;
    };
    let servers: Vec<String> = addresses
        .values()
        .filter_map(|a| {
            let port = *a.ports.get(REPLICATION_LISTENER)?;
            Some(
                kraft::Endpoint {
                    host: a.host.clone(),
                    port,
                }
                .to_string(),
            )
        })
        .collect();
    (!servers.is_empty()).then(|| servers.join(","))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use kstretch_api::KafkaNodePool;

    use super::*;

    #[test]
    fn cluster_ids_look_like_kafkas() {
        let id = new_cluster_id();
        assert_eq!(id.len(), 22);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        );
        assert_ne!(id, new_cluster_id());
    }

    #[test]
    fn per_node_services_give_no_admin_bootstrap_before_their_addresses_are_known() {
        use crate::kafka::resolve::tests::{kafka, members, pool};
        let pools = [pool(
            "dual",
            &["controller", "broker"],
            1,
            serde_json::json!({}),
        )];
        let pools: Vec<&KafkaNodePool> = pools.iter().collect();
        let by_dns = kafka(serde_json::json!({}));
        let resolved = resolve::resolve(&by_dns, &pools, &members()).unwrap();
        assert_eq!(
            admin_bootstrap(&by_dns, &resolved).as_deref(),
            Some("my-cluster-kafka-bootstrap.kafka.svc:9091")
        );
        let by_node_port = kafka(serde_json::json!({"metadata": {"annotations": {
            "kstretch.io/addressing": "nodeport",
            "kstretch.io/node-port-hosts": "alpha=10.0.0.1,beta=10.0.0.2"}}}));
        let resolved = resolve::resolve(&by_node_port, &pools, &members()).unwrap();
        // Not an empty list, which the admin client would take for an address.
        assert_eq!(admin_bootstrap(&by_node_port, &resolved), None);
    }
}
