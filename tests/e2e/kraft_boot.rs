//! Proof that the KRaft configuration kstretch generates boots a real Kafka 4.1 cluster: render
//! typical layouts with `kstretch_core::kraft::render`, run them as private clusters (addresses
//! mapped to loopback, nothing else changed), and produce, consume and read metadata through
//! them with rdkafka. The static quorum kstretch renders is turned dynamic (KIP-853) and its
//! voters changed with kstretch's admin client, judged by Kafka's own tools.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kstretch_core::kraft::{
    Addressing, CERTS_DIR, CONTROLPLANE_LISTENER, REPLICATION_LISTENER, Rendered, Volume, render,
    uuid_text,
};
use kstretch_core::node_ids::Role;
use kstretch_kadmin::{AdminClient, AdminConfig, Error, KRAFT_VERSION, Uuid};
use kstretch_tests::kafka;
use kstretch_tests::kraft::{
    MAPPED_KEYS, PrivateKafka, assert_voters_match_advertised, certs_dir, cluster,
    make_quorum_dynamic, node,
};

/// One private cluster at a time: the machine has two cores.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The loopback mapping touched addresses and directories only: every other property, and
/// its line in the properties text, is byte for byte what `render` produced.
fn assert_only_addresses_mapped(kafka: &PrivateKafka, rendered: &Rendered) {
    assert_voters_match_advertised(&rendered.nodes);
    for (id, config) in &rendered.nodes {
        let mapped = kafka.mapped(*id);
        // Certificate paths move with the node's directory, like its data directories.
        let certs = certs_dir(kafka.root(), *id).display().to_string();
        assert_eq!(kafka.rendered(*id), config);
        assert_eq!(
            mapped.properties.keys().collect::<Vec<_>>(),
            config.properties.keys().collect::<Vec<_>>(),
            "node {id}"
        );
        for (key, value) in &config.properties {
            if MAPPED_KEYS.contains(&key.as_str()) {
                assert_ne!(
                    &mapped.properties[key], value,
                    "node {id}: {key} not mapped"
                );
            } else {
                let unmapped = mapped.properties[key].replace(&certs, CERTS_DIR);
                assert_eq!(&unmapped, value, "node {id}: {key} changed");
            }
        }
        let unmapped_lines = |text: String| -> Vec<String> {
            text.lines()
                .filter(|l| !MAPPED_KEYS.iter().any(|k| l.starts_with(&format!("{k}="))))
                .map(|l| l.replace(&certs, CERTS_DIR))
                .collect()
        };
        assert_eq!(
            unmapped_lines(mapped.to_properties_text()),
            unmapped_lines(config.to_properties_text()),
            "node {id}"
        );
    }
}

/// Creates a replicated topic, produces to it and reads everything back.
async fn produce_and_consume(kafka: &PrivateKafka, topic: &str) {
    let bootstrap = kafka.bootstrap();
    kafka::create_topic(&bootstrap, topic, 3, 3).await;
    let records: Vec<(String, String)> = (0..30)
        .map(|i| (format!("key-{i:02}"), format!("value {i} of {topic}")))
        .collect();
    kafka::produce(&bootstrap, topic, &records).await;
    let (b, t) = (bootstrap.clone(), topic.to_owned());
    let got =
        tokio::task::spawn_blocking(move || kafka::consume(&b, &t, 3, 30, Duration::from_secs(60)))
            .await
            .unwrap();
    assert_eq!(got, records, "records read back from {topic}");
}

async fn metadata_brokers(bootstrap: &str) -> BTreeSet<i32> {
    let b = bootstrap.to_owned();
    tokio::task::spawn_blocking(move || kafka::broker_ids(&b))
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test]
async fn one_controller_three_brokers_in_one_cluster() {
    let _one = ONE_AT_A_TIME.lock().await;
    const JBOD0: &[Volume] = &[Volume {
        id: Some(0),
        kraft_metadata: false,
    }];
    const SINGLE: &[Volume] = &[Volume {
        id: None,
        kraft_metadata: false,
    }];
    let c = cluster(
        Addressing::ClusterDns,
        vec![
            node(0, "controllers", "", &[Role::Controller], JBOD0),
            node(1, "brokers", "", &[Role::Broker], SINGLE),
            node(2, "brokers", "", &[Role::Broker], SINGLE),
            node(3, "brokers", "", &[Role::Broker], SINGLE),
        ],
    );
    let rendered = render(&c).unwrap();
    assert_eq!(rendered.warnings.len(), 1, "{:?}", rendered.warnings);
    assert!(
        rendered.nodes[&1]
            .get("advertised.listeners")
            .unwrap()
            .contains("boot-brokers-1.boot-kafka-brokers.kafka.svc:9092")
    );

    let mut kafka = PrivateKafka::start(&c.cluster_id, &rendered.nodes).await;
    assert_only_addresses_mapped(&kafka, &rendered);
    assert_eq!(kafka.broker_ids(), BTreeSet::from([1, 2, 3]));
    assert_eq!(kafka.controller_ids(), BTreeSet::from([0]));
    assert_eq!(
        metadata_brokers(&kafka.bootstrap()).await,
        BTreeSet::from([1, 2, 3])
    );
    produce_and_consume(&kafka, "kraft-boot-dns").await;
    // The nodes' own listeners speak only TLS: a plaintext client gets no metadata there.
    let replication = kafka.bootstrap_on(REPLICATION_LISTENER);
    let plaintext = tokio::task::spawn_blocking(move || kafka::broker_ids(&replication))
        .await
        .unwrap();
    assert!(
        plaintext.is_err(),
        "plaintext metadata from the replication listener: {plaintext:?}"
    );

    // The harness can take a broker away and bring it back (central's unregistration tests
    // rely on it): the cluster fences it, then has it again.
    kafka.stop_node(3);
    assert!(!kafka.is_running(3));
    kafka.wait_for_brokers(&BTreeSet::from([1, 2])).await;
    kafka.start_node(3);
    kafka.wait_for_brokers(&BTreeSet::from([1, 2, 3])).await;
}

#[tokio::test]
async fn stretched_over_three_clusters_with_combined_nodes() {
    let _one = ONE_AT_A_TIME.lock().await;
    // JBOD with the KRaft metadata log on its own volume.
    const JBOD: &[Volume] = &[
        Volume {
            id: Some(0),
            kraft_metadata: false,
        },
        Volume {
            id: Some(1),
            kraft_metadata: true,
        },
    ];
    let both = &[Role::Controller, Role::Broker];
    let c = cluster(
        Addressing::multi_cluster_services(),
        vec![
            node(0, "east", "east", both, JBOD),
            node(1, "west", "west", both, JBOD),
            node(2, "north", "north", both, JBOD),
        ],
    );
    let rendered = render(&c).unwrap();
    let n1 = &rendered.nodes[&1];
    assert_eq!(
        n1.get("controller.quorum.voters").unwrap(),
        "0@boot-east-0.east.boot-kafka-brokers.kafka.svc.clusterset.local:9090,\
1@boot-west-1.west.boot-kafka-brokers.kafka.svc.clusterset.local:9090,\
2@boot-north-2.north.boot-kafka-brokers.kafka.svc.clusterset.local:9090"
    );
    assert_eq!(
        n1.get("metadata.log.dir").unwrap(),
        "/var/lib/kafka/data-1/kafka-log1"
    );

    let kafka = PrivateKafka::start(&c.cluster_id, &rendered.nodes).await;
    assert_only_addresses_mapped(&kafka, &rendered);
    assert_eq!(kafka.controller_ids(), BTreeSet::from([0, 1, 2]));
    assert_eq!(
        metadata_brokers(&kafka.bootstrap()).await,
        BTreeSet::from([0, 1, 2])
    );
    produce_and_consume(&kafka, "kraft-boot-mcs").await;
    // The metadata log went to the volume marked for it, the data to both.
    for id in 0..3 {
        let data1 = kafka
            .root()
            .join(format!("node-{id}/var/lib/kafka/data-1/kafka-log{id}"));
        assert!(
            data1.join("__cluster_metadata-0").is_dir(),
            "{} has no metadata log",
            data1.display()
        );
        let data0 = kafka
            .root()
            .join(format!("node-{id}/var/lib/kafka/data-0/kafka-log{id}"));
        assert!(data0.join("meta.properties").is_file());
        assert!(!data0.join("__cluster_metadata-0").exists());
    }
    voters_change_once_the_quorum_is_dynamic(&kafka, &c.cluster_id).await;
}

/// The `directory.id` of node `id`'s metadata log directory, as its storage was formatted.
fn metadata_directory_id(kafka: &PrivateKafka, id: i32) -> String {
    let path = kafka.root().join(format!(
        "node-{id}/var/lib/kafka/data-1/kafka-log{id}/meta.properties"
    ));
    let text = std::fs::read_to_string(&path).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("directory.id="))
        .unwrap_or_else(|| panic!("no directory.id in {}", path.display()))
        .to_owned()
}

/// KIP-853 on the static quorum kstretch renders: voters cannot change; `kraft.version` is
/// raised to 1; then a voter is removed (it goes on as an observer) and added back by its
/// directory ID, and unknown voters and a foreign cluster ID are refused with typed errors.
async fn voters_change_once_the_quorum_is_dynamic(kafka: &PrivateKafka, cluster_id: &str) {
    let bootstrap = kafka.bootstrap();
    let admin = AdminClient::connect(
        AdminConfig::new(bootstrap.split(',')).with_request_timeout(Duration::from_secs(30)),
    )
    .await
    .unwrap();
    let level = |f: &BTreeMap<String, i16>| f.get(KRAFT_VERSION).copied().unwrap_or(0);
    assert_eq!(level(&admin.finalized_features().await.unwrap()), 0);
    let port: u16 = kafka
        .address(2, CONTROLPLANE_LISTENER)
        .unwrap()
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let listeners = [(
        CONTROLPLANE_LISTENER.to_owned(),
        "127.0.0.1".to_owned(),
        port,
    )];
    // Just booted on busy cores, the quorum may be electing a leader: that answer is retried.
    let mut tries = 0;
    let refused = loop {
        let e = admin
            .add_raft_voter(cluster_id, 2, Uuid::from_u128(7), &listeners)
            .await
            .unwrap_err();
        tries += 1;
        if tries < 30 && e.to_string().contains("NOT_LEADER_OR_FOLLOWER") {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        break e;
    };
    assert!(matches!(refused, Error::Unsupported { .. }), "{refused}");

    make_quorum_dynamic(&admin, &bootstrap).await;
    let quorum = admin.describe_quorum().await.unwrap();
    let dirs: BTreeMap<i32, Uuid> = quorum
        .voters
        .iter()
        .map(|v| (v.replica_id, v.directory_id))
        .collect();
    for id in 0..3 {
        assert_eq!(
            uuid_text(dirs[&id].as_u128()),
            metadata_directory_id(kafka, id),
            "voter {id}'s directory"
        );
    }

    let wrong = admin
        .remove_raft_voter("not-this-cluster", 2, dirs[&2])
        .await
        .unwrap_err();
    assert_eq!(
        wrong.kafka_code_name().as_deref(),
        Some("INCONSISTENT_CLUSTER_ID"),
        "{wrong}"
    );
    let unknown = admin
        .remove_raft_voter(cluster_id, 7, dirs[&2])
        .await
        .unwrap_err();
    assert_eq!(
        unknown.kafka_code_name().as_deref(),
        Some("VOTER_NOT_FOUND"),
        "{unknown}"
    );

    admin
        .remove_raft_voter(cluster_id, 2, dirs[&2])
        .await
        .unwrap();
    // The removed voter shows as an observer once it fetches again (a moment on busy cores).
    let observer = (2, uuid_text(dirs[&2].as_u128()), "Observer".to_owned());
    let removed = kstretch_tests::wait::wait_for(
        "removed voter 2 listed as an observer",
        Duration::from_secs(30),
        || async {
            let listed = kafka::quorum_by_kafkas_tool(&bootstrap);
            if listed.contains(&observer) {
                kstretch_tests::wait::Seen::Done(listed)
            } else {
                kstretch_tests::wait::Seen::NotYet(format!("{listed:?}"))
            }
        },
    )
    .await;
    let voters = |r: &BTreeSet<(i32, String, String)>| -> BTreeSet<i32> {
        r.iter()
            .filter(|(_, _, status)| status != "Observer")
            .map(|(id, _, _)| *id)
            .collect()
    };
    assert_eq!(voters(&removed), BTreeSet::from([0, 1]), "{removed:?}");

    // Added back once caught up (REQUEST_TIMED_OUT until then).
    kstretch_tests::wait::wait_for("voter 2 added back", Duration::from_secs(60), || async {
        match admin
            .add_raft_voter(cluster_id, 2, dirs[&2], &listeners)
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
    let added = kafka::quorum_by_kafkas_tool(&bootstrap);
    assert_eq!(voters(&added), BTreeSet::from([0, 1, 2]), "{added:?}");
    for id in 0..3 {
        assert!(
            added.iter().any(|(n, dir, status)| *n == id
                && *dir == metadata_directory_id(kafka, id)
                && status != "Observer"),
            "{added:?}"
        );
    }
    produce_and_consume(kafka, "kraft-boot-dynamic").await;
}
