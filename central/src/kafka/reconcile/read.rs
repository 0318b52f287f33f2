//! What the front of a pass reads from the apiserver and Kafka between its pure decisions:
//! the CAs and central's admin identity ([`secrets`]), what the brokers the guard asks about
//! hold ([`held`]), and what the objects are built from besides the plan ([`for_objects`]). The CAs are reconciled here, first, as Strimzi's CA reconciler does:
//! generated when absent and renewed when due, before anything is built from them.

use std::collections::{BTreeMap, BTreeSet};

use kstretch_api::{Kafka, KafkaOperation};
use kube::ResourceExt;

use super::guard::{Held, Questions};
use super::plan::Secrets;
use super::refuse::Cause;
use crate::config_map;
use crate::error::Error;
use crate::jmx_exporter;
use crate::kafka::context::Context;
use crate::kafka::maintenance;
use crate::kafka::moving;
use crate::kafka::resolve::{self, Resolved};
use crate::kafka::view::{self, Wanted};
use crate::logging;
use crate::pki::{self, CaKind, CertError, Pem};
use crate::status::Refusal;

/// The cluster and clients CAs of `kafka` (the clients CA exists for KafkaUsers, as in
/// Strimzi), central's client identity under the cluster CA, and the maintenance windows now;
/// or why they cannot be used.
pub(super) async fn secrets(
    ctx: &Context,
    kafka: &Kafka,
) -> Result<Result<Secrets, Refusal>, Error> {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let maintenance = maintenance::at(&kafka.spec.maintenance_time_windows, now);
    let renew_now = maintenance.windows.open();
    let (ca, clients_ca) = match both_cas(&ctx.client, kafka, renew_now).await {
        Ok(cas) => cas,
        Err(CertError::Refused(r)) => return Ok(Err(r)),
        Err(CertError::Kube(e)) => return Err(e.into()),
    };
    let (namespace, name) = (kafka.namespace().unwrap_or_default(), kafka.name_any());
    for (kind, ca) in [("cluster", &ca), ("clients", &clients_ca)] {
        if let Some(expiry) = pki::expires_at(&ca.pem.cert) {
            ctx.metrics.ca_expires(&namespace, &name, kind, expiry);
        }
    }
    let admin_tls = match resolve::admin_uses_tls(kafka) {
        Ok(false) => None,
        Ok(true) => match ctx.kafka.tls_for(&namespace, &name, &ca) {
            Ok(tls) => Some(tls),
            Err(r) => return Ok(Err(r)),
        },
        Err(message) => {
            return Ok(Err(Refusal::new(
                Cause::InvalidAnnotation.as_str(),
                message,
            )));
        }
    };
    Ok(Ok(Secrets {
        ca,
        clients_ca,
        admin_tls,
        maintenance,
    }))
}

/// The cluster CA and the clients CA of `kafka`.
async fn both_cas(
    client: &kube::Client,
    kafka: &Kafka,
    renew_now: bool,
) -> Result<(pki::Ca, pki::Ca), CertError> {
    Ok((
        pki::ca(client, kafka, CaKind::Cluster, renew_now).await?,
        pki::ca(client, kafka, CaKind::Clients, renew_now).await?,
    ))
}

/// The answers to the guard's `questions`: what the brokers asked about hold (from Kafka at
/// `bootstrap`), and which brokers the drains among `operations` that run name.
pub(super) async fn held(
    ctx: &Context,
    operations: &[KafkaOperation],
    bootstrap: Option<&str>,
    questions: &Questions,
) -> Held {
    let brokers = questions.brokers();
    let holding = if brokers.is_empty() {
        Ok(BTreeMap::new())
    } else {
        view::read(&ctx.kafka, bootstrap, Wanted::topics())
            .await
            .holding(&brokers)
            .map_err(|e| e.to_string())
    };
    let in_drains = if questions.drains() {
        Ok(moving::in_running_drains(operations))
    } else {
        Ok(BTreeSet::new())
    };
    Held { holding, in_drains }
}

/// What the objects are built from besides the plan: the node certificates stored by earlier
/// passes, the listeners' own certificates, and the user's ConfigMaps (the JMX exporter's
/// rules, an `external` logging configuration). The reasons the user's Secrets and ConfigMaps
/// cannot be used are kept for [`super::objects::decide`], which says them in order.
pub(super) struct Stored {
    pub(super) node_certs: BTreeMap<String, Pem>,
    pub(super) listener_certs: Result<BTreeMap<String, Pem>, Refusal>,
    pub(super) metrics_rules: Result<Option<String>, Refusal>,
    pub(super) external_logging: Result<Option<String>, Refusal>,
}

/// Reads what the objects of `kafka`, as `resolved`, are built from; or why the stored
/// certificates cannot be used.
pub(super) async fn for_objects(
    ctx: &Context,
    kafka: &Kafka,
    resolved: &Resolved,
) -> Result<Result<Stored, Refusal>, Error> {
    let client = &ctx.client;
    let node_certs = match pki::stored_node_certs(client, kafka).await {
        Ok(stored) => stored,
        Err(CertError::Refused(r)) => return Ok(Err(r)),
        Err(CertError::Kube(e)) => return Err(e.into()),
    };
    let wanted = &resolved.listener_certificates;
    let listener_certs = match pki::listener_certificates(client, kafka, wanted).await {
        Ok(certs) => Ok(certs),
        Err(CertError::Refused(r)) => Err(r),
        Err(CertError::Kube(e)) => return Err(e.into()),
    };
    let namespace = kafka.namespace().unwrap_or_default();
    let metrics_rules = config_map::read_named(
        client,
        &namespace,
        resolved.metrics.as_ref(),
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
    Ok(Ok(Stored {
        node_certs,
        listener_certs,
        metrics_rules,
        external_logging,
    }))
}
