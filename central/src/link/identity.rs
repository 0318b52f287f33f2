//! Which cluster an agent speaks for, read from its verified client certificate.
//!
//! Convention: the certificate names its cluster in a URI SAN `kstretch://cluster/<alias>`;
//! without one, its subject CN is the alias. The alias must be a DNS label (what a
//! `strimzi.io/stretch-cluster-alias` can be). Central keys everything by this alias, so an
//! agent holding a certificate for cluster A can never act as cluster B, whatever it claims in
//! its `Hello`.

use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

/// Prefix of the URI SAN that names the cluster.
pub const URI_PREFIX: &str = "kstretch://cluster/";

/// The cluster an agent's certificate names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterIdentity {
    pub alias: String,
    pub source: IdentitySource,
}

/// Where in the certificate the alias was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdentitySource {
    UriSan,
    CommonName,
}

impl std::fmt::Display for IdentitySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IdentitySource::UriSan => "URI SAN",
            IdentitySource::CommonName => "subject CN",
        })
    }
}

/// Why no cluster identity could be taken from a client certificate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    #[error("no client certificate was presented")]
    NoCertificate,
    #[error("the client certificate cannot be parsed: {0}")]
    Unparsable(String),
    #[error("the client certificate names several clusters ({}): it must name one", .0.join(", "))]
    Ambiguous(Vec<String>),
    #[error(
        "the client certificate names no cluster: it has no URI SAN {URI_PREFIX}<alias> and no subject CN"
    )]
    NoAlias,
    #[error(
        "{alias:?} (from the client certificate's {found_in}) is not a valid cluster alias: \
         lowercase letters, digits and '-', at most 63, starting and ending alphanumeric"
    )]
    InvalidAlias {
        alias: String,
        found_in: IdentitySource,
    },
}

impl IdentityError {
    /// Stable, machine-readable reason.
    pub fn reason(&self) -> &'static str {
        match self {
            IdentityError::NoCertificate => "no-certificate",
            IdentityError::Unparsable(_) => "unparsable-certificate",
            IdentityError::Ambiguous(_) => "ambiguous-identity",
            IdentityError::NoAlias => "no-identity",
            IdentityError::InvalidAlias { .. } => "invalid-alias",
        }
    }
}

/// The identity of the peer from the certificates tonic collected during the TLS handshake (the
/// leaf first). The chain has already been verified against central's CA by rustls.
pub fn from_peer_certs<C: AsRef<[u8]>>(
    certs: Option<&[C]>,
) -> Result<ClusterIdentity, IdentityError> {
    let leaf = certs
        .and_then(|c| c.first())
        .ok_or(IdentityError::NoCertificate)?;
    from_der(leaf.as_ref())
}

/// The identity named by one DER-encoded certificate.
pub fn from_der(der: &[u8]) -> Result<ClusterIdentity, IdentityError> {
    let (_, cert) =
        X509Certificate::from_der(der).map_err(|e| IdentityError::Unparsable(e.to_string()))?;
    let mut uri_aliases: Vec<String> = Vec::new();
    let san = cert
        .subject_alternative_name()
        .map_err(|e| IdentityError::Unparsable(e.to_string()))?;
    if let Some(san) = san {
        for name in &san.value.general_names {
            if let GeneralName::URI(uri) = name
                && let Some(alias) = uri.strip_prefix(URI_PREFIX)
                && !uri_aliases.iter().any(|a| a == alias)
            {
                uri_aliases.push(alias.to_owned());
            }
        }
    }
    let (alias, source) = match uri_aliases.len() {
        0 => {
            let cn = cert
                .subject()
                .iter_common_name()
                .next()
                .and_then(|cn| cn.as_str().ok())
                .ok_or(IdentityError::NoAlias)?;
            (cn.to_owned(), IdentitySource::CommonName)
        }
        1 => (uri_aliases.remove(0), IdentitySource::UriSan),
        _ => return Err(IdentityError::Ambiguous(uri_aliases)),
    };
    if !is_valid_alias(&alias) {
        return Err(IdentityError::InvalidAlias {
            alias,
            found_in: source,
        });
    }
    Ok(ClusterIdentity { alias, source })
}

/// A DNS label (RFC 1123): what cluster aliases are, since they end up in names and labels.
pub fn is_valid_alias(alias: &str) -> bool {
    kstretch_runtime::namespaces::is_dns_label(alias)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SanType};

    fn cert(cn: Option<&str>, uris: &[&str]) -> Vec<u8> {
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        if let Some(cn) = cn {
            dn.push(DnType::CommonName, cn);
        }
        params.distinguished_name = dn;
        params.subject_alt_names = uris
            .iter()
            .map(|u| SanType::URI((*u).try_into().unwrap()))
            .chain(std::iter::once(SanType::DnsName(
                "agent.example".try_into().unwrap(),
            )))
            .collect();
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn the_uri_san_names_the_cluster_and_wins_over_the_cn() {
        let der = cert(Some("alpha"), &["kstretch://cluster/beta"]);
        assert_eq!(
            from_der(&der).unwrap(),
            ClusterIdentity {
                alias: "beta".into(),
                source: IdentitySource::UriSan
            }
        );
    }

    #[test]
    fn the_cn_is_the_alias_without_a_kstretch_uri() {
        let der = cert(Some("gamma"), &["spiffe://cluster.local/ns/x/sa/y"]);
        assert_eq!(
            from_der(&der).unwrap(),
            ClusterIdentity {
                alias: "gamma".into(),
                source: IdentitySource::CommonName
            }
        );
    }

    #[test]
    fn two_different_clusters_in_one_certificate_are_refused() {
        let der = cert(
            None,
            &[
                "kstretch://cluster/alpha",
                "kstretch://cluster/beta",
                "kstretch://cluster/alpha",
            ],
        );
        let err = from_der(&der).unwrap_err();
        assert_eq!(
            err,
            IdentityError::Ambiguous(vec!["alpha".into(), "beta".into()])
        );
        assert_eq!(err.reason(), "ambiguous-identity");
    }

    #[test]
    fn the_same_cluster_twice_is_one_identity() {
        let der = cert(
            None,
            &["kstretch://cluster/alpha", "kstretch://cluster/alpha"],
        );
        assert_eq!(from_der(&der).unwrap().alias, "alpha");
    }

    #[test]
    fn a_certificate_without_any_name_is_refused() {
        let err = from_der(&cert(None, &[])).unwrap_err();
        assert_eq!(err, IdentityError::NoAlias);
    }

    #[test]
    fn an_alias_that_is_not_a_dns_label_is_refused() {
        let err = from_der(&cert(Some("Kafka Agent"), &[])).unwrap_err();
        assert_eq!(err.reason(), "invalid-alias");
        assert!(err.to_string().contains("subject CN"), "{err}");
        let err = from_der(&cert(None, &["kstretch://cluster/a/b"])).unwrap_err();
        assert!(err.to_string().contains("URI SAN"), "{err}");
    }

    #[test]
    fn no_certificate_and_garbage_are_refused() {
        assert_eq!(
            from_peer_certs::<Vec<u8>>(None).unwrap_err(),
            IdentityError::NoCertificate
        );
        let empty: Vec<Vec<u8>> = Vec::new();
        assert_eq!(
            from_peer_certs(Some(empty.as_slice())).unwrap_err(),
            IdentityError::NoCertificate
        );
        assert_eq!(
            from_der(b"not a certificate").unwrap_err().reason(),
            "unparsable-certificate"
        );
    }

    #[test]
    fn aliases_are_dns_labels() {
        for ok in ["a", "alpha", "eu-west-1", "0", &"x".repeat(63)] {
            assert!(is_valid_alias(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "Alpha", "a.b", "a_b", &"x".repeat(64)] {
            assert!(!is_valid_alias(bad), "{bad}");
        }
    }
}
