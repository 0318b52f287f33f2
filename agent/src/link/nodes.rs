//! The member cluster's Kubernetes nodes and their addresses, as the status report carries
//! them: where a `nodeport` listener's brokers are reached. Nodes are cluster-scoped: the agent
//! needs get/list/watch on them, and without it reports none (`nodes_listed` stays false).

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use k8s_openapi::ClusterResourceScope;
use k8s_openapi::api::core::v1::NodeAddress as K8sNodeAddress;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kstretch_proto::agent::v1::{NodeAddress, NodeStatus};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use serde::Deserialize;

/// A node as cached: its name and addresses, nothing else decoded (a node's status lists every
/// image it holds, which the agent never reads).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct CachedNode {
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub status: Option<CachedNodeStatus>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct CachedNodeStatus {
    pub addresses: Option<Vec<K8sNodeAddress>>,
}

/// The same resource as `k8s_openapi`'s `Node` (core/v1, `nodes`).
impl kube::Resource for CachedNode {
    type DynamicType = ();
    type Scope = ClusterResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("Node")
    }

    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }

    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }

    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("nodes")
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl CachedNode {
    /// Drops the metadata nothing reads before the node enters the cache.
    fn trim(&mut self) {
        let name = self.metadata.name.take();
        self.metadata = ObjectMeta {
            name,
            ..ObjectMeta::default()
        };
    }
}

/// Each node's addresses, ordered by node name; a node's addresses in the order it lists them.
pub fn node_statuses(nodes: &[Arc<CachedNode>]) -> Vec<NodeStatus> {
    let mut out: Vec<NodeStatus> = nodes
        .iter()
        .map(|node| NodeStatus {
            name: node.name_any(),
            addresses: node
                .status
                .as_ref()
                .and_then(|s| s.addresses.as_ref())
                .into_iter()
                .flatten()
                .map(|a| NodeAddress {
                    r#type: a.type_.clone(),
                    address: a.address.clone(),
                })
                .collect(),
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// A watch of the cluster's nodes.
#[derive(Debug, Clone)]
pub struct Nodes {
    store: Store<CachedNode>,
    listed: Arc<AtomicBool>,
}

impl Nodes {
    /// Starts the watch; it runs until the returned future ends with `shutdown`.
    pub fn start(
        client: &Client,
        shutdown: tokio_util::sync::CancellationToken,
    ) -> (Self, impl std::future::Future<Output = ()> + Send + 'static) {
        let (store, writer) = reflector::store();
        let listed = Arc::new(AtomicBool::new(false));
        let api: Api<CachedNode> = Api::all(client.clone());
        let flag = listed.clone();
        let task = async move {
            let stream = watcher(api, watcher::Config::default())
                .default_backoff()
                .modify(CachedNode::trim)
                .reflect(writer)
                .for_each(move |event| {
                    match &event {
                        Ok(watcher::Event::InitDone) => flag.store(true, Ordering::Release),
                        Ok(_) => {}
                        Err(e) => {
                            // Forbidden here means the agent's role lacks the nodes: what is
                            // listed stays unknown rather than empty.
                            tracing::warn!(error = %e, "node watch failed; retrying");
                        }
                    }
                    async {}
                });
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = stream => {}
            }
        };
        (Self { store, listed }, task)
    }

    /// The nodes, once listed.
    pub fn report(&self) -> Option<Vec<NodeStatus>> {
        self.listed
            .load(Ordering::Acquire)
            .then(|| node_statuses(&self.store.state()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn nodes_are_reported_by_name_with_their_addresses_in_their_order() {
        let node = |name: &str, addresses: serde_json::Value| {
            let mut n: CachedNode = serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {"a": "b"}, "managedFields": [{"manager": "m"}]},
                "status": {"addresses": addresses, "images": [{"names": ["x"]}]}
            }))
            .unwrap();
            n.trim();
            Arc::new(n)
        };
        let b = node(
            "b",
            json!([{"type": "InternalIP", "address": "10.0.0.2"},
                   {"type": "Hostname", "address": "b"}]),
        );
        let a = node("a", json!([{"type": "ExternalIP", "address": "1.2.3.4"}]));
        assert_eq!(b.metadata.labels, None);
        let report = node_statuses(&[b, a]);
        assert_eq!(
            report.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(
            report[1].addresses,
            [
                NodeAddress {
                    r#type: "InternalIP".into(),
                    address: "10.0.0.2".into()
                },
                NodeAddress {
                    r#type: "Hostname".into(),
                    address: "b".into()
                }
            ]
        );
    }
}
