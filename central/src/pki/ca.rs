//! The two certificate authorities of a `Kafka` as values: which (cluster or clients), their
//! settings from the `Kafka`'s spec, a CA in use, the certificates of its nodes, and why a CA
//! is refused or missing.

use std::collections::BTreeMap;

use kstretch_api::Kafka;

use super::issue::Pem;

/// Strimzi's defaults for `validityDays` and `renewalDays`.
const DEFAULT_VALIDITY_DAYS: u32 = 365;
const DEFAULT_RENEWAL_DAYS: u32 = 30;

/// Which of a `Kafka`'s two CAs: the cluster CA signs the nodes' (and kstretch's)
/// certificates, the clients CA signs the certificates of `KafkaUser`s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaKind {
    Cluster,
    Clients,
}

impl CaKind {
    /// The `Kafka` field with the CA's settings.
    pub(super) fn field(self) -> &'static str {
        match self {
            CaKind::Cluster => "clusterCa",
            CaKind::Clients => "clientsCa",
        }
    }

    /// `cluster` or `clients`, as in Strimzi's Secret names.
    pub(super) fn word(self) -> &'static str {
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
    pub(super) fn common_name(self, generation: u32) -> String {
        format!("{}-ca v{generation}", self.word())
    }

    /// Reason of a refusal: the settings are not valid.
    pub(super) fn invalid_reason(self) -> &'static str {
        match self {
            CaKind::Cluster => "InvalidClusterCa",
            CaKind::Clients => "InvalidClientsCa",
        }
    }

    /// Reason of a refusal: a user-supplied CA's Secrets do not exist.
    pub(super) fn missing_reason(self) -> &'static str {
        match self {
            CaKind::Cluster => "ClusterCaMissing",
            CaKind::Clients => "ClientsCaMissing",
        }
    }

    /// Reason of a refusal: one of the two Secrets, or a key in them, is missing.
    pub(super) fn incomplete_reason(self) -> &'static str {
        match self {
            CaKind::Cluster => "ClusterCaIncomplete",
            CaKind::Clients => "ClientsCaIncomplete",
        }
    }

    pub(super) fn refuse(self, message: String) -> Refusal {
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
    /// `certificateExpirationPolicy: replace-key`: near its expiry the CA gets a new key, not
    /// only a new certificate (served for the clients CA).
    pub replace_key: bool,
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
            replace_key: field("certificateExpirationPolicy").is_some_and(|p| p == "replace-key"),
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
pub use crate::status::Refusal;

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
    /// A renewal of the CA certificate that is due and waits for a maintenance window: why it
    /// is due.
    pub postponed: Option<String>,
    /// What the CA's Secrets ask that kstretch does not act on, and what to do instead.
    pub not_acted_on: Option<String>,
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
