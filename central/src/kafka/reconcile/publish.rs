//! The publish stage: what every member cluster's objects are built from read
//! ([`read::for_objects`]), the objects and the certificates to store decided purely
//! ([`objects::decide`]), the new certificates stored, and the objects handed to the agents as
//! this `Kafka`'s desired state. With per-node Services whose addresses are not reported yet,
//! only the Services go out first.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use kstretch_api::Kafka;
use kstretch_api::condition::Condition;
use kube::ResourceExt;

use super::objects::{self, Around, Inputs};
use super::pass::{
    BUSY_REQUEUE, End, Flow, Pass, PoolIdsByName, address_nodes, advertise_external, keep_or_retain,
};
use super::plan::Plan;
use super::read;
use super::refuse::refused;
use crate::error::Error;
use crate::kafka::build::{self, Built};
use crate::kafka::context::Context;
use crate::kafka::external::{self, Unadvertised};
use crate::kafka::quorum;
use crate::kafka::resolve::Resolved;
use crate::kafka::status;
use crate::link::{Owner, Part};
use crate::pki::{self, CertError};

/// Builds and publishes this pass's objects; ends the pass while per-node addresses are pending.
/// What they are built from is read first, they are decided purely ([`objects::decide`]), and
/// new certificates are stored before anything built with them goes out.
pub(super) async fn publish(pass: &mut Pass<'_>, plan: &mut Plan) -> Flow<Built> {
    proceed!(await_addresses(pass, plan).await);
    let (ctx, kafka) = (pass.ctx, pass.kafka);
    let stored = match read::for_objects(ctx, kafka, &plan.resolved).await? {
        Ok(stored) => stored,
        Err(refusal) => return refused(refusal),
    };
    // Only Kafka Exporter reads what was published (to keep it while its image is unknown):
    // the copy is not made for every pass.
    let published = match kafka
        .spec
        .kafka_exporter
        .as_ref()
        .map(|_| ctx.owners.get(&pass.owner))
    {
        Some(Some(Part::Objects(objects))) => Some(objects),
        _ => None,
    };
    let inputs = Inputs {
        kafka,
        resolved: &plan.resolved,
        ids: &plan.ids,
        cluster_id: &plan.cluster_id,
        quorum: quorum::mode(&pass.status),
        initial_voters: &quorum::initial_voters(&pass.status),
        ca: &plan.ca,
        clients_ca: &plan.clients_ca,
        stored_certs: stored.node_certs,
        listener_certs: stored.listener_certs,
        metrics_rules: stored.metrics_rules,
        external_logging: stored.external_logging,
        now: time::OffsetDateTime::now_utc(),
        renew_expiring: plan.maintenance.windows.open(),
    };
    let around = Around {
        own_cluster: &ctx.members.own,
        agents: &plan.agent_reports,
        recovering: plan.recovering.as_ref(),
        maintenance: &plan.maintenance,
        published: published.as_ref(),
        quorum_unsettled: pass
            .status
            .quorum
            .as_ref()
            .and_then(|q| q.unsettled.as_deref()),
    };
    let publishable = match objects::decide(inputs, around) {
        Ok(publishable) => publishable,
        Err(refusal) => return refused(refusal),
    };
    if let Some(certs) = &publishable.store_certs {
        match pki::store_node_certs(&ctx.client, kafka, certs).await {
            Ok(()) => {}
            Err(CertError::Refused(r)) => return refused(r),
            Err(CertError::Kube(e)) => return Err(e.into()),
        }
    }
    pass.warnings.extend(publishable.warnings);
    let built = publishable.built;
    ctx.owners
        .put(pass.owner.clone(), Part::Objects(built.objects.clone()))?;
    plan.refused_services = refused_services(ctx, kafka, plan);
    Ok(ControlFlow::Continue(built))
}

/// The listeners' Services that an apiserver refused in the snapshot now published to its
/// cluster (a report of an earlier snapshot does not count: the user may have fixed it).
fn refused_services(ctx: &Context, kafka: &Kafka, plan: &Plan) -> Vec<String> {
    if plan.resolved.external.is_empty() {
        return Vec::new();
    }
    let names = external::service_listeners(
        &kafka.name_any(),
        &plan.resolved.external,
        &build::brokers(&plan.resolved, &plan.ids),
    );
    let reports: Vec<(&str, _)> = plan
        .agent_reports
        .last_apply
        .iter()
        .filter(|(alias, a)| ctx.owners.published_hash(alias).as_ref() == Some(&a.hash))
        .map(|(alias, a)| (alias.as_str(), a))
        .collect();
    external::refused(&names, &kafka.namespace().unwrap_or_default(), &reports)
}

/// With per-node Services, fills in their reported addresses; while some are missing, only
/// the Services are published and the pass ends with `AddressPending`.
async fn await_addresses(pass: &mut Pass<'_>, plan: &mut Plan) -> Flow<()> {
    let (ctx, kafka) = (pass.ctx, pass.kafka);
    let per_node = match plan.resolved.per_node.clone() {
        Some(per_node) => address_nodes(
            kafka,
            &mut plan.resolved,
            &plan.ids,
            &per_node,
            &plan.agent_reports,
        ),
        None => Vec::new(),
    };
    let listeners = advertise_external(kafka, &mut plan.resolved, &plan.ids, &plan.agent_reports);
    if per_node.is_empty() && listeners.is_empty() {
        return Ok(ControlFlow::Continue(()));
    }
    let fresh = nothing_runs_yet(&pass.status.registered_node_ids, &plan.resolved);
    publish_services_first(ctx, kafka, &pass.owner, &plan.resolved, &plan.ids, fresh)?;
    let refused = refused_services(ctx, kafka, plan);
    let condition = waiting_condition(per_node, listeners, &refused);
    pass.status.conditions = status::conditions(
        &pass.status.conditions,
        condition,
        &pass.warnings,
        &pass.now,
    );
    Ok(ControlFlow::Break(End::Wait(
        kube::runtime::controller::Action::requeue(BUSY_REQUEUE),
    )))
}

/// Whether no node of the Kafka was ever given an ID, neither recorded in a status nor adopted
/// from the pods the agents report: only then may a first snapshot hold nothing but Services.
/// A `Kafka` and its pools re-applied without status over running pods (a new central, GitOps)
/// are not fresh: their adopted IDs say so, and a Services-only snapshot would delete the pods.
fn nothing_runs_yet(registered: &[i32], resolved: &Resolved) -> bool {
    registered.is_empty()
        && resolved
            .pools
            .iter()
            .all(|p| p.ids.current.as_ref().is_none_or(Vec::is_empty) && p.ids.leaving.is_empty())
}

/// The `Ready` condition while brokers wait to advertise: a listener a member cluster cannot
/// serve (its API, a host, a Service the apiserver refused) first, as only the user can mend
/// it; else what is still to be reported.
fn waiting_condition(
    per_node: Vec<String>,
    listeners: Vec<Unadvertised>,
    refused: &[String],
) -> Condition {
    let (mut pending, mut invalid, mut not_served) = (Vec::new(), Vec::new(), Vec::new());
    for l in listeners {
        match l {
            Unadvertised::Pending(line) => pending.push(line),
            Unadvertised::Invalid(line) => invalid.push(line),
            Unadvertised::ApiNotServed(line) => not_served.push(line),
        }
    }
    let kept = "the rest of the Kafka runs as before";
    let dedup = |mut lines: Vec<String>| {
        lines.dedup();
        lines.join("; ")
    };
    if !not_served.is_empty() {
        status::not_ready(
            external::API_NOT_SERVED,
            format!("{}: {kept}", dedup(not_served)),
        )
    } else if !invalid.is_empty() {
        status::not_ready("InvalidListener", format!("{}: {kept}", dedup(invalid)))
    } else if !refused.is_empty() {
        status::not_ready(
            external::SERVICE_REFUSED,
            external::refused_message(refused),
        )
    } else {
        status::not_ready("AddressPending", pending_message(per_node, pending))
    }
}

/// What the `Ready` condition says while addresses are pending.
fn pending_message(per_node: Vec<String>, listeners: Vec<String>) -> String {
    let message = [
        ("the addresses of the per-node Services", per_node),
        ("the addresses of the external listeners", listeners),
    ]
    .into_iter()
    .filter(|(_, pending)| !pending.is_empty())
    .map(|(what, pending)| format!("{what}: {}", pending.join("; ")))
    .collect::<Vec<_>>()
    .join("; and for ");
    format!("waiting for {message}")
}

/// While per-node addresses are pending, the per-node Services must exist (their addresses go
/// into the configuration) and everything that runs must stay: the Services are added to this
/// `Kafka`'s last contribution. Without one, a new cluster gets only its Services, and a
/// cluster central knows nothing of yet (just after a restart) is retained as it is.
fn publish_services_first(
    ctx: &Context,
    kafka: &Kafka,
    owner: &Owner,
    effective: &Resolved,
    ids: &PoolIdsByName,
    fresh: bool,
) -> Result<(), Error> {
    let (name, namespace) = (kafka.name_any(), kafka.namespace().unwrap_or_default());
    let mut services = build::per_node_services(&name, &namespace, effective, ids);
    for (alias, list) in build::external_services(&name, &namespace, effective, ids) {
        services.entry(alias).or_default().extend(list);
    }
    let mut objects = match ctx.owners.get(owner) {
        Some(Part::Objects(objects)) => objects,
        _ if fresh => BTreeMap::new(),
        _ => return keep_or_retain(&ctx.owners, owner),
    };
    for (alias, list) in services {
        let existing = objects.entry(alias).or_default();
        for service in list {
            let same = |o: &serde_json::Value| {
                o["kind"] == service["kind"] && o["metadata"]["name"] == service["metadata"]["name"]
            };
            match existing.iter_mut().find(|o| same(o)) {
                Some(slot) => *slot = service,
                None => existing.push(service),
            }
        }
    }
    ctx.owners.put(owner.clone(), Part::Objects(objects))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::nothing_runs_yet;
    use crate::kafka::resolve::resolve;
    use crate::kafka::resolve::tests::{kafka, members, pool};

    #[test]
    fn a_kafka_is_fresh_only_while_no_node_has_an_id_recorded_or_adopted() {
        let k = kafka(json!({}));
        let new = pool("b", &["broker", "controller"], 1, json!({}));
        let mut resolved = resolve(&k, &[&new], &members()).unwrap();
        assert!(nothing_runs_yet(&[], &resolved));
        assert!(!nothing_runs_yet(&[0], &resolved), "registered in Kafka");

        // Re-applied without status over running pods: the IDs adopted from the agents'
        // reports make it not fresh, so the running pods stay in the snapshot.
        resolved.pools[0].ids.current = Some(vec![0]);
        assert!(!nothing_runs_yet(&[], &resolved));

        resolved.pools[0].ids.current = None;
        resolved.pools[0].ids.leaving = vec![3];
        assert!(!nothing_runs_yet(&[], &resolved), "a node still leaving");
    }
}
