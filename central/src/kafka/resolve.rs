//! From a `Kafka` and its `KafkaNodePool`s to what the rest of the pipeline works on: the
//! pools with their effective settings (pool values, else the `Kafka`'s, as the node-pools
//! proposal says), their member cluster, and every problem that makes the resources unusable.
//! Pure.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::ResourceRequirements;
use kstretch_api::common::{JvmOptions, OpaqueObject};
use kstretch_api::kafka::{GenericKafkaListener, KafkaClusterSpec, KafkaListenerType};
use kstretch_api::storage::Storage;
use kstretch_api::{Kafka, KafkaNodePool, KafkaNodePoolStatus, ProcessRole, names};
use kstretch_core::cluster::{PoolShape, Problem, validate_pools};
use kstretch_core::kraft::{self, Addressing, Authorization, Listener, ListenerKind};
use kstretch_core::node_ids::{PoolIds, Role};
use kube::ResourceExt;

use super::external::{self, ExternalListener, ExternalProblem};
use super::security::{self, SecretCertificate, SecurityProblem};
use crate::pod_template::{EXPORTER_TEMPLATE, KAFKA_TEMPLATE, POOL_TEMPLATE};
use crate::unserved;

/// `Kafka` annotation choosing how nodes in different member clusters reach each other:
/// `cluster-dns` (one cluster only), `mcs` (Multi-Cluster Services), `loadbalancer` (a
/// LoadBalancer Service per node) or `nodeport` (a NodePort Service per node, reached through
/// the host of each member cluster given in [`NODE_PORT_HOSTS_ANNOTATION`]). Without it:
/// cluster DNS when every pool runs in one cluster, MCS otherwise.
pub const ADDRESSING_ANNOTATION: &str = "kstretch.io/addressing";
/// `Kafka` annotation for `nodeport` addressing: `alias=host,...`, the address (any node, or a
/// name for all of them) at which each member cluster's node ports are reached.
pub const NODE_PORT_HOSTS_ANNOTATION: &str = "kstretch.io/node-port-hosts";

/// Each node exposed by a Service of its own, whose address is known once it exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PerNode {
    LoadBalancer,
    /// The host of each member cluster's node ports, by alias.
    NodePort {
        hosts: BTreeMap<String, String>,
    },
}
/// `Kafka` annotation with the bootstrap servers central's admin client uses instead of the
/// cluster's own replication listener (for a central that cannot resolve the cluster's DNS
/// names, and for tests against a Kafka that runs outside Kubernetes).
pub const ADMIN_BOOTSTRAP_ANNOTATION: &str = "kstretch.io/admin-bootstrap-servers";

/// `Kafka` annotation saying how central's admin client speaks to the admin bootstrap servers:
/// `SSL` (the default: mutual TLS with the cluster CA, as the replication listener requires)
/// or `PLAINTEXT`, for an admin bootstrap that points at a plaintext listener (a Kafka outside
/// Kubernetes that kstretch does not run, as in tests).
pub const ADMIN_SECURITY_ANNOTATION: &str = "kstretch.io/admin-security-protocol";

/// Whether central's admin client uses TLS for `kafka`, from [`ADMIN_SECURITY_ANNOTATION`];
/// a value it does not know is an error naming the annotation.
pub fn admin_uses_tls(kafka: &Kafka) -> Result<bool, String> {
    match kafka
        .annotations()
        .get(ADMIN_SECURITY_ANNOTATION)
        .map(String::as_str)
    {
        None | Some("SSL") => Ok(true),
        Some("PLAINTEXT") => Ok(false),
        Some(other) => Err(format!(
            "the annotation {ADMIN_SECURITY_ANNOTATION} is {other:?}; it must be SSL (the default) or PLAINTEXT"
        )),
    }
}

/// What central knows of the member clusters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Members {
    /// The alias of central's own cluster: pools without a stretch alias run there.
    pub own: String,
    /// Every member cluster, `own` included.
    pub all: BTreeSet<String>,
}

/// One pool with its effective settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedPool {
    pub name: String,
    /// The member cluster it runs in.
    pub alias: String,
    pub roles: BTreeSet<Role>,
    pub replicas: u32,
    pub storage: Storage,
    pub resources: Option<ResourceRequirements>,
    pub jvm_options: Option<JvmOptions>,
    pub template: Option<OpaqueObject>,
    pub generation: Option<i64>,
    /// The pool's `status.clusterId`, if it has one.
    pub cluster_id: Option<String>,
    /// For node-ID assignment.
    pub ids: PoolIds,
    /// While the pool moves to another member cluster: its nodes still running in the one it
    /// leaves.
    pub leaving: Option<Leaving>,
    /// What of the pool's spec is not acted on ([`crate::unserved`]).
    pub not_acted_on: Vec<String>,
}

/// Nodes of a moving pool that still run in the member cluster it leaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leaving {
    pub alias: String,
    pub ids: BTreeSet<i32>,
    /// When the move started, as recorded in the pool's status; `None` while it starts (or is
    /// undone) in this reconciliation, until the status records it.
    pub started_at: Option<String>,
}

impl ResolvedPool {
    /// The roles its nodes have now, or those its spec asks for when it has no nodes yet.
    pub fn current_or_spec_roles(&self) -> BTreeSet<Role> {
        if self.ids.current_roles.is_empty() {
            self.roles.clone()
        } else {
            self.ids.current_roles.clone()
        }
    }

    /// The member cluster node `id` of this pool runs in.
    pub fn alias_of(&self, id: i32) -> &str {
        match &self.leaving {
            Some(l) if l.ids.contains(&id) => &l.alias,
            _ => &self.alias,
        }
    }
}

/// The pools of a valid cluster, sorted by name, and the cluster-wide settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub pools: Vec<ResolvedPool>,
    pub listeners: Vec<Listener>,
    /// `configuration.brokerCertChainAndKey` by listener (Kafka's name for it).
    pub listener_certificates: BTreeMap<String, SecretCertificate>,
    /// The external (`nodeport`, `loadbalancer`) listeners' settings.
    pub external: Vec<ExternalListener>,
    /// Each member cluster's Kubernetes nodes, as its agent reported them (filled in by the
    /// reconciler for `nodeport` listeners).
    pub cluster_nodes: BTreeMap<String, Vec<kstretch_proto::agent::v1::NodeStatus>>,
    pub authorization: Option<Authorization>,
    pub config: BTreeMap<String, String>,
    /// With per-node Services, `PerNodeService` with the addresses known so far (filled in by
    /// the reconciler from what agents report).
    pub addressing: Addressing,
    pub per_node: Option<PerNode>,
    pub warnings: Vec<String>,
    /// What of the `Kafka` and its pools is not acted on ([`crate::unserved`]), the pools'
    /// named by pool.
    pub not_acted_on: Vec<String>,
    /// What of the `Kafka` Strimzi deprecates (its `DeprecatedObjects` warnings).
    pub deprecated: Vec<String>,
    /// `metricsConfig: jmxPrometheusExporter`: the ConfigMap key with the exporter's rules.
    pub metrics: Option<kstretch_api::common::ConfigMapKeyRef>,
    /// `metricsConfig: strimziMetricsReporter`: Strimzi's reporter in every node.
    pub metrics_reporter: Option<kraft::MetricsReporter>,
}

/// Why the resources cannot be used as they are; reported as `Ready=False`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error(transparent)]
    Pools(Problem),
    #[error(
        "Kafka {kafka} sets .spec.kafka.replicas: kstretch runs Kafka only with KafkaNodePools; remove replicas and create node pools labelled strimzi.io/cluster={kafka}"
    )]
    ReplicasWithoutNodePools { kafka: String },
    #[error(
        "annotation {ADDRESSING_ANNOTATION}={value:?} on Kafka {kafka} is not one of cluster-dns, mcs"
    )]
    UnknownAddressing { kafka: String, value: String },
    #[error(
        "Kafka {kafka} uses {ADDRESSING_ANNOTATION}=cluster-dns but its pools run in several clusters ({aliases}); use mcs"
    )]
    ClusterDnsAcrossClusters { kafka: String, aliases: String },
    #[error(
        "annotation {NODE_PORT_HOSTS_ANNOTATION}={value:?} on Kafka {kafka} is not a comma-separated list of alias=host; {problem}"
    )]
    InvalidNodePortHosts {
        kafka: String,
        value: String,
        problem: String,
    },
    #[error("{0}")]
    Metrics(String),
    #[error("{0}")]
    Logging(String),
    #[error("{0}")]
    Probe(String),
    #[error("listener {name} has port {port}, which is not a valid TCP port")]
    InvalidListenerPort { name: String, port: i32 },
    #[error(
        "KafkaNodePool {pool} has a negative .spec.replicas ({replicas}); set 0 or more replicas"
    )]
    NegativeReplicas { pool: String, replicas: i32 },
    #[error(
        "KafkaNodePool {pool} is moving from Kubernetes cluster {from} to {to}, but its annotation {alias_key} now names {other}; set it to {to} to finish the move, or back to {from} to undo it, and move on from there",
        alias_key = names::STRETCH_CLUSTER_ALIAS
    )]
    PoolMoveInProgress {
        pool: String,
        from: String,
        to: String,
        other: String,
    },
    #[error(
        "KafkaNodePool {pool} runs controllers {ids:?} in Kubernetes cluster {from}, but its annotation {alias_key} now names {to}; controllers move only with a dynamic quorum (KIP-853), which this Kafka does not have yet: set the annotation back to {from}",
        alias_key = names::STRETCH_CLUSTER_ALIAS
    )]
    MoveNeedsDynamicQuorum {
        pool: String,
        ids: Vec<i32>,
        from: String,
        to: String,
    },
    #[error(
        "KafkaNodePool {pool} has annotation {key}={value:?}, which is not a number of bytes per second above 0; fix or remove it",
        key = names::MOVE_THROTTLE
    )]
    InvalidMoveThrottle { pool: String, value: String },
    #[error(
        "KafkaNodePool {pool} is to move from Kubernetes cluster {from} to {to}, but the agent of {to} is not connected, so its new nodes could not start there: nothing moves until it is (see `kstretch agents`); or set the annotation {alias_key} back to {from}",
        alias_key = names::STRETCH_CLUSTER_ALIAS
    )]
    MoveTargetUnreachable {
        pool: String,
        from: String,
        to: String,
    },
    #[error(transparent)]
    Security(#[from] SecurityProblem),
    #[error(transparent)]
    External(#[from] ExternalProblem),
}

impl Invalid {
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Pools(p) => p.reason(),
            Self::ReplicasWithoutNodePools { .. } => "NodePoolsRequired",
            Self::UnknownAddressing { .. }
            | Self::ClusterDnsAcrossClusters { .. }
            | Self::InvalidNodePortHosts { .. } => "InvalidAddressing",
            Self::InvalidListenerPort { .. } => "InvalidListener",
            Self::Metrics(_) => crate::jmx_exporter::REASON,
            Self::Logging(_) => crate::logging::REASON,
            Self::Probe(_) => crate::probes::REASON,
            Self::NegativeReplicas { .. } => "InvalidReplicas",
            Self::PoolMoveInProgress { .. } => "PoolMoveInProgress",
            Self::MoveNeedsDynamicQuorum { .. } => "MoveNeedsDynamicQuorum",
            Self::MoveTargetUnreachable { .. } => "PoolMoveTargetUnreachable",
            Self::InvalidMoveThrottle { .. } => "InvalidAnnotation",
            Self::Security(p) => p.reason(),
            Self::External(p) => p.reason(),
        }
    }
}

/// The pools of `kafka` among `pools` (same namespace, `strimzi.io/cluster` label).
pub fn pools_of<'a>(
    kafka: &Kafka,
    pools: &'a [std::sync::Arc<KafkaNodePool>],
) -> Vec<&'a KafkaNodePool> {
    let ns = kafka.namespace();
    let name = kafka.name_any();
    let mut out: Vec<&KafkaNodePool> = pools
        .iter()
        .map(AsRef::as_ref)
        .filter(|p| p.namespace() == ns && p.labels().get(names::CLUSTER) == Some(&name))
        .collect();
    out.sort_by_key(|p| p.name_any());
    out
}

/// Resolves and validates; returns every problem found.
pub fn resolve(
    kafka: &Kafka,
    pools: &[&KafkaNodePool],
    members: &Members,
) -> Result<Resolved, Vec<Invalid>> {
    let kafka_name = kafka.name_any();
    let spec = &kafka.spec.kafka;
    let mut invalid = Vec::new();
    if spec.replicas.is_some() {
        invalid.push(Invalid::ReplicasWithoutNodePools {
            kafka: kafka_name.clone(),
        });
    }

    let dynamic = kafka
        .status
        .as_ref()
        .is_some_and(|s| super::quorum::mode(s) == kstretch_core::kraft::QuorumMode::Dynamic);
    let mut resolved = Vec::new();
    for pool in pools {
        let (pool, problems) = resolve_pool(pool, spec, members, dynamic);
        resolved.push(pool);
        invalid.extend(problems);
    }
    let shapes: Vec<PoolShape> = resolved.iter().map(|p| shape(p, members)).collect();
    invalid.extend(
        validate_pools(&kafka_name, &shapes, &members.all)
            .into_iter()
            .map(Invalid::Pools),
    );

    let Listeners {
        listeners,
        certificates: listener_certificates,
        external,
    } = resolve_listeners(&spec.listeners).unwrap_or_else(|problems| {
        invalid.extend(problems);
        Listeners::default()
    });
    let metrics =
        crate::jmx_exporter::source(spec.metrics_config.as_ref(), crate::jmx_exporter::KAFKA)
            .unwrap_or_else(|r| {
                invalid.push(Invalid::Metrics(r.message));
                None
            });
    let metrics_reporter =
        crate::jmx_exporter::reporter(spec.metrics_config.as_ref(), crate::jmx_exporter::KAFKA)
            .unwrap_or_else(|r| {
                invalid.push(Invalid::Metrics(r.message));
                None
            });
    invalid.extend(
        crate::logging::invalid(".spec.kafka", spec.logging.as_ref()).map(Invalid::Logging),
    );
    invalid.extend(
        crate::probes::invalid(".spec.kafka", spec.liveness_probe.as_ref()).map(Invalid::Probe),
    );
    let kstretch_principals =
        crate::pki::kstretch_principals(&kafka_name, kafka.spec.kafka_exporter.is_some());
    let authorization = security::authorization(spec.authorization.as_ref(), &kstretch_principals)
        .unwrap_or_else(|problem| {
            invalid.push(problem.into());
            None
        });
    let (addressing, per_node) = addressing(kafka, &aliases(&resolved)).unwrap_or_else(|problem| {
        invalid.push(problem);
        // Never returned: the problem makes the result an error.
        (Addressing::ClusterDns, None)
    });

    if !invalid.is_empty() {
        return Err(invalid);
    }
    let mut external = external;
    if per_node.is_some() {
        // A node's own Service has the pod's name, which Strimzi gives `external`'s too.
        external.iter_mut().for_each(|n| n.legacy_names = false);
    }
    let not_acted_on = not_acted_on(kafka, &resolved);
    Ok(Resolved {
        pools: resolved,
        listeners,
        listener_certificates,
        external,
        cluster_nodes: BTreeMap::new(),
        authorization,
        config: config_strings(spec.config.as_ref()),
        addressing,
        per_node,
        warnings: rack_warnings(spec),
        not_acted_on,
        deprecated: deprecated(spec),
        metrics,
        metrics_reporter,
    })
}

/// Strimzi's deprecation warnings for `spec.kafka`, in its words (`KafkaSpecChecker`): only
/// the `ingress` listener type is deprecated without a field of its own to say so.
fn deprecated(spec: &KafkaClusterSpec) -> Vec<String> {
    let ingress = spec
        .listeners
        .iter()
        .any(|l| l.type_ == KafkaListenerType::Ingress);
    if ingress {
        vec!["ingress type listeners are deprecated.".to_owned()]
    } else {
        Vec::new()
    }
}

/// `pool` with its effective settings (the pool's, else those of the `Kafka`'s `spec`), and
/// its problems. With problems it is still resolved as far as it can be (no replicas, no
/// placement), so that the checks across pools report theirs too.
fn resolve_pool(
    pool: &KafkaNodePool,
    spec: &KafkaClusterSpec,
    members: &Members,
    dynamic: bool,
) -> (ResolvedPool, Vec<Invalid>) {
    let mut invalid = Vec::new();
    let name = pool.name_any();
    let replicas = u32::try_from(pool.spec.replicas).unwrap_or_else(|_| {
        invalid.push(Invalid::NegativeReplicas {
            pool: name.clone(),
            replicas: pool.spec.replicas,
        });
        0
    });
    let roles = roles_of(&pool.spec.roles);
    let status = pool.status.as_ref();
    let alias = pool
        .annotations()
        .get(names::STRETCH_CLUSTER_ALIAS)
        .cloned()
        .unwrap_or_else(|| members.own.clone());
    if let Err(problem) = move_throttle(pool) {
        invalid.push(problem);
    }
    let (current, leaving) = placement(&name, status, &alias, dynamic).unwrap_or_else(|problem| {
        invalid.push(problem);
        (None, None)
    });
    let resolved = ResolvedPool {
        ids: PoolIds {
            name: name.clone(),
            replicas,
            current,
            leaving: leaving.iter().flat_map(|l| l.ids.iter().copied()).collect(),
            roles: roles.clone(),
            current_roles: status.map(|s| roles_of(&s.roles)).unwrap_or_default(),
            next_node_ids: pool.annotations().get(names::NEXT_NODE_IDS).cloned(),
            remove_node_ids: pool.annotations().get(names::REMOVE_NODE_IDS).cloned(),
        },
        name,
        alias,
        roles,
        replicas,
        storage: pool.spec.storage.clone(),
        resources: pool
            .spec
            .resources
            .clone()
            .or_else(|| spec.resources.clone()),
        jvm_options: pool
            .spec
            .jvm_options
            .clone()
            .or_else(|| spec.jvm_options.clone()),
        template: template_of(pool.spec.template.as_ref(), spec.template.as_ref()),
        generation: pool.metadata.generation,
        cluster_id: status.and_then(|s| s.cluster_id.clone()),
        leaving,
        not_acted_on: unserved::pool(&pool.spec, POOL_TEMPLATE),
    };
    (resolved, invalid)
}

/// The listeners of `spec.kafka.listeners`, and the certificates of those that bring their own.
#[derive(Debug, Default)]
struct Listeners {
    listeners: Vec<Listener>,
    /// By Kafka's name of the listener.
    certificates: BTreeMap<String, SecretCertificate>,
    external: Vec<ExternalListener>,
}

/// The listeners of `spec.kafka.listeners`, or every listener's problem.
fn resolve_listeners(specs: &[GenericKafkaListener]) -> Result<Listeners, Vec<Invalid>> {
    let mut invalid = Vec::new();
    let mut listeners = Vec::new();
    let mut certificates = BTreeMap::new();
    let mut external = Vec::new();
    for (index, l) in specs.iter().enumerate() {
        match external::external(index, l) {
            Ok(Some(n)) => external.push(n),
            Ok(None) => {}
            Err(problem) => invalid.push(problem.into()),
        }
        let authentication = security::authentication(index, l).map_err(Invalid::from);
        let certificate = security::broker_certificate(index, l).map_err(Invalid::from);
        match (u16::try_from(l.port), authentication, certificate) {
            (Ok(port), Ok(authentication), Ok(certificate)) => {
                let listener = Listener {
                    name: l.name.clone(),
                    port,
                    kind: listener_kind(l.type_),
                    tls: l.tls,
                    authentication,
                    custom_certificate: certificate.is_some(),
                    advertised: BTreeMap::new(),
                };
                if let Some(certificate) = certificate {
                    certificates.insert(listener.config_name(), certificate);
                }
                listeners.push(listener);
            }
            (Err(_), _, _) => invalid.push(Invalid::InvalidListenerPort {
                name: l.name.clone(),
                port: l.port,
            }),
            (_, Err(problem), _) | (_, _, Err(problem)) => invalid.push(problem),
        }
    }
    if invalid.is_empty() {
        Ok(Listeners {
            listeners,
            certificates,
            external,
        })
    } else {
        Err(invalid)
    }
}

/// Every member cluster the pools run in, those they leave included.
fn aliases(pools: &[ResolvedPool]) -> BTreeSet<&str> {
    pools
        .iter()
        .flat_map(|p| std::iter::once(&p.alias).chain(p.leaving.iter().map(|l| &l.alias)))
        .map(String::as_str)
        .collect()
}

/// How nodes in the member clusters `aliases` reach each other, from `kafka`'s
/// [`ADDRESSING_ANNOTATION`] (and [`NODE_PORT_HOSTS_ANNOTATION`]), and the per-node Services
/// that takes, if any.
fn addressing(
    kafka: &Kafka,
    aliases: &BTreeSet<&str>,
) -> Result<(Addressing, Option<PerNode>), Invalid> {
    let per_node = |per_node: PerNode| {
        let addresses = BTreeMap::new();
        (Addressing::PerNodeService { addresses }, Some(per_node))
    };
    let kafka_name = kafka.name_any();
    match kafka
        .annotations()
        .get(ADDRESSING_ANNOTATION)
        .map(String::as_str)
    {
        None if aliases.len() <= 1 => Ok((Addressing::ClusterDns, None)),
        None | Some("mcs") => Ok((Addressing::multi_cluster_services(), None)),
        Some("cluster-dns") if aliases.len() <= 1 => Ok((Addressing::ClusterDns, None)),
        Some("loadbalancer") => Ok(per_node(PerNode::LoadBalancer)),
        Some("nodeport") => {
            let value = kafka
                .annotations()
                .get(NODE_PORT_HOSTS_ANNOTATION)
                .cloned()
                .unwrap_or_default();
            match node_port_hosts(&value, aliases) {
                Ok(hosts) => Ok(per_node(PerNode::NodePort { hosts })),
                Err(problem) => Err(Invalid::InvalidNodePortHosts {
                    kafka: kafka_name,
                    value,
                    problem,
                }),
            }
        }
        Some("cluster-dns") => Err(Invalid::ClusterDnsAcrossClusters {
            kafka: kafka_name,
            aliases: aliases.iter().copied().collect::<Vec<_>>().join(", "),
        }),
        Some(other) => Err(Invalid::UnknownAddressing {
            kafka: kafka_name,
            value: other.to_owned(),
        }),
    }
}

/// What of `kafka` and its `pools` is not acted on.
fn not_acted_on(kafka: &Kafka, pools: &[ResolvedPool]) -> Vec<String> {
    let mut out = unserved::kafka(&kafka.spec, KAFKA_TEMPLATE, EXPORTER_TEMPLATE);
    for pool in pools {
        out.extend(
            pool.not_acted_on
                .iter()
                .map(|w| format!("KafkaNodePool {}: {w}", pool.name)),
        );
    }
    out
}

/// The template of a pool's nodes: each part the pool sets, else the `Kafka`'s (as Strimzi
/// merges them).
fn template_of(pool: Option<&OpaqueObject>, kafka: Option<&OpaqueObject>) -> Option<OpaqueObject> {
    let mut merged = kafka.cloned().unwrap_or_default();
    merged.extend(pool.cloned().unwrap_or_default());
    (pool.is_some() || kafka.is_some()).then_some(merged)
}

/// What of `spec.kafka.rack` is not applied: every broker's rack is its Kubernetes cluster's
/// alias; a zone within the cluster (a node label or an environment variable) is not added yet.
fn rack_warnings(spec: &KafkaClusterSpec) -> Vec<String> {
    let Some(rack) = &spec.rack else {
        return Vec::new();
    };
    let source = match (&rack.type_, &rack.topology_key, &rack.env_var_name) {
        (Some(kstretch_api::kafka::RackType::EnvironmentVariable), _, Some(var)) => {
            format!("environment variable {var}")
        }
        (_, Some(key), _) => format!("node label {key}"),
        _ => "no topologyKey".to_owned(),
    };
    vec![format!(
        ".spec.kafka.rack ({source}) is not applied yet: each broker's rack is the alias of its Kubernetes cluster, which spreads replicas across clusters but not across zones within one"
    )]
}

/// Parses `alias=host,...`; every cluster the pools run in needs a host.
fn node_port_hosts(
    value: &str,
    aliases: &BTreeSet<&str>,
) -> Result<BTreeMap<String, String>, String> {
    let mut hosts = BTreeMap::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (alias, host) = entry
            .split_once('=')
            .map(|(a, h)| (a.trim(), h.trim()))
            .filter(|(a, h)| !a.is_empty() && !h.is_empty())
            .ok_or_else(|| format!("{entry:?} is not alias=host"))?;
        hosts.insert(alias.to_owned(), host.to_owned());
    }
    let missing: Vec<&str> = aliases
        .iter()
        .copied()
        .filter(|a| !hosts.contains_key(*a))
        .collect();
    if !missing.is_empty() {
        return Err(format!("no host for cluster(s) {}", missing.join(", ")));
    }
    Ok(hosts)
}

/// The replication throttle of `pool`'s move drains (`kstretch.io/move-throttle`), if set.
pub fn move_throttle(pool: &KafkaNodePool) -> Result<Option<i64>, Invalid> {
    let Some(value) = pool.annotations().get(names::MOVE_THROTTLE) else {
        return Ok(None);
    };
    match value.trim().parse::<i64>() {
        Ok(bytes) if bytes > 0 => Ok(Some(bytes)),
        _ => Err(Invalid::InvalidMoveThrottle {
            pool: pool.name_any(),
            value: value.clone(),
        }),
    }
}

/// The moves that would start now (the pool's status records none yet) toward a member
/// cluster whose agent is not `connected`: refused, so that nothing is marked leaving for
/// nodes that could not be replaced. A move under way goes on (or back) regardless.
pub fn moves_to_unreachable(
    resolved: &Resolved,
    pools: &[&KafkaNodePool],
    connected: &BTreeSet<String>,
) -> Vec<Invalid> {
    resolved
        .pools
        .iter()
        .filter_map(|r| {
            let leaving = r.leaving.as_ref()?;
            let pool = pools.iter().find(|p| p.name_any() == r.name)?;
            let recorded = pool.status.as_ref().and_then(|s| s.leaving.as_ref());
            (recorded.is_none() && !connected.contains(&r.alias)).then(|| {
                Invalid::MoveTargetUnreachable {
                    pool: r.name.clone(),
                    from: leaving.alias.clone(),
                    to: r.alias.clone(),
                }
            })
        })
        .collect()
}

/// The node IDs that count as the pool's (`None` for a pool never reconciled) and the nodes it
/// still runs in a member cluster it is leaving, from its status and the member cluster its
/// annotation names (`alias`). A pool whose nodes run elsewhere than `alias` moves: every node
/// it has there is leaving, and it gets new nodes in `alias`. Naming the cluster it is leaving
/// again undoes the move: the roles swap.
fn placement(
    pool: &str,
    status: Option<&KafkaNodePoolStatus>,
    alias: &str,
    dynamic: bool,
) -> Result<(Option<Vec<i32>>, Option<Leaving>), Invalid> {
    let Some(s) = status.filter(|s| !s.node_ids.is_empty() || s.replicas.is_some()) else {
        return Ok((None, None));
    };
    // Pools recorded before the alias was: they run where their annotation says.
    let recorded = s.cluster_alias.as_deref().unwrap_or(alias);
    let ids: BTreeSet<i32> = s.node_ids.iter().copied().collect();
    // The same move goes on while the nodes leave the cluster they left before; a move that
    // starts, or is undone, starts anew.
    let leaving = |alias: &str, ids: BTreeSet<i32>| {
        (!ids.is_empty()).then(|| Leaving {
            alias: alias.to_owned(),
            ids,
            started_at: s
                .leaving
                .as_ref()
                .filter(|l| l.cluster_alias == alias)
                .and_then(|l| l.started_at.clone()),
        })
    };
    match &s.leaving {
        None if recorded == alias || ids.is_empty() => Ok((Some(s.node_ids.clone()), None)),
        None => {
            if !dynamic && s.roles.contains(&ProcessRole::Controller) {
                return Err(Invalid::MoveNeedsDynamicQuorum {
                    pool: pool.to_owned(),
                    ids: s.node_ids.clone(),
                    from: recorded.to_owned(),
                    to: alias.to_owned(),
                });
            }
            Ok((Some(Vec::new()), leaving(recorded, ids)))
        }
        Some(l) => {
            let old: BTreeSet<i32> = l.node_ids.iter().copied().collect();
            let moved: Vec<i32> = ids.difference(&old).copied().collect();
            if alias == recorded {
                Ok((Some(moved), leaving(&l.cluster_alias, old)))
            } else if alias == l.cluster_alias {
                Ok((
                    Some(old.into_iter().collect()),
                    leaving(recorded, moved.into_iter().collect()),
                ))
            } else {
                Err(Invalid::PoolMoveInProgress {
                    pool: pool.to_owned(),
                    from: l.cluster_alias.clone(),
                    to: recorded.to_owned(),
                    other: alias.to_owned(),
                })
            }
        }
    }
}

fn shape(pool: &ResolvedPool, members: &Members) -> PoolShape {
    // The IDs the pool has now; the ones it gets are checked again after assignment.
    let max_node_id = pool.ids.current.iter().flatten().copied().max();
    PoolShape {
        name: pool.name.clone(),
        replicas: pool.replicas,
        roles: pool.roles.clone(),
        cluster_alias: (pool.alias != members.own).then(|| pool.alias.clone()),
        max_node_id,
        kraft_metadata_volumes: pool
            .storage
            .volumes()
            .iter()
            .filter(|v| v.kraft_metadata().is_some())
            .count(),
    }
}

fn roles_of(roles: &[ProcessRole]) -> BTreeSet<Role> {
    roles
        .iter()
        .map(|r| match r {
            ProcessRole::Controller => Role::Controller,
            ProcessRole::Broker => Role::Broker,
        })
        .collect()
}

/// `ProcessRole`s for a status, in Strimzi's order.
pub fn process_roles(roles: &BTreeSet<Role>) -> Vec<ProcessRole> {
    let mut out = Vec::new();
    if roles.contains(&Role::Controller) {
        out.push(ProcessRole::Controller);
    }
    if roles.contains(&Role::Broker) {
        out.push(ProcessRole::Broker);
    }
    out
}

fn listener_kind(t: KafkaListenerType) -> ListenerKind {
    use KafkaListenerType as T;
    match t {
        T::Internal => ListenerKind::Internal,
        T::ClusterIp => ListenerKind::ClusterIp,
        T::NodePort => ListenerKind::NodePort,
        T::LoadBalancer => ListenerKind::LoadBalancer,
        T::Route | T::TlsRoute => ListenerKind::Route,
        T::Ingress => ListenerKind::Ingress,
    }
}

/// `Kafka.spec.kafka.config` with every value as Kafka reads it.
fn config_strings(
    config: Option<&BTreeMap<String, serde_json::Value>>,
) -> BTreeMap<String, String> {
    config
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            let value = match v {
                serde_json::Value::Null => return None,
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Array(items) => items
                    .iter()
                    .map(|i| match i {
                        serde_json::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(","),
                other => other.to_string(),
            };
            Some((k.clone(), value))
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use kstretch_core::kraft::Authentication;
    use serde_json::json;

    pub(crate) fn members() -> Members {
        Members {
            own: "alpha".into(),
            all: ["alpha".into(), "beta".into()].into(),
        }
    }

    pub(crate) fn kafka(extra: serde_json::Value) -> Kafka {
        let mut value = json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "Kafka",
            "metadata": {"name": "my-cluster", "namespace": "kafka", "generation": 1},
            "spec": {"kafka": {
                "listeners": [{"name": "plain", "port": 9092, "type": "internal", "tls": false}],
                "config": {"offsets.topic.replication.factor": 3, "auto.create.topics.enable": false,
                           "ssl.cipher.suites": ["A", "B"]},
                "resources": {"requests": {"memory": "1Gi"}}
            }}
        });
        merge(&mut value, extra);
        serde_json::from_value(value).unwrap()
    }

    pub(crate) fn pool(
        name: &str,
        roles: &[&str],
        replicas: i32,
        extra: serde_json::Value,
    ) -> KafkaNodePool {
        let mut value = json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaNodePool",
            "metadata": {"name": name, "namespace": "kafka", "generation": 1,
                         "labels": {"strimzi.io/cluster": "my-cluster"}},
            "spec": {"replicas": replicas, "roles": roles,
                     "storage": {"type": "jbod", "volumes": [
                        {"id": 0, "type": "persistent-claim", "size": "10Gi", "deleteClaim": false,
                         "kraftMetadata": "shared"}]}}
        });
        merge(&mut value, extra);
        serde_json::from_value(value).unwrap()
    }

    fn merge(base: &mut serde_json::Value, extra: serde_json::Value) {
        match (base, extra) {
            (serde_json::Value::Object(b), serde_json::Value::Object(e)) => {
                for (k, v) in e {
                    merge(b.entry(k).or_insert(serde_json::Value::Null), v);
                }
            }
            (b, e) => *b = e,
        }
    }

    #[test]
    fn pools_take_the_kafka_values_they_do_not_set_and_run_where_annotated() {
        let k = kafka(json!({}));
        let c = pool("controllers", &["controller"], 3, json!({}));
        let b = pool(
            "brokers",
            &["broker"],
            3,
            json!({"metadata": {"annotations": {"strimzi.io/stretch-cluster-alias": "beta"}},
                   "spec": {"resources": {"requests": {"memory": "4Gi"}}}}),
        );
        let resolved = resolve(&k, &[&b, &c], &members()).unwrap();
        let by_name: BTreeMap<_, _> = resolved
            .pools
            .iter()
            .map(|p| (p.name.as_str(), p))
            .collect();
        assert_eq!(by_name["controllers"].alias, "alpha");
        assert_eq!(by_name["brokers"].alias, "beta");
        let memory = |p: &ResolvedPool| {
            p.resources.as_ref().unwrap().requests.as_ref().unwrap()["memory"]
                .0
                .clone()
        };
        assert_eq!(memory(by_name["controllers"]), "1Gi");
        assert_eq!(memory(by_name["brokers"]), "4Gi");
        assert_eq!(
            resolved.addressing,
            Addressing::multi_cluster_services(),
            "pools in two clusters default to MCS"
        );
        assert_eq!(resolved.config["offsets.topic.replication.factor"], "3");
        assert_eq!(resolved.config["auto.create.topics.enable"], "false");
        assert_eq!(resolved.config["ssl.cipher.suites"], "A,B");
    }

    #[test]
    fn ingress_listeners_are_deprecated_in_strimzis_words() {
        let d = pool("dual", &["controller", "broker"], 3, json!({}));
        assert!(
            resolve(&kafka(json!({})), &[&d], &members())
                .unwrap()
                .deprecated
                .is_empty()
        );
        let ingress = kafka(json!({"spec": {"kafka": {"listeners": [
            {"name": "plain", "port": 9092, "type": "internal", "tls": false},
            {"name": "external", "port": 9094, "type": "ingress", "tls": true,
             "configuration": {"bootstrap": {"host": "bootstrap.example.com"},
                               "hostTemplate": "broker-{nodeId}.example.com"}}]}}}));
        assert_eq!(
            resolve(&ingress, &[&d], &members()).unwrap().deprecated,
            ["ingress type listeners are deprecated."]
        );
    }

    #[test]
    fn one_cluster_uses_cluster_dns() {
        let k = kafka(json!({}));
        let d = pool("dual", &["controller", "broker"], 3, json!({}));
        assert_eq!(
            resolve(&k, &[&d], &members()).unwrap().addressing,
            Addressing::ClusterDns
        );
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let k = kafka(
            json!({"metadata": {"annotations": {ADDRESSING_ANNOTATION: "carrier-pigeon"}},
                             "spec": {"kafka": {"replicas": 3}}}),
        );
        let b = pool(
            "brokers",
            &["broker"],
            -1,
            json!({"metadata": {"annotations": {"strimzi.io/stretch-cluster-alias": "gamma"}}}),
        );
        let reasons: Vec<_> = resolve(&k, &[&b], &members())
            .unwrap_err()
            .iter()
            .map(Invalid::reason)
            .collect();
        assert_eq!(
            reasons,
            [
                "NodePoolsRequired",
                "InvalidReplicas",
                "UnknownClusterAlias",
                "NoControllers",
                "NoBrokers",
                "InvalidAddressing"
            ]
        );
    }

    #[test]
    fn a_pools_template_takes_each_part_it_does_not_set_from_the_kafka() {
        let object = |v: serde_json::Value| v.as_object().cloned().unwrap();
        let kafka = object(json!({"pod": {"affinity": {"a": 1}}, "kafkaContainer": {"env": []}}));
        let pool = object(json!({"podSet": {"metadata": {}}}));
        let merged = template_of(Some(&pool), Some(&kafka)).unwrap();
        assert_eq!(
            merged["pod"],
            json!({"affinity": {"a": 1}}),
            "the Kafka's pod part"
        );
        assert!(merged.contains_key("podSet") && merged.contains_key("kafkaContainer"));
        // A part the pool sets is the pool's, whole.
        let pool = object(json!({"pod": {"tolerations": []}}));
        let merged = template_of(Some(&pool), Some(&kafka)).unwrap();
        assert_eq!(merged["pod"], json!({"tolerations": []}));
        assert_eq!(template_of(None, None), None);
    }

    #[test]
    fn a_pool_pointed_at_another_cluster_moves_there_and_back() {
        let k = kafka(json!({}));
        let c = pool("controllers", &["controller"], 1, json!({}));
        let brokers = |to: &str, status: serde_json::Value| {
            pool(
                "brokers",
                &["broker"],
                3,
                json!({"metadata": {"annotations": {"strimzi.io/stretch-cluster-alias": to}},
                       "status": status}),
            )
        };
        let moving = |to: &str, status| {
            let p = brokers(to, status);
            let resolved = resolve(&k, &[&c, &p], &members()).unwrap_or_else(|e| panic!("{e:?}"));
            let r = resolved
                .pools
                .into_iter()
                .find(|p| p.name == "brokers")
                .unwrap();
            let leaving = r
                .leaving
                .clone()
                .map(|l| (l.alias, l.ids.into_iter().collect::<Vec<_>>()));
            (r.ids.current.clone(), r.ids.leaving.clone(), leaving, r)
        };
        // Starts: every node it has is leaving alpha, none counts as the pool's yet.
        let start = json!({"nodeIds": [3, 4, 5], "clusterAlias": "alpha", "roles": ["broker"]});
        let (current, reserved, leaving, r) = moving("beta", start);
        assert_eq!(current, Some(vec![]));
        assert_eq!(reserved, vec![3, 4, 5]);
        assert_eq!(leaving, Some(("alpha".to_owned(), vec![3, 4, 5])));
        assert_eq!((r.alias_of(3), r.alias_of(6)), ("alpha", "beta"));
        assert_eq!(
            r.leaving.unwrap().started_at,
            None,
            "stamped by the status writer"
        );
        // Under way: the new nodes are the pool's, the old ones still leaving.
        let under_way = json!({"nodeIds": [3, 4, 5, 6, 7, 8], "clusterAlias": "beta",
                               "leaving": {"clusterAlias": "alpha", "nodeIds": [3, 4, 5],
                                           "startedAt": "2026-11-27T10:00:00Z"}});
        let (current, _, leaving, r) = moving("beta", under_way.clone());
        assert_eq!(current, Some(vec![6, 7, 8]));
        assert_eq!(leaving, Some(("alpha".to_owned(), vec![3, 4, 5])));
        assert_eq!(
            r.leaving.unwrap().started_at.as_deref(),
            Some("2026-11-27T10:00:00Z"),
            "the same move"
        );
        // Set back: the roles swap, and the undo is a move of its own.
        let (current, _, leaving, r) = moving("alpha", under_way.clone());
        assert_eq!(current, Some(vec![3, 4, 5]));
        assert_eq!(leaving, Some(("beta".to_owned(), vec![6, 7, 8])));
        assert_eq!(r.leaving.unwrap().started_at, None);
        // Where it was recorded, and the annotation agrees: nothing moves.
        let stays = json!({"nodeIds": [3, 4, 5], "clusterAlias": "alpha"});
        let (current, _, leaving, _) = moving("alpha", stays);
        assert_eq!((current, leaving), (Some(vec![3, 4, 5]), None));
        // A third cluster mid-move is refused, naming both ways out.
        let members = Members {
            own: "alpha".into(),
            all: ["alpha".into(), "beta".into(), "gamma".into()].into(),
        };
        let third = brokers("gamma", under_way);
        let problems = resolve(&k, &[&c, &third], &members).unwrap_err();
        assert_eq!(problems[0].reason(), "PoolMoveInProgress", "{problems:?}");
        let message = problems[0].to_string();
        assert!(
            message.contains("set it to beta to finish the move, or back to alpha"),
            "{message}"
        );
    }

    #[test]
    fn a_move_throttle_is_a_positive_number_of_bytes() {
        let with = |value: &str| {
            pool(
                "brokers",
                &["broker"],
                1,
                json!({"metadata": {"annotations": {"kstretch.io/move-throttle": value}}}),
            )
        };
        assert_eq!(move_throttle(&with("1024")).unwrap(), Some(1024));
        assert_eq!(
            move_throttle(&pool("b", &["broker"], 1, json!({}))).unwrap(),
            None
        );
        for bad in ["0", "-5", "50MiB", ""] {
            let err = move_throttle(&with(bad)).unwrap_err();
            assert_eq!(err.reason(), "InvalidAnnotation", "{bad}");
            assert!(
                err.to_string().contains("kstretch.io/move-throttle"),
                "{err}"
            );
        }
        let c = pool("controllers", &["controller"], 1, json!({}));
        let problems = resolve(&kafka(json!({})), &[&c, &with("fast")], &members()).unwrap_err();
        assert_eq!(problems[0].reason(), "InvalidAnnotation", "{problems:?}");
    }

    #[test]
    fn a_move_starts_only_toward_a_connected_cluster() {
        let k = kafka(json!({}));
        let c = pool("controllers", &["controller"], 1, json!({}));
        let brokers = |status: serde_json::Value| {
            pool(
                "brokers",
                &["broker"],
                1,
                json!({"metadata": {"annotations": {"strimzi.io/stretch-cluster-alias": "beta"}},
                       "status": status}),
            )
        };
        let refused = |status: serde_json::Value, connected: &[&str]| {
            let b = brokers(status);
            let resolved = resolve(&k, &[&c, &b], &members()).unwrap_or_else(|e| panic!("{e:?}"));
            let connected = connected.iter().map(|a| (*a).to_owned()).collect();
            moves_to_unreachable(&resolved, &[&c, &b], &connected)
        };
        let start = json!({"nodeIds": [1], "clusterAlias": "alpha", "roles": ["broker"]});
        let problems = refused(start.clone(), &["alpha"]);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].reason(), "PoolMoveTargetUnreachable");
        let message = problems[0].to_string();
        assert!(
            message.contains("the agent of beta is not connected")
                && message.contains("back to alpha"),
            "{message}"
        );
        assert!(refused(start, &["alpha", "beta"]).is_empty());
        // Under way, the move is not refused for an agent that went away meanwhile.
        let under_way = json!({"nodeIds": [1, 2], "clusterAlias": "beta",
                               "leaving": {"clusterAlias": "alpha", "nodeIds": [1]}});
        assert!(refused(under_way, &["alpha"]).is_empty());
        // Nothing moves: nothing refused.
        let stays = json!({"nodeIds": [1], "clusterAlias": "beta", "roles": ["broker"]});
        assert!(refused(stays, &["alpha"]).is_empty());
    }

    #[test]
    fn controllers_move_only_with_a_dynamic_quorum() {
        let controllers = |k: &Kafka| {
            let p = pool(
                "controllers",
                &["controller"],
                1,
                json!({"metadata": {"annotations": {"strimzi.io/stretch-cluster-alias": "beta"}},
                       "status": {"nodeIds": [0], "clusterAlias": "alpha", "roles": ["controller"]}}),
            );
            let b = pool("brokers", &["broker"], 1, json!({}));
            resolve(k, &[&p, &b], &members())
        };
        let problems = controllers(&kafka(json!({}))).unwrap_err();
        assert_eq!(
            problems[0].reason(),
            "MoveNeedsDynamicQuorum",
            "{problems:?}"
        );
        assert!(
            problems[0]
                .to_string()
                .contains("set the annotation back to alpha")
        );
        let dynamic = kafka(json!({"status": {"quorum": {"mode": "dynamic"}}}));
        let resolved = controllers(&dynamic).unwrap_or_else(|e| panic!("{e:?}"));
        assert!(resolved.pools.iter().any(|p| p.leaving.is_some()));
    }

    #[test]
    fn per_node_modes_need_their_hosts() {
        let beta = pool(
            "b",
            &["controller", "broker"],
            1,
            json!({"metadata": {"annotations": {"strimzi.io/stretch-cluster-alias": "beta"}}}),
        );
        let a = pool("a", &["controller", "broker"], 1, json!({}));
        let lb =
            kafka(json!({"metadata": {"annotations": {ADDRESSING_ANNOTATION: "loadbalancer"}}}));
        assert_eq!(
            resolve(&lb, &[&a, &beta], &members()).unwrap().per_node,
            Some(PerNode::LoadBalancer)
        );

        let np = kafka(json!({"metadata": {"annotations": {
            ADDRESSING_ANNOTATION: "nodeport",
            NODE_PORT_HOSTS_ANNOTATION: "alpha=10.0.0.1, beta=nodes.beta.example"}}}));
        let resolved = resolve(&np, &[&a, &beta], &members()).unwrap();
        let Some(PerNode::NodePort { hosts }) = resolved.per_node else {
            panic!("nodeport expected");
        };
        assert_eq!(hosts["beta"], "nodes.beta.example");

        for (value, problem) in [
            ("alpha=10.0.0.1", "no host for cluster(s) beta"),
            ("alpha", "is not alias=host"),
        ] {
            let bad = kafka(json!({"metadata": {"annotations": {
                ADDRESSING_ANNOTATION: "nodeport", NODE_PORT_HOSTS_ANNOTATION: value}}}));
            let err = resolve(&bad, &[&a, &beta], &members()).unwrap_err();
            assert_eq!(err[0].reason(), "InvalidAddressing");
            assert!(err[0].to_string().contains(problem), "{}", err[0]);
        }
    }

    #[test]
    fn cluster_dns_across_clusters_is_refused_and_no_pools_is_reported() {
        let k = kafka(json!({"metadata": {"annotations": {ADDRESSING_ANNOTATION: "cluster-dns"}}}));
        let a = pool("a", &["controller", "broker"], 1, json!({}));
        let b = pool(
            "b",
            &["controller", "broker"],
            1,
            json!({"metadata": {"annotations": {"strimzi.io/stretch-cluster-alias": "beta"}}}),
        );
        let err = resolve(&k, &[&a, &b], &members()).unwrap_err();
        assert_eq!(err.len(), 1);
        assert_eq!(err[0].reason(), "InvalidAddressing");
        assert!(err[0].to_string().contains("alpha, beta"), "{}", err[0]);

        let none = resolve(&kafka(json!({})), &[], &members()).unwrap_err();
        assert_eq!(none[0].reason(), "NoNodePools");
    }

    /// What asks for protection is served with it or refused, never served open: the
    /// security hole was a `scram-sha-512` listener rendered as `PLAINTEXT`.
    #[test]
    fn authentication_and_authorization_are_served_or_refused_naming_the_field() {
        let d = pool("dual", &["controller", "broker"], 3, json!({}));
        let k = kafka(json!({"spec": {"kafka": {
            "listeners": [
                {"name": "plain", "port": 9092, "type": "internal", "tls": false},
                {"name": "scram", "port": 9094, "type": "internal", "tls": false,
                 "authentication": {"type": "scram-sha-512"}}],
            "authorization": {"type": "simple", "superUsers": ["CN=admin"]}}}}));
        let r = resolve(&k, &[&d], &members()).unwrap();
        assert_eq!(r.listeners[1].authentication, Authentication::ScramSha512);
        let authorization = r.authorization.unwrap();
        assert_eq!(
            authorization.super_users,
            [
                "User:CN=my-cluster-kafka,O=io.kstretch",
                "User:CN=kstretch-central,O=io.kstretch",
                "User:CN=admin"
            ]
        );

        let refused = kafka(json!({"spec": {"kafka": {
            "listeners": [
                {"name": "oauth", "port": 9094, "type": "internal", "tls": true,
                 "authentication": {"type": "oauth"}}],
            "authorization": {"type": "opa"}}}}));
        let err = resolve(&refused, &[&d], &members()).unwrap_err();
        assert_eq!(
            err.iter().map(Invalid::reason).collect::<Vec<_>>(),
            ["UnsupportedField"; 2]
        );
        assert!(
            err[0]
                .to_string()
                .contains(".spec.kafka.listeners[0].authentication (type oauth)"),
            "{}",
            err[0]
        );
        assert!(
            err[1]
                .to_string()
                .contains(".spec.kafka.authorization (type opa)"),
            "{}",
            err[1]
        );
    }

    #[test]
    fn the_admin_client_uses_tls_unless_told_plaintext_and_refuses_other_values() {
        let with = |value: &str| {
            kafka(json!({"metadata": {"annotations": {ADMIN_SECURITY_ANNOTATION: value}}}))
        };
        assert_eq!(admin_uses_tls(&kafka(json!({}))), Ok(true));
        assert_eq!(admin_uses_tls(&with("SSL")), Ok(true));
        assert_eq!(admin_uses_tls(&with("PLAINTEXT")), Ok(false));
        let err = admin_uses_tls(&with("plaintext")).unwrap_err();
        assert!(
            err.contains(ADMIN_SECURITY_ANNOTATION) && err.contains("SSL"),
            "{err}"
        );
    }

    #[test]
    fn a_rack_setting_that_is_not_applied_is_a_warning_naming_its_source() {
        let d = pool("dual", &["controller", "broker"], 3, json!({}));
        let plain = resolve(&kafka(json!({})), &[&d], &members()).unwrap();
        assert!(plain.warnings.is_empty());
        let zoned = kafka(json!({"spec": {"kafka": {
            "rack": {"topologyKey": "topology.kubernetes.io/zone"}}}}));
        let r = resolve(&zoned, &[&d], &members()).unwrap();
        assert_eq!(r.warnings.len(), 1);
        assert!(
            r.warnings[0].contains("node label topology.kubernetes.io/zone")
                && r.warnings[0].contains("alias of its Kubernetes cluster"),
            "{}",
            r.warnings[0]
        );
    }

    #[test]
    fn a_pool_with_problems_is_still_resolved_and_reports_them_in_order() {
        let k = kafka(json!({"spec": {"kafka": {
            "jvmOptions": {"-Xmx": "1g"}, "template": {"pod": {"priorityClassName": "high"}}}}}));
        let p = pool(
            "brokers",
            &["broker"],
            -1,
            json!({"metadata": {"annotations": {"strimzi.io/stretch-cluster-alias": "beta",
                                                "kstretch.io/move-throttle": "fast"}},
                   "status": {"nodeIds": [3, 4, 5, 6], "clusterAlias": "beta",
                              "leaving": {"clusterAlias": "alpha", "nodeIds": [3]}}}),
        );
        let mut three = members();
        three.all.insert("gamma".into());
        let (resolved, problems) = resolve_pool(&p, &k.spec.kafka, &three, false);
        assert_eq!(
            problems.iter().map(Invalid::reason).collect::<Vec<_>>(),
            ["InvalidReplicas", "InvalidAnnotation"]
        );
        assert_eq!((resolved.replicas, resolved.alias.as_str()), (0, "beta"));
        assert_eq!(resolved.ids.current, Some(vec![4, 5, 6]));
        let jvm = resolved.jvm_options.unwrap();
        assert_eq!(
            jvm.xmx.as_deref(),
            Some("1g"),
            "the Kafka's, the pool has none"
        );
        assert_eq!(
            resolved.template.unwrap()["pod"]["priorityClassName"],
            "high"
        );

        let gamma = pool(
            "brokers",
            &["broker"],
            1,
            json!({"metadata": {"annotations": {"strimzi.io/stretch-cluster-alias": "gamma"}},
                   "status": {"nodeIds": [3, 4], "clusterAlias": "beta",
                              "leaving": {"clusterAlias": "alpha", "nodeIds": [3]}}}),
        );
        let (resolved, problems) = resolve_pool(&gamma, &k.spec.kafka, &three, false);
        assert_eq!(
            problems.iter().map(Invalid::reason).collect::<Vec<_>>(),
            ["PoolMoveInProgress"]
        );
        assert_eq!((resolved.ids.current, resolved.leaving), (None, None));
    }

    #[test]
    fn listeners_are_resolved_with_their_certificates_or_every_problem_is_reported() {
        let listeners = |value: serde_json::Value| -> Vec<GenericKafkaListener> {
            serde_json::from_value(value).unwrap()
        };
        let good = listeners(json!([
            {"name": "plain", "port": 9092, "type": "internal", "tls": false},
            {"name": "tls", "port": 9093, "type": "internal", "tls": true,
             "configuration": {"brokerCertChainAndKey":
                {"secretName": "s", "certificate": "tls.crt", "key": "tls.key"}}}]));
        let Listeners {
            listeners: resolved,
            certificates,
            ..
        } = resolve_listeners(&good).unwrap();
        assert_eq!(
            resolved
                .iter()
                .map(|l| (l.port, l.custom_certificate))
                .collect::<Vec<_>>(),
            [(9092, false), (9093, true)]
        );
        assert_eq!(certificates.keys().collect::<Vec<_>>(), ["TLS-9093"]);
        assert_eq!(certificates["TLS-9093"].secret, "s");

        let bad = listeners(json!([
            {"name": "huge", "port": 70000, "type": "internal", "tls": false},
            {"name": "plain", "port": 9092, "type": "internal", "tls": false},
            {"name": "half", "port": 9093, "type": "internal", "tls": true,
             "configuration": {"brokerCertChainAndKey": {"secretName": "s"}}}]));
        let problems = resolve_listeners(&bad).unwrap_err();
        assert_eq!(
            problems.iter().map(Invalid::reason).collect::<Vec<_>>(),
            ["InvalidListener", "InvalidListener"]
        );
        assert!(
            problems[0].to_string().contains("port 70000"),
            "{}",
            problems[0]
        );
        assert!(
            problems[1]
                .to_string()
                .contains("brokerCertChainAndKey.certificate"),
            "{}",
            problems[1]
        );
    }

    #[test]
    fn the_clusters_of_a_move_count_both_ways() {
        let k = kafka(json!({}));
        let c = pool("controllers", &["controller"], 1, json!({}));
        let b = pool(
            "brokers",
            &["broker"],
            1,
            json!({"metadata": {"annotations": {"strimzi.io/stretch-cluster-alias": "beta"}},
                   "status": {"nodeIds": [1, 2], "clusterAlias": "beta",
                              "leaving": {"clusterAlias": "gamma", "nodeIds": [1]}}}),
        );
        let mut three = members();
        three.all.insert("gamma".into());
        let resolved = resolve(&k, &[&c, &b], &three).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(
            aliases(&resolved.pools),
            BTreeSet::from(["alpha", "beta", "gamma"])
        );
    }

    #[test]
    fn addressing_defaults_by_the_number_of_clusters_and_refuses_unknown_modes() {
        let with = |value: Option<&str>| {
            let annotations = value.map_or(json!({}), |v| json!({ADDRESSING_ANNOTATION: v}));
            kafka(json!({"metadata": {"annotations": annotations}}))
        };
        let one = BTreeSet::from(["alpha"]);
        let two = BTreeSet::from(["alpha", "beta"]);
        let mode = |value: Option<&str>, aliases: &BTreeSet<&str>| {
            addressing(&with(value), aliases).map_err(|e| e.reason())
        };
        assert_eq!(mode(None, &one), Ok((Addressing::ClusterDns, None)));
        assert_eq!(
            mode(None, &two),
            Ok((Addressing::multi_cluster_services(), None))
        );
        assert_eq!(
            mode(Some("mcs"), &one),
            Ok((Addressing::multi_cluster_services(), None))
        );
        assert_eq!(
            mode(Some("cluster-dns"), &one),
            Ok((Addressing::ClusterDns, None))
        );
        assert_eq!(
            mode(Some("loadbalancer"), &one),
            Ok((
                Addressing::PerNodeService {
                    addresses: BTreeMap::new()
                },
                Some(PerNode::LoadBalancer)
            ))
        );
        assert_eq!(mode(Some("cluster-dns"), &two), Err("InvalidAddressing"));
        assert_eq!(mode(Some("nodeport"), &one), Err("InvalidAddressing"));
        let unknown = addressing(&with(Some("MCS")), &one).unwrap_err();
        assert!(unknown.to_string().contains("\"MCS\""), "{unknown}");
    }
}
