//! What a `KafkaOperation` asks for, read once (pure): its intent, its throttle, and the
//! placement record a drain keeps for its undrain, in the status's compact text form.

use std::collections::{BTreeMap, BTreeSet};

use kstretch_api::operation::{DEFAULT_REPLICATION_THROTTLE, KafkaOperation, KafkaOperationStatus};
use kstretch_core::movement::restore::Placement;

/// What the operation does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Intent {
    Drain(Drained),
    Undrain {
        drain: String,
    },
    /// Spread the partitions of `topics` (every topic when empty).
    Spread {
        topics: Vec<String>,
    },
    /// Replace the replicas lost with a forgotten cluster: its brokers (those with its rack,
    /// and the node IDs central recorded) are gone for good.
    Forget {
        cluster: String,
        node_ids: BTreeSet<i32>,
    },
    /// Rebuild the controller quorum from one surviving voter (`None`: the only survivor).
    RecoverQuorum {
        node_id: Option<i32>,
    },
}

/// What a drain empties.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Drained {
    /// Every broker of a member cluster, by its alias.
    Cluster(String),
    /// These brokers, by node ID.
    Brokers(BTreeSet<i32>),
}

impl std::fmt::Display for Drained {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Cluster(alias) => write!(f, "cluster {alias}"),
            Self::Brokers(ids) => write!(f, "brokers {ids:?}"),
        }
    }
}

/// A spec that cannot be carried out as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error(
        "the operation sets none of .spec.drain, .spec.undrain, .spec.spread, .spec.forget and .spec.recoverQuorum; set exactly one"
    )]
    NoIntent,
    #[error("the operation sets {0}; set exactly one of them")]
    SeveralIntents(String),
    #[error("{field} is empty; name a {what}")]
    Empty {
        field: &'static str,
        what: &'static str,
    },
    #[error(
        ".spec.drain sets both cluster and nodeIds (or neither); name a Kubernetes cluster or the brokers' node IDs"
    )]
    DrainTarget,
    #[error(".spec.replicationThrottle is {0}; it must be a positive number of bytes per second")]
    Throttle(i64),
}

impl Invalid {
    pub fn reason(&self) -> &'static str {
        "InvalidOperation"
    }
}

/// The intent and throttle (bytes per second per broker) of `op`.
pub fn read(op: &KafkaOperation) -> Result<(Intent, u64), Invalid> {
    let set: Vec<&str> = [
        (op.spec.drain.is_some(), ".spec.drain"),
        (op.spec.undrain.is_some(), ".spec.undrain"),
        (op.spec.spread.is_some(), ".spec.spread"),
        (op.spec.forget.is_some(), ".spec.forget"),
        (op.spec.recover_quorum.is_some(), ".spec.recoverQuorum"),
    ]
    .into_iter()
    .filter_map(|(is_set, field)| is_set.then_some(field))
    .collect();
    if set.len() > 1 {
        return Err(Invalid::SeveralIntents(set.join(" and ")));
    }
    let intent = match (&op.spec.drain, &op.spec.undrain) {
        (None, None) if let Some(forget) = &op.spec.forget => {
            if forget.cluster.trim().is_empty() {
                return Err(Invalid::Empty {
                    field: ".spec.forget.cluster",
                    what: "forgotten Kubernetes cluster",
                });
            }
            Intent::Forget {
                cluster: forget.cluster.trim().to_owned(),
                node_ids: forget.node_ids.iter().copied().collect(),
            }
        }
        (None, None) if let Some(recover) = &op.spec.recover_quorum => Intent::RecoverQuorum {
            node_id: recover.node_id,
        },
        (None, None) if let Some(spread) = &op.spec.spread => Intent::Spread {
            topics: spread.topics.clone(),
        },
        (None, None) => return Err(Invalid::NoIntent),
        (Some(_), Some(_)) => return Err(Invalid::SeveralIntents(set.join(" and "))),
        (Some(d), None) if d.cluster.trim().is_empty() == d.node_ids.is_empty() => {
            return Err(Invalid::DrainTarget);
        }
        (None, Some(u)) if u.drain.trim().is_empty() => {
            return Err(Invalid::Empty {
                field: ".spec.undrain.drain",
                what: "completed drain operation",
            });
        }
        (Some(d), None) if d.node_ids.is_empty() => {
            Intent::Drain(Drained::Cluster(d.cluster.trim().to_owned()))
        }
        (Some(d), None) => Intent::Drain(Drained::Brokers(d.node_ids.iter().copied().collect())),
        (None, Some(u)) => Intent::Undrain {
            drain: u.drain.clone(),
        },
    };
    let throttle = match op.spec.replication_throttle {
        None => DEFAULT_REPLICATION_THROTTLE,
        Some(t) => u64::try_from(t)
            .ok()
            .filter(|t| *t > 0)
            .ok_or(Invalid::Throttle(t))?,
    };
    Ok((intent, throttle))
}

/// `placement` in the status's form: topic → `partition=replica,...`.
pub fn encode(placement: &Placement) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for ((topic, partition), replicas) in placement {
        let list: Vec<String> = replicas.iter().map(i32::to_string).collect();
        out.entry(topic.clone())
            .or_default()
            .push(format!("{partition}={}", list.join(",")));
    }
    out
}

/// The placement a drain recorded; an entry that does not parse (edited by hand) names itself.
pub fn decode(status: &KafkaOperationStatus) -> Result<Placement, String> {
    let mut out = Placement::new();
    for (topic, entries) in &status.placement {
        for entry in entries {
            let bad = || {
                format!("placement entry {entry:?} of topic {topic} is not partition=replica,...")
            };
            let (partition, replicas) = entry.split_once('=').ok_or_else(bad)?;
            let partition: i32 = partition.trim().parse().map_err(|_| bad())?;
            let replicas: Vec<i32> = replicas
                .split(',')
                .map(|r| r.trim().parse())
                .collect::<Result<_, _>>()
                .map_err(|_| bad())?;
            out.insert((topic.clone(), partition), replicas);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kstretch_api::operation::{
        Drain, Forget, KafkaOperationSpec, RecoverQuorum, Spread, Undrain,
    };

    fn op(spec: KafkaOperationSpec) -> KafkaOperation {
        KafkaOperation::new("op", spec)
    }

    fn drain(cluster: &str) -> Option<Drain> {
        Some(Drain {
            cluster: cluster.to_owned(),
            ..Default::default()
        })
    }

    #[test]
    fn a_drain_or_an_undrain_with_the_default_or_given_throttle() {
        let (intent, throttle) = read(&op(KafkaOperationSpec {
            drain: drain("beta"),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(intent, Intent::Drain(Drained::Cluster("beta".into())));
        assert_eq!(throttle, DEFAULT_REPLICATION_THROTTLE);
        let (intent, _) = read(&op(KafkaOperationSpec {
            drain: Some(Drain {
                node_ids: vec![4, 3],
                ..Default::default()
            }),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(
            intent,
            Intent::Drain(Drained::Brokers(BTreeSet::from([3, 4])))
        );
        let (intent, throttle) = read(&op(KafkaOperationSpec {
            undrain: Some(Undrain {
                drain: "drain-beta".into(),
            }),
            replication_throttle: Some(1000),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(
            intent,
            Intent::Undrain {
                drain: "drain-beta".into()
            }
        );
        assert_eq!(throttle, 1000);
        let (intent, _) = read(&op(KafkaOperationSpec {
            spread: Some(Spread {
                topics: vec!["orders".into()],
            }),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(
            intent,
            Intent::Spread {
                topics: vec!["orders".into()]
            }
        );
        let (intent, _) = read(&op(KafkaOperationSpec {
            forget: Some(Forget {
                cluster: " beta".into(),
                node_ids: vec![5, 4],
            }),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(
            intent,
            Intent::Forget {
                cluster: "beta".into(),
                node_ids: BTreeSet::from([4, 5])
            }
        );
        let (intent, _) = read(&op(KafkaOperationSpec {
            recover_quorum: Some(RecoverQuorum { node_id: Some(3) }),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(intent, Intent::RecoverQuorum { node_id: Some(3) });
    }

    #[test]
    fn every_malformed_spec_is_refused_naming_the_field() {
        let cases = [
            (KafkaOperationSpec::default(), "none of"),
            (
                KafkaOperationSpec {
                    drain: drain("beta"),
                    undrain: Some(Undrain { drain: "d".into() }),
                    ..Default::default()
                },
                ".spec.drain and .spec.undrain; set exactly one",
            ),
            (
                KafkaOperationSpec {
                    undrain: Some(Undrain { drain: "d".into() }),
                    spread: Some(Spread::default()),
                    ..Default::default()
                },
                ".spec.undrain and .spec.spread",
            ),
            (
                KafkaOperationSpec {
                    drain: drain(" "),
                    ..Default::default()
                },
                ".spec.drain sets both cluster and nodeIds (or neither)",
            ),
            (
                KafkaOperationSpec {
                    drain: Some(Drain {
                        cluster: "beta".into(),
                        node_ids: vec![3],
                    }),
                    ..Default::default()
                },
                "name a Kubernetes cluster or the brokers' node IDs",
            ),
            (
                KafkaOperationSpec {
                    undrain: Some(Undrain {
                        drain: String::new(),
                    }),
                    ..Default::default()
                },
                ".spec.undrain.drain",
            ),
            (
                KafkaOperationSpec {
                    drain: drain("beta"),
                    replication_throttle: Some(0),
                    ..Default::default()
                },
                "replicationThrottle is 0",
            ),
            (
                KafkaOperationSpec {
                    forget: Some(Forget::default()),
                    ..Default::default()
                },
                ".spec.forget.cluster is empty",
            ),
            (
                KafkaOperationSpec {
                    forget: Some(Forget::default()),
                    spread: Some(Spread::default()),
                    ..Default::default()
                },
                ".spec.spread and .spec.forget",
            ),
            (
                KafkaOperationSpec {
                    forget: Some(Forget::default()),
                    recover_quorum: Some(RecoverQuorum::default()),
                    ..Default::default()
                },
                ".spec.forget and .spec.recoverQuorum",
            ),
        ];
        for (spec, says) in cases {
            let e = read(&op(spec)).unwrap_err();
            assert!(e.to_string().contains(says), "{e}");
            assert_eq!(e.reason(), "InvalidOperation");
        }
    }

    #[test]
    fn the_placement_record_reads_back_and_a_broken_entry_names_itself() {
        let placement = Placement::from([
            (("orders".to_owned(), 0), vec![3, 1, 2]),
            (("orders".to_owned(), 1), vec![1, 2, 3]),
            (("audit".to_owned(), 0), vec![2]),
        ]);
        let encoded = encode(&placement);
        assert_eq!(encoded["orders"], vec!["0=3,1,2", "1=1,2,3"]);
        let status = KafkaOperationStatus {
            placement: encoded,
            ..Default::default()
        };
        assert_eq!(decode(&status).unwrap(), placement);
        let broken = KafkaOperationStatus {
            placement: BTreeMap::from([("orders".to_owned(), vec!["0=3,x".to_owned()])]),
            ..Default::default()
        };
        assert!(
            decode(&broken)
                .unwrap_err()
                .contains("\"0=3,x\" of topic orders")
        );
    }
}
