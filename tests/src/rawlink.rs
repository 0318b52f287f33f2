//! A hand-driven client of central's agent link: a member cluster with no apiserver behind it.
//! It completes the handshake with an agent certificate, answers heartbeats, records every
//! snapshot it receives (when, generation, object count and size) and can report each one
//! applied without applying anything. Benchmarks use it as a third member cluster that costs
//! no Kubernetes; the protocol-level tests in `e2e/link.rs` keep their own copy.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use kstretch_proto::agent::v1::agent_link_client::AgentLinkClient;
use kstretch_proto::agent::v1::agent_message::Body;
use kstretch_proto::agent::v1::central_message::Body as CentralBody;
use kstretch_proto::agent::v1::{
    AgentMessage, ApplyReport, CentralMessage, ConnectAnswer, Heartbeat, Hello, ObjectResult,
    Outcome, RestartOutcome, RestartResult, Snapshot,
};
use prost::Message as _;
use tokio::sync::mpsc;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

use crate::certs::CertFiles;

/// What central accepts and sends at most (`kstretch_central::link::MAX_MESSAGE_BYTES`): a big
/// cluster's snapshot is far beyond gRPC's 4 MiB default.
const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// TLS trusting `ca_pem`, presenting `cert` if given; central's certificate is for localhost.
pub fn client_tls(ca_pem: &str, cert: Option<&CertFiles>) -> ClientTlsConfig {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca_pem))
        .domain_name("localhost");
    if let Some(cert) = cert {
        tls = tls.identity(Identity::from_pem(&cert.cert_pem, &cert.key_pem));
    }
    tls
}

/// One open `Connect` stream.
pub struct RawStream {
    tx: mpsc::Sender<AgentMessage>,
    inbound: tonic::Streaming<CentralMessage>,
}

impl std::fmt::Debug for RawStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawStream").finish_non_exhaustive()
    }
}

impl RawStream {
    /// Opens a `Connect` stream to `url`; the error says how it was refused.
    pub async fn open(url: &str, tls: ClientTlsConfig) -> Result<RawStream, String> {
        let channel = Endpoint::from_shared(url.to_owned())
            .map_err(|e| e.to_string())?
            .tls_config(tls)
            .map_err(|e| e.to_string())?
            .connect_timeout(Duration::from_secs(10))
            .connect()
            .await
            .map_err(|e| format!("connect: {e:?}"))?;
        let (tx, mut rx) = mpsc::channel::<AgentMessage>(16);
        let outbound = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
        let client = AgentLinkClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        let response = tokio::time::timeout(Duration::from_secs(10), {
            let mut client = client;
            async move { client.connect(outbound).await }
        })
        .await
        .map_err(|_| "no answer within 10s".to_owned())?
        .map_err(|s| format!("{:?}: {}", s.code(), s.message()))?;
        Ok(RawStream {
            tx,
            inbound: response.into_inner(),
        })
    }

    /// Sends one message; false once the stream is gone.
    pub async fn send(&self, body: Body) -> bool {
        self.tx
            .send(AgentMessage { body: Some(body) })
            .await
            .is_ok()
    }

    /// The next message from central (heartbeats included); `Ok(None)` when the stream ended.
    pub async fn recv(&mut self) -> Result<Option<CentralBody>, String> {
        match self.inbound.message().await {
            Ok(Some(m)) => Ok(m.body),
            Ok(None) => Ok(None),
            Err(s) => Err(format!("{:?}: {}", s.code(), s.message())),
        }
    }

    /// Sends `Hello` claiming `alias` for `namespaces` and waits (10 s at most) for `Welcome`.
    pub async fn hello(&mut self, alias: &str, namespaces: &[String]) -> Result<(), String> {
        let hello = Hello {
            claimed_cluster_alias: alias.to_owned(),
            namespaces: namespaces.to_vec(),
            ..Hello::default()
        };
        if !self.send(Body::Hello(hello)).await {
            return Err("the stream closed before Hello".to_owned());
        }
        loop {
            let next = tokio::time::timeout(Duration::from_secs(10), self.recv())
                .await
                .map_err(|_| "no Welcome within 10s".to_owned())??;
            match next {
                Some(CentralBody::Welcome(_)) => return Ok(()),
                Some(CentralBody::Heartbeat(_)) => {}
                other => return Err(format!("unexpected answer to Hello: {other:?}")),
            }
        }
    }
}

/// One snapshot as it arrived.
#[derive(Debug, Clone)]
pub struct SnapshotSeen {
    pub at: Instant,
    pub wall: SystemTime,
    pub generation: u64,
    pub hash: String,
    pub objects: usize,
    /// Sum of the objects' JSON.
    pub json_bytes: usize,
    /// The whole `CentralMessage` as protobuf, what went over the stream (before TLS).
    pub wire_bytes: usize,
}

impl SnapshotSeen {
    fn of(snapshot: &Snapshot, at: Instant) -> SnapshotSeen {
        let message = CentralMessage {
            body: Some(CentralBody::Snapshot(snapshot.clone())),
        };
        SnapshotSeen {
            at,
            wall: SystemTime::now(),
            generation: snapshot.generation,
            hash: snapshot.hash.clone(),
            objects: snapshot.objects.len(),
            json_bytes: snapshot.objects.iter().map(|o| o.json.len()).sum(),
            wire_bytes: message.encoded_len(),
        }
    }
}

/// What a [`SimulatedMember`] has seen so far.
#[derive(Debug, Default)]
pub struct MemberLog {
    pub snapshots: Vec<SnapshotSeen>,
    /// The last snapshot in full, to look into.
    pub last: Option<Snapshot>,
    /// Why the stream ended, once it has.
    pub ended: Option<String>,
    /// Protocol errors central sent.
    pub errors: Vec<String>,
    /// Every owner any snapshot declared deleted, as `Kind namespace/name uid`, in order.
    pub declared_deleted: Vec<String>,
}

/// A member cluster played by a raw client on its own task; the task ends with the stream or
/// when this is dropped.
#[derive(Debug)]
pub struct SimulatedMember {
    pub alias: String,
    pub log: Arc<Mutex<MemberLog>>,
    task: tokio::task::JoinHandle<()>,
}

impl SimulatedMember {
    /// Connects to central at `url` with `cert` (whose alias is what central knows it by),
    /// claims `alias` for `namespaces`, and serves the stream. With `report_applies`, every
    /// snapshot is answered at once with an `ApplyReport` saying every object was applied, as
    /// an agent with an infinitely fast apiserver would.
    pub async fn connect(
        url: &str,
        cert: &CertFiles,
        alias: &str,
        namespaces: &[String],
        report_applies: bool,
    ) -> Result<SimulatedMember, String> {
        let mut stream = RawStream::open(url, client_tls(&cert.ca_pem, Some(cert))).await?;
        stream.hello(alias, namespaces).await?;
        let log = Arc::new(Mutex::new(MemberLog::default()));
        let task = tokio::spawn(serve(stream, log.clone(), report_applies));
        Ok(SimulatedMember {
            alias: alias.to_owned(),
            log,
            task,
        })
    }

    /// Every snapshot received so far.
    pub fn snapshots(&self) -> Vec<SnapshotSeen> {
        self.lock().snapshots.clone()
    }

    /// The last snapshot received, in full.
    pub fn last(&self) -> Option<Snapshot> {
        self.lock().last.clone()
    }

    /// Why the stream ended, if it has.
    pub fn ended(&self) -> Option<String> {
        self.lock().ended.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MemberLog> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for SimulatedMember {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(mut stream: RawStream, log: Arc<Mutex<MemberLog>>, report_applies: bool) {
    let lock = || log.lock().unwrap_or_else(|e| e.into_inner());
    let ended = loop {
        let body = match stream.recv().await {
            Ok(Some(body)) => body,
            Ok(None) => break "central closed the stream".to_owned(),
            Err(e) => break e,
        };
        let now = Instant::now();
        let reply = match body {
            // Answering each of central's heartbeats keeps the stream alive: central ends it
            // after three silent intervals.
            CentralBody::Heartbeat(_) => Some(Body::Heartbeat(Heartbeat {
                sent_at: Some(SystemTime::now().into()),
            })),
            CentralBody::Snapshot(snapshot) => {
                let seen = SnapshotSeen::of(&snapshot, now);
                let report = report_applies.then(|| Body::ApplyReport(applied(&snapshot)));
                let mut l = lock();
                l.snapshots.push(seen);
                for d in &snapshot.deleted {
                    let entry = format!("{} {}/{} {}", d.kind, d.namespace, d.name, d.uid);
                    if !l.declared_deleted.contains(&entry) {
                        l.declared_deleted.push(entry);
                    }
                }
                l.last = Some(snapshot);
                report
            }
            // There are no pods here to restart.
            CentralBody::RestartPod(request) => Some(Body::RestartResult(RestartResult {
                request_id: request.request_id,
                outcome: RestartOutcome::Gone.into(),
                message: "simulated member: no such pod".to_owned(),
            })),
            // Nor Connect workers to call.
            CentralBody::ConnectCall(call) => Some(Body::ConnectAnswer(ConnectAnswer {
                request_id: call.request_id,
                error: "simulated member: no Connect workers".to_owned(),
                ..Default::default()
            })),
            CentralBody::Error(e) => {
                lock().errors.push(format!("{}: {}", e.reason, e.message));
                None
            }
            CentralBody::Welcome(_) => None,
        };
        if let Some(reply) = reply
            && !stream.send(reply).await
        {
            break "the outbound stream closed".to_owned();
        }
    };
    lock().ended = Some(ended);
}

/// The report of an agent that applied every object of `snapshot` and deleted nothing.
fn applied(snapshot: &Snapshot) -> ApplyReport {
    ApplyReport {
        generation: snapshot.generation,
        hash: snapshot.hash.clone(),
        results: snapshot
            .objects
            .iter()
            .map(|o| ObjectResult {
                r#ref: o.r#ref.clone(),
                outcome: Outcome::Applied.into(),
                ..ObjectResult::default()
            })
            .collect(),
        finished_at: Some(SystemTime::now().into()),
        ..ApplyReport::default()
    }
}
