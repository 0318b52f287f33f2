//! How a user listener is secured (its security protocol, TLS and SASL options, from `tls` and
//! `authentication`, as Strimzi configures them) and the authorizer every node runs.

use std::collections::BTreeMap;

use super::model::{Authentication, Authorization, Listener};
use super::tls::{self, ClientAuth};

/// Kafka's login module for SCRAM on the broker side; credentials live in the KRaft metadata.
const SCRAM_LOGIN_MODULE: &str =
    "org.apache.kafka.common.security.scram.ScramLoginModule required;";

/// The security protocol of user listener `listener` and the options it needs.
pub(crate) fn user_listener(listener: &Listener) -> (&'static str, BTreeMap<String, String>) {
    let name = listener.config_name();
    let prefix = format!("listener.name.{}.", name.to_lowercase());
    let mut options = BTreeMap::new();
    let sasl = match &listener.authentication {
        Authentication::None | Authentication::Tls => false,
        Authentication::ScramSha512 => {
            options.insert(
                format!("{prefix}sasl.enabled.mechanisms"),
                "SCRAM-SHA-512".to_owned(),
            );
            options.insert(
                format!("{prefix}scram-sha-512.sasl.jaas.config"),
                SCRAM_LOGIN_MODULE.to_owned(),
            );
            true
        }
        Authentication::Custom { sasl, config } => {
            options.extend(
                config
                    .iter()
                    .map(|(k, v)| (format!("{prefix}{k}"), v.clone())),
            );
            *sasl
        }
    };
    if listener.tls {
        let auth = if listener.authentication == Authentication::Tls {
            ClientAuth::Clients
        } else {
            ClientAuth::None
        };
        // The user's `listenerConfig` wins over kstretch's defaults for the same option.
        for (key, value) in tls::listener_options(&name, auth, listener.custom_certificate) {
            options.entry(key).or_insert(value);
        }
    }
    let protocol = match (listener.tls, sasl) {
        (false, false) => "PLAINTEXT",
        (true, false) => "SSL",
        (false, true) => "SASL_PLAINTEXT",
        (true, true) => "SASL_SSL",
    };
    (protocol, options)
}

/// The options that make every node (controllers too: they authorize ACL and quota changes)
/// run `authorization`.
pub(crate) fn authorizer_options(authorization: &Authorization) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "authorizer.class.name".to_owned(),
            authorization.authorizer_class.clone(),
        ),
        (
            "super.users".to_owned(),
            authorization.super_users.join(";"),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kraft::ListenerKind;

    fn listener(tls: bool, authentication: Authentication) -> Listener {
        Listener {
            name: "ext".into(),
            port: 9094,
            kind: ListenerKind::Internal,
            tls,
            authentication,
            custom_certificate: false,
            advertised: BTreeMap::new(),
        }
    }

    #[test]
    fn protocols_follow_tls_and_authentication_as_in_strimzi() {
        let custom = |sasl| Authentication::Custom {
            sasl,
            config: BTreeMap::new(),
        };
        for (tls, auth, protocol) in [
            (false, Authentication::None, "PLAINTEXT"),
            (true, Authentication::None, "SSL"),
            (true, Authentication::Tls, "SSL"),
            (false, Authentication::ScramSha512, "SASL_PLAINTEXT"),
            (true, Authentication::ScramSha512, "SASL_SSL"),
            (false, custom(true), "SASL_PLAINTEXT"),
            (true, custom(false), "SSL"),
        ] {
            assert_eq!(
                user_listener(&listener(tls, auth.clone())).0,
                protocol,
                "{auth:?}"
            );
        }
    }

    #[test]
    fn certificate_authentication_requires_a_clients_ca_certificate() {
        let (_, options) = user_listener(&listener(true, Authentication::Tls));
        assert_eq!(
            options["listener.name.ext-9094.ssl.client.auth"],
            "required"
        );
        assert!(
            options["listener.name.ext-9094.ssl.truststore.certificates"]
                .contains("clients-ca.crt")
        );
        let (_, plain_tls) = user_listener(&listener(true, Authentication::None));
        assert!(!plain_tls.contains_key("listener.name.ext-9094.ssl.client.auth"));
    }

    #[test]
    fn a_listener_with_its_own_certificate_presents_it() {
        let mut custom = listener(true, Authentication::None);
        custom.custom_certificate = true;
        let (_, options) = user_listener(&custom);
        assert_eq!(
            options["listener.name.ext-9094.ssl.keystore.key"],
            "${kstretchcerts:/opt/kafka/cluster-certs:ext-9094.key}"
        );
        assert!(options["listener.name.ext-9094.ssl.truststore.certificates"].contains("ca.crt"));
    }

    #[test]
    fn scram_enables_its_mechanism_on_the_listener_only() {
        let (_, options) = user_listener(&listener(false, Authentication::ScramSha512));
        assert_eq!(
            options,
            BTreeMap::from([
                (
                    "listener.name.ext-9094.sasl.enabled.mechanisms".to_owned(),
                    "SCRAM-SHA-512".to_owned()
                ),
                (
                    "listener.name.ext-9094.scram-sha-512.sasl.jaas.config".to_owned(),
                    SCRAM_LOGIN_MODULE.to_owned()
                ),
            ])
        );
    }

    #[test]
    fn custom_listener_config_is_prefixed_and_wins_over_defaults() {
        let config = BTreeMap::from([
            (
                "sasl.enabled.mechanisms".to_owned(),
                "OAUTHBEARER".to_owned(),
            ),
            ("ssl.client.auth".to_owned(), "requested".to_owned()),
        ]);
        let (protocol, options) = user_listener(&listener(
            true,
            Authentication::Custom { sasl: true, config },
        ));
        assert_eq!(protocol, "SASL_SSL");
        assert_eq!(
            options["listener.name.ext-9094.sasl.enabled.mechanisms"],
            "OAUTHBEARER"
        );
        assert_eq!(
            options["listener.name.ext-9094.ssl.client.auth"],
            "requested"
        );
    }

    #[test]
    fn the_authorizer_lists_super_users_separated_by_semicolons() {
        let options = authorizer_options(&Authorization {
            authorizer_class: crate::kraft::STANDARD_AUTHORIZER.into(),
            super_users: vec!["User:CN=a,O=b".into(), "User:admin".into()],
        });
        assert_eq!(options["super.users"], "User:CN=a,O=b;User:admin");
        assert_eq!(
            options["authorizer.class.name"],
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
        );
    }
}
