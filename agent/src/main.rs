//! kstretch agent: start-up and wiring of the agent's long-running tasks.

use anyhow::Context as _;
use clap::Parser;
use kstretch_runtime::namespaces::Namespaces;
use kstretch_runtime::watch::WatchMetrics;
use kstretch_runtime::{Health, KubeArgs, ObservabilityArgs, Registry};

mod kafka_exporter;
mod link;
mod metrics_agent;
mod podset;
mod recover;

/// Agent of kstretch for one member Kubernetes cluster.
///
/// Runs only the StrimziPodSet controller and applies, in its own cluster, what central asks
/// for. It keeps the Kafka pods of its cluster alive while central is unreachable.
#[derive(Parser, Debug)]
#[command(name = "kstretch-agent", version, about, long_about)]
struct Args {
    #[command(flatten)]
    kube: KubeArgs,

    #[command(flatten)]
    observability: ObservabilityArgs,

    /// Name of this Kubernetes cluster in stretch placements (the
    /// `strimzi.io/stretch-cluster-alias` of the node pools it runs).
    #[arg(long, env = "KSTRETCH_CLUSTER_ALIAS")]
    cluster_alias: String,

    /// Namespaces whose podsets the agent manages and where it applies what central sends
    /// (comma-separated): one watch per namespace and kind. All namespaces when unset or empty;
    /// an empty element or a namespace named twice stops start-up.
    #[arg(long, env = "KSTRETCH_NAMESPACE", value_delimiter = ',')]
    namespace: Vec<String>,

    #[command(flatten)]
    podsets: podset::PodSetArgs,

    #[command(flatten)]
    link: link::LinkArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match std::env::args().nth(1).as_deref() {
        Some(recover::COMMAND) => return recover::main(std::env::args_os().skip(1)),
        Some(metrics_agent::COMMAND) => return metrics_agent::main(std::env::args_os().skip(1)),
        Some(kafka_exporter::COMMAND) => {
            return kafka_exporter::main(std::env::args_os().skip(1)).await;
        }
        _ => {}
    }
    let args = Args::parse();
    kstretch_runtime::telemetry::init(args.observability.log_format, &args.observability.log)?;
    let namespaces = Namespaces::parse(&args.namespace)?;
    let shutdown = kstretch_runtime::shutdown::signal();
    let health = Health::new();
    let mut registry = Registry::with_prefix("kstretch_agent");
    let watch_metrics = WatchMetrics::register(&mut registry);

    let client = args.kube.client().await?;
    let version = client
        .apiserver_version()
        .await
        .context("cannot reach the Kubernetes API server")?;
    tracing::info!(
        cluster = %args.cluster_alias,
        kubernetes = %version.git_version,
        namespaces = %namespaces,
        "connected"
    );
    health.set_ready("kubernetes", true, version.git_version.clone());

    let podset_controller = podset::PodSetController::new(
        client.clone(),
        namespaces.clone(),
        args.podsets.clone(),
        health.clone(),
        &mut registry,
        watch_metrics,
    );
    // The link reports podset status from the controller's caches: one watch per kind.
    let caches = podset_controller.caches();
    let podset_controller = tokio::spawn(podset_controller.run(shutdown.clone()));
    // What a burst of pod creations freed is given back: the agent idles most of its life.
    tokio::spawn(kstretch_runtime::memory::release_periodically(
        shutdown.clone(),
    ));
    let link = tokio::spawn(link::start(
        &args.link,
        link::AgentIdentity {
            cluster_alias: args.cluster_alias.clone(),
            namespaces,
            kubernetes_version: version.git_version,
        },
        client.clone(),
        caches,
        health.clone(),
        &mut registry,
        shutdown.clone(),
    ));

    let (_, http) = kstretch_runtime::http::bind(
        args.observability.http_addr,
        health,
        registry,
        shutdown.clone(),
    )
    .await?;
    let result = http.await.context("HTTP server");
    shutdown.cancel();
    let _ = podset_controller.await;
    let _ = link.await;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn namespaces(flag: &str) -> Result<Namespaces, kstretch_runtime::namespaces::NamespacesError> {
        let args = Args::try_parse_from(["kstretch-agent", "--cluster-alias=beta", flag])
            .expect("flags parse");
        Namespaces::parse(&args.namespace)
    }

    #[test]
    fn namespace_takes_a_comma_separated_list_and_refuses_empty_elements_and_duplicates() {
        assert_eq!(
            namespaces("--namespace=a,b").unwrap(),
            Namespaces::List(vec!["a".into(), "b".into()])
        );
        assert_eq!(namespaces("--namespace=a").unwrap(), Namespaces::one("a"));
        assert_eq!(namespaces("--namespace=").unwrap(), Namespaces::All);
        assert!(namespaces("--namespace=a,").is_err());
        assert!(namespaces("--namespace=a,a").is_err());
    }
}
