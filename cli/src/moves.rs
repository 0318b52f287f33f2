//! `kstretch move-pool` (and `kstretch drain --move-nodes-to`): points `KafkaNodePool`s at
//! another member cluster (their `strimzi.io/stretch-cluster-alias`, and the throttle of this
//! move's drain) with the caller's own credentials, and with `--wait` follows each move as
//! central reports it in the pool's and the `Kafka`'s status and in the move's drain until the
//! pool runs only there, or central refuses it, or its drain stops and the user must decide.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use kstretch_api::condition::{Condition, READY};
use kstretch_api::operation::{self, DEFAULT_REPLICATION_THROTTLE};
use kstretch_api::{Kafka, KafkaNodePool, KafkaNodePoolStatus, KafkaOperation, names};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};

use crate::error::CliError;
use crate::kubeconfig::KafkaArgs;
use crate::kubeconfig::KubeArgs;

/// How often `--wait` looks at the pool.
const POLL: Duration = Duration::from_secs(2);

/// The `Ready=False` reasons with which central refuses a pool's move (or its annotations).
const REFUSALS: &[&str] = &[
    "PoolMoveTargetUnreachable",
    "PoolMoveInProgress",
    "MoveNeedsDynamicQuorum",
    "UnknownClusterAlias",
    "InvalidAnnotation",
];

/// `kstretch move-pool`.
#[derive(clap::Args, Debug)]
pub struct MoveArgs {
    /// The KafkaNodePool to move.
    pub pool: String,
    /// The member cluster (its alias) the pool moves to.
    #[arg(long)]
    pub to: String,
    /// The pool's namespace (default: the kubeconfig context's).
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// Bytes per second each broker may spend copying the leaving brokers' replicas during
    /// this move (kept on the pool as `kstretch.io/move-throttle`). Without it the move runs at
    /// central's default, 50 MiB/s: a throttle an earlier move left on the pool is removed.
    #[arg(long)]
    pub throttle: Option<i64>,
    /// Follow the move to its end, printing what it waits for.
    #[arg(long)]
    pub wait: bool,
    /// The central cluster's kubeconfig.
    #[command(flatten)]
    pub kube: KubeArgs,
}

pub async fn run(args: &MoveArgs) -> Result<String, CliError> {
    check_throttle(args.throttle)?;
    let (client, namespace) = args.kube.client_in(args.namespace.as_deref()).await?;
    let pools: Api<KafkaNodePool> = Api::namespaced(client.clone(), &namespace);
    let pool = pools
        .get_opt(&args.pool)
        .await
        .map_err(not_allowed)?
        .ok_or_else(|| {
            CliError::Refused(format!(
                "there is no KafkaNodePool {} in namespace {namespace}",
                args.pool
            ))
        })?;
    let status = pool.status.clone().unwrap_or_default();
    let from = status.cluster_alias.clone().unwrap_or_default();
    if from == args.to && status.leaving.is_none() {
        return Ok(format!(
            "KafkaNodePool {} already runs in {}: nothing to move\n",
            args.pool, args.to
        ));
    }
    point(&pools, &args.pool, &args.to, args.throttle).await?;
    let moves = format!(
        "KafkaNodePool {} moves from {from} to {}; its drain copies at {}\n",
        args.pool,
        args.to,
        throttle_of(args.throttle)
    );
    if !args.wait {
        return Ok(format!(
            "{moves}follow it with --wait, `kubectl get kafkanodepool {} -o yaml` (status.leaving) or `kstretch operations`\n",
            args.pool
        ));
    }
    print!("{moves}");
    let watched = Watched::new(client, &namespace);
    follow(&watched, &pool, &args.to).await
}

/// The APIs `--wait` reads.
struct Watched {
    pools: Api<KafkaNodePool>,
    kafkas: Api<Kafka>,
    operations: Api<KafkaOperation>,
}

impl Watched {
    fn new(client: kube::Client, namespace: &str) -> Self {
        Watched {
            pools: Api::namespaced(client.clone(), namespace),
            kafkas: Api::namespaced(client.clone(), namespace),
            operations: Api::namespaced(client, namespace),
        }
    }
}

/// A throttle in words: `throttle` bytes per second per broker, or central's default.
fn throttle_of(throttle: Option<i64>) -> String {
    match throttle.and_then(|t| u64::try_from(t).ok()) {
        Some(bytes) => format!("{} per broker", rate(bytes)),
        None => format!(
            "{} per broker (central's default)",
            rate(DEFAULT_REPLICATION_THROTTLE)
        ),
    }
}

/// `bytes` per second, in the largest binary unit that divides it.
fn rate(bytes: u64) -> String {
    for (unit, size) in [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if bytes >= size && bytes.is_multiple_of(size) {
            return format!("{} {unit}/s", bytes / size);
        }
    }
    format!("{bytes} B/s")
}

/// `kstretch drain <cluster> --move-nodes-to <to>`: every node pool of the `Kafka` that runs
/// in `cluster` moves to `to`, each as `move-pool` moves it (central runs the moves side by
/// side; its operations take their turns).
pub async fn evacuate(
    kafka: &KafkaArgs,
    cluster: &str,
    to: &str,
    throttle: Option<i64>,
    wait: bool,
) -> Result<String, CliError> {
    check_throttle(throttle)?;
    if cluster == to {
        return Err(CliError::Refused(format!(
            "--move-nodes-to names {to}, the cluster being drained: name the cluster the nodes go to"
        )));
    }
    let (client, namespace) = kafka.kube.client_in(kafka.namespace.as_deref()).await?;
    let pools: Api<KafkaNodePool> = Api::namespaced(client.clone(), &namespace);
    let params = ListParams::default().labels(&format!("{}={}", names::CLUSTER, kafka.kafka));
    let all = pools.list(&params).await.map_err(not_allowed)?.items;
    let alias_of = |p: &KafkaNodePool| {
        p.status
            .as_ref()
            .and_then(|s| s.cluster_alias.clone())
            .unwrap_or_default()
    };
    let leaving: Vec<&KafkaNodePool> = all.iter().filter(|p| alias_of(p) == cluster).collect();
    if leaving.is_empty() {
        let placed: Vec<String> = all
            .iter()
            .map(|p| format!("{} in {}", p.name_any(), alias_of(p)))
            .collect();
        return Err(CliError::Refused(format!(
            "Kafka {} has no node pool running in cluster {cluster} (its pools: {})",
            kafka.kafka,
            if placed.is_empty() {
                "none".to_owned()
            } else {
                placed.join(", ")
            }
        )));
    }
    for pool in &leaving {
        point(&pools, &pool.name_any(), to, throttle).await?;
    }
    let names: Vec<String> = leaving.iter().map(|p| p.name_any()).collect();
    if !wait {
        return Ok(format!(
            "KafkaNodePool(s) {} move from {cluster} to {to}; follow them with `kstretch move-pool <pool> --to {to} --wait`\n",
            names.join(", ")
        ));
    }
    let watched = Watched::new(client, &namespace);
    let mut out = String::new();
    for pool in leaving {
        out += &follow(&watched, pool, to).await?;
    }
    Ok(out)
}

fn check_throttle(throttle: Option<i64>) -> Result<(), CliError> {
    if throttle.is_some_and(|t| t <= 0) {
        return Err(CliError::Refused(
            "--throttle must be a number of bytes per second above 0".to_owned(),
        ));
    }
    Ok(())
}

/// Points pool `name` at cluster `to`, with `throttle` for its move's drain (none: central's
/// default, whatever an earlier move left).
async fn point(
    pools: &Api<KafkaNodePool>,
    name: &str,
    to: &str,
    throttle: Option<i64>,
) -> Result<(), CliError> {
    let annotations = serde_json::json!({
        names::STRETCH_CLUSTER_ALIAS: to,
        names::MOVE_THROTTLE: throttle.map(|t| t.to_string()),
    });
    let patch = serde_json::json!({"metadata": {"annotations": annotations}});
    pools
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(not_allowed)?;
    Ok(())
}

/// Polls `pool` (as it was before it was pointed at `to`), its `Kafka` and the move's drain
/// until the pool runs only in `to`, printing the `Kafka`'s word on the move and the drain's
/// phase and throttle whenever they change; a refusal naming the pool, or a drain of this move
/// that was aborted or refused, ends it with an error saying what to do.
async fn follow(watched: &Watched, pool: &KafkaNodePool, to: &str) -> Result<String, CliError> {
    let name = pool.name_any();
    let before = pool
        .status
        .as_ref()
        .map(|s| s.node_ids.clone())
        .unwrap_or_default();
    let kafka = pool.labels().get(names::CLUSTER).cloned().ok_or_else(|| {
        CliError::Refused(format!(
            "KafkaNodePool {name} has no {} label naming its Kafka",
            names::CLUSTER
        ))
    })?;
    let started = Instant::now();
    let (mut last, mut last_drain) = (String::new(), String::new());
    loop {
        let now = watched.pools.get(&name).await.map_err(not_allowed)?;
        let status = now.status.unwrap_or_default();
        if status.cluster_alias.as_deref() == Some(to) && status.leaving.is_none() {
            let mut out = String::new();
            let _ = writeln!(
                out,
                "KafkaNodePool {name} moved to {to}: nodes {:?} (were {before:?}) in {:.0} s",
                status.node_ids,
                started.elapsed().as_secs_f64()
            );
            return Ok(out);
        }
        let k = watched.kafkas.get(&kafka).await.map_err(not_allowed)?;
        let conditions = k.status.map(|s| s.conditions).unwrap_or_default();
        if let Some(refusal) = refusal_of(&conditions, &name) {
            return Err(refusal);
        }
        // The word on this pool (several may move), and of this move: until central has seen
        // the pool pointed at `to`, it may be of an earlier one.
        let word = warning(&conditions, "PoolMoving")
            .and_then(|all| {
                all.split("; ")
                    .find(|m| {
                        m.starts_with(&format!("KafkaNodePool {name} moves "))
                            && m.contains(&format!(" to {to}:"))
                    })
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| "starting".to_owned());
        crate::terminal::say_if_changed(&mut last, &name, word);
        // The move under way is the one pointed at `to`; until the status says so, an earlier
        // move's drain may still be listed.
        let this_move = status
            .leaving
            .as_ref()
            .filter(|_| status.cluster_alias.as_deref() == Some(to))
            .and_then(|l| l.started_at.clone());
        if let Some(started_at) = this_move
            && let Some(drain) = drain_of(&watched.operations, &kafka, &name, &started_at).await?
        {
            let stalled = stall(&drain, &conditions, &name, to, &status);
            crate::terminal::say_if_changed(&mut last_drain, &drain.name_any(), drain_word(&drain));
            if let Some(stalled) = stalled {
                return Err(stalled);
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

/// A `Ready=False` refusal of `pool`'s move among the `Kafka`'s `conditions`.
fn refusal_of(conditions: &[Condition], pool: &str) -> Option<CliError> {
    // Every refusal of a pool's move or annotations starts with this.
    let about_pool = format!("KafkaNodePool {pool} ");
    let refusal = conditions.iter().find(|c| {
        c.type_ == READY
            && c.status == "False"
            && c.reason.as_deref().is_some_and(|r| REFUSALS.contains(&r))
            && c.message
                .as_deref()
                .is_some_and(|m| m.contains(&about_pool))
    })?;
    Some(CliError::Refused(format!(
        "{}: {}",
        refusal.reason.as_deref().unwrap_or_default(),
        refusal.message.as_deref().unwrap_or_default()
    )))
}

/// The message of the `Kafka`'s `Warning` condition with `reason`.
fn warning(conditions: &[Condition], reason: &str) -> Option<String> {
    conditions
        .iter()
        .find(|c| c.type_ == "Warning" && c.reason.as_deref() == Some(reason))
        .and_then(|c| c.message.clone())
}

/// The newest drain central created for `pool`'s move started at `started_at`.
async fn drain_of(
    operations: &Api<KafkaOperation>,
    kafka: &str,
    pool: &str,
    started_at: &str,
) -> Result<Option<KafkaOperation>, CliError> {
    let of_pool = ListParams::default().labels(&format!(
        "{}={kafka},{}={pool}",
        names::CLUSTER,
        names::POOL_NAME
    ));
    let listed = operations.list(&of_pool).await.map_err(not_allowed)?;
    Ok(listed
        .items
        .into_iter()
        .filter(|o| {
            o.annotations()
                .get(names::MOVE_STARTED_AT)
                .map(String::as_str)
                == Some(started_at)
        })
        .max_by_key(|o| o.metadata.creation_timestamp.clone().map(|t| t.0)))
}

/// The drain's phase and the throttle it copies at.
fn drain_word(drain: &KafkaOperation) -> String {
    let status = drain.status.clone().unwrap_or_default();
    let throttle = status
        .replication_throttle
        .or(drain.spec.replication_throttle);
    let left = status
        .partitions_left
        .map(|n| format!(", {n} partition(s) left"))
        .unwrap_or_default();
    format!(
        "{} at {}{left}",
        status.phase.as_deref().unwrap_or("New"),
        throttle_of(throttle)
    )
}

/// When the move's `drain` was aborted or refused, the move waits for the user: the `Kafka`'s
/// word on it, and what to do.
fn stall(
    drain: &KafkaOperation,
    conditions: &[Condition],
    pool: &str,
    to: &str,
    status: &KafkaNodePoolStatus,
) -> Option<CliError> {
    let phase = drain.status.as_ref().and_then(|s| s.phase.clone())?;
    if phase != operation::phase::ABORTED && phase != operation::phase::REFUSED {
        return None;
    }
    let name = drain.name_any();
    let said = warning(conditions, "PoolMoveStalled")
        .filter(|m| m.contains(&name))
        .unwrap_or_else(|| {
            format!("operation {name}, which drains the pool's leaving brokers, is {phase}")
        });
    let from = status
        .leaving
        .as_ref()
        .map(|l| l.cluster_alias.clone())
        .unwrap_or_default();
    Some(CliError::Refused(format!(
        "the move of KafkaNodePool {pool} to {to} stalled: {said}\nTo go on, delete the drain (`kubectl delete kafkaoperation {name}`) and central starts another; to undo the move, `kstretch move-pool {pool} --to {from}`"
    )))
}

/// Kubernetes' RBAC said no (or something else failed).
fn not_allowed(e: kube::Error) -> CliError {
    crate::error::refused_by_kubernetes(
        e,
        "moving a pool needs get and patch on kafkanodepools.kafka.strimzi.io, get on kafkas and (with --wait) list on kafkaoperations.kstretch.io, in the central cluster",
    )
}
