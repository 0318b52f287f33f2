//! Each member cluster's desired state assembled from its owners: every `Kafka` contributes
//! the objects it needs in each cluster, and each cluster's snapshot is the union.
//!
//! Nothing is published until every kind of owner was [`Owners::release`]d, each by its
//! controller once every resource of its first complete list has contributed. An owner whose desired state is unknown (an invalid `Kafka` just after a
//! restart) contributes [`Part::Retain`], and agents then keep its objects untouched.
//!
//! Absent is not deleted: every snapshot names the owners central reconciles, and agents delete
//! a whole owner's objects only once it is [`Owners::delete`]d (central saw the resource being
//! deleted), never because it is missing; an owner that is merely [`Owners::forget`]-ten (no
//! longer seen) leaves its objects in place, kept and reported as unclaimed by the agents.
//! Every object is stamped with its owner's kind and UID.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;

use super::desired::{DesiredError, DesiredStates, OwnerEntry, Ownership, Retained};

/// One resource that contributes objects: its kind, namespace, name and UID (a `Kafka` and a
/// `KafkaConnect` of the same name are different owners; a re-created resource replaces the
/// one before it).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Owner {
    pub kind: OwnerKind,
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl Owner {
    /// `resource` as an owner of `kind`.
    pub fn of<K: kube::ResourceExt>(kind: OwnerKind, resource: &K) -> Owner {
        Owner {
            kind,
            namespace: resource.namespace().unwrap_or_default(),
            name: resource.name_any(),
            uid: resource.uid().unwrap_or_default(),
        }
    }

    fn same_resource_name(&self, other: &Owner) -> bool {
        self.kind == other.kind && self.namespace == other.namespace && self.name == other.name
    }

    /// The owner as snapshots name it.
    pub fn entry(&self, retain: bool) -> OwnerEntry {
        OwnerEntry {
            kind: self.kind.as_str().to_owned(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            retain,
        }
    }
}

impl OwnerKind {
    /// The resource's Kubernetes kind.
    pub fn as_str(self) -> &'static str {
        match self {
            OwnerKind::Kafka => "Kafka",
            OwnerKind::KafkaConnect => "KafkaConnect",
        }
    }
}

/// The kind of resource an [`Owner`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OwnerKind {
    Kafka,
    KafkaConnect,
}

/// What one owner wants.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// These objects, by cluster alias (clusters not named get none of this owner's objects).
    Objects(BTreeMap<String, Vec<Value>>),
    /// Unknown: keep whatever of this owner exists in every cluster.
    Retain,
}

#[derive(Debug, Default)]
struct State {
    open: bool,
    /// Kinds whose start-up owners have not all contributed yet (see [`Owners::release`]).
    holds: BTreeSet<OwnerKind>,
    parts: BTreeMap<Owner, Part>,
    /// Owners central saw deleted whose deletion not every agent has confirmed.
    deleted: BTreeSet<Owner>,
    /// Owners that contributed or were removed since start-up.
    seen: BTreeSet<Owner>,
    /// Every cluster a snapshot was published for, so that a cluster whose last owner left
    /// gets an explicit empty snapshot.
    published: BTreeSet<String>,
}

/// The owners' contributions, published into [`DesiredStates`].
#[derive(Debug, Clone)]
pub struct Owners {
    desired: DesiredStates,
    /// Member clusters that always get a snapshot once open, even an empty one.
    members: BTreeSet<String>,
    inner: Arc<Mutex<State>>,
}

impl Owners {
    /// Closed until each of `kinds` is released: a snapshot made before every owner known at
    /// start-up contributed would lack the others' objects, and agents would delete them.
    pub fn new(
        desired: DesiredStates,
        members: BTreeSet<String>,
        kinds: impl IntoIterator<Item = OwnerKind>,
    ) -> Self {
        let state = State {
            holds: kinds.into_iter().collect(),
            ..State::default()
        };
        Self {
            desired,
            members,
            inner: Arc::new(Mutex::new(state)),
        }
    }

    /// Replaces `owner`'s contribution (and that of an earlier resource of the same name);
    /// publishes if open. On error nothing is published and the previous contributions stand.
    pub fn put(&self, owner: Owner, part: Part) -> Result<(), DesiredError> {
        let mut state = self.lock();
        state.seen.insert(owner.clone());
        let before = state.parts.clone();
        state
            .parts
            .retain(|o, _| o == &owner || !o.same_resource_name(&owner));
        state.parts.insert(owner, part);
        if !state.open {
            return Ok(());
        }
        let result = self.publish(&mut state);
        if result.is_err() {
            state.parts = before;
        }
        result
    }

    /// Central no longer sees the resource (it left central's scope, its CRD was removed, a
    /// finalizer was taken off by hand): its objects leave the snapshots but are not deleted;
    /// agents keep them as unclaimed.
    pub fn forget(&self, owner: &Owner) -> Result<(), DesiredError> {
        let mut state = self.lock();
        state.seen.insert(owner.clone());
        if state.parts.remove(owner).is_none() || !state.open {
            return Ok(());
        }
        self.publish(&mut state)
    }

    /// Central saw the resource being deleted: agents delete its objects and confirm it.
    pub fn delete(&self, owner: &Owner) -> Result<(), DesiredError> {
        let mut state = self.lock();
        state.seen.insert(owner.clone());
        let removed = state.parts.remove(owner).is_some();
        let added = state.deleted.insert(owner.clone());
        if !(removed || added) || !state.open {
            return Ok(());
        }
        self.publish(&mut state)
    }

    /// Every agent confirmed the deletion and the resource is gone: stop declaring it.
    pub fn deletion_done(&self, owner: &Owner) -> Result<(), DesiredError> {
        let mut state = self.lock();
        if !state.deleted.remove(owner) || !state.open {
            return Ok(());
        }
        self.publish(&mut state)
    }

    /// Owners whose deletion is declared to agents.
    pub fn deleted(&self) -> Vec<Owner> {
        self.lock().deleted.iter().cloned().collect()
    }

    /// The current contribution of `owner`.
    pub fn get(&self, owner: &Owner) -> Option<Part> {
        self.lock().parts.get(owner).cloned()
    }

    /// The member clusters (every one gets a snapshot once open).
    pub fn members(&self) -> Vec<String> {
        self.members.iter().cloned().collect()
    }

    /// The hash of the snapshot published for `alias`, if any.
    pub fn published_hash(&self, alias: &str) -> Option<String> {
        self.desired.get(alias).map(|s| s.hash.clone())
    }

    /// Every owner with a contribution.
    pub fn owners(&self) -> Vec<Owner> {
        self.lock().parts.keys().cloned().collect()
    }

    /// Whether `owner` has contributed or been removed since start-up.
    pub fn has_seen(&self, owner: &Owner) -> bool {
        self.lock().seen.contains(owner)
    }

    /// Every owner of `kind` known at start-up has contributed (or was retained or removed);
    /// the last kind released opens the desired state and publishes it.
    pub fn release(&self, kind: OwnerKind) -> Result<(), DesiredError> {
        let mut state = self.lock();
        state.holds.remove(&kind);
        if state.open || !state.holds.is_empty() {
            return Ok(());
        }
        state.open = true;
        self.publish(&mut state)
    }

    /// Whether snapshots are published.
    pub fn is_open(&self) -> bool {
        self.lock().open
    }

    fn publish(&self, state: &mut State) -> Result<(), DesiredError> {
        let (objects, ownership) = assemble(&state.parts, &state.deleted);
        let aliases: BTreeSet<String> = self
            .members
            .iter()
            .chain(objects.keys())
            .chain(state.published.iter())
            .cloned()
            .collect();
        // Prepare every cluster's objects first, so that a bad object changes no cluster.
        let mut prepared = objects
            .into_iter()
            .map(|(alias, objects)| Ok((alias, super::desired::prepare(objects)?)))
            .collect::<Result<BTreeMap<_, _>, DesiredError>>()?;
        for alias in aliases {
            let objects = prepared.remove(&alias).unwrap_or_default();
            self.desired
                .set_prepared(&alias, objects, ownership.clone())?;
            state.published.insert(alias);
        }
        Ok(())
    }

    // A poisoned lock only means a writer panicked mid-update of plain maps; keep serving.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The union of every owner's objects by alias, each stamped with its owner, and what every
/// snapshot says about owners.
fn assemble(
    parts: &BTreeMap<Owner, Part>,
    deleted: &BTreeSet<Owner>,
) -> (BTreeMap<String, Vec<Value>>, Ownership) {
    let mut objects: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut ownership = Ownership {
        deleted: deleted.iter().map(|o| o.entry(false)).collect(),
        ..Ownership::default()
    };
    for (owner, part) in parts {
        match part {
            Part::Objects(by_alias) => {
                ownership.owners.push(owner.entry(false));
                for (alias, list) in by_alias {
                    objects
                        .entry(alias.clone())
                        .or_default()
                        .extend(list.iter().map(|o| stamped(o.clone(), owner)));
                }
            }
            Part::Retain => {
                ownership.owners.push(owner.entry(true));
                ownership.retained.push(Retained {
                    namespace: owner.namespace.clone(),
                    cluster: owner.name.clone(),
                });
            }
        }
    }
    (objects, ownership)
}

/// `object` with its owner's kind and UID in its annotations.
fn stamped(mut object: Value, owner: &Owner) -> Value {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = metadata
            .entry("annotations")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if let Some(annotations) = annotations.as_object_mut() {
            annotations.insert(
                kstretch_api::names::OWNER_KIND.to_owned(),
                Value::String(owner.kind.as_str().to_owned()),
            );
            annotations.insert(
                kstretch_api::names::OWNER_UID.to_owned(),
                Value::String(owner.uid.clone()),
            );
        }
    }
    object
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::json;

    fn cm(ns: &str, name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": ns}})
    }

    fn owner(name: &str) -> Owner {
        Owner {
            kind: OwnerKind::Kafka,
            namespace: "ns".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
        }
    }

    fn names(desired: &DesiredStates, alias: &str) -> Vec<String> {
        desired
            .get(alias)
            .unwrap()
            .objects
            .iter()
            .map(|o| o.key.name.clone())
            .collect()
    }

    #[test]
    fn nothing_is_published_until_open_then_every_member_gets_the_union() {
        let desired = DesiredStates::new();
        let owners = Owners::new(
            desired.clone(),
            ["alpha".into(), "beta".into()].into(),
            [OwnerKind::Kafka],
        );
        owners
            .put(
                owner("a"),
                Part::Objects([("alpha".into(), vec![cm("ns", "a-0")])].into()),
            )
            .unwrap();
        owners
            .put(
                owner("b"),
                Part::Objects(
                    [
                        ("alpha".into(), vec![cm("ns", "b-0")]),
                        ("gamma".into(), vec![cm("ns", "b-1")]),
                    ]
                    .into(),
                ),
            )
            .unwrap();
        assert!(desired.all().is_empty(), "nothing before open");
        owners.release(OwnerKind::Kafka).unwrap();
        assert_eq!(names(&desired, "alpha"), ["a-0", "b-0"]);
        assert!(names(&desired, "beta").is_empty(), "a member with nothing");
        assert_eq!(names(&desired, "gamma"), ["b-1"]);

        // b leaves gamma: gamma gets an explicit empty snapshot.
        owners.forget(&owner("b")).unwrap();
        assert!(names(&desired, "gamma").is_empty());
        assert_eq!(names(&desired, "alpha"), ["a-0"]);
    }

    #[test]
    fn an_unknown_owner_is_retained_everywhere() {
        let desired = DesiredStates::new();
        let owners = Owners::new(desired.clone(), ["alpha".into()].into(), [OwnerKind::Kafka]);
        owners.put(owner("broken"), Part::Retain).unwrap();
        owners.release(OwnerKind::Kafka).unwrap();
        let snapshot = desired.get("alpha").unwrap();
        assert!(snapshot.objects.is_empty());
        assert_eq!(
            snapshot.ownership.retained,
            [Retained {
                namespace: "ns".into(),
                cluster: "broken".into()
            }]
        );
        assert_eq!(snapshot.ownership.owners, [owner("broken").entry(true)]);
    }

    #[test]
    fn it_stays_closed_until_every_kind_is_released_and_kinds_do_not_collide() {
        let desired = DesiredStates::new();
        let kinds = [OwnerKind::Kafka, OwnerKind::KafkaConnect];
        let owners = Owners::new(desired.clone(), ["alpha".into()].into(), kinds);
        owners
            .put(
                owner("same"),
                Part::Objects([("alpha".into(), vec![cm("ns", "kafka-0")])].into()),
            )
            .unwrap();
        owners.release(OwnerKind::Kafka).unwrap();
        assert!(!owners.is_open(), "held by KafkaConnect");
        assert!(desired.all().is_empty(), "nothing while held");
        let connect = Owner {
            kind: OwnerKind::KafkaConnect,
            ..owner("same")
        };
        owners
            .put(
                connect.clone(),
                Part::Objects([("alpha".into(), vec![cm("ns", "connect-0")])].into()),
            )
            .unwrap();
        owners.release(OwnerKind::KafkaConnect).unwrap();
        assert!(owners.is_open());
        assert_eq!(names(&desired, "alpha"), ["connect-0", "kafka-0"]);
        owners.forget(&connect).unwrap();
        assert_eq!(names(&desired, "alpha"), ["kafka-0"]);
        // Released again (a controller restarting its watch): nothing changes.
        owners.release(OwnerKind::KafkaConnect).unwrap();
        assert_eq!(names(&desired, "alpha"), ["kafka-0"]);
    }

    #[test]
    fn a_bad_contribution_changes_nothing() {
        let desired = DesiredStates::new();
        let owners = Owners::new(desired.clone(), ["alpha".into()].into(), [OwnerKind::Kafka]);
        owners.release(OwnerKind::Kafka).unwrap();
        owners
            .put(
                owner("a"),
                Part::Objects([("alpha".into(), vec![cm("ns", "a-0")])].into()),
            )
            .unwrap();
        let generation = desired.get("alpha").unwrap().generation;
        let err = owners
            .put(
                owner("a"),
                Part::Objects([("alpha".into(), vec![cm("ns", "x"), cm("ns", "x")])].into()),
            )
            .unwrap_err();
        assert_eq!(err.reason(), "duplicate-object");
        assert_eq!(desired.get("alpha").unwrap().generation, generation);
        assert_eq!(
            owners.get(&owner("a")),
            Some(Part::Objects(
                [("alpha".into(), vec![cm("ns", "a-0")])].into()
            ))
        );
    }

    /// Forgetting an owner drops its objects from the snapshots without declaring anything;
    /// deleting one declares it (with its UID) in every cluster's snapshot until it is done.
    #[test]
    fn forget_and_delete_differ_and_objects_are_stamped() {
        let desired = DesiredStates::new();
        let owners = Owners::new(
            desired.clone(),
            ["alpha".into(), "beta".into()].into(),
            [OwnerKind::Kafka],
        );
        owners.release(OwnerKind::Kafka).unwrap();
        let a = owner("a");
        owners
            .put(
                a.clone(),
                Part::Objects([("alpha".into(), vec![cm("ns", "a-0")])].into()),
            )
            .unwrap();
        let snapshot = desired.get("alpha").unwrap();
        let object: Value = serde_json::from_slice(&snapshot.objects[0].json).unwrap();
        assert_eq!(
            object["metadata"]["annotations"],
            json!({"kstretch.io/owner-kind": "Kafka", "kstretch.io/owner-uid": "uid-a"})
        );
        assert_eq!(snapshot.ownership.owners, [a.entry(false)]);
        assert_eq!(
            desired.get("beta").unwrap().ownership.owners,
            [a.entry(false)],
            "every cluster learns every owner"
        );

        owners.forget(&a).unwrap();
        let snapshot = desired.get("alpha").unwrap();
        assert!(snapshot.objects.is_empty());
        assert!(snapshot.ownership.owners.is_empty() && snapshot.ownership.deleted.is_empty());

        owners
            .put(
                a.clone(),
                Part::Objects([("alpha".into(), vec![cm("ns", "a-0")])].into()),
            )
            .unwrap();
        owners.delete(&a).unwrap();
        for alias in ["alpha", "beta"] {
            let snapshot = desired.get(alias).unwrap();
            assert!(snapshot.objects.is_empty());
            assert_eq!(snapshot.ownership.deleted, [a.entry(false)]);
        }
        assert_eq!(owners.deleted(), std::slice::from_ref(&a));
        owners.deletion_done(&a).unwrap();
        assert!(desired.get("beta").unwrap().ownership.deleted.is_empty());
    }

    /// A re-created resource (same name, new UID) replaces the one before it.
    #[test]
    fn a_recreated_resource_replaces_its_predecessor() {
        let desired = DesiredStates::new();
        let owners = Owners::new(desired.clone(), ["alpha".into()].into(), [OwnerKind::Kafka]);
        owners.release(OwnerKind::Kafka).unwrap();
        let old = owner("a");
        let new = Owner {
            uid: "uid-new".into(),
            ..owner("a")
        };
        for o in [&old, &new] {
            owners
                .put(
                    o.clone(),
                    Part::Objects([("alpha".into(), vec![cm("ns", "a-0")])].into()),
                )
                .unwrap();
        }
        assert_eq!(owners.owners(), [new]);
    }
}
