//! Each member cluster's desired state assembled from its owners: every `Kafka` contributes
//! the objects it needs in each cluster, and each cluster's snapshot is the union.
//!
//! Nothing is published until [`Owners::open`] is called, once every owner known at start-up
//! has contributed: a snapshot built from half of the owners would make agents delete the other
//! half. An owner whose desired state is unknown (an invalid `Kafka` just after a restart)
//! contributes [`Part::Retain`], and agents then keep its objects untouched.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;

use super::desired::{DesiredError, DesiredStates, Retained};

/// One resource that contributes objects: its kind, namespace and name (a `Kafka` and a
/// `KafkaConnect` of the same name are different owners).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Owner {
    pub kind: OwnerKind,
    pub namespace: String,
    pub name: String,
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
    /// [`Owners::open`] was called while holds remained: opens when the last is released.
    open_requested: bool,
    /// Controllers whose start-up owners have not all contributed yet (see [`Owners::hold`]).
    holds: BTreeSet<&'static str>,
    parts: BTreeMap<Owner, Part>,
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
    pub fn new(desired: DesiredStates, members: BTreeSet<String>) -> Self {
        Self {
            desired,
            members,
            inner: Arc::default(),
        }
    }

    /// Replaces `owner`'s contribution; publishes if open. On error nothing is published and
    /// the owner's previous contribution stands.
    pub fn put(&self, owner: Owner, part: Part) -> Result<(), DesiredError> {
        let mut state = self.lock();
        state.seen.insert(owner.clone());
        let previous = state.parts.insert(owner.clone(), part);
        if !state.open {
            return Ok(());
        }
        let result = self.publish(&mut state);
        if result.is_err() {
            match previous {
                Some(p) => state.parts.insert(owner, p),
                None => state.parts.remove(&owner),
            };
        }
        result
    }

    /// The owner is gone (its `Kafka` was deleted): its objects leave every snapshot.
    pub fn remove(&self, owner: &Owner) -> Result<(), DesiredError> {
        let mut state = self.lock();
        state.seen.insert(owner.clone());
        if state.parts.remove(owner).is_none() || !state.open {
            return Ok(());
        }
        self.publish(&mut state)
    }

    /// The current contribution of `owner`.
    pub fn get(&self, owner: &Owner) -> Option<Part> {
        self.lock().parts.get(owner).cloned()
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

    /// Starts publishing: every owner known at start-up has contributed. While another
    /// controller holds the desired state closed ([`Owners::hold`]), this only records the
    /// request, and the last [`Owners::release`] opens it.
    pub fn open(&self) -> Result<(), DesiredError> {
        let mut state = self.lock();
        if state.open {
            return Ok(());
        }
        if !state.holds.is_empty() {
            state.open_requested = true;
            return Ok(());
        }
        state.open = true;
        self.publish(&mut state)
    }

    /// Keeps the desired state closed until `holder` releases it: a controller whose own
    /// start-up owners have not all contributed yet (they would be missing from the first
    /// snapshots, and agents would delete their objects). Call before anything can open.
    pub fn hold(&self, holder: &'static str) {
        self.lock().holds.insert(holder);
    }

    /// `holder`'s start-up owners all contributed; opens if it was the last hold and
    /// [`Owners::open`] was requested.
    pub fn release(&self, holder: &'static str) -> Result<(), DesiredError> {
        let requested = {
            let mut state = self.lock();
            state.holds.remove(holder);
            state.holds.is_empty() && state.open_requested && !state.open
        };
        if requested { self.open() } else { Ok(()) }
    }

    /// Whether snapshots are published.
    pub fn is_open(&self) -> bool {
        self.lock().open
    }

    fn publish(&self, state: &mut State) -> Result<(), DesiredError> {
        let (objects, retained) = assemble(&state.parts);
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
                .set_prepared(&alias, objects, retained.clone())?;
            state.published.insert(alias);
        }
        Ok(())
    }

    // A poisoned lock only means a writer panicked mid-update of plain maps; keep serving.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The union of every owner's objects by alias, and the retained owners.
fn assemble(parts: &BTreeMap<Owner, Part>) -> (BTreeMap<String, Vec<Value>>, Vec<Retained>) {
    let mut objects: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut retained = Vec::new();
    for (owner, part) in parts {
        match part {
            Part::Objects(by_alias) => {
                for (alias, list) in by_alias {
                    objects
                        .entry(alias.clone())
                        .or_default()
                        .extend(list.iter().cloned());
                }
            }
            Part::Retain => retained.push(Retained {
                namespace: owner.namespace.clone(),
                cluster: owner.name.clone(),
            }),
        }
    }
    (objects, retained)
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
        let owners = Owners::new(desired.clone(), ["alpha".into(), "beta".into()].into());
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
        owners.open().unwrap();
        assert_eq!(names(&desired, "alpha"), ["a-0", "b-0"]);
        assert!(names(&desired, "beta").is_empty(), "a member with nothing");
        assert_eq!(names(&desired, "gamma"), ["b-1"]);

        // b leaves gamma: gamma gets an explicit empty snapshot.
        owners.remove(&owner("b")).unwrap();
        assert!(names(&desired, "gamma").is_empty());
        assert_eq!(names(&desired, "alpha"), ["a-0"]);
    }

    #[test]
    fn an_unknown_owner_is_retained_everywhere() {
        let desired = DesiredStates::new();
        let owners = Owners::new(desired.clone(), ["alpha".into()].into());
        owners.put(owner("broken"), Part::Retain).unwrap();
        owners.open().unwrap();
        let snapshot = desired.get("alpha").unwrap();
        assert!(snapshot.objects.is_empty());
        assert_eq!(
            snapshot.retained,
            [Retained {
                namespace: "ns".into(),
                cluster: "broken".into()
            }]
        );
    }

    #[test]
    fn a_hold_keeps_it_closed_until_released_and_kinds_do_not_collide() {
        let desired = DesiredStates::new();
        let owners = Owners::new(desired.clone(), ["alpha".into()].into());
        owners.hold("KafkaConnect");
        owners
            .put(
                owner("same"),
                Part::Objects([("alpha".into(), vec![cm("ns", "kafka-0")])].into()),
            )
            .unwrap();
        owners.open().unwrap();
        assert!(!owners.is_open(), "held");
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
        owners.release("KafkaConnect").unwrap();
        assert!(owners.is_open());
        assert_eq!(names(&desired, "alpha"), ["connect-0", "kafka-0"]);
        owners.remove(&connect).unwrap();
        assert_eq!(names(&desired, "alpha"), ["kafka-0"]);
    }

    #[test]
    fn a_release_without_an_open_request_does_not_open() {
        let owners = Owners::new(DesiredStates::new(), ["alpha".into()].into());
        owners.hold("KafkaConnect");
        owners.release("KafkaConnect").unwrap();
        assert!(!owners.is_open());
        owners.open().unwrap();
        assert!(owners.is_open());
    }

    #[test]
    fn a_bad_contribution_changes_nothing() {
        let desired = DesiredStates::new();
        let owners = Owners::new(desired.clone(), ["alpha".into()].into());
        owners.open().unwrap();
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
}
