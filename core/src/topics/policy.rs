//! Who may manage a topic: the single-resource principle (the oldest KafkaTopic naming a topic
//! owns it, the others get `ResourceConflict`) and the namespace policy (which namespaces may
//! name which topics), checked for legality at start-up.

use std::collections::{BTreeMap, BTreeSet};

/// A KafkaTopic by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceRef {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for ResourceRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What ownership needs of one KafkaTopic. Pass only managed resources not being deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicResource {
    pub reference: ResourceRef,
    pub uid: String,
    /// `metadata.creationTimestamp` in seconds since the epoch.
    pub created: i64,
    pub topic_name: String,
}

/// A KafkaTopic that loses a topic to an older one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Managed by {owner}: topic {topic} is managed by one KafkaTopic only, the oldest; delete \
     this KafkaTopic or point spec.topicName at another topic"
)]
pub struct ResourceConflict {
    pub topic: String,
    pub owner: ResourceRef,
}

impl ResourceConflict {
    pub fn reason(&self) -> &'static str {
        "ResourceConflict"
    }
}

/// The owner of each topic and the conflicts of the others.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ownership {
    pub owners: BTreeMap<String, ResourceRef>,
    pub conflicts: BTreeMap<ResourceRef, ResourceConflict>,
}

/// The oldest resource owns a topic; equal timestamps (second precision) fall back to the uid,
/// then the reference, so the result never depends on input order.
pub fn resolve_ownership(resources: &[TopicResource]) -> Ownership {
    let mut by_topic: BTreeMap<&str, Vec<&TopicResource>> = BTreeMap::new();
    for r in resources {
        by_topic.entry(&r.topic_name).or_default().push(r);
    }
    let mut out = Ownership::default();
    for (topic, mut claimants) in by_topic {
        claimants.sort_by(|a, b| {
            (a.created, &a.uid, &a.reference).cmp(&(b.created, &b.uid, &b.reference))
        });
        let Some((owner, others)) = claimants.split_first() else {
            continue;
        };
        out.owners.insert(topic.to_owned(), owner.reference.clone());
        for other in others {
            // The same resource listed twice is not in conflict with itself.
            if other.reference != owner.reference {
                out.conflicts.insert(
                    other.reference.clone(),
                    ResourceConflict {
                        topic: topic.to_owned(),
                        owner: owner.reference.clone(),
                    },
                );
            }
        }
    }
    out
}

/// Which topics one namespace may name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceRule {
    pub namespace: String,
    pub prefixes: Vec<String>,
    pub names: Vec<String>,
    /// This namespace may also name every topic no other namespace claims.
    pub other_topics: bool,
}

/// Why a namespace policy cannot be used; the operator refuses to start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error(
        "namespace {namespace} appears more than once in the topic namespace policy; merge its entries"
    )]
    DuplicateNamespace { namespace: String },
    #[error(
        "namespace {namespace} has an empty topic prefix, which matches every topic; use otherTopics instead"
    )]
    EmptyPrefix { namespace: String },
    #[error("namespace {namespace} has an empty topic name")]
    EmptyName { namespace: String },
    #[error(
        "topic prefix {first:?} of namespace {first_namespace} overlaps prefix {second:?} of \
         namespace {second_namespace}: a topic could belong to both; make the prefixes disjoint"
    )]
    OverlappingPrefixes {
        first_namespace: String,
        first: String,
        second_namespace: String,
        second: String,
    },
    #[error(
        "topic {name} of namespace {namespace} is also claimed by namespace {other_namespace} \
         ({claim}); give each topic to one namespace"
    )]
    NameClaimedTwice {
        namespace: String,
        name: String,
        other_namespace: String,
        claim: String,
    },
    #[error(
        "otherTopics is set for namespaces {first} and {second}; at most one namespace may take \
         the topics no other namespace claims"
    )]
    SeveralOtherTopics { first: String, second: String },
}

impl PolicyError {
    pub fn reason(&self) -> &'static str {
        match self {
            PolicyError::DuplicateNamespace { .. } => "DuplicateNamespace",
            PolicyError::EmptyPrefix { .. } => "EmptyPrefix",
            PolicyError::EmptyName { .. } => "EmptyName",
            PolicyError::OverlappingPrefixes { .. } => "OverlappingPrefixes",
            PolicyError::NameClaimedTwice { .. } => "NameClaimedTwice",
            PolicyError::SeveralOtherTopics { .. } => "SeveralOtherTopics",
        }
    }
}

/// Why a KafkaTopic may not name its topic; reported as `Ready=False`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyViolation {
    #[error(
        "topic {topic} belongs to namespace {owner_namespace} by the topic namespace policy; \
         manage it from there or rename the topic"
    )]
    ClaimedByOtherNamespace {
        topic: String,
        owner_namespace: String,
    },
    #[error(
        "namespace {namespace} may not manage topic {topic}: the topic namespace policy allows \
         it {allowed}; rename the topic or change the policy"
    )]
    NotAllowed {
        namespace: String,
        topic: String,
        allowed: String,
    },
}

impl PolicyViolation {
    pub fn reason(&self) -> &'static str {
        "TopicNamespacePolicy"
    }
}

/// A checked namespace policy. The empty policy allows every topic in every namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespacePolicy {
    rules: BTreeMap<String, NamespaceRule>,
}

impl NamespacePolicy {
    /// Checks that every topic belongs to at most one namespace.
    pub fn new(rules: Vec<NamespaceRule>) -> Result<Self, PolicyError> {
        let mut by_ns: BTreeMap<String, NamespaceRule> = BTreeMap::new();
        for rule in rules {
            if rule.prefixes.iter().any(String::is_empty) {
                return Err(PolicyError::EmptyPrefix {
                    namespace: rule.namespace,
                });
            }
            if rule.names.iter().any(String::is_empty) {
                return Err(PolicyError::EmptyName {
                    namespace: rule.namespace,
                });
            }
            if by_ns.contains_key(&rule.namespace) {
                return Err(PolicyError::DuplicateNamespace {
                    namespace: rule.namespace,
                });
            }
            by_ns.insert(rule.namespace.clone(), rule);
        }
        let rules: Vec<&NamespaceRule> = by_ns.values().collect();
        let others: Vec<&str> = rules
            .iter()
            .filter(|r| r.other_topics)
            .map(|r| r.namespace.as_str())
            .collect();
        if let [first, second, ..] = others.as_slice() {
            return Err(PolicyError::SeveralOtherTopics {
                first: (*first).to_owned(),
                second: (*second).to_owned(),
            });
        }
        for (i, a) in rules.iter().enumerate() {
            for b in &rules[i + 1..] {
                for pa in &a.prefixes {
                    for pb in &b.prefixes {
                        if pa.starts_with(pb.as_str()) || pb.starts_with(pa.as_str()) {
                            return Err(PolicyError::OverlappingPrefixes {
                                first_namespace: a.namespace.clone(),
                                first: pa.clone(),
                                second_namespace: b.namespace.clone(),
                                second: pb.clone(),
                            });
                        }
                    }
                }
                for (x, y) in [(a, b), (b, a)] {
                    for name in &x.names {
                        let claim = if y.names.contains(name) {
                            Some(format!("name {name}"))
                        } else {
                            y.prefixes
                                .iter()
                                .find(|p| name.starts_with(p.as_str()))
                                .map(|p| format!("prefix {p:?}"))
                        };
                        if let Some(claim) = claim {
                            return Err(PolicyError::NameClaimedTwice {
                                namespace: x.namespace.clone(),
                                name: name.clone(),
                                other_namespace: y.namespace.clone(),
                                claim,
                            });
                        }
                    }
                }
            }
        }
        Ok(Self { rules: by_ns })
    }

    /// The namespace whose names or prefixes claim `topic`, if any.
    fn claimant(&self, topic: &str) -> Option<&str> {
        self.rules
            .values()
            .find(|r| {
                r.names.iter().any(|n| n == topic)
                    || r.prefixes.iter().any(|p| topic.starts_with(p.as_str()))
            })
            .map(|r| r.namespace.as_str())
    }

    /// May a KafkaTopic in `namespace` manage `topic`?
    pub fn check(&self, namespace: &str, topic: &str) -> Result<(), PolicyViolation> {
        if self.rules.is_empty() {
            return Ok(());
        }
        match self.claimant(topic) {
            Some(owner) if owner == namespace => Ok(()),
            Some(owner) => Err(PolicyViolation::ClaimedByOtherNamespace {
                topic: topic.to_owned(),
                owner_namespace: owner.to_owned(),
            }),
            None if self.rules.get(namespace).is_some_and(|r| r.other_topics) => Ok(()),
            None => Err(PolicyViolation::NotAllowed {
                namespace: namespace.to_owned(),
                topic: topic.to_owned(),
                allowed: self.describe(namespace),
            }),
        }
    }

    fn describe(&self, namespace: &str) -> String {
        let Some(rule) = self.rules.get(namespace) else {
            return "no topics (the namespace is not in the policy)".to_owned();
        };
        let mut parts = Vec::new();
        if !rule.names.is_empty() {
            let names: BTreeSet<&String> = rule.names.iter().collect();
            parts.push(format!(
                "the names {}",
                names.into_iter().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
        if !rule.prefixes.is_empty() {
            let prefixes: BTreeSet<&String> = rule.prefixes.iter().collect();
            parts.push(format!(
                "the prefixes {}",
                prefixes.into_iter().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
        if parts.is_empty() {
            "no topics".to_owned()
        } else {
            format!("only {}", parts.join(" and "))
        }
    }
}
