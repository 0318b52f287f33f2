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

/// Plans the recovery of `log` so that its node is the only voter.
pub fn plan(log: &MetadataLog<'_>, now_ms: i64) -> Result<Recovery, RecoveryError> {
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
    Ok(Recovery {
        voters_before,
        epoch,
        offset,
        last_epoch: log_epoch,
        segment_base_offset: last.base_offset,
        valid_len,
        batch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kraft::metadata_log::{Voter, voters_batch};

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
