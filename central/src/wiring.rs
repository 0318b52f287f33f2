//! Central's watches and controllers wired together: one watch per kind, started before the
//! leader gate, whose store and changes every controller, the topic operator and the admin
//! API's inventory share, and the controllers, started on the leader.

use std::future::Future;
use std::sync::Arc;

use kstretch_api::{Kafka, KafkaConnect, KafkaConnector, KafkaNodePool};
use kstretch_runtime::Health;
use kstretch_runtime::backoff::Backoff;
use kstretch_runtime::namespaces::Namespaces;
use kstretch_runtime::watch::{SharedWatch, WatchMetrics};
use kube::runtime::reflector::Store;
use kube::{Client, Resource};
use prometheus_client::registry::Registry;
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
    /// The namespaces whose resources central manages (every kind but `KafkaTopic`, which
    /// follows `topics`): one watch per namespace and kind, into one store per kind.
    pub namespaces: Namespaces,
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

/// Central's one watch of each kind (one per namespace when it watches several, into one store),
/// whose stores and changes every reader shares; the `KafkaUser` and `KafkaOperation` watches
/// are their only controllers' own.
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
        let ns = &settings.namespaces;
        let (kafkas, task) =
            SharedWatch::start_each(ns.apis(client), health, metrics, shutdown.clone());
        tasks.spawn(task);
        let (node_pools, task) =
            SharedWatch::start_each(ns.apis(client), health, metrics, shutdown.clone());
        tasks.spawn(task);
        let (connects, task) =
            SharedWatch::start_each(ns.apis(client), health, metrics, shutdown.clone());
        tasks.spawn(task);
        let (connectors, task) =
            SharedWatch::start_each(ns.apis(client), health, metrics, shutdown.clone());
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
    metrics
        .link
        .observe(&link.agents, settings.members.all.iter().cloned().collect());
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
    let ns = &settings.namespaces;
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
        events: kstretch_runtime::events::Events::new(client.clone(), "kstretch-central"),
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
        ns.apis(&client),
        Arc::new(user::Context::new(
            client.clone(),
            kafka_store.clone(),
            kafka_access.clone(),
            metrics.user,
        )),
        shutdown.clone(),
    ));
    tasks.spawn(operation::run(
        ns.apis(&client),
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
    let connectors = watches.connectors.watched().store().clone();
    tasks.spawn(once_listed(
        connectors,
        shutdown.clone(),
        connector::run(
            watches.connectors.subscribe(),
            watches.connects.subscribe(),
            Arc::new(connector::Context::new(
                client.clone(),
                metrics.connector,
                &settings.connectors,
                // With agents, the workers kstretch runs are called through them.
                settings.linked.then(|| connector::Relays {
                    agents: link.agents.clone(),
                    calls: link.connect_calls.clone(),
                    own: members.own.clone(),
                }),
            )),
            shutdown.clone(),
        ),
    ));
    let connects = watches.connects.watched().store().clone();
    tasks.spawn(once_listed(
        connects,
        shutdown.clone(),
        connect::run(
            watches.connects.subscribe(),
            connect_ctx,
            link.agents.subscribe(),
            shutdown.clone(),
        ),
    ));
    let kafkas = watches.kafkas.watched().store().clone();
    tasks.spawn(once_listed(
        kafkas,
        shutdown.clone(),
        kafka::run(
            watches.kafkas.subscribe(),
            watches.node_pools.subscribe(),
            kafka_ctx,
            link.agents.subscribe(),
            shutdown.clone(),
        ),
    ));
    tracing::info!(own = %members.own, members = ?members.all, "member clusters");
}

/// Runs `controller` (subscribed already, so it misses nothing) once `store`, its shared main
/// store, has its first list. A kube controller waits for its store with
/// `Store::wait_until_ready`, which wakes only the last of several tasks waiting at once; a shared
/// store has several (see [`kstretch_runtime::watch::ready`]), so it starts on a listed one.
async fn once_listed<K>(
    store: Store<K>,
    shutdown: CancellationToken,
    controller: impl Future<Output = ()>,
) where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    tokio::select! {
        _ = shutdown.cancelled() => {}
        listed = kstretch_runtime::watch::ready(&store) => if listed {
            controller.await;
        },
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use kstretch_api::{KafkaOperation, KafkaTopic, KafkaUser};
    use kube::Resource;

    use super::*;
    use crate::testing::Apiserver;

    fn path<K: Resource<DynamicType = ()>>(namespace: Option<&str>) -> String {
        K::url_path(&(), namespace)
    }

    /// Central against an [`Apiserver`]: its watches, then its controllers.
    struct Central {
        apiserver: Apiserver,
        health: Health,
        registry: Registry,
        tasks: JoinSet<()>,
        shutdown: CancellationToken,
    }

    impl Central {
        /// Starts the watches, waits (as a standby would) until they are filled, then starts
        /// the controllers, which subscribe to the watches only now.
        async fn start(
            namespaces: &[&str],
            topics: Option<Vec<String>>,
            apiserver: Apiserver,
        ) -> Self {
            let client = apiserver.client();
            let (shutdown, health) = (CancellationToken::new(), Health::new());
            let settings = Settings {
                namespaces: Namespaces::parse(
                    &namespaces
                        .iter()
                        .map(|n| (*n).to_owned())
                        .collect::<Vec<_>>(),
                )
                .unwrap(),
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
            let mut registry = Registry::default();
            let metrics = Metrics::register(&mut registry);
            let mut tasks = JoinSet::new();
            let watches = Watches::start(
                &client,
                &settings,
                &health,
                &metrics.watch,
                &mut tasks,
                &shutdown,
            );
            let central = Self {
                apiserver,
                health,
                registry,
                tasks,
                shutdown,
            };
            central
                .until("every watch filled", |c| c.ready("watch:"))
                .await;
            let mut central = central;
            let _ = start(
                client,
                settings,
                metrics,
                watches,
                &central.health.clone(),
                &mut central.tasks,
                &central.shutdown.clone(),
            );
            central
        }

        fn ready(&self, prefix: &str) -> bool {
            let (_, checks) = self.health.readiness();
            let mut checks = checks.iter().filter(|c| c.name.starts_with(prefix));
            checks.clone().next().is_some() && checks.all(|c| c.ok)
        }

        fn watches(&self) -> BTreeMap<String, usize> {
            self.apiserver.watches()
        }

        fn metrics(&self) -> String {
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &self.registry).unwrap();
            text
        }

        async fn until(&self, what: &str, done: impl Fn(&Self) -> bool) {
            let waited = tokio::time::timeout(Duration::from_secs(20), async {
                while !done(self) {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
            .await;
            assert!(waited.is_ok(), "{what}: {:?}", self.watches());
        }

        async fn stop(mut self) {
            self.shutdown.cancel();
            let _ = tokio::time::timeout(Duration::from_secs(10), async {
                while self.tasks.join_next().await.is_some() {}
            })
            .await;
        }
    }

    /// Every watch `central` opened, once every kind in `expected` is watched and a while has
    /// passed for a second watch of any kind to show.
    async fn watches_once(central: &Central, expected: &[String]) -> BTreeMap<String, usize> {
        central
            .until("every kind watched", |c| {
                c.watches().len() >= expected.len() && c.ready("topics")
            })
            .await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        central.watches()
    }

    /// The path of every kind central watches, in `namespace`.
    fn every_kind(namespace: Option<&str>) -> Vec<String> {
        vec![
            path::<Kafka>(namespace),
            path::<KafkaNodePool>(namespace),
            path::<KafkaTopic>(namespace),
            path::<KafkaConnect>(namespace),
            path::<KafkaConnector>(namespace),
            path::<KafkaUser>(namespace),
            path::<KafkaOperation>(namespace),
        ]
    }

    fn once(paths: &[String]) -> BTreeMap<String, usize> {
        paths.iter().map(|p| (p.clone(), 1)).collect()
    }

    #[tokio::test]
    async fn central_opens_one_watch_per_kind() {
        let central = Central::start(&[], None, Apiserver::default()).await;
        let expected = every_kind(None);
        assert_eq!(watches_once(&central, &expected).await, once(&expected));
        central.stop().await;
    }

    #[tokio::test]
    async fn central_watches_its_namespace_and_each_topic_namespace_once() {
        let topics = vec!["topics-a".to_owned(), "topics-b".to_owned()];
        let central = Central::start(&["kafka"], Some(topics), Apiserver::default()).await;
        let ns = Some("kafka");
        let expected = [
            path::<Kafka>(ns),
            path::<KafkaNodePool>(ns),
            path::<KafkaTopic>(Some("topics-a")),
            path::<KafkaTopic>(Some("topics-b")),
            path::<KafkaConnect>(ns),
            path::<KafkaConnector>(ns),
            path::<KafkaUser>(ns),
            path::<KafkaOperation>(ns),
        ];
        assert_eq!(watches_once(&central, &expected).await, once(&expected));
        central.stop().await;
    }

    #[tokio::test]
    async fn central_watches_each_of_its_namespaces_once_per_kind() {
        // Topics default to central's namespaces (`TopicSettings::from_args`).
        let topics = Some(vec!["a".to_owned(), "b".to_owned()]);
        let central = Central::start(&["a", "b"], topics, Apiserver::default()).await;
        let mut expected = every_kind(Some("a"));
        expected.extend(every_kind(Some("b")));
        assert_eq!(watches_once(&central, &expected).await, once(&expected));
        // One readiness check per namespace and kind.
        let (_, checks) = central.health.readiness();
        for check in ["watch:Kafka/a", "watch:Kafka/b", "watch:KafkaConnector/b"] {
            assert!(
                checks.iter().any(|c| c.name == check && c.ok),
                "{check}: {checks:?}"
            );
        }
        assert!(
            !checks.iter().any(|c| c.name == "watch:Kafka"),
            "{checks:?}"
        );
        central.stop().await;
    }

    /// The value of `counter` in `metrics` (the text format), 0 when absent.
    fn counted(metrics: &str, counter: &str) -> u64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(counter)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or(0)
    }

    fn in_kafka<K: Resource<DynamicType = ()>>(mut k: K) -> K {
        k.meta_mut().namespace = Some("kafka".into());
        k
    }

    #[tokio::test]
    async fn controllers_started_after_the_watches_filled_see_what_is_there() {
        let mut topic = KafkaTopic::new("t", Default::default());
        topic
            .meta_mut()
            .labels
            .get_or_insert_default()
            .insert(kstretch_api::names::CLUSTER.into(), "my-cluster".into());
        let apiserver = Apiserver::default();
        apiserver.hold(&in_kafka(Kafka::new("my-cluster", Default::default())));
        apiserver.hold(&in_kafka(KafkaConnect::new("c", Default::default())));
        apiserver.hold(&in_kafka(KafkaConnector::new("k", Default::default())));
        apiserver.hold(&in_kafka(topic));
        let central = Central::start(&[], None, apiserver).await;
        // Each controller reconciles its resource (whatever comes of it at an apiserver that
        // knows nothing else): its subscription started with what the watch had.
        central
            .until("every controller reconciled", |c| {
                let m = c.metrics();
                [
                    "kafka_reconciles_total",
                    "connect_reconciles_total",
                    "connector_reconciliations_total",
                ]
                .iter()
                .all(|counter| counted(&m, counter) > 0)
            })
            .await;
        // The topic operator queued its topic: a batch wrote its status.
        central
            .until("the topic operator read its topic", |c| {
                c.apiserver
                    .writes()
                    .iter()
                    .any(|w| w.path.contains("/kafkatopics/t"))
            })
            .await;
        central.stop().await;
    }
}
