//! Central's watches and controllers wired together: one watch per kind, started before the
//! leader gate, whose store and changes every controller, the topic operator and the admin
//! API's inventory share, and the controllers, started on the leader.

use std::sync::Arc;

use k8s_openapi::NamespaceResourceScope;
use kstretch_api::{Kafka, KafkaConnect, KafkaConnector, KafkaNodePool};
use kstretch_runtime::Health;
use kstretch_runtime::backoff::Backoff;
use kstretch_runtime::watch::{SharedWatch, WatchMetrics};
use kube::{Api, Client, Resource};
use prometheus_client::registry::Registry;
use serde::de::DeserializeOwned;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::inventory::Inventory;
use crate::kafka::checks::KafkaAccess;
use crate::kafka::metrics::KafkaMetrics;
use crate::kafka::resolve::Members;
use crate::link::{DesiredStates, Link, LinkConfig, LinkMetrics, OwnerKind, Owners};
use crate::metrics::OwnerMetrics;
use crate::{connect, connector, kafka, operation, topic, user};

/// What the leader side is started with.
#[derive(Debug)]
pub struct Settings {
    /// Namespace whose resources central manages; all namespaces when `None`.
    pub namespace: Option<String>,
    pub topics: topic::TopicSettings,
    pub connectors: connector::ConnectorArgs,
    pub members: Members,
    /// Whether the agent link is served: without it no agent can confirm anything, so a
    /// deleted resource then waits for no member cluster.
    pub linked: bool,
    pub link: LinkConfig,
}

/// The metrics of the watches, the link and every controller.
#[derive(Debug)]
pub struct Metrics {
    pub watch: WatchMetrics,
    pub link: LinkMetrics,
    pub kafka: KafkaMetrics,
    pub connect: OwnerMetrics,
    pub topic: topic::TopicMetrics,
    pub connector: connector::ConnectorMetrics,
    pub user: user::UserMetrics,
    pub operation: operation::OperationMetrics,
}

impl Metrics {
    pub fn register(registry: &mut Registry) -> Self {
        Self {
            watch: WatchMetrics::register(registry),
            link: LinkMetrics::register(registry),
            kafka: KafkaMetrics::register(registry),
            connect: OwnerMetrics::register(
                registry,
                "connect",
                "KafkaConnect",
                "Connect worker pods",
            ),
            topic: topic::TopicMetrics::register(registry),
            connector: connector::ConnectorMetrics::register(registry),
            user: user::UserMetrics::register(registry, "user", "KafkaUser"),
            operation: operation::OperationMetrics::register(
                registry,
                "operation",
                "KafkaOperation",
            ),
        }
    }
}

/// What `main` serves once the leader side runs.
#[derive(Debug)]
pub struct Started {
    /// The agent link, for its server and the admin API.
    pub link: Link,
    /// The counts of `kstretch status`, read from the watches' stores.
    pub inventory: Inventory,
}

/// Central's one watch of each kind, whose stores and changes every reader shares; the
/// `KafkaUser` and `KafkaOperation` watches are their only controllers' own.
#[derive(Debug)]
pub struct Watches {
    kafkas: SharedWatch<Kafka>,
    node_pools: SharedWatch<KafkaNodePool>,
    connects: SharedWatch<KafkaConnect>,
    connectors: SharedWatch<KafkaConnector>,
    /// The topic operator's, one per namespace it watches.
    topics: topic::Watches,
}

impl Watches {
    /// Starts every watch into `tasks`, before the leader gate: a standby's caches are filled
    /// and its readiness says whether it can watch, as the leader's.
    pub fn start(
        client: &Client,
        settings: &Settings,
        health: &Health,
        metrics: &WatchMetrics,
        tasks: &mut JoinSet<()>,
        shutdown: &CancellationToken,
    ) -> Self {
        let ns = settings.namespace.as_deref();
        let (kafkas, task) = SharedWatch::start(api(client, ns), health, metrics, shutdown.clone());
        tasks.spawn(task);
        let (node_pools, task) =
            SharedWatch::start(api(client, ns), health, metrics, shutdown.clone());
        tasks.spawn(task);
        let (connects, task) =
            SharedWatch::start(api(client, ns), health, metrics, shutdown.clone());
        tasks.spawn(task);
        let (connectors, task) =
            SharedWatch::start(api(client, ns), health, metrics, shutdown.clone());
        tasks.spawn(task);
        let topics = topic::Watches::start(
            client,
            settings.topics.namespaces.as_deref(),
            kafkas.watched().store().clone(),
            health,
            metrics,
            tasks,
            shutdown,
        );
        Self {
            kafkas,
            node_pools,
            connects,
            connectors,
            topics,
        }
    }
}

/// `K` in `namespace`, or in every namespace.
fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Starts the leader side on `watches`: the agent link's state and every controller, into
/// `tasks`.
pub fn start(
    client: Client,
    settings: Settings,
    metrics: Metrics,
    watches: Watches,
    health: &Health,
    tasks: &mut JoinSet<()>,
    shutdown: &CancellationToken,
) -> Started {
    let inventory = Inventory::new(
        watches.kafkas.watched().clone(),
        watches.node_pools.watched().clone(),
        watches.topics.topics(),
        watches.connectors.watched().clone(),
    );
    // Desired state is published to agents only once every Kafka was reconciled once (see
    // `link::owners`): a partial snapshot would delete the other clusters' pods.
    let desired = DesiredStates::new();
    let linked_members = if settings.linked {
        settings.members.all.clone()
    } else {
        Default::default()
    };
    // Closed until both owning controllers have seen their first lists through.
    let owners = Owners::new(
        desired.clone(),
        linked_members,
        [OwnerKind::Kafka, OwnerKind::KafkaConnect],
    );
    let link = Link::new(
        desired,
        metrics.link.clone(),
        settings.link.clone(),
        shutdown.clone(),
    );
    spawn_controllers(
        Controllers {
            client,
            settings,
            metrics,
            owners,
            link: &link,
            health,
        },
        watches,
        tasks,
        shutdown,
    );
    Started { link, inventory }
}

/// What the controllers are made of, beside the watches.
struct Controllers<'a> {
    client: Client,
    settings: Settings,
    metrics: Metrics,
    owners: Owners,
    link: &'a Link,
    health: &'a Health,
}

/// Spawns every controller, each with its subscriptions to `watches`.
fn spawn_controllers(
    c: Controllers<'_>,
    watches: Watches,
    tasks: &mut JoinSet<()>,
    shutdown: &CancellationToken,
) {
    let Controllers {
        client,
        settings,
        metrics,
        owners,
        link,
        health,
    } = c;
    let members = settings.members.clone();
    let ns = settings.namespace.as_deref();
    let kafka_store = watches.kafkas.watched().store().clone();
    let kafka_access = KafkaAccess::default();
    let connect_ctx = Arc::new(connect::Context::new(
        client.clone(),
        owners.clone(),
        link.agents.clone(),
        link.restarts.clone(),
        members.clone(),
        metrics.connect,
    ));
    let kafka_ctx = Arc::new(kafka::Context {
        client: client.clone(),
        pools: watches.node_pools.watched().store().clone(),
        owners,
        agents: link.agents.clone(),
        restarts: link.restarts.clone(),
        members: members.clone(),
        kafka: kafka_access.clone(),
        metrics: metrics.kafka,
        registration_checks: Default::default(),
        retries: Arc::new(Backoff::new(crate::owned::RETRY_CAP)),
    });
    tasks.spawn(user::run(
        api(&client, ns),
        Arc::new(user::Context::new(
            client.clone(),
            kafka_store.clone(),
            kafka_access.clone(),
            metrics.user,
        )),
        shutdown.clone(),
    ));
    tasks.spawn(operation::run(
        api(&client, ns),
        Arc::new(operation::Context::new(
            client.clone(),
            kafka_store,
            kafka_access.clone(),
            metrics.operation,
        )),
        shutdown.clone(),
    ));
    health.set_ready("topics", false, "filling the KafkaTopic caches");
    tasks.spawn(topic::run(
        client.clone(),
        watches.topics,
        settings.topics,
        kafka_access,
        metrics.topic,
        health.clone(),
        shutdown.clone(),
    ));
    tasks.spawn(connector::run(
        watches.connectors.subscribe(),
        watches.connects.subscribe(),
        Arc::new(connector::Context::new(
            client.clone(),
            metrics.connector,
            &settings.connectors,
        )),
        shutdown.clone(),
    ));
    tasks.spawn(connect::run(
        watches.connects.subscribe(),
        connect_ctx,
        link.agents.subscribe(),
        shutdown.clone(),
    ));
    tasks.spawn(kafka::run(
        watches.kafkas.subscribe(),
        watches.node_pools.subscribe(),
        kafka_ctx,
        link.agents.subscribe(),
        shutdown.clone(),
    ));
    tracing::info!(own = %members.own, members = ?members.all, "member clusters");
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::convert::Infallible;
    use std::sync::Mutex;
    use std::task::{Context, Poll};
    use std::time::Duration;

    use bytes::Bytes;
    use http::{Request, Response};
    use http_body_util::combinators::BoxBody;
    use http_body_util::{BodyExt, Full, StreamBody};
    use kstretch_api::{KafkaOperation, KafkaTopic, KafkaUser};

    use super::*;

    /// An apiserver that answers every request but a watch with an empty list and keeps every
    /// watch open, counting the watch requests per resource path.
    #[derive(Clone, Default)]
    struct Apiserver {
        watches: Arc<Mutex<BTreeMap<String, usize>>>,
    }

    impl tower::Service<Request<kube::client::Body>> for Apiserver {
        type Response = Response<BoxBody<Bytes, Infallible>>;
        type Error = Infallible;
        type Future = std::future::Ready<Result<Self::Response, Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: Request<kube::client::Body>) -> Self::Future {
            let uri = request.uri();
            let watch = uri
                .query()
                .is_some_and(|q| q.split('&').any(|p| p == "watch=true"));
            let body = if watch {
                *self
                    .watches
                    .lock()
                    .unwrap()
                    .entry(uri.path().to_owned())
                    .or_default() += 1;
                StreamBody::new(futures::stream::pending()).boxed()
            } else {
                Full::new(Bytes::from_static(
                    br#"{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":"1"},"items":[]}"#,
                ))
                .boxed()
            };
            std::future::ready(Ok(Response::new(body)))
        }
    }

    fn path<K: Resource<DynamicType = ()>>(namespace: Option<&str>) -> String {
        K::url_path(&(), namespace)
    }

    /// Starts the leader side against [`Apiserver`] and returns the watches it opened once it
    /// opened at least `kinds` and every store is filled.
    async fn watches_of(
        namespace: Option<&str>,
        topics: Option<Vec<String>>,
        kinds: usize,
    ) -> BTreeMap<String, usize> {
        let apiserver = Apiserver::default();
        let client = kube::Client::new(apiserver.clone(), "default");
        let shutdown = CancellationToken::new();
        let health = Health::new();
        let settings = Settings {
            namespace: namespace.map(str::to_owned),
            topics: topic::TopicSettings {
                namespaces: topics,
                ..Default::default()
            },
            connectors: connector::ConnectorArgs { resync_secs: 60 },
            members: Members {
                own: "central".into(),
                all: ["central".to_owned()].into(),
            },
            linked: false,
            link: LinkConfig::default(),
        };
        let metrics = Metrics::register(&mut Registry::default());
        let mut tasks = JoinSet::new();
        let watches = Watches::start(
            &client,
            &settings,
            &health,
            &metrics.watch,
            &mut tasks,
            &shutdown,
        );
        // As on a standby: the watches run, and nothing else.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let _started = start(
            client, settings, metrics, watches, &health, &mut tasks, &shutdown,
        );
        // The controllers of kinds without a readiness check are seen by their watch requests.
        tokio::time::timeout(Duration::from_secs(20), async {
            while apiserver.watches.lock().unwrap().len() < kinds
                || !health
                    .readiness()
                    .1
                    .iter()
                    .filter(|c| c.name.starts_with("watch:") || c.name == "topics")
                    .all(|c| c.ok)
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
        .expect("every watch synced");
        // A while longer, for a second watch of any kind to show.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let watches = apiserver.watches.lock().unwrap().clone();
        shutdown.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(10), async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
        watches
    }

    #[tokio::test]
    async fn central_opens_one_watch_per_kind() {
        let watches = watches_of(None, None, 7).await;
        let expected: BTreeMap<String, usize> = [
            path::<Kafka>(None),
            path::<KafkaNodePool>(None),
            path::<KafkaTopic>(None),
            path::<KafkaConnect>(None),
            path::<KafkaConnector>(None),
            path::<KafkaUser>(None),
            path::<KafkaOperation>(None),
        ]
        .into_iter()
        .map(|p| (p, 1))
        .collect();
        assert_eq!(watches, expected);
    }

    #[tokio::test]
    async fn central_watches_its_namespace_and_each_topic_namespace_once() {
        let topics = vec!["topics-a".to_owned(), "topics-b".to_owned()];
        let watches = watches_of(Some("kafka"), Some(topics), 8).await;
        let ns = Some("kafka");
        let expected: BTreeMap<String, usize> = [
            path::<Kafka>(ns),
            path::<KafkaNodePool>(ns),
            path::<KafkaTopic>(Some("topics-a")),
            path::<KafkaTopic>(Some("topics-b")),
            path::<KafkaConnect>(ns),
            path::<KafkaConnector>(ns),
            path::<KafkaUser>(ns),
            path::<KafkaOperation>(ns),
        ]
        .into_iter()
        .map(|p| (p, 1))
        .collect();
        assert_eq!(watches, expected);
    }
}
