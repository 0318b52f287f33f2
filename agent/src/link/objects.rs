//! What the agent accepts from a snapshot, before it touches the apiserver: the kinds it
//! manages, the namespaces it may write to, the consistency of each object with its envelope,
//! the label that marks what it applied, and which earlier objects a snapshot makes obsolete.
//! Pure, so every rule is unit-tested.

use std::collections::{BTreeSet, HashSet};

use kstretch_proto::agent::v1::{ObjectRef, RetainedCluster, Snapshot};
use kube::core::ApiResource;
use serde_json::Value;

/// The one field manager of everything the agent applies.
pub const FIELD_MANAGER: &str = "kstretch-agent";
/// Label on everything the agent applies; only objects carrying it are ever deleted by it.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY_VALUE: &str = "kstretch-agent";

/// A kind the agent applies (and prunes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManagedKind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    /// Its CRD may be missing from a member cluster; listing it then finds nothing to prune.
    pub optional: bool,
}

/// Every kind central may send, in the order they are applied: what pods mount and reach
/// first, the podsets that create pods last.
pub const MANAGED_KINDS: &[ManagedKind] = &[
    ManagedKind {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        plural: "configmaps",
        optional: false,
    },
    ManagedKind {
        group: "",
        version: "v1",
        kind: "Secret",
        plural: "secrets",
        optional: false,
    },
    ManagedKind {
        group: "",
        version: "v1",
        kind: "Service",
        plural: "services",
        optional: false,
    },
    ManagedKind {
        group: "multicluster.x-k8s.io",
        version: "v1alpha1",
        kind: "ServiceExport",
        plural: "serviceexports",
        optional: true,
    },
    ManagedKind {
        group: "",
        version: "v1",
        kind: "PersistentVolumeClaim",
        plural: "persistentvolumeclaims",
        optional: false,
    },
    ManagedKind {
        group: "core.strimzi.io",
        version: "v1",
        kind: "StrimziPodSet",
        plural: "strimzipodsets",
        optional: false,
    },
];

impl ManagedKind {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn api_resource(&self) -> ApiResource {
        ApiResource {
            group: self.group.to_owned(),
            version: self.version.to_owned(),
            api_version: self.api_version(),
            kind: self.kind.to_owned(),
            plural: self.plural.to_owned(),
        }
    }

    pub fn lookup(api_version: &str, kind: &str) -> Option<&'static ManagedKind> {
        MANAGED_KINDS
            .iter()
            .find(|k| k.kind == kind && k.api_version() == api_version)
    }
}

/// The namespaces the agent works in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    All,
    Namespaces(BTreeSet<String>),
}

impl Scope {
    pub fn allows(&self, namespace: &str) -> bool {
        match self {
            Scope::All => true,
            Scope::Namespaces(set) => set.contains(namespace),
        }
    }

    /// For `Hello`: empty means all.
    pub fn names(&self) -> Vec<String> {
        match self {
            Scope::All => Vec::new(),
            Scope::Namespaces(set) => set.iter().cloned().collect(),
        }
    }
}

/// Identifies one object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl Key {
    pub fn from_ref(r: &ObjectRef) -> Self {
        Self {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
        }
    }

    pub fn to_ref(&self) -> ObjectRef {
        ObjectRef {
            api_version: self.api_version.clone(),
            kind: self.kind.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{} {}/{}",
            self.api_version, self.kind, self.namespace, self.name
        )
    }
}

/// Why one object of a snapshot is not applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    #[error("invalid object: {0}")]
    Invalid(String),
    #[error(
        "kind {0} is not applied by the agent (it applies ConfigMap, Secret, Service, PersistentVolumeClaim, StrimziPodSet)"
    )]
    KindNotManaged(String),
    #[error("namespace {0:?} is not managed by this agent")]
    NamespaceNotManaged(String),
    #[error("the snapshot lists this object more than once; the first is applied")]
    Duplicate,
}

impl Rejection {
    /// Stable, machine-readable reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Rejection::Invalid(_) => "invalid-object",
            Rejection::KindNotManaged(_) => "kind-not-managed",
            Rejection::NamespaceNotManaged(_) => "namespace-not-managed",
            Rejection::Duplicate => "duplicate-object",
        }
    }
}

/// An object ready for server-side apply.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub key: Key,
    pub kind: &'static ManagedKind,
    pub body: Value,
}

/// One object of the snapshot, checked: in snapshot order, with its key (from the envelope).
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    pub key: Key,
    pub result: Result<Prepared, Rejection>,
}

/// Checks every object of `snapshot` against the rules and labels the good ones.
pub fn check(snapshot: &Snapshot, scope: &Scope) -> Vec<Checked> {
    let mut seen: HashSet<Key> = HashSet::new();
    snapshot
        .objects
        .iter()
        .map(|object| {
            let key = object
                .r#ref
                .as_ref()
                .map(Key::from_ref)
                .unwrap_or_else(|| Key {
                    api_version: String::new(),
                    kind: String::new(),
                    namespace: String::new(),
                    name: String::new(),
                });
            let result = if object.r#ref.is_none() {
                Err(Rejection::Invalid(
                    "the object has no apiVersion/kind/namespace/name".into(),
                ))
            } else if !seen.insert(key.clone()) {
                Err(Rejection::Duplicate)
            } else {
                prepare(&key, &object.json, scope)
            };
            Checked { key, result }
        })
        .collect()
}

fn prepare(key: &Key, json: &[u8], scope: &Scope) -> Result<Prepared, Rejection> {
    let kind = ManagedKind::lookup(&key.api_version, &key.kind)
        .ok_or_else(|| Rejection::KindNotManaged(format!("{}/{}", key.api_version, key.kind)))?;
    if key.name.is_empty() || key.namespace.is_empty() {
        return Err(Rejection::Invalid(
            "the object needs a name and a namespace".into(),
        ));
    }
    if !scope.allows(&key.namespace) {
        return Err(Rejection::NamespaceNotManaged(key.namespace.clone()));
    }
    let mut body: Value =
        serde_json::from_slice(json).map_err(|e| Rejection::Invalid(format!("not JSON: {e}")))?;
    let Value::Object(map) = &mut body else {
        return Err(Rejection::Invalid("not a JSON object".into()));
    };
    let agree =
        |map: &mut serde_json::Map<String, Value>, field: &str, want: &str| match map.get(field) {
            None | Some(Value::Null) => {
                map.insert(field.to_owned(), Value::String(want.to_owned()));
                Ok(())
            }
            Some(Value::String(have)) if have == want => Ok(()),
            Some(other) => Err(Rejection::Invalid(format!(
                "{field} is {other} but the snapshot names {want:?}"
            ))),
        };
    agree(map, "apiVersion", &key.api_version)?;
    agree(map, "kind", &key.kind)?;
    let metadata = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    let Value::Object(metadata) = metadata else {
        return Err(Rejection::Invalid("metadata is not an object".into()));
    };
    agree(metadata, "name", &key.name)?;
    agree(metadata, "namespace", &key.namespace)?;
    let labels = metadata
        .entry("labels")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    let Value::Object(labels) = labels else {
        return Err(Rejection::Invalid(
            "metadata.labels is not an object".into(),
        ));
    };
    labels.insert(
        MANAGED_BY_LABEL.to_owned(),
        Value::String(MANAGED_BY_VALUE.to_owned()),
    );
    Ok(Prepared {
        key: key.clone(),
        kind,
        body,
    })
}

/// An object the agent applied earlier (it carries the managed-by label), as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Existing {
    pub key: Key,
    pub uid: String,
    pub being_deleted: bool,
    /// Its `strimzi.io/cluster` label: the Kafka cluster it belongs to.
    pub kafka_cluster: Option<String>,
    /// Never deleted for not being listed: a PVC whose `strimzi.io/delete-claim` is not
    /// `"true"` keeps the data of a removed node (Strimzi's `deleteClaim: false`).
    pub kept_when_unlisted: bool,
}

/// What to delete after a snapshot: every labelled object in scope that the snapshot does not
/// list (whether or not its entry could be applied), that is not already going away, and that
/// does not belong to a Kafka cluster the snapshot retains.
pub fn obsolete<'a>(
    existing: &'a [Existing],
    snapshot: &[Checked],
    retained: &[RetainedCluster],
    scope: &Scope,
) -> Vec<&'a Existing> {
    let desired: HashSet<&Key> = snapshot.iter().map(|c| &c.key).collect();
    let is_retained = |e: &Existing| {
        e.kafka_cluster.as_deref().is_some_and(|cluster| {
            retained
                .iter()
                .any(|r| r.cluster == cluster && r.namespace == e.key.namespace)
        })
    };
    existing
        .iter()
        .filter(|e| {
            !e.being_deleted
                && scope.allows(&e.key.namespace)
                && !desired.contains(&e.key)
                && !e.kept_when_unlisted
                && !is_retained(e)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use kstretch_proto::agent::v1::DesiredObject;
    use serde_json::json;

    fn key(kind: &str, ns: &str, name: &str) -> Key {
        let api_version = if kind == "StrimziPodSet" {
            "core.strimzi.io/v1"
        } else {
            "v1"
        };
        Key {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: ns.into(),
            name: name.into(),
        }
    }

    fn object(key: &Key, body: Value) -> DesiredObject {
        DesiredObject {
            r#ref: Some(key.to_ref()),
            json: serde_json::to_vec(&body).unwrap(),
        }
    }

    fn scope() -> Scope {
        Scope::Namespaces(["ns".to_owned()].into())
    }

    #[test]
    fn a_good_object_is_labelled_and_completed_from_its_envelope() {
        let k = key("ConfigMap", "ns", "a");
        let snapshot = Snapshot {
            objects: vec![object(
                &k,
                json!({"data": {"x": "1"}, "metadata": {"labels": {"l": "v"}}}),
            )],
            ..Snapshot::default()
        };
        let checked = check(&snapshot, &scope());
        let prepared = checked[0].result.as_ref().unwrap();
        assert_eq!(prepared.kind.kind, "ConfigMap");
        assert_eq!(
            prepared.body,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"x": "1"},
                   "metadata": {"name": "a", "namespace": "ns",
                                "labels": {"l": "v", MANAGED_BY_LABEL: MANAGED_BY_VALUE}}})
        );
    }

    #[test]
    fn each_bad_object_is_rejected_with_its_reason_and_the_rest_kept() {
        let good = key("Service", "ns", "svc");
        let pod = Key {
            kind: "Pod".into(),
            ..key("ConfigMap", "ns", "p")
        };
        let elsewhere = key("ConfigMap", "other", "c");
        let liar = key("ConfigMap", "ns", "liar");
        let garbage = key("ConfigMap", "ns", "garbage");
        let snapshot = Snapshot {
            objects: vec![
                object(&good, json!({"spec": {}})),
                object(&pod, json!({})),
                object(&elsewhere, json!({})),
                object(&liar, json!({"metadata": {"name": "someone-else"}})),
                DesiredObject {
                    r#ref: Some(garbage.to_ref()),
                    json: b"{not json".to_vec(),
                },
                object(&good, json!({"spec": {"other": 1}})),
                DesiredObject {
                    r#ref: None,
                    json: b"{}".to_vec(),
                },
            ],
            ..Snapshot::default()
        };
        let checked = check(&snapshot, &scope());
        let reasons: Vec<&str> = checked
            .iter()
            .map(|c| c.result.as_ref().map_or_else(|r| r.reason(), |_| "ok"))
            .collect();
        assert_eq!(
            reasons,
            [
                "ok",
                "kind-not-managed",
                "namespace-not-managed",
                "invalid-object",
                "invalid-object",
                "duplicate-object",
                "invalid-object"
            ]
        );
        let liar_error = checked[3].result.as_ref().unwrap_err().to_string();
        assert!(liar_error.contains("someone-else"), "{liar_error}");
    }

    #[test]
    fn every_namespace_is_allowed_without_a_namespace_flag() {
        let k = key("ConfigMap", "anywhere", "a");
        let snapshot = Snapshot {
            objects: vec![object(&k, json!({}))],
            ..Snapshot::default()
        };
        assert!(check(&snapshot, &Scope::All)[0].result.is_ok());
        assert_eq!(Scope::All.names(), Vec::<String>::new());
    }

    #[test]
    fn obsolete_objects_are_the_labelled_ones_no_longer_listed() {
        let keep = key("ConfigMap", "ns", "keep");
        let rejected = key("Service", "ns", "rejected-but-listed");
        let gone = key("ConfigMap", "ns", "gone");
        let going = key("ConfigMap", "ns", "already-going");
        let outside = key("ConfigMap", "other", "outside");
        let retained = key("ConfigMap", "ns", "of-a-retained-cluster");
        let kept_claim = key("PersistentVolumeClaim", "ns", "data-kept");
        let same_name_elsewhere = key("ConfigMap", "ns2", "of-a-retained-cluster");
        let snapshot = Snapshot {
            objects: vec![
                object(&keep, json!({})),
                DesiredObject {
                    r#ref: Some(rejected.to_ref()),
                    json: b"nope".to_vec(),
                },
            ],
            ..Snapshot::default()
        };
        let checked = check(&snapshot, &scope());
        let existing: Vec<Existing> = [
            &keep,
            &rejected,
            &gone,
            &going,
            &outside,
            &retained,
            &same_name_elsewhere,
            &kept_claim,
        ]
        .into_iter()
        .map(|k| Existing {
            key: k.clone(),
            uid: format!("uid-{}", k.name),
            being_deleted: k.name == "already-going",
            kept_when_unlisted: k.name == "data-kept",
            kafka_cluster: k
                .name
                .starts_with("of-a-retained")
                .then(|| "kept".to_owned()),
        })
        .collect();
        let keep_cluster = [RetainedCluster {
            namespace: "ns".into(),
            cluster: "kept".into(),
        }];
        let scope = Scope::Namespaces(["ns".to_owned(), "ns2".to_owned()].into());
        let obsolete: Vec<&Key> = obsolete(&existing, &checked, &keep_cluster, &scope)
            .into_iter()
            .map(|e| &e.key)
            .collect();
        assert_eq!(obsolete, [&gone, &same_name_elsewhere]);
    }

    #[test]
    fn kinds_are_applied_in_dependency_order() {
        let order: Vec<&str> = MANAGED_KINDS.iter().map(|k| k.kind).collect();
        assert_eq!(order.last(), Some(&"StrimziPodSet"));
        let sps = ManagedKind::lookup("core.strimzi.io/v1", "StrimziPodSet").unwrap();
        assert_eq!(sps.api_resource().plural, "strimzipodsets");
        assert!(ManagedKind::lookup("core.strimzi.io/v1beta2", "StrimziPodSet").is_none());
        assert_eq!(
            ManagedKind::lookup("v1", "ConfigMap")
                .unwrap()
                .api_version(),
            "v1"
        );
    }
}
