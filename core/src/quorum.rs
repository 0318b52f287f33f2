//! The next change to a dynamic KRaft quorum (KIP-853): from the voters and observers of the
//! metadata log and the controllers the `Kafka` asks for, which one voter to add or remove now,
//! or why none can be. Pure; central carries the change out with AddRaftVoter/RemoveRaftVoter
//! and asks again once Kafka has committed it.

use std::collections::BTreeSet;

/// A metadata log directory's ID (Kafka's `directory.id`, as 128 bits).
pub type DirectoryId = u128;

/// One replica of the metadata log, as DescribeQuorum reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    pub id: i32,
    pub directory: DirectoryId,
    /// For a voter: the leader, or a follower that fetched recently. For an observer: it
    /// fetched recently and has caught up with the leader, so adding it cannot stall commits.
    pub live: bool,
    /// It fetched in the last few seconds (the leader always counts as fetching). Kafka keeps
    /// listing a removed voter as an observer for minutes after its process is gone, and a
    /// voter whose process stopped a moment ago is still `live`; this tells them apart.
    pub fetching: bool,
}

/// The quorum as its leader sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Quorum {
    pub leader: Option<i32>,
    pub voters: Vec<Member>,
    pub observers: Vec<Member>,
}

/// What to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The voters are exactly the desired controllers.
    Settled,
    /// Make this observer a voter.
    Add(Member),
    /// Remove this voter.
    Remove(Member),
    /// A change is due but cannot be made safely now; the reason names what it waits for.
    Wait(String),
}

/// A majority of `voters` voters.
pub fn majority(voters: usize) -> usize {
    voters / 2 + 1
}

/// Voters that do not fetch now, the leader excepted: their controller is down, restarting,
/// or runs on another metadata directory. While there are any, the quorum has less fault
/// tolerance than it will have, whether or not a change is due.
pub fn silent_voters(quorum: &Quorum) -> Vec<i32> {
    quorum
        .voters
        .iter()
        .filter(|v| !v.fetching && Some(v.id) != quorum.leader)
        .map(|v| v.id)
        .collect()
}

/// The next single change that moves the voters toward `desired` (controller node IDs)
/// without ever leaving fewer live voters than a majority of the new voter set:
///
/// 1. A voter whose node now runs on another metadata directory (its disk was replaced, it
///    formatted again) is removed first, once it has stopped fetching: the old directory can
///    never vote again, and Kafka refuses a second voter with the same ID.
/// 2. Desired controllers that are caught-up observers are added, lowest ID first, before any
///    voter is removed, so a move keeps its fault tolerance throughout.
/// 3. Voters that are not desired are removed, the leader last.
pub fn next_change(desired: &BTreeSet<i32>, quorum: &Quorum) -> Change {
    let voter_ids: BTreeSet<i32> = quorum.voters.iter().map(|v| v.id).collect();
    let live_voters = quorum.voters.iter().filter(|v| v.live).count();

    if let Some(stale) = quorum.voters.iter().find(|v| {
        desired.contains(&v.id)
            && quorum
                .observers
                .iter()
                .any(|o| o.id == v.id && o.directory != v.directory && o.fetching)
    }) {
        let left = quorum.voters.len() - 1;
        return if stale.live {
            // Its last fetches are recent: the old process may only just have stopped. The
            // quorum is not settled, so the caller asks again soon.
            Change::Wait(format!(
                "controller {} runs on a new metadata directory; its old one is removed from the voters once it no longer fetches",
                stale.id
            ))
        } else if left > 0 && live_voters >= majority(left) {
            Change::Remove(*stale)
        } else {
            Change::Wait(format!(
                "controller {} runs on a new metadata directory, but removing its old one would leave {live_voters} live of {left} voters, below a majority",
                stale.id
            ))
        };
    }

    let missing: Vec<i32> = desired
        .iter()
        .filter(|id| !voter_ids.contains(id))
        .copied()
        .collect();
    for id in &missing {
        let Some(observer) = quorum.observers.iter().find(|o| o.id == *id && o.live) else {
            continue;
        };
        let size = quorum.voters.len() + 1;
        if live_voters + 1 >= majority(size) {
            return Change::Add(*observer);
        }
        return Change::Wait(format!(
            "adding controller {id} would leave {} live of {size} voters, below a majority",
            live_voters + 1
        ));
    }

    let mut extra: Vec<&Member> = quorum
        .voters
        .iter()
        .filter(|v| !desired.contains(&v.id))
        .collect();
    // Dead voters first, the leader last: each removal keeps the most live voters.
    extra.sort_by_key(|v| (Some(v.id) == quorum.leader, v.live, v.id));
    if let Some(voter) = extra.first() {
        let left = quorum.voters.len() - 1;
        let live_left = live_voters - usize::from(voter.live);
        if left == 0 {
            return Change::Wait(format!(
                "voter {} is the last one: a quorum needs a voter, add the new controllers first",
                voter.id
            ));
        }
        if !missing.is_empty() && voter.live {
            return Change::Wait(format!(
                "voter {} is removed once controllers {missing:?} have joined the quorum (they are added when they run and have caught up)",
                voter.id
            ));
        }
        return if live_left >= majority(left) {
            Change::Remove(**voter)
        } else {
            Change::Wait(format!(
                "removing voter {} would leave {live_left} live of {left} voters, below a majority",
                voter.id
            ))
        };
    }

    if missing.is_empty() {
        Change::Settled
    } else {
        Change::Wait(format!(
            "controllers {missing:?} are not voters yet: each is added once it runs and has caught up with the metadata log"
        ))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proptest::prelude::*;

    fn m(id: i32, directory: DirectoryId, live: bool) -> Member {
        Member {
            id,
            directory,
            live,
            fetching: live,
        }
    }

    fn ids(v: &[i32]) -> BTreeSet<i32> {
        v.iter().copied().collect()
    }

    fn quorum(voters: &[Member], observers: &[Member]) -> Quorum {
        Quorum {
            leader: voters.iter().find(|v| v.live).map(|v| v.id),
            voters: voters.to_vec(),
            observers: observers.to_vec(),
        }
    }

    #[test]
    fn settled_when_the_voters_are_the_controllers() {
        let q = quorum(&[m(0, 10, true), m(1, 11, true)], &[m(5, 15, true)]);
        assert_eq!(next_change(&ids(&[0, 1]), &q), Change::Settled);
        assert_eq!(silent_voters(&q), Vec::<i32>::new());
    }

    #[test]
    fn a_voter_whose_controller_stopped_a_moment_ago_is_silent_though_still_live() {
        let stopped = Member {
            fetching: false,
            ..m(1, 11, true)
        };
        let q = quorum(&[m(0, 10, true), stopped, m(2, 12, true)], &[]);
        // No change is due: it may come back with the same directory.
        assert_eq!(next_change(&ids(&[0, 1, 2]), &q), Change::Settled);
        assert_eq!(silent_voters(&q), [1]);
        // The leader counts as fetching whatever Kafka reports of it.
        let leader = Member {
            fetching: false,
            ..m(0, 10, true)
        };
        assert_eq!(silent_voters(&quorum(&[leader], &[])), Vec::<i32>::new());
    }

    #[test]
    fn a_move_adds_every_new_controller_before_removing_an_old_one() {
        let old = [m(0, 10, true), m(1, 11, true), m(2, 12, true)];
        let new = [m(3, 13, true), m(4, 14, false), m(5, 15, true)];
        let q = quorum(&old, &new);
        assert_eq!(next_change(&ids(&[3, 4, 5]), &q), Change::Add(new[0]));
        // 4 has not caught up: 5 goes first, and no old voter leaves while 4 is missing.
        let q = quorum(&[&old[..], &new[..1]].concat(), &new[1..]);
        assert_eq!(next_change(&ids(&[3, 4, 5]), &q), Change::Add(new[2]));
        let q = quorum(&[&old[..], &[new[0], new[2]]].concat(), &new[1..2]);
        assert!(matches!(next_change(&ids(&[3, 4, 5]), &q), Change::Wait(w) if w.contains("[4]")));
        // All joined: the old ones leave, the leader (0) last.
        let q = quorum(&[&old[..], &new[..]].concat(), &[]);
        assert_eq!(next_change(&ids(&[3, 4, 5]), &q), Change::Remove(old[1]));
        let q = quorum(&[old[0], new[0], new[1], new[2]], &[]);
        assert_eq!(next_change(&ids(&[3, 4, 5]), &q), Change::Remove(old[0]));
    }

    #[test]
    fn a_replaced_disk_is_removed_first_then_added_back() {
        let q = quorum(
            &[m(0, 10, true), m(1, 11, true), m(2, 12, false)],
            &[m(2, 99, true)],
        );
        assert_eq!(
            next_change(&ids(&[0, 1, 2]), &q),
            Change::Remove(m(2, 12, false))
        );
        // Restarted quickly: the old directory's last fetch is still recent. Not settled (the
        // caller must look again), not removed yet.
        let q = quorum(
            &[m(0, 10, true), m(1, 11, true), m(2, 12, true)],
            &[m(2, 99, true)],
        );
        assert!(
            matches!(next_change(&ids(&[0, 1, 2]), &q), Change::Wait(w) if w.contains("new metadata directory"))
        );
        let q = quorum(&[m(0, 10, true), m(1, 11, true)], &[m(2, 99, true)]);
        assert_eq!(
            next_change(&ids(&[0, 1, 2]), &q),
            Change::Add(m(2, 99, true))
        );
        // Done: Kafka lists the removed directory as an observer for a while, but nothing
        // fetches as it: settled.
        let q = quorum(
            &[m(0, 10, true), m(1, 11, true), m(2, 99, true)],
            &[m(2, 12, false)],
        );
        assert_eq!(next_change(&ids(&[0, 1, 2]), &q), Change::Settled);
    }

    #[test]
    fn never_below_a_majority_and_never_the_last_voter() {
        // Two of three dead: removing one leaves 1 live of 2.
        let q = quorum(&[m(0, 10, true), m(1, 11, false), m(2, 12, false)], &[]);
        assert!(
            matches!(next_change(&ids(&[0, 1]), &q), Change::Wait(w) if w.contains("below a majority"))
        );
        let q = quorum(&[m(0, 10, true)], &[]);
        assert!(matches!(next_change(&ids(&[]), &q), Change::Wait(w) if w.contains("last one")));
        // Dead voters go before live ones.
        let q = quorum(&[m(0, 10, true), m(1, 11, true), m(2, 12, false)], &[]);
        assert_eq!(next_change(&ids(&[0]), &q), Change::Remove(m(2, 12, false)));
    }

    #[test]
    fn a_controller_that_does_not_run_is_waited_for() {
        let q = quorum(&[m(0, 10, true)], &[]);
        assert!(matches!(next_change(&ids(&[0, 1]), &q), Change::Wait(w) if w.contains("[1]")));
    }

    fn arbitrary_quorum() -> impl Strategy<Value = (BTreeSet<i32>, Quorum)> {
        (
            proptest::collection::btree_map(0..8i32, (0..3u128, any::<bool>()), 1..6),
            proptest::collection::btree_map(0..8i32, (0..3u128, any::<bool>()), 0..6),
            proptest::collection::btree_set(0..8i32, 0..6),
        )
            .prop_map(|(voters, observers, desired)| {
                let voters: Vec<Member> = voters
                    .into_iter()
                    .map(|(id, (d, live))| m(id, d, live))
                    .collect();
                let observers: Vec<Member> = observers
                    .into_iter()
                    .filter(|(id, (d, _))| !voters.iter().any(|v| v.id == *id && v.directory == *d))
                    .map(|(id, (d, live))| m(id, d, live))
                    .collect();
                (desired, quorum(&voters, &observers))
            })
    }

    proptest! {
        #[test]
        fn every_change_keeps_a_live_majority((desired, q) in arbitrary_quorum()) {
            let live = q.voters.iter().filter(|v| v.live).count();
            match next_change(&desired, &q) {
                Change::Add(o) => {
                    prop_assert!(o.live && desired.contains(&o.id));
                    prop_assert!(!q.voters.iter().any(|v| v.id == o.id));
                    prop_assert!(live + 1 >= majority(q.voters.len() + 1));
                }
                Change::Remove(v) => {
                    prop_assert!(q.voters.contains(&v));
                    let left = q.voters.len() - 1;
                    prop_assert!(left > 0);
                    prop_assert!(live - usize::from(v.live) >= majority(left));
                }
                Change::Settled => {
                    let voters: BTreeSet<i32> = q.voters.iter().map(|v| v.id).collect();
                    prop_assert_eq!(voters, desired);
                    // No voter is waiting to be replaced by its own node's new directory.
                    prop_assert!(!q.voters.iter().any(|v| q
                        .observers
                        .iter()
                        .any(|o| o.id == v.id && o.directory != v.directory && o.fetching)));
                }
                Change::Wait(why) => prop_assert!(!why.is_empty()),
            }
        }
    }
}
