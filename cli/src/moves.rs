//! `kstretch move-pool`: points a `KafkaNodePool` at another member cluster (its
//! `strimzi.io/stretch-cluster-alias`, and the move's drain throttle) with the caller's own
//! credentials, and with `--wait` follows the move as central reports it in the pool's and the
//! `Kafka`'s status until the pool runs only there, or central refuses it.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use kstretch_api::{Kafka, KafkaNodePool, names};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};

use crate::CliError;
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
    if args.throttle.is_some_and(|t| t <= 0) {
        return Err(CliError::Refused(
            "--throttle must be a number of bytes per second above 0".to_owned(),
        ));
    }
    let client = args.kube.client().await?;
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());
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
    let mut annotations = serde_json::json!({ names::STRETCH_CLUSTER_ALIAS: args.to });
    if let Some(throttle) = args.throttle {
        annotations[names::MOVE_THROTTLE] = serde_json::json!(throttle.to_string());
    }
    let patch = serde_json::json!({"metadata": {"annotations": annotations}});
    pools
        .patch(&args.pool, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(not_allowed)?;
    if !args.wait {
        return Ok(format!(
            "KafkaNodePool {} moves from {from} to {}; follow it with --wait, `kubectl get kafkanodepool {} -o yaml` (status.leaving) or `kstretch operations`\n",
            args.pool, args.to, args.pool
        ));
    }
    let kafka = pool.labels().get(names::CLUSTER).cloned().ok_or_else(|| {
        CliError::Refused(format!(
            "KafkaNodePool {} has no {} label naming its Kafka",
            args.pool,
            names::CLUSTER
        ))
    })?;
    let kafkas: Api<Kafka> = Api::namespaced(client, &namespace);
    follow(&pools, &kafkas, &kafka, args, &status.node_ids).await
}

/// Polls the pool and its `Kafka` until the pool runs only in `args.to`, printing the `Kafka`'s
/// word on the move whenever it changes; a refusal naming the pool ends it with an error.
async fn follow(
    pools: &Api<KafkaNodePool>,
    kafkas: &Api<Kafka>,
    kafka: &str,
    args: &MoveArgs,
    before: &[i32],
) -> Result<String, CliError> {
    let started = Instant::now();
    let mut last = String::new();
    // Every refusal of a pool's move or annotations starts with this.
    let about_pool = format!("KafkaNodePool {} ", args.pool);
    loop {
        let pool = pools.get(&args.pool).await.map_err(not_allowed)?;
        let status = pool.status.unwrap_or_default();
        if status.cluster_alias.as_deref() == Some(args.to.as_str()) && status.leaving.is_none() {
            let mut out = String::new();
            let _ = writeln!(
                out,
                "KafkaNodePool {} moved to {}: nodes {:?} (were {before:?}) in {:.0} s",
                args.pool,
                args.to,
                status.node_ids,
                started.elapsed().as_secs_f64()
            );
            return Ok(out);
        }
        let k = kafkas.get(kafka).await.map_err(not_allowed)?;
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
        if now != last {
            println!("{}: {now}", args.pool);
            last = now;
        }
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
