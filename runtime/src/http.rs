//! The HTTP side port of every process: `/healthz`, `/readyz` and Prometheus `/metrics`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::health::{CheckReport, Health};

#[derive(Clone)]
struct AppState {
    health: Health,
    registry: Arc<Registry>,
}

/// Why the HTTP server stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("HTTP server failed: {0}")]
    Serve(#[from] std::io::Error),
}

/// Binds `addr` now (so a port clash fails start-up loudly) and returns the future that serves
/// until `shutdown` is cancelled, plus the address actually bound (useful with port 0).
pub async fn bind(
    addr: SocketAddr,
    health: Health,
    registry: Registry,
    shutdown: CancellationToken,
) -> Result<
    (
        SocketAddr,
        impl std::future::Future<Output = Result<(), ServeError>>,
    ),
    ServeError,
> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    let local = listener.local_addr()?;
    let app = router(health, registry);
    let serve = async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await?;
        Ok(())
    };
    tracing::info!(addr = %local, "serving /healthz, /readyz, /metrics");
    Ok((local, serve))
}

fn router(health: Health, registry: Registry) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(AppState {
            health,
            registry: Arc::new(registry),
        })
}

async fn healthz(State(state): State<AppState>) -> Response {
    let (ok, reports) = state.health.liveness();
    report(ok, &reports)
}

async fn readyz(State(state): State<AppState>) -> Response {
    let (ok, reports) = state.health.readiness();
    report(ok, &reports)
}

fn report(ok: bool, reports: &[CheckReport]) -> Response {
    let mut body = String::from(if ok { "ok\n" } else { "failing\n" });
    for r in reports {
        let mark = if r.ok { "+" } else { "-" };
        body.push_str(&format!("[{mark}] {}: {}\n", r.name, r.detail));
    }
    let code = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, body).into_response()
}

async fn metrics(State(state): State<AppState>) -> Response {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &state.registry) {
        Ok(()) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        )
            .into_response(),
        Err(err) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot encode metrics: {err}\n"),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream.write_all(req.as_bytes()).await.unwrap();
        let mut raw = String::new();
        stream.read_to_string(&mut raw).await.unwrap();
        let code = raw[9..12].parse().unwrap();
        let body = raw.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
        (code, body)
    }

    #[tokio::test]
    async fn serves_health_readiness_and_metrics() {
        let health = Health::new();
        let mut registry = Registry::with_prefix("kstretch_test");
        let counter = Counter::<u64>::default();
        registry.register("things", "things seen", counter.clone());
        counter.inc();
        let token = CancellationToken::new();
        let (addr, serve) = bind(
            "127.0.0.1:0".parse().unwrap(),
            health.clone(),
            registry,
            token.clone(),
        )
        .await
        .unwrap();
        let server = tokio::spawn(serve);

        assert_eq!(get(addr, "/healthz").await.0, 200);
        let (code, body) = get(addr, "/readyz").await;
        assert_eq!(code, 503, "no check registered yet: {body}");

        health.set_ready("kubernetes", false, "connection refused");
        let (code, body) = get(addr, "/readyz").await;
        assert_eq!(code, 503);
        assert!(
            body.contains("[-] kubernetes: connection refused"),
            "{body}"
        );

        health.set_ready("kubernetes", true, "v1.36.3");
        assert_eq!(get(addr, "/readyz").await.0, 200);

        let (code, body) = get(addr, "/metrics").await;
        assert_eq!(code, 200);
        assert!(body.contains("kstretch_test_things_total 1"), "{body}");

        token.cancel();
        server.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn bind_reports_a_taken_port() {
        let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = taken.local_addr().unwrap();
        let err = bind(
            addr,
            Health::new(),
            Registry::default(),
            CancellationToken::new(),
        )
        .await
        .err()
        .unwrap();
        assert!(
            err.to_string()
                .contains(&format!("cannot listen on {addr}")),
            "{err}"
        );
    }
}
