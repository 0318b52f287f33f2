//! The topics one sync pass works on and what it learns of each: the [`Work`] items, the
//! [`Acc`] kept per topic while the pass runs, the [`Reconciled`] result with when to look
//! again ([`Next`]), and the timing of each Admin call.

use std::future::Future;
use std::time::Instant;

use kstretch_api::topic::ReplicasChangeStatus;
use kstretch_core::topics::{DesiredTopic, ResourceRef};
use kstretch_kadmin::Error;

use super::decide::{Main, Outcome};
use super::metrics::TopicMetrics;
use super::warning::Warning;
use crate::status::Refusal;

/// One topic to make match its `KafkaTopic`.
#[derive(Debug, Clone)]
pub struct Work {
    pub key: ResourceRef,
    pub desired: DesiredTopic,
    /// `status.replicasChange`: a change central started, possibly before a restart.
    pub replicas_change: Option<ReplicasChangeStatus>,
}

/// When the topic needs another look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Nothing until the resource changes or the timed pass comes.
    Done,
    /// A reassignment is running: look again shortly to report its end.
    Soon,
    /// Failed transiently: retry with backoff.
    Retry,
    /// The world moved under the batch (the topic appeared meanwhile): run it again now.
    Again,
}

/// The result for one topic. `outcome` is `None` when the status must not be written.
#[derive(Debug, Clone)]
pub struct Reconciled {
    pub key: ResourceRef,
    pub outcome: Option<Outcome>,
    pub next: Next,
}

/// Times one Admin call into the per-call duration metric.
pub(super) async fn timed<T>(
    metrics: &TopicMetrics,
    call: &'static str,
    f: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    let start = Instant::now();
    let result = f.await;
    metrics.admin_call(call, start.elapsed(), result.is_ok());
    result
}

/// Transient errors are retried with backoff; Kafka refusing the request (invalid config,
/// policy, replication factor) waits for a change of the resource, or the timed pass.
pub(super) fn next_after(error: &Error) -> Next {
    match error.kafka() {
        Some(kafka) if !kafka.is_retriable() => Next::Done,
        _ => Next::Retry,
    }
}

/// Everything learnt and decided for one topic while the batch runs.
#[derive(Debug)]
pub(super) struct Acc {
    pub(super) key: ResourceRef,
    pub(super) problem: Option<Refusal>,
    pub(super) warnings: Vec<Warning>,
    pub(super) topic_id: Option<String>,
    pub(super) replicas_change: Option<Option<ReplicasChangeStatus>>,
    pub(super) next: Next,
    pub(super) write_status: bool,
}

impl Acc {
    pub(super) fn new(key: ResourceRef) -> Self {
        Self {
            key,
            problem: None,
            warnings: Vec::new(),
            topic_id: None,
            replicas_change: None,
            next: Next::Done,
            write_status: true,
        }
    }

    /// Records a failure; the first one is what the status shows.
    pub(super) fn fail(&mut self, reason: &'static str, message: impl Into<String>, next: Next) {
        if self.problem.is_none() {
            self.problem = Some(Refusal::new(reason, message));
        }
        if next == Next::Retry || self.next == Next::Done {
            self.next = next;
        }
    }

    pub(super) fn fail_with(&mut self, error: &Error) {
        self.fail(error.reason(), error.to_string(), next_after(error));
    }

    pub(super) fn finish(self) -> Reconciled {
        let main = match self.problem {
            Some(refusal) => Main::NotReady(refusal),
            None => Main::Ready,
        };
        Reconciled {
            key: self.key,
            outcome: self.write_status.then_some(Outcome {
                main,
                warnings: self.warnings,
                topic_id: self.topic_id,
                replicas_change: self.replicas_change,
            }),
            next: self.next,
        }
    }
}
