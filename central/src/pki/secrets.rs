//! Where the CA and node certificates live in the central cluster: Strimzi's CA Secret pair
//! (read, or created once when generated; never replaced on a guess) and one Secret holding
//! every node's certificate and key. They carry no owner reference: a `Kafka` that vanishes
//! without the user's word (its CRD reinstalled) is adopted again with the same CA, so nothing
//! rolls; they are deleted only with a `Kafka` the user deleted, and only when kstretch
//! generated them.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kstretch_api::{Kafka, names};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use time::OffsetDateTime;

use super::ca::{CaKind, CaSettings, CertError, Refusal};
use super::issue::{Pem, new_ca, of_key, random_password, read, truststore_pkcs12};
use crate::status::FIELD_MANAGER;

/// The Secret with every node's certificate and key (`<pod>.crt`, `<pod>.key`).
fn node_certs_secret(kafka: &str) -> String {
    format!("{kafka}-kstretch-node-certs")
}

const CA_CERT_KEY: &str = "ca.crt";
const CA_KEY_KEY: &str = "ca.key";
/// Strimzi's PKCS#12 trust store of the CA certificates, and its password.
const CA_P12_KEY: &str = "ca.p12";
const CA_PASSWORD_KEY: &str = "ca.password";
const CERT_GENERATION: &str = "strimzi.io/ca-cert-generation";
/// Marks a Secret kstretch generated (a user-supplied CA is never deleted).
const GENERATED: &str = "kstretch.io/generated";
const KEY_GENERATION: &str = "strimzi.io/ca-key-generation";

fn api(client: &Client, kafka: &Kafka) -> Api<Secret> {
    Api::namespaced(client.clone(), &kafka.namespace().unwrap_or_default())
}

/// Secret `name` of `kafka`'s namespace, if it exists.
pub(super) async fn user_secret(
    client: &Client,
    kafka: &Kafka,
    name: &str,
) -> Result<Option<Secret>, kube::Error> {
    api(client, kafka).get_opt(name).await
}

/// A CA certificate Secret that an agent applied as a copy (a central now runs in what was a
/// member cluster, after its own was lost) becomes central's own: without the agent's label,
/// no snapshot of this cluster (which gets no copies) prunes it.
async fn take_over_copy(api: &Api<Secret>, cert: &Secret) -> Result<(), kube::Error> {
    let copied = cert
        .labels()
        .get(kstretch_api::owner::MANAGED_BY_LABEL)
        .is_some_and(|v| v == kstretch_api::owner::MANAGED_BY_VALUE);
    if !copied {
        return Ok(());
    }
    let unlabel = serde_json::json!({"metadata": {"labels": {
        kstretch_api::owner::MANAGED_BY_LABEL: null
    }}});
    api.patch(
        &cert.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&unlabel),
    )
    .await?;
    tracing::info!(secret = %cert.name_any(), "took over a CA certificate copy as central's own");
    Ok(())
}

/// Key `key` of `secret` as text.
pub fn text(secret: &Secret, key: &str) -> Option<String> {
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
                .chain(&[(GENERATED, "true")])
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ),
        ..ObjectMeta::default()
    }
}

/// Create and replace as central's field manager.
fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    }
}

fn secret(meta: ObjectMeta, data: BTreeMap<String, Vec<u8>>) -> Secret {
    Secret {
        metadata: meta,
        data: Some(data.into_iter().map(|(k, v)| (k, ByteString(v))).collect()),
        type_: Some("Opaque".to_owned()),
        ..Secret::default()
    }
}

/// The CA of `kafka` that `settings` are for, from its Secrets; generated into them when both
/// are absent and `settings.generate`. One Secret without the other is refused: replacing a CA
/// on a guess would make every client that trusts it fail.
pub(super) async fn ca(
    client: &Client,
    kafka: &Kafka,
    settings: CaSettings,
    now: OffsetDateTime,
    renew_now: bool,
) -> Result<CaMaterial, CertError> {
    let name = kafka.name_any();
    let kind = settings.kind;
    let (cert_name, key_name) = (kind.cert_secret(&name), kind.key_secret(&name));
    let api = api(client, kafka);
    let cert = api.get_opt(&cert_name).await?;
    if let Some(cert) = &cert {
        take_over_copy(&api, cert).await?;
    }
    let key = api.get_opt(&key_name).await?;
    match (cert, key) {
        (Some(cert), Some(key)) => {
            let (Some(cert_pem), Some(key_pem)) = (text(&cert, CA_CERT_KEY), text(&key, CA_KEY_KEY))
            else {
                return Err(Refusal {
                    reason: kind.incomplete_reason(),
                    message: format!(
                        "the {kind} Secrets must hold {CA_CERT_KEY} ({cert_name}) and {CA_KEY_KEY} ({key_name}) as PEM: add the missing key"
                    ),
                }
                .into());
            };
            let due = if forced(&key, FORCE_REPLACE) {
                Some(KeyDue::Forced)
            } else {
                (settings.replace_key && renewal_due(&cert_pem, false, settings.renewal_days, now))
                    .then_some(KeyDue::Expiring)
            };
            let asked = key_step(settings, due, renew_now, &key_name);
            let (key, key_pem) = match &asked {
                KeyStep::Replace => replaced_key(&api, kafka, settings, key, now).await?,
                _ => (key, key_pem),
            };
            let generation = annotation(&key, KEY_GENERATION).unwrap_or(0);
            let (cert, postponed) = if settings.generate {
                let key = CaKey {
                    pem: &key_pem,
                    generation,
                };
                renewed(&api, kafka, settings, cert, key, now, renew_now).await?
            } else {
                (cert, None)
            };
            let (key_postponed, not_acted_on) = match asked {
                KeyStep::Postponed(why) => (Some(why), None),
                KeyStep::NotServed(why) => (None, Some(why)),
                KeyStep::Keep | KeyStep::Replace => (None, None),
            };
            let data = texts(&cert);
            Ok(CaMaterial {
                trusted: trust_bundle(&data, now),
                pem: Pem {
                    cert: data.get(CA_CERT_KEY).cloned().unwrap_or(cert_pem),
                    key: key_pem,
                },
                public: bytes(&cert),
                postponed: key_postponed.or(postponed),
                not_acted_on,
            })
        }
        (None, key) if settings.generate && key.as_ref().is_none_or(generated) => {
            // The key is stored first, so a failure in between leaves a key whose certificate
            // is made again from it here, never a certificate without its key.
            let kept = key.as_ref().and_then(|k| text(k, CA_KEY_KEY));
            let pem = new_ca(&kind.common_name(0), kept.as_deref(), settings.validity_days, now)
                .map_err(|e| kind.refuse(format!("cannot generate the {kind}: {e}")))?;
            let post = post_params();
            if kept.is_none() {
                let key_meta =
                    metadata(kafka, &key_name, "certificate-authority", &[(KEY_GENERATION, "0")]);
                let body = secret(
                    key_meta,
                    [(CA_KEY_KEY.to_owned(), pem.key.clone().into_bytes())].into(),
                );
                api.create(&post, &body).await?;
            }
            let cert_meta =
                metadata(kafka, &cert_name, "certificate-authority", &[(CERT_GENERATION, "0")]);
            let mut public = BTreeMap::from([(CA_CERT_KEY.to_owned(), pem.cert.clone().into_bytes())]);
            add_truststore(&mut public, kind, None)?;
            api.create(&post, &secret(cert_meta, public.clone())).await?;
            tracing::info!(kafka = %name, ca = %kind, "generated");
            Ok(CaMaterial {
                trusted: pem.cert.clone(),
                pem,
                public,
                postponed: None,
                not_acted_on: None,
            })
        }
        (None, None) => Err(Refusal {
            reason: kind.missing_reason(),
            message: format!(
                ".spec.{}.generateCertificateAuthority is false, but the Secrets {cert_name} (with {CA_CERT_KEY}) and {key_name} (with {CA_KEY_KEY}) do not exist: create them with your CA",
                kind.field()
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
                reason: kind.incomplete_reason(),
                message: format!(
                    "Secret {present} of the {kind} exists but {missing} does not: restore {missing}; to start over with a new CA instead, delete {present} (every client must then trust the new CA)"
                ),
            }
            .into())
        }
    }
}

/// Strimzi's annotation on a CA certificate Secret that asks for a new CA certificate.
const FORCE_RENEW: &str = "strimzi.io/force-renew";
/// Strimzi's annotation on a CA key Secret that asks for a new CA key.
const FORCE_REPLACE: &str = "strimzi.io/force-replace";

/// Whether `secret` carries `annotation: "true"`.
fn forced(secret: &Secret, annotation: &str) -> bool {
    secret
        .annotations()
        .get(annotation)
        .is_some_and(|v| v == "true")
}

/// What becomes of a CA's key.
#[derive(Debug, Clone, PartialEq, Eq)]
enum KeyStep {
    Keep,
    /// A new key now; its certificate follows.
    Replace,
    /// A new key is asked for and waits for a maintenance window: what waits.
    Postponed(String),
    /// A new key is asked for and kstretch does not make it: why, and what to do instead.
    NotServed(String),
}

/// Why a CA's key is to be replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyDue {
    /// `strimzi.io/force-replace` on the key Secret.
    Forced,
    /// Its certificate is within `renewalDays` of expiry and the policy is `replace-key`.
    Expiring,
}

/// What becomes of the key of the CA that `settings` are for, in the key Secret `key_secret`,
/// when it is `due` to be replaced, with a maintenance window open or not (`now`). Only a
/// generated clients CA's key is replaced: its certificates are the users', which are issued
/// again, while the nodes roll once to trust both. The cluster CA's key signs the nodes' own
/// certificates, which must move in three rolls (trust both, issue again, drop the old) that
/// kstretch does not make yet: asked by the annotation it says so; by the policy its
/// certificate is renewed instead (the policy is named as not acted on). Pure.
fn key_step(settings: CaSettings, due: Option<KeyDue>, now: bool, key_secret: &str) -> KeyStep {
    let kind = settings.kind;
    let Some(due) = due else {
        return KeyStep::Keep;
    };
    let forced = due == KeyDue::Forced;
    if !settings.generate {
        if !forced {
            return KeyStep::Keep;
        }
        return KeyStep::NotServed(format!(
            "{FORCE_REPLACE} on Secret {key_secret} is not acted on: the {kind} is yours (.spec.{}.generateCertificateAuthority is false); put the new key in {key_secret} and its certificate in {key_secret}-cert yourself, and remove the annotation",
            kind.field(),
        ));
    }
    match (kind, now) {
        (CaKind::Cluster, _) if forced => KeyStep::NotServed(format!(
            "{FORCE_REPLACE} on Secret {key_secret} is not acted on: kstretch does not replace the cluster CA's key yet (the nodes' certificates and trust must move in three rolls); the key is kept. To renew the CA certificate with the same key, annotate {key_secret}-cert with {FORCE_RENEW}=true"
        )),
        (CaKind::Cluster, _) => KeyStep::Keep,
        (CaKind::Clients, false) => {
            let why = match due {
                KeyDue::Forced => format!("{FORCE_REPLACE} asks for a new one"),
                KeyDue::Expiring => format!(
                    "its certificate is within {} days of expiry and .spec.{}.certificateExpirationPolicy is replace-key",
                    settings.renewal_days,
                    kind.field()
                ),
            };
            KeyStep::Postponed(format!("the {kind} key ({why})"))
        }
        (CaKind::Clients, true) => KeyStep::Replace,
    }
}

/// The CA key Secret with a new key, one generation on, and without `strimzi.io/force-replace`
/// (replaced with the resource version read, so a concurrent change makes the next
/// reconciliation decide again); the CA certificate follows the key in [`renewed`].
async fn replaced_key(
    api: &Api<Secret>,
    kafka: &Kafka,
    settings: CaSettings,
    mut secret: Secret,
    now: OffsetDateTime,
) -> Result<(Secret, String), CertError> {
    let kind = settings.kind;
    let generation = annotation(&secret, KEY_GENERATION).unwrap_or(0) + 1;
    let pem = new_ca(
        &kind.common_name(generation),
        None,
        settings.validity_days,
        now,
    )
    .map_err(|e| kind.refuse(format!("cannot make a new {kind} key: {e}")))?;
    let annotations = secret
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new);
    annotations.insert(KEY_GENERATION.to_owned(), generation.to_string());
    annotations.remove(FORCE_REPLACE);
    let data = secret.data.get_or_insert_with(BTreeMap::new);
    data.insert(
        CA_KEY_KEY.to_owned(),
        ByteString(pem.key.clone().into_bytes()),
    );
    let name = secret.name_any();
    let secret = api.replace(&name, &post_params(), &secret).await?;
    tracing::info!(kafka = %kafka.name_any(), ca = %kind, generation, "replaced the CA key");
    Ok((secret, pem.key))
}

/// The current CA and every CA certificate nodes and clients are to trust.
#[derive(Debug, Clone)]
pub(super) struct CaMaterial {
    pub pem: Pem,
    /// PEM certificates: the current one first, then replaced ones that have not expired.
    pub trusted: String,
    /// The certificate Secret's data.
    pub public: BTreeMap<String, Vec<u8>>,
    /// Why a renewal that is due waits for a maintenance window.
    pub postponed: Option<String>,
    /// What the CA's Secrets ask that is not acted on, and what to do instead.
    pub not_acted_on: Option<String>,
}

/// A CA's key and its generation.
#[derive(Debug, Clone, Copy)]
struct CaKey<'a> {
    pem: &'a str,
    generation: u32,
}

fn bytes(secret: &Secret) -> BTreeMap<String, Vec<u8>> {
    secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect()
}

/// Adds `ca.p12` (every certificate of `data` to trust: `ca.crt` and the kept ones) and
/// `ca.password` (`password`, or a new one) to the CA certificate Secret's `data`.
fn add_truststore(
    data: &mut BTreeMap<String, Vec<u8>>,
    kind: CaKind,
    password: Option<String>,
) -> Result<(), Refusal> {
    let certs: String = data
        .iter()
        .filter(|(k, _)| *k == CA_CERT_KEY || is_kept_key(k))
        .filter_map(|(_, v)| std::str::from_utf8(v).ok())
        .collect::<Vec<_>>()
        .join("\n");
    let password = match password {
        Some(p) => p,
        None => random_password(12).map_err(|e| kind.refuse(e.to_string()))?,
    };
    let p12 = truststore_pkcs12(&certs, &password)
        .map_err(|e| kind.refuse(format!("cannot write {CA_P12_KEY} of the {kind}: {e}")))?;
    data.insert(CA_P12_KEY.to_owned(), p12);
    data.insert(CA_PASSWORD_KEY.to_owned(), password.into_bytes());
    Ok(())
}

fn annotation(secret: &Secret, key: &str) -> Option<u32> {
    secret.annotations().get(key)?.parse().ok()
}

fn texts(secret: &Secret) -> BTreeMap<String, String> {
    secret
        .data
        .iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), String::from_utf8(v.0.clone()).ok()?)))
        .collect()
}

/// Key under which a replaced CA certificate is kept, named by its expiry like Strimzi's
/// `ca-<date>.crt`.
fn kept_key(cert: &str) -> String {
    let stamp = read(cert)
        .map(|i| i.not_after.unix_timestamp().to_string())
        .unwrap_or_else(|_| "unknown".to_owned());
    format!("ca-{stamp}.crt")
}

/// `ca.crt` and the kept `ca-*.crt` certificates that have not expired, current first.
fn trust_bundle(data: &BTreeMap<String, String>, now: OffsetDateTime) -> String {
    let mut out: Vec<&str> = data
        .get(CA_CERT_KEY)
        .map(String::as_str)
        .into_iter()
        .collect();
    out.extend(kept(data, now).into_values());
    out.iter()
        .map(|c| c.trim_end())
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// Whether `key` names a replaced CA certificate.
fn is_kept_key(key: &str) -> bool {
    key.starts_with("ca-") && key.ends_with(".crt")
}

/// The replaced certificates still valid at `now`.
fn kept(data: &BTreeMap<String, String>, now: OffsetDateTime) -> BTreeMap<String, &str> {
    data.iter()
        .filter(|(k, _)| is_kept_key(k))
        .filter(|(_, v)| read(v).is_ok_and(|i| i.not_after > now))
        .map(|(k, v)| (k.clone(), v.as_str()))
        .collect()
}

/// Whether the CA certificate `cert` is to be replaced by a new one of the same key.
pub(super) fn renewal_due(
    cert: &str,
    forced: bool,
    renewal_days: u32,
    now: OffsetDateTime,
) -> bool {
    forced
        || read(cert)
            .is_ok_and(|i| i.not_after - now <= time::Duration::days(i64::from(renewal_days)))
}

/// The CA certificate Secret with a renewed certificate when one is due and `renew_now`: same
/// key and subject, so every certificate it issued verifies against the new one too, and the
/// old certificate kept until it expires for whoever trusts only it. Nodes then roll to trust
/// both; nothing else changes for them. A renewal that is due but not `renew_now` waits: why it
/// is due comes back.
async fn renewed(
    api: &Api<Secret>,
    kafka: &Kafka,
    settings: CaSettings,
    mut secret: Secret,
    key: CaKey<'_>,
    now: OffsetDateTime,
    renew_now: bool,
) -> Result<(Secret, Option<String>), CertError> {
    let data = texts(&secret);
    let current = data.get(CA_CERT_KEY).cloned().unwrap_or_default();
    let forced = forced(&secret, FORCE_RENEW);
    let still_valid = kept(&data, now);
    let expired_kept = data.keys().filter(|k| is_kept_key(k)).count() != still_valid.len();
    // A new key (replaced in a window) gets its certificate whatever the time.
    let follows_key = matches!(of_key(&current, key.pem), Ok(false));
    let due = renewal_due(&current, forced, settings.renewal_days, now) && !follows_key;
    let postponed = (due && !renew_now).then(|| {
        let why = if forced {
            format!("{FORCE_RENEW} asks for it")
        } else {
            format!("within {} days of its expiry", settings.renewal_days)
        };
        format!("the {} certificate ({why})", settings.kind)
    });
    let due = (due && renew_now) || follows_key;
    let password = data.get(CA_PASSWORD_KEY).cloned();
    let has_truststore = password.is_some()
        && secret
            .data
            .as_ref()
            .is_some_and(|d| d.contains_key(CA_P12_KEY));
    if !due && !expired_kept && has_truststore {
        return Ok((secret, postponed));
    }
    let mut new_data: BTreeMap<String, String> = still_valid
        .into_iter()
        .map(|(k, v)| (k, v.to_owned()))
        .collect();
    if due {
        let kind = settings.kind;
        let pem = new_ca(
            &kind.common_name(key.generation),
            Some(key.pem),
            settings.validity_days,
            now,
        )
        .map_err(|e| kind.refuse(format!("cannot renew the {kind} certificate: {e}")))?;
        new_data.insert(kept_key(&current), current);
        new_data.insert(CA_CERT_KEY.to_owned(), pem.cert);
        let generation = annotation(&secret, CERT_GENERATION).unwrap_or(0) + 1;
        let annotations = secret
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new);
        annotations.insert(CERT_GENERATION.to_owned(), generation.to_string());
        annotations.remove(FORCE_RENEW);
        tracing::info!(kafka = %kafka.name_any(), ca = %settings.kind, generation, forced, follows_key, "renewed the CA certificate");
    } else {
        new_data.insert(CA_CERT_KEY.to_owned(), current);
    }
    let mut new_data: BTreeMap<String, Vec<u8>> = new_data
        .into_iter()
        .map(|(k, v)| (k, v.into_bytes()))
        .collect();
    add_truststore(&mut new_data, settings.kind, password)?;
    secret.data = Some(
        new_data
            .into_iter()
            .map(|(k, v)| (k, ByteString(v)))
            .collect(),
    );
    // Replaced with the resource version read: a concurrent change makes this fail and the
    // next reconciliation decide again.
    let name = secret.name_any();
    Ok((
        api.replace(&name, &post_params(), &secret).await?,
        postponed,
    ))
}

/// Whether kstretch generated this Secret.
fn generated(secret: &Secret) -> bool {
    secret
        .annotations()
        .get(GENERATED)
        .is_some_and(|v| v == "true")
}

/// Deletes the Secrets kstretch generated for `kafka` (its CAs and node certificates); a
/// user-supplied CA stays.
pub async fn delete_generated(client: &Client, kafka: &Kafka) -> Result<(), kube::Error> {
    let name = kafka.name_any();
    let api = api(client, kafka);
    for secret in [
        CaKind::Cluster.cert_secret(&name),
        CaKind::Cluster.key_secret(&name),
        CaKind::Clients.cert_secret(&name),
        CaKind::Clients.key_secret(&name),
        node_certs_secret(&name),
    ] {
        if api.get_opt(&secret).await?.is_some_and(|s| generated(&s)) {
            api.delete(&secret, &Default::default()).await?;
            tracing::info!(kafka = %name, %secret, "deleted with the Kafka");
        }
    }
    Ok(())
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
                (format!("{pod}.crt"), pem.cert.clone().into_bytes()),
                (format!("{pod}.key"), pem.key.clone().into_bytes()),
            ]
        })
        .collect();
    let body = secret(metadata(kafka, &name, "node-certificates", &[]), data);
    api(client, kafka)
        .patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_certificate_is_renewed_when_forced_or_near_expiry() {
        let now = OffsetDateTime::now_utc();
        let ca = new_ca("cluster-ca v0", None, 100, now).unwrap();
        assert!(!renewal_due(&ca.cert, false, 30, now));
        assert!(renewal_due(&ca.cert, true, 30, now));
        assert!(renewal_due(
            &ca.cert,
            false,
            30,
            now + time::Duration::days(71)
        ));
    }

    fn settings(kind: CaKind, generate: bool) -> CaSettings {
        CaSettings {
            kind,
            generate,
            validity_days: 365,
            renewal_days: 30,
            replace_key: false,
        }
    }

    #[test]
    fn only_a_generated_clients_ca_has_its_key_replaced_and_in_a_window() {
        let clients = settings(CaKind::Clients, true);
        let forced = Some(KeyDue::Forced);
        assert_eq!(key_step(clients, None, true, "k-clients-ca"), KeyStep::Keep);
        assert_eq!(
            key_step(clients, forced, true, "k-clients-ca"),
            KeyStep::Replace
        );
        assert_eq!(
            key_step(clients, forced, false, "k-clients-ca"),
            KeyStep::Postponed(
                "the clients CA key (strimzi.io/force-replace asks for a new one)".into()
            )
        );
        let cluster = settings(CaKind::Cluster, true);
        let KeyStep::NotServed(why) = key_step(cluster, forced, true, "k-cluster-ca") else {
            panic!("the cluster CA's key is not replaced");
        };
        assert!(
            why.starts_with("strimzi.io/force-replace on Secret k-cluster-ca is not acted on")
                && why.contains("annotate k-cluster-ca-cert with strimzi.io/force-renew=true"),
            "{why}"
        );
        let users = settings(CaKind::Clients, false);
        let KeyStep::NotServed(why) = key_step(users, forced, true, "k-clients-ca") else {
            panic!("a user's CA is the user's to replace");
        };
        assert!(
            why.contains(".spec.clientsCa.generateCertificateAuthority is false")
                && why.contains("its certificate in k-clients-ca-cert"),
            "{why}"
        );
    }

    #[test]
    fn near_expiry_replace_key_gives_the_clients_ca_a_new_key_and_renews_the_cluster_cas() {
        let expiring = Some(KeyDue::Expiring);
        let clients = settings(CaKind::Clients, true);
        assert_eq!(
            key_step(clients, expiring, true, "k-clients-ca"),
            KeyStep::Replace
        );
        let KeyStep::Postponed(why) = key_step(clients, expiring, false, "k-clients-ca") else {
            panic!("outside a window the new key waits");
        };
        assert!(
            why.contains("within 30 days of expiry")
                && why.contains(".spec.clientsCa.certificateExpirationPolicy is replace-key"),
            "{why}"
        );
        // The cluster CA's certificate is renewed with its key (the policy is named as not
        // acted on); nothing is said here.
        let cluster = settings(CaKind::Cluster, true);
        assert_eq!(
            key_step(cluster, expiring, true, "k-cluster-ca"),
            KeyStep::Keep
        );
    }

    #[test]
    fn the_trust_bundle_keeps_replaced_certificates_until_they_expire() {
        let now = OffsetDateTime::now_utc();
        let old = new_ca("cluster-ca v0", None, 10, now).unwrap();
        let new = new_ca("cluster-ca v0", Some(&old.key), 365, now).unwrap();
        let data = BTreeMap::from([
            (CA_CERT_KEY.to_owned(), new.cert.clone()),
            (kept_key(&old.cert), old.cert.clone()),
        ]);
        let bundle = trust_bundle(&data, now);
        assert!(bundle.starts_with(new.cert.trim_end()), "current first");
        assert!(bundle.contains(old.cert.trim_end()));
        let later = trust_bundle(&data, now + time::Duration::days(11));
        assert!(
            !later.contains(old.cert.trim_end()),
            "an expired certificate is dropped"
        );
        assert!(kept_key(&old.cert).starts_with("ca-") && kept_key(&old.cert).ends_with(".crt"));
    }
}
