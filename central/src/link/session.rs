//! One agent's stream on central's side: the handshake, pushing snapshots, heartbeats, and
//! recording what the agent reports. Ends when the agent goes away, falls silent, sends
//! something undecodable, is superseded by a newer stream, or central shuts down.

use std::net::SocketAddr;
use std::time::{Instant, SystemTime};

use kstretch_proto::agent::v1::central_message::Body;
use kstretch_proto::agent::v1::{
    AgentMessage, BuildInfo, CentralMessage, Heartbeat, ObjectRef, Outcome, Snapshot, Welcome,
};
use tokio::sync::mpsc;
use tonic::{Status, Streaming};

use super::agents::AgentRecord;
use super::desired::{DesiredSnapshot, OwnerEntry};
use super::identity::ClusterIdentity;
use super::protocol::{self, Incoming, Phase, Violation};
use super::shared::Link;

pub(crate) type Outbox = mpsc::Sender<Result<CentralMessage, Status>>;

/// Central's build, as sent in `Welcome`.
pub fn central_build() -> BuildInfo {
    BuildInfo {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        git_commit: option_env!("KSTRETCH_GIT_COMMIT")
            .unwrap_or_default()
            .to_owned(),
    }
}

struct Sender<'a> {
    link: &'a Link,
    alias: &'a str,
    out: Outbox,
}

impl Sender<'_> {
    /// False once the agent's side of the stream is gone.
    async fn send(&self, body: Body) -> bool {
        self.out
            .send(Ok(CentralMessage { body: Some(body) }))
            .await
            .is_ok()
    }

    async fn refuse(&self, violation: &Violation) -> bool {
        self.link.metrics.protocol_error(violation.reason());
        tracing::warn!(reason = violation.reason(), "{violation}");
        self.send(Body::Error(violation.to_proto())).await
    }

    async fn snapshot(&self, snapshot: &DesiredSnapshot) -> bool {
        tracing::info!(
            generation = snapshot.generation,
            hash = %snapshot.hash,
            objects = snapshot.objects.len(),
            "sending snapshot"
        );
        let sent = self.send(Body::Snapshot(to_proto(snapshot))).await;
        if sent {
            self.link.metrics.snapshot_sent(self.alias);
        }
        sent
    }
}

/// The snapshot as it goes on the wire.
pub fn to_proto(snapshot: &DesiredSnapshot) -> Snapshot {
    Snapshot {
        generation: snapshot.generation,
        hash: snapshot.hash.clone(),
        objects: snapshot
            .objects
            .iter()
            .map(|o| kstretch_proto::agent::v1::DesiredObject {
                r#ref: Some(ObjectRef {
                    api_version: o.key.api_version.clone(),
                    kind: o.key.kind.clone(),
                    namespace: o.key.namespace.clone(),
                    name: o.key.name.clone(),
                }),
                json: o.json.clone(),
            })
            .collect(),
        retained: snapshot
            .ownership
            .retained
            .iter()
            .map(|r| kstretch_proto::agent::v1::RetainedCluster {
                namespace: r.namespace.clone(),
                cluster: r.cluster.clone(),
            })
            .collect(),
        owners: snapshot
            .ownership
            .owners
            .iter()
            .map(owner_to_proto)
            .collect(),
        deleted: snapshot
            .ownership
            .deleted
            .iter()
            .map(owner_to_proto)
            .collect(),
    }
}

fn owner_to_proto(o: &OwnerEntry) -> kstretch_proto::agent::v1::Owner {
    kstretch_proto::agent::v1::Owner {
        kind: o.kind.clone(),
        namespace: o.namespace.clone(),
        name: o.name.clone(),
        uid: o.uid.clone(),
        retain: o.retain,
    }
}

/// Runs one stream to its end.
pub(crate) async fn run(
    link: Link,
    identity: ClusterIdentity,
    remote: Option<SocketAddr>,
    mut inbound: Streaming<AgentMessage>,
    out: Outbox,
) {
    let alias = identity.alias.clone();
    let tx = Sender {
        link: &link,
        alias: &alias,
        out,
    };
    let config = link.config.clone();

    // Handshake: nothing but Hello is accepted until it arrives.
    let deadline = tokio::time::Instant::now() + config.hello_timeout;
    let hello = loop {
        let next = tokio::select! {
            _ = link.shutdown.cancelled() => return,
            _ = tokio::time::sleep_until(deadline) => {
                tx.refuse(&Violation::HelloTimeout(config.hello_timeout)).await;
                return;
            }
            next = inbound.message() => next,
        };
        match next {
            Ok(Some(message)) => match protocol::classify(message, Phase::AwaitingHello) {
                Ok(Incoming::Hello(hello)) => break hello,
                Ok(_) => {}
                Err(violation) => {
                    if !tx.refuse(&violation).await {
                        return;
                    }
                }
            },
            Ok(None) => return,
            Err(status) => {
                refuse_broken(&tx, &status).await;
                return;
            }
        }
    };

    let mismatches = protocol::mismatches(&central_build(), &hello, &alias);
    for m in &mismatches {
        tracing::warn!(field = %m.field, central = %m.central, agent = %m.agent,
            "agent differs from central (reported, not fatal)");
    }
    let record = AgentRecord::connected(
        alias.clone(),
        hello.claimed_cluster_alias.clone(),
        hello.agent.clone().unwrap_or_default(),
        hello.kubernetes_version.clone(),
        hello.namespaces.clone(),
        remote,
        mismatches.clone(),
    )
    .with_capabilities(hello.capabilities.clone())
    .with_image(hello.image.clone());
    let (stream, superseded) = link.agents.connect(record);
    if hello.obeyed_term > config.term {
        // A newer central took over while this one was away: it must not drive the agent (the
        // agent would refuse it too).
        let stale = Violation::StaleCentral {
            own: config.term,
            obeyed: hello.obeyed_term,
        };
        tracing::error!(
            own_term = config.term,
            obeyed_term = hello.obeyed_term,
            "the agent obeys a newer central: this central is stale and sends it nothing"
        );
        tx.refuse(&stale).await;
        link.agents.disconnect(&alias, stream, &stale.to_string());
        link.refresh();
        return;
    }
    link.refresh();
    tracing::info!(
        stream,
        source = %identity.source,
        claimed = %hello.claimed_cluster_alias,
        agent = ?hello.agent.as_ref().map(|b| &b.version),
        "agent connected"
    );

    let reason = established(
        &link,
        &tx,
        &alias,
        stream,
        &superseded,
        &mut inbound,
        mismatches,
    )
    .await;
    tracing::info!(stream, %reason, "agent stream ended");
    link.agents.disconnect(&alias, stream, &reason);
    link.refresh();
}

/// The stream after the handshake; returns why it ended.
async fn established(
    link: &Link,
    tx: &Sender<'_>,
    alias: &str,
    stream: u64,
    superseded: &tokio_util::sync::CancellationToken,
    inbound: &mut Streaming<AgentMessage>,
    mismatches: Vec<kstretch_proto::agent::v1::Mismatch>,
) -> String {
    let config = &link.config;
    let welcome = Welcome {
        central: Some(central_build()),
        cluster_alias: alias.to_owned(),
        mismatches,
        heartbeat_interval: prost_types::Duration::try_from(config.heartbeat).ok(),
        term: config.term,
    };
    if !tx.send(Body::Welcome(welcome)).await {
        return "agent went away during the handshake".into();
    }

    let mut requests = Requests {
        restarts: link.restarts.attach(alias, stream),
        connect_calls: link.connect_calls.attach(alias, stream),
    };
    let reason = serve(link, tx, alias, stream, superseded, inbound, &mut requests).await;
    link.restarts.detach(alias, stream);
    link.connect_calls.detach(alias, stream);
    reason
}

/// What others ask this cluster's agent through the stream.
struct Requests {
    restarts: tokio::sync::mpsc::Receiver<kstretch_proto::agent::v1::RestartPod>,
    connect_calls: tokio::sync::mpsc::Receiver<kstretch_proto::agent::v1::ConnectCall>,
}

/// The established stream's loop; returns why it ended.
async fn serve(
    link: &Link,
    tx: &Sender<'_>,
    alias: &str,
    stream: u64,
    superseded: &tokio_util::sync::CancellationToken,
    inbound: &mut Streaming<AgentMessage>,
    requests: &mut Requests,
) -> String {
    let config = &link.config;
    let mut desired = link.desired.subscribe();
    let mut sent_generation = 0;
    let current = desired.borrow_and_update().get(alias).cloned();
    if let Some(snapshot) = current {
        if !tx.snapshot(&snapshot).await {
            return "agent went away".into();
        }
        sent_generation = snapshot.generation;
        link.agents
            .update(alias, stream, |r| r.sent_generation = sent_generation);
    } else {
        tracing::info!("central holds no desired state for this cluster yet; no snapshot sent");
    }

    let mut heartbeat = tokio::time::interval(config.heartbeat);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    heartbeat.tick().await;
    let mut resync =
        tokio::time::interval_at(tokio::time::Instant::now() + config.resync, config.resync);
    let silence = config.heartbeat * 3;
    let mut last_received = Instant::now();

    loop {
        tokio::select! {
            _ = link.shutdown.cancelled() => return "central is shutting down".into(),
            _ = superseded.cancelled() => {
                tx.refuse(&Violation::Superseded).await;
                return "superseded by a newer stream of the same cluster".into();
            }
            changed = desired.changed() => {
                if changed.is_err() {
                    return "desired state registry dropped".into();
                }
                let snapshot = desired.borrow_and_update().get(alias).cloned();
                if let Some(snapshot) = snapshot
                    && snapshot.generation != sent_generation
                {
                    if !tx.snapshot(&snapshot).await {
                        return "agent went away".into();
                    }
                    sent_generation = snapshot.generation;
                    link.agents.update(alias, stream, |r| r.sent_generation = sent_generation);
                }
            }
            _ = resync.tick() => {
                // Level-triggered: the same snapshot again, so drift in the cluster is undone.
                let current = link.desired.get(alias);
                if let Some(snapshot) = current {
                    if !tx.snapshot(&snapshot).await {
                        return "agent went away".into();
                    }
                    sent_generation = snapshot.generation;
                }
            }
            Some(request) = requests.restarts.recv() => {
                tracing::info!(pod = %request.name, namespace = %request.namespace,
                    reason = %request.reason, "asking the agent to restart a pod");
                if !tx.send(Body::RestartPod(request)).await {
                    return "agent went away".into();
                }
            }
            Some(call) = requests.connect_calls.recv() => {
                tracing::debug!(connect = %call.connect, namespace = %call.namespace,
                    method = %call.method, path = %call.path, "asking the agent to call Kafka Connect");
                if !tx.send(Body::ConnectCall(call)).await {
                    return "agent went away".into();
                }
            }
            _ = heartbeat.tick() => {
                if last_received.elapsed() > silence {
                    let violation = Violation::HeartbeatTimeout(silence);
                    tx.refuse(&violation).await;
                    return violation.to_string();
                }
                let beat = Heartbeat { sent_at: Some(SystemTime::now().into()) };
                if !tx.send(Body::Heartbeat(beat)).await {
                    return "agent went away".into();
                }
            }
            next = inbound.message() => match next {
                Ok(Some(message)) => {
                    last_received = Instant::now();
                    let phase = Phase::Established { max_sent_generation: sent_generation };
                    match protocol::classify(message, phase) {
                        Ok(incoming) => record(link, alias, stream, incoming),
                        Err(violation) => {
                            if !tx.refuse(&violation).await {
                                return "agent went away".into();
                            }
                        }
                    }
                    link.agents.update(alias, stream, |r| r.last_heartbeat = SystemTime::now());
                }
                Ok(None) => return "agent closed the stream".into(),
                Err(status) => return refuse_broken(tx, &status).await,
            },
        }
    }
}

/// Records what the agent reported.
fn record(link: &Link, alias: &str, stream: u64, incoming: Incoming) {
    match incoming {
        Incoming::Heartbeat | Incoming::Hello(_) => {}
        Incoming::ApplyReport(report) => {
            let failed: Vec<_> = report
                .results
                .iter()
                .filter(|r| {
                    matches!(
                        r.outcome(),
                        Outcome::Rejected | Outcome::DeleteFailed | Outcome::Unspecified
                    )
                })
                .collect();
            for f in &failed {
                let object = f.r#ref.as_ref().map(describe).unwrap_or_default();
                tracing::warn!(generation = report.generation, %object, reason = %f.reason,
                    message = %f.message, "agent could not apply an object");
            }
            tracing::info!(
                generation = report.generation,
                hash = %report.hash,
                results = report.results.len(),
                failed = failed.len(),
                "agent applied a snapshot"
            );
            link.metrics.apply_errors(alias, failed.len() as u64);
            link.agents.update(alias, stream, |r| {
                r.last_apply = Some(report);
                r.last_apply_at = Some(SystemTime::now());
            });
            link.agents.notify();
        }
        Incoming::StatusReport(report) => {
            tracing::debug!(podsets = report.podsets.len(), "agent reported status");
            link.agents.update(alias, stream, |r| {
                r.podsets = report.podsets;
                r.services = report.services;
                r.nodes = report.nodes_listed.then_some(report.nodes);
                r.status_at = Some(SystemTime::now());
            });
            link.agents.notify();
        }
        Incoming::RestartResult(result) => link.restarts.resolve(result),
        Incoming::ConnectAnswer(answer) => link.connect_calls.resolve(answer),
        Incoming::PeerError(error) => {
            tracing::warn!(reason = %error.reason, message = %error.message,
                "agent could not use a message from central");
        }
    }
}

/// `v1/Service ns/name`.
pub fn describe(r: &ObjectRef) -> String {
    format!("{}/{} {}/{}", r.api_version, r.kind, r.namespace, r.name)
}

/// The inbound stream failed: answer an undecodable message with an error (the stream cannot
/// go on after it), and end the stream either way.
async fn refuse_broken(tx: &Sender<'_>, status: &Status) -> String {
    if protocol::is_decode_error(status) {
        let violation = Violation::Malformed(status.message().to_owned());
        tx.refuse(&violation).await;
        let _ = tx
            .out
            .send(Err(Status::invalid_argument(violation.to_string())))
            .await;
        violation.to_string()
    } else {
        format!("stream failed: {}", status.message())
    }
}
