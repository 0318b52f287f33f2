//! The Kafka Connect REST API client: connectors (create, config, state, restart, delete,
//! status, topics), plugin validation and KIP-875 offsets, with typed errors whose reasons are
//! stable (conditions and metrics use them).

use std::collections::BTreeMap;
use std::time::Duration;

use kstretch_proto::agent::v1::{ConnectAnswer, ConnectCall};
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::link::connect::ConnectCalls;

/// Why a call to Connect failed.
#[derive(Debug, thiserror::Error)]
pub enum RestError {
    /// No answer (connection refused, timeout, DNS).
    #[error("cannot reach Kafka Connect at {url}: {message}")]
    Unreachable { url: String, message: String },
    /// Connect answered with an error status; `message` is Connect's own.
    #[error("Kafka Connect refused {call} ({status}): {message}")]
    Api {
        call: &'static str,
        status: u16,
        message: String,
    },
    /// Connect answered, but not with what the API documents.
    #[error("Kafka Connect's answer to {call} is not understood: {message}")]
    BadResponse { call: &'static str, message: String },
}

impl RestError {
    /// Stable reason for conditions and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            RestError::Unreachable { .. } => "ConnectUnreachable",
            RestError::Api { status: 404, .. } => "ConnectorNotFound",
            // Connect answers 409 while its workers rebalance.
            RestError::Api { status: 409, .. } => "ConnectRebalancing",
            RestError::Api { status, .. } if *status >= 500 => "ConnectServerError",
            RestError::Api { .. } => "ConnectRequestRefused",
            RestError::BadResponse { .. } => "ConnectBadResponse",
        }
    }

    /// Whether the connector (or its offsets) does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, RestError::Api { status: 404, .. })
    }

    /// Connect's own message, without the call and status around it.
    pub fn connect_message(&self) -> String {
        match self {
            RestError::Api { message, .. } => message.clone(),
            other => other.to_string(),
        }
    }
}

/// One installed connector plugin (`GET /connector-plugins`).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Plugin {
    pub class: String,
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub version: Option<String>,
}

/// The answer of `PUT /connector-plugins/{class}/config/validate`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, Default)]
pub struct Validation {
    #[serde(default)]
    pub error_count: u32,
    #[serde(default)]
    pub configs: Vec<ValidatedConfig>,
}

#[derive(Debug, Clone, Deserialize, PartialEq, Eq, Default)]
pub struct ValidatedConfig {
    #[serde(default)]
    pub value: ValidatedValue,
}

#[derive(Debug, Clone, Deserialize, PartialEq, Eq, Default)]
pub struct ValidatedValue {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub errors: Vec<String>,
}

impl Validation {
    /// `key: error` for every error Connect found, in its order.
    pub fn errors(&self) -> Vec<String> {
        self.configs
            .iter()
            .flat_map(|c| {
                c.value
                    .errors
                    .iter()
                    .map(move |e| format!("{}: {e}", c.value.name))
            })
            .collect()
    }
}

/// A client for one Connect cluster's REST API.
#[derive(Debug, Clone)]
pub struct ConnectClient {
    route: Route,
    /// Where the calls go, as errors name it: the REST API's address, or the workers and the
    /// cluster whose agent calls them.
    base: String,
}

/// How the calls reach Connect.
#[derive(Debug, Clone)]
enum Route {
    Http(reqwest::Client),
    Agent(Relay),
}

/// The agent that calls a KafkaConnect's workers in its member cluster, for central.
#[derive(Debug, Clone)]
pub struct Relay {
    pub calls: ConnectCalls,
    pub alias: String,
    pub namespace: String,
    pub connect: String,
    /// Whether that agent makes Connect calls (an older one does not).
    pub makes_calls: bool,
}

/// How long central waits for an agent's answer: the agent gives a worker 30 s.
const RELAY_TIMEOUT: Duration = Duration::from_secs(35);

fn enc(segment: &str) -> String {
    // Connector names and classes may hold characters that are not path-safe.
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

impl ConnectClient {
    /// A client for the REST API at `base` (`http://host:8083`), sharing `http`'s pool.
    pub fn new(http: reqwest::Client, base: &str) -> Self {
        Self {
            route: Route::Http(http),
            base: base.trim_end_matches('/').to_owned(),
        }
    }

    /// A client whose calls the agent of the workers' member cluster makes.
    pub fn through(relay: Relay) -> Self {
        Self {
            base: format!(
                "the workers of KafkaConnect {} in cluster {} (through its agent)",
                relay.connect, relay.alias
            ),
            route: Route::Agent(relay),
        }
    }

    /// The HTTP client central shares between Connect clusters.
    pub fn http_client() -> reqwest::Client {
        reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .connect_timeout(Duration::from_secs(5))
            .build()
            .unwrap_or_default()
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    async fn call(
        &self,
        call: &'static str,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(StatusCode, String), RestError> {
        let unreachable = |message: String| RestError::Unreachable {
            url: self.base.clone(),
            message,
        };
        let (status, text) = match &self.route {
            Route::Http(http) => {
                let mut request = http.request(method, format!("{}{path}", self.base));
                if let Some(body) = body {
                    request = request.json(body);
                }
                let response = request
                    .send()
                    .await
                    .map_err(|e| unreachable(kstretch_runtime::errors::chain(&e)))?;
                let status = response.status();
                let text = response
                    .text()
                    .await
                    .map_err(|e| unreachable(kstretch_runtime::errors::chain(&e)))?;
                (status, text)
            }
            Route::Agent(relay) => relayed(relay, method, path, body)
                .await
                .map_err(unreachable)?,
        };
        if status.is_success() {
            return Ok((status, text));
        }
        Err(RestError::Api {
            call,
            status: status.as_u16(),
            message: error_message(&text),
        })
    }

    async fn call_json<T: serde::de::DeserializeOwned>(
        &self,
        call: &'static str,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<T, RestError> {
        let (_, text) = self.call(call, method, path, body).await?;
        serde_json::from_str(&text).map_err(|e| RestError::BadResponse {
            call,
            message: e.to_string(),
        })
    }

    /// `GET /connector-plugins`.
    pub async fn plugins(&self) -> Result<Vec<Plugin>, RestError> {
        self.call_json("list plugins", Method::GET, "/connector-plugins", None)
            .await
    }

    /// `PUT /connector-plugins/{class}/config/validate`.
    pub async fn validate(
        &self,
        class: &str,
        config: &BTreeMap<String, String>,
    ) -> Result<Validation, RestError> {
        let path = format!("/connector-plugins/{}/config/validate", enc(class));
        self.call_json("validate", Method::PUT, &path, Some(&json!(config)))
            .await
    }

    /// `GET /connectors/{name}/config`; `None` when the connector does not exist.
    pub async fn config(&self, name: &str) -> Result<Option<BTreeMap<String, String>>, RestError> {
        let path = format!("/connectors/{}/config", enc(name));
        match self.call_json("get config", Method::GET, &path, None).await {
            Ok(config) => Ok(Some(config)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `POST /connectors` with `initial_state` (KIP-980), so a connector meant to be paused or
    /// stopped never starts.
    pub async fn create(
        &self,
        name: &str,
        config: &BTreeMap<String, String>,
        initial_state: &str,
    ) -> Result<(), RestError> {
        let body = crate::objects::value(&NewConnector {
            name,
            config,
            initial_state,
        });
        self.call("create", Method::POST, "/connectors", Some(&body))
            .await
            .map(drop)
    }

    /// `PUT /connectors/{name}/config` (creates or updates).
    pub async fn put_config(
        &self,
        name: &str,
        config: &BTreeMap<String, String>,
    ) -> Result<(), RestError> {
        let path = format!("/connectors/{}/config", enc(name));
        self.call("update config", Method::PUT, &path, Some(&json!(config)))
            .await
            .map(drop)
    }

    /// `GET /connectors/{name}/status`, as Connect wrote it.
    pub async fn status(&self, name: &str) -> Result<Value, RestError> {
        let path = format!("/connectors/{}/status", enc(name));
        self.call_json("get status", Method::GET, &path, None).await
    }

    /// `PUT /connectors/{name}/pause`.
    pub async fn pause(&self, name: &str) -> Result<(), RestError> {
        let path = format!("/connectors/{}/pause", enc(name));
        self.call("pause", Method::PUT, &path, None).await.map(drop)
    }

    /// `PUT /connectors/{name}/resume`.
    pub async fn resume(&self, name: &str) -> Result<(), RestError> {
        let path = format!("/connectors/{}/resume", enc(name));
        self.call("resume", Method::PUT, &path, None)
            .await
            .map(drop)
    }

    /// `PUT /connectors/{name}/stop`.
    pub async fn stop(&self, name: &str) -> Result<(), RestError> {
        let path = format!("/connectors/{}/stop", enc(name));
        self.call("stop", Method::PUT, &path, None).await.map(drop)
    }

    /// `POST /connectors/{name}/restart?includeTasks=..&onlyFailed=..`.
    pub async fn restart(
        &self,
        name: &str,
        include_tasks: bool,
        only_failed: bool,
    ) -> Result<(), RestError> {
        let path = format!(
            "/connectors/{}/restart?includeTasks={include_tasks}&onlyFailed={only_failed}",
            enc(name)
        );
        self.call("restart", Method::POST, &path, None)
            .await
            .map(drop)
    }

    /// `POST /connectors/{name}/tasks/{task}/restart`.
    pub async fn restart_task(&self, name: &str, task: u32) -> Result<(), RestError> {
        let path = format!("/connectors/{}/tasks/{task}/restart", enc(name));
        self.call("restart task", Method::POST, &path, None)
            .await
            .map(drop)
    }

    /// `DELETE /connectors/{name}`; a connector already gone is fine.
    pub async fn delete(&self, name: &str) -> Result<(), RestError> {
        let path = format!("/connectors/{}", enc(name));
        match self.call("delete", Method::DELETE, &path, None).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `GET /connectors/{name}/topics`: the topics the connector used, sorted.
    pub async fn topics(&self, name: &str) -> Result<Vec<String>, RestError> {
        let path = format!("/connectors/{}/topics", enc(name));
        let answer: BTreeMap<String, ActiveTopics> = self
            .call_json("get topics", Method::GET, &path, None)
            .await?;
        let mut topics: Vec<String> = answer.into_values().flat_map(|t| t.topics).collect();
        topics.sort();
        topics.dedup();
        Ok(topics)
    }

    /// `GET /connectors/{name}/offsets`: Connect's JSON, pretty-printed for editing.
    pub async fn offsets(&self, name: &str) -> Result<String, RestError> {
        let path = format!("/connectors/{}/offsets", enc(name));
        let value: Value = self
            .call_json("list offsets", Method::GET, &path, None)
            .await?;
        serde_json::to_string_pretty(&value).map_err(|e| RestError::BadResponse {
            call: "list offsets",
            message: e.to_string(),
        })
    }

    /// `PATCH /connectors/{name}/offsets` with `body` (already checked to be JSON).
    pub async fn alter_offsets(&self, name: &str, body: &Value) -> Result<(), RestError> {
        let path = format!("/connectors/{}/offsets", enc(name));
        self.call("alter offsets", Method::PATCH, &path, Some(body))
            .await
            .map(drop)
    }

    /// `DELETE /connectors/{name}/offsets`.
    pub async fn reset_offsets(&self, name: &str) -> Result<(), RestError> {
        let path = format!("/connectors/{}/offsets", enc(name));
        self.call("reset offsets", Method::DELETE, &path, None)
            .await
            .map(drop)
    }
}

#[derive(Debug, Deserialize)]
struct ActiveTopics {
    #[serde(default)]
    topics: Vec<String>,
}

/// Connect's error body is `{"error_code": .., "message": ".."}`; anything else is shown as is.
/// Has the agent of `relay` make the call; `Err` says why no worker answered.
async fn relayed(
    relay: &Relay,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> Result<(StatusCode, String), String> {
    if !relay.makes_calls {
        return Err(format!(
            "the agent of cluster {} does not make Connect calls (it predates them); upgrade it",
            relay.alias
        ));
    }
    let request = ConnectCall {
        request_id: String::new(),
        namespace: relay.namespace.clone(),
        connect: relay.connect.clone(),
        method: method.as_str().to_owned(),
        path: path.to_owned(),
        body: body.map(Value::to_string).unwrap_or_default().into_bytes(),
    };
    let answer = relay
        .calls
        .ask(&relay.alias, request, RELAY_TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    answered(answer)
}

/// Connect's answer as the agent handed it back, or why no worker answered.
fn answered(answer: ConnectAnswer) -> Result<(StatusCode, String), String> {
    if answer.status == 0 {
        return Err(answer.error);
    }
    let status = u16::try_from(answer.status)
        .ok()
        .and_then(|s| StatusCode::from_u16(s).ok())
        .ok_or_else(|| {
            format!(
                "the agent relayed status {}, which is not HTTP's",
                answer.status
            )
        })?;
    Ok((status, String::from_utf8_lossy(&answer.body).into_owned()))
}

fn error_message(body: &str) -> String {
    #[derive(Deserialize)]
    struct ErrorBody {
        message: Option<String>,
    }
    match serde_json::from_str::<ErrorBody>(body) {
        Ok(ErrorBody { message: Some(m) }) => m,
        _ if body.trim().is_empty() => "no message".to_owned(),
        _ => body.trim().chars().take(2000).collect(),
    }
}

/// The body of `POST /connectors`.
#[derive(serde::Serialize)]
struct NewConnector<'a> {
    name: &'a str,
    config: &'a BTreeMap<String, String>,
    initial_state: &'a str,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn relay(calls: &ConnectCalls, makes_calls: bool) -> ConnectClient {
        ConnectClient::through(Relay {
            calls: calls.clone(),
            alias: "beta".into(),
            namespace: "kafka".into(),
            connect: "kc".into(),
            makes_calls,
        })
    }

    #[tokio::test]
    async fn calls_through_the_agent_carry_connects_answer_back() {
        let calls = ConnectCalls::default();
        let mut requests = calls.attach("beta", 1);
        let agent = {
            let calls = calls.clone();
            tokio::spawn(async move {
                let call = requests.recv().await.unwrap();
                assert_eq!(
                    (call.namespace.as_str(), call.connect.as_str()),
                    ("kafka", "kc")
                );
                assert_eq!(
                    (call.method.as_str(), call.path.as_str()),
                    ("PUT", "/connectors/s%20x/pause")
                );
                calls.resolve(ConnectAnswer {
                    request_id: call.request_id,
                    status: 202,
                    ..Default::default()
                });
                let call = requests.recv().await.unwrap();
                assert_eq!(call.path, "/connectors/gone/config");
                calls.resolve(ConnectAnswer {
                    request_id: call.request_id,
                    status: 404,
                    body: br#"{"error_code":404,"message":"Connector gone not found"}"#.to_vec(),
                    ..Default::default()
                });
                let call = requests.recv().await.unwrap();
                calls.resolve(ConnectAnswer {
                    request_id: call.request_id,
                    error: "no worker of KafkaConnect kc in namespace kafka is ready".into(),
                    ..Default::default()
                });
            })
        };
        let client = relay(&calls, true);
        client.pause("s x").await.unwrap();
        assert_eq!(client.config("gone").await.unwrap(), None);
        let down = client.status("s").await.unwrap_err();
        assert_eq!(down.reason(), "ConnectUnreachable");
        assert_eq!(
            down.to_string(),
            "cannot reach Kafka Connect at the workers of KafkaConnect kc in cluster beta (through its agent): no worker of KafkaConnect kc in namespace kafka is ready"
        );
        agent.await.unwrap();
    }

    #[tokio::test]
    async fn without_an_agent_that_makes_calls_connect_is_unreachable() {
        let calls = ConnectCalls::default();
        let gone = relay(&calls, true).status("s").await.unwrap_err();
        assert_eq!(gone.reason(), "ConnectUnreachable");
        assert!(
            gone.to_string()
                .ends_with("the agent of cluster \"beta\" is not connected"),
            "{gone}"
        );
        let _requests = calls.attach("beta", 1);
        let old = relay(&calls, false).status("s").await.unwrap_err();
        assert_eq!(old.reason(), "ConnectUnreachable");
        assert!(old.to_string().contains("upgrade it"), "{old}");
    }

    #[test]
    fn connect_error_bodies_give_their_message() {
        assert_eq!(
            error_message(r#"{"error_code":404,"message":"Connector x not found"}"#),
            "Connector x not found"
        );
        assert_eq!(error_message("  "), "no message");
        assert_eq!(error_message("<html>oops</html>"), "<html>oops</html>");
    }

    #[test]
    fn reasons_are_stable() {
        let api = |status| RestError::Api {
            call: "x",
            status,
            message: String::new(),
        };
        assert_eq!(api(404).reason(), "ConnectorNotFound");
        assert_eq!(api(409).reason(), "ConnectRebalancing");
        assert_eq!(api(500).reason(), "ConnectServerError");
        assert_eq!(api(400).reason(), "ConnectRequestRefused");
        assert!(api(404).is_not_found());
        let unreachable = RestError::Unreachable {
            url: "u".into(),
            message: "m".into(),
        };
        assert_eq!(unreachable.reason(), "ConnectUnreachable");
    }

    #[test]
    fn path_segments_are_encoded() {
        assert_eq!(enc("my-conn.1_x"), "my-conn.1_x");
        assert_eq!(enc("a b/c"), "a%20b%2Fc");
    }

    #[test]
    fn validation_errors_name_their_key() {
        let v: Validation = serde_json::from_value(json!({
            "error_count": 1,
            "configs": [
                {"value": {"name": "file", "errors": []}},
                {"value": {"name": "topic", "errors": ["Missing required configuration \"topic\""]}}
            ]
        }))
        .unwrap();
        assert_eq!(
            v.errors(),
            vec!["topic: Missing required configuration \"topic\"".to_owned()]
        );
    }
}
