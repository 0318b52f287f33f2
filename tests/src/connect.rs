//! Talking to the real Kafka Connect worker over its REST API.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde::Deserialize;

use crate::process::{Spawned, free_port};
use crate::wait::{Seen, wait_for};

/// One entry of `GET /connector-plugins`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct ConnectorPlugin {
    pub class: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub version: String,
}

pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("reqwest client")
}

/// `GET /connector-plugins` of the worker at `url`.
pub async fn connector_plugins(url: &str) -> Result<Vec<ConnectorPlugin>, reqwest::Error> {
    http()
        .get(format!("{url}/connector-plugins"))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await
}

/// `GET /connectors/{name}/{what}` (`what` empty for the connector itself) of the worker at
/// `url`: `None` when Connect answers 404.
pub async fn connector_get(url: &str, name: &str, what: &str) -> Option<serde_json::Value> {
    let path = if what.is_empty() {
        format!("{url}/connectors/{name}")
    } else {
        format!("{url}/connectors/{name}/{what}")
    };
    // While its workers rebalance (connectors come and go in parallel tests) Connect answers
    // 409 or 500 for a moment.
    let mut response = http()
        .get(&path)
        .send()
        .await
        .expect("Kafka Connect answers");
    for _ in 0..40 {
        if !matches!(response.status().as_u16(), 409 | 500 | 503) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        response = http()
            .get(&path)
            .send()
            .await
            .expect("Kafka Connect answers");
    }
    if response.status() == reqwest::StatusCode::NOT_FOUND {
        return None;
    }
    Some(
        response
            .error_for_status()
            .expect("Kafka Connect accepts the request")
            .json()
            .await
            .expect("Kafka Connect answers JSON"),
    )
}

/// `$.connector.state` of connector `name`, if it exists.
pub async fn connector_state(url: &str, name: &str) -> Option<String> {
    connector_get(url, name, "status")
        .await
        .and_then(|s| s.pointer("/connector/state")?.as_str().map(str::to_owned))
}

/// `DELETE /connectors/{name}` (clean-up of connectors a test left behind on purpose).
pub async fn delete_connector(url: &str, name: &str) {
    let _ = http()
        .delete(format!("{url}/connectors/{name}"))
        .send()
        .await;
}

/// A real Kafka Connect worker booted on the host from a configuration central generated:
/// every line as generated, but the in-cluster paths mapped into `dir` (the REST port, the
/// plugin path, the directory provider's allowed path, which must exist, and the workers'
/// security files, written from `security` when there are any) and the advertised host name
/// given through the same environment variable the pods get. Returns the worker and its REST
/// URL once it answers.
pub async fn boot_worker(
    generated: &str,
    dir: &Path,
    security: &std::collections::BTreeMap<String, Vec<u8>>,
) -> (Spawned, String) {
    let env = crate::env::TestEnv::get();
    let port = free_port();
    let plugins = dir.join("plugins");
    let certs = dir.join("connect-certs");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::create_dir_all(&certs).unwrap();
    for (key, value) in security {
        std::fs::write(certs.join(key), value).unwrap();
    }
    let mut mapped = String::new();
    for line in generated.lines() {
        let line = match line.split_once('=') {
            Some(("rest.advertised.port", _)) => format!("rest.advertised.port={port}"),
            Some(("plugin.path", _)) => format!("plugin.path={}", plugins.display()),
            // The image's /opt/kafka, which the directory provider insists exists.
            Some(("config.providers.strimzidir.param.allowed.paths", _)) => format!(
                "config.providers.strimzidir.param.allowed.paths={}",
                dir.display()
            ),
            _ => line.replace("/opt/kafka/connect-certs", &certs.display().to_string()),
        };
        mapped.push_str(&line);
        mapped.push('\n');
    }
    mapped.push_str(&format!("listeners=http://127.0.0.1:{port}\n"));
    let worker_file = dir.join("worker.properties");
    std::fs::write(&worker_file, &mapped).unwrap();

    let mut command = Command::new("java");
    command.args([
        "-Xms64m",
        "-Xmx384m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
    ]);
    let log4j = env
        .log_dir
        .parent()
        .map(|s| s.join("kafka/log4j2.properties"));
    if let Some(log4j) = log4j.filter(|p| p.exists()) {
        command.arg(format!("-Dlog4j2.configurationFile={}", log4j.display()));
    }
    command
        .arg("-cp")
        .arg(format!("{}/*", env.kafka_libs().display()))
        .arg("org.apache.kafka.connect.cli.ConnectDistributed")
        .arg(&worker_file)
        // What the pod gets as ADVERTISED_HOSTNAME, read by the generated strimzienv provider.
        .env("ADVERTISED_HOSTNAME", "127.0.0.1");
    let worker = Spawned::start("connect-worker", command);
    let url = format!("http://127.0.0.1:{port}");
    let client = http();
    let root: serde_json::Value = wait_for(
        "the worker's REST API",
        Duration::from_secs(120),
        || async {
            match client.get(&url).send().await {
                Ok(r) if r.status().is_success() => Seen::Done(r.json().await.unwrap()),
                other => Seen::NotYet(format!("{other:?}\n{}", worker.log_tail(30))),
            }
        },
    )
    .await;
    assert!(root["version"].is_string(), "{root}");
    (worker, url)
}
