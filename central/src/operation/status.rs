//! The one writer of `KafkaOperation` statuses (the Kafka reconciler writes a running quorum
//! recovery's through it too), and how an operation is refused.

use std::time::Duration;

use kstretch_api::KafkaOperation;
use kstretch_api::condition::Condition;
use kstretch_api::operation::{KafkaOperationStatus, phase};
use kube::runtime::controller::Action;

use crate::controller::{Context, Error};
use crate::status::{conditions, not_ready, now};

/// How often a waiting operation (its turn, partitions out of sync) looks again.
pub(super) const WAIT: Duration = Duration::from_secs(15);

/// Why the operation cannot go on as asked: a reason and a message for the user.
pub(super) use crate::status::Refusal;

pub(super) fn refusal(reason: &'static str, message: impl Into<String>) -> Refusal {
    Refusal::new(reason, message)
}

/// The operation cannot go on as asked. One that has not started is refused and looked at
/// again when it changes; a running one keeps what it did and tries again later (a broker
/// may come back).
pub(super) async fn refuse(
    ctx: &Context,
    op: &KafkaOperation,
    mut status: KafkaOperationStatus,
    r: Refusal,
) -> Result<Action, Error> {
    ctx.metrics.failed(r.reason);
    if status.phase.as_deref() == Some(phase::RUNNING) {
        write(ctx, op, status, not_ready(r.reason, r.message)).await?;
        return Ok(Action::requeue(WAIT));
    }
    status.phase = Some(phase::REFUSED.to_owned());
    write(ctx, op, status, not_ready(r.reason, r.message)).await?;
    Ok(Action::await_change())
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
