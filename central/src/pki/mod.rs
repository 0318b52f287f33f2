//! The certificates of each `Kafka`: its cluster CA, kept in Strimzi's Secrets
//! (`<cluster>-cluster-ca-cert` with `ca.crt`, `<cluster>-cluster-ca` with `ca.key`) in the
//! central cluster, where the key stays; every node's certificate for all the names it is
//! reached by, kept beside them and shipped to the node's own cluster only; and central's
//! client certificate for its admin client, which lives in memory.

mod issue;
mod secrets;

use std::collections::{BTreeMap, BTreeSet};

use kstretch_api::Kafka;
use kube::{Client, ResourceExt};
use time::OffsetDateTime;

pub use issue::{Pem, PkiError};
use issue::{Usage, issue, read, still_good};
pub use secrets::delete_generated;

/// Strimzi's defaults for `validityDays` and `renewalDays`.
const DEFAULT_VALIDITY_DAYS: u32 = 365;
const DEFAULT_RENEWAL_DAYS: u32 = 30;

/// Subject of central's client certificate, which every node accepts as a cluster member.
pub const CENTRAL_COMMON_NAME: &str = "kstretch-central";

/// `spec.clusterCa` as far as kstretch applies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaSettings {
    /// `generateCertificateAuthority`: false when the user supplies the CA Secrets.
    pub generate: bool,
    pub validity_days: u32,
    pub renewal_days: u32,
}

impl CaSettings {
    /// Reads `spec.clusterCa`, Strimzi's defaults where a field is absent.
    pub fn of(kafka: &Kafka) -> Result<CaSettings, Refusal> {
        let spec = kafka.spec.cluster_ca.as_ref();
        let field = |name: &str| spec.and_then(|s| s.get(name));
        let days = |name: &str, default: u32| match field(name) {
            None => Ok(default),
            Some(v) => v
                .as_u64()
                .and_then(|d| u32::try_from(d).ok())
                .filter(|d| *d > 0)
                .ok_or_else(|| {
                    Refusal::invalid(format!(
                        ".spec.clusterCa.{name} is {v}, not a positive number of days"
                    ))
                }),
        };
        let generate = match field("generateCertificateAuthority") {
            None => true,
            Some(v) => v.as_bool().ok_or_else(|| {
                Refusal::invalid(format!(
                    ".spec.clusterCa.generateCertificateAuthority is {v}, not true or false"
                ))
            })?,
        };
        let settings = CaSettings {
            generate,
            validity_days: days("validityDays", DEFAULT_VALIDITY_DAYS)?,
            renewal_days: days("renewalDays", DEFAULT_RENEWAL_DAYS)?,
        };
        if settings.renewal_days >= settings.validity_days {
            return Err(Refusal::invalid(format!(
                ".spec.clusterCa.renewalDays ({}) must be less than validityDays ({})",
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

impl Refusal {
    fn invalid(message: String) -> Refusal {
        Refusal {
            reason: "InvalidClusterCa",
            message,
        }
    }
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

/// The cluster CA of one Kafka: its current certificate and key, and every CA certificate to
/// trust (the current one and replaced ones that have not expired yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterCa {
    pub pem: Pem,
    pub trusted: String,
    pub settings: CaSettings,
}

/// Every node's certificate (by pod name) and the CA certificates nodes trust.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeCerts {
    pub ca_cert: String,
    pub nodes: BTreeMap<String, Pem>,
}

/// The CA of `kafka`: read from its Secrets, or generated into them when absent and
/// `generateCertificateAuthority` is not false; a generated CA's certificate is renewed (same
/// key) within `renewalDays` of expiry or when `strimzi.io/force-renew` asks for it.
pub async fn cluster_ca(client: &Client, kafka: &Kafka) -> Result<ClusterCa, CertError> {
    let settings = CaSettings::of(kafka)?;
    let material = secrets::cluster_ca(client, kafka, settings, OffsetDateTime::now_utc()).await?;
    Ok(ClusterCa {
        pem: material.pem,
        trusted: material.trusted,
        settings,
    })
}

/// The certificate of every pod in `hosts` (pod name to host names), kept from earlier
/// reconciliations while still good, issued or renewed otherwise, and stored before use.
pub async fn node_certificates(
    client: &Client,
    kafka: &Kafka,
    ca: &ClusterCa,
    hosts: &BTreeMap<String, BTreeSet<String>>,
) -> Result<NodeCerts, CertError> {
    let now = OffsetDateTime::now_utc();
    let mut stored = secrets::node_certs(client, kafka).await?;
    let ca_read = read(&ca.pem.cert)
        .map_err(|e| Refusal::invalid(format!("the cluster CA certificate: {e}")))?;
    // Removed nodes' certificates go: a pod still stopping has its files mounted already.
    let before = stored.len();
    stored.retain(|pod, _| hosts.contains_key(pod));
    let mut changed = stored.len() != before;
    for (pod, names) in hosts {
        let good = stored.get(pod).is_some_and(|pem| {
            still_good(&pem.cert, &ca_read, names, ca.settings.renewal_days, now)
        });
        if !good {
            let common_name = format!("{}-kafka", kafka.name_any());
            let pem = issue(
                &ca.pem,
                &common_name,
                names,
                Usage::Node,
                ca.settings.validity_days,
                now,
            )
            .map_err(|e| Refusal::invalid(format!("cannot issue the certificate of {pod}: {e}")))?;
            stored.insert(pod.clone(), pem);
            changed = true;
        }
    }
    if changed {
        secrets::store_node_certs(client, kafka, &stored).await?;
    }
    Ok(NodeCerts {
        ca_cert: ca.trusted.clone(),
        nodes: stored,
    })
}

/// Central's client certificate under `ca`, valid as long as the CA.
pub fn central_identity(ca: &ClusterCa) -> Result<Pem, Refusal> {
    issue(
        &ca.pem,
        CENTRAL_COMMON_NAME,
        &BTreeSet::new(),
        Usage::Client,
        ca.settings.validity_days,
        OffsetDateTime::now_utc(),
    )
    .map_err(|e| Refusal::invalid(format!("cannot issue central's client certificate: {e}")))
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
        let s = CaSettings::of(&kafka(json!({}))).unwrap();
        assert_eq!(
            (s.generate, s.validity_days, s.renewal_days),
            (true, 365, 30)
        );
        let s = CaSettings::of(&kafka(json!({"generateCertificateAuthority": false,
            "validityDays": 100, "renewalDays": 10})))
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
            let r = CaSettings::of(&kafka(bad)).unwrap_err();
            assert_eq!(r.reason, "InvalidClusterCa");
            assert!(r.message.contains(field), "{}", r.message);
        }
    }
}
