//! `kstretch forget`: tells central that a member cluster is lost for good, by adding it to
//! the `Kafka`'s `kstretch.io/forgotten-clusters` with the caller's own credentials, after
//! checking with central that the cluster's agent is away and asking for confirmation; with
//! `--wait`, follows the operation that replaces the cluster's replicas until its nodes are out.

use std::time::{Duration, Instant};

use kstretch_api::operation::phase;
use kstretch_api::{Kafka, KafkaNodePool, KafkaOperation, names};
use kstretch_proto::admin::v1::ListAgentsRequest;
use kstretch_proto::admin::v1::admin_service_client::AdminServiceClient;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};

use crate::error::CliError;
use crate::kubeconfig::KafkaArgs;

/// How often `--wait` looks.
const POLL: Duration = Duration::from_secs(2);

/// `kstretch forget`.
#[derive(clap::Args, Debug)]
pub struct ForgetArgs {
    /// The member cluster (its alias) that is lost for good.
    pub cluster: String,
    #[command(flatten)]
    pub kafka: KafkaArgs,
    /// Do not ask for confirmation (needed when not at a terminal).
    #[arg(long)]
    pub yes: bool,
    /// Follow the replacement of the cluster's replicas until its nodes are out of Kafka.
    #[arg(long)]
    pub wait: bool,
}

pub async fn run(central: &str, timeout: Duration, args: &ForgetArgs) -> Result<String, CliError> {
    let cluster = args.cluster.trim();
    lost_for_central(central, timeout, cluster).await?;
    let (client, namespace) = args
        .kafka
        .kube
        .client_in(args.kafka.namespace.as_deref())
        .await?;
    let kafkas: Api<Kafka> = Api::namespaced(client.clone(), &namespace);
    let name = &args.kafka.kafka;
    let kafka = kafkas
        .get_opt(name)
        .await
        .map_err(not_allowed)?
        .ok_or_else(|| {
            CliError::Refused(format!("there is no Kafka {name} in namespace {namespace}"))
        })?;
    let mut forgotten = kafka.forgotten_clusters();
    if forgotten.contains(cluster) {
        return Ok(format!(
            "cluster {cluster} is already forgotten by Kafka {name}; follow it with `kstretch operations --kafka {name}`\n"
        ));
    }
    let pools: Api<KafkaNodePool> = Api::namespaced(client.clone(), &namespace);
    let in_cluster = pools_in(&pools, name, cluster).await?;
    if !args.yes {
        confirm(name, cluster, &in_cluster)?;
    }
    forgotten.insert(cluster.to_owned());
    let value = forgotten.into_iter().collect::<Vec<_>>().join(",");
    let patch =
        serde_json::json!({"metadata": {"annotations": {names::FORGOTTEN_CLUSTERS: value}}});
    kafkas
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(not_allowed)?;
    if !args.wait {
        return Ok(format!(
            "Kafka {name} forgets cluster {cluster}; follow it with --wait or `kstretch operations --kafka {name}`\n"
        ));
    }
    let ops: Api<KafkaOperation> = Api::namespaced(client, &namespace);
    follow(&ops, &pools, &kafkas, name, cluster).await
}

/// Refuses unless central's agent of `cluster` is known and away: forgetting a cluster that
/// still answers would throw away brokers that run (drain it, or move its pools, instead).
async fn lost_for_central(central: &str, timeout: Duration, cluster: &str) -> Result<(), CliError> {
    let channel = crate::central::connect(central, timeout).await?;
    let agents = AdminServiceClient::new(channel)
        .list_agents(ListAgentsRequest {})
        .await?
        .into_inner();
    match agents.agents.iter().find(|a| a.cluster_alias == cluster) {
        Some(a) if a.connected => Err(CliError::Refused(format!(
            "the agent of cluster {cluster} is connected: the cluster is not lost; to empty it, drain it or move its pools (`kstretch drain {cluster} --kafka <k> --move-nodes-to <cluster>`)"
        ))),
        _ => Ok(()),
    }
}

/// The pools of `kafka` that run in `cluster`, with their node IDs.
async fn pools_in(
    pools: &Api<KafkaNodePool>,
    kafka: &str,
    cluster: &str,
) -> Result<Vec<(String, Vec<i32>)>, CliError> {
    let params = ListParams::default().labels(&format!("{}={kafka}", names::CLUSTER));
    Ok(pools
        .list(&params)
        .await
        .map_err(not_allowed)?
        .items
        .iter()
        .filter_map(|p| {
            let s = p.status.as_ref()?;
            let here = s.cluster_alias.as_deref() == Some(cluster);
            let leaving = s
                .leaving
                .as_ref()
                .filter(|l| l.cluster_alias == cluster)
                .map(|l| l.node_ids.clone());
            let mut ids = if here { s.node_ids.clone() } else { Vec::new() };
            ids.extend(leaving.unwrap_or_default());
            (!ids.is_empty()).then(|| (p.name_any(), ids))
        })
        .collect())
}

/// Asks the person at the terminal to type the cluster's name.
fn confirm(kafka: &str, cluster: &str, pools: &[(String, Vec<i32>)]) -> Result<(), CliError> {
    let nodes: Vec<String> = pools
        .iter()
        .map(|(pool, ids)| format!("{pool} {ids:?}"))
        .collect();
    crate::terminal::confirm_by_typing(
        &format!(
            "Kafka {kafka} forgets Kubernetes cluster {cluster} for good: its nodes ({}) are taken out of Kafka, their partitions get replicas elsewhere, and if the cluster comes back its pods of this Kafka are deleted.\nType the cluster's name to confirm: ",
            if nodes.is_empty() {
                "none".to_owned()
            } else {
                nodes.join(", ")
            }
        ),
        cluster,
        &format!(
            "forgetting cluster {cluster} takes its nodes out of Kafka {kafka} for good; not at a terminal to confirm: add --yes"
        ),
    )
}

/// Polls the forget's operation and the pools until the cluster's nodes are out, printing
/// the operation's word whenever it changes.
async fn follow(
    ops: &Api<KafkaOperation>,
    pools: &Api<KafkaNodePool>,
    kafkas: &Api<Kafka>,
    kafka: &str,
    cluster: &str,
) -> Result<String, CliError> {
    let name = format!("{kafka}-forget-{cluster}");
    let started = Instant::now();
    let mut last = String::new();
    loop {
        let op = ops.get_opt(&name).await.map_err(not_allowed)?;
        let status = op.and_then(|o| o.status).unwrap_or_default();
        let said = status
            .conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .and_then(|c| c.message.clone())
            .unwrap_or_default();
        let phase = status.phase.clone().unwrap_or_else(|| "Pending".to_owned());
        if phase == phase::REFUSED || phase == phase::ABORTED {
            return Err(CliError::Refused(format!(
                "operation {name} is {phase}: {said}"
            )));
        }
        if phase == phase::COMPLETED && pools_in(pools, kafka, cluster).await?.is_empty() {
            let k = kafkas.get(kafka).await.map_err(not_allowed)?;
            let voters: Vec<i32> = k
                .status
                .and_then(|s| s.quorum)
                .map(|q| q.voters.iter().map(|v| v.id).collect())
                .unwrap_or_default();
            return Ok(format!(
                "cluster {cluster} forgotten by Kafka {kafka} in {:.0} s: {}; the quorum's voters: {voters:?}\n",
                started.elapsed().as_secs_f64(),
                if said.is_empty() {
                    "every partition has its replicas back"
                } else {
                    &said
                }
            ));
        }
        crate::terminal::say_if_changed(&mut last, &name, format!("{phase}: {said}"));
        tokio::time::sleep(POLL).await;
    }
}

/// Kubernetes' RBAC said no (or something else failed).
fn not_allowed(e: kube::Error) -> CliError {
    crate::error::refused_by_kubernetes(
        e,
        "forgetting a cluster needs get and patch on kafkas.kafka.strimzi.io, and get/list on kafkanodepools and kafkaoperations, in the central cluster",
    )
}
