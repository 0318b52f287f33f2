//! The agent link, central's side: an mTLS gRPC server (`kstretch.agent.v1.AgentLink`, plus
//! `grpc.health.v1` and reflection) on which every member cluster's agent holds one stream.
//!
//! - Identity: the cluster alias of the agent's client certificate ([`identity`]); a client
//!   without a certificate signed by the configured CA never gets past the TLS handshake.
//! - Desired state: [`DesiredStates`] holds one full snapshot per cluster alias; each stream
//!   pushes the snapshot of its alias after the handshake, on every change and periodically.
//! - Agents: [`Agents`] records who is connected and what each applied and reports (for
//!   `ListAgents`, readiness detail and metrics).

pub mod agents;
pub mod calls;
pub mod connect;
pub mod desired;
pub mod identity;
pub mod metrics;
pub mod owners;
pub mod protocol;
pub mod restart;
pub mod session;
pub mod shared;
pub mod tls;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use futures::Stream;
use kstretch_proto::agent::v1::agent_link_server::{AgentLink, AgentLinkServer, SERVICE_NAME};
use kstretch_proto::agent::v1::{AgentMessage, CentralMessage};
use tonic::{Request, Response, Status, Streaming};
use tracing::Instrument as _;

pub use agents::{AgentRecord, Agents};
pub use desired::{
    DesiredError, DesiredSnapshot, DesiredStates, ObjectKey, OwnerEntry, Ownership, Retained,
    SetOutcome,
};
pub use identity::{ClusterIdentity, IdentityError};
pub use metrics::LinkMetrics;
pub use owners::{Owner, OwnerKind, Owners, Part};
pub use shared::{Link, LinkConfig, MAX_MESSAGE_BYTES};
pub use tls::{ServerTls, TlsError, TlsFiles};

/// The `AgentLink` gRPC service.
#[derive(Debug, Clone)]
pub struct AgentLinkService {
    link: Link,
}

impl AgentLinkService {
    pub fn new(link: Link) -> Self {
        Self { link }
    }
}

type CentralStream = Pin<Box<dyn Stream<Item = Result<CentralMessage, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl AgentLink for AgentLinkService {
    type ConnectStream = CentralStream;

    async fn connect(
        &self,
        request: Request<Streaming<AgentMessage>>,
    ) -> Result<Response<Self::ConnectStream>, Status> {
        let remote = request.remote_addr();
        let certs = request.peer_certs();
        let identity =
            identity::from_peer_certs(certs.as_deref().map(Vec::as_slice)).map_err(|err| {
                self.link.metrics.refused(err.reason());
                tracing::warn!(
                    ?remote,
                    reason = err.reason(),
                    "refused agent stream: {err}"
                );
                Status::unauthenticated(err.to_string())
            })?;
        let (tx, mut rx) = tokio::sync::mpsc::channel(16);
        let span = tracing::info_span!("agent", cluster = %identity.alias, ?remote);
        tokio::spawn(
            session::run(
                self.link.clone(),
                identity,
                remote,
                request.into_inner(),
                tx,
            )
            .instrument(span),
        );
        let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
        Ok(Response::new(Box::pin(stream)))
    }
}

/// Why the link server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("cannot listen on {addr} for the agent link: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("invalid TLS configuration for the agent link: {0}")]
    Tls(rustls::Error),
    #[error("cannot build the reflection service: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("agent link server failed: {0}")]
    Transport(tonic::transport::Error),
}

impl LinkError {
    /// Stable, machine-readable reason.
    pub fn reason(&self) -> &'static str {
        match self {
            LinkError::Bind { .. } => "bind",
            LinkError::Tls(_) => "tls",
            LinkError::Reflection(_) => "reflection",
            LinkError::Transport(_) => "transport",
        }
    }
}

/// Binds `addr` now (a clash fails start-up) and returns the address bound and the future
/// that serves the link, health and reflection with mTLS until the link's shutdown token.
pub async fn bind(
    addr: SocketAddr,
    tls: &ServerTls,
    link: Link,
) -> Result<
    (
        SocketAddr,
        impl Future<Output = Result<(), LinkError>> + use<>,
    ),
    LinkError,
> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| LinkError::Bind { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| LinkError::Bind { addr, source })?;
    // TLS is terminated by `tls::incoming` (not tonic) so that renewed certificates are used
    // by new handshakes without a restart.
    let config = tls.config().map_err(LinkError::Tls)?;
    let incoming = tls::incoming(
        listener,
        config,
        link.metrics.clone(),
        link.shutdown.clone(),
    );

    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<AgentLinkServer<AgentLinkService>>()
        .await;
    let reflection = crate::grpc::reflection(&[SERVICE_NAME])?;
    let service = AgentLinkServer::new(AgentLinkService::new(link.clone()))
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let router = tonic::transport::Server::builder()
        // No server-wide request timeout: it would cut the long-lived Connect stream. Dead
        // peers are found by HTTP/2 keepalive and the link's own heartbeats instead.
        .http2_keepalive_interval(Some(Duration::from_secs(20)))
        .http2_keepalive_timeout(Some(Duration::from_secs(10)))
        .add_service(health_service)
        .add_service(reflection)
        .add_service(service);
    tracing::info!(addr = %local, "serving the agent link (mTLS)");
    let shutdown = link.shutdown.clone();
    let serve = async move {
        router
            .serve_with_incoming_shutdown(incoming, shutdown.cancelled_owned())
            .await
            .map_err(LinkError::Transport)
    };
    Ok((local, serve))
}
