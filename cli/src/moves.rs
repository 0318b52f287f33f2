//! `kstretch move-pool` (and `kstretch drain --move-nodes-to`): points `KafkaNodePool`s at
//! another member cluster (their `strimzi.io/stretch-cluster-alias`, and the move's drain
//! throttle) with the caller's own credentials, and with `--wait` follows each move as central
//! reports it in the pool's and the `Kafka`'s status until the pool runs only there, or central
//! refuses it.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use kstretch_api::{Kafka, KafkaNodePool, names};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};

use crate::CliError;
use crate::kubeconfig::KubeArgs;
use crate::operations::KafkaArgs;

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
    /// Bytes per second each broker may spend copying the leaving brokers' replicas
    /// (the pool's `kstretch.io/move-throttle`; default: central's, 50 MiB/s).
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
    if !args.wait {
        return Ok(format!(
            "KafkaNodePool {} moves from {from} to {}; follow it with --wait, `kubectl get kafkanodepool {} -o yaml` (status.leaving) or `kstretch operations`\n",
            args.pool, args.to, args.pool
        ));
    }
    let kafkas: Api<Kafka> = Api::namespaced(client, &namespace);
    follow(&pools, &kafkas, &pool, &args.to).await
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
    let kafkas: Api<Kafka> = Api::namespaced(client, &namespace);
    let mut out = String::new();
    for pool in leaving {
        out += &follow(&pools, &kafkas, pool, to).await?;
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

/// Points pool `name` at cluster `to`, with `throttle` for its move's drain.
async fn point(
    pools: &Api<KafkaNodePool>,
    name: &str,
    to: &str,
    throttle: Option<i64>,
) -> Result<(), CliError> {
    let mut annotations = serde_json::json!({ names::STRETCH_CLUSTER_ALIAS: to });
    if let Some(throttle) = throttle {
        annotations[names::MOVE_THROTTLE] = serde_json::json!(throttle.to_string());
    }
    let patch = serde_json::json!({"metadata": {"annotations": annotations}});
    pools
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(not_allowed)?;
    Ok(())
}

/// Polls `pool` (as it was before it was pointed at `to`) and its `Kafka` until the pool runs
/// only in `to`, printing the `Kafka`'s word on the move whenever it changes; a refusal naming
/// the pool ends it with an error.
async fn follow(
    pools: &Api<KafkaNodePool>,
    kafkas: &Api<Kafka>,
    pool: &KafkaNodePool,
    to: &str,
) -> Result<String, CliError> {
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
    let mut last = String::new();
    // Every refusal of a pool's move or annotations starts with this.
    let about_pool = format!("KafkaNodePool {name} ");
    loop {
        let now = pools.get(&name).await.map_err(not_allowed)?;
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
        let k = kafkas.get(&kafka).await.map_err(not_allowed)?;
        let conditions = k.status.map(|s| s.conditions).unwrap_or_default();
        if let Some(refusal) = conditions.iter().find(|c| {
            c.type_ == "Ready"
                && c.status == "False"
                && c.reason.as_deref().is_some_and(|r| REFUSALS.contains(&r))
                && c.message
                    .as_deref()
                    .is_some_and(|m| m.contains(&about_pool))
        }) {
            return Err(CliError::Refused(format!(
                "{}: {}",
                refusal.reason.as_deref().unwrap_or_default(),
                refusal.message.as_deref().unwrap_or_default()
            )));
        }
        let now = conditions
            .iter()
            .find(|c| c.type_ == "Warning" && c.reason.as_deref() == Some("PoolMoving"))
            .and_then(|c| c.message.clone())
            .unwrap_or_else(|| "starting".to_owned());
        crate::say_if_changed(&mut last, &name, now);
        tokio::time::sleep(POLL).await;
    }
}

/// Kubernetes' RBAC said no (or something else failed).
fn not_allowed(e: kube::Error) -> CliError {
    crate::refused_by_kubernetes(
        e,
        "moving a pool needs get and patch on kafkanodepools.kafka.strimzi.io, and get on kafkas, in the central cluster",
    )
}
