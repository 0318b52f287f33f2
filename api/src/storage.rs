//! Kafka node storage (`KafkaNodePool.spec.storage`, and the legacy `Kafka.spec.kafka.storage`):
//! ephemeral, persistent-claim or JBOD, told apart by the `type` field.
//!
//! The Rust side is an internally tagged enum. Its schema is written by hand with
//! [`flatten_tagged_variants`]: one object with the union of the variants' properties and a `type`
//! enum, which is the structural form the apiserver requires (schemars alone would emit `oneOf`).

use std::borrow::Cow;
use std::collections::BTreeMap;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

use crate::schema::{flatten_tagged_variants, keep_unknown_fields};

/// Storage of the nodes of a pool.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "type")]
pub enum Storage {
    /// An `emptyDir` volume: data is lost when the pod goes.
    #[serde(rename = "ephemeral")]
    Ephemeral(EphemeralStorage),
    /// A PersistentVolumeClaim per node.
    #[serde(rename = "persistent-claim")]
    PersistentClaim(PersistentClaimStorage),
    /// Several volumes per node (Kafka's `log.dirs`).
    #[serde(rename = "jbod")]
    Jbod(JbodStorage),
}

/// One volume: the storage of a node without JBOD, or one JBOD volume.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "type")]
pub enum SingleVolumeStorage {
    /// An `emptyDir` volume.
    #[serde(rename = "ephemeral")]
    Ephemeral(EphemeralStorage),
    /// A PersistentVolumeClaim.
    #[serde(rename = "persistent-claim")]
    PersistentClaim(PersistentClaimStorage),
}

/// Whether a volume holds the KRaft metadata log.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum KraftMetadata {
    /// The metadata log shares this volume with the partition data.
    #[serde(rename = "shared")]
    Shared,
}

/// Fields of `type: ephemeral`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct EphemeralStorage {
    /// Volume ID, required for JBOD volumes; it names the data directory and the PVC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub id: Option<i32>,
    /// Size limit of the `emptyDir` volume, as a Kubernetes quantity (for example `1Gi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(r"^([0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"))]
    pub size_limit: Option<String>,
    /// `shared` when this volume also stores the KRaft metadata log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kraft_metadata: Option<KraftMetadata>,
}

/// Fields of `type: persistent-claim`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct PersistentClaimStorage {
    /// Volume ID, required for JBOD volumes; it names the data directory and the PVC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub id: Option<i32>,
    /// Requested size of the claim, as a Kubernetes quantity (for example `100Gi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// Storage class of the claim; the cluster default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// Labels a PersistentVolume must carry to be bound to the claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<BTreeMap<String, String>>,
    /// Whether the claim is deleted when its node is removed (default `false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_claim: Option<bool>,
    /// `shared` when this volume also stores the KRaft metadata log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kraft_metadata: Option<KraftMetadata>,
    /// VolumeAttributesClass of the claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_attributes_class: Option<String>,
}

/// Fields of `type: jbod`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct JbodStorage {
    /// The volumes, each with a unique `id`.
    #[serde(default)]
    pub volumes: Vec<SingleVolumeStorage>,
}

impl Storage {
    /// The volumes of a node: the JBOD volumes, or the single volume.
    pub fn volumes(&self) -> Vec<SingleVolumeStorage> {
        match self {
            Storage::Ephemeral(s) => vec![SingleVolumeStorage::Ephemeral(s.clone())],
            Storage::PersistentClaim(s) => vec![SingleVolumeStorage::PersistentClaim(s.clone())],
            Storage::Jbod(j) => j.volumes.clone(),
        }
    }
}

impl SingleVolumeStorage {
    /// The volume ID, if set.
    pub fn id(&self) -> Option<i32> {
        match self {
            SingleVolumeStorage::Ephemeral(s) => s.id,
            SingleVolumeStorage::PersistentClaim(s) => s.id,
        }
    }

    /// Whether this volume holds the KRaft metadata log.
    pub fn kraft_metadata(&self) -> Option<KraftMetadata> {
        match self {
            SingleVolumeStorage::Ephemeral(s) => s.kraft_metadata,
            SingleVolumeStorage::PersistentClaim(s) => s.kraft_metadata,
        }
    }
}

impl JsonSchema for Storage {
    fn schema_name() -> Cow<'static, str> {
        "Storage".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut schema = flatten_tagged_variants(
            "type",
            vec![
                ("ephemeral", EphemeralStorage::json_schema(generator)),
                (
                    "persistent-claim",
                    PersistentClaimStorage::json_schema(generator),
                ),
                ("jbod", JbodStorage::json_schema(generator)),
            ],
        );
        schema.insert(
            "description".to_owned(),
            "Storage of the nodes: `ephemeral`, `persistent-claim` or `jbod` (field `type`)."
                .into(),
        );
        schema
    }
}

impl JsonSchema for SingleVolumeStorage {
    fn schema_name() -> Cow<'static, str> {
        "SingleVolumeStorage".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut schema = flatten_tagged_variants(
            "type",
            vec![
                ("ephemeral", EphemeralStorage::json_schema(generator)),
                (
                    "persistent-claim",
                    PersistentClaimStorage::json_schema(generator),
                ),
            ],
        );
        schema.insert(
            "description".to_owned(),
            "One volume: `ephemeral` or `persistent-claim` (field `type`).".into(),
        );
        schema
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn jbod_round_trips() {
        let value = json!({
            "type": "jbod",
            "volumes": [
                {"id": 0, "type": "persistent-claim", "size": "100Gi", "kraftMetadata": "shared", "deleteClaim": false},
                {"id": 1, "type": "ephemeral", "sizeLimit": "1Gi"}
            ]
        });
        let storage: Storage = serde_json::from_value(value.clone()).expect("deserializes");
        let volumes = storage.volumes();
        assert_eq!(volumes.len(), 2);
        assert_eq!(volumes[0].id(), Some(0));
        assert_eq!(volumes[0].kraft_metadata(), Some(KraftMetadata::Shared));
        assert_eq!(volumes[1].kraft_metadata(), None);
        assert_eq!(serde_json::to_value(&storage).expect("serializes"), value);
    }

    #[test]
    fn single_volume_is_its_own_volume() {
        let storage: Storage =
            serde_json::from_value(json!({"type": "persistent-claim", "size": "1Gi"}))
                .expect("deserializes");
        assert!(matches!(
            storage.volumes().as_slice(),
            [SingleVolumeStorage::PersistentClaim(PersistentClaimStorage { size: Some(s), .. })] if s == "1Gi"
        ));
    }

    #[test]
    fn unknown_type_is_rejected() {
        assert!(serde_json::from_value::<Storage>(json!({"type": "tmpfs"})).is_err());
        assert!(serde_json::from_value::<SingleVolumeStorage>(json!({"type": "jbod"})).is_err());
    }

    #[test]
    fn schema_is_one_object_with_a_type_enum() {
        let schema = schemars::SchemaGenerator::default()
            .into_root_schema_for::<Storage>()
            .to_value();
        assert_eq!(schema["type"], json!("object"));
        assert_eq!(
            schema["properties"]["type"]["enum"],
            json!(["ephemeral", "persistent-claim", "jbod"])
        );
        for key in [
            "id",
            "size",
            "sizeLimit",
            "class",
            "selector",
            "deleteClaim",
            "kraftMetadata",
            "volumeAttributesClass",
            "volumes",
        ] {
            assert!(schema["properties"].get(key).is_some(), "missing {key}");
        }
        assert!(schema.get("oneOf").is_none());
    }
}
