//! Rebuilding a KRaft quorum that lost the majority of its voters for good, from one surviving
//! controller, with `kstretch-agent recover-quorum` (ADR 0021), on real Kafka processes of this
//! machine: Kafka elects the survivor, keeps what it had and takes new voters, judged by Kafka's
//! own tools and rdkafka.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kstretch_core::kraft::{Addressing, CONTROLPLANE_LISTENER, Volume, render};
use kstretch_core::node_ids::Role;
use kstretch_kadmin::{AdminClient, AdminConfig, Uuid};
use kstretch_tests::kraft::{PrivateKafka, cluster, make_quorum_dynamic, node};
use kstretch_tests::{kafka, load, process};

/// Two of three voters lost for good, and the quorum with them: `kstretch-agent recover-quorum`
/// on the survivor's stopped metadata log makes it the only voter (a dry run and a wrong node ID
/// change nothing). It elects itself and keeps every record acknowledged with `acks=all` under
/// a producer that runs throughout. One of the lost nodes then comes back with its disk: its
/// metadata log diverges from the survivor's at the new epoch and is cut there, it follows as an
/// observer, is made a voter again, and writes go on. What only the lost voters had written
/// would be gone; here they had nothing more.
#[tokio::test]
async fn a_quorum_that_lost_its_majority_is_rebuilt_from_one_survivor() {
    const ONE: &[Volume] = &[Volume {
        id: None,
        kraft_metadata: false,
    }];
    let both = &[Role::Controller, Role::Broker];
    let c = cluster(
        Addressing::multi_cluster_services(),
        vec![
            node(0, "east", "east", both, ONE),
            node(1, "west", "west", both, ONE),
            node(2, "west", "west", both, ONE),
        ],
    );
    let rendered = render(&c).unwrap();
    let mut kafka = PrivateKafka::start(&c.cluster_id, &rendered.nodes).await;
    // Node 0's client listener (the first, by ID): the node that survives.
    let bootstrap = kafka.bootstrap().split(',').next().unwrap().to_owned();
    let admin = AdminClient::connect(
        AdminConfig::new(kafka.bootstrap().split(','))
            .with_request_timeout(Duration::from_secs(30)),
    )
    .await
    .unwrap();
    make_quorum_dynamic(&admin, &kafka.bootstrap()).await;
    drop(admin);
    let topic = "kraft-boot-recovered";
    kafka::create_topic(&kafka.bootstrap(), topic, 3, 3).await;
    let load = load::Load::start(&bootstrap, topic, Duration::from_millis(20));
    wait_for_acks(&load, 100).await;

    // West is lost: its two voters, with whatever only they held.
    kafka.stop_node(1);
    kafka.stop_node(2);
    let before_loss = load.acked();
    kafka.stop_node(0);
    let dir = kafka.root().join("node-0/var/lib/kafka/data/kafka-log0");
    let recover = |args: &[&str]| {
        let out = std::process::Command::new(process::binary("kstretch-agent"))
            .arg("recover-quorum")
            .arg("--metadata-dir")
            .arg(&dir)
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let log_files = || snapshot_dir(&dir.join("__cluster_metadata-0"));
    let untouched = log_files();
    let (ok, _, err) = recover(&["--node-id", "1"]);
    assert!(
        !ok && err.contains("belongs to node 0, not node 1"),
        "{err}"
    );
    let (ok, out, err) = recover(&["--node-id", "0", "--dry-run"]);
    assert!(ok, "{err}");
    let planned: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        planned["votersBefore"],
        serde_json::json!([0, 1, 2]),
        "{out}"
    );
    assert_eq!(planned["voters"], serde_json::json!([0]), "{out}");
    assert_eq!(log_files(), untouched, "a dry run changed the log");
    let (ok, out, err) = recover(&["--node-id", "0"]);
    assert!(ok, "{err}");
    assert_ne!(log_files(), untouched, "{out}");

    kafka.start_node(0);
    let voters = wait_for_voters(&bootstrap, &[0]).await;
    assert!(voters.iter().all(|(id, _, _)| *id == 0), "{voters:?}");

    // Node 2 returns with what it had: an observer now, then a voter again; the partitions get
    // their second in-sync replica and writes go on.
    kafka.start_node(2);
    let admin = AdminClient::connect(
        AdminConfig::new(bootstrap.split(',')).with_request_timeout(Duration::from_secs(30)),
    )
    .await
    .unwrap();
    let listeners = [(
        CONTROLPLANE_LISTENER.to_owned(),
        "127.0.0.1".to_owned(),
        port_of(&kafka, 2, CONTROLPLANE_LISTENER),
    )];
    let directory = Uuid::from_u128(
        kstretch_core::kraft::parse_uuid_text(&directory_id_in(
            &kafka.root().join("node-2/var/lib/kafka/data/kafka-log2"),
        ))
        .unwrap(),
    );
    kstretch_tests::wait::wait_for("node 2 a voter", Duration::from_secs(120), || async {
        match admin
            .add_raft_voter(&c.cluster_id, 2, directory, &listeners)
            .await
        {
            Ok(()) => kstretch_tests::wait::Seen::Done(()),
            Err(e) if e.kafka_code_name().as_deref() == Some("DUPLICATE_VOTER") => {
                kstretch_tests::wait::Seen::Done(())
            }
            Err(e) => kstretch_tests::wait::Seen::NotYet(e.to_string()),
        }
    })
    .await;
    wait_for_voters(&bootstrap, &[0, 2]).await;
    // The survivor was killed, not shut down: Kafka took its replicas out of the in-sync and
    // eligible ones when it registered again (KIP-966), and every other replica was lost, so
    // the partitions have no leader until an unclean election, which this recovery implies.
    let after = load.acked();
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while load.acked() < after + 100 && std::time::Instant::now() < deadline {
        let b = bootstrap.clone();
        let elected = tokio::task::spawn_blocking(move || {
            kafka::kafka_tool(
                "org.apache.kafka.tools.LeaderElectionCommand",
                &[
                    "--bootstrap-server",
                    &b,
                    "--election-type",
                    "unclean",
                    "--all-topic-partitions",
                ],
            )
        })
        .await
        .unwrap();
        println!("unclean election: {elected:?}");
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    let resumed = load.acked() >= after + 100;
    let b = bootstrap.clone();
    let described = tokio::task::spawn_blocking(move || {
        kafka::kafka_tool(
            "org.apache.kafka.tools.TopicCommand",
            &["--bootstrap-server", &b, "--describe", "--topic", topic],
        )
    })
    .await
    .unwrap();
    let sent = load.stop().await;
    assert!(
        resumed,
        "writes did not go on: {} acknowledged, failures {:?}; {described:?}",
        sent.acked.len(),
        sent.failed.iter().take(5).collect::<Vec<_>>()
    );
    println!(
        "recovery: {} acknowledged ({before_loss} before the loss), {} failed, longest wait {:?}",
        sent.acked.len(),
        sent.failed.len(),
        sent.longest_wait
    );
    let missing = load::missing(&bootstrap, topic, 3, &sent, Duration::from_secs(120)).await;
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged records are missing: {:?}",
        missing.len(),
        sent.acked.len(),
        missing.iter().take(10).collect::<Vec<_>>()
    );
}

/// Waits until the producer has `count` acknowledgements.
async fn wait_for_acks(load: &load::Load, count: usize) {
    kstretch_tests::wait::wait_for("acknowledged records", Duration::from_secs(180), || async {
        match load.acked() {
            n if n >= count => kstretch_tests::wait::Seen::Done(()),
            n => kstretch_tests::wait::Seen::NotYet(format!("{n} of {count}")),
        }
    })
    .await;
}

/// Waits until Kafka's own tool reports exactly `ids` as voters (leader or followers); returns
/// what it reported.
async fn wait_for_voters(bootstrap: &str, ids: &[i32]) -> BTreeSet<(i32, String, String)> {
    let want: BTreeSet<i32> = ids.iter().copied().collect();
    kstretch_tests::wait::wait_for("voters", Duration::from_secs(120), || async {
        let b = bootstrap.to_owned();
        let text = tokio::task::spawn_blocking(move || {
            kafka::kafka_tool(
                "org.apache.kafka.tools.MetadataQuorumCommand",
                &["--bootstrap-server", &b, "describe", "--replication"],
            )
        })
        .await
        .unwrap();
        let Ok(text) = text else {
            return kstretch_tests::wait::Seen::NotYet(format!("{text:?}"));
        };
        let replicas = kafka::parse_quorum(&text);
        let voters: BTreeSet<i32> = replicas
            .iter()
            .filter(|(_, _, status)| status != "Observer")
            .map(|(id, _, _)| *id)
            .collect();
        if voters == want {
            kstretch_tests::wait::Seen::Done(replicas)
        } else {
            kstretch_tests::wait::Seen::NotYet(text)
        }
    })
    .await
}

fn port_of(kafka: &PrivateKafka, id: i32, listener: &str) -> u16 {
    kafka
        .address(id, listener)
        .unwrap()
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

fn directory_id_in(dir: &std::path::Path) -> String {
    let text = std::fs::read_to_string(dir.join("meta.properties")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("directory.id="))
        .unwrap()
        .to_owned()
}

/// Name and bytes of every file of a directory.
fn snapshot_dir(dir: &std::path::Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}
