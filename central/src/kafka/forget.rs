//! Member clusters lost for good and forgotten (`kstretch.io/forgotten-clusters`, set by
//! `kstretch forget`): which nodes went with them, the operation that gives their partitions
//! replicas on the survivors, and what the pools and the `Kafka` say meanwhile.
//!
//! A forgotten cluster's nodes leave everything central builds (its podsets, the roll, the
//! readiness, the quorum's desired voters), so the survivors carry on and the cluster gets no
//! object of this `Kafka` if it ever comes back: its agent then deletes what it still runs
//! (the explicit word is the annotation). The nodes stay registered, and their IDs taken,
//! until the operation has replaced their replicas; then they are unregistered (they are
//! fenced) and their voters removed, while a majority of the voters survives.

use std::collections::{BTreeMap, BTreeSet};

use kstretch_api::condition::READY;
use kstretch_api::operation::{Forget, KafkaOperationSpec, phase};
use kstretch_api::{Kafka, KafkaNodePool, KafkaNodePoolStatus, KafkaOperation, names};
use kstretch_core::node_ids::Assignments;
use kube::api::PostParams;
use kube::{Api, ResourceExt};

use super::resolve::{Members, Resolved};
use super::status;
use crate::error::Error;
use crate::kafka::warning::{Reason, Warning};

/// The nodes one pool had in a forgotten cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lost {
    pub pool: String,
    pub alias: String,
    pub ids: BTreeSet<i32>,
}

/// The forgotten clusters the `Kafka` names; `Err` says what is wrong with the annotation (an
/// alias that is no member cluster, or central's own, which cannot be lost while central runs).
pub fn forgotten(kafka: &Kafka, members: &Members) -> Result<BTreeSet<String>, String> {
    let named = kafka.forgotten_clusters();
    let unknown: Vec<&String> = named.iter().filter(|a| !members.all.contains(*a)).collect();
    if !unknown.is_empty() {
        return Err(format!(
            "annotation {} names {unknown:?}, which are not member clusters of central (those are {:?}); name lost member clusters only",
            names::FORGOTTEN_CLUSTERS,
            members.all
        ));
    }
    if named.contains(&members.own) {
        return Err(format!(
            "annotation {} names {}, central's own cluster, which cannot be lost while central runs in it; remove it",
            names::FORGOTTEN_CLUSTERS,
            members.own
        ));
    }
    Ok(named)
}

/// Before node IDs are assigned: a pool in a forgotten cluster keeps exactly the IDs it has
/// (nothing is added or removed there), so they stay taken.
pub fn freeze(resolved: &mut Resolved, forgotten: &BTreeSet<String>) {
    for pool in resolved
        .pools
        .iter_mut()
        .filter(|p| forgotten.contains(&p.alias))
    {
        let have = pool.ids.current.as_ref().map_or(0, Vec::len);
        pool.ids.replicas = u32::try_from(have).unwrap_or(u32::MAX);
        pool.ids.next_node_ids = None;
        pool.ids.remove_node_ids = None;
        pool.ids.roles = pool.ids.current_roles.clone();
    }
}

/// After node IDs are assigned: takes the forgotten clusters' nodes out of what is built, and
/// returns them (a pool placed there, and the nodes a moving pool left there).
pub fn split(
    resolved: &mut Resolved,
    assignments: &mut Assignments,
    forgotten: &BTreeSet<String>,
) -> Vec<Lost> {
    let mut lost = Vec::new();
    resolved.pools.retain(|pool| {
        if !forgotten.contains(&pool.alias) {
            return true;
        }
        let ids = assignments
            .pools
            .remove(&pool.name)
            .map(|a| a.current)
            .unwrap_or_default();
        lost.push(Lost {
            pool: pool.name.clone(),
            alias: pool.alias.clone(),
            ids: ids
                .union(&pool.ids.leaving.iter().copied().collect())
                .copied()
                .collect(),
        });
        false
    });
    for pool in &mut resolved.pools {
        if let Some(leaving) = pool.leaving.take_if(|l| forgotten.contains(&l.alias)) {
            pool.ids.leaving.clear();
            lost.push(Lost {
                pool: pool.name.clone(),
                alias: leaving.alias,
                ids: leaving.ids,
            });
        }
    }
    lost
}

/// How long after a forgotten cluster's agent connects again its old nodes may still be
/// registering (a returning node's broker starts as soon as its kubelet does).
const RETURN_WATCH: std::time::Duration = std::time::Duration::from_secs(120);

/// Whether a forgotten cluster came back: its agent connected within [`RETURN_WATCH`], or still
/// reports podsets of `kafka`. Its old nodes may run, and a broker register again, until the
/// agent has deleted them.
pub fn returning(
    agents: &crate::link::Agents,
    kafka: &Kafka,
    forgotten: &BTreeSet<String>,
) -> bool {
    let namespace = kafka.namespace().unwrap_or_default();
    let prefix = format!("{}-", kafka.name_any());
    forgotten
        .iter()
        .filter_map(|alias| agents.get(alias))
        .any(|r| {
            let recent = r
                .connected_since
                .elapsed()
                .is_ok_and(|since| since < RETURN_WATCH);
            let pods = r
                .podsets
                .iter()
                .any(|p| p.namespace == namespace && p.name.starts_with(&prefix));
            r.connected && (recent || pods)
        })
}

/// The name of the operation that replaces the replicas lost with `alias`.
pub fn operation_name(kafka: &str, alias: &str) -> String {
    format!("{kafka}-forget-{alias}")
}

/// What the forgets of lost clusters need this pass.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Forgets {
    /// The operations to create (a forgotten cluster without one).
    pub create: Vec<KafkaOperation>,
    /// The clusters whose operation has completed: their nodes can go.
    pub done: BTreeSet<String>,
    pub warnings: Vec<Warning>,
}

/// Each forgotten cluster's operation among `kafka`'s operations `ops`, or the one to create,
/// and what each says (pure).
pub fn decide(
    kafka: &Kafka,
    forgotten: &BTreeSet<String>,
    lost: &[Lost],
    ops: &[KafkaOperation],
) -> Forgets {
    let mut out = Forgets::default();
    for alias in forgotten {
        let name = operation_name(&kafka.name_any(), alias);
        let ids: BTreeSet<i32> = lost
            .iter()
            .filter(|l| l.alias == *alias)
            .flat_map(|l| l.ids.iter().copied())
            .collect();
        let Some(op) = ops.iter().find(|o| o.name_any() == name) else {
            out.create.push(operation(kafka, alias, &name, &ids));
            out.warnings.push(forgetting(alias, &ids, &name, "created"));
            continue;
        };
        let status = op.status.clone().unwrap_or_default();
        let said = status
            .conditions
            .iter()
            .find(|c| c.type_ == READY)
            .and_then(|c| c.message.clone())
            .unwrap_or_default();
        match status.phase.as_deref() {
            Some(phase::COMPLETED) => {
                out.done.insert(alias.clone());
                let offline: Vec<&String> = status
                    .plan
                    .iter()
                    .flat_map(|p| p.left_alone.iter())
                    .collect();
                if !offline.is_empty() {
                    out.warnings.push(Warning::new(
                        Reason::PartitionsLost,
                        format!(
                            "partitions offline since cluster {alias} was lost (every in-sync replica was there; nothing can restore their data): {offline:?}; delete and recreate those topics, or restore them from a backup"
                        ),
                    ));
                }
            }
            p @ (Some(phase::ABORTED) | Some(phase::REFUSED)) => out.warnings.push(Warning::new(
                Reason::ForgetStalled,
                format!(
                    "operation {name}, which replaces the replicas lost with cluster {alias}, is {} ({said}); delete it to plan again once the cause is mended",
                    p.unwrap_or_default()
                ),
            )),
            p => out.warnings.push(forgetting(
                alias,
                &ids,
                &name,
                &format!("{}: {said}", p.unwrap_or("Pending")),
            )),
        }
    }
    out
}

/// Creates the operations [`decide`] asked for.
pub async fn create(client: &kube::Client, ops: &[KafkaOperation]) -> Result<(), Error> {
    for op in ops {
        let api: Api<KafkaOperation> =
            Api::namespaced(client.clone(), &op.namespace().unwrap_or_default());
        match api.create(&PostParams::default(), op).await {
            // Made meanwhile, or without the label that lists it: looked at next time.
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            created => {
                created?;
                let forget = op.spec.forget.as_ref();
                tracing::info!(
                    operation = %op.name_any(),
                    cluster = ?forget.map(|f| &f.cluster),
                    ids = ?forget.map(|f| &f.node_ids),
                    "forgotten cluster: operation created"
                );
            }
        }
    }
    Ok(())
}

fn forgetting(alias: &str, ids: &BTreeSet<i32>, name: &str, progress: &str) -> Warning {
    Warning::new(
        Reason::ClusterForgotten,
        format!(
            "Kubernetes cluster {alias} is forgotten: its nodes {ids:?} are out of Kafka; operation {name} gives their partitions replicas on the surviving brokers ({progress}); the nodes are unregistered, and their controllers removed from the quorum's voters, once it completes"
        ),
    )
}

/// The operation for `alias`, labelled for the `Kafka`; it stays as the record of the forget.
fn operation(kafka: &Kafka, alias: &str, name: &str, ids: &BTreeSet<i32>) -> KafkaOperation {
    let mut op = KafkaOperation::new(
        name,
        KafkaOperationSpec {
            forget: Some(Forget {
                cluster: alias.to_owned(),
                node_ids: ids.iter().copied().collect(),
            }),
            ..Default::default()
        },
    );
    op.metadata.namespace = kafka.namespace();
    op.metadata.labels = Some(BTreeMap::from([(
        names::CLUSTER.to_owned(),
        kafka.name_any(),
    )]));
    op
}

/// The status of a pool in a forgotten cluster: its lost IDs until they can go (`done`), then
/// none; not ready, saying what to do with it.
pub fn pool_status(
    pool: &KafkaNodePool,
    lost: &[Lost],
    done: bool,
    now: &str,
) -> KafkaNodePoolStatus {
    let name = pool.name_any();
    let mut s = pool.status.clone().unwrap_or_default();
    let ids: Vec<i32> = if done {
        Vec::new()
    } else {
        lost.iter()
            .filter(|l| l.pool == name)
            .flat_map(|l| l.ids.iter().copied())
            .collect()
    };
    let alias = s.cluster_alias.clone().unwrap_or_default();
    let message = format!(
        "KafkaNodePool {name} is in Kubernetes cluster {alias}, which is forgotten: it runs no nodes; move it to a live cluster (`kstretch move-pool {name} --to <cluster>`) or delete it"
    );
    s.conditions = status::conditions(
        &s.conditions,
        status::not_ready(Reason::ClusterForgotten.as_str(), message),
        crate::status::NO_WARNINGS,
        now,
    );
    s.replicas = Some(ids.len() as i32);
    s.node_ids = ids;
    s.leaving = None;
    s.observed_generation = pool.metadata.generation;
    s
}

#[cfg(test)]
mod tests {
    use super::super::resolve::{self, tests as fixtures};
    use super::*;
    use serde_json::json;

    fn with(value: &str) -> Kafka {
        fixtures::kafka(json!({"metadata": {"annotations": {names::FORGOTTEN_CLUSTERS: value}}}))
    }

    #[test]
    fn the_annotation_names_lost_member_clusters_only() {
        let members = fixtures::members();
        assert_eq!(
            forgotten(&fixtures::kafka(json!({})), &members),
            Ok(BTreeSet::new())
        );
        assert_eq!(
            forgotten(&with(" beta,, "), &members),
            Ok(["beta".to_owned()].into())
        );
        let e = forgotten(&with("beta,delta"), &members).unwrap_err();
        assert!(
            e.contains("[\"delta\"], which are not member clusters"),
            "{e}"
        );
        let e = forgotten(&with("alpha"), &members).unwrap_err();
        assert!(e.contains("central's own cluster"), "{e}");
    }

    fn forget_op(alias: &str, status: serde_json::Value) -> KafkaOperation {
        let mut op = operation(
            &fixtures::kafka(json!({})),
            alias,
            &operation_name("my-cluster", alias),
            &BTreeSet::from([3]),
        );
        op.status = Some(serde_json::from_value(status).unwrap());
        op
    }

    #[test]
    fn a_forgotten_cluster_gets_its_operation_and_its_nodes_go_once_it_completed() {
        let kafka = fixtures::kafka(json!({}));
        let lost = [Lost {
            pool: "b".into(),
            alias: "beta".into(),
            ids: BTreeSet::from([3]),
        }];
        let forgotten = BTreeSet::from(["beta".to_owned()]);
        let first = decide(&kafka, &forgotten, &lost, &[]);
        assert_eq!(first.create.len(), 1);
        assert_eq!(first.create[0].name_any(), "my-cluster-forget-beta");
        assert_eq!(first.create[0].spec.forget.as_ref().unwrap().node_ids, [3]);
        assert!(first.done.is_empty());
        assert_eq!(first.warnings[0].reason, Reason::ClusterForgotten);
        // Running: the nodes wait, and the warning says how far it is.
        let running = forget_op(
            "beta",
            json!({"phase": "Running", "conditions": [
            {"type": "Ready", "status": "False", "message": "2 partitions left"}]}),
        );
        let waiting = decide(&kafka, &forgotten, &lost, std::slice::from_ref(&running));
        assert!(waiting.create.is_empty() && waiting.done.is_empty());
        assert!(
            waiting.warnings[0]
                .message
                .contains("(Running: 2 partitions left)"),
            "{}",
            waiting.warnings[0].message
        );
        let refused = forget_op("beta", json!({"phase": "Refused"}));
        let stalled = decide(&kafka, &forgotten, &lost, &[refused]);
        assert_eq!(stalled.warnings[0].reason, Reason::ForgetStalled);
        let completed = forget_op("beta", json!({"phase": "Completed"}));
        let done = decide(&kafka, &forgotten, &lost, &[completed]);
        assert_eq!(done.done, forgotten);
        assert!(done.warnings.is_empty());
    }

    fn placed(name: &str, replicas: i32, alias: &str, status: serde_json::Value) -> KafkaNodePool {
        fixtures::pool(
            name,
            &["broker"],
            replicas,
            json!({"metadata": {"annotations": {names::STRETCH_CLUSTER_ALIAS: alias}},
                   "status": status}),
        )
    }

    #[test]
    fn a_forgotten_pool_keeps_its_ids_taken_and_a_moved_pool_drops_what_it_left_there() {
        let forgotten: BTreeSet<String> = ["beta".to_owned()].into();
        let in_beta = placed(
            "b",
            3,
            "beta",
            json!({"nodeIds": [4, 5], "clusterAlias": "beta", "roles": ["broker"]}),
        );
        let moved = placed(
            "m",
            1,
            "alpha",
            json!({"nodeIds": [6], "clusterAlias": "beta", "roles": ["broker"]}),
        );
        let fresh = placed("a", 3, "alpha", json!({}));
        let controllers = fixtures::pool("c", &["controller"], 3, json!({}));
        let mut resolved = resolve::resolve(
            &fixtures::kafka(json!({})),
            &[&in_beta, &moved, &fresh, &controllers],
            &fixtures::members(),
        )
        .unwrap();
        freeze(&mut resolved, &forgotten);
        let ids: Vec<_> = resolved.pools.iter().map(|p| p.ids.clone()).collect();
        let mut assignments = kstretch_core::node_ids::assign(&ids).unwrap();
        assert_eq!(
            assignments.pools["b"].desired,
            [4, 5].into(),
            "no scale-up in a forgotten cluster"
        );
        let lost = split(&mut resolved, &mut assignments, &forgotten);
        assert_eq!(
            lost,
            [
                Lost {
                    pool: "b".into(),
                    alias: "beta".into(),
                    ids: [4, 5].into()
                },
                Lost {
                    pool: "m".into(),
                    alias: "beta".into(),
                    ids: [6].into()
                },
            ]
        );
        let left: Vec<&str> = resolved.pools.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(left, ["m", "a", "c"]);
        assert!(resolved.pools[0].leaving.is_none());
        assert!(!assignments.pools.contains_key("b"));
        // The new nodes took IDs none of the lost ones.
        let new: BTreeSet<i32> = ["m", "a"]
            .iter()
            .flat_map(|p| assignments.pools[*p].desired.iter().copied())
            .collect();
        assert!(new.is_disjoint(&[4, 5, 6].into()), "{new:?}");
    }

    #[test]
    fn a_forgotten_pool_shows_its_lost_ids_until_they_can_go_and_says_what_to_do() {
        let pool = placed(
            "b",
            2,
            "beta",
            json!({"nodeIds": [4, 5], "clusterAlias": "beta", "replicas": 2}),
        );
        let lost = [Lost {
            pool: "b".into(),
            alias: "beta".into(),
            ids: [4, 5].into(),
        }];
        let s = pool_status(&pool, &lost, false, "2026-11-25T10:00:00Z");
        assert_eq!((s.node_ids.clone(), s.replicas), (vec![4, 5], Some(2)));
        let ready = s.conditions.iter().find(|c| c.type_ == READY).unwrap();
        assert_eq!(
            ready.reason.as_deref(),
            Some(Reason::ClusterForgotten.as_str())
        );
        assert!(
            ready
                .message
                .as_deref()
                .unwrap()
                .contains("kstretch move-pool b --to")
        );
        let s = pool_status(&pool, &lost, true, "2026-11-25T10:00:00Z");
        assert_eq!((s.node_ids, s.replicas), (vec![], Some(0)));
    }
}
