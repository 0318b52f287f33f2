//! One reconciliation of one `Kafka`, a pipeline of stages, each in its own file:
//! [`plan`] (resolve and validate the pools, the CAs, the cluster ID and node IDs) →
//! [`guard`] (removals that are not safe now wait) → [`publish`] (every member cluster's
//! objects, built purely, handed to the agents) → [`pools`] (the pools' statuses) →
//! [`kafka_side`] (the quorum, one pod rolled, removed nodes unregistered) → [`report`] (the
//! `Kafka`'s status and when to look again). A stage that ends the reconciliation early says
//! with which [`Action`]; a refusal ([`refuse`]) is one such end.

/// The value of a stage that goes on; else the caller (a stage too) ends where the stage did.
macro_rules! proceed {
    ($flow:expr) => {
        match $flow? {
            std::ops::ControlFlow::Continue(value) => value,
            std::ops::ControlFlow::Break(action) => return Ok(std::ops::ControlFlow::Break(action)),
        }
    };
}

mod guard;
mod kafka_side;
mod plan;
mod pools;
mod publish;
mod refuse;
mod report;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use kstretch_api::{Kafka, KafkaNodePool, KafkaStatus, names};
use kstretch_core::kraft;
use kstretch_core::node_ids::Role;
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};

use super::checks::KafkaAccess;
use super::error::Error;
use super::metrics::KafkaMetrics;
use super::resolve::{self, Members};
use super::status;
use crate::link::restart::Restarts;
use crate::link::{Agents, Owner, OwnerKind, Owners};
use crate::pki;

/// Requeue while something is under way (pods starting, a roll, a pending unregistration).
const BUSY_REQUEUE: Duration = Duration::from_secs(5);
/// Requeue of a settled cluster, so Kafka-side drift (registrations) is noticed.
const IDLE_REQUEUE: Duration = Duration::from_secs(300);
/// A refused `Kafka` is checked again after this even without a change: a refusal can come
/// from a stale view of another kind (pools listed by the shared store after the controller's
/// own watch saw them, as after a CRD reinstall), which no later event would correct.
const REFUSED_RECHECK: Duration = Duration::from_secs(30);
/// A scale-down waiting for its brokers' replicas to move is checked against Kafka again this
/// often: moving them changes nothing central watches.
const BLOCKED_RECHECK: Duration = Duration::from_secs(30);
/// A moving pool's leaving nodes are checked again this often: their drain's progress is not
/// something central watches.
const MOVE_RECHECK: Duration = Duration::from_secs(10);
/// The warning of a scale-down refused while its brokers hold partition replicas.
pub(super) const SCALE_DOWN_BLOCKED: &str = "ScaleDownBlocked";

/// What every reconciliation shares.
#[derive(Clone)]
pub struct Context {
    pub client: Client,
    /// The Kafka controller's one Event publisher.
    pub events: kstretch_runtime::events::Events,
    pub pools: Store<KafkaNodePool>,
    pub owners: Owners,
    pub agents: Agents,
    pub restarts: Restarts,
    pub members: Members,
    pub kafka: KafkaAccess,
    pub metrics: KafkaMetrics,
    pub registration_checks: RegistrationChecks,
    /// Consecutive failures per `Kafka`, for [`super::error_policy`].
    pub retries:
        Arc<kstretch_runtime::backoff::Backoff<kube::runtime::reflector::ObjectRef<Kafka>>>,
}

/// When each `Kafka`'s registered nodes were last listed: without a removal to finish, Kafka is
/// asked only every [`IDLE_REQUEUE`], so reconciles stay fast (and quiet) when it is slow or
/// unreachable.
#[derive(Debug, Clone, Default)]
pub struct RegistrationChecks {
    last: Arc<std::sync::Mutex<BTreeMap<Owner, std::time::Instant>>>,
}

impl RegistrationChecks {
    /// Whether a check of `owner` is due now; if so, records it as done now.
    fn due(&self, owner: &Owner) -> bool {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let now = std::time::Instant::now();
        match last.get(owner) {
            Some(at) if now.duration_since(*at) < IDLE_REQUEUE => false,
            _ => {
                last.insert(owner.clone(), now);
                true
            }
        }
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("members", &self.members)
            .finish_non_exhaustive()
    }
}

pub fn owner_of(kafka: &Kafka) -> Owner {
    Owner::of(OwnerKind::Kafka, kafka)
}

fn api(ctx: &Context, kafka: &Kafka) -> kube::Api<Kafka> {
    kube::Api::namespaced(ctx.client.clone(), &kafka.namespace().unwrap_or_default())
}

/// One step of the deletion of a `Kafka`: its objects leave every member cluster on central's
/// explicit word, and the resource goes once every agent confirmed (see [`crate::owned`]).
pub async fn delete(kafka: Arc<Kafka>, ctx: Arc<Context>) -> Result<Action, Error> {
    match crate::owned::delete(ctx.as_ref(), kafka.as_ref()).await? {
        crate::owned::Deletion::Waiting(clusters) => {
            let message = format!(
                "being deleted: waiting for the agents of {} to confirm that its objects are gone (a cluster that never comes back: remove the finalizer {} by hand; its objects stay there, unclaimed)",
                clusters.join(", "),
                names::MEMBER_OBJECTS_FINALIZER
            );
            let mut kafka_status = kafka.status.clone().unwrap_or_default();
            kafka_status.conditions = status::conditions(
                &kafka_status.conditions,
                status::not_ready("DeletionPending", &message),
                &[],
                &status::now(),
            );
            if kafka.status.as_ref() != Some(&kafka_status) {
                status::apply_kafka(&ctx.client, &kafka, kafka_status).await?;
            }
            Ok(Action::requeue(BUSY_REQUEUE))
        }
        crate::owned::Deletion::Released => {
            // The user deleted it: the CA and certificates kstretch generated go with it.
            pki::delete_generated(&ctx.client, &kafka).await?;
            Ok(Action::await_change())
        }
        crate::owned::Deletion::Abandoned => Ok(Action::await_change()),
    }
}

/// Reconciles one `Kafka` that is not being deleted.
pub async fn apply(kafka: Arc<Kafka>, ctx: Arc<Context>) -> Result<Action, Error> {
    crate::owned::claim(ctx.as_ref(), kafka.as_ref()).await?;
    let now = status::now();
    let mut kafka_status = kafka.status.clone().unwrap_or_default();
    kafka_status.observed_generation = kafka.metadata.generation;
    if crate::status::is_paused(kafka.as_ref()) {
        return paused(&ctx, &kafka, kafka_status, &now).await;
    }
    // Pools not listed yet must not read as "no pools".
    if !kstretch_runtime::watch::ready(&ctx.pools).await
        || (kafka_status.cluster_id.is_none() && cache_is_behind(&ctx, &kafka).await?)
    {
        return Ok(Action::requeue(BUSY_REQUEUE));
    }
    let all_pools = ctx.pools.state();
    let mut pass = Pass {
        ctx: &ctx,
        kafka: &kafka,
        pools: resolve::pools_of(&kafka, &all_pools),
        owner: owner_of(&kafka),
        now,
        status: kafka_status,
        warnings: Vec::new(),
    };
    match stages(&mut pass).await? {
        ControlFlow::Continue(action) | ControlFlow::Break(action) => Ok(action),
    }
}

async fn stages(pass: &mut Pass<'_>) -> Flow<Action> {
    let mut plan = proceed!(plan::plan(pass).await);
    proceed!(guard::guard(pass, &mut plan).await);
    let built = proceed!(publish::publish(pass, &mut plan).await);
    let forgotten_done = pools::record(pass, &plan).await?;
    let progress = kafka_side::advance(pass, &plan, &built, &forgotten_done).await?;
    let action = report::report(pass, &plan, &built, progress, &forgotten_done).await?;
    Ok(ControlFlow::Continue(action))
}

/// One reconciliation's working state, handed from stage to stage.
struct Pass<'a> {
    ctx: &'a Context,
    kafka: &'a Kafka,
    /// The `Kafka`'s pools, as the shared store lists them.
    pools: Vec<&'a KafkaNodePool>,
    owner: Owner,
    /// This reconciliation's time, for the conditions it changes.
    now: String,
    /// The status being assembled; written by the stage that ends the pass.
    status: KafkaStatus,
    /// Warning conditions (reason, message) gathered on the way, in the order found.
    warnings: Vec<(String, String)>,
}

/// What a stage gives the next one, or the [`Action`] that ends the reconciliation here.
type Flow<T> = Result<ControlFlow<Action, T>, Error>;

/// A paused `Kafka` changes nothing anywhere: its last desired state stands (or is retained).
async fn paused(
    ctx: &Context,
    kafka: &Kafka,
    mut kafka_status: KafkaStatus,
    now: &str,
) -> Result<Action, Error> {
    let conditions = &kafka_status.conditions;
    kafka_status.conditions = crate::owned::paused(&ctx.owners, &owner_of(kafka), conditions, now)?;
    status::apply_kafka(&ctx.client, kafka, kafka_status).await?;
    Ok(Action::await_change())
}

/// Whether the apiserver holds a cluster ID for `kafka` that the cached copy does not show yet
/// (our own status write of a moment ago): acting on the cached copy would take a new cluster's
/// first voters for a lost status. The watch delivers the newer copy shortly.
async fn cache_is_behind(ctx: &Context, kafka: &Kafka) -> Result<bool, Error> {
    let stored = api(ctx, kafka).get_opt(&kafka.name_any()).await?;
    Ok(stored
        .and_then(|k| k.status)
        .is_some_and(|s| s.cluster_id.is_some()))
}

pub use crate::owned::keep_or_retain;

/// A random UUID as Kafka makes them (cluster and metadata directory IDs).
pub(super) fn random_uuid() -> u128 {
    use ring::rand::{SecureRandom, SystemRandom};
    let mut bytes = [0u8; 16];
    if SystemRandom::new().fill(&mut bytes).is_err() {
        // The OS RNG failing is not recoverable in a meaningful way; fall back to a
        // time-and-counter mix, still unique per cluster.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        bytes = nanos.to_le_bytes();
    }
    kraft::kafka_uuid(bytes)
}

type PoolIdsByName = BTreeMap<String, BTreeSet<i32>>;
type RolesByName = BTreeMap<String, BTreeSet<Role>>;
