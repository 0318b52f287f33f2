//! kstretch central: start-up and wiring of central's long-running tasks.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use kstretch_central::kafka::{self, checks::KafkaAccess, metrics::KafkaMetrics, resolve::Members};
use kstretch_central::link::{self, DesiredStates, Link, LinkConfig, LinkMetrics, TlsFiles};
use kstretch_central::link::{OwnerKind, Owners};
use kstretch_central::{admin, connect, connector, inventory, operation, topic, user};
use kstretch_runtime::lease::{self, LeaderElectionArgs, LeaderMetrics};
use kstretch_runtime::watch::WatchMetrics;
use kstretch_runtime::{Health, KubeArgs, ObservabilityArgs, Registry};

/// Central controller of kstretch.
///
/// Runs in the central Kubernetes cluster, where users apply `Kafka`, `KafkaNodePool`,
/// `KafkaTopic` and `KafkaConnector` resources, and serves the admin gRPC API used by the
/// `kstretch` CLI.
#[derive(Parser, Debug)]
#[command(name = "kstretch-central", version, about, long_about)]
struct Args {
    #[command(flatten)]
    kube: KubeArgs,

    #[command(flatten)]
    observability: ObservabilityArgs,

    #[command(flatten)]
    leader_election: LeaderElectionArgs,

    #[command(flatten)]
    topics: topic::TopicArgs,

    #[command(flatten)]
    connectors: connector::ConnectorArgs,

    /// Address of the gRPC server (admin API).
    #[arg(long, env = "KSTRETCH_GRPC_ADDR", default_value = "0.0.0.0:9090")]
    grpc_addr: SocketAddr,

    /// Namespace whose resources central manages; all namespaces when unset.
    #[arg(long, env = "KSTRETCH_NAMESPACE")]
    namespace: Option<String>,

    /// Address of the agent link (gRPC with mutual TLS). Served only when --tls-ca,
    /// --tls-cert and --tls-key are given.
    #[arg(long, env = "KSTRETCH_LINK_ADDR", default_value = "0.0.0.0:9443")]
    link_addr: SocketAddr,

    /// CA certificate (PEM) that must have signed every agent's client certificate. An agent's
    /// cluster is the URI SAN `kstretch://cluster/<alias>` of its certificate, else its CN.
    #[arg(long, env = "KSTRETCH_TLS_CA", requires_all = ["tls_cert", "tls_key"])]
    tls_ca: Option<PathBuf>,

    /// Central's certificate (PEM) for the agent link; its SANs must match the address agents
    /// use in --central.
    #[arg(long, env = "KSTRETCH_TLS_CERT", requires_all = ["tls_ca", "tls_key"])]
    tls_cert: Option<PathBuf>,

    /// Private key (PEM) of --tls-cert.
    #[arg(long, env = "KSTRETCH_TLS_KEY", requires_all = ["tls_ca", "tls_cert"])]
    tls_key: Option<PathBuf>,

    /// Seconds between checks of the TLS files: renewed certificates are used by new handshakes
    /// without a restart (invalid new files are refused and the previous ones kept).
    #[arg(long, env = "KSTRETCH_TLS_RELOAD_SECS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    tls_reload_secs: u64,

    /// Seconds between heartbeats on each agent stream; three silent intervals end it.
    #[arg(long, env = "KSTRETCH_LINK_HEARTBEAT_SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    link_heartbeat_secs: u64,

    /// This central's term (1 or more). Agents obey the central with the highest term they
    /// have seen and refuse a lower one: a central started to replace one whose cluster was
    /// lost takes the next term, so the old one cannot drive any agent if it comes back.
    #[arg(long, env = "KSTRETCH_TERM", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    term: u64,

    /// Alias of the Kubernetes cluster central runs in: node pools without the
    /// `strimzi.io/stretch-cluster-alias` annotation run there (through that cluster's agent).
    #[arg(long, env = "KSTRETCH_CLUSTER_ALIAS", default_value = "central")]
    cluster_alias: String,

    /// Every member cluster's alias (comma-separated), as in the agents' certificates; central's
    /// own is added. A node pool naming another alias is refused with `UnknownClusterAlias`.
    #[arg(long, env = "KSTRETCH_MEMBER_CLUSTERS", value_delimiter = ',')]
    member_clusters: Vec<String>,

    /// Seconds between re-sends of an unchanged snapshot (undoes drift in member clusters).
    #[arg(long, env = "KSTRETCH_LINK_RESYNC_SECS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    link_resync_secs: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    kstretch_runtime::telemetry::init(args.observability.log_format, &args.observability.log)?;
    let shutdown = kstretch_runtime::shutdown::signal();
    let health = Health::new();
    let mut registry = Registry::with_prefix("kstretch_central");
    let watch_metrics = WatchMetrics::register(&mut registry);
    let leader_metrics = LeaderMetrics::register(&mut registry);
    let tls_metrics = kstretch_runtime::tls::TlsMetrics::register(&mut registry);
    let link_metrics = LinkMetrics::register(&mut registry);
    let kafka_metrics = KafkaMetrics::register(&mut registry);
    let connect_metrics = kstretch_central::metrics::OwnerMetrics::register(
        &mut registry,
        "connect",
        "KafkaConnect",
        "Connect worker pods",
    );
    let topic_metrics = topic::TopicMetrics::register(&mut registry);
    let connector_metrics = connector::ConnectorMetrics::register(&mut registry);
    let user_metrics = user::UserMetrics::register(&mut registry, "user", "KafkaUser");
    let operation_metrics =
        operation::OperationMetrics::register(&mut registry, "operation", "KafkaOperation");
    // An illegal namespace policy must stop central before it touches anything.
    let topic_settings = topic::TopicSettings::from_args(&args.topics, args.namespace.as_deref())?;
    let mut all_members: std::collections::BTreeSet<String> = args
        .member_clusters
        .iter()
        .map(|m| m.trim().to_owned())
        .filter(|m| !m.is_empty())
        .collect();
    all_members.insert(args.cluster_alias.clone());
    let members = Members {
        own: args.cluster_alias.clone(),
        all: all_members,
    };
    let tls = match (&args.tls_ca, &args.tls_cert, &args.tls_key) {
        (Some(ca), Some(cert), Some(key)) => Some(link::ServerTls::load(&TlsFiles {
            ca: ca.clone(),
            cert: cert.clone(),
            key: key.clone(),
        })?),
        _ => None,
    };

    let client = args.kube.client().await?;
    let version = client
        .apiserver_version()
        .await
        .context("cannot reach the Kubernetes API server")?;
    tracing::info!(kubernetes = %version.git_version, namespace = ?args.namespace, "connected");
    health.set_ready("kubernetes", true, version.git_version.clone());
    let (mut leader, election) = lease::start(
        &args.leader_election,
        client.clone(),
        args.namespace.as_deref(),
        health.clone(),
        leader_metrics,
        shutdown.clone(),
    );
    let election = election.map(tokio::spawn);

    let (inventory, watches) = inventory::Inventory::start(
        &client,
        args.namespace.as_deref(),
        &health,
        &watch_metrics,
        &shutdown,
    );
    let mut tasks = tokio::task::JoinSet::new();
    for watch in watches {
        tasks.spawn(watch);
    }

    let (_, http) = kstretch_runtime::http::bind(
        args.observability.http_addr,
        health.clone(),
        registry,
        shutdown.clone(),
    )
    .await?;
    tokio::pin!(http);
    // The one gate of leader election: a standby serves /healthz, /readyz (not ready) and
    // /metrics and reads its caches, but starts nothing below, which is everything that writes
    // (controllers, the agent link, the admin API).
    let standby = tokio::select! {
        r = &mut http => Some(r.context("HTTP server")),
        acquired = leader.acquired() => (!acquired).then_some(Ok(())),
    };
    if let Some(result) = standby {
        shutdown.cancel();
        return result;
    }
    let node_pools = inventory.node_pools().store().clone();
    let kafka_store = inventory.kafkas().store().clone();
    let mut admin = admin::AdminApi::new(inventory, version.git_version);

    // Desired state is published to agents only once every Kafka was reconciled once (see
    // `link::owners`): a partial snapshot would delete the other clusters' pods.
    let desired = DesiredStates::new();
    // Without the link no agent can receive or confirm anything: a deleted resource then waits
    // for no member cluster (whatever an earlier central placed stays there, unclaimed).
    let linked_members = if tls.is_some() {
        members.all.clone()
    } else {
        Default::default()
    };
    // Closed until both owning controllers have seen their first lists through.
    let owners = Owners::new(
        desired.clone(),
        linked_members,
        [OwnerKind::Kafka, OwnerKind::KafkaConnect],
    );
    let config = LinkConfig {
        heartbeat: Duration::from_secs(args.link_heartbeat_secs),
        resync: Duration::from_secs(args.link_resync_secs),
        term: args.term,
        ..LinkConfig::default()
    };
    let link = Link::new(desired, link_metrics, config, shutdown.clone());
    let connect_ctx = std::sync::Arc::new(connect::Context::new(
        client.clone(),
        owners.clone(),
        link.agents.clone(),
        link.restarts.clone(),
        members.clone(),
        connect_metrics,
    ));
    let kafka_access = KafkaAccess::default();
    let ctx = std::sync::Arc::new(kafka::Context {
        client: client.clone(),
        pools: node_pools,
        owners,
        agents: link.agents.clone(),
        restarts: link.restarts.clone(),
        members: members.clone(),
        kafka: kafka_access.clone(),
        metrics: kafka_metrics,
        registration_checks: Default::default(),
        retries: std::sync::Arc::new(kstretch_runtime::backoff::Backoff::new(
            kstretch_central::owned::RETRY_CAP,
        )),
    });
    let (kafkas, pools_api) = match args.namespace.as_deref() {
        Some(ns) => (
            kube::Api::namespaced(client.clone(), ns),
            kube::Api::namespaced(client.clone(), ns),
        ),
        None => (
            kube::Api::all(client.clone()),
            kube::Api::all(client.clone()),
        ),
    };
    tasks.spawn(user::run(
        match args.namespace.as_deref() {
            Some(ns) => kube::Api::namespaced(client.clone(), ns),
            None => kube::Api::all(client.clone()),
        },
        std::sync::Arc::new(user::Context::new(
            client.clone(),
            kafka_store.clone(),
            kafka_access.clone(),
            user_metrics,
        )),
        shutdown.clone(),
    ));
    tasks.spawn(operation::run(
        match args.namespace.as_deref() {
            Some(ns) => kube::Api::namespaced(client.clone(), ns),
            None => kube::Api::all(client.clone()),
        },
        std::sync::Arc::new(operation::Context::new(
            client.clone(),
            kafka_store,
            kafka_access.clone(),
            operation_metrics,
        )),
        shutdown.clone(),
    ));
    health.set_ready("topics", false, "filling the KafkaTopic caches");
    tasks.spawn(topic::run(
        client.clone(),
        kafkas.clone(),
        topic_settings,
        kafka_access,
        topic_metrics,
        health.clone(),
        shutdown.clone(),
    ));
    let (connectors_api, connects_api) = match args.namespace.as_deref() {
        Some(ns) => (
            kube::Api::namespaced(client.clone(), ns),
            kube::Api::namespaced(client.clone(), ns),
        ),
        None => (
            kube::Api::all(client.clone()),
            kube::Api::all(client.clone()),
        ),
    };
    tasks.spawn(connector::run(
        connectors_api,
        connects_api,
        std::sync::Arc::new(connector::Context::new(
            client.clone(),
            connector_metrics,
            &args.connectors,
        )),
        shutdown.clone(),
    ));
    tasks.spawn(connect::run(
        match args.namespace.as_deref() {
            Some(ns) => kube::Api::namespaced(client.clone(), ns),
            None => kube::Api::all(client.clone()),
        },
        connect_ctx,
        link.agents.subscribe(),
        shutdown.clone(),
    ));
    tasks.spawn(kafka::run(
        kafkas,
        pools_api,
        ctx,
        link.agents.subscribe(),
        shutdown.clone(),
    ));
    tracing::info!(own = %members.own, members = ?members.all, "member clusters");

    let link_server = match tls {
        Some(tls) => {
            let link = link.with_health(health.clone());
            let (addr, serve) = link::bind(args.link_addr, &tls, link.clone()).await?;
            tls.reloading().report_to(tls_metrics, Some(health.clone()));
            tasks.spawn(
                tls.reloading()
                    .clone()
                    .watch(Duration::from_secs(args.tls_reload_secs), shutdown.clone()),
            );
            admin = admin.with_link(link, addr);
            futures::future::Either::Left(serve)
        }
        None => {
            tracing::warn!(
                "agent link disabled: --tls-ca, --tls-cert and --tls-key are not set; no member cluster gets its desired state"
            );
            health.set_ready(
                "link",
                true,
                "disabled (--tls-ca, --tls-cert and --tls-key are not set)",
            );
            futures::future::Either::Right(std::future::pending())
        }
    };
    let grpc = admin::serve(args.grpc_addr, admin, shutdown.clone());

    // On losing the lease the leader exits (non-zero) instead of stopping its controllers
    // one by one: the restarted pod comes back as a clean standby, and nothing half-stopped
    // keeps writing next to the new leader.
    let result = tokio::select! {
        r = &mut http => r.context("HTTP server"),
        why = leader.lost() => Err(anyhow::anyhow!("lost the leader lease: {why}")),
        r = grpc => r.context("gRPC server"),
        r = link_server => r.context("agent link server"),
    };
    shutdown.cancel();
    if let Err(e) = &result {
        tracing::error!(error = %format!("{e:#}"), "stopping");
    }
    // Watches and the reconciler stop on the shutdown token; a task that does not stop in
    // time must not keep a failed central alive (and its ports closed) forever.
    let drained = tokio::time::timeout(Duration::from_secs(10), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!("background tasks did not stop within 10 s; exiting anyway");
    }
    // Let the election release the lease on a clean stop, so a standby takes over at once.
    if let Some(election) = election {
        let _ = tokio::time::timeout(Duration::from_secs(5), election).await;
    }
    result
}
