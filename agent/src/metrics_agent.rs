//! `kstretch-agent install-metrics-agent`: copies the jars the agent's image carries for Kafka's
//! metrics (the JMX Prometheus exporter, Strimzi's metrics reporter and its dependencies) into a
//! directory a Kafka container mounts. Run
//! as an init container of the Kafka pods, whose own image lacks them; the agent's image has
//! no shell, so the copy is a command of its own.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

pub const COMMAND: &str = "install-metrics-agent";

/// Where the agent's image keeps the jars (images/Dockerfile, scripts/build-images.sh).
pub const IMAGE_DIR: &str = "/opt/kstretch/metrics";

/// Copies the metrics Java agents into a directory of the Kafka pod.
#[derive(clap::Parser, Debug)]
#[command(name = "kstretch-agent install-metrics-agent", version)]
pub struct InstallArgs {
    /// Where the jars are (the image's own directory unless told otherwise).
    #[arg(long, default_value = IMAGE_DIR)]
    from: PathBuf,
    /// The directory to copy them into (an `emptyDir` the Kafka container mounts).
    #[arg(long)]
    to: PathBuf,
}

pub fn main(args: impl IntoIterator<Item = std::ffi::OsString>) -> anyhow::Result<()> {
    let args = <InstallArgs as clap::Parser>::parse_from(args);
    for copied in install(&args.from, &args.to)? {
        println!("installed {}", copied.display());
    }
    Ok(())
}

/// Copies every `.jar` of `from` into `to`, and those of each directory of `from` into a
/// directory of the same name (the reporter's jars stay apart from the exporter's, which
/// bundles other versions of the same classes); fails when there is none, so a pod never starts
/// a Java agent or reporter that is not there.
fn install(from: &Path, to: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut copied = copy_jars(from, to)?;
    let entries =
        std::fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))?;
    for entry in entries {
        let path = entry?.path();
        if let (true, Some(name)) = (path.is_dir(), path.file_name()) {
            let target = to.join(name);
            std::fs::create_dir_all(&target)
                .with_context(|| format!("cannot create {}", target.display()))?;
            copied.extend(copy_jars(&path, &target)?);
        }
    }
    if copied.is_empty() {
        bail!("{} has no jar to install", from.display());
    }
    copied.sort();
    Ok(copied)
}

/// Copies the `.jar` files of `from` (not of its directories) into `to`.
fn copy_jars(from: &Path, to: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let entries =
        std::fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))?;
    let mut copied = Vec::new();
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "jar") || !path.is_file() {
            continue;
        }
        let Some(name) = path.file_name() else {
            continue;
        };
        let target = to.join(name);
        std::fs::copy(&path, &target)
            .with_context(|| format!("cannot copy {} to {}", path.display(), target.display()))?;
        copied.push(target);
    }
    Ok(copied)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn jars_are_copied_and_an_empty_source_is_an_error() {
        let dir =
            std::env::temp_dir().join(format!("kstretch-metrics-agent-{}", std::process::id()));
        let (from, to) = (dir.join("from"), dir.join("to"));
        std::fs::create_dir_all(&from).unwrap();
        std::fs::create_dir_all(&to).unwrap();
        let err = install(&from, &to).unwrap_err().to_string();
        assert!(err.ends_with("has no jar to install"), "{err}");
        std::fs::write(from.join("agent.jar"), b"jar").unwrap();
        std::fs::write(from.join("README"), b"not a jar").unwrap();
        assert_eq!(install(&from, &to).unwrap(), [to.join("agent.jar")]);
        assert_eq!(std::fs::read(to.join("agent.jar")).unwrap(), b"jar");
        assert!(!to.join("README").exists());
        // A directory's jars keep their directory.
        std::fs::create_dir_all(from.join("reporter")).unwrap();
        std::fs::write(from.join("reporter/reporter.jar"), b"r").unwrap();
        assert_eq!(
            install(&from, &to).unwrap(),
            [to.join("agent.jar"), to.join("reporter/reporter.jar")]
        );
        assert_eq!(
            std::fs::read(to.join("reporter/reporter.jar")).unwrap(),
            b"r"
        );
        let err = install(&dir.join("missing"), &to).unwrap_err().to_string();
        assert!(err.starts_with("cannot read"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
