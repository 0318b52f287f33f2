//! Cause of a `Kafka` that cannot be used as it is: `Ready=False` with a reason and a
//! message on the `Kafka` (written where every pass writes it) and its pools, one Event, and
//! nothing changes in the member clusters (the last desired state stands, or is retained).

use std::ops::ControlFlow;

use kube::runtime::controller::Action;

use super::pass::{End, Flow, Pass, REFUSED_RECHECK, keep_or_retain};
use crate::error::Error;
use crate::kafka::status;
use crate::status::Refusal;

/// The refusals the pipeline finds itself; the resources' own problems (resolve, node IDs,
/// versions, certificates, configuration) carry their typed reasons with them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cause {
    /// A `kstretch.io/...` annotation on the `Kafka` that cannot be read.
    InvalidAnnotation,
    /// A pool of another Kafka cluster (another cluster ID).
    ClusterIdMismatch,
    /// A pod name derived from the Kafka and pool names is over 63 characters.
    NameTooLong,
}

impl Cause {
    pub(super) const fn as_str(self) -> &'static str {
        match self {
            Cause::InvalidAnnotation => "InvalidAnnotation",
            Cause::ClusterIdMismatch => "ClusterIdMismatch",
            Cause::NameTooLong => "NameTooLong",
        }
    }
}

/// Ends the reconciliation with `refusal`, carried out where the pass ends ([`Pass::refuse`]).
pub(super) fn refused<T>(refusal: Refusal) -> Flow<T> {
    Ok(ControlFlow::Break(End::Refused(refusal)))
}

impl Pass<'_> {
    /// Carries out a refusal: the `Kafka`'s status says it (written with the pass's one
    /// write), its pools' statuses too, one Event, and the member clusters keep what they have.
    pub(super) async fn refuse(&mut self, refusal: Refusal) -> Result<Action, Error> {
        let (reason, message) = (refusal.reason, refusal.message.as_str());
        let ctx = self.ctx;
        tracing::warn!(%reason, %message, "Kafka cannot be reconciled as it is");
        ctx.metrics.invalid(reason);
        keep_or_retain(&ctx.owners, &self.owner)?;
        let refused_before = self.status.conditions.iter().any(|c| {
            c.type_ == "Ready" && c.status == "False" && c.reason.as_deref() == Some(reason)
        });
        if !refused_before {
            ctx.events.emit(
                kube::Resource::object_ref(self.kafka, &()),
                kstretch_runtime::events::Type::Warning,
                reason,
                "Reconcile",
                message.to_owned(),
            );
        }
        self.status.conditions = status::conditions(
            &self.status.conditions,
            status::not_ready(reason, message),
            crate::status::NO_WARNINGS,
            &self.now,
        );
        for pool in &self.pools {
            let mut pool_status = pool.status.clone().unwrap_or_default();
            pool_status.observed_generation = pool.metadata.generation;
            pool_status.conditions = status::conditions(
                &pool_status.conditions,
                status::not_ready(reason, message),
                crate::status::NO_WARNINGS,
                &self.now,
            );
            status::apply_pool(&ctx.client, pool, pool_status).await?;
        }
        Ok(Action::requeue(REFUSED_RECHECK))
    }
}
