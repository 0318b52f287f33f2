//! Where the CA and node certificates live in the central cluster: Strimzi's CA Secret pair
//! (read, or created once when generated; never replaced on a guess) and one Secret holding
//! every node's certificate and key, owned by the `Kafka`.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kstretch_api::{Kafka, names};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt};
use time::OffsetDateTime;

use super::issue::{Pem, new_ca};
use super::{CaSettings, CertError, Refusal};
use crate::kafka::status::FIELD_MANAGER;

/// Strimzi's Secret with the cluster CA certificate(s), readable by clients.
pub fn ca_cert_secret(kafka: &str) -> String {
    format!("{kafka}-cluster-ca-cert")
}

/// Strimzi's Secret with the cluster CA key, which never leaves the central cluster.
pub fn ca_key_secret(kafka: &str) -> String {
    format!("{kafka}-cluster-ca")
}

/// The Secret with every node's certificate and key (`<pod>.crt`, `<pod>.key`).
pub fn node_certs_secret(kafka: &str) -> String {
    format!("{kafka}-kstretch-node-certs")
}

const CA_CERT_KEY: &str = "ca.crt";
const CA_KEY_KEY: &str = "ca.key";
const CERT_GENERATION: &str = "strimzi.io/ca-cert-generation";
const KEY_GENERATION: &str = "strimzi.io/ca-key-generation";

fn api(client: &Client, kafka: &Kafka) -> Api<Secret> {
    Api::namespaced(client.clone(), &kafka.namespace().unwrap_or_default())
}

fn text(secret: &Secret, key: &str) -> Option<String> {
    let bytes = secret.data.as_ref()?.get(key)?;
    String::from_utf8(bytes.0.clone()).ok()
}

fn metadata(
    kafka: &Kafka,
    name: &str,
    component: &str,
    annotations: &[(&str, &str)],
) -> ObjectMeta {
    let labels = [
        (names::CLUSTER, kafka.name_any()),
        (names::KIND, "Kafka".to_owned()),
        (names::NAME, format!("{}-{component}", kafka.name_any())),
        (names::COMPONENT_TYPE, component.to_owned()),
    ];
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: kafka.namespace(),
        labels: Some(labels.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()),
        annotations: Some(
            annotations
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ),
        owner_references: kafka.controller_owner_ref(&()).map(|o| vec![o]),
        ..ObjectMeta::default()
    }
}

fn secret(meta: ObjectMeta, data: BTreeMap<String, String>) -> Secret {
    Secret {
        metadata: meta,
        data: Some(
            data.into_iter()
                .map(|(k, v)| (k, ByteString(v.into_bytes())))
                .collect(),
        ),
        type_: Some("Opaque".to_owned()),
        ..Secret::default()
    }
}

/// The CA of `kafka` from its Secrets; generated into them when both are absent and
/// `settings.generate`. One Secret without the other is refused: replacing a CA on a guess
/// would make every client that trusts it fail.
pub(super) async fn cluster_ca(
    client: &Client,
    kafka: &Kafka,
    settings: CaSettings,
    now: OffsetDateTime,
) -> Result<Pem, CertError> {
    let name = kafka.name_any();
    let (cert_name, key_name) = (ca_cert_secret(&name), ca_key_secret(&name));
    let api = api(client, kafka);
    let cert = api.get_opt(&cert_name).await?;
    let key = api.get_opt(&key_name).await?;
    match (cert, key) {
        (Some(cert), Some(key)) => {
            let (Some(cert_pem), Some(key_pem)) = (text(&cert, CA_CERT_KEY), text(&key, CA_KEY_KEY))
            else {
                return Err(Refusal {
                    reason: "ClusterCaIncomplete",
                    message: format!(
                        "the cluster CA Secrets must hold {CA_CERT_KEY} ({cert_name}) and {CA_KEY_KEY} ({key_name}) as PEM: add the missing key"
                    ),
                }
                .into());
            };
            Ok(Pem {
                cert: cert_pem,
                key: key_pem,
            })
        }
        (None, key) if settings.generate && key.as_ref().is_none_or(|k| generated_here(k, kafka)) => {
            // The key is stored first, so a failure in between leaves a key whose certificate
            // is made again from it here, never a certificate without its key.
            let kept = key.as_ref().and_then(|k| text(k, CA_KEY_KEY));
            let pem = new_ca("cluster-ca v0", kept.as_deref(), settings.validity_days, now)
                .map_err(|e| Refusal::invalid(format!("cannot generate the cluster CA: {e}")))?;
            let post = PostParams {
                field_manager: Some(FIELD_MANAGER.to_owned()),
                ..PostParams::default()
            };
            if kept.is_none() {
                let key_meta =
                    metadata(kafka, &key_name, "certificate-authority", &[(KEY_GENERATION, "0")]);
                let body = secret(key_meta, [(CA_KEY_KEY.to_owned(), pem.key.clone())].into());
                api.create(&post, &body).await?;
            }
            let cert_meta =
                metadata(kafka, &cert_name, "certificate-authority", &[(CERT_GENERATION, "0")]);
            api.create(&post, &secret(cert_meta, [(CA_CERT_KEY.to_owned(), pem.cert.clone())].into()))
                .await?;
            tracing::info!(kafka = %name, "generated the cluster CA");
            Ok(pem)
        }
        (None, None) => Err(Refusal {
            reason: "ClusterCaMissing",
            message: format!(
                ".spec.clusterCa.generateCertificateAuthority is false, but the Secrets {cert_name} (with {CA_CERT_KEY}) and {key_name} (with {CA_KEY_KEY}) do not exist: create them with your CA"
            ),
        }
        .into()),
        (cert, _) => {
            let (present, missing) = if cert.is_some() {
                (&cert_name, &key_name)
            } else {
                (&key_name, &cert_name)
            };
            Err(Refusal {
                reason: "ClusterCaIncomplete",
                message: format!(
                    "Secret {present} of the cluster CA exists but {missing} does not: restore {missing}; to start over with a new CA instead, delete {present} (every client must then trust the new CA)"
                ),
            }
            .into())
        }
    }
}

/// Whether central generated this CA key Secret for this `Kafka` (owned by it).
fn generated_here(key: &Secret, kafka: &Kafka) -> bool {
    let uid = kafka.uid();
    key.owner_references()
        .iter()
        .any(|o| Some(&o.uid) == uid.as_ref())
}

/// The node certificates stored for `kafka`, by pod name (entries without both files are left
/// out, so they are issued again).
pub(super) async fn node_certs(
    client: &Client,
    kafka: &Kafka,
) -> Result<BTreeMap<String, Pem>, CertError> {
    let Some(stored) = api(client, kafka)
        .get_opt(&node_certs_secret(&kafka.name_any()))
        .await?
    else {
        return Ok(BTreeMap::new());
    };
    let mut out = BTreeMap::new();
    for key in stored.data.iter().flat_map(|d| d.keys()) {
        if let Some(pod) = key.strip_suffix(".crt")
            && let (Some(cert), Some(key)) =
                (text(&stored, key), text(&stored, &format!("{pod}.key")))
        {
            out.insert(pod.to_owned(), Pem { cert, key });
        }
    }
    Ok(out)
}

/// Stores every node's certificate and key, replacing what was stored.
pub(super) async fn store_node_certs(
    client: &Client,
    kafka: &Kafka,
    certs: &BTreeMap<String, Pem>,
) -> Result<(), CertError> {
    let name = node_certs_secret(&kafka.name_any());
    let data = certs
        .iter()
        .flat_map(|(pod, pem)| {
            [
                (format!("{pod}.crt"), pem.cert.clone()),
                (format!("{pod}.key"), pem.key.clone()),
            ]
        })
        .collect();
    let mut body = secret(metadata(kafka, &name, "node-certificates", &[]), data);
    body.metadata.annotations = None;
    let body = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": body.metadata, "data": body.data, "type": body.type_,
    });
    api(client, kafka)
        .patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await?;
    Ok(())
}
