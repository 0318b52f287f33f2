//! One stream to central: connect with mutual TLS, `Hello` / `Welcome`, then hand every
//! snapshot to the applier, forward its reports and podset status changes, and exchange
//! heartbeats, until the stream ends. Ending a stream never deletes anything.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use kstretch_proto::agent::v1::agent_link_client::AgentLinkClient;
use kstretch_proto::agent::v1::agent_message::Body;
use kstretch_proto::agent::v1::{
    AgentMessage, ApplyReport, Heartbeat, Hello, ProtocolError, RestartResult, Snapshot,
    StatusReport, Welcome,
};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tonic::transport::Endpoint;

use super::apply::Applier;
use super::metrics::LinkMetrics;
use super::protocol::{self, FromCentral};
use super::restart::Restarter;
use super::status::StatusSource;
use super::term::{self, Judgement, TermError, TermStore};
use super::tls::{ClientTls, TlsError};

/// Bound on connecting, and on central's answer to `Hello`.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the podset status is compared with what was last sent.
const STATUS_INTERVAL: Duration = Duration::from_secs(2);
/// Largest message accepted or sent (a big cluster's snapshot is far beyond gRPC's 4 MiB).
const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// What every stream of one agent shares.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    pub url: String,
    pub tls: ClientTls,
    pub server_name: Option<String>,
    /// `Hello` without `last_applied` (filled in per stream).
    pub hello: Hello,
    pub applier: Applier,
    pub snapshots: Arc<watch::Sender<Option<Arc<Snapshot>>>>,
    pub reports: watch::Receiver<Option<Arc<ApplyReport>>>,
    pub status: StatusSource,
    pub restarter: Restarter,
    pub metrics: LinkMetrics,
    /// The term of the central this agent obeys.
    pub term: TermStore,
}

/// Why a stream could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("invalid central URL {url:?}: {message}")]
    Url { url: String, message: String },
    #[error("cannot connect to central: {}", chain(.0))]
    Connect(#[source] tonic::transport::Error),
    #[error("central refused the stream: {}", status_text(.0))]
    Open(#[source] tonic::Status),
    #[error("central did not answer Hello within {0:?}")]
    HandshakeTimeout(Duration),
    #[error("central refused the handshake: {reason}: {message}")]
    Refused { reason: String, message: String },
    #[error("central closed the stream during the handshake")]
    ClosedInHandshake,
    #[error("stream failed during the handshake: {}", status_text(.0))]
    Handshake(#[source] tonic::Status),
    #[error(
        "central's term {central} is older than the term {obeyed} this agent obeys: it was replaced by another central; nothing it sends is applied (point --central at the current one)"
    )]
    StaleCentral { central: u64, obeyed: u64 },
    #[error("cannot tell which central to obey: {0}")]
    Term(#[from] TermError),
}

impl SessionError {
    /// A hint for the person reading the log. A connection that central's TLS layer closes
    /// while the stream is being opened is how a refused client certificate looks from the
    /// agent's side (TLS 1.3 reports the refusal after the handshake, often only by closing).
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            SessionError::Open(status) | SessionError::Handshake(status)
                if std::error::Error::source(status).is_some() =>
            {
                Some(
                    "central may have refused the client certificate: is --tls-cert signed by \
                     the CA central trusts (its --tls-ca)?",
                )
            }
            SessionError::Connect(err) if chain(err).contains("certificate") => Some(
                "central's certificate was not accepted: is it signed by --tls-ca, and does it \
                 name the host of --central (or --tls-server-name)?",
            ),
            _ => None,
        }
    }

    /// Stable, machine-readable reason.
    pub fn reason(&self) -> &'static str {
        match self {
            SessionError::Tls(e) => e.reason(),
            SessionError::Url { .. } => "invalid-url",
            SessionError::Connect(_) => "connect",
            SessionError::Open(_) => "open",
            SessionError::HandshakeTimeout(_) => "handshake-timeout",
            SessionError::Refused { .. } => "refused",
            SessionError::ClosedInHandshake => "closed-in-handshake",
            SessionError::Handshake(_) => "handshake",
            SessionError::StaleCentral { .. } => "stale-central",
            SessionError::Term(_) => "term-store",
        }
    }
}

/// An error with its causes, `outer: inner: innermost` (tonic's transport errors say only
/// "transport error" on their own; the cause says e.g. which certificate was refused).
pub fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let next = cause.to_string();
        if !text.ends_with(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = cause.source();
    }
    text
}

/// `message (Code)` and the causes of a status.
pub fn status_text(status: &tonic::Status) -> String {
    let mut text = format!("{} ({:?})", status.message(), status.code());
    if let Some(source) = std::error::Error::source(status) {
        text.push_str(": ");
        text.push_str(&chain(source));
    }
    text
}

/// How an established stream ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ended {
    pub reason: String,
}

/// Called once the handshake is done, with central's `Welcome`.
pub(crate) type OnWelcome<'a> = &'a mut (dyn FnMut(&Welcome) + Send);

/// Opens one stream and runs it to its end.
pub(crate) async fn run(
    ctx: &Ctx,
    shutdown: &CancellationToken,
    on_welcome: OnWelcome<'_>,
) -> Result<Ended, SessionError> {
    let tls = super::tls::client_config(&ctx.tls, ctx.server_name.as_deref())?;
    let endpoint = Endpoint::from_shared(ctx.url.clone())
        .map_err(|e| SessionError::Url {
            url: ctx.url.clone(),
            message: e.to_string(),
        })?
        .tls_config(tls)
        .map_err(|e| SessionError::Url {
            url: ctx.url.clone(),
            message: e.to_string(),
        })?
        .connect_timeout(HANDSHAKE_TIMEOUT)
        .tcp_keepalive(Some(Duration::from_secs(30)))
        .http2_keep_alive_interval(Duration::from_secs(20))
        .keep_alive_timeout(Duration::from_secs(10))
        .keep_alive_while_idle(true);
    let channel = endpoint.connect().await.map_err(SessionError::Connect)?;
    let mut client = AgentLinkClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);

    let obeyed = ctx.term.obeyed().await?;
    let (tx, mut rx) = mpsc::channel::<AgentMessage>(32);
    let hello = Hello {
        last_applied: ctx.applier.last_applied(),
        obeyed_term: obeyed,
        ..ctx.hello.clone()
    };
    // The channel is empty and has room: this cannot fail.
    let _ = tx.try_send(AgentMessage {
        body: Some(Body::Hello(hello)),
    });
    let outbound = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));

    let handshake = async {
        let response = client.connect(outbound).await.map_err(SessionError::Open)?;
        let mut inbound = response.into_inner();
        let first = inbound.message().await.map_err(SessionError::Handshake)?;
        let welcome = match first.map(|m| protocol::classify(m, false)) {
            Some(Ok(FromCentral::Welcome(w))) => w,
            Some(Ok(FromCentral::Error(e))) => {
                return Err(SessionError::Refused {
                    reason: e.reason,
                    message: e.message,
                });
            }
            Some(Ok(_)) | Some(Err(_)) => {
                return Err(SessionError::Refused {
                    reason: "welcome-expected".into(),
                    message: "central's first message was not Welcome".into(),
                });
            }
            None => return Err(SessionError::ClosedInHandshake),
        };
        Ok((inbound, welcome))
    };
    let (mut inbound, welcome) = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake)
        .await
        .map_err(|_| SessionError::HandshakeTimeout(HANDSHAKE_TIMEOUT))??;

    let central_version = welcome
        .central
        .as_ref()
        .map(|b| b.version.clone())
        .unwrap_or_default();
    tracing::info!(
        cluster = %welcome.cluster_alias,
        central = %central_version,
        "connected to central"
    );
    for m in &welcome.mismatches {
        tracing::warn!(field = %m.field, central = %m.central, agent = %m.agent,
            "central reports a mismatch (not fatal)");
    }
    match term::judge(obeyed, welcome.term) {
        Judgement::Same => {}
        Judgement::Newer(term) => {
            ctx.term.record(term).await?;
            tracing::info!(term, previous = obeyed, "obeying central of a newer term");
        }
        Judgement::Stale { central, obeyed } => {
            let refused = SessionError::StaleCentral { central, obeyed };
            let _ = tx.try_send(AgentMessage {
                body: Some(Body::Error(ProtocolError {
                    reason: refused.reason().to_owned(),
                    message: refused.to_string(),
                })),
            });
            return Err(refused);
        }
    }
    on_welcome(&welcome);
    let interval = protocol::heartbeat_interval(&welcome);

    let mut reports = ctx.reports.clone();
    // Only reports of snapshots received from now on: an older one may name a generation of
    // an earlier central process.
    reports.mark_unchanged();
    let mut heartbeat = tokio::time::interval(interval);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut status_tick = tokio::time::interval(STATUS_INTERVAL);
    status_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_status: Option<StatusReport> = None;
    // Restarts run beside the stream (a delete may take a while); results come back here.
    let (restarted_tx, mut restarted) = mpsc::channel::<RestartResult>(16);
    let mut last_received = Instant::now();
    let silence = interval * 3;

    let send = |body: Body| {
        let tx = tx.clone();
        async move { tx.send(AgentMessage { body: Some(body) }).await.is_ok() }
    };
    let gone = || Ended {
        reason: "central's side of the stream is gone".into(),
    };

    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(Ended { reason: "agent is shutting down".into() }),
            next = inbound.message() => match next {
                Ok(Some(message)) => {
                    last_received = Instant::now();
                    match protocol::classify(message, true) {
                        Ok(FromCentral::Snapshot(snapshot)) => {
                            ctx.metrics.snapshot_received();
                            tracing::info!(
                                generation = snapshot.generation,
                                hash = %snapshot.hash,
                                objects = snapshot.objects.len(),
                                "snapshot received"
                            );
                            ctx.snapshots.send_replace(Some(Arc::new(snapshot)));
                        }
                        Ok(FromCentral::RestartPod(request)) => {
                            let restarter = ctx.restarter.clone();
                            let done = restarted_tx.clone();
                            tokio::spawn(async move {
                                let _ = done.send(restarter.restart(request).await).await;
                            });
                        }
                        Ok(FromCentral::Heartbeat | FromCentral::Welcome(_)) => {}
                        Ok(FromCentral::Error(e)) => {
                            tracing::warn!(reason = %e.reason, message = %e.message,
                                "central reports an error");
                        }
                        Err(violation) => {
                            ctx.metrics.protocol_error();
                            tracing::warn!(reason = violation.reason(), "{violation}");
                            if !send(Body::Error(violation.to_proto())).await {
                                return Ok(gone());
                            }
                        }
                    }
                }
                Ok(None) => return Ok(Ended { reason: "central closed the stream".into() }),
                Err(status) => {
                    return Ok(Ended { reason: format!("stream failed: {}", status_text(&status)) });
                }
            },
            Some(result) = restarted.recv() => {
                if !send(Body::RestartResult(result)).await {
                    return Ok(gone());
                }
            }
            changed = reports.changed() => {
                if changed.is_err() {
                    return Ok(Ended { reason: "the applier stopped".into() });
                }
                let report = reports.borrow_and_update().clone();
                if let Some(report) = report
                    && !send(Body::ApplyReport(ApplyReport::clone(&report))).await
                {
                    return Ok(gone());
                }
            }
            _ = heartbeat.tick() => {
                if last_received.elapsed() > silence {
                    return Ok(Ended { reason: format!("nothing from central for {silence:?}") });
                }
                let beat = Heartbeat { sent_at: Some(SystemTime::now().into()) };
                if !send(Body::Heartbeat(beat)).await {
                    return Ok(gone());
                }
            }
            _ = status_tick.tick() => {
                if let Some(report) = ctx.status.report()
                    && last_status.as_ref() != Some(&report)
                {
                    if !send(Body::StatusReport(report.clone())).await {
                        return Ok(gone());
                    }
                    last_status = Some(report);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    struct Layer(&'static str, #[source] Option<Box<Layer>>);

    #[test]
    fn errors_show_their_causes_once() {
        let inner = Layer("invalid peer certificate: UnknownIssuer", None);
        let middle = Layer("tls handshake", Some(Box::new(inner)));
        let outer = Layer("transport error", Some(Box::new(middle)));
        assert_eq!(
            chain(&outer),
            "transport error: tls handshake: invalid peer certificate: UnknownIssuer"
        );
        let repeated = Layer("x: y", Some(Box::new(Layer("y", None))));
        assert_eq!(chain(&repeated), "x: y");
    }

    #[test]
    fn a_connection_closed_while_opening_hints_at_the_certificate() {
        let broken = std::io::Error::new(std::io::ErrorKind::BrokenPipe, "broken pipe");
        let closed = SessionError::Open(tonic::Status::from_error(Box::new(broken)));
        assert!(closed.hint().is_some_and(|h| h.contains("--tls-ca")));
        assert_eq!(closed.reason(), "open");
        let refused = SessionError::Open(tonic::Status::unauthenticated("not a valid alias"));
        assert!(refused.hint().is_none(), "central said why itself");
        assert!(
            SessionError::HandshakeTimeout(Duration::from_secs(1))
                .hint()
                .is_none()
        );
    }

    #[test]
    fn statuses_show_code_and_message() {
        let status = tonic::Status::unauthenticated("no cluster");
        assert_eq!(status_text(&status), "no cluster (Unauthenticated)");
    }
}
