//! A running quorum recovery (`KafkaOperation` `.spec.recoverQuorum`, ADR 0021), carried out
//! by the Kafka reconciler because it needs the pods. The operation controller decided from
//! which surviving controller (`crate::operation::recover`); here its pod gets an init
//! container of the agent's image that runs `kstretch-agent recover-quorum` on its metadata
//! log, central restarts the pod once, and when the node leads the quorum alone and the lost
//! brokers are fenced, partitions left without a leader get an unclean election and the
//! operation completes. Quorum changes and controller rolls wait meanwhile.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, SecurityContext, VolumeMount};
use kstretch_api::condition::{self, Condition};
use kstretch_api::operation::{KafkaOperationStatus, QuorumRecoveryStatus, phase};
use kstretch_api::{Kafka, KafkaNodePool, KafkaOperation, QuorumStatus};
use kstretch_core::kraft::{self, recovery};
use kstretch_kadmin::AdminClient;
use kube::ResourceExt;
use serde_json::{Value, json};

use super::build::Built;
use super::context::Context;
use super::quorum;
use super::roll::NodeView;
use super::status::{not_ready, now};
use crate::error::Error;
use crate::kafka::warning::{Reason, Warning};
use crate::link::restart::PodToRestart;
use crate::objects;
use crate::operation::status::write_status;
use crate::operation::steps::{self, Observed};
use kstretch_proto::agent::v1::{PodSetStatus, PodStatus};

/// The init container that runs the recovery.
pub const TOOL_CONTAINER: &str = "recover-quorum";
/// The `Kafka`'s reason while its quorum's majority is lost for good and not yet rebuilt.
pub const QUORUM_MAJORITY_LOST: &str = "QuorumMajorityLost";
/// How long the agent has to answer the restart.
const RESTART_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A running recovery and where it stands.
#[derive(Debug, Clone)]
pub struct Recovering {
    pub op: KafkaOperation,
    pub status: KafkaOperationStatus,
    pub recovery: QuorumRecoveryStatus,
}

/// Where each voter `kafka` last recorded runs: its pool's cluster (a leaving node's, for the
/// IDs a moving pool left behind), `None` when no pool places it.
pub fn voter_places<'a>(
    kafka: &Kafka,
    pools: impl Iterator<Item = &'a KafkaNodePool> + Clone,
) -> BTreeMap<i32, Option<String>> {
    let voters = kafka
        .status
        .as_ref()
        .and_then(|s| s.quorum.as_ref())
        .map(|q| q.voters.iter().map(|v| v.id).collect::<Vec<_>>())
        .unwrap_or_default();
    voters
        .into_iter()
        .map(|id| {
            let place = pools.clone().find_map(|p| {
                let s = p.status.as_ref()?;
                if s.node_ids.contains(&id) {
                    return s.cluster_alias.clone();
                }
                s.leaving
                    .as_ref()
                    .filter(|l| l.node_ids.contains(&id))
                    .map(|l| l.cluster_alias.clone())
            });
            (id, place)
        })
        .collect()
}

/// When the voters outside the clusters `kafka` forgot are fewer than a majority: no controller
/// can be elected, so nothing in Kafka can change until the quorum is rebuilt. Says so.
pub fn majority_lost<'a>(
    kafka: &Kafka,
    pools: impl Iterator<Item = &'a KafkaNodePool> + Clone,
) -> Option<String> {
    let forgotten = kafka.forgotten_clusters();
    if forgotten.is_empty() {
        return None;
    }
    let places = voter_places(kafka, pools);
    if !recovery::majority_lost(&places, &forgotten) {
        return None;
    }
    let lost: Vec<i32> = places
        .iter()
        .filter(|(_, c)| c.as_ref().is_some_and(|c| forgotten.contains(c)))
        .map(|(id, _)| *id)
        .collect();
    Some(format!(
        "the controller quorum lost its majority for good (voters {lost:?} of {:?} ran in forgotten clusters): no controller can be elected, so nothing in Kafka can change; rebuild the quorum from a surviving controller with `kstretch recover-quorum --kafka {}`",
        places.keys().collect::<Vec<_>>(),
        kafka.name_any()
    ))
}

/// The running recovery among a `Kafka`'s operations `ops` (the oldest, should there be two),
/// if any.
pub fn running(ops: &[KafkaOperation]) -> Option<Recovering> {
    ops.iter()
        .filter(|o| o.spec.recover_quorum.is_some())
        .filter_map(|op| {
            let status = op.status.clone()?;
            let recovery = status.recovery.clone()?;
            (status.phase.as_deref() == Some(phase::RUNNING)).then(|| Recovering {
                op: op.clone(),
                status,
                recovery,
            })
        })
        .min_by_key(|r| {
            (
                r.op.metadata.creation_timestamp.clone().map(|t| t.0),
                r.op.name_any(),
            )
        })
}

/// Whether the survivor's pod must carry the tool: until the pod restarted for it has been
/// replaced (the agent recreates it from the podset it holds then).
pub fn tool_wanted(recovery: &QuorumRecoveryStatus, reported_uid: Option<&str>) -> bool {
    match (&recovery.restarted_pod_uid, reported_uid) {
        (Some(old), Some(now)) => old == now,
        _ => true,
    }
}

/// Adds the tool, run from `image`, as the first init container of the survivor's pod in its
/// podset. The pod's revision stays (it is computed without it), so nothing rolls when the
/// tool goes again. `Err` says why it cannot be added.
pub fn add_tool(
    built: &mut Built,
    recovery: &QuorumRecoveryStatus,
    image: &str,
) -> Result<(), String> {
    let node = built
        .cluster
        .nodes
        .iter()
        .find(|n| n.id == recovery.node_id)
        .ok_or_else(|| format!("node {} is not built", recovery.node_id))?;
    let dir = kraft::metadata_dir(node)
        .ok_or_else(|| format!("node {} has no volume for its metadata log", node.id))?;
    let pod = built
        .objects
        .get_mut(&recovery.cluster)
        .into_iter()
        .flatten()
        .filter(|o| o["kind"] == "StrimziPodSet")
        .flat_map(|o| o["spec"]["pods"].as_array_mut().into_iter().flatten())
        .find(|p| p["metadata"]["name"] == recovery.pod.as_str())
        .ok_or_else(|| {
            format!(
                "pod {} is not in a podset of cluster {}",
                recovery.pod, recovery.cluster
            )
        })?;
    let mounts = pod["spec"]["containers"][0]["volumeMounts"].clone();
    let tool = tool_container(image, &dir, recovery.node_id, mounts);
    match pod["spec"]["initContainers"].as_array_mut() {
        Some(init) => init.insert(0, tool),
        None => pod["spec"]["initContainers"] = json!([tool]),
    }
    Ok(())
}

/// The init container: the agent's binary, on the node's volumes, as root (it must write the
/// log files whatever user the Kafka image runs as); its summary is its termination message.
fn tool_container(image: &str, dir: &str, node_id: i32, mounts: Value) -> Value {
    let args = [
        "recover-quorum",
        "--metadata-dir",
        dir,
        "--node-id",
        &node_id.to_string(),
        "--termination-log",
        "/dev/termination-log",
    ];
    objects::value(&Container {
        name: TOOL_CONTAINER.to_owned(),
        image: Some(image.to_owned()),
        args: Some(args.iter().map(|a| (*a).to_owned()).collect()),
        // The node container's own mounts, which kstretch built.
        volume_mounts: serde_json::from_value::<Vec<VolumeMount>>(mounts).ok(),
        security_context: Some(SecurityContext {
            run_as_user: Some(0),
            run_as_non_root: Some(false),
            ..Default::default()
        }),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        ..Default::default()
    })
}

/// What one turn of a recovery did.
#[derive(Debug)]
pub struct Turn {
    /// What it waits for (the quorum is busy until it is done).
    pub why: String,
    /// The quorum it saw, once its node leads it alone: the `Kafka`'s status records it.
    pub quorum: Option<QuorumStatus>,
}

/// One step of the recovery. Each turn reads (the survivor as central sees it, then Kafka),
/// decides purely, and acts.
pub async fn advance(
    ctx: &Context,
    kafka: &Kafka,
    r: &Recovering,
    views: &[NodeView],
    bootstrap: Option<&str>,
) -> Result<Turn, Error> {
    let mut quorum = None;
    let why = turn(ctx, kafka, r, views, bootstrap, &mut quorum).await?;
    Ok(Turn { why, quorum })
}

async fn turn(
    ctx: &Context,
    kafka: &Kafka,
    r: &Recovering,
    views: &[NodeView],
    bootstrap: Option<&str>,
    seen_quorum: &mut Option<QuorumStatus>,
) -> Result<String, Error> {
    let rec = &r.recovery;
    let node = views.iter().find(|n| n.id == rec.node_id);
    let image_known = ctx
        .agents
        .get(&rec.cluster)
        .is_some_and(|a| !a.image.is_empty());
    match before(&kafka.name_any(), r, node, image_known) {
        Before::Wait { reason, why } => say(ctx, r, r.status.clone(), reason, why).await,
        Before::Restart { status, uid, why } => {
            // Recorded before it happens: a central that restarts meanwhile does not restart
            // the recovered pod again. Asking again until it is replaced is harmless (the
            // agent deletes only that UID) and mends a restart that was lost.
            say(ctx, r, *status, "Recovering", why.clone()).await?;
            restart(ctx, kafka, rec, &uid).await;
            Ok(why)
        }
        Before::Finish => finish(ctx, kafka, r, bootstrap, seen_quorum).await,
    }
}

/// Where a recovery stands before Kafka is asked anything.
#[derive(Debug, Clone, PartialEq)]
enum Before {
    /// It waits; the operation says why.
    Wait { reason: &'static str, why: String },
    /// Restart the survivor's pod `uid` once the operation records `status`, then wait.
    Restart {
        status: Box<KafkaOperationStatus>,
        uid: String,
        why: String,
    },
    /// The pod runs again with the recovery: Kafka is asked how far it got.
    Finish,
}

/// Decides from the survivor's `node` as central sees it, and whether its agent said which
/// image it runs (the tool's) (pure).
fn before(kafka: &str, r: &Recovering, node: Option<&NodeView>, image_known: bool) -> Before {
    let rec = &r.recovery;
    let wait = |reason, why| Before::Wait { reason, why };
    let Some(node) = node else {
        return wait(
            "SurvivorNotRunning",
            format!(
                "node {} is not among the nodes central runs for Kafka {kafka}; was its pool deleted or moved?",
                rec.node_id
            ),
        );
    };
    if !node.connected {
        return wait(
            "Recovering",
            format!(
                "waiting for the agent of cluster {} to connect",
                rec.cluster
            ),
        );
    }
    if !image_known {
        return wait(
            "AgentImageUnknown",
            format!(
                "the agent of cluster {} did not say which image it runs (its --image, which the agent chart sets): the recovery runs in a container of that image; start the agent with it",
                rec.cluster
            ),
        );
    }
    match (&rec.restarted_pod_uid, node.reported.as_ref()) {
        (None, _) if !node.applied => wait(
            "Recovering",
            format!(
                "waiting for cluster {} to apply pod {} with the recovery",
                rec.cluster, rec.pod
            ),
        ),
        (_, None) => wait(
            "Recovering",
            format!("waiting for pod {} to exist", rec.pod),
        ),
        (None, Some(pod)) => {
            let mut status = r.status.clone();
            if let Some(s) = status.recovery.as_mut() {
                s.restarted_pod_uid = Some(pod.uid.clone());
            }
            Before::Restart {
                status: Box::new(status),
                uid: pod.uid.clone(),
                why: format!("restarting pod {} to run the recovery", rec.pod),
            }
        }
        (Some(old), Some(pod)) if pod.uid == *old => Before::Restart {
            status: Box::new(r.status.clone()),
            uid: old.clone(),
            why: format!("waiting for pod {} to be replaced", rec.pod),
        },
        (Some(_), Some(_)) => Before::Finish,
    }
}

async fn restart(ctx: &Context, kafka: &Kafka, rec: &QuorumRecoveryStatus, uid: &str) {
    let pod = PodToRestart {
        namespace: kafka.namespace().unwrap_or_default(),
        name: rec.pod.clone(),
        uid: uid.to_owned(),
        reason: "rebuilding the controller quorum from this node".to_owned(),
        claims: Vec::new(),
    };
    if let Err(e) = ctx
        .restarts
        .restart(&rec.cluster, pod, RESTART_TIMEOUT)
        .await
    {
        tracing::warn!(pod = %rec.pod, error = %e, "quorum recovery: restart not confirmed");
    }
}

/// Once the pod runs again: waits until its node leads the quorum alone and the lost brokers
/// are fenced, elects leaders uncleanly where none is left, and completes.
async fn finish(
    ctx: &Context,
    kafka: &Kafka,
    r: &Recovering,
    bootstrap: Option<&str>,
    seen_quorum: &mut Option<QuorumStatus>,
) -> Result<String, Error> {
    let rec = &r.recovery;
    let written = pod_says(ctx, kafka, rec);
    let seen = read_quorum(ctx, bootstrap).await;
    let (admin, seen) = match seen.and_then(|(admin, seen)| {
        leads_alone(rec.node_id, &seen)?;
        Ok((admin, seen))
    }) {
        Ok(led) => led,
        Err(what) => {
            let mut why = format!(
                "waiting for node {} to lead the quorum alone: {what}",
                rec.node_id
            );
            if !written.is_empty() {
                why.push_str(&format!("; pod {}: {written}", rec.pod));
            }
            return say(ctx, r, r.status.clone(), "Recovering", why).await;
        }
    };
    *seen_quorum = Some(seen);
    let forgotten = kafka.forgotten_clusters();
    let decided = steps::observe(&admin)
        .await
        .map_err(|e| format!("cannot read the partitions: {e}"))
        .and_then(|observed| election(&observed, &forgotten));
    let leaderless = match decided {
        Ok(leaderless) => leaderless,
        Err(what) => return waiting(ctx, r, r.status.clone(), &what).await,
    };
    let failed = match admin.elect_unclean_leaders(&leaderless.electable).await {
        Ok(failed) => failed,
        Err(e) => {
            let what = format!("the unclean elections failed: {e}");
            return waiting(ctx, r, r.status.clone(), &what).await;
        }
    };
    let failed: Vec<(String, String)> = failed
        .iter()
        .map(|f| (steps::name(&f.topic, f.partition), f.error.to_string()))
        .collect();
    match elected(r, &leaderless, &failed) {
        Ok(elected) => complete(ctx, kafka, r, elected, &leaderless.lost, written).await,
        Err((elected, what)) => {
            // What was elected is recorded, so the completion names it too.
            let mut status = r.status.clone();
            if let Some(s) = status.recovery.as_mut() {
                s.unclean_elections = elected;
            }
            waiting(ctx, r, status, &what).await
        }
    }
}

/// The recovery waits with the survivor leading alone; the operation says for what.
async fn waiting(
    ctx: &Context,
    r: &Recovering,
    status: KafkaOperationStatus,
    what: &str,
) -> Result<String, Error> {
    let why = format!("node {} leads the quorum alone; {what}", r.recovery.node_id);
    say(ctx, r, status, "Recovering", why).await
}

/// Kafka's admin client and the quorum as Kafka reports it, or why they cannot be read.
async fn read_quorum(
    ctx: &Context,
    bootstrap: Option<&str>,
) -> Result<(AdminClient, QuorumStatus), String> {
    let bootstrap = bootstrap.ok_or("no bootstrap address")?;
    let admin = ctx
        .kafka
        .client(bootstrap)
        .await
        .map_err(|e| format!("cannot reach Kafka: {e}"))?;
    match quorum::observe(&admin).await {
        Ok(seen) => Ok((admin, seen)),
        Err(e) => {
            ctx.kafka.forget(bootstrap);
            Err(e.to_string())
        }
    }
}

/// Whether node `id` leads the quorum `seen` as its only voter; otherwise what is seen (pure).
fn leads_alone(id: i32, seen: &QuorumStatus) -> Result<(), String> {
    let voters: Vec<i32> = seen.voters.iter().map(|v| v.id).collect();
    if seen.leader_id != Some(id) || voters != [id] {
        return Err(format!("leader {:?}, voters {voters:?}", seen.leader_id));
    }
    Ok(())
}

/// Once the lost brokers are fenced, the partitions left without a leader, by what can be done
/// for each; otherwise what is waited for (pure).
fn election(observed: &Observed, forgotten: &BTreeSet<String>) -> Result<Leaderless, String> {
    let unfenced: Vec<i32> = observed
        .brokers
        .iter()
        .filter(|(_, rack)| forgotten.contains(*rack))
        .map(|(id, _)| *id)
        .collect();
    if !unfenced.is_empty() {
        return Err(format!(
            "waiting for Kafka to fence the lost brokers {unfenced:?} (their heartbeats stopped)"
        ));
    }
    let leaderless = Leaderless::sort(observed, forgotten);
    if !leaderless.waiting.is_empty() {
        return Err(format!(
            "waiting for brokers {:?} to be live, to lead {} (they hold its only replicas outside the forgotten clusters)",
            leaderless.awaited,
            leaderless.waiting.join(", ")
        ));
    }
    Ok(leaderless)
}

/// The partitions elected so far, after the unclean elections of `leaderless.electable` of
/// which `failed` (name, error) failed; while some failed, those elected so far and what is
/// retried (pure).
fn elected(
    r: &Recovering,
    leaderless: &Leaderless,
    failed: &[(String, String)],
) -> Result<Vec<String>, (Vec<String>, String)> {
    let mut elected = r.recovery.unclean_elections.clone();
    for name in leaderless.electable.iter().map(|(t, p)| steps::name(t, *p)) {
        if !failed.iter().any(|(f, _)| *f == name) && !elected.contains(&name) {
            elected.push(name);
        }
    }
    if failed.is_empty() {
        return Ok(elected);
    }
    let errors: Vec<String> = failed
        .iter()
        .map(|(name, e)| format!("{name}: {e}"))
        .collect();
    Err((
        elected,
        format!(
            "unclean elections not done yet, trying again: {}",
            errors.join("; ")
        ),
    ))
}

/// Records the recovery as completed, with an Event.
async fn complete(
    ctx: &Context,
    kafka: &Kafka,
    r: &Recovering,
    elected: Vec<String>,
    lost: &[String],
    written: String,
) -> Result<String, Error> {
    let message = completed(&r.recovery, &elected, lost);
    let mut status = r.status.clone();
    if let Some(s) = status.recovery.as_mut() {
        s.unclean_elections = elected;
        s.written = (!written.is_empty()).then_some(written);
    }
    status.phase = Some(phase::COMPLETED.to_owned());
    status.completed_at = Some(now());
    tracing::info!(%message, "quorum recovery completed");
    ctx.events.about(
        kafka,
        true,
        "QuorumRecovered",
        "QuorumRecovery",
        message.clone(),
    );
    let done = Condition::new(condition::READY, condition::TRUE)
        .with_reason("Completed")
        .with_message(message.clone());
    write_status(&ctx.client, &r.op, status, done).await?;
    Ok(message)
}

/// What a completed recovery says it did and what was lost (pure).
fn completed(rec: &QuorumRecoveryStatus, elected: &[String], lost: &[String]) -> String {
    let mut message = format!(
        "the controller quorum was rebuilt from node {}, its only voter now; voters {:?} are gone, and with them whatever only they had written",
        rec.node_id, rec.lost_voters
    );
    if !elected.is_empty() {
        message.push_str(&format!(
            "; partitions without a leader were given one by an unclean election (records their new leader had not replicated are lost): {}",
            elected.join(", ")
        ));
    }
    if !lost.is_empty() {
        message.push_str(&format!(
            "; every replica was in a forgotten cluster: {} (offline; the forget names them)",
            lost.join(", ")
        ));
    }
    message
}

/// The partitions without a leader once the quorum is rebuilt, by what can be done for each.
#[derive(Debug, Default, PartialEq, Eq)]
struct Leaderless {
    /// A live broker holds a replica: elected uncleanly now.
    electable: Vec<(String, i32)>,
    /// No live replica, but one on a registered broker outside the forgotten clusters (the
    /// survivor still catching up, say): waited for, named as `topic-partition`.
    waiting: Vec<String>,
    /// The brokers those wait for.
    awaited: BTreeSet<i32>,
    /// Every replica in a forgotten cluster (or on no registered broker): offline for good.
    lost: Vec<String>,
}

impl Leaderless {
    fn sort(observed: &Observed, forgotten: &BTreeSet<String>) -> Leaderless {
        let mut out = Leaderless::default();
        for p in observed.partitions.iter().filter(|p| p.leader.is_none()) {
            let name = steps::name(&p.topic, p.partition);
            if p.replicas.iter().any(|r| observed.brokers.contains_key(r)) {
                out.electable.push((p.topic.clone(), p.partition));
                continue;
            }
            let awaited: Vec<i32> = p
                .replicas
                .iter()
                .filter(|r| {
                    observed
                        .registered
                        .get(r)
                        .is_some_and(|rack| !forgotten.contains(rack))
                })
                .copied()
                .collect();
            if awaited.is_empty() {
                out.lost.push(name);
            } else {
                out.awaited.extend(awaited);
                out.waiting.push(name);
            }
        }
        out
    }
}

/// What the agent last reported of the survivor's pod.
fn reported_pod(ctx: &Context, kafka: &Kafka, rec: &QuorumRecoveryStatus) -> Option<PodStatus> {
    let podsets = ctx.agents.get(&rec.cluster).map(|a| a.podsets);
    survivor_pod(kafka, rec, podsets.as_deref().unwrap_or_default())
}

/// The survivor's pod among the `podsets` its cluster's agent reported.
pub fn survivor_pod(
    kafka: &Kafka,
    rec: &QuorumRecoveryStatus,
    podsets: &[PodSetStatus],
) -> Option<PodStatus> {
    let namespace = kafka.namespace().unwrap_or_default();
    podsets
        .iter()
        .filter(|s| s.namespace == namespace)
        .flat_map(|s| &s.pods_status)
        .find(|p| p.name == rec.pod && !p.uid.is_empty())
        .cloned()
}

/// What the survivor's pod reports of its containers (the tool's summary, or why it failed).
fn pod_says(ctx: &Context, kafka: &Kafka, rec: &QuorumRecoveryStatus) -> String {
    reported_pod(ctx, kafka, rec)
        .map(|p| p.message)
        .unwrap_or_default()
}

/// Before the desired state is published (pure): the survivor's pod (as its agent reported
/// it, `survivor`) gets the tool, from the `image` its agent runs, while it needs it; what
/// prevents that is a warning.
pub fn equip(
    r: &Recovering,
    survivor: Option<&PodStatus>,
    image: Option<&str>,
    built: &mut Built,
    warnings: &mut Vec<Warning>,
) {
    let uid = survivor.map(|p| p.uid.as_str());
    if !tool_wanted(&r.recovery, uid) {
        return;
    }
    let Some(image) = image.filter(|i| !i.is_empty()) else {
        // `advance` says so in the operation.
        return;
    };
    if let Err(why) = add_tool(built, &r.recovery, image) {
        warnings.push(Warning::new(
            Reason::QuorumRecovery,
            format!("the recovery cannot run: {why}"),
        ));
    }
}

/// Writes where the recovery stands into its operation and returns it.
async fn say(
    ctx: &Context,
    r: &Recovering,
    status: KafkaOperationStatus,
    reason: &'static str,
    why: String,
) -> Result<String, Error> {
    let shown = r
        .status
        .conditions
        .iter()
        .any(|c| c.type_ == condition::READY && c.message.as_deref() == Some(why.as_str()));
    if !shown || status != r.status {
        write_status(&ctx.client, &r.op, status, not_ready(reason, why.clone())).await?;
    }
    Ok(why)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(
        name: &str,
        created: &str,
        spec: serde_json::Value,
        status: serde_json::Value,
    ) -> KafkaOperation {
        serde_json::from_value(json!({
            "apiVersion": "kstretch.io/v1alpha1",
            "kind": "KafkaOperation",
            "metadata": {"name": name, "namespace": "ns", "creationTimestamp": created},
            "spec": spec,
            "status": status,
        }))
        .expect("an operation")
    }

    #[test]
    fn the_oldest_running_recovery_among_the_operations_is_the_one() {
        let recovery = |node: i32| json!({"nodeId": node, "cluster": "alpha", "pod": "k-a-0"});
        let in_progress = |node: i32| json!({"phase": "Running", "recovery": recovery(node)});
        let ops = [
            op(
                "drain",
                "2026-01-01T00:00:00Z",
                json!({"drain": {"nodeIds": [1]}}),
                json!({"phase": "Running"}),
            ),
            op(
                "newer",
                "2026-01-03T00:00:00Z",
                json!({"recoverQuorum": {"nodeId": 2}}),
                in_progress(2),
            ),
            op(
                "older",
                "2026-01-02T00:00:00Z",
                json!({"recoverQuorum": {"nodeId": 0}}),
                in_progress(0),
            ),
            op(
                "done",
                "2026-01-01T00:00:00Z",
                json!({"recoverQuorum": {"nodeId": 1}}),
                json!({"phase": "Completed", "recovery": recovery(1)}),
            ),
        ];
        let r = running(&ops).expect("a running recovery");
        assert_eq!(
            (r.op.name_any(), r.recovery.node_id),
            ("older".to_owned(), 0)
        );
        assert!(running(&ops[3..]).is_none());
    }

    #[test]
    fn the_tool_stays_until_the_restarted_pod_is_replaced() {
        let mut rec = QuorumRecoveryStatus::default();
        assert!(tool_wanted(&rec, Some("a")));
        rec.restarted_pod_uid = Some("a".to_owned());
        assert!(tool_wanted(&rec, Some("a")));
        assert!(tool_wanted(&rec, None));
        assert!(!tool_wanted(&rec, Some("b")));
    }

    #[test]
    fn a_completed_recovery_names_what_it_elected_uncleanly_and_what_is_lost() {
        let rec = QuorumRecoveryStatus {
            node_id: 0,
            lost_voters: vec![1, 2],
            ..Default::default()
        };
        let plain = completed(&rec, &[], &[]);
        assert_eq!(
            plain,
            "the controller quorum was rebuilt from node 0, its only voter now; voters [1, 2] are gone, and with them whatever only they had written"
        );
        let said = completed(&rec, &["kept-0".to_owned()], &["gone-0".to_owned()]);
        assert!(said.starts_with(&plain), "{said}");
        assert!(
            said.contains(
                "unclean election (records their new leader had not replicated are lost): kept-0"
            ),
            "{said}"
        );
        assert!(
            said.ends_with(
                "every replica was in a forgotten cluster: gone-0 (offline; the forget names them)"
            ),
            "{said}"
        );
    }

    #[test]
    fn leaderless_partitions_are_elected_waited_for_or_lost() {
        use std::collections::BTreeMap;

        use kstretch_core::movement::Partition;

        let partition = |name: &str, replicas: &[i32]| Partition {
            topic: name.to_owned(),
            partition: 0,
            replicas: replicas.to_vec(),
            isr: replicas.iter().copied().collect(),
            leader: None,
            size: 1,
            min_isr: 1,
        };
        let mut led = partition("led", &[0, 1]);
        led.leader = Some(0);
        let observed = Observed {
            partitions: vec![
                led,
                partition("live", &[1, 0]),
                partition("catching-up", &[2, 1]),
                partition("gone", &[1]),
                partition("nowhere", &[9]),
            ],
            // 0 alive; 2 registered in alpha but fenced; 1 in forgotten beta.
            brokers: BTreeMap::from([(0, "alpha".to_owned())]),
            registered: BTreeMap::from([
                (0, "alpha".to_owned()),
                (1, "beta".to_owned()),
                (2, "alpha".to_owned()),
            ]),
        };
        let sorted = Leaderless::sort(&observed, &["beta".to_owned()].into());
        assert_eq!(
            sorted,
            Leaderless {
                electable: vec![("live".to_owned(), 0)],
                waiting: vec!["catching-up-0".to_owned()],
                awaited: [2].into(),
                lost: vec!["gone-0".to_owned(), "nowhere-0".to_owned()],
            }
        );
    }

    fn recovering(restarted: Option<&str>) -> Recovering {
        let status = json!({"phase": "Running", "recovery": {
            "nodeId": 0, "cluster": "alpha", "pod": "k-a-0", "lostVoters": [1, 2],
            "restartedPodUid": restarted, "uncleanElections": ["early-0"]}});
        let op = op(
            "recover",
            "2026-01-01T00:00:00Z",
            json!({"recoverQuorum": {"nodeId": 0}}),
            status,
        );
        running(std::slice::from_ref(&op)).expect("running")
    }

    fn survivor(uid: Option<&str>, connected: bool, applied: bool) -> NodeView {
        NodeView {
            id: 0,
            alias: "alpha".into(),
            pod: "k-a-0".into(),
            roles: BTreeSet::new(),
            desired_revision: "r".into(),
            reported: uid.map(|uid| super::super::roll::Reported {
                uid: uid.into(),
                ready: false,
                revision: "r".into(),
                manual: false,
                new_disks: false,
                terminating: false,
            }),
            connected,
            applied,
            claims: Vec::new(),
        }
    }

    fn reason_of(b: &Before) -> (&str, &str) {
        match b {
            Before::Wait { reason, why } => (reason, why),
            other => panic!("waits: {other:?}"),
        }
    }

    #[test]
    fn the_survivor_is_restarted_once_to_run_the_recovery_then_kafka_is_asked() {
        let r = recovering(None);
        let fresh = survivor(Some("u1"), true, true);
        assert_eq!(
            reason_of(&before("k", &r, None, true)).0,
            "SurvivorNotRunning"
        );
        let away = survivor(Some("u1"), false, true);
        assert!(
            reason_of(&before("k", &r, Some(&away), true))
                .1
                .contains("to connect")
        );
        assert_eq!(
            reason_of(&before("k", &r, Some(&fresh), false)).0,
            "AgentImageUnknown"
        );
        let unapplied = survivor(Some("u1"), true, false);
        assert!(
            reason_of(&before("k", &r, Some(&unapplied), true))
                .1
                .contains("to apply pod k-a-0")
        );
        let absent = survivor(None, true, true);
        assert_eq!(
            reason_of(&before("k", &r, Some(&absent), true)).1,
            "waiting for pod k-a-0 to exist"
        );
        // The restart is recorded first, with the UID restarted.
        let Before::Restart { status, uid, why } = before("k", &r, Some(&fresh), true) else {
            panic!("restarts");
        };
        assert_eq!(uid, "u1");
        assert_eq!(
            status.recovery.unwrap().restarted_pod_uid.as_deref(),
            Some("u1")
        );
        assert_eq!(why, "restarting pod k-a-0 to run the recovery");
        // Until the pod is replaced it is asked again; once it is, Kafka is asked.
        let restarted = recovering(Some("u1"));
        let Before::Restart { uid, why, .. } = before("k", &restarted, Some(&fresh), true) else {
            panic!("asks again");
        };
        assert_eq!(
            (uid.as_str(), why.as_str()),
            ("u1", "waiting for pod k-a-0 to be replaced")
        );
        let replaced = survivor(Some("u2"), true, true);
        assert_eq!(
            before("k", &restarted, Some(&replaced), true),
            Before::Finish
        );
    }

    #[test]
    fn the_survivor_must_lead_alone_and_the_lost_brokers_be_fenced_before_any_election() {
        let seen = |leader: Option<i32>, voters: &[i32]| QuorumStatus {
            mode: Some("dynamic".into()),
            leader_id: leader,
            voters: voters
                .iter()
                .map(|id| kstretch_api::QuorumVoterStatus {
                    id: *id,
                    directory_id: None,
                })
                .collect(),
            unsettled: None,
        };
        assert_eq!(leads_alone(0, &seen(Some(0), &[0])), Ok(()));
        assert_eq!(
            leads_alone(0, &seen(Some(0), &[0, 1])),
            Err("leader Some(0), voters [0, 1]".to_owned())
        );
        let observed = Observed {
            partitions: Vec::new(),
            brokers: BTreeMap::from([(0, "alpha".to_owned()), (1, "beta".to_owned())]),
            registered: BTreeMap::new(),
        };
        let forgotten: BTreeSet<String> = ["beta".to_owned()].into();
        let e = election(&observed, &forgotten).unwrap_err();
        assert!(e.contains("fence the lost brokers [1]"), "{e}");
        let fenced = Observed {
            brokers: BTreeMap::from([(0, "alpha".to_owned())]),
            ..observed
        };
        assert_eq!(election(&fenced, &forgotten), Ok(Leaderless::default()));
    }

    #[test]
    fn failed_elections_are_retried_and_what_was_elected_is_recorded() {
        let r = recovering(Some("u1"));
        let leaderless = Leaderless {
            electable: vec![("a".to_owned(), 0), ("b".to_owned(), 1)],
            ..Leaderless::default()
        };
        assert_eq!(
            elected(&r, &leaderless, &[]),
            Ok(vec![
                "early-0".to_owned(),
                "a-0".to_owned(),
                "b-1".to_owned()
            ])
        );
        let failed = [("b-1".to_owned(), "not available".to_owned())];
        let (so_far, why) = elected(&r, &leaderless, &failed).unwrap_err();
        assert_eq!(so_far, ["early-0", "a-0"]);
        assert_eq!(
            why,
            "unclean elections not done yet, trying again: b-1: not available"
        );
    }

    #[test]
    fn the_tool_runs_the_agents_binary_on_the_nodes_volumes_as_root() {
        let mounts = json!([{"name": "data", "mountPath": "/var/lib/kafka/data"}]);
        let c = tool_container(
            "registry/agent:1",
            "/var/lib/kafka/data/kafka-log0",
            0,
            mounts,
        );
        assert_eq!(c["name"], TOOL_CONTAINER);
        assert_eq!(c["image"], "registry/agent:1");
        assert_eq!(
            c["args"],
            json!([
                "recover-quorum",
                "--metadata-dir",
                "/var/lib/kafka/data/kafka-log0",
                "--node-id",
                "0",
                "--termination-log",
                "/dev/termination-log"
            ])
        );
        assert_eq!(c["volumeMounts"][0]["name"], "data");
        assert_eq!(c["securityContext"]["runAsUser"], 0);
    }
}
