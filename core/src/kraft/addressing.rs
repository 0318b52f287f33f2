//! How a Kafka node is reached from every other node and from clients, by addressing mode, and
//! the names of the Kubernetes objects those addresses point at (pods, headless, bootstrap and
//! per-node services).

use std::fmt;

use super::error::ConfigError;
use super::model::{
    Addressing, CONTROLPLANE_LISTENER, CONTROLPLANE_PORT, KafkaCluster, Node, REPLICATION_LISTENER,
    REPLICATION_PORT,
};

/// A `host:port` a node is reached at.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // An IPv6 literal needs brackets, or its colons would read as the port separator. A
        // config provider's placeholder is replaced whole (by a bracketed literal if need be).
        if self.host.contains(':') && !self.host.starts_with("${") {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Pod (and host) name of a node: `<kafka>-<pool>-<id>`.
pub fn pod_name(kafka: &str, pool: &str, id: i32) -> String {
    format!("{kafka}-{pool}-{id}")
}

/// The headless service every node's DNS name lives under: `<kafka>-kafka-brokers`.
pub fn headless_service_name(kafka: &str) -> String {
    format!("{kafka}-kafka-brokers")
}

/// The client bootstrap service over the brokers: `<kafka>-kafka-bootstrap`.
pub fn bootstrap_service_name(kafka: &str) -> String {
    format!("{kafka}-kafka-bootstrap")
}

/// The service that exposes one node in [`Addressing::PerNodeService`] mode. It carries every
/// listener of the node, so it is named like the pod (whose name validation already keeps
/// within 63 characters) rather than Strimzi's per-listener `<kafka>-<pool>-<listener>-<id>`.
pub fn per_node_service_name(kafka: &str, pool: &str, id: i32) -> String {
    pod_name(kafka, pool, id)
}

/// The listener `listener` names, resolved to its Kafka listener name and container port.
/// `listener` is either a Kafka listener name (`REPLICATION-9091`, `PLAIN-9092`) or a user
/// listener's name in the `Kafka` resource (`plain`).
pub fn resolve_listener(
    cluster: &KafkaCluster,
    listener: &str,
) -> Result<(String, u16), ConfigError> {
    if listener == CONTROLPLANE_LISTENER {
        return Ok((CONTROLPLANE_LISTENER.to_owned(), CONTROLPLANE_PORT));
    }
    if listener == REPLICATION_LISTENER {
        return Ok((REPLICATION_LISTENER.to_owned(), REPLICATION_PORT));
    }
    cluster
        .listeners
        .iter()
        .find(|l| l.name == listener || l.config_name() == listener)
        .map(|l| (l.config_name(), l.port))
        .ok_or_else(|| ConfigError::UnknownListener {
            kafka: cluster.name.clone(),
            listener: listener.to_owned(),
        })
}

/// Where `node`'s listener `listener` (Kafka listener name, bound on `container_port`) is
/// reached from other nodes and clients.
pub fn node_endpoint(
    cluster: &KafkaCluster,
    node: &Node,
    listener: &str,
    container_port: u16,
) -> Result<Endpoint, ConfigError> {
    if let Some(external) = cluster
        .listeners
        .iter()
        .find(|l| l.advertised_per_broker() && l.config_name() == listener)
    {
        // An external listener is advertised where clients outside reach it, whatever the
        // nodes use among themselves.
        let advertised =
            external
                .advertised
                .get(&node.id)
                .ok_or_else(|| ConfigError::PortPending {
                    node: node.id,
                    listener: listener.to_owned(),
                })?;
        return Ok(Endpoint {
            host: advertised.config_host(listener),
            port: advertised.port,
        });
    }
    let pod = pod_name(&cluster.name, &node.pool, node.id);
    let service = headless_service_name(&cluster.name);
    let ns = &cluster.namespace;
    match &cluster.addressing {
        Addressing::ClusterDns => Ok(Endpoint {
            host: format!("{pod}.{service}.{ns}.svc"),
            port: container_port,
        }),
        Addressing::MultiClusterServices { domain } => {
            if node.cluster_alias.is_empty() {
                return Err(ConfigError::MissingClusterAlias { node: node.id });
            }
            Ok(Endpoint {
                host: format!("{pod}.{}.{service}.{ns}.svc.{domain}", node.cluster_alias),
                port: container_port,
            })
        }
        Addressing::PerNodeService { addresses } => {
            let address = addresses
                .get(&node.id)
                .filter(|a| !a.host.is_empty())
                .ok_or(ConfigError::AddressPending { node: node.id })?;
            let port =
                address
                    .ports
                    .get(listener)
                    .copied()
                    .ok_or_else(|| ConfigError::PortPending {
                        node: node.id,
                        listener: listener.to_owned(),
                    })?;
            Ok(Endpoint {
                host: address.host.clone(),
                port,
            })
        }
    }
}

/// The bootstrap servers of a listener, for `Kafka.status.listeners` and central's admin
/// client. `listener` as in [`resolve_listener`].
///
/// In-cluster modes name the bootstrap service (with [`Addressing::MultiClusterServices`]
/// central exports it from every member cluster, so it resolves cluster-set wide); with
/// per-node services there is no shared address, so every broker's endpoint is listed. The
/// controller listener is not behind the bootstrap service: it lists the controllers.
pub fn bootstrap_servers(cluster: &KafkaCluster, listener: &str) -> Result<String, ConfigError> {
    let (name, port) = resolve_listener(cluster, listener)?;
    let service = bootstrap_service_name(&cluster.name);
    let ns = &cluster.namespace;
    let nodes = if name == CONTROLPLANE_LISTENER {
        cluster.controllers()
    } else {
        match &cluster.addressing {
            Addressing::ClusterDns => return Ok(format!("{service}.{ns}.svc:{port}")),
            Addressing::MultiClusterServices { domain } => {
                return Ok(format!("{service}.{ns}.svc.{domain}:{port}"));
            }
            Addressing::PerNodeService { .. } => cluster.brokers(),
        }
    };
    let endpoints = nodes
        .into_iter()
        .map(|n| node_endpoint(cluster, n, &name, port).map(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(endpoints.join(","))
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::kraft::model::{Listener, ListenerKind, NodeAddress, Volume};
    use crate::node_ids::Role;

    fn node(id: i32, pool: &str, alias: &str, roles: &[Role]) -> Node {
        Node {
            id,
            pool: pool.to_owned(),
            roles: roles.iter().copied().collect::<BTreeSet<_>>(),
            cluster_alias: alias.to_owned(),
            volumes: vec![Volume {
                id: None,
                kraft_metadata: false,
            }],
        }
    }

    fn cluster(addressing: Addressing) -> KafkaCluster {
        KafkaCluster {
            name: "my-cluster".into(),
            namespace: "kafka".into(),
            cluster_id: "abc".into(),
            listeners: vec![
                Listener {
                    name: "plain".into(),
                    port: 9092,
                    kind: ListenerKind::Internal,
                    tls: false,
                    authentication: Default::default(),
                    custom_certificate: false,
                    advertised: BTreeMap::new(),
                },
                Listener {
                    name: "tls".into(),
                    port: 9093,
                    kind: ListenerKind::Internal,
                    tls: true,
                    authentication: Default::default(),
                    custom_certificate: false,
                    advertised: BTreeMap::new(),
                },
            ],
            config: BTreeMap::new(),
            addressing,
            nodes: vec![
                node(0, "ctl", "east", &[Role::Controller]),
                node(1, "brk", "east", &[Role::Broker]),
                node(2, "brk", "west", &[Role::Broker]),
            ],
            authorization: None,
            quorum: Default::default(),
            metrics_reporter: None,
        }
    }

    #[test]
    fn names_follow_strimzi() {
        assert_eq!(pod_name("my-cluster", "big", 5), "my-cluster-big-5");
        assert_eq!(
            headless_service_name("my-cluster"),
            "my-cluster-kafka-brokers"
        );
        assert_eq!(
            bootstrap_service_name("my-cluster"),
            "my-cluster-kafka-bootstrap"
        );
        assert_eq!(
            per_node_service_name("my-cluster", "big", 5),
            "my-cluster-big-5"
        );
    }

    #[test]
    fn cluster_dns_endpoint() {
        let c = cluster(Addressing::ClusterDns);
        let e = node_endpoint(&c, &c.nodes[1], REPLICATION_LISTENER, 9091).unwrap();
        assert_eq!(
            e.to_string(),
            "my-cluster-brk-1.my-cluster-kafka-brokers.kafka.svc:9091"
        );
    }

    #[test]
    fn mcs_endpoint_names_the_cluster() {
        let c = cluster(Addressing::multi_cluster_services());
        let e = node_endpoint(&c, &c.nodes[2], REPLICATION_LISTENER, 9091).unwrap();
        assert_eq!(
            e.to_string(),
            "my-cluster-brk-2.west.my-cluster-kafka-brokers.kafka.svc.clusterset.local:9091"
        );
        let c = cluster(Addressing::MultiClusterServices {
            domain: "mesh.example".into(),
        });
        let e = node_endpoint(&c, &c.nodes[0], CONTROLPLANE_LISTENER, 9090).unwrap();
        assert_eq!(
            e.to_string(),
            "my-cluster-ctl-0.east.my-cluster-kafka-brokers.kafka.svc.mesh.example:9090"
        );
    }

    #[test]
    fn mcs_without_alias_is_an_error() {
        let mut c = cluster(Addressing::multi_cluster_services());
        c.nodes[1].cluster_alias.clear();
        let err = node_endpoint(&c, &c.nodes[1], REPLICATION_LISTENER, 9091).unwrap_err();
        assert_eq!(err, ConfigError::MissingClusterAlias { node: 1 });
        assert_eq!(err.reason(), "MissingClusterAlias");
    }

    #[test]
    fn per_node_service_uses_reported_ports_and_never_guesses() {
        let mut addresses = BTreeMap::new();
        addresses.insert(
            1,
            NodeAddress {
                host: "10.0.0.7".into(),
                ports: [(REPLICATION_LISTENER.to_owned(), 31001)].into(),
            },
        );
        addresses.insert(
            2,
            NodeAddress {
                host: "fd00::2".into(),
                ports: [(REPLICATION_LISTENER.to_owned(), 31002)].into(),
            },
        );
        let c = cluster(Addressing::PerNodeService { addresses });
        let e = node_endpoint(&c, &c.nodes[1], REPLICATION_LISTENER, 9091).unwrap();
        assert_eq!(e.to_string(), "10.0.0.7:31001");
        let e = node_endpoint(&c, &c.nodes[2], REPLICATION_LISTENER, 9091).unwrap();
        assert_eq!(e.to_string(), "[fd00::2]:31002");
        let err = node_endpoint(&c, &c.nodes[0], CONTROLPLANE_LISTENER, 9090).unwrap_err();
        assert_eq!(err, ConfigError::AddressPending { node: 0 });
        assert_eq!(err.reason(), "AddressPending");
        let err = node_endpoint(&c, &c.nodes[1], "PLAIN-9092", 9092).unwrap_err();
        assert_eq!(
            err,
            ConfigError::PortPending {
                node: 1,
                listener: "PLAIN-9092".into()
            }
        );
        assert_eq!(
            bootstrap_servers(&c, "plain").unwrap_err().reason(),
            "AddressPending"
        );
        assert_eq!(
            bootstrap_servers(&c, REPLICATION_LISTENER).unwrap(),
            "10.0.0.7:31001,[fd00::2]:31002"
        );
    }

    #[test]
    fn bootstrap_servers_by_mode() {
        let c = cluster(Addressing::ClusterDns);
        assert_eq!(
            bootstrap_servers(&c, "plain").unwrap(),
            "my-cluster-kafka-bootstrap.kafka.svc:9092"
        );
        assert_eq!(
            bootstrap_servers(&c, "PLAIN-9092").unwrap(),
            "my-cluster-kafka-bootstrap.kafka.svc:9092"
        );
        assert_eq!(
            bootstrap_servers(&c, REPLICATION_LISTENER).unwrap(),
            "my-cluster-kafka-bootstrap.kafka.svc:9091"
        );
        assert_eq!(
            bootstrap_servers(&c, CONTROLPLANE_LISTENER).unwrap(),
            "my-cluster-ctl-0.my-cluster-kafka-brokers.kafka.svc:9090"
        );
        let c = cluster(Addressing::multi_cluster_services());
        assert_eq!(
            bootstrap_servers(&c, "plain").unwrap(),
            "my-cluster-kafka-bootstrap.kafka.svc.clusterset.local:9092"
        );
    }

    #[test]
    fn bootstrap_of_unknown_listener_is_an_error() {
        let c = cluster(Addressing::ClusterDns);
        let err = bootstrap_servers(&c, "external").unwrap_err();
        assert_eq!(err.reason(), "UnknownListener");
        assert_eq!(
            bootstrap_servers(&c, "tls").unwrap(),
            "my-cluster-kafka-bootstrap.kafka.svc:9093"
        );
    }
}
