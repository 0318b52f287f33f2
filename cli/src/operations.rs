//! `kstretch drain`, `undrain`, `spread`, `operations` and `abort`: operations on where a Kafka's
//! partitions live. Each is a `KafkaOperation` in the central cluster, created, listed and
//! aborted with the caller's own credentials there (so who may start one is a Kubernetes
//! permission); central carries it out and writes its progress into its status, which
//! `--wait` follows to the end.

use std::fmt::Write as _;
use std::time::Duration;

use kstretch_api::condition::READY;
use kstretch_api::operation::{
    Drain, KafkaOperationSpec, RecoverQuorum, Spread, Undrain, drains_in_effect, phase,
};
use kstretch_api::{KafkaOperation, names};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};

use crate::error::CliError;
use crate::kubeconfig::{KafkaArgs, KubeArgs};

/// How often `--wait` looks at the operation.
const POLL: Duration = Duration::from_secs(2);

/// How a started operation runs.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Bytes per second each broker may spend copying replicas (default: central's, 50 MiB/s).
    #[arg(long)]
    pub throttle: Option<i64>,
    /// Follow the operation to its end, printing its progress.
    #[arg(long)]
    pub wait: bool,
}

/// An operation that can also only be planned.
#[derive(clap::Args, Debug, Clone)]
pub struct PlannedArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Only show what would move, how many bytes and how long at the throttle.
    #[arg(long)]
    pub dry_run: bool,
}

/// `kstretch drain`: every replica and all leadership off the brokers of one cluster; pods stay.
#[derive(clap::Args, Debug)]
pub struct DrainArgs {
    /// The member cluster to drain (its alias).
    pub cluster: String,
    /// Instead of keeping the pods: move every node pool of the Kafka that runs in the cluster
    /// to this one (new nodes there; the old ones drained, then stopped), as `move-pool` does.
    #[arg(long, value_name = "CLUSTER", conflicts_with = "dry_run")]
    pub move_nodes_to: Option<String>,
    #[command(flatten)]
    pub planned: PlannedArgs,
}

/// `kstretch undrain`: the partitions of the last completed drain of a cluster go back.
#[derive(clap::Args, Debug)]
pub struct UndrainArgs {
    /// The member cluster drained earlier.
    pub cluster: String,
    #[command(flatten)]
    pub kafka: KafkaArgs,
    #[command(flatten)]
    pub run: RunArgs,
}

/// `kstretch spread`: every partition gets replicas in as many clusters as its replication
/// factor allows.
#[derive(clap::Args, Debug)]
pub struct SpreadArgs {
    /// Only this topic's partitions (repeat for several; default: every topic).
    #[arg(long = "topic")]
    pub topics: Vec<String>,
    #[command(flatten)]
    pub planned: PlannedArgs,
}

/// `kstretch recover-quorum`: the controller quorum rebuilt from one surviving voter.
#[derive(clap::Args, Debug)]
pub struct RecoverArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    /// The surviving controller to rebuild from, by node ID (default: the only voter that
    /// survives; with several, name the most up-to-date).
    #[arg(long = "from", value_name = "NODE_ID")]
    pub from: Option<i32>,
    /// Only show from which node central would rebuild and which voters are lost.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation (needed when not at a terminal).
    #[arg(long)]
    pub yes: bool,
    /// Follow the recovery to its end, printing its progress.
    #[arg(long)]
    pub wait: bool,
}

/// `kstretch abort`.
#[derive(clap::Args, Debug)]
pub struct AbortArgs {
    /// The operation's name.
    pub name: String,
    /// Its namespace (default: the kubeconfig context's).
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    #[command(flatten)]
    pub kube: KubeArgs,
    /// Follow the operation until it has stopped.
    #[arg(long)]
    pub wait: bool,
}

/// `kstretch operations`.
#[derive(clap::Args, Debug)]
pub struct ListArgs {
    /// Only the operations on this Kafka.
    #[arg(long)]
    pub kafka: Option<String>,
    /// The namespace (default: the kubeconfig context's).
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    #[command(flatten)]
    pub kube: KubeArgs,
}

async fn api(kube: &KubeArgs, namespace: Option<&str>) -> Result<Api<KafkaOperation>, CliError> {
    let (client, namespace) = kube.client_in(namespace).await?;
    Ok(Api::namespaced(client, &namespace))
}

pub async fn drain(args: &DrainArgs) -> Result<String, CliError> {
    if let Some(to) = &args.move_nodes_to {
        let run = &args.planned.run;
        return crate::moves::evacuate(
            &args.planned.kafka,
            &args.cluster,
            to,
            run.throttle,
            run.wait,
        )
        .await;
    }
    let spec = KafkaOperationSpec {
        drain: Some(Drain {
            cluster: args.cluster.clone(),
            ..Default::default()
        }),
        ..Default::default()
    };
    start(&args.planned, &format!("drain-{}-", args.cluster), spec).await
}

pub async fn spread(args: &SpreadArgs) -> Result<String, CliError> {
    let spec = KafkaOperationSpec {
        spread: Some(Spread {
            topics: args.topics.clone(),
        }),
        ..Default::default()
    };
    start(&args.planned, "spread-", spec).await
}

/// Creates the operation (its name starts with `prefix`, after `plan-` for a dry run) with the
/// throttle asked for; a dry run's plan is read and the object removed, anything else is
/// followed as `--wait` asks.
async fn start(
    args: &PlannedArgs,
    prefix: &str,
    mut spec: KafkaOperationSpec,
) -> Result<String, CliError> {
    let api = api(&args.kafka.kube, args.kafka.namespace.as_deref()).await?;
    spec.dry_run = args.dry_run;
    spec.replication_throttle = args.run.throttle;
    let prefix = if args.dry_run {
        format!("plan-{prefix}")
    } else {
        prefix.to_owned()
    };
    let op = create(&api, &args.kafka.kafka, &prefix, spec).await?;
    if args.dry_run {
        let planned = follow(&api, &op.name_any(), false, false).await;
        api.delete(&op.name_any(), &DeleteParams::default())
            .await
            .map_err(CliError::Kube)?;
        return planned;
    }
    started(&api, op, args.run.wait).await
}

pub async fn recover_quorum(args: &RecoverArgs) -> Result<String, CliError> {
    let kafka = &args.kafka.kafka;
    if !args.dry_run && !args.yes {
        crate::terminal::confirm_by_typing(
            &format!(
                "The controller quorum of Kafka {kafka} is rebuilt from one surviving controller, which becomes its only voter: whatever only the lost voters had written is lost, and partitions left without a leader get an unclean election (records their new leader had not replicated are lost).\nType the Kafka's name to confirm: "
            ),
            kafka,
            &format!(
                "rebuilding the quorum of Kafka {kafka} loses what only its lost voters had written; not at a terminal to confirm: add --yes (or see it first with --dry-run)"
            ),
        )?;
    }
    let spec = KafkaOperationSpec {
        recover_quorum: Some(RecoverQuorum { node_id: args.from }),
        ..Default::default()
    };
    let planned = PlannedArgs {
        kafka: args.kafka.clone(),
        run: RunArgs {
            throttle: None,
            wait: args.wait,
        },
        dry_run: args.dry_run,
    };
    start(&planned, "recover-quorum-", spec).await
}

pub async fn undrain(args: &UndrainArgs) -> Result<String, CliError> {
    let api = api(&args.kafka.kube, args.kafka.namespace.as_deref()).await?;
    let drain = last_drain(&api, &args.kafka.kafka, &args.cluster).await?;
    let spec = KafkaOperationSpec {
        undrain: Some(Undrain { drain }),
        replication_throttle: args.run.throttle,
        ..Default::default()
    };
    let op = create(
        &api,
        &args.kafka.kafka,
        &format!("undrain-{}-", args.cluster),
        spec,
    )
    .await?;
    started(&api, op, args.run.wait).await
}

pub async fn abort(args: &AbortArgs) -> Result<String, CliError> {
    let api = api(&args.kube, args.namespace.as_deref()).await?;
    let patch = serde_json::json!({"spec": {"abort": true}});
    api.patch(&args.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(not_allowed)?;
    if args.wait {
        return follow(&api, &args.name, true, true).await;
    }
    Ok(format!(
        "operation {} is stopping; follow it with `kstretch operations`\n",
        args.name
    ))
}

pub async fn list(args: &ListArgs) -> Result<String, CliError> {
    let api = api(&args.kube, args.namespace.as_deref()).await?;
    let mut params = ListParams::default();
    if let Some(kafka) = &args.kafka {
        params = params.labels(&format!("{}={kafka}", names::CLUSTER));
    }
    let mut ops = api.list(&params).await.map_err(not_allowed)?.items;
    ops.sort_by_key(|o| o.metadata.creation_timestamp.clone().map(|t| t.0));
    let mut out = format!(
        "{:<32} {:<16} {:<20} {:<10} {:>5}  MESSAGE\n",
        "NAME", "KAFKA", "WHAT", "PHASE", "LEFT"
    );
    for op in &ops {
        let status = op.status.clone().unwrap_or_default();
        let _ = writeln!(
            out,
            "{:<32} {:<16} {:<20} {:<10} {:>5}  {}",
            op.name_any(),
            op.labels().get(names::CLUSTER).map_or("-", String::as_str),
            what(op),
            status.phase.as_deref().unwrap_or("New"),
            status
                .partitions_left
                .map_or("-".to_owned(), |n| n.to_string()),
            message(op),
        );
    }
    Ok(out)
}

fn what(op: &KafkaOperation) -> String {
    match (&op.spec.drain, &op.spec.undrain) {
        (Some(d), _) if d.cluster.is_empty() => format!("drain brokers {:?}", d.node_ids),
        (Some(d), _) => format!("drain {}", d.cluster),
        (_, Some(u)) => format!("undrain ({})", u.drain),
        _ if op.spec.spread.is_some() => "spread".to_owned(),
        _ if let Some(f) = &op.spec.forget => format!("forget {}", f.cluster),
        _ if op.spec.recover_quorum.is_some() => "recover quorum".to_owned(),
        _ => "-".to_owned(),
    }
}

fn message(op: &KafkaOperation) -> String {
    op.status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == READY))
        .map(|c| {
            let reason = c.reason.as_deref().unwrap_or_default();
            match c.message.as_deref() {
                Some(m) => format!("{reason}: {m}"),
                None => reason.to_owned(),
            }
        })
        .unwrap_or_default()
}

async fn create(
    api: &Api<KafkaOperation>,
    kafka: &str,
    prefix: &str,
    spec: KafkaOperationSpec,
) -> Result<KafkaOperation, CliError> {
    let mut op = KafkaOperation::new("", spec);
    op.metadata.name = None;
    op.metadata.generate_name = Some(prefix.to_owned());
    op.metadata.labels = Some([(names::CLUSTER.to_owned(), kafka.to_owned())].into());
    api.create(&PostParams::default(), &op)
        .await
        .map_err(not_allowed)
}

async fn started(
    api: &Api<KafkaOperation>,
    op: KafkaOperation,
    wait: bool,
) -> Result<String, CliError> {
    let name = op.name_any();
    if wait {
        return follow(api, &name, true, false).await;
    }
    Ok(format!(
        "operation {name} started; follow it with `kstretch operations`, stop it with `kstretch abort {name}`\n"
    ))
}

/// The most recent completed drain of `cluster` for `kafka` that moved something and that no
/// completed undrain has undone yet.
async fn last_drain(
    api: &Api<KafkaOperation>,
    kafka: &str,
    cluster: &str,
) -> Result<String, CliError> {
    let params = ListParams::default().labels(&format!("{}={kafka}", names::CLUSTER));
    let ops = api.list(&params).await.map_err(not_allowed)?.items;
    drains_in_effect(&ops)
        .into_iter()
        .filter(|o| o.spec.drain.as_ref().is_some_and(|d| d.cluster == cluster))
        .max_by_key(|o| o.status.as_ref().and_then(|s| s.completed_at.clone()))
        .map(|o| o.name_any())
        .ok_or_else(|| {
            CliError::Refused(format!(
                "Kafka {kafka} has no completed drain of cluster {cluster} left to undo (see `kstretch operations`)"
            ))
        })
}

/// Prints the operation's progress as it changes (when `print` is set) until it ends; its last
/// word is the answer. A refusal is an error, and so is an abort unless `aborting`.
async fn follow(
    api: &Api<KafkaOperation>,
    name: &str,
    print: bool,
    aborting: bool,
) -> Result<String, CliError> {
    let mut last = String::new();
    loop {
        let op = api.get(name).await.map_err(not_allowed)?;
        let status = op.status.clone().unwrap_or_default();
        let now = format!(
            "{} {}",
            status.phase.as_deref().unwrap_or("New"),
            message(&op)
        );
        if print && now != last {
            println!("{name}: {now}");
        }
        last = now;
        match status.phase.as_deref() {
            Some(phase::REFUSED) => return Err(CliError::Refused(message(&op))),
            Some(phase::ABORTED) if !aborting => {
                return Err(CliError::Refused(format!("aborted: {}", message(&op))));
            }
            p if phase::ended(p) => return Ok(format!("{name}: {}\n", message(&op))),
            _ => tokio::time::sleep(POLL).await,
        }
    }
}

/// Kubernetes' RBAC said no (or something else failed).
fn not_allowed(e: kube::Error) -> CliError {
    crate::error::refused_by_kubernetes(
        e,
        "starting, listing and aborting operations needs RBAC on kafkaoperations.kstretch.io in the central cluster",
    )
}
