//! Logging set-up: one `tracing` subscriber per process, text or JSON.

use tracing_subscriber::{EnvFilter, fmt, prelude::*};

/// How log lines are written.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// Installs the global subscriber. `RUST_LOG` overrides `default_filter` so an operator can
/// turn up one module without restarting with other flags.
///
/// Returns an error if a subscriber is already installed or the filter does not parse.
pub fn init(format: LogFormat, default_filter: &str) -> Result<(), InitError> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(env) if !env.is_empty() => EnvFilter::try_new(env)?,
        _ => EnvFilter::try_new(default_filter)?,
    };
    let registry = tracing_subscriber::registry().with(filter);
    match format {
        LogFormat::Text => registry.with(fmt::layer().with_target(true)).try_init()?,
        LogFormat::Json => registry
            .with(
                fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(true),
            )
            .try_init()?,
    }
    Ok(())
}

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("invalid log filter: {0}")]
    Filter(#[from] tracing_subscriber::filter::ParseError),
    #[error("a logger is already installed: {0}")]
    AlreadyInstalled(#[from] tracing_subscriber::util::TryInitError),
}
