//! Rebuilding a dynamic quorum that lost the majority of its voters for good, from one
//! surviving controller: what to write into that controller's stopped metadata log so that it
//! starts as the only voter. Apache Kafka has no tool for it (a voter set changes one voter at a
//! time, through a leader that a minority cannot elect).
//!
//! The survivor's log gets one more control batch, a `VotersRecord` naming only itself, in an
//! epoch above every epoch the log or the node's election state has seen: no leader ever wrote
//! in that epoch, so no other replica holds a different batch at that offset and epoch, and a
//! replica with a longer log diverges from it at an epoch boundary, which Raft's fetch resolves
//! by truncation. KRaft takes the last `VotersRecord` of the log as the voter set, committed or
//! not, so the node starts as a quorum of one and elects itself. What only the lost voters had
//! written is gone; the survivor's own uncommitted tail becomes committed.
//!
//! [`survivor`] decides whether a quorum may be rebuilt at all, and from which controller: only
//! when the voters lost for good (those in forgotten member clusters) are the majority.

use std::collections::{BTreeMap, BTreeSet};

use thiserror::Error;

use super::metadata_log::{self, LogFormatError, VotersRecord, read_batches};

/// Why a metadata log cannot be recovered as asked.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum RecoveryError {
    #[error(
        "the metadata log records no voter set: the quorum is static (controller.quorum.voters), \
         which a recovery does not rewrite"
    )]
    StaticQuorum,
    #[error(
        "node {node} (directory {directory}) is not a voter of the last voter set the log \
         records (voters {voters:?}): recover from a controller that was a voter"
    )]
    NotAVoter {
        node: i32,
        directory: String,
        voters: Vec<i32>,
    },
    #[error("the metadata log has no segment")]
    NoSegment,
    #[error("the metadata log cannot be read: {0}")]
    Format(#[from] LogFormatError),
}

/// Why a quorum is not rebuilt from a survivor (or not from the one named).
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SurvivorError {
    #[error("the quorum's voters are not known (it is static, or central never saw it formed)")]
    NoVoters,
    #[error(
        "the voters outside forgotten clusters ({survivors:?} of {voters:?}) are a majority, so \
         none is lost for good: a quorum is rebuilt only when most of its voters ran in \
         forgotten clusters (`kstretch forget <cluster>` first); a majority that runs elects a \
         leader by itself, and nothing needs recovering"
    )]
    MajoritySurvives {
        survivors: Vec<i32>,
        voters: Vec<i32>,
    },
    #[error(
        "every voter ({voters:?}) ran in a forgotten cluster: no controller survives to rebuild \
         the quorum from"
    )]
    NoSurvivor { voters: Vec<i32> },
    #[error(
        "several voters survive ({survivors:?}): name the most up-to-date one (the highest epoch, \
         then end offset, that `kstretch-agent recover-quorum --dry-run` prints on each)"
    )]
    SeveralSurvivors { survivors: Vec<i32> },
    #[error("node {node} is not a surviving voter; the surviving voters are {survivors:?}")]
    NotASurvivor { node: i32, survivors: Vec<i32> },
}

impl SurvivorError {
    /// The stable reason of the condition that reports it.
    pub fn reason(&self) -> &'static str {
        match self {
            SurvivorError::NoVoters => "QuorumVotersUnknown",
            SurvivorError::MajoritySurvives { .. } => "QuorumMajoritySurvives",
            SurvivorError::NoSurvivor { .. } => "NoSurvivingVoter",
            SurvivorError::SeveralSurvivors { .. } => "SeveralSurvivingVoters",
            SurvivorError::NotASurvivor { .. } => "NotASurvivingVoter",
        }
    }
}

/// The voter to rebuild the quorum from, given where each voter ran (`None`: no pool places
/// it, so it is not known to be lost), the clusters forgotten for good and the one `named` by
/// the user. A quorum is rebuilt only when the voters outside forgotten clusters are fewer than
/// a majority: a voter that is merely unreachable may come back, and a majority of such voters
/// elects a leader by itself.
pub fn survivor(
    voters: &BTreeMap<i32, Option<String>>,
    forgotten: &BTreeSet<String>,
    named: Option<i32>,
) -> Result<i32, SurvivorError> {
    if voters.is_empty() {
        return Err(SurvivorError::NoVoters);
    }
    let all: Vec<i32> = voters.keys().copied().collect();
    let survivors: Vec<i32> = voters
        .iter()
        .filter(|(_, cluster)| cluster.as_ref().is_none_or(|c| !forgotten.contains(c)))
        .map(|(id, _)| *id)
        .collect();
    if survivors.len() >= crate::quorum::majority(voters.len()) {
        return Err(SurvivorError::MajoritySurvives {
            survivors,
            voters: all,
        });
    }
    match (named, survivors.as_slice()) {
        (_, []) => Err(SurvivorError::NoSurvivor { voters: all }),
        (Some(node), _) if survivors.contains(&node) => Ok(node),
        (Some(node), _) => Err(SurvivorError::NotASurvivor { node, survivors }),
        (None, [only]) => Ok(*only),
        (None, _) => Err(SurvivorError::SeveralSurvivors { survivors }),
    }
}

/// Whether the voters outside `forgotten` clusters are fewer than a majority: the quorum
/// cannot elect a leader until it is rebuilt.
pub fn majority_lost(voters: &BTreeMap<i32, Option<String>>, forgotten: &BTreeSet<String>) -> bool {
    !matches!(
        survivor(voters, forgotten, None),
        Err(SurvivorError::MajoritySurvives { .. } | SurvivorError::NoVoters)
    )
}

/// A snapshot of the metadata log: its ID (the offset it ends before, and its epoch) and bytes.
#[derive(Debug)]
pub struct Snapshot<'a> {
    pub end_offset: i64,
    pub epoch: i32,
    pub bytes: &'a [u8],
}

/// A segment: the offset it starts at (its file name) and bytes.
#[derive(Debug)]
pub struct Segment<'a> {
    pub base_offset: i64,
    pub bytes: &'a [u8],
}

/// What the recovering node's metadata log holds, read by the caller.
#[derive(Debug)]
pub struct MetadataLog<'a> {
    pub node_id: i32,
    /// The `directory.id` of its metadata log directory (`meta.properties`).
    pub directory_id: u128,
    /// The latest complete snapshot, if any.
    pub snapshot: Option<Snapshot<'a>>,
    /// Every segment, by base offset.
    pub segments: Vec<Segment<'a>>,
    /// The epoch of the node's election state (`quorum-state`), if it has one.
    pub election_epoch: Option<i32>,
}

/// What to write, and what it means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// The voter set before: the IDs the log last recorded.
    pub voters_before: Vec<i32>,
    /// The epoch of the new batch. Above the election state's, so Kafka starts the node
    /// unattached in it (and, a sole voter, leader of the next); its leader-epoch cache gains
    /// the epoch when its log recovery reads the batch.
    pub epoch: i32,
    /// The offset of the new batch: the log's end before it.
    pub offset: i64,
    /// The epoch of the log's last batch (or snapshot): with `offset`, how up to date the
    /// node is, to compare survivors by.
    pub last_epoch: i32,
    /// The segment to cut to `valid_len` bytes (a torn tail) and append `batch` to.
    pub segment_base_offset: i64,
    pub valid_len: usize,
    pub batch: Vec<u8>,
}

/// Plans the recovery of `log` so that its node is the only voter; `None` when the last voter
/// set already names it alone (recovered before: running the tool again changes nothing).
pub fn plan(log: &MetadataLog<'_>, now_ms: i64) -> Result<Option<Recovery>, RecoveryError> {
    let last = log.segments.last().ok_or(RecoveryError::NoSegment)?;
    let snapshot_end = log.snapshot.as_ref().map_or(0, |s| s.end_offset);
    let mut voters = match &log.snapshot {
        Some(s) => metadata_log::last_voters(&read_batches(s.bytes).batches, 0)?,
        None => None,
    };
    let mut end = (snapshot_end, log.snapshot.as_ref().map_or(0, |s| s.epoch));
    let mut valid_len = 0;
    for segment in &log.segments {
        let read = read_batches(segment.bytes);
        if let Some(found) = metadata_log::last_voters(&read.batches, snapshot_end)? {
            voters = Some(found);
        }
        if let Some(b) = read.batches.last().filter(|b| b.last_offset + 1 >= end.0) {
            end = (b.last_offset + 1, b.epoch);
        }
        valid_len = read.valid_len;
    }
    let (_, voters) = voters.ok_or(RecoveryError::StaticQuorum)?;
    let voters_before: Vec<i32> = voters.voters.iter().map(|v| v.id).collect();
    let me = voters
        .voters
        .iter()
        // A voter recorded without a directory ID (0) is any directory of that node.
        .find(|v| v.id == log.node_id && [0, log.directory_id].contains(&v.directory_id))
        .cloned()
        .ok_or_else(|| RecoveryError::NotAVoter {
            node: log.node_id,
            directory: super::uuid_text(log.directory_id),
            voters: voters_before.clone(),
        })?;
    if voters.voters.len() == 1 {
        return Ok(None);
    }

    let (offset, log_epoch) = (end.0.max(last.base_offset), end.1);
    let epoch = log_epoch.max(log.election_epoch.unwrap_or(0)) + 1;
    let batch = metadata_log::voters_batch(
        offset,
        epoch,
        now_ms,
        &VotersRecord {
            version: voters.version,
            voters: vec![me],
        },
    );
    Ok(Some(Recovery {
        voters_before,
        epoch,
        offset,
        last_epoch: log_epoch,
        segment_base_offset: last.base_offset,
        valid_len,
        batch,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kraft::metadata_log::{Voter, voters_batch};

    fn placed(voters: &[(i32, Option<&str>)]) -> BTreeMap<i32, Option<String>> {
        voters
            .iter()
            .map(|(id, c)| (*id, c.map(str::to_owned)))
            .collect()
    }

    #[test]
    fn a_quorum_is_rebuilt_only_from_a_survivor_of_a_majority_lost_in_forgotten_clusters() {
        let beta: BTreeSet<String> = ["beta".to_owned()].into();
        let two_in_beta = placed(&[(0, Some("alpha")), (1, Some("beta")), (2, Some("beta"))]);
        assert_eq!(survivor(&two_in_beta, &beta, None), Ok(0));
        assert_eq!(survivor(&two_in_beta, &beta, Some(0)), Ok(0));
        assert!(majority_lost(&two_in_beta, &beta));
        let e = survivor(&two_in_beta, &beta, Some(1)).unwrap_err();
        assert_eq!(
            e,
            SurvivorError::NotASurvivor {
                node: 1,
                survivors: vec![0]
            }
        );
        // Not forgotten: beta may come back, so nothing is lost for good.
        let none = BTreeSet::new();
        assert_eq!(
            survivor(&two_in_beta, &none, None).unwrap_err().reason(),
            "QuorumMajoritySurvives"
        );
        assert!(!majority_lost(&two_in_beta, &none));
        // The minority lost: the quorum elects a leader without help.
        let one_in_beta = placed(&[(0, Some("alpha")), (1, Some("alpha")), (2, Some("beta"))]);
        assert!(!majority_lost(&one_in_beta, &beta));
        // A voter no pool places is not known to be lost: it counts as surviving.
        let unplaced = placed(&[
            (0, Some("alpha")),
            (1, None),
            (2, Some("beta")),
            (3, Some("beta")),
        ]);
        let e = survivor(&unplaced, &beta, None).unwrap_err();
        assert_eq!(
            e,
            SurvivorError::SeveralSurvivors {
                survivors: vec![0, 1]
            }
        );
        assert!(e.to_string().contains("--dry-run"), "{e}");
        assert_eq!(survivor(&unplaced, &beta, Some(1)), Ok(1));
        // Everything lost, or nothing known.
        let all_in_beta = placed(&[(1, Some("beta")), (2, Some("beta"))]);
        assert_eq!(
            survivor(&all_in_beta, &beta, None).unwrap_err().reason(),
            "NoSurvivingVoter"
        );
        assert_eq!(
            survivor(&BTreeMap::new(), &beta, None),
            Err(SurvivorError::NoVoters)
        );
    }

    fn voter(id: i32) -> Voter {
        Voter {
            id,
            directory_id: 500 + id as u128,
            endpoints: vec![("CONTROLPLANE-9090".into(), format!("c{id}"), 9090)],
            kraft_version: (0, 1),
        }
    }

    fn record(ids: &[i32]) -> VotersRecord {
        VotersRecord {
            version: 0,
            voters: ids.iter().map(|i| voter(*i)).collect(),
        }
    }

    fn log<'a>(segments: Vec<Segment<'a>>, snapshot: Option<Snapshot<'a>>) -> MetadataLog<'a> {
        MetadataLog {
            node_id: 1,
            directory_id: 501,
            snapshot,
            segments,
            election_epoch: Some(9),
        }
    }

    #[test]
    fn the_survivor_becomes_the_only_voter_in_a_fresh_epoch_at_the_end_of_its_log() {
        let mut seg = voters_batch(0, 3, 0, &record(&[0, 1, 2]));
        seg.extend(voters_batch(1, 3, 0, &record(&[0, 1, 2, 3])));
        seg.extend(voters_batch(2, 5, 0, &record(&[0, 1, 2])));
        let whole = seg.len();
        seg.extend(&[1, 2, 3]); // a torn tail
        let plan = plan(
            &log(
                vec![Segment {
                    base_offset: 0,
                    bytes: &seg,
                }],
                None,
            ),
            1,
        )
        .unwrap()
        .unwrap();
        assert_eq!(plan.voters_before, vec![0, 1, 2]);
        assert_eq!((plan.offset, plan.last_epoch, plan.epoch), (3, 5, 10));
        assert_eq!((plan.segment_base_offset, plan.valid_len), (0, whole));
        let written = read_batches(&plan.batch);
        assert_eq!(
            metadata_log::last_voters(&written.batches, 0).unwrap(),
            Some((3, record(&[1])))
        );
        assert_eq!(written.batches[0].epoch, 10);

        // Run again on what it wrote: the node is the only voter already, nothing to write.
        let mut recovered = seg[..whole].to_vec();
        recovered.extend(&plan.batch);
        let again = super::plan(
            &log(
                vec![Segment {
                    base_offset: 0,
                    bytes: &recovered,
                }],
                None,
            ),
            2,
        );
        assert_eq!(again, Ok(None));
    }

    #[test]
    fn the_voter_set_comes_from_the_snapshot_unless_the_log_after_it_changed_it() {
        let snap = voters_batch(0, 4, 0, &record(&[0, 1, 2]));
        let snapshot = || {
            Some(Snapshot {
                end_offset: 20,
                epoch: 4,
                bytes: &snap,
            })
        };
        // Superseded by the snapshot: before its end.
        let old = voters_batch(0, 3, 0, &record(&[7, 8, 9]));
        let from_snapshot = plan(
            &log(
                vec![
                    Segment {
                        base_offset: 0,
                        bytes: &old,
                    },
                    Segment {
                        base_offset: 20,
                        bytes: &[],
                    },
                ],
                snapshot(),
            ),
            0,
        )
        .unwrap()
        .unwrap();
        assert_eq!(from_snapshot.voters_before, vec![0, 1, 2]);
        assert_eq!(
            (from_snapshot.offset, from_snapshot.segment_base_offset),
            (20, 20)
        );

        let after = voters_batch(20, 4, 0, &record(&[0, 1]));
        let from_log = plan(
            &log(
                vec![Segment {
                    base_offset: 20,
                    bytes: &after,
                }],
                snapshot(),
            ),
            0,
        )
        .unwrap()
        .unwrap();
        assert_eq!(from_log.voters_before, vec![0, 1]);
        assert_eq!(from_log.offset, 21);
    }

    #[test]
    fn a_static_quorum_or_a_node_that_is_no_voter_is_refused() {
        let seg = voters_batch(0, 1, 0, &record(&[0, 2]));
        assert!(matches!(
            plan(
                &log(
                    vec![Segment {
                        base_offset: 0,
                        bytes: &seg
                    }],
                    None
                ),
                0
            ),
            Err(RecoveryError::NotAVoter { node: 1, .. })
        ));
        let mut other_dir = log(
            vec![Segment {
                base_offset: 0,
                bytes: &seg,
            }],
            None,
        );
        other_dir.node_id = 0;
        other_dir.directory_id = 1;
        assert!(matches!(
            plan(&other_dir, 0),
            Err(RecoveryError::NotAVoter { node: 0, .. })
        ));
        assert_eq!(
            plan(
                &log(
                    vec![Segment {
                        base_offset: 0,
                        bytes: &[]
                    }],
                    None
                ),
                0
            ),
            Err(RecoveryError::StaticQuorum)
        );
        assert_eq!(plan(&log(vec![], None), 0), Err(RecoveryError::NoSegment));
    }
}
