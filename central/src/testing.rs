//! The apiserver of central's unit tests: a hand-written `tower::Service` behind a
//! `kube::Client`, which answers gets, lists and watches from the objects a test gave it and
//! records every write (method, path, JSON body), so that a test asserts on what central asked
//! the apiserver for.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use kube::Resource;
use serde_json::{Value, json};

type Answer = Response<BoxBody<Bytes, Infallible>>;

/// One request that was not a read.
#[derive(Debug, Clone, PartialEq)]
pub struct Write {
    pub method: Method,
    /// The path, without the query.
    pub path: String,
    /// The JSON body; `Null` when there was none.
    pub body: Value,
}

/// An apiserver holding objects by their path. It answers
/// - a watch by keeping it open (and counts the watches per resource path);
/// - a list by the objects held in that collection (all namespaces' for a list across them;
///   selectors are ignored);
/// - a get of an object, or of its `status`, by the object, or `404 NotFound`;
/// - a create by holding and echoing the object;
/// - a patch by the object as held (a patch changes nothing), or `404 NotFound`;
/// - anything else by a `Success` status.
///
/// Every write is recorded, in the order received.
#[derive(Clone, Default)]
pub struct Apiserver {
    objects: Arc<Mutex<BTreeMap<String, Value>>>,
    watches: Arc<Mutex<BTreeMap<String, usize>>>,
    writes: Arc<Mutex<Vec<Write>>>,
}

impl Apiserver {
    /// Holds `k` (replacing what was held at its path).
    pub fn hold<K>(&self, k: &K)
    where
        K: Resource<DynamicType = ()> + serde::Serialize,
    {
        let path = format!(
            "{}/{}",
            K::url_path(&(), k.meta().namespace.as_deref()),
            k.meta().name.as_deref().unwrap_or_default()
        );
        let mut value = serde_json::to_value(k).unwrap();
        value["apiVersion"] = K::api_version(&()).into();
        value["kind"] = K::kind(&()).into();
        self.objects.lock().unwrap().insert(path, value);
    }

    /// A client of this apiserver, with `default` as its default namespace.
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.clone(), "default")
    }

    /// The watches opened so far, per resource path.
    pub fn watches(&self) -> BTreeMap<String, usize> {
        self.watches.lock().unwrap().clone()
    }

    /// Every write so far, in the order received.
    pub fn writes(&self) -> Vec<Write> {
        self.writes.lock().unwrap().clone()
    }

    /// The writes so far, once `done` holds for them (checked every 10 ms, for 5 s at most):
    /// for what central sends in the background.
    pub async fn writes_once(&self, what: &str, done: impl Fn(&[Write]) -> bool) -> Vec<Write> {
        let waited = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                let writes = self.writes();
                if done(&writes) {
                    return writes;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        waited.unwrap_or_else(|_| panic!("{what}: {:#?}", self.writes()))
    }

    fn answer(&self, method: &Method, path: &str, body: Value) -> Answer {
        let at = Path::parse(path);
        let mut objects = self.objects.lock().unwrap();
        match (method, at.name) {
            (&Method::GET, None) => {
                let items: Vec<&Value> = objects
                    .iter()
                    .filter(|(held, _)| at.lists(&Path::parse(held)))
                    .map(|(_, v)| v)
                    .collect();
                let list = json!({"apiVersion": "v1", "kind": "List",
                    "metadata": {"resourceVersion": "1"}, "items": items});
                ok(StatusCode::OK, &list)
            }
            (&Method::GET | &Method::PATCH, Some(name)) => {
                match objects.get(&format!("{}/{name}", at.collection())) {
                    Some(object) => ok(StatusCode::OK, object),
                    None => not_found(path),
                }
            }
            (&Method::POST, None) => {
                let name = body["metadata"]["name"].as_str().unwrap_or_default();
                objects.insert(format!("{}/{name}", at.collection()), body.clone());
                ok(StatusCode::CREATED, &body)
            }
            _ => ok(
                StatusCode::OK,
                &json!({"apiVersion": "v1", "kind": "Status", "status": "Success"}),
            ),
        }
    }
}

impl tower::Service<Request<kube::client::Body>> for Apiserver {
    type Response = Answer;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Answer, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<kube::client::Body>) -> Self::Future {
        let apiserver = self.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let path = parts.uri.path().to_owned();
            let watch = parts
                .uri
                .query()
                .is_some_and(|q| q.split('&').any(|p| p == "watch=true"));
            if watch {
                *apiserver.watches.lock().unwrap().entry(path).or_default() += 1;
                let body = StreamBody::new(futures::stream::pending()).boxed();
                return Ok(Response::new(body));
            }
            let bytes = body.collect().await.unwrap().to_bytes();
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            if parts.method != Method::GET {
                apiserver.writes.lock().unwrap().push(Write {
                    method: parts.method.clone(),
                    path: path.clone(),
                    body: body.clone(),
                });
            }
            Ok(apiserver.answer(&parts.method, &path, body))
        })
    }
}

fn ok(code: StatusCode, body: &Value) -> Answer {
    let mut answer = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *answer.status_mut() = code;
    answer
}

fn not_found(path: &str) -> Answer {
    let status = json!({"apiVersion": "v1", "kind": "Status", "metadata": {},
        "status": "Failure", "reason": "NotFound", "code": 404,
        "message": format!("{path} not found")});
    ok(StatusCode::NOT_FOUND, &status)
}

/// A resource path taken apart: `/api/v1` or `/apis/<group>/<version>`, then
/// `[namespaces/<namespace>/]<plural>[/<name>[/<subresource>]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Path<'a> {
    prefix: &'a str,
    namespace: Option<&'a str>,
    plural: &'a str,
    name: Option<&'a str>,
}

impl<'a> Path<'a> {
    fn parse(path: &'a str) -> Self {
        let prefix_len = if path.starts_with("/apis/") { 4 } else { 3 };
        let split = path
            .match_indices('/')
            .nth(prefix_len - 1)
            .map_or(path.len(), |(i, _)| i);
        let (prefix, rest) = path.split_at(split);
        let mut segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
        let mut namespace = None;
        if segments.len() > 2 && segments[0] == "namespaces" {
            namespace = Some(segments[1]);
            segments.drain(..2);
        }
        Self {
            prefix,
            namespace,
            plural: segments.first().copied().unwrap_or_default(),
            name: segments.get(1).copied(),
        }
    }

    /// The path of the collection.
    fn collection(&self) -> String {
        match self.namespace {
            Some(ns) => format!("{}/namespaces/{ns}/{}", self.prefix, self.plural),
            None => format!("{}/{}", self.prefix, self.plural),
        }
    }

    /// Whether a list of this collection holds the object at `object`.
    fn lists(&self, object: &Path<'_>) -> bool {
        object.name.is_some()
            && (self.prefix, self.plural) == (object.prefix, object.plural)
            && self.namespace.is_none_or(|ns| object.namespace == Some(ns))
    }
}

/// The path of the status of `name`, a `K` in namespace `namespace`.
pub fn status_path<K: Resource<DynamicType = ()>>(namespace: &str, name: &str) -> String {
    format!("{}/{name}/status", K::url_path(&(), Some(namespace)))
}

/// Each write's method and path, sorted (background writes come in no set order).
pub fn requests(writes: &[Write]) -> Vec<(String, String)> {
    let mut requests: Vec<(String, String)> = writes
        .iter()
        .map(|w| (w.method.to_string(), w.path.clone()))
        .collect();
    requests.sort();
    requests
}

/// The `Ready` condition of the status patch sent to `path`.
pub fn ready_at<'a>(writes: &'a [Write], path: &str) -> &'a Value {
    let patch = writes
        .iter()
        .find(|w| w.method == Method::PATCH && w.path == path)
        .unwrap_or_else(|| panic!("no status patch of {path}: {writes:#?}"));
    patch.body["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap_or_else(|| panic!("no Ready condition in {:#}", patch.body))
}

/// The bodies of what was created at `path` (Events, for one), in the order received.
pub fn posted_to<'a>(writes: &'a [Write], path: &str) -> Vec<&'a Value> {
    writes
        .iter()
        .filter(|w| w.method == Method::POST && w.path == path)
        .map(|w| &w.body)
        .collect()
}

/// Whether the desired state of no member cluster holds an object.
pub fn nothing_published(desired: &crate::link::DesiredStates) -> bool {
    let snapshots = desired.all();
    !snapshots.is_empty() && snapshots.iter().all(|s| s.objects.is_empty())
}

/// Asserts that `value` is what the file `path` (from central's directory) holds; with
/// `KSTRETCH_PIN=write` it writes it there first (for a change that means to alter it, which
/// says why in its commit).
pub fn pinned(path: &str, value: &Value) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    if std::env::var("KSTRETCH_PIN").as_deref() == Ok("write") {
        std::fs::write(&path, serde_json::to_string_pretty(value).unwrap() + "\n").unwrap();
    }
    let stored: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(
        value,
        &stored,
        "what is built changed from {} (KSTRETCH_PIN=write rewrites it)",
        path.display()
    );
}

/// Each object of `objects` by `<prefix><kind>/<name>`, with a digest of its JSON.
pub fn digests<'a>(
    prefix: &str,
    objects: impl IntoIterator<Item = &'a Value>,
) -> BTreeMap<String, String> {
    objects
        .into_iter()
        .map(|o| {
            let key = format!(
                "{prefix}{}/{}",
                o["kind"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap()
            );
            let digest = kstretch_core::kraft::revision(&[&serde_json::to_vec(o).unwrap()]);
            (key, digest)
        })
        .collect()
}

/// A store that the watch filled with `objects` (and is ready).
pub fn store_of<K>(objects: &[K]) -> kube::runtime::reflector::Store<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    use kube::runtime::watcher::Event;
    let (store, mut writer) = kube::runtime::reflector::store();
    writer.apply_watcher_event(&Event::Init);
    for o in objects {
        writer.apply_watcher_event(&Event::InitApply(o.clone()));
    }
    writer.apply_watcher_event(&Event::InitDone);
    store
}

/// The context of the controllers that reach Kafka (users, operations), over `apiserver`,
/// with `kafkas` in central's store of `Kafka`s.
pub fn controller_context(
    apiserver: &Apiserver,
    kafkas: &[kstretch_api::Kafka],
) -> crate::controller::Context {
    crate::controller::Context::new(
        apiserver.client(),
        store_of(kafkas),
        Default::default(),
        Default::default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_taken_apart_into_collection_and_name() {
        let secret = Path::parse("/api/v1/namespaces/kafka/secrets/s");
        assert_eq!(
            (secret.prefix, secret.namespace, secret.plural, secret.name),
            ("/api/v1", Some("kafka"), "secrets", Some("s"))
        );
        assert_eq!(secret.collection(), "/api/v1/namespaces/kafka/secrets");
        let status = Path::parse("/apis/kafka.strimzi.io/v1/namespaces/kafka/kafkas/k/status");
        assert_eq!(
            (status.prefix, status.plural, status.name),
            ("/apis/kafka.strimzi.io/v1", "kafkas", Some("k"))
        );
        let everywhere = Path::parse("/apis/kafka.strimzi.io/v1/kafkas");
        assert_eq!((everywhere.namespace, everywhere.name), (None, None));
        assert!(everywhere.lists(&status));
        assert!(!Path::parse("/apis/kafka.strimzi.io/v1/namespaces/other/kafkas").lists(&status));
    }
}
