//! `kstretch-agent kafka-exporter`: Kafka Exporter for a `Kafka`'s `spec.kafkaExporter`, run
//! by central as a pod of the agent's image. Each scrape of `/metrics` reads the cluster through
//! kstretch's admin client (brokers, partitions and their offsets, consumer groups and what
//! they committed) and answers in Kafka Exporter's names ([`render`]); `/healthz` answers while
//! the process serves.

mod render;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use kstretch_kadmin::{AdminClient, AdminConfig, OffsetSpec, Tls};
use regex::Regex;

use self::render::{Filters, Group, Partition, Scrape, Topic};

pub const COMMAND: &str = "kafka-exporter";

/// How long one scrape may take before it answers 503 (Prometheus' default timeout is 10 s).
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(9);

/// Serves Kafka Exporter's metrics of one Kafka cluster.
#[derive(clap::Parser, Debug)]
#[command(name = "kstretch-agent kafka-exporter", version)]
pub struct ExporterArgs {
    /// Bootstrap addresses of the Kafka cluster (comma-separated).
    #[arg(
        long,
        env = "KAFKA_EXPORTER_BOOTSTRAP",
        value_delimiter = ',',
        required = true
    )]
    bootstrap: Vec<String>,
    /// PEM file of the CA that signs the brokers' certificates; without it, plain TCP.
    #[arg(long, env = "KAFKA_EXPORTER_TLS_CA")]
    tls_ca: Option<PathBuf>,
    /// PEM files of the exporter's client certificate and key (mutual TLS).
    #[arg(long, env = "KAFKA_EXPORTER_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    #[arg(long, env = "KAFKA_EXPORTER_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Topics shown: a regex matching anywhere in the name.
    #[arg(long, env = "KAFKA_EXPORTER_TOPIC_REGEX", default_value = ".*")]
    topic_regex: String,
    #[arg(long, env = "KAFKA_EXPORTER_TOPIC_EXCLUDE_REGEX")]
    topic_exclude_regex: Option<String>,
    /// Consumer groups shown: a regex matching anywhere in the group ID.
    #[arg(long, env = "KAFKA_EXPORTER_GROUP_REGEX", default_value = ".*")]
    group_regex: String,
    #[arg(long, env = "KAFKA_EXPORTER_GROUP_EXCLUDE_REGEX")]
    group_exclude_regex: Option<String>,
    /// Offsets and lag of every partition of the topics a group consumes (else only of the
    /// partitions assigned to its members now).
    #[arg(long, env = "KAFKA_EXPORTER_SHOW_ALL_OFFSETS", default_value_t = true, action = clap::ArgAction::Set)]
    show_all_offsets: bool,
    /// Where `/metrics` and `/healthz` are served.
    #[arg(long, env = "KAFKA_EXPORTER_LISTEN", default_value = "0.0.0.0:9404")]
    listen: SocketAddr,
    /// Log filter in `tracing` syntax (`RUST_LOG` wins when set).
    #[arg(long, env = "KAFKA_EXPORTER_LOG", default_value = "info")]
    log: String,
}

struct Exporter {
    config: AdminConfig,
    filters: Filters,
    /// The admin client once connected; one read of Kafka at a time (scrapes that arrive
    /// meanwhile wait for their own). Connected at the first scrape that reaches Kafka, so the
    /// exporter serves `/healthz` (and does not restart) while Kafka is still starting.
    admin: tokio::sync::Mutex<Option<AdminClient>>,
}

pub async fn main(args: impl IntoIterator<Item = std::ffi::OsString>) -> anyhow::Result<()> {
    let args = <ExporterArgs as clap::Parser>::parse_from(args);
    kstretch_runtime::telemetry::init(kstretch_runtime::telemetry::LogFormat::Text, &args.log)?;
    serve(args).await
}

fn regex(flag: &str, value: &str) -> anyhow::Result<Regex> {
    Regex::new(value).with_context(|| format!("--{flag} {value:?} is not a regular expression"))
}

fn read_file(path: &PathBuf) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

async fn serve(args: ExporterArgs) -> anyhow::Result<()> {
    let filters = Filters {
        topic: regex("topic-regex", &args.topic_regex)?,
        topic_exclude: args
            .topic_exclude_regex
            .as_deref()
            .map(|r| regex("topic-exclude-regex", r))
            .transpose()?,
        group: regex("group-regex", &args.group_regex)?,
        group_exclude: args
            .group_exclude_regex
            .as_deref()
            .map(|r| regex("group-exclude-regex", r))
            .transpose()?,
        show_all_offsets: args.show_all_offsets,
    };
    let mut config = AdminConfig::new(&args.bootstrap).with_client_id("kstretch-kafka-exporter");
    if let Some(ca) = &args.tls_ca {
        let ca = read_file(ca)?;
        let identity = match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => Some((read_file(cert)?, read_file(key)?)),
            _ => None,
        };
        let identity = identity.as_ref().map(|(c, k)| (c.as_str(), k.as_str()));
        config = config.with_tls(Tls::new(&ca, identity).context("the TLS files")?);
    }
    let exporter = Arc::new(Exporter {
        config,
        filters,
        admin: tokio::sync::Mutex::new(None),
    });
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .with_state(exporter);
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    tracing::info!(addr = %args.listen, bootstrap = %args.bootstrap.join(","), "serving Kafka Exporter's /metrics");
    let shutdown = kstretch_runtime::shutdown::signal();
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
        .context("HTTP server")
}

async fn metrics(State(exporter): State<Arc<Exporter>>) -> Response {
    let mut admin = exporter.admin.lock().await;
    let scrape = async {
        let client = match admin.as_ref() {
            Some(client) => client,
            None => admin.insert(AdminClient::connect(exporter.config.clone()).await?),
        };
        read(client, &exporter.filters).await
    };
    match tokio::time::timeout(SCRAPE_TIMEOUT, scrape).await {
        Ok(Ok(scrape)) => (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            render::render(&scrape, &exporter.filters),
        )
            .into_response(),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "cannot read Kafka");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("cannot read Kafka: {e}\n"),
            )
                .into_response()
        }
        Err(_) => {
            tracing::warn!(after = ?SCRAPE_TIMEOUT, "reading Kafka timed out");
            (StatusCode::SERVICE_UNAVAILABLE, "reading Kafka timed out\n").into_response()
        }
    }
}

/// One read of the cluster: the topics and groups `filters` select. A group that cannot be
/// read now (its coordinator moving) is left out of this scrape, with a log line.
async fn read(admin: &AdminClient, filters: &Filters) -> Result<Scrape, kstretch_kadmin::Error> {
    let cluster = admin.describe_cluster(false).await?;
    let brokers = cluster
        .brokers
        .iter()
        .map(|b| (b.id, format!("{}:{}", b.host, b.port)))
        .collect();
    let described = admin.describe_topics(None).await?;
    let described: Vec<_> = described
        .into_iter()
        .filter(|t| filters.topic(&t.name))
        .collect();
    let leaders = described
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| ((t.name.clone(), p.index), p.leader))
        })
        .collect();
    let newest = admin.list_offsets(&leaders, OffsetSpec::Latest).await?;
    let oldest = admin.list_offsets(&leaders, OffsetSpec::Earliest).await?;
    let topics = described
        .into_iter()
        .map(|t| Topic {
            partitions: t
                .partitions
                .into_iter()
                .map(|p| {
                    let key = (t.name.clone(), p.index);
                    Partition {
                        index: p.index,
                        leader: p.leader,
                        replicas: p.replicas,
                        isr: p.isr,
                        newest: newest.get(&key).copied(),
                        oldest: oldest.get(&key).copied(),
                    }
                })
                .collect(),
            name: t.name,
        })
        .collect();
    let mut groups = Vec::new();
    for listed in admin.list_groups().await? {
        if !filters.group(&listed.group_id) {
            continue;
        }
        match read_group(admin, &listed.group_id).await {
            Ok(group) => groups.push(group),
            Err(e) => {
                tracing::warn!(group = %listed.group_id, error = %e, "cannot read a consumer group")
            }
        }
    }
    Ok(Scrape {
        brokers,
        topics,
        groups,
    })
}

async fn read_group(admin: &AdminClient, id: &str) -> Result<Group, kstretch_kadmin::Error> {
    let coordinator = admin.group_coordinator(id).await?;
    let described = admin.describe_group(id, coordinator).await?;
    let committed = admin.committed_offsets(id, coordinator).await?;
    Ok(Group {
        id: id.to_owned(),
        members: described.members,
        assigned: described.assigned,
        committed,
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[tokio::test]
    async fn a_regex_that_does_not_compile_stops_start_up_naming_it() {
        let args = ExporterArgs::parse_from([
            "kafka-exporter",
            "--bootstrap",
            "127.0.0.1:1",
            "--group-exclude-regex",
            "(",
        ]);
        let error = serve(args).await.unwrap_err();
        assert_eq!(
            error.to_string(),
            "--group-exclude-regex \"(\" is not a regular expression"
        );
    }

    #[tokio::test]
    async fn a_scrape_while_kafka_is_unreachable_answers_503_and_connects_later() {
        let exporter = Arc::new(Exporter {
            // Nothing listens on port 1.
            config: AdminConfig::new(["127.0.0.1:1"]).with_connect_timeout(Duration::from_secs(1)),
            filters: Filters {
                topic: Regex::new(".*").unwrap(),
                topic_exclude: None,
                group: Regex::new(".*").unwrap(),
                group_exclude: None,
                show_all_offsets: true,
            },
            admin: tokio::sync::Mutex::new(None),
        });
        let response = metrics(State(exporter.clone())).await;
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(exporter.admin.lock().await.is_none(), "not connected");
    }
}
