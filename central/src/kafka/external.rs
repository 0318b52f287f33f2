//! External listeners (`nodeport`, `loadbalancer`, `ingress`, `route`, `tlsroute`), with
//! Strimzi's object names: in every member cluster that runs brokers, a bootstrap Service over
//! its brokers and one Service per broker; where each broker advertises the listener
//! (`nodeport`: the node port of its Service, on the address of the Kubernetes node its pod runs
//! on, which the pod finds at start in a table of its cluster's node addresses; `loadbalancer`:
//! its Service's load balancer address; the routed types: its `host` on 443, once its cluster
//! has taken the routing objects of [`crate::kafka::routes`]); and the addresses
//! `status.listeners` shows. Pure.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ConfigMap, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kstretch_api::kafka::{
    GenericKafkaListener, KafkaListenerType, ListenerAddress, ListenerStatus,
};
use kstretch_api::names;
use kstretch_core::kraft::{self, Advertised, AdvertisedHost, Listener};
use kstretch_proto::agent::v1::{ApplyReport, NodeStatus, Outcome, PodSetStatus, ServiceStatus};
use serde_json::Value;

use crate::objects;

/// The kinds of node address a `nodeport` listener may prefer, as Kubernetes names them, in
/// the order Strimzi falls back through when the preferred one is missing.
pub const ADDRESS_TYPES: [&str; 5] = [
    "ExternalDNS",
    "ExternalIP",
    "InternalDNS",
    "InternalIP",
    "Hostname",
];
/// The table's key of a node's address without a preferred type.
const DEFAULT_TYPE: &str = "default";
/// Where the table of node addresses is mounted in a broker, and its key.
pub const NODE_TABLE_DIR: &str = "/opt/kafka/node-addresses";
pub const NODE_TABLE_KEY: &str = "addresses";
/// The pod's environment variable with the node it runs on.
pub const NODE_NAME_ENV: &str = "KSTRETCH_NODE_NAME";

/// The port clients reach a routed listener (`ingress`, `route`, `tlsroute`) on, as Strimzi.
pub const ROUTED_PORT: u16 = 443;

/// Why an external listener cannot be served as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("listener {name} (port {port}): .spec.kafka.listeners[{index}].{field} {problem}")]
pub struct ExternalProblem {
    pub name: String,
    pub port: i32,
    pub index: usize,
    /// The field below the listener (`configuration.bootstrap.host`, `tls`).
    pub field: String,
    pub problem: String,
}

impl ExternalProblem {
    pub fn reason(&self) -> &'static str {
        "InvalidListener"
    }
}

/// What a `Service` of a listener adds from `configuration.bootstrap` or `brokers[]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceSettings {
    /// `nodePort` (`nodeport` listeners).
    pub node_port: Option<i32>,
    /// `loadBalancerIP` (`loadbalancer` listeners).
    pub load_balancer_ip: Option<String>,
    /// `host` (the routed types): the name clients reach it by.
    pub host: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

/// `configuration.brokers[]` of one broker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrokerSettings {
    pub service: ServiceSettings,
    pub advertised_host: Option<String>,
    pub advertised_port: Option<u16>,
}

/// One external listener, as its `configuration` asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalListener {
    pub name: String,
    pub port: u16,
    pub tls: bool,
    pub exposure: Exposure,
    /// `externalTrafficPolicy`, `Cluster` unless set.
    pub traffic_policy: String,
    pub bootstrap: ServiceSettings,
    pub brokers: BTreeMap<i32, BrokerSettings>,
    /// `hostTemplate` (the routed types): a broker's host where `brokers[]` names none, with
    /// `{nodeId}` and `{nodePodName}` replaced.
    pub host_template: Option<String>,
    /// Strimzi's historical names for `external` on 9094 (a broker's Service named like its
    /// pod, port `tcp-external`); off where kstretch's per-node addressing has that name.
    pub legacy_names: bool,
}

/// How clients outside reach the brokers, and what only that type configures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exposure {
    /// `nodeport`: a node port on every node.
    NodePort {
        /// `preferredNodePortAddressType`; `None`: Strimzi's order ([`ADDRESS_TYPES`]).
        preferred: Option<String>,
    },
    /// `loadbalancer`: a load balancer address per Service.
    LoadBalancer {
        /// `loadBalancerSourceRanges`.
        source_ranges: Vec<String>,
        /// `class`: the Services' `loadBalancerClass`.
        class: Option<String>,
        /// `finalizers` of the Services.
        finalizers: Vec<String>,
        /// `allocateLoadBalancerNodePorts`.
        allocate_node_ports: Option<bool>,
    },
    /// `ingress`: an Ingress per Service, TLS passed through to the broker.
    Ingress {
        /// `class`: the Ingresses' `ingressClassName`.
        class: Option<String>,
    },
    /// `route`: an OpenShift Route per Service, TLS passed through.
    Route,
    /// `tlsroute`: a Gateway API TLSRoute per Service, attached to `parentRefs`.
    TlsRoute { parent_refs: Vec<Value> },
}

impl Exposure {
    /// Whether clients reach the brokers through routing objects at their `host` on 443.
    pub fn routed(&self) -> bool {
        matches!(
            self,
            Exposure::Ingress { .. } | Exposure::Route | Exposure::TlsRoute { .. }
        )
    }
}

/// The keys of an external listener's `configuration` that are served, by its type (none for
/// a type that is not external).
pub fn served_configuration(t: KafkaListenerType) -> &'static [&'static str] {
    use KafkaListenerType as T;
    match t {
        T::NodePort => &[
            "bootstrap",
            "brokers",
            "preferredNodePortAddressType",
            "externalTrafficPolicy",
        ],
        T::LoadBalancer => &[
            "bootstrap",
            "brokers",
            "externalTrafficPolicy",
            "loadBalancerSourceRanges",
            "class",
            "finalizers",
            "allocateLoadBalancerNodePorts",
        ],
        T::Ingress => &["bootstrap", "brokers", "hostTemplate", "class"],
        T::Route => &["bootstrap", "brokers", "hostTemplate"],
        T::TlsRoute => &["bootstrap", "brokers", "hostTemplate", "parentRefs"],
        T::Internal | T::ClusterIp => &[],
    }
}

/// The key of a Service's settings that only its listener's type has.
fn own_key(t: KafkaListenerType) -> &'static str {
    match t {
        KafkaListenerType::NodePort => "nodePort",
        KafkaListenerType::LoadBalancer => "loadBalancerIP",
        _ => "host",
    }
}

/// The keys of `configuration.bootstrap` that are served, by the listener's type.
pub fn bootstrap_keys(t: KafkaListenerType) -> [&'static str; 3] {
    [own_key(t), "labels", "annotations"]
}

/// The keys of `configuration.brokers[]` that are served, by the listener's type.
pub fn broker_keys(t: KafkaListenerType) -> [&'static str; 6] {
    [
        "broker",
        own_key(t),
        "labels",
        "annotations",
        "advertisedHost",
        "advertisedPort",
    ]
}

impl ExternalListener {
    /// The Kafka listener name (`EXTERNAL-9094`).
    pub fn config_name(&self) -> String {
        format!("{}-{}", self.name.to_uppercase(), self.port)
    }

    /// Strimzi's name for the Service port and its target (`tcp-external` for `external` on
    /// 9094, its historical name).
    fn port_name(&self) -> String {
        if self.legacy_names {
            "tcp-external".to_owned()
        } else {
            format!("tcp-{}", self.name)
        }
    }

    /// `<kafka>-kafka-<listener>-bootstrap`.
    pub fn bootstrap_name(&self, kafka: &str) -> String {
        format!("{kafka}-kafka-{}-bootstrap", self.name)
    }

    /// The bootstrap Ingress, Route or TLSRoute: Strimzi's `<kafka>-kafka-bootstrap` for
    /// `external` on 9094, else the bootstrap Service's name.
    pub fn bootstrap_route_name(&self, kafka: &str) -> String {
        if self.legacy_names {
            format!("{kafka}-kafka-bootstrap")
        } else {
            self.bootstrap_name(kafka)
        }
    }

    /// Where clients reach broker `b` of a routed listener: its `brokers[].host`, else the
    /// `hostTemplate` with its node ID and pod name.
    pub fn broker_host(&self, kafka: &str, b: &Broker) -> Option<String> {
        let given = self.brokers.get(&b.id).and_then(|s| s.service.host.clone());
        given.or_else(|| {
            let template = self.host_template.as_ref()?;
            Some(
                template
                    .replace("{nodeId}", &b.id.to_string())
                    .replace("{nodePodName}", &kraft::pod_name(kafka, &b.pool, b.id)),
            )
        })
    }

    /// What `brokers[]` sets for broker `id`'s Service (and routing object).
    pub fn broker_service(&self, id: i32) -> ServiceSettings {
        let settings = self.brokers.get(&id).map(|s| s.service.clone());
        settings.unwrap_or_default()
    }

    /// `<kafka>-<pool>-<listener>-<id>`, or Strimzi's `<kafka>-<pool>-<id>` for `external` on
    /// 9094: a broker's Service, and its Ingress, Route or TLSRoute.
    pub fn broker_service_name(&self, kafka: &str, pool: &str, id: i32) -> String {
        if self.legacy_names {
            kraft::pod_name(kafka, pool, id)
        } else {
            format!("{kafka}-{pool}-{}-{id}", self.name)
        }
    }
}

/// Listener `index`'s external settings; `None` for a type that is not external.
pub fn external(
    index: usize,
    listener: &GenericKafkaListener,
) -> Result<Option<ExternalListener>, ExternalProblem> {
    use KafkaListenerType as T;
    let t = listener.type_;
    if matches!(t, T::Internal | T::ClusterIp) {
        return Ok(None);
    }
    let at_listener = |field: &str, problem: &str| ExternalProblem {
        name: listener.name.clone(),
        port: listener.port,
        index,
        field: field.to_owned(),
        problem: problem.to_owned(),
    };
    let problem =
        |field: &str, problem: &str| at_listener(&format!("configuration.{field}"), problem);
    if matches!(t, T::Route | T::Ingress) && !listener.tls {
        return Err(at_listener(
            "tls",
            "must be true: route and ingress listeners pass TLS through to the brokers",
        ));
    }
    let empty = serde_json::Map::new();
    let config = listener.configuration.as_ref().unwrap_or(&empty);
    let text = |field: &str| -> Result<Option<String>, ExternalProblem> {
        match config.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(problem(field, "must be a string")),
        }
    };
    let exposure = match t {
        T::NodePort => {
            let preferred = text("preferredNodePortAddressType")?;
            if let Some(p) = &preferred
                && !ADDRESS_TYPES.contains(&p.as_str())
            {
                return Err(problem(
                    "preferredNodePortAddressType",
                    &format!("is {p:?}; it must be one of {}", ADDRESS_TYPES.join(", ")),
                ));
            }
            Exposure::NodePort { preferred }
        }
        T::LoadBalancer => load_balancer(config, &problem)?,
        T::Ingress => Exposure::Ingress {
            class: text("class")?,
        },
        T::Route => Exposure::Route,
        _ => match config.get("parentRefs") {
            Some(Value::Array(refs)) if !refs.is_empty() && refs.iter().all(Value::is_object) => {
                Exposure::TlsRoute {
                    parent_refs: refs.clone(),
                }
            }
            _ => {
                return Err(problem(
                    "parentRefs",
                    "must list the Gateways (parent references) the TLSRoutes attach to",
                ));
            }
        },
    };
    let traffic_policy = text("externalTrafficPolicy")?.unwrap_or_else(|| "Cluster".to_owned());
    if !["Cluster", "Local"].contains(&traffic_policy.as_str()) {
        return Err(problem(
            "externalTrafficPolicy",
            &format!("is {traffic_policy:?}; it must be Cluster or Local"),
        ));
    }
    let bootstrap = match config.get("bootstrap") {
        None | Some(Value::Null) => ServiceSettings::default(),
        Some(value) => service_settings(value, "bootstrap", t, &problem)?,
    };
    if exposure.routed() && bootstrap.host.is_none() {
        // Strimzi lets OpenShift name a Route; kstretch does not read that name back (yet).
        return Err(problem(
            "bootstrap.host",
            "is required: clients bootstrap through this host name, and every broker needs one too (brokers[].host or hostTemplate)",
        ));
    }
    let host_template = text("hostTemplate")?;
    let mut brokers = BTreeMap::new();
    let listed = match config.get("brokers") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(items)) => items.as_slice(),
        Some(_) => return Err(problem("brokers", "must be a list")),
    };
    for (i, item) in listed.iter().enumerate() {
        let at = format!("brokers[{i}]");
        let broker = item
            .get("broker")
            .and_then(Value::as_i64)
            .and_then(|b| i32::try_from(b).ok())
            .ok_or_else(|| problem(&format!("{at}.broker"), "must be the broker's node ID"))?;
        let advertised_port = match item.get("advertisedPort") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .and_then(|p| u16::try_from(p).ok())
                    .filter(|p| *p > 0)
                    .ok_or_else(|| {
                        problem(&format!("{at}.advertisedPort"), "must be a TCP port")
                    })?,
            ),
        };
        let advertised_host = match item.get("advertisedHost") {
            None | Some(Value::Null) => None,
            Some(Value::String(h)) if is_host(h) => Some(h.clone()),
            Some(_) => {
                return Err(problem(
                    &format!("{at}.advertisedHost"),
                    "must be a host name or an IP address",
                ));
            }
        };
        let settings = BrokerSettings {
            service: service_settings(item, &at, t, &problem)?,
            advertised_host,
            advertised_port,
        };
        if brokers.insert(broker, settings).is_some() {
            return Err(problem(
                &format!("{at}.broker"),
                &format!("names broker {broker} a second time"),
            ));
        }
    }
    let port = u16::try_from(listener.port).map_err(|_| problem("port", "is not a TCP port"))?;
    Ok(Some(ExternalListener {
        name: listener.name.clone(),
        port,
        tls: listener.tls,
        exposure,
        traffic_policy,
        bootstrap,
        brokers,
        host_template,
        legacy_names: listener.name == "external" && port == 9094,
    }))
}

/// The `loadbalancer` keys of a listener's `configuration`.
fn load_balancer(
    config: &serde_json::Map<String, Value>,
    problem: &impl Fn(&str, &str) -> ExternalProblem,
) -> Result<Exposure, ExternalProblem> {
    let list = |field: &str| -> Result<Vec<String>, ExternalProblem> {
        match config.get(field) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| match i {
                    Value::String(s) => Ok(s.clone()),
                    _ => Err(problem(field, "must be a list of strings")),
                })
                .collect(),
            Some(_) => Err(problem(field, "must be a list of strings")),
        }
    };
    let source_ranges = list("loadBalancerSourceRanges")?;
    if let Some(bad) = source_ranges.iter().find(|r| !is_cidr(r)) {
        return Err(problem(
            "loadBalancerSourceRanges",
            &format!("has {bad:?}, which is not a CIDR range (such as 192.0.2.0/24)"),
        ));
    }
    let class = match config.get("class") {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) => Some(c.clone()),
        Some(_) => return Err(problem("class", "must be a string")),
    };
    let allocate_node_ports = match config.get("allocateLoadBalancerNodePorts") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => {
            return Err(problem(
                "allocateLoadBalancerNodePorts",
                "must be true or false",
            ));
        }
    };
    Ok(Exposure::LoadBalancer {
        source_ranges,
        class,
        finalizers: list("finalizers")?,
        allocate_node_ports,
    })
}

/// An IPv4 or IPv6 range in CIDR notation.
fn is_cidr(range: &str) -> bool {
    let Some((address, bits)) = range.split_once('/') else {
        return false;
    };
    let max = match address.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => 32,
        Ok(std::net::IpAddr::V6(_)) => 128,
        Err(_) => return false,
    };
    bits.parse::<u8>().is_ok_and(|b| b <= max)
}

fn service_settings(
    value: &Value,
    at: &str,
    t: KafkaListenerType,
    problem: &impl Fn(&str, &str) -> ExternalProblem,
) -> Result<ServiceSettings, ExternalProblem> {
    let node_port = t == KafkaListenerType::NodePort;
    let load_balancer_ip = match value
        .get("loadBalancerIP")
        .filter(|_| t == KafkaListenerType::LoadBalancer)
    {
        None | Some(Value::Null) => None,
        Some(Value::String(ip)) if ip.parse::<std::net::IpAddr>().is_ok() => Some(ip.clone()),
        Some(_) => {
            return Err(problem(
                &format!("{at}.loadBalancerIP"),
                "must be an IP address",
            ));
        }
    };
    let node_port = match value.get("nodePort").filter(|_| node_port) {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_i64()
                .and_then(|p| i32::try_from(p).ok())
                .filter(|p| (1..=65535).contains(p))
                .ok_or_else(|| problem(&format!("{at}.nodePort"), "must be a TCP port"))?,
        ),
    };
    let strings = |key: &str| -> Result<BTreeMap<String, String>, ExternalProblem> {
        match value.get(key) {
            None | Some(Value::Null) => Ok(BTreeMap::new()),
            Some(Value::Object(map)) => map
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), s.clone())),
                    _ => Err(problem(&format!("{at}.{key}.{k}"), "must be a string")),
                })
                .collect(),
            Some(_) => Err(problem(&format!("{at}.{key}"), "must be a map of strings")),
        }
    };
    let host = match value.get("host").filter(|_| own_key(t) == "host") {
        None | Some(Value::Null) => None,
        Some(Value::String(h)) if is_host(h) => Some(h.clone()),
        Some(_) => return Err(problem(&format!("{at}.host"), "must be a host name")),
    };
    let labels = strings("labels")?;
    if let Some(key) = labels
        .keys()
        .find(|k| k.starts_with("strimzi.io/") && k.as_str() != names::CLUSTER)
    {
        return Err(problem(
            &format!("{at}.labels.{key}"),
            "is not allowed: labels starting with strimzi.io/ are the operator's",
        ));
    }
    Ok(ServiceSettings {
        node_port,
        load_balancer_ip,
        host,
        labels,
        annotations: strings("annotations")?,
    })
}

/// A DNS name or an IP address.
fn is_host(host: &str) -> bool {
    if host.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// One broker: its node ID, pool and member cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broker {
    pub id: i32,
    pub pool: String,
    pub alias: String,
}

/// Adds to `out`, by alias, one object of `bootstrap` in every member cluster that runs
/// brokers and one of `own` per broker.
pub fn per_cluster_and_broker(
    brokers: &[Broker],
    out: &mut BTreeMap<String, Vec<Value>>,
    bootstrap: impl Fn() -> Value,
    own: impl Fn(&Broker) -> Value,
) {
    let aliases: BTreeSet<&str> = brokers.iter().map(|b| b.alias.as_str()).collect();
    for alias in aliases {
        out.entry(alias.to_owned()).or_default().push(bootstrap());
    }
    for b in brokers {
        out.entry(b.alias.clone()).or_default().push(own(b));
    }
}

/// Each member cluster's Services of `listeners`, by alias: a bootstrap Service where brokers
/// run, and one per broker. `labels` are the Kafka's own.
pub fn services(
    kafka: &str,
    namespace: &str,
    listeners: &[ExternalListener],
    brokers: &[Broker],
    labels: &BTreeMap<String, String>,
) -> BTreeMap<String, Vec<Value>> {
    let mut out: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let selector = |extra: &[(&str, String)]| {
        let mut s = BTreeMap::from([
            (names::CLUSTER.to_owned(), kafka.to_owned()),
            (names::NAME.to_owned(), format!("{kafka}-kafka")),
            (names::KIND.to_owned(), "Kafka".to_owned()),
        ]);
        s.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
        s
    };
    for l in listeners {
        let service = |name: String, settings: &ServiceSettings, selector| {
            let mut all = labels.clone();
            all.extend(settings.labels.clone());
            let routed = l.exposure.routed();
            if !routed {
                // The agent reports the node ports and load balancer addresses of these.
                all.insert(names::NODE_SERVICE.to_owned(), "true".to_owned());
            }
            let mut metadata = objects::meta(&name, namespace, all);
            if !settings.annotations.is_empty() {
                metadata.annotations = Some(settings.annotations.clone());
            }
            let mut spec = ServiceSpec {
                type_: Some(if routed { "ClusterIP" } else { "NodePort" }.to_owned()),
                selector: Some(selector),
                external_traffic_policy: (!routed).then(|| l.traffic_policy.clone()),
                ports: Some(vec![ServicePort {
                    name: Some(l.port_name()),
                    port: l.port.into(),
                    target_port: Some(IntOrString::Int(l.port.into())),
                    node_port: settings.node_port,
                    protocol: Some("TCP".to_owned()),
                    ..Default::default()
                }]),
                ..Default::default()
            };
            if let Exposure::LoadBalancer {
                source_ranges,
                class,
                finalizers,
                allocate_node_ports,
            } = &l.exposure
            {
                spec.type_ = Some("LoadBalancer".to_owned());
                spec.load_balancer_ip = settings.load_balancer_ip.clone();
                spec.load_balancer_source_ranges =
                    (!source_ranges.is_empty()).then(|| source_ranges.clone());
                spec.load_balancer_class = class.clone();
                spec.allocate_load_balancer_node_ports = *allocate_node_ports;
                metadata.finalizers = (!finalizers.is_empty()).then(|| finalizers.clone());
            }
            objects::to_json(&Service {
                metadata,
                spec: Some(spec),
                status: None,
            })
        };
        per_cluster_and_broker(
            brokers,
            &mut out,
            || {
                service(
                    l.bootstrap_name(kafka),
                    &l.bootstrap,
                    selector(&[(names::BROKER_ROLE, "true".to_owned())]),
                )
            },
            |b| {
                let pod = kraft::pod_name(kafka, &b.pool, b.id);
                service(
                    l.broker_service_name(kafka, &b.pool, b.id),
                    &l.broker_service(b.id),
                    selector(&[(names::POOL_NAME, b.pool.clone()), (names::POD_NAME, pod)]),
                )
            },
        );
    }
    out
}

/// The listener each of the listeners' Services serves, by Service name (pure).
pub fn service_listeners(
    kafka: &str,
    listeners: &[ExternalListener],
    brokers: &[Broker],
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for l in listeners {
        out.insert(l.bootstrap_name(kafka), l.name.clone());
        for b in brokers {
            out.insert(l.broker_service_name(kafka, &b.pool, b.id), l.name.clone());
        }
    }
    out
}

/// Why the `Kafka` is not ready while an apiserver refuses a listener's Service.
pub const SERVICE_REFUSED: &str = "ListenerServiceRefused";

/// What the `Ready` condition says of `refused` listener Services: what to change, and that
/// everything else runs on.
pub fn refused_message(refused: &[String]) -> String {
    format!(
        "{}; give the listener a configuration its member cluster accepts (such as a nodePort inside the apiserver's node port range that no other Service uses): the rest of the Kafka runs as before",
        refused.join("; ")
    )
}

/// The listeners' Services (`services`, as [`service_listeners`] names them) that the
/// apiserver of a member cluster refused when its agent applied the snapshot of `reports`
/// (the current snapshot only, by alias): each a sentence naming the listener, the cluster,
/// the Service and the apiserver's words (a node port out of its range or taken).
pub fn refused(
    services: &BTreeMap<String, String>,
    namespace: &str,
    reports: &[(&str, &ApplyReport)],
) -> Vec<String> {
    let mut out = Vec::new();
    for (alias, report) in reports {
        for result in &report.results {
            let Some(o) = result.r#ref.as_ref() else {
                continue;
            };
            let listener = services
                .get(&o.name)
                .filter(|_| o.kind == "Service" && o.namespace == namespace);
            if let Some(listener) = listener.filter(|_| result.outcome() == Outcome::Rejected) {
                out.push(format!(
                    "listener {listener}: the apiserver of cluster {alias} refused Service {}: {}",
                    o.name, result.message
                ));
            }
        }
    }
    out
}

/// The node port of the one port of Service `name`, as the agent of its cluster reported it.
fn reported_node_port(services: &[ServiceStatus], namespace: &str, name: &str) -> Option<u16> {
    services
        .iter()
        .find(|s| s.namespace == namespace && s.name == name)?
        .ports
        .first()
        .and_then(|p| u16::try_from(p.node_port).ok())
        .filter(|p| *p > 0)
}

/// What the agents of the member clusters reported, by alias.
#[derive(Debug, Clone, Copy)]
pub struct Reports<'a> {
    pub services: &'a BTreeMap<String, Vec<ServiceStatus>>,
    /// `None` for a cluster whose agent has not listed its nodes.
    pub nodes: &'a BTreeMap<String, Option<Vec<NodeStatus>>>,
    pub podsets: &'a BTreeMap<String, Vec<PodSetStatus>>,
    /// What each cluster's apiserver said of the objects of its agent's last snapshot.
    pub applied: &'a BTreeMap<String, ApplyReport>,
}

/// Why a broker does not advertise an external listener yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unadvertised {
    /// Waiting for what a member cluster has not reported yet.
    Pending(String),
    /// The listener asks for what cannot be served as written.
    Invalid(String),
    /// A member cluster does not serve the API of the listener's routing objects.
    ApiNotServed(String),
}

impl Unadvertised {
    /// The sentence that says why.
    pub fn message(&self) -> &str {
        match self {
            Self::Pending(m) | Self::Invalid(m) | Self::ApiNotServed(m) => m,
        }
    }
}

/// Why the `Kafka` is not ready while a member cluster does not serve a listener's API.
pub const API_NOT_SERVED: &str = "ListenerApiNotServed";

/// What a member cluster's apiserver said when its agent last applied object `kind`/`name`.
fn applied_outcome<'a>(
    report: Option<&'a ApplyReport>,
    kind: &str,
    namespace: &str,
    name: &str,
) -> Option<&'a kstretch_proto::agent::v1::ObjectResult> {
    report?.results.iter().find(|r| {
        r.r#ref
            .as_ref()
            .is_some_and(|o| o.kind == kind && o.namespace == namespace && o.name == name)
    })
}

/// The load balancer addresses of Service `name`, as the agent of its cluster reported them.
fn reported_ingress<'a>(
    services: &'a [ServiceStatus],
    namespace: &str,
    name: &str,
) -> &'a [String] {
    services
        .iter()
        .find(|s| s.namespace == namespace && s.name == name)
        .map(|s| s.ingress.as_slice())
        .unwrap_or_default()
}

/// Fills in where each broker advertises each external listener of `listeners` (core's
/// listeners, matched by name): the user's `advertisedHost`/`advertisedPort`, else for
/// `nodeport` the node address the pod finds at start and its Service's node port, for
/// `loadbalancer` its Service's load balancer address and the listener's port, for the routed
/// types its host on 443. Returns why each broker that does not advertise a listener does not
/// (its Service's port or address not reported, its routing objects not applied or their API
/// not served, no host), and each cluster whose nodes are not listed.
pub fn advertise(
    kafka: &str,
    namespace: &str,
    external: &[ExternalListener],
    listeners: &mut [Listener],
    brokers: &[Broker],
    reports: Reports<'_>,
) -> Vec<Unadvertised> {
    let mut pending = Vec::new();
    let mut unlisted = BTreeSet::new();
    for l in external {
        let Some(listener) = listeners.iter_mut().find(|c| c.name == l.name) else {
            continue;
        };
        for b in brokers {
            let settings = l.brokers.get(&b.id).cloned().unwrap_or_default();
            let service = l.broker_service_name(kafka, &b.pool, b.id);
            let services = reports.services.get(&b.alias).map(Vec::as_slice);
            let services = services.unwrap_or_default();
            let advertised = match &l.exposure {
                Exposure::NodePort { preferred } => {
                    let Some(port) = settings
                        .advertised_port
                        .or_else(|| reported_node_port(services, namespace, &service))
                    else {
                        pending.push(Unadvertised::Pending(format!(
                            "listener {}: Service {service} in cluster {} has no node port yet",
                            l.name, b.alias
                        )));
                        continue;
                    };
                    let host = match settings.advertised_host {
                        Some(host) => AdvertisedHost::Fixed(host),
                        None => match reports.nodes.get(&b.alias).and_then(Option::as_ref) {
                            // What the pod would find on each node of its cluster.
                            Some(nodes) => AdvertisedHost::NodeAddress {
                                candidates: nodes
                                    .iter()
                                    .filter_map(|n| {
                                        find_address(&n.addresses, preferred.as_deref())
                                    })
                                    .map(str::to_owned)
                                    .collect(),
                            },
                            None => {
                                unlisted.insert(b.alias.clone());
                                continue;
                            }
                        },
                    };
                    Advertised {
                        host,
                        port,
                        names: BTreeSet::new(),
                    }
                }
                Exposure::LoadBalancer { .. } => {
                    // A TLS client verifies the broker's name both where it bootstraps and
                    // where the broker sends it: both addresses go into the certificate.
                    let own = reported_ingress(services, namespace, &service);
                    let bootstrap = l.bootstrap_name(kafka);
                    let bootstrap = reported_ingress(services, namespace, &bootstrap);
                    let waiting = match own.first() {
                        None => Err(service.clone()),
                        Some(_) if l.tls && bootstrap.is_empty() => Err(l.bootstrap_name(kafka)),
                        Some(first) => Ok(first),
                    };
                    let first = match waiting {
                        Ok(first) => first,
                        Err(waiting) => {
                            pending.push(Unadvertised::Pending(format!(
                                "listener {}: Service {waiting} in cluster {} has no load balancer address yet",
                                l.name, b.alias
                            )));
                            continue;
                        }
                    };
                    let host = settings.advertised_host.unwrap_or_else(|| first.clone());
                    Advertised {
                        host: AdvertisedHost::Fixed(host),
                        port: settings.advertised_port.unwrap_or(l.port),
                        names: own.iter().chain(bootstrap).cloned().collect(),
                    }
                }
                _ => match routed(kafka, namespace, l, b, reports) {
                    Ok(host) => Advertised {
                        host: AdvertisedHost::Fixed(
                            settings.advertised_host.unwrap_or(host.clone()),
                        ),
                        port: settings.advertised_port.unwrap_or(ROUTED_PORT),
                        names: [host].into_iter().chain(l.bootstrap.host.clone()).collect(),
                    },
                    Err(why) => {
                        pending.push(why);
                        continue;
                    }
                },
            };
            listener.advertised.insert(b.id, advertised);
        }
    }
    pending.extend(unlisted.into_iter().map(|alias| {
        Unadvertised::Pending(format!(
            "the agent of cluster {alias} has not listed its nodes' addresses (its role needs get, list and watch on nodes)"
        ))
    }));
    pending
}

/// The host broker `b` is reached at through a routed listener, once its cluster's apiserver
/// has taken the listener's routing objects (bootstrap and the broker's own).
fn routed(
    kafka: &str,
    namespace: &str,
    l: &ExternalListener,
    b: &Broker,
    reports: Reports<'_>,
) -> Result<String, Unadvertised> {
    let host = l.broker_host(kafka, b).ok_or_else(|| {
        Unadvertised::Invalid(format!(
            "listener {}: broker {} has no host: set configuration.brokers[].host for it or configuration.hostTemplate (kstretch does not read the host a Route is given)",
            l.name, b.id
        ))
    })?;
    if !is_host(&host) {
        return Err(Unadvertised::Invalid(format!(
            "listener {}: broker {}'s host {host:?} is not a host name",
            l.name, b.id
        )));
    }
    let (api_version, kind, what) = routing_kind(&l.exposure);
    let report = reports.applied.get(&b.alias);
    for name in [
        l.bootstrap_route_name(kafka),
        l.broker_service_name(kafka, &b.pool, b.id),
    ] {
        let Some(result) = applied_outcome(report, kind, namespace, &name) else {
            return Err(Unadvertised::Pending(format!(
                "listener {}: {kind} {name} is not applied in cluster {} yet",
                l.name, b.alias
            )));
        };
        match result.outcome() {
            Outcome::Applied => {}
            Outcome::Rejected if result.code == 404 => {
                return Err(Unadvertised::ApiNotServed(format!(
                    "listener {}: cluster {} does not serve {api_version} {kind} ({what}); install it there or give the listener a type the cluster serves",
                    l.name, b.alias
                )));
            }
            _ => {
                return Err(Unadvertised::Invalid(format!(
                    "listener {}: the apiserver of cluster {} refused {kind} {name}: {}",
                    l.name, b.alias, result.message
                )));
            }
        }
    }
    Ok(host)
}

/// The API version, kind and a word on what serves it, of a routed listener's objects.
pub fn routing_kind(exposure: &Exposure) -> (&'static str, &'static str, &'static str) {
    match exposure {
        Exposure::Route => ("route.openshift.io/v1", "Route", "OpenShift routes"),
        Exposure::TlsRoute { .. } => (
            "gateway.networking.k8s.io/v1",
            "TLSRoute",
            "Gateway API TLS routes",
        ),
        _ => (
            "networking.k8s.io/v1",
            "Ingress",
            "Ingress, TLS passed through by its controller",
        ),
    }
}

/// The address of a node with `addresses` (type, address) as Strimzi picks it: the preferred
/// type if the node has one, else the first of [`ADDRESS_TYPES`] it has.
pub fn find_address<'a>(
    addresses: &'a [kstretch_proto::agent::v1::NodeAddress],
    preferred: Option<&str>,
) -> Option<&'a str> {
    let of = |t: &str| {
        addresses
            .iter()
            .find(|a| a.r#type == t)
            .map(|a| a.address.as_str())
    };
    preferred
        .and_then(of)
        .or_else(|| ADDRESS_TYPES.iter().find_map(|t| of(t)))
}

/// The table of a member cluster's node addresses a broker reads at start: one line
/// `<node> <type> <address>` per node and address type (`default` and each of
/// [`ADDRESS_TYPES`], each with Strimzi's fallback applied).
pub fn node_table(nodes: &[NodeStatus]) -> String {
    let mut lines = Vec::new();
    for node in nodes {
        for t in std::iter::once(DEFAULT_TYPE).chain(ADDRESS_TYPES) {
            let preferred = (t != DEFAULT_TYPE).then_some(t);
            if let Some(address) = find_address(&node.addresses, preferred) {
                lines.push(format!("{} {t} {address}", node.name));
            }
        }
    }
    lines.sort();
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

/// The ConfigMap with the table of node addresses of one member cluster.
pub fn node_table_name(kafka: &str) -> String {
    format!("{kafka}-kstretch-node-addresses")
}

/// The ConfigMap of [`node_table`] for one member cluster.
pub fn node_table_config_map(
    kafka: &str,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    nodes: &[NodeStatus],
) -> Value {
    objects::to_json(&ConfigMap {
        metadata: objects::meta(&node_table_name(kafka), namespace, labels.clone()),
        data: Some(BTreeMap::from([(
            NODE_TABLE_KEY.to_owned(),
            node_table(nodes),
        )])),
        ..Default::default()
    })
}

/// The start script's part that finds the pod's node address for each listener
/// `(Kafka listener name, table type)` and writes it where Kafka reads it; it waits for the
/// table to name the node (a node that just joined), then fails the start, saying so.
pub fn start_script(listeners: &[(String, String)]) -> String {
    if listeners.is_empty() {
        return String::new();
    }
    let table = format!("{NODE_TABLE_DIR}/{NODE_TABLE_KEY}");
    let dir = kraft::NODE_ADDRESS_DIR;
    let mut script = format!(
        "kstretch_address() {{ for i in $(seq 1 60); do a=$(sed -n \"s/^${NODE_NAME_ENV} $1 //p\" {table} | head -n 1); if [ -n \"$a\" ]; then case \"$a\" in *:*) a=\"[$a]\";; esac; printf '%s' \"$a\" > {dir}/$2; return 0; fi; sleep 2; done; echo \"node ${NODE_NAME_ENV} has no address in {table}\" >&2; return 1; }}; "
    );
    for (listener, table_type) in listeners {
        script.push_str(&format!("kstretch_address {table_type} {listener}; "));
    }
    script
}

/// The table type a listener reads (`default` without a preferred type).
pub fn table_type(listener: &ExternalListener) -> String {
    match &listener.exposure {
        Exposure::NodePort {
            preferred: Some(preferred),
        } => preferred.clone(),
        _ => DEFAULT_TYPE.to_owned(),
    }
}

/// `status.listeners` of each external listener: in every member cluster with brokers, for
/// `nodeport` the bootstrap Service's node port on the address of each node a broker runs on
/// (a broker's `advertisedHost` instead, when set), for `loadbalancer` the bootstrap Service's
/// load balancer address and the listener's port, for the routed types `bootstrap.host` on 443.
pub fn statuses(
    kafka: &str,
    namespace: &str,
    external: &[ExternalListener],
    brokers: &[Broker],
    reports: Reports<'_>,
) -> Vec<ListenerStatus> {
    external
        .iter()
        .map(|l| {
            let mut addresses = BTreeSet::new();
            let bootstrap = l.bootstrap_name(kafka);
            if let Some(host) = l.bootstrap.host.clone().filter(|_| l.exposure.routed()) {
                addresses.insert((host, ROUTED_PORT));
            }
            for b in brokers.iter().filter(|_| !l.exposure.routed()) {
                let services = reports.services.get(&b.alias).map(Vec::as_slice);
                let services = services.unwrap_or_default();
                let preferred = match &l.exposure {
                    Exposure::NodePort { preferred } => preferred.as_deref(),
                    _ => {
                        let ingress = reported_ingress(services, namespace, &bootstrap);
                        addresses.extend(ingress.iter().map(|h| (h.clone(), l.port)));
                        continue;
                    }
                };
                let Some(port) = reported_node_port(services, namespace, &bootstrap) else {
                    continue;
                };
                let settings = l.brokers.get(&b.id);
                let host = match settings.and_then(|s| s.advertised_host.clone()) {
                    Some(host) => Some(host),
                    None => node_of(kafka, b, reports).and_then(|node| {
                        find_address(&node.addresses, preferred).map(str::to_owned)
                    }),
                };
                if let Some(host) = host {
                    addresses.insert((host, port));
                }
            }
            let servers = addresses
                .iter()
                .map(|(h, p)| {
                    kraft::Endpoint {
                        host: h.clone(),
                        port: *p,
                    }
                    .to_string()
                })
                .collect::<Vec<_>>()
                .join(",");
            ListenerStatus {
                name: Some(l.name.clone()),
                addresses: addresses
                    .into_iter()
                    .map(|(host, port)| ListenerAddress {
                        host: Some(host),
                        port: Some(port.into()),
                    })
                    .collect(),
                bootstrap_servers: (!servers.is_empty()).then_some(servers),
                certificates: Vec::new(),
            }
        })
        .collect()
}

/// The node broker `b`'s pod runs on, as its cluster's agent reported.
fn node_of<'a>(kafka: &str, b: &Broker, reports: Reports<'a>) -> Option<&'a NodeStatus> {
    let pod = kraft::pod_name(kafka, &b.pool, b.id);
    let node_name = reports
        .podsets
        .get(&b.alias)?
        .iter()
        .flat_map(|ps| &ps.pods_status)
        .find(|p| p.name == pod && !p.node_name.is_empty())?
        .node_name
        .clone();
    reports
        .nodes
        .get(&b.alias)?
        .as_ref()?
        .iter()
        .find(|n| n.name == node_name)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use kstretch_core::kraft::{Authentication, ListenerKind};
    use kstretch_proto::agent::v1::{NodeAddress, PodStatus, ServicePort as ReportedPort};
    use serde_json::json;

    use super::*;

    fn listener(value: Value) -> GenericKafkaListener {
        let mut base = json!({"name": "external", "port": 9094, "type": "nodeport", "tls": false});
        if let (Some(b), Some(v)) = (base.as_object_mut(), value.as_object()) {
            b.extend(v.clone());
        }
        serde_json::from_value(base).unwrap()
    }

    fn parsed(value: Value) -> Result<Option<ExternalListener>, ExternalProblem> {
        external(2, &listener(value))
    }

    #[test]
    fn a_nodeport_configuration_is_read_and_bad_values_name_their_field() {
        let l = parsed(json!({"configuration": {
            "preferredNodePortAddressType": "InternalIP",
            "bootstrap": {"nodePort": 32100, "labels": {"team": "a"}},
            "brokers": [{"broker": 3, "nodePort": 32103, "advertisedHost": "b3.example.com",
                         "advertisedPort": 443, "annotations": {"x": "y"}}]}}))
        .unwrap()
        .unwrap();
        assert_eq!(
            l.exposure,
            Exposure::NodePort {
                preferred: Some("InternalIP".into())
            }
        );
        assert_eq!(l.traffic_policy, "Cluster");
        assert_eq!(l.bootstrap.node_port, Some(32100));
        let b3 = &l.brokers[&3];
        assert_eq!(b3.advertised_host.as_deref(), Some("b3.example.com"));
        assert_eq!(
            (b3.advertised_port, b3.service.node_port),
            (Some(443), Some(32103))
        );

        // Other types have none.
        assert_eq!(parsed(json!({"type": "internal"})).unwrap(), None);

        for (configuration, field) in [
            (
                json!({"preferredNodePortAddressType": "Public"}),
                "preferredNodePortAddressType",
            ),
            (
                json!({"externalTrafficPolicy": "Nearest"}),
                "externalTrafficPolicy",
            ),
            (
                json!({"bootstrap": {"nodePort": 70000}}),
                "bootstrap.nodePort",
            ),
            (json!({"brokers": [{"nodePort": 1}]}), "brokers[0].broker"),
            (
                json!({"brokers": [{"broker": 0, "advertisedHost": "not a host"}]}),
                "brokers[0].advertisedHost",
            ),
            (
                json!({"brokers": [{"broker": 0}, {"broker": 0}]}),
                "brokers[1].broker",
            ),
            (
                json!({"bootstrap": {"labels": {"strimzi.io/kind": "x"}}}),
                "bootstrap.labels.strimzi.io/kind",
            ),
        ] {
            let e = parsed(json!({"configuration": configuration})).unwrap_err();
            assert_eq!(e.field, format!("configuration.{field}"), "{e}");
            assert!(
                e.to_string().starts_with(&format!(
                    "listener external (port 9094): .spec.kafka.listeners[2].configuration.{field} "
                )),
                "{e}"
            );
        }
    }

    fn brokers() -> Vec<Broker> {
        vec![
            Broker {
                id: 0,
                pool: "a".into(),
                alias: "alpha".into(),
            },
            Broker {
                id: 1,
                pool: "b".into(),
                alias: "beta".into(),
            },
        ]
    }

    #[test]
    fn a_listener_service_the_apiserver_refused_is_named_with_its_listener_and_cluster() {
        use kstretch_proto::agent::v1::{ObjectRef, ObjectResult};
        let l = parsed(json!({"name": "ext", "port": 9095}))
            .unwrap()
            .unwrap();
        let names = service_listeners("k", std::slice::from_ref(&l), &brokers());
        assert_eq!(
            names.keys().collect::<Vec<_>>(),
            ["k-a-ext-0", "k-b-ext-1", "k-kafka-ext-bootstrap"]
        );
        let result = |kind: &str, name: &str, outcome: Outcome, message: &str| ObjectResult {
            r#ref: Some(ObjectRef {
                api_version: "v1".into(),
                kind: kind.into(),
                namespace: "ns".into(),
                name: name.into(),
            }),
            outcome: outcome.into(),
            message: message.into(),
            ..Default::default()
        };
        let taken =
            "spec.ports[0].nodePort: Invalid value: 32100: provided port is already allocated";
        let report = ApplyReport {
            results: vec![
                result("Service", "k-kafka-ext-bootstrap", Outcome::Rejected, taken),
                result("Service", "k-a-ext-0", Outcome::Applied, ""),
                // Not a listener's Service, or not refused: not a listener's refusal.
                result("ConfigMap", "k-a-ext-0", Outcome::Rejected, "no"),
                result("Service", "other", Outcome::Rejected, "no"),
            ],
            ..Default::default()
        };
        let reports = [("alpha", &report)];
        assert_eq!(
            refused(&names, "ns", &reports),
            [format!(
                "listener ext: the apiserver of cluster alpha refused Service k-kafka-ext-bootstrap: {taken}"
            )]
        );
        assert_eq!(refused(&names, "other-ns", &reports), Vec::<String>::new());
    }

    #[test]
    fn each_cluster_with_brokers_gets_a_bootstrap_service_and_one_per_broker_with_strimzis_names() {
        let mut l = parsed(json!({"configuration": {"bootstrap": {"nodePort": 32100},
            "brokers": [{"broker": 1, "nodePort": 32101}]}}))
        .unwrap()
        .unwrap();
        let labels = BTreeMap::from([("app".to_owned(), "kafka".to_owned())]);
        let by_alias = services("k", "ns", std::slice::from_ref(&l), &brokers(), &labels);
        let names = |alias: &str| {
            by_alias[alias]
                .iter()
                .map(|s| s["metadata"]["name"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        // `external` on 9094 keeps Strimzi's historical names: the pod's for a broker.
        assert_eq!(names("alpha"), ["k-kafka-external-bootstrap", "k-a-0"]);
        assert_eq!(names("beta"), ["k-kafka-external-bootstrap", "k-b-1"]);
        let own = &by_alias["beta"][1];
        assert_eq!(own["spec"]["type"], "NodePort");
        assert_eq!(own["spec"]["externalTrafficPolicy"], "Cluster");
        assert_eq!(
            own["spec"]["ports"],
            json!([{"name": "tcp-external", "port": 9094, "targetPort": 9094,
                    "nodePort": 32101, "protocol": "TCP"}])
        );
        assert_eq!(own["spec"]["selector"]["strimzi.io/pod-name"], "k-b-1");
        assert_eq!(own["metadata"]["labels"][names::NODE_SERVICE], "true");
        let bootstrap = &by_alias["alpha"][0];
        assert_eq!(bootstrap["spec"]["selector"][names::BROKER_ROLE], "true");
        assert_eq!(bootstrap["spec"]["ports"][0]["nodePort"], 32100);

        l.name = "ext".into();
        l.legacy_names = false;
        let named = services("k", "ns", &[l], &brokers(), &labels);
        assert_eq!(named["alpha"][1]["metadata"]["name"], "k-a-ext-0");
        assert_eq!(named["alpha"][1]["spec"]["ports"][0]["name"], "tcp-ext");
    }

    fn node(name: &str, addresses: &[(&str, &str)]) -> NodeStatus {
        NodeStatus {
            name: name.into(),
            addresses: addresses
                .iter()
                .map(|(t, a)| NodeAddress {
                    r#type: (*t).into(),
                    address: (*a).into(),
                })
                .collect(),
        }
    }

    fn core(name: &str) -> Listener {
        Listener {
            name: name.into(),
            port: 9094,
            kind: ListenerKind::NodePort,
            tls: false,
            authentication: Authentication::None,
            custom_certificate: false,
            advertised: BTreeMap::new(),
        }
    }

    fn reported(name: &str, node_port: i32) -> ServiceStatus {
        ServiceStatus {
            namespace: "ns".into(),
            name: name.into(),
            r#type: "NodePort".into(),
            ingress: vec![],
            ports: vec![ReportedPort {
                name: "tcp-external".into(),
                port: 9094,
                node_port,
            }],
        }
    }

    #[test]
    fn brokers_advertise_their_node_port_on_their_node_or_the_host_they_are_given() {
        let l = parsed(json!({"configuration": {"brokers": [
            {"broker": 1, "advertisedHost": "b1.example.com"}]}}))
        .unwrap()
        .unwrap();
        let services = BTreeMap::from([("alpha".to_owned(), vec![reported("k-a-0", 31000)])]);
        let alpha_nodes = vec![
            node("a1", &[("InternalIP", "10.0.0.1")]),
            node(
                "a2",
                &[("InternalIP", "10.0.0.2"), ("ExternalIP", "1.2.3.4")],
            ),
        ];
        let nodes = BTreeMap::from([
            ("alpha".to_owned(), Some(alpha_nodes)),
            ("beta".to_owned(), None),
        ]);
        let podsets = BTreeMap::new();
        let reports = Reports {
            applied: &BTreeMap::new(),
            services: &services,
            nodes: &nodes,
            podsets: &podsets,
        };
        let mut listeners = vec![core("external")];
        let pending = advertise(
            "k",
            "ns",
            std::slice::from_ref(&l),
            &mut listeners,
            &brokers(),
            reports,
        );
        assert_eq!(
            pending,
            [Unadvertised::Pending(
                "listener external: Service k-b-1 in cluster beta has no node port yet".into()
            )]
        );
        assert_eq!(
            listeners[0].advertised[&0],
            Advertised {
                host: AdvertisedHost::NodeAddress {
                    candidates: BTreeSet::from(["10.0.0.1".to_owned(), "1.2.3.4".to_owned()])
                },
                port: 31000,
                names: BTreeSet::new(),
            }
        );

        // Beta's port comes; its agent has not listed its nodes, but broker 1 needs none.
        let services = BTreeMap::from([
            ("alpha".to_owned(), vec![reported("k-a-0", 31000)]),
            ("beta".to_owned(), vec![reported("k-b-1", 31001)]),
        ]);
        let reports = Reports {
            applied: &BTreeMap::new(),
            services: &services,
            nodes: &nodes,
            podsets: &podsets,
        };
        let mut listeners = vec![core("external")];
        assert!(
            advertise(
                "k",
                "ns",
                std::slice::from_ref(&l),
                &mut listeners,
                &brokers(),
                reports
            )
            .is_empty()
        );
        assert_eq!(
            listeners[0].advertised[&1],
            Advertised {
                host: AdvertisedHost::Fixed("b1.example.com".into()),
                port: 31001,
                names: BTreeSet::new(),
            }
        );

        // Without the override, beta's unlisted nodes hold it back, saying why.
        let plain = parsed(json!({})).unwrap().unwrap();
        let mut listeners = vec![core("external")];
        let pending = advertise("k", "ns", &[plain], &mut listeners, &brokers(), reports);
        assert_eq!(pending.len(), 1);
        assert!(
            pending[0]
                .message()
                .contains("cluster beta has not listed its nodes"),
            "{pending:?}"
        );
    }

    #[test]
    fn a_node_address_is_the_preferred_type_else_strimzis_order() {
        let n = node(
            "n1",
            &[
                ("Hostname", "n1"),
                ("InternalIP", "10.0.0.1"),
                ("ExternalIP", "1.2.3.4"),
            ],
        );
        assert_eq!(find_address(&n.addresses, None), Some("1.2.3.4"));
        assert_eq!(
            find_address(&n.addresses, Some("InternalIP")),
            Some("10.0.0.1")
        );
        assert_eq!(
            find_address(&n.addresses, Some("ExternalDNS")),
            Some("1.2.3.4")
        );
        assert_eq!(find_address(&[], None), None);
        let table = node_table(&[n, node("n2", &[("InternalIP", "10.0.0.2")])]);
        assert!(table.contains("n1 default 1.2.3.4\n"), "{table}");
        assert!(table.contains("n1 InternalIP 10.0.0.1\n"), "{table}");
        assert!(table.contains("n2 ExternalIP 10.0.0.2\n"), "{table}");
        let script = start_script(&[("EXTERNAL-9094".into(), "default".into())]);
        assert!(script.contains("$KSTRETCH_NODE_NAME $1 //p"), "{script}");
        assert!(
            script.ends_with("kstretch_address default EXTERNAL-9094; "),
            "{script}"
        );
        assert_eq!(start_script(&[]), "");
    }

    #[test]
    fn the_status_lists_the_bootstrap_node_port_on_every_node_with_a_broker() {
        let l = parsed(json!({})).unwrap().unwrap();
        let services = BTreeMap::from([
            (
                "alpha".to_owned(),
                vec![reported("k-kafka-external-bootstrap", 32000)],
            ),
            (
                "beta".to_owned(),
                vec![reported("k-kafka-external-bootstrap", 32001)],
            ),
        ]);
        let nodes = BTreeMap::from([
            (
                "alpha".to_owned(),
                Some(vec![node("a1", &[("InternalIP", "10.0.0.1")])]),
            ),
            (
                "beta".to_owned(),
                Some(vec![node("b1", &[("InternalIP", "10.0.1.1")])]),
            ),
        ]);
        let podset = |pod: &str, node: &str| PodSetStatus {
            namespace: "ns".into(),
            name: "x".into(),
            pods_status: vec![PodStatus {
                name: pod.into(),
                node_name: node.into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let podsets = BTreeMap::from([
            ("alpha".to_owned(), vec![podset("k-a-0", "a1")]),
            ("beta".to_owned(), vec![podset("k-b-1", "b1")]),
        ]);
        let reports = Reports {
            applied: &BTreeMap::new(),
            services: &services,
            nodes: &nodes,
            podsets: &podsets,
        };
        let status = statuses("k", "ns", &[l], &brokers(), reports);
        assert_eq!(status[0].name.as_deref(), Some("external"));
        assert_eq!(
            status[0].bootstrap_servers.as_deref(),
            Some("10.0.0.1:32000,10.0.1.1:32001")
        );
    }

    fn balanced(name: &str, ingress: &[&str]) -> ServiceStatus {
        ServiceStatus {
            namespace: "ns".into(),
            name: name.into(),
            r#type: "LoadBalancer".into(),
            ingress: ingress.iter().map(|&i| i.to_owned()).collect(),
            ports: vec![ReportedPort {
                name: "tcp-external".into(),
                port: 9094,
                node_port: 30000,
            }],
        }
    }

    #[test]
    fn a_loadbalancer_configuration_is_read_and_bad_values_name_their_field() {
        let lb = |configuration: Value| {
            let mut l = listener(json!({"type": "loadbalancer", "tls": true}));
            l.configuration = configuration.as_object().cloned();
            external(3, &l)
        };
        let l = lb(json!({"loadBalancerSourceRanges": ["10.0.0.0/8", "2001:db8::/32"],
            "class": "metallb", "finalizers": ["service.kubernetes.io/load-balancer-cleanup"],
            "allocateLoadBalancerNodePorts": false,
            "bootstrap": {"loadBalancerIP": "10.250.0.210"},
            "brokers": [{"broker": 1, "loadBalancerIP": "10.250.0.211", "advertisedHost": "b1.example.com"}]}))
        .unwrap()
        .unwrap();
        assert!(l.tls);
        assert_eq!(
            l.exposure,
            Exposure::LoadBalancer {
                source_ranges: vec!["10.0.0.0/8".into(), "2001:db8::/32".into()],
                class: Some("metallb".into()),
                finalizers: vec!["service.kubernetes.io/load-balancer-cleanup".into()],
                allocate_node_ports: Some(false),
            }
        );
        assert_eq!(
            l.bootstrap.load_balancer_ip.as_deref(),
            Some("10.250.0.210")
        );
        assert_eq!(
            l.brokers[&1].service.load_balancer_ip.as_deref(),
            Some("10.250.0.211")
        );
        for (configuration, field) in [
            (
                json!({"loadBalancerSourceRanges": ["10.0.0.0"]}),
                "loadBalancerSourceRanges",
            ),
            (
                json!({"loadBalancerSourceRanges": "10.0.0.0/8"}),
                "loadBalancerSourceRanges",
            ),
            (json!({"class": 3}), "class"),
            (json!({"finalizers": [1]}), "finalizers"),
            (
                json!({"allocateLoadBalancerNodePorts": "no"}),
                "allocateLoadBalancerNodePorts",
            ),
            (
                json!({"bootstrap": {"loadBalancerIP": "lb.example.com"}}),
                "bootstrap.loadBalancerIP",
            ),
            (
                json!({"brokers": [{"broker": 1, "loadBalancerIP": "300.1.1.1"}]}),
                "brokers[0].loadBalancerIP",
            ),
        ] {
            let e = lb(configuration).unwrap_err();
            assert_eq!(e.field, format!("configuration.{field}"), "{e}");
            assert_eq!(e.reason(), "InvalidListener");
        }
        // A node port means nothing to a load balancer: it is not read (a warning names it).
        let l = lb(json!({"bootstrap": {"nodePort": 1}})).unwrap().unwrap();
        assert_eq!(l.bootstrap.node_port, None);
    }

    #[test]
    fn loadbalancer_services_carry_what_the_listener_asks() {
        let mut raw = listener(json!({"type": "loadbalancer", "name": "ext", "port": 9095}));
        raw.configuration = json!({"loadBalancerSourceRanges": ["10.0.0.0/8"], "class": "metallb",
            "finalizers": ["f/x"], "allocateLoadBalancerNodePorts": false,
            "externalTrafficPolicy": "Local",
            "brokers": [{"broker": 1, "loadBalancerIP": "10.250.1.211"}]})
        .as_object()
        .cloned();
        let l = external(0, &raw).unwrap().unwrap();
        let by_alias = services("k", "ns", &[l], &brokers(), &BTreeMap::new());
        let own = &by_alias["beta"][1];
        assert_eq!(own["metadata"]["name"], "k-b-ext-1");
        assert_eq!(own["metadata"]["finalizers"], json!(["f/x"]));
        assert_eq!(
            own["spec"],
            json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local",
                "loadBalancerIP": "10.250.1.211", "loadBalancerSourceRanges": ["10.0.0.0/8"],
                "loadBalancerClass": "metallb", "allocateLoadBalancerNodePorts": false,
                "selector": {"strimzi.io/cluster": "k", "strimzi.io/name": "k-kafka",
                    "strimzi.io/kind": "Kafka", "strimzi.io/pool-name": "b",
                    "strimzi.io/pod-name": "k-b-1"},
                "ports": [{"name": "tcp-ext", "port": 9095, "targetPort": 9095, "protocol": "TCP"}]})
        );
        assert_eq!(by_alias["alpha"][0]["spec"].get("loadBalancerIP"), None);
    }

    #[test]
    fn brokers_advertise_their_load_balancer_address_once_it_is_there() {
        let mut raw = listener(json!({"type": "loadbalancer", "tls": true}));
        raw.configuration = json!({"brokers": [{"broker": 1, "advertisedHost": "b1.example.com",
            "advertisedPort": 443}]})
        .as_object()
        .cloned();
        let l = external(0, &raw).unwrap().unwrap();
        let advertise_with = |services: BTreeMap<String, Vec<ServiceStatus>>| {
            let (nodes, podsets) = (BTreeMap::new(), BTreeMap::new());
            let reports = Reports {
                applied: &BTreeMap::new(),
                services: &services,
                nodes: &nodes,
                podsets: &podsets,
            };
            let mut listeners = vec![Listener {
                kind: ListenerKind::LoadBalancer,
                tls: true,
                ..core("external")
            }];
            let pending = advertise(
                "k",
                "ns",
                std::slice::from_ref(&l),
                &mut listeners,
                &brokers(),
                reports,
            );
            let pending: Vec<String> = pending.iter().map(|p| p.message().to_owned()).collect();
            (pending, listeners.remove(0).advertised)
        };
        // Alpha's broker has its address but not the bootstrap's, which TLS clients verify;
        // beta has none yet.
        let (pending, advertised) = advertise_with(BTreeMap::from([
            (
                "alpha".to_owned(),
                vec![balanced("k-a-0", &["10.250.0.201"])],
            ),
            ("beta".to_owned(), vec![balanced("k-b-1", &[])]),
        ]));
        assert_eq!(
            pending,
            [
                "listener external: Service k-kafka-external-bootstrap in cluster alpha has no load balancer address yet",
                "listener external: Service k-b-1 in cluster beta has no load balancer address yet"
            ]
        );
        assert!(advertised.is_empty());

        let (pending, advertised) = advertise_with(BTreeMap::from([
            (
                "alpha".to_owned(),
                vec![
                    balanced("k-a-0", &["10.250.0.201"]),
                    balanced("k-kafka-external-bootstrap", &["10.250.0.200"]),
                ],
            ),
            (
                "beta".to_owned(),
                vec![
                    balanced("k-b-1", &["lb-b1.example.net"]),
                    balanced("k-kafka-external-bootstrap", &["10.250.1.200"]),
                ],
            ),
        ]));
        assert!(pending.is_empty(), "{pending:?}");
        assert_eq!(
            advertised[&0],
            Advertised {
                host: AdvertisedHost::Fixed("10.250.0.201".into()),
                port: 9094,
                names: BTreeSet::from(["10.250.0.200".to_owned(), "10.250.0.201".to_owned()]),
            }
        );
        // The user's host and port win; the Service's address stays a name of the broker.
        assert_eq!(
            advertised[&1],
            Advertised {
                host: AdvertisedHost::Fixed("b1.example.com".into()),
                port: 443,
                names: BTreeSet::from(["10.250.1.200".to_owned(), "lb-b1.example.net".to_owned()]),
            }
        );
    }

    #[test]
    fn the_status_lists_each_clusters_bootstrap_load_balancer() {
        let l = external(0, &listener(json!({"type": "loadbalancer"})))
            .unwrap()
            .unwrap();
        let services = BTreeMap::from([
            (
                "alpha".to_owned(),
                vec![balanced("k-kafka-external-bootstrap", &["10.250.0.200"])],
            ),
            // Not provisioned yet: nothing to show.
            (
                "beta".to_owned(),
                vec![balanced("k-kafka-external-bootstrap", &[])],
            ),
        ]);
        let (nodes, podsets) = (BTreeMap::new(), BTreeMap::new());
        let reports = Reports {
            applied: &BTreeMap::new(),
            services: &services,
            nodes: &nodes,
            podsets: &podsets,
        };
        let status = statuses("k", "ns", &[l], &brokers(), reports);
        assert_eq!(
            status[0].bootstrap_servers.as_deref(),
            Some("10.250.0.200:9094")
        );
        assert_eq!(status[0].addresses.len(), 1);
    }

    /// What the agents reported, owned, for [`Reports`] to borrow.
    #[derive(Default)]
    struct Reported {
        services: BTreeMap<String, Vec<ServiceStatus>>,
        nodes: BTreeMap<String, Option<Vec<NodeStatus>>>,
        podsets: BTreeMap<String, Vec<PodSetStatus>>,
        applied: BTreeMap<String, ApplyReport>,
    }

    impl Reported {
        fn reports(&self) -> Reports<'_> {
            Reports {
                services: &self.services,
                nodes: &self.nodes,
                podsets: &self.podsets,
                applied: &self.applied,
            }
        }
    }

    fn routed(t: &str, configuration: Value) -> Result<Option<ExternalListener>, ExternalProblem> {
        external(
            4,
            &listener(json!({"type": t, "tls": true, "configuration": configuration})),
        )
    }

    #[test]
    fn routed_listeners_need_hosts_tls_and_for_tlsroute_gateways_as_strimzi_validates() {
        let hosts = json!({"bootstrap": {"host": "bootstrap.example.com"},
                           "hostTemplate": "broker-{nodeId}.example.com",
                           "class": "nginx"});
        let l = routed("ingress", hosts.clone()).unwrap().unwrap();
        assert_eq!(
            l.exposure,
            Exposure::Ingress {
                class: Some("nginx".into())
            }
        );
        assert_eq!(l.bootstrap.host.as_deref(), Some("bootstrap.example.com"));
        let b = &brokers()[1];
        assert_eq!(
            l.broker_host("k", b).as_deref(),
            Some("broker-1.example.com")
        );
        // The legacy `external` on 9094 keeps Strimzi's bootstrap route name.
        assert_eq!(l.bootstrap_route_name("k"), "k-kafka-bootstrap");
        assert_eq!(l.bootstrap_name("k"), "k-kafka-external-bootstrap");

        let problem = |t: &str, tls: bool, configuration: Value| {
            external(
                4,
                &listener(json!({"type": t, "tls": tls, "configuration": configuration})),
            )
            .unwrap_err()
        };
        let e = problem("ingress", false, hosts.clone());
        assert_eq!(e.field, "tls");
        assert!(
            e.to_string()
                .contains(".spec.kafka.listeners[4].tls must be true"),
            "{e}"
        );
        assert_eq!(problem("route", false, hosts.clone()).field, "tls");
        for t in ["ingress", "route", "tlsroute"] {
            let e = problem(t, true, json!({"parentRefs": [{"name": "gw"}]}));
            assert_eq!(e.field, "configuration.bootstrap.host", "{t}: {e}");
        }
        let e = problem("tlsroute", true, hosts.clone());
        assert_eq!(e.field, "configuration.parentRefs");
        let e = problem(
            "ingress",
            true,
            json!({"bootstrap": {"host": "not a host"}}),
        );
        assert_eq!(e.field, "configuration.bootstrap.host");
        let tls_route = routed(
            "tlsroute",
            json!({"parentRefs": [{"name": "gw", "sectionName": "tls"}],
                   "bootstrap": {"host": "b.example.com"}}),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            tls_route.exposure,
            Exposure::TlsRoute {
                parent_refs: vec![json!({"name": "gw", "sectionName": "tls"})]
            }
        );
    }

    fn applied(results: &[(&str, &str, i32)]) -> ApplyReport {
        ApplyReport {
            results: results
                .iter()
                .map(
                    |(kind, name, code)| kstretch_proto::agent::v1::ObjectResult {
                        r#ref: Some(kstretch_proto::agent::v1::ObjectRef {
                            api_version: String::new(),
                            kind: (*kind).into(),
                            namespace: "ns".into(),
                            name: (*name).into(),
                        }),
                        outcome: if *code == 0 {
                            Outcome::Applied
                        } else {
                            Outcome::Rejected
                        }
                        .into(),
                        message: "the server could not find the requested resource".into(),
                        reason: "NotFound".into(),
                        code: u32::try_from(*code).unwrap(),
                    },
                )
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn routed_brokers_advertise_their_host_on_443_once_their_cluster_took_the_routes() {
        let l = routed(
            "ingress",
            json!({"bootstrap": {"host": "bootstrap.example.com"},
                   "brokers": [{"broker": 0, "host": "b0.example.com"},
                               {"broker": 1, "host": "b1.example.com", "advertisedPort": 8443}]}),
        )
        .unwrap()
        .unwrap();
        let advertise_with = |applied: BTreeMap<String, ApplyReport>| {
            let reported = Reported {
                applied,
                ..Default::default()
            };
            let reports = reported.reports();
            let mut listeners = vec![core("external")];
            listeners[0].kind = ListenerKind::Ingress;
            let why = advertise(
                "k",
                "ns",
                std::slice::from_ref(&l),
                &mut listeners,
                &brokers(),
                reports,
            );
            (why, listeners.remove(0).advertised)
        };
        let alpha = applied(&[("Ingress", "k-kafka-bootstrap", 0), ("Ingress", "k-a-0", 0)]);
        let (why, advertised) =
            advertise_with(BTreeMap::from([("alpha".to_owned(), alpha.clone())]));
        assert_eq!(
            why,
            [Unadvertised::Pending(
                "listener external: Ingress k-kafka-bootstrap is not applied in cluster beta yet"
                    .into()
            )]
        );
        assert_eq!(
            advertised[&0],
            Advertised {
                host: AdvertisedHost::Fixed("b0.example.com".into()),
                port: 443,
                names: BTreeSet::from(["b0.example.com".into(), "bootstrap.example.com".into()]),
            }
        );
        let beta = applied(&[("Ingress", "k-kafka-bootstrap", 0), ("Ingress", "k-b-1", 0)]);
        let (why, advertised) = advertise_with(BTreeMap::from([
            ("alpha".to_owned(), alpha.clone()),
            ("beta".to_owned(), beta),
        ]));
        assert!(why.is_empty(), "{why:?}");
        assert_eq!(advertised[&1].port, 8443);

        // A cluster that does not serve the kind answers 404: named, with its API.
        let beta = applied(&[("Ingress", "k-kafka-bootstrap", 404)]);
        let (why, _) = advertise_with(BTreeMap::from([
            ("alpha".to_owned(), alpha),
            ("beta".to_owned(), beta),
        ]));
        assert_eq!(
            why,
            [Unadvertised::ApiNotServed(
                "listener external: cluster beta does not serve networking.k8s.io/v1 Ingress (Ingress, TLS passed through by its controller); install it there or give the listener a type the cluster serves".into()
            )]
        );

        // A broker without a host (no hostTemplate either) cannot be advertised.
        let mut l2 = l.clone();
        l2.brokers.remove(&1);
        let nothing = Reported::default();
        let reports = nothing.reports();
        let mut listeners = vec![core("external")];
        let why = advertise("k", "ns", &[l2], &mut listeners, &brokers(), reports);
        assert!(
            matches!(&why[1], Unadvertised::Invalid(m) if m.contains("broker 1 has no host")),
            "{why:?}"
        );
    }

    #[test]
    fn routing_objects_have_strimzis_shapes() {
        let l = routed(
            "ingress",
            json!({"class": "nginx", "bootstrap": {"host": "bootstrap.example.com", "annotations": {"a": "b"}},
                   "hostTemplate": "{nodePodName}.example.com"}),
        )
        .unwrap()
        .unwrap();
        let labels = BTreeMap::from([("strimzi.io/cluster".to_owned(), "k".to_owned())]);
        let objects =
            crate::kafka::routes::routes("k", "ns", std::slice::from_ref(&l), &brokers(), &labels);
        let alpha = &objects["alpha"];
        assert_eq!(alpha.len(), 2);
        assert_eq!(
            alpha[0],
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                   "metadata": {"name": "k-kafka-bootstrap", "namespace": "ns",
                                "labels": {"strimzi.io/cluster": "k"},
                                "annotations": {"a": "b",
                                    "ingress.kubernetes.io/ssl-passthrough": "true",
                                    "nginx.ingress.kubernetes.io/ssl-passthrough": "true",
                                    "nginx.ingress.kubernetes.io/backend-protocol": "HTTPS"}},
                   "spec": {"ingressClassName": "nginx",
                            "rules": [{"host": "bootstrap.example.com", "http": {"paths": [{
                                "path": "/", "pathType": "Prefix",
                                "backend": {"service": {"name": "k-kafka-external-bootstrap",
                                                        "port": {"number": 9094}}}}]}}],
                            "tls": [{"hosts": ["bootstrap.example.com"]}]}})
        );
        assert_eq!(alpha[1]["spec"]["rules"][0]["host"], "k-a-0.example.com");
        assert_eq!(
            alpha[1]["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"],
            "k-a-0"
        );
        // The Services behind them are ClusterIP, with no external traffic policy.
        let services = services("k", "ns", &[l], &brokers(), &labels);
        assert_eq!(services["beta"][1]["spec"]["type"], "ClusterIP");
        assert!(
            services["beta"][1]["spec"]
                .get("externalTrafficPolicy")
                .is_none()
        );

        let route = routed(
            "route",
            json!({"bootstrap": {"host": "b.apps.example.com"}}),
        )
        .unwrap()
        .unwrap();
        let objects = crate::kafka::routes::routes("k", "ns", &[route], &brokers(), &labels);
        assert_eq!(
            objects["beta"][0]["spec"],
            json!({"to": {"kind": "Service", "name": "k-kafka-external-bootstrap"},
                   "port": {"targetPort": 9094}, "tls": {"termination": "passthrough"},
                   "host": "b.apps.example.com"})
        );
        assert!(objects["beta"][1]["spec"].get("host").is_none());
        let tls_route = routed(
            "tlsroute",
            json!({"parentRefs": [{"name": "gw"}], "bootstrap": {"host": "b.example.com"},
                   "hostTemplate": "kafka-{nodeId}.example.com"}),
        )
        .unwrap()
        .unwrap();
        let objects = crate::kafka::routes::routes("k", "ns", &[tls_route], &brokers(), &labels);
        assert_eq!(
            objects["beta"][1]["apiVersion"],
            "gateway.networking.k8s.io/v1"
        );
        assert_eq!(
            objects["beta"][1]["spec"],
            json!({"parentRefs": [{"name": "gw"}], "hostnames": ["kafka-1.example.com"],
                   "rules": [{"backendRefs": [{"name": "k-b-1", "port": 9094}]}]})
        );
    }

    #[test]
    fn the_status_lists_a_routed_listeners_bootstrap_host_on_443() {
        let l = routed("ingress", json!({"bootstrap": {"host": "bootstrap.example.com"}, "hostTemplate": "b{nodeId}.example.com"}))
            .unwrap()
            .unwrap();
        let nothing = Reported::default();
        let reports = nothing.reports();
        let status = statuses("k", "ns", &[l], &brokers(), reports);
        assert_eq!(
            status[0].bootstrap_servers.as_deref(),
            Some("bootstrap.example.com:443")
        );
    }
}
