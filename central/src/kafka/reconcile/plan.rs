//! The plan (pure): what the `Kafka` and its pools ask for, resolved and validated (refused
//! when it cannot be built), the cluster ID and the node IDs each pool gets — with what is
//! adopted from running nodes and what a forgotten cluster lost — decided from plain values
//! read before (the agents' reports, the CAs, the operations); or why the pass ends first
//! ([`Early`]), which the caller carries out.

use std::collections::{BTreeMap, BTreeSet};

use kstretch_api::{Kafka, KafkaNodePool, KafkaOperation, KafkaStatus, QuorumStatus};
use kstretch_core::kraft::{self, REPLICATION_LISTENER};
use kstretch_core::node_ids::{self, Assignments, Role};
use kstretch_core::versions::Target;
use kstretch_kadmin::Tls;
use kube::ResourceExt;

use super::pass::{AgentReports, PoolIdsByName, RolesByName, address_nodes, random_uuid};
use super::refuse::Cause;
use crate::kafka::adopt::{self, Adoption};
use crate::kafka::forget::{self, Lost};
use crate::kafka::maintenance::Maintenance;
use crate::kafka::quorum;
use crate::kafka::recover::{self, Recovering};
use crate::kafka::resolve::{self, ADMIN_BOOTSTRAP_ANNOTATION, Members, Resolved};
use crate::kafka::version;
use crate::kafka::warning::{Reason, Warning};
use crate::pki;
use crate::status::Refusal;

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
    /// Whether the status lost its quorum's mode and the running nodes say it is dynamic.
    pub(super) adopted_dynamic_quorum: bool,
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
    /// What the agents reported, read once for this pass.
    pub(super) agent_reports: AgentReports,
    /// Set by [`super::publish`]: the listeners' Services that the apiserver of their member
    /// cluster refused (see [`crate::kafka::external::refused`]).
    pub(super) refused_services: Vec<String>,
    /// Warnings found while planning (node ID annotations that cannot be honoured).
    pub(super) warnings: Vec<Warning>,
}

/// What the plan is decided from, besides what was read: the `Kafka`, its pools as the shared
/// store lists them, the member clusters configured and the status the pass started from.
#[derive(Clone, Copy)]
pub(super) struct Ask<'a> {
    pub(super) kafka: &'a Kafka,
    pub(super) pools: &'a [&'a KafkaNodePool],
    pub(super) members: &'a Members,
    pub(super) status: &'a KafkaStatus,
}

/// Why a pass ends before anything is built, each carried out by one act of the caller.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Early {
    /// The user paused the reconciliation: nothing is changed anywhere, the last desired state
    /// stands (or what runs is retained), until the annotation goes.
    Paused,
    /// The `Kafka` cannot be used as it is.
    Refused(Refusal),
    /// Running nodes keep their identity: the agents of these member clusters must report what
    /// runs there first.
    AwaitAgents(Vec<String>),
    /// A new cluster: its ID (and a dynamic quorum's first voters) are recorded before any
    /// node can be formatted with them; the pass ends with them written.
    NewCluster {
        cluster_id: String,
        quorum: Option<QuorumStatus>,
    },
}

impl From<Refusal> for Early {
    fn from(refusal: Refusal) -> Early {
        Early::Refused(refusal)
    }
}

fn refused(reason: &'static str, message: impl Into<String>) -> Early {
    Early::Refused(Refusal::new(reason, message))
}

/// What the `Kafka` and its pools ask for, validated, with what was adopted from what runs.
pub(super) struct Asked {
    resolved: Resolved,
    forgotten: BTreeSet<String>,
    target: Target,
    wanted_quorum: kraft::QuorumMode,
    adopted: Adopted,
}

/// What a `Kafka` without a recorded cluster ID takes from the nodes that run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Adopted {
    cluster_id: Option<String>,
    dynamic_quorum: bool,
}

/// The CAs (the clients CA exists for KafkaUsers, as in Strimzi), central's client identity
/// under the cluster CA for every admin connection, and the maintenance windows now.
pub(super) struct Secrets {
    pub(super) ca: pki::Ca,
    pub(super) clients_ca: pki::Ca,
    pub(super) admin_tls: Option<Tls>,
    pub(super) maintenance: Maintenance,
}

/// What the `Kafka` and its pools ask for (pure), checked before anything is read from the
/// apiserver: nothing when paused, refused when it cannot be built, or waiting for the agents
/// whose reports tell what runs.
pub(super) fn asked(ask: &Ask<'_>, agents: &AgentReports) -> Result<Asked, Early> {
    let kafka = ask.kafka;
    if crate::status::is_paused(kafka) {
        return Err(Early::Paused);
    }
    let mut resolved = resolve::resolve(kafka, ask.pools, ask.members)
        .and_then(|r| {
            let unreachable = resolve::moves_to_unreachable(&r, ask.pools, &agents.connected);
            if unreachable.is_empty() {
                Ok(r)
            } else {
                Err(unreachable)
            }
        })
        .map_err(|invalid| Early::Refused(Refusal::of_all(&invalid, resolve::Invalid::reason)))?;
    let forgotten = forget::forgotten(kafka, ask.members)
        .map_err(|message| refused(Cause::InvalidAnnotation.as_str(), message))?;
    let adopted = adopt_what_runs(ask, agents, &mut resolved, &forgotten)?;
    // Refused before anything is built: a version Kafka cannot take never reaches a pod.
    let target =
        version::target(kafka, ask.status).map_err(|e| refused(e.reason(), e.to_string()))?;
    let wanted_quorum = quorum::wanted(kafka)
        .map_err(|message| refused(Cause::InvalidAnnotation.as_str(), message))?;
    Ok(Asked {
        resolved,
        forgotten,
        target,
        wanted_quorum,
        adopted,
    })
}

/// The plan of this reconciliation (pure), from what is asked and what was read; or why the
/// pass ends first.
pub(super) fn decide(
    ask: &Ask<'_>,
    asked: Asked,
    secrets: Secrets,
    operations: Vec<KafkaOperation>,
    agents: AgentReports,
) -> Result<Plan, Early> {
    let Asked {
        mut resolved,
        forgotten,
        target,
        wanted_quorum,
        adopted,
    } = asked;
    // A quorum recovery exists only for a Kafka that forgot a cluster holding its majority.
    let recovering = if forgotten.is_empty() {
        None
    } else {
        recover::running(&operations)
    };
    // Without a quorum nothing in Kafka can change: what needs the controller waits instead of
    // timing out, and the `Kafka` says what to do.
    let majority_lost = recover::majority_lost(ask.kafka, ask.pools.iter().copied());
    forget::freeze(&mut resolved, &forgotten);
    let pool_ids: Vec<_> = resolved.pools.iter().map(|p| p.ids.clone()).collect();
    let mut assignments =
        node_ids::assign(&pool_ids).map_err(|e| refused(e.reason(), e.to_string()))?;
    let lost = forget::split(&mut resolved, &mut assignments, &forgotten);
    let warnings = assignments
        .warnings
        .iter()
        .map(|w| Warning::new(Reason::NodeIdAnnotationIgnored, w.clone()))
        .collect();
    let bootstrap = admin_bootstrap(ask.kafka, &resolved)
        .or_else(|| running_brokers_bootstrap(ask.kafka, &resolved, &assignments, &agents));
    let (ids, roles) = desired_ids_and_roles(&resolved, &assignments);
    let desired_controllers = controllers_of(&ids, &roles);
    let cluster_id = cluster_id(
        ask,
        &adopted,
        &resolved,
        wanted_quorum,
        &desired_controllers,
    )?;
    Ok(Plan {
        connected: agents.connected.clone(),
        forgotten,
        lost,
        recovering,
        majority_lost,
        resolved,
        assignments,
        ids,
        desired_controllers,
        cluster_id,
        adopted_dynamic_quorum: adopted.dynamic_quorum,
        bootstrap,
        admin_tls: secrets.admin_tls,
        target,
        wanted_quorum,
        ca: secrets.ca,
        clients_ca: secrets.clients_ca,
        maintenance: secrets.maintenance,
        draining: BTreeMap::new(),
        operations,
        agent_reports: agents,
        refused_services: Vec::new(),
        warnings,
    })
}

/// The cluster ID: the recorded one, the one adopted from what runs, or the pools'; a new
/// cluster's is chosen here and ends the pass. A pool of another Kafka cluster is refused.
fn cluster_id(
    ask: &Ask<'_>,
    adopted: &Adopted,
    resolved: &Resolved,
    wanted_quorum: kraft::QuorumMode,
    desired_controllers: &BTreeSet<i32>,
) -> Result<String, Early> {
    let known = ask
        .status
        .cluster_id
        .clone()
        .or_else(|| adopted.cluster_id.clone())
        .or_else(|| resolved.pools.iter().find_map(|p| p.cluster_id.clone()));
    let Some(cluster_id) = known else {
        let cluster_id = new_cluster_id();
        let mut recorded = KafkaStatus::default();
        if wanted_quorum == kraft::QuorumMode::Dynamic {
            quorum::start_dynamic(&mut recorded, desired_controllers, random_uuid);
        } else if adopted.dynamic_quorum {
            quorum::adopt_dynamic(&mut recorded);
        }
        let quorum = recorded.quorum;
        return Err(Early::NewCluster { cluster_id, quorum });
    };
    if let Some(pool) = resolved
        .pools
        .iter()
        .find(|p| p.cluster_id.as_ref().is_some_and(|id| *id != cluster_id))
    {
        let message = format!(
            "KafkaNodePool {} belongs to Kafka cluster ID {} but Kafka {} has cluster ID {cluster_id}; a pool cannot move between Kafka clusters: delete and recreate the pool (its data is not usable in this cluster)",
            pool.name,
            pool.cluster_id.as_deref().unwrap_or_default(),
            ask.kafka.name_any()
        );
        return Err(refused(Cause::ClusterIdMismatch.as_str(), message));
    }
    Ok(cluster_id)
}

/// Takes the cluster ID and node IDs of what already runs for a `Kafka` or pool that central
/// has no record of (a resource re-created after its CRD was reinstalled, a lost status), from
/// the podsets the agents report: nothing that runs gets a new identity. Waits for agents that
/// have not reported yet.
fn adopt_what_runs(
    ask: &Ask<'_>,
    agents: &AgentReports,
    resolved: &mut Resolved,
    forgotten: &BTreeSet<String>,
) -> Result<Adopted, Early> {
    let kafka = ask.kafka;
    // A status without a cluster ID while the pools have one was lost (the cache lag is
    // handled before): what runs also tells the quorum's mode.
    let status_lost = ask.status.cluster_id.is_none();
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
        return Ok(Adopted::default());
    }
    let adoption = adopt::adopt(
        &kafka.name_any(),
        &kafka.namespace().unwrap_or_default(),
        &pools,
        &agents.reported_podsets(),
    );
    let (cluster_id, controller_quorum, node_ids) = match adoption {
        Adoption::Awaiting(aliases) => return Err(Early::AwaitAgents(aliases)),
        Adoption::Found {
            cluster_id,
            controller_quorum,
            node_ids,
        } => (cluster_id, controller_quorum, node_ids),
    };
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
    Ok(Adopted {
        cluster_id: cluster_id.filter(|_| unknown_cluster),
        dynamic_quorum: status_lost && controller_quorum.as_deref() == Some("dynamic"),
    })
}

/// A new KRaft cluster ID: 16 random bytes, base64url without padding (Kafka's `Uuid` form).
fn new_cluster_id() -> String {
    kraft::uuid_text(random_uuid())
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
    kafka: &Kafka,
    resolved: &Resolved,
    assignments: &Assignments,
    agents: &AgentReports,
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
    address_nodes(kafka, &mut known, &brokers, per_node, agents);
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

    use kstretch_proto::agent::v1::PodSetStatus;
    use serde_json::json;

    use super::super::fixtures::{nothing_runs, plan_of};
    use crate::kafka::adopt::tests::podset;
    use crate::kafka::resolve::tests::{kafka, members, pool};

    fn dual(replicas: i32, extra: serde_json::Value) -> KafkaNodePool {
        pool("dual", &["controller", "broker"], replicas, extra)
    }

    fn recorded(cluster_id: &str) -> KafkaStatus {
        KafkaStatus {
            cluster_id: Some(cluster_id.into()),
            ..KafkaStatus::default()
        }
    }

    fn refusal(early: Result<Plan, Early>) -> Refusal {
        match early {
            Err(Early::Refused(refusal)) => refusal,
            Err(other) => panic!("a refusal expected, not {other:?}"),
            Ok(_) => panic!("a refusal expected, not a plan"),
        }
    }

    #[test]
    fn what_cannot_be_built_is_refused_with_its_reason_before_anything_is_read() {
        let wrong_quorum = kafka(json!({"metadata": {"annotations": {
            "kstretch.io/controller-quorum": "maybe"}}}));
        let r = refusal(plan_of(
            &wrong_quorum,
            &[dual(3, json!({}))],
            &recorded("A"),
            nothing_runs(),
        ));
        assert_eq!(r.reason, "InvalidAnnotation");
        assert!(
            r.message.contains("not one of static, dynamic"),
            "{}",
            r.message
        );

        let unknown_cluster = dual(
            3,
            json!({"metadata": {"annotations": {"strimzi.io/stretch-cluster-alias": "gamma"}}}),
        );
        let r = refusal(plan_of(
            &kafka(json!({})),
            &[unknown_cluster],
            &recorded("A"),
            nothing_runs(),
        ));
        assert!(r.message.contains("gamma"), "{}", r.message);

        let elsewhere = dual(
            3,
            json!({"status": {"clusterId": "B", "nodeIds": [0, 1, 2]}}),
        );
        let r = refusal(plan_of(
            &kafka(json!({})),
            &[elsewhere],
            &recorded("A"),
            nothing_runs(),
        ));
        assert_eq!(r.reason, "ClusterIdMismatch");
        assert!(
            r.message.contains("delete and recreate the pool"),
            "{}",
            r.message
        );
    }

    #[test]
    fn a_paused_kafka_decides_nothing_even_when_it_could_not_be_built() {
        let paused = |extra: serde_json::Value| {
            let mut k = kafka(extra);
            k.metadata.annotations.get_or_insert_default().insert(
                kstretch_api::names::PAUSE_RECONCILIATION.to_owned(),
                "true".to_owned(),
            );
            k
        };
        let pools = [dual(3, json!({}))];
        let plain = plan_of(&paused(json!({})), &pools, &recorded("A"), nothing_runs());
        assert!(matches!(plain, Err(Early::Paused)), "{:?}", plain.err());
        // Neither refused nor recorded as new while paused.
        let wrong = paused(json!({"metadata": {"annotations": {
            "kstretch.io/controller-quorum": "maybe"}}}));
        let wrong = plan_of(&wrong, &pools, &KafkaStatus::default(), nothing_runs());
        assert!(matches!(wrong, Err(Early::Paused)), "{:?}", wrong.err());
        // `"false"` is not a pause.
        let mut unpaused = paused(json!({}));
        unpaused.metadata.annotations.as_mut().unwrap().insert(
            kstretch_api::names::PAUSE_RECONCILIATION.to_owned(),
            "false".to_owned(),
        );
        assert!(plan_of(&unpaused, &pools, &recorded("A"), nothing_runs()).is_ok());
    }

    #[test]
    fn a_new_cluster_records_its_id_and_first_voters_before_anything_is_built() {
        let new = plan_of(
            &kafka(json!({})),
            &[dual(3, json!({}))],
            &KafkaStatus::default(),
            nothing_runs(),
        );
        let Err(Early::NewCluster { cluster_id, quorum }) = new else {
            panic!("a new cluster expected");
        };
        assert_eq!(cluster_id.len(), 22);
        let quorum = quorum.expect("a dynamic quorum's first voters");
        assert_eq!(quorum.mode.as_deref(), Some("dynamic"));
        let voters: Vec<i32> = quorum.voters.iter().map(|v| v.id).collect();
        assert_eq!(voters, [0, 1, 2]);
        assert!(quorum.voters.iter().all(|v| v.directory_id.is_some()));

        let static_quorum = kafka(json!({"metadata": {"annotations": {
            "kstretch.io/controller-quorum": "static"}}}));
        let new = plan_of(
            &static_quorum,
            &[dual(3, json!({}))],
            &KafkaStatus::default(),
            nothing_runs(),
        );
        assert!(matches!(new, Err(Early::NewCluster { quorum: None, .. })));
    }

    #[test]
    fn a_kafka_without_status_waits_for_the_agents_and_keeps_what_runs() {
        let k = kafka(json!({}));
        let pools = [dual(3, json!({}))];
        let alpha_silent = [("beta".to_owned(), Vec::new())].into();
        let waiting = plan_of(&k, &pools, &KafkaStatus::default(), alpha_silent);
        assert!(
            matches!(&waiting, Err(Early::AwaitAgents(a)) if a == &["alpha"]),
            "{:?}",
            waiting.err()
        );

        let pods = [
            "my-cluster-dual-4",
            "my-cluster-dual-7",
            "my-cluster-dual-9",
        ];
        let running = PodSetStatus {
            controller_quorum: "dynamic".into(),
            ..podset("my-cluster-dual", "running-id", &pods)
        };
        let reports = [("alpha".to_owned(), vec![running])].into();
        let plan = plan_of(&k, &pools, &KafkaStatus::default(), reports).expect("a plan");
        assert_eq!(plan.cluster_id, "running-id");
        assert!(plan.adopted_dynamic_quorum);
        assert_eq!(plan.ids["dual"], [4, 7, 9].into());
    }

    #[test]
    fn a_recorded_cluster_plans_its_nodes_and_says_how_central_reaches_it() {
        let plan = plan_of(
            &kafka(json!({})),
            &[dual(3, json!({}))],
            &recorded("A"),
            nothing_runs(),
        )
        .expect("a plan");
        assert_eq!(plan.cluster_id, "A");
        assert!(!plan.adopted_dynamic_quorum);
        assert_eq!(plan.ids["dual"], [0, 1, 2].into());
        assert_eq!(plan.desired_controllers, [0, 1, 2].into());
        assert_eq!(
            plan.bootstrap.as_deref(),
            Some("my-cluster-kafka-bootstrap.kafka.svc:9091")
        );
        assert!(plan.warnings.is_empty());
    }

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
