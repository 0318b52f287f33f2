//! One stream to central: connect with mutual TLS, `Hello` / `Welcome`, then hand every
//! snapshot to the applier, forward its reports and podset status changes, and exchange
//! heartbeats, until the stream ends. Ending a stream never deletes anything.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use kstretch_proto::agent::v1::agent_link_client::AgentLinkClient;
use kstretch_proto::agent::v1::agent_message::Body;
use kstretch_proto::agent::v1::{
    AgentMessage, ApplyReport, CentralMessage, Heartbeat, Hello, ProtocolError, Snapshot,
    StatusReport, Welcome,
};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tonic::Streaming;
use tonic::transport::{Channel, Endpoint};

use super::apply::Applier;
use kstretch_runtime::errors::chain;

use super::connect::ConnectCaller;
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
    pub connect_caller: ConnectCaller,
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
    let mut client = open_channel(ctx).await?;
    let obeyed = ctx.term.obeyed().await?;
    let (tx, rx) = mpsc::channel::<AgentMessage>(32);
    let hello = Hello {
        last_applied: ctx.applier.last_applied(),
        obeyed_term: obeyed,
        ..ctx.hello.clone()
    };
    // The channel is empty and has room: this cannot fail.
    let _ = tx.try_send(AgentMessage {
        body: Some(Body::Hello(hello)),
    });
    let (inbound, welcome) = handshake(&mut client, rx).await?;
    log_welcome(&welcome);
    obey(ctx, obeyed, &welcome, &tx).await?;
    on_welcome(&welcome);
    let interval = protocol::heartbeat_interval(&welcome);
    Ok(serve(ctx, shutdown, inbound, tx, interval).await)
}

/// A gRPC client of central over mutual TLS, with keep-alives that notice a dead peer.
async fn open_channel(ctx: &Ctx) -> Result<AgentLinkClient<Channel>, SessionError> {
    let tls = super::tls::client_config(&ctx.tls, ctx.server_name.as_deref())?;
    let invalid_url = |e: tonic::transport::Error| SessionError::Url {
        url: ctx.url.clone(),
        message: e.to_string(),
    };
    let endpoint = Endpoint::from_shared(ctx.url.clone())
        .map_err(invalid_url)?
        .tls_config(tls)
        .map_err(invalid_url)?
        .connect_timeout(HANDSHAKE_TIMEOUT)
        .tcp_keepalive(Some(Duration::from_secs(30)))
        .http2_keep_alive_interval(Duration::from_secs(20))
        .keep_alive_timeout(Duration::from_secs(10))
        .keep_alive_while_idle(true);
    let channel = endpoint.connect().await.map_err(SessionError::Connect)?;
    Ok(AgentLinkClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES))
}

/// Opens the stream with what `outbound` holds (the `Hello`) and waits, for at most
/// [`HANDSHAKE_TIMEOUT`], for central's `Welcome`.
async fn handshake(
    client: &mut AgentLinkClient<Channel>,
    mut outbound: mpsc::Receiver<AgentMessage>,
) -> Result<(Streaming<CentralMessage>, Welcome), SessionError> {
    let outbound = futures::stream::poll_fn(move |cx| outbound.poll_recv(cx));
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
    tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake)
        .await
        .map_err(|_| SessionError::HandshakeTimeout(HANDSHAKE_TIMEOUT))?
}

fn log_welcome(welcome: &Welcome) {
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
}

/// Obeys the central that welcomed the agent if its term is not older than the one obeyed so
/// far (recording a newer one); a stale central is told why and refused.
async fn obey(
    ctx: &Ctx,
    obeyed: u64,
    welcome: &Welcome,
    tx: &mpsc::Sender<AgentMessage>,
) -> Result<(), SessionError> {
    match term::judge(obeyed, welcome.term) {
        Judgement::Same => Ok(()),
        Judgement::Newer(term) => {
            ctx.term.record(term).await?;
            tracing::info!(term, previous = obeyed, "obeying central of a newer term");
            Ok(())
        }
        Judgement::Stale { central, obeyed } => {
            let refused = SessionError::StaleCentral { central, obeyed };
            let _ = tx.try_send(AgentMessage {
                body: Some(Body::Error(ProtocolError {
                    reason: refused.reason().to_owned(),
                    message: refused.to_string(),
                })),
            });
            Err(refused)
        }
    }
}

/// Runs an established stream until it ends: what central sends is acted on; reports, restart
/// results, podset status changes and heartbeats go to central.
async fn serve(
    ctx: &Ctx,
    shutdown: &CancellationToken,
    mut inbound: Streaming<CentralMessage>,
    tx: mpsc::Sender<AgentMessage>,
    interval: Duration,
) -> Ended {
    // Restarts and Connect calls run beside the stream (a delete or a worker may take a
    // while); their answers come back here.
    let (answers_tx, mut answers) = mpsc::channel::<Body>(16);
    let stream = Established {
        ctx,
        tx,
        answers_tx,
    };
    let mut reports = ctx.reports.clone();
    // Only reports of snapshots received from now on: an older one may name a generation of
    // an earlier central process.
    reports.mark_unchanged();
    let mut heartbeat = tokio::time::interval(interval);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut status_tick = tokio::time::interval(STATUS_INTERVAL);
    status_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_status: Option<StatusReport> = None;
    let mut last_received = Instant::now();
    let silence = interval * 3;
    loop {
        let step = tokio::select! {
            _ = shutdown.cancelled() => Err(ended("agent is shutting down")),
            next = inbound.message() => match next {
                Ok(Some(message)) => {
                    last_received = Instant::now();
                    stream.receive(message).await
                }
                Ok(None) => Err(ended("central closed the stream")),
                Err(status) => Err(ended(&format!("stream failed: {}", status_text(&status)))),
            },
            Some(answer) = answers.recv() => stream.send(answer).await,
            changed = reports.changed() => match changed {
                Err(_) => Err(ended("the applier stopped")),
                Ok(()) => {
                    let report = reports.borrow_and_update().clone();
                    match report {
                        Some(report) => {
                            stream.send(Body::ApplyReport(ApplyReport::clone(&report))).await
                        }
                        None => Ok(()),
                    }
                }
            },
            _ = heartbeat.tick() => {
                if last_received.elapsed() > silence {
                    Err(ended(&format!("nothing from central for {silence:?}")))
                } else {
                    let beat = Heartbeat { sent_at: Some(SystemTime::now().into()) };
                    stream.send(Body::Heartbeat(beat)).await
                }
            }
            _ = status_tick.tick() => stream.send_status(&mut last_status).await,
        };
        if let Err(end) = step {
            return end;
        }
    }
}

fn ended(reason: &str) -> Ended {
    Ended {
        reason: reason.to_owned(),
    }
}

/// What an established stream's loop acts with.
struct Established<'a> {
    ctx: &'a Ctx,
    tx: mpsc::Sender<AgentMessage>,
    /// Where restarts and Connect calls running beside the stream send their answers.
    answers_tx: mpsc::Sender<Body>,
}

impl Established<'_> {
    /// Sends `body` to central; the stream ends once central's side is gone.
    async fn send(&self, body: Body) -> Result<(), Ended> {
        let message = AgentMessage { body: Some(body) };
        match self.tx.send(message).await {
            Ok(()) => Ok(()),
            Err(_) => Err(ended("central's side of the stream is gone")),
        }
    }

    /// Sends the podset status if it changed since it was last sent.
    async fn send_status(&self, last: &mut Option<StatusReport>) -> Result<(), Ended> {
        if let Some(report) = self.ctx.status.report()
            && last.as_ref() != Some(&report)
        {
            self.send(Body::StatusReport(report.clone())).await?;
            *last = Some(report);
        }
        Ok(())
    }

    /// Acts on one message from central: a snapshot goes to the applier, a restart or a
    /// Connect call runs beside the stream, a protocol violation is answered with an error.
    async fn receive(&self, message: CentralMessage) -> Result<(), Ended> {
        match protocol::classify(message, true) {
            Ok(FromCentral::Snapshot(snapshot)) => {
                self.ctx.metrics.snapshot_received();
                tracing::info!(
                    generation = snapshot.generation,
                    hash = %snapshot.hash,
                    objects = snapshot.objects.len(),
                    "snapshot received"
                );
                self.ctx.snapshots.send_replace(Some(Arc::new(snapshot)));
            }
            Ok(FromCentral::RestartPod(request)) => {
                let restarter = self.ctx.restarter.clone();
                let done = self.answers_tx.clone();
                tokio::spawn(async move {
                    let result = restarter.restart(request).await;
                    let _ = done.send(Body::RestartResult(result)).await;
                });
            }
            Ok(FromCentral::ConnectCall(call)) => {
                let caller = self.ctx.connect_caller.clone();
                let done = self.answers_tx.clone();
                tokio::spawn(async move {
                    let answer = caller.call(call).await;
                    let _ = done.send(Body::ConnectAnswer(answer)).await;
                });
            }
            Ok(FromCentral::Heartbeat | FromCentral::Welcome(_)) => {}
            Ok(FromCentral::Error(e)) => {
                tracing::warn!(reason = %e.reason, message = %e.message,
                    "central reports an error");
            }
            Err(violation) => {
                self.ctx.metrics.protocol_error();
                tracing::warn!(reason = violation.reason(), "{violation}");
                self.send(Body::Error(violation.to_proto())).await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
