//! The Kubernetes objects one Kafka cluster needs in each member cluster: per pool a
//! StrimziPodSet `<kafka>-<pool>` with pods `<kafka>-<pool>-<id>`, per node a ConfigMap with its
//! complete KRaft configuration, a Secret with its certificate, key and the cluster CA
//! certificate (never the CA key), and its PVCs, and per member cluster the headless and
//! bootstrap Services (plus a ServiceExport with Multi-Cluster Services). Pure: resources in,
//! JSON out.

use std::collections::{BTreeMap, BTreeSet};

use kstretch_api::storage::SingleVolumeStorage;
use kstretch_api::{Kafka, names};
use kstretch_core::kraft::{
    self, Addressing, CONTROLPLANE_PORT, ConfigError, KafkaCluster, Node, REPLICATION_PORT,
    Rendered, Volume,
};
use kstretch_core::node_ids::Role;
use kube::ResourceExt;
use serde_json::{Map, Value, json};

use super::resolve::{PerNode, Resolved, ResolvedPool};
use crate::pki::NodeCerts;
use crate::pod_template::PodParts;

/// Kafka version run when `Kafka.spec.kafka.version` is not set.
pub const DEFAULT_KAFKA_VERSION: &str = "4.1.2";
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
}

/// Everything built for one Kafka cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Built {
    pub cluster: KafkaCluster,
    pub objects: BTreeMap<String, Vec<Value>>,
    pub nodes: BTreeMap<i32, BuiltNode>,
    pub warnings: Vec<String>,
    pub kafka_version: String,
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
                Value::String("certificate-authority".to_owned()),
            );
            let files = data
                .iter()
                .filter(|(key, _)| !key.ends_with(".key"))
                .map(|(key, bytes)| (key.clone(), bytes.as_slice()));
            objects.push(secret(names.meta(name, labels), files));
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
    let version = spec
        .version
        .clone()
        .unwrap_or_else(|| DEFAULT_KAFKA_VERSION.to_owned());
    let image = spec
        .image
        .clone()
        .unwrap_or_else(|| format!("apache/kafka:{version}"));
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
    };

    let mut objects: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut built_nodes = BTreeMap::new();
    for pool in &resolved.pools {
        // A moving pool has a pod set in each cluster: its own, and the one it leaves.
        let mut by_alias: BTreeMap<&str, Vec<i32>> =
            BTreeMap::from([(pool.alias.as_str(), vec![])]);
        for &id in ids.get(&pool.name).into_iter().flatten() {
            by_alias.entry(pool.alias_of(id)).or_default().push(id);
        }
        for (alias, pool_ids) in by_alias {
            let out = objects.entry(alias.to_owned()).or_default();
            let mut pods = Vec::new();
            for &id in &pool_ids {
                let Some(config) = configs.get(&id) else {
                    continue;
                };
                let node = cluster
                    .node(id)
                    .cloned()
                    .ok_or(ConfigError::NoControllers {
                        kafka: name.clone(),
                    })?;
                let text = config.to_properties_text();
                let pod_name = kraft::pod_name(&name, &pool.name, id);
                let Some(cert) = certs.nodes.get(&pod_name) else {
                    return Err(ConfigError::CertificatePending { node: id });
                };
                let format = kraft::format_arguments(&cluster, &node, initial_voters)?;
                out.push(config_map(&ctx, pool, &pod_name, &text, &format));
                out.push(certificate_secret(&ctx, pool, &pod_name, cert, certs));
                out.extend(claims(&ctx, pool, &pod_name));
                // A renewed certificate or CA rolls the node, which reads them at start.
                let mut tls = vec![cert.cert.as_str(), certs.ca_cert.as_str()];
                tls.extend(certs.clients_ca_cert.as_deref());
                tls.extend(
                    certs
                        .listeners
                        .values()
                        .flat_map(|p| [p.cert.as_str(), p.key.as_str()]),
                );
                let rolling = config.rolling_text();
                let (pod, revision) = pod(&ctx, pool, &node, &pod_name, &rolling, &tls);
                pods.push(pod);
                built_nodes.insert(
                    id,
                    BuiltNode {
                        id,
                        pool: pool.name.clone(),
                        alias: alias.to_owned(),
                        pod: pod_name,
                        roles: pool.roles.clone(),
                        revision,
                    },
                );
            }
            out.push(pod_set(&ctx, pool, pods));
        }
    }
    for (alias, services) in per_node_services(&name, &namespace, resolved, ids) {
        objects.entry(alias).or_default().extend(services);
    }
    // Services wherever the cluster has nodes, so every member resolves the same names.
    let aliases: Vec<String> = objects.keys().cloned().collect();
    for alias in aliases {
        let out = objects.entry(alias).or_default();
        out.push(headless_service(&ctx));
        out.push(bootstrap_service(&ctx));
        if matches!(cluster.addressing, Addressing::MultiClusterServices { .. }) {
            out.push(service_export(&ctx, &kraft::headless_service_name(&name)));
            out.push(service_export(&ctx, &kraft::bootstrap_service_name(&name)));
        }
    }
    Ok(Built {
        cluster,
        objects,
        nodes: built_nodes,
        warnings,
        kafka_version: version,
    })
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
    fn labels(&self) -> Map<String, Value> {
        let mut labels = Map::new();
        for (k, v) in [
            (names::CLUSTER, self.kafka.to_owned()),
            (names::NAME, self.component()),
            (names::KIND, "Kafka".to_owned()),
            (names::COMPONENT_TYPE, "kafka".to_owned()),
            (names::APP_NAME, "kafka".to_owned()),
            (names::APP_INSTANCE, self.kafka.to_owned()),
            (names::APP_PART_OF, format!("strimzi-{}", self.kafka)),
        ] {
            labels.insert(k.to_owned(), Value::String(v));
        }
        labels
    }

    fn pool_labels(&self, pool: &str) -> Map<String, Value> {
        let mut labels = self.labels();
        labels.insert(names::POOL_NAME.to_owned(), Value::String(pool.to_owned()));
        labels
    }

    fn meta(&self, name: &str, labels: Map<String, Value>) -> Value {
        json!({"name": name, "namespace": self.namespace, "labels": labels})
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

fn config_map(ctx: &Ctx<'_>, pool: &ResolvedPool, pod: &str, text: &str, format: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": ctx.meta(pod, ctx.pool_labels(&pool.name)),
        "data": {CONFIG_KEY: text, FORMAT_KEY: format, "cluster.id": ctx.cluster_id}
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
    secret(
        ctx.meta(pod, ctx.pool_labels(&pool.name)),
        files.into_iter().map(|(k, v)| (k, v.as_bytes())),
    )
}

/// An `Opaque` Secret with `metadata` and the files `data`.
pub fn secret<'a>(metadata: Value, data: impl IntoIterator<Item = (String, &'a [u8])>) -> Value {
    let data: Map<String, Value> = data
        .into_iter()
        .map(|(key, bytes)| {
            let value = serde_json::to_value(k8s_openapi::ByteString(bytes.to_vec()));
            (key, value.unwrap_or_default())
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "type": "Opaque",
           "data": data})
}

fn claims(ctx: &Ctx<'_>, pool: &ResolvedPool, pod: &str) -> Vec<Value> {
    pool_volumes(pool)
        .into_iter()
        .filter_map(|(storage, volume)| match storage {
            SingleVolumeStorage::PersistentClaim(claim) => {
                let mut metadata = ctx.meta(&claim_name(&volume, pod), ctx.pool_labels(&pool.name));
                metadata["annotations"] = json!({
                    names::DELETE_CLAIM: claim.delete_claim.unwrap_or(false).to_string()
                });
                let mut spec = json!({
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": claim.size.clone().unwrap_or_else(|| "1Gi".into())}}
                });
                if let Some(class) = &claim.class {
                    spec["storageClassName"] = json!(class);
                }
                if let Some(selector) = &claim.selector {
                    spec["selector"] = json!({"matchLabels": selector});
                }
                if let Some(vac) = &claim.volume_attributes_class {
                    spec["volumeAttributesClassName"] = json!(vac);
                }
                Some(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                            "metadata": metadata, "spec": spec}))
            }
            SingleVolumeStorage::Ephemeral(_) => None,
        })
        .collect()
}

/// The pod definition and its revision (a hash of the definition and `config`, the rolling part
/// of the node's configuration, so a configuration change rolls the pod although the pod spec is
/// unchanged).
fn pod(
    ctx: &Ctx<'_>,
    pool: &ResolvedPool,
    node: &Node,
    pod_name: &str,
    config: &str,
    tls: &[&str],
) -> (Value, String) {
    let mut labels = ctx.pool_labels(&pool.name);
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
    let template_pod = pool
        .template
        .as_ref()
        .and_then(|t| t.get("pod"))
        .and_then(Value::as_object);
    if let Some(extra) = template_pod
        .and_then(|p| p.get("metadata"))
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
    {
        for (k, v) in extra {
            labels.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    let mut annotations = Map::new();
    annotations.insert(names::KAFKA_VERSION.to_owned(), json!(ctx.version));
    if let Some(extra) = template_pod
        .and_then(|p| p.get("metadata"))
        .and_then(|m| m.get("annotations"))
        .and_then(Value::as_object)
    {
        for (k, v) in extra {
            annotations.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }

    let mut ports = Vec::new();
    if node.is_controller() {
        ports.push(json!({"name": "tcp-ctrlplane", "containerPort": CONTROLPLANE_PORT}));
    }
    if node.is_broker() {
        ports.push(json!({"name": "tcp-replication", "containerPort": REPLICATION_PORT}));
        for (name, port) in &ctx.listener_ports {
            ports.push(json!({"name": format!("tcp-{name}"), "containerPort": port}));
        }
    }
    let probe_port = if node.is_broker() {
        REPLICATION_PORT
    } else {
        CONTROLPLANE_PORT
    };

    let mut mounts = vec![
        json!({"name": "kafka-config", "mountPath": CONFIG_DIR}),
        json!({"name": "cluster-certs", "mountPath": kraft::CERTS_DIR, "readOnly": true}),
    ];
    let mut volumes = vec![
        json!({"name": "kafka-config", "configMap": {"name": pod_name}}),
        json!({"name": "cluster-certs", "secret": {"secretName": pod_name, "defaultMode": 0o440}}),
    ];
    for (v, volume) in pool_volumes(pool) {
        let name = volume_name(&volume);
        mounts.push(json!({"name": name, "mountPath": volume.mount_path()}));
        volumes.push(match &v {
            SingleVolumeStorage::PersistentClaim(_) => {
                json!({"name": name, "persistentVolumeClaim": {"claimName": claim_name(&volume, pod_name)}})
            }
            SingleVolumeStorage::Ephemeral(e) => match &e.size_limit {
                Some(limit) => json!({"name": name, "emptyDir": {"sizeLimit": limit}}),
                None => json!({"name": name, "emptyDir": {}}),
            },
        });
    }

    let release = ctx
        .metadata_version
        .map(|mv| format!(" --release-version '{mv}'"))
        .unwrap_or_default();
    // Format once (--ignore-formatted keeps existing data), with the quorum arguments of the
    // moment the storage is empty, then run Kafka in the foreground. The storage tool is a JVM
    // of its own: it runs only while a directory lacks its meta.properties (as Strimzi's start
    // script does), so a restart starts one JVM, not two.
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
    let script = format!(
        "set -e; if {unformatted}; then /opt/kafka/bin/kafka-storage.sh format --ignore-formatted --cluster-id \"$KAFKA_CLUSTER_ID\" --config {CONFIG_DIR}/{CONFIG_KEY}{release} $(cat {CONFIG_DIR}/{FORMAT_KEY} 2>/dev/null); fi; exec /opt/kafka/bin/kafka-server-start.sh {CONFIG_DIR}/{CONFIG_KEY}"
    );
    let mut env = vec![json!({"name": "KAFKA_CLUSTER_ID", "value": ctx.cluster_id})];
    if let Some(jvm) = &pool.jvm_options {
        let mut heap = Vec::new();
        if let Some(xms) = &jvm.xms {
            heap.push(format!("-Xms{xms}"));
        }
        if let Some(xmx) = &jvm.xmx {
            heap.push(format!("-Xmx{xmx}"));
        }
        if !heap.is_empty() {
            env.push(json!({"name": "KAFKA_HEAP_OPTS", "value": heap.join(" ")}));
        }
        let mut opts: Vec<String> = jvm
            .xx
            .iter()
            .flatten()
            .map(|(k, v)| match v.as_str() {
                "true" => format!("-XX:+{k}"),
                "false" => format!("-XX:-{k}"),
                _ => format!("-XX:{k}={v}"),
            })
            .collect();
        opts.extend(jvm.java_system_properties.iter().filter_map(|p| {
            Some(format!(
                "-D{}={}",
                p.name.as_ref()?,
                p.value.clone().unwrap_or_default()
            ))
        }));
        if !opts.is_empty() {
            env.push(json!({"name": "KAFKA_OPTS", "value": opts.join(" ")}));
        }
    }
    let mut container = json!({
        "name": "kafka",
        "image": ctx.image,
        "command": ["/bin/sh", "-c", script],
        "env": env,
        "ports": ports,
        "volumeMounts": mounts,
        "readinessProbe": {"tcpSocket": {"port": probe_port}, "initialDelaySeconds": 5, "periodSeconds": 5},
        "livenessProbe": {"tcpSocket": {"port": probe_port}, "initialDelaySeconds": 60, "periodSeconds": 10},
    });
    if let Some(resources) = &pool.resources
        && let Ok(value) = serde_json::to_value(resources)
    {
        container["resources"] = value;
    }

    let subdomain = kraft::headless_service_name(ctx.kafka);
    let mut pod = crate::pod_template::pod(PodParts {
        name: pod_name,
        namespace: ctx.namespace,
        subdomain: &subdomain,
        container,
        volumes,
        labels,
        annotations,
        template: template_pod,
    });
    let definition = serde_json::to_vec(&pod).unwrap_or_default();
    let mut parts = vec![definition.as_slice(), config.as_bytes()];
    parts.extend(tls.iter().map(|t| t.as_bytes()));
    let revision = kraft::revision(&parts);
    pod["metadata"]["annotations"][names::REVISION] = json!(revision);
    (pod, revision)
}

fn pod_set(ctx: &Ctx<'_>, pool: &ResolvedPool, pods: Vec<Value>) -> Value {
    let selector = json!({
        names::CLUSTER: ctx.kafka,
        names::NAME: ctx.component(),
        names::KIND: "Kafka",
        names::POOL_NAME: pool.name,
    });
    let mut podset = json!({
        "apiVersion": "core.strimzi.io/v1", "kind": "StrimziPodSet",
        "metadata": ctx.meta(&format!("{}-{}", ctx.kafka, pool.name), ctx.pool_labels(&pool.name)),
        "spec": {"selector": {"matchLabels": selector}, "pods": pods}
    });
    // Read back by a central that lost the `Kafka`'s status, to adopt what runs.
    podset["metadata"]["annotations"][names::CLUSTER_ID] = json!(ctx.cluster_id);
    podset["metadata"]["annotations"][names::CONTROLLER_QUORUM] = json!(match ctx.quorum {
        kraft::QuorumMode::Static => "static",
        kraft::QuorumMode::Dynamic => "dynamic",
    });
    podset
}

fn service_ports(ctx: &Ctx<'_>, controlplane: bool) -> Vec<Value> {
    let mut ports = Vec::new();
    if controlplane {
        ports.push(json!({"name": "tcp-ctrlplane", "port": CONTROLPLANE_PORT, "targetPort": CONTROLPLANE_PORT, "protocol": "TCP"}));
    }
    ports.push(json!({"name": "tcp-replication", "port": REPLICATION_PORT, "targetPort": REPLICATION_PORT, "protocol": "TCP"}));
    for (name, port) in &ctx.listener_ports {
        ports.push(json!({"name": format!("tcp-{name}"), "port": port, "targetPort": port, "protocol": "TCP"}));
    }
    ports
}

fn headless_service(ctx: &Ctx<'_>) -> Value {
    let selector =
        json!({names::CLUSTER: ctx.kafka, names::NAME: ctx.component(), names::KIND: "Kafka"});
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": ctx.meta(&kraft::headless_service_name(ctx.kafka), ctx.labels()),
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": true, "selector": selector,
                 "ports": service_ports(ctx, true)}
    })
}

fn bootstrap_service(ctx: &Ctx<'_>) -> Value {
    let selector = json!({names::CLUSTER: ctx.kafka, names::NAME: ctx.component(),
                          names::KIND: "Kafka", names::BROKER_ROLE: "true"});
    let mut labels = ctx.labels();
    labels.insert(names::DISCOVERY.to_owned(), json!("true"));
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": ctx.meta(&kraft::bootstrap_service_name(ctx.kafka), labels),
        "spec": {"type": "ClusterIP", "selector": selector, "ports": service_ports(ctx, false)}
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
            let ports: Vec<Value> = ports
                .iter()
                .map(|(listener, port)| {
                    json!({"name": super::addresses::port_name(listener), "port": port,
                           "targetPort": port, "protocol": "TCP"})
                })
                .collect();
            let mut labels = naming.pool_labels(&pool.name);
            labels.insert(names::NODE_SERVICE.to_owned(), json!("true"));
            out.entry(pool.alias_of(id).to_owned()).or_default().push(json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": naming.meta(&kraft::per_node_service_name(kafka, &pool.name, id), labels),
                "spec": {
                    "type": type_,
                    "selector": {names::CLUSTER: kafka, names::POD_NAME: pod},
                    // The quorum forms before any node is ready: it must be reachable then.
                    "publishNotReadyAddresses": true,
                    "ports": ports,
                }
            }));
        }
    }
    out
}

/// KEP-1645: exporting the service makes `<svc>.<ns>.svc.clusterset.local` (and, for the
/// headless one, `<pod>.<cluster>.<svc>...`) resolvable in every member cluster.
fn service_export(ctx: &Ctx<'_>, service: &str) -> Value {
    json!({
        "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceExport",
        "metadata": ctx.meta(service, ctx.labels()),
    })
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
        let model = cluster_model(k, r, ids, cluster_id, kraft::QuorumMode::Static);
        super::build(k, r, ids, model, &certs(k, r, ids), &BTreeMap::new())
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
        let after = super::build(&k, &resolved, &ids, model, &renewed, &BTreeMap::new()).unwrap();
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
}
