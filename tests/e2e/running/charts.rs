//! kstretch installed with its Helm charts runs in pods and runs a stretched Kafka on real
//! pods, and Kafka Connect workers in the other cluster whose connectors it manages.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kstretch_api::{Kafka, KafkaConnect, KafkaConnector};
use kstretch_tests::clients::serves_across_clusters;
use kstretch_tests::helm::{AGENT_RELEASE, CENTRAL_RELEASE, HelmInstall, wait_with_logs};
use kstretch_tests::live::{
    ONE_AT_A_TIME, START_TIMEOUT, all_brokers, connect_metrics_rules, kafka, pool,
    ready_on_real_node, restarts,
};
use kstretch_tests::ready::kafka_ready as is_ready;
use kstretch_tests::stretch::{ALPHA, BETA};
use kstretch_tests::wait::Seen;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

/// kstretch installed with `helm install` as a user installs it: central (two replicas, one
/// leading) in alpha and an agent in each cluster run as pods on the real nodes, from the
/// images packed from this build, with the charts' RBAC, probes and generated link
/// certificates. A stretched Kafka under them becomes Ready and serves across the clusters;
/// Kafka Connect workers in beta run a connector applied in alpha; deleting the Kafka removes
/// its pods in both clusters.
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
    kstretch_serves_its_own_metrics_to_prometheus(&install).await;
    serves_across_clusters(&k).await;
    a_connector_runs_on_workers_in_beta_through_their_agent(&install, &k).await;

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

/// Prometheus finds kstretch's own pods by the charts' `prometheus.io` annotations, as one
/// without the Prometheus Operator does: central (in alpha) says both agents are connected, and
/// each agent (in its own cluster) says its link is up.
async fn kstretch_serves_its_own_metrics_to_prometheus(install: &HelmInstall) {
    let ns = &install.ns;
    let wanted = [
        (
            format!(
                "max by (cluster) (kstretch_central_agent_connected{{namespace=\"{ns}\",kube_cluster=\"alpha\"}})"
            ),
            "cluster",
        ),
        (
            format!("kstretch_agent_link_connected{{namespace=\"{ns}\"}}"),
            "kube_cluster",
        ),
    ];
    for (expr, by) in wanted {
        wait_with_logs(
            install,
            &format!("{expr} in Prometheus"),
            START_TIMEOUT,
            || async {
                let series = kstretch_tests::prometheus::query(&expr).await;
                let up: BTreeSet<String> = series
                    .iter()
                    .flatten()
                    .filter(|(_, value)| *value == 1.0)
                    .filter_map(|(labels, _)| labels.get(by).cloned())
                    .collect();
                if up == BTreeSet::from([ALPHA.to_owned(), BETA.to_owned()]) {
                    Seen::Done(())
                } else {
                    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                    Seen::NotYet(format!("{series:?}"))
                }
            },
        )
        .await;
    }
}

/// A `KafkaConnect` placed in beta runs its worker as a pod on beta's real node, from the
/// apache/kafka image, serving its metrics to Prometheus; a `KafkaConnector` applied in alpha
/// (the file source connector Kafka ships) runs on it, though central has no route into beta:
/// its REST calls go through beta's agent. It copies a file of the worker's image, line by line, to a topic; its offsets are
/// listed and it is restarted on the user's annotations; deleting it deletes it from Connect
/// (through the agent again) before its finalizer goes. The worker logs through kstretch's
/// log4j2 file, and a change of `logging` (to an `external` ConfigMap) reaches it without a
/// restart.
async fn a_connector_runs_on_workers_in_beta_through_their_agent(install: &HelmInstall, k: &Kafka) {
    let bootstrap = all_brokers(k);
    install.apply(connect_metrics_rules()).await;
    install
        .apply(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaConnect",
            "metadata": {"name": "files", "annotations": {
                "strimzi.io/use-connector-resources": "true",
                "strimzi.io/stretch-cluster-alias": BETA}},
            "spec": {
                "replicas": 1,
                "bootstrapServers": bootstrap,
                "groupId": "files", "configStorageTopic": "files-configs",
                "statusStorageTopic": "files-status", "offsetStorageTopic": "files-offsets",
                "config": {"offset.flush.interval.ms": 2000},
                "logging": {"type": "inline", "loggers": {
                    "appender.console.layout.pattern": "CONNECT-ONE %p %c - %m%n"}},
                "metricsConfig": {"type": "jmxPrometheusExporter", "valueFrom": {
                    "configMapKeyRef": {"name": "connect-metrics", "key": "metrics-config.yml"}}},
                "jvmOptions": {"-Xms": "128m", "-Xmx": "320m", "-XX": {"TieredStopAtLevel": "1"}},
                "template": {"pod": {
                    "nodeSelector": {"kstretch.test/node": "real"},
                    "tolerations": [{"key": "kstretch.test/real-node", "operator": "Exists",
                                     "effect": "NoSchedule"}]}}
            }
        }))
        .await;
    // The test environment's image ships this file; the worker reads its copy.
    let file = "config/connect-log4j2.yaml";
    install
        .apply(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaConnector",
            "metadata": {"name": "lines", "labels": {"strimzi.io/cluster": "files"}},
            "spec": {
                "class": "FileStreamSource",
                "tasksMax": 1,
                "config": {
                    "file": format!("/opt/kafka/{file}"), "topic": "lines",
                    "value.converter": "org.apache.kafka.connect.storage.StringConverter"
                },
                "listOffsets": {"toConfigMap": {"name": "lines-offsets"}}
            }
        }))
        .await;
    let connectors: Api<KafkaConnector> = install.api(ALPHA);
    let worker = running_task(install, &connectors, "lines").await;
    assert!(
        worker.starts_with("files-connect-0."),
        "the task runs on {worker}, not on beta's worker"
    );
    let workers: Api<Pod> = install.api(BETA);
    let pod = workers.get("files-connect-0").await.unwrap();
    assert_eq!(
        ready_on_real_node(std::slice::from_ref(&pod), BETA),
        ["files-connect-0"]
    );
    // The worker logs through kstretch's log4j2 file (Strimzi's defaults, the inline layout);
    // a change of it reaches the running worker, looked for at the end, when it had time.
    worker_logged(install, "CONNECT-ONE INFO", None).await;
    let connects: Api<KafkaConnect> = install.api(ALPHA);
    // The worker's group coordinator logs each heartbeat at DEBUG, under its own class's name.
    let heartbeats = "org.apache.kafka.connect.runtime.distributed.WorkerCoordinator";
    // Then an `external` file of the user's, with its own layout and the coordinator at DEBUG.
    let external = [
        "name = ConnectConfig",
        "appender.console.type = Console",
        "appender.console.name = STDOUT",
        "appender.console.layout.type = PatternLayout",
        "appender.console.layout.pattern = CONNECT-TWO %p %c - %m%n",
        "rootLogger.level = INFO",
        "rootLogger.appenderRefs = console",
        "rootLogger.appenderRef.console.ref = STDOUT",
        &format!("logger.heartbeats.name = {heartbeats}"),
        "logger.heartbeats.level = DEBUG",
    ]
    .join("\n");
    install
        .apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "files-logging"}, "data": {"log4j2.properties": external}}))
        .await;
    let logging = json!({"spec": {"logging": {"type": "external", "loggers": null,
        "valueFrom": {"configMapKeyRef": {"name": "files-logging", "key": "log4j2.properties"}}}}});
    connects
        .patch("files", &PatchParams::default(), &Patch::Merge(&logging))
        .await
        .unwrap();
    let mut expected: Vec<String> = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("env/image/kafka")
            .join(file),
    )
    .unwrap()
    .lines()
    .map(str::to_owned)
    .collect();
    let mut copied: Vec<String> = {
        let (bootstrap, count) = (bootstrap.clone(), expected.len());
        tokio::task::spawn_blocking(move || {
            kstretch_tests::kafka::consume_until(&bootstrap, "lines", 1, START_TIMEOUT, |r| {
                r.len() >= count
            })
        })
        .await
        .unwrap()
        .into_iter()
        .map(|(_, value)| value)
        .collect()
    };
    // The worker serves its metrics to Prometheus (the JMX exporter from the agent's image).
    one_connector_in_prometheus(install, "kafka_connect_worker_connector_count").await;
    // Read back sorted (the consumer's order), compared as the same lines.
    copied.sort();
    expected.sort();
    assert_eq!(copied, expected, "the topic holds the file's lines");

    // The user's annotations, carried out through the agent and removed once done: a
    // restart, and the offsets listed once Connect has committed some (its flush interval).
    carried_out(install, &connectors, "strimzi.io/restart", "true").await;
    let offsets: Api<ConfigMap> = install.api(ALPHA);
    wait_with_logs(
        install,
        "the connector's offsets",
        START_TIMEOUT,
        || async {
            carried_out(install, &connectors, "strimzi.io/connector-offsets", "list").await;
            let listed = offsets.get_opt("lines-offsets").await.ok().flatten();
            let json = listed
                .and_then(|cm| cm.data)
                .and_then(|mut d| d.remove("offsets.json"))
                .unwrap_or_default();
            if json.contains("connect-log4j2.yaml") && json.contains("position") {
                Seen::Done(())
            } else {
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                Seen::NotYet(json)
            }
        },
    )
    .await;
    running_task(install, &connectors, "lines").await;
    // One task restarted, through the agent too.
    carried_out(install, &connectors, "strimzi.io/restart-task", "0").await;
    running_task(install, &connectors, "lines").await;
    lines_written_back_to_a_file(install, &expected).await;
    offsets_altered_and_reset(install, &connectors, &bootstrap, expected.len()).await;
    beta_agent_away_and_back(install, &connectors, &pod).await;
    worker_logged(install, "CONNECT-TWO DEBUG", Some(20)).await;
    let still = workers.get("files-connect-0").await.unwrap();
    assert_eq!(
        (still.metadata.uid.clone(), restarts(&still)),
        (pod.metadata.uid.clone(), restarts(&pod)),
        "a logging change restarts no worker"
    );
    reporter_served_after_a_roll(install, &connectors, &bootstrap, &expected).await;

    connectors
        .delete("lines", &Default::default())
        .await
        .unwrap();
    wait_with_logs(
        install,
        "the connector to be deleted from Connect",
        START_TIMEOUT,
        || async {
            match connectors.get_opt("lines").await {
                Ok(None) => Seen::Done(()),
                other => Seen::NotYet(format!("{other:?}")),
            }
        },
    )
    .await;
    connects.delete("files", &Default::default()).await.unwrap();
}

/// A `FileStreamSink` connector writes the topic back to a file in beta's worker, read with
/// `kubectl exec`: every line of the source file is there, and nothing else but what the
/// source's restarts copied again (Connect delivers at least once). Then it is deleted.
async fn lines_written_back_to_a_file(install: &HelmInstall, lines: &[String]) {
    let file = "/tmp/lines-back.txt";
    install
        .apply(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaConnector",
            "metadata": {"name": "back", "labels": {"strimzi.io/cluster": "files"}},
            "spec": {"class": "FileStreamSink", "tasksMax": 1, "config": {
                "file": file, "topics": "lines",
                "value.converter": "org.apache.kafka.connect.storage.StringConverter"}}
        }))
        .await;
    let wanted: BTreeSet<&str> = lines.iter().map(String::as_str).collect();
    wait_with_logs(
        install,
        "the lines written back to a file in beta's worker",
        std::time::Duration::from_secs(90),
        || async {
            let read =
                kstretch_tests::cluster::exec(BETA, &install.ns, "files-connect-0", &["cat", file]);
            match read {
                Ok(text) => {
                    let back: BTreeSet<&str> = text.lines().collect();
                    let missing: Vec<_> = wanted.difference(&back).collect();
                    let extra: Vec<_> = back.difference(&wanted).collect();
                    // A restarted FileStreamSource resumes at its offset counted in characters
                    // but skips bytes: after the file's one non-ASCII character it re-reads the
                    // tail of a line. Nothing else may be there.
                    let tails = extra.iter().all(|e| wanted.iter().any(|w| w.ends_with(*e)));
                    if missing.is_empty() && tails {
                        Seen::Done(())
                    } else {
                        Seen::NotYet(format!("missing {missing:?}, not in the source {extra:?}"))
                    }
                }
                Err(e) => Seen::NotYet(e),
            }
        },
    )
    .await;
    let connectors: Api<KafkaConnector> = install.api(ALPHA);
    connectors
        .delete("back", &Default::default())
        .await
        .unwrap();
    wait_with_logs(install, "connector back deleted", START_TIMEOUT, || async {
        match connectors.get_opt("back").await {
            Ok(None) => Seen::Done(()),
            other => Seen::NotYet(format!("{other:?}")),
        }
    })
    .await;
}

/// The source connector stopped (Connect alters offsets only then), its position altered back
/// to the file's start from a ConfigMap, and later reset, each time through the agent: running
/// again, it copies the file to the topic once more each time.
async fn offsets_altered_and_reset(
    install: &HelmInstall,
    connectors: &Api<KafkaConnector>,
    bootstrap: &str,
    lines: usize,
) {
    let start = json!({"offsets": [{
        "partition": {"filename": "/opt/kafka/config/connect-log4j2.yaml"},
        "offset": {"position": 0}}]});
    install
        .apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "lines-start"},
            "data": {"offsets.json": start.to_string()}}))
        .await;
    let stopped = json!({"spec": {"state": "stopped",
        "alterOffsets": {"fromConfigMap": {"name": "lines-start"}}}});
    let running = json!({"spec": {"state": "running"}});
    for (op, copies) in [("alter", 2), ("reset", 3)] {
        connectors
            .patch("lines", &PatchParams::default(), &Patch::Merge(&stopped))
            .await
            .unwrap();
        carried_out(install, connectors, "strimzi.io/connector-offsets", op).await;
        connectors
            .patch("lines", &PatchParams::default(), &Patch::Merge(&running))
            .await
            .unwrap();
        let wanted = (lines * copies) as i64;
        wait_with_logs(
            install,
            &format!("the file copied again after {op}"),
            START_TIMEOUT,
            || async {
                let bootstrap = bootstrap.to_owned();
                let end = tokio::task::spawn_blocking(move || {
                    kstretch_tests::kafka::end_offset(&bootstrap, "lines", 0)
                })
                .await
                .unwrap();
                if end >= wanted {
                    Seen::Done(())
                } else {
                    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                    Seen::NotYet(format!("{end} records, {wanted} wanted"))
                }
            },
        )
        .await;
    }
}

/// Waits until connector `name` is ready with its first task running; returns that task's
/// worker, as Connect names it.
async fn running_task(
    install: &HelmInstall,
    connectors: &Api<KafkaConnector>,
    name: &str,
) -> String {
    wait_with_logs(
        install,
        &format!("connector {name}'s task to run"),
        START_TIMEOUT,
        || async {
            let status = connectors
                .get_opt(name)
                .await
                .ok()
                .flatten()
                .and_then(|c| c.status)
                .map(|s| serde_json::to_value(s).unwrap_or_default())
                .unwrap_or_default();
            let task = &status["connectorStatus"]["tasks"][0];
            let ready = status["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            match (ready, task["state"].as_str(), task["worker_id"].as_str()) {
                (true, Some("RUNNING"), Some(worker)) => Seen::Done(worker.to_owned()),
                _ => Seen::NotYet(status.to_string()),
            }
        },
    )
    .await
}

/// Sets `annotation` on connector `lines` and waits until central has carried it out (and
/// removed it).
async fn carried_out(
    install: &HelmInstall,
    connectors: &Api<KafkaConnector>,
    annotation: &str,
    value: &str,
) {
    let patch = json!({"metadata": {"annotations": {annotation: value}}});
    connectors
        .patch("lines", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_with_logs(
        install,
        &format!("{annotation} to be carried out"),
        START_TIMEOUT,
        || async {
            let c = connectors.get("lines").await.unwrap();
            match c.annotations().get(annotation) {
                None => Seen::Done(()),
                Some(_) => Seen::NotYet(format!("{:?}", c.status)),
            }
        },
    )
    .await;
}

/// `metricsConfig` changed to Strimzi's reporter rolls the worker (its configuration changed)
/// under the running source connector: the new worker serves the reporter's series to
/// Prometheus, the task runs on it again from its committed position, and the topic holds
/// every line of the file (none lost).
async fn reporter_served_after_a_roll(
    install: &HelmInstall,
    connectors: &Api<KafkaConnector>,
    bootstrap: &str,
    lines: &[String],
) {
    let workers: Api<Pod> = install.api(BETA);
    let before = workers.get("files-connect-0").await.unwrap().metadata.uid;
    let connects: Api<KafkaConnect> = install.api(ALPHA);
    let reporter = json!({"spec": {"metricsConfig": {"type": "strimziMetricsReporter",
                                                     "valueFrom": null}}});
    connects
        .patch("files", &PatchParams::default(), &Patch::Merge(&reporter))
        .await
        .unwrap();
    one_connector_in_prometheus(
        install,
        "kafka_connect_connect_worker_metrics_connector_count",
    )
    .await;
    let after = workers.get("files-connect-0").await.unwrap().metadata.uid;
    assert_ne!(
        before, after,
        "the worker rolled onto its new configuration"
    );
    running_task(install, connectors, "lines").await;
    // Connect's source tasks deliver at least once: a restart may copy again what was sent
    // after the last committed position, never lose a line.
    let (bootstrap, count) = (bootstrap.to_owned(), lines.len());
    let held: BTreeSet<String> = tokio::task::spawn_blocking(move || {
        let end = kstretch_tests::kafka::end_offset(&bootstrap, "lines", 0);
        let records =
            kstretch_tests::kafka::consume_until(&bootstrap, "lines", 1, START_TIMEOUT, |r| {
                r.len() as i64 >= end
            });
        println!(
            "after the roll: {} records for {count} lines",
            records.len()
        );
        records.into_iter().map(|(_, value)| value).collect()
    })
    .await
    .unwrap();
    let lost: Vec<&String> = lines.iter().filter(|l| !held.contains(*l)).collect();
    assert!(lost.is_empty(), "lines lost across the roll: {lost:?}");
}

/// Waits until Prometheus has series `metric` of beta's worker saying it runs one connector.
async fn one_connector_in_prometheus(install: &HelmInstall, metric: &str) {
    let expr = format!(
        "{metric}{{namespace=\"{}\",kubernetes_pod_name=\"files-connect-0\"}}",
        install.ns
    );
    wait_with_logs(
        install,
        &format!("{metric} of the worker in Prometheus"),
        START_TIMEOUT,
        || async {
            match kstretch_tests::prometheus::query(&expr).await {
                Ok(series) if series.iter().any(|(_, v)| *v == 1.0) => Seen::Done(()),
                other => Seen::NotYet(format!("{other:?}")),
            }
        },
    )
    .await;
}

/// Waits until the log of beta's worker (its last `since` seconds, or all of it) holds `text`.
async fn worker_logged(install: &HelmInstall, text: &str, since: Option<i64>) {
    let workers: Api<Pod> = install.api(BETA);
    let params = kube::api::LogParams {
        since_seconds: since,
        ..Default::default()
    };
    wait_with_logs(
        install,
        &format!("{text:?} in the worker's log"),
        START_TIMEOUT,
        || async {
            let log = workers
                .logs("files-connect-0", &params)
                .await
                .unwrap_or_default();
            if log.contains(text) {
                Seen::Done(())
            } else {
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                Seen::NotYet(log.lines().last().unwrap_or_default().to_owned())
            }
        },
    )
    .await;
}

/// Beta's agent stopped: the connector says its Connect is unreachable through it, and nothing
/// is deleted (the connector, the worker pod); the agent back, the connector runs as before.
async fn beta_agent_away_and_back(
    install: &HelmInstall,
    connectors: &Api<KafkaConnector>,
    worker: &Pod,
) {
    let agents: Api<Deployment> = install.api(BETA);
    let scale = |replicas: i32| {
        let agents = agents.clone();
        async move {
            let patch = json!({"spec": {"replicas": replicas}});
            agents
                .patch(
                    AGENT_RELEASE,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .unwrap();
        }
    };
    scale(0).await;
    wait_with_logs(
        install,
        "the connector to say beta's agent is away",
        START_TIMEOUT,
        || async {
            let c = connectors.get("lines").await.unwrap();
            let ready = c
                .status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
                .cloned();
            match ready {
                Some(r)
                    if r.reason.as_deref() == Some("ConnectUnreachable")
                        && r.message.as_deref().is_some_and(|m| {
                            m.contains("in cluster beta (through its agent)")
                                && m.contains("is not connected")
                        }) =>
                {
                    Seen::Done(())
                }
                other => Seen::NotYet(format!("{other:?}")),
            }
        },
    )
    .await;
    let workers: Api<Pod> = install.api(BETA);
    let still = workers.get("files-connect-0").await.unwrap();
    assert_eq!(
        still.metadata.uid, worker.metadata.uid,
        "the worker kept running"
    );
    scale(1).await;
    running_task(install, connectors, "lines").await;
}
