//! How Connect workers reach a secured Kafka, as Strimzi's `KafkaConnect` says it: `spec.tls`
//! (trusted certificates from Secrets) and `spec.authentication` (`tls`, `scram-sha-512`,
//! `scram-sha-256`, `plain`). Read from the spec (pure), the material fetched from the Secrets in
//! the `KafkaConnect`'s namespace (central's cluster), shipped to the workers' cluster in one
//! Secret mounted at [`CERTS_DIR`], and the worker options that read it from there.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kstretch_api::KafkaConnect;
use kube::{Api, Client, ResourceExt};
use serde_json::Value;

/// Where the workers find the material.
pub const CERTS_DIR: &str = "/opt/kafka/connect-certs";
/// Keys of the shipped Secret.
pub const TRUSTED: &str = "ca.crt";
pub const CERT: &str = "user.crt";
pub const KEY: &str = "user.key";
pub const PASSWORD: &str = "sasl.password";

/// Certificates of one Secret to trust: one key, or every key matching a `*` pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedCertificates {
    pub secret: String,
    pub key: String,
}

/// How the workers authenticate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Authentication {
    #[default]
    None,
    /// A client certificate and key from a Secret.
    Tls {
        secret: String,
        certificate: String,
        key: String,
    },
    /// SASL with a user name and a password from a Secret.
    Sasl {
        mechanism: Mechanism,
        username: String,
        secret: String,
        password: String,
    },
}

/// A SASL mechanism Strimzi's `authentication.type` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    ScramSha512,
    ScramSha256,
    Plain,
}

impl Mechanism {
    fn name(self) -> &'static str {
        match self {
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::Plain => "PLAIN",
        }
    }

    fn login_module(self) -> &'static str {
        match self {
            Mechanism::ScramSha512 | Mechanism::ScramSha256 => {
                "org.apache.kafka.common.security.scram.ScramLoginModule"
            }
            Mechanism::Plain => "org.apache.kafka.common.security.plain.PlainLoginModule",
        }
    }
}

/// What the workers need to reach Kafka.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Security {
    /// `spec.tls`: TLS, trusting these certificates (none: the JVM's default trust).
    pub tls: Option<Vec<TrustedCertificates>>,
    pub authentication: Authentication,
}

fn text(object: &serde_json::Map<String, Value>, field: &str) -> Option<String> {
    object
        .get(field)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// Why `spec.tls` or `spec.authentication` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// A mechanism kstretch does not configure.
    #[error("{0}")]
    Unsupported(String),
    /// A setting that is incomplete or malformed.
    #[error("{0}")]
    Invalid(String),
}

impl From<String> for Problem {
    fn from(message: String) -> Problem {
        Problem::Invalid(message)
    }
}

impl From<&str> for Problem {
    fn from(message: &str) -> Problem {
        Problem::Invalid(message.to_owned())
    }
}

/// Reads `spec.tls` and `spec.authentication`; the error names the field to fix.
pub fn read(connect: &KafkaConnect) -> Result<Security, Problem> {
    let spec = &connect.spec;
    let tls = match &spec.tls {
        None => None,
        Some(tls) => {
            let mut trusted = Vec::new();
            let list = match tls.get("trustedCertificates") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(list)) => list.clone(),
                Some(_) => return Err("spec.tls.trustedCertificates is not a list".into()),
            };
            for (i, entry) in list.iter().enumerate() {
                let entry = entry
                    .as_object()
                    .ok_or_else(|| format!("spec.tls.trustedCertificates[{i}] is not an object"))?;
                let secret = text(entry, "secretName").ok_or_else(|| {
                    format!("spec.tls.trustedCertificates[{i}] has no secretName")
                })?;
                let key = text(entry, "certificate")
                    .or_else(|| text(entry, "pattern"))
                    .ok_or_else(|| {
                        format!(
                            "spec.tls.trustedCertificates[{i}] has neither certificate nor pattern"
                        )
                    })?;
                trusted.push(TrustedCertificates { secret, key });
            }
            Some(trusted)
        }
    };
    let authentication = match &spec.authentication {
        None => Authentication::None,
        Some(auth) => {
            let kind = text(auth, "type").unwrap_or_else(|| "unknown".to_owned());
            let mechanism = match kind.as_str() {
                "tls" => None,
                "scram-sha-512" => Some(Mechanism::ScramSha512),
                "scram-sha-256" => Some(Mechanism::ScramSha256),
                "plain" => Some(Mechanism::Plain),
                other => {
                    return Err(Problem::Unsupported(format!(
                        "spec.authentication type {other} is not supported by kstretch; use tls, scram-sha-512, scram-sha-256 or plain"
                    )));
                }
            };
            match mechanism {
                None => {
                    if tls.is_none() {
                        return Err("spec.authentication type tls needs spec.tls: client certificates are sent over TLS".into());
                    }
                    let pair = auth
                        .get("certificateAndKey")
                        .and_then(Value::as_object)
                        .ok_or("spec.authentication.certificateAndKey is missing")?;
                    let field = |f: &str| {
                        text(pair, f).ok_or_else(|| {
                            format!("spec.authentication.certificateAndKey.{f} is missing")
                        })
                    };
                    Authentication::Tls {
                        secret: field("secretName")?,
                        certificate: field("certificate")?,
                        key: field("key")?,
                    }
                }
                Some(mechanism) => {
                    let username =
                        text(auth, "username").ok_or("spec.authentication.username is missing")?;
                    let password = auth
                        .get("passwordSecret")
                        .and_then(Value::as_object)
                        .ok_or("spec.authentication.passwordSecret is missing")?;
                    let field = |f: &str| {
                        text(password, f).ok_or_else(|| {
                            format!("spec.authentication.passwordSecret.{f} is missing")
                        })
                    };
                    Authentication::Sasl {
                        mechanism,
                        username,
                        secret: field("secretName")?,
                        password: field("password")?,
                    }
                }
            }
        }
    };
    Ok(Security {
        tls,
        authentication,
    })
}

/// The options of the workers and of their producers, consumers and admin clients.
pub fn worker_options(security: &Security) -> Vec<(String, String)> {
    let from_dir = |key: &str| format!("${{strimzidir:{CERTS_DIR}:{key}}}");
    let sasl = matches!(security.authentication, Authentication::Sasl { .. });
    let protocol = match (security.tls.is_some(), sasl) {
        (false, false) => "PLAINTEXT",
        (true, false) => "SSL",
        (false, true) => "SASL_PLAINTEXT",
        (true, true) => "SASL_SSL",
    };
    let mut options = vec![("security.protocol", protocol.to_owned())];
    if security.tls.as_ref().is_some_and(|t| !t.is_empty()) {
        options.push(("ssl.truststore.type", "PEM".to_owned()));
        options.push(("ssl.truststore.certificates", from_dir(TRUSTED)));
    }
    match &security.authentication {
        Authentication::None => {}
        Authentication::Tls { .. } => {
            options.push(("ssl.keystore.type", "PEM".to_owned()));
            options.push(("ssl.keystore.certificate.chain", from_dir(CERT)));
            options.push(("ssl.keystore.key", from_dir(KEY)));
        }
        Authentication::Sasl {
            mechanism,
            username,
            ..
        } => {
            options.push(("sasl.mechanism", mechanism.name().to_owned()));
            let username = username.replace('\\', "\\\\").replace('"', "\\\"");
            options.push((
                "sasl.jaas.config",
                format!(
                    "{} required username=\"{username}\" password=\"{}\";",
                    mechanism.login_module(),
                    from_dir(PASSWORD)
                ),
            ));
        }
    }
    ["", "producer.", "consumer.", "admin."]
        .iter()
        .flat_map(|prefix| {
            options
                .iter()
                .map(move |(k, v)| (format!("{prefix}{k}"), v.clone()))
        })
        .collect()
}

/// Whether `key` matches Strimzi's `pattern` (`*` for any text).
fn matches(pattern: &str, key: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == key;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !key.starts_with(first) || !key.ends_with(last) || key.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &key[first.len()..key.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

/// Secret `name`, read once per reconciliation.
async fn cached(
    api: &Api<Secret>,
    cache: &mut BTreeMap<String, Option<Secret>>,
    name: &str,
) -> Result<Option<Secret>, kube::Error> {
    if let Some(secret) = cache.get(name) {
        return Ok(secret.clone());
    }
    let secret = api.get_opt(name).await?;
    cache.insert(name.to_owned(), secret.clone());
    Ok(secret)
}

/// The files of the shipped Secret, read from the Secrets `security` names in the namespace
/// of `connect`; the error says which Secret or key is missing.
pub async fn material(
    client: &Client,
    connect: &KafkaConnect,
    security: &Security,
) -> Result<Result<BTreeMap<String, Vec<u8>>, String>, kube::Error> {
    let api: Api<Secret> =
        Api::namespaced(client.clone(), &connect.namespace().unwrap_or_default());
    let mut secrets: BTreeMap<String, Option<Secret>> = BTreeMap::new();
    let mut out = BTreeMap::new();
    let missing = |secret: &str, what: &str| {
        format!(
            "Secret {secret} {what} in the KafkaConnect's namespace; create it or fix the reference"
        )
    };
    if let Some(trusted) = &security.tls {
        let mut bundle = String::new();
        for t in trusted {
            let Some(secret) = cached(&api, &mut secrets, &t.secret).await? else {
                return Ok(Err(missing(&t.secret, "does not exist")));
            };
            let found: Vec<String> = secret
                .data
                .iter()
                .flatten()
                .filter(|(k, _)| matches(&t.key, k))
                .filter_map(|(_, v)| String::from_utf8(v.0.clone()).ok())
                .collect();
            if found.is_empty() {
                return Ok(Err(missing(&t.secret, &format!("has no key {}", t.key))));
            }
            for cert in found {
                bundle.push_str(cert.trim_end());
                bundle.push('\n');
            }
        }
        if !bundle.is_empty() {
            out.insert(TRUSTED.to_owned(), bundle.into_bytes());
        }
    }
    let wanted: Vec<(&str, &str, &str)> = match &security.authentication {
        Authentication::None => Vec::new(),
        Authentication::Tls {
            secret,
            certificate,
            key,
        } => vec![(secret, certificate, CERT), (secret, key, KEY)],
        Authentication::Sasl {
            secret, password, ..
        } => vec![(secret, password, PASSWORD)],
    };
    for (secret_name, key, file) in wanted {
        let Some(secret) = cached(&api, &mut secrets, secret_name).await? else {
            return Ok(Err(missing(secret_name, "does not exist")));
        };
        let Some(value) = secret.data.as_ref().and_then(|d| d.get(key)) else {
            return Ok(Err(missing(secret_name, &format!("has no key {key}"))));
        };
        out.insert(file.to_owned(), value.0.clone());
    }
    Ok(Ok(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn connect(spec: Value) -> KafkaConnect {
        let mut full = json!({"bootstrapServers": "k:9093"});
        for (k, v) in spec.as_object().unwrap() {
            full[k] = v.clone();
        }
        serde_json::from_value(
            json!({"apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaConnect",
            "metadata": {"name": "c", "namespace": "ns"}, "spec": full}),
        )
        .unwrap()
    }

    fn option<'a>(options: &'a [(String, String)], key: &str) -> Option<&'a str> {
        options
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn tls_and_certificate_authentication_use_the_shipped_files_everywhere() {
        let s = read(&connect(json!({
            "tls": {"trustedCertificates": [{"secretName": "k-cluster-ca-cert", "certificate": "ca.crt"}]},
            "authentication": {"type": "tls", "certificateAndKey":
                {"secretName": "u", "certificate": "user.crt", "key": "user.key"}}})))
        .unwrap();
        let options = worker_options(&s);
        for prefix in ["", "producer.", "consumer.", "admin."] {
            assert_eq!(
                option(&options, &format!("{prefix}security.protocol")),
                Some("SSL")
            );
            assert_eq!(
                option(&options, &format!("{prefix}ssl.keystore.key")),
                Some("${strimzidir:/opt/kafka/connect-certs:user.key}")
            );
        }
    }

    #[test]
    fn scram_reads_its_password_from_the_shipped_file() {
        let s = read(&connect(json!({"authentication": {"type": "scram-sha-512",
            "username": "bob", "passwordSecret": {"secretName": "bob", "password": "password"}}})))
        .unwrap();
        let options = worker_options(&s);
        assert_eq!(
            option(&options, "security.protocol"),
            Some("SASL_PLAINTEXT")
        );
        assert_eq!(
            option(&options, "consumer.sasl.mechanism"),
            Some("SCRAM-SHA-512")
        );
        assert_eq!(
            option(&options, "admin.sasl.jaas.config"),
            Some(
                "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"bob\" password=\"${strimzidir:/opt/kafka/connect-certs:sasl.password}\";"
            )
        );
        assert_eq!(
            option(&worker_options(&Security::default()), "security.protocol"),
            Some("PLAINTEXT")
        );
    }

    #[test]
    fn what_cannot_work_is_refused_naming_the_field() {
        for (spec, text) in [
            (json!({"authentication": {"type": "oauth"}}), "type oauth"),
            (
                json!({"authentication": {"type": "tls", "certificateAndKey": {}}}),
                "needs spec.tls",
            ),
            (
                json!({"tls": {}, "authentication": {"type": "tls", "certificateAndKey": {"secretName": "u"}}}),
                "certificateAndKey.certificate",
            ),
            (
                json!({"authentication": {"type": "scram-sha-512", "username": "u"}}),
                "passwordSecret",
            ),
            (
                json!({"tls": {"trustedCertificates": [{"secretName": "s"}]}}),
                "neither certificate nor pattern",
            ),
        ] {
            let err = read(&connect(spec)).unwrap_err().to_string();
            assert!(err.contains(text), "{err}");
        }
    }

    #[test]
    fn patterns_match_as_strimzis_globs() {
        assert!(matches("*.crt", "ca.crt"));
        assert!(matches("ca-*.crt", "ca-2026.crt"));
        assert!(!matches("*.crt", "ca.key"));
        assert!(matches("ca.crt", "ca.crt"));
        assert!(!matches("a*b*c", "acb"));
    }
}
