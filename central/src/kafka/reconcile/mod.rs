//! One reconciliation of one `Kafka`, a pipeline of stages, each in its own file:
//! [`plan`] (resolve and validate the pools, the CAs, the cluster ID and node IDs) →
//! [`guard`] (removals that are not safe now wait) → [`publish`] (the certificates read, every
//! member cluster's objects and the certificates to store decided purely by [`objects`], then
//! handed to the agents) → [`pools`] (the pools' statuses) →
//! [`kafka_side`] (what the agents and Kafka say read, then the quorum's step, one pod rolled,
//! removed nodes unregistered and a ready cluster's steps, all decided purely by [`decide`]
//! before any is done, and the `Kafka`'s status and when to look again concluded from what
//! was done). A stage that ends the reconciliation early says how ([`pass::End`]): a refusal
//! ([`refuse`]), carried out here, or a wait.

/// The value of a stage that goes on; else the caller (a stage too) ends where the stage did.
macro_rules! proceed {
    ($flow:expr) => {
        match $flow? {
            std::ops::ControlFlow::Continue(value) => value,
            std::ops::ControlFlow::Break(end) => return Ok(std::ops::ControlFlow::Break(end)),
        }
    };
}

mod decide;
#[cfg(test)]
mod fixtures;
mod guard;
mod kafka_side;
mod kafka_steps;
mod objects;
mod pass;
mod plan;
mod pools;
mod publish;
mod refuse;
#[cfg(test)]
mod tests;

use std::ops::ControlFlow;
use std::sync::Arc;

use kstretch_api::{Kafka, names};
use kube::ResourceExt;
use kube::runtime::controller::Action;

use self::pass::{BUSY_REQUEUE, End, Flow, Pass};
use crate::error::Error;
use crate::kafka::context::{Context, owner_of};
use crate::kafka::resolve;
use crate::kafka::status;
use crate::pki;

fn api(ctx: &Context, kafka: &Kafka) -> kube::Api<Kafka> {
    kube::Api::namespaced(ctx.client.clone(), &kafka.namespace().unwrap_or_default())
}

/// One step of the deletion of a `Kafka`: its objects leave every member cluster on central's
/// explicit word, and the resource goes once every agent confirmed (see [`crate::owned`]).
pub async fn delete(kafka: Arc<Kafka>, ctx: Arc<Context>) -> Result<Action, Error> {
    match crate::owned::delete(ctx.as_ref(), kafka.as_ref()).await? {
        crate::owned::Deletion::Waiting(clusters) => {
            let message = format!(
                "being deleted: waiting for the agents of {} to confirm that its objects are gone (a cluster that never comes back: remove the finalizer {} by hand; its objects stay there, unclaimed)",
                clusters.join(", "),
                names::MEMBER_OBJECTS_FINALIZER
            );
            let mut kafka_status = kafka.status.clone().unwrap_or_default();
            kafka_status.conditions = status::conditions(
                &kafka_status.conditions,
                status::not_ready("DeletionPending", &message),
                crate::status::NO_WARNINGS,
                &status::now(),
            );
            if kafka.status.as_ref() != Some(&kafka_status) {
                status::apply_kafka(&ctx.client, &kafka, kafka_status).await?;
            }
            Ok(Action::requeue(BUSY_REQUEUE))
        }
        crate::owned::Deletion::Released => {
            // The user deleted it: the CA and certificates kstretch generated go with it.
            pki::delete_generated(&ctx.client, &kafka).await?;
            ctx.metrics
                .forget(&kafka.namespace().unwrap_or_default(), &kafka.name_any());
            Ok(Action::await_change())
        }
        crate::owned::Deletion::Abandoned => Ok(Action::await_change()),
    }
}

/// Reconciles one `Kafka` that is not being deleted.
pub async fn apply(kafka: Arc<Kafka>, ctx: Arc<Context>) -> Result<Action, Error> {
    crate::owned::claim(ctx.as_ref(), kafka.as_ref()).await?;
    // The cached copy may not show this controller's status write of a moment ago yet (a new
    // cluster's ID, a rebuilt quorum's voters): a pass over it would write the old status back
    // and act on it. The stored copy is read instead, once per pass.
    let Some(kafka) = api(&ctx, &kafka).get_opt(&kafka.name_any()).await? else {
        return Ok(Action::await_change());
    };
    let now = status::now();
    let mut kafka_status = kafka.status.clone().unwrap_or_default();
    kafka_status.observed_generation = kafka.metadata.generation;
    let paused = crate::status::is_paused(&kafka);
    // Pools not listed yet must not read as "no pools".
    if !paused && !kstretch_runtime::watch::ready(&ctx.pools).await {
        return Ok(Action::requeue(BUSY_REQUEUE));
    }
    let (kafka_status, action) = if paused {
        // A paused `Kafka` changes nothing anywhere: its last desired state stands (or is
        // retained).
        let conditions = &kafka_status.conditions;
        kafka_status.conditions =
            crate::owned::paused(&ctx.owners, &owner_of(&kafka), conditions, &now)?;
        (kafka_status, Action::await_change())
    } else {
        let all_pools = ctx.pools.state();
        let mut pass = Pass {
            ctx: &ctx,
            kafka: &kafka,
            pools: resolve::pools_of(&kafka, &all_pools),
            owner: owner_of(&kafka),
            now,
            status: kafka_status,
            warnings: Vec::new(),
        };
        let action = match stages(&mut pass).await? {
            ControlFlow::Continue(action) | ControlFlow::Break(End::Wait(action)) => action,
            ControlFlow::Break(End::Refused(refusal)) => pass.refuse(refusal).await?,
        };
        (pass.status, action)
    };
    // The one write of the `Kafka`'s status in a pass, whichever stage ended it.
    let namespace = kafka.namespace().unwrap_or_default();
    ctx.metrics
        .observe(&namespace, &kafka.name_any(), &kafka_status);
    status::apply_kafka(&ctx.client, &kafka, kafka_status).await?;
    Ok(action)
}

async fn stages(pass: &mut Pass<'_>) -> Flow<Action> {
    let mut plan = proceed!(plan::plan(pass).await);
    proceed!(guard::guard(pass, &mut plan).await);
    let built = proceed!(publish::publish(pass, &mut plan).await);
    let forgotten_done = pools::record(pass, &plan).await?;
    let action = kafka_side::run(pass, &plan, &built, &forgotten_done).await?;
    Ok(ControlFlow::Continue(action))
}
