//! `kstretch-agent recover-quorum`: makes a stopped controller the only voter of its dynamic
//! quorum by writing into its metadata log what `kstretch_core::kraft::recovery` plans. Run on
//! the controller's volume while its Kafka is down, once the other voters are lost for good.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::{Seek as _, Write as _};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use kstretch_core::kraft::parse_uuid_text;
use kstretch_core::kraft::recovery::{self, MetadataLog, Recovery, Segment, Snapshot};

const PARTITION_DIR: &str = "__cluster_metadata-0";
const QUORUM_STATE: &str = "quorum-state";

/// The first argument that runs this instead of the agent.
pub const COMMAND: &str = "recover-quorum";

/// Makes a stopped KRaft controller the only voter of its dynamic quorum, for a quorum whose
/// other voters are lost for good. Whatever only they had written is lost.
#[derive(clap::Parser, Debug)]
#[command(name = "kstretch-agent recover-quorum", version)]
pub struct RecoverArgs {
    /// The controller's metadata log directory (its `metadata.log.dir`, else its first
    /// `log.dirs` entry): the one with `meta.properties` and `__cluster_metadata-0`.
    #[arg(long)]
    metadata_dir: PathBuf,
    /// The controller's node ID; the directory must be this node's (a guard against the wrong
    /// volume).
    #[arg(long)]
    node_id: i32,
    /// Print what would be written and change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Also write the line printed to this file (in a pod: `/dev/termination-log`, which
    /// Kubernetes reports in the container's status).
    #[arg(long)]
    termination_log: Option<PathBuf>,
}

/// Parses `args` (the command's name first) and runs the recovery.
pub fn main(args: impl IntoIterator<Item = std::ffi::OsString>) -> anyhow::Result<()> {
    run(&<RecoverArgs as clap::Parser>::parse_from(args))
}

/// Runs the recovery and prints one line saying what it did.
fn run(args: &RecoverArgs) -> anyhow::Result<()> {
    let meta = properties(&args.metadata_dir.join("meta.properties"))?;
    let node_id: i32 = meta
        .get("node.id")
        .and_then(|v| v.parse().ok())
        .context("meta.properties has no node.id")?;
    if node_id != args.node_id {
        bail!(
            "{} belongs to node {node_id}, not node {}",
            args.metadata_dir.display(),
            args.node_id
        );
    }
    let directory_id = meta
        .get("directory.id")
        .and_then(|v| parse_uuid_text(v))
        .context("meta.properties has no directory.id")?;
    let dir = args.metadata_dir.join(PARTITION_DIR);
    let files = LogFiles::read(&dir)?;
    let election = read_optional(&dir.join(QUORUM_STATE))?;
    let election: Option<serde_json::Value> = election
        .map(|t| serde_json::from_str(&t))
        .transpose()
        .context("quorum-state is not JSON")?;
    let log = MetadataLog {
        node_id,
        directory_id,
        snapshot: files
            .snapshot
            .as_ref()
            .map(|(end_offset, epoch, bytes)| Snapshot {
                end_offset: *end_offset,
                epoch: *epoch,
                bytes,
            }),
        segments: files
            .segments
            .iter()
            .map(|(base_offset, bytes)| Segment {
                base_offset: *base_offset,
                bytes,
            })
            .collect(),
        election_epoch: election
            .as_ref()
            .and_then(|e| e.get("leaderEpoch")?.as_i64())
            .and_then(|e| i32::try_from(e).ok()),
    };
    let summary = match recovery::plan(&log, now_ms())? {
        Some(plan) => {
            if !args.dry_run {
                append(&dir, &plan)?;
            }
            serde_json::json!({
                "nodeId": node_id,
                "votersBefore": plan.voters_before,
                "voters": [node_id],
                "logEndOffset": plan.offset,
                "lastEpoch": plan.last_epoch,
                "epoch": plan.epoch,
                "dryRun": args.dry_run,
            })
        }
        // Recovered before (a pod that ran the tool was started again): nothing to write.
        None => serde_json::json!({
            "nodeId": node_id,
            "voters": [node_id],
            "alreadyOnlyVoter": true,
            "dryRun": args.dry_run,
        }),
    };
    println!("{summary}");
    if let Some(path) = &args.termination_log {
        fs::write(path, summary.to_string())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// The snapshot and segments of a metadata log directory.
struct LogFiles {
    /// The latest complete snapshot: end offset, epoch, bytes.
    snapshot: Option<(i64, i32, Vec<u8>)>,
    segments: Vec<(i64, Vec<u8>)>,
}

impl LogFiles {
    fn read(dir: &Path) -> anyhow::Result<LogFiles> {
        let mut snapshots = Vec::new();
        let mut segments = Vec::new();
        for entry in fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if let Some(stem) = name.strip_suffix(".checkpoint")
                && let Some((offset, epoch)) = stem.split_once('-')
                && let (Ok(offset), Ok(epoch)) = (offset.parse::<i64>(), epoch.parse::<i32>())
            {
                snapshots.push((offset, epoch));
            } else if let Some(stem) = name.strip_suffix(".log")
                && let Ok(base) = stem.parse::<i64>()
            {
                segments.push(base);
            }
        }
        let read = |name: String| {
            let path = dir.join(name);
            fs::read(&path).with_context(|| format!("cannot read {}", path.display()))
        };
        let snapshot = match snapshots.into_iter().max() {
            Some((offset, epoch)) => Some((
                offset,
                epoch,
                read(format!("{offset:020}-{epoch:010}.checkpoint"))?,
            )),
            None => None,
        };
        segments.sort_unstable();
        let segments = segments
            .into_iter()
            .map(|base| Ok((base, read(format!("{base:020}.log"))?)))
            .collect::<anyhow::Result<_>>()?;
        Ok(LogFiles { snapshot, segments })
    }
}

/// Appends the planned batch to the last segment, cut first to its whole batches (Kafka would
/// drop a torn tail on start, and the batch after it). Nothing else needs writing: Kafka
/// recovers the whole metadata log on every start, rebuilding the segment's indexes and the
/// leader-epoch cache from the batches, and starts in the batch's epoch, above its election
/// state's.
fn append(dir: &Path, plan: &Recovery) -> anyhow::Result<()> {
    let segment = dir.join(format!("{:020}.log", plan.segment_base_offset));
    let mut file = OpenOptions::new()
        .write(true)
        .open(&segment)
        .with_context(|| format!("cannot open {}", segment.display()))?;
    file.set_len(plan.valid_len as u64)?;
    file.seek(std::io::SeekFrom::End(0))?;
    file.write_all(&plan.batch)?;
    file.sync_all()
        .with_context(|| format!("cannot write {}", segment.display()))
}

fn read_optional(path: &Path) -> anyhow::Result<Option<String>> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// A Java properties file of plain `key=value` lines, as `meta.properties` is written.
fn properties(path: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    let text =
        fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
