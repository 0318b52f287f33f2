//! The desired state of every member cluster, keyed by cluster alias: full snapshots with a
//! content hash and a generation that increases only when the content changes.
//!
//! Whoever computes what a cluster needs (the Kafka reconciler, or a test) calls
//! [`DesiredStates::set`]; every agent session of that alias is notified and pushes the new
//! snapshot. A cluster with no entry gets no snapshot at all: "central has not computed anything
//! yet" must never look like "delete everything".

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use ring::digest::{Context, SHA256};
use serde_json::Value;
use tokio::sync::watch;

use super::identity::is_valid_alias;

/// Identifies one desired object; snapshots are kept sorted by it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{} {}/{}",
            self.api_version, self.kind, self.namespace, self.name
        )
    }
}

/// One object of a snapshot: its key and its JSON, serialized once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredObject {
    pub key: ObjectKey,
    pub json: Vec<u8>,
}

/// The full desired state of one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredSnapshot {
    pub cluster_alias: String,
    pub generation: u64,
    /// `sha256:<hex>` over the objects in key order.
    pub hash: String,
    pub objects: Vec<DesiredObject>,
    /// What the snapshot says about owners (retained, claimed, declared deleted).
    pub ownership: Ownership,
    pub updated_at: SystemTime,
}

/// What a snapshot says about the owners of objects, besides listing objects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ownership {
    /// Kafka clusters (namespace, name) whose objects the agent must keep although they are
    /// not listed: central does not know their desired state right now. For agents that
    /// predate `owners`.
    pub retained: Vec<Retained>,
    /// Every owner central reconciles (the agent deletes unlisted objects only of these, or of
    /// `deleted`); an entry with `retain` keeps all its objects.
    pub owners: Vec<OwnerEntry>,
    /// Owners central saw deleted and not every agent has confirmed yet.
    pub deleted: Vec<OwnerEntry>,
}

impl Ownership {
    fn normalize(&mut self) {
        self.retained.sort();
        self.retained.dedup();
        self.owners.sort();
        self.owners.dedup();
        self.deleted.sort();
        self.deleted.dedup();
    }
}

/// One owner as a snapshot names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OwnerEntry {
    /// `Kafka` or `KafkaConnect`.
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub retain: bool,
}

/// A Kafka cluster whose objects are kept unlisted: `(namespace, name)`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Retained {
    pub namespace: String,
    pub cluster: String,
}

/// Why a desired state was refused (nothing is changed then).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DesiredError {
    #[error("{0:?} is not a valid cluster alias")]
    InvalidAlias(String),
    #[error("object #{index} is not a JSON object")]
    NotAnObject { index: usize },
    #[error("object #{index} has no {field}")]
    MissingField { index: usize, field: &'static str },
    #[error("{0} appears twice")]
    Duplicate(ObjectKey),
    #[error("cannot serialize {key}: {message}")]
    Serialize { key: ObjectKey, message: String },
}

impl DesiredError {
    /// Stable, machine-readable reason.
    pub fn reason(&self) -> &'static str {
        match self {
            DesiredError::InvalidAlias(_) => "invalid-alias",
            DesiredError::NotAnObject { .. } => "not-an-object",
            DesiredError::MissingField { .. } => "missing-field",
            DesiredError::Duplicate(_) => "duplicate-object",
            DesiredError::Serialize { .. } => "serialize",
        }
    }
}

/// What [`DesiredStates::set`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetOutcome {
    pub generation: u64,
    /// False when the content equals the current snapshot (no push happens then).
    pub changed: bool,
}

type Map = BTreeMap<String, Arc<DesiredSnapshot>>;

/// The registry of desired snapshots, shared by whoever fills it and every agent session.
#[derive(Debug, Clone)]
pub struct DesiredStates {
    tx: Arc<watch::Sender<Arc<Map>>>,
}

impl Default for DesiredStates {
    fn default() -> Self {
        Self::new()
    }
}

impl DesiredStates {
    /// An empty registry: no cluster has a desired state, so no agent gets a snapshot.
    pub fn new() -> Self {
        let (tx, _) = watch::channel(Arc::new(Map::new()));
        Self { tx: Arc::new(tx) }
    }

    /// Replaces the desired state of `alias` with `objects` (each a full Kubernetes object with
    /// `apiVersion`, `kind`, `metadata.namespace` and `metadata.name`). The generation is bumped
    /// and connected agents of `alias` are sent the new snapshot only when the content hash
    /// changes. An empty `objects` is an explicit "nothing is desired": the agent deletes what
    /// it applied before.
    pub fn set(&self, alias: &str, objects: Vec<Value>) -> Result<SetOutcome, DesiredError> {
        self.set_retaining(alias, objects, Vec::new())
    }

    /// Like [`DesiredStates::set`], and the agent keeps every object of the `retained` Kafka
    /// clusters, listed or not.
    pub fn set_retaining(
        &self,
        alias: &str,
        objects: Vec<Value>,
        retained: Vec<Retained>,
    ) -> Result<SetOutcome, DesiredError> {
        self.set_prepared(
            alias,
            prepare(objects)?,
            Ownership {
                retained,
                ..Ownership::default()
            },
        )
    }

    /// Like [`DesiredStates::set_retaining`], with objects already [`prepare`]d.
    pub fn set_prepared(
        &self,
        alias: &str,
        objects: Vec<DesiredObject>,
        mut ownership: Ownership,
    ) -> Result<SetOutcome, DesiredError> {
        if !is_valid_alias(alias) {
            return Err(DesiredError::InvalidAlias(alias.to_owned()));
        }
        ownership.normalize();
        let hash = content_hash(&objects, &ownership);
        let mut outcome = SetOutcome {
            generation: 0,
            changed: false,
        };
        self.tx.send_modify(|map| {
            let current = map.get(alias);
            let (generation, changed) =
                next_generation(current.map(|s| (s.generation, &*s.hash)), &hash);
            outcome = SetOutcome {
                generation,
                changed,
            };
            if changed {
                let mut next = Map::clone(map);
                next.insert(
                    alias.to_owned(),
                    Arc::new(DesiredSnapshot {
                        cluster_alias: alias.to_owned(),
                        generation,
                        hash: hash.clone(),
                        objects: objects.clone(),
                        ownership: ownership.clone(),
                        updated_at: SystemTime::now(),
                    }),
                );
                *map = Arc::new(next);
            }
        });
        if outcome.changed {
            tracing::info!(
                cluster = alias,
                generation = outcome.generation,
                %hash,
                "desired state changed"
            );
        }
        Ok(outcome)
    }

    /// The current snapshot of `alias`, if central holds one.
    pub fn get(&self, alias: &str) -> Option<Arc<DesiredSnapshot>> {
        self.tx.borrow().get(alias).cloned()
    }

    /// Every snapshot, ordered by alias.
    pub fn all(&self) -> Vec<Arc<DesiredSnapshot>> {
        self.tx.borrow().values().cloned().collect()
    }

    /// Notified on every change of any cluster's snapshot.
    pub(crate) fn subscribe(&self) -> watch::Receiver<Arc<Map>> {
        self.tx.subscribe()
    }
}

/// Extracts each object's key, serializes it once, refuses duplicates and sorts by key.
pub fn prepare(objects: Vec<Value>) -> Result<Vec<DesiredObject>, DesiredError> {
    let mut out: Vec<DesiredObject> = Vec::with_capacity(objects.len());
    for (index, object) in objects.into_iter().enumerate() {
        let Value::Object(map) = &object else {
            return Err(DesiredError::NotAnObject { index });
        };
        let text = |value: Option<&Value>, field: &'static str| {
            value
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .ok_or(DesiredError::MissingField { index, field })
        };
        let metadata = map.get("metadata");
        let key = ObjectKey {
            api_version: text(map.get("apiVersion"), "apiVersion")?,
            kind: text(map.get("kind"), "kind")?,
            namespace: text(
                metadata.and_then(|m| m.get("namespace")),
                "metadata.namespace",
            )?,
            name: text(metadata.and_then(|m| m.get("name")), "metadata.name")?,
        };
        // serde_json's map is ordered by key, so equal objects serialize to equal bytes.
        let json = serde_json::to_vec(&object).map_err(|e| DesiredError::Serialize {
            key: key.clone(),
            message: e.to_string(),
        })?;
        out.push(DesiredObject { key, json });
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    if let Some(pair) = out.windows(2).find(|w| w[0].key == w[1].key) {
        return Err(DesiredError::Duplicate(pair[0].key.clone()));
    }
    Ok(out)
}

/// `sha256:<hex>` over the keys and JSON of `objects` (already in key order) and what the
/// snapshot says about owners (sorted).
pub fn content_hash(objects: &[DesiredObject], ownership: &Ownership) -> String {
    let mut ctx = Context::new(&SHA256);
    let mut field = |part: &[u8]| {
        ctx.update(&(part.len() as u64).to_be_bytes());
        ctx.update(part);
    };
    // Without retained clusters and owners the hash is what it was before they existed, so an
    // agent's last applied hash still matches after a central upgrade.
    for r in &ownership.retained {
        for part in ["retained", &r.namespace, &r.cluster] {
            field(part.as_bytes());
        }
    }
    for (tag, list) in [
        ("owner", &ownership.owners),
        ("deleted", &ownership.deleted),
    ] {
        for o in list {
            let retain = if o.retain { "retain" } else { "" };
            for part in [tag, &o.kind, &o.namespace, &o.name, &o.uid, retain] {
                field(part.as_bytes());
            }
        }
    }
    for object in objects {
        for part in [
            &object.key.api_version,
            &object.key.kind,
            &object.key.namespace,
            &object.key.name,
        ] {
            field(part.as_bytes());
        }
        field(&object.json);
    }
    let digest = ctx.finish();
    let mut hex = String::with_capacity(7 + 64);
    hex.push_str("sha256:");
    for byte in digest.as_ref() {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

/// The generation for content `hash` given the current `(generation, hash)`: unchanged when the
/// hash is the same, else one more (the first snapshot is generation 1).
pub fn next_generation(current: Option<(u64, &str)>, hash: &str) -> (u64, bool) {
    match current {
        Some((generation, current_hash)) if current_hash == hash => (generation, false),
        Some((generation, _)) => (generation + 1, true),
        None => (1, true),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::json;

    fn cm(name: &str, data: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "ns"}, "data": {"k": data}})
    }

    #[test]
    fn the_hash_ignores_order_of_objects_and_of_keys() {
        let none = Ownership::default();
        let a = prepare(vec![cm("a", "1"), cm("b", "2")]).unwrap();
        let b = prepare(vec![
            cm("b", "2"),
            json!({"data": {"k": "1"}, "metadata": {"namespace": "ns", "name": "a"},
                   "kind": "ConfigMap", "apiVersion": "v1"}),
        ])
        .unwrap();
        assert_eq!(content_hash(&a, &none), content_hash(&b, &none));
        let c = prepare(vec![cm("a", "1"), cm("b", "3")]).unwrap();
        assert_ne!(content_hash(&a, &none), content_hash(&c, &none));
        assert!(content_hash(&a, &none).starts_with("sha256:"));
        assert_eq!(content_hash(&a, &none).len(), 7 + 64);
        let kept = Retained {
            namespace: "ns".into(),
            cluster: "c".into(),
        };
        assert_ne!(
            content_hash(&a, &none),
            content_hash(
                &a,
                &Ownership {
                    retained: vec![kept],
                    ..Ownership::default()
                }
            )
        );
        let entry = OwnerEntry {
            kind: "Kafka".into(),
            namespace: "ns".into(),
            name: "c".into(),
            uid: "u1".into(),
            retain: false,
        };
        let claimed = Ownership {
            owners: vec![entry.clone()],
            ..Ownership::default()
        };
        let deleted = Ownership {
            deleted: vec![entry],
            ..Ownership::default()
        };
        assert_ne!(content_hash(&a, &none), content_hash(&a, &claimed));
        assert_ne!(content_hash(&a, &claimed), content_hash(&a, &deleted));
    }

    #[test]
    fn the_empty_snapshot_has_a_hash_too() {
        assert_eq!(
            content_hash(&[], &Ownership::default()),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn generations_move_only_when_the_content_changes() {
        assert_eq!(next_generation(None, "h1"), (1, true));
        assert_eq!(next_generation(Some((1, "h1")), "h1"), (1, false));
        assert_eq!(next_generation(Some((1, "h1")), "h2"), (2, true));
    }

    #[test]
    fn set_bumps_the_generation_and_notifies_only_on_change() {
        let states = DesiredStates::new();
        let mut rx = states.subscribe();
        assert!(states.get("beta").is_none());
        let first = states.set("beta", vec![cm("a", "1")]).unwrap();
        assert_eq!(
            first,
            SetOutcome {
                generation: 1,
                changed: true
            }
        );
        assert!(rx.has_changed().unwrap());
        rx.mark_unchanged();
        let same = states.set("beta", vec![cm("a", "1")]).unwrap();
        assert_eq!(same.generation, 1);
        assert!(!same.changed);
        let other = states.set("beta", vec![]).unwrap();
        assert_eq!(other.generation, 2);
        let snapshot = states.get("beta").unwrap();
        assert!(snapshot.objects.is_empty());
        assert_eq!(snapshot.generation, 2);
        assert_eq!(states.all().len(), 1);
    }

    #[test]
    fn bad_input_is_refused_with_a_reason() {
        let states = DesiredStates::new();
        assert_eq!(
            states.set("Beta", vec![]).unwrap_err().reason(),
            "invalid-alias"
        );
        let err = states.set("beta", vec![json!("text")]).unwrap_err();
        assert_eq!(err, DesiredError::NotAnObject { index: 0 });
        let err = states
            .set(
                "beta",
                vec![json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}})],
            )
            .unwrap_err();
        assert_eq!(
            err,
            DesiredError::MissingField {
                index: 0,
                field: "metadata.namespace"
            }
        );
        let err = states
            .set("beta", vec![cm("a", "1"), cm("a", "2")])
            .unwrap_err();
        assert_eq!(err.reason(), "duplicate-object");
        assert!(err.to_string().contains("v1/ConfigMap ns/a"), "{err}");
        assert!(
            states.get("beta").is_none(),
            "a refused set changes nothing"
        );
    }
}
