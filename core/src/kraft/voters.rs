//! How every node finds the controller quorum: static (`controller.quorum.voters`, KRaft
//! version 0) or dynamic (KIP-853: `controller.quorum.bootstrap.servers`, the voters kept in
//! the metadata log), and the `kafka-storage format` arguments that go with it.

use std::collections::BTreeMap;

use super::addressing::node_endpoint;
use super::error::ConfigError;
use super::model::{CONTROLPLANE_LISTENER, CONTROLPLANE_PORT, KafkaCluster, Node, QuorumMode};
use super::uuid::uuid_text;

/// Where nodes of a dynamic quorum find it.
pub(crate) const BOOTSTRAP_SERVERS: &str = "controller.quorum.bootstrap.servers";

/// The property naming the quorum and its value, the same for every node. Sorted by ID so the
/// text never changes without cause.
pub(crate) fn quorum_property(
    cluster: &KafkaCluster,
) -> Result<(&'static str, String), ConfigError> {
    let endpoints = cluster
        .controllers()
        .into_iter()
        .map(|n| Ok((n.id, controller_endpoint(cluster, n)?)))
        .collect::<Result<Vec<_>, ConfigError>>()?;
    Ok(match cluster.quorum {
        QuorumMode::Static => (
            "controller.quorum.voters",
            endpoints
                .iter()
                .map(|(id, e)| format!("{id}@{e}"))
                .collect::<Vec<_>>()
                .join(","),
        ),
        QuorumMode::Dynamic => (
            BOOTSTRAP_SERVERS,
            endpoints
                .iter()
                .map(|(_, e)| e.clone())
                .collect::<Vec<_>>()
                .join(","),
        ),
    })
}

fn controller_endpoint(cluster: &KafkaCluster, node: &Node) -> Result<String, ConfigError> {
    Ok(node_endpoint(cluster, node, CONTROLPLANE_LISTENER, CONTROLPLANE_PORT)?.to_string())
}

/// The arguments `kafka-storage format` needs for `node` besides the cluster ID.
///
/// - Static: none (the voters come from the configuration).
/// - Dynamic, for a controller among `initial` (node ID → metadata directory ID, the voters
///   the quorum starts with, chosen before any node formats): `--initial-controllers` with
///   all of them, so every initial controller writes the same first voter set and its own
///   directory gets the ID listed for it.
/// - Dynamic otherwise (brokers, controllers added later, a controller that formats again
///   after the quorum formed): `--no-initial-controllers`; such a controller starts as an
///   observer and central makes it a voter once it has caught up.
///
/// Initial controllers that are no longer nodes of the cluster are left out.
pub fn format_arguments(
    cluster: &KafkaCluster,
    node: &Node,
    initial: &BTreeMap<i32, u128>,
) -> Result<String, ConfigError> {
    if cluster.quorum == QuorumMode::Static {
        return Ok(String::new());
    }
    if !node.is_controller() || !initial.contains_key(&node.id) {
        return Ok("--no-initial-controllers".to_owned());
    }
    let mut voters = Vec::new();
    for (id, directory) in initial {
        let Some(voter) = cluster.node(*id).filter(|n| n.is_controller()) else {
            continue;
        };
        let endpoint = controller_endpoint(cluster, voter)?;
        voters.push(format!("{id}@{endpoint}:{}", uuid_text(*directory)));
    }
    Ok(format!("--initial-controllers {}", voters.join(",")))
}
