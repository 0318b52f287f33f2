//! What a `Kafka` asks to protect, read into core's model: each listener's `authentication`
//! and `spec.kafka.authorization` with kstretch's own principals among the super users. What
//! kstretch cannot configure is refused, never served open. Pure.

use std::collections::BTreeMap;

use kstretch_api::common::OpaqueObject;
use kstretch_api::kafka::{AuthorizationType, GenericKafkaListener, KafkaAuthorization};
use kstretch_core::kraft::{Authentication, Authorization, STANDARD_AUTHORIZER};
use serde_json::Value;

/// Why a security setting cannot be served as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecurityProblem {
    #[error(
        "listener {name} (port {port}) sets .spec.kafka.listeners[{index}].authentication (type {kind}), which kstretch does not configure; use tls, scram-sha-512 or custom, or remove authentication"
    )]
    UnsupportedAuthentication {
        name: String,
        port: i32,
        index: usize,
        kind: String,
    },
    #[error(
        "listener {name} (port {port}): .spec.kafka.listeners[{index}].authentication {problem}"
    )]
    InvalidAuthentication {
        name: String,
        port: i32,
        index: usize,
        problem: String,
    },
    #[error(
        "listener {name} (port {port}): .spec.kafka.listeners[{index}].configuration.brokerCertChainAndKey.{field} is missing; give secretName, certificate and key"
    )]
    InvalidCertificate {
        name: String,
        port: i32,
        index: usize,
        field: String,
    },
    #[error(
        ".spec.kafka.authorization (type {kind}) is not configured by kstretch, which will not let every client do everything; use simple or custom"
    )]
    UnsupportedAuthorization { kind: String },
    #[error(".spec.kafka.authorization: {problem}")]
    InvalidAuthorization { problem: String },
}

impl SecurityProblem {
    pub fn reason(&self) -> &'static str {
        match self {
            // The same reason as a KafkaConnect's unsupported TLS or authentication.
            Self::UnsupportedAuthentication { .. } | Self::UnsupportedAuthorization { .. } => {
                "UnsupportedField"
            }
            Self::InvalidAuthentication { .. } | Self::InvalidCertificate { .. } => {
                "InvalidListener"
            }
            Self::InvalidAuthorization { .. } => "InvalidAuthorization",
        }
    }
}

/// The `type` of an opaque Strimzi object, or `unknown`.
fn type_of(object: &OpaqueObject) -> String {
    object
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_owned()
}

/// How listener `index` authenticates its clients.
pub fn authentication(
    index: usize,
    listener: &GenericKafkaListener,
) -> Result<Authentication, SecurityProblem> {
    let Some(object) = &listener.authentication else {
        return Ok(Authentication::None);
    };
    let invalid = |problem: String| SecurityProblem::InvalidAuthentication {
        name: listener.name.clone(),
        port: listener.port,
        index,
        problem,
    };
    match type_of(object).as_str() {
        "tls" => Ok(Authentication::Tls),
        "scram-sha-512" => Ok(Authentication::ScramSha512),
        "custom" => {
            // Secrets would be mounted into every broker; not done yet, so refused rather
            // than served with options that point at files that are not there.
            if object
                .get("secrets")
                .and_then(Value::as_array)
                .is_some_and(|s| !s.is_empty())
            {
                return Err(SecurityProblem::UnsupportedAuthentication {
                    name: listener.name.clone(),
                    port: listener.port,
                    index,
                    kind: "custom with secrets".to_owned(),
                });
            }
            let sasl = match object.get("sasl") {
                None => false,
                Some(v) => v
                    .as_bool()
                    .ok_or_else(|| invalid(format!("sets sasl to {v}, not true or false")))?,
            };
            let config = match object.get("listenerConfig") {
                None => BTreeMap::new(),
                Some(Value::Object(map)) => map
                    .iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| {
                        let value = match v {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        (k.clone(), value)
                    })
                    .collect(),
                Some(other) => {
                    return Err(invalid(format!(
                        "sets listenerConfig to {other}, not an object of options"
                    )));
                }
            };
            Ok(Authentication::Custom { sasl, config })
        }
        kind => Err(SecurityProblem::UnsupportedAuthentication {
            name: listener.name.clone(),
            port: listener.port,
            index,
            kind: kind.to_owned(),
        }),
    }
}

/// A certificate and key the user keeps in a Secret of the `Kafka`'s namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretCertificate {
    pub secret: String,
    pub certificate: String,
    pub key: String,
}

/// `configuration.brokerCertChainAndKey` of listener `index`: the certificate every broker
/// presents there instead of its own.
pub fn broker_certificate(
    index: usize,
    listener: &GenericKafkaListener,
) -> Result<Option<SecretCertificate>, SecurityProblem> {
    let Some(value) = listener
        .configuration
        .as_ref()
        .and_then(|c| c.get("brokerCertChainAndKey"))
    else {
        return Ok(None);
    };
    let field = |name: &str| {
        value
            .get(name)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| SecurityProblem::InvalidCertificate {
                name: listener.name.clone(),
                port: listener.port,
                index,
                field: name.to_owned(),
            })
    };
    Ok(Some(SecretCertificate {
        secret: field("secretName")?,
        certificate: field("certificate")?,
        key: field("key")?,
    }))
}

/// The authorizer of `kafka`'s nodes, if `authorization` asks for one; `kstretch` lists the
/// principals of kstretch itself (the nodes, central), which are always super users.
pub fn authorization(
    authorization: Option<&KafkaAuthorization>,
    kstretch: &[String],
) -> Result<Option<Authorization>, SecurityProblem> {
    let Some(spec) = authorization else {
        return Ok(None);
    };
    let authorizer_class = match spec.type_ {
        AuthorizationType::Simple => STANDARD_AUTHORIZER.to_owned(),
        AuthorizationType::Custom => spec
            .authorizer_class
            .as_deref()
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .ok_or_else(|| SecurityProblem::InvalidAuthorization {
                problem: "type custom needs authorizerClass, the class of your authorizer"
                    .to_owned(),
            })?
            .to_owned(),
        AuthorizationType::Opa | AuthorizationType::Keycloak => {
            return Err(SecurityProblem::UnsupportedAuthorization {
                kind: serde_json::to_value(spec.type_)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
            });
        }
    };
    let mut super_users = kstretch.to_vec();
    for user in &spec.super_users {
        let user = user.trim();
        if user.is_empty() || user.contains(';') {
            return Err(SecurityProblem::InvalidAuthorization {
                problem: format!(
                    "superUsers entry {user:?} is not a user name (CN=... or a SCRAM user name)"
                ),
            });
        }
        // Strimzi's superUsers are user names; "User:" is added as Strimzi does, and kept
        // when given.
        let principal = if user.starts_with("User:") {
            user.to_owned()
        } else {
            format!("User:{user}")
        };
        if !super_users.contains(&principal) {
            super_users.push(principal);
        }
    }
    Ok(Some(Authorization {
        authorizer_class,
        super_users,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn listener(authentication: Value) -> GenericKafkaListener {
        serde_json::from_value(json!({"name": "ext", "port": 9094, "type": "internal",
            "tls": true, "authentication": authentication}))
        .unwrap()
    }

    #[test]
    fn listener_authentication_is_read_as_strimzi_defines_it() {
        assert_eq!(
            authentication(0, &listener(json!({"type": "tls"}))),
            Ok(Authentication::Tls)
        );
        assert_eq!(
            authentication(0, &listener(json!({"type": "scram-sha-512"}))),
            Ok(Authentication::ScramSha512)
        );
        assert_eq!(
            authentication(
                0,
                &listener(json!({"type": "custom", "sasl": true,
                    "listenerConfig": {"sasl.enabled.mechanisms": "PLAIN", "x": 5}}))
            ),
            Ok(Authentication::Custom {
                sasl: true,
                config: BTreeMap::from([
                    ("sasl.enabled.mechanisms".to_owned(), "PLAIN".to_owned()),
                    ("x".to_owned(), "5".to_owned()),
                ]),
            })
        );
        let none: GenericKafkaListener = serde_json::from_value(
            json!({"name": "plain", "port": 9092, "type": "internal", "tls": false}),
        )
        .unwrap();
        assert_eq!(authentication(0, &none), Ok(Authentication::None));
    }

    #[test]
    fn a_listener_certificate_names_its_secret_and_keys() {
        let with = |configuration: Value| -> GenericKafkaListener {
            serde_json::from_value(json!({"name": "ext", "port": 9094, "type": "internal",
                "tls": true, "configuration": configuration}))
            .unwrap()
        };
        let ok = with(json!({"brokerCertChainAndKey":
            {"secretName": "s", "certificate": "tls.crt", "key": "tls.key"}}));
        assert_eq!(
            broker_certificate(0, &ok),
            Ok(Some(SecretCertificate {
                secret: "s".into(),
                certificate: "tls.crt".into(),
                key: "tls.key".into()
            }))
        );
        assert_eq!(broker_certificate(0, &with(json!({}))), Ok(None));
        let err = broker_certificate(
            2,
            &with(json!({"brokerCertChainAndKey": {"secretName": "s"}})),
        )
        .unwrap_err();
        assert_eq!(err.reason(), "InvalidListener");
        assert!(
            err.to_string()
                .contains("listeners[2].configuration.brokerCertChainAndKey.certificate"),
            "{err}"
        );
    }

    #[test]
    fn authentication_kstretch_cannot_configure_is_refused_naming_the_field() {
        for (object, reason, text) in [
            (json!({"type": "oauth"}), "UnsupportedField", "(type oauth)"),
            (json!({}), "UnsupportedField", "(type unknown)"),
            (
                json!({"type": "custom", "secrets": [{"secret": "s", "key": "k"}]}),
                "UnsupportedField",
                "(type custom with secrets)",
            ),
            (
                json!({"type": "custom", "sasl": "yes"}),
                "InvalidListener",
                "sasl",
            ),
            (
                json!({"type": "custom", "listenerConfig": "a=b"}),
                "InvalidListener",
                "listenerConfig",
            ),
        ] {
            let err = authentication(3, &listener(object)).unwrap_err();
            assert_eq!(err.reason(), reason, "{err}");
            let message = err.to_string();
            assert!(
                message.contains(".spec.kafka.listeners[3].authentication")
                    && message.contains(text),
                "{message}"
            );
        }
    }

    fn spec(value: Value) -> KafkaAuthorization {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn simple_authorization_has_kstretch_and_the_users_super_users() {
        let kstretch = ["User:CN=k-kafka,O=io.kstretch".to_owned()];
        let a = authorization(
            Some(&spec(json!({"type": "simple",
                "superUsers": ["CN=admin", "User:ops", "CN=k-kafka,O=io.kstretch"]}))),
            &kstretch,
        )
        .unwrap()
        .unwrap();
        assert_eq!(a.authorizer_class, STANDARD_AUTHORIZER);
        assert_eq!(
            a.super_users,
            ["User:CN=k-kafka,O=io.kstretch", "User:CN=admin", "User:ops"]
        );
        assert_eq!(authorization(None, &kstretch), Ok(None));
        let custom = authorization(
            Some(&spec(
                json!({"type": "custom", "authorizerClass": "com.example.Authz"}),
            )),
            &kstretch,
        )
        .unwrap()
        .unwrap();
        assert_eq!(custom.authorizer_class, "com.example.Authz");
    }

    #[test]
    fn authorization_kstretch_cannot_configure_is_refused() {
        for (value, reason, text) in [
            (json!({"type": "opa"}), "UnsupportedField", "(type opa)"),
            (
                json!({"type": "keycloak"}),
                "UnsupportedField",
                "(type keycloak)",
            ),
            (
                json!({"type": "custom"}),
                "InvalidAuthorization",
                "authorizerClass",
            ),
            (
                json!({"type": "simple", "superUsers": ["a;b"]}),
                "InvalidAuthorization",
                "superUsers",
            ),
        ] {
            let err = authorization(Some(&spec(value)), &[]).unwrap_err();
            assert_eq!(err.reason(), reason, "{err}");
            assert!(err.to_string().contains(text), "{err}");
        }
    }
}
