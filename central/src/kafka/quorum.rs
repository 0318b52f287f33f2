//! What the `Kafka` status shows of the KRaft controller quorum: static or dynamic, its leader
//! and its voters with their metadata directories, as Kafka reports them (DescribeQuorum, and
//! the finalized `kraft.version` from ApiVersions).

use kstretch_api::{QuorumStatus, QuorumVoterStatus};
use kstretch_core::kraft;
use kstretch_kadmin::{AdminClient, Error, KRAFT_VERSION, QuorumInfo};

/// `kraft.version` of a dynamic quorum (KIP-853).
const DYNAMIC: i16 = 1;

/// Reads the quorum from Kafka.
pub async fn observe(admin: &AdminClient) -> Result<QuorumStatus, Error> {
    let features = admin.finalized_features().await?;
    let level = features.get(KRAFT_VERSION).copied().unwrap_or_default();
    let info = admin.describe_quorum().await?;
    Ok(status_of(&info, level))
}

/// The status of a quorum whose `kraft.version` is `level` (a missing feature reads as 0).
fn status_of(info: &QuorumInfo, level: i16) -> QuorumStatus {
    let mut voters: Vec<QuorumVoterStatus> = info
        .voters
        .iter()
        .map(|v| QuorumVoterStatus {
            id: v.replica_id,
            // A static quorum does not know its voters' directories: Kafka reports zeros.
            directory_id: Some(v.directory_id.as_u128())
                .filter(|d| *d != 0)
                .map(kraft::uuid_text),
        })
        .collect();
    voters.sort_by_key(|v| v.id);
    QuorumStatus {
        mode: Some(
            if level >= DYNAMIC {
                "dynamic"
            } else {
                "static"
            }
            .to_owned(),
        ),
        leader_id: Some(info.leader_id).filter(|id| *id >= 0),
        voters,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kstretch_kadmin::{ReplicaState, Uuid};

    fn replica(id: i32, directory: u128) -> ReplicaState {
        ReplicaState {
            replica_id: id,
            directory_id: Uuid::from_u128(directory),
            log_end_offset: 10,
            last_fetch_timestamp: None,
            last_caught_up_timestamp: None,
        }
    }

    fn info(voters: Vec<ReplicaState>, leader: i32) -> QuorumInfo {
        QuorumInfo {
            leader_id: leader,
            leader_epoch: 3,
            high_watermark: 10,
            voters,
            observers: vec![replica(9, 5)],
            nodes: Vec::new(),
        }
    }

    #[test]
    fn a_static_quorum_shows_voters_without_directories() {
        let status = status_of(&info(vec![replica(2, 0), replica(0, 0)], 0), 0);
        assert_eq!(status.mode.as_deref(), Some("static"));
        assert_eq!(status.leader_id, Some(0));
        let ids: Vec<i32> = status.voters.iter().map(|v| v.id).collect();
        assert_eq!(ids, [0, 2]);
        assert!(status.voters.iter().all(|v| v.directory_id.is_none()));
    }

    #[test]
    fn a_dynamic_quorum_shows_each_voters_directory_in_kafkas_form() {
        let status = status_of(&info(vec![replica(1, 1)], -1), 1);
        assert_eq!(status.mode.as_deref(), Some("dynamic"));
        // No leader during an election.
        assert_eq!(status.leader_id, None);
        assert_eq!(
            status.voters[0].directory_id.as_deref(),
            Some("AAAAAAAAAAAAAAAAAAAAAQ")
        );
    }
}
