//! A secured Kafka on real pods: TLS listeners with the cluster CA, nodes that speak only
//! mutual TLS, KafkaUsers authenticated and authorized, Connect workers, a forced CA renewal.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Secret};
use kstretch_api::Kafka;
use kstretch_tests::clients::{
    brokers_as, client_config, client_dir, external_tls_listener_is_verified_at_node_addresses,
    full_isr, no_loss, placed_topic, produced, reads, refused, tls_client_config, wait_for_acks,
};
use kstretch_tests::kafka::{broker_ids, create_topic, kafka_tool, run_kafka_tool};
use kstretch_tests::live::{
    ONE_AT_A_TIME, START_TIMEOUT, all_brokers, kafka_persistent_shape, listener_at, listener_in,
    live_kafka_of, live_kafka_of_with_secret, persistent, pod_names, pod_ready, pod_states,
    ready_on_real_node, real_node_ip, rolled_one_at_a_time, schedulable, secret_text, spare_node,
    warning,
};
use kstretch_tests::load::Load;
use kstretch_tests::prometheus::{
    STRIMZI_DASHBOARDS_METRICS_REPORTER, dashboards_have_series, scrape, series_from,
    stretched_dashboard_answers,
};
use kstretch_tests::ready::{kafka_ready as is_ready, ready_condition};
use kstretch_tests::stretch::{ALPHA, BETA, Stretch};
use kstretch_tests::wait::{Seen, wait_for};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

/// Strimzi's `kafka-persistent` example shape (a plain listener on 9092, a TLS one on 9093)
/// is Ready without warnings; Kafka's own clients trusting `ca.crt` of
/// `<cluster>-cluster-ca-cert` produce and consume on 9093, and fail when they trust another
/// CA; the nodes' replication listener refuses plaintext and TLS without a client
/// certificate; no Secret of the member cluster beta holds the CA key, but beta has the CA
/// certificate Secret, whose `ca.p12` Java clients trust.
#[tokio::test]
async fn a_tls_listener_is_served_with_the_cluster_ca_and_nodes_speak_only_mutual_tls() {
    let _one = ONE_AT_A_TIME.lock().await;
    // A listener that presents the user's own certificate (`brokerCertChainAndKey`), issued by
    // a CA of the user's for the addresses clients reach the brokers at.
    let user_ca = kstretch_tests::certs::Pki::new("listener-ca");
    let ips: Vec<std::net::IpAddr> = [ALPHA, BETA]
        .iter()
        .map(|alias| real_node_ip(alias).parse().unwrap())
        .collect();
    let listener_cert = user_ca.server_for_ips("external", &ips);
    let mut shape = kafka_persistent_shape();
    shape["spec"]["kafka"]["listeners"]
        .as_array_mut()
        .unwrap()
        .push(
            json!({"name": "own", "port": 9096, "type": "internal", "tls": true,
            "configuration": {"brokerCertChainAndKey":
                {"secretName": "listener-cert", "certificate": "tls.crt", "key": "tls.key"}}}),
        );
    // A cluster-ip listener, for clients in pods of the member clusters.
    shape["spec"]["kafka"]["listeners"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "cip", "port": 9098, "type": "cluster-ip", "tls": true}));
    // An external TLS listener, for clients outside both clusters.
    shape["spec"]["kafka"]["listeners"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "tlsext", "port": 9097, "type": "nodeport", "tls": true}));
    // Metrics as Strimzi's `strimzi-metrics-reporter` example serves them (its default list);
    // the reporter's jars come from this build's agent image.
    shape["spec"]["kafka"]["metricsConfig"] = json!({"type": "strimziMetricsReporter"});
    // Strimzi's logging, changed below while the nodes run.
    shape["spec"]["kafka"]["logging"] = json!({"type": "inline"});
    kstretch_tests::helm::import_images_once();
    let (stretch, k) = live_kafka_of_with_secret(
        "running-tls",
        shape,
        json!({"type": "ephemeral"}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "listener-cert"},
               "stringData": {"tls.crt": listener_cert.cert_pem, "tls.key": listener_cert.key_pem}}),
    )
    .await;
    let conditions = &k.status.as_ref().unwrap().conditions;
    assert!(
        conditions.iter().all(|c| c.type_ != "Warning"),
        "Ready without warnings: {conditions:#?}"
    );

    every_broker_reports_its_metrics_to_prometheus(&stretch).await;

    let secrets: Api<Secret> = stretch.api(ALPHA);
    let data = secret_text;
    let ca = data(
        &secrets.get("live-cluster-ca-cert").await.unwrap(),
        "ca.crt",
    );
    let ca_key = data(&secrets.get("live-cluster-ca").await.unwrap(), "ca.key");
    let dir = client_dir(&stretch);
    let trusted = tls_client_config(&dir, "trusted", &ca);
    let tls_alpha = listener_at(&k, "tls", &real_node_ip(ALPHA));
    let tls_beta = listener_at(&k, "tls", &real_node_ip(BETA));
    external_tls_listener_is_verified_at_node_addresses(&stretch, &k).await;
    a_broker_moved_to_another_node_is_reached_at_its_new_address(&stretch, &k).await;
    a_client_in_a_pod_uses_the_cluster_ip_listener(&stretch, &k).await;
    a_node_port_taken_in_alpha_is_refused_and_what_runs_is_kept(&stretch, "tlsext").await;
    logging_changes_reach_the_running_nodes_without_a_restart(&stretch).await;

    // Kafka's own clients over TLS: a topic, 100 records produced (acks=all) through alpha's
    // brokers and consumed through beta's.
    run_kafka_tool(
        "org.apache.kafka.tools.TopicCommand",
        &[
            "--bootstrap-server",
            &tls_alpha,
            "--command-config",
            &trusted,
            "--create",
            "--topic",
            "secured",
            "--partitions",
            "3",
            "--replication-factor",
            "3",
        ],
    );
    let produced = run_kafka_tool(
        "org.apache.kafka.tools.ProducerPerformance",
        &[
            "--topic",
            "secured",
            "--num-records",
            "100",
            "--record-size",
            "64",
            "--throughput",
            "-1",
            "--producer-props",
            &format!("bootstrap.servers={tls_alpha}"),
            "acks=all",
            "--producer.config",
            &trusted,
        ],
    );
    assert!(produced.contains("100 records sent"), "{produced}");
    let consumed = run_kafka_tool(
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        &[
            "--bootstrap-server",
            &tls_beta,
            "--consumer.config",
            &trusted,
            "--topic",
            "secured",
            "--from-beginning",
            "--max-messages",
            "100",
            "--timeout-ms",
            "60000",
        ],
    );
    assert_eq!(consumed.lines().count(), 100, "records read back over TLS");
    // With partitions (their metrics come with them): every metric Strimzi's dashboards for
    // the reporter query.
    dashboards_have_series(
        &stretch.ns,
        &k.name_any(),
        STRIMZI_DASHBOARDS_METRICS_REPORTER,
    )
    .await;
    // kstretch's dashboard of a stretched Kafka answers from both clusters on the reporter's
    // series too (central scraped as well, for its panels).
    let _central = scrape(&stretch.ns, "central", &stretch.central_http);
    stretched_dashboard_answers(&stretch.ns, &k.name_any(), &[ALPHA, BETA]).await;

    // A client that trusts another CA does not get in.
    let other = kstretch_tests::certs::Pki::new("untrusted");
    let untrusted = tls_client_config(&dir, "untrusted", &other.ca_pem());
    let refused = kafka_tool(
        "org.apache.kafka.tools.TopicCommand",
        &[
            "--bootstrap-server",
            &tls_alpha,
            "--command-config",
            &untrusted,
            "--list",
        ],
    );
    assert!(
        refused.is_err(),
        "a client trusting another CA listed topics: {refused:?}"
    );

    // The listener with the user's certificate: a client trusting only the user's CA gets in.
    let own = tls_client_config(&dir, "own", &user_ca.ca_pem());
    run_kafka_tool(
        "org.apache.kafka.tools.TopicCommand",
        &[
            "--bootstrap-server",
            &listener_at(&k, "own", &real_node_ip(BETA)),
            "--command-config",
            &own,
            "--list",
        ],
    );

    // The replication listener, as reached from outside its pod: no plaintext, and TLS only
    // with a certificate of the cluster CA.
    let services: Api<k8s_openapi::api::core::v1::Service> = stretch.api(ALPHA);
    let service = services.get("live-a-0").await.unwrap();
    let node_port = service
        .spec
        .unwrap()
        .ports
        .unwrap()
        .into_iter()
        .find(|p| p.name.as_deref() == Some("tcp-replication"))
        .and_then(|p| p.node_port)
        .unwrap();
    let replication = format!("{}:{node_port}", real_node_ip(ALPHA));
    let r = replication.clone();
    let plaintext = tokio::task::spawn_blocking(move || broker_ids(&r))
        .await
        .unwrap();
    assert!(
        plaintext.is_err(),
        "plaintext metadata from the replication port: {plaintext:?}"
    );
    let anonymous = kafka_tool(
        "org.apache.kafka.tools.TopicCommand",
        &[
            "--bootstrap-server",
            &replication,
            "--command-config",
            &trusted,
            "--list",
        ],
    );
    assert!(
        anonymous.is_err(),
        "TLS without a client certificate was let in: {anonymous:?}"
    );

    // The member cluster beta has its node's certificate and the CA certificate, never the
    // CA key.
    let beta: Api<Secret> = stretch.api(BETA);
    let in_beta = beta.list(&ListParams::default()).await.unwrap().items;
    let node = in_beta
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some("live-b-2"))
        .expect("the node's Secret in beta");
    assert_eq!(data(node, "ca.crt"), ca);
    for secret in &in_beta {
        for (key, value) in secret.data.iter().flatten() {
            assert!(
                key != "ca.key" && !String::from_utf8_lossy(&value.0).contains(ca_key.trim()),
                "Secret {:?} in beta holds the CA key",
                secret.metadata.name
            );
        }
    }

    // Clients in beta find the CA certificate there too, as a PKCS#12 trust store as well.
    let copy = in_beta
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some("live-cluster-ca-cert"))
        .expect("the CA certificate Secret in beta");
    assert_eq!(data(copy, "ca.crt"), ca);
    let p12 = dir.join("ca.p12");
    std::fs::write(&p12, &copy.data.as_ref().unwrap()["ca.p12"].0).unwrap();
    let from_p12 = client_config(
        &dir,
        "p12",
        &[
            ("security.protocol", "SSL".to_owned()),
            ("ssl.truststore.type", "PKCS12".to_owned()),
            ("ssl.truststore.location", p12.display().to_string()),
            ("ssl.truststore.password", data(copy, "ca.password")),
        ],
    );
    let listed = run_kafka_tool(
        "org.apache.kafka.tools.TopicCommand",
        &[
            "--bootstrap-server",
            &tls_beta,
            "--command-config",
            &from_p12,
            "--list",
        ],
    );
    assert!(listed.contains("secured"), "{listed}");

    // Deleted by the user, the Kafka takes the CA and certificates kstretch generated along.
    let kafkas: Api<Kafka> = stretch.api(ALPHA);
    kafkas.delete("live", &Default::default()).await.unwrap();
    wait_for(
        "the generated Secrets to go with the Kafka",
        START_TIMEOUT,
        || async {
            let mut left = Vec::new();
            for name in [
                "live-cluster-ca-cert",
                "live-cluster-ca",
                "live-clients-ca-cert",
                "live-clients-ca",
                "live-kstretch-node-certs",
            ] {
                if secrets.get_opt(name).await.unwrap().is_some() {
                    left.push(name);
                }
            }
            if left.is_empty() {
                Seen::Done(())
            } else {
                Seen::NotYet(format!("left: {left:?}"))
            }
        },
    )
    .await;
    stretch.finish().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A broker pod of alpha recreated on alpha's other real node (its node drained, the pod
/// deleted) advertises that node's address on the external TLS listener, under a certificate
/// that already names it: a client outside the clusters that verifies host names produces to
/// and reads from a partition the moved broker leads, with no user action, and an acks=all
/// producer to partitions it leads loses nothing meanwhile. The pod then moves back.
async fn a_broker_moved_to_another_node_is_reached_at_its_new_address(
    stretch: &Stretch,
    k: &Kafka,
) {
    let (spare, spare_ip) = spare_node(stretch, ALPHA).await;
    let home = format!("{ALPHA}-real-0");
    let pod = pod_names(stretch, ALPHA)
        .await
        .first()
        .expect("a pod in alpha")
        .clone();
    let id: i32 = pod.rsplit('-').next().unwrap().parse().unwrap();
    let secrets: Api<Secret> = stretch.api(ALPHA);
    let ca = secret_text(
        &secrets.get("live-cluster-ca-cert").await.unwrap(),
        "ca.crt",
    );
    let dir = client_dir(stretch);
    let trusted = tls_client_config(&dir, "moved", &ca);
    let external = listener_at(k, "tlsext", &real_node_ip(ALPHA));
    // Every partition led by the broker that moves.
    let mut replicas = vec![id];
    replicas.extend(
        brokers_as(&external, &trusted)
            .iter()
            .map(|b| b.0)
            .filter(|b| *b != id),
    );
    let bootstrap = all_brokers(k);
    placed_topic(&bootstrap, "moved", &[&replicas[..]; 3]).await;
    placed_topic(&bootstrap, "moved-tls", &[&replicas[..]]).await;
    full_isr(&bootstrap, "moved").await;
    let load = Load::start(&bootstrap, "moved", Duration::from_millis(20));
    wait_for_acks(&load, 20).await;

    move_pod(stretch, &pod, &home, &spare).await;
    let advertised = wait_for(
        "the moved broker at its new node's address",
        START_TIMEOUT,
        || async {
            let brokers = brokers_as(&external, &trusted);
            match brokers.iter().find(|(b, _, _)| *b == id) {
                Some((_, host, port)) if *host == spare_ip => Seen::Done(format!("{host}:{port}")),
                other => Seen::NotYet(format!("broker {id}: {other:?} in {brokers:?}")),
            }
        },
    )
    .await;
    produced(&advertised, &trusted, "moved-tls", 30);
    reads(&advertised, &trusted, "moved-tls", 30);
    let acked = load.acked();
    wait_for_acks(&load, acked + 20).await;

    move_pod(stretch, &pod, &spare, &home).await;
    no_loss(load, &bootstrap, "moved").await;
}

/// Moves pod `pod` of alpha from node `from` to node `to`: `from` cordoned, `to` uncordoned,
/// the pod deleted and waited for Ready on `to`; `from` uncordoned again and the spare node
/// left cordoned.
async fn move_pod(stretch: &Stretch, pod: &str, from: &str, to: &str) {
    schedulable(stretch, ALPHA, from, false).await;
    schedulable(stretch, ALPHA, to, true).await;
    let pods: Api<Pod> = stretch.api(ALPHA);
    let old = pods.get(pod).await.unwrap().metadata.uid;
    pods.delete(pod, &Default::default()).await.unwrap();
    wait_for(&format!("{pod} Ready on {to}"), START_TIMEOUT, || async {
        match pods.get_opt(pod).await.unwrap() {
            Some(p) if p.metadata.uid != old && pod_ready(&p) => {
                let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
                assert_eq!(node.as_deref(), Some(to), "{pod} was scheduled elsewhere");
                Seen::Done(())
            }
            other => Seen::NotYet(format!("{:?}", other.map(|p| p.status))),
        }
    })
    .await;
    schedulable(stretch, ALPHA, from, true).await;
    let (spare, _) = spare_node(stretch, ALPHA).await;
    schedulable(stretch, ALPHA, &spare, false).await;
}

/// A client in a pod of alpha (Kafka's own tools, trusting only `ca.crt` of the cluster CA
/// Secret, host names verified) produces with acks=all through the `cluster-ip` listener's
/// bootstrap from the status and reads the records back.
async fn a_client_in_a_pod_uses_the_cluster_ip_listener(stretch: &Stretch, k: &Kafka) {
    let bootstrap = listener_at(k, "cip", &real_node_ip(ALPHA));
    create_topic(&all_brokers(k), "inside", 3, 3).await;
    let script = format!(
        "set -e; printf 'security.protocol=SSL\\nssl.truststore.type=PEM\\nssl.truststore.location=/ca/ca.crt\\n' > /tmp/client.properties; \
         /opt/kafka/bin/kafka-run-class.sh org.apache.kafka.tools.ProducerPerformance --topic inside \
         --num-records 20 --record-size 16 --throughput -1 --producer.config /tmp/client.properties \
         --producer-props bootstrap.servers={bootstrap} acks=all; \
         /opt/kafka/bin/kafka-console-consumer.sh --bootstrap-server {bootstrap} \
         --consumer.config /tmp/client.properties --topic inside --from-beginning \
         --max-messages 20 --timeout-ms 60000"
    );
    stretch
        .apply(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "cip-client"},
            "spec": {
                "restartPolicy": "Never",
                "nodeSelector": {"kstretch.test/node": "real"},
                "tolerations": [{"key": "kstretch.test/real-node", "operator": "Exists",
                                 "effect": "NoSchedule"}],
                "containers": [{
                    "name": "client",
                    "image": format!("apache/kafka:{}", kstretch_core::versions::DEFAULT_KAFKA_VERSION),
                    "imagePullPolicy": "Never",
                    "command": ["/bin/sh", "-c", script],
                    "env": [{"name": "KAFKA_HEAP_OPTS", "value": "-Xmx128m"}],
                    "volumeMounts": [{"name": "ca", "mountPath": "/ca"}]
                }],
                "volumes": [{"name": "ca", "secret": {"secretName": "live-cluster-ca-cert"}}]
            }
        }))
        .await;
    let pods: Api<Pod> = stretch.api(ALPHA);
    let phase = wait_for("the client pod to finish", START_TIMEOUT, || async {
        let pod = pods.get("cip-client").await.unwrap();
        match pod.status.and_then(|s| s.phase).as_deref() {
            Some(done @ ("Succeeded" | "Failed")) => Seen::Done(done.to_owned()),
            other => Seen::NotYet(format!("phase {other:?}")),
        }
    })
    .await;
    let log = pods.logs("cip-client", &Default::default()).await.unwrap();
    assert_eq!(phase, "Succeeded", "{log}");
    assert!(log.contains("20 records sent"), "{log}");
    let read = log
        .lines()
        .filter(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_uppercase()))
        .count();
    assert_eq!(read, 20, "{log}");
    pods.delete("cip-client", &Default::default())
        .await
        .unwrap();
    wait_for("the client pod gone", START_TIMEOUT, || async {
        match pods.get_opt("cip-client").await.unwrap() {
            None => Seen::Done(()),
            Some(_) => Seen::NotYet("still there".to_owned()),
        }
    })
    .await;
}

/// `logging` changed while the nodes run reaches them without a restart (log4j2 re-reads the
/// file kubelet refreshes): an `inline` logger set to DEBUG shows its lines in a broker's log,
/// then an `external` ConfigMap's layout (a broker at INFO logs seldom: its requests are
/// logged), then a change of that ConfigMap; every pod keeps its UID and restart count.
async fn logging_changes_reach_the_running_nodes_without_a_restart(stretch: &Stretch) {
    let before = pod_states(stretch).await;
    let kafkas: Api<Kafka> = stretch.api(ALPHA);
    let patch = |logging: Value, nudge: &str| {
        let kafkas = kafkas.clone();
        let nudge = nudge.to_owned();
        async move {
            let body = json!({"metadata": {"annotations": {"kstretch.test/nudge": nudge}},
                              "spec": {"kafka": {"logging": logging}}});
            kafkas
                .patch("live", &PatchParams::default(), &Patch::Merge(body))
                .await
                .unwrap();
        }
    };
    // kafka.request.logger logs every request it completes at DEBUG.
    patch(
        json!({"type": "inline", "loggers": {"logger.requestlogger.level": "DEBUG"}}),
        "inline",
    )
    .await;
    logged(stretch, "Completed request").await;

    let file = |marker: &str| {
        format!(
            "monitorInterval = 5\nappender.console.type = Console\nappender.console.name = STDOUT\n\
             appender.console.layout.type = PatternLayout\n\
             appender.console.layout.pattern = {marker} %p %c - %m%n\n\
             rootLogger.level = INFO\nrootLogger.appenderRef.console.ref = STDOUT\n\
             logger.requests.name = kafka.request.logger\nlogger.requests.level = DEBUG\n"
        )
    };
    let logs_config = |marker: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kafka-logs"},
               "data": {"log4j2.properties": file(marker)}})
    };
    stretch.apply(logs_config("EXTERNAL-ONE")).await;
    let external = json!({"type": "external", "loggers": null, "valueFrom":
        {"configMapKeyRef": {"name": "kafka-logs", "key": "log4j2.properties"}}});
    patch(external.clone(), "external").await;
    logged(stretch, "EXTERNAL-ONE DEBUG").await;
    // Central reads the user's ConfigMap when it reconciles the `Kafka` (as Strimzi does).
    stretch.apply(logs_config("EXTERNAL-TWO")).await;
    patch(external, "external-changed").await;
    logged(stretch, "EXTERNAL-TWO DEBUG").await;

    let after = pod_states(stretch).await;
    let kept = |s: &BTreeMap<String, (String, i32, bool)>| {
        s.iter()
            .map(|(pod, (uid, restarts, _))| (pod.clone(), uid.clone(), *restarts))
            .collect::<Vec<_>>()
    };
    assert_eq!(kept(&before), kept(&after), "no pod restarted");
}

/// Waits until the last lines of the log of a node of alpha contain `text`.
async fn logged(stretch: &Stretch, text: &str) {
    let pods: Api<Pod> = stretch.api(ALPHA);
    let names = pod_names(stretch, ALPHA).await;
    let params = kube::api::LogParams {
        container: Some("kafka".to_owned()),
        since_seconds: Some(20),
        ..Default::default()
    };
    wait_for(
        &format!("{text:?} in a log of {names:?}"),
        START_TIMEOUT,
        || async {
            for name in &names {
                let log = pods.logs(name, &params).await.unwrap_or_default();
                if log.contains(text) {
                    return Seen::Done(());
                }
            }
            Seen::NotYet(format!("not in the last 20 s of {names:?}"))
        },
    )
    .await;
}

/// A listener whose bootstrap asks for a node port another Service of alpha holds: alpha's
/// apiserver refuses its Service, the `Kafka` says so (`Ready=False`, the listener, the cluster
/// and the apiserver's words) and no pod restarts; without the nodePort it is ready again.
async fn a_node_port_taken_in_alpha_is_refused_and_what_runs_is_kept(
    stretch: &Stretch,
    listener: &str,
) {
    use k8s_openapi::api::core::v1::Service;
    let services: Api<Service> = stretch.api(ALPHA);
    let squatter: Service = serde_json::from_value(json!({
        "metadata": {"name": "squatter"},
        "spec": {"type": "NodePort", "selector": {"app": "none"},
                 "ports": [{"port": 80, "targetPort": 80}]}}))
    .unwrap();
    let squatter = services
        .create(&Default::default(), &squatter)
        .await
        .unwrap();
    let taken = squatter.spec.unwrap().ports.unwrap()[0].node_port.unwrap();
    let pods_before = pod_states(stretch).await;
    let with_bootstrap = |bootstrap: Value| async move {
        let kafkas: Api<Kafka> = stretch.api(ALPHA);
        let k = kafkas.get("live").await.unwrap();
        let mut listeners = serde_json::to_value(&k.spec.kafka.listeners).unwrap();
        for l in listeners.as_array_mut().unwrap() {
            if l["name"] == listener {
                l["configuration"] = json!({"bootstrap": bootstrap});
            }
        }
        kafkas
            .patch(
                "live",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"kafka": {"listeners": listeners}}})),
            )
            .await
            .unwrap();
    };
    with_bootstrap(json!({"nodePort": taken})).await;
    let k: Kafka = stretch
        .wait_in_alpha(
            "live",
            "the Kafka to say alpha refused the listener's Service",
            START_TIMEOUT,
            |k| {
                ready_condition(k)
                    .is_some_and(|c| c.reason.as_deref() == Some("ListenerServiceRefused"))
            },
        )
        .await;
    let said = ready_condition(&k)
        .and_then(|c| c.message.clone())
        .unwrap_or_default();
    assert!(
        said.contains(&format!("listener {listener}: the apiserver of cluster alpha refused Service live-kafka-{listener}-bootstrap"))
            && said.contains("already allocated"),
        "{said}"
    );
    let pods_after = pod_states(stretch).await;
    let uids = |pods: &BTreeMap<String, (String, i32, bool)>| -> Vec<(String, String)> {
        pods.iter()
            .map(|(name, (uid, _, _))| (name.clone(), uid.clone()))
            .collect()
    };
    assert_eq!(uids(&pods_before), uids(&pods_after), "no pod was replaced");
    with_bootstrap(json!({})).await;
    stretch
        .wait_in_alpha(
            "live",
            "the Kafka ready again",
            START_TIMEOUT,
            |k: &Kafka| is_ready(k),
        )
        .await;
    services
        .delete("squatter", &Default::default())
        .await
        .unwrap();
}

/// The `kafka-persistent` shape with a SCRAM listener (9094), a listener that authenticates by
/// certificate (9095) and simple authorization. The plain and TLS listeners admit anonymous
/// clients, which the test makes a super user so its load and tools keep working.
fn secured_kafka() -> Value {
    let mut spec = kafka_persistent_shape();
    let listeners = spec["spec"]["kafka"]["listeners"].as_array_mut().unwrap();
    listeners.push(
        json!({"name": "scram", "port": 9094, "type": "internal", "tls": false,
        "authentication": {"type": "scram-sha-512"}}),
    );
    listeners.push(
        json!({"name": "mtls", "port": 9095, "type": "internal", "tls": true,
        "authentication": {"type": "tls"}}),
    );
    // The same two from outside the clusters: SCRAM over TLS through load balancers, mutual
    // TLS through node ports.
    listeners.push(
        json!({"name": "lbscram", "port": 9098, "type": "loadbalancer", "tls": true,
        "authentication": {"type": "scram-sha-512"}}),
    );
    listeners.push(
        json!({"name": "npmtls", "port": 9099, "type": "nodeport", "tls": true,
        "authentication": {"type": "tls"}}),
    );
    spec["spec"]["kafka"]["authorization"] = json!({"type": "simple", "superUsers": ["ANONYMOUS"]});
    spec
}

/// A `KafkaUser` of `live` authenticating by `authentication`, who may produce to and consume
/// from `topic` only.
fn kafka_user(name: &str, authentication: &str, topic: &str) -> Value {
    json!({
        "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaUser",
        "metadata": {"name": name, "labels": {"strimzi.io/cluster": "live"}},
        "spec": {
            "authentication": {"type": authentication},
            "authorization": {"type": "simple", "acls": [
                {"resource": {"type": "topic", "name": topic},
                 "operations": ["Read", "Write", "Describe"]},
                {"resource": {"type": "group", "name": "*"}, "operations": ["Read"]}
            ]}
        }
    })
}

/// Client properties `name` for alice (mutual TLS with the keystore of her Secret `secret`),
/// trusting the PEM CA certificates in `ca_file`.
fn alice_config(dir: &std::path::Path, name: &str, secret: &Secret, ca_file: &str) -> String {
    let p12 = dir.join(format!("{name}.p12"));
    std::fs::write(&p12, &secret.data.as_ref().unwrap()["user.p12"].0).unwrap();
    client_config(
        dir,
        name,
        &[
            ("security.protocol", "SSL".to_owned()),
            ("ssl.truststore.type", "PEM".to_owned()),
            ("ssl.truststore.location", ca_file.to_owned()),
            ("ssl.keystore.type", "PKCS12".to_owned()),
            ("ssl.keystore.location", p12.display().to_string()),
            (
                "ssl.keystore.password",
                secret_text(secret, "user.password"),
            ),
        ],
    )
}

/// `KafkaUser`s with Kafka's own clients as the judge: a `tls` user (its Secret's `user.p12`)
/// and a `scram-sha-512` user (its Secret's `sasl.jaas.config`) produce and consume their own
/// topic and cannot read the other's; a wrong password and a certificate of another CA are
/// refused; deleting a user revokes its access.
async fn users_are_authenticated_and_authorized(stretch: &Stretch, k: &Kafka) {
    create_topic(&all_brokers(k), "alice-topic", 1, 3).await;
    create_topic(&all_brokers(k), "bob-topic", 1, 3).await;
    stretch
        .apply(kafka_user("alice", "tls", "alice-topic"))
        .await;
    stretch
        .apply(kafka_user("bob", "scram-sha-512", "bob-topic"))
        .await;
    let users: Api<kstretch_api::KafkaUser> = stretch.api(ALPHA);
    for (name, username) in [("alice", "CN=alice"), ("bob", "bob")] {
        let user = wait_for(
            &format!("KafkaUser {name} Ready"),
            START_TIMEOUT,
            || async {
                let u = users.get(name).await.unwrap();
                let ready = u.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True")
                });
                if ready {
                    Seen::Done(u)
                } else {
                    Seen::NotYet(format!("{:?}", u.status))
                }
            },
        )
        .await;
        let status = user.status.unwrap();
        assert_eq!(status.username.as_deref(), Some(username));
        assert_eq!(status.secret.as_deref(), Some(name));
    }

    let secrets: Api<Secret> = stretch.api(ALPHA);
    let dir = client_dir(stretch);
    let cluster_ca = secret_text(
        &secrets.get("live-cluster-ca-cert").await.unwrap(),
        "ca.crt",
    );
    let ca_file = dir.join("cluster-ca.crt");
    std::fs::write(&ca_file, &cluster_ca).unwrap();
    let trust = [
        ("ssl.truststore.type", "PEM".to_owned()),
        ("ssl.truststore.location", ca_file.display().to_string()),
    ];

    // alice: mutual TLS with the keystore of her Secret.
    let alice_secret = secrets.get("alice").await.unwrap();
    let alice = alice_config(&dir, "alice", &alice_secret, &trust[1].1);
    let mtls = listener_at(k, "mtls", &real_node_ip(ALPHA));
    let out = produced(&mtls, &alice, "alice-topic", 20);
    assert!(out.contains("20 records sent"), "{out}");
    reads(&mtls, &alice, "alice-topic", 20);

    // bob: SCRAM-SHA-512 with the JAAS line of his Secret.
    let bob_secret = secrets.get("bob").await.unwrap();
    let bob = client_config(
        &dir,
        "bob",
        &[
            ("security.protocol", "SASL_PLAINTEXT".to_owned()),
            ("sasl.mechanism", "SCRAM-SHA-512".to_owned()),
            (
                "sasl.jaas.config",
                secret_text(&bob_secret, "sasl.jaas.config"),
            ),
        ],
    );
    let scram = listener_at(k, "scram", &real_node_ip(BETA));
    let out = produced(&scram, &bob, "bob-topic", 20);
    assert!(out.contains("20 records sent"), "{out}");
    reads(&scram, &bob, "bob-topic", 20);

    // Both again from outside the clusters, as clients verifying host names with only the
    // cluster CA: bob through each cluster's load balancers, alice through its node ports.
    let mut bob_lines = vec![
        ("security.protocol", "SASL_SSL".to_owned()),
        ("sasl.mechanism", "SCRAM-SHA-512".to_owned()),
        (
            "sasl.jaas.config",
            secret_text(&bob_secret, "sasl.jaas.config"),
        ),
    ];
    bob_lines.extend(trust.clone());
    let bob_outside = client_config(&dir, "bob-outside", &bob_lines);
    let balanced = [
        listener_in(k, "lbscram", ALPHA),
        listener_in(k, "lbscram", BETA),
    ];
    external_brokers_are_at(&balanced, &bob_outside, 9098, |host| {
        // MetalLB's pool of each cluster's network, not its node.
        host.rsplit_once('.')
            .and_then(|(_, last)| last.parse::<u8>().ok())
            .is_some_and(|last| (200..240).contains(&last))
    });
    let out = produced(&balanced[0], &bob_outside, "bob-topic", 20);
    assert!(out.contains("20 records sent"), "{out}");
    reads(&balanced[1], &bob_outside, "bob-topic", 40);
    let node_ports = [
        listener_at(k, "npmtls", &real_node_ip(ALPHA)),
        listener_at(k, "npmtls", &real_node_ip(BETA)),
    ];
    let nodes = [real_node_ip(ALPHA), real_node_ip(BETA)];
    external_brokers_are_at(&node_ports, &alice, 0, |host| {
        nodes.iter().any(|n| n == host)
    });
    let out = produced(&node_ports[1], &alice, "alice-topic", 20);
    assert!(out.contains("20 records sent"), "{out}");
    reads(&node_ports[0], &alice, "alice-topic", 40);

    // The ACLs: neither reads the other's topic.
    refused(&mtls, &alice, "bob-topic", "TopicAuthorization");
    refused(&scram, &bob, "alice-topic", "TopicAuthorization");

    // A wrong password and a certificate of another CA (with alice's name) get nowhere.
    let wrong = client_config(
        &dir,
        "wrong",
        &[
            ("security.protocol", "SASL_PLAINTEXT".to_owned()),
            ("sasl.mechanism", "SCRAM-SHA-512".to_owned()),
            (
                "sasl.jaas.config",
                "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"bob\" password=\"not-his\";".to_owned(),
            ),
        ],
    );
    refused(&scram, &wrong, "bob-topic", "Authentication failed");
    let other = kstretch_tests::certs::Pki::new("other-clients").client_with_cn("alice");
    let mut forged_lines = vec![("security.protocol", "SSL".to_owned())];
    forged_lines.extend(trust.clone());
    forged_lines.extend([
        ("ssl.keystore.type", "PEM".to_owned()),
        ("ssl.keystore.certificate.chain", other.cert_pem.clone()),
        ("ssl.keystore.key", other.key_pem.clone()),
    ]);
    let forged = client_config(&dir, "forged", &forged_lines);
    refused(&mtls, &forged, "alice-topic", "SslAuthenticationException");

    // Deleting bob revokes his credential: his own Secret no longer gets him in.
    users.delete("bob", &Default::default()).await.unwrap();
    wait_for("KafkaUser bob gone", START_TIMEOUT, || async {
        match users.get_opt("bob").await.unwrap() {
            None => Seen::Done(()),
            Some(u) => Seen::NotYet(format!("finalizers {:?}", u.finalizers())),
        }
    })
    .await;
    refused(&scram, &bob, "bob-topic", "Authentication failed");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The metadata each of `bootstraps` returns (read with the client properties `config`) names
/// every broker of both clusters, each at a host `at_host` allows and a port of its own
/// (`port`, or any when 0), different for each broker.
fn external_brokers_are_at(
    bootstraps: &[String],
    config: &str,
    port: u16,
    at_host: impl Fn(&str) -> bool,
) {
    for bootstrap in bootstraps {
        let brokers = brokers_as(bootstrap, config);
        // Two brokers in alpha, one in beta.
        assert_eq!(brokers.len(), 3, "through {bootstrap}: {brokers:?}");
        let addresses: std::collections::BTreeSet<(&str, u16)> =
            brokers.iter().map(|(_, h, p)| (h.as_str(), *p)).collect();
        assert_eq!(addresses.len(), 3, "one address each: {brokers:?}");
        let networks: std::collections::BTreeSet<&str> = brokers
            .iter()
            .filter_map(|(_, h, _)| h.rsplit_once('.').map(|(n, _)| n))
            .collect();
        assert_eq!(networks.len(), 2, "brokers of both clusters: {brokers:?}");
        for (id, host, p) in &brokers {
            assert!(
                at_host(host) && (port == 0 || *p == port),
                "broker {id} at {host}:{p} through {bootstrap}"
            );
        }
    }
}

/// `KafkaConnect`s of the secured cluster run as pods on the real nodes: one in beta whose
/// workers trust the cluster CA and authenticate with a `KafkaUser`'s certificate (mutual TLS),
/// one in alpha authenticating with a SCRAM `KafkaUser`'s password. Each worker joins the
/// cluster under its user's ACLs (it creates its storage topics) and shows Ready; then both go.
async fn connect_workers_reach_the_secured_kafka(stretch: &Stretch, k: &Kafka) {
    let all = |kind: &str| {
        json!({"resource": {"type": kind, "name": "connect-", "patternType": "prefix"},
               "operations": ["All"]})
    };
    for (user, authentication) in [("connect", "tls"), ("connect-scram", "scram-sha-512")] {
        stretch
            .apply(json!({
                "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaUser",
                "metadata": {"name": user, "labels": {"strimzi.io/cluster": "live"}},
                "spec": {"authentication": {"type": authentication},
                         "authorization": {"type": "simple", "acls": [all("topic"), all("group"),
                            {"resource": {"type": "cluster"},
                             "operations": ["Describe", "DescribeConfigs"]}]}}
            }))
            .await;
    }
    let secrets: Api<Secret> = stretch.api(ALPHA);
    wait_for("the connect users' Secrets", START_TIMEOUT, || async {
        let mut missing = Vec::new();
        for user in ["connect", "connect-scram"] {
            if secrets.get_opt(user).await.unwrap().is_none() {
                missing.push(user);
            }
        }
        if missing.is_empty() {
            Seen::Done(())
        } else {
            Seen::NotYet(format!("{missing:?}"))
        }
    })
    .await;
    let on_real_node = json!({"pod": {
        "nodeSelector": {"kstretch.test/node": "real"},
        "tolerations": [{"key": "kstretch.test/real-node", "operator": "Exists",
                         "effect": "NoSchedule"}]}});
    let worker = |name: &str, alias: &str, bootstrap: String, security: Value| {
        let mut spec = json!({
            "replicas": 1,
            "bootstrapServers": bootstrap,
            "groupId": format!("{name}-group"), "configStorageTopic": format!("{name}-configs"),
            "statusStorageTopic": format!("{name}-status"),
            "offsetStorageTopic": format!("{name}-offsets"),
            "config": {"config.storage.replication.factor": 3,
                       "offset.storage.replication.factor": 3,
                       "status.storage.replication.factor": 3},
            "jvmOptions": {"-Xms": "128m", "-Xmx": "320m", "-XX": {"TieredStopAtLevel": "1"}},
            "template": on_real_node.clone()
        });
        spec.as_object_mut()
            .unwrap()
            .extend(security.as_object().unwrap().clone());
        json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaConnect",
            "metadata": {"name": name, "annotations": {"strimzi.io/stretch-cluster-alias": alias}},
            "spec": spec
        })
    };
    // Mutual TLS from beta, to the brokers' node ports in alpha.
    stretch
        .apply(worker(
            "connect-tls",
            BETA,
            listener_at(k, "mtls", &real_node_ip(ALPHA)),
            json!({
                "tls": {"trustedCertificates":
                    [{"secretName": "live-cluster-ca-cert", "certificate": "ca.crt"}]},
                "authentication": {"type": "tls", "certificateAndKey":
                    {"secretName": "connect", "certificate": "user.crt", "key": "user.key"}}
            }),
        ))
        .await;
    // SCRAM from alpha, to the brokers in beta.
    stretch
        .apply(worker(
            "connect-scram",
            ALPHA,
            listener_at(k, "scram", &real_node_ip(BETA)),
            json!({"authentication": {"type": "scram-sha-512", "username": "connect-scram",
                "passwordSecret": {"secretName": "connect-scram", "password": "password"}}}),
        ))
        .await;
    // What central ships to the workers' cluster.
    let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> = stretch.api(BETA);
    let shipped_secrets: Api<Secret> = stretch.api(BETA);
    let (generated, shipped) = wait_for(
        "the workers' configuration and Secret in beta",
        START_TIMEOUT,
        || async {
            let cm = config_maps
                .get_opt("connect-tls-connect-config")
                .await
                .unwrap();
            let secret = shipped_secrets
                .get_opt("connect-tls-connect-security")
                .await
                .unwrap();
            match (cm, secret) {
                (Some(cm), Some(secret)) => Seen::Done((
                    cm.data.unwrap_or_default()["kafka-connect.properties"].clone(),
                    secret
                        .data
                        .unwrap_or_default()
                        .into_keys()
                        .collect::<Vec<_>>(),
                )),
                other => Seen::NotYet(format!("{:?}", (other.0.is_some(), other.1.is_some()))),
            }
        },
    )
    .await;
    assert_eq!(shipped, ["ca.crt", "user.crt", "user.key"]);
    assert!(generated.contains("security.protocol=SSL"), "{generated}");
    let bootstrap = all_brokers(k);
    wait_for("the workers' storage topics", START_TIMEOUT, || async {
        let topics = kstretch_tests::kafka::topic_names(&bootstrap).unwrap_or_default();
        let missing: Vec<String> = ["connect-tls", "connect-scram"]
            .iter()
            .flat_map(|w| ["configs", "status", "offsets"].map(|t| format!("{w}-{t}")))
            .filter(|t| !topics.contains(t))
            .collect();
        if missing.is_empty() {
            Seen::Done(())
        } else {
            Seen::NotYet(format!("missing {missing:?}"))
        }
    })
    .await;
    for (name, alias) in [("connect-tls", BETA), ("connect-scram", ALPHA)] {
        let pods: Api<Pod> = stretch.api(alias);
        let pod = format!("{name}-connect-0");
        wait_for(&format!("{pod} ready"), START_TIMEOUT, || async {
            match pods.get_opt(&pod).await.unwrap() {
                Some(p) if ready_on_real_node(std::slice::from_ref(&p), alias) == [pod.clone()] => {
                    Seen::Done(())
                }
                other => Seen::NotYet(format!("{:?}", other.and_then(|p| p.status))),
            }
        })
        .await;
    }
    // The renewal that follows rolls the brokers alone, with the CPU they need.
    let connects: Api<kstretch_api::KafkaConnect> = stretch.api(ALPHA);
    for name in ["connect-tls", "connect-scram"] {
        connects.delete(name, &Default::default()).await.unwrap();
    }
    for (name, alias) in [("connect-tls", BETA), ("connect-scram", ALPHA)] {
        let pods: Api<Pod> = stretch.api(alias);
        let pod = format!("{name}-connect-0");
        wait_for(&format!("{pod} gone"), START_TIMEOUT, || async {
            match pods.get_opt(&pod).await.unwrap() {
                None => Seen::Done(()),
                Some(_) => Seen::NotYet("still there".to_owned()),
            }
        })
        .await;
    }
}

/// A secured cluster (SCRAM and certificate listeners, simple authorization) serves its
/// Strimzi's metrics reporter in every node serves Kafka's and Yammer's metrics on 9404, which
/// the test environment's Prometheus scrapes in both clusters: a series of each broker.
async fn every_broker_reports_its_metrics_to_prometheus(stretch: &Stretch) {
    let expr = format!(
        "kafka_server_replicamanager_leadercount{{namespace=\"{}\"}}",
        stretch.ns
    );
    series_from(&expr, &[ALPHA, BETA]).await;
    wait_for("a series of each broker", START_TIMEOUT, || async {
        match kstretch_tests::prometheus::query(&expr).await {
            Ok(series) if series.len() == 3 => Seen::Done(()),
            other => Seen::NotYet(format!("{other:?}")),
        }
    })
    .await;
}

/// A group commits an offset behind the end of a partition: Kafka Exporter, running in a
/// member cluster and scraped by the environment's Prometheus, serves that lag under Kafka
/// Exporter's names with Strimzi's labels, and only for the groups and topics its filters keep.
async fn kafka_exporter_serves_the_lag_of_a_group(stretch: &Stretch, k: &Kafka) {
    use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
    use rdkafka::{ClientConfig, Offset, TopicPartitionList};

    let bootstrap = all_brokers(k);
    create_topic(&bootstrap, "lagged", 1, 3).await;
    let records: Vec<(String, String)> = (0..25)
        .map(|i| (format!("k{i}"), format!("v{i}")))
        .collect();
    kstretch_tests::kafka::produce(&bootstrap, "lagged", &records).await;
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "lag-check")
        .create()
        .unwrap();
    let mut commit = TopicPartitionList::new();
    commit
        .add_partition_offset("lagged", 0, Offset::Offset(10))
        .unwrap();
    consumer.commit(&commit, CommitMode::Sync).unwrap();
    let (_, high) = consumer
        .fetch_watermarks("lagged", 0, Duration::from_secs(10))
        .unwrap();
    assert_eq!(high, 25, "every record acknowledged");

    let expr = format!(
        "kafka_consumergroup_lag{{namespace=\"{}\",consumergroup=\"lag-check\",topic=\"lagged\",partition=\"0\"}}",
        stretch.ns
    );
    let series = wait_for(
        "Kafka Exporter's lag in Prometheus",
        START_TIMEOUT,
        || async {
            match kstretch_tests::prometheus::query(&expr).await {
                Ok(series) if series.iter().any(|(_, v)| *v == 15.0) => Seen::Done(series),
                other => Seen::NotYet(format!("{other:?}")),
            }
        },
    )
    .await;
    let (labels, _) = &series[0];
    assert_eq!(
        labels.get("strimzi_io_kind").map(String::as_str),
        Some("Kafka"),
        "{labels:?}"
    );
    assert_eq!(
        labels.get("strimzi_io_name").map(String::as_str),
        Some("live-kafka-exporter"),
        "{labels:?}"
    );
    // The filters hold: no internal topic, no group outside groupRegex.
    let others = format!(
        "kafka_topic_partitions{{namespace=\"{0}\",topic=~\"__.*\"}} or kafka_consumergroup_members{{namespace=\"{0}\",consumergroup!~\"lag-.*\"}}",
        stretch.ns
    );
    assert_eq!(
        kstretch_tests::prometheus::query(&others).await,
        Ok(Vec::new())
    );
}

/// Now, in Unix seconds.
fn unix_now() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(since.as_secs()).unwrap()
}

/// `unix` as the `Kafka`'s messages write instants.
fn utc(unix: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(unix)
        .unwrap()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Maintenance windows (Quartz cron, UTC) of two whole minutes, the first opening at least
/// 40 s from now; and when it opens.
fn windows_soon() -> (Vec<String>, i64) {
    let start = (unix_now() + 40 + 59) / 60 * 60;
    let windows = [start, start + 60]
        .iter()
        .map(|t| format!("* {} {} ? * *", t / 60 % 60, t / 3600 % 24))
        .collect();
    (windows, start)
}

/// The CA certificate Secret `name` once it holds its second certificate (generation 1).
async fn second_ca_certificate(secrets: &Api<Secret>, name: &str) -> Secret {
    wait_for(
        &format!("{name} at generation 1"),
        START_TIMEOUT,
        || async {
            let s = secrets.get(name).await.unwrap();
            match s
                .annotations()
                .get("strimzi.io/ca-cert-generation")
                .map(String::as_str)
            {
                Some("1") => Seen::Done(s),
                other => Seen::NotYet(format!("generation {other:?}")),
            }
        },
    )
    .await
}

/// `KafkaUser`s (see [`users_are_authenticated_and_authorized`]) and Connect workers (see
/// [`connect_workers_reach_the_secured_kafka`]); then
/// `strimzi.io/force-renew` on `live-cluster-ca-cert` of the running cluster while an idempotent
/// producer with `acks=all` sends, with `maintenanceTimeWindows` that open a minute later: the
/// renewal waits for the window and says until when; then a new CA certificate of the same key (generation 1), the old
/// one kept as `ca-<expiry>.crt`, every node rolled one at a time to trust both, no failed
/// send, no lost acknowledged record; a client trusting only the new certificate connects.
/// In the same window `strimzi.io/force-replace` gives the clients CA a new key (its old
/// certificate kept), alice's certificate is issued again under it, and the nodes take her new
/// and her old one after the same roll; on the cluster CA's key Secret it is not acted on and
/// the `Kafka` says so.
#[tokio::test]
async fn users_are_served_and_a_forced_ca_renewal_rolls_the_nodes_and_loses_no_acknowledged_record()
{
    let _one = ONE_AT_A_TIME.lock().await;
    let mut shape = secured_kafka();
    // Kafka Exporter, from this build's agent image, reaching the secured brokers as a super
    // user with its own certificate.
    // Its `template.pod` puts it on the cluster's real node, as the pools' put the nodes.
    shape["spec"]["kafkaExporter"] = json!({
        "groupRegex": "^lag-", "topicExcludeRegex": "^__",
        "template": {"pod": {
            "nodeSelector": {"kstretch.test/node": "real"},
            "tolerations": [{"key": "kstretch.test/real-node", "operator": "Exists",
                             "effect": "NoSchedule"}]
        }}
    });
    kstretch_tests::helm::import_images_once();
    let (stretch, k) = live_kafka_of("running-renew", shape, persistent(), vec![]).await;
    users_are_authenticated_and_authorized(&stretch, &k).await;
    kafka_exporter_serves_the_lag_of_a_group(&stretch, &k).await;
    connect_workers_reach_the_secured_kafka(&stretch, &k).await;

    let bootstrap = all_brokers(&k);
    create_topic(&bootstrap, "renewed", 3, 3).await;
    full_isr(&bootstrap, "renewed").await;
    let load = Load::start(&bootstrap, "renewed", Duration::from_millis(20));
    wait_for_acks(&load, 50).await;

    let secrets: Api<Secret> = stretch.api(ALPHA);
    let old = secrets.get("live-cluster-ca-cert").await.unwrap();
    let text = secret_text;
    let old_ca = text(&old, "ca.crt");
    let old_clients_key = text(&secrets.get("live-clients-ca").await.unwrap(), "ca.key");
    // alice as she is before the clients CA's key is replaced: her certificate of the old key.
    let dir = client_dir(&stretch);
    let ca_file = dir.join("renew-cluster-ca.crt");
    std::fs::write(&ca_file, &old_ca).unwrap();
    let ca_file = ca_file.display().to_string();
    let alice_before = alice_config(
        &dir,
        "alice-before",
        &secrets.get("alice").await.unwrap(),
        &ca_file,
    );
    let before = pod_states(&stretch).await;
    // The renewal runs in a maintenance window, which opens in under two minutes.
    let (windows, opens) = windows_soon();
    let kafkas: Api<Kafka> = stretch.api(ALPHA);
    kafkas
        .patch(
            "live",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"maintenanceTimeWindows": windows}})),
        )
        .await
        .unwrap();
    let annotate = |name: &'static str, annotation: &'static str| {
        let secrets = secrets.clone();
        async move {
            let patch = json!({"metadata": {"annotations": {annotation: "true"}}});
            secrets
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap();
        }
    };
    annotate("live-cluster-ca-cert", "strimzi.io/force-renew").await;
    // In the same window the clients CA gets a new key; the cluster CA's key is kept, and the
    // Kafka says so.
    annotate("live-clients-ca", "strimzi.io/force-replace").await;
    annotate("live-cluster-ca", "strimzi.io/force-replace").await;
    // Central looks at the CA in every reconciliation; a change of the Kafka starts one now
    // rather than at the next periodic one.
    kafkas
        .patch(
            "live",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"kstretch.test/nudge": "1"}}})),
        )
        .await
        .unwrap();
    let k: Kafka = stretch
        .wait_in_alpha("live", "the renewal postponed", START_TIMEOUT, |k| {
            warning(k, "CertificateRenewalPostponed").is_some()
        })
        .await;
    let said = warning(&k, "CertificateRenewalPostponed").unwrap();
    assert!(
        said.contains("renewing the cluster CA certificate (strimzi.io/force-renew asks for it), the clients CA key (strimzi.io/force-replace asks for a new one) waits for a maintenance window")
            && said.contains(&format!("the next opens at {}", utc(opens))),
        "{said}"
    );
    let kept_key = k
        .status
        .iter()
        .flat_map(|s| &s.conditions)
        .filter(|c| c.type_ == "Warning" && c.reason.as_deref() == Some("NotActedOn"))
        .filter_map(|c| c.message.clone())
        .find(|m| m.contains("force-replace"))
        .unwrap_or_default();
    assert!(
        kept_key.contains("strimzi.io/force-replace on Secret live-cluster-ca is not acted on")
            && kept_key.contains("annotate live-cluster-ca-cert with strimzi.io/force-renew=true"),
        "{kept_key}"
    );
    assert!(
        unix_now() < opens,
        "the window opened before the warning was read: the test needs a later window"
    );
    let waiting = secrets.get("live-cluster-ca-cert").await.unwrap();
    assert_eq!(
        text(&waiting, "ca.crt"),
        old_ca,
        "nothing renewed before the window"
    );

    let renewed = second_ca_certificate(&secrets, "live-cluster-ca-cert").await;
    assert!(!renewed.annotations().contains_key("strimzi.io/force-renew"));
    let new_ca = text(&renewed, "ca.crt");
    assert_ne!(new_ca, old_ca);
    let kept: Vec<&String> = renewed
        .data
        .as_ref()
        .unwrap()
        .keys()
        .filter(|k| k.starts_with("ca-") && k.ends_with(".crt"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(text(&renewed, kept[0]), old_ca);

    // The clients CA: a new key (generation 1), then its certificate, the old one kept.
    let clients_cert = second_ca_certificate(&secrets, "live-clients-ca-cert").await;
    let clients_key = secrets.get("live-clients-ca").await.unwrap();
    assert_ne!(text(&clients_key, "ca.key"), old_clients_key);
    assert_eq!(
        clients_key
            .annotations()
            .get("strimzi.io/ca-key-generation")
            .map(String::as_str),
        Some("1")
    );
    assert!(
        !clients_key
            .annotations()
            .contains_key("strimzi.io/force-replace")
    );
    let clients_kept = clients_cert
        .data
        .as_ref()
        .unwrap()
        .keys()
        .filter(|k| k.starts_with("ca-") && k.ends_with(".crt"))
        .count();
    assert_eq!(clients_kept, 1, "the old clients CA certificate is kept");
    // The cluster CA's key stays, the annotation with it.
    let cluster_key = secrets.get("live-cluster-ca").await.unwrap();
    assert!(
        cluster_key
            .annotations()
            .contains_key("strimzi.io/force-replace")
    );

    // Every node restarts, one at a time, to trust both certificates of each CA.
    rolled_one_at_a_time(&stretch, &before).await;
    let k: Kafka = stretch
        .wait_in_alpha("live", "Ready after the renewal", START_TIMEOUT, is_ready)
        .await;
    let acked = load.acked();
    wait_for_acks(&load, acked + 50).await;
    no_loss(load, &bootstrap, "renewed").await;

    // alice's certificate is issued again under the new clients CA key; the nodes take it,
    // and still take her old one.
    let new_clients_ca = text(&clients_cert, "ca.crt");
    let alice_after = wait_for(
        "alice's certificate of the new key",
        START_TIMEOUT,
        || async {
            let s = secrets.get("alice").await.unwrap();
            if text(&s, "ca.crt") == new_clients_ca {
                Seen::Done(s)
            } else {
                Seen::NotYet("not yet issued again".to_owned())
            }
        },
    )
    .await;
    let alice_after = alice_config(&dir, "alice-after", &alice_after, &ca_file);
    let mtls = listener_at(&k, "mtls", &real_node_ip(BETA));
    for alice in [&alice_after, &alice_before] {
        let out = produced(&mtls, alice, "alice-topic", 10);
        assert!(out.contains("10 records sent"), "{alice}: {out}");
    }

    let only_new = tls_client_config(&dir, "new", &new_ca);
    run_kafka_tool(
        "org.apache.kafka.tools.TopicCommand",
        &[
            "--bootstrap-server",
            &listener_at(&k, "tls", &real_node_ip(BETA)),
            "--command-config",
            &only_new,
            "--list",
        ],
    );
    stretch.finish().await;
    let _ = std::fs::remove_dir_all(&dir);
}
