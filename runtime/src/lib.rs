//! Process plumbing shared by kstretch's binaries: logging, health, metrics and shutdown.
//!
//! Every binary (central, agent) starts the same way: parse [`ObservabilityArgs`], call
//! [`telemetry::init`], create a [`Health`] and a metrics [`Registry`], and serve them with
//! [`http::serve`] next to its real work until [`shutdown::signal`] fires.

pub mod backoff;
pub mod errors;
pub mod events;
pub mod health;
pub mod http;
pub mod kube_client;
pub mod leader_pod;
pub mod lease;
pub mod memory;
pub mod metrics;
pub mod namespaces;
pub mod reflect;
pub mod shutdown;
pub mod telemetry;
pub mod tls;
pub mod watch;

pub use health::Health;
pub use kube_client::KubeArgs;
pub use prometheus_client::registry::Registry;

use std::net::SocketAddr;

/// Flags every kstretch process shares.
#[derive(clap::Args, Debug, Clone)]
pub struct ObservabilityArgs {
    /// Address of the HTTP server for /healthz, /readyz and /metrics.
    #[arg(long, env = "KSTRETCH_HTTP_ADDR", default_value = "0.0.0.0:8080")]
    pub http_addr: SocketAddr,

    /// Log format: `text` for people, `json` for log collectors.
    #[arg(long, env = "KSTRETCH_LOG_FORMAT", value_enum, default_value_t = telemetry::LogFormat::Text)]
    pub log_format: telemetry::LogFormat,

    /// Log filter in `tracing` syntax, e.g. `info` or `info,kstretch_agent=debug`.
    /// `RUST_LOG` wins when set.
    #[arg(long, env = "KSTRETCH_LOG", default_value = "info")]
    pub log: String,
}
