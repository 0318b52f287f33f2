//! The certificates of each `Kafka`: its cluster and clients CAs, kept in Strimzi's Secrets
//! (`<cluster>-cluster-ca-cert` with `ca.crt`, `<cluster>-cluster-ca` with `ca.key`, the same
//! for `clients`) in the central cluster, where the keys stay; every node's certificate for all the names it is
//! reached by, kept beside them and shipped to the node's own cluster only; and central's
//! client certificate for its admin client, which lives in memory.

mod issue;
mod secrets;

use std::collections::{BTreeMap, BTreeSet};

use kstretch_api::Kafka;
use kube::{Client, ResourceExt};
use time::OffsetDateTime;

pub use issue::{Pem, PkiError, pkcs12, random_password};
use issue::{Usage, issue, read, still_good};
pub use secrets::{delete_generated, text as secret_text};

/// Strimzi's defaults for `validityDays` and `renewalDays`.
const DEFAULT_VALIDITY_DAYS: u32 = 365;
const DEFAULT_RENEWAL_DAYS: u32 = 30;

/// Subject of central's client certificate, which every node accepts as a cluster member.
pub const CENTRAL_COMMON_NAME: &str = "kstretch-central";

/// Which of a `Kafka`'s two CAs: the cluster CA signs the nodes' (and kstretch's)
/// certificates, the clients CA signs the certificates of `KafkaUser`s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaKind {
    Cluster,
    Clients,
}

impl CaKind {
    /// The `Kafka` field with the CA's settings.
    fn field(self) -> &'static str {
        match self {
            CaKind::Cluster => "clusterCa",
            CaKind::Clients => "clientsCa",
        }
    }

    /// `cluster` or `clients`, as in Strimzi's Secret names.
    fn word(self) -> &'static str {
        match self {
            CaKind::Cluster => "cluster",
            CaKind::Clients => "clients",
        }
    }

    /// Strimzi's Secret with the CA certificate(s), readable by clients.
    pub fn cert_secret(self, kafka: &str) -> String {
        format!("{kafka}-{}-ca-cert", self.word())
    }

    /// Strimzi's Secret with the CA key, which never leaves the central cluster.
    pub fn key_secret(self, kafka: &str) -> String {
        format!("{kafka}-{}-ca", self.word())
    }

    /// The subject's common name of the CA certificate of key generation `generation`.
    fn common_name(self, generation: u32) -> String {
        format!("{}-ca v{generation}", self.word())
    }

    /// Reason of a refusal: the settings are not valid.
    fn invalid_reason(self) -> &'static str {
        match self {
            CaKind::Cluster => "InvalidClusterCa",
            CaKind::Clients => "InvalidClientsCa",
        }
    }

    /// Reason of a refusal: a user-supplied CA's Secrets do not exist.
    fn missing_reason(self) -> &'static str {
        match self {
            CaKind::Cluster => "ClusterCaMissing",
            CaKind::Clients => "ClientsCaMissing",
        }
    }

    /// Reason of a refusal: one of the two Secrets, or a key in them, is missing.
    fn incomplete_reason(self) -> &'static str {
        match self {
            CaKind::Cluster => "ClusterCaIncomplete",
            CaKind::Clients => "ClientsCaIncomplete",
        }
    }

    fn refuse(self, message: String) -> Refusal {
        Refusal {
            reason: self.invalid_reason(),
            message,
        }
    }
}

impl std::fmt::Display for CaKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} CA", self.word())
    }
}

/// `spec.clusterCa` or `spec.clientsCa` as far as kstretch applies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaSettings {
    pub kind: CaKind,
    /// `generateCertificateAuthority`: false when the user supplies the CA Secrets.
    pub generate: bool,
    pub validity_days: u32,
    pub renewal_days: u32,
}

impl CaSettings {
    /// Reads the settings of CA `kind`, Strimzi's defaults where a field is absent.
    pub fn of(kafka: &Kafka, kind: CaKind) -> Result<CaSettings, Refusal> {
        let spec = match kind {
            CaKind::Cluster => kafka.spec.cluster_ca.as_ref(),
            CaKind::Clients => kafka.spec.clients_ca.as_ref(),
        };
        let section = kind.field();
        let field = |name: &str| spec.and_then(|s| s.get(name));
        let days = |name: &str, default: u32| match field(name) {
            None => Ok(default),
            Some(v) => v
                .as_u64()
                .and_then(|d| u32::try_from(d).ok())
                .filter(|d| *d > 0)
                .ok_or_else(|| {
                    kind.refuse(format!(
                        ".spec.{section}.{name} is {v}, not a positive number of days"
                    ))
                }),
        };
        let generate = match field("generateCertificateAuthority") {
            None => true,
            Some(v) => v.as_bool().ok_or_else(|| {
                kind.refuse(format!(
                    ".spec.{section}.generateCertificateAuthority is {v}, not true or false"
                ))
            })?,
        };
        let settings = CaSettings {
            kind,
            generate,
            validity_days: days("validityDays", DEFAULT_VALIDITY_DAYS)?,
            renewal_days: days("renewalDays", DEFAULT_RENEWAL_DAYS)?,
        };
        if settings.renewal_days >= settings.validity_days {
            return Err(kind.refuse(format!(
                ".spec.{section}.renewalDays ({}) must be less than validityDays ({})",
                settings.renewal_days, settings.validity_days
            )));
        }
        Ok(settings)
    }
}

/// A CA the user must fix (status `Ready=False` with the reason), as opposed to a transient
/// failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: &'static str,
    pub message: String,
}

/// Why the certificates are not there.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("Kubernetes API error: {0}")]
    Kube(#[from] kube::Error),
    #[error("{}", .0.message)]
    Refused(Refusal),
}

impl From<Refusal> for CertError {
    fn from(r: Refusal) -> CertError {
        CertError::Refused(r)
    }
}

/// A CA of one Kafka: its current certificate and key, and every CA certificate to trust (the
/// current one and replaced ones that have not expired yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ca {
    pub pem: Pem,
    pub trusted: String,
    pub settings: CaSettings,
    /// The CA certificate Secret's data (no key), copied to member clusters for clients there.
    pub public: BTreeMap<String, Vec<u8>>,
}

/// Every node's certificate (by pod name) and the CA certificates nodes trust.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeCerts {
    pub ca_cert: String,
    /// The clients CA certificates, when a listener authenticates clients by certificate.
    pub clients_ca_cert: Option<String>,
    /// The user's certificate of each listener that has one (`brokerCertChainAndKey`), by
    /// Kafka's listener name.
    pub listeners: BTreeMap<String, Pem>,
    pub nodes: BTreeMap<String, Pem>,
}

/// CA `kind` of `kafka`: read from its Secrets, or generated into them when absent and
/// `generateCertificateAuthority` is not false; a generated CA's certificate is renewed (same
/// key) within `renewalDays` of expiry or when `strimzi.io/force-renew` asks for it.
pub async fn ca(client: &Client, kafka: &Kafka, kind: CaKind) -> Result<Ca, CertError> {
    let settings = CaSettings::of(kafka, kind)?;
    let material = secrets::ca(client, kafka, settings, OffsetDateTime::now_utc()).await?;
    Ok(Ca {
        pem: material.pem,
        trusted: material.trusted,
        settings,
        public: material.public,
    })
}

/// The certificate of every pod in `hosts` (pod name to host names), kept from earlier
/// reconciliations while still good, issued or renewed otherwise, and stored before use; with
/// the clients CA certificates `clients_trusted` when the nodes need them.
pub async fn node_certificates(
    client: &Client,
    kafka: &Kafka,
    ca: &Ca,
    clients_trusted: Option<&str>,
    hosts: &BTreeMap<String, BTreeSet<String>>,
) -> Result<NodeCerts, CertError> {
    let now = OffsetDateTime::now_utc();
    let mut stored = secrets::node_certs(client, kafka).await?;
    let ca_read = read(&ca.pem.cert).map_err(|e| {
        ca.settings
            .kind
            .refuse(format!("the cluster CA certificate: {e}"))
    })?;
    // Removed nodes' certificates go: a pod still stopping has its files mounted already.
    let before = stored.len();
    stored.retain(|pod, _| hosts.contains_key(pod));
    let mut changed = stored.len() != before;
    for (pod, names) in hosts {
        let good = stored.get(pod).is_some_and(|pem| {
            still_good(&pem.cert, &ca_read, names, ca.settings.renewal_days, now)
        });
        if !good {
            let common_name = node_common_name(&kafka.name_any());
            let pem = issue(
                &ca.pem,
                &common_name,
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
            changed = true;
        }
    }
    if changed {
        secrets::store_node_certs(client, kafka, &stored).await?;
    }
    Ok(NodeCerts {
        ca_cert: ca.trusted.clone(),
        clients_ca_cert: clients_trusted.map(str::to_owned),
        listeners: BTreeMap::new(),
        nodes: stored,
    })
}

/// The principals of kstretch itself in `kafka`'s nodes (the nodes, central), which an
/// authorizer must let do everything.
pub fn kstretch_principals(kafka: &str) -> Vec<String> {
    [node_common_name(kafka).as_str(), CENTRAL_COMMON_NAME]
        .iter()
        .map(|cn| format!("User:CN={cn},O={}", issue::ORGANIZATION))
        .collect()
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
