//! The KRaft controller quorum of one cluster: whether it is static or dynamic (KIP-853), the
//! voters a new dynamic quorum starts with, what the `Kafka` status shows of it (DescribeQuorum
//! and the finalized `kraft.version`), and the next voter change
//! [`kstretch_core::quorum::next_change`] asks for: planned purely, then carried out.

use std::collections::{BTreeMap, BTreeSet};

use kstretch_api::{Kafka, KafkaStatus, QuorumStatus, QuorumVoterStatus, names};
use kstretch_core::kraft::{
    self, CONTROLPLANE_LISTENER, CONTROLPLANE_PORT, Endpoint, KafkaCluster, QuorumMode,
};
use kstretch_core::quorum::{Change, Member, Quorum, next_change};
use kstretch_kadmin::{AdminClient, Error, KRAFT_VERSION, QuorumInfo, ReplicaState, Uuid};
use kube::ResourceExt;

/// `kraft.version` of a dynamic quorum (KIP-853).
const DYNAMIC: i16 = 1;
const DYNAMIC_MODE: &str = "dynamic";
const STATIC_MODE: &str = "static";
/// A voter that fetched, or an observer that caught up with the leader, this recently counts
/// as live. Controllers fetch every few hundred milliseconds.
const LIVE_WITHIN_MS: i64 = 30_000;
/// An observer must also have fetched this recently: Kafka lists a stopped node as an observer
/// for minutes, caught up as of its last fetch, and a new node reusing its ID must not be
/// mistaken for it (adding the dead directory as a voter).
const FETCHING_WITHIN_MS: i64 = 5_000;

/// The quorum the `Kafka` asks for with [`names::CONTROLLER_QUORUM`]; `Err` names a wrong value.
pub fn wanted(kafka: &Kafka) -> Result<QuorumMode, String> {
    match kafka
        .annotations()
        .get(names::CONTROLLER_QUORUM)
        .map(String::as_str)
    {
        None | Some(DYNAMIC_MODE) => Ok(QuorumMode::Dynamic),
        Some(STATIC_MODE) => Ok(QuorumMode::Static),
        Some(other) => Err(format!(
            "annotation {}={other:?} on Kafka {} is not one of static, dynamic",
            names::CONTROLLER_QUORUM,
            kafka.name_any()
        )),
    }
}

/// Whether Kafka `version` can turn a static quorum dynamic (`kraft.version` 0 → 1): 4.1 and
/// later.
pub fn can_migrate(version: &str) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= (4, 1),
        _ => false,
    }
}

/// Whether a static quorum whose finalized features are `features` is turned dynamic now:
/// `kraft.version` is raised to 1 unless it already is (Kafka refuses until every voter has
/// reported its metadata directory, which 4.1 nodes do by themselves).
pub fn migration_due(features: &BTreeMap<String, i16>) -> bool {
    features.get(KRAFT_VERSION).copied().unwrap_or_default() < DYNAMIC
}

/// Turns a static quorum dynamic (see [`migration_due`]).
pub async fn migrate(admin: &AdminClient) -> Result<(), Error> {
    admin.upgrade_feature(KRAFT_VERSION, DYNAMIC).await
}

/// Records in `status` that the quorum is dynamic now.
pub fn record_dynamic(status: &mut KafkaStatus) {
    status.quorum.get_or_insert_with(QuorumStatus::default).mode = Some(DYNAMIC_MODE.to_owned());
}

/// How the quorum of a cluster with status `status` is kept: dynamic once recorded so (every
/// cluster kstretch creates now), static otherwise (clusters created before).
pub fn mode(status: &KafkaStatus) -> QuorumMode {
    match status.quorum.as_ref().and_then(|q| q.mode.as_deref()) {
        Some(DYNAMIC_MODE) => QuorumMode::Dynamic,
        _ => QuorumMode::Static,
    }
}

/// Records that a new cluster, none of whose nodes has formatted yet, gets a dynamic quorum
/// whose first voters are `controllers`, each with a metadata directory ID from
/// `new_directory`. The caller stores `status` before any node can format.
pub fn start_dynamic(
    status: &mut KafkaStatus,
    controllers: &BTreeSet<i32>,
    mut new_directory: impl FnMut() -> u128,
) {
    status.quorum = Some(QuorumStatus {
        mode: Some(DYNAMIC_MODE.to_owned()),
        leader_id: None,
        voters: controllers
            .iter()
            .map(|id| QuorumVoterStatus {
                id: *id,
                directory_id: Some(kraft::uuid_text(new_directory())),
            })
            .collect(),
        unsettled: None,
    });
}

/// Records that the pods of a cluster adopted from what runs find a dynamic quorum. Its voters
/// are Kafka's to tell: none is recorded, so nobody formats with an initial voter set.
pub fn adopt_dynamic(status: &mut KafkaStatus) {
    status.quorum = Some(QuorumStatus {
        mode: Some(DYNAMIC_MODE.to_owned()),
        ..QuorumStatus::default()
    });
}

/// Whether the quorum has formed: Kafka has reported it (with a leader), or the cluster has
/// been ready once.
pub fn formed(status: &KafkaStatus) -> bool {
    status
        .quorum
        .as_ref()
        .is_some_and(|q| q.leader_id.is_some())
        || status.operator_last_successful_version.is_some()
}

/// The voters a dynamic quorum that has not formed yet starts with (node ID → metadata
/// directory ID), as [`start_dynamic`] recorded them; empty for a static quorum, one that has
/// formed, or one adopted from what runs.
pub fn initial_voters(status: &KafkaStatus) -> BTreeMap<i32, u128> {
    if mode(status) != QuorumMode::Dynamic || formed(status) {
        return BTreeMap::new();
    }
    status
        .quorum
        .iter()
        .flat_map(|q| q.voters.iter())
        .filter_map(|v| Some((v.id, kraft::parse_uuid_text(v.directory_id.as_deref()?)?)))
        .collect()
}

/// Reads the quorum from Kafka.
pub async fn observe(admin: &AdminClient) -> Result<QuorumStatus, Error> {
    let features = admin.finalized_features().await?;
    let info = admin.describe_quorum().await?;
    Ok(observed(&info, &features))
}

/// The quorum's status from what Kafka said of it and of its finalized features.
pub fn observed(info: &QuorumInfo, features: &BTreeMap<String, i16>) -> QuorumStatus {
    status_of(
        info,
        features.get(KRAFT_VERSION).copied().unwrap_or_default(),
    )
}

/// The next step of a dynamic quorum toward its desired voters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Planned {
    /// The voters are the desired controllers.
    Settled,
    /// A change is due but waits; why.
    Waiting(String),
    /// This controller joins the voters, reached at `endpoint`.
    Add { member: Member, endpoint: Endpoint },
    /// This voter leaves.
    Remove(Member),
}

/// The voters of the quorum Kafka described as `info` that do not fetch now (pure), the
/// leader excepted (see [`kstretch_core::quorum::silent_voters`]).
pub fn silent_voters(info: &QuorumInfo, now_ms: i64) -> Vec<i32> {
    kstretch_core::quorum::silent_voters(&quorum_of(info, now_ms))
}

/// The one voter change [`next_change`] allows for `cluster` whose quorum Kafka described as
/// `info`, toward the controllers `desired` (pure). `now_ms`: central's clock, against which
/// Kafka's fetch times say who is live.
pub fn plan_change(
    info: &QuorumInfo,
    cluster: &KafkaCluster,
    desired: &BTreeSet<i32>,
    now_ms: i64,
) -> Planned {
    match next_change(desired, &quorum_of(info, now_ms)) {
        Change::Settled => Planned::Settled,
        Change::Wait(why) => Planned::Waiting(why),
        Change::Add(member) => match cluster.node(member.id).and_then(|n| {
            kraft::node_endpoint(cluster, n, CONTROLPLANE_LISTENER, CONTROLPLANE_PORT).ok()
        }) {
            Some(endpoint) => Planned::Add { member, endpoint },
            None => Planned::Waiting(format!("controller {} has no address yet", member.id)),
        },
        Change::Remove(member) => Planned::Remove(member),
    }
}

/// Carries out an [`Planned::Add`] or [`Planned::Remove`] in the cluster `cluster_id`; says
/// what changed (`None` for a step that changes nothing).
pub async fn change(
    admin: &AdminClient,
    cluster_id: &str,
    planned: &Planned,
) -> Result<Option<String>, Error> {
    Ok(match planned {
        Planned::Settled | Planned::Waiting(_) => None,
        Planned::Add { member, endpoint } => {
            let listeners = [(
                CONTROLPLANE_LISTENER.to_owned(),
                endpoint.host.clone(),
                endpoint.port,
            )];
            admin
                .add_raft_voter(
                    cluster_id,
                    member.id,
                    Uuid::from_u128(member.directory),
                    &listeners,
                )
                .await?;
            Some(format!(
                "controller {} (metadata directory {}) added to the quorum's voters",
                member.id,
                kraft::uuid_text(member.directory)
            ))
        }
        Planned::Remove(member) => {
            admin
                .remove_raft_voter(cluster_id, member.id, Uuid::from_u128(member.directory))
                .await?;
            Some(format!(
                "voter {} (metadata directory {}) removed from the quorum",
                member.id,
                kraft::uuid_text(member.directory)
            ))
        }
    })
}

/// The quorum as the planner sees it: voters that fetched recently, and observers that caught
/// up recently and fetch now, are live.
fn quorum_of(info: &QuorumInfo, now_ms: i64) -> Quorum {
    let leader = Some(info.leader_id).filter(|id| *id >= 0);
    let within = |t: Option<i64>, ms: i64| t.is_some_and(|t| t >= 0 && now_ms - t <= ms);
    let recent = |t: Option<i64>| within(t, LIVE_WITHIN_MS);
    let fetching = |r: &ReplicaState| within(r.last_fetch_timestamp, FETCHING_WITHIN_MS);
    // Against the leader's clock (it reports its own entry at the time it answers), so that a
    // few seconds between central's clock and Kafka's do not make every voter look silent;
    // central's clock still bounds it (`recent`), in case the leader reports no time.
    let leader_now = info
        .voters
        .iter()
        .chain(&info.observers)
        .filter_map(|r| r.last_fetch_timestamp)
        .max();
    let fetched_lately = |t: Option<i64>| {
        t.zip(leader_now)
            .is_some_and(|(t, now)| t >= 0 && now - t <= FETCHING_WITHIN_MS)
    };
    let member = |r: &ReplicaState, live: bool| Member {
        id: r.replica_id,
        directory: r.directory_id.as_u128(),
        live,
        fetching: live || fetching(r),
    };
    Quorum {
        leader,
        voters: info
            .voters
            .iter()
            .map(|r| {
                let is_leader = Some(r.replica_id) == leader;
                let live = is_leader
                    || recent(r.last_fetch_timestamp)
                    || recent(r.last_caught_up_timestamp);
                Member {
                    fetching: is_leader
                        || (recent(r.last_fetch_timestamp)
                            && fetched_lately(r.last_fetch_timestamp)),
                    ..member(r, live)
                }
            })
            .collect(),
        observers: info
            .observers
            .iter()
            .map(|r| member(r, recent(r.last_caught_up_timestamp) && fetching(r)))
            .collect(),
    }
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
                DYNAMIC_MODE
            } else {
                STATIC_MODE
            }
            .to_owned(),
        ),
        leader_id: Some(info.leader_id).filter(|id| *id >= 0),
        voters,
        unsettled: None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::resolve::tests::kafka;
    use super::*;

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

    fn timed(
        id: i32,
        directory: u128,
        fetched: Option<i64>,
        caught_up: Option<i64>,
    ) -> ReplicaState {
        ReplicaState {
            last_fetch_timestamp: fetched,
            last_caught_up_timestamp: caught_up,
            ..replica(id, directory)
        }
    }

    #[test]
    fn voters_that_fetch_and_observers_that_caught_up_recently_are_live() {
        let now = 1_000_000;
        let info = QuorumInfo {
            voters: vec![
                timed(0, 10, None, None),
                timed(1, 11, Some(now - 500), Some(now - 90_000)),
                timed(2, 12, Some(now - 90_000), Some(now - 90_000)),
            ],
            observers: vec![
                timed(2, 22, Some(now - 100), Some(now - 100)),
                timed(3, 23, Some(now - 100), Some(now - 60_000)),
                // Stopped 20 s ago, caught up as of then: gone, not a node to add.
                timed(4, 24, Some(now - 20_000), Some(now - 20_000)),
            ],
            ..info(Vec::new(), 0)
        };
        let q = quorum_of(&info, now);
        assert_eq!(q.leader, Some(0));
        let live = |members: &[Member]| -> Vec<(i32, bool)> {
            members.iter().map(|m| (m.id, m.live)).collect()
        };
        // The leader reports no fetch of its own; voter 2 stopped fetching.
        assert_eq!(live(&q.voters), [(0, true), (1, true), (2, false)]);
        // Observer 3 fetches but lags behind; 4 stopped fetching.
        assert_eq!(live(&q.observers), [(2, true), (3, false), (4, false)]);
        assert!(!q.observers[2].fetching);
        // Voter 2 is silent; so is voter 1 if its last fetch is seconds older than the
        // leader's time, whatever central's clock says.
        assert_eq!(silent_voters(&info, now), [2]);
        assert_eq!(silent_voters(&info, now + 10_000), [2]);
        let mut later = info.clone();
        later.voters[0].last_fetch_timestamp = Some(now + 6_000);
        assert_eq!(silent_voters(&later, now + 6_000), [1, 2]);
        assert_eq!(q.observers[0].directory, 22);
    }

    #[test]
    fn a_new_dynamic_quorum_starts_with_its_first_voters_and_none_after_it_formed() {
        let mut status = KafkaStatus::default();
        // A static quorum (a cluster from before) has none.
        assert_eq!(initial_voters(&status), BTreeMap::new());
        let mut next = 100u128;
        start_dynamic(&mut status, &BTreeSet::from([0, 1, 2]), || {
            next += 1;
            next
        });
        assert_eq!(mode(&status), QuorumMode::Dynamic);
        assert_eq!(
            initial_voters(&status),
            BTreeMap::from([(0, 101), (1, 102), (2, 103)])
        );
        // Formed: nobody formats with the voter set any more.
        status.operator_last_successful_version = Some("0.1.0".into());
        assert!(formed(&status));
        assert_eq!(initial_voters(&status), BTreeMap::new());
        // Adopted from what runs: dynamic, and no voter set to format with.
        let mut adopted = KafkaStatus::default();
        adopt_dynamic(&mut adopted);
        assert_eq!(mode(&adopted), QuorumMode::Dynamic);
        assert_eq!(initial_voters(&adopted), BTreeMap::new());
    }

    #[test]
    fn only_kafka_4_1_and_later_turn_a_static_quorum_dynamic() {
        for (version, can) in [
            ("4.1.2", true),
            ("4.2.0", true),
            ("5.0.0", true),
            ("4.0.1", false),
            ("3.9.1", false),
            ("latest", false),
        ] {
            assert_eq!(can_migrate(version), can, "{version}");
        }
    }

    #[test]
    fn the_annotation_asks_for_a_static_or_a_dynamic_quorum() {
        let with = |value: Option<&str>| {
            let annotations = match value {
                Some(v) => serde_json::json!({ names::CONTROLLER_QUORUM: v }),
                None => serde_json::json!({}),
            };
            wanted(&kafka(
                serde_json::json!({"metadata": {"annotations": annotations}}),
            ))
        };
        assert_eq!(with(None), Ok(QuorumMode::Dynamic));
        assert_eq!(with(Some("dynamic")), Ok(QuorumMode::Dynamic));
        assert_eq!(with(Some("static")), Ok(QuorumMode::Static));
        let wrong = with(Some("Static")).unwrap_err();
        assert!(wrong.contains("not one of static, dynamic"), "{wrong}");
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
