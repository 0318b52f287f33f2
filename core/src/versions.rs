//! The Kafka versions kstretch runs and their metadata versions (`metadata.version` feature
//! levels): which one a version runs at most, which one a `Kafka` should be at, and which
//! version changes Kafka cannot take (a version below the cluster's finalized metadata
//! version, a metadata version lowered). Pure.

use std::fmt;

/// Kafka version run when a `Kafka` or `KafkaConnect` names none.
pub const DEFAULT_KAFKA_VERSION: &str = "4.1.2";

/// Every metadata version kstretch knows, by feature level (Kafka's `MetadataVersion`).
const METADATA_VERSIONS: &[(&str, i16)] = &[
    ("3.9-IV0", 21),
    ("4.0-IV0", 22),
    ("4.0-IV1", 23),
    ("4.0-IV2", 24),
    ("4.0-IV3", 25),
    ("4.1-IV0", 26),
    ("4.1-IV1", 27),
    ("4.2-IV0", 28),
    ("4.2-IV1", 29),
    ("4.3-IV0", 30),
];

/// The Kafka releases kstretch runs (major.minor) and the highest metadata version each
/// runs in production (its `MetadataVersion.LATEST_PRODUCTION`): new clusters are formatted
/// with it, and a running cluster is raised to it once every node runs the release.
const RELEASES: &[(&str, &str)] = &[
    ("3.9", "3.9-IV0"),
    ("4.0", "4.0-IV3"),
    ("4.1", "4.1-IV1"),
    ("4.2", "4.2-IV1"),
    ("4.3", "4.3-IV0"),
];

/// A metadata version: its name (`4.1-IV1`) and feature level (27).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct MetadataVersion {
    pub level: i16,
    pub name: &'static str,
}

impl fmt::Display for MetadataVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

impl MetadataVersion {
    /// The metadata version named `name`: `4.1-IV1`, or `4.1` for the release's highest.
    pub fn parse(name: &str) -> Option<Self> {
        let exact = METADATA_VERSIONS.iter().find(|(n, _)| *n == name);
        let highest_of_release = || {
            METADATA_VERSIONS
                .iter()
                .rev()
                .find(|(n, _)| n.split('-').next() == Some(name))
        };
        exact
            .or_else(highest_of_release)
            .map(|&(name, level)| Self { level, name })
    }

    /// The metadata version at feature level `level`.
    pub fn of_level(level: i16) -> Option<Self> {
        METADATA_VERSIONS
            .iter()
            .find(|(_, l)| *l == level)
            .map(|&(name, level)| Self { level, name })
    }
}

/// Why a `Kafka`'s version or metadata version cannot be run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error(
        ".spec.kafka.version {version} is not a Kafka version kstretch runs; use one of {}",
        supported()
    )]
    Unsupported { version: String },
    #[error(
        ".spec.kafka.metadataVersion {name} is not a metadata version kstretch knows; use one like {} (or leave it out for the version's own)",
        newest()
    )]
    UnknownMetadataVersion { name: String },
    #[error(
        ".spec.kafka.metadataVersion {metadata} is newer than Kafka {version} runs (at most {highest}); lower it or raise .spec.kafka.version"
    )]
    MetadataTooNew {
        metadata: MetadataVersion,
        version: String,
        highest: MetadataVersion,
    },
    #[error(
        "Kafka {version} runs metadata versions up to {highest}, but the cluster's metadata.version is already {finalized} (raised after an upgrade) and Kafka cannot lower it: set .spec.kafka.version back to a version that runs {finalized}"
    )]
    Downgrade {
        version: String,
        highest: MetadataVersion,
        finalized: MetadataVersion,
    },
    #[error(
        ".spec.kafka.metadataVersion {wanted} is lower than the cluster's metadata.version {finalized}, and Kafka cannot lower it: set it to {finalized} or later, or leave it out"
    )]
    MetadataDowngrade {
        wanted: MetadataVersion,
        finalized: MetadataVersion,
    },
}

impl VersionError {
    /// The stable reason of the `Ready=False` condition.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Unsupported { .. } => "UnsupportedKafkaVersion",
            Self::UnknownMetadataVersion { .. } | Self::MetadataTooNew { .. } => {
                "UnsupportedMetadataVersion"
            }
            Self::Downgrade { .. } => "KafkaDowngradeRefused",
            Self::MetadataDowngrade { .. } => "MetadataVersionDowngradeRefused",
        }
    }
}

/// The releases kstretch runs, for messages: `3.9.x, 4.0.x, …`.
pub fn supported() -> String {
    RELEASES
        .iter()
        .map(|(release, _)| format!("{release}.x"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The newest metadata version kstretch knows, for messages.
fn newest() -> &'static str {
    METADATA_VERSIONS.last().map_or("", |(name, _)| name)
}

fn highest_of(release: &str) -> Option<MetadataVersion> {
    RELEASES
        .iter()
        .find(|(r, _)| *r == release)
        .and_then(|(_, mv)| MetadataVersion::parse(mv))
}

/// The highest metadata version Kafka `version` (`4.1.2`) runs in production.
pub fn highest_metadata_version(version: &str) -> Result<MetadataVersion, VersionError> {
    let mut parts = version.split('.');
    let release = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(major), Some(minor), Some(patch), None)
            if [major, minor, patch]
                .iter()
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())) =>
        {
            format!("{major}.{minor}")
        }
        _ => String::new(),
    };
    highest_of(&release).ok_or_else(|| VersionError::Unsupported {
        version: version.to_owned(),
    })
}

/// What a `Kafka` runs: its version, and the metadata version the cluster should be at once
/// every node runs that version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub version: String,
    pub metadata: MetadataVersion,
}

/// The target of a `Kafka` asking for `version` and `metadata_version` (or the version's own
/// highest), whose cluster is finalized at `finalized` (`None`: not known yet, e.g. a new
/// cluster): refused when Kafka cannot run it.
pub fn target(
    version: &str,
    metadata_version: Option<&str>,
    finalized: Option<MetadataVersion>,
) -> Result<Target, VersionError> {
    let highest = highest_metadata_version(version)?;
    let metadata = match metadata_version {
        None => highest,
        Some(name) => {
            let wanted = MetadataVersion::parse(name).ok_or_else(|| {
                VersionError::UnknownMetadataVersion {
                    name: name.to_owned(),
                }
            })?;
            if wanted > highest {
                return Err(VersionError::MetadataTooNew {
                    metadata: wanted,
                    version: version.to_owned(),
                    highest,
                });
            }
            wanted
        }
    };
    if let Some(finalized) = finalized {
        if finalized > highest {
            return Err(VersionError::Downgrade {
                version: version.to_owned(),
                highest,
                finalized,
            });
        }
        if metadata_version.is_some() && metadata < finalized {
            return Err(VersionError::MetadataDowngrade {
                wanted: metadata,
                finalized,
            });
        }
    }
    Ok(Target {
        version: version.to_owned(),
        // Without an explicit wish, a cluster at a higher level than the default (raised by
        // hand) stays there: it is never lowered.
        metadata: finalized.map_or(metadata, |f| metadata.max(f)),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn mv(name: &str) -> MetadataVersion {
        MetadataVersion::parse(name).unwrap()
    }

    #[test]
    fn each_release_runs_its_own_highest_metadata_version() {
        assert_eq!(highest_metadata_version("4.1.2").unwrap().name, "4.1-IV1");
        assert_eq!(highest_metadata_version("4.3.1").unwrap().level, 30);
        assert_eq!(highest_metadata_version("4.0.0").unwrap().name, "4.0-IV3");
        assert_eq!(highest_metadata_version("3.9.1").unwrap().name, "3.9-IV0");
    }

    #[test]
    fn versions_kstretch_does_not_know_are_refused_naming_the_ones_it_does() {
        for version in ["9.9.9", "4.1", "4.1.x", "latest", "", "4.1.2.0", "3.8.0"] {
            let err = highest_metadata_version(version).unwrap_err();
            assert_eq!(err.reason(), "UnsupportedKafkaVersion", "{version}");
            assert!(err.to_string().contains("4.1.x, 4.2.x"), "{err}");
        }
    }

    #[test]
    fn metadata_versions_parse_by_name_release_or_level() {
        assert_eq!(mv("4.1-IV0").level, 26);
        assert_eq!(mv("4.1").name, "4.1-IV1");
        assert_eq!(MetadataVersion::of_level(30).unwrap().name, "4.3-IV0");
        assert!(MetadataVersion::parse("4.1-IV9").is_none());
        assert!(MetadataVersion::of_level(99).is_none());
    }

    #[test]
    fn a_new_cluster_targets_the_versions_highest_or_the_one_asked_for() {
        assert_eq!(
            target("4.1.2", None, None).unwrap().metadata.name,
            "4.1-IV1"
        );
        assert_eq!(
            target("4.3.1", Some("4.1-IV1"), None)
                .unwrap()
                .metadata
                .name,
            "4.1-IV1"
        );
    }

    #[test]
    fn an_upgrade_raises_the_metadata_version_unless_pinned() {
        let at = Some(mv("4.1-IV1"));
        assert_eq!(target("4.3.1", None, at).unwrap().metadata.name, "4.3-IV0");
        assert_eq!(
            target("4.3.1", Some("4.1-IV1"), at).unwrap().metadata.name,
            "4.1-IV1"
        );
    }

    #[test]
    fn going_back_is_allowed_until_the_metadata_version_is_raised() {
        // Upgraded binaries, metadata version still 4.1: 4.1 runs it.
        assert!(target("4.1.2", None, Some(mv("4.1-IV1"))).is_ok());
        let err = target("4.1.2", None, Some(mv("4.3-IV0"))).unwrap_err();
        assert_eq!(err.reason(), "KafkaDowngradeRefused");
        assert!(err.to_string().contains("already 4.3-IV0"), "{err}");
    }

    #[test]
    fn a_metadata_version_is_never_lowered() {
        let err = target("4.3.1", Some("4.1-IV1"), Some(mv("4.3-IV0"))).unwrap_err();
        assert_eq!(err.reason(), "MetadataVersionDowngradeRefused");
        // A cluster raised by hand past the version's default stays where it is.
        assert_eq!(
            target("4.3.1", None, Some(mv("4.3-IV0")))
                .unwrap()
                .metadata
                .name,
            "4.3-IV0"
        );
    }

    #[test]
    fn a_metadata_version_must_exist_and_the_version_must_run_it() {
        let err = target("4.1.2", Some("4.1-IV7"), None).unwrap_err();
        assert_eq!(err.reason(), "UnsupportedMetadataVersion");
        let err = target("4.1.2", Some("4.3-IV0"), None).unwrap_err();
        assert_eq!(err.reason(), "UnsupportedMetadataVersion");
        assert!(err.to_string().contains("at most 4.1-IV1"), "{err}");
    }
}
