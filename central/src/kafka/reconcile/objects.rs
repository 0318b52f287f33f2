//! What a pass publishes, decided purely from what was read before: the cluster's model, every
//! node's certificate for every name it is reached by (kept, issued or renewed), every object
//! of every member cluster and what completes them (Kafka Exporter, the CA copies, a quorum
//! recovery's tool, the metrics jars, the disruption budgets), and the warnings found on the
//! way. No `.await`: the publish stage reads, calls [`decide`], then stores the certificates it
//! says are new before anything built with them goes out.

use std::collections::{BTreeMap, BTreeSet};

use kstretch_api::Kafka;
use kstretch_core::kraft;
use kube::ResourceExt;
use time::OffsetDateTime;

use serde_json::Value;

use super::pass::AgentReports;
use crate::budget;
use crate::jmx_exporter;
use crate::kafka::build::{self, Built, UserFiles};
use crate::kafka::exporter;
use crate::kafka::maintenance::{self, Maintenance};
use crate::kafka::recover::{self, Recovering};
use crate::kafka::resolve::Resolved;
use crate::kafka::warning::{Reason, Warning};
use crate::logging;
use crate::pki::{self, CaKind, Pem};
use crate::status::Refusal;

/// Everything the objects are built from.
pub(super) struct Inputs<'a> {
    pub(super) kafka: &'a Kafka,
    pub(super) resolved: &'a Resolved,
    /// Each pool's node IDs after this pass.
    pub(super) ids: &'a BTreeMap<String, BTreeSet<i32>>,
    pub(super) cluster_id: &'a str,
    pub(super) quorum: kraft::QuorumMode,
    /// A dynamic quorum's first voters, until it has formed (node ID → directory ID).
    pub(super) initial_voters: &'a BTreeMap<i32, u128>,
    pub(super) ca: &'a pki::Ca,
    pub(super) clients_ca: &'a pki::Ca,
    /// The node certificates stored by earlier passes.
    pub(super) stored_certs: BTreeMap<String, Pem>,
    /// The listeners' own certificates (`brokerCertChainAndKey`) as read from the user's
    /// Secrets, or why they cannot be used.
    pub(super) listener_certs: Result<BTreeMap<String, Pem>, Refusal>,
    /// The JMX exporter's rules (`metricsConfig`) as read from the user's ConfigMap, or why
    /// they cannot be used.
    pub(super) metrics_rules: Result<Option<String>, Refusal>,
    /// An `external` logging configuration as read from the user's ConfigMap, or why it cannot
    /// be used.
    pub(super) external_logging: Result<Option<String>, Refusal>,
    pub(super) now: OffsetDateTime,
    /// Whether node certificates that are only near expiry are renewed now (a maintenance
    /// window is open).
    pub(super) renew_expiring: bool,
}

/// What [`objects`] built.
pub(super) struct Decided {
    pub(super) built: Built,
    /// The nodes' certificates, when they differ from those stored: stored before publishing.
    pub(super) store_certs: Option<BTreeMap<String, Pem>>,
    /// Pods whose certificate renewal waits for a maintenance window.
    pub(super) postponed_certs: Vec<String>,
    /// Kafka Exporter's client certificate and the brokers' replication bootstrap, when
    /// `kafkaExporter` asks for one.
    pub(super) exporter: Option<ExporterAccess>,
}

/// How Kafka Exporter reaches the brokers.
pub(super) struct ExporterAccess {
    pub(super) identity: Pem,
    pub(super) bootstrap: String,
}

/// What the objects are completed with once built: the member clusters' side of things.
pub(super) struct Around<'a> {
    /// The alias of the cluster central runs in (where the CA certificates are).
    pub(super) own_cluster: &'a str,
    pub(super) agents: &'a AgentReports,
    pub(super) recovering: Option<&'a Recovering>,
    pub(super) maintenance: &'a Maintenance,
    /// What this `Kafka` last published, by member cluster: a Kafka Exporter whose image is
    /// not known now keeps running as it was.
    pub(super) published: Option<&'a BTreeMap<String, Vec<Value>>>,
    /// Why the controller quorum is not whole, as the status says.
    pub(super) quorum_unsettled: Option<&'a str>,
}

/// What a pass publishes: every member cluster's objects, the certificates to store before
/// (when they changed), and the warnings found on the way.
pub(super) struct Publishable {
    pub(super) built: Built,
    pub(super) store_certs: Option<BTreeMap<String, Pem>>,
    pub(super) warnings: Vec<Warning>,
}

/// Every object of every member cluster, with the certificates the nodes need and the tools,
/// exporters, CA copies and disruption budgets around them; or why it cannot be published.
pub(super) fn decide(inputs: Inputs<'_>, around: Around<'_>) -> Result<Publishable, Refusal> {
    let (kafka, resolved) = (inputs.kafka, inputs.resolved);
    let (ca, clients_ca) = (inputs.ca, inputs.clients_ca);
    let decided = objects(inputs)?;
    let waiting: Vec<String> = [&ca.postponed, &clients_ca.postponed]
        .into_iter()
        .flatten()
        .cloned()
        .chain(
            (!decided.postponed_certs.is_empty())
                .then(|| format!("the certificates of {}", decided.postponed_certs.join(", "))),
        )
        .collect();
    let mut warnings = maintenance::warnings(around.maintenance, &waiting);
    warnings.extend(
        [&ca.not_acted_on, &clients_ca.not_acted_on]
            .into_iter()
            .flatten()
            .map(|why| Warning::new(Reason::NotActedOn, why.clone())),
    );
    let mut built = decided.built;
    if let (Some(spec), Some(access)) = (&kafka.spec.kafka_exporter, &decided.exporter) {
        let access = (&access.identity, access.bootstrap.as_str());
        let images = &around.agents.images;
        match exporter::deploy(kafka, spec, resolved, images, &ca.trusted, access) {
            Ok((alias, objects)) => built.objects.entry(alias).or_default().extend(objects),
            Err(why) => {
                if let exporter::NotDeployed::NoImage { alias } = &why
                    && let Some(before) = around.published
                {
                    let before = before.get(alias).map_or(&[][..], Vec::as_slice);
                    let kept = exporter::kept(&kafka.name_any(), before);
                    built.objects.entry(alias.clone()).or_default().extend(kept);
                }
                warnings.push(Warning::new(
                    Reason::KafkaExporterNotDeployed,
                    why.message(),
                ));
            }
        }
    }
    let kafka_name = kafka.name_any();
    build::add_ca_copies(
        &mut built,
        kafka,
        around.own_cluster,
        &[
            (CaKind::Cluster.cert_secret(&kafka_name), &ca.public),
            (CaKind::Clients.cert_secret(&kafka_name), &clients_ca.public),
        ],
    );
    let named = [
        (Reason::ConfigurationIgnored, &built.warnings),
        (Reason::NotActedOn, &resolved.not_acted_on),
        (Reason::DeprecatedObjects, &resolved.deprecated),
    ];
    for (reason, lines) in named {
        warnings.extend(lines.iter().map(|w| Warning::new(reason, w.clone())));
    }
    if let Some(r) = around.recovering {
        let podsets = around.agents.podsets(&r.recovery.cluster);
        let survivor = recover::survivor_pod(kafka, &r.recovery, podsets);
        let image = around.agents.images.get(&r.recovery.cluster);
        let image = image.map(String::as_str);
        recover::equip(r, survivor.as_ref(), image, &mut built, &mut warnings);
    }
    if resolved.metrics.is_some() || resolved.metrics_reporter.is_some() {
        let images = &around.agents.images;
        jmx_exporter::equip(&mut built.objects, images, jmx_exporter::KAFKA)?;
    }
    let namespace = kafka.namespace().unwrap_or_default();
    let live = around.agents.live_podsets();
    let disrupted = budget::disrupted(&namespace, &build::podsets(&built), &live);
    let closed = budget::closed(&disrupted, around.quorum_unsettled);
    build::add_budgets(&mut built, kafka, closed);
    Ok(Publishable {
        built,
        store_certs: decided.store_certs,
        warnings,
    })
}

/// Every object of the `Kafka`, with the certificates its nodes need; or why it cannot be
/// built, in the order the user would fix it (names, the CA, the listeners' certificates,
/// the metrics' rules, the logging, the configuration).
fn objects(inputs: Inputs<'_>) -> Result<Decided, Refusal> {
    let refusal = |e: kraft::ConfigError| Refusal::new(e.reason(), e.to_string());
    let model = build::cluster_model(
        inputs.kafka,
        inputs.resolved,
        inputs.ids,
        inputs.cluster_id,
        inputs.quorum,
    );
    let hosts = build::node_hostnames(&model).map_err(refusal)?;
    let kafka_name = inputs.kafka.name_any();
    let mut stored_certs = inputs.stored_certs;
    // Kept with the nodes' certificates, but not one of them.
    let stored_exporter = stored_certs.remove(&exporter::name(&kafka_name));
    let exporter = match &inputs.kafka.spec.kafka_exporter {
        Some(_) => {
            let (identity, issued) = pki::exporter_identity(
                &kafka_name,
                inputs.ca,
                stored_exporter.clone(),
                inputs.now,
            )?;
            let bootstrap =
                kraft::bootstrap_servers(&model, kraft::REPLICATION_LISTENER).map_err(refusal)?;
            Some((
                ExporterAccess {
                    identity,
                    bootstrap,
                },
                issued,
            ))
        }
        None => None,
    };
    let clients_trusted = model
        .needs_clients_ca()
        .then_some(inputs.clients_ca.trusted.as_str());
    let node_certs = pki::node_certificates(
        &kafka_name,
        inputs.ca,
        clients_trusted,
        &hosts,
        stored_certs,
        inputs.now,
        inputs.renew_expiring,
    )?;
    let mut certs = node_certs.certs;
    certs.listeners = inputs.listener_certs?;
    let metrics_rules = inputs.metrics_rules?;
    let external_logging = inputs.external_logging?;
    let log4j2 = logging::properties(
        &logging::KAFKA_DEFAULTS,
        inputs.kafka.spec.kafka.logging.as_ref(),
        external_logging.as_deref(),
    );
    let files = UserFiles {
        metrics_rules: metrics_rules.as_deref(),
        log4j2: log4j2.as_deref(),
    };
    let built = build::build(
        inputs.kafka,
        inputs.resolved,
        inputs.ids,
        model,
        &certs,
        inputs.initial_voters,
        files,
    )
    .map_err(refusal)?;
    // The exporter's certificate is stored with the nodes' when it or they changed, and
    // dropped with the exporter.
    let exporter_changed = match &exporter {
        Some((_, issued)) => *issued,
        None => stored_exporter.is_some(),
    };
    let mut stored = certs.nodes;
    if let Some((access, _)) = &exporter {
        stored.insert(exporter::name(&kafka_name), access.identity.clone());
    }
    Ok(Decided {
        built,
        store_certs: (node_certs.store || exporter_changed).then_some(stored),
        postponed_certs: node_certs.postponed,
        exporter: exporter.map(|(access, _)| access),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;
    use crate::kafka::resolve::tests::{kafka, members, pool};
    use crate::kafka::resolve::{self};
    use crate::pki::CaKind;

    fn ids(list: &[i32]) -> BTreeMap<String, BTreeSet<i32>> {
        BTreeMap::from([("dual".to_owned(), list.iter().copied().collect())])
    }

    #[test]
    fn certificates_are_issued_once_kept_while_good_and_dropped_with_their_node() {
        let k = kafka(json!({}));
        let d = pool("dual", &["controller", "broker"], 3, json!({}));
        let resolved = resolve::resolve(&k, &[&d], &members()).unwrap();
        let (ca, clients_ca) = (
            pki::test_ca(&k, CaKind::Cluster),
            pki::test_ca(&k, CaKind::Clients),
        );
        let voters = BTreeMap::new();
        let inputs = |ids, stored_certs, listener_certs| Inputs {
            kafka: &k,
            resolved: &resolved,
            ids,
            cluster_id: "abc",
            quorum: kraft::QuorumMode::Static,
            initial_voters: &voters,
            ca: &ca,
            clients_ca: &clients_ca,
            stored_certs,
            listener_certs,
            metrics_rules: Ok(None),
            external_logging: Ok(None),
            now: OffsetDateTime::now_utc(),
            renew_expiring: true,
        };
        let three = ids(&[0, 1, 2]);

        // A new cluster: every node gets a certificate, stored before anything is published.
        let first = objects(inputs(&three, BTreeMap::new(), Ok(BTreeMap::new()))).unwrap();
        let stored = first
            .store_certs
            .clone()
            .expect("new certificates are stored");
        assert_eq!(
            stored.keys().collect::<Vec<_>>(),
            [
                "my-cluster-dual-0",
                "my-cluster-dual-1",
                "my-cluster-dual-2"
            ]
        );

        // The next pass keeps them: nothing to store, and no node rolls.
        let again = objects(inputs(&three, stored.clone(), Ok(BTreeMap::new()))).unwrap();
        assert_eq!(again.store_certs, None);
        let revisions = |b: &Built| {
            b.nodes
                .values()
                .map(|n| n.revision.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(revisions(&again.built), revisions(&first.built));

        // A removed node's certificate goes with it; the others stay as they were.
        let two = ids(&[0, 1]);
        let smaller = objects(inputs(&two, stored.clone(), Ok(BTreeMap::new()))).unwrap();
        let kept = smaller.store_certs.expect("the removal is stored");
        assert_eq!(kept.len(), 2);
        assert_eq!(kept["my-cluster-dual-0"], stored["my-cluster-dual-0"]);

        // Within renewalDays of their expiry, outside a maintenance window they are kept (and
        // said to wait); inside one, renewed.
        let near_expiry = OffsetDateTime::now_utc() + time::Duration::days(340);
        let waiting = objects(Inputs {
            now: near_expiry,
            renew_expiring: false,
            ..inputs(&three, stored.clone(), Ok(BTreeMap::new()))
        })
        .unwrap();
        assert_eq!(waiting.store_certs, None);
        assert_eq!(waiting.postponed_certs.len(), 3);
        let renewed = objects(Inputs {
            now: near_expiry,
            ..inputs(&three, stored.clone(), Ok(BTreeMap::new()))
        })
        .unwrap();
        assert!(renewed.postponed_certs.is_empty());
        assert_ne!(
            renewed.store_certs.expect("renewed")["my-cluster-dual-0"],
            stored["my-cluster-dual-0"]
        );

        // A listener certificate that cannot be used refuses the Kafka, naming it.
        let missing = Refusal::new("SecretNotFound", "listener tls: no Secret");
        let refused = objects(inputs(&three, stored, Err(missing.clone())));
        assert_eq!(refused.err(), Some(missing));
    }

    #[test]
    fn kafka_exporters_certificate_is_issued_kept_and_dropped_with_it() {
        let with = kafka(json!({"spec": {"kafkaExporter": {}}}));
        let without = kafka(json!({}));
        let d = pool("dual", &["controller", "broker"], 1, json!({}));
        let ca = pki::test_ca(&with, CaKind::Cluster);
        let clients_ca = pki::test_ca(&with, CaKind::Clients);
        let voters = BTreeMap::new();
        let one = ids(&[0]);
        let decide_for = |k: &Kafka, stored| {
            let resolved = resolve::resolve(k, &[&d], &members()).unwrap();
            objects(Inputs {
                kafka: k,
                resolved: &resolved,
                ids: &one,
                cluster_id: "abc",
                quorum: kraft::QuorumMode::Static,
                initial_voters: &voters,
                ca: &ca,
                clients_ca: &clients_ca,
                stored_certs: stored,
                listener_certs: Ok(BTreeMap::new()),
                metrics_rules: Ok(None),
                external_logging: Ok(None),
                now: OffsetDateTime::now_utc(),
                renew_expiring: true,
            })
            .unwrap()
        };
        let first = decide_for(&with, BTreeMap::new());
        let access = first.exporter.expect("the exporter's access");
        assert_eq!(
            access.bootstrap,
            "my-cluster-kafka-bootstrap.kafka.svc:9091"
        );
        let stored = first.store_certs.expect("stored with the nodes'");
        assert!(stored["my-cluster-kafka-exporter"] == access.identity);
        assert!(!first.built.nodes.is_empty());

        // Kept while good: nothing to store, the same certificate.
        let again = decide_for(&with, stored.clone());
        assert!(again.store_certs.is_none());
        assert!(again.exporter.expect("still there").identity == access.identity);

        // Without the exporter, its certificate goes; the nodes' stay.
        let gone = decide_for(&without, stored.clone());
        let kept = gone.store_certs.expect("the removal is stored");
        assert!(!kept.contains_key("my-cluster-kafka-exporter"));
        assert!(kept["my-cluster-dual-0"] == stored["my-cluster-dual-0"]);
        assert!(gone.exporter.is_none());
    }
}
