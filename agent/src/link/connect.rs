//! Carrying out central's `ConnectCall`: one call to the REST API of a Kafka Connect cluster
//! whose workers run in this cluster, sent to a ready worker at its pod's address, and
//! Connect's answer handed back. Central then manages connectors without DNS, routes or
//! credentials of this cluster. Any ready worker will do: Connect forwards what only its
//! leader may do. Which worker is called is decided purely ([`pick`]) from the pod cache.

use std::sync::Arc;
use std::time::Duration;

use kstretch_api::names;
use kstretch_proto::agent::v1::{ConnectAnswer, ConnectCall};
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use reqwest::Method;

use crate::podset::cached_pod::CachedPod;

use kstretch_runtime::errors::chain;

use super::objects::Scope;

/// Port of the Connect REST API on every worker (Strimzi's).
pub const REST_API_PORT: u16 = 8083;
/// How long a worker has to answer; central waits a little longer for the agent.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// `strimzi.io/kind` of Kafka Connect workers.
const CONNECT_KIND: &str = "KafkaConnect";

/// Why a call is not made; each is said to central in the answer's `error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("namespace {0:?} is not one of the agent's namespaces")]
    NamespaceNotManaged(String),
    #[error("method {0:?} is not one of Connect's (GET, POST, PUT, PATCH, DELETE)")]
    Method(String),
    #[error("path {0:?} is not an absolute path of the REST API")]
    Path(String),
    #[error(
        "no worker of KafkaConnect {connect} in namespace {namespace} is ready (with an address) in this cluster"
    )]
    NoReadyWorker { namespace: String, connect: String },
}

/// The worker to call and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub pod: String,
    pub url: String,
    pub method: Method,
}

/// Checks `call` and picks the worker to send it to: the first ready worker (by name) of the
/// KafkaConnect that has an address.
pub fn pick(call: &ConnectCall, scope: &Scope, pods: &[Arc<CachedPod>]) -> Result<Target, Refusal> {
    if !scope.allows(&call.namespace) {
        return Err(Refusal::NamespaceNotManaged(call.namespace.clone()));
    }
    let method = match call.method.as_str() {
        "GET" => Method::GET,
        "POST" => Method::POST,
        "PUT" => Method::PUT,
        "PATCH" => Method::PATCH,
        "DELETE" => Method::DELETE,
        other => return Err(Refusal::Method(other.to_owned())),
    };
    // The path goes after the worker's address: it must not name another host.
    if !call.path.starts_with('/') || call.path.starts_with("//") || call.path.contains('@') {
        return Err(Refusal::Path(call.path.clone()));
    }
    let mut workers: Vec<(&str, &str)> = pods
        .iter()
        .filter(|p| p.namespace().as_deref() == Some(call.namespace.as_str()))
        .filter(|p| is_worker_of(p, &call.connect))
        .filter(|p| p.is_ready() && p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| {
            let ip = p.status.as_ref()?.pod_ip.as_deref()?;
            Some((p.metadata.name.as_deref()?, ip))
        })
        .collect();
    workers.sort();
    let Some((pod, ip)) = workers.first() else {
        return Err(Refusal::NoReadyWorker {
            namespace: call.namespace.clone(),
            connect: call.connect.clone(),
        });
    };
    let host = if ip.contains(':') {
        format!("[{ip}]")
    } else {
        (*ip).to_owned()
    };
    Ok(Target {
        pod: (*pod).to_owned(),
        url: format!("http://{host}:{REST_API_PORT}{}", call.path),
        method,
    })
}

/// A pod of the KafkaConnect's StrimziPodSet, by Strimzi's labels and its owner.
fn is_worker_of(pod: &CachedPod, connect: &str) -> bool {
    let labels = pod.labels();
    let podset = format!("{connect}-connect");
    labels.get(names::KIND).map(String::as_str) == Some(CONNECT_KIND)
        && labels.get(names::CLUSTER).map(String::as_str) == Some(connect)
        && pod
            .owner_references()
            .iter()
            .any(|o| o.kind == "StrimziPodSet" && o.name == podset)
}

/// Makes central's calls to Connect workers.
#[derive(Clone)]
pub struct ConnectCaller {
    http: reqwest::Client,
    scope: Scope,
    pods: Store<CachedPod>,
}

impl std::fmt::Debug for ConnectCaller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectCaller")
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl ConnectCaller {
    pub fn new(scope: Scope, pods: Store<CachedPod>) -> Self {
        let http = reqwest::Client::builder()
            .timeout(CALL_TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            .build()
            .unwrap_or_default();
        Self { http, scope, pods }
    }

    /// Makes `call` and says what Connect answered, or why no worker did.
    pub async fn call(&self, call: ConnectCall) -> ConnectAnswer {
        let target = match pick(&call, &self.scope, &self.pods.state()) {
            Ok(target) => target,
            Err(refusal) => {
                tracing::warn!(connect = %call.connect, namespace = %call.namespace,
                    %refusal, "Connect call not made");
                return answer(call.request_id, String::new(), Err(refusal.to_string()));
            }
        };
        let mut request = self.http.request(target.method.clone(), &target.url);
        if !call.body.is_empty() {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(call.body);
        }
        let answered = async {
            let response = request.send().await?;
            let status = response.status().as_u16();
            Ok::<_, reqwest::Error>((status, response.bytes().await?.to_vec()))
        };
        let result = answered.await.map_err(|e| {
            tracing::warn!(worker = %target.pod, error = %chain(&e), "Connect worker did not answer");
            format!("worker {} did not answer: {}", target.pod, chain(&e))
        });
        tracing::debug!(worker = %target.pod, method = %target.method, path = %call.path,
            "Connect call made for central");
        answer(call.request_id, target.pod, result)
    }
}

fn answer(
    request_id: String,
    worker: String,
    result: Result<(u16, Vec<u8>), String>,
) -> ConnectAnswer {
    match result {
        Ok((status, body)) => ConnectAnswer {
            request_id,
            status: status.into(),
            body,
            error: String::new(),
            worker,
        },
        Err(error) => ConnectAnswer {
            request_id,
            status: 0,
            body: Vec::new(),
            error,
            worker,
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::collections::BTreeSet;

    use super::*;

    fn worker(name: &str, connect: &str, ready: bool, ip: Option<&str>) -> Arc<CachedPod> {
        Arc::new(serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": name, "namespace": "kafka",
                "labels": {"strimzi.io/kind": "KafkaConnect", "strimzi.io/cluster": connect},
                "ownerReferences": [{"apiVersion": "core.strimzi.io/v1", "kind": "StrimziPodSet",
                                     "name": format!("{connect}-connect"), "uid": "u"}]
            },
            "status": {
                "podIP": ip,
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]
            }
        }))
        .unwrap())
    }

    fn call(method: &str, path: &str) -> ConnectCall {
        ConnectCall {
            request_id: "connect-1".into(),
            namespace: "kafka".into(),
            connect: "c".into(),
            method: method.into(),
            path: path.into(),
            body: Vec::new(),
        }
    }

    #[test]
    fn the_first_ready_worker_with_an_address_is_called() {
        let pods = [
            worker("c-connect-0", "c", false, Some("10.0.0.1")),
            worker("c-connect-2", "c", true, Some("10.0.0.3")),
            worker("c-connect-1", "c", true, Some("10.0.0.2")),
            worker("other-connect-0", "other", true, Some("10.0.0.9")),
            worker("c-connect-3", "c", true, None),
        ];
        let target = pick(&call("PUT", "/connectors/s/config"), &Scope::All, &pods).unwrap();
        assert_eq!(target.pod, "c-connect-1");
        assert_eq!(target.url, "http://10.0.0.2:8083/connectors/s/config");
        assert_eq!(target.method, Method::PUT);
        let v6 = [worker("c-connect-0", "c", true, Some("fd00::1"))];
        let target = pick(&call("GET", "/"), &Scope::All, &v6).unwrap();
        assert_eq!(target.url, "http://[fd00::1]:8083/");
    }

    #[test]
    fn calls_outside_the_scope_of_other_methods_or_hosts_or_without_workers_are_refused() {
        let pods = [worker("c-connect-0", "c", true, Some("10.0.0.1"))];
        let only_other = Scope::Namespaces(BTreeSet::from(["other".to_owned()]));
        assert_eq!(
            pick(&call("GET", "/"), &only_other, &pods),
            Err(Refusal::NamespaceNotManaged("kafka".into()))
        );
        assert_eq!(
            pick(&call("TRACE", "/"), &Scope::All, &pods),
            Err(Refusal::Method("TRACE".into()))
        );
        for path in ["connectors", "//evil.example/x", "/x@evil.example"] {
            assert_eq!(
                pick(&call("GET", path), &Scope::All, &pods),
                Err(Refusal::Path(path.into()))
            );
        }
        let not_ready = [worker("c-connect-0", "c", false, Some("10.0.0.1"))];
        let refused = pick(&call("GET", "/"), &Scope::All, &not_ready).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "no worker of KafkaConnect c in namespace kafka is ready (with an address) in this cluster"
        );
    }
}
