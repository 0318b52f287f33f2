//! Issuing certificates and judging whether one may stay: a cluster CA, a node's certificate
//! for all its host names, central's client certificate. Pure (no Kubernetes); rcgen signs,
//! x509-parser reads back what was issued.

use std::collections::BTreeSet;
use std::net::IpAddr;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use time::{Duration, OffsetDateTime};
use x509_parser::extensions::GeneralName;
use x509_parser::pem::parse_x509_pem;

/// The organisation in the subject of everything kstretch issues (Strimzi uses `io.strimzi`).
pub const ORGANIZATION: &str = "io.kstretch";

/// A certificate and its private key, both PEM (the key PKCS#8).
#[derive(Clone, PartialEq, Eq)]
pub struct Pem {
    pub cert: String,
    pub key: String,
}

impl std::fmt::Debug for Pem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pem")
            .field("cert", &self.cert.len())
            .finish_non_exhaustive()
    }
}

/// Why a certificate could not be issued or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PkiError(pub String);

fn failed(what: &str) -> impl Fn(rcgen::Error) -> PkiError + '_ {
    move |e| PkiError(format!("{what}: {e}"))
}

/// kstretch's own subjects (CAs, nodes, central) carry its organisation; a user's is
/// `CN=<user>` alone, as in Strimzi, so its principal is `User:CN=<user>`.
fn subject(common_name: &str, kstretch: bool) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    if kstretch {
        dn.push(DnType::OrganizationName, ORGANIZATION);
    }
    dn.push(DnType::CommonName, common_name);
    dn
}

fn validity(params: &mut CertificateParams, now: OffsetDateTime, days: u32) {
    // A little backdated, so a peer whose clock is slightly behind accepts it at once.
    params.not_before = now - Duration::minutes(5);
    params.not_after = now + Duration::days(i64::from(days));
}

/// A new self-signed CA named `common_name`, valid for `days`, with a new key or the PEM key
/// given (a CA key whose certificate was lost before it was stored).
pub fn new_ca(
    common_name: &str,
    key: Option<&str>,
    days: u32,
    now: OffsetDateTime,
) -> Result<Pem, PkiError> {
    let mut params = CertificateParams::default();
    params.distinguished_name = subject(common_name, true);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    validity(&mut params, now, days);
    let key = match key {
        Some(pem) => KeyPair::from_pem(pem),
        None => KeyPair::generate(),
    }
    .map_err(failed("CA key"))?;
    let cert = params.self_signed(&key).map_err(failed("CA certificate"))?;
    Ok(Pem {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// What a certificate is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// A node: server and client (it is both to other nodes).
    Node,
    /// A client only (central's admin client).
    Client,
    /// A `KafkaUser`'s client certificate.
    User,
}

/// A certificate for `common_name` and `hosts` (DNS names or IP addresses), signed by `ca`.
pub fn issue(
    ca: &Pem,
    common_name: &str,
    hosts: &BTreeSet<String>,
    usage: Usage,
    days: u32,
    now: OffsetDateTime,
) -> Result<Pem, PkiError> {
    let ca_key = KeyPair::from_pem(&ca.key).map_err(failed("CA key"))?;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert, ca_key).map_err(failed("CA certificate"))?;
    let mut params = CertificateParams::default();
    params.distinguished_name = subject(common_name, usage != Usage::User);
    params.subject_alt_names = hosts
        .iter()
        .map(|host| match host.parse::<IpAddr>() {
            Ok(ip) => Ok(SanType::IpAddress(ip)),
            Err(_) => host
                .as_str()
                .try_into()
                .map(SanType::DnsName)
                .map_err(|e| PkiError(format!("host name {host:?}: {e}"))),
        })
        .collect::<Result<_, _>>()?;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = match usage {
        Usage::Node => vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
        Usage::Client | Usage::User => vec![ExtendedKeyUsagePurpose::ClientAuth],
    };
    validity(&mut params, now, days);
    let key = KeyPair::generate().map_err(failed("key"))?;
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(failed("certificate"))?;
    Ok(Pem {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// `pem` as a PKCS#12 keystore protected by `password`, its entry named `alias` (what Java
/// clients load with `ssl.keystore.type=PKCS12`).
pub fn pkcs12(pem: &Pem, alias: &str, password: &str) -> Result<Vec<u8>, PkiError> {
    let der = |text: &str, what: &str| {
        parse_x509_pem(text.as_bytes())
            .map(|(_, p)| p.contents)
            .map_err(|e| PkiError(format!("{what}: {e}")))
    };
    let p12 = |e: p12_keystore::error::Error| PkiError(format!("PKCS#12: {e}"));
    let key = p12_keystore::PrivateKey::from_der(&der(&pem.key, "key")?).map_err(p12)?;
    let cert = p12_keystore::Certificate::from_der(&der(&pem.cert, "certificate")?).map_err(p12)?;
    let chain = p12_keystore::PrivateKeyChain::new(alias, key, [cert]);
    let mut store = p12_keystore::KeyStore::new();
    store.add_entry(alias, p12_keystore::KeyStoreEntry::PrivateKeyChain(chain));
    store.writer(password).write().map_err(p12)
}

/// The PEM certificates in `certs` as a PKCS#12 trust store protected by `password` (Java's
/// `ssl.truststore.type=PKCS12`), each a trusted certificate entry `ca-<n>`.
pub fn truststore_pkcs12(certs: &str, password: &str) -> Result<Vec<u8>, PkiError> {
    let p12 = |e: p12_keystore::error::Error| PkiError(format!("PKCS#12: {e}"));
    let mut store = p12_keystore::KeyStore::new();
    for (n, pem) in x509_parser::pem::Pem::iter_from_buffer(certs.as_bytes()).enumerate() {
        let pem = pem.map_err(|e| PkiError(format!("certificate {n}: {e}")))?;
        let cert = p12_keystore::Certificate::from_der(&pem.contents).map_err(p12)?;
        store.add_entry(
            &format!("ca-{n}"),
            p12_keystore::KeyStoreEntry::Certificate(cert),
        );
    }
    if store.entries_len() == 0 {
        return Err(PkiError("no certificate to trust".to_owned()));
    }
    store.writer(password).write().map_err(p12)
}

/// `len` letters and digits, the first a letter, from the system's secure randomness (every
/// character equally likely).
pub fn random_password(len: usize) -> Result<String, PkiError> {
    const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    const ALPHANUMERIC: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let random = ring::rand::SystemRandom::new();
    let mut out = String::with_capacity(len);
    while out.len() < len {
        let mut byte = [0u8; 1];
        ring::rand::SecureRandom::fill(&random, &mut byte)
            .map_err(|_| PkiError("the system has no secure randomness".to_owned()))?;
        let alphabet = if out.is_empty() {
            LETTERS
        } else {
            ALPHANUMERIC
        };
        let limit = 256 - 256 % alphabet.len();
        if usize::from(byte[0]) < limit {
            out.push(char::from(alphabet[usize::from(byte[0]) % alphabet.len()]));
        }
    }
    Ok(out)
}

/// What is known of an issued certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    /// Its DNS and IP subject alternative names, as text.
    pub hosts: BTreeSet<String>,
    pub not_after: OffsetDateTime,
    /// The issuer's distinguished name, as text.
    pub issuer: String,
    pub subject: String,
}

/// Reads a PEM certificate.
pub fn read(cert: &str) -> Result<Issued, PkiError> {
    let unreadable = |e: &dyn std::fmt::Display| PkiError(format!("unreadable certificate: {e}"));
    let (_, pem) = parse_x509_pem(cert.as_bytes()).map_err(|e| unreadable(&e))?;
    let x509 = pem.parse_x509().map_err(|e| unreadable(&e))?;
    let mut hosts = BTreeSet::new();
    if let Ok(Some(san)) = x509.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(dns) => {
                    hosts.insert((*dns).to_owned());
                }
                GeneralName::IPAddress(bytes) => {
                    let ip = match bytes.len() {
                        4 => <[u8; 4]>::try_from(*bytes).ok().map(IpAddr::from),
                        16 => <[u8; 16]>::try_from(*bytes).ok().map(IpAddr::from),
                        _ => None,
                    };
                    hosts.extend(ip.map(|ip| ip.to_string()));
                }
                _ => {}
            }
        }
    }
    Ok(Issued {
        hosts,
        not_after: x509.validity().not_after.to_datetime(),
        issuer: x509.issuer().to_string(),
        subject: x509.subject().to_string(),
    })
}

/// Whether the PEM certificate `cert` is of the PEM private key `key` (their public keys are
/// the same).
pub fn of_key(cert: &str, key: &str) -> Result<bool, PkiError> {
    use rcgen::PublicKeyData as _;
    let unreadable = |e: &dyn std::fmt::Display| PkiError(format!("unreadable certificate: {e}"));
    let (_, pem) = parse_x509_pem(cert.as_bytes()).map_err(|e| unreadable(&e))?;
    let x509 = pem.parse_x509().map_err(|e| unreadable(&e))?;
    let key = KeyPair::from_pem(key).map_err(failed("CA key"))?;
    Ok(x509.public_key().subject_public_key.data.as_ref() == key.der_bytes())
}

/// Whether a certificate may stay under the CA `ca` (read once by the caller for all its
/// nodes): readable, issued by that CA, for exactly `hosts`, and not within `renewal_days` of
/// expiring.
pub fn still_good(
    cert: &str,
    ca: &Issued,
    hosts: &BTreeSet<String>,
    renewal_days: u32,
    now: OffsetDateTime,
) -> bool {
    let Ok(issued) = read(cert) else {
        return false;
    };
    issued.issuer == ca.subject
        && issued.hosts == *hosts
        && issued.not_after - now > Duration::days(i64::from(renewal_days))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_certificate_is_of_its_own_key_only() {
        let now = OffsetDateTime::now_utc();
        let ca = new_ca("clients-ca v0", None, 365, now).unwrap();
        let other = new_ca("clients-ca v1", None, 365, now).unwrap();
        assert!(of_key(&ca.cert, &ca.key).unwrap());
        assert!(!of_key(&ca.cert, &other.key).unwrap());
        assert!(of_key("not a certificate", &ca.key).is_err());
    }

    #[test]
    fn a_node_certificate_names_its_hosts_and_its_ca() {
        let now = OffsetDateTime::now_utc();
        let ca = new_ca("cluster-ca v0", None, 365, now).unwrap();
        let wanted = hosts(&["b-0.brokers.kafka.svc", "10.250.1.2", "fd00::1"]);
        let node = issue(&ca, "my-cluster-kafka", &wanted, Usage::Node, 365, now).unwrap();
        let read_back = read(&node.cert).unwrap();
        assert_eq!(read_back.hosts, wanted);
        assert!(read_back.issuer.contains("cluster-ca v0"), "{read_back:?}");
        assert!(read_back.subject.contains("my-cluster-kafka"));
        assert!(still_good(
            &node.cert,
            &read(&ca.cert).unwrap(),
            &wanted,
            30,
            now
        ));
        assert!(
            node.key.contains("BEGIN PRIVATE KEY"),
            "PKCS#8 for Kafka's PEM store"
        );
    }

    #[test]
    fn a_certificate_is_renewed_for_new_hosts_another_ca_or_near_expiry() {
        let now = OffsetDateTime::now_utc();
        let ca = new_ca("cluster-ca v0", None, 365, now).unwrap();
        let wanted = hosts(&["a.example"]);
        let node = issue(&ca, "n", &wanted, Usage::Node, 100, now).unwrap();
        let ca_read = read(&ca.cert).unwrap();
        assert!(!still_good(
            &node.cert,
            &ca_read,
            &hosts(&["a.example", "b.example"]),
            30,
            now
        ));
        let other = new_ca("cluster-ca v1", None, 365, now).unwrap();
        assert!(!still_good(
            &node.cert,
            &read(&other.cert).unwrap(),
            &wanted,
            30,
            now
        ));
        assert!(!still_good(
            &node.cert,
            &ca_read,
            &wanted,
            30,
            now + Duration::days(71)
        ));
        assert!(still_good(
            &node.cert,
            &ca_read,
            &wanted,
            30,
            now + Duration::days(69)
        ));
        assert!(!still_good("garbage", &ca_read, &wanted, 30, now));
    }

    #[test]
    fn a_user_keystore_holds_the_users_key_and_certificate_under_its_password() {
        let now = OffsetDateTime::now_utc();
        let ca = new_ca("clients-ca v0", None, 365, now).unwrap();
        let user = issue(&ca, "alice", &BTreeSet::new(), Usage::User, 30, now).unwrap();
        assert_eq!(
            read(&user.cert).unwrap().subject,
            "CN=alice",
            "no organisation"
        );
        let bytes = pkcs12(&user, "alice", "secret").unwrap();
        let store = p12_keystore::KeyStore::from_pkcs12(
            &bytes,
            "secret",
            p12_keystore::Pkcs12ImportPolicy::Relaxed,
        )
        .unwrap();
        let (alias, chain) = store.private_key_chain().unwrap();
        assert_eq!(alias, "alice");
        assert_eq!(chain.certs().len(), 1);
        assert!(
            p12_keystore::KeyStore::from_pkcs12(
                &bytes,
                "wrong",
                p12_keystore::Pkcs12ImportPolicy::Relaxed
            )
            .is_err()
        );
    }

    #[test]
    fn a_truststore_holds_every_ca_certificate_as_a_trusted_entry() {
        let now = OffsetDateTime::now_utc();
        let old = new_ca("cluster-ca v0", None, 365, now).unwrap();
        let new = new_ca("cluster-ca v0", Some(&old.key), 365, now).unwrap();
        let bundle = format!("{}{}", new.cert, old.cert);
        let bytes = truststore_pkcs12(&bundle, "pw").unwrap();
        let store = p12_keystore::KeyStore::from_pkcs12(
            &bytes,
            "pw",
            p12_keystore::Pkcs12ImportPolicy::Strict,
        )
        .unwrap();
        assert_eq!(store.entries_len(), 2);
        assert!(truststore_pkcs12("", "pw").is_err());
    }

    #[test]
    fn random_passwords_start_with_a_letter_and_differ() {
        let a = random_password(32).unwrap();
        assert_eq!(a.len(), 32);
        assert!(a.chars().next().unwrap().is_ascii_alphabetic());
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(a, random_password(32).unwrap());
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        let now = OffsetDateTime::now_utc();
        let ca = new_ca("ca", None, 1, now).unwrap();
        let err = issue(&ca, "n", &hosts(&["bad-nämé"]), Usage::Node, 1, now);
        assert!(err.is_err());
        let broken = Pem {
            cert: ca.cert.clone(),
            key: "not a key".into(),
        };
        let err = issue(&broken, "n", &hosts(&["a"]), Usage::Client, 1, now).unwrap_err();
        assert!(err.0.contains("CA key"), "{err}");
    }
}
