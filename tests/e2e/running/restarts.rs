//! A Kafka on real pods outlives central: rolls, upgrades, manual rolling updates, restarts and
//! central's absence lose no acknowledged record, a deleted pod or killed process keeps its
//! data, and a node given new disks comes back empty and refills.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kstretch_api::{Kafka, StrimziPodSet, names};
use kstretch_tests::TestEnv;
use kstretch_tests::clients::{full_isr, no_loss, placed_topic, wait_for_acks};
use kstretch_tests::kafka::{
    admin, consume, create_topic, finalized_by_kafkas_tool, kraft_version_by_kafkas_tool, produce,
    produce_with_acks,
};
use kstretch_tests::live::{
    ONE_AT_A_TIME, START_TIMEOUT, all_brokers, claim_dir, kafka, live_kafka_of, persistent,
    pod_names, pod_processes, pod_states, refused_because, rolled_one_at_a_time, segment,
    shown_quorum_is_kafkas, warning,
};
use kstretch_tests::load::Load;
use kstretch_tests::ready::{kafka_ready as is_ready, ready_condition};
use kstretch_tests::stretch::{ALPHA, BETA, Stretch};
use kstretch_tests::wait::{Seen, wait_for};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

/// One live Kafka under an idempotent producer (`acks=all`, `min.insync.replicas=2`) the whole
/// time, created with a static controller quorum (as kstretch created every cluster before
/// KIP-853 support, kept by the annotation `kstretch.io/controller-quorum: static`): central is
/// killed (every pod keeps running and serving, nothing restarts when it returns); the
/// annotation is removed and central migrates the quorum to a dynamic one, which rolls every
/// node one at a time onto `controller.quorum.bootstrap.servers`; Kafka is upgraded to the
/// environment's next version (another roll, then `metadata.version` raised) and a downgrade
/// past it is refused; pods marked for a manual rolling update (a podset's and a pod's) roll;
/// then a deleted pod and a killed Kafka process come back on their data. No send fails, and a consumer reading
/// afterwards finds every acknowledged record. (One Kafka for all of it: each costs minutes to
/// start on two cores.)
#[tokio::test]
async fn a_kafka_outlives_central_rolls_and_restarts_without_losing_an_acknowledged_record() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut static_quorum = kafka();
    static_quorum["metadata"]["annotations"]["kstretch.io/controller-quorum"] = json!("static");
    let (mut stretch, k) = live_kafka_of("running-roll", static_quorum, persistent(), vec![]).await;
    let bootstrap = all_brokers(&k);
    let shown = k.status.as_ref().and_then(|s| s.quorum.clone());
    assert!(
        shown
            .as_ref()
            .is_none_or(|q| q.mode.as_deref() == Some("static")),
        "{shown:?}"
    );
    create_topic(&bootstrap, "rolled", 3, 3).await;
    full_isr(&bootstrap, "rolled").await;
    let load = Load::start(&bootstrap, "rolled", Duration::from_millis(20));
    wait_for_acks(&load, 50).await;

    without_central_nothing_restarts(&mut stretch, &load).await;

    let before = pod_states(&stretch).await;
    assert_eq!(before.len(), 3, "{before:?}");
    let kafkas: Api<Kafka> = stretch.api(ALPHA);
    kafkas
        .patch(
            "live",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"kstretch.io/controller-quorum": null}}}),
            ),
        )
        .await
        .unwrap();
    rolled_one_at_a_time(&stretch, &before).await;
    let k: Kafka = stretch
        .wait_in_alpha("live", "Ready after the roll", START_TIMEOUT, is_ready)
        .await;
    let acked = load.acked();
    wait_for_acks(&load, acked + 50).await;
    // Kafka's own tool: every voter now known by its metadata directory, as the status shows.
    shown_quorum_is_kafkas(&stretch, &k, None).await;
    assert_eq!(kraft_version_by_kafkas_tool(&bootstrap), "1");

    upgraded_and_not_downgraded(&stretch, &bootstrap, &load).await;
    manual_rolling_updates_restart_the_marked_pods_only(&mut stretch).await;
    a_deleted_pod_and_a_killed_process_keep_their_data(&stretch, &bootstrap).await;
    new_disks_replace_a_broken_one_when_no_record_goes_with_it(&stretch, &bootstrap).await;
    let acked = load.acked();
    wait_for_acks(&load, acked + 50).await;
    no_loss(load, &bootstrap, "rolled").await;
    stretch.finish().await;
}

/// Strimzi's `strimzi.io/manual-rolling-update: "true"`, under the producer, on beta's podset
/// while beta's agent is stopped (the `Kafka` says beta is unreachable and nothing rolls; back,
/// the agent hands the annotation to the podset's pods and removes it from the podset) and on
/// one pod of alpha: central restarts those pods one at a time and no other.
async fn manual_rolling_updates_restart_the_marked_pods_only(stretch: &mut Stretch) {
    let before = pod_states(stretch).await;
    let mark = json!({"metadata": {"annotations": {names::MANUAL_ROLLING_UPDATE: "true"}}});
    let podsets: Api<StrimziPodSet> = stretch.api(BETA);
    let podset = podsets.list(&ListParams::default()).await.unwrap().items[0].name_any();
    stretch.stop_agent(BETA);
    podsets
        .patch(&podset, &PatchParams::default(), &Patch::Merge(&mark))
        .await
        .unwrap();
    let k: Kafka = stretch
        .wait_in_alpha("live", "beta shown unreachable", START_TIMEOUT, |k| {
            warning(k, "ClusterUnreachable").is_some()
        })
        .await;
    assert!(warning(&k, "ClusterUnreachable").unwrap().contains(BETA));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        pod_states(stretch).await,
        before,
        "nothing rolls while beta's agent is away"
    );
    stretch.start_agent(BETA);
    let mut marked = pod_names(stretch, BETA).await;
    let alpha = pod_names(stretch, ALPHA).await;
    let alpha_pods: Api<Pod> = stretch.api(ALPHA);
    alpha_pods
        .patch(&alpha[0], &PatchParams::default(), &Patch::Merge(&mark))
        .await
        .unwrap();
    marked.push(alpha[0].clone());

    let (rolled, kept): (BTreeMap<_, _>, BTreeMap<_, _>) = before
        .into_iter()
        .partition(|(name, _)| marked.contains(name));
    assert_eq!(rolled.len(), marked.len(), "{marked:?} among {rolled:?}");
    rolled_one_at_a_time(stretch, &rolled).await;
    let after = pod_states(stretch).await;
    for (name, (uid, _, _)) in &kept {
        assert_eq!(&after[name].0, uid, "{name} was not marked, yet restarted");
    }
    let podset = podsets.get(&podset).await.unwrap();
    assert!(
        !podset
            .annotations()
            .contains_key(names::MANUAL_ROLLING_UPDATE),
        "the podset's annotation was handed over: {:?}",
        podset.annotations()
    );
}

/// Kafka upgraded under the producer: `spec.kafka.version` set to the environment's next
/// version rolls every node one at a time onto that version's image; once all run it, central
/// raises `metadata.version` (as Kafka's own tool of that version reads it) and the status
/// shows both versions. Going back to the old version is then refused, since Kafka cannot lower
/// the metadata version, and restarts nobody; asking for the new one again clears it.
async fn upgraded_and_not_downgraded(stretch: &Stretch, bootstrap: &str, load: &Load) {
    let (next, next_libs) = TestEnv::get().kafka_next();
    let kafkas: Api<Kafka> = stretch.api(ALPHA);
    let set_version = |version: String| {
        let kafkas = kafkas.clone();
        async move {
            let patch = json!({"spec": {"kafka": {"version": version}}});
            kafkas
                .patch("live", &PatchParams::default(), &Patch::Merge(patch))
                .await
                .unwrap();
        }
    };
    let k = kafkas.get("live").await.unwrap();
    let status = k.status.clone().unwrap_or_default();
    let old = status
        .kafka_version
        .clone()
        .expect("the status shows the version");
    let old_metadata = status
        .kafka_metadata_version
        .clone()
        .expect("and the metadata version");
    assert_ne!(old, next, "the environment's next Kafka version is its own");

    let before = pod_states(stretch).await;
    let started = std::time::Instant::now();
    set_version(next.clone()).await;
    rolled_one_at_a_time(stretch, &before).await;
    let release = next.rsplit_once('.').map_or(next.as_str(), |(r, _)| r);
    let k: Kafka = stretch
        .wait_in_alpha(
            "live",
            "upgraded, metadata.version raised",
            START_TIMEOUT,
            |k: &Kafka| {
                let s = k.status.clone().unwrap_or_default();
                is_ready(k)
                    && s.kafka_version.as_deref() == Some(next.as_str())
                    && s.kafka_metadata_version
                        .as_deref()
                        .is_some_and(|mv| mv.starts_with(&format!("{release}-")))
            },
        )
        .await;
    let shown = k.status.unwrap().kafka_metadata_version.unwrap();
    let finalized = finalized_by_kafkas_tool(&next_libs, bootstrap, "metadata.version");
    assert_eq!(finalized, shown, "Kafka's metadata.version and the status");
    for alias in [ALPHA, BETA] {
        let pods: Api<Pod> = stretch.api(alias);
        for pod in pods.list(&ListParams::default()).await.unwrap() {
            let image = pod.spec.as_ref().unwrap().containers[0]
                .image
                .clone()
                .unwrap();
            assert!(
                image.ends_with(&format!(":{next}")),
                "{} runs {image}",
                pod.name_any()
            );
        }
    }
    // Straight to standard error, past the test harness's capture: wanted in every run.
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "upgraded {} nodes from Kafka {old} ({old_metadata}) to {next} ({shown}) in {:.0} s under the producer",
        before.len(),
        started.elapsed().as_secs_f64()
    );
    let acked = load.acked();
    wait_for_acks(load, acked + 50).await;

    let before = pod_states(stretch).await;
    set_version(old.clone()).await;
    let k: Kafka = stretch
        .wait_in_alpha(
            "live",
            "the downgrade refused",
            START_TIMEOUT,
            |k: &Kafka| refused_because(k).as_deref() == Some("KafkaDowngradeRefused"),
        )
        .await;
    let message = ready_condition(&k)
        .and_then(|c| c.message.clone())
        .unwrap_or_default();
    assert!(
        message.contains(&shown) && message.contains(&old),
        "{message}"
    );
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        pod_states(stretch).await,
        before,
        "pods changed on a refused downgrade"
    );
    set_version(next).await;
    stretch
        .wait_in_alpha(
            "live",
            "Ready again at the new version",
            START_TIMEOUT,
            is_ready,
        )
        .await;
    assert_eq!(
        pod_states(stretch).await,
        before,
        "pods changed when the refusal cleared"
    );
}

/// Central killed: every pod keeps running and serving, produce goes on, and nothing restarts
/// when central comes back.
async fn without_central_nothing_restarts(stretch: &mut Stretch, load: &Load) {
    let before = pod_states(stretch).await;
    stretch.stop_central();
    let acked = load.acked();
    wait_for_acks(load, acked + 250).await;
    assert_eq!(
        pod_states(stretch).await,
        before,
        "pods changed without central"
    );

    stretch.start_central();
    let k: Kafka = stretch
        .wait_in_alpha("live", "Ready again", START_TIMEOUT, is_ready)
        .await;
    let generation = k.metadata.generation;
    // Long enough for central to have reconciled and checked everything once more.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let k: Kafka = stretch
        .wait_in_alpha("live", "still Ready", START_TIMEOUT, is_ready)
        .await;
    assert_eq!(k.metadata.generation, generation);
    assert_eq!(
        pod_states(stretch).await,
        before,
        "pods changed when central returned"
    );
}

/// A deleted Kafka pod, and separately a killed Kafka process, come back on the data of their
/// claim (the same segment file, not a copy fetched again) and rejoin the ISR.
async fn a_deleted_pod_and_a_killed_process_keep_their_data(stretch: &Stretch, bootstrap: &str) {
    create_topic(bootstrap, "kept", 3, 3).await;
    let records: Vec<(String, String)> = (0..100)
        .map(|i| (format!("k{i:03}"), format!("v{i}")))
        .collect();
    produce(bootstrap, "kept", &records).await;
    let (claim_uid, dir) = claim_dir(stretch, BETA, "live-b-2").await;
    let (inode, len) = segment(&dir, 2, "kept");
    assert!(len > 0, "the segment of kept-0 on node 2 is empty");

    // The pod deleted: a new pod, the same claim, the same segment file.
    let before = pod_states(stretch).await;
    let pods: Api<Pod> = stretch.api(BETA);
    pods.delete("live-b-2", &Default::default()).await.unwrap();
    wait_for("live-b-2 back and Ready", START_TIMEOUT, || async {
        let now = pod_states(stretch).await;
        match now.get("live-b-2") {
            Some((uid, _, true)) if *uid != before["live-b-2"].0 => Seen::Done(()),
            other => Seen::NotYet(format!("{other:?}")),
        }
    })
    .await;
    full_isr(bootstrap, "kept").await;
    let (claim_after, dir_after) = claim_dir(stretch, BETA, "live-b-2").await;
    assert_eq!((claim_after, &dir_after), (claim_uid.clone(), &dir));
    let (inode_after, len_after) = segment(&dir, 2, "kept");
    assert_eq!(inode_after, inode, "the segment was written anew");
    assert!(len_after >= len);

    // Kafka's process killed: the container restarts in the same pod, on the same data.
    let uid = pod_states(stretch).await["live-b-2"].0.clone();
    let java = pod_processes(&uid, "java");
    assert_eq!(java.len(), 1, "Kafka's process of pod {uid}: {java:?}");
    std::process::Command::new("kill")
        .args(["-KILL", &java[0].to_string()])
        .status()
        .unwrap();
    wait_for(
        "live-b-2's container restarted and Ready",
        START_TIMEOUT,
        || async {
            let now = pod_states(stretch).await;
            match now.get("live-b-2") {
                Some((u, restarts, true)) if *u == uid && *restarts >= 1 => Seen::Done(()),
                other => Seen::NotYet(format!("{other:?}")),
            }
        },
    )
    .await;
    full_isr(bootstrap, "kept").await;
    assert_eq!(
        segment(&dir, 2, "kept").0,
        inode,
        "the segment was written anew"
    );
    let (b, t) = (bootstrap.to_owned(), "kept");
    let read = tokio::task::spawn_blocking(move || consume(&b, t, 3, 100, Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(read, records);
}

/// Strimzi's `strimzi.io/delete-pod-and-pvc` on beta's node (a combined node, a voter), under
/// the producer. Refused while the node holds the only in-sync copy of a partition: a
/// NewDisksHeldBack warning names it, pod and claim stay, the annotation too. With that topic
/// deleted, the pod and its claim are replaced: the node comes back empty with the same ID,
/// refills every partition it held (in its new directory) and is a voter again on its new
/// metadata directory, as Kafka's own tool reads the quorum.
async fn new_disks_replace_a_broken_one_when_no_record_goes_with_it(
    stretch: &Stretch,
    bootstrap: &str,
) {
    let kafkas: Api<Kafka> = stretch.api(ALPHA);
    let k = kafkas.get("live").await.unwrap();
    let voters = shown_quorum_is_kafkas(stretch, &k, None).await;
    placed_topic(bootstrap, "solo", &[&[2]]).await;
    let solo: Vec<(String, String)> = (0..10)
        .map(|i| (format!("s{i}"), format!("solo {i}")))
        .collect();
    produce_with_acks(bootstrap, "solo", &solo, "1").await;
    let before = pod_states(stretch).await;
    let (claim_uid, dir) = claim_dir(stretch, BETA, "live-b-2").await;
    let pods: Api<Pod> = stretch.api(BETA);
    let mark = json!({"metadata": {"annotations": {names::DELETE_POD_AND_PVC: "true"}}});
    pods.patch("live-b-2", &PatchParams::default(), &Patch::Merge(&mark))
        .await
        .unwrap();
    let k = stretch
        .wait_in_alpha("live", "new disks held back", START_TIMEOUT, |k| {
            warning(k, "NewDisksHeldBack").is_some()
        })
        .await;
    let held = warning(&k, "NewDisksHeldBack").unwrap();
    assert!(
        held.contains("live-b-2 (solo-0 (replicas [2], ISR [2]))"),
        "{held}"
    );
    assert!(held.contains(names::SKIP_BROKER_SCALEDOWN_CHECK), "{held}");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        pod_states(stretch).await["live-b-2"].0,
        before["live-b-2"].0
    );
    assert_eq!(claim_dir(stretch, BETA, "live-b-2").await.0, claim_uid);
    let pod = pods.get("live-b-2").await.unwrap();
    assert_eq!(
        pod.annotations()
            .get(names::DELETE_POD_AND_PVC)
            .map(String::as_str),
        Some("true"),
        "the annotation is kept while the new disks wait"
    );

    let deleted = admin(bootstrap)
        .delete_topics(&["solo"], &rdkafka::admin::AdminOptions::new())
        .await
        .unwrap();
    assert!(deleted.iter().all(Result::is_ok), "{deleted:?}");
    wait_for("live-b-2 back on new disks", START_TIMEOUT, || async {
        let now = pod_states(stretch).await;
        let claims: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> = stretch.api(BETA);
        let claim = claims.get_opt("data-live-b-2").await.unwrap();
        let claim_now = claim.as_ref().and_then(|c| c.metadata.uid.clone());
        match now.get("live-b-2") {
            Some((uid, _, true))
                if *uid != before["live-b-2"].0
                    && claim_now.as_ref().is_some_and(|c| *c != claim_uid) =>
            {
                Seen::Done(())
            }
            other => Seen::NotYet(format!("pod {other:?}, claim {claim_now:?}")),
        }
    })
    .await;
    full_isr(bootstrap, "rolled").await;
    full_isr(bootstrap, "kept").await;
    let (_, new_dir) = claim_dir(stretch, BETA, "live-b-2").await;
    assert_ne!(new_dir, dir, "a new volume");
    assert!(
        segment(&new_dir, 2, "kept").1 > 0,
        "kept-0 refilled on the new disk"
    );
    let k = stretch
        .wait_in_alpha("live", "Ready on the new disks", START_TIMEOUT, is_ready)
        .await;
    let after = shown_quorum_is_kafkas(stretch, &k, Some((2, &voters[&2]))).await;
    assert_ne!(
        after[&2], voters[&2],
        "voter 2 votes from its new metadata directory"
    );
    assert!(
        !pods
            .get("live-b-2")
            .await
            .unwrap()
            .annotations()
            .contains_key(names::DELETE_POD_AND_PVC),
        "the new pod carries no annotation"
    );
}
