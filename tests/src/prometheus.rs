//! The test environment's Prometheus, read over its HTTP API as a dashboard reads it: the
//! series of a query with their labels, and its alerts; and the kstretch processes of a test
//! added to what it scrapes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::Value;

use crate::TestEnv;
use crate::live::START_TIMEOUT;
use crate::wait::{Seen, wait_for};

/// One series of an instant query: its labels and value.
pub type Series = (BTreeMap<String, String>, f64);

/// The answer of Prometheus' HTTP API at `path` with `params`.
async fn get(path: &str, params: &[(&str, &str)]) -> Result<Value, String> {
    let url = format!("{}{path}", TestEnv::get().prometheus_url);
    reqwest::Client::new()
        .get(&url)
        .query(params)
        .send()
        .await
        .map_err(|e| format!("{url}: {e}"))?
        .json()
        .await
        .map_err(|e| format!("{url}: {e}"))
}

/// A JSON object of strings (a series' or an alert's labels) as a map.
fn labels(object: &Value) -> BTreeMap<String, String> {
    object
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
        .collect()
}

/// The series `expr` returns now.
pub async fn query(expr: &str) -> Result<Vec<Series>, String> {
    let body = get("/api/v1/query", &[("query", expr)]).await?;
    if body["status"] != "success" {
        return Err(format!("{expr}: {body}"));
    }
    Ok(body["data"]["result"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let labels = labels(&r["metric"]);
            let value = r["value"][1].as_str().and_then(|v| v.parse().ok());
            (labels, value.unwrap_or(f64::NAN))
        })
        .collect())
}

/// Waits until `expr` has series from every cluster of `clusters` (their `cluster` label) and
/// returns them.
pub async fn series_from(expr: &str, clusters: &[&str]) -> Vec<Series> {
    let wanted: BTreeSet<&str> = clusters.iter().copied().collect();
    wait_for(
        &format!("Prometheus to have {expr} from {wanted:?}"),
        START_TIMEOUT,
        || async {
            match query(expr).await {
                Ok(series) => {
                    let seen: BTreeSet<&str> = series
                        .iter()
                        .filter_map(|(labels, _)| labels.get("cluster").map(String::as_str))
                        .collect();
                    if wanted.is_subset(&seen) {
                        Seen::Done(series.clone())
                    } else {
                        Seen::NotYet(format!("{series:?}"))
                    }
                }
                Err(e) => Seen::NotYet(e),
            }
        },
    )
    .await
}

/// Waits until `expr` has at least one series and returns them.
pub async fn some_series(expr: &str) -> Vec<Series> {
    wait_for(
        &format!("Prometheus to have {expr}"),
        START_TIMEOUT,
        || async {
            match query(expr).await {
                Ok(series) if !series.is_empty() => Seen::Done(series),
                Ok(_) => Seen::NotYet("no series".to_owned()),
                Err(e) => Seen::NotYet(e),
            }
        },
    )
    .await
}

/// The Kafka metrics that Strimzi 1.2.0's Grafana dashboards for Kafka and KRaft
/// (`packaging/examples/metrics/grafana-dashboards/strimzi-kafka.json`, `strimzi-kraft.json`)
/// query, for nodes that run the JMX exporter with rules that name them as Strimzi's do
/// (`examples/kafka-metrics.yaml`). Left out: `container_*` and `kubelet_volume_stats_*`,
/// which the kubelet serves, not Kafka.
pub const STRIMZI_DASHBOARDS_JMX_EXPORTER: &[&str] = &[
    "jvm_gc_collection_seconds_count",
    "jvm_gc_collection_seconds_sum",
    "jvm_memory_used_bytes",
    "jvm_threads_current",
    "kafka_cluster_partition_atminisr",
    "kafka_cluster_partition_replicascount",
    "kafka_cluster_partition_underminisr",
    "kafka_controller_controllerstats_uncleanleaderelections_total",
    "kafka_controller_kafkacontroller_activecontrollercount",
    "kafka_controller_kafkacontroller_offlinepartitionscount",
    "kafka_log_log_size",
    "kafka_network_socketserver_networkprocessoravgidle_percent",
    "kafka_server_brokertopicmetrics_bytesin_total",
    "kafka_server_brokertopicmetrics_bytesout_total",
    "kafka_server_brokertopicmetrics_failedfetchrequests_total",
    "kafka_server_brokertopicmetrics_failedproducerequests_total",
    "kafka_server_brokertopicmetrics_messagesin_total",
    "kafka_server_brokertopicmetrics_totalfetchrequests_total",
    "kafka_server_brokertopicmetrics_totalproducerequests_total",
    "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
    "kafka_server_kafkaserver_linux_disk_read_bytes",
    "kafka_server_kafkaserver_linux_disk_write_bytes",
    "kafka_server_raftchannelmetrics_incoming_byte_total",
    "kafka_server_raftchannelmetrics_outgoing_byte_total",
    "kafka_server_raftchannelmetrics_request_total",
    "kafka_server_raftchannelmetrics_response_total",
    "kafka_server_raftmetrics_append_records_rate",
    "kafka_server_raftmetrics_commit_latency_avg",
    "kafka_server_raftmetrics_current_epoch",
    "kafka_server_raftmetrics_current_leader",
    "kafka_server_raftmetrics_current_state",
    "kafka_server_raftmetrics_current_vote",
    "kafka_server_raftmetrics_fetch_records_rate",
    "kafka_server_raftmetrics_high_watermark",
    "kafka_server_raftmetrics_log_end_offset",
    "kafka_server_replicamanager_leadercount",
    "kafka_server_replicamanager_partitioncount",
    "kafka_server_replicamanager_underreplicatedpartitions",
    "kafka_server_socket_server_metrics_connection_count",
    "process_open_fds",
];

/// The same for Strimzi's metrics reporter with its default allow list: what the dashboards of
/// Strimzi 1.2.0's `packaging/examples/metrics/strimzi-metrics-reporter/grafana-dashboards`
/// query, with the same two left out.
pub const STRIMZI_DASHBOARDS_METRICS_REPORTER: &[&str] = &[
    "jvm_gc_collection_seconds_count",
    "jvm_gc_collection_seconds_sum",
    "jvm_memory_used_bytes",
    "jvm_threads_current",
    "kafka_cluster_partition_atminisr",
    "kafka_cluster_partition_replicascount",
    "kafka_cluster_partition_underminisr",
    "kafka_controller_controllerstats_uncleanleaderelectionspersec_total",
    "kafka_controller_kafkacontroller_activecontrollercount",
    "kafka_controller_kafkacontroller_offlinepartitionscount",
    "kafka_log_log_size",
    "kafka_network_socketserver_networkprocessoravgidlepercent",
    "kafka_server_brokertopicmetrics_bytesinpersec_total",
    "kafka_server_brokertopicmetrics_bytesoutpersec_total",
    "kafka_server_brokertopicmetrics_failedfetchrequestspersec_total",
    "kafka_server_brokertopicmetrics_failedproducerequestspersec_total",
    "kafka_server_brokertopicmetrics_messagesinpersec_total",
    "kafka_server_brokertopicmetrics_totalfetchrequestspersec_total",
    "kafka_server_brokertopicmetrics_totalproducerequestspersec_total",
    "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent_total",
    "kafka_server_kafkaserver_linux_disk_read_bytes",
    "kafka_server_kafkaserver_linux_disk_write_bytes",
    "kafka_server_raft_channel_metrics_incoming_byte",
    "kafka_server_raft_channel_metrics_outgoing_byte",
    "kafka_server_raft_channel_metrics_request",
    "kafka_server_raft_channel_metrics_response",
    "kafka_server_raft_metrics_append_records_rate",
    "kafka_server_raft_metrics_commit_latency_avg",
    "kafka_server_raft_metrics_current_epoch",
    "kafka_server_raft_metrics_current_leader",
    "kafka_server_raft_metrics_current_state_info",
    "kafka_server_raft_metrics_current_vote",
    "kafka_server_raft_metrics_fetch_records_rate",
    "kafka_server_raft_metrics_high_watermark",
    "kafka_server_raft_metrics_log_end_offset",
    "kafka_server_replicamanager_leadercount",
    "kafka_server_replicamanager_partitioncount",
    "kafka_server_replicamanager_underreplicatedpartitions",
    "kafka_server_socket_server_metrics_connection_count",
    "process_open_fds",
];

/// Waits until every metric of `names` has a series labelled as Strimzi's dashboards select
/// them: the `namespace` and the Kafka's name in `strimzi_io_cluster` (the pods' label, which
/// Strimzi's PodMonitor and the environment's Prometheus turn into one).
pub async fn dashboards_have_series(namespace: &str, kafka: &str, names: &[&str]) {
    let expr = format!(
        "count by (__name__) ({{__name__=~\"{}\", namespace=\"{namespace}\", strimzi_io_cluster=\"{kafka}\"}})",
        names.join("|")
    );
    wait_for(
        &format!(
            "a series of each of {} metrics Strimzi's dashboards query",
            names.len()
        ),
        START_TIMEOUT,
        || async {
            match query(&expr).await {
                Ok(series) => {
                    let seen: BTreeSet<&str> = series
                        .iter()
                        .filter_map(|(labels, _)| labels.get("__name__").map(String::as_str))
                        .collect();
                    let missing: Vec<&str> = names
                        .iter()
                        .copied()
                        .filter(|n| !seen.contains(n))
                        .collect();
                    if missing.is_empty() {
                        Seen::Done(())
                    } else {
                        Seen::NotYet(format!("no series of {missing:?}"))
                    }
                }
                Err(e) => Seen::NotYet(e),
            }
        },
    )
    .await;
}

/// While it lives, the test environment's Prometheus scrapes the kstretch process serving
/// `http` (`http://host:port`, its `/metrics`) in job `kstretch`, labelled `test` and
/// `component`.
#[derive(Debug)]
pub struct Scraped {
    file: PathBuf,
}

impl Drop for Scraped {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
    }
}

/// Adds the process serving `http` to what Prometheus scrapes ([`Scraped`]).
pub fn scrape(test: &str, component: &str, http: &str) -> Scraped {
    let dir = TestEnv::get()
        .prometheus_targets
        .clone()
        .unwrap_or_else(|| {
            panic!("the env file has no KSTRETCH_PROMETHEUS_TARGETS: run tests/env/up.sh")
        });
    let address = http.trim_start_matches("http://");
    let file = dir.join(format!("{test}-{component}.json"));
    let body = serde_json::json!([
        {"targets": [address], "labels": {"test": test, "component": component}}
    ]);
    // Written whole, then renamed: Prometheus never reads half a file.
    let partial = file.with_extension("partial");
    std::fs::write(&partial, body.to_string()).expect("target file");
    std::fs::rename(&partial, &file).expect("target file");
    Scraped { file }
}

/// The alerts Prometheus has now: each one's labels and state (`pending`, `firing`).
pub async fn alerts() -> Result<Vec<(BTreeMap<String, String>, String)>, String> {
    let body = get("/api/v1/alerts", &[]).await?;
    Ok(body["data"]["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            (
                labels(&a["labels"]),
                a["state"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect())
}

/// Waits until alert `name` fires with every label of `labels`.
pub async fn firing(name: &str, labels: &[(&str, &str)], timeout: std::time::Duration) {
    wait_for(
        &format!("alert {name} {labels:?} to fire"),
        timeout,
        || async {
            match alerts().await {
                Ok(all) => {
                    let ours = all.iter().find(|(l, _)| {
                        l.get("alertname").map(String::as_str) == Some(name)
                            && labels
                                .iter()
                                .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
                    });
                    match ours {
                        Some((_, state)) if state == "firing" => Seen::Done(()),
                        _ => Seen::NotYet(format!("{all:?}")),
                    }
                }
                Err(e) => Seen::NotYet(e),
            }
        },
    )
    .await
}

/// Every query of the Grafana dashboard the central chart ships, with `$namespace` set to
/// `namespace`, and the query of its `namespace` variable.
pub fn dashboard_queries(namespace: &str) -> Vec<String> {
    queries_of("kstretch.json", &[("$namespace", namespace)])
}

/// The member cluster label of the environment's Prometheus (set by each cluster's scrape job),
/// which kstretch's stretched-Kafka dashboard takes as its `member` variable.
pub const MEMBER_LABEL: &str = "cluster";

/// The queries of kstretch's dashboard of a stretched Kafka
/// (`charts/kstretch-central/files/dashboards/kstretch-stretched-kafka.json`), its variables
/// filled: Kafka `kafka` in `namespace`, members by [`MEMBER_LABEL`].
pub fn stretched_dashboard_queries(namespace: &str, kafka: &str) -> Vec<String> {
    queries_of(
        "kstretch-stretched-kafka.json",
        &[
            ("$namespace", namespace),
            ("$kafka", kafka),
            ("$member", MEMBER_LABEL),
        ],
    )
}

/// Waits until every query of kstretch's stretched-Kafka dashboard answers: those by member
/// cluster with a series of each of `clusters`, the others with one series at least.
pub async fn stretched_dashboard_answers(namespace: &str, kafka: &str, clusters: &[&str]) {
    let wanted: BTreeSet<&str> = clusters.iter().copied().collect();
    for expr in stretched_dashboard_queries(namespace, kafka) {
        let by_member = expr.contains(&format!("by ({MEMBER_LABEL})"));
        wait_for(&format!("an answer to {expr}"), START_TIMEOUT, || async {
            match query(&expr).await {
                Ok(series) => {
                    let members: BTreeSet<&str> = series
                        .iter()
                        .filter_map(|(labels, _)| labels.get(MEMBER_LABEL).map(String::as_str))
                        .collect();
                    let answered = if by_member {
                        wanted.is_subset(&members)
                    } else {
                        !series.is_empty()
                    };
                    if answered {
                        Seen::Done(())
                    } else {
                        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                        Seen::NotYet(format!("{series:?}"))
                    }
                }
                Err(e) => Seen::NotYet(e),
            }
        })
        .await;
    }
}

/// Every query of the chart's dashboard `file`, with `variables` replaced, and for each
/// variable read with `label_values(<series>, <label>)` the series that must exist for it.
fn queries_of(file: &str, variables: &[(&str, &str)]) -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../charts/kstretch-central/files/dashboards")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("the dashboard");
    let dashboard: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let fill = |expr: &str| {
        variables
            .iter()
            .fold(expr.to_owned(), |e, (name, value)| e.replace(name, value))
    };
    let mut out: Vec<String> = dashboard["panels"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| p["targets"].as_array().into_iter().flatten())
        .filter_map(|t| t["expr"].as_str())
        .map(fill)
        .collect();
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        // `label_values(<series>, <label>)`: the series must exist with that label.
        if let Some(query) = variable["query"].as_str()
            && let Some(inner) = query
                .strip_prefix("label_values(")
                .and_then(|q| q.strip_suffix(')'))
            && let Some((series, label)) = inner.rsplit_once(", ")
            && let Some(value) = variables
                .iter()
                .find(|(name, _)| name.trim_start_matches('$') == variable["name"])
                .map(|(_, value)| *value)
        {
            let series = fill(series);
            let series = match series.strip_suffix('}') {
                Some(open) => format!("{open}, {label}=\"{value}\"}}"),
                None => format!("{series}{{{label}=\"{value}\"}}"),
            };
            out.push(series);
        }
    }
    out
}
