//! The user's Secret, named after the `KafkaUser` in its namespace and owned by it, with
//! Strimzi's keys: a client certificate of the clients CA (`ca.crt`, `user.crt`, `user.key`,
//! `user.p12`, `user.password`), kept while it is good and issued again when not, or a SCRAM
//! password (`password`, `sasl.jaas.config`), read from the user's Secret or generated once.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kstretch_api::user::SecretKeyRef;
use kstretch_api::{KafkaUser, names};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource, ResourceExt};

use crate::pki::{self, Ca, Refusal, secret_text as text};
use crate::status::FIELD_MANAGER;

/// Annotation with the SHA-256 of the password Kafka was last given for this user: a changed
/// password is sent to Kafka once, an unchanged one never again.
pub const APPLIED_PASSWORD: &str = "kstretch.io/applied-password-sha256";
/// Strimzi's annotation that asks for a new user certificate.
const FORCE_RENEW: &str = "strimzi.io/force-renew";
/// Length of generated passwords (Strimzi's default).
const PASSWORD_LENGTH: usize = 32;

fn api(client: &Client, user: &KafkaUser) -> Api<Secret> {
    Api::namespaced(client.clone(), &user.namespace().unwrap_or_default())
}

/// The user's Secret, if it exists.
pub async fn current(client: &Client, user: &KafkaUser) -> Result<Option<Secret>, kube::Error> {
    api(client, user).get_opt(&user.name_any()).await
}

/// A new password of `len` letters and digits.
fn generate_password(len: usize) -> Result<String, Refusal> {
    pki::random_password(len).map_err(|e| Refusal {
        reason: "RandomnessUnavailable",
        message: format!("cannot make a password: {e}"),
    })
}

/// The SCRAM password of `user`: from the Secret key the user names (which must exist and not
/// be empty), else the one already in the user's Secret, else a new one.
pub async fn scram_password(
    client: &Client,
    user: &KafkaUser,
    from: Option<&SecretKeyRef>,
    existing: Option<&Secret>,
) -> Result<Result<String, Refusal>, kube::Error> {
    let Some(from) = from else {
        return Ok(match existing.and_then(|s| text(s, "password")) {
            Some(kept) if !kept.is_empty() => Ok(kept),
            _ => generate_password(PASSWORD_LENGTH),
        });
    };
    let missing = |what: &str| Refusal {
        reason: "PasswordSecretMissing",
        message: format!(
            ".spec.authentication.password.valueFrom.secretKeyRef names Secret {} key {}, {what}; create it or fix the reference",
            from.name, from.key
        ),
    };
    let Some(secret) = api(client, user).get_opt(&from.name).await? else {
        return Ok(Err(missing("which does not exist")));
    };
    Ok(match text(&secret, &from.key) {
        Some(password) if !password.is_empty() => Ok(password),
        Some(_) => Err(missing("which is empty")),
        None => Err(missing("which has no such key")),
    })
}

/// The SHA-256 of `password`, hex.
pub fn password_digest(password: &str) -> String {
    ring::digest::digest(&ring::digest::SHA256, password.as_bytes())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Strimzi's keys of a SCRAM user's Secret.
pub fn scram_data(username: &str, password: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("password".to_owned(), password.to_owned()),
        (
            "sasl.jaas.config".to_owned(),
            format!(
                "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"{username}\" password=\"{password}\";"
            ),
        ),
    ])
}

/// Strimzi's keys of a certificate user's Secret: the one in `existing` while it is good under
/// the clients CA `ca` and not asked to renew, a new certificate otherwise.
pub fn certificate_data(
    user: &KafkaUser,
    existing: Option<&Secret>,
    ca: &Ca,
    validity_days: u32,
    renewal_days: u32,
) -> Result<BTreeMap<String, Vec<u8>>, Refusal> {
    let name = user.name_any();
    let ca_cert = ca.pem.cert.clone();
    let forced = existing.is_some_and(|s| {
        s.annotations()
            .get(FORCE_RENEW)
            .is_some_and(|v| v == "true")
    });
    let kept = existing.filter(|_| !forced).and_then(|s| {
        let (cert, key) = (text(s, "user.crt")?, text(s, "user.key")?);
        let p12 = s.data.as_ref()?.get("user.p12")?.0.clone();
        let password = text(s, "user.password")?;
        (text(s, "ca.crt").as_deref() == Some(ca_cert.as_str())
            && pki::user_certificate_good(&cert, ca, renewal_days))
        .then_some((cert, key, p12, password))
    });
    let (cert, key, p12, password) = match kept {
        Some(kept) => kept,
        None => {
            let pem = pki::user_certificate(ca, &name, validity_days)?;
            let password = generate_password(PASSWORD_LENGTH)?;
            let p12 = pki::pkcs12(&pem, &name, &password).map_err(|e| Refusal {
                reason: "InvalidClientsCa",
                message: format!("cannot write the keystore of user {name}: {e}"),
            })?;
            (pem.cert, pem.key, p12, password)
        }
    };
    Ok(BTreeMap::from([
        ("ca.crt".to_owned(), ca_cert.into_bytes()),
        ("user.crt".to_owned(), cert.into_bytes()),
        ("user.key".to_owned(), key.into_bytes()),
        ("user.p12".to_owned(), p12),
        ("user.password".to_owned(), password.into_bytes()),
    ]))
}

/// Applies the user's Secret with `data` and `annotations`, labelled for its Kafka and owned
/// by the user, with the labels and annotations of `.spec.template.secret.metadata`.
pub async fn apply(
    client: &Client,
    user: &KafkaUser,
    kafka: &str,
    data: BTreeMap<String, Vec<u8>>,
    annotations: BTreeMap<String, String>,
) -> Result<(), kube::Error> {
    let name = user.name_any();
    let template = user
        .spec
        .template
        .as_ref()
        .and_then(|t| t.get("secret"))
        .and_then(|s| s.get("metadata"));
    let strings = |field: &str| -> BTreeMap<String, String> {
        template
            .and_then(|m| m.get(field))
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default()
    };
    let mut labels = strings("labels");
    labels.extend([
        (names::CLUSTER.to_owned(), kafka.to_owned()),
        (names::KIND.to_owned(), "KafkaUser".to_owned()),
        ("app.kubernetes.io/instance".to_owned(), name.clone()),
        (
            "app.kubernetes.io/managed-by".to_owned(),
            "kstretch".to_owned(),
        ),
    ]);
    let mut all_annotations = strings("annotations");
    all_annotations.extend(annotations);
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: user.namespace(),
            labels: Some(labels),
            annotations: Some(all_annotations),
            owner_references: user.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        data: Some(data.into_iter().map(|(k, v)| (k, ByteString(v))).collect()),
        type_: Some("Opaque".to_owned()),
        ..Secret::default()
    };
    api(client, user)
        .patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&secret),
        )
        .await?;
    Ok(())
}

/// Deletes the user's Secret if this user owns it (its credentials are no longer kept).
pub async fn delete_owned(
    client: &Client,
    user: &KafkaUser,
    existing: Option<&Secret>,
) -> Result<(), kube::Error> {
    let owned = existing.is_some_and(|s| {
        s.owner_references()
            .iter()
            .any(|o| Some(&o.uid) == user.meta().uid.as_ref())
    });
    if owned {
        match api(client, user)
            .delete(&user.name_any(), &Default::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scram_secret_has_strimzis_jaas_line() {
        let data = scram_data("bob", "pw");
        assert_eq!(
            data["sasl.jaas.config"],
            "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"bob\" password=\"pw\";"
        );
        assert_eq!(password_digest("pw").len(), 64);
    }
}
