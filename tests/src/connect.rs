//! Talking to the real Kafka Connect worker over its REST API.

use std::time::Duration;

use serde::Deserialize;

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
