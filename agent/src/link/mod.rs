//! The agent's link to central: one mTLS gRPC stream (`kstretch.agent.v1.AgentLink`), opened
//! by the agent and re-opened with jittered exponential backoff whenever it ends.
//!
//! Over it the agent receives full snapshots of what central wants in this cluster, applies
//! each with server-side apply under one field manager and deletes what it applied earlier and
//! the snapshot no longer lists ([`apply`]), and reports the results and its podsets' status
//! ([`status`]).
//!
//! Without central the agent keeps running: the podset controller keeps pods alive from what
//! the apiserver stores, and the link deletes nothing (deletions happen only while applying an
//! explicit snapshot). So the link never fails readiness or liveness: a restart loop while
//! central is down would help nobody. Its state is the readiness check `link` (always passing,
//! with the detail) and the metric `kstretch_agent_link_connected`.

pub mod apply;
pub mod connect;
pub mod metrics;
pub mod nodes;
pub mod objects;
pub mod protocol;
pub mod restart;
pub mod session;
pub mod status;
pub mod term;
pub mod tls;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kstretch_proto::agent::v1::{
    ApplyReport, BuildInfo, CONNECT_CALLS, EXPLICIT_DELETION, Hello, Snapshot,
};
use kstretch_runtime::namespaces::Namespaces;
use kstretch_runtime::{Health, Registry};
use kube::Client;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use apply::Applier;
use kstretch_runtime::backoff::Retries;
use metrics::LinkMetrics;
use objects::Scope;
use session::Ctx;
use status::StatusSource;
use tls::TlsFiles;

use crate::podset::Caches;

/// Name of the readiness check that shows the link's state (always passing).
pub const CHECK: &str = "link";
/// First reconnect delay.
const BASE_DELAY: Duration = Duration::from_millis(500);

/// Flags of the link to central.
#[derive(clap::Args, Debug, Clone)]
pub struct LinkArgs {
    /// URL of central's agent link, `https://host:port`. Unset: the agent runs without central
    /// (the podset controller only; nothing is applied or deleted).
    #[arg(
        long,
        env = "KSTRETCH_CENTRAL_LINK",
        requires_all = ["tls_ca", "tls_cert", "tls_key"],
        value_parser = parse_central_url
    )]
    pub central: Option<String>,

    /// CA certificate (PEM) central's certificate must be signed by.
    #[arg(long, env = "KSTRETCH_TLS_CA")]
    pub tls_ca: Option<PathBuf>,

    /// The agent's client certificate (PEM). It names the cluster the agent speaks for: URI SAN
    /// `kstretch://cluster/<alias>`, else the subject CN.
    #[arg(long, env = "KSTRETCH_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,

    /// Private key (PEM) of --tls-cert.
    #[arg(long, env = "KSTRETCH_TLS_KEY")]
    pub tls_key: Option<PathBuf>,

    /// Name central's certificate is checked against; default: the host of --central.
    #[arg(long, env = "KSTRETCH_TLS_SERVER_NAME")]
    pub tls_server_name: Option<String>,

    /// Seconds between checks of the TLS files (they are also read before every connection
    /// attempt): renewed certificates are used by the next connection without a restart.
    #[arg(long, env = "KSTRETCH_TLS_RELOAD_SECS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub tls_reload_secs: u64,

    /// Namespace of the ConfigMap `kstretch-agent-central`, which keeps the term of the
    /// central the agent obeys across restarts; default: the agent's own pod's namespace
    /// (`POD_NAMESPACE`), else --namespace (its first namespace).
    #[arg(long, env = "POD_NAMESPACE")]
    pub state_namespace: Option<String>,

    /// The container image this agent runs, told to central: central runs the agent's own
    /// tools (e.g. `recover-quorum` before a controller starts) in pods of this image in this
    /// cluster. The chart sets it; unset, such tools cannot run here.
    #[arg(long, env = "KSTRETCH_AGENT_IMAGE")]
    pub image: Option<String>,

    /// Longest wait between two attempts to reach central (`30s`, `2m`, `500ms`).
    #[arg(
        long,
        env = "KSTRETCH_RECONNECT_MAX_DELAY",
        default_value = "30s",
        value_parser = crate::podset::parse_duration
    )]
    pub reconnect_max_delay: Duration,
}

/// Accepts only `https://` URLs: the link is always mutual TLS.
pub fn parse_central_url(text: &str) -> Result<String, String> {
    let rest = text
        .strip_prefix("https://")
        .ok_or_else(|| format!("{text:?} must be an https:// URL (the link uses mutual TLS)"))?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err(format!("{text:?} names no host"));
    }
    tonic::transport::Endpoint::from_shared(text.to_owned())
        .map_err(|e| format!("{text:?} is not a valid URL: {e}"))?;
    Ok(text.to_owned())
}

/// Who the agent is, for `Hello`.
#[derive(Debug, Clone)]
pub struct AgentIdentity {
    pub cluster_alias: String,
    pub namespaces: Namespaces,
    pub kubernetes_version: String,
}

/// Registers the link's metrics and returns the future that runs it until `shutdown` (it
/// returns at once when `--central` is not set).
pub fn start(
    args: &LinkArgs,
    identity: AgentIdentity,
    client: Client,
    caches: Caches,
    health: Health,
    registry: &mut Registry,
    shutdown: CancellationToken,
) -> impl Future<Output = ()> + Send + 'static {
    let metrics = LinkMetrics::register(registry);
    let tls_metrics = kstretch_runtime::tls::TlsMetrics::register(registry);
    let tls_reload = Duration::from_secs(args.tls_reload_secs);
    let config = match (&args.central, &args.tls_ca, &args.tls_cert, &args.tls_key) {
        (Some(url), Some(ca), Some(cert), Some(key)) => Some((
            url.clone(),
            TlsFiles {
                ca: ca.clone(),
                cert: cert.clone(),
                key: key.clone(),
            },
        )),
        _ => None,
    };
    let server_name = args.tls_server_name.clone();
    let image = args.image.clone().unwrap_or_default();
    let max_delay = args.reconnect_max_delay;
    let state_namespace = args
        .state_namespace
        .clone()
        .or_else(|| identity.namespaces.first().map(str::to_owned));
    async move {
        let Some((url, tls)) = config else {
            tracing::info!("no --central: running without central (nothing is applied or deleted)");
            health.set_ready(CHECK, true, "disabled (no --central)");
            return;
        };
        let Some(state_namespace) = state_namespace else {
            // Without a place for the term, a stale central could drive the agent after a
            // restart: refuse the link rather than run it unguarded.
            tracing::error!(
                "no --state-namespace (nor POD_NAMESPACE, nor --namespace): the link to central stays off"
            );
            health.set_ready(
                CHECK,
                true,
                "off: no --state-namespace to keep the term of the central it obeys",
            );
            return;
        };
        let term = term::TermStore::new(client.clone(), &state_namespace);
        let tls = tls::follow(tls);
        tls.report_to(tls_metrics, Some(health.clone()));
        tokio::spawn(tls.clone().watch(tls_reload, shutdown.clone()));
        let scope = match identity.namespaces.list() {
            Some(list) => Scope::Namespaces(list.iter().cloned().collect()),
            None => Scope::All,
        };
        let (snapshots_tx, snapshots_rx) = watch::channel::<Option<Arc<Snapshot>>>(None);
        let snapshots = Arc::new(snapshots_tx);
        let restarter = restart::Restarter::new(
            client.clone(),
            scope.clone(),
            caches.pods.clone(),
            snapshots.clone(),
        );
        let connect_caller = connect::ConnectCaller::new(scope.clone(), caches.pods.clone());
        let (services, services_watch) =
            status::NodeServices::start(&client, &identity.namespaces, shutdown.clone());
        tokio::spawn(services_watch);
        let (nodes, nodes_watch) = nodes::Nodes::start(&client, shutdown.clone());
        tokio::spawn(nodes_watch);
        let status = StatusSource::new(caches, services, nodes);
        let applier = Applier::new(client, scope.clone(), metrics.clone());
        let (reports_tx, reports_rx) = watch::channel::<Option<Arc<ApplyReport>>>(None);
        let ctx = Ctx {
            url,
            tls,
            server_name,
            hello: Hello {
                agent: Some(BuildInfo {
                    version: env!("CARGO_PKG_VERSION").to_owned(),
                    git_commit: option_env!("KSTRETCH_GIT_COMMIT")
                        .unwrap_or_default()
                        .to_owned(),
                }),
                claimed_cluster_alias: identity.cluster_alias.clone(),
                kubernetes_version: identity.kubernetes_version.clone(),
                namespaces: scope.names(),
                capabilities: vec![EXPLICIT_DELETION.to_owned(), CONNECT_CALLS.to_owned()],
                last_applied: None,
                obeyed_term: 0,
                image,
            },
            applier: applier.clone(),
            snapshots,
            reports: reports_rx,
            status,
            restarter,
            connect_caller,
            metrics: metrics.clone(),
            term,
        };
        tokio::join!(
            apply_loop(applier, snapshots_rx, reports_tx, shutdown.clone()),
            connect_loop(ctx, health, metrics, max_delay, shutdown),
        );
    }
}

/// Applies each snapshot handed over by a stream, latest first (an older one that was not
/// started yet is skipped: snapshots are full, the latest says everything).
async fn apply_loop(
    applier: Applier,
    mut snapshots: watch::Receiver<Option<Arc<Snapshot>>>,
    reports: watch::Sender<Option<Arc<ApplyReport>>>,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            changed = snapshots.changed() => if changed.is_err() { return },
        }
        let snapshot = snapshots.borrow_and_update().clone();
        let Some(snapshot) = snapshot else { continue };
        tokio::select! {
            // Stopping mid-way is safe: applies and deletes are idempotent and the next
            // snapshot starts over.
            _ = shutdown.cancelled() => return,
            report = applier.apply(&snapshot) => {
                reports.send_replace(Some(Arc::new(report)));
            }
        }
    }
}

/// Opens streams to central one after the other, with backoff between them.
async fn connect_loop(
    ctx: Ctx,
    health: Health,
    metrics: LinkMetrics,
    max_delay: Duration,
    shutdown: CancellationToken,
) {
    let mut backoff = Retries::new(BASE_DELAY, max_delay);
    let url = ctx.url.clone();
    health.set_ready(CHECK, true, format!("connecting to {url}"));
    loop {
        metrics.attempt();
        let span = tracing::info_span!("central", %url);
        let mut welcomed = false;
        let mut on_welcome = |welcome: &kstretch_proto::agent::v1::Welcome| {
            welcomed = true;
            metrics.set_connected(true);
            let mismatches: Vec<String> = welcome
                .mismatches
                .iter()
                .map(|m| format!("{} (central {:?}, agent {:?})", m.field, m.central, m.agent))
                .collect();
            let mut detail = format!("connected to {url} as {:?}", welcome.cluster_alias);
            if !mismatches.is_empty() {
                detail.push_str(&format!("; mismatches: {}", mismatches.join(", ")));
            }
            health.set_ready(CHECK, true, detail);
        };
        let outcome =
            tracing::Instrument::instrument(session::run(&ctx, &shutdown, &mut on_welcome), span)
                .await;
        metrics.set_connected(false);
        if shutdown.is_cancelled() {
            return;
        }
        if welcomed {
            backoff.reset();
        }
        let why = match outcome {
            Ok(ended) => {
                tracing::warn!(reason = %ended.reason, "stream to central ended");
                ended.reason
            }
            Err(err) => {
                let hint = err.hint().map(|h| format!(" ({h})")).unwrap_or_default();
                tracing::warn!(reason = err.reason(), "cannot reach central: {err}{hint}");
                format!("{err}{hint}")
            }
        };
        let delay = backoff.next_delay();
        health.set_ready(
            CHECK,
            true,
            format!(
                "not connected to {url}: {why}; retrying in {:.1}s (pods are kept alive without central)",
                delay.as_secs_f64()
            ),
        );
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_central_url_must_be_https() {
        assert_eq!(
            parse_central_url("https://central.kstretch:9443"),
            Ok("https://central.kstretch:9443".to_owned())
        );
        assert!(
            parse_central_url("http://central:9443")
                .unwrap_err()
                .contains("https://")
        );
        assert!(parse_central_url("https://").is_err());
        assert!(parse_central_url("central:9443").is_err());
    }

    #[test]
    fn the_link_needs_all_three_tls_files() {
        use clap::Parser;
        #[derive(Parser, Debug)]
        struct Cli {
            #[command(flatten)]
            link: LinkArgs,
        }
        let cli = Cli::try_parse_from(["agent"]);
        assert!(cli.is_ok_and(|c| c.link.central.is_none()));
        let err = Cli::try_parse_from(["agent", "--central", "https://c:9443", "--tls-ca", "ca"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--tls-cert"), "{err}");
    }
}
