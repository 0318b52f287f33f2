//! kstretch central: start-up and wiring of central's long-running tasks.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use kstretch_central::kafka::resolve::Members;
use kstretch_central::link::{self, Link, LinkConfig, ServerTls, TlsFiles};
use kstretch_central::{admin, connector, topic, wiring};
use kstretch_runtime::lease::{self, LeaderElectionArgs, LeaderMetrics};
use kstretch_runtime::namespaces::Namespaces;
use kstretch_runtime::tls::TlsMetrics;
use kstretch_runtime::{Health, KubeArgs, ObservabilityArgs, Registry};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

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

    /// Namespaces whose resources central manages (comma-separated): one watch per namespace
    /// and kind. All namespaces when unset or empty; an empty element or a namespace named
    /// twice stops start-up.
    #[arg(long, env = "KSTRETCH_NAMESPACE", value_delimiter = ',')]
    namespace: Vec<String>,

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
    // What a burst freed (a full topic reconciliation, a snapshot for every agent) is given back.
    tokio::spawn(kstretch_runtime::memory::release_periodically(
        shutdown.clone(),
    ));
    let health = Health::new();
    let mut registry = Registry::with_prefix("kstretch_central");
    let leader_metrics = LeaderMetrics::register(&mut registry);
    let tls_metrics = TlsMetrics::register(&mut registry);
    let metrics = wiring::Metrics::register(&mut registry);
    // A bad namespace list, an illegal namespace policy or unreadable TLS files must stop
    // central before it touches anything.
    let settings = settings(&args)?;
    let tls = server_tls(&args)?;

    let (client, version) = connect(&args, &settings.namespaces, &health).await?;
    let (mut leader, election) = lease::start(
        &args.leader_election,
        client.clone(),
        // The Lease's namespace when neither its flag nor $POD_NAMESPACE says: the first watched.
        settings.namespaces.first(),
        health.clone(),
        leader_metrics,
        shutdown.clone(),
    );
    let election = election.map(tokio::spawn);
    let mut tasks = JoinSet::new();
    let watches = wiring::Watches::start(
        &client,
        &settings,
        &health,
        &metrics.watch,
        &mut tasks,
        &shutdown,
    );
    let (_, http) = kstretch_runtime::http::bind(
        args.observability.http_addr,
        health.clone(),
        registry,
        shutdown.clone(),
    )
    .await?;
    tokio::pin!(http);
    // The one gate of leader election: a standby serves /healthz, /readyz and /metrics and
    // fills its caches, but starts nothing below, which is everything that writes
    // (controllers, the agent link, the admin API).
    let standby = tokio::select! {
        r = &mut http => Some(r.context("HTTP server")),
        acquired = leader.acquired() => (!acquired).then_some(Ok(())),
    };
    if let Some(result) = standby {
        shutdown.cancel();
        return result;
    }

    let started = wiring::start(
        client, settings, metrics, watches, &health, &mut tasks, &shutdown,
    );
    let admin = admin::AdminApi::new(started.inventory, version);
    let servers = Servers {
        health: &health,
        tasks: &mut tasks,
        shutdown: &shutdown,
    };
    let (admin, link_server) =
        serve_link(&args, tls, tls_metrics, started.link, admin, servers).await?;
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
    stop(result, tasks, election, &shutdown).await
}

/// The leader side's settings from the flags.
fn settings(args: &Args) -> anyhow::Result<wiring::Settings> {
    let namespaces = Namespaces::parse(&args.namespace)?;
    let topics = topic::TopicSettings::from_args(&args.topics, &namespaces)?;
    let mut all: std::collections::BTreeSet<String> = args
        .member_clusters
        .iter()
        .map(|m| m.trim().to_owned())
        .filter(|m| !m.is_empty())
        .collect();
    all.insert(args.cluster_alias.clone());
    Ok(wiring::Settings {
        namespaces,
        topics,
        connectors: args.connectors.clone(),
        members: Members {
            own: args.cluster_alias.clone(),
            all,
        },
        linked: args.tls_ca.is_some(),
        link: LinkConfig {
            heartbeat: Duration::from_secs(args.link_heartbeat_secs),
            resync: Duration::from_secs(args.link_resync_secs),
            term: args.term,
            ..LinkConfig::default()
        },
    })
}

/// The agent link's certificates, when --tls-ca, --tls-cert and --tls-key are given.
fn server_tls(args: &Args) -> anyhow::Result<Option<ServerTls>> {
    Ok(match (&args.tls_ca, &args.tls_cert, &args.tls_key) {
        (Some(ca), Some(cert), Some(key)) => Some(ServerTls::load(&TlsFiles {
            ca: ca.clone(),
            cert: cert.clone(),
            key: key.clone(),
        })?),
        _ => None,
    })
}

/// The client, once the apiserver answered, and its version.
async fn connect(
    args: &Args,
    namespaces: &Namespaces,
    health: &Health,
) -> anyhow::Result<(kube::Client, String)> {
    let client = args.kube.client().await?;
    let version = client
        .apiserver_version()
        .await
        .context("cannot reach the Kubernetes API server")?;
    tracing::info!(kubernetes = %version.git_version, namespaces = %namespaces, "connected");
    health.set_ready("kubernetes", true, version.git_version.clone());
    Ok((client, version.git_version))
}

/// What the servers started after the gate share.
struct Servers<'a> {
    health: &'a Health,
    tasks: &'a mut JoinSet<()>,
    shutdown: &'a CancellationToken,
}

/// Serves the agent link when `tls` is given (and tells the admin API where), else reports it
/// disabled; returns the admin API and the link server to wait on.
async fn serve_link(
    args: &Args,
    tls: Option<ServerTls>,
    tls_metrics: TlsMetrics,
    link: Link,
    admin: admin::AdminApi,
    servers: Servers<'_>,
) -> anyhow::Result<(
    admin::AdminApi,
    impl Future<Output = Result<(), link::LinkError>> + use<>,
)> {
    let Servers {
        health,
        tasks,
        shutdown,
    } = servers;
    let Some(tls) = tls else {
        tracing::warn!(
            "agent link disabled: --tls-ca, --tls-cert and --tls-key are not set; no member cluster gets its desired state"
        );
        health.set_ready(
            "link",
            true,
            "disabled (--tls-ca, --tls-cert and --tls-key are not set)",
        );
        return Ok((
            admin,
            futures::future::Either::Right(std::future::pending()),
        ));
    };
    let link = link.with_health(health.clone());
    let (addr, serve) = link::bind(args.link_addr, &tls, link.clone()).await?;
    tls.reloading().report_to(tls_metrics, Some(health.clone()));
    tasks.spawn(
        tls.reloading()
            .clone()
            .watch(Duration::from_secs(args.tls_reload_secs), shutdown.clone()),
    );
    Ok((
        admin.with_link(link, addr),
        futures::future::Either::Left(serve),
    ))
}

/// Stops everything on `result`, waiting a while for the tasks and for the election to release
/// the lease.
async fn stop(
    result: anyhow::Result<()>,
    mut tasks: JoinSet<()>,
    election: Option<tokio::task::JoinHandle<()>>,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    shutdown.cancel();
    if let Err(e) = &result {
        tracing::error!(error = %format!("{e:#}"), "stopping");
    }
    // Watches and controllers stop on the shutdown token; a task that does not stop in time
    // must not keep a failed central alive (and its ports closed) forever.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn args(namespace: &str) -> Args {
        Args::try_parse_from(["kstretch-central", &format!("--namespace={namespace}")])
            .expect("flags parse")
    }

    #[test]
    fn namespace_takes_a_comma_separated_list() {
        let two = settings(&args("a,b")).expect("two namespaces");
        assert_eq!(
            two.namespaces,
            Namespaces::List(vec!["a".into(), "b".into()])
        );
        // The topic operator follows them when --topic-namespaces is unset.
        assert_eq!(
            two.topics.namespaces,
            Some(vec!["a".to_owned(), "b".to_owned()])
        );
        assert_eq!(
            settings(&args("kafka")).unwrap().namespaces,
            Namespaces::one("kafka")
        );
        assert_eq!(settings(&args("")).unwrap().namespaces, Namespaces::All);
        let unset = Args::try_parse_from(["kstretch-central"]).expect("flags parse");
        assert_eq!(settings(&unset).unwrap().namespaces, Namespaces::All);
    }

    #[test]
    fn an_empty_element_or_a_duplicate_stops_start_up() {
        let err = settings(&args("a,,b")).unwrap_err().to_string();
        assert!(err.contains("empty element"), "{err}");
        let err = settings(&args("a,b,a")).unwrap_err().to_string();
        assert!(err.contains("more than once"), "{err}");
    }
}
