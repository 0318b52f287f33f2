//! Watched object stores: one watch per kind (or one per namespace and kind, into one store, see
//! [`crate::reflect`]), with its sync state, readiness checks and metrics, whose store and
//! changes every reader of the kind shares ([`SharedWatch`]), so every controller reads the
//! cluster from memory instead of polling it.

use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Resource};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::Health;
use crate::reflect::{Merged, reflect_each};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: String,
}

/// Metrics shared by every watched kind, labelled by kind.
#[derive(Debug, Clone, Default)]
pub struct WatchMetrics {
    objects: Family<KindLabel, Gauge>,
    errors: Family<KindLabel, Counter>,
}

impl WatchMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "watched_objects",
            "Objects of each kind in the watch cache",
            metrics.objects.clone(),
        );
        registry.register(
            "watch_errors",
            "Watch errors per kind (each is retried with backoff)",
            metrics.errors.clone(),
        );
        metrics
    }

    /// Records the number of objects of `kind` in a watch cache.
    pub fn set_objects(&self, kind: &str, count: usize) {
        self.objects
            .get_or_create(&KindLabel {
                kind: kind.to_owned(),
            })
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Counts one watch error of `kind`.
    pub fn error(&self, kind: &str) {
        self.errors
            .get_or_create(&KindLabel {
                kind: kind.to_owned(),
            })
            .inc();
    }
}

/// The in-memory view of one kind.
#[derive(Debug, Clone)]
pub struct Watched<K: Resource<DynamicType = ()> + 'static> {
    kind: String,
    store: Store<K>,
    synced: Arc<AtomicBool>,
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> Watched<K> {
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// Every object currently known.
    pub fn objects(&self) -> Vec<Arc<K>> {
        self.store.state()
    }

    /// True once the first complete list has arrived (of every namespace, when the kind is
    /// watched in several); before that, "zero objects" means "not known yet", not "none
    /// exist", and nothing may be deleted on its basis.
    pub fn synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    pub fn store(&self) -> &Store<K> {
        &self.store
    }
}

/// Waits until `store` has its first list; `false` if its writer is gone first. kube's
/// `Store::wait_until_ready` wakes only the last of several tasks waiting at once (its one-shot
/// channel keeps a single waker), and a shared store has several: so each waiter here also
/// looks again every 100 ms.
pub async fn ready<K>(store: &Store<K>) -> bool
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    loop {
        let wait = tokio::time::timeout(Duration::from_millis(100), store.wait_until_ready());
        if let Ok(result) = wait.await {
            return result.is_ok();
        }
    }
}

/// Drops what no cache reader uses from a watched object: managed fields and `kubectl apply`'s
/// copy of the last manifest are most of an object's size (at 10,000 `KafkaTopic`s, 78 MiB of
/// cache instead of 26).
pub fn slim<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
    if let Some(annotations) = object.meta_mut().annotations.as_mut() {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

/// What a watch keeps current from its events: the readiness check `check` (failing, with the
/// error, while the watch cannot be (re-)established, passing once its first list has arrived)
/// and the kind's metrics. (The [`Watched`]'s sync flag is the store's: every watch listed.)
struct Tracker {
    kind: String,
    check: String,
    synced: Arc<AtomicBool>,
    health: Health,
    metrics: WatchMetrics,
    /// The kind's objects, for the gauge: several watches of one kind report their sum.
    objects: Objects,
}

/// Counts a kind's objects (over every store of the kind).
type Objects = Arc<dyn Fn() -> usize + Send + Sync>;

impl Tracker {
    fn observe<K>(&self, event: &Result<watcher::Event<K>, watcher::Error>) {
        match event {
            Ok(event) => {
                if matches!(event, watcher::Event::InitDone) {
                    self.synced.store(true, Ordering::Release);
                }
                if self.synced.load(Ordering::Acquire) {
                    self.health.set_ready(&self.check, true, "watching");
                }
                self.metrics.set_objects(&self.kind, (self.objects)());
            }
            Err(err) => {
                self.metrics.error(&self.kind);
                tracing::warn!(kind = %self.kind, %err, "watch failed; retrying");
                self.health.set_ready(&self.check, false, err.to_string());
            }
        }
    }
}

/// Records every item of `stream` with its part's tracker (`trackers`, one per watch) and
/// passes on the events only, with their part: the watcher retries its errors with its own
/// backoff, and passed on they would stop their readers (a controller's trigger streams pause
/// on an error).
fn tracked<K, S>(
    stream: S,
    trackers: Vec<Tracker>,
) -> impl Stream<Item = (usize, watcher::Event<K>)> + Send
where
    K: Send + 'static,
    S: Stream<Item = (usize, Result<watcher::Event<K>, watcher::Error>)> + Send,
{
    stream.filter_map(move |(part, item)| {
        if let Some(tracker) = trackers.get(part) {
            tracker.observe(&item);
        }
        std::future::ready(item.ok().map(|event| (part, event)))
    })
}

/// The readiness check of a watch of `K`, failing until its first list arrives.
fn tracker<K: Resource<DynamicType = ()>>(
    check: &str,
    health: &Health,
    metrics: &WatchMetrics,
    objects: Objects,
) -> Tracker {
    health.set_ready(check, false, "waiting for the first list");
    Tracker {
        kind: K::kind(&()).into_owned(),
        check: check.to_owned(),
        synced: Arc::new(AtomicBool::new(false)),
        health: health.clone(),
        metrics: metrics.clone(),
        objects,
    }
}

/// What a subscriber of a [`SharedWatch`] hears of an object.
#[derive(Debug)]
pub enum Change<K> {
    /// Created or changed, or present in a complete list: after each one, every object is.
    Applied(Arc<K>),
    /// Deleted, as the watch saw it (a deletion while the watch was down is not heard: the
    /// next list just lacks the object).
    Deleted(Arc<K>),
}

impl<K> Clone for Change<K> {
    fn clone(&self) -> Self {
        match self {
            Change::Applied(k) => Change::Applied(k.clone()),
            Change::Deleted(k) => Change::Deleted(k.clone()),
        }
    }
}

type Subscribers<K> = Arc<Mutex<Vec<mpsc::Sender<Change<K>>>>>;

/// The one watch of a kind that several readers share: its store, for every reader, and
/// subscriptions to its changes, which any reader may take at any time (controllers start
/// after the watch, on the leader only).
pub struct SharedWatch<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    watched: Watched<K>,
    subscribers: Subscribers<K>,
}

impl<K> Clone for SharedWatch<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    fn clone(&self) -> Self {
        Self {
            watched: self.watched.clone(),
            subscribers: self.subscribers.clone(),
        }
    }
}

impl<K> std::fmt::Debug for SharedWatch<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedWatch")
            .field("kind", &self.watched.kind)
            .finish_non_exhaustive()
    }
}

/// A reader of a [`SharedWatch`]'s changes, and its store.
pub struct Subscription<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    /// The objects that change (and all of them after each complete list).
    pub changes: BoxStream<'static, Arc<K>>,
    pub store: Store<K>,
}

impl<K> std::fmt::Debug for Subscription<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription").finish_non_exhaustive()
    }
}

impl<K> Subscription<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    /// A controller of `K` triggered by this subscription, reading its store.
    pub fn controller(self) -> Controller<K> {
        Controller::for_shared_stream(self.changes, self.store)
    }
}

impl<K> SharedWatch<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    /// Changes wait for a subscriber that has this many unread.
    const BUFFER: usize = 1024;

    /// Watches `api` until `shutdown`: returns the watch and the task that drives it (the caller
    /// spawns it, once). It keeps the readiness check `watch:<Kind>`.
    pub fn start(
        api: Api<K>,
        health: &Health,
        metrics: &WatchMetrics,
        shutdown: CancellationToken,
    ) -> (Self, impl Future<Output = ()> + Send + 'static) {
        Self::start_each(vec![(None, api)], health, metrics, shutdown)
    }

    /// Watches each of `apis` (one per namespace, or one over every namespace) until
    /// `shutdown`, into one store (see [`crate::reflect`]): returns the watch and the task that
    /// drives it. With one `Api` it keeps the readiness check `watch:<Kind>`; with several, one
    /// per namespace, `watch:<Kind>/<namespace>`. The kind's `watched_objects` counts the store.
    pub fn start_each(
        apis: Vec<(Option<String>, Api<K>)>,
        health: &Health,
        metrics: &WatchMetrics,
        shutdown: CancellationToken,
    ) -> (Self, impl Future<Output = ()> + Send + 'static) {
        let kind = K::kind(&());
        let several = apis.len() > 1;
        let checks = apis
            .iter()
            .map(|(ns, _)| match ns.as_ref().filter(|_| several) {
                Some(ns) => format!("watch:{kind}/{ns}"),
                None => format!("watch:{kind}"),
            })
            .collect();
        let (store, writer) = reflector::store();
        let objects = Arc::new(move || store.len());
        Self::start_with(apis, writer, checks, objects, health, metrics, shutdown)
    }

    /// [`SharedWatch::start`] for one of several watches of a kind (in several namespaces)
    /// that keep separate stores: `check` names its readiness check, `objects` counts the
    /// kind's objects over all of them, and `store` is the store (and its writer) `objects`
    /// reads.
    pub fn start_one_of(
        api: Api<K>,
        (_, writer): (Store<K>, Writer<K>),
        check: &str,
        objects: Box<dyn Fn() -> usize + Send + Sync>,
        health: &Health,
        metrics: &WatchMetrics,
        shutdown: CancellationToken,
    ) -> (Self, impl Future<Output = ()> + Send + 'static) {
        Self::start_with(
            vec![(None, api)],
            writer,
            vec![check.to_owned()],
            Arc::from(objects),
            health,
            metrics,
            shutdown,
        )
    }

    fn start_with(
        apis: Vec<(Option<String>, Api<K>)>,
        writer: Writer<K>,
        checks: Vec<String>,
        objects: Objects,
        health: &Health,
        metrics: &WatchMetrics,
        shutdown: CancellationToken,
    ) -> (Self, impl Future<Output = ()> + Send + 'static) {
        let trackers: Vec<Tracker> = checks
            .iter()
            .map(|check| tracker::<K>(check, health, metrics, objects.clone()))
            .collect();
        let namespaces: Vec<Option<String>> = apis.iter().map(|(ns, _)| ns.clone()).collect();
        let merged = Merged::new(writer, namespaces.clone());
        let store = merged.store();
        let watch = Self {
            watched: Watched {
                kind: K::kind(&()).into_owned(),
                store: store.clone(),
                synced: merged.synced(),
            },
            subscribers: Arc::default(),
        };
        let streams = apis
            .into_iter()
            .map(|(_, api)| {
                watcher(api, watcher::Config::default())
                    .modify(slim::<K>)
                    .default_backoff()
            })
            .collect();
        let events = tracked(reflect_each(streams, merged), trackers);
        let task = feed(
            events,
            Parts { store, namespaces },
            watch.subscribers.clone(),
            shutdown,
        );
        (watch, task)
    }

    /// The store.
    pub fn watched(&self) -> &Watched<K> {
        &self.watched
    }

    /// Every object in the store now (each namespace's once it has listed), then every change,
    /// deletions included. Read it for as long as the watch runs: the watch waits for a subscriber whose
    /// unread changes fill its buffer.
    pub fn subscribe_changes(&self) -> BoxStream<'static, Change<K>> {
        let (tx, rx) = mpsc::channel(Self::BUFFER);
        lock(&self.subscribers).push(tx);
        // Registered first, so a change between the copy and the next event is not missed (it
        // may come twice). A namespace not listed yet has nothing in the store: its list brings
        // its objects. (Not gated on `synced`: with several namespaces, those listed before the
        // others would be missed.)
        let present: Vec<Change<K>> = self
            .watched
            .objects()
            .into_iter()
            .map(Change::Applied)
            .collect();
        let changes = futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|change| (change, rx))
        });
        futures::stream::iter(present).chain(changes).boxed()
    }

    /// [`SharedWatch::subscribe_changes`] without the deletions, for a controller.
    pub fn subscribe(&self) -> Subscription<K> {
        Subscription {
            changes: self
                .subscribe_changes()
                .filter_map(|change| {
                    std::future::ready(match change {
                        Change::Applied(k) => Some(k),
                        Change::Deleted(_) => None,
                    })
                })
                .boxed(),
            store: self.watched.store.clone(),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The store of a [`SharedWatch`] and the namespace of each of its watches (`None`: every
/// namespace).
struct Parts<K: Resource<DynamicType = ()> + 'static> {
    store: Store<K>,
    namespaces: Vec<Option<String>>,
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> Parts<K> {
    /// What the subscribers hear of `event` of watch `part`: after a complete list, every object
    /// that list covers.
    fn changes(&self, part: usize, event: watcher::Event<K>) -> Vec<Change<K>> {
        match event {
            watcher::Event::Apply(k) => self
                .store
                .get(&ObjectRef::from_obj(&k))
                .map(Change::Applied)
                .into_iter()
                .collect(),
            watcher::Event::Delete(k) => vec![Change::Deleted(Arc::new(k))],
            watcher::Event::InitDone => {
                let namespace = self.namespaces.get(part).and_then(Option::as_deref);
                self.store
                    .state()
                    .into_iter()
                    .filter(|k| {
                        namespace.is_none_or(|ns| k.meta().namespace.as_deref() == Some(ns))
                    })
                    .map(Change::Applied)
                    .collect()
            }
            watcher::Event::Init | watcher::Event::InitApply(_) => Vec::new(),
        }
    }
}

/// Reads `events` (already applied to the store) until they end or `shutdown`, passing each
/// change on to every subscriber.
async fn feed<K>(
    events: impl Stream<Item = (usize, watcher::Event<K>)> + Send,
    parts: Parts<K>,
    subscribers: Subscribers<K>,
    shutdown: CancellationToken,
) where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let mut events = std::pin::pin!(events);
    loop {
        let (part, event) = tokio::select! {
            _ = shutdown.cancelled() => break,
            event = events.next() => match event {
                Some(event) => event,
                None => break,
            },
        };
        let changes = parts.changes(part, event);
        if changes.is_empty() {
            continue;
        }
        let senders = lock(&subscribers).clone();
        let mut closed = false;
        for sender in senders {
            for change in &changes {
                if sender.send(change.clone()).await.is_err() {
                    closed = true;
                    break;
                }
            }
        }
        if closed {
            lock(&subscribers).retain(|s| !s.is_closed());
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    /// kube's `wait_until_ready` would leave all but the last of these waiting for ever.
    #[tokio::test]
    async fn every_task_waiting_for_a_store_at_once_sees_it_listed() {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        let waiters: Vec<_> = (0..4)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move { ready(&store).await })
            })
            .collect();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitDone);
        for waiter in waiters {
            let listed = tokio::time::timeout(std::time::Duration::from_secs(2), waiter)
                .await
                .expect("every waiter ends")
                .unwrap();
            assert!(listed);
        }
    }

    #[tokio::test]
    async fn a_store_whose_writer_is_gone_is_never_ready() {
        let (store, writer) = reflector::store::<ConfigMap>();
        drop(writer);
        assert!(!ready(&store).await);
    }

    #[test]
    fn slim_drops_managed_fields_and_the_last_applied_copy_only() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};
        let mut cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some("x".into()),
                annotations: Some(
                    [
                        (
                            "kubectl.kubernetes.io/last-applied-configuration".to_owned(),
                            "{}".to_owned(),
                        ),
                        ("keep".to_owned(), "me".to_owned()),
                    ]
                    .into(),
                ),
                managed_fields: Some(vec![ManagedFieldsEntry::default()]),
                ..Default::default()
            },
            data: Some([("a".to_owned(), "b".to_owned())].into()),
            ..Default::default()
        };
        slim(&mut cm);
        assert!(cm.metadata.managed_fields.is_none());
        let annotations = cm.metadata.annotations.unwrap();
        assert_eq!(annotations.len(), 1);
        assert_eq!(annotations["keep"], "me");
        assert_eq!(cm.data.unwrap()["a"], "b");
    }

    mod apiserver {
        //! A scripted apiserver: the first list of ConfigMaps fails, later ones answer `a` and
        //! `b` (in the namespace of the request), and the watch sends `script`'s events, then
        //! stays open.

        use std::convert::Infallible;
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::task::{Context, Poll};

        use bytes::Bytes;
        use futures::StreamExt as _;
        use http::{Request, Response, StatusCode};
        use http_body::Frame;
        use http_body_util::combinators::BoxBody;
        use http_body_util::{BodyExt, Full, StreamBody};

        #[derive(Clone)]
        pub struct Apiserver {
            pub lists: Arc<AtomicUsize>,
            pub script: Arc<Vec<String>>,
        }

        fn cm(namespace: &str, name: &str, rv: u32) -> String {
            format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"{namespace}","resourceVersion":"{rv}"}}}}"#
            )
        }

        pub fn event(kind: &str, name: &str, rv: u32) -> String {
            format!(r#"{{"type":"{kind}","object":{}}}"#, cm("ns", name, rv)) + "\n"
        }

        impl tower::Service<Request<kube::client::Body>> for Apiserver {
            type Response = Response<BoxBody<Bytes, Infallible>>;
            type Error = Infallible;
            type Future = std::future::Ready<Result<Self::Response, Infallible>>;

            fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
                Poll::Ready(Ok(()))
            }

            fn call(&mut self, request: Request<kube::client::Body>) -> Self::Future {
                let path = request.uri().path().to_owned();
                let namespace = path
                    .split('/')
                    .skip_while(|s| *s != "namespaces")
                    .nth(1)
                    .unwrap_or("ns");
                let watch = request
                    .uri()
                    .query()
                    .is_some_and(|q| q.split('&').any(|p| p == "watch=true"));
                let response = if watch {
                    let events = self
                        .script
                        .iter()
                        .map(|e| Ok(Frame::data(Bytes::from(e.clone()))))
                        .collect::<Vec<Result<_, Infallible>>>();
                    let body = StreamBody::new(
                        futures::stream::iter(events).chain(futures::stream::pending()),
                    );
                    Response::new(BodyExt::boxed(body))
                } else if self.lists.fetch_add(1, Ordering::SeqCst) == 0 {
                    let mut r = Response::new(Full::new(Bytes::from_static(br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"down","reason":"InternalError","code":500}"#)).boxed());
                    *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
                    r
                } else {
                    let list = format!(
                        r#"{{"apiVersion":"v1","kind":"ConfigMapList","metadata":{{"resourceVersion":"2"}},"items":[{},{}]}}"#,
                        cm(namespace, "a", 1),
                        cm(namespace, "b", 2)
                    );
                    Response::new(Full::new(Bytes::from(list)).boxed())
                };
                std::future::ready(Ok(response))
            }
        }
    }

    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use kube::ResourceExt;

    fn watched_api(script: Vec<String>) -> Api<ConfigMap> {
        let apiserver = apiserver::Apiserver {
            lists: Arc::new(AtomicUsize::new(0)),
            script: Arc::new(script),
        };
        Api::namespaced(kube::Client::new(apiserver, "default"), "ns")
    }

    fn sorted(mut names: Vec<String>) -> Vec<String> {
        names.sort();
        names
    }

    /// A subscription's first `n` changes, named.
    async fn first(changes: BoxStream<'static, Change<ConfigMap>>, n: usize) -> Vec<String> {
        let named = changes.take(n).map(|change| match change {
            Change::Applied(cm) => format!("applied {}", cm.name_any()),
            Change::Deleted(cm) => format!("deleted {}", cm.name_any()),
        });
        tokio::time::timeout(Duration::from_secs(30), named.collect())
            .await
            .expect("the changes arrive")
    }

    #[tokio::test]
    async fn a_shared_watch_feeds_every_subscriber_and_outlives_its_errors() {
        let api = watched_api(vec![apiserver::event("ADDED", "c", 3)]);
        let (health, metrics) = (Health::new(), WatchMetrics::default());
        let shutdown = CancellationToken::new();
        let (watch, task) = SharedWatch::start(api, &health, &metrics, shutdown.clone());
        let (one, two) = (watch.subscribe(), watch.subscribe());
        tokio::spawn(task);
        // The first list fails; the retried one brings a and b, the watch c.
        let names =
            |s: Subscription<ConfigMap>| s.changes.take(3).map(|cm| cm.name_any()).collect();
        let (one, two): (Vec<String>, Vec<String>) = tokio::time::timeout(
            Duration::from_secs(30),
            futures::future::join(names(one), names(two)),
        )
        .await
        .expect("both subscriptions see every object");
        assert_eq!(sorted(one), ["a", "b", "c"]);
        assert_eq!(sorted(two), ["a", "b", "c"]);
        assert!(watch.watched().synced());
        assert_eq!(watch.watched().objects().len(), 3);
        let errors = metrics.errors.get_or_create(&KindLabel {
            kind: "ConfigMap".into(),
        });
        assert_eq!(errors.get(), 1);
        let (_, checks) = health.readiness();
        assert!(
            checks.iter().any(|c| c.name == "watch:ConfigMap" && c.ok),
            "{checks:?}"
        );
        // A subscriber that comes later starts from what is there.
        let late = sorted(first(watch.subscribe_changes(), 3).await);
        assert_eq!(late, ["applied a", "applied b", "applied c"]);
        shutdown.cancel();
    }

    #[tokio::test]
    async fn a_shared_watch_of_two_namespaces_keeps_both_in_one_store_with_a_check_each() {
        let apiserver = apiserver::Apiserver {
            lists: Arc::new(AtomicUsize::new(0)),
            script: Arc::new(Vec::new()),
        };
        let client = kube::Client::new(apiserver, "default");
        let apis = ["x", "y"]
            .map(|ns| {
                let api = Api::<ConfigMap>::namespaced(client.clone(), ns);
                (Some(ns.to_owned()), api)
            })
            .into();
        let (health, metrics) = (Health::new(), WatchMetrics::default());
        let shutdown = CancellationToken::new();
        let (watch, task) = SharedWatch::start_each(apis, &health, &metrics, shutdown.clone());
        let changes = watch.subscribe_changes();
        tokio::spawn(task);
        // One namespace's first list fails and is retried; the other's objects stay.
        let named = changes.take(4).map(|change| match change {
            Change::Applied(cm) => format!("{}/{}", cm.namespace().unwrap(), cm.name_any()),
            Change::Deleted(cm) => format!("deleted {}", cm.name_any()),
        });
        let seen = tokio::time::timeout(Duration::from_secs(30), named.collect())
            .await
            .expect("both namespaces' objects arrive");
        assert_eq!(sorted(seen), ["x/a", "x/b", "y/a", "y/b"]);
        tokio::time::timeout(Duration::from_secs(30), async {
            while !watch.watched().synced() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("synced once both listed");
        assert_eq!(watch.watched().objects().len(), 4);
        let (ready, checks) = health.readiness();
        let names: Vec<&str> = checks.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["watch:ConfigMap/x", "watch:ConfigMap/y"]);
        assert!(ready, "{checks:?}");
        let objects = metrics.objects.get_or_create(&KindLabel {
            kind: "ConfigMap".into(),
        });
        assert_eq!(objects.get(), 4);
        shutdown.cancel();
    }

    #[tokio::test]
    async fn a_subscriber_of_changes_hears_deletions() {
        let api = watched_api(vec![
            apiserver::event("ADDED", "c", 3),
            apiserver::event("DELETED", "a", 4),
        ]);
        let (health, metrics) = (Health::new(), WatchMetrics::default());
        let shutdown = CancellationToken::new();
        let (_, writer) = reflector::store();
        let store = writer.as_reader();
        let (watch, task) = SharedWatch::start_one_of(
            api,
            (store, writer),
            "watch:ConfigMap/ns",
            Box::new(|| 0),
            &health,
            &metrics,
            shutdown.clone(),
        );
        let changes = watch.subscribe_changes();
        tokio::spawn(task);
        let mut seen = first(changes, 4).await;
        // The list's objects come in the store's order.
        seen[..2].sort();
        assert_eq!(seen, ["applied a", "applied b", "applied c", "deleted a"]);
        assert_eq!(
            sorted(
                watch
                    .watched()
                    .objects()
                    .iter()
                    .map(|cm| cm.name_any())
                    .collect()
            ),
            ["b", "c"]
        );
        let (_, checks) = health.readiness();
        assert!(
            checks
                .iter()
                .any(|c| c.name == "watch:ConfigMap/ns" && c.ok),
            "{checks:?}"
        );
        shutdown.cancel();
    }
}
