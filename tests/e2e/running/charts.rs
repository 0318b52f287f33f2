//! kstretch installed with its Helm charts runs in pods and runs a stretched Kafka on real
//! pods.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kstretch_api::Kafka;
use kstretch_tests::clients::serves_across_clusters;
use kstretch_tests::helm::{AGENT_RELEASE, CENTRAL_RELEASE, HelmInstall, wait_with_logs};
use kstretch_tests::live::{ONE_AT_A_TIME, START_TIMEOUT, kafka, pool, ready_on_real_node};
use kstretch_tests::ready::kafka_ready as is_ready;
use kstretch_tests::stretch::{ALPHA, BETA};
use kstretch_tests::wait::Seen;
use kube::Api;
use kube::api::ListParams;
use serde_json::json;

/// kstretch installed with `helm install` as a user installs it: central (two replicas, one
/// leading) in alpha and an agent in each cluster run as pods on the real nodes, from the
/// images packed from this build, with the charts' RBAC, probes and generated link
/// certificates. A stretched Kafka under them becomes Ready and serves across the clusters,
/// and deleting it removes its pods in both clusters.
#[tokio::test]
async fn kstretch_installed_with_its_charts_runs_in_pods_and_runs_a_stretched_kafka() {
    let _one = ONE_AT_A_TIME.lock().await;
    let install = HelmInstall::start("running-helm").await;

    let centrals = install.pods(ALPHA, CENTRAL_RELEASE).await;
    assert_eq!(
        ready_on_real_node(&centrals, ALPHA).len(),
        2,
        "central's pods: {centrals:#?}"
    );
    for alias in [ALPHA, BETA] {
        let agents = install.pods(alias, AGENT_RELEASE).await;
        assert_eq!(
            ready_on_real_node(&agents, alias).len(),
            1,
            "{alias}'s agent: {agents:#?}"
        );
    }
    // One replica leads: it holds the Lease and carries the label the Services select.
    let leader = wait_with_logs(&install, "a central leader", START_TIMEOUT, || async {
        let leaders: Vec<String> = install
            .pods(ALPHA, CENTRAL_RELEASE)
            .await
            .into_iter()
            .filter(|p| {
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("kstretch.io/leader"))
                    == Some(&"true".to_owned())
            })
            .filter_map(|p| p.metadata.name)
            .collect();
        match leaders.as_slice() {
            [one] => Seen::Done(one.clone()),
            other => Seen::NotYet(format!("pods labelled leader: {other:?}")),
        }
    })
    .await;
    let lease = install
        .api::<Lease>(ALPHA)
        .get("kstretch-central")
        .await
        .unwrap();
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity),
        Some(leader),
        "the Lease's holder is the labelled pod"
    );

    install.apply(kafka()).await;
    install
        .apply(pool("a", 2, ALPHA, json!({"type": "ephemeral"})))
        .await;
    install
        .apply(pool("b", 1, BETA, json!({"type": "ephemeral"})))
        .await;
    let kafkas: Api<Kafka> = install.api(ALPHA);
    let k = wait_with_logs(&install, "live to be Ready", START_TIMEOUT, || async {
        match kafkas.get_opt("live").await {
            Ok(Some(k)) if is_ready(&k) => Seen::Done(k),
            other => Seen::NotYet(format!("{other:#?}")),
        }
    })
    .await;
    serves_across_clusters(&k).await;

    // Deleting the Kafka removes its pods in both clusters, through the agents in pods.
    kafkas.delete("live", &Default::default()).await.unwrap();
    wait_with_logs(
        &install,
        "the Kafka's pods to go",
        START_TIMEOUT,
        || async {
            let mut left = Vec::new();
            for alias in [ALPHA, BETA] {
                let pods: Api<Pod> = install.api(alias);
                let listed = pods
                    .list(&ListParams::default().labels("strimzi.io/cluster=live"))
                    .await
                    .unwrap();
                left.extend(listed.items.into_iter().filter_map(|p| p.metadata.name));
            }
            if left.is_empty() {
                Seen::Done(())
            } else {
                Seen::NotYet(format!("still there: {left:?}"))
            }
        },
    )
    .await;
    install.finish().await;
}
