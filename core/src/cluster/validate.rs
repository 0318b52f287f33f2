//! Validation of a Kafka cluster's node pools: every rule a user can break in the `Kafka` and
//! `KafkaNodePool` resources, each reported with a stable reason and a message that says what to
//! fix. All problems are reported at once, so one round of edits can fix them all.

use std::collections::BTreeSet;

use crate::node_ids::Role;

/// Longest name Kubernetes allows for what kstretch derives from the Kafka and pool names (pod
/// names double as host names and as `strimzi.io/pod-name` label values: DNS labels).
pub const MAX_DERIVED_NAME: usize = 63;

/// What validation needs to know of one pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolShape {
    pub name: String,
    pub replicas: u32,
    pub roles: BTreeSet<Role>,
    /// The `strimzi.io/stretch-cluster-alias` annotation; `None` runs the pool in central's
    /// own cluster.
    pub cluster_alias: Option<String>,
    /// The largest node ID the pool will have once scaled (for the pod-name length check).
    pub max_node_id: Option<i32>,
    /// Count of JBOD volumes marked `kraftMetadata: shared` (at most one may be).
    pub kraft_metadata_volumes: usize,
}

/// One thing wrong with the cluster's resources.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error(
        "Kafka {kafka} has no KafkaNodePool: create at least one in the same namespace with the label strimzi.io/cluster={kafka}"
    )]
    NoNodePools { kafka: String },
    #[error("KafkaNodePool {pool} has no roles: set .spec.roles to controller, broker or both")]
    NoRoles { pool: String },
    #[error(
        "Kafka {kafka} has no node with the controller role: at least one KafkaNodePool with role controller and one or more replicas is required"
    )]
    NoControllers { kafka: String },
    #[error(
        "Kafka {kafka} has no node with the broker role: at least one KafkaNodePool with role broker and one or more replicas is required"
    )]
    NoBrokers { kafka: String },
    #[error(
        "the name {name} derived from Kafka {kafka} and KafkaNodePool {pool} has {length} characters, more than {max}: shorten the Kafka or the pool name",
        max = MAX_DERIVED_NAME
    )]
    NameTooLong {
        kafka: String,
        pool: String,
        name: String,
        length: usize,
    },
    #[error(
        "KafkaNodePool {pool} names Kubernetes cluster {alias:?} in strimzi.io/stretch-cluster-alias, which kstretch does not know; known clusters: {known}"
    )]
    UnknownClusterAlias {
        pool: String,
        alias: String,
        known: String,
    },
    #[error(
        "KafkaNodePool {pool} marks {count} JBOD volumes with kraftMetadata: shared; at most one volume may hold the KRaft metadata log"
    )]
    SeveralMetadataVolumes { pool: String, count: usize },
}

impl Problem {
    /// Stable reason for the `Ready=False` condition and for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NoNodePools { .. } => "NoNodePools",
            Self::NoRoles { .. } => "NodePoolWithoutRoles",
            Self::NoControllers { .. } => "NoControllers",
            Self::NoBrokers { .. } => "NoBrokers",
            Self::NameTooLong { .. } => "NameTooLong",
            Self::UnknownClusterAlias { .. } => "UnknownClusterAlias",
            Self::SeveralMetadataVolumes { .. } => "InvalidStorage",
        }
    }
}

/// Checks the pools of Kafka `kafka`. `known_aliases` are the member clusters central knows
/// (central's own cluster needs no alias). Returns every problem found, in a stable order.
pub fn validate_pools(
    kafka: &str,
    pools: &[PoolShape],
    known_aliases: &BTreeSet<String>,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    if pools.is_empty() {
        problems.push(Problem::NoNodePools {
            kafka: kafka.to_owned(),
        });
        return problems;
    }
    for pool in pools {
        if pool.roles.is_empty() {
            problems.push(Problem::NoRoles {
                pool: pool.name.clone(),
            });
        }
        // The podset is `<kafka>-<pool>`, each pod `<kafka>-<pool>-<id>`: the pod name is the
        // longest, so it is the one to check.
        let id = pool.max_node_id.unwrap_or(0).max(0);
        let name = format!("{kafka}-{}-{id}", pool.name);
        if name.len() > MAX_DERIVED_NAME {
            problems.push(Problem::NameTooLong {
                kafka: kafka.to_owned(),
                pool: pool.name.clone(),
                length: name.len(),
                name,
            });
        }
        if let Some(alias) = &pool.cluster_alias
            && !known_aliases.contains(alias)
        {
            let known = if known_aliases.is_empty() {
                "none".to_owned()
            } else {
                known_aliases.iter().cloned().collect::<Vec<_>>().join(", ")
            };
            problems.push(Problem::UnknownClusterAlias {
                pool: pool.name.clone(),
                alias: alias.clone(),
                known,
            });
        }
        if pool.kraft_metadata_volumes > 1 {
            problems.push(Problem::SeveralMetadataVolumes {
                pool: pool.name.clone(),
                count: pool.kraft_metadata_volumes,
            });
        }
    }
    let has = |role: Role| {
        pools
            .iter()
            .any(|p| p.replicas > 0 && p.roles.contains(&role))
    };
    if !has(Role::Controller) {
        problems.push(Problem::NoControllers {
            kafka: kafka.to_owned(),
        });
    }
    if !has(Role::Broker) {
        problems.push(Problem::NoBrokers {
            kafka: kafka.to_owned(),
        });
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pool(name: &str, replicas: u32, roles: &[Role]) -> PoolShape {
        PoolShape {
            name: name.into(),
            replicas,
            roles: roles.iter().copied().collect(),
            cluster_alias: None,
            max_node_id: Some(replicas.saturating_sub(1) as i32),
            kraft_metadata_volumes: 0,
        }
    }

    fn reasons(problems: &[Problem]) -> Vec<&'static str> {
        problems.iter().map(Problem::reason).collect()
    }

    fn aliases(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_valid_stretch_cluster_has_no_problems() {
        let mut beta = pool("brokers-beta", 3, &[Role::Broker]);
        beta.cluster_alias = Some("beta".into());
        let pools = [
            pool("controllers", 3, &[Role::Controller]),
            pool("brokers", 3, &[Role::Broker]),
            beta,
        ];
        assert!(validate_pools("my-cluster", &pools, &aliases(&["beta"])).is_empty());
    }

    #[test]
    fn dual_role_pool_alone_is_enough() {
        let pools = [pool("dual", 3, &[Role::Controller, Role::Broker])];
        assert!(validate_pools("my-cluster", &pools, &aliases(&[])).is_empty());
    }

    #[test]
    fn no_pools_says_which_label_to_set() {
        let problems = validate_pools("my-cluster", &[], &aliases(&[]));
        assert_eq!(reasons(&problems), ["NoNodePools"]);
        assert!(
            problems[0]
                .to_string()
                .contains("strimzi.io/cluster=my-cluster")
        );
    }

    #[test]
    fn missing_roles_are_each_reported() {
        let pools = [pool("empty", 1, &[]), pool("brokers", 3, &[Role::Broker])];
        assert_eq!(
            reasons(&validate_pools("k", &pools, &aliases(&[]))),
            ["NodePoolWithoutRoles", "NoControllers"]
        );
        let pools = [pool("controllers", 3, &[Role::Controller])];
        assert_eq!(
            reasons(&validate_pools("k", &pools, &aliases(&[]))),
            ["NoBrokers"]
        );
    }

    #[test]
    fn a_role_only_counts_with_replicas() {
        let pools = [
            pool("controllers", 0, &[Role::Controller]),
            pool("brokers", 3, &[Role::Broker]),
        ];
        assert_eq!(
            reasons(&validate_pools("k", &pools, &aliases(&[]))),
            ["NoControllers"]
        );
    }

    #[test]
    fn derived_names_must_fit_63_characters() {
        let kafka = "k".repeat(40);
        let mut long = pool(&"p".repeat(19), 1, &[Role::Controller, Role::Broker]);
        long.max_node_id = Some(10);
        // 40 + 1 + 19 + 1 + 2 = 63: fits.
        assert!(validate_pools(&kafka, std::slice::from_ref(&long), &aliases(&[])).is_empty());
        long.max_node_id = Some(100);
        let problems = validate_pools(&kafka, &[long], &aliases(&[]));
        assert_eq!(reasons(&problems), ["NameTooLong"]);
        assert!(
            problems[0]
                .to_string()
                .contains("has 64 characters, more than 63"),
            "{}",
            problems[0]
        );
    }

    #[test]
    fn unknown_alias_lists_the_known_ones() {
        let mut p = pool("dual", 3, &[Role::Controller, Role::Broker]);
        p.cluster_alias = Some("gamma".into());
        let problems = validate_pools("k", &[p], &aliases(&["alpha", "beta"]));
        assert_eq!(
            problems[0].to_string(),
            "KafkaNodePool dual names Kubernetes cluster \"gamma\" in strimzi.io/stretch-cluster-alias, which kstretch does not know; known clusters: alpha, beta"
        );
    }

    #[test]
    fn only_one_metadata_volume() {
        let mut p = pool("dual", 3, &[Role::Controller, Role::Broker]);
        p.kraft_metadata_volumes = 2;
        assert_eq!(
            reasons(&validate_pools("k", &[p], &aliases(&[]))),
            ["InvalidStorage"]
        );
    }

    fn arb_pool() -> impl Strategy<Value = PoolShape> {
        (
            "[a-z]{1,30}",
            0u32..5,
            proptest::collection::btree_set(
                prop_oneof![Just(Role::Controller), Just(Role::Broker)],
                0..3,
            ),
            proptest::option::of(prop_oneof![
                Just("alpha".to_string()),
                Just("zeta".to_string())
            ]),
            proptest::option::of(0i32..100_000),
            0usize..3,
        )
            .prop_map(
                |(name, replicas, roles, cluster_alias, max_node_id, kraft_metadata_volumes)| {
                    PoolShape {
                        name,
                        replicas,
                        roles,
                        cluster_alias,
                        max_node_id,
                        kraft_metadata_volumes,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn valid_means_deployable(kafka in "[a-z]{1,40}", pools in proptest::collection::vec(arb_pool(), 0..5)) {
            let problems = validate_pools(&kafka, &pools, &aliases(&["alpha"]));
            if problems.is_empty() {
                prop_assert!(pools.iter().any(|p| p.replicas > 0 && p.roles.contains(&Role::Controller)));
                prop_assert!(pools.iter().any(|p| p.replicas > 0 && p.roles.contains(&Role::Broker)));
                for p in &pools {
                    prop_assert!(!p.roles.is_empty());
                    let pod = format!("{kafka}-{}-{}", p.name, p.max_node_id.unwrap_or(0));
                    prop_assert!(pod.len() <= MAX_DERIVED_NAME);
                    prop_assert!(p.cluster_alias.as_deref().is_none_or(|a| a == "alpha"));
                }
            }
            for problem in &problems {
                prop_assert!(!problem.to_string().is_empty());
            }
        }
    }
}
