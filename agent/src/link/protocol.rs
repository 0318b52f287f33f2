//! The rules of the agent link as the agent applies them to what central sends: `Welcome`
//! first, then snapshots, heartbeats and errors. Pure, so every rule is unit-tested.

use std::time::Duration;

use kstretch_proto::agent::v1::central_message::Body;
use kstretch_proto::agent::v1::{
    CentralMessage, ConnectCall, ProtocolError, RestartPod, Snapshot, Welcome,
};

/// A message from central that passed the rules.
#[derive(Debug, Clone, PartialEq)]
pub enum FromCentral {
    Welcome(Welcome),
    Snapshot(Snapshot),
    Heartbeat,
    /// Central could not use something the agent sent (or ends the stream, e.g. superseded).
    Error(ProtocolError),
    /// Delete one pod so its podset recreates it.
    RestartPod(RestartPod),
    /// Call the REST API of a Kafka Connect cluster of this cluster.
    ConnectCall(ConnectCall),
}

/// Why a message from central was refused; answered with a `ProtocolError`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    #[error("the message has no body the agent knows (is central newer than the agent?); ignored")]
    UnknownMessage,
    #[error("expected Welcome as central's first message")]
    WelcomeExpected,
    #[error("Welcome was already received on this stream; ignored")]
    DuplicateWelcome,
    #[error("snapshot without a generation; ignored")]
    SnapshotWithoutGeneration,
}

impl Violation {
    /// Stable, machine-readable reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Violation::UnknownMessage => "unknown-message",
            Violation::WelcomeExpected => "welcome-expected",
            Violation::DuplicateWelcome => "duplicate-welcome",
            Violation::SnapshotWithoutGeneration => "invalid-snapshot",
        }
    }

    pub fn to_proto(&self) -> ProtocolError {
        ProtocolError {
            reason: self.reason().to_owned(),
            message: self.to_string(),
        }
    }
}

/// Checks one message; `welcomed` says whether `Welcome` was received on this stream.
pub fn classify(message: CentralMessage, welcomed: bool) -> Result<FromCentral, Violation> {
    match message.body.ok_or(Violation::UnknownMessage)? {
        Body::Welcome(_) if welcomed => Err(Violation::DuplicateWelcome),
        Body::Welcome(w) => Ok(FromCentral::Welcome(w)),
        Body::Error(e) => Ok(FromCentral::Error(e)),
        _ if !welcomed => Err(Violation::WelcomeExpected),
        Body::Snapshot(s) if s.generation == 0 => Err(Violation::SnapshotWithoutGeneration),
        Body::Snapshot(s) => Ok(FromCentral::Snapshot(s)),
        Body::Heartbeat(_) => Ok(FromCentral::Heartbeat),
        Body::RestartPod(r) => Ok(FromCentral::RestartPod(r)),
        Body::ConnectCall(c) => Ok(FromCentral::ConnectCall(c)),
    }
}

/// The heartbeat interval central asks for, within sane bounds (1 s to 5 min; 10 s if unset).
pub fn heartbeat_interval(welcome: &Welcome) -> Duration {
    welcome
        .heartbeat_interval
        .and_then(|d| Duration::try_from(d).ok())
        .unwrap_or(Duration::from_secs(10))
        .clamp(Duration::from_secs(1), Duration::from_secs(300))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use kstretch_proto::agent::v1::Heartbeat;

    fn msg(body: Body) -> CentralMessage {
        CentralMessage { body: Some(body) }
    }

    #[test]
    fn welcome_first_then_snapshots() {
        let welcome = msg(Body::Welcome(Welcome::default()));
        let snapshot = msg(Body::Snapshot(Snapshot {
            generation: 1,
            ..Snapshot::default()
        }));
        assert!(matches!(
            classify(welcome.clone(), false),
            Ok(FromCentral::Welcome(_))
        ));
        assert_eq!(
            classify(snapshot.clone(), false),
            Err(Violation::WelcomeExpected)
        );
        assert!(matches!(
            classify(snapshot, true),
            Ok(FromCentral::Snapshot(_))
        ));
        assert_eq!(classify(welcome, true), Err(Violation::DuplicateWelcome));
        assert_eq!(
            classify(msg(Body::Heartbeat(Heartbeat::default())), true),
            Ok(FromCentral::Heartbeat)
        );
    }

    #[test]
    fn errors_are_accepted_any_time_and_unknown_bodies_refused() {
        let error = msg(Body::Error(ProtocolError {
            reason: "superseded".into(),
            message: "m".into(),
        }));
        assert!(matches!(classify(error, false), Ok(FromCentral::Error(_))));
        let err = classify(CentralMessage { body: None }, true).unwrap_err();
        assert_eq!(err.to_proto().reason, "unknown-message");
    }

    #[test]
    fn a_snapshot_needs_a_generation() {
        let zero = msg(Body::Snapshot(Snapshot::default()));
        assert_eq!(
            classify(zero, true).unwrap_err().reason(),
            "invalid-snapshot"
        );
    }

    #[test]
    fn the_heartbeat_interval_is_bounded() {
        let with = |secs: i64| Welcome {
            heartbeat_interval: Some(prost_types::Duration {
                seconds: secs,
                nanos: 0,
            }),
            ..Welcome::default()
        };
        assert_eq!(
            heartbeat_interval(&Welcome::default()),
            Duration::from_secs(10)
        );
        assert_eq!(heartbeat_interval(&with(3)), Duration::from_secs(3));
        assert_eq!(heartbeat_interval(&with(0)), Duration::from_secs(1));
        assert_eq!(heartbeat_interval(&with(-5)), Duration::from_secs(10));
        assert_eq!(heartbeat_interval(&with(100_000)), Duration::from_secs(300));
    }
}
