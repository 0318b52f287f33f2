//! The publish stage: every member cluster's objects built (purely, by
//! [`crate::kafka::build`]) with the nodes' certificates for every address they have, and
//! handed to the agents as this `Kafka`'s desired state. With per-node Services whose addresses
//! are not reported yet, only the Services go out first.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;

use kstretch_api::Kafka;
use kstretch_api::condition::Condition;
use kube::ResourceExt;

use super::objects::{self, Inputs};
use super::pass::{
    AgentReports, BUSY_REQUEUE, End, Flow, Pass, PoolIdsByName, address_nodes, advertise_external,
    keep_or_retain,
};
use super::plan::Plan;
use crate::budget;
use crate::config_map;
use crate::error::Error;
use crate::jmx_exporter;
use crate::kafka::build::{self, Built};
use crate::kafka::context::Context;
use crate::kafka::exporter;
use crate::kafka::external::{self, Unadvertised};
use crate::kafka::maintenance;
use crate::kafka::quorum;
use crate::kafka::recover;
use crate::kafka::resolve::Resolved;
use crate::kafka::status;
use crate::kafka::warning::{Reason, Warning};
use crate::link::{Owner, Part};
use crate::logging;
use crate::pki::{self, CaKind, CertError};

/// Builds and publishes this pass's objects; ends the pass while per-node addresses are pending.
pub(super) async fn publish(pass: &mut Pass<'_>, plan: &mut Plan) -> Flow<Built> {
    proceed!(await_addresses(pass, plan).await);
    let mut built = proceed!(build(pass, plan).await);
    let kafka_name = pass.kafka.name_any();
    build::add_ca_copies(
        &mut built,
        pass.kafka,
        &pass.ctx.members.own,
        &[
            (CaKind::Cluster.cert_secret(&kafka_name), &plan.ca.public),
            (
                CaKind::Clients.cert_secret(&kafka_name),
                &plan.clients_ca.public,
            ),
        ],
    );
    pass.warnings.extend(
        built
            .warnings
            .iter()
            .map(|w| Warning::new(Reason::ConfigurationIgnored, w.clone())),
    );
    pass.warnings.extend(
        plan.resolved
            .not_acted_on
            .iter()
            .map(|w| Warning::new(Reason::NotActedOn, w.clone())),
    );
    pass.warnings.extend(
        plan.resolved
            .deprecated
            .iter()
            .map(|w| Warning::new(Reason::DeprecatedObjects, w.clone())),
    );
    if let Some(r) = &plan.recovering {
        recover::equip(pass.ctx, pass.kafka, r, &mut built, &mut pass.warnings);
    }
    if (plan.resolved.metrics.is_some() || plan.resolved.metrics_reporter.is_some())
        && let Err(r) = jmx_exporter::equip(
            &mut built.objects,
            &pass.ctx.agents.images(),
            jmx_exporter::KAFKA,
        )
    {
        return pass.refused(r.reason, &r.message);
    }
    let disrupted = disrupted_clusters(pass.ctx, pass.kafka, &built);
    let unsettled = pass
        .status
        .quorum
        .as_ref()
        .and_then(|q| q.unsettled.as_deref());
    build::add_budgets(
        &mut built,
        pass.kafka,
        budget::closed(&disrupted, unsettled),
    );
    pass.ctx
        .owners
        .put(pass.owner.clone(), Part::Objects(built.objects.clone()))?;
    plan.refused_services = refused_services(pass.ctx, pass.kafka, plan);
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

/// The member clusters where a node of the Kafka may be down, from what their agents report.
fn disrupted_clusters(ctx: &Context, kafka: &Kafka, built: &Built) -> BTreeSet<String> {
    let reports: BTreeMap<String, Vec<_>> = ctx
        .agents
        .list()
        .into_iter()
        .filter(|r| r.connected && r.status_at.is_some())
        .map(|r| (r.cluster_alias, r.podsets))
        .collect();
    budget::disrupted(
        &kafka.namespace().unwrap_or_default(),
        &build::podsets(built),
        &reports,
    )
}

/// With per-node Services, fills in their reported addresses; while some are missing, only
/// the Services are published and the pass ends with `AddressPending`.
async fn await_addresses(pass: &mut Pass<'_>, plan: &mut Plan) -> Flow<()> {
    let (ctx, kafka) = (pass.ctx, pass.kafka);
    let per_node = match plan.resolved.per_node.clone() {
        Some(per_node) => address_nodes(ctx, kafka, &mut plan.resolved, &plan.ids, &per_node),
        None => Vec::new(),
    };
    if !plan.resolved.external.is_empty() {
        plan.agent_reports = AgentReports::read(ctx);
    }
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

/// Every node's certificate, for every address it now has, and the objects built with them:
/// the certificates are read, the objects decided ([`objects::decide`]), and new certificates
/// stored before anything built with them is published.
async fn build(pass: &mut Pass<'_>, plan: &Plan) -> Flow<Built> {
    let (client, kafka) = (&pass.ctx.client, pass.kafka);
    let stored_certs = match pki::stored_node_certs(client, kafka).await {
        Ok(stored) => stored,
        Err(CertError::Refused(r)) => return pass.refused(r.reason, &r.message),
        Err(CertError::Kube(e)) => return Err(e.into()),
    };
    let wanted = &plan.resolved.listener_certificates;
    let listener_certs = match pki::listener_certificates(client, kafka, wanted).await {
        Ok(certs) => Ok(certs),
        Err(CertError::Refused(r)) => Err(r),
        Err(CertError::Kube(e)) => return Err(e.into()),
    };
    let namespace = kafka.namespace().unwrap_or_default();
    let metrics_rules = config_map::read_named(
        client,
        &namespace,
        plan.resolved.metrics.as_ref(),
        |source, data| jmx_exporter::rules(source, data, jmx_exporter::KAFKA),
    )
    .await?;
    let external_logging = config_map::read_named(
        client,
        &namespace,
        logging::external_source(kafka.spec.kafka.logging.as_ref()),
        |source, data| logging::external_text(".spec.kafka", source, data),
    )
    .await?;
    let decided = objects::decide(Inputs {
        kafka,
        resolved: &plan.resolved,
        ids: &plan.ids,
        cluster_id: &plan.cluster_id,
        quorum: quorum::mode(&pass.status),
        initial_voters: &quorum::initial_voters(&pass.status),
        ca: &plan.ca,
        clients_ca: &plan.clients_ca,
        stored_certs,
        listener_certs,
        metrics_rules,
        external_logging,
        now: time::OffsetDateTime::now_utc(),
        renew_expiring: plan.maintenance.windows.open(),
    });
    let decided = match decided {
        Ok(decided) => decided,
        Err(r) => return pass.refused(r.reason, &r.message),
    };
    let waiting: Vec<String> = [&plan.ca.postponed, &plan.clients_ca.postponed]
        .into_iter()
        .flatten()
        .cloned()
        .chain(
            (!decided.postponed_certs.is_empty())
                .then(|| format!("the certificates of {}", decided.postponed_certs.join(", "))),
        )
        .collect();
    pass.warnings
        .extend(maintenance::warnings(&plan.maintenance, &waiting));
    if let Some(certs) = &decided.store_certs {
        match pki::store_node_certs(client, kafka, certs).await {
            Ok(()) => {}
            Err(CertError::Refused(r)) => return pass.refused(r.reason, &r.message),
            Err(CertError::Kube(e)) => return Err(e.into()),
        }
    }
    let mut built = decided.built;
    if let (Some(spec), Some(access)) = (&kafka.spec.kafka_exporter, &decided.exporter) {
        let images = pass.ctx.agents.images();
        let access = (&access.identity, access.bootstrap.as_str());
        match exporter::deploy(
            kafka,
            spec,
            &plan.resolved,
            &images,
            &plan.ca.trusted,
            access,
        ) {
            Ok((alias, objects)) => built.objects.entry(alias).or_default().extend(objects),
            Err(why) => {
                if let exporter::NotDeployed::NoImage { alias } = &why
                    && let Some(Part::Objects(before)) = pass.ctx.owners.get(&pass.owner)
                {
                    let before = before.get(alias).map_or(&[][..], Vec::as_slice);
                    let kept = exporter::kept(&kafka.name_any(), before);
                    built.objects.entry(alias.clone()).or_default().extend(kept);
                }
                pass.warnings.push(Warning::new(
                    Reason::KafkaExporterNotDeployed,
                    why.message(),
                ));
            }
        }
    }
    Ok(ControlFlow::Continue(built))
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
