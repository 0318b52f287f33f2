//! Adopting what already runs for a `Kafka` that central knows nothing of: one re-created after
//! its CRD was reinstalled, or whose status was lost. Its cluster ID, how its pods find the
//! controller quorum and each pool's node IDs are read back from the StrimziPodSets the agents
//! report, so no node ID is reassigned and no
//! pod is reconfigured. Pure.

use std::collections::{BTreeMap, BTreeSet};

use kstretch_proto::agent::v1::PodSetStatus;

use super::resolve::ResolvedPool;

/// What the member clusters report of one `Kafka`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Adoption {
    /// These clusters, where pools of the `Kafka` run, have not reported yet: deciding now
    /// could give running nodes a new cluster ID or new IDs.
    Awaiting(Vec<String>),
    /// What runs: the cluster ID (if a podset carries one) and the node IDs of each pool whose
    /// podset exists, by pool name.
    Found {
        cluster_id: Option<String>,
        /// How the pods find the controller quorum (`static`, `dynamic`), if a podset says.
        controller_quorum: Option<String>,
        node_ids: BTreeMap<String, Vec<i32>>,
    },
}

/// Reads what runs for `kafka` in `namespace` from `reports` (podsets by cluster alias, only
/// for clusters whose agent has reported since central started).
pub fn adopt(
    kafka: &str,
    namespace: &str,
    pools: &[ResolvedPool],
    reports: &BTreeMap<String, Vec<PodSetStatus>>,
) -> Adoption {
    let awaiting: BTreeSet<String> = pools
        .iter()
        .filter(|p| !reports.contains_key(&p.alias))
        .map(|p| p.alias.clone())
        .collect();
    if !awaiting.is_empty() {
        return Adoption::Awaiting(awaiting.into_iter().collect());
    }
    let mut cluster_id = None;
    let mut controller_quorum = None;
    let mut node_ids = BTreeMap::new();
    for pool in pools {
        let podset_name = format!("{kafka}-{}", pool.name);
        let Some(podset) = reports[&pool.alias]
            .iter()
            .find(|ps| ps.namespace == namespace && ps.name == podset_name)
        else {
            continue;
        };
        if cluster_id.is_none() && !podset.cluster_id.is_empty() {
            cluster_id = Some(podset.cluster_id.clone());
        }
        if controller_quorum.is_none() && !podset.controller_quorum.is_empty() {
            controller_quorum = Some(podset.controller_quorum.clone());
        }
        let prefix = format!("{podset_name}-");
        let mut ids: Vec<i32> = podset
            .pods_status
            .iter()
            .filter_map(|pod| pod.name.strip_prefix(&prefix)?.parse().ok())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        node_ids.insert(pool.name.clone(), ids);
    }
    Adoption::Found {
        cluster_id,
        controller_quorum,
        node_ids,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::kafka::resolve::resolve;
    use crate::kafka::resolve::tests::{kafka, members, pool};
    use kstretch_proto::agent::v1::PodStatus;
    use serde_json::json;

    fn pools() -> Vec<ResolvedPool> {
        let c = pool("controllers", &["controller"], 3, json!({}));
        let b = pool(
            "brokers",
            &["broker"],
            2,
            json!({"metadata": {"annotations": {"strimzi.io/stretch-cluster-alias": "beta"}}}),
        );
        resolve(&kafka(json!({})), &[&b, &c], &members())
            .unwrap()
            .pools
    }

    /// What an agent reports of podset `name` running `pods` with `cluster_id`.
    pub(crate) fn podset(name: &str, cluster_id: &str, pods: &[&str]) -> PodSetStatus {
        PodSetStatus {
            namespace: "kafka".into(),
            name: name.into(),
            cluster_id: cluster_id.into(),
            pods_status: pods
                .iter()
                .map(|p| PodStatus {
                    name: (*p).into(),
                    ..PodStatus::default()
                })
                .collect(),
            ..PodSetStatus::default()
        }
    }

    #[test]
    fn every_cluster_of_a_pool_must_have_reported() {
        let reports = [("alpha".to_owned(), vec![])].into();
        assert_eq!(
            adopt("my-cluster", "kafka", &pools(), &reports),
            Adoption::Awaiting(vec!["beta".into()])
        );
    }

    #[test]
    fn ids_and_cluster_id_come_from_the_podsets_that_run() {
        let reports = [
            (
                "alpha".to_owned(),
                vec![
                    podset(
                        "my-cluster-controllers",
                        "",
                        &["my-cluster-controllers-7", "my-cluster-controllers-3"],
                    ),
                    // Another Kafka's, and another namespace's, are not ours.
                    podset("other-controllers", "X", &["other-controllers-1"]),
                ],
            ),
            (
                "beta".to_owned(),
                vec![PodSetStatus {
                    controller_quorum: "dynamic".into(),
                    ..podset(
                        "my-cluster-brokers",
                        "abc",
                        &["my-cluster-brokers-10", "my-cluster-brokers-x"],
                    )
                }],
            ),
        ]
        .into();
        let Adoption::Found {
            cluster_id,
            controller_quorum,
            node_ids,
        } = adopt("my-cluster", "kafka", &pools(), &reports)
        else {
            panic!("found expected");
        };
        assert_eq!(cluster_id.as_deref(), Some("abc"));
        assert_eq!(controller_quorum.as_deref(), Some("dynamic"));
        assert_eq!(node_ids["controllers"], [3, 7]);
        assert_eq!(node_ids["brokers"], [10]);

        let nothing = [("alpha".to_owned(), vec![]), ("beta".to_owned(), vec![])].into();
        assert_eq!(
            adopt("my-cluster", "kafka", &pools(), &nothing),
            Adoption::Found {
                cluster_id: None,
                controller_quorum: None,
                node_ids: BTreeMap::new()
            },
            "a new cluster"
        );
    }
}
