//! One reconciliation of one `Kafka`: fetch its pools → resolve and validate (pure) → cluster
//! ID and node IDs → Kafka-side checks of removals → build every member cluster's objects
//! (pure) → publish them to the agents → roll stale pods one at a time → unregister removed
//! nodes → write the `Kafka` and pool statuses.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use kstretch_api::condition::Condition;
use kstretch_api::kafka::{ListenerAddress, ListenerStatus, UsedNodePoolStatus};
use kstretch_api::node_pool::LeavingNodes;
use kstretch_api::{Kafka, KafkaNodePool, KafkaNodePoolStatus, KafkaStatus, names};
use kstretch_core::kraft::{self, REPLICATION_LISTENER};
use kstretch_core::node_ids::{self, Assignments, Role};
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};

use super::addresses::{self, NodeRef};
use super::adopt::{self, Adoption};
use super::answer;
use super::build::{self, Built};
use super::checks::{self, KafkaAccess};
use super::error::Error;
use super::forget;
use super::metrics::KafkaMetrics;
use super::moving;
use super::quorum;
use super::recover;
use super::resolve::{self, ADMIN_BOOTSTRAP_ANNOTATION, Members, Resolved};
use super::roll::{self, NodeView, Reported, Step};
use super::status;
use super::version;
use crate::link::restart::{PodToRestart, Restarts, replaced};
use crate::link::{AgentRecord, Agents, Owner, OwnerKind, Owners, Part};
use crate::pki::{self, CaKind, CertError};

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
/// Warning reason: partitions whose replicas all sit in one Kubernetes cluster.
const REPLICAS_IN_ONE_CLUSTER: &str = "ReplicasInOneCluster";
/// The warning of a scale-down refused while its brokers hold partition replicas.
const SCALE_DOWN_BLOCKED: &str = "ScaleDownBlocked";
/// How long the agent has to answer a restart.
const RESTART_TIMEOUT: Duration = Duration::from_secs(30);

/// What every reconciliation shares.
#[derive(Clone)]
pub struct Context {
    pub client: Client,
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
    let owner = owner_of(&kafka);
    match crate::owned::delete(
        &ctx.client,
        &api(&ctx, &kafka),
        kafka.as_ref(),
        &owner,
        &ctx.owners,
        &ctx.agents,
    )
    .await?
    {
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
    let owner = owner_of(&kafka);
    crate::owned::claim(&api(&ctx, &kafka), kafka.as_ref()).await?;
    let now = status::now();
    let mut kafka_status = kafka.status.clone().unwrap_or_default();
    kafka_status.observed_generation = kafka.metadata.generation;

    if kafka
        .annotations()
        .get(names::PAUSE_RECONCILIATION)
        .is_some_and(|v| v == "true")
    {
        keep_or_retain(&ctx.owners, &owner)?;
        kafka_status.conditions = status::conditions(
            &kafka_status.conditions,
            Condition::new(kstretch_api::condition::READY, "Unknown")
                .with_reason("ReconciliationPaused")
                .with_message(format!(
                    "reconciliation is paused by the annotation {}=true; nothing is changed until it is removed",
                    names::PAUSE_RECONCILIATION
                )),
            &[],
            &now,
        );
        status::apply_kafka(&ctx.client, &kafka, kafka_status).await?;
        return Ok(Action::await_change());
    }

    // Pools not listed yet must not read as "no pools".
    if ctx.pools.wait_until_ready().await.is_err() {
        return Ok(Action::requeue(BUSY_REQUEUE));
    }
    if kafka_status.cluster_id.is_none() && cache_is_behind(&ctx, &kafka).await? {
        return Ok(Action::requeue(BUSY_REQUEUE));
    }
    let all_pools = ctx.pools.state();
    let pools = resolve::pools_of(&kafka, &all_pools);
    let refuser = Refuser {
        ctx: &ctx,
        kafka: &kafka,
        pools: &pools,
        owner: &owner,
        now: &now,
    };
    let connected: BTreeSet<String> = ctx.agents.connected().into_iter().collect();
    let resolved = resolve::resolve(&kafka, &pools, &ctx.members).and_then(|r| {
        let unreachable = resolve::moves_to_unreachable(&r, &pools, &connected);
        if unreachable.is_empty() {
            Ok(r)
        } else {
            Err(unreachable)
        }
    });
    let mut resolved = match resolved {
        Ok(r) => r,
        Err(invalid) => {
            let reason = invalid.first().map_or("Invalid", |i| i.reason());
            let message = invalid
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ");
            return refuser.refuse(kafka_status, reason, &message).await;
        }
    };

    let forgotten = match forget::forgotten(&kafka, &ctx.members) {
        Ok(f) => f,
        Err(message) => {
            return refuser
                .refuse(kafka_status, "InvalidAnnotation", &message)
                .await;
        }
    };
    if let Some(action) = adopt_what_runs(
        &ctx,
        &kafka,
        &owner,
        &mut resolved,
        &forgotten,
        &mut kafka_status,
        &now,
    )
    .await?
    {
        return Ok(action);
    }
    // Refused before anything is built: a version Kafka cannot take never reaches a pod.
    let target = match version::target(&kafka, &kafka_status) {
        Ok(target) => target,
        Err(e) => {
            let message = e.to_string();
            return refuser.refuse(kafka_status, e.reason(), &message).await;
        }
    };
    let wanted_quorum = match quorum::wanted(&kafka) {
        Ok(mode) => mode,
        Err(message) => {
            return refuser
                .refuse(kafka_status, "InvalidAnnotation", &message)
                .await;
        }
    };

    // The CAs (the clients CA exists for KafkaUsers, as in Strimzi), and central's client
    // identity under the cluster CA for every admin connection.
    let (ca, clients_ca) = match both_cas(&ctx.client, &kafka).await {
        Ok(cas) => cas,
        Err(CertError::Refused(r)) => {
            return refuser.refuse(kafka_status, r.reason, &r.message).await;
        }
        Err(CertError::Kube(e)) => return Err(e.into()),
    };
    let namespace = kafka.namespace().unwrap_or_default();
    let admin_tls = match resolve::admin_uses_tls(&kafka) {
        Ok(false) => None,
        Ok(true) => match ctx.kafka.tls_for(&namespace, &kafka.name_any(), &ca) {
            Ok(tls) => Some(tls),
            Err(r) => return refuser.refuse(kafka_status, r.reason, &r.message).await,
        },
        Err(message) => {
            return refuser
                .refuse(kafka_status, "InvalidAnnotation", &message)
                .await;
        }
    };

    // A quorum recovery exists only for a Kafka that forgot a cluster holding its majority.
    let recovering = if forgotten.is_empty() {
        None
    } else {
        recover::running(&ctx, &kafka).await?
    };
    // Without a quorum nothing in Kafka can change: what needs the controller waits instead of
    // timing out, and the `Kafka` says what to do.
    let headless = recover::headless(&kafka, pools.iter().copied());
    forget::freeze(&mut resolved, &forgotten);
    let pool_ids: Vec<_> = resolved.pools.iter().map(|p| p.ids.clone()).collect();
    let mut assignments = match node_ids::assign(&pool_ids) {
        Ok(a) => a,
        Err(e) => {
            let message = e.to_string();
            return refuser.refuse(kafka_status, e.reason(), &message).await;
        }
    };
    let lost = forget::split(&mut resolved, &mut assignments, &forgotten);
    let mut warnings: Vec<(String, String)> = assignments
        .warnings
        .iter()
        .map(|w| ("NodeIdAnnotationIgnored".to_owned(), w.clone()))
        .collect();

    let bootstrap = admin_bootstrap(&kafka, &resolved)
        .or_else(|| running_brokers_bootstrap(&ctx, &kafka, &resolved, &assignments));
    if let Some(b) = &bootstrap {
        ctx.kafka.secure(b, admin_tls.as_ref());
    }
    let (mut ids, mut roles) = desired_ids_and_roles(&resolved, &assignments);
    // The voters the quorum moves toward: the controllers asked for, not those kept for now.
    let desired_controllers = controllers_of(&ids, &roles);

    // The cluster ID, and a new cluster's first voters: chosen once and stored before any node
    // can be formatted with them.
    let cluster_id = match kafka_status
        .cluster_id
        .clone()
        .or_else(|| resolved.pools.iter().find_map(|p| p.cluster_id.clone()))
    {
        Some(id) => id,
        None => {
            let id = new_cluster_id();
            kafka_status.cluster_id = Some(id.clone());
            if wanted_quorum == kraft::QuorumMode::Dynamic {
                quorum::start_dynamic(&mut kafka_status, &desired_controllers, random_uuid);
            }
            status::apply_kafka(&ctx.client, &kafka, kafka_status.clone()).await?;
            id
        }
    };
    kafka_status.cluster_id = Some(cluster_id.clone());
    if let Some(pool) = resolved
        .pools
        .iter()
        .find(|p| p.cluster_id.as_ref().is_some_and(|id| *id != cluster_id))
    {
        let message = format!(
            "KafkaNodePool {} belongs to Kafka cluster ID {} but Kafka {} has cluster ID {cluster_id}; a pool cannot move between Kafka clusters: delete and recreate the pool (its data is not usable in this cluster)",
            pool.name,
            pool.cluster_id.as_deref().unwrap_or_default(),
            kafka.name_any()
        );
        return refuser
            .refuse(kafka_status, "ClusterIdMismatch", &message)
            .await;
    }
    hold_voters(
        &kafka_status,
        &resolved,
        &assignments,
        &mut ids,
        &mut roles,
        &mut warnings,
    );
    guard_removals(
        &ctx,
        &kafka,
        &resolved,
        &assignments,
        &connected,
        bootstrap.as_deref(),
        &mut ids,
        &mut roles,
        &mut warnings,
    )
    .await;
    let mut effective = resolved.clone();
    for pool in &mut effective.pools {
        if let Some(r) = roles.get(&pool.name) {
            pool.roles = r.clone();
        }
    }
    let draining = moving::keep_leaving(
        &ctx,
        &kafka,
        &mut effective,
        &kafka_status,
        &connected,
        bootstrap.as_deref(),
        &mut ids,
        &mut warnings,
    )
    .await;

    // Derived names must fit once the pools have their new IDs.
    if let Some((pool, id)) = effective.pools.iter().find_map(|p| {
        ids.get(&p.name)?
            .iter()
            .find(|id| kraft::pod_name(&kafka.name_any(), &p.name, **id).len() > 63)
            .map(|id| (p.name.clone(), *id))
    }) {
        let name = kraft::pod_name(&kafka.name_any(), &pool, id);
        let message = format!(
            "the pod name {name} derived from Kafka {} and KafkaNodePool {pool} has {} characters, more than 63: shorten the Kafka or the pool name",
            kafka.name_any(),
            name.len()
        );
        return refuser.refuse(kafka_status, "NameTooLong", &message).await;
    }

    if let Some(per_node) = effective.per_node.clone() {
        let pending = address_nodes(&ctx, &kafka, &mut effective, &ids, &per_node);
        if !pending.is_empty() {
            let fresh = kafka_status.registered_node_ids.is_empty()
                && pools
                    .iter()
                    .all(|p| p.status.as_ref().is_none_or(|s| s.node_ids.is_empty()));
            publish_services_first(&ctx, &kafka, &owner, &effective, &ids, fresh)?;
            let message = format!(
                "waiting for the addresses of the per-node Services: {}",
                pending.join("; ")
            );
            kafka_status.conditions = status::conditions(
                &kafka_status.conditions,
                status::not_ready("AddressPending", message),
                &warnings,
                &now,
            );
            status::apply_kafka(&ctx.client, &kafka, kafka_status).await?;
            return Ok(Action::requeue(BUSY_REQUEUE));
        }
    }

    let initial_voters = quorum::initial_voters(&kafka_status);

    // Every node's certificate, for every address it now has.
    let model = build::cluster_model(
        &kafka,
        &effective,
        &ids,
        &cluster_id,
        quorum::mode(&kafka_status),
    );
    let hosts = match build::node_hostnames(&model) {
        Ok(hosts) => hosts,
        Err(e) => {
            let message = e.to_string();
            return refuser.refuse(kafka_status, e.reason(), &message).await;
        }
    };
    let clients_trusted = model
        .needs_clients_ca()
        .then_some(clients_ca.trusted.as_str());
    let certs = match certificates(
        &ctx.client,
        &kafka,
        &ca,
        clients_trusted,
        &hosts,
        &effective,
    )
    .await
    {
        Ok(certs) => certs,
        Err(CertError::Refused(r)) => {
            return refuser.refuse(kafka_status, r.reason, &r.message).await;
        }
        Err(CertError::Kube(e)) => return Err(e.into()),
    };

    let mut built = match build::build(&kafka, &effective, &ids, model, &certs, &initial_voters) {
        Ok(b) => b,
        Err(e) => {
            let message = e.to_string();
            return refuser.refuse(kafka_status, e.reason(), &message).await;
        }
    };
    let kafka_name = kafka.name_any();
    build::add_ca_copies(
        &mut built,
        &kafka,
        &ctx.members.own,
        &[
            (CaKind::Cluster.cert_secret(&kafka_name), &ca.public),
            (CaKind::Clients.cert_secret(&kafka_name), &clients_ca.public),
        ],
    );
    warnings.extend(
        built
            .warnings
            .iter()
            .map(|w| ("ConfigurationIgnored".to_owned(), w.clone())),
    );
    if let Some(r) = &recovering {
        recover::equip(&ctx, &kafka, r, &mut built, &mut warnings);
    }
    ctx.owners
        .put(owner.clone(), Part::Objects(built.objects.clone()))?;

    // Pool statuses: the IDs are recorded as soon as they are desired (Strimzi does the same),
    // so an ID is never handed out twice.
    for pool in &pools {
        let name = pool.name_any();
        let Some(r) = effective.pools.iter().find(|p| p.name == name) else {
            continue;
        };
        let node_ids: Vec<i32> = ids.get(&name).into_iter().flatten().copied().collect();
        let recorded = pool.status.as_ref().map(|s| s.node_ids.clone());
        let (added, removed) =
            node_ids::id_changes(recorded.as_deref().unwrap_or_default(), &node_ids);
        let pod = |id: &i32| kraft::pod_name(&kafka.name_any(), &name, *id);
        if !added.is_empty() {
            let pods: Vec<String> = added.iter().map(pod).collect();
            kstretch_runtime::events::about(
                &ctx.client,
                "kstretch-central",
                *pool,
                false,
                "NodesAdded",
                "Scale",
                format!(
                    "nodes {added:?} added to pool {name}: pods {}",
                    pods.join(", ")
                ),
            );
        }
        if !removed.is_empty() {
            kstretch_runtime::events::about(
                &ctx.client,
                "kstretch-central",
                *pool,
                false,
                "NodesRemoved",
                "Scale",
                format!(
                    "nodes {removed:?} removed from pool {name}; their pods stop once the agents apply the change, and they are unregistered from KRaft when gone"
                ),
            );
        }
        let existing = pool
            .status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default();
        let pool_status = KafkaNodePoolStatus {
            conditions: status::conditions(&existing, Condition::ready(), &[], &now),
            observed_generation: r.generation,
            replicas: Some(node_ids.len() as i32),
            node_ids,
            cluster_id: Some(cluster_id.clone()),
            cluster_alias: Some(r.alias.clone()),
            leaving: r.leaving.as_ref().map(|l| LeavingNodes {
                cluster_alias: l.alias.clone(),
                node_ids: l.ids.iter().copied().collect(),
            }),
            roles: resolve::process_roles(&r.roles),
            label_selector: Some(format!(
                "{}={},{}={}-kafka,{}=Kafka,{}={name}",
                names::CLUSTER,
                kafka.name_any(),
                names::NAME,
                kafka.name_any(),
                names::KIND,
                names::POOL_NAME
            )),
        };
        status::apply_pool(&ctx.client, pool, pool_status).await?;
    }

    let forgotten_done = if forgotten.is_empty() {
        BTreeSet::new()
    } else {
        forget::ensure_operations(&ctx, &kafka, &forgotten, &lost, &mut warnings).await?
    };
    for pool in &pools {
        let name = pool.name_any();
        let Some(l) = lost.iter().find(|l| l.pool == name) else {
            continue;
        };
        if effective.pools.iter().all(|p| p.name != name) {
            let done = forgotten_done.contains(&l.alias);
            let pool_status = forget::pool_status(pool, &lost, done, &now);
            status::apply_pool(&ctx.client, pool, pool_status).await?;
        }
    }

    // What each member cluster's agent last reported, read once for this reconciliation.
    let records: BTreeMap<String, AgentRecord> = built
        .objects
        .keys()
        .filter_map(|alias| ctx.agents.get(alias).map(|r| (alias.clone(), r)))
        .collect();
    warnings.extend(rejected_objects(&records, &kafka));
    // With per-node Services the bootstrap is known only now that their addresses are.
    let bootstrap =
        bootstrap.or_else(|| kraft::bootstrap_servers(&built.cluster, REPLICATION_LISTENER).ok());
    // The topic operator reaches this cluster where the reconciler does.
    if let Some(bootstrap) = &bootstrap {
        ctx.kafka.secure(bootstrap, admin_tls.as_ref());
        ctx.kafka
            .set_bootstrap(&namespace, &kafka.name_any(), bootstrap);
    }

    let applied: BTreeSet<String> = records
        .iter()
        .filter(|(alias, r)| {
            let published = ctx.owners.published_hash(alias);
            published.is_some() && published == r.last_apply.as_ref().map(|a| a.hash.clone())
        })
        .map(|(alias, _)| alias.clone())
        .collect();
    let views = node_views(&records, &kafka, &built, &connected, &applied);
    // A recovery holds every other change of the quorum until it is done.
    let quorum_busy = match (&recovering, &headless) {
        (Some(r), _) => {
            let why = recover::advance(
                &ctx,
                &kafka,
                r,
                &views,
                bootstrap.as_deref(),
                &mut kafka_status,
            )
            .await?;
            warnings.push((recover::QUORUM_RECOVERY.to_owned(), why.clone()));
            Some(why)
        }
        (None, Some(why)) => Some(why.clone()),
        (None, None) => {
            advance_quorum(
                &ctx,
                &kafka,
                &built.cluster,
                &desired_controllers,
                &kafka_status,
                bootstrap.as_deref(),
                &mut warnings,
            )
            .await
        }
    };
    let step = roll::next(&views, quorum_busy.as_deref());
    let rolled = roll_one(
        &ctx,
        kafka.as_ref(),
        &kafka.namespace().unwrap_or_default(),
        &step,
        &views,
        bootstrap.as_deref(),
        &mut warnings,
    )
    .await;

    // A forgotten cluster's nodes stay registered until their replicas are replaced.
    let all_ids: BTreeSet<i32> = ids
        .values()
        .flatten()
        .chain(
            lost.iter()
                .filter(|l| !forgotten_done.contains(&l.alias))
                .flat_map(|l| l.ids.iter()),
        )
        .copied()
        .collect();
    let recorded: BTreeSet<i32> = kafka_status.registered_node_ids.iter().copied().collect();
    // A removal to finish is checked every time; otherwise only now and then (KIP-1073 lists
    // registrations central never recorded, e.g. from before it ran).
    // A forgotten cluster that came back runs its old nodes until its agent deletes them; a
    // broker of them that registers again is looked for meanwhile, not at the next idle check.
    let returned = forget::returning(&ctx.agents, &kafka, &forgotten);
    let pending_unregistration = if headless.is_none()
        && (recorded != all_ids || returned || ctx.registration_checks.due(&owner))
    {
        unregister(
            &ctx,
            kafka.as_ref(),
            bootstrap.as_deref(),
            &all_ids,
            &kafka_status.registered_node_ids,
            &mut warnings,
        )
        .await
    } else if headless.is_some() {
        // Kept for when a controller can unregister them.
        recorded.difference(&all_ids).copied().collect()
    } else {
        BTreeSet::new()
    };
    kafka_status.registered_node_ids = all_ids.union(&pending_unregistration).copied().collect();

    for alias in built.objects.keys().filter(|a| !connected.contains(*a)) {
        warnings.push((
            "ClusterUnreachable".to_owned(),
            format!(
                "the agent of Kubernetes cluster {alias} is not connected: its pods are not checked, rolled or scaled down until it is back"
            ),
        ));
    }
    if !pending_unregistration.is_empty() {
        warnings.push((
            "UnregistrationPending".to_owned(),
            format!(
                "nodes {pending_unregistration:?} are registered in Kafka but belong to no node pool; each is unregistered once its process is gone (fenced)"
            ),
        ));
    }
    let ready = match (&step, &recovering, &headless) {
        (_, Some(_), _) => status::not_ready(
            recover::QUORUM_RECOVERY,
            quorum_busy.clone().unwrap_or_default(),
        ),
        (_, None, Some(why)) => status::not_ready(recover::QUORUM_MAJORITY_LOST, why.clone()),
        (Step::Done, ..) => {
            let brokers = expected_brokers(&effective, &ids);
            match answer::brokers_answer(&ctx.kafka, bootstrap.as_deref(), &cluster_id, &brokers)
                .await
            {
                Ok(()) => Condition::ready(),
                Err(why) => status::not_ready(answer::BROKERS_UNAVAILABLE, why),
            }
        }
        (Step::Wait(why), ..) => status::not_ready("Deploying", why.clone()),
        (Step::Restart(_), ..) => status::not_ready(
            "RollingUpdate",
            rolled.unwrap_or_else(|| "pods run an outdated revision".to_owned()),
        ),
    };
    let is_ready = ready.is_true();
    if step == Step::Done {
        kafka_status.kafka_version = Some(built.kafka_version.clone());
    }
    warnings.extend(version::changing(
        kafka_status.kafka_version.as_deref(),
        &target,
    ));
    let mut migrating = false;
    let mut raising = false;
    if is_ready {
        moving::ensure_drains(&ctx, &kafka, &pools, &draining, &mut warnings).await?;
        observe_quorum(&ctx, bootstrap.as_deref(), &mut kafka_status).await;
        warnings
            .extend(confined_partitions(&ctx, &kafka, bootstrap.as_deref(), &kafka_status).await);
        if wanted_quorum == kraft::QuorumMode::Dynamic {
            migrating = migrate_static_quorum(
                &ctx,
                &kafka,
                &built.kafka_version,
                bootstrap.as_deref(),
                &mut kafka_status,
                &mut warnings,
            )
            .await;
        }
        raising = version::raise_metadata(
            &ctx,
            &kafka,
            bootstrap.as_deref(),
            &target,
            &mut kafka_status,
            &mut warnings,
        )
        .await;
    }
    let settled = is_ready
        && pending_unregistration.is_empty()
        && quorum_busy.is_none()
        && !migrating
        && !raising;
    let scale_down_blocked = warnings
        .iter()
        .any(|(reason, _)| reason == SCALE_DOWN_BLOCKED);
    let pool_moving = warnings
        .iter()
        .any(|(reason, _)| reason == moving::POOL_MOVING);
    let was_ready = kafka_status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status == "True");
    if was_ready != Some(is_ready) {
        let (type_, reason) = if is_ready {
            (kstretch_runtime::events::Type::Normal, "Ready".to_owned())
        } else {
            let reason = ready
                .reason
                .clone()
                .unwrap_or_else(|| "NotReady".to_owned());
            (kstretch_runtime::events::Type::Warning, reason)
        };
        kstretch_runtime::events::emit(
            &ctx.client,
            "kstretch-central",
            kube::Resource::object_ref(kafka.as_ref(), &()),
            type_,
            &reason,
            "Reconcile",
            ready
                .message
                .clone()
                .unwrap_or_else(|| "the Kafka cluster is ready".to_owned()),
        );
    }
    announce_warnings(&ctx, &kafka, &kafka_status.conditions, &warnings);
    kafka_status.conditions = status::conditions(&kafka_status.conditions, ready, &warnings, &now);
    kafka_status.kafka_node_pools = effective
        .pools
        .iter()
        .map(|p| UsedNodePoolStatus {
            name: Some(p.name.clone()),
        })
        .collect();
    kafka_status.listeners = listener_statuses(&built);
    if is_ready {
        kafka_status.operator_last_successful_version = Some(env!("CARGO_PKG_VERSION").to_owned());
    }
    status::apply_kafka(&ctx.client, &kafka, kafka_status).await?;
    let forgetting = forgotten.iter().any(|c| !forgotten_done.contains(c));
    Ok(Action::requeue(if !settled {
        BUSY_REQUEUE
    } else if pool_moving || forgetting || returned {
        MOVE_RECHECK
    } else if scale_down_blocked {
        BLOCKED_RECHECK
    } else {
        IDLE_REQUEUE
    }))
}

/// Each warning whose reason the status does not show yet is also an Event (once, while it
/// stands), so `kubectl describe` and event-based alerts see it.
fn announce_warnings(
    ctx: &Context,
    kafka: &Kafka,
    before: &[Condition],
    warnings: &[(String, String)],
) {
    let shown = |reason: &str| {
        before
            .iter()
            .any(|c| c.type_ == "Warning" && c.reason.as_deref() == Some(reason))
    };
    let mut announced = BTreeSet::new();
    for (reason, message) in warnings {
        if shown(reason) || !announced.insert(reason.as_str()) {
            continue;
        }
        kstretch_runtime::events::emit(
            &ctx.client,
            "kstretch-central",
            kube::Resource::object_ref(kafka, &()),
            kstretch_runtime::events::Type::Warning,
            reason,
            "Reconcile",
            message.clone(),
        );
    }
}

/// A warning naming the partitions whose replicas all sit in one Kubernetes cluster; when
/// Kafka cannot say, the last such warning stands.
async fn confined_partitions(
    ctx: &Context,
    kafka: &Kafka,
    bootstrap: Option<&str>,
    kafka_status: &KafkaStatus,
) -> Option<(String, String)> {
    let found = async {
        let bootstrap = bootstrap.ok_or_else(|| "no bootstrap address".to_owned())?;
        let admin = ctx
            .kafka
            .client(bootstrap)
            .await
            .map_err(|e| e.to_string())?;
        checks::confined_partitions(&admin)
            .await
            .map_err(|e| e.to_string())
    };
    let confined = match found.await {
        Ok(confined) => confined,
        Err(e) => {
            tracing::debug!(error = %e, "cannot read where the partitions are");
            return kafka_status
                .conditions
                .iter()
                .find(|c| c.reason.as_deref() == Some(REPLICAS_IN_ONE_CLUSTER))
                .map(|c| {
                    (
                        REPLICAS_IN_ONE_CLUSTER.to_owned(),
                        c.message.clone().unwrap_or_default(),
                    )
                });
        }
    };
    if confined.is_empty() {
        return None;
    }
    const SHOWN: usize = 10;
    let mut named: Vec<String> = confined
        .iter()
        .take(SHOWN)
        .map(|c| format!("{} ({})", c.partition, c.cluster))
        .collect();
    if confined.len() > SHOWN {
        named.push(format!("and {} more", confined.len() - SHOWN));
    }
    Some((
        REPLICAS_IN_ONE_CLUSTER.to_owned(),
        format!(
            "{} partition(s) have every replica in one Kubernetes cluster and are lost with it: {}; spread them with `kstretch spread --kafka {}`",
            confined.len(),
            named.join(", "),
            kafka.name_any()
        ),
    ))
}

/// Records the controller quorum as Kafka reports it; on failure the last record stands (the
/// brokers just answered, so this is a passing hiccup, not worth a condition).
async fn observe_quorum(ctx: &Context, bootstrap: Option<&str>, kafka_status: &mut KafkaStatus) {
    let Some(bootstrap) = bootstrap else {
        return;
    };
    let observed = async { quorum::observe(&ctx.kafka.client(bootstrap).await?).await };
    match observed.await {
        Ok(q) => kafka_status.quorum = Some(q),
        Err(e) => tracing::debug!(error = %e, "cannot read the controller quorum"),
    }
}

/// Turns the static quorum of a ready cluster dynamic where its Kafka version can (see
/// [`quorum::migrate`]); the next reconciliation then rolls every node onto
/// `controller.quorum.bootstrap.servers`. Where it cannot, a warning says why and the quorum
/// stays static. `true` while the migration is due but not done.
async fn migrate_static_quorum(
    ctx: &Context,
    kafka: &Kafka,
    version: &str,
    bootstrap: Option<&str>,
    kafka_status: &mut KafkaStatus,
    warnings: &mut Vec<(String, String)>,
) -> bool {
    if quorum::mode(kafka_status) != kraft::QuorumMode::Static {
        return false;
    }
    if !quorum::can_migrate(version) {
        warnings.push((
            "QuorumMigrationUnsupported".to_owned(),
            format!(
                "the controller quorum is static and Kafka {version} cannot make it dynamic (Kafka 4.1 and later can): controllers are added or removed only by restarting every node; upgrade Kafka, or set the annotation {}=static to keep it static without this warning",
                names::CONTROLLER_QUORUM
            ),
        ));
        return false;
    }
    let Some(bootstrap) = bootstrap else {
        return true;
    };
    let migrated = async { quorum::migrate(&ctx.kafka.client(bootstrap).await?).await };
    match migrated.await {
        Ok(now) => {
            if now {
                tracing::info!("controller quorum made dynamic");
                kstretch_runtime::events::about(
                    &ctx.client,
                    "kstretch-central",
                    kafka,
                    false,
                    "QuorumMigrated",
                    "Quorum",
                    "the controller quorum is dynamic now (kraft.version 1): every node restarts, one at a time, to find it through controller.quorum.bootstrap.servers".to_owned(),
                );
            }
            quorum::record_dynamic(kafka_status);
            false
        }
        Err(e) => {
            ctx.kafka.forget(bootstrap);
            warnings.push((
                "QuorumMigrationPending".to_owned(),
                format!("the static controller quorum is not made dynamic yet: {e}; retried"),
            ));
            true
        }
    }
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

/// Takes the cluster ID and node IDs of what already runs for a `Kafka` or pool that central
/// has no record of (a resource re-created after its CRD was reinstalled, a lost status), from
/// the podsets the agents report: nothing that runs gets a new identity. `Some` when it must
/// wait for agents that have not reported yet.
async fn adopt_what_runs(
    ctx: &Context,
    kafka: &Kafka,
    owner: &Owner,
    resolved: &mut Resolved,
    forgotten: &BTreeSet<String>,
    kafka_status: &mut KafkaStatus,
    now: &str,
) -> Result<Option<Action>, Error> {
    // A status without a cluster ID while the pools have one was lost (the cache lag is
    // handled before): what runs also tells the quorum's mode.
    let status_lost = kafka_status.cluster_id.is_none();
    let unknown_cluster = status_lost && resolved.pools.iter().all(|p| p.cluster_id.is_none());
    // A forgotten cluster never reports: its pools are not waited for.
    let pools: Vec<_> = resolved
        .pools
        .iter()
        .filter(|p| status_lost || p.ids.current.is_none())
        .filter(|p| !forgotten.contains(&p.alias))
        .cloned()
        .collect();
    if pools.is_empty() {
        return Ok(None);
    }
    let reports: BTreeMap<String, Vec<kstretch_proto::agent::v1::PodSetStatus>> = ctx
        .agents
        .list()
        .into_iter()
        .filter(|r| r.status_at.is_some())
        .map(|r| (r.cluster_alias, r.podsets))
        .collect();
    match adopt::adopt(
        &kafka.name_any(),
        &kafka.namespace().unwrap_or_default(),
        &pools,
        &reports,
    ) {
        Adoption::Awaiting(aliases) => {
            keep_or_retain(&ctx.owners, owner)?;
            let message = format!(
                "waiting for the agents of {} to report what runs there, so that running nodes keep their cluster ID and node IDs",
                aliases.join(", ")
            );
            kafka_status.conditions = status::conditions(
                &kafka_status.conditions,
                status::not_ready("AwaitingMemberClusters", message),
                &[],
                now,
            );
            status::apply_kafka(&ctx.client, kafka, kafka_status.clone()).await?;
            Ok(Some(Action::requeue(BUSY_REQUEUE)))
        }
        Adoption::Found {
            cluster_id,
            controller_quorum,
            node_ids,
        } => {
            if let Some(id) = cluster_id.filter(|_| unknown_cluster) {
                tracing::info!(cluster_id = %id, "adopting the cluster ID of the running nodes");
                kafka_status.cluster_id = Some(id);
            }
            if status_lost && controller_quorum.as_deref() == Some("dynamic") {
                quorum::adopt_dynamic(kafka_status);
            }
            for pool in &mut resolved.pools {
                let Some(ids) = node_ids.get(&pool.name).filter(|ids| !ids.is_empty()) else {
                    continue;
                };
                if pool.ids.current.is_none() {
                    tracing::info!(pool = %pool.name, ?ids, "adopting the node IDs of the running pods");
                    pool.ids.current = Some(ids.clone());
                    pool.ids.current_roles = pool.roles.clone();
                }
            }
            Ok(None)
        }
    }
}

/// Refuses resources that cannot be used: `Ready=False` on the `Kafka` and its pools, and
/// nothing in the member clusters changes (the last desired state stands, or is retained).
struct Refuser<'a> {
    ctx: &'a Context,
    kafka: &'a Kafka,
    pools: &'a [&'a KafkaNodePool],
    owner: &'a Owner,
    now: &'a str,
}

impl Refuser<'_> {
    async fn refuse(
        &self,
        mut kafka_status: KafkaStatus,
        reason: &str,
        message: &str,
    ) -> Result<Action, Error> {
        let Refuser {
            ctx,
            kafka,
            pools,
            owner,
            now,
        } = self;
        tracing::warn!(%reason, %message, "Kafka cannot be reconciled as it is");
        ctx.metrics.invalid(reason);
        keep_or_retain(&ctx.owners, owner)?;
        let refused_before = kafka_status.conditions.iter().any(|c| {
            c.type_ == "Ready" && c.status == "False" && c.reason.as_deref() == Some(reason)
        });
        if !refused_before {
            kstretch_runtime::events::emit(
                &ctx.client,
                "kstretch-central",
                kube::Resource::object_ref(*kafka, &()),
                kstretch_runtime::events::Type::Warning,
                reason,
                "Reconcile",
                message.to_owned(),
            );
        }
        kafka_status.conditions = status::conditions(
            &kafka_status.conditions,
            status::not_ready(reason, message),
            &[],
            now,
        );
        status::apply_kafka(&ctx.client, kafka, kafka_status).await?;
        for pool in pools.iter() {
            let mut pool_status = pool.status.clone().unwrap_or_default();
            pool_status.observed_generation = pool.metadata.generation;
            pool_status.conditions = status::conditions(
                &pool_status.conditions,
                status::not_ready(reason, message),
                &[],
                now,
            );
            status::apply_pool(&ctx.client, pool, pool_status).await?;
        }
        Ok(Action::requeue(REFUSED_RECHECK))
    }
}

pub use crate::owned::keep_or_retain;

/// A new KRaft cluster ID: 16 random bytes, base64url without padding (Kafka's `Uuid` form).
fn new_cluster_id() -> String {
    kraft::uuid_text(random_uuid())
}

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

/// The cluster CA and the clients CA of `kafka`.
async fn both_cas(client: &kube::Client, kafka: &Kafka) -> Result<(pki::Ca, pki::Ca), CertError> {
    Ok((
        pki::ca(client, kafka, CaKind::Cluster).await?,
        pki::ca(client, kafka, CaKind::Clients).await?,
    ))
}

/// Every node's certificate, with the listeners' own certificates (`brokerCertChainAndKey`).
async fn certificates(
    client: &kube::Client,
    kafka: &Kafka,
    ca: &pki::Ca,
    clients_trusted: Option<&str>,
    hosts: &BTreeMap<String, BTreeSet<String>>,
    resolved: &Resolved,
) -> Result<pki::NodeCerts, CertError> {
    let mut certs = pki::node_certificates(client, kafka, ca, clients_trusted, hosts).await?;
    certs.listeners =
        pki::listener_certificates(client, kafka, &resolved.listener_certificates).await?;
    Ok(certs)
}

/// Where central's admin client reaches the cluster.
fn admin_bootstrap(kafka: &Kafka, resolved: &Resolved) -> Option<String> {
    if let Some(servers) = kafka.annotations().get(ADMIN_BOOTSTRAP_ANNOTATION) {
        return Some(servers.clone());
    }
    let cluster = kraft::KafkaCluster {
        name: kafka.name_any(),
        namespace: kafka.namespace().unwrap_or_default(),
        cluster_id: String::new(),
        listeners: resolved.listeners.clone(),
        config: BTreeMap::new(),
        addressing: resolved.addressing.clone(),
        nodes: Vec::new(),
        authorization: None,
        quorum: kraft::QuorumMode::Static,
    };
    // With per-node Services the addresses are known only once the nodes are built: none yet.
    kraft::bootstrap_servers(&cluster, REPLICATION_LISTENER)
        .ok()
        .filter(|servers| !servers.is_empty())
}

type PoolIdsByName = BTreeMap<String, BTreeSet<i32>>;
type RolesByName = BTreeMap<String, BTreeSet<Role>>;

/// The IDs of every node with the broker role that central runs (what Kafka must list live).
fn expected_brokers(effective: &Resolved, ids: &PoolIdsByName) -> BTreeSet<i32> {
    effective
        .pools
        .iter()
        .filter(|p| p.roles.contains(&Role::Broker))
        .filter_map(|p| ids.get(&p.name))
        .flatten()
        .copied()
        .collect()
}

fn desired_ids_and_roles(
    resolved: &Resolved,
    assignments: &Assignments,
) -> (PoolIdsByName, RolesByName) {
    let ids = assignments
        .pools
        .iter()
        .map(|(name, a)| (name.clone(), a.desired.clone()))
        .collect();
    let roles = resolved
        .pools
        .iter()
        .map(|p| (p.name.clone(), p.roles.clone()))
        .collect();
    (ids, roles)
}

/// The controllers among `ids`, by the pools' `roles`.
fn controllers_of(ids: &PoolIdsByName, roles: &RolesByName) -> BTreeSet<i32> {
    ids.iter()
        .filter(|(pool, _)| {
            roles
                .get(*pool)
                .is_some_and(|r| r.contains(&Role::Controller))
        })
        .flat_map(|(_, ids)| ids.iter().copied())
        .collect()
}

/// Keeps the nodes of a pool that would remove controllers which are still voters of a
/// dynamic quorum: a voter is removed from the quorum first (see [`advance_quorum`]), so that
/// stopping it never costs the quorum a live member.
fn hold_voters(
    kafka_status: &KafkaStatus,
    resolved: &Resolved,
    assignments: &Assignments,
    ids: &mut PoolIdsByName,
    roles: &mut RolesByName,
    warnings: &mut Vec<(String, String)>,
) {
    if quorum::mode(kafka_status) != kraft::QuorumMode::Dynamic {
        return;
    }
    let voters: BTreeSet<i32> = kafka_status
        .quorum
        .iter()
        .flat_map(|q| q.voters.iter().map(|v| v.id))
        .collect();
    for pool in &resolved.pools {
        let Some(a) = assignments.pools.get(&pool.name) else {
            continue;
        };
        let leaving: Vec<i32> = a.to_remove.intersection(&voters).copied().collect();
        if leaving.is_empty() || !pool.ids.current_roles.contains(&Role::Controller) {
            continue;
        }
        ids.insert(pool.name.clone(), a.current.clone());
        roles.insert(pool.name.clone(), current_or_spec_roles(pool));
        warnings.push((
            "VoterRemovalPending".to_owned(),
            format!(
                "KafkaNodePool {}: controllers {leaving:?} stop once they are removed from the quorum's voters, one at a time",
                pool.name
            ),
        ));
    }
}

/// Moves a dynamic quorum one voter toward `desired` (see [`quorum::advance`]); `Some` says why
/// the quorum is not settled yet, and controllers then do not roll.
async fn advance_quorum(
    ctx: &Context,
    kafka: &Kafka,
    cluster: &kraft::KafkaCluster,
    desired: &BTreeSet<i32>,
    kafka_status: &KafkaStatus,
    bootstrap: Option<&str>,
    warnings: &mut Vec<(String, String)>,
) -> Option<String> {
    if cluster.quorum != kraft::QuorumMode::Dynamic || !quorum::formed(kafka_status) {
        return None;
    }
    let Some(bootstrap) = bootstrap else {
        return Some("no bootstrap address to read the quorum at".to_owned());
    };
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default();
    let progress = match ctx.kafka.client(bootstrap).await {
        Ok(admin) => quorum::advance(&admin, cluster, desired, now_ms).await,
        Err(e) => Err(e),
    };
    match progress {
        Ok(quorum::Progress::Settled) => None,
        Ok(quorum::Progress::Changed(what)) => {
            tracing::info!(change = %what, "controller quorum changed");
            kstretch_runtime::events::about(
                &ctx.client,
                "kstretch-central",
                kafka,
                false,
                "QuorumChanged",
                "Quorum",
                what.clone(),
            );
            Some(what)
        }
        Ok(quorum::Progress::Waiting(why)) => {
            warnings.push(("QuorumChangePending".to_owned(), why.clone()));
            Some(why)
        }
        Err(e) => {
            ctx.kafka.forget(bootstrap);
            Some(format!("cannot read or change the controller quorum: {e}"))
        }
    }
}

/// Reverts removals that are not safe now: in a member cluster whose agent is not connected,
/// and brokers that still hold partition replicas (unless the `Kafka` says to skip the check).
#[allow(clippy::too_many_arguments)]
async fn guard_removals(
    ctx: &Context,
    kafka: &Kafka,
    resolved: &Resolved,
    assignments: &Assignments,
    connected: &BTreeSet<String>,
    bootstrap: Option<&str>,
    ids: &mut PoolIdsByName,
    roles: &mut RolesByName,
    warnings: &mut Vec<(String, String)>,
) {
    let skip_check = kafka
        .annotations()
        .get(names::SKIP_BROKER_SCALEDOWN_CHECK)
        .is_some_and(|v| v == "true");
    let mut to_check: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
    for pool in &resolved.pools {
        let Some(a) = assignments.pools.get(&pool.name) else {
            continue;
        };
        if a.to_remove.is_empty() && a.losing_broker_role.is_empty() {
            continue;
        }
        if !connected.contains(&pool.alias) {
            ids.insert(pool.name.clone(), a.current.clone());
            roles.insert(pool.name.clone(), current_or_spec_roles(pool));
            warnings.push((
                "ScaleDownDeferred".to_owned(),
                format!(
                    "KafkaNodePool {}: removing nodes {:?} waits until the agent of cluster {} is connected",
                    pool.name,
                    a.to_remove.union(&a.losing_broker_role).collect::<Vec<_>>(),
                    pool.alias
                ),
            ));
            continue;
        }
        if skip_check {
            continue;
        }
        let brokers: BTreeSet<i32> = if pool.ids.current_roles.contains(&Role::Broker) {
            a.to_remove.union(&a.losing_broker_role).copied().collect()
        } else {
            BTreeSet::new()
        };
        if !brokers.is_empty() {
            to_check.insert(pool.name.clone(), brokers);
        }
    }
    if to_check.is_empty() {
        return;
    }
    let all: BTreeSet<i32> = to_check.values().flatten().copied().collect();
    let holding = checks::holding_replicas_at(&ctx.kafka, bootstrap, &all).await;
    for (pool_name, brokers) in to_check {
        let Some(pool) = resolved.pools.iter().find(|p| p.name == pool_name) else {
            continue;
        };
        let Some(a) = assignments.pools.get(&pool_name) else {
            continue;
        };
        let blocked: Vec<String> = match &holding {
            Ok(holding) => brokers
                .iter()
                .filter_map(|id| {
                    holding.get(id).map(|parts| {
                        let shown: Vec<&str> = parts.iter().take(3).map(String::as_str).collect();
                        format!(
                            "broker {id} holds {} partition replica(s) ({}{})",
                            parts.len(),
                            shown.join(", "),
                            if parts.len() > 3 { ", ..." } else { "" }
                        )
                    })
                })
                .collect(),
            Err(e) => vec![format!("cannot check the brokers' partitions: {e}")],
        };
        if blocked.is_empty() {
            continue;
        }
        ids.insert(pool_name.clone(), a.current.clone());
        roles.insert(pool_name.clone(), current_or_spec_roles(pool));
        warnings.push((
            SCALE_DOWN_BLOCKED.to_owned(),
            format!(
                "KafkaNodePool {pool_name}: the scale-down or broker-role removal is reverted because {}; move the partitions away first (or set the annotation {}=true on the Kafka to skip this check)",
                blocked.join("; "),
                names::SKIP_BROKER_SCALEDOWN_CHECK
            ),
        ));
    }
}

fn current_or_spec_roles(pool: &resolve::ResolvedPool) -> BTreeSet<Role> {
    if pool.ids.current_roles.is_empty() {
        pool.roles.clone()
    } else {
        pool.ids.current_roles.clone()
    }
}

/// With per-node Services, before this reconciliation's nodes are built: the brokers that run
/// now, at the addresses their Services were reported with, so that a scale-down can be checked
/// against Kafka (without them it could never be).
fn running_brokers_bootstrap(
    ctx: &Context,
    kafka: &Kafka,
    resolved: &Resolved,
    assignments: &Assignments,
) -> Option<String> {
    let per_node = resolved.per_node.as_ref()?;
    let brokers: PoolIdsByName = resolved
        .pools
        .iter()
        .filter(|p| current_or_spec_roles(p).contains(&Role::Broker))
        .filter_map(|p| {
            Some((
                p.name.clone(),
                assignments.pools.get(&p.name)?.current.clone(),
            ))
        })
        .collect();
    let mut known = resolved.clone();
    address_nodes(ctx, kafka, &mut known, &brokers, per_node);
    let kraft::Addressing::PerNodeService { addresses } = &known.addressing else {
        return None;
    };
    let servers: Vec<String> = addresses
        .values()
        .filter_map(|a| {
            let port = *a.ports.get(REPLICATION_LISTENER)?;
            Some(
                kraft::Endpoint {
                    host: a.host.clone(),
                    port,
                }
                .to_string(),
            )
        })
        .collect();
    (!servers.is_empty()).then(|| servers.join(","))
}

/// Fills in the per-node Service addresses the agents reported; returns the nodes still waiting.
fn address_nodes(
    ctx: &Context,
    kafka: &Kafka,
    effective: &mut Resolved,
    ids: &PoolIdsByName,
    per_node: &super::resolve::PerNode,
) -> Vec<String> {
    let nodes: Vec<NodeRef> = effective
        .pools
        .iter()
        .flat_map(|p| {
            ids.get(&p.name).into_iter().flatten().map(|&id| NodeRef {
                id,
                pool: p.name.clone(),
                alias: p.alias_of(id).to_owned(),
            })
        })
        .collect();
    let reported: BTreeMap<String, Vec<_>> = nodes
        .iter()
        .map(|n| n.alias.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter_map(|alias| ctx.agents.get(&alias).map(|r| (alias, r.services)))
        .collect();
    let (addresses, pending) = addresses::node_addresses(
        &kafka.name_any(),
        &kafka.namespace().unwrap_or_default(),
        &nodes,
        per_node,
        &effective.listeners,
        &reported,
    );
    effective.addressing = kraft::Addressing::PerNodeService { addresses };
    pending
}

/// While per-node addresses are pending, the per-node Services must exist (their addresses go
/// into the configuration) and everything that runs must stay: the Services are added to this
/// `Kafka`'s last contribution. Without one, a new cluster gets only its Services, and a
/// cluster central knows nothing of yet (just after a restart) is retained as it is.
fn publish_services_first(
    ctx: &Context,
    kafka: &Kafka,
    owner: &Owner,
    effective: &Resolved,
    ids: &PoolIdsByName,
    fresh: bool,
) -> Result<(), Error> {
    let services = build::per_node_services(
        &kafka.name_any(),
        &kafka.namespace().unwrap_or_default(),
        effective,
        ids,
    );
    let mut objects = match ctx.owners.get(owner) {
        Some(Part::Objects(objects)) => objects,
        _ if fresh => BTreeMap::new(),
        _ => return keep_or_retain(&ctx.owners, owner),
    };
    for (alias, list) in services {
        let existing = objects.entry(alias).or_default();
        for service in list {
            let same = |o: &serde_json::Value| {
                o["kind"] == service["kind"] && o["metadata"]["name"] == service["metadata"]["name"]
            };
            match existing.iter_mut().find(|o| same(o)) {
                Some(slot) => *slot = service,
                None => existing.push(service),
            }
        }
    }
    ctx.owners.put(owner.clone(), Part::Objects(objects))?;
    Ok(())
}

/// Objects of this `Kafka` that an agent could not apply (or delete), from its last report.
fn rejected_objects(
    records: &BTreeMap<String, AgentRecord>,
    kafka: &Kafka,
) -> Vec<(String, String)> {
    use kstretch_proto::agent::v1::Outcome;
    let ns = kafka.namespace().unwrap_or_default();
    let prefix = format!("{}-", kafka.name_any());
    let mut out = Vec::new();
    for (alias, record) in records {
        let Some(report) = &record.last_apply else {
            continue;
        };
        let failed: Vec<String> = report
            .results
            .iter()
            .filter(|r| matches!(r.outcome(), Outcome::Rejected | Outcome::DeleteFailed))
            .filter_map(|r| {
                let o = r.r#ref.as_ref()?;
                (o.namespace == ns && o.name.starts_with(&prefix))
                    .then(|| format!("{} {}: {}", o.kind, o.name, r.message))
            })
            .collect();
        if !failed.is_empty() {
            out.push((
                "ApplyFailed".to_owned(),
                format!(
                    "the agent of cluster {alias} could not apply {} object(s) of snapshot {}: {}",
                    failed.len(),
                    report.generation,
                    failed.join("; ")
                ),
            ));
        }
    }
    out
}

/// Every built node with what its agent last reported.
fn node_views(
    records: &BTreeMap<String, AgentRecord>,
    kafka: &Kafka,
    built: &Built,
    connected: &BTreeSet<String>,
    applied: &BTreeSet<String>,
) -> Vec<NodeView> {
    let ns = kafka.namespace().unwrap_or_default();
    built
        .nodes
        .values()
        .map(|n| {
            let podset = format!("{}-{}", kafka.name_any(), n.pool);
            let reported = records
                .get(&n.alias)
                .and_then(|r| {
                    r.podsets
                        .iter()
                        .find(|s| s.namespace == ns && s.name == podset)
                })
                .and_then(|s| s.pods_status.iter().find(|p| p.name == n.pod))
                .filter(|p| !p.uid.is_empty())
                .map(|p| Reported {
                    uid: p.uid.clone(),
                    ready: p.ready,
                    revision: p.revision.clone(),
                });
            NodeView {
                id: n.id,
                alias: n.alias.clone(),
                pod: n.pod.clone(),
                roles: n.roles.clone(),
                desired_revision: n.revision.clone(),
                reported,
                connected: connected.contains(&n.alias),
                applied: applied.contains(&n.alias),
            }
        })
        .collect()
}

/// Restarts the first candidate that is safe; returns what it did or why it waits.
async fn roll_one(
    ctx: &Context,
    kafka: &Kafka,
    namespace: &str,
    step: &Step,
    views: &[NodeView],
    bootstrap: Option<&str>,
    warnings: &mut Vec<(String, String)>,
) -> Option<String> {
    let Step::Restart(candidates) = step else {
        return None;
    };
    let mut held_back = Vec::new();
    // Kafka's partitions, asked once for every broker candidate.
    let mut partitions: Option<Result<Vec<checks::PartitionIsr>, String>> = None;
    for id in candidates {
        let Some(node) = views.iter().find(|n| n.id == *id) else {
            continue;
        };
        let Some(reported) = &node.reported else {
            continue;
        };
        // A broker that is up is restarted only if no partition drops below its minimum ISR.
        if reported.ready && node.roles.contains(&Role::Broker) {
            if partitions.is_none() {
                partitions = Some(match bootstrap {
                    Some(b) => match ctx.kafka.client(b).await {
                        Ok(admin) => checks::partitions(&admin).await.map_err(|e| {
                            ctx.kafka.forget(b);
                            format!("cannot check its partitions: {e}")
                        }),
                        Err(e) => Err(format!("cannot reach Kafka: {e}")),
                    },
                    None => Err("no bootstrap address for the admin client".to_owned()),
                });
            }
            let blocking = match &partitions {
                Some(Ok(parts)) => roll::partitions_blocking_restart(node.id, parts),
                Some(Err(e)) => vec![e.clone()],
                None => Vec::new(),
            };
            if !blocking.is_empty() {
                held_back.push(format!("{} ({})", node.pod, blocking.join(", ")));
                continue;
            }
        }
        let pod = PodToRestart {
            namespace: namespace.to_owned(),
            name: node.pod.clone(),
            uid: reported.uid.clone(),
            reason: "its revision changed".to_owned(),
        };
        return Some(restart(ctx, kafka, node, pod).await);
    }
    if !held_back.is_empty() {
        warnings.push((
            "RollingUpdateBlocked".to_owned(),
            format!(
                "pods waiting to roll would take partitions below min.insync.replicas: {}",
                held_back.join("; ")
            ),
        ));
    }
    Some("pods run an outdated revision; waiting until one can be restarted safely".to_owned())
}

async fn restart(ctx: &Context, kafka: &Kafka, node: &NodeView, pod: PodToRestart) -> String {
    match ctx
        .restarts
        .restart(&node.alias, pod, RESTART_TIMEOUT)
        .await
    {
        Ok(result) if replaced(&result) => {
            ctx.metrics.restarted();
            tracing::info!(pod = %node.pod, cluster = %node.alias, "rolled pod");
            kstretch_runtime::events::about(
                &ctx.client,
                "kstretch-central",
                kafka,
                false,
                "PodRolled",
                "RollingUpdate",
                format!(
                    "restarted pod {} in cluster {}: its revision changed",
                    node.pod, node.alias
                ),
            );
            format!("rolling pod {} in cluster {}", node.pod, node.alias)
        }
        Ok(result) => format!(
            "the agent of {} did not restart {}: {}",
            node.alias, node.pod, result.message
        ),
        Err(e) => format!("cannot restart {}: {e}", node.pod),
    }
}

/// Unregisters every registered broker that is no longer a node of the cluster and is fenced
/// (its process is gone); returns the IDs still waiting. Failures are warnings, retried next
/// time, and never block anything else.
async fn unregister(
    ctx: &Context,
    kafka: &Kafka,
    bootstrap: Option<&str>,
    desired: &BTreeSet<i32>,
    recorded: &[i32],
    warnings: &mut Vec<(String, String)>,
) -> BTreeSet<i32> {
    let recorded: BTreeSet<i32> = recorded.iter().copied().collect();
    let fallback: BTreeSet<i32> = recorded.difference(desired).copied().collect();
    let Some(bootstrap) = bootstrap else {
        return fallback;
    };
    let admin = match ctx.kafka.client(bootstrap).await {
        Ok(a) => a,
        Err(e) => {
            if !fallback.is_empty() {
                warnings.push((
                    "UnregistrationFailed".into(),
                    format!("cannot reach Kafka to unregister nodes {fallback:?}: {e}"),
                ));
            }
            return fallback;
        }
    };
    let described = admin.describe_cluster(true).await;
    let (candidates, live): (BTreeSet<i32>, BTreeSet<i32>) = match described {
        Ok(d) => (
            d.brokers
                .iter()
                .map(|b| b.id)
                .filter(|id| !desired.contains(id))
                .collect(),
            d.brokers
                .iter()
                .filter(|b| !b.fenced)
                .map(|b| b.id)
                .collect(),
        ),
        Err(kstretch_kadmin::Error::Unsupported { .. }) => {
            // Before KIP-1073: the IDs recorded in the status, minus the live brokers.
            match admin.describe_cluster(false).await {
                Ok(d) => (fallback.clone(), d.brokers.iter().map(|b| b.id).collect()),
                Err(e) => {
                    ctx.kafka.forget(bootstrap);
                    warnings.push((
                        "UnregistrationFailed".into(),
                        format!("cannot list the registered nodes: {e}"),
                    ));
                    return fallback;
                }
            }
        }
        Err(e) => {
            ctx.kafka.forget(bootstrap);
            if !fallback.is_empty() {
                warnings.push((
                    "UnregistrationFailed".into(),
                    format!("cannot list the registered nodes: {e}"),
                ));
            }
            return fallback;
        }
    };
    let mut pending = BTreeSet::new();
    for id in candidates {
        if live.contains(&id) {
            // Still heartbeating: its pod is not gone yet. Unregistering now would only be
            // undone by its next registration.
            pending.insert(id);
            continue;
        }
        match admin.unregister_broker(id).await {
            Ok(()) | Err(kstretch_kadmin::Error::BrokerNotRegistered { .. }) => {
                ctx.metrics.unregistered();
                tracing::info!(node = id, "unregistered a removed node from KRaft");
                kstretch_runtime::events::about(
                    &ctx.client,
                    "kstretch-central",
                    kafka,
                    false,
                    "NodeUnregistered",
                    "Unregister",
                    format!("node {id} left the cluster and was unregistered from KRaft"),
                );
            }
            Err(e) => {
                warnings.push((
                    "UnregistrationFailed".into(),
                    format!("cannot unregister node {id}: {e}"),
                ));
                pending.insert(id);
            }
        }
    }
    pending
}

fn listener_statuses(built: &Built) -> Vec<ListenerStatus> {
    built
        .cluster
        .listeners
        .iter()
        .filter_map(|l| {
            let servers = kraft::bootstrap_servers(&built.cluster, &l.name).ok()?;
            let addresses = servers
                .split(',')
                .filter_map(|s| {
                    let (host, port) = s.rsplit_once(':')?;
                    Some(ListenerAddress {
                        host: Some(host.trim_matches(['[', ']']).to_owned()),
                        port: port.parse().ok(),
                    })
                })
                .collect();
            Some(ListenerStatus {
                name: Some(l.name.clone()),
                addresses,
                bootstrap_servers: Some(servers),
                certificates: Vec::new(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn cluster_ids_look_like_kafkas() {
        let id = new_cluster_id();
        assert_eq!(id.len(), 22);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        );
        assert_ne!(id, new_cluster_id());
    }

    #[test]
    fn per_node_services_give_no_admin_bootstrap_before_their_addresses_are_known() {
        use super::super::resolve::tests::{kafka, members, pool};
        let pools = [pool(
            "dual",
            &["controller", "broker"],
            1,
            serde_json::json!({}),
        )];
        let pools: Vec<&KafkaNodePool> = pools.iter().collect();
        let by_dns = kafka(serde_json::json!({}));
        let resolved = resolve::resolve(&by_dns, &pools, &members()).unwrap();
        assert_eq!(
            admin_bootstrap(&by_dns, &resolved).as_deref(),
            Some("my-cluster-kafka-bootstrap.kafka.svc:9091")
        );
        let by_node_port = kafka(serde_json::json!({"metadata": {"annotations": {
            "kstretch.io/addressing": "nodeport",
            "kstretch.io/node-port-hosts": "alpha=10.0.0.1,beta=10.0.0.2"}}}));
        let resolved = resolve::resolve(&by_node_port, &pools, &members()).unwrap();
        // Not an empty list, which the admin client would take for an address.
        assert_eq!(admin_bootstrap(&by_node_port, &resolved), None);
    }
}
