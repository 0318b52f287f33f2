//! The certificates of each `Kafka`: its cluster and clients CAs, kept in Strimzi's Secrets
//! (`<cluster>-cluster-ca-cert` with `ca.crt`, `<cluster>-cluster-ca` with `ca.key`, the same
//! for `clients`) in the central cluster, where the keys stay; every node's certificate for all the names it is
//! reached by, kept beside them and shipped to the node's own cluster only; and central's
//! client certificate for its admin client, which lives in memory.

mod ca;
mod issue;
mod secrets;

use std::collections::{BTreeMap, BTreeSet};

use kstretch_api::Kafka;
use kube::Client;
use time::OffsetDateTime;

pub use ca::{Ca, CaKind, CaSettings, CertError, NodeCerts, Refusal};
pub use issue::{Pem, PkiError, pkcs12, random_password};
use issue::{Usage, issue, read, still_good};
pub use secrets::{delete_generated, text as secret_text};

/// When the PEM certificate `cert` expires, in Unix seconds; `None` when it cannot be read.
pub fn expires_at(cert: &str) -> Option<i64> {
    read(cert).ok().map(|i| i.not_after.unix_timestamp())
}

/// Subject of central's client certificate, which every node accepts as a cluster member.
pub const CENTRAL_COMMON_NAME: &str = "kstretch-central";

/// CA `kind` of `kafka`: read from its Secrets, or generated into them when absent and
/// `generateCertificateAuthority` is not false; a generated CA's certificate is renewed (same
/// key) within `renewalDays` of expiry or when `strimzi.io/force-renew` asks for it, if
/// `renew_now` (a maintenance window is open); otherwise the renewal is postponed.
pub async fn ca(
    client: &Client,
    kafka: &Kafka,
    kind: CaKind,
    renew_now: bool,
) -> Result<Ca, CertError> {
    let settings = CaSettings::of(kafka, kind)?;
    let now = OffsetDateTime::now_utc();
    let material = secrets::ca(client, kafka, settings, now, renew_now).await?;
    Ok(Ca {
        pem: material.pem,
        trusted: material.trusted,
        settings,
        public: material.public,
        postponed: material.postponed,
        not_acted_on: material.not_acted_on,
    })
}

/// The node certificates of `kafka` as stored by earlier reconciliations (pod name to
/// certificate and key).
pub async fn stored_node_certs(
    client: &Client,
    kafka: &Kafka,
) -> Result<BTreeMap<String, Pem>, CertError> {
    secrets::node_certs(client, kafka).await
}

/// Stores every node's certificate and key, replacing what was stored.
pub async fn store_node_certs(
    client: &Client,
    kafka: &Kafka,
    certs: &BTreeMap<String, Pem>,
) -> Result<(), CertError> {
    secrets::store_node_certs(client, kafka, certs).await
}

/// The node certificates a Kafka's nodes get, and whether they must be stored first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeCertsDecided {
    pub certs: NodeCerts,
    /// Whether [`NodeCerts::nodes`] differ from what was stored (a certificate issued,
    /// renewed or dropped): they are stored before anything is built with them.
    pub store: bool,
    /// Pods whose certificate is within `renewalDays` of expiry and is kept until a
    /// maintenance window opens.
    pub postponed: Vec<String>,
}

/// The certificate of every pod in `hosts` (pod name to host names), from those `stored`
/// (pure): kept while still good, issued or renewed otherwise, removed nodes' dropped; with
/// the clients CA certificates `clients_trusted` when the nodes need them. Unless
/// `renew_expiring` (a maintenance window is open), a certificate that is only near its expiry
/// is kept while it is valid.
pub fn node_certificates(
    kafka: &str,
    ca: &Ca,
    clients_trusted: Option<&str>,
    hosts: &BTreeMap<String, BTreeSet<String>>,
    mut stored: BTreeMap<String, Pem>,
    now: OffsetDateTime,
    renew_expiring: bool,
) -> Result<NodeCertsDecided, Refusal> {
    let ca_read = read(&ca.pem.cert).map_err(|e| {
        ca.settings
            .kind
            .refuse(format!("the cluster CA certificate: {e}"))
    })?;
    // Removed nodes' certificates go: a pod still stopping has its files mounted already.
    let before = stored.len();
    stored.retain(|pod, _| hosts.contains_key(pod));
    let mut store = stored.len() != before;
    let mut postponed = Vec::new();
    for (pod, names) in hosts {
        let good_for = |renewal_days| {
            stored
                .get(pod)
                .is_some_and(|pem| still_good(&pem.cert, &ca_read, names, renewal_days, now))
        };
        let good = good_for(ca.settings.renewal_days)
            || (!renew_expiring && good_for(0) && {
                postponed.push(pod.clone());
                true
            });
        if !good {
            let pem = issue(
                &ca.pem,
                &node_common_name(kafka),
                names,
                Usage::Node,
                ca.settings.validity_days,
                now,
            )
            .map_err(|e| {
                ca.settings
                    .kind
                    .refuse(format!("cannot issue the certificate of {pod}: {e}"))
            })?;
            stored.insert(pod.clone(), pem);
            store = true;
        }
    }
    Ok(NodeCertsDecided {
        certs: NodeCerts {
            ca_cert: ca.trusted.clone(),
            clients_ca_cert: clients_trusted.map(str::to_owned),
            listeners: BTreeMap::new(),
            nodes: stored,
        },
        store,
        postponed,
    })
}

/// A generated CA of kind `kind` for `kafka`, for tests of what is built with one.
#[cfg(test)]
#[allow(clippy::expect_used)]
pub(crate) fn test_ca(kafka: &Kafka, kind: CaKind) -> Ca {
    let settings = CaSettings::of(kafka, kind).expect("CA settings");
    let now = OffsetDateTime::now_utc();
    let pem = issue::new_ca("test-ca", None, settings.validity_days, now).expect("a CA");
    Ca {
        trusted: pem.cert.clone(),
        pem,
        settings,
        public: BTreeMap::new(),
        postponed: None,
        not_acted_on: None,
    }
}

/// The principals of kstretch itself in `kafka`'s nodes (the nodes, central, and Kafka
/// Exporter when it runs), which an authorizer must let do everything. The exporter's is
/// listed only while it runs, so that a cluster without one keeps its configuration (and
/// does not roll) on upgrade.
pub fn kstretch_principals(kafka: &str, exporter: bool) -> Vec<String> {
    let exporter_cn = exporter_common_name(kafka);
    let mut names = vec![node_common_name(kafka), CENTRAL_COMMON_NAME.to_owned()];
    if exporter {
        names.push(exporter_cn);
    }
    names
        .iter()
        .map(|cn| format!("User:CN={cn},O={}", issue::ORGANIZATION))
        .collect()
}

/// The common name of `kafka`'s Kafka Exporter's client certificate, as Strimzi names it.
pub fn exporter_common_name(kafka: &str) -> String {
    format!("{kafka}-kafka-exporter")
}

/// Kafka Exporter's client certificate under `ca`: `stored` while the current CA certificate
/// issued it and it is not within `renewalDays` of expiring, else a new one (`true`: it must
/// be stored).
pub fn exporter_identity(
    kafka: &str,
    ca: &Ca,
    stored: Option<Pem>,
    now: OffsetDateTime,
) -> Result<(Pem, bool), Refusal> {
    let good = |pem: &Pem| {
        read(&ca.pem.cert).is_ok_and(|ca_read| {
            still_good(
                &pem.cert,
                &ca_read,
                &BTreeSet::new(),
                ca.settings.renewal_days,
                now,
            )
        })
    };
    match stored {
        Some(pem) if good(&pem) => Ok((pem, false)),
        _ => issue(
            &ca.pem,
            &exporter_common_name(kafka),
            &BTreeSet::new(),
            Usage::Client,
            ca.settings.validity_days,
            now,
        )
        .map(|pem| (pem, true))
        .map_err(|e| {
            ca.settings.kind.refuse(format!(
                "cannot issue Kafka Exporter's client certificate: {e}"
            ))
        }),
    }
}

/// The common name of every node certificate of `kafka`.
fn node_common_name(kafka: &str) -> String {
    format!("{kafka}-kafka")
}

/// The certificates and keys of `listeners` (Kafka's listener name to where the user keeps
/// them), read from Secrets of the `Kafka`'s namespace; a missing Secret or key is refused.
pub async fn listener_certificates(
    client: &Client,
    kafka: &Kafka,
    listeners: &BTreeMap<String, crate::kafka::security::SecretCertificate>,
) -> Result<BTreeMap<String, Pem>, CertError> {
    let mut out = BTreeMap::new();
    for (listener, r) in listeners {
        let secret = secrets::user_secret(client, kafka, &r.secret).await?;
        let value = |key: &str| {
            secret.as_ref().and_then(|s| secrets::text(s, key)).ok_or_else(|| Refusal {
                reason: "SecretNotFound",
                message: format!(
                    "listener {listener}: brokerCertChainAndKey names Secret {} key {key}, which does not exist; create it or fix the reference",
                    r.secret
                ),
            })
        };
        let pem = Pem {
            cert: value(&r.certificate)?,
            key: value(&r.key)?,
        };
        out.insert(listener.clone(), pem);
    }
    Ok(out)
}

/// Central's client certificate under `ca`, valid as long as the CA.
pub fn central_identity(ca: &Ca) -> Result<Pem, Refusal> {
    issue(
        &ca.pem,
        CENTRAL_COMMON_NAME,
        &BTreeSet::new(),
        Usage::Client,
        ca.settings.validity_days,
        OffsetDateTime::now_utc(),
    )
    .map_err(|e| {
        ca.settings
            .kind
            .refuse(format!("cannot issue central's client certificate: {e}"))
    })
}

/// A `KafkaUser`'s client certificate (`CN=<user>`) issued by the clients CA `ca`.
pub fn user_certificate(ca: &Ca, user: &str, validity_days: u32) -> Result<Pem, Refusal> {
    issue(
        &ca.pem,
        user,
        &BTreeSet::new(),
        Usage::User,
        validity_days,
        OffsetDateTime::now_utc(),
    )
    .map_err(|e| {
        ca.settings
            .kind
            .refuse(format!("cannot issue the certificate of user {user}: {e}"))
    })
}

/// Whether a user's certificate may stay: issued by the current certificate of `ca` and not
/// within `renewal_days` of expiring.
pub fn user_certificate_good(cert: &str, ca: &Ca, renewal_days: u32) -> bool {
    read(&ca.pem.cert).is_ok_and(|ca_read| {
        still_good(
            cert,
            &ca_read,
            &BTreeSet::new(),
            renewal_days,
            OffsetDateTime::now_utc(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kafka(cluster_ca: serde_json::Value) -> Kafka {
        serde_json::from_value(json!({
            "apiVersion": "kafka.strimzi.io/v1beta2", "kind": "Kafka",
            "metadata": {"name": "k", "namespace": "ns"},
            "spec": {"kafka": {"listeners": []}, "clusterCa": cluster_ca}
        }))
        .unwrap()
    }

    #[test]
    fn ca_settings_default_as_strimzi_and_refuse_nonsense_naming_the_field() {
        let s = CaSettings::of(&kafka(json!({})), CaKind::Cluster).unwrap();
        assert_eq!(
            (s.generate, s.validity_days, s.renewal_days),
            (true, 365, 30)
        );
        let s = CaSettings::of(
            &kafka(json!({"generateCertificateAuthority": false,
                "validityDays": 100, "renewalDays": 10})),
            CaKind::Cluster,
        )
        .unwrap();
        assert_eq!(
            (s.generate, s.validity_days, s.renewal_days),
            (false, 100, 10)
        );
        for (bad, field) in [
            (json!({"validityDays": -1}), "validityDays"),
            (json!({"renewalDays": "x"}), "renewalDays"),
            (
                json!({"generateCertificateAuthority": "yes"}),
                "generateCertificateAuthority",
            ),
            (
                json!({"validityDays": 30, "renewalDays": 30}),
                "renewalDays",
            ),
        ] {
            let r = CaSettings::of(&kafka(bad), CaKind::Cluster).unwrap_err();
            assert_eq!(r.reason, "InvalidClusterCa");
            assert!(r.message.contains(field), "{}", r.message);
        }
    }
}
