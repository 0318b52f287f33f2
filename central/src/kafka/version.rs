//! A `Kafka`'s version: what it asks to run (refused when Kafka cannot take it), what its
//! status says every node runs, and the cluster's `metadata.version`, raised with
//! UpdateFeatures once every node runs a newer Kafka. The nodes themselves change version by
//! the ordinary roll (the version is in the pod), controllers first.

use std::collections::BTreeMap;

use kstretch_api::{Kafka, KafkaStatus};
use kstretch_core::versions::{self, MetadataVersion, Target, VersionError};
use kstretch_kadmin::AdminClient;

use crate::kafka::warning::{Reason, Warning};
use kstretch_core::versions::DEFAULT_KAFKA_VERSION;

/// The finalized feature that is the metadata version.
const METADATA_VERSION: &str = "metadata.version";

/// What `kafka` should run, given the metadata version its status last saw Kafka finalize.
pub fn target(kafka: &Kafka, status: &KafkaStatus) -> Result<Target, VersionError> {
    let spec = &kafka.spec.kafka;
    let finalized = status
        .kafka_metadata_version
        .as_deref()
        .and_then(MetadataVersion::parse);
    versions::target(
        spec.version.as_deref().unwrap_or(DEFAULT_KAFKA_VERSION),
        spec.metadata_version.as_deref(),
        finalized,
    )
}

/// The warning to show while the nodes do not all run `target` yet (`running`: the version
/// the status says they all ran last).
pub fn changing(running: Option<&str>, target: &Target) -> Option<Warning> {
    let running = running.filter(|r| *r != target.version)?;
    Some(Warning::new(
        Reason::KafkaVersionChanging,
        format!(
            "the nodes change from Kafka {running} to {}, one at a time, controllers first; the metadata.version becomes {} once every node runs {}",
            target.version, target.metadata, target.version
        ),
    ))
}

/// The cluster's finalized `metadata.version` once every node runs `target` (pure): `Ok`
/// with the level the status records when it is there already, `Err` with the level to raise
/// it to.
pub fn metadata_step(features: &BTreeMap<String, i16>, target: &Target) -> Result<i16, i16> {
    let finalized = features.get(METADATA_VERSION).copied().unwrap_or_default();
    if finalized >= target.metadata.level {
        Ok(finalized)
    } else {
        Err(target.metadata.level)
    }
}

/// Raises the finalized `metadata.version` to `level` with UpdateFeatures.
pub async fn raise_metadata(admin: &AdminClient, level: i16) -> Result<(), kstretch_kadmin::Error> {
    admin.upgrade_feature(METADATA_VERSION, level).await
}

/// How the status shows a finalized level: its name, or the number for a level kstretch does
/// not know (raised by hand past it).
pub fn metadata_name(level: i16) -> String {
    MetadataVersion::of_level(level).map_or_else(|| level.to_string(), |mv| mv.name.to_owned())
}

/// The warning while a raise to `target` fails (`why`); retried.
pub fn raise_pending(target: &Target, why: &str) -> Warning {
    Warning::new(
        Reason::MetadataVersionPending,
        format!(
            "metadata.version is not raised to {} yet: {why}; retried",
            target.metadata
        ),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn kafka(mut spec: serde_json::Value) -> Kafka {
        spec["listeners"] = serde_json::json!([]);
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kafka.strimzi.io/v1",
            "kind": "Kafka",
            "metadata": {"name": "k", "namespace": "ns"},
            "spec": {"kafka": spec},
        }))
        .unwrap()
    }

    fn at(metadata_version: &str) -> KafkaStatus {
        KafkaStatus {
            kafka_metadata_version: Some(metadata_version.to_owned()),
            ..KafkaStatus::default()
        }
    }

    #[test]
    fn the_default_version_is_one_kstretch_runs() {
        let t = target(&kafka(serde_json::json!({})), &KafkaStatus::default()).unwrap();
        assert_eq!(t.version, DEFAULT_KAFKA_VERSION);
    }

    #[test]
    fn a_version_below_the_finalized_metadata_version_is_refused() {
        let k = kafka(serde_json::json!({"version": "4.1.2"}));
        assert!(target(&k, &at("4.1-IV1")).is_ok());
        let err = target(&k, &at("4.3-IV0")).unwrap_err();
        assert_eq!(err.reason(), "KafkaDowngradeRefused");
    }

    #[test]
    fn the_change_is_announced_only_while_the_version_differs() {
        let k = kafka(serde_json::json!({"version": "4.3.1"}));
        let t = target(&k, &at("4.1-IV1")).unwrap();
        let Warning { reason, message } = changing(Some("4.1.2"), &t).unwrap();
        assert_eq!(reason, Reason::KafkaVersionChanging);
        assert!(
            message.contains("from Kafka 4.1.2 to 4.3.1") && message.contains("4.3-IV0"),
            "{message}"
        );
        assert!(changing(Some("4.3.1"), &t).is_none());
        assert!(changing(None, &t).is_none());
    }
}
