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
