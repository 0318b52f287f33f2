//! A `Kafka`'s version: what it asks to run (refused when Kafka cannot take it), what its
//! status says every node runs, and the cluster's `metadata.version`, raised with
//! UpdateFeatures once every node runs a newer Kafka. The nodes themselves change version by
//! the ordinary roll (the version is in the pod), controllers first.

use kstretch_api::{Kafka, KafkaStatus};
use kstretch_core::versions::{self, MetadataVersion, Target, VersionError};

use super::context::Context;
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

/// Brings the cluster's finalized metadata version up to `target` (every node runs the
/// target's version: the caller checked the roll is done) and records it in `status`. `true`
/// while the raise is due but failed (a warning says why).
pub async fn raise_metadata(
    ctx: &Context,
    kafka: &Kafka,
    bootstrap: Option<&str>,
    target: &Target,
    status: &mut KafkaStatus,
    warnings: &mut Vec<Warning>,
) -> bool {
    let Some(bootstrap) = bootstrap else {
        return false;
    };
    let raised = async {
        let admin = ctx.kafka.client(bootstrap).await?;
        let finalized = admin
            .finalized_features()
            .await?
            .get(METADATA_VERSION)
            .copied()
            .unwrap_or_default();
        if finalized >= target.metadata.level {
            return Ok::<_, kstretch_kadmin::Error>((finalized, false));
        }
        admin
            .upgrade_feature(METADATA_VERSION, target.metadata.level)
            .await?;
        Ok((target.metadata.level, true))
    };
    match raised.await {
        Ok((level, now)) => {
            if now {
                tracing::info!(metadata_version = %target.metadata, "metadata.version raised");
                ctx.events.about(
                    kafka,
                    false,
                    "MetadataVersionRaised",
                    "Upgrade",
                    format!(
                        "every node runs Kafka {}: metadata.version raised to {}",
                        target.version, target.metadata
                    ),
                );
            }
            // A level kstretch does not know (raised by hand past it) is shown as the number.
            status.kafka_metadata_version = Some(
                MetadataVersion::of_level(level)
                    .map_or_else(|| level.to_string(), |mv| mv.name.to_owned()),
            );
            false
        }
        Err(e) => {
            ctx.kafka.forget(bootstrap);
            warnings.push(Warning::new(
                Reason::MetadataVersionPending,
                format!(
                    "metadata.version is not raised to {} yet: {e}; retried",
                    target.metadata
                ),
            ));
            true
        }
    }
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
