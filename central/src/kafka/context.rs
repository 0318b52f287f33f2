//! What every reconciliation of a `Kafka` shares: the clients, the shared stores and
//! registries, and the bookkeeping kept between reconciliations.

use std::collections::BTreeMap;
use std::sync::Arc;

use kstretch_api::{Kafka, KafkaNodePool};
use kube::Client;
use kube::runtime::reflector::Store;

use super::checks::KafkaAccess;
use super::metrics::KafkaMetrics;
use super::resolve::Members;
use crate::link::restart::Restarts;
use crate::link::{Agents, Owner, OwnerKind, Owners};

/// How often a settled `Kafka`'s registered nodes are listed in Kafka.
pub const REGISTRATION_CHECK: std::time::Duration = std::time::Duration::from_secs(300);

/// What every reconciliation shares.
#[derive(Clone)]
pub struct Context {
    pub client: Client,
    /// The Kafka controller's one Event publisher.
    pub events: kstretch_runtime::events::Events,
    pub pools: Store<KafkaNodePool>,
    pub owners: Owners,
    pub agents: Agents,
    pub restarts: Restarts,
    pub members: Members,
    pub kafka: KafkaAccess,
    pub metrics: KafkaMetrics,
    pub registration_checks: RegistrationChecks,
    /// Consecutive failures per `Kafka`, for [`super::error_policy`].
    pub retries:
        Arc<kstretch_runtime::backoff::Backoff<kube::runtime::reflector::ObjectRef<Kafka>>>,
}

/// When each `Kafka`'s registered nodes were last listed: without a removal to finish, Kafka is
/// asked only every [`REGISTRATION_CHECK`], so reconciles stay fast (and quiet) when it is slow
/// or unreachable.
#[derive(Debug, Clone, Default)]
pub struct RegistrationChecks {
    last: Arc<std::sync::Mutex<BTreeMap<Owner, std::time::Instant>>>,
}

impl RegistrationChecks {
    /// Whether a check of `owner` is due now; if so, records it as done now.
    pub(crate) fn due(&self, owner: &Owner) -> bool {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let now = std::time::Instant::now();
        match last.get(owner) {
            Some(at) if now.duration_since(*at) < REGISTRATION_CHECK => false,
            _ => {
                last.insert(owner.clone(), now);
                true
            }
        }
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("members", &self.members)
            .finish_non_exhaustive()
    }
}

pub fn owner_of(kafka: &Kafka) -> Owner {
    Owner::of(OwnerKind::Kafka, kafka)
}
