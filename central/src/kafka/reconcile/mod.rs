//! One reconciliation of one `Kafka`: reads and pure decisions taking turns, each decision in
//! its own file and every read or write in the I/O files ([`read`], the stages' `async fn`s).
//!
//! - **Plan**: what the agents report is read, [`plan::asked`] validates what the `Kafka` and
//!   its pools ask for, the CAs are reconciled and the operations listed ([`read::secrets`]),
//!   and [`plan::decide`] gives the plan or why the pass ends first ([`plan::Early`]: a
//!   refusal, agents to wait for, a new cluster's ID to record).
//! - **Guard**: what the plan asks of Kafka ([`guard::Questions`]) is read ([`read::held`]);
//!   [`guard::guard`] keeps what is not safe to remove now.
//! - **Publish**: what the objects are built from is read ([`read::for_objects`]);
//!   [`objects::decide`] gives every member cluster's objects, the certificates to store and
//!   the warnings; [`publish`] stores and hands them to the agents (the Services alone first
//!   while per-node addresses are pending).
//! - **Pools**: [`pools::decide`] gives every pool's status, Events and forget operations;
//!   [`pools::record`] writes them.
//! - **The Kafka side**: [`kafka_side`] reads what the agents and Kafka say, [`decide`] gives
//!   the quorum's step, the pod to restart, the nodes to unregister and a ready cluster's
//!   steps, [`kafka_side`] does them, and `decide::conclude` gives the status and when to look
//!   again.
//!
//! A pass that ends early says how ([`pass::End`]): a refusal ([`refuse`]) or a wait. The
//! `Kafka`'s status is written once, at the end of [`apply`].

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
mod read;
mod refuse;
#[cfg(test)]
mod tests;

use std::ops::ControlFlow;
use std::sync::Arc;

use kstretch_api::{Kafka, names};
use kube::ResourceExt;
use kube::runtime::controller::Action;

use self::pass::{AgentReports, BUSY_REQUEUE, End, Flow, Pass};
use self::plan::{Ask, Early, Plan};
use self::refuse::refused;
use crate::error::Error;
use crate::kafka::context::{Context, owner_of};
use crate::kafka::operations;
use crate::kafka::quorum;
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
    // Pools not listed yet must not read as "no pools".
    if !kstretch_runtime::watch::ready(&ctx.pools).await {
        return Ok(Action::requeue(BUSY_REQUEUE));
    }
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
    let kafka_status = pass.status;
    // The one write of the `Kafka`'s status in a pass, whichever stage ended it.
    let namespace = kafka.namespace().unwrap_or_default();
    ctx.metrics
        .observe(&namespace, &kafka.name_any(), &kafka_status);
    status::apply_kafka(&ctx.client, &kafka, kafka_status).await?;
    Ok(action)
}

async fn stages(pass: &mut Pass<'_>) -> Flow<Action> {
    let mut plan = proceed!(planned(pass).await);
    let questions = guard::Questions::of(pass.kafka, &plan);
    let bootstrap = plan.bootstrap.as_deref();
    let held = read::held(pass.ctx, &plan.operations, bootstrap, &questions).await;
    if let Err(refusal) = guard::guard(pass.kafka, &mut plan, &pass.status, &questions, &held) {
        return refused(refusal);
    }
    pass.warnings.append(&mut plan.warnings);
    let built = proceed!(publish::publish(pass, &mut plan).await);
    let forgotten_done = pools::record(pass, &plan).await?;
    let action = kafka_side::run(pass, &plan, &built, &forgotten_done).await?;
    Ok(ControlFlow::Continue(action))
}

/// The plan, decided in two pure turns around what the apiserver holds (the CAs, reconciled
/// first, and the operations), then recorded: the cluster ID and the quorum's mode taken from
/// what runs, and how central's admin client reaches the cluster.
async fn planned(pass: &mut Pass<'_>) -> Flow<Plan> {
    let agents = AgentReports::read(pass.ctx);
    let asked = plan::asked(&ask(pass), &agents);
    let asked = match asked {
        Ok(asked) => asked,
        Err(early) => return end_early(pass, early),
    };
    let secrets = match read::secrets(pass.ctx, pass.kafka).await? {
        Ok(secrets) => secrets,
        Err(refusal) => return refused(refusal),
    };
    let operations = operations::list(&pass.ctx.client, pass.kafka).await?;
    let decided = plan::decide(&ask(pass), asked, secrets, operations, agents);
    let plan = match decided {
        Ok(plan) => plan,
        Err(early) => return end_early(pass, early),
    };
    if pass.status.cluster_id.as_deref() != Some(plan.cluster_id.as_str()) {
        tracing::info!(cluster_id = %plan.cluster_id, "cluster ID taken from what runs");
        pass.status.cluster_id = Some(plan.cluster_id.clone());
    }
    if plan.adopted_dynamic_quorum {
        quorum::adopt_dynamic(&mut pass.status);
    }
    if let Some(b) = &plan.bootstrap {
        pass.ctx.kafka.secure(b, plan.admin_tls.as_ref());
    }
    Ok(ControlFlow::Continue(plan))
}

fn ask<'a>(pass: &'a Pass<'_>) -> Ask<'a> {
    Ask {
        kafka: pass.kafka,
        pools: &pass.pools,
        members: &pass.ctx.members,
        status: &pass.status,
    }
}

/// Carries out why a pass ends before anything is built.
fn end_early<T>(pass: &mut Pass<'_>, early: Early) -> Flow<T> {
    match early {
        Early::Paused => {
            // Nothing changes anywhere: the last desired state stands (or what runs is
            // retained).
            crate::owned::keep_or_retain(&pass.ctx.owners, &pass.owner)?;
            pass.status.conditions = crate::status::paused(&pass.status.conditions, &pass.now);
            Ok(ControlFlow::Break(End::Wait(Action::await_change())))
        }
        Early::Refused(refusal) => refused(refusal),
        Early::AwaitAgents(aliases) => {
            crate::owned::keep_or_retain(&pass.ctx.owners, &pass.owner)?;
            let message = format!(
                "waiting for the agents of {} to report what runs there, so that running nodes keep their cluster ID and node IDs",
                aliases.join(", ")
            );
            pass.status.conditions = status::conditions(
                &pass.status.conditions,
                status::not_ready("AwaitingMemberClusters", message),
                crate::status::NO_WARNINGS,
                &pass.now,
            );
            Ok(ControlFlow::Break(End::Wait(Action::requeue(BUSY_REQUEUE))))
        }
        Early::NewCluster { cluster_id, quorum } => {
            // Recorded before anything is built with it (this pass ends with it written): a
            // node formatted with an ID the status lost would belong to no cluster.
            tracing::info!(%cluster_id, "new Kafka cluster");
            pass.status.cluster_id = Some(cluster_id);
            if quorum.is_some() {
                pass.status.quorum = quorum;
            }
            Ok(ControlFlow::Break(End::Wait(Action::requeue(BUSY_REQUEUE))))
        }
    }
}
