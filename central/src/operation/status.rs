//! The one writer of `KafkaOperation` statuses (the Kafka reconciler writes a running quorum
//! recovery's through it too), what one look at an operation decided ([`Outcome`]), and how
//! an operation is refused.

use std::time::Duration;

use kstretch_api::KafkaOperation;
use kstretch_api::condition::Condition;
use kstretch_api::operation::{KafkaOperationStatus, phase};
use kube::runtime::controller::Action;

use kstretch_core::movement::Move;
use kstretch_core::movement::throttle::Throttle;
use kstretch_kadmin::AdminClient;

use crate::controller::Context;
use crate::status::{conditions, not_ready, now};

/// How often a waiting operation (its turn, partitions out of sync) looks again.
pub(super) const WAIT: Duration = Duration::from_secs(15);

/// Why the operation cannot go on as asked: a reason and a message for the user.
pub(super) use crate::status::Refusal;

pub(super) fn refusal(reason: &'static str, message: impl Into<String>) -> Refusal {
    Refusal::new(reason, message)
}

/// What one look at an operation decided: the status to write with its `Ready` condition
/// (`None`: nothing to write), when to look again, and a step in Kafka that leaves something
/// behind (a throttle, reassignments), taken only once the status that records it is written,
/// so that a central that restarts at any point finds it and resumes.
pub(super) struct Outcome {
    pub(super) status: KafkaOperationStatus,
    pub(super) ready: Option<Condition>,
    pub(super) next: Action,
    pub(super) then: Option<Then>,
}

impl Outcome {
    /// `status` with `ready` written, then a look again as `next` says.
    pub(super) fn write(status: KafkaOperationStatus, ready: Condition, next: Action) -> Outcome {
        Outcome {
            status,
            ready: Some(ready),
            next,
            then: None,
        }
    }

    /// Nothing written; a look again as `next` says.
    pub(super) fn unchanged(status: KafkaOperationStatus, next: Action) -> Outcome {
        Outcome {
            status,
            ready: None,
            next,
            then: None,
        }
    }
}

/// A step in Kafka taken after the status that records it is written.
pub(super) enum Then {
    /// Throttle the batch's brokers and topics, and start reassigning its partitions.
    StartBatch {
        admin: AdminClient,
        batch: Vec<Move>,
        throttle: Throttle,
        rate: u64,
    },
}

/// The operation cannot go on as asked. One that has not started is refused and looked at
/// again when it changes; a running one keeps what it did and tries again later (a broker
/// may come back).
pub(super) fn refused(ctx: &Context, mut status: KafkaOperationStatus, r: Refusal) -> Outcome {
    ctx.metrics.failed(r.reason);
    if status.phase.as_deref() == Some(phase::RUNNING) {
        return Outcome::write(
            status,
            not_ready(r.reason, r.message),
            Action::requeue(WAIT),
        );
    }
    status.phase = Some(phase::REFUSED.to_owned());
    Outcome::write(
        status,
        not_ready(r.reason, r.message),
        Action::await_change(),
    )
}

pub(super) async fn write(
    ctx: &Context,
    op: &KafkaOperation,
    status: KafkaOperationStatus,
    ready: Condition,
) -> Result<(), kube::Error> {
    write_status(&ctx.client, op, status, ready).await
}

/// Writes `op`'s status with `ready` as its `Ready` condition; an operation deleted meanwhile
/// is not an error. The one writer of operation statuses (the Kafka reconciler writes a
/// running quorum recovery's through it too).
pub async fn write_status(
    client: &kube::Client,
    op: &KafkaOperation,
    mut status: KafkaOperationStatus,
    ready: Condition,
) -> Result<(), kube::Error> {
    status.conditions = conditions(
        &status.conditions,
        ready,
        crate::status::NO_WARNINGS,
        &now(),
    );
    status.observed_generation = op.metadata.generation;
    match crate::status::apply(client, op, status, |o| o.status.as_ref()).await {
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        other => other,
    }
}
