//! One `KafkaOperation` reconciliation, as a pipeline: its Kafka → what it asks (pure) → its
//! turn → what Kafka holds → the plan (pure) → one step → the status, written once per look
//! ([`Outcome`]). A step that leaves something behind in Kafka (a throttle, reassignments in
//! flight) is taken after the status that records it is written, so a central that restarts at
//! any point resumes where it stood; every step is safe to repeat.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use kstretch_api::condition::{self, Condition};
use kstretch_api::operation::{KafkaOperationStatus, PlanSummary, drains_in_effect, phase};
use kstretch_api::{Kafka, KafkaOperation, names};
use kstretch_core::movement::throttle::throttle;
use kstretch_core::movement::{self, Plan, restore, spread};
use kstretch_kadmin::AdminClient;
use kube::api::ListParams;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};

use super::recover;
use super::spec::{self, Drained, Intent};
use super::status::{Outcome, Refusal, Then, WAIT, refusal, refused, write};
use super::steps::{self, Observed};
use crate::status::{not_ready, now};
use crate::topic::clusters::{self, KafkaRef};

/// How often a running operation looks at its reassignments.
const POLL: Duration = Duration::from_secs(3);
/// At most this many partitions move at once.
const BATCH_PARTITIONS: usize = 50;
/// A batch holds about this many seconds of copying at the throttle.
const BATCH_SECONDS: u64 = 120;

pub use crate::controller::Error;
use crate::controller::{Context, key};

/// Takes the operation's next step: decides it, writes the status once, then takes the step
/// in Kafka the status records; a failure is also written to its status before it is retried.
pub async fn apply(op: Arc<KafkaOperation>, ctx: Arc<Context>) -> Result<Action, Error> {
    let status = op.status.clone().unwrap_or_default();
    if phase::ended(status.phase.as_deref()) {
        return Ok(Action::await_change());
    }
    let outcome = match step(&op, &ctx, status.clone()).await {
        Ok(outcome) => outcome,
        Err(e) => return failed(&ctx, &op, status, e).await,
    };
    if let Some(ready) = outcome.ready {
        write(&ctx, &op, outcome.status.clone(), ready).await?;
    }
    if let Some(then) = outcome.then
        && let Err(e) = take(then).await
    {
        // Written over what was just recorded, which the next look resumes from.
        return failed(&ctx, &op, outcome.status, e).await;
    }
    ctx.retries.succeeded(&key(op.as_ref()));
    Ok(outcome.next)
}

/// Writes `e` into `status`'s `Ready` condition and returns it, to be retried with backoff.
async fn failed(
    ctx: &Context,
    op: &KafkaOperation,
    status: KafkaOperationStatus,
    e: Error,
) -> Result<Action, Error> {
    write(ctx, op, status, not_ready(e.reason(), e.to_string())).await?;
    Err(e)
}

/// Takes a step the status already records.
async fn take(then: Then) -> Result<(), Error> {
    match then {
        Then::StartBatch {
            admin,
            batch,
            throttle,
            rate,
        } => Ok(steps::start_batch(&admin, &batch, &throttle, rate).await?),
    }
}

async fn step(
    op: &KafkaOperation,
    ctx: &Context,
    mut status: KafkaOperationStatus,
) -> Result<Outcome, Error> {
    let running = status.phase.as_deref() == Some(phase::RUNNING);
    let (kafka_ref, kafka) = match clusters::found_kafka(op, &ctx.kafkas.state()) {
        Ok(found) => found,
        Err(e) => return Ok(refused(ctx, status, refusal(e.reason(), e.to_string()))),
    };
    let (intent, rate) = match spec::read(op) {
        Ok(read) => read,
        Err(e) => return Ok(refused(ctx, status, refusal(e.reason(), e.to_string()))),
    };
    if op.spec.abort {
        return abort(ctx, status, &kafka_ref, &kafka).await;
    }
    // A recovery never waits for its turn: the operations before it wait for a quorum.
    if let Intent::RecoverQuorum { node_id } = &intent {
        return recover::start(ctx, op.spec.dry_run, status, &kafka, *node_id).await;
    }
    if let Intent::Forget { cluster, .. } = &intent
        && !kafka.forgotten_clusters().contains(cluster)
    {
        let message = format!(
            "Kafka {kafka_ref} does not name cluster {cluster} in its annotation {}: only a cluster forgotten with `kstretch forget {cluster} --kafka {}` has its replicas replaced",
            names::FORGOTTEN_CLUSTERS,
            kafka_ref.name
        );
        // Waits rather than refuses: central creates this operation on seeing the annotation,
        // and this controller's copy of the `Kafka` may not show it yet.
        if !running {
            status.phase = Some(phase::PENDING.to_owned());
        }
        let waiting = not_ready("ClusterNotForgotten", message);
        return Ok(Outcome::write(status, waiting, Action::requeue(WAIT)));
    }
    // Listed only when something is decided from it: a running operation polls often.
    let forgetting = matches!(intent, Intent::Forget { .. });
    let others = if forgetting || (!running && !op.spec.dry_run) {
        same_kafka(ctx, &kafka_ref).await?
    } else {
        Vec::new()
    };
    if forgetting && let Some(waiting) = forget_waits(ctx, &kafka, &others).await? {
        if !running {
            status.phase = Some(phase::PENDING.to_owned());
        }
        return Ok(Outcome::write(status, waiting, Action::requeue(WAIT)));
    }
    if !running
        && !op.spec.dry_run
        && let Some(first) = turn(op, &others)
    {
        status.phase = Some(phase::PENDING.to_owned());
        let message = format!("waiting for operation {first} on Kafka {kafka_ref} to end");
        let waiting = not_ready("Pending", message);
        return Ok(Outcome::write(status, waiting, Action::requeue(WAIT)));
    }
    let admin: AdminClient = clusters::admin_of::<Error>(&ctx.access, &kafka_ref, &kafka).await?;
    // While reassignments run, replica lists hold old and new replicas at once: nothing is
    // planned (or read beyond the reassignments) until they are done.
    if running {
        let moving = steps::moving(&admin).await?;
        if let Some(waiting) = settle(&mut status, &admin, &moving).await? {
            return Ok(waiting);
        }
    }
    let observed = steps::observe(&admin).await?;
    if !running && let Some(why) = survivors_fenced(&intent, &observed) {
        status.phase = Some(phase::PENDING.to_owned());
        let waiting = not_ready("SurvivorsFenced", why);
        return Ok(Outcome::write(status, waiting, Action::requeue(WAIT)));
    }
    let (plan, left_alone) = match plan(ctx, op, &intent, &observed, &status).await? {
        Ok(planned) => planned,
        Err(r) => return Ok(refused(ctx, status, r)),
    };
    if running {
        return advance(status, admin, &observed, plan, rate).await;
    }
    Ok(start(
        op.spec.dry_run,
        status,
        &intent,
        &observed,
        &plan,
        left_alone,
        rate,
    ))
}

/// The operations on the same Kafka (`op` among them).
async fn same_kafka(ctx: &Context, kafka: &KafkaRef) -> Result<Vec<KafkaOperation>, Error> {
    let api: Api<KafkaOperation> = Api::namespaced(ctx.client.clone(), &kafka.namespace);
    let labelled = ListParams::default().labels(&format!("{}={}", names::CLUSTER, kafka.name));
    Ok(api.list(&labelled).await?.items)
}

/// Operations that will still change the Kafka: neither dry runs nor ended nor refused.
fn under_way(ops: &[KafkaOperation]) -> impl Iterator<Item = &KafkaOperation> {
    ops.iter().filter(|o| !o.spec.dry_run).filter(|o| {
        let p = o.status.as_ref().and_then(|s| s.phase.as_deref());
        !phase::ended(p) && p != Some(phase::REFUSED)
    })
}

/// The oldest operation under way on the same Kafka, when it is not `op`: only one changes a
/// Kafka at a time (dry runs change nothing and never wait).
fn turn(op: &KafkaOperation, same_kafka: &[KafkaOperation]) -> Option<String> {
    under_way(same_kafka)
        .min_by_key(|o| {
            (
                o.metadata.creation_timestamp.clone().map(|t| t.0),
                o.name_any(),
            )
        })
        .map(ResourceExt::name_any)
        .filter(|name| *name != op.name_any())
}

/// Why a forget waits, with its reason: no controller can be elected until the quorum is
/// rebuilt, and while a recovery runs its unclean elections are still to come (a forget
/// planned before them would name partitions lost that the recovery gives a leader).
async fn forget_waits(
    ctx: &Context,
    kafka: &Kafka,
    same_kafka: &[KafkaOperation],
) -> Result<Option<Condition>, Error> {
    if let Some(why) = recover::majority_lost(ctx, kafka).await? {
        return Ok(Some(not_ready("QuorumMajorityLost", why)));
    }
    Ok(recovering(same_kafka).map(|name| {
        let message = format!(
            "waiting for quorum recovery {name} to complete: it elects leaders for the partitions it can, and only then are the lost replicas replaced"
        );
        not_ready("QuorumRecovering", message)
    }))
}

/// The quorum recovery under way on the same Kafka, if any.
fn recovering(same_kafka: &[KafkaOperation]) -> Option<String> {
    under_way(same_kafka)
        .find(|o| o.spec.recover_quorum.is_some())
        .map(ResourceExt::name_any)
}

/// The plan from what Kafka holds now, and the partitions it leaves alone.
async fn plan(
    ctx: &Context,
    op: &KafkaOperation,
    intent: &Intent,
    observed: &Observed,
    status: &KafkaOperationStatus,
) -> Result<Result<(Plan, Vec<String>), Refusal>, Error> {
    match intent {
        Intent::Drain(drained) => Ok(drain_plan(drained, observed, status)),
        Intent::Undrain { drain } => {
            let placement = match recorded_placement(ctx, op, drain).await? {
                Ok(p) => p,
                Err(r) => return Ok(Err(r)),
            };
            let brokers: BTreeSet<i32> = observed.brokers.keys().copied().collect();
            let r = restore::restore(&observed.partitions, &placement, &brokers);
            let mut left = r.plan.unsafe_partitions.clone();
            left.extend(r.unrestorable);
            Ok(Ok((r.plan, left)))
        }
        Intent::Forget { cluster, node_ids } => Ok(forget_plan(cluster, node_ids, observed)),
        Intent::RecoverQuorum { .. } => Ok(Err(refusal(
            "InvalidOperation",
            "a quorum recovery moves no partitions",
        ))),
        Intent::Spread { topics } => {
            if let Some(refused) = drained_meanwhile(ctx, op).await? {
                return Ok(Err(refused));
            }
            let chosen: Vec<_> = observed
                .partitions
                .iter()
                .filter(|p| topics.is_empty() || topics.contains(&p.topic))
                .cloned()
                .collect();
            let plan = spread::spread(&chosen, &observed.brokers);
            let left = plan.unsafe_partitions.clone();
            Ok(Ok((plan, left)))
        }
    }
}

/// A spread while a drain of the same Kafka is in effect would put replicas back on the
/// drained brokers: refused, naming the drain.
async fn drained_meanwhile(ctx: &Context, op: &KafkaOperation) -> Result<Option<Refusal>, Error> {
    let api: Api<KafkaOperation> =
        Api::namespaced(ctx.client.clone(), &op.namespace().unwrap_or_default());
    let kafka = op.labels().get(names::CLUSTER).cloned().unwrap_or_default();
    let same_kafka = ListParams::default().labels(&format!("{}={kafka}", names::CLUSTER));
    let ops = api.list(&same_kafka).await?.items;
    Ok(drains_in_effect(&ops).first().map(|drain| {
        let cluster = drain.spec.drain.as_ref().map(|d| d.cluster.clone()).unwrap_or_default();
        refusal(
            "DrainInEffect",
            format!(
                "cluster {cluster} is drained by operation {} and its brokers are meant to hold nothing; undrain it first (`kstretch undrain {cluster} --kafka {kafka}`), then spread",
                drain.name_any()
            ),
        )
    }))
}

/// A drain's plan: every replica off the drained brokers (those recorded when it started, so a
/// broker that leaves Kafka meanwhile does not change what is drained).
fn drain_plan(
    drained: &Drained,
    observed: &Observed,
    status: &KafkaOperationStatus,
) -> Result<(Plan, Vec<String>), Refusal> {
    let brokers: BTreeSet<i32> = if status.drained_brokers.is_empty() {
        drained_brokers(drained, observed)?
    } else {
        status.drained_brokers.iter().copied().collect()
    };
    let target = observed
        .brokers
        .iter()
        .filter(|(b, _)| !brokers.contains(b))
        .map(|(b, rack)| (*b, rack.clone()))
        .collect();
    match movement::plan(&observed.partitions, &target) {
        Ok(plan) => {
            let left = plan.unsafe_partitions.clone();
            Ok((plan, left))
        }
        Err(e) => Err(refusal(
            e.reason(),
            format!("draining {drained} would leave too few brokers: {e}"),
        )),
    }
}

/// The brokers lost with a forgotten cluster: those central recorded, and every registered
/// broker with its rack.
fn lost_brokers(cluster: &str, node_ids: &BTreeSet<i32>, observed: &Observed) -> BTreeSet<i32> {
    observed
        .registered
        .iter()
        .filter(|(_, rack)| *rack == cluster)
        .map(|(b, _)| *b)
        .chain(node_ids.iter().copied())
        .collect()
}

/// Why a forget waits before it plans: brokers that survive its cluster are registered but
/// fenced, as they are for a while after a restart or a quorum recovery. A plan made now would
/// leave them out, or be refused for too few brokers, though they are about to take replicas.
fn survivors_fenced(intent: &Intent, observed: &Observed) -> Option<String> {
    let Intent::Forget { cluster, node_ids } = intent else {
        return None;
    };
    let lost = lost_brokers(cluster, node_ids, observed);
    let fenced: Vec<i32> = observed
        .registered
        .keys()
        .filter(|b| !lost.contains(b) && !observed.brokers.contains_key(b))
        .copied()
        .collect();
    (!fenced.is_empty()).then(|| {
        format!(
            "waiting for brokers {fenced:?}, which survive cluster {cluster}, to be unfenced (a broker is fenced while it restarts or catches up with a new controller): the lost replicas are placed once every survivor can take them"
        )
    })
}

/// A forget's plan: the replicas of the forgotten cluster's brokers ([`lost_brokers`])
/// replaced on the unfenced survivors; partitions with no surviving in-sync replica are left,
/// named as lost.
fn forget_plan(
    cluster: &str,
    node_ids: &BTreeSet<i32>,
    observed: &Observed,
) -> Result<(Plan, Vec<String>), Refusal> {
    let lost = lost_brokers(cluster, node_ids, observed);
    let target = observed
        .brokers
        .iter()
        .filter(|(b, _)| !lost.contains(b))
        .map(|(b, rack)| (*b, rack.clone()))
        .collect();
    match movement::replace_lost(&observed.partitions, &lost, &target) {
        Ok(plan) => {
            let left = plan
                .lost_partitions
                .iter()
                .map(|p| format!("{p} (lost: no in-sync replica survived)"))
                .collect();
            Ok((plan, left))
        }
        Err(e) => Err(refusal(
            e.reason(),
            format!("the brokers that survive cluster {cluster} cannot hold every partition: {e}"),
        )),
    }
}

/// The brokers `drained` names, as Kafka lists them now; refused when it names none (or, by
/// node ID, one that is not a broker of this Kafka).
fn drained_brokers(drained: &Drained, observed: &Observed) -> Result<BTreeSet<i32>, Refusal> {
    match drained {
        Drained::Cluster(cluster) => {
            let found: BTreeSet<i32> = observed
                .brokers
                .iter()
                .filter(|(_, rack)| *rack == cluster)
                .map(|(b, _)| *b)
                .collect();
            if found.is_empty() {
                let racks: BTreeSet<&str> = observed.brokers.values().map(String::as_str).collect();
                let known = racks.into_iter().collect::<Vec<_>>().join(", ");
                return Err(refusal(
                    "UnknownCluster",
                    format!(
                        "no broker of this Kafka runs in Kubernetes cluster {cluster:?}; its brokers run in: {known}"
                    ),
                ));
            }
            Ok(found)
        }
        Drained::Brokers(ids) => {
            let unknown: Vec<i32> = ids
                .iter()
                .filter(|id| !observed.brokers.contains_key(id))
                .copied()
                .collect();
            if !unknown.is_empty() {
                let known: Vec<i32> = observed.brokers.keys().copied().collect();
                return Err(refusal(
                    "UnknownBroker",
                    format!(
                        "node IDs {unknown:?} are not brokers of this Kafka; its brokers are {known:?}"
                    ),
                ));
            }
            Ok(ids.clone())
        }
    }
}

/// The placement the completed drain `name` recorded, if it is a drain of the same Kafka.
async fn recorded_placement(
    ctx: &Context,
    op: &KafkaOperation,
    name: &str,
) -> Result<Result<restore::Placement, Refusal>, Error> {
    let api: Api<KafkaOperation> =
        Api::namespaced(ctx.client.clone(), &op.namespace().unwrap_or_default());
    let Some(drain) = api.get_opt(name).await? else {
        let message = format!(
            "there is no operation {name} in this namespace to undo; name a completed drain in .spec.undrain.drain"
        );
        return Ok(Err(refusal("DrainNotFound", message)));
    };
    let cluster = |o: &KafkaOperation| o.labels().get(names::CLUSTER).cloned();
    if drain.spec.drain.is_none() || cluster(&drain) != cluster(op) {
        let message = format!(
            "operation {name} is not a drain of the same Kafka; name a completed drain of it in .spec.undrain.drain"
        );
        return Ok(Err(refusal("NotADrain", message)));
    }
    let drain_status = drain.status.clone().unwrap_or_default();
    if drain_status.phase.as_deref() != Some(phase::COMPLETED) {
        let message = format!(
            "drain {name} is {}, not Completed; undo a drain once it has completed (abort one that is running instead)",
            drain_status.phase.as_deref().unwrap_or("not started")
        );
        return Ok(Err(refusal("DrainNotCompleted", message)));
    }
    Ok(spec::decode(&drain_status).map_err(|m| refusal("InvalidPlacement", m)))
}

/// The first look (pure): the plan goes into the status; a dry run ends there, anything else
/// starts (a drain records the placement its undrain restores).
fn start(
    dry_run: bool,
    mut status: KafkaOperationStatus,
    intent: &Intent,
    observed: &Observed,
    plan: &Plan,
    left_alone: Vec<String>,
    rate: u64,
) -> Outcome {
    let summary = PlanSummary {
        partitions: plan.moves.len() as i64,
        leadership_changes: plan.leadership.len() as i64,
        bytes: i64::try_from(plan.bytes()).unwrap_or(i64::MAX),
        seconds_at_throttle: i64::try_from(plan.seconds_at(rate)).unwrap_or(i64::MAX),
        left_alone,
    };
    let described = describe(&summary, rate);
    status.plan = Some(summary);
    status.replication_throttle = Some(i64::try_from(rate).unwrap_or(i64::MAX));
    status.partitions_left = Some((plan.moves.len() + plan.leadership.len()) as i64);
    if dry_run {
        status.phase = Some(phase::PLANNED.to_owned());
        let planned = Condition::new(condition::READY, condition::TRUE)
            .with_reason("Planned")
            .with_message(format!("dry run: {described}; nothing was changed"));
        return Outcome::write(status, planned, Action::await_change());
    }
    if let Intent::Drain(drained) = intent {
        let drained = drained_brokers(drained, observed).unwrap_or_default();
        let before = observed
            .partitions
            .iter()
            .filter(|p| p.replicas.iter().any(|r| drained.contains(r)))
            .map(|p| ((p.topic.clone(), p.partition), p.replicas.clone()))
            .collect();
        status.placement = spec::encode(&before);
        status.drained_brokers = drained.into_iter().collect();
    }
    status.phase = Some(phase::RUNNING.to_owned());
    status.started_at = Some(now());
    tracing::info!(%described, "operation started");
    let running = not_ready("Running", described);
    Outcome::write(status, running, Action::requeue(Duration::ZERO))
}

fn describe(s: &PlanSummary, rate: u64) -> String {
    let mut text = format!(
        "{} partition(s) move, {} bytes, about {} s at {} bytes/s per broker; {} leadership change(s) first",
        s.partitions, s.bytes, s.seconds_at_throttle, rate, s.leadership_changes
    );
    if !s.left_alone.is_empty() {
        text.push_str(&format!("; left alone: {}", s.left_alone.join(", ")));
    }
    text
}

/// A running operation's wait: while its batch is in flight it waits; once the batch is done
/// its throttle is lifted; reassignments it did not start are waited for too.
async fn settle(
    status: &mut KafkaOperationStatus,
    admin: &AdminClient,
    moving: &BTreeSet<String>,
) -> Result<Option<Outcome>, Error> {
    let in_flight = status
        .in_flight
        .iter()
        .filter(|p| moving.contains(*p))
        .count();
    if in_flight > 0 {
        let batch = status.batches.unwrap_or(0);
        let message = format!("{in_flight} partition(s) of batch {batch} still moving");
        let still = not_ready("Moving", message);
        return Ok(Some(Outcome::write(
            status.clone(),
            still,
            Action::requeue(POLL),
        )));
    }
    if !status.in_flight.is_empty() || !status.throttled_brokers.is_empty() {
        steps::unthrottle(admin, &status.throttled_topics, &status.throttled_brokers).await?;
        status.in_flight.clear();
        status.throttled_topics.clear();
        status.throttled_brokers.clear();
    }
    if !moving.is_empty() {
        let message = format!(
            "waiting for {} reassignment(s) this operation did not start",
            moving.len()
        );
        let waiting = not_ready("OtherReassignments", message);
        return Ok(Some(Outcome::write(
            status.clone(),
            waiting,
            Action::requeue(WAIT),
        )));
    }
    Ok(None)
}

/// One step of a running operation that has nothing in flight: move leadership, start the
/// next batch, or finish.
async fn advance(
    mut status: KafkaOperationStatus,
    admin: AdminClient,
    observed: &Observed,
    plan: Plan,
    rate: u64,
) -> Result<Outcome, Error> {
    status.partitions_left = Some((plan.moves.len() + plan.leadership.len()) as i64);
    if !plan.leadership.is_empty() {
        // Elections leave nothing behind: taken before the status says how they went.
        let not_yet = steps::lead(&admin, &plan.leadership, &observed.partitions).await?;
        let mut message = format!(
            "moving the leadership of {} partition(s)",
            plan.leadership.len()
        );
        if !not_yet.is_empty() {
            message.push_str(&format!("; not elected yet: {}", not_yet.join(", ")));
        }
        let next = Action::requeue(if not_yet.is_empty() { POLL } else { WAIT });
        return Ok(Outcome::write(status, not_ready("Leading", message), next));
    }
    let max_bytes = rate.saturating_mul(BATCH_SECONDS);
    if let Some(batch) = plan.batches(BATCH_PARTITIONS, max_bytes).into_iter().next() {
        let mut throttle = throttle(&batch);
        // A broker that is gone (a forgotten cluster's) copies nothing and cannot be asked.
        throttle
            .brokers
            .retain(|b| observed.brokers.contains_key(b));
        status.throttled_topics = throttle.topics.keys().cloned().collect();
        status.throttled_brokers = throttle.brokers.iter().copied().collect();
        status.in_flight = batch
            .iter()
            .map(|m| steps::name(&m.topic, m.partition))
            .collect();
        let number = status.batches.unwrap_or(0) + 1;
        status.batches = Some(number);
        let message = format!("batch {number}: moving {} partition(s)", batch.len());
        return Ok(Outcome {
            then: Some(Then::StartBatch {
                admin,
                batch,
                throttle,
                rate,
            }),
            ..Outcome::write(status, not_ready("Moving", message), Action::requeue(POLL))
        });
    }
    if !plan.unsafe_partitions.is_empty() {
        let message = format!(
            "waiting for {} to be back in sync (at least min.insync.replicas replicas, or every replica of a partition that has fewer) before moving them",
            plan.unsafe_partitions.join(", ")
        );
        let waiting = not_ready("PartitionsNotInSync", message);
        return Ok(Outcome::write(status, waiting, Action::requeue(WAIT)));
    }
    status.phase = Some(phase::COMPLETED.to_owned());
    status.completed_at = Some(now());
    status.partitions_left = Some(0);
    tracing::info!("operation completed");
    let mut done = Condition::new(condition::READY, condition::TRUE).with_reason("Completed");
    if !plan.lost_partitions.is_empty() {
        done = done.with_message(format!(
            "completed; offline because no in-sync replica survived: {}",
            plan.lost_partitions.join(", ")
        ));
    }
    Ok(Outcome::write(status, done, Action::await_change()))
}

/// Stops at a consistent point: reassignments in flight are cancelled (those partitions keep
/// their previous replicas), the throttle is lifted, and nothing else is undone.
async fn abort(
    ctx: &Context,
    mut status: KafkaOperationStatus,
    kafka_ref: &KafkaRef,
    kafka: &Arc<kstretch_api::Kafka>,
) -> Result<Outcome, Error> {
    let cancelled = status.in_flight.len();
    if cancelled > 0 || !status.throttled_brokers.is_empty() {
        let admin: AdminClient = clusters::admin_of::<Error>(&ctx.access, kafka_ref, kafka).await?;
        let partitions: Vec<(String, i32)> = status
            .in_flight
            .iter()
            .filter_map(|p| {
                let (topic, partition) = p.rsplit_once('-')?;
                Some((topic.to_owned(), partition.parse().ok()?))
            })
            .collect();
        steps::cancel(&admin, &partitions).await?;
        steps::unthrottle(&admin, &status.throttled_topics, &status.throttled_brokers).await?;
    }
    status.in_flight.clear();
    status.throttled_topics.clear();
    status.throttled_brokers.clear();
    status.phase = Some(phase::ABORTED.to_owned());
    status.completed_at = Some(now());
    let message = format!(
        "aborted after {} batch(es); {cancelled} reassignment(s) in flight were cancelled and keep their previous replicas",
        status.batches.unwrap_or(0)
    );
    tracing::info!(%message, "operation aborted");
    let aborted = not_ready("Aborted", message);
    Ok(Outcome::write(status, aborted, Action::await_change()))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use kstretch_core::movement::Partition;

    use super::*;

    fn observed() -> Observed {
        let partition = |p: i32, replicas: &[i32]| Partition {
            topic: "orders".to_owned(),
            partition: p,
            replicas: replicas.to_vec(),
            isr: replicas.iter().copied().collect(),
            leader: replicas.first().copied(),
            size: 10,
            min_isr: 1,
        };
        let brokers = BTreeMap::from([
            (1, "alpha".to_owned()),
            (2, "alpha".to_owned()),
            (3, "beta".to_owned()),
        ]);
        Observed {
            partitions: vec![partition(0, &[1, 3]), partition(1, &[2, 1])],
            registered: brokers.clone(),
            brokers,
        }
    }

    #[test]
    fn a_forget_replaces_the_fenced_brokers_of_its_cluster_and_names_what_is_lost() {
        let mut observed = observed();
        // Broker 3 (beta) is fenced: registered, not live; broker 4 (beta) was never seen.
        observed.brokers.remove(&3);
        observed.partitions.push(Partition {
            topic: "gone".to_owned(),
            partition: 0,
            replicas: vec![3, 4],
            isr: BTreeSet::from([3]),
            leader: None,
            size: 1,
            min_isr: 1,
        });
        let (plan, left) = forget_plan("beta", &BTreeSet::from([4]), &observed)
            .unwrap_or_else(|r| panic!("{}", r.message));
        assert_eq!(plan.moves.len(), 1, "{plan:?}");
        assert_eq!(plan.moves[0].to, vec![1, 2]);
        assert_eq!(left, ["gone-0 (lost: no in-sync replica survived)"]);
        // Too few survivors for a partition's replication factor: refused, saying so.
        observed.brokers.remove(&2);
        observed.registered.remove(&2);
        let r = forget_plan("beta", &BTreeSet::new(), &observed)
            .err()
            .unwrap();
        assert_eq!(r.reason, "NotEnoughBrokers");
        assert!(r.message.contains("survive cluster beta"), "{}", r.message);
    }

    #[test]
    fn a_forget_waits_while_a_surviving_broker_is_fenced_but_not_for_lost_ones() {
        let forget = Intent::Forget {
            cluster: "beta".to_owned(),
            node_ids: BTreeSet::from([4]),
        };
        let mut observed = observed();
        assert_eq!(survivors_fenced(&forget, &observed), None);
        // Beta's broker 3 fenced, and 4 (recorded, never registered): lost, not waited for.
        observed.brokers.remove(&3);
        assert_eq!(survivors_fenced(&forget, &observed), None);
        // Alpha's broker 2 fenced (restarting after a quorum recovery): waited for.
        observed.brokers.remove(&2);
        let why = survivors_fenced(&forget, &observed).unwrap();
        assert!(
            why.contains("brokers [2], which survive cluster beta"),
            "{why}"
        );
        // Gone from the registrations altogether: nothing to wait for (the plan says whether
        // the rest can hold every partition).
        observed.registered.remove(&2);
        assert_eq!(survivors_fenced(&forget, &observed), None);
        // Other operations plan with the brokers that are live.
        let spread = Intent::Spread { topics: Vec::new() };
        observed.registered.insert(2, "alpha".to_owned());
        assert_eq!(survivors_fenced(&spread, &observed), None);
    }

    fn operation(name: &str, spec: serde_json::Value, phase: Option<&str>) -> KafkaOperation {
        let mut op: KafkaOperation = serde_json::from_value(serde_json::json!({
            "apiVersion": "kstretch.io/v1alpha1", "kind": "KafkaOperation",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": spec,
        }))
        .unwrap();
        op.status = phase.map(|p| KafkaOperationStatus {
            phase: Some(p.to_owned()),
            ..Default::default()
        });
        op
    }

    #[test]
    fn a_forget_waits_for_a_recovery_under_way_but_not_for_one_ended_refused_or_dry() {
        let forget = operation(
            "forget-beta",
            serde_json::json!({"forget": {"cluster": "beta"}}),
            None,
        );
        let recovery = |name: &str, dry: bool, phase: Option<&str>| {
            let spec = serde_json::json!({"recoverQuorum": {}, "dryRun": dry});
            operation(name, spec, phase)
        };
        for phase in [None, Some(phase::PENDING), Some(phase::RUNNING)] {
            let ops = [forget.clone(), recovery("r", false, phase)];
            assert_eq!(recovering(&ops).as_deref(), Some("r"), "{phase:?}");
        }
        for (dry, phase) in [
            (true, None),
            (false, Some(phase::COMPLETED)),
            (false, Some(phase::REFUSED)),
            (false, Some(phase::ABORTED)),
        ] {
            let ops = [forget.clone(), recovery("r", dry, phase)];
            assert_eq!(recovering(&ops), None, "dry run {dry}, {phase:?}");
        }
    }

    /// The plan of a drain that has not started yet.
    fn fresh(drained: &Drained) -> Result<(Plan, Vec<String>), Refusal> {
        drain_plan(drained, &observed(), &KafkaOperationStatus::default())
    }

    fn cluster(alias: &str) -> Drained {
        Drained::Cluster(alias.to_owned())
    }

    #[test]
    fn chosen_brokers_are_drained_and_an_unknown_one_is_refused() {
        let brokers = Drained::Brokers(BTreeSet::from([1]));
        let (plan, _) = fresh(&brokers).unwrap_or_else(|r| panic!("{}", r.message));
        assert_eq!(plan.moves.len(), 2, "{plan:?}");
        assert!(plan.moves.iter().all(|m| !m.to.contains(&1)), "{plan:?}");
        let unknown = Drained::Brokers(BTreeSet::from([1, 7]));
        let r = fresh(&unknown).err().unwrap();
        assert_eq!(r.reason, "UnknownBroker");
        assert!(
            r.message.contains("[7]") && r.message.contains("[1, 2, 3]"),
            "{}",
            r.message
        );
    }

    #[test]
    fn a_drain_moves_the_replicas_of_the_clusters_brokers_only() {
        let (plan, left) = fresh(&cluster("beta")).unwrap_or_else(|r| panic!("{}", r.message));
        assert_eq!(plan.moves.len(), 1);
        assert_eq!(plan.moves[0].to, vec![1, 2]);
        assert!(left.is_empty());
    }

    #[test]
    fn a_first_look_records_the_plan_and_a_drain_its_placement_before_anything_moves() {
        let drain = Intent::Drain(cluster("beta"));
        let (plan, left) = fresh(&cluster("beta")).unwrap_or_else(|r| panic!("{}", r.message));
        let ready = |o: &Outcome| {
            let c = o.ready.clone().unwrap();
            (c.status, c.reason.unwrap_or_default())
        };
        // A dry run: planned, nothing started, nothing to take in Kafka.
        let dry = start(
            true,
            KafkaOperationStatus::default(),
            &drain,
            &observed(),
            &plan,
            left.clone(),
            1000,
        );
        assert_eq!(dry.status.phase.as_deref(), Some(phase::PLANNED));
        assert_eq!(ready(&dry), ("True".to_owned(), "Planned".to_owned()));
        assert!(dry.then.is_none() && dry.status.placement.is_empty());
        assert_eq!(dry.status.plan.as_ref().unwrap().partitions, 1);
        // Started: running, with the drained brokers and their partitions' placement recorded
        // for the undrain, and a look again at once.
        let started = start(
            false,
            KafkaOperationStatus::default(),
            &drain,
            &observed(),
            &plan,
            left,
            1000,
        );
        assert_eq!(started.status.phase.as_deref(), Some(phase::RUNNING));
        assert_eq!(ready(&started), ("False".to_owned(), "Running".to_owned()));
        assert_eq!(started.status.drained_brokers, [3]);
        assert!(!started.status.placement.is_empty());
        assert!(started.status.started_at.is_some() && started.then.is_none());
        assert_eq!(started.next, Action::requeue(Duration::ZERO));
    }

    #[test]
    fn a_running_drain_keeps_the_brokers_it_started_with() {
        let status = KafkaOperationStatus {
            drained_brokers: vec![2],
            ..Default::default()
        };
        let (plan, _) = drain_plan(&cluster("beta"), &observed(), &status)
            .unwrap_or_else(|r| panic!("{}", r.message));
        assert_eq!(plan.moves.len(), 1);
        assert_eq!(plan.moves[0].partition, 1);
    }

    #[test]
    fn a_cluster_without_brokers_or_too_few_left_is_refused_naming_why() {
        let r = fresh(&cluster("gamma")).err().unwrap();
        assert_eq!(r.reason, "UnknownCluster");
        assert!(
            r.message.contains("\"gamma\"") && r.message.contains("alpha, beta"),
            "{}",
            r.message
        );
        let r = fresh(&cluster("alpha")).err().unwrap();
        assert_eq!(r.reason, "NotEnoughBrokers");
        assert!(
            r.message.contains("draining cluster alpha"),
            "{}",
            r.message
        );
    }
}

/// The steps that need no Kafka, against [`crate::testing::Apiserver`]: refusals, waiting for
/// a turn, an operation that ended.
#[cfg(test)]
mod against_the_apiserver {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::{Value, json};

    use super::*;
    use crate::testing::{Apiserver, controller_context, status_path};

    fn kafka() -> Kafka {
        serde_json::from_value(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "Kafka",
            "metadata": {"name": "my-cluster", "namespace": "ns"},
            "spec": {"kafka": {"listeners": []}}
        }))
        .unwrap()
    }

    fn operation(name: &str, created: &str, spec: Value, status: Value) -> KafkaOperation {
        serde_json::from_value(json!({
            "apiVersion": "kstretch.io/v1alpha1", "kind": "KafkaOperation",
            "metadata": {"name": name, "namespace": "ns", "creationTimestamp": created,
                         "labels": {"strimzi.io/cluster": "my-cluster"}},
            "spec": spec, "status": status
        }))
        .unwrap()
    }

    /// One step of `op` with `held` (other operations) in the apiserver and `kafkas` in
    /// central's store: the action and the status written, if any.
    async fn stepped(
        op: &KafkaOperation,
        held: &[KafkaOperation],
        kafkas: &[Kafka],
    ) -> (Action, Option<Value>) {
        let apiserver = Apiserver::default();
        apiserver.hold(op);
        for o in held {
            apiserver.hold(o);
        }
        let ctx = controller_context(&apiserver, kafkas);
        let pass = apply(Arc::new(op.clone()), Arc::new(ctx));
        let action = tokio::time::timeout(Duration::from_secs(2), pass)
            .await
            .expect("the step ended")
            .unwrap();
        let path = status_path::<KafkaOperation>("ns", &op.name_any());
        let written = apiserver
            .writes()
            .into_iter()
            .find(|w| w.path == path)
            .map(|w| w.body["status"].clone());
        (action, written)
    }

    fn ready(status: &Value) -> &Value {
        status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap()
    }

    #[tokio::test]
    async fn an_operation_on_a_kafka_that_does_not_exist_is_refused() {
        let op = operation(
            "drain-beta",
            "2026-11-27T10:00:00Z",
            json!({"drain": {"cluster": "beta"}}),
            json!(null),
        );
        let (_, written) = stepped(&op, &[], &[]).await;
        let written = written.expect("a status");
        assert_eq!(written["phase"], "Refused");
        assert_eq!(ready(&written)["reason"], "KafkaNotFound");
    }

    #[tokio::test]
    async fn a_forget_of_a_cluster_the_kafka_does_not_name_waits_naming_the_command() {
        let op = operation(
            "my-cluster-forget-beta",
            "2026-11-27T10:00:00Z",
            json!({"forget": {"cluster": "beta"}}),
            json!(null),
        );
        let (action, written) = stepped(&op, &[], &[kafka()]).await;
        assert_eq!(action, Action::requeue(WAIT));
        let written = written.expect("a status");
        assert_eq!(written["phase"], "Pending");
        assert_eq!(ready(&written)["reason"], "ClusterNotForgotten");
        assert!(
            ready(&written)["message"]
                .as_str()
                .unwrap()
                .contains("kstretch forget beta --kafka my-cluster"),
            "{written}"
        );
    }

    #[tokio::test]
    async fn a_second_operation_on_one_kafka_waits_for_the_first() {
        let first = operation(
            "drain-beta",
            "2026-11-27T10:00:00Z",
            json!({"drain": {"cluster": "beta"}}),
            json!({"phase": "Running"}),
        );
        let second = operation(
            "spread",
            "2026-11-27T10:05:00Z",
            json!({"spread": {}}),
            json!(null),
        );
        let (action, written) = stepped(&second, &[first], &[kafka()]).await;
        assert_eq!(action, Action::requeue(WAIT));
        let written = written.expect("a status");
        assert_eq!(written["phase"], "Pending");
        assert_eq!(
            ready(&written)["message"],
            "waiting for operation drain-beta on Kafka ns/my-cluster to end"
        );
    }

    #[tokio::test]
    async fn an_operation_that_ended_is_left_alone() {
        let done = operation(
            "drain-beta",
            "2026-11-27T10:00:00Z",
            json!({"drain": {"cluster": "beta"}}),
            json!({"phase": "Completed"}),
        );
        assert_eq!(
            stepped(&done, &[], &[kafka()]).await,
            (Action::await_change(), None)
        );
    }
}
