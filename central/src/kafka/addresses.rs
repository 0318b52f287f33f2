//! Where each node is reached when it has a Service of its own (`loadbalancer` and `nodeport`
//! addressing): read from the per-node Services the agents report. A node whose Service has no
//! address yet is pending; its configuration waits rather than guessing. Pure.

use std::collections::BTreeMap;

use kstretch_core::kraft::{
    self, CONTROLPLANE_LISTENER, Listener, NodeAddress, REPLICATION_LISTENER,
};
use kstretch_proto::agent::v1::ServiceStatus;

use super::resolve::PerNode;

/// Name of a per-node Service port for a Kafka listener; [`listener_of_port`] reverses it.
pub fn port_name(listener: &str) -> String {
    match listener {
        CONTROLPLANE_LISTENER => "tcp-ctrlplane".to_owned(),
        REPLICATION_LISTENER => "tcp-replication".to_owned(),
        other => format!("tcp-{}", other.to_lowercase()),
    }
}

fn listener_of_port(port: &str, listeners: &[Listener]) -> Option<String> {
    match port {
        "tcp-ctrlplane" => Some(CONTROLPLANE_LISTENER.to_owned()),
        "tcp-replication" => Some(REPLICATION_LISTENER.to_owned()),
        other => listeners
            .iter()
            .map(Listener::config_name)
            .find(|name| port_name(name) == other),
    }
}

/// One node to address: ID, pool and member cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRef {
    pub id: i32,
    pub pool: String,
    pub alias: String,
}

/// The addresses known, and one line per node still waiting for its Service.
pub fn node_addresses(
    kafka: &str,
    namespace: &str,
    nodes: &[NodeRef],
    per_node: &PerNode,
    listeners: &[Listener],
    reported: &BTreeMap<String, Vec<ServiceStatus>>,
) -> (BTreeMap<i32, NodeAddress>, Vec<String>) {
    let mut addresses = BTreeMap::new();
    let mut pending = Vec::new();
    for node in nodes {
        let name = kraft::per_node_service_name(kafka, &node.pool, node.id);
        let Some(service) = reported.get(&node.alias).and_then(|s| {
            s.iter()
                .find(|s| s.namespace == namespace && s.name == name)
        }) else {
            pending.push(format!(
                "node {}: Service {name} not reported by cluster {} yet",
                node.id, node.alias
            ));
            continue;
        };
        let host = match per_node {
            PerNode::LoadBalancer => match service.ingress.first() {
                Some(host) => host.clone(),
                None => {
                    pending.push(format!(
                        "node {}: LoadBalancer {name} in cluster {} has no address yet",
                        node.id, node.alias
                    ));
                    continue;
                }
            },
            PerNode::NodePort { hosts } => match hosts.get(&node.alias) {
                Some(host) => host.clone(),
                None => {
                    pending.push(format!(
                        "node {}: no node-port host for cluster {}",
                        node.id, node.alias
                    ));
                    continue;
                }
            },
        };
        let mut ports = BTreeMap::new();
        for p in &service.ports {
            let Some(listener) = listener_of_port(&p.name, listeners) else {
                continue;
            };
            let port = match per_node {
                PerNode::LoadBalancer => p.port,
                PerNode::NodePort { .. } => p.node_port,
            };
            if let Ok(port) = u16::try_from(port)
                && port > 0
            {
                ports.insert(listener, port);
            }
        }
        addresses.insert(node.id, NodeAddress { host, ports });
    }
    (addresses, pending)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use kstretch_core::kraft::ListenerKind;
    use kstretch_proto::agent::v1::ServicePort;

    fn listeners() -> Vec<Listener> {
        vec![Listener {
            name: "plain".into(),
            port: 9092,
            kind: ListenerKind::Internal,
            tls: false,
            authentication: Default::default(),
            custom_certificate: false,
            advertised: BTreeMap::new(),
        }]
    }

    fn service(name: &str, ingress: &[&str]) -> ServiceStatus {
        ServiceStatus {
            namespace: "ns".into(),
            name: name.into(),
            r#type: "LoadBalancer".into(),
            ingress: ingress.iter().map(|s| s.to_string()).collect(),
            ports: vec![
                ServicePort {
                    name: "tcp-replication".into(),
                    port: 9091,
                    node_port: 31001,
                },
                ServicePort {
                    name: "tcp-plain-9092".into(),
                    port: 9092,
                    node_port: 31002,
                },
                ServicePort {
                    name: "tcp-ctrlplane".into(),
                    port: 9090,
                    node_port: 0,
                },
            ],
        }
    }

    fn nodes() -> Vec<NodeRef> {
        vec![
            NodeRef {
                id: 0,
                pool: "a".into(),
                alias: "alpha".into(),
            },
            NodeRef {
                id: 1,
                pool: "b".into(),
                alias: "beta".into(),
            },
        ]
    }

    #[test]
    fn load_balancers_give_their_ingress_and_service_ports() {
        let reported: BTreeMap<String, Vec<ServiceStatus>> = [
            ("alpha".to_owned(), vec![service("k-a-0", &["10.0.0.5"])]),
            ("beta".to_owned(), vec![service("k-b-1", &[])]),
        ]
        .into();
        let (addresses, pending) = node_addresses(
            "k",
            "ns",
            &nodes(),
            &PerNode::LoadBalancer,
            &listeners(),
            &reported,
        );
        assert_eq!(addresses[&0].host, "10.0.0.5");
        assert_eq!(addresses[&0].ports["REPLICATION-9091"], 9091);
        assert_eq!(addresses[&0].ports["PLAIN-9092"], 9092);
        assert_eq!(addresses[&0].ports["CONTROLPLANE-9090"], 9090);
        assert_eq!(pending.len(), 1);
        assert!(
            pending[0].contains("k-b-1") && pending[0].contains("no address"),
            "{pending:?}"
        );
    }

    #[test]
    fn node_ports_use_the_cluster_host_and_the_allocated_ports() {
        let reported: BTreeMap<String, Vec<ServiceStatus>> =
            [("alpha".to_owned(), vec![service("k-a-0", &[])])].into();
        let per_node = PerNode::NodePort {
            hosts: [("alpha".to_owned(), "nodes.alpha".to_owned())].into(),
        };
        let (addresses, pending) =
            node_addresses("k", "ns", &nodes(), &per_node, &listeners(), &reported);
        assert_eq!(addresses[&0].host, "nodes.alpha");
        assert_eq!(addresses[&0].ports["REPLICATION-9091"], 31001);
        assert!(
            !addresses[&0].ports.contains_key("CONTROLPLANE-9090"),
            "no node port allocated"
        );
        assert!(pending[0].contains("not reported"), "{pending:?}");
    }
}
