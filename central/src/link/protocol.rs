//! The rules of the agent link as central applies them to each message an agent sends: what is
//! expected when, what is compared in the handshake, and the stable reason of every refusal.
//! Pure (no I/O), so every rule is unit-tested.

use kstretch_proto::agent::v1::{
    AgentMessage, ApplyReport, BuildInfo, ConnectAnswer, Hello, Mismatch, ProtocolError,
    RestartResult, StatusReport, agent_message::Body,
};

/// Where a stream is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Nothing but `Hello` is accepted yet.
    AwaitingHello,
    /// After `Hello`; `max_sent_generation` is the latest snapshot generation sent on this
    /// stream (0: none), so a report about anything else is refused.
    Established { max_sent_generation: u64 },
}

/// A message that passed the rules.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Hello(Hello),
    Heartbeat,
    ApplyReport(ApplyReport),
    StatusReport(StatusReport),
    /// The agent could not use something central sent.
    PeerError(ProtocolError),
    RestartResult(RestartResult),
    ConnectAnswer(ConnectAnswer),
}

/// Why a message (or a stream) was refused; sent back as a `ProtocolError`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    #[error("the message has no body central knows (is the agent newer than central?); ignored")]
    UnknownMessage,
    #[error("the first message on a stream must be Hello; ignored")]
    HelloExpected,
    #[error("Hello was already received on this stream; ignored")]
    DuplicateHello,
    #[error(
        "apply report for generation {got}, but the latest generation sent on this stream is {sent}; ignored"
    )]
    UnknownGeneration { got: u64, sent: u64 },
    #[error("invalid message: {0}; ignored")]
    Invalid(String),
    #[error("cannot decode the message: {0}; closing the stream")]
    Malformed(String),
    #[error("no Hello within {0:?}; closing the stream")]
    HelloTimeout(std::time::Duration),
    #[error("nothing received for {0:?}; closing the stream")]
    HeartbeatTimeout(std::time::Duration),
    #[error("a newer stream of the same cluster replaced this one")]
    Superseded,
    #[error(
        "this central's term {own} is older than the term {obeyed} the agent obeys: it was replaced by another central and sends nothing; closing the stream"
    )]
    StaleCentral { own: u64, obeyed: u64 },
}

impl Violation {
    /// Stable, machine-readable reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Violation::UnknownMessage => "unknown-message",
            Violation::HelloExpected => "hello-expected",
            Violation::DuplicateHello => "duplicate-hello",
            Violation::UnknownGeneration { .. } => "unknown-generation",
            Violation::Invalid(_) => "invalid-message",
            Violation::Malformed(_) => "malformed-message",
            Violation::HelloTimeout(_) => "hello-timeout",
            Violation::HeartbeatTimeout(_) => "heartbeat-timeout",
            Violation::Superseded => "superseded",
            Violation::StaleCentral { .. } => "stale-central",
        }
    }

    pub fn to_proto(&self) -> ProtocolError {
        ProtocolError {
            reason: self.reason().to_owned(),
            message: self.to_string(),
        }
    }
}

/// Checks one message against the rules of `phase`.
pub fn classify(message: AgentMessage, phase: Phase) -> Result<Incoming, Violation> {
    let body = message.body.ok_or(Violation::UnknownMessage)?;
    match (phase, body) {
        (Phase::AwaitingHello, Body::Hello(hello)) => Ok(Incoming::Hello(hello)),
        (Phase::AwaitingHello, _) => Err(Violation::HelloExpected),
        (Phase::Established { .. }, Body::Hello(_)) => Err(Violation::DuplicateHello),
        (Phase::Established { .. }, Body::Heartbeat(_)) => Ok(Incoming::Heartbeat),
        (
            Phase::Established {
                max_sent_generation,
            },
            Body::ApplyReport(report),
        ) => {
            if report.generation == 0 || report.generation > max_sent_generation {
                return Err(Violation::UnknownGeneration {
                    got: report.generation,
                    sent: max_sent_generation,
                });
            }
            if let Some(i) = report.results.iter().position(|r| r.r#ref.is_none()) {
                return Err(Violation::Invalid(format!(
                    "apply result #{i} names no object"
                )));
            }
            Ok(Incoming::ApplyReport(report))
        }
        (Phase::Established { .. }, Body::StatusReport(report)) => {
            if let Some(p) = report
                .podsets
                .iter()
                .find(|p| p.name.is_empty() || p.namespace.is_empty())
            {
                return Err(Violation::Invalid(format!(
                    "podset status without a name or namespace ({:?}/{:?})",
                    p.namespace, p.name
                )));
            }
            if let Some(s) = report
                .services
                .iter()
                .find(|s| s.name.is_empty() || s.namespace.is_empty())
            {
                return Err(Violation::Invalid(format!(
                    "service status without a name or namespace ({:?}/{:?})",
                    s.namespace, s.name
                )));
            }
            if report.nodes.iter().any(|n| n.name.is_empty()) {
                return Err(Violation::Invalid("node status without a name".to_owned()));
            }
            Ok(Incoming::StatusReport(report))
        }
        (Phase::Established { .. }, Body::Error(error)) => Ok(Incoming::PeerError(error)),
        (Phase::Established { .. }, Body::RestartResult(result)) => {
            Ok(Incoming::RestartResult(result))
        }
        (Phase::Established { .. }, Body::ConnectAnswer(answer)) => {
            Ok(Incoming::ConnectAnswer(answer))
        }
    }
}

/// True for the status tonic yields when a message's bytes are not valid protobuf.
pub fn is_decode_error(status: &tonic::Status) -> bool {
    status.code() == tonic::Code::Internal && status.message().contains("decode")
}

/// What differs between central and the agent's `Hello`: build version and commit, and the
/// alias the agent claims versus the one of its certificate. Reported, never fatal.
pub fn mismatches(central: &BuildInfo, hello: &Hello, certificate_alias: &str) -> Vec<Mismatch> {
    let agent = hello.agent.clone().unwrap_or_default();
    let mut out = Vec::new();
    let mut differ = |field: &str, central: &str, agent: &str| {
        out.push(Mismatch {
            field: field.to_owned(),
            central: central.to_owned(),
            agent: agent.to_owned(),
        })
    };
    if agent.version != central.version {
        differ("version", &central.version, &agent.version);
    }
    if !agent.git_commit.is_empty()
        && !central.git_commit.is_empty()
        && agent.git_commit != central.git_commit
    {
        differ("git_commit", &central.git_commit, &agent.git_commit);
    }
    if hello.claimed_cluster_alias != certificate_alias {
        differ(
            "cluster_alias",
            certificate_alias,
            &hello.claimed_cluster_alias,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use kstretch_proto::agent::v1::{Heartbeat, ObjectRef, ObjectResult, PodSetStatus};

    fn msg(body: Body) -> AgentMessage {
        AgentMessage { body: Some(body) }
    }

    const READY: Phase = Phase::Established {
        max_sent_generation: 3,
    };

    #[test]
    fn hello_comes_first_and_only_once() {
        let hello = msg(Body::Hello(Hello::default()));
        assert!(matches!(
            classify(hello.clone(), Phase::AwaitingHello),
            Ok(Incoming::Hello(_))
        ));
        assert_eq!(
            classify(
                msg(Body::Heartbeat(Heartbeat::default())),
                Phase::AwaitingHello
            ),
            Err(Violation::HelloExpected)
        );
        assert_eq!(classify(hello, READY), Err(Violation::DuplicateHello));
        assert_eq!(
            classify(msg(Body::Heartbeat(Heartbeat::default())), READY),
            Ok(Incoming::Heartbeat)
        );
    }

    #[test]
    fn a_message_without_a_known_body_is_unknown() {
        let err = classify(AgentMessage { body: None }, READY).unwrap_err();
        assert_eq!(err.reason(), "unknown-message");
        assert_eq!(err.to_proto().reason, "unknown-message");
        assert!(err.to_proto().message.contains("newer"));
    }

    #[test]
    fn apply_reports_must_name_a_generation_that_was_sent() {
        let report = |generation| {
            msg(Body::ApplyReport(ApplyReport {
                generation,
                ..ApplyReport::default()
            }))
        };
        assert!(classify(report(3), READY).is_ok());
        assert!(classify(report(1), READY).is_ok(), "older, but was sent");
        assert_eq!(
            classify(report(4), READY),
            Err(Violation::UnknownGeneration { got: 4, sent: 3 })
        );
        assert_eq!(
            classify(
                report(0),
                Phase::Established {
                    max_sent_generation: 0
                }
            )
            .unwrap_err()
            .reason(),
            "unknown-generation"
        );
        let unnamed = msg(Body::ApplyReport(ApplyReport {
            generation: 2,
            results: vec![
                ObjectResult {
                    r#ref: Some(ObjectRef::default()),
                    ..ObjectResult::default()
                },
                ObjectResult::default(),
            ],
            ..ApplyReport::default()
        }));
        let err = classify(unnamed, READY).unwrap_err();
        assert_eq!(err.reason(), "invalid-message");
        assert!(err.to_string().contains("#1"), "{err}");
    }

    #[test]
    fn podset_status_needs_names() {
        let report = msg(Body::StatusReport(StatusReport {
            podsets: vec![PodSetStatus {
                namespace: "ns".into(),
                ..PodSetStatus::default()
            }],
            ..StatusReport::default()
        }));
        assert_eq!(
            classify(report, READY).unwrap_err().reason(),
            "invalid-message"
        );
        let nameless_service = msg(Body::StatusReport(StatusReport {
            podsets: vec![],
            services: vec![kstretch_proto::agent::v1::ServiceStatus {
                namespace: "ns".into(),
                ..Default::default()
            }],
            ..StatusReport::default()
        }));
        let err = classify(nameless_service, READY).unwrap_err();
        assert_eq!(err.reason(), "invalid-message");
        assert!(err.to_string().contains("service status"), "{err}");
        let nameless_node = msg(Body::StatusReport(StatusReport {
            nodes: vec![kstretch_proto::agent::v1::NodeStatus::default()],
            nodes_listed: true,
            ..StatusReport::default()
        }));
        let err = classify(nameless_node, READY).unwrap_err();
        assert!(err.to_string().contains("node status"), "{err}");
    }

    #[test]
    fn mismatches_name_what_differs() {
        let central = BuildInfo {
            version: "0.2.0".into(),
            git_commit: "abc".into(),
        };
        let hello = Hello {
            agent: Some(BuildInfo {
                version: "0.1.0".into(),
                git_commit: "def".into(),
            }),
            claimed_cluster_alias: "beta".into(),
            ..Hello::default()
        };
        let found = mismatches(&central, &hello, "alpha");
        let fields: Vec<_> = found.iter().map(|m| m.field.as_str()).collect();
        assert_eq!(fields, ["version", "git_commit", "cluster_alias"]);
        assert_eq!(found[2].central, "alpha");
        assert_eq!(found[2].agent, "beta");

        let same = Hello {
            agent: Some(BuildInfo {
                version: "0.2.0".into(),
                git_commit: String::new(),
            }),
            claimed_cluster_alias: "alpha".into(),
            ..Hello::default()
        };
        assert!(mismatches(&central, &same, "alpha").is_empty());
    }

    #[test]
    fn decode_errors_are_recognised() {
        assert!(is_decode_error(&tonic::Status::internal(
            "failed to decode Protobuf message: invalid wire type"
        )));
        assert!(!is_decode_error(&tonic::Status::cancelled("gone")));
    }
}
