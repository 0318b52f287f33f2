//! A throwaway PKI for the agent link in end-to-end tests, made in Rust with rcgen: a CA,
//! central's server certificate (for `localhost` and `127.0.0.1`) and agent client
//! certificates naming a cluster, written as PEM files the binaries read.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
};

/// A CA and the directory its certificates are written to.
pub struct Pki {
    pub dir: PathBuf,
    pub name: String,
    ca: CertifiedIssuer<'static, KeyPair>,
}

impl std::fmt::Debug for Pki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pki").field("dir", &self.dir).finish()
    }
}

/// The PEM files (and text) of one certificate, its key, and the CA that signed it.
#[derive(Debug, Clone)]
pub struct CertFiles {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

impl Pki {
    /// A new CA in a fresh directory under the system temp dir.
    pub fn new(name: &str) -> Pki {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "kstretch-pki-{name}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("PKI dir");
        let mut params = CertificateParams::default();
        params.distinguished_name = dn(&format!("kstretch test CA {name}"));
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().expect("CA key");
        let ca = CertifiedIssuer::self_signed(params, key).expect("CA certificate");
        std::fs::write(dir.join("ca.pem"), ca.pem()).expect("write CA");
        Pki {
            dir,
            name: name.to_owned(),
            ca,
        }
    }

    pub fn ca_path(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    pub fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    /// Central's certificate: DNS `localhost` and IP `127.0.0.1`, server authentication.
    pub fn server(&self) -> CertFiles {
        let mut params = CertificateParams::default();
        params.distinguished_name = dn("kstretch-central");
        params.subject_alt_names = vec![
            SanType::DnsName("localhost".try_into().expect("dns name")),
            SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.issue("central", params)
    }

    /// A server certificate for the IP addresses `ips` (a listener certificate the user brings).
    pub fn server_for_ips(&self, name: &str, ips: &[IpAddr]) -> CertFiles {
        let mut params = CertificateParams::default();
        params.distinguished_name = dn(name);
        params.subject_alt_names = ips.iter().map(|ip| SanType::IpAddress(*ip)).collect();
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.issue(name, params)
    }

    /// A Kafka node's certificate on loopback: DNS `localhost` and IP `127.0.0.1`, server and
    /// client authentication (nodes are both to each other).
    pub fn loopback_node(&self) -> CertFiles {
        let mut params = CertificateParams::default();
        params.distinguished_name = dn("kafka node");
        params.subject_alt_names = vec![
            SanType::DnsName("localhost".try_into().expect("dns name")),
            SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        self.issue("kafka-node", params)
    }

    /// An agent certificate for cluster `alias` by the convention: URI SAN
    /// `kstretch://cluster/<alias>` (with a CN that is not an alias, so only the URI can count).
    pub fn agent(&self, alias: &str) -> CertFiles {
        let mut params = client_params("kstretch agent");
        params.subject_alt_names = vec![SanType::URI(
            format!("kstretch://cluster/{alias}")
                .try_into()
                .expect("URI"),
        )];
        self.issue(&format!("agent-{alias}"), params)
    }

    /// A client certificate whose subject CN is `cn` and that has no URI SAN.
    pub fn client_with_cn(&self, cn: &str) -> CertFiles {
        let file = cn
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect::<String>();
        self.issue(&format!("cn-{file}"), client_params(cn))
    }

    fn issue(&self, file: &str, params: CertificateParams) -> CertFiles {
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.ca).expect("sign");
        let (cert_pem, key_pem) = (cert.pem(), key.serialize_pem());
        let files = CertFiles {
            ca: self.ca_path(),
            cert: self.dir.join(format!("{file}.pem")),
            key: self.dir.join(format!("{file}-key.pem")),
            ca_pem: self.ca.pem(),
            cert_pem,
            key_pem,
        };
        write(&files.cert, &files.cert_pem);
        write(&files.key, &files.key_pem);
        files
    }
}

impl Drop for Pki {
    /// Removes the files, unless the test failed (they may help to understand why).
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn client_params(cn: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = dn(cn);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params
}

fn dn(cn: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    dn
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issues_pem_files_signed_by_the_ca() {
        let pki = Pki::new("unit");
        let agent = pki.agent("beta");
        assert!(agent.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(agent.key_pem.contains("PRIVATE KEY"));
        assert_eq!(std::fs::read_to_string(&agent.ca).unwrap(), pki.ca_pem());
        assert!(agent.cert.exists() && agent.key.exists());
        let server = pki.server();
        assert_ne!(server.cert, agent.cert);
        assert!(pki.client_with_cn("Not An Alias").cert.exists());
    }
}
