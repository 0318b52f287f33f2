//! What a batch of `KafkaTopic`s ends with: its Kubernetes writes (statuses, finalizers
//! released), then when each resource needs another look.

use std::sync::Arc;

use kstretch_api::KafkaTopic;
use kstretch_core::topics::ResourceRef;

use super::decide::Outcome;
use super::work::Next;

/// Kubernetes writes of one batch in flight at once.
pub(super) const CONCURRENT_WRITES: usize = 32;

/// A Kubernetes write the batch ends with.
pub(super) enum Write {
    Status(Arc<KafkaTopic>, Outcome, Option<String>),
    Release(Arc<KafkaTopic>),
}

/// What one batch did with one resource.
pub(super) struct Done {
    pub(super) key: ResourceRef,
    pub(super) next: Next,
    pub(super) failure: Option<String>,
}

/// What a batch ends with: its Kubernetes writes, then each resource's next look.
#[derive(Default)]
pub(super) struct Ending {
    pub(super) writes: Vec<Write>,
    pub(super) done: Vec<Done>,
}

impl Ending {
    /// Writes `outcome` to the status of `kt`.
    pub(super) fn status(
        &mut self,
        kt: Arc<KafkaTopic>,
        outcome: Outcome,
        cluster_id: Option<&str>,
    ) {
        self.writes
            .push(Write::Status(kt, outcome, cluster_id.map(str::to_owned)));
    }

    pub(super) fn done(&mut self, key: ResourceRef, next: Next, failure: Option<String>) {
        self.done.push(Done { key, next, failure });
    }

    /// Removes the finalizer of `kt` (`key`), which needs nothing more.
    pub(super) fn release(&mut self, kt: Arc<KafkaTopic>, key: ResourceRef) {
        self.writes.push(Write::Release(kt));
        self.done(key, Next::Done, None);
    }
}
