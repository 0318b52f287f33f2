//! Unit and property tests of the topic decisions.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;

fn desired(name: &str, partitions: Option<i32>, replicas: Option<i16>) -> DesiredTopic {
    DesiredTopic {
        name: name.to_owned(),
        partitions,
        replicas,
        ..Default::default()
    }
}

fn current(partitions: &[&[i32]], configs: &[(&str, ConfigValue)]) -> CurrentTopic {
    CurrentTopic {
        topic_id: "id".to_owned(),
        partitions: partitions
            .iter()
            .enumerate()
            .map(|(i, r)| PartitionState::new(i as i32, r.to_vec()))
            .collect(),
        configs: configs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
    }
}

fn brokers(ids: &[i32]) -> Vec<Broker> {
    ids.iter()
        .map(|id| Broker {
            id: *id,
            rack: None,
        })
        .collect()
}

// ---- plan ----

#[test]
fn creates_missing_topic_with_spec_or_broker_defaults() {
    let mut d = desired("t", None, Some(3));
    d.config.insert("retention.ms".into(), "1000".into());
    let p = plan(&d, None);
    assert_eq!(
        p.create,
        Some(CreateTopic {
            name: "t".into(),
            partitions: None,
            replicas: Some(3),
            configs: d.config.clone(),
        })
    );
    assert!(p.config_ops.is_empty() && p.rf_change.is_none() && p.problems.is_empty());
}

#[test]
fn adopted_topic_in_sync_needs_nothing() {
    let mut d = desired("t", Some(2), Some(2));
    d.config.insert("cleanup.policy".into(), "compact".into());
    let c = current(
        &[&[1, 2], &[2, 1]],
        &[("cleanup.policy", ConfigValue::dynamic("compact"))],
    );
    let p = plan(&d, Some(&c));
    assert!(p.has_no_changes(), "{p:?}");
    assert!(p.problems.is_empty() && p.warnings.is_empty());
}

#[test]
fn config_set_for_differences_and_delete_only_dynamic_keys_sorted() {
    let mut d = desired("t", None, None);
    d.config.insert("z.key".into(), "1".into());
    d.config.insert("segment.bytes".into(), "1073741824".into()); // equals the default
    d.config.insert("a.key".into(), "x".into());
    let c = current(
        &[&[1]],
        &[
            ("a.key", ConfigValue::dynamic("y")),
            ("m.dyn", ConfigValue::dynamic("v")),
            (
                "segment.bytes",
                ConfigValue::inherited("1073741824", ConfigSource::Default),
            ),
            (
                "retention.ms",
                ConfigValue::inherited("5", ConfigSource::StaticBroker),
            ),
        ],
    );
    let p = plan(&d, Some(&c));
    assert_eq!(
        p.config_ops,
        vec![
            ConfigOp::Set {
                name: "a.key".into(),
                value: "x".into()
            },
            ConfigOp::Delete {
                name: "m.dyn".into()
            },
            ConfigOp::Set {
                name: "z.key".into(),
                value: "1".into()
            },
        ]
    );
}

#[test]
fn sensitive_value_is_always_set() {
    let mut d = desired("t", None, None);
    d.config.insert("secret".into(), "s".into());
    let c = current(
        &[&[1]],
        &[(
            "secret",
            ConfigValue {
                value: None,
                source: ConfigSource::DynamicTopic,
            },
        )],
    );
    assert_eq!(plan(&d, Some(&c)).config_ops.len(), 1);
}

#[test]
fn partition_increase_and_unset_partitions_never_change() {
    let c = current(&[&[1], &[1], &[1]], &[]);
    assert_eq!(
        plan(&desired("t", Some(5), None), Some(&c)).increase_partitions_to,
        Some(5)
    );
    let p = plan(&desired("t", None, None), Some(&c));
    assert!(p.has_no_changes() && p.problems.is_empty());
}

#[test]
fn partition_decrease_is_not_supported_but_configs_still_planned() {
    let mut d = desired("t", Some(1), None);
    d.config.insert("k".into(), "v".into());
    let p = plan(&d, Some(&current(&[&[1], &[1]], &[])));
    assert_eq!(p.problems.len(), 1);
    assert_eq!(p.problems[0].reason(), "NotSupported");
    let msg = p.problems[0].to_string();
    assert!(msg.contains("Decreasing partitions not supported") && msg.contains("to 2 or more"));
    assert_eq!(p.increase_partitions_to, None);
    assert_eq!(p.config_ops.len(), 1);
}

#[test]
fn topic_name_change_is_not_supported_and_stops() {
    let mut d = desired("new", Some(3), None);
    d.status_topic_name = Some("old".into());
    let p = plan(&d, None);
    assert!(p.has_no_changes());
    assert_eq!(
        p.problems,
        vec![PlanProblem::TopicNameChanged {
            from: "old".into(),
            to: "new".into()
        }]
    );
    assert_eq!(p.problems[0].reason(), "NotSupported");
    d.status_topic_name = Some("new".into());
    assert!(plan(&d, None).create.is_some());
}

#[test]
fn rf_change_lists_partitions_and_respects_running_reassignment() {
    let mut c = current(&[&[1, 2], &[1, 2, 3], &[2, 3]], &[]);
    let p = plan(&desired("t", None, Some(3)), Some(&c));
    assert_eq!(
        p.rf_change,
        Some(RfChange {
            target: 3,
            partitions: vec![0, 2]
        })
    );
    // Partition 1 is shrinking to [1, 2]: its target already has 2 replicas.
    c.partitions[1].reassignment = Some(Reassignment {
        adding: vec![],
        removing: vec![3],
    });
    let p = plan(&desired("t", None, Some(2)), Some(&c));
    assert_eq!(p.rf_change, None);
    assert_eq!(plan(&desired("t", None, None), Some(&c)).rf_change, None);
}

#[test]
fn warns_when_replicas_below_min_isr() {
    let mut d = desired("t", None, Some(1));
    d.config.insert(MIN_INSYNC_REPLICAS.into(), "2".into());
    let p = plan(&d, None);
    assert_eq!(
        p.warnings,
        vec![PlanWarning::ReplicasBelowMinIsr {
            replicas: 1,
            min_isr: 2
        }]
    );
    assert!(p.warnings[0].message().contains("min.insync.replicas (2)"));
    assert_eq!(p.warnings[0].reason(), "ReplicasBelowMinInsyncReplicas");
    // Inherited broker value counts too.
    let c = current(
        &[&[1]],
        &[(
            MIN_INSYNC_REPLICAS,
            ConfigValue::inherited("3", ConfigSource::StaticBroker),
        )],
    );
    let p = plan(&desired("t", None, Some(2)), Some(&c));
    assert_eq!(p.warnings.len(), 1);
    // Default 1 never warns; garbage never warns.
    assert!(plan(&desired("t", None, Some(1)), None).warnings.is_empty());
    let mut d = desired("t", None, Some(1));
    d.config.insert(MIN_INSYNC_REPLICAS.into(), "x".into());
    assert!(plan(&d, None).warnings.is_empty());
}

// ---- alterable ----

#[test]
fn alterable_parse() {
    assert_eq!(AlterableConfigs::parse(""), AlterableConfigs::All);
    assert_eq!(AlterableConfigs::parse(" all "), AlterableConfigs::All);
    assert_eq!(AlterableConfigs::parse("None"), AlterableConfigs::None);
    assert_eq!(
        AlterableConfigs::parse(" a , b,,c "),
        AlterableConfigs::Only(["a", "b", "c"].iter().map(|s| s.to_string()).collect())
    );
}

#[test]
fn alterable_filters_ops_and_names_ignored_spec_keys() {
    let ops = vec![
        ConfigOp::Set {
            name: "a".into(),
            value: "1".into(),
        },
        ConfigOp::Delete { name: "b".into() },
        ConfigOp::Set {
            name: "c".into(),
            value: "1".into(),
        },
    ];
    let spec: Vec<String> = vec!["c".into(), "a".into()];
    let f = AlterableConfigs::parse("a,b").filter(ops.clone(), &spec);
    assert_eq!(f.ops, ops[..2].to_vec());
    assert_eq!(f.ignored_keys, vec!["c".to_string()]);
    let f = AlterableConfigs::None.filter(ops.clone(), &spec);
    assert!(f.ops.is_empty());
    assert_eq!(f.ignored_keys, vec!["a".to_string(), "c".to_string()]);
    let f = AlterableConfigs::All.filter(ops.clone(), &spec);
    assert_eq!(f.ops, ops);
    assert!(f.ignored_keys.is_empty());
    assert_eq!(
        AlterableConfigs::warning_message("c"),
        "Property c is ignored according to alterable config"
    );
    assert_eq!(AlterableConfigs::warning_reason(), "InvalidConfig");
}

// ---- reassign ----

#[test]
fn grow_adds_least_loaded_then_lowest_id() {
    let parts = vec![
        PartitionState::new(0, vec![1]),
        PartitionState::new(1, vec![1]),
    ];
    let t = target_assignments(&parts, 2, &brokers(&[1, 2, 3])).unwrap();
    assert_eq!(t[&0], vec![1, 2]);
    assert_eq!(t[&1], vec![1, 3]);
}

#[test]
fn grow_spreads_racks() {
    let bs = vec![
        Broker {
            id: 1,
            rack: Some("a".into()),
        },
        Broker {
            id: 2,
            rack: Some("a".into()),
        },
        Broker {
            id: 3,
            rack: Some("b".into()),
        },
    ];
    let t = target_assignments(&[PartitionState::new(0, vec![1])], 2, &bs).unwrap();
    assert_eq!(t[&0], vec![1, 3]);
}

#[test]
fn shrink_keeps_leader_and_drops_last_non_leaders() {
    let mut p = PartitionState::new(0, vec![1, 2, 3]);
    p.leader = Some(3);
    let t = target_assignments(&[p], 2, &brokers(&[1, 2, 3])).unwrap();
    assert_eq!(t[&0], vec![1, 3]);
    let t = target_assignments(
        &[PartitionState::new(0, vec![1, 2, 3])],
        1,
        &brokers(&[1, 2, 3]),
    )
    .unwrap();
    assert_eq!(t[&0], vec![1]);
}

#[test]
fn dead_replicas_are_replaced_on_change_but_untouched_partitions_stay() {
    let parts = vec![
        PartitionState::new(0, vec![9, 1]),
        PartitionState::new(1, vec![9]),
    ];
    let t = target_assignments(&parts, 2, &brokers(&[1, 2])).unwrap();
    assert_eq!(t[&0], vec![9, 1]);
    // Broker 2 carries nothing yet, so it comes first.
    assert_eq!(t[&1], vec![2, 1]);
}

#[test]
fn reassign_errors() {
    let parts = [PartitionState::new(0, vec![1])];
    let e = target_assignments(&parts, 3, &brokers(&[1, 2])).unwrap_err();
    assert_eq!(e.reason(), "NotEnoughBrokers");
    assert!(e.to_string().contains("only 2 are live"));
    let e = target_assignments(&parts, 0, &brokers(&[1])).unwrap_err();
    assert_eq!(e.reason(), "InvalidReplicationFactor");
}

#[test]
fn progress_pending_ongoing_done() {
    let targets: BTreeMap<i32, Vec<i32>> = [(0, vec![1, 2]), (1, vec![2, 3])].into();
    let mut obs = vec![
        PartitionState::new(0, vec![1]),
        PartitionState::new(1, vec![2]),
    ];
    assert_eq!(progress(&targets, &obs), ReplicasChangeState::Pending);
    assert_eq!(to_submit(&obs, &targets).len(), 2);
    obs[0] = PartitionState::new(0, vec![2, 1]);
    obs[1].replicas = vec![2, 3];
    obs[1].reassignment = Some(Reassignment {
        adding: vec![3],
        removing: vec![],
    });
    assert_eq!(progress(&targets, &obs), ReplicasChangeState::Ongoing);
    assert!(to_submit(&obs, &targets).is_empty());
    obs[1].reassignment = None;
    assert_eq!(progress(&targets, &obs), ReplicasChangeState::Done);
    assert_eq!(ReplicasChangeState::Done.as_str(), "done");
}

// ---- policy ----

fn res(ns: &str, name: &str, uid: &str, created: i64, topic: &str) -> TopicResource {
    TopicResource {
        reference: ResourceRef {
            namespace: ns.into(),
            name: name.into(),
        },
        uid: uid.into(),
        created,
        topic_name: topic.into(),
    }
}

#[test]
fn oldest_owns_others_conflict() {
    let rs = vec![
        res("b", "x", "u2", 10, "t"),
        res("a", "y", "u1", 5, "t"),
        res("a", "z", "u0", 10, "t"),
        res("c", "q", "u3", 1, "other"),
    ];
    let o = resolve_ownership(&rs);
    assert_eq!(o.owners["t"].to_string(), "a/y");
    assert_eq!(o.owners["other"].to_string(), "c/q");
    assert_eq!(o.conflicts.len(), 2);
    let c = &o.conflicts[&rs[0].reference];
    assert_eq!(c.reason(), "ResourceConflict");
    assert!(c.to_string().starts_with("Managed by a/y"));
}

fn rule(ns: &str, prefixes: &[&str], names: &[&str], other: bool) -> NamespaceRule {
    NamespaceRule {
        namespace: ns.into(),
        prefixes: prefixes.iter().map(|s| s.to_string()).collect(),
        names: names.iter().map(|s| s.to_string()).collect(),
        other_topics: other,
    }
}

#[test]
fn policy_legality_errors() {
    let cases = [
        (
            vec![
                rule("a", &["x."], &[], false),
                rule("b", &["x.y"], &[], false),
            ],
            "OverlappingPrefixes",
        ),
        (
            vec![rule("a", &[], &["t"], false), rule("b", &[], &["t"], false)],
            "NameClaimedTwice",
        ),
        (
            vec![
                rule("a", &["t"], &[], false),
                rule("b", &[], &["top"], false),
            ],
            "NameClaimedTwice",
        ),
        (
            vec![rule("a", &[], &[], true), rule("b", &[], &[], true)],
            "SeveralOtherTopics",
        ),
        (vec![rule("a", &[""], &[], false)], "EmptyPrefix"),
        (vec![rule("a", &[], &[""], false)], "EmptyName"),
        (
            vec![rule("a", &[], &[], false), rule("a", &[], &[], false)],
            "DuplicateNamespace",
        ),
    ];
    for (rules, reason) in cases {
        let e = NamespacePolicy::new(rules).unwrap_err();
        assert_eq!(e.reason(), reason, "{e}");
    }
    // Overlap inside one namespace is fine.
    assert!(NamespacePolicy::new(vec![rule("a", &["x", "xy"], &["xyz"], false)]).is_ok());
}

#[test]
fn policy_checks_resources() {
    let p = NamespacePolicy::new(vec![
        rule("a", &["orders."], &["audit"], false),
        rule("b", &[], &[], true),
    ])
    .unwrap();
    assert!(p.check("a", "orders.eu").is_ok());
    assert!(p.check("a", "audit").is_ok());
    assert!(p.check("b", "anything").is_ok());
    let e = p.check("b", "orders.eu").unwrap_err();
    assert_eq!(e.reason(), "TopicNamespacePolicy");
    assert!(e.to_string().contains("belongs to namespace a"));
    let e = p.check("a", "misc").unwrap_err();
    assert!(
        e.to_string()
            .contains("the names audit and the prefixes orders."),
        "{e}"
    );
    assert!(
        p.check("c", "misc")
            .unwrap_err()
            .to_string()
            .contains("not in the policy")
    );
    assert!(NamespacePolicy::default().check("any", "t").is_ok());
}

// ---- properties ----

/// Applies a plan to the state as Kafka would, for the idempotence property.
fn apply(plan: &TopicPlan, current: Option<CurrentTopic>, live: &[Broker]) -> CurrentTopic {
    let mut c = match (&plan.create, current) {
        (Some(create), _) => CurrentTopic {
            topic_id: "new".into(),
            partitions: (0..create.partitions.unwrap_or(1))
                .map(|i| {
                    let rf = create.replicas.unwrap_or(1) as usize;
                    PartitionState::new(i, live.iter().take(rf).map(|b| b.id).collect())
                })
                .collect(),
            configs: create
                .configs
                .iter()
                .map(|(k, v)| (k.clone(), ConfigValue::dynamic(v.clone())))
                .collect(),
        },
        (None, Some(c)) => c,
        (None, None) => panic!("update plan without a topic"),
    };
    for op in &plan.config_ops {
        match op {
            ConfigOp::Set { name, value } => {
                c.configs
                    .insert(name.clone(), ConfigValue::dynamic(value.clone()));
            }
            ConfigOp::Delete { name } => {
                c.configs.remove(name);
            }
        }
    }
    if let Some(n) = plan.increase_partitions_to {
        let rf = c
            .partitions
            .first()
            .map(|p| p.replicas.clone())
            .unwrap_or_default();
        for i in c.partitions.len() as i32..n {
            c.partitions.push(PartitionState::new(i, rf.clone()));
        }
    }
    if let Some(rf) = &plan.rf_change {
        let t = target_assignments(&c.partitions, rf.target, live).unwrap();
        for p in &mut c.partitions {
            *p = PartitionState::new(p.id, t[&p.id].clone());
        }
    }
    c
}

fn config_map() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map("[a-e]", "[0-2]", 0..4)
}

proptest! {
    #[test]
    fn plan_is_idempotent(
        exists in any::<bool>(),
        cur_parts in 1usize..5,
        cur_rf in 1usize..4,
        want_parts in prop::option::of(1i32..6),
        want_rf in prop::option::of(1i16..4),
        spec in config_map(),
        dynamic in config_map(),
        inherited in config_map(),
    ) {
        let live = brokers(&[1, 2, 3, 4]);
        let mut d = desired("t", want_parts, want_rf);
        d.config = spec;
        let cur = exists.then(|| {
            let mut configs: BTreeMap<String, ConfigValue> = inherited
                .iter()
                .map(|(k, v)| (k.clone(), ConfigValue::inherited(v.clone(), ConfigSource::Default)))
                .collect();
            for (k, v) in &dynamic {
                configs.insert(k.clone(), ConfigValue::dynamic(v.clone()));
            }
            CurrentTopic {
                topic_id: "id".into(),
                partitions: (0..cur_parts as i32)
                    .map(|i| PartitionState::new(i, (1..=cur_rf as i32).collect()))
                    .collect(),
                configs,
            }
        });
        let first = plan(&d, cur.as_ref());
        let after = apply(&first, cur, &live);
        let mut second = plan(&d, Some(&after));
        // Partitions added by CreatePartitions copy the old RF here, so a second RF pass may
        // be needed; apply once more and it must settle.
        if second.rf_change.is_some() && first.increase_partitions_to.is_some() {
            let again = apply(&second, Some(after), &live);
            second = plan(&d, Some(&again));
        }
        prop_assert!(second.has_no_changes(), "{:?}", second);
    }

    #[test]
    fn reassignment_targets_are_valid_and_keep_replicas(
        parts in prop::collection::vec(prop::collection::btree_set(0i32..8, 1..5), 1..6),
        live in prop::collection::btree_set(0i32..8, 1..8),
        rf in 1i16..6,
    ) {
        let partitions: Vec<PartitionState> = parts
            .iter()
            .enumerate()
            .map(|(i, s)| PartitionState::new(i as i32, s.iter().copied().collect()))
            .collect();
        let bs = brokers(&live.iter().copied().collect::<Vec<_>>());
        match target_assignments(&partitions, rf, &bs) {
            Err(_) => prop_assert!((rf as usize) > live.len()),
            Ok(t) => {
                for p in &partitions {
                    let target = &t[&p.id];
                    let set: BTreeSet<i32> = target.iter().copied().collect();
                    prop_assert_eq!(set.len(), target.len());
                    if p.replicas.len() == rf as usize {
                        prop_assert_eq!(target, &p.replicas);
                        continue;
                    }
                    prop_assert_eq!(target.len(), rf as usize);
                    prop_assert!(set.iter().all(|b| live.contains(b)));
                    let live_current = p.replicas.iter().filter(|b| live.contains(b)).count();
                    let kept = p.replicas.iter().filter(|b| set.contains(b)).count();
                    prop_assert_eq!(kept, live_current.min(rf as usize));
                    if let Some(l) = p.leader.filter(|l| live.contains(l)) {
                        prop_assert!(set.contains(&l));
                    }
                }
                let t2 = target_assignments(&partitions, rf, &bs).unwrap();
                prop_assert_eq!(t, t2);
            }
        }
    }

    #[test]
    fn ownership_is_independent_of_order(
        entries in prop::collection::vec((0i64..3, "[a-c]", 0usize..3), 1..8),
        seed in any::<u64>(),
    ) {
        let rs: Vec<TopicResource> = entries
            .iter()
            .enumerate()
            .map(|(i, (created, topic, ns))| res(&format!("ns{ns}"), &format!("r{i}"), &format!("u{i}"), *created, topic))
            .collect();
        let mut shuffled = rs.clone();
        // Deterministic shuffle from the seed.
        let n = shuffled.len();
        for i in 0..n {
            let j = ((seed.wrapping_mul(i as u64 + 7)) % n as u64) as usize;
            shuffled.swap(i, j);
        }
        let a = resolve_ownership(&rs);
        prop_assert_eq!(&a, &resolve_ownership(&shuffled));
        prop_assert_eq!(a.owners.len() + a.conflicts.len(), rs.len());
    }
}
