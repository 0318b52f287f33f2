//! kstretch central: start-up and wiring of central's long-running tasks.

mod admin;
mod inventory;

use std::net::SocketAddr;

use anyhow::Context as _;
use clap::Parser;
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

    /// Address of the gRPC server (admin API).
    #[arg(long, env = "KSTRETCH_GRPC_ADDR", default_value = "0.0.0.0:9090")]
    grpc_addr: SocketAddr,

    /// Namespace whose resources central manages; all namespaces when unset.
    #[arg(long, env = "KSTRETCH_NAMESPACE")]
    namespace: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    kstretch_runtime::telemetry::init(args.observability.log_format, &args.observability.log)?;
    let shutdown = kstretch_runtime::shutdown::signal();
    let health = Health::new();
    let mut registry = Registry::with_prefix("kstretch_central");
    let watch_metrics = WatchMetrics::register(&mut registry);

    let client = args.kube.client().await?;
    let version = client
        .apiserver_version()
        .await
        .context("cannot reach the Kubernetes API server")?;
    tracing::info!(kubernetes = %version.git_version, namespace = ?args.namespace, "connected");
    health.set_ready("kubernetes", true, version.git_version.clone());

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
    let admin = admin::AdminApi::new(inventory, version.git_version);
    let grpc = admin::serve(args.grpc_addr, admin, shutdown.clone());

    let result = tokio::select! {
        r = http => r.context("HTTP server"),
        r = grpc => r.context("gRPC server"),
    };
    shutdown.cancel();
    while tasks.join_next().await.is_some() {}
    result
}
