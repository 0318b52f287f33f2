//! What the agent accepts from a snapshot, before it touches the apiserver: the kinds it
//! manages, the namespaces it may write to, the consistency of each object with its envelope,
//! the label that marks what it applied, and which earlier objects a snapshot makes obsolete.
//! Pure, so every rule is unit-tested.

use std::collections::{BTreeMap, BTreeSet, HashSet};

pub use kstretch_api::owner::{MANAGED_BY_LABEL, MANAGED_BY_VALUE, MANAGED_KINDS, ManagedKind};
use kstretch_api::owner::{OwnerKey, owner_of};
use kstretch_proto::agent::v1::{ObjectRef, Owner, Snapshot};
use serde_json::Value;

/// The one field manager of everything the agent applies.
pub const FIELD_MANAGER: &str = "kstretch-agent";

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
        "kind {0} is not applied by the agent (it applies ConfigMap, Secret, Service, PersistentVolumeClaim, ServiceExport, PodDisruptionBudget, Deployment, StrimziPodSet)"
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
    /// The resource that owns it and the owner UID it was stamped with, if it names one.
    pub owner: Option<(OwnerKey, Option<String>)>,
    /// Never deleted for not being listed: a PVC whose `strimzi.io/delete-claim` is not
    /// `"true"` keeps the data of a removed node (Strimzi's `deleteClaim: false`).
    pub kept_when_unlisted: bool,
}

impl Existing {
    /// Reads what the decision needs from a listed object's metadata.
    pub fn from_metadata(
        key: Key,
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ) -> Self {
        let empty = std::collections::BTreeMap::new();
        let labels = meta.labels.as_ref().unwrap_or(&empty);
        let annotations = meta.annotations.as_ref().unwrap_or(&empty);
        Self {
            owner: owner_of(&key.namespace, labels, annotations),
            kept_when_unlisted: key.kind == "PersistentVolumeClaim"
                && annotations
                    .get(kstretch_api::names::DELETE_CLAIM)
                    .is_none_or(|v| v != "true"),
            uid: meta.uid.clone().unwrap_or_default(),
            being_deleted: meta.deletion_timestamp.is_some(),
            key,
        }
    }
}

/// What a snapshot says about owners: the ones central claims (and of those, the ones whose
/// objects it keeps unlisted) and the ones it declared deleted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Claims {
    claimed: HashSet<OwnerKey>,
    retained: HashSet<OwnerKey>,
    /// `RetainedCluster` entries `(namespace, name)`, of any kind (they predate owner kinds).
    retained_names: HashSet<(String, String)>,
    deleted: Vec<(OwnerKey, String)>,
}

/// The proto's owner as a key.
pub fn key_of(owner: &Owner) -> OwnerKey {
    OwnerKey {
        kind: owner.kind.clone(),
        namespace: owner.namespace.clone(),
        name: owner.name.clone(),
    }
}

impl Claims {
    /// Claimed: every owner the snapshot lists, and the owner of every object it lists (a
    /// central that predates the owner list claims only those).
    pub fn of(snapshot: &Snapshot, checked: &[Checked]) -> Self {
        let mut claims = Claims::default();
        for owner in &snapshot.owners {
            claims.claimed.insert(key_of(owner));
            if owner.retain {
                claims.retained.insert(key_of(owner));
            }
        }
        for prepared in checked.iter().filter_map(|c| c.result.as_ref().ok()) {
            if let Some((owner, _)) = owner_of_body(&prepared.key.namespace, &prepared.body) {
                claims.claimed.insert(owner);
            }
        }
        claims.retained_names = snapshot
            .retained
            .iter()
            .map(|r| (r.namespace.clone(), r.cluster.clone()))
            .collect();
        claims.deleted = snapshot
            .deleted
            .iter()
            .map(|d| (key_of(d), d.uid.clone()))
            .collect();
        claims
    }

    fn keeps(&self, owner: &OwnerKey) -> bool {
        self.retained.contains(owner)
            || self
                .retained_names
                .contains(&(owner.namespace.clone(), owner.name.clone()))
    }

    /// Whether a declared deletion covers an object of `owner` stamped with `uid`: the same
    /// UID, or none (an object of an older central).
    pub fn deletes(&self, owner: &OwnerKey, uid: Option<&str>) -> Option<&(OwnerKey, String)> {
        self.deleted
            .iter()
            .find(|(d, d_uid)| d == owner && uid.is_none_or(|u| u == d_uid))
    }
}

/// What a snapshot makes of the objects that exist.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Verdict<'a> {
    pub delete: Vec<&'a Existing>,
    /// Kept although not listed, because no owner claims them and none was declared deleted:
    /// object counts by owner and stamped UID (empty when unstamped).
    pub unclaimed: BTreeMap<(OwnerKey, String), u32>,
}

/// Sorts the labelled objects in scope that the snapshot does not list (whether or not its
/// entry could be applied) and that are not already going away: deleted when their owner is
/// claimed and not retained, or declared deleted, or when they name no owner at all (central
/// never sends such objects); kept and counted as unclaimed when their owner is neither claimed
/// nor deleted. Claims without `deleteClaim` are never deleted for being unlisted.
pub fn sort<'a>(
    existing: &'a [Existing],
    snapshot: &[Checked],
    claims: &Claims,
    scope: &Scope,
) -> Verdict<'a> {
    let desired: HashSet<&Key> = snapshot.iter().map(|c| &c.key).collect();
    let mut verdict = Verdict::default();
    for e in existing
        .iter()
        .filter(|e| !e.being_deleted && scope.allows(&e.key.namespace) && !desired.contains(&e.key))
    {
        let Some((owner, uid)) = &e.owner else {
            verdict.delete.push(e);
            continue;
        };
        if claims.keeps(owner) || e.kept_when_unlisted {
            continue;
        }
        if claims.claimed.contains(owner) || claims.deletes(owner, uid.as_deref()).is_some() {
            verdict.delete.push(e);
        } else {
            *verdict
                .unclaimed
                .entry((owner.clone(), uid.clone().unwrap_or_default()))
                .or_default() += 1;
        }
    }
    verdict
}

/// The owner named by an object body's labels and annotations.
fn owner_of_body(namespace: &str, body: &Value) -> Option<(OwnerKey, Option<String>)> {
    let strings = |field: &str| -> std::collections::BTreeMap<String, String> {
        body.pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                    .collect()
            })
            .unwrap_or_default()
    };
    owner_of(namespace, &strings("labels"), &strings("annotations"))
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

    fn existing(k: &Key, owner: Option<(&str, &str, Option<&str>)>) -> Existing {
        Existing {
            key: k.clone(),
            uid: format!("uid-{}", k.name),
            being_deleted: k.name == "already-going",
            kept_when_unlisted: k.kind == "PersistentVolumeClaim",
            owner: owner.map(|(kind, name, uid)| {
                (
                    OwnerKey {
                        kind: kind.into(),
                        namespace: k.namespace.clone(),
                        name: name.into(),
                    },
                    uid.map(str::to_owned),
                )
            }),
        }
    }

    fn owner(kind: &str, name: &str, uid: &str, retain: bool) -> Owner {
        Owner {
            kind: kind.into(),
            namespace: "ns".into(),
            name: name.into(),
            uid: uid.into(),
            retain,
        }
    }

    fn deleted_keys<'a>(v: &Verdict<'a>) -> Vec<&'a str> {
        v.delete.iter().map(|e| e.key.name.as_str()).collect()
    }

    /// Within an owner central claims, what is no longer listed goes, as before.
    #[test]
    fn a_claimed_owner_loses_what_is_no_longer_listed() {
        let listed = key("ConfigMap", "ns", "listed");
        let rejected = key("Service", "ns", "rejected-but-listed");
        let snapshot = Snapshot {
            objects: vec![
                object(
                    &listed,
                    json!({"metadata": {"labels": {"strimzi.io/cluster": "a"}}}),
                ),
                DesiredObject {
                    r#ref: Some(rejected.to_ref()),
                    json: b"nope".to_vec(),
                },
            ],
            ..Snapshot::default()
        };
        let checked = check(&snapshot, &scope());
        let existing: Vec<Existing> = [
            (key("ConfigMap", "ns", "listed"), "a"),
            (rejected.clone(), "a"),
            (key("ConfigMap", "ns", "scaled-down"), "a"),
            (key("ConfigMap", "ns", "already-going"), "a"),
            (key("ConfigMap", "other", "out-of-scope"), "a"),
            (key("PersistentVolumeClaim", "ns", "data-kept"), "a"),
        ]
        .iter()
        .map(|(k, o)| existing(k, Some(("Kafka", o, Some("u1")))))
        .chain([existing(&key("ConfigMap", "ns", "no-owner"), None)])
        .collect();
        let claims = Claims::of(&snapshot, &checked);
        let verdict = sort(&existing, &checked, &claims, &scope());
        assert_eq!(deleted_keys(&verdict), ["scaled-down", "no-owner"]);
        assert!(verdict.unclaimed.is_empty());
    }

    /// An owner the snapshot neither claims nor declares deleted keeps everything, counted.
    #[test]
    fn absent_is_not_deleted() {
        let snapshot = Snapshot {
            owners: vec![owner("Kafka", "known", "u9", false)],
            ..Snapshot::default()
        };
        let existing = vec![
            existing(
                &key("ConfigMap", "ns", "x-0"),
                Some(("Kafka", "x", Some("u1"))),
            ),
            existing(
                &key("StrimziPodSet", "ns", "x"),
                Some(("Kafka", "x", Some("u1"))),
            ),
            existing(&key("ConfigMap", "ns", "old"), Some(("Kafka", "x", None))),
            // A KafkaConnect of the same name is another owner.
            existing(
                &key("Service", "ns", "x-connect-api"),
                Some(("KafkaConnect", "x", Some("u2"))),
            ),
            existing(
                &key("PersistentVolumeClaim", "ns", "data-x-0"),
                Some(("Kafka", "x", Some("u1"))),
            ),
            existing(
                &key("ConfigMap", "ns", "known-0"),
                Some(("Kafka", "known", Some("u9"))),
            ),
        ];
        let claims = Claims::of(&snapshot, &[]);
        let verdict = sort(&existing, &[], &claims, &scope());
        assert_eq!(
            deleted_keys(&verdict),
            ["known-0"],
            "the claimed owner is pruned"
        );
        let counts: Vec<(String, &str, u32)> = verdict
            .unclaimed
            .iter()
            .map(|((o, uid), n)| (o.to_string(), uid.as_str(), *n))
            .collect();
        assert_eq!(
            counts,
            [
                ("Kafka ns/x".to_owned(), "", 1),
                ("Kafka ns/x".to_owned(), "u1", 2),
                ("KafkaConnect ns/x".to_owned(), "u2", 1)
            ]
        );
    }

    /// A declared deletion removes that resource's objects (stamped with its UID or with none),
    /// not those of a later resource of the same name, and never unlisted claims.
    #[test]
    fn a_declared_deletion_removes_only_its_uid() {
        let snapshot = Snapshot {
            deleted: vec![owner("Kafka", "x", "u1", false)],
            ..Snapshot::default()
        };
        let existing = vec![
            existing(
                &key("ConfigMap", "ns", "of-u1"),
                Some(("Kafka", "x", Some("u1"))),
            ),
            existing(
                &key("ConfigMap", "ns", "unstamped"),
                Some(("Kafka", "x", None)),
            ),
            existing(
                &key("ConfigMap", "ns", "of-u2"),
                Some(("Kafka", "x", Some("u2"))),
            ),
            existing(
                &key("ConfigMap", "ns", "connect"),
                Some(("KafkaConnect", "x", Some("u1"))),
            ),
            existing(
                &key("PersistentVolumeClaim", "ns", "data"),
                Some(("Kafka", "x", Some("u1"))),
            ),
        ];
        let claims = Claims::of(&snapshot, &[]);
        let verdict = sort(&existing, &[], &claims, &scope());
        assert_eq!(deleted_keys(&verdict), ["of-u1", "unstamped"]);
        assert_eq!(verdict.unclaimed.len(), 2, "{:?}", verdict.unclaimed);
    }

    /// Retained owners keep everything: by owner (with its kind) or, from a central that
    /// predates owners, by namespace and name.
    #[test]
    fn retained_owners_keep_everything() {
        let existing = vec![
            existing(
                &key("ConfigMap", "ns", "r-0"),
                Some(("Kafka", "r", Some("u1"))),
            ),
            existing(
                &key("ConfigMap", "ns2", "r-0"),
                Some(("Kafka", "r", Some("u1"))),
            ),
        ];
        let scope = Scope::Namespaces(["ns".to_owned(), "ns2".to_owned()].into());
        let by_owner = Snapshot {
            owners: vec![owner("Kafka", "r", "u1", true)],
            ..Snapshot::default()
        };
        let verdict = sort(&existing, &[], &Claims::of(&by_owner, &[]), &scope);
        assert_eq!(deleted_keys(&verdict), Vec::<&str>::new());
        assert_eq!(verdict.unclaimed.len(), 1, "ns2's is nobody's");

        let by_name = Snapshot {
            retained: vec![kstretch_proto::agent::v1::RetainedCluster {
                namespace: "ns".into(),
                cluster: "r".into(),
            }],
            ..Snapshot::default()
        };
        let verdict = sort(&existing, &[], &Claims::of(&by_name, &[]), &scope);
        assert!(verdict.delete.is_empty());
        assert_eq!(verdict.unclaimed.len(), 1);
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
