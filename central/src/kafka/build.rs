//! The Kubernetes objects one Kafka cluster needs in each member cluster: per pool a
//! StrimziPodSet `<kafka>-<pool>` with pods `<kafka>-<pool>-<id>`, per node a ConfigMap with its
//! complete KRaft configuration, a Secret with its certificate, key and the cluster CA
//! certificate (never the CA key), and its PVCs, and per member cluster the headless and
//! bootstrap Services (plus a ServiceExport with Multi-Cluster Services). Pure: resources in,
//! JSON out.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource, EnvVar,
    EnvVarSource, ObjectFieldSelector, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimVolumeSource, Probe, SecretVolumeSource, Service, ServicePort,
    ServiceSpec, TCPSocketAction, Volume as PodVolume, VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kstretch_api::storage::SingleVolumeStorage;
use kstretch_api::{Kafka, StrimziPodSet, names};
use kstretch_core::kraft::{
    self, Addressing, CONTROLPLANE_PORT, ConfigError, KafkaCluster, Node, NodeConfig,
    REPLICATION_PORT, Rendered, Volume,
};
use kstretch_core::node_ids::Role;
use kube::ResourceExt;
use kube::api::{DynamicObject, TypeMeta};
use serde_json::{Map, Value, json};

use super::external;
use super::resolve::{PerNode, Resolved, ResolvedPool};
use crate::budget;
use crate::jmx_exporter::{self, PodMetrics};
use crate::logging;
use crate::objects;
use crate::pki::NodeCerts;
use crate::pod_template::{self, PodParts};
use crate::probes;

/// Where the node's ConfigMap is mounted.
pub const CONFIG_DIR: &str = "/opt/kafka/custom-config";
/// Key of the KRaft configuration in the node's ConfigMap.
pub const CONFIG_KEY: &str = "server.properties";
/// Key of the node's `kafka-storage format` arguments in its ConfigMap. Not part of the pod's
/// revision: they change once the quorum has formed (see [`kraft::format_arguments`]), which
/// must not restart anything, and a node reads them only when its storage is empty.
pub const FORMAT_KEY: &str = "format.args";

/// One node as built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltNode {
    pub id: i32,
    pub pool: String,
    pub alias: String,
    pub pod: String,
    pub roles: BTreeSet<Role>,
    /// The pod's `strimzi.io/revision`.
    pub revision: String,
    /// Its PersistentVolumeClaims (none for ephemeral storage): what new disks replace.
    pub claims: Vec<String>,
}

/// Everything built for one Kafka cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Built {
    pub cluster: KafkaCluster,
    pub objects: BTreeMap<String, Vec<Value>>,
    pub nodes: BTreeMap<i32, BuiltNode>,
    pub warnings: Vec<String>,
    pub kafka_version: String,
    /// Why the budgets [`add_budgets`] added allow no eviction, if they do not.
    pub budgets_closed: Option<String>,
}

/// Adds to every member cluster's objects the budget of the Kafka's pods there (Strimzi's
/// `<kafka>-kafka`, with `spec.kafka.template.podDisruptionBudget`), all of them closed when
/// `closed` says why (see [`budget::closed`]).
pub fn add_budgets(built: &mut Built, kafka: &Kafka, closed: Option<String>) {
    let name = kafka.name_any();
    let namespace = kafka.namespace().unwrap_or_default();
    let names = Names {
        kafka: &name,
        namespace: &namespace,
    };
    let pods: BTreeMap<String, usize> =
        built.nodes.values().fold(BTreeMap::new(), |mut n, node| {
            *n.entry(node.alias.clone()).or_default() += 1;
            n
        });
    for (alias, objects) in &mut built.objects {
        objects.push(budget::pod_disruption_budget(&budget::Budget {
            name: names.component(),
            namespace: &namespace,
            labels: names.labels(),
            selector: BTreeMap::from([
                (names::CLUSTER.to_owned(), name.clone()),
                (names::NAME.to_owned(), names.component()),
                (names::KIND.to_owned(), "Kafka".to_owned()),
            ]),
            pods: pods.get(alias).copied().unwrap_or(0),
            template: kafka.spec.kafka.template.as_ref(),
            closed: closed.is_some(),
        }));
    }
    built.budgets_closed = closed;
}

/// The podsets built for each member cluster, by alias.
pub fn podsets(built: &Built) -> BTreeMap<String, BTreeSet<String>> {
    built
        .objects
        .iter()
        .map(|(alias, objects)| {
            let names = objects
                .iter()
                .filter(|o| o["kind"] == "StrimziPodSet")
                .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_owned))
                .collect();
            (alias.clone(), names)
        })
        .collect()
}

/// Adds copies of the CA certificate Secrets `cas` (name and data: certificates and trust
/// stores, never a key) to the objects of every member cluster but central's own cluster
/// `own_alias`, where the originals live: clients in each cluster read `ca.crt` there, as in
/// Strimzi.
pub fn add_ca_copies(
    built: &mut Built,
    kafka: &Kafka,
    own_alias: &str,
    cas: &[(String, &BTreeMap<String, Vec<u8>>)],
) {
    let name = kafka.name_any();
    let namespace = kafka.namespace().unwrap_or_default();
    let names = Names {
        kafka: &name,
        namespace: &namespace,
    };
    for (alias, objects) in &mut built.objects {
        if alias == own_alias {
            continue;
        }
        for (name, data) in cas {
            let mut labels = names.labels();
            labels.insert(
                names::COMPONENT_TYPE.to_owned(),
                "certificate-authority".to_owned(),
            );
            let files = data
                .iter()
                .filter(|(key, _)| !key.ends_with(".key"))
                .map(|(key, bytes)| (key.clone(), bytes.as_slice()));
            objects.push(objects::secret(names.object_meta(name, labels), files));
        }
    }
}

/// The cluster `kafka` describes, whose pools have the node IDs `ids` (by pool name).
pub fn cluster_model(
    kafka: &Kafka,
    resolved: &Resolved,
    ids: &BTreeMap<String, BTreeSet<i32>>,
    cluster_id: &str,
    quorum: kraft::QuorumMode,
) -> KafkaCluster {
    let name = kafka.name_any();
    let namespace = kafka.namespace().unwrap_or_default();
    let nodes: Vec<Node> = resolved
        .pools
        .iter()
        .flat_map(|pool| {
            ids.get(&pool.name)
                .into_iter()
                .flatten()
                .map(move |&id| Node {
                    id,
                    pool: pool.name.clone(),
                    roles: pool.roles.clone(),
                    cluster_alias: pool.alias_of(id).to_owned(),
                    volumes: volumes(pool),
                })
        })
        .collect();
    KafkaCluster {
        name,
        namespace,
        cluster_id: cluster_id.to_owned(),
        listeners: resolved.listeners.clone(),
        config: resolved.config.clone(),
        addressing: resolved.addressing.clone(),
        nodes,
        authorization: resolved.authorization.clone(),
        quorum,
        metrics_reporter: resolved.metrics_reporter.clone(),
    }
}

/// The host names of every node's certificate, by pod name.
pub fn node_hostnames(
    cluster: &KafkaCluster,
) -> Result<BTreeMap<String, BTreeSet<String>>, ConfigError> {
    cluster
        .nodes
        .iter()
        .map(|node| {
            let pod = kraft::pod_name(&cluster.name, &node.pool, node.id);
            Ok((pod, kraft::node_hostnames(cluster, node)?))
        })
        .collect()
}

/// Builds every object for `kafka`, whose pools have the node IDs `ids` (by pool name), whose
/// [`cluster_model`] is `cluster`, whose nodes have the certificates `certs` and whose dynamic
/// quorum, until it has formed, starts with the voters `initial_voters` (node ID → metadata
/// directory ID).
pub fn build(
    kafka: &Kafka,
    resolved: &Resolved,
    ids: &BTreeMap<String, BTreeSet<i32>>,
    cluster: KafkaCluster,
    certs: &NodeCerts,
    initial_voters: &BTreeMap<i32, u128>,
    files: UserFiles<'_>,
) -> Result<Built, ConfigError> {
    let name = kafka.name_any();
    let namespace = kafka.namespace().unwrap_or_default();
    let cluster_id = cluster.cluster_id.clone();
    let Rendered {
        nodes: configs,
        mut warnings,
    } = kraft::render(&cluster)?;
    warnings.extend(resolved.warnings.iter().cloned());

    let spec = &kafka.spec.kafka;
    let (version, image) =
        pod_template::version_and_image(spec.version.as_deref(), spec.image.as_deref());
    let ctx = Ctx {
        names: Names {
            kafka: &name,
            namespace: &namespace,
        },
        cluster_id: &cluster_id,
        image: &image,
        version: &version,
        metadata_version: spec.metadata_version.as_deref(),
        listener_ports: resolved
            .listeners
            .iter()
            .map(|l| (l.name.clone(), l.port))
            .collect(),
        quorum: cluster.quorum,
        node_address_reads: node_address_reads(resolved),
        metrics: match (files.metrics_rules, &resolved.metrics_reporter) {
            (Some(_), _) => Some(PodMetrics::Exporter),
            (None, Some(_)) => Some(PodMetrics::Reporter),
            (None, None) => None,
        },
        log4j2: files.log4j2,
        probes: probes::Asked {
            liveness: spec.liveness_probe.as_ref(),
            readiness: spec.readiness_probe.as_ref(),
        },
    };

    let inputs = NodeInputs {
        ctx: &ctx,
        cluster: &cluster,
        configs: &configs,
        certs,
        initial_voters,
    };
    let mut objects: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut built_nodes = BTreeMap::new();
    for pool in &resolved.pools {
        for (alias, pool_ids) in ids_by_alias(pool, ids) {
            let (pool_objects, nodes) = inputs.pool_objects(pool, alias, &pool_ids)?;
            objects
                .entry(alias.to_owned())
                .or_default()
                .extend(pool_objects);
            built_nodes.extend(nodes.into_iter().map(|node| (node.id, node)));
        }
    }
    for (alias, services) in per_node_services(&name, &namespace, resolved, ids) {
        objects.entry(alias).or_default().extend(services);
    }
    for (alias, services) in external_services(&name, &namespace, resolved, ids) {
        objects.entry(alias).or_default().extend(services);
    }
    add_node_tables(&ctx, resolved, &built_nodes, &mut objects);
    if let Some(rules) = files.metrics_rules {
        let aliases: BTreeSet<&str> = built_nodes.values().map(|n| n.alias.as_str()).collect();
        for alias in aliases {
            let rules = jmx_exporter::config_map(&name, &namespace, &ctx.labels(), rules);
            objects.entry(alias.to_owned()).or_default().push(rules);
        }
    }
    add_cluster_services(&ctx, &cluster.addressing, &mut objects);
    Ok(Built {
        cluster,
        objects,
        nodes: built_nodes,
        warnings,
        kafka_version: version,
        budgets_closed: None,
    })
}

/// The pool's node IDs by the member cluster each runs in. A moving pool has a pod set in
/// each cluster, its own and the one it leaves; its own always, even without nodes.
fn ids_by_alias<'a>(
    pool: &'a ResolvedPool,
    ids: &BTreeMap<String, BTreeSet<i32>>,
) -> BTreeMap<&'a str, Vec<i32>> {
    let mut by_alias: BTreeMap<&str, Vec<i32>> = BTreeMap::from([(pool.alias.as_str(), vec![])]);
    for &id in ids.get(&pool.name).into_iter().flatten() {
        by_alias.entry(pool.alias_of(id)).or_default().push(id);
    }
    by_alias
}

/// Per broker, the `nodeport` listeners it advertises at its node's address (Kafka listener
/// name, the node address type it reads).
fn node_address_reads(resolved: &Resolved) -> BTreeMap<i32, Vec<(String, String)>> {
    let mut out: BTreeMap<i32, Vec<(String, String)>> = BTreeMap::new();
    for external in &resolved.external {
        let Some(listener) = resolved.listeners.iter().find(|l| l.name == external.name) else {
            continue;
        };
        for (id, advertised) in &listener.advertised {
            if matches!(advertised.host, kraft::AdvertisedHost::NodeAddress { .. }) {
                out.entry(*id)
                    .or_default()
                    .push((listener.config_name(), external::table_type(external)));
            }
        }
    }
    out
}

/// The brokers of the cluster after this pass, with their member clusters.
pub fn brokers(
    resolved: &Resolved,
    ids: &BTreeMap<String, BTreeSet<i32>>,
) -> Vec<external::Broker> {
    resolved
        .pools
        .iter()
        .filter(|p| p.roles.contains(&Role::Broker))
        .flat_map(|p| {
            ids.get(&p.name)
                .into_iter()
                .flatten()
                .map(|&id| external::Broker {
                    id,
                    pool: p.name.clone(),
                    alias: p.alias_of(id).to_owned(),
                })
        })
        .collect()
}

/// The Services of the external listeners and the routing objects of the routed ones, by
/// member cluster.
pub fn external_services(
    kafka: &str,
    namespace: &str,
    resolved: &Resolved,
    ids: &BTreeMap<String, BTreeSet<i32>>,
) -> BTreeMap<String, Vec<Value>> {
    let names = Names { kafka, namespace };
    let brokers = brokers(resolved, ids);
    let labels = names.labels();
    let mut out = external::services(kafka, namespace, &resolved.external, &brokers, &labels);
    let routes = super::routes::routes(kafka, namespace, &resolved.external, &brokers, &labels);
    for (alias, objects) in routes {
        out.entry(alias).or_default().extend(objects);
    }
    out
}

/// The table of node addresses in each member cluster where a broker reads one at start.
fn add_node_tables(
    ctx: &Ctx<'_>,
    resolved: &Resolved,
    nodes: &BTreeMap<i32, BuiltNode>,
    objects: &mut BTreeMap<String, Vec<Value>>,
) {
    let aliases: BTreeSet<&str> = ctx
        .node_address_reads
        .keys()
        .filter_map(|id| nodes.get(id))
        .map(|n| n.alias.as_str())
        .collect();
    for alias in aliases {
        let listed = resolved.cluster_nodes.get(alias).map(Vec::as_slice);
        objects
            .entry(alias.to_owned())
            .or_default()
            .push(external::node_table_config_map(
                ctx.kafka,
                ctx.namespace,
                &ctx.labels(),
                listed.unwrap_or_default(),
            ));
    }
}

/// The cluster's headless and bootstrap Services (and their ServiceExports with Multi-Cluster
/// Services) in every member cluster that has objects of it, so every member resolves the
/// same names.
fn add_cluster_services(
    ctx: &Ctx<'_>,
    addressing: &Addressing,
    objects: &mut BTreeMap<String, Vec<Value>>,
) {
    for out in objects.values_mut() {
        out.push(headless_service(ctx));
        out.push(bootstrap_service(ctx));
        if matches!(addressing, Addressing::MultiClusterServices { .. }) {
            out.push(service_export(
                ctx,
                &kraft::headless_service_name(ctx.kafka),
            ));
            out.push(service_export(
                ctx,
                &kraft::bootstrap_service_name(ctx.kafka),
            ));
        }
    }
}

/// What building the nodes takes besides their pool.
struct NodeInputs<'a> {
    ctx: &'a Ctx<'a>,
    cluster: &'a KafkaCluster,
    /// The rendered configuration of each node, by ID.
    configs: &'a BTreeMap<i32, NodeConfig>,
    certs: &'a NodeCerts,
    initial_voters: &'a BTreeMap<i32, u128>,
}

/// One node as built: its ConfigMap, Secret and PVCs, and its pod.
struct NodeObjects {
    objects: Vec<Value>,
    pod: Value,
    node: BuiltNode,
}

impl NodeInputs<'_> {
    /// The objects of `pool`'s nodes `ids` in member cluster `alias` (each node's ConfigMap,
    /// Secret and PVCs, then the pool's pod set there), and the nodes as built. A node without
    /// a rendered configuration is left out.
    fn pool_objects(
        &self,
        pool: &ResolvedPool,
        alias: &str,
        ids: &[i32],
    ) -> Result<(Vec<Value>, Vec<BuiltNode>), ConfigError> {
        let mut objects = Vec::new();
        let mut pods = Vec::new();
        let mut nodes = Vec::new();
        for &id in ids {
            let Some(config) = self.configs.get(&id) else {
                continue;
            };
            let built = self.node(pool, alias, id, config)?;
            objects.extend(built.objects);
            pods.push(built.pod);
            nodes.push(built.node);
        }
        objects.push(pod_set(self.ctx, pool, pods));
        Ok((objects, nodes))
    }

    /// Node `id` of `pool` in member cluster `alias`, whose rendered configuration is `config`.
    fn node(
        &self,
        pool: &ResolvedPool,
        alias: &str,
        id: i32,
        config: &NodeConfig,
    ) -> Result<NodeObjects, ConfigError> {
        let (ctx, certs) = (self.ctx, self.certs);
        let node = self.cluster.node(id).ok_or(ConfigError::NoControllers {
            kafka: ctx.kafka.to_owned(),
        })?;
        let pod_name = kraft::pod_name(ctx.kafka, &pool.name, id);
        let Some(cert) = certs.nodes.get(&pod_name) else {
            return Err(ConfigError::CertificatePending { node: id });
        };
        let format = kraft::format_arguments(self.cluster, node, self.initial_voters)?;
        let text = config.to_properties_text();
        let mut objects = vec![
            config_map(ctx, pool, &pod_name, &text, &format),
            certificate_secret(ctx, pool, &pod_name, cert, certs),
        ];
        objects.extend(claims(ctx, pool, &pod_name));
        // A renewed certificate or CA rolls the node, which reads them at start.
        let mut tls = vec![cert.cert.as_str(), certs.ca_cert.as_str()];
        tls.extend(certs.clients_ca_cert.as_deref());
        tls.extend(
            certs
                .listeners
                .values()
                .flat_map(|p| [p.cert.as_str(), p.key.as_str()]),
        );
        let (pod, revision) = pod(ctx, pool, node, &pod_name, &config.rolling_text(), &tls);
        let node = BuiltNode {
            id,
            pool: pool.name.clone(),
            alias: alias.to_owned(),
            claims: claim_names(pool, &pod_name),
            pod: pod_name,
            roles: pool.roles.clone(),
            revision,
        };
        Ok(NodeObjects { objects, pod, node })
    }
}

/// What naming and labelling any object of the cluster needs.
#[derive(Clone, Copy)]
struct Names<'a> {
    kafka: &'a str,
    namespace: &'a str,
}

/// What building the pods needs besides the names.
struct Ctx<'a> {
    names: Names<'a>,
    cluster_id: &'a str,
    image: &'a str,
    version: &'a str,
    metadata_version: Option<&'a str>,
    listener_ports: Vec<(String, u16)>,
    quorum: kraft::QuorumMode,
    /// Per broker, the `nodeport` listeners whose host it finds at start, each with the kind
    /// of node address it reads ([`external::start_script`]).
    node_address_reads: BTreeMap<i32, Vec<(String, String)>>,
    /// How every node serves metrics ([`jmx_exporter`]), if it does.
    metrics: Option<PodMetrics>,
    /// Every node's log4j2 configuration ([`crate::logging`]), if the `Kafka` sets `logging`.
    log4j2: Option<&'a str>,
    /// The timing `spec.kafka` asks of the nodes' checks.
    probes: probes::Asked<'a>,
}

/// What the nodes read from the user's ConfigMaps, as read this pass.
#[derive(Debug, Clone, Copy, Default)]
pub struct UserFiles<'a> {
    /// The JMX exporter's rules (`metricsConfig`).
    pub metrics_rules: Option<&'a str>,
    /// The log4j2 configuration file ([`crate::logging::properties`]).
    pub log4j2: Option<&'a str>,
}

impl<'a> std::ops::Deref for Ctx<'a> {
    type Target = Names<'a>;

    fn deref(&self) -> &Names<'a> {
        &self.names
    }
}

impl Names<'_> {
    /// `strimzi.io/name` of the cluster's Kafka pods.
    fn component(&self) -> String {
        format!("{}-kafka", self.kafka)
    }

    /// Labels on everything built for the cluster.
    fn labels(&self) -> BTreeMap<String, String> {
        [
            (names::CLUSTER, self.kafka.to_owned()),
            (names::NAME, self.component()),
            (names::KIND, "Kafka".to_owned()),
            (names::COMPONENT_TYPE, "kafka".to_owned()),
            (names::APP_NAME, "kafka".to_owned()),
            (names::APP_INSTANCE, self.kafka.to_owned()),
            (names::APP_PART_OF, format!("strimzi-{}", self.kafka)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    fn pool_labels(&self, pool: &str) -> BTreeMap<String, String> {
        let mut labels = self.labels();
        labels.insert(names::POOL_NAME.to_owned(), pool.to_owned());
        labels
    }

    fn object_meta(&self, name: &str, labels: BTreeMap<String, String>) -> ObjectMeta {
        objects::meta(name, self.namespace, labels)
    }
}

/// The pool's volumes, each with how the configuration sees it: a JBOD volume by its ID, a
/// single volume without one.
fn pool_volumes(pool: &ResolvedPool) -> Vec<(SingleVolumeStorage, Volume)> {
    let jbod = matches!(pool.storage, kstretch_api::Storage::Jbod(_));
    pool.storage
        .volumes()
        .into_iter()
        .map(|v| {
            let volume = Volume {
                id: jbod.then(|| v.id().unwrap_or(0)),
                kraft_metadata: v.kraft_metadata().is_some(),
            };
            (v, volume)
        })
        .collect()
}

/// Volumes of one of the pool's nodes, as the configuration sees them.
fn volumes(pool: &ResolvedPool) -> Vec<Volume> {
    pool_volumes(pool).into_iter().map(|(_, v)| v).collect()
}

/// The Kubernetes volume name of a data volume (Strimzi's).
fn volume_name(volume: &Volume) -> String {
    match volume.id {
        Some(id) => format!("data-{id}"),
        None => "data".to_owned(),
    }
}

/// PVC name of a persistent volume of `pod` (Strimzi's: `data-<pod>` or `data-<id>-<pod>`).
pub fn claim_name(volume: &Volume, pod: &str) -> String {
    format!("{}-{pod}", volume_name(volume))
}

/// The node's ConfigMap. Its log4j2 file is not part of the pod's revision: the node re-reads
/// it while it runs.
fn config_map(ctx: &Ctx<'_>, pool: &ResolvedPool, pod: &str, text: &str, format: &str) -> Value {
    let mut data = BTreeMap::from([
        (CONFIG_KEY.to_owned(), text.to_owned()),
        (FORMAT_KEY.to_owned(), format.to_owned()),
        ("cluster.id".to_owned(), ctx.cluster_id.to_owned()),
    ]);
    if let Some(log4j2) = ctx.log4j2 {
        data.insert(logging::FILE.to_owned(), log4j2.to_owned());
    }
    objects::to_json(&ConfigMap {
        metadata: ctx.object_meta(pod, ctx.pool_labels(&pool.name)),
        data: Some(data),
        ..Default::default()
    })
}

/// The node's Secret: its certificate and key, and the CA certificates it trusts.
fn certificate_secret(
    ctx: &Ctx<'_>,
    pool: &ResolvedPool,
    pod: &str,
    cert: &crate::pki::Pem,
    certs: &NodeCerts,
) -> Value {
    let clients_ca = certs
        .clients_ca_cert
        .as_deref()
        .map(|c| (kraft::CLIENTS_CA_FILE.to_owned(), c));
    let mut files: Vec<(String, &str)> = vec![
        (kraft::CERT_FILE.to_owned(), cert.cert.as_str()),
        (kraft::KEY_FILE.to_owned(), cert.key.as_str()),
        (kraft::CA_FILE.to_owned(), certs.ca_cert.as_str()),
    ];
    files.extend(clients_ca);
    for (listener, pem) in &certs.listeners {
        let (cert_file, key_file) = kraft::listener_cert_files(listener);
        files.push((cert_file, pem.cert.as_str()));
        files.push((key_file, pem.key.as_str()));
    }
    objects::secret(
        ctx.object_meta(pod, ctx.pool_labels(&pool.name)),
        files.into_iter().map(|(k, v)| (k, v.as_bytes())),
    )
}

/// The names of `pod`'s PersistentVolumeClaims.
fn claim_names(pool: &ResolvedPool, pod: &str) -> Vec<String> {
    pool_volumes(pool)
        .into_iter()
        .filter(|(storage, _)| matches!(storage, SingleVolumeStorage::PersistentClaim(_)))
        .map(|(_, volume)| claim_name(&volume, pod))
        .collect()
}

fn claims(ctx: &Ctx<'_>, pool: &ResolvedPool, pod: &str) -> Vec<Value> {
    pool_volumes(pool)
        .into_iter()
        .filter_map(|(storage, volume)| match storage {
            SingleVolumeStorage::PersistentClaim(claim) => {
                let mut metadata =
                    ctx.object_meta(&claim_name(&volume, pod), ctx.pool_labels(&pool.name));
                metadata.annotations = Some(BTreeMap::from([(
                    names::DELETE_CLAIM.to_owned(),
                    claim.delete_claim.unwrap_or(false).to_string(),
                )]));
                let size = claim.size.clone().unwrap_or_else(|| "1Gi".into());
                let spec = PersistentVolumeClaimSpec {
                    access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
                    resources: Some(VolumeResourceRequirements {
                        requests: Some(BTreeMap::from([("storage".to_owned(), Quantity(size))])),
                        ..Default::default()
                    }),
                    storage_class_name: claim.class.clone(),
                    selector: claim.selector.as_ref().map(|labels| LabelSelector {
                        match_labels: Some(labels.clone()),
                        ..Default::default()
                    }),
                    volume_attributes_class_name: claim.volume_attributes_class.clone(),
                    ..Default::default()
                };
                Some(objects::to_json(&PersistentVolumeClaim {
                    metadata,
                    spec: Some(spec),
                    status: None,
                }))
            }
            SingleVolumeStorage::Ephemeral(_) => None,
        })
        .collect()
}

/// The pod definition and its revision (a hash of the definition and `config`, the rolling part
/// of the node's configuration, so a configuration change rolls the pod although the pod spec is
/// unchanged, and of the certificates `tls` it reads at start).
fn pod(
    ctx: &Ctx<'_>,
    pool: &ResolvedPool,
    node: &Node,
    pod_name: &str,
    config: &str,
    tls: &[&str],
) -> (Value, String) {
    let template_pod = pod_template::template_pod(pool.template.as_ref());
    let (mounts, volumes) = pod_volumes(pool, pod_name);
    let probe_port = if node.is_broker() {
        REPLICATION_PORT
    } else {
        CONTROLPLANE_PORT
    };
    let mut env = vec![pod_template::env("KAFKA_CLUSTER_ID", ctx.cluster_id)];
    env.extend(pod_template::jvm_env(pool.jvm_options.as_ref()));
    if ctx.log4j2.is_some() {
        // Only with `logging` set: nodes of a `Kafka` without it keep the pod they have.
        env.push(pod_template::env(
            "KAFKA_LOG4J_OPTS",
            logging::java_option(CONFIG_DIR),
        ));
    }
    let (mut mounts, mut volumes) = (mounts, volumes);
    if ctx.node_address_reads.contains_key(&node.id) {
        add_node_address_reads(ctx, &mut env, &mut mounts, &mut volumes);
    }
    let mut ports = container_ports(ctx, node);
    if let Some(how) = ctx.metrics {
        jmx_exporter::add_to_container(
            ctx.kafka,
            how,
            &mut env,
            &mut ports,
            &mut mounts,
            &mut volumes,
        );
    }
    let probe = |initial_delay_seconds, period_seconds| Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::Int(probe_port.into()),
            host: None,
        }),
        initial_delay_seconds: Some(initial_delay_seconds),
        period_seconds: Some(period_seconds),
        ..Default::default()
    };
    let container = Container {
        name: "kafka".to_owned(),
        image: Some(ctx.image.to_owned()),
        command: Some(vec![
            "/bin/sh".to_owned(),
            "-c".to_owned(),
            start_script(ctx, node),
        ]),
        env: Some(env),
        ports: Some(ports),
        volume_mounts: Some(mounts),
        readiness_probe: Some(probes::timed(probe(5, 5), ctx.probes.readiness)),
        startup_probe: Some(probes::startup(&probe(0, 10), probes::KAFKA_NODE_START)),
        liveness_probe: Some(probes::timed(probe(60, 10), ctx.probes.liveness)),
        resources: pool.resources.clone(),
        ..Default::default()
    };

    let mut annotations = Map::new();
    annotations.insert(names::KAFKA_VERSION.to_owned(), json!(ctx.version));
    add_template_metadata(&mut annotations, template_pod, "annotations");
    let subdomain = kraft::headless_service_name(ctx.kafka);
    let pod = pod_template::pod(PodParts {
        name: pod_name,
        namespace: ctx.namespace,
        subdomain: &subdomain,
        container: objects::value(&container),
        volumes,
        labels: pod_labels(ctx, pool, node, pod_name, template_pod),
        annotations,
        template: template_pod,
    });
    let mut inputs = vec![config.as_bytes()];
    inputs.extend(tls.iter().map(|t| t.as_bytes()));
    pod_template::with_revision(pod, &inputs)
}

/// The node pod's labels: the pool's, the pod's own, then those of `template.pod` that do not
/// override them.
fn pod_labels(
    ctx: &Ctx<'_>,
    pool: &ResolvedPool,
    node: &Node,
    pod_name: &str,
    template_pod: Option<&Map<String, Value>>,
) -> Map<String, Value> {
    let mut labels: Map<String, Value> = ctx
        .pool_labels(&pool.name)
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    for (k, v) in [
        (names::POD_NAME, pod_name.to_owned()),
        (names::CONTROLLER, "strimzipodset".to_owned()),
        (
            names::CONTROLLER_NAME,
            format!("{}-{}", ctx.kafka, pool.name),
        ),
        (names::BROKER_ROLE, node.is_broker().to_string()),
        (names::CONTROLLER_ROLE, node.is_controller().to_string()),
    ] {
        labels.insert(k.to_owned(), Value::String(v));
    }
    add_template_metadata(&mut labels, template_pod, "labels");
    labels
}

/// Adds the entries of `template.pod.metadata.<key>` that `target` does not have.
fn add_template_metadata(
    target: &mut Map<String, Value>,
    template_pod: Option<&Map<String, Value>>,
    key: &str,
) {
    let extra = template_pod
        .and_then(|p| p.get("metadata"))
        .and_then(|m| m.get(key))
        .and_then(Value::as_object);
    for (k, v) in extra.into_iter().flatten() {
        target.entry(k.clone()).or_insert_with(|| v.clone());
    }
}

/// The container's ports: the control plane's on a controller, replication's and every
/// listener's on a broker.
fn container_ports(ctx: &Ctx<'_>, node: &Node) -> Vec<ContainerPort> {
    let port = |name: String, container_port: u16| ContainerPort {
        name: Some(name),
        container_port: container_port.into(),
        ..Default::default()
    };
    let mut ports = Vec::new();
    if node.is_controller() {
        ports.push(port("tcp-ctrlplane".to_owned(), CONTROLPLANE_PORT));
    }
    if node.is_broker() {
        ports.push(port("tcp-replication".to_owned(), REPLICATION_PORT));
        for (name, p) in &ctx.listener_ports {
            ports.push(port(format!("tcp-{name}"), *p));
        }
    }
    ports
}

/// The container's volume mounts and the pod's volumes: the node's ConfigMap and certificate
/// Secret, then each data volume of the pool (its PVC, or an `emptyDir`).
fn pod_volumes(pool: &ResolvedPool, pod_name: &str) -> (Vec<VolumeMount>, Vec<PodVolume>) {
    let mount = |name: &str, mount_path: &str, read_only: bool| VolumeMount {
        name: name.to_owned(),
        mount_path: mount_path.to_owned(),
        read_only: read_only.then_some(true),
        ..Default::default()
    };
    let mut mounts = vec![
        mount("kafka-config", CONFIG_DIR, false),
        mount("cluster-certs", kraft::CERTS_DIR, true),
    ];
    let mut volumes = vec![
        PodVolume {
            name: "kafka-config".to_owned(),
            config_map: Some(ConfigMapVolumeSource {
                name: pod_name.to_owned(),
                ..Default::default()
            }),
            ..Default::default()
        },
        PodVolume {
            name: "cluster-certs".to_owned(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(pod_name.to_owned()),
                default_mode: Some(0o440),
                ..Default::default()
            }),
            ..Default::default()
        },
    ];
    for (v, volume) in pool_volumes(pool) {
        let name = volume_name(&volume);
        mounts.push(mount(&name, &volume.mount_path(), false));
        volumes.push(match &v {
            SingleVolumeStorage::PersistentClaim(_) => PodVolume {
                name,
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: claim_name(&volume, pod_name),
                    read_only: None,
                }),
                ..Default::default()
            },
            SingleVolumeStorage::Ephemeral(e) => PodVolume {
                name,
                empty_dir: Some(EmptyDirVolumeSource {
                    medium: None,
                    size_limit: e.size_limit.clone().map(Quantity),
                }),
                ..Default::default()
            },
        });
    }
    (mounts, volumes)
}

/// The container's shell script: format once (--ignore-formatted keeps existing data), with
/// the quorum arguments of the moment the storage is empty, then run Kafka in the foreground.
/// The storage tool is a JVM of its own: it runs only while a directory lacks its
/// meta.properties (as Strimzi's start script does), so a restart starts one JVM, not two.
/// What a broker that finds its node's address at start needs: the node's name, the table of
/// its cluster's node addresses, and a directory to write what it found.
fn add_node_address_reads(
    ctx: &Ctx<'_>,
    env: &mut Vec<EnvVar>,
    mounts: &mut Vec<VolumeMount>,
    volumes: &mut Vec<PodVolume>,
) {
    env.push(EnvVar {
        name: external::NODE_NAME_ENV.to_owned(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: "spec.nodeName".to_owned(),
                api_version: None,
            }),
            ..Default::default()
        }),
    });
    for (name, path, read_only) in [
        ("node-addresses", external::NODE_TABLE_DIR, true),
        ("node-address", kraft::NODE_ADDRESS_DIR, false),
    ] {
        mounts.push(VolumeMount {
            name: name.to_owned(),
            mount_path: path.to_owned(),
            read_only: read_only.then_some(true),
            ..Default::default()
        });
    }
    volumes.push(PodVolume {
        name: "node-addresses".to_owned(),
        config_map: Some(ConfigMapVolumeSource {
            name: external::node_table_name(ctx.kafka),
            ..Default::default()
        }),
        ..Default::default()
    });
    volumes.push(PodVolume {
        name: "node-address".to_owned(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    });
}

fn start_script(ctx: &Ctx<'_>, node: &Node) -> String {
    let release = ctx
        .metadata_version
        .map(|mv| format!(" --release-version '{mv}'"))
        .unwrap_or_default();
    let formatted = kraft::formatted_dirs(node)
        .iter()
        .map(|dir| format!("[ -f '{dir}/meta.properties' ]"))
        .collect::<Vec<_>>()
        .join(" && ");
    let unformatted = if formatted.is_empty() {
        "true".to_owned()
    } else {
        format!("! {{ {formatted}; }}")
    };
    // A broker advertising its node's address finds it first: the configuration names it.
    let addresses = external::start_script(
        ctx.node_address_reads
            .get(&node.id)
            .map(Vec::as_slice)
            .unwrap_or_default(),
    );
    format!(
        "set -e; {addresses}if {unformatted}; then /opt/kafka/bin/kafka-storage.sh format --ignore-formatted --cluster-id \"$KAFKA_CLUSTER_ID\" --config {CONFIG_DIR}/{CONFIG_KEY}{release} $(cat {CONFIG_DIR}/{FORMAT_KEY} 2>/dev/null); fi; {metrics}exec /opt/kafka/bin/kafka-server-start.sh {CONFIG_DIR}/{CONFIG_KEY}",
        metrics = jmx_exporter::start(ctx.metrics),
    )
}

fn pod_set(ctx: &Ctx<'_>, pool: &ResolvedPool, pods: Vec<Value>) -> Value {
    let mut metadata = ctx.object_meta(
        &format!("{}-{}", ctx.kafka, pool.name),
        ctx.pool_labels(&pool.name),
    );
    // Read back by a central that lost the `Kafka`'s status, to adopt what runs.
    let quorum = match ctx.quorum {
        kraft::QuorumMode::Static => "static",
        kraft::QuorumMode::Dynamic => "dynamic",
    };
    metadata.annotations = Some(BTreeMap::from([
        (names::CLUSTER_ID.to_owned(), ctx.cluster_id.to_owned()),
        (names::CONTROLLER_QUORUM.to_owned(), quorum.to_owned()),
    ]));
    let spec = pod_template::podset_spec(kafka_pods(ctx, &[(names::POOL_NAME, &pool.name)]), pods);
    objects::to_json(&StrimziPodSet {
        metadata,
        spec,
        status: None,
    })
}

fn service_ports(ctx: &Ctx<'_>, controlplane: bool) -> Vec<ServicePort> {
    let mut ports = Vec::new();
    if controlplane {
        ports.push(objects::tcp_port(
            "tcp-ctrlplane".to_owned(),
            CONTROLPLANE_PORT.into(),
        ));
    }
    ports.push(objects::tcp_port(
        "tcp-replication".to_owned(),
        REPLICATION_PORT.into(),
    ));
    for (name, port) in &ctx.listener_ports {
        ports.push(objects::tcp_port(format!("tcp-{name}"), (*port).into()));
    }
    ports
}

/// The labels that select the cluster's Kafka pods, with `extra`.
fn kafka_pods(ctx: &Ctx<'_>, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut selector = BTreeMap::from([
        (names::CLUSTER.to_owned(), ctx.kafka.to_owned()),
        (names::NAME.to_owned(), ctx.component()),
        (names::KIND.to_owned(), "Kafka".to_owned()),
    ]);
    selector.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    selector
}

fn headless_service(ctx: &Ctx<'_>) -> Value {
    objects::to_json(&Service {
        metadata: ctx.object_meta(&kraft::headless_service_name(ctx.kafka), ctx.labels()),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_owned()),
            publish_not_ready_addresses: Some(true),
            selector: Some(kafka_pods(ctx, &[])),
            ports: Some(service_ports(ctx, true)),
            ..Default::default()
        }),
        status: None,
    })
}

fn bootstrap_service(ctx: &Ctx<'_>) -> Value {
    let mut labels = ctx.labels();
    labels.insert(names::DISCOVERY.to_owned(), "true".to_owned());
    objects::to_json(&Service {
        metadata: ctx.object_meta(&kraft::bootstrap_service_name(ctx.kafka), labels),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_owned()),
            selector: Some(kafka_pods(ctx, &[(names::BROKER_ROLE, "true")])),
            ports: Some(service_ports(ctx, false)),
            ..Default::default()
        }),
        status: None,
    })
}

/// With `loadbalancer` or `nodeport` addressing, one Service per node (named like its pod) in
/// the node's member cluster, by alias; nothing otherwise. They exist before the nodes'
/// configuration can be rendered: their addresses go into it.
pub fn per_node_services(
    kafka: &str,
    namespace: &str,
    resolved: &Resolved,
    ids: &BTreeMap<String, BTreeSet<i32>>,
) -> BTreeMap<String, Vec<Value>> {
    let mut out: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let type_ = match &resolved.per_node {
        Some(PerNode::LoadBalancer) => "LoadBalancer",
        Some(PerNode::NodePort { .. }) => "NodePort",
        None => return out,
    };
    let naming = Names { kafka, namespace };
    for pool in &resolved.pools {
        for &id in ids.get(&pool.name).into_iter().flatten() {
            let pod = kraft::pod_name(kafka, &pool.name, id);
            let mut ports = Vec::new();
            if pool.roles.contains(&Role::Controller) {
                ports.push((kraft::CONTROLPLANE_LISTENER.to_owned(), CONTROLPLANE_PORT));
            }
            if pool.roles.contains(&Role::Broker) {
                ports.push((kraft::REPLICATION_LISTENER.to_owned(), REPLICATION_PORT));
                ports.extend(resolved.listeners.iter().map(|l| (l.config_name(), l.port)));
            }
            let ports: Vec<ServicePort> = ports
                .iter()
                .map(|(listener, port)| {
                    objects::tcp_port(super::addresses::port_name(listener), (*port).into())
                })
                .collect();
            let mut labels = naming.pool_labels(&pool.name);
            labels.insert(names::NODE_SERVICE.to_owned(), "true".to_owned());
            let name = kraft::per_node_service_name(kafka, &pool.name, id);
            let service = Service {
                metadata: naming.object_meta(&name, labels),
                spec: Some(ServiceSpec {
                    type_: Some(type_.to_owned()),
                    selector: Some(BTreeMap::from([
                        (names::CLUSTER.to_owned(), kafka.to_owned()),
                        (names::POD_NAME.to_owned(), pod),
                    ])),
                    // The quorum forms before any node is ready: it must be reachable then.
                    publish_not_ready_addresses: Some(true),
                    ports: Some(ports),
                    ..Default::default()
                }),
                status: None,
            };
            out.entry(pool.alias_of(id).to_owned())
                .or_default()
                .push(objects::to_json(&service));
        }
    }
    out
}

/// KEP-1645: exporting the service makes `<svc>.<ns>.svc.clusterset.local` (and, for the
/// headless one, `<pod>.<cluster>.<svc>...`) resolvable in every member cluster.
fn service_export(ctx: &Ctx<'_>, service: &str) -> Value {
    // A ServiceExport has no fields of its own: exporting is its name and namespace.
    let export = DynamicObject {
        types: Some(TypeMeta {
            api_version: "multicluster.x-k8s.io/v1alpha1".to_owned(),
            kind: "ServiceExport".to_owned(),
        }),
        metadata: ctx.object_meta(service, ctx.labels()),
        data: Value::Object(Map::new()),
    };
    objects::value(&export)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::super::resolve::resolve;
    use super::super::resolve::tests::{kafka, members, pool};
    use super::*;

    fn ids(pairs: &[(&str, &[i32])]) -> BTreeMap<String, BTreeSet<i32>> {
        pairs
            .iter()
            .map(|(p, ids)| (p.to_string(), ids.iter().copied().collect()))
            .collect()
    }

    /// Stand-in certificates: building only copies them.
    fn certs(k: &Kafka, r: &Resolved, ids: &BTreeMap<String, BTreeSet<i32>>) -> NodeCerts {
        let model = cluster_model(k, r, ids, "abc", kraft::QuorumMode::Static);
        NodeCerts {
            ca_cert: "CA CERT".into(),
            clients_ca_cert: None,
            listeners: BTreeMap::new(),
            nodes: node_hostnames(&model)
                .unwrap()
                .into_keys()
                .map(|pod| {
                    let pem = crate::pki::Pem {
                        cert: format!("CERT {pod}"),
                        key: format!("KEY {pod}"),
                    };
                    (pod, pem)
                })
                .collect(),
        }
    }

    fn build(
        k: &Kafka,
        r: &Resolved,
        ids: &BTreeMap<String, BTreeSet<i32>>,
        cluster_id: &str,
    ) -> Result<Built, ConfigError> {
        build_with_files(k, r, ids, cluster_id, UserFiles::default())
    }

    /// [`build`] with the user's files (metrics rules, log4j2 configuration).
    fn build_with_files(
        k: &Kafka,
        r: &Resolved,
        ids: &BTreeMap<String, BTreeSet<i32>>,
        cluster_id: &str,
        files: UserFiles<'_>,
    ) -> Result<Built, ConfigError> {
        let model = cluster_model(k, r, ids, cluster_id, kraft::QuorumMode::Static);
        super::build(k, r, ids, model, &certs(k, r, ids), &BTreeMap::new(), files)
    }

    fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
        objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
    }

    #[test]
    fn a_stretched_cluster_gets_podsets_configs_claims_and_services_where_its_pools_run() {
        let k = kafka(serde_json::json!({}));
        let c = pool("controllers", &["controller"], 3, serde_json::json!({}));
        let b = pool(
            "brokers",
            &["broker"],
            2,
            serde_json::json!({"metadata": {"annotations": {"strimzi.io/stretch-cluster-alias": "beta"}}}),
        );
        let resolved = resolve(&k, &[&b, &c], &members()).unwrap();
        let built = build(
            &k,
            &resolved,
            &ids(&[("controllers", &[0, 1, 2]), ("brokers", &[3, 4])]),
            "abc",
        )
        .unwrap();
        assert_eq!(built.objects.keys().collect::<Vec<_>>(), ["alpha", "beta"]);
        let beta = &built.objects["beta"];
        let podset = find(beta, "StrimziPodSet", "my-cluster-brokers");
        let pods = podset["spec"]["pods"].as_array().unwrap();
        assert_eq!(pods.len(), 2);
        assert_eq!(pods[0]["metadata"]["name"], "my-cluster-brokers-3");
        assert_eq!(
            podset["spec"]["selector"]["matchLabels"]["strimzi.io/pool-name"], "brokers",
            "a pool's podset never selects another pool's pods"
        );
        let config = find(beta, "ConfigMap", "my-cluster-brokers-3")["data"][CONFIG_KEY]
            .as_str()
            .unwrap();
        assert!(config.contains("node.id=3"), "{config}");
        assert!(
            config.contains(
                "my-cluster-controllers-0.alpha.my-cluster-kafka-brokers.kafka.svc.clusterset.local"
            ),
            "{config}"
        );
        let pvc = find(beta, "PersistentVolumeClaim", "data-0-my-cluster-brokers-4");
        assert_eq!(
            pvc["metadata"]["annotations"]["strimzi.io/delete-claim"],
            "false"
        );
        find(beta, "Service", "my-cluster-kafka-brokers");
        find(beta, "Service", "my-cluster-kafka-bootstrap");
        find(beta, "ServiceExport", "my-cluster-kafka-brokers");
        assert!(
            !beta.iter().any(|o| o["metadata"]["name"]
                .as_str()
                .unwrap()
                .contains("controllers")),
            "controllers run in alpha only"
        );
        let node = &built.nodes[&3];
        assert_eq!(
            (node.alias.as_str(), node.pod.as_str()),
            ("beta", "my-cluster-brokers-3")
        );
        assert_eq!(
            pods[0]["metadata"]["annotations"]["strimzi.io/revision"],
            node.revision.as_str()
        );
    }

    #[test]
    fn a_logging_change_reaches_the_nodes_file_without_changing_their_revision() {
        let k = kafka(serde_json::json!({}));
        let d = pool("dual", &["controller", "broker"], 1, serde_json::json!({}));
        let r = resolve(&k, &[&d], &members()).unwrap();
        let ids = ids(&[("dual", &[0])]);
        let with = |log4j2: Option<&str>| {
            let files = UserFiles {
                metrics_rules: None,
                log4j2,
            };
            build_with_files(&k, &r, &ids, "abc", files).unwrap()
        };
        let (info, debug, none) = (
            with(Some("rootLogger.level = INFO\n")),
            with(Some("rootLogger.level = DEBUG\n")),
            with(None),
        );
        let alpha = &debug.objects["alpha"];
        let file = &find(alpha, "ConfigMap", "my-cluster-dual-0")["data"][logging::FILE];
        assert_eq!(file, "rootLogger.level = DEBUG\n");
        assert_eq!(info.nodes[&0].revision, debug.nodes[&0].revision, "no roll");
        let env = find(alpha, "StrimziPodSet", "my-cluster-dual")["spec"]["pods"][0]["spec"]
            ["containers"][0]["env"]
            .to_string();
        assert!(
            env.contains("-Dlog4j2.configurationFile=/opt/kafka/custom-config/log4j2.properties"),
            "{env}"
        );
        // Without `logging` nothing of it is there: a Kafka that never set it does not roll.
        let alpha = &none.objects["alpha"];
        assert!(find(alpha, "ConfigMap", "my-cluster-dual-0")["data"][logging::FILE].is_null());
        assert!(
            !find(alpha, "StrimziPodSet", "my-cluster-dual")
                .to_string()
                .contains("LOG4J")
        );
    }

    #[test]
    fn nodes_are_checked_as_timed_and_not_killed_while_they_start() {
        let k = kafka(serde_json::json!({"spec": {"kafka": {
            "livenessProbe": {"initialDelaySeconds": 20, "failureThreshold": 6},
            "readinessProbe": {"periodSeconds": 3}
        }}}));
        let d = pool("dual", &["controller", "broker"], 1, serde_json::json!({}));
        let r = resolve(&k, &[&d], &members()).unwrap();
        let built = build(&k, &r, &ids(&[("dual", &[0])]), "abc").unwrap();
        let container = &find(&built.objects["alpha"], "StrimziPodSet", "my-cluster-dual")["spec"]
            ["pods"][0]["spec"]["containers"][0];
        let liveness = &container["livenessProbe"];
        assert_eq!(liveness["initialDelaySeconds"], 20);
        assert_eq!(liveness["failureThreshold"], 6);
        assert_eq!(liveness["periodSeconds"], 10, "kstretch's where unset");
        assert_eq!(liveness["tcpSocket"]["port"], 9091);
        assert_eq!(container["readinessProbe"]["periodSeconds"], 3);
        // Liveness counts only once the node listens: log recovery may take long.
        let startup = &container["startupProbe"];
        assert_eq!(startup["tcpSocket"]["port"], 9091);
        assert_eq!(startup["failureThreshold"], 8640);

        let k = kafka(serde_json::json!({"spec": {"kafka": {
            "livenessProbe": {"successThreshold": 2}
        }}}));
        let problems = resolve(&k, &[&d], &members()).unwrap_err();
        assert_eq!(problems[0].reason(), "InvalidProbe");
        assert!(
            problems[0]
                .to_string()
                .starts_with(".spec.kafka.livenessProbe.successThreshold is 2"),
            "{problems:?}"
        );
    }

    #[test]
    fn only_the_server_of_a_node_with_the_exporter_starts_its_java_agent() {
        let k = kafka(serde_json::json!({}));
        let d = pool("dual", &["controller", "broker"], 1, serde_json::json!({}));
        let r = resolve(&k, &[&d], &members()).unwrap();
        let ids = ids(&[("dual", &[0])]);
        let files = UserFiles {
            metrics_rules: Some("rules: []"),
            log4j2: None,
        };
        let built = build_with_files(&k, &r, &ids, "abc", files).unwrap();
        let container = &find(&built.objects["alpha"], "StrimziPodSet", "my-cluster-dual")["spec"]
            ["pods"][0]["spec"]["containers"][0];
        let env = container["env"].as_array().unwrap();
        // A tool run in the container (kubectl exec) reads KAFKA_OPTS: the agent is not there.
        assert!(!env.iter().any(|e| e["name"] == "KAFKA_OPTS"), "{env:?}");
        assert!(
            env.iter().any(|e| e["name"] == jmx_exporter::AGENT_ENV
                && e["value"].as_str().unwrap().starts_with("-javaagent:")),
            "{env:?}"
        );
        let script = container["command"][2].as_str().unwrap();
        // After the storage is formatted (a tool too), before the server starts.
        assert!(
            script.ends_with("fi; export KAFKA_OPTS=\"${KAFKA_OPTS:+$KAFKA_OPTS }$KSTRETCH_METRICS_AGENT\"; exec /opt/kafka/bin/kafka-server-start.sh /opt/kafka/custom-config/server.properties"),
            "{script}"
        );
    }

    #[test]
    fn the_revision_changes_with_the_config_and_the_pod_but_not_otherwise() {
        let k = kafka(serde_json::json!({}));
        let d = pool("dual", &["controller", "broker"], 1, serde_json::json!({}));
        let resolved = resolve(&k, &[&d], &members()).unwrap();
        let one = |k: &Kafka, r: &Resolved| {
            build(k, r, &ids(&[("dual", &[0])]), "abc").unwrap().nodes[&0]
                .revision
                .clone()
        };
        let base = one(&k, &resolved);
        assert_eq!(base, one(&k, &resolved), "deterministic");

        let mut config_changed = resolved.clone();
        config_changed
            .config
            .insert("num.io.threads".into(), "16".into());
        assert_ne!(base, one(&k, &config_changed));

        let image = kafka(serde_json::json!({"spec": {"kafka": {"image": "example/kafka:1"}}}));
        assert_ne!(base, one(&image, &resolved));

        // A renewed certificate rolls the node.
        let ids = ids(&[("dual", &[0])]);
        let mut renewed = certs(&k, &resolved, &ids);
        renewed
            .nodes
            .values_mut()
            .for_each(|p| p.cert = "RENEWED".into());
        let model = cluster_model(&k, &resolved, &ids, "abc", kraft::QuorumMode::Static);
        let after = super::build(
            &k,
            &resolved,
            &ids,
            model,
            &renewed,
            &BTreeMap::new(),
            UserFiles::default(),
        )
        .unwrap();
        assert_ne!(base, after.nodes[&0].revision);
    }

    #[test]
    fn adding_a_controller_rolls_every_node_of_a_static_quorum_but_none_of_a_dynamic_one() {
        let k = kafka(serde_json::json!({}));
        let c = pool("controllers", &["controller"], 3, serde_json::json!({}));
        let b = pool("brokers", &["broker"], 1, serde_json::json!({}));
        let resolved = resolve(&k, &[&c, &b], &members()).unwrap();
        let revisions = |mode: kraft::QuorumMode, controllers: &[i32]| {
            let ids = ids(&[("controllers", controllers), ("brokers", &[9])]);
            let model = cluster_model(&k, &resolved, &ids, "abc", mode);
            let built = super::build(
                &k,
                &resolved,
                &ids,
                model,
                &certs(&k, &resolved, &ids),
                &BTreeMap::new(),
                UserFiles::default(),
            )
            .unwrap();
            built
                .nodes
                .into_iter()
                .map(|(id, n)| (id, n.revision))
                .collect::<BTreeMap<_, _>>()
        };
        for mode in [kraft::QuorumMode::Static, kraft::QuorumMode::Dynamic] {
            let before = revisions(mode, &[0, 1]);
            let after = revisions(mode, &[0, 1, 2]);
            let unchanged = [0, 1, 9].iter().all(|id| before[id] == after[id]);
            assert_eq!(unchanged, mode == kraft::QuorumMode::Dynamic, "{mode:?}");
        }
    }

    #[test]
    fn a_dynamic_quorum_formats_its_initial_controllers_with_the_voter_set_and_the_rest_without() {
        let k = kafka(serde_json::json!({}));
        let c = pool("controllers", &["controller"], 3, serde_json::json!({}));
        let b = pool("brokers", &["broker"], 1, serde_json::json!({}));
        let resolved = resolve(&k, &[&c, &b], &members()).unwrap();
        let ids = ids(&[("controllers", &[0, 1, 2]), ("brokers", &[3])]);
        let dynamic = |initial: &BTreeMap<i32, u128>| {
            let model = cluster_model(&k, &resolved, &ids, "abc", kraft::QuorumMode::Dynamic);
            super::build(
                &k,
                &resolved,
                &ids,
                model,
                &certs(&k, &resolved, &ids),
                initial,
                UserFiles::default(),
            )
            .unwrap()
        };
        let format_of = |built: &Built, pod: &str| {
            let objects = &built.objects["alpha"];
            find(objects, "ConfigMap", pod)["data"][FORMAT_KEY]
                .as_str()
                .unwrap()
                .to_owned()
        };
        // Controller 2 is not among the initial voters (it was added before the quorum formed).
        let initial = BTreeMap::from([(0, 1u128), (1, 2u128)]);
        let forming = dynamic(&initial);
        let voters = format!(
            "--initial-controllers 0@my-cluster-controllers-0.my-cluster-kafka-brokers.kafka.svc:9090:{},1@my-cluster-controllers-1.my-cluster-kafka-brokers.kafka.svc:9090:{}",
            kraft::uuid_text(1),
            kraft::uuid_text(2)
        );
        assert_eq!(format_of(&forming, "my-cluster-controllers-0"), voters);
        assert_eq!(format_of(&forming, "my-cluster-controllers-1"), voters);
        for pod in ["my-cluster-controllers-2", "my-cluster-brokers-3"] {
            assert_eq!(format_of(&forming, pod), "--no-initial-controllers");
        }
        let config = find(
            &forming.objects["alpha"],
            "ConfigMap",
            "my-cluster-brokers-3",
        )["data"][CONFIG_KEY]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            config.contains("controller.quorum.bootstrap.servers="),
            "{config}"
        );
        assert!(!config.contains("controller.quorum.voters"), "{config}");

        // Once the quorum has formed nobody formats with the voter set again, and no pod rolls
        // for it.
        let formed = dynamic(&BTreeMap::new());
        assert_eq!(
            format_of(&formed, "my-cluster-controllers-0"),
            "--no-initial-controllers"
        );
        for (id, node) in &forming.nodes {
            assert_eq!(node.revision, formed.nodes[id].revision);
        }
    }

    #[test]
    fn member_clusters_get_copies_of_the_ca_certificates_but_never_a_key() {
        let k = kafka(serde_json::json!({}));
        let d = pool("dual", &["controller", "broker"], 1, serde_json::json!({}));
        let resolved = resolve(&k, &[&d], &members()).unwrap();
        let mut built = build(&k, &resolved, &ids(&[("dual", &[0])]), "abc").unwrap();
        built.objects.insert("beta".into(), Vec::new());
        let public = BTreeMap::from([
            ("ca.crt".to_owned(), b"CERT".to_vec()),
            ("ca.p12".to_owned(), vec![0xff, 0x00]),
            ("ca.key".to_owned(), b"KEY".to_vec()),
        ]);
        let before = built.objects["alpha"].len();
        add_ca_copies(
            &mut built,
            &k,
            "alpha",
            &[("my-cluster-cluster-ca-cert".to_owned(), &public)],
        );
        assert_eq!(
            built.objects["alpha"].len(),
            before,
            "central's cluster has the originals"
        );
        let copy = find(
            &built.objects["beta"],
            "Secret",
            "my-cluster-cluster-ca-cert",
        );
        let data: BTreeMap<String, k8s_openapi::ByteString> =
            serde_json::from_value(copy["data"].clone()).unwrap();
        assert_eq!(data.keys().collect::<Vec<_>>(), ["ca.crt", "ca.p12"]);
        assert_eq!(data["ca.p12"].0, [0xff, 0x00]);
    }

    #[test]
    fn each_cluster_gets_a_budget_closed_while_a_node_is_down_in_another() {
        let k = kafka(serde_json::json!({"spec": {"kafka": {
            "template": {"podDisruptionBudget": {"maxUnavailable": 2}}}}}));
        let d = pool("dual", &["controller", "broker"], 1, serde_json::json!({}));
        let b = pool(
            "b",
            &["broker"],
            1,
            serde_json::json!({"metadata": {"annotations":
                {"strimzi.io/stretch-cluster-alias": "beta"}}}),
        );
        let resolved = resolve(&k, &[&d, &b], &members()).unwrap();
        let ids = ids(&[("dual", &[0]), ("b", &[1])]);
        let mut built = build(&k, &resolved, &ids, "abc").unwrap();
        assert_eq!(
            podsets(&built)["beta"],
            BTreeSet::from(["my-cluster-b".to_owned()])
        );
        built
            .objects
            .get_mut("alpha")
            .unwrap()
            .push(serde_json::json!({}));
        add_budgets(&mut built, &k, None);
        assert_eq!(built.budgets_closed, None);
        let allowed_open = |built: &Built, alias: &str| {
            find(
                &built.objects[alias],
                "PodDisruptionBudget",
                "my-cluster-kafka",
            )["spec"]["minAvailable"]
                .clone()
        };
        // Open: each cluster's budget lets one of its pods go (each has one).
        assert_eq!(
            (allowed_open(&built, "alpha"), allowed_open(&built, "beta")),
            (0.into(), 0.into())
        );
        for objects in built.objects.values_mut() {
            objects.retain(|o| o["kind"] != "PodDisruptionBudget");
        }
        add_budgets(&mut built, &k, Some("a node is down in beta".to_owned()));
        let allowed = |alias: &str| {
            let budget = find(
                &built.objects[alias],
                "PodDisruptionBudget",
                "my-cluster-kafka",
            );
            assert_eq!(
                budget["spec"]["selector"]["matchLabels"],
                serde_json::json!({"strimzi.io/cluster": "my-cluster",
                    "strimzi.io/kind": "Kafka", "strimzi.io/name": "my-cluster-kafka"})
            );
            budget["spec"]["minAvailable"].clone()
        };
        // Closed: every pod must stay, in the cluster where a node is down too (once it is
        // ready again, its own apiserver would otherwise allow an eviction before central
        // saw the quorum whole).
        assert_eq!((allowed("alpha"), allowed("beta")), (1.into(), 1.into()));
        assert_eq!(
            built.budgets_closed.as_deref(),
            Some("a node is down in beta")
        );
    }

    #[test]
    fn a_node_gets_its_certificate_and_the_ca_certificate_and_nothing_else() {
        let k = kafka(serde_json::json!({}));
        let d = pool("dual", &["controller", "broker"], 1, serde_json::json!({}));
        let resolved = resolve(&k, &[&d], &members()).unwrap();
        let ids = ids(&[("dual", &[0])]);
        let built = build(&k, &resolved, &ids, "abc").unwrap();
        let alpha = &built.objects["alpha"];
        let secret = find(alpha, "Secret", "my-cluster-dual-0");
        let data: BTreeMap<String, k8s_openapi::ByteString> =
            serde_json::from_value(secret["data"].clone()).unwrap();
        let text = |key: &str| String::from_utf8(data[key].0.clone()).unwrap();
        assert_eq!(
            data.keys().collect::<Vec<_>>(),
            ["ca.crt", "tls.crt", "tls.key"]
        );
        assert_eq!(
            (text("tls.crt"), text("tls.key"), text("ca.crt")),
            (
                "CERT my-cluster-dual-0".into(),
                "KEY my-cluster-dual-0".into(),
                "CA CERT".into()
            )
        );
        let pod = &find(alpha, "StrimziPodSet", "my-cluster-dual")["spec"]["pods"][0];
        assert_eq!(
            pod["spec"]["volumes"][1]["secret"]["secretName"],
            "my-cluster-dual-0"
        );
        assert_eq!(
            pod["spec"]["containers"][0]["volumeMounts"][1]["mountPath"],
            kraft::CERTS_DIR
        );
        // A node without a certificate is not built.
        let model = cluster_model(&k, &resolved, &ids, "abc", kraft::QuorumMode::Static);
        let none = super::build(
            &k,
            &resolved,
            &ids,
            model,
            &NodeCerts::default(),
            &BTreeMap::new(),
            UserFiles::default(),
        );
        assert!(none.is_err());
    }

    #[test]
    fn one_cluster_gets_no_service_export_and_ephemeral_storage_no_claims() {
        let k = kafka(serde_json::json!({}));
        let d = pool(
            "dual",
            &["controller", "broker"],
            1,
            serde_json::json!({"spec": {"storage": {"type": "ephemeral", "volumes": null}}}),
        );
        let resolved = resolve(&k, &[&d], &members()).unwrap();
        let built = build(&k, &resolved, &ids(&[("dual", &[0])]), "abc").unwrap();
        let alpha = &built.objects["alpha"];
        assert!(
            alpha
                .iter()
                .all(|o| o["kind"] != "ServiceExport" && o["kind"] != "PersistentVolumeClaim")
        );
        let pod = &find(alpha, "StrimziPodSet", "my-cluster-dual")["spec"]["pods"][0];
        assert_eq!(pod["spec"]["volumes"][2]["emptyDir"], serde_json::json!({}));
        assert_eq!(pod["spec"]["subdomain"], "my-cluster-kafka-brokers");
    }

    #[test]
    fn storage_is_formatted_only_while_a_log_directory_lacks_its_meta_properties() {
        let k = kafka(serde_json::json!({}));
        let jbod = serde_json::json!({"spec": {"storage": {"type": "jbod", "volumes": [
            {"id": 0, "type": "persistent-claim", "size": "1Gi"},
            {"id": 1, "type": "persistent-claim", "size": "1Gi", "kraftMetadata": "shared"},
        ]}}});
        let d = pool("dual", &["controller", "broker"], 1, jbod);
        let resolved = resolve(&k, &[&d], &members()).unwrap();
        let built = build(&k, &resolved, &ids(&[("dual", &[0])]), "abc").unwrap();
        let pod =
            &find(&built.objects["alpha"], "StrimziPodSet", "my-cluster-dual")["spec"]["pods"][0];
        let script = pod["spec"]["containers"][0]["command"][2].as_str().unwrap();
        let check = "if ! { [ -f '/var/lib/kafka/data-0/kafka-log0/meta.properties' ] && [ -f '/var/lib/kafka/data-1/kafka-log0/meta.properties' ]; }; then /opt/kafka/bin/kafka-storage.sh format --ignore-formatted";
        assert!(script.contains(check), "{script}");
        assert!(
            script.ends_with("fi; exec /opt/kafka/bin/kafka-server-start.sh /opt/kafka/custom-config/server.properties"),
            "{script}"
        );
    }

    /// A context for the steps that take one, with one listener.
    fn ctx(metadata_version: Option<&'static str>) -> Ctx<'static> {
        Ctx {
            names: Names {
                kafka: "my-cluster",
                namespace: "kafka",
            },
            cluster_id: "abc",
            image: "apache/kafka:4.1.2",
            version: "4.1.2",
            metadata_version,
            listener_ports: vec![("plain".to_owned(), 9092)],
            node_address_reads: BTreeMap::new(),
            quorum: kraft::QuorumMode::Static,
            metrics: None,
            log4j2: None,
            probes: probes::Asked::default(),
        }
    }

    fn node(roles: &[Role], volumes: Vec<Volume>) -> Node {
        Node {
            id: 0,
            pool: "p".to_owned(),
            roles: roles.iter().copied().collect(),
            cluster_alias: "alpha".to_owned(),
            volumes,
        }
    }

    #[test]
    fn a_moving_pool_is_built_in_both_clusters_and_every_pool_in_its_own() {
        let k = kafka(serde_json::json!({}));
        let c = pool("controllers", &["controller"], 1, serde_json::json!({}));
        let b = pool(
            "brokers",
            &["broker"],
            3,
            serde_json::json!({"metadata": {"annotations": {"strimzi.io/stretch-cluster-alias": "beta"}},
                   "status": {"nodeIds": [3, 4, 5, 6], "clusterAlias": "beta",
                              "leaving": {"clusterAlias": "alpha", "nodeIds": [3, 4]}}}),
        );
        let resolved = resolve(&k, &[&c, &b], &members()).unwrap();
        let brokers = resolved.pools.iter().find(|p| p.name == "brokers").unwrap();
        let by_alias = ids_by_alias(brokers, &ids(&[("brokers", &[3, 4, 5, 6])]));
        assert_eq!(
            by_alias,
            BTreeMap::from([("alpha", vec![3, 4]), ("beta", vec![5, 6])])
        );
        let empty = ids_by_alias(brokers, &ids(&[]));
        assert_eq!(empty, BTreeMap::from([("beta", vec![])]));
    }

    #[test]
    fn every_member_cluster_with_objects_gets_the_services_and_exports_only_with_mcs() {
        let ctx = ctx(None);
        let services = |addressing: &Addressing| {
            let mut objects =
                BTreeMap::from([("alpha".to_owned(), vec![]), ("beta".to_owned(), vec![])]);
            add_cluster_services(&ctx, addressing, &mut objects);
            objects
                .into_iter()
                .map(|(alias, objects)| {
                    let kinds: Vec<String> = objects
                        .iter()
                        .map(|o| format!("{} {}", o["kind"], o["metadata"]["name"]))
                        .collect();
                    (alias, kinds)
                })
                .collect::<BTreeMap<_, _>>()
        };
        let plain = services(&Addressing::ClusterDns);
        let expected = [
            r#""Service" "my-cluster-kafka-brokers""#,
            r#""Service" "my-cluster-kafka-bootstrap""#,
        ];
        assert_eq!(plain["alpha"], expected);
        assert_eq!(plain["beta"], expected);
        let mcs = services(&Addressing::multi_cluster_services());
        assert_eq!(
            mcs["beta"][2..],
            [
                r#""ServiceExport" "my-cluster-kafka-brokers""#,
                r#""ServiceExport" "my-cluster-kafka-bootstrap""#,
            ]
        );
    }

    #[test]
    fn a_controller_exposes_the_control_plane_and_a_broker_replication_and_the_listeners() {
        let ctx = ctx(None);
        let names = |roles: &[Role]| {
            container_ports(&ctx, &node(roles, vec![]))
                .iter()
                .map(|p| {
                    let p = objects::value(p);
                    (
                        p["name"].as_str().unwrap().to_owned(),
                        p["containerPort"].clone(),
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(&[Role::Controller]),
            [(
                "tcp-ctrlplane".to_owned(),
                serde_json::json!(CONTROLPLANE_PORT)
            )]
        );
        assert_eq!(
            names(&[Role::Broker]),
            [
                (
                    "tcp-replication".to_owned(),
                    serde_json::json!(REPLICATION_PORT)
                ),
                ("tcp-plain".to_owned(), serde_json::json!(9092)),
            ]
        );
        assert_eq!(names(&[Role::Controller, Role::Broker]).len(), 3);
    }

    #[test]
    fn storage_is_formatted_with_the_metadata_version_when_one_is_set() {
        let volume = Volume {
            id: None,
            kraft_metadata: false,
        };
        let script = start_script(&ctx(Some("4.0-IV3")), &node(&[Role::Broker], vec![volume]));
        assert!(
            script.contains(
                "--config /opt/kafka/custom-config/server.properties --release-version '4.0-IV3' $(cat /opt/kafka/custom-config/format.args 2>/dev/null)"
            ),
            "{script}"
        );
        assert!(
            script.starts_with(
                "set -e; if ! { [ -f '/var/lib/kafka/data/kafka-log0/meta.properties' ]; }; then"
            ),
            "{script}"
        );
        let without = start_script(&ctx(None), &node(&[Role::Broker], vec![volume]));
        assert!(!without.contains("--release-version"), "{without}");
    }

    #[test]
    fn the_pod_template_adds_labels_and_annotations_but_never_overrides_ours() {
        let k = kafka(serde_json::json!({}));
        let template = serde_json::json!({"spec": {"template": {"pod": {"metadata": {
            "labels": {"team": "x", "strimzi.io/cluster": "evil", "strimzi.io/pool-name": "evil"},
            "annotations": {"note": "y", "strimzi.io/kafka-version": "0.0"}}}}}});
        let d = pool("dual", &["controller", "broker"], 1, template);
        let resolved = resolve(&k, &[&d], &members()).unwrap();
        let built = build(&k, &resolved, &ids(&[("dual", &[0])]), "abc").unwrap();
        let pod = &find(&built.objects["alpha"], "StrimziPodSet", "my-cluster-dual")["spec"]["pods"]
            [0]["metadata"];
        assert_eq!(pod["labels"]["team"], "x");
        assert_eq!(pod["labels"]["strimzi.io/cluster"], "my-cluster");
        assert_eq!(pod["labels"]["strimzi.io/pool-name"], "dual");
        assert_eq!(pod["labels"]["strimzi.io/broker-role"], "true");
        assert_eq!(pod["annotations"]["note"], "y");
        assert_eq!(
            pod["annotations"]["strimzi.io/kafka-version"],
            kstretch_core::versions::DEFAULT_KAFKA_VERSION
        );
    }

    #[test]
    fn a_broker_advertising_its_node_address_finds_it_at_start_in_its_clusters_table() {
        let k = kafka(serde_json::json!({"spec": {"kafka": {"listeners": [
            {"name": "external", "port": 9094, "type": "nodeport", "tls": false}]}}}));
        let c = pool("controllers", &["controller"], 1, serde_json::json!({}));
        let b = pool("brokers", &["broker"], 2, serde_json::json!({}));
        let mut resolved = resolve(&k, &[&c, &b], &members()).unwrap();
        let ids = ids(&[("controllers", &[0]), ("brokers", &[1, 2])]);
        resolved.listeners[0].advertised = BTreeMap::from([
            (
                1,
                kraft::Advertised {
                    host: kraft::AdvertisedHost::NodeAddress {
                        candidates: BTreeSet::new(),
                    },
                    port: 31001,
                    names: BTreeSet::new(),
                },
            ),
            (
                2,
                kraft::Advertised {
                    host: kraft::AdvertisedHost::Fixed("b2.example.com".into()),
                    port: 443,
                    names: BTreeSet::new(),
                },
            ),
        ]);
        resolved.cluster_nodes.insert(
            "alpha".into(),
            vec![kstretch_proto::agent::v1::NodeStatus {
                name: "n1".into(),
                addresses: vec![kstretch_proto::agent::v1::NodeAddress {
                    r#type: "InternalIP".into(),
                    address: "10.0.0.1".into(),
                }],
            }],
        );
        let built = build(&k, &resolved, &ids, "abc").unwrap();
        let alpha = &built.objects["alpha"];
        let table = find(alpha, "ConfigMap", "my-cluster-kstretch-node-addresses");
        assert_eq!(
            table["data"]["addresses"],
            "n1 ExternalDNS 10.0.0.1\nn1 ExternalIP 10.0.0.1\nn1 Hostname 10.0.0.1\nn1 InternalDNS 10.0.0.1\nn1 InternalIP 10.0.0.1\nn1 default 10.0.0.1\n"
        );
        find(alpha, "Service", "my-cluster-kafka-external-bootstrap");
        find(alpha, "Service", "my-cluster-brokers-1");
        let pod = |name: &str| {
            find(alpha, "StrimziPodSet", "my-cluster-brokers")["spec"]["pods"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["metadata"]["name"] == name)
                .unwrap()
                .clone()
        };
        // Broker 1 reads its node's name, the table and writes the address Kafka reads.
        let reads = pod("my-cluster-brokers-1");
        let container = &reads["spec"]["containers"][0];
        assert!(
            container["env"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["name"] == "KSTRETCH_NODE_NAME"
                    && e["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName")
        );
        let script = container["command"][2].as_str().unwrap();
        assert!(
            script.starts_with("set -e; kstretch_address() {"),
            "{script}"
        );
        assert!(
            script.contains("kstretch_address default EXTERNAL-9094; if "),
            "{script}"
        );
        let mounts = container["volumeMounts"].to_string();
        assert!(mounts.contains("/opt/kafka/node-addresses") && mounts.contains("/opt/kafka/init"));
        // Broker 2 was given its host: nothing to find.
        let given = pod("my-cluster-brokers-2");
        assert!(
            !given["spec"]["containers"][0]["command"][2]
                .as_str()
                .unwrap()
                .contains("kstretch_address")
        );
        assert!(!given.to_string().contains("node-addresses"));
    }

    #[test]
    fn a_node_mounts_its_config_and_certificates_then_each_data_volume() {
        let k = kafka(serde_json::json!({}));
        let jbod = serde_json::json!({"spec": {"storage": {"type": "jbod", "volumes": [
            {"id": 0, "type": "persistent-claim", "size": "1Gi", "kraftMetadata": "shared"},
            {"id": 1, "type": "ephemeral", "sizeLimit": "2Gi"},
        ]}}});
        let d = pool("dual", &["controller", "broker"], 1, jbod);
        let resolved = resolve(&k, &[&d], &members()).unwrap();
        let (mounts, volumes) = pod_volumes(&resolved.pools[0], "my-cluster-dual-0");
        let mounts: Vec<Value> = mounts.iter().map(objects::value).collect();
        let volumes: Vec<Value> = volumes.iter().map(objects::value).collect();
        let mount_names: Vec<_> = mounts.iter().map(|m| m["name"].clone()).collect();
        assert_eq!(
            mount_names,
            ["kafka-config", "cluster-certs", "data-0", "data-1"]
        );
        assert_eq!(mounts[3]["mountPath"], "/var/lib/kafka/data-1");
        assert_eq!(
            volumes[2]["persistentVolumeClaim"]["claimName"],
            "data-0-my-cluster-dual-0"
        );
        assert_eq!(volumes[3]["emptyDir"]["sizeLimit"], "2Gi");
    }

    type ObjectsByAlias = BTreeMap<String, Vec<Value>>;

    /// Kafkas of several shapes, each as built today: stretched pools, a dual pool with a TLS
    /// listener, persistent storage and a pod template, and the per-node Services of NodePort
    /// addressing (its nodes are built once those have addresses, which needs the agents).
    fn pinned_shapes() -> Vec<(&'static str, Option<Built>, ObjectsByAlias)> {
        use crate::kafka::resolve::{ADDRESSING_ANNOTATION, NODE_PORT_HOSTS_ANNOTATION};
        let stretched = {
            let k = kafka(serde_json::json!({}));
            let c = pool("controllers", &["controller"], 3, serde_json::json!({}));
            let b = pool(
                "brokers",
                &["broker"],
                2,
                serde_json::json!({"metadata": {"annotations": {"strimzi.io/stretch-cluster-alias": "beta"}}}),
            );
            (
                k,
                vec![c, b],
                ids(&[("controllers", &[0, 1, 2]), ("brokers", &[3, 4])]),
            )
        };
        let secured = {
            let k = kafka(serde_json::json!({"spec": {"kafka": {
                "listeners": [
                    {"name": "plain", "port": 9092, "type": "internal", "tls": false},
                    {"name": "tls", "port": 9093, "type": "internal", "tls": true}],
                "config": {"min.insync.replicas": 2, "default.replication.factor": 3},
                "template": {"pod": {"metadata": {"labels": {"team": "data"}},
                                     "terminationGracePeriodSeconds": 60}}}}}));
            let d = pool(
                "dual",
                &["controller", "broker"],
                3,
                serde_json::json!({"spec": {"storage": {"type": "jbod", "volumes": [
                    {"id": 0, "type": "persistent-claim", "size": "10Gi", "deleteClaim": true},
                    {"id": 1, "type": "persistent-claim", "class": "fast",
                     "selector": {"disk": "ssd"}, "volumeAttributesClass": "gold"}]}}}),
            );
            (k, vec![d], ids(&[("dual", &[0, 1, 2])]))
        };
        let node_ports = {
            let k = kafka(serde_json::json!({"metadata": {"annotations": {
                ADDRESSING_ANNOTATION: "nodeport",
                NODE_PORT_HOSTS_ANNOTATION: "alpha=10.0.0.1,beta=10.0.0.2"}}}));
            let a = pool("a", &["controller", "broker"], 2, serde_json::json!({}));
            let b = pool(
                "b",
                &["controller", "broker"],
                1,
                serde_json::json!({"metadata": {"annotations": {"strimzi.io/stretch-cluster-alias": "beta"}}}),
            );
            (k, vec![a, b], ids(&[("a", &[0, 1]), ("b", &[2])]))
        };
        let tuned = {
            let k = kafka(serde_json::json!({}));
            let d = pool(
                "tuned",
                &["controller", "broker"],
                1,
                serde_json::json!({"spec": {
                    "resources": {"requests": {"cpu": "500m", "memory": "2Gi"},
                                  "limits": {"memory": "2Gi"}},
                    "jvmOptions": {"-Xms": "1g", "-Xmx": "1g", "-XX": {"UseG1GC": "true"},
                                   "javaSystemProperties": [{"name": "a", "value": "b"}]},
                    "storage": {"type": "jbod", "volumes": [
                        {"id": 0, "type": "ephemeral", "sizeLimit": "2Gi"},
                        {"id": 1, "type": "ephemeral"}]}}}),
            );
            (k, vec![d], ids(&[("tuned", &[0])]))
        };
        [
            ("stretched", stretched),
            ("secured", secured),
            ("node-ports", node_ports),
            ("tuned", tuned),
        ]
        .into_iter()
        .map(|(name, (k, pools, ids))| {
            let pools: Vec<&kstretch_api::KafkaNodePool> = pools.iter().collect();
            let resolved = resolve(&k, &pools, &members()).unwrap();
            let built = resolved
                .per_node
                .is_none()
                .then(|| build(&k, &resolved, &ids, "abc").unwrap());
            let services = per_node_services("my-cluster", "kafka", &resolved, &ids);
            (name, built, services)
        })
        .collect()
    }

    /// What is built today, pinned: every pod's revision (a change rolls every pod of every
    /// user on upgrade) and a digest of every object. A change that means to alter them
    /// rewrites the file with `KSTRETCH_PIN=write cargo test -p kstretch-central pinned`, and
    /// says why in its commit.
    #[test]
    fn what_is_built_is_pinned() {
        use crate::testing::digests;
        let mut pinned = serde_json::Map::new();
        for (name, built, services) in pinned_shapes() {
            let revisions: BTreeMap<String, String> = built
                .iter()
                .flat_map(|b| b.nodes.values())
                .map(|n| (n.pod.clone(), n.revision.clone()))
                .collect();
            let objects: BTreeMap<String, String> = built
                .iter()
                .flat_map(|b| &b.objects)
                .chain(&services)
                .flat_map(|(alias, objects)| digests(&format!("{alias}/"), objects))
                .collect();
            pinned.insert(
                name.to_owned(),
                serde_json::json!({"revisions": revisions, "objects": objects}),
            );
        }
        crate::testing::pinned(
            "src/kafka/testdata/pinned-build.json",
            &Value::Object(pinned),
        );
    }
}
