//! A quorum recovery's start (`.spec.recoverQuorum`): whether the controller quorum of its
//! Kafka may be rebuilt at all and from which surviving voter, decided once from the voters
//! the `Kafka` last recorded, where its pools place them and which clusters it has forgotten
//! (`kstretch_core::kraft::recovery::survivor`). Once it runs, the Kafka reconciler carries it
//! out (`crate::kafka::recover`): it owns the pods.

use kstretch_api::condition::{self, Condition};
use kstretch_api::operation::{KafkaOperationStatus, QuorumRecoveryStatus, phase};
use kstretch_api::{Kafka, KafkaNodePool, names};
use kstretch_core::kraft::{self, recovery};
use kube::api::ListParams;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};

use super::status::{Outcome, Refusal, refusal, refused};
use crate::controller::{Context, Error};
use crate::kafka::recover::{self as kafka_recover, voter_places};
use crate::status::{not_ready, now};

/// The pool of node `id`, by name.
fn pool_of(id: i32, pools: &[KafkaNodePool]) -> Option<String> {
    pools
        .iter()
        .find(|p| {
            p.status.as_ref().is_some_and(|s| {
                s.node_ids.contains(&id)
                    || s.leaving.as_ref().is_some_and(|l| l.node_ids.contains(&id))
            })
        })
        .map(ResourceExt::name_any)
}

/// The pools of `kafka`, read when a recovery or a forget needs to place its voters.
pub async fn pools_of(ctx: &Context, kafka: &Kafka) -> Result<Vec<KafkaNodePool>, Error> {
    let api: Api<KafkaNodePool> =
        Api::namespaced(ctx.client.clone(), &kafka.namespace().unwrap_or_default());
    let of_kafka =
        ListParams::default().labels(&format!("{}={}", names::CLUSTER, kafka.name_any()));
    Ok(api.list(&of_kafka).await?.items)
}

/// What a recovery would do, or why it is refused (pure).
pub(super) fn decide(
    kafka: &Kafka,
    pools: &[KafkaNodePool],
    named: Option<i32>,
) -> Result<QuorumRecoveryStatus, Refusal> {
    let quorum = kafka.status.as_ref().and_then(|s| s.quorum.as_ref());
    if quorum.and_then(|q| q.mode.as_deref()) != Some("dynamic") {
        return Err(refusal(
            "RecoveryNeedsDynamicQuorum",
            format!(
                "the controller quorum of Kafka {} is not dynamic (KIP-853): a static quorum's voters are every node's controller.quorum.voters, which a recovery does not rewrite",
                kafka.name_any()
            ),
        ));
    }
    let places = voter_places(kafka, pools.iter());
    let forgotten = kafka.forgotten_clusters();
    let node = recovery::survivor(&places, &forgotten, named)
        .map_err(|e| refusal(e.reason(), e.to_string()))?;
    let (Some(cluster), Some(pool)) = (places.get(&node).cloned().flatten(), pool_of(node, pools))
    else {
        return Err(refusal(
            "NotASurvivingVoter",
            format!(
                "no node pool of Kafka {} holds node {node}",
                kafka.name_any()
            ),
        ));
    };
    let lost_voters = places
        .iter()
        .filter(|(_, c)| c.as_ref().is_some_and(|c| forgotten.contains(c)))
        .map(|(id, _)| *id)
        .collect();
    Ok(QuorumRecoveryStatus {
        node_id: node,
        cluster,
        pod: kraft::pod_name(&kafka.name_any(), &pool, node),
        lost_voters,
        ..Default::default()
    })
}

/// The first look at a recovery: refused, planned (a dry run), or started; once it runs, the
/// Kafka reconciler takes it on and this controller leaves it alone.
pub(super) async fn start(
    ctx: &Context,
    dry_run: bool,
    mut status: KafkaOperationStatus,
    kafka: &Kafka,
    named: Option<i32>,
) -> Result<Outcome, Error> {
    if status.phase.as_deref() == Some(phase::RUNNING) {
        return Ok(Outcome::unchanged(status, Action::await_change()));
    }
    let pools = pools_of(ctx, kafka).await?;
    let recovery = match decide(kafka, &pools, named) {
        Ok(r) => r,
        Err(r) => return Ok(refused(ctx, status, r)),
    };
    let described = format!(
        "rebuild the controller quorum from node {} (pod {} in cluster {}), which becomes the only voter; voters {:?} are lost with their forgotten clusters, and so is what only they had written",
        recovery.node_id, recovery.pod, recovery.cluster, recovery.lost_voters
    );
    if dry_run {
        status.phase = Some(phase::PLANNED.to_owned());
        let planned = Condition::new(condition::READY, condition::TRUE)
            .with_reason("Planned")
            .with_message(format!("dry run: would {described}; nothing was changed"));
        return Ok(Outcome::write(status, planned, Action::await_change()));
    }
    status.recovery = Some(recovery);
    status.phase = Some(phase::RUNNING.to_owned());
    status.started_at = Some(now());
    tracing::info!(%described, "quorum recovery started");
    let recovering = not_ready("Recovering", format!("about to {described}"));
    Ok(Outcome::write(status, recovering, Action::await_change()))
}

/// Why a forget waits instead of replacing replicas: the voters outside forgotten clusters are
/// not a majority, so no controller can be elected until the quorum is rebuilt.
pub async fn majority_lost(ctx: &Context, kafka: &Kafka) -> Result<Option<String>, Error> {
    let pools = pools_of(ctx, kafka).await?;
    Ok(kafka_recover::majority_lost(kafka, pools.iter()))
}

#[cfg(test)]
mod tests {
    use kstretch_api::node_pool::LeavingNodes;
    use kstretch_api::{KafkaNodePoolStatus, KafkaStatus, QuorumStatus, QuorumVoterStatus};

    use super::*;

    fn kafka(mode: &str, voters: &[i32], forgotten: &str) -> Kafka {
        let mut k: Kafka = serde_json::from_value(serde_json::json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "Kafka",
            "metadata": {"name": "live", "namespace": "ns",
                         "annotations": {names::FORGOTTEN_CLUSTERS: forgotten}},
            "spec": {"kafka": {"listeners": []}}
        }))
        .unwrap();
        k.status = Some(KafkaStatus {
            quorum: Some(QuorumStatus {
                mode: Some(mode.to_owned()),
                leader_id: None,
                voters: voters
                    .iter()
                    .map(|id| QuorumVoterStatus {
                        id: *id,
                        directory_id: None,
                    })
                    .collect(),
                unsettled: None,
            }),
            ..Default::default()
        });
        k
    }

    fn pool(
        name: &str,
        alias: &str,
        ids: &[i32],
        leaving: Option<(&str, &[i32])>,
    ) -> KafkaNodePool {
        let mut p: KafkaNodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaNodePool",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"replicas": ids.len(), "roles": ["controller", "broker"],
                     "storage": {"type": "ephemeral"}}
        }))
        .unwrap();
        p.status = Some(KafkaNodePoolStatus {
            node_ids: ids.to_vec(),
            cluster_alias: Some(alias.to_owned()),
            leaving: leaving.map(|(alias, ids)| LeavingNodes {
                cluster_alias: alias.to_owned(),
                node_ids: ids.to_vec(),
                started_at: None,
            }),
            ..Default::default()
        });
        p
    }

    #[test]
    fn the_only_survivor_of_a_forgotten_majority_is_chosen_with_its_pod() {
        let pools = [
            pool("a", "alpha", &[0], None),
            pool("b", "beta", &[1, 2], None),
        ];
        let r = decide(&kafka("dynamic", &[0, 1, 2], "beta"), &pools, None)
            .unwrap_or_else(|r| panic!("{}", r.message));
        assert_eq!(
            (r.node_id, r.cluster.as_str(), r.pod.as_str()),
            (0, "alpha", "live-a-0")
        );
        assert_eq!(r.lost_voters, vec![1, 2]);
        // A leaving node of a moving pool is placed where it still runs.
        let moving = [
            pool("a", "alpha", &[0], None),
            pool("b", "alpha", &[5], Some(("beta", &[1, 2]))),
        ];
        let places = voter_places(&kafka("dynamic", &[0, 1, 2], "beta"), moving.iter());
        assert_eq!(places[&1].as_deref(), Some("beta"));
    }

    #[test]
    fn a_recovery_is_refused_for_a_static_quorum_a_surviving_majority_or_a_lost_node() {
        let pools = [
            pool("a", "alpha", &[0], None),
            pool("b", "beta", &[1, 2], None),
        ];
        let refused = |k: Kafka, named| decide(&k, &pools, named).unwrap_err();
        let r = refused(kafka("static", &[0, 1, 2], "beta"), None);
        assert_eq!(r.reason, "RecoveryNeedsDynamicQuorum");
        let r = refused(kafka("dynamic", &[0, 1, 2], ""), None);
        assert_eq!(r.reason, "QuorumMajoritySurvives");
        assert!(r.message.contains("kstretch forget"), "{}", r.message);
        let r = refused(kafka("dynamic", &[0, 1, 2], "beta"), Some(2));
        assert_eq!(r.reason, "NotASurvivingVoter");
        assert!(r.message.contains("[0]"), "{}", r.message);
    }
}
