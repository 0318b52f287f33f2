//! The drains central runs for pool moves (ADR 0017): which `KafkaOperation`s to create,
//! replace, abort and remove, decided purely ([`decide`]) from the moves under way and the
//! operations they and earlier moves left, then done ([`ensure`]).
//!
//! An operation belongs to the move it was created for: it carries the move's
//! `status.leaving.startedAt` (annotation `kstretch.io/move-started-at`), and an undo is a move
//! of its own. So an operation of an earlier move never holds a new one: an ended one whose
//! name the new drain needs is replaced, one still running is aborted (its move was undone or
//! superseded, and it would only move replicas back and forth) unless it drains exactly what
//! the move under way needs drained (then it is adopted), and of the ended ones each pool
//! keeps the newest [`KEPT`] for `kubectl` to show, as a CronJob keeps its last Jobs. Only an
//! aborted or refused drain of the move under way stops it, until the user decides.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::Timestamp;
use kstretch_api::condition::READY;
use kstretch_api::operation::{Drain, KafkaOperationSpec, phase};
use kstretch_api::{Kafka, KafkaNodePool, KafkaOperation, names};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};

use super::context::Context;
use super::resolve::{self, Resolved};
use crate::error::Error;
use crate::kafka::warning::{Reason, Warning};

/// Ended move operations each pool keeps from its earlier moves.
pub const KEPT: usize = 3;

/// A pool of the `Kafka`, as far as its moves go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolMove {
    pub pool: String,
    /// Whether the pool moves (has leaving nodes still needed).
    pub moving: bool,
    /// When the move under way started (`status.leaving.startedAt`); `None` while it starts
    /// in this reconciliation.
    pub started_at: Option<String>,
    /// The leaving brokers that still hold replicas: what the move's drain empties.
    pub draining: BTreeSet<i32>,
}

/// An operation central created for a pool's move, as read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MoveOperation {
    pub name: String,
    pub pool: String,
    /// The move it was created for; `None` on one created before operations carried it.
    pub started_at: Option<String>,
    pub phase: Option<String>,
    /// Its abort was asked for.
    pub aborting: bool,
    /// It is being deleted.
    pub deleting: bool,
    pub created: Option<Timestamp>,
    /// Its `Ready` condition's message.
    pub said: String,
}

impl MoveOperation {
    /// Whether nothing more happens to it unless someone changes it.
    fn finished(&self) -> bool {
        phase::ended(self.phase.as_deref()) || self.phase.as_deref() == Some(phase::REFUSED)
    }

    /// Whether it was created for `pool`'s move under way. One that does not say which move
    /// it is of counts as the one under way, if any.
    fn of_move(&self, pool: &PoolMove) -> bool {
        match &self.started_at {
            None => pool.moving,
            Some(at) => pool.moving && pool.started_at.as_ref() == Some(at),
        }
    }
}

/// Why an operation is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// A completed drain of the move under way whose brokers hold replicas again (a topic
    /// created meanwhile): it is created again.
    Rerun,
    /// An ended drain of an earlier move has the name the move under way needs.
    EarlierMove,
    /// Older than the [`KEPT`] newest ended operations of the pool's earlier moves.
    History,
}

/// One thing to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Create {
        pool: String,
        name: String,
        brokers: BTreeSet<i32>,
        started_at: String,
    },
    Delete {
        name: String,
        why: Removal,
    },
    /// A drain of an earlier move that still runs.
    Abort {
        name: String,
        pool: String,
    },
    /// A drain of an earlier move that still runs and empties exactly what the move under way
    /// needs emptied: it is this move's from now on (so that an abort of it stalls this move).
    Adopt {
        name: String,
        started_at: String,
    },
}

/// What [`decide`] found: the steps, and the moves that wait for the user.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    pub steps: Vec<Step>,
    pub stalled: Vec<Warning>,
}

/// The name of the drain that empties `brokers` of moving pool `pool`.
pub fn drain_name(kafka: &str, pool: &str, brokers: &BTreeSet<i32>) -> String {
    let ids: Vec<String> = brokers.iter().map(i32::to_string).collect();
    format!("{kafka}-{pool}-move-{}", ids.join("-"))
}

/// What to do about the move operations `ops` of `kafka`'s pools `pools`. Drains are created
/// only once a move's start is recorded, so that they carry it.
pub fn decide(kafka: &str, pools: &[PoolMove], ops: &[MoveOperation]) -> Decision {
    let mut decision = Decision::default();
    for pool in pools {
        let own: Vec<&MoveOperation> = ops.iter().filter(|o| o.pool == pool.pool).collect();
        let needed = (pool.moving && !pool.draining.is_empty())
            .then(|| drain_name(kafka, &pool.pool, &pool.draining));
        if let Some(name) = &needed {
            the_drain(pool, name, &own, &mut decision);
        }
        for op in &own {
            if Some(&op.name) != needed.as_ref()
                && !op.of_move(pool)
                && !op.finished()
                && !op.aborting
                && !op.deleting
            {
                decision.steps.push(Step::Abort {
                    name: op.name.clone(),
                    pool: pool.pool.clone(),
                });
            }
        }
        let mut history: Vec<&&MoveOperation> = own
            .iter()
            .filter(|o| o.finished() && !o.of_move(pool) && !o.deleting)
            .filter(|o| Some(&o.name) != needed.as_ref())
            .collect();
        history.sort_by(|a, b| (&b.created, &b.name).cmp(&(&a.created, &a.name)));
        for op in history.into_iter().skip(KEPT) {
            decision.steps.push(Step::Delete {
                name: op.name.clone(),
                why: Removal::History,
            });
        }
    }
    decision
}

/// The drain `name` that `pool`'s move needs: created, replaced, or reported stalled.
fn the_drain(pool: &PoolMove, name: &str, own: &[&MoveOperation], decision: &mut Decision) {
    let Some(op) = own.iter().find(|o| o.name == name) else {
        if let Some(started_at) = &pool.started_at {
            decision.steps.push(Step::Create {
                pool: pool.pool.clone(),
                name: name.to_owned(),
                brokers: pool.draining.clone(),
                started_at: started_at.clone(),
            });
        }
        return;
    };
    if op.deleting {
        return;
    }
    let delete = |why| Step::Delete {
        name: name.to_owned(),
        why,
    };
    if !op.of_move(pool) {
        if op.finished() {
            decision.steps.push(delete(Removal::EarlierMove));
        } else if let Some(started_at) = &pool.started_at {
            // Still running, it drains exactly these brokers: it may as well go on.
            decision.steps.push(Step::Adopt {
                name: name.to_owned(),
                started_at: started_at.clone(),
            });
        }
        return;
    }
    match op.phase.as_deref() {
        Some(phase::COMPLETED) => decision.steps.push(delete(Removal::Rerun)),
        Some(p @ (phase::ABORTED | phase::REFUSED)) => decision.stalled.push(Warning::new(
            Reason::PoolMoveStalled,
            format!(
                "KafkaNodePool {}: operation {name}, which drains its leaving brokers {:?}, is {p} ({}); delete it to try again, or set {} back to undo the move",
                pool.pool,
                pool.draining,
                op.said,
                names::STRETCH_CLUSTER_ALIAS
            ),
        )),
        _ => {}
    }
}

/// The moves of `resolved`'s pools, with the brokers each drain must empty (`draining`).
pub fn pool_moves(
    resolved: &Resolved,
    draining: &BTreeMap<String, BTreeSet<i32>>,
) -> Vec<PoolMove> {
    resolved
        .pools
        .iter()
        .map(|p| PoolMove {
            pool: p.name.clone(),
            moving: p.leaving.is_some(),
            started_at: p.leaving.as_ref().and_then(|l| l.started_at.clone()),
            draining: draining.get(&p.name).cloned().unwrap_or_default(),
        })
        .collect()
}

/// The move operations among `listed` (pure), for [`decide`].
pub fn read_all(listed: &[KafkaOperation]) -> Vec<MoveOperation> {
    listed.iter().filter_map(read).collect()
}

/// Does the steps [`decide`] decided for `kafka`'s pools `pools`.
pub async fn carry_out(
    ctx: &Context,
    kafka: &Kafka,
    pools: &[&KafkaNodePool],
    steps: &[Step],
) -> Result<(), Error> {
    let api: Api<KafkaOperation> =
        Api::namespaced(ctx.client.clone(), &kafka.namespace().unwrap_or_default());
    for step in steps {
        act(ctx, &api, kafka, pools, step.clone()).await?;
    }
    Ok(())
}

/// `op` as a move operation, if it is one (a drain of node IDs labelled with its pool).
fn read(op: &KafkaOperation) -> Option<MoveOperation> {
    op.spec.drain.as_ref().filter(|d| !d.node_ids.is_empty())?;
    let status = op.status.clone().unwrap_or_default();
    Some(MoveOperation {
        name: op.name_any(),
        pool: op.labels().get(names::POOL_NAME)?.clone(),
        started_at: op.annotations().get(names::MOVE_STARTED_AT).cloned(),
        phase: status.phase,
        aborting: op.spec.abort,
        deleting: op.metadata.deletion_timestamp.is_some(),
        created: op.metadata.creation_timestamp.as_ref().map(|t| t.0),
        said: status
            .conditions
            .iter()
            .find(|c| c.type_ == READY)
            .and_then(|c| c.message.clone())
            .unwrap_or_default(),
    })
}

async fn act(
    ctx: &Context,
    api: &Api<KafkaOperation>,
    kafka: &Kafka,
    pools: &[&KafkaNodePool],
    step: Step,
) -> Result<(), Error> {
    match step {
        Step::Create {
            pool,
            name,
            brokers,
            started_at,
        } => {
            let Some(pool) = pools.iter().find(|p| p.name_any() == pool) else {
                return Ok(());
            };
            let op = drain_of(kafka, pool, &name, &brokers, &started_at);
            match api.create(&PostParams::default(), &op).await {
                // Made meanwhile (another central's last pass): looked at again next time.
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                created => {
                    created?;
                    tracing::info!(operation = %name, pool = %pool.name_any(), ?brokers, "drain of a moving pool's leaving brokers created");
                }
            }
        }
        Step::Delete { name, why } => match api.delete(&name, &DeleteParams::default()).await {
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            deleted => {
                deleted?;
                tracing::info!(operation = %name, ?why, "move operation deleted");
            }
        },
        Step::Adopt { name, started_at } => {
            let adopt = serde_json::json!({"metadata": {"annotations": {
                names::MOVE_STARTED_AT: started_at
            }}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&adopt))
                .await?;
            tracing::info!(operation = %name, "running drain of an earlier move taken over by the move under way");
        }
        Step::Abort { name, pool } => {
            let abort = serde_json::json!({"spec": {"abort": true}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&abort))
                .await?;
            ctx.events.about(
                kafka,
                false,
                "MoveDrainAborted",
                "Move",
                format!(
                    "operation {name} drained brokers of an earlier move of KafkaNodePool {pool}, which was undone or superseded: aborted"
                ),
            );
        }
    }
    Ok(())
}

/// A drain of `brokers` for the move started at `started_at`, labelled for the `Kafka` and
/// the pool, owned by the pool (it goes with it).
fn drain_of(
    kafka: &Kafka,
    pool: &KafkaNodePool,
    name: &str,
    brokers: &BTreeSet<i32>,
    started_at: &str,
) -> KafkaOperation {
    let mut op = KafkaOperation::new(
        name,
        KafkaOperationSpec {
            drain: Some(Drain {
                node_ids: brokers.iter().copied().collect(),
                ..Default::default()
            }),
            // Validated when the pool was resolved.
            replication_throttle: resolve::move_throttle(pool).ok().flatten(),
            ..Default::default()
        },
    );
    op.metadata.namespace = kafka.namespace();
    op.metadata.labels = Some(BTreeMap::from([
        (names::CLUSTER.to_owned(), kafka.name_any()),
        (names::POOL_NAME.to_owned(), pool.name_any()),
    ]));
    op.metadata.annotations = Some(BTreeMap::from([(
        names::MOVE_STARTED_AT.to_owned(),
        started_at.to_owned(),
    )]));
    op.metadata.owner_references = pool.controller_owner_ref(&()).map(|mut r| {
        r.controller = Some(false);
        r.block_owner_deletion = Some(false);
        vec![r]
    });
    op
}

#[cfg(test)]
mod tests {
    use super::*;

    const T1: &str = "2026-11-27T10:00:00Z";
    const T2: &str = "2026-11-27T11:00:00Z";

    fn moving(started_at: Option<&str>, draining: &[i32]) -> PoolMove {
        PoolMove {
            pool: "m".into(),
            moving: true,
            started_at: started_at.map(str::to_owned),
            draining: draining.iter().copied().collect(),
        }
    }

    fn op(name: &str, started_at: Option<&str>, phase: Option<&str>) -> MoveOperation {
        MoveOperation {
            name: name.into(),
            pool: "m".into(),
            started_at: started_at.map(str::to_owned),
            phase: phase.map(str::to_owned),
            said: "aborted after 1 batch(es)".into(),
            ..Default::default()
        }
    }

    fn decide_one(pool: PoolMove, ops: &[MoveOperation]) -> Decision {
        decide("live", &[pool], ops)
    }

    #[test]
    fn a_drain_is_named_after_its_kafka_pool_and_brokers() {
        assert_eq!(
            drain_name("live", "brokers", &BTreeSet::from([4, 3])),
            "live-brokers-move-3-4"
        );
    }

    #[test]
    fn a_move_gets_its_drain_once_its_start_is_recorded() {
        let d = decide_one(moving(None, &[0, 1]), &[]);
        assert_eq!(
            d,
            Decision::default(),
            "not before the status records the move"
        );
        let d = decide_one(moving(Some(T1), &[0, 1]), &[]);
        assert_eq!(
            d.steps,
            [Step::Create {
                pool: "m".into(),
                name: "live-m-move-0-1".into(),
                brokers: [0, 1].into(),
                started_at: T1.into(),
            }]
        );
        // Running: left to run.
        let running = op("live-m-move-0-1", Some(T1), Some(phase::RUNNING));
        assert_eq!(
            decide_one(moving(Some(T1), &[0, 1]), &[running]),
            Decision::default()
        );
    }

    #[test]
    fn the_move_under_way_waits_on_its_own_aborted_or_refused_drain() {
        for phase in [phase::ABORTED, phase::REFUSED] {
            let d = decide_one(
                moving(Some(T1), &[0, 1]),
                &[op("live-m-move-0-1", Some(T1), Some(phase))],
            );
            assert!(d.steps.is_empty(), "{d:?}");
            assert_eq!(d.stalled.len(), 1);
            let Warning { reason, message } = &d.stalled[0];
            assert_eq!(*reason, Reason::PoolMoveStalled);
            assert!(
                message.contains(&format!("live-m-move-0-1, which drains its leaving brokers {{0, 1}}, is {phase} (aborted after 1 batch(es)); delete it to try again")),
                "{message}"
            );
        }
        // A completed one whose brokers hold replicas again is run again.
        let d = decide_one(
            moving(Some(T1), &[0, 1]),
            &[op("live-m-move-0-1", Some(T1), Some(phase::COMPLETED))],
        );
        assert_eq!(
            d.steps,
            [Step::Delete {
                name: "live-m-move-0-1".into(),
                why: Removal::Rerun
            }]
        );
    }

    #[test]
    fn an_aborted_drain_of_an_undone_move_never_holds_a_new_move_of_the_same_nodes() {
        // Moved with a crawling throttle, aborted, undone; now the same nodes leave again.
        let stale = op("live-m-move-0-1", Some(T1), Some(phase::ABORTED));
        let d = decide_one(moving(Some(T2), &[0, 1]), std::slice::from_ref(&stale));
        assert!(d.stalled.is_empty(), "{d:?}");
        assert_eq!(
            d.steps,
            [Step::Delete {
                name: "live-m-move-0-1".into(),
                why: Removal::EarlierMove
            }]
        );
        // While it goes, nothing else; once gone, the new move's drain is created.
        let going = MoveOperation {
            deleting: true,
            ..stale
        };
        assert_eq!(
            decide_one(moving(Some(T2), &[0, 1]), &[going]),
            Decision::default()
        );
        let d = decide_one(moving(Some(T2), &[0, 1]), &[]);
        assert!(matches!(&d.steps[..], [Step::Create { started_at, .. }] if started_at == T2));
    }

    #[test]
    fn a_running_drain_of_an_undone_move_is_aborted_unless_it_drains_what_is_needed() {
        // Undone mid-drain: the old nodes are the pool's again, its new ones leave.
        let old = op("live-m-move-0-1", Some(T1), Some(phase::RUNNING));
        for started_at in [None, Some(T2)] {
            let d = decide_one(moving(started_at, &[5]), std::slice::from_ref(&old));
            assert!(
                d.steps.contains(&Step::Abort {
                    name: "live-m-move-0-1".into(),
                    pool: "m".into()
                }),
                "{d:?}"
            );
        }
        // Nothing to drain on the way back, or the move done: aborted all the same.
        let not_moving = PoolMove {
            pool: "m".into(),
            ..Default::default()
        };
        let d = decide_one(not_moving, std::slice::from_ref(&old));
        assert_eq!(d.steps.len(), 1);
        // Asked already: not again.
        let asked = MoveOperation {
            aborting: true,
            ..old.clone()
        };
        assert!(
            decide_one(moving(Some(T2), &[5]), &[asked])
                .steps
                .iter()
                .all(|s| !matches!(s, Step::Abort { .. }))
        );
        // Draining exactly the brokers the move under way needs emptied: it goes on, as this
        // move's.
        assert_eq!(
            decide_one(moving(Some(T2), &[0, 1]), &[old]).steps,
            [Step::Adopt {
                name: "live-m-move-0-1".into(),
                started_at: T2.into()
            }]
        );
    }

    #[test]
    fn operations_without_their_move_count_as_the_move_under_way() {
        let legacy = op("live-m-move-0-1", None, Some(phase::ABORTED));
        let d = decide_one(moving(Some(T2), &[0, 1]), std::slice::from_ref(&legacy));
        assert_eq!(d.stalled.len(), 1, "{d:?}");
        let running = op("live-m-move-3", None, Some(phase::RUNNING));
        assert!(
            decide_one(moving(Some(T2), &[0, 1]), &[running])
                .steps
                .iter()
                .all(|s| !matches!(s, Step::Abort { .. }))
        );
    }

    #[test]
    fn each_pool_keeps_the_newest_ended_operations_of_its_earlier_moves() {
        let at = |minute: i64| Some(Timestamp::from_second(1_800_000_000 + minute * 60).unwrap());
        let mut ops: Vec<MoveOperation> = (0..6)
            .map(|i| MoveOperation {
                created: at(i),
                ..op(
                    &format!("live-m-move-{i}"),
                    Some(T1),
                    Some(phase::COMPLETED),
                )
            })
            .collect();
        // Another pool's, and the move under way's, are not counted.
        ops.push(MoveOperation {
            pool: "other".into(),
            created: at(0),
            ..op("live-other-move-9", Some(T1), Some(phase::COMPLETED))
        });
        ops.push(MoveOperation {
            created: at(-5),
            ..op("live-m-move-7", Some(T2), Some(phase::COMPLETED))
        });
        let d = decide_one(moving(Some(T2), &[]), &ops);
        let deleted: Vec<&str> = d
            .steps
            .iter()
            .map(|s| match s {
                Step::Delete {
                    name,
                    why: Removal::History,
                } => name.as_str(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(deleted, ["live-m-move-2", "live-m-move-1", "live-m-move-0"]);
    }
}
