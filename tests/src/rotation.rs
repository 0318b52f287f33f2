//! Certificates mounted the way Kubernetes mounts a Secret, for certificate-rotation tests: the
//! files are symlinks into `..data`, itself a symlink to a timestamped directory, and a renewal
//! writes a new directory and swaps `..data` atomically. Plus a TLS probe that reports the
//! certificate central's link presents to a new handshake.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use crate::certs::CertFiles;

/// One issued certificate and its key.
#[derive(Debug, Clone)]
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
    /// The certificate, DER: what a TLS peer sees.
    pub der: Vec<u8>,
}

/// A CA whose certificates are mounted as Secret-like directories.
pub struct MountedPki {
    pub dir: PathBuf,
    ca: CertifiedIssuer<'static, KeyPair>,
}

impl std::fmt::Debug for MountedPki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MountedPki")
            .field("dir", &self.dir)
            .finish()
    }
}

impl MountedPki {
    pub fn new(name: &str) -> MountedPki {
        let dir =
            std::env::temp_dir().join(format!("kstretch-mounted-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("PKI dir");
        let mut params = CertificateParams::default();
        params.distinguished_name = dn(&format!("kstretch rotation CA {name}"));
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca =
            CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key")).expect("CA");
        MountedPki { dir, ca }
    }

    pub fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    /// A server certificate for `localhost` and 127.0.0.1 (each call: new key, new serial).
    pub fn server(&self) -> Issued {
        let mut params = CertificateParams::default();
        params.distinguished_name = dn("kstretch-central");
        params.subject_alt_names = vec![
            SanType::DnsName("localhost".try_into().expect("dns")),
            SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.issue(params)
    }

    /// An agent certificate for cluster `alias` (URI SAN `kstretch://cluster/<alias>`).
    pub fn agent(&self, alias: &str) -> Issued {
        let mut params = CertificateParams::default();
        params.distinguished_name = dn("kstretch agent");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.subject_alt_names = vec![SanType::URI(
            format!("kstretch://cluster/{alias}")
                .try_into()
                .expect("URI"),
        )];
        self.issue(params)
    }

    fn issue(&self, params: CertificateParams) -> Issued {
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.ca).expect("sign");
        Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().to_vec(),
        }
    }

    /// Mounts `issued` (with this CA) as `<dir>/<name>/{ca.crt,tls.crt,tls.key}`.
    pub fn mount(&self, name: &str, issued: &Issued) -> CertFiles {
        let root = self.dir.join(name);
        std::fs::create_dir_all(&root).expect("mount dir");
        for file in ["ca.crt", "tls.crt", "tls.key"] {
            std::os::unix::fs::symlink(Path::new("..data").join(file), root.join(file))
                .expect("symlink");
        }
        self.swap(name, &self.ca_pem(), &issued.cert_pem, &issued.key_pem);
        CertFiles {
            ca: root.join("ca.crt"),
            cert: root.join("tls.crt"),
            key: root.join("tls.key"),
            ca_pem: self.ca_pem(),
            cert_pem: issued.cert_pem.clone(),
            key_pem: issued.key_pem.clone(),
        }
    }

    /// Replaces the contents of mount `name` as the kubelet does: a new directory, then an
    /// atomic rename of the `..data` symlink.
    pub fn swap(&self, name: &str, ca: &str, cert: &str, key: &str) {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let root = self.dir.join(name);
        let version = format!("..v{}", COUNTER.fetch_add(1, Ordering::Relaxed));
        std::fs::create_dir_all(root.join(&version)).expect("version dir");
        for (file, text) in [("ca.crt", ca), ("tls.crt", cert), ("tls.key", key)] {
            std::fs::write(root.join(&version).join(file), text).expect("write");
        }
        let tmp = root.join("..data_tmp");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&version, &tmp).expect("symlink");
        std::fs::rename(&tmp, root.join("..data")).expect("swap ..data");
    }
}

impl Drop for MountedPki {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn dn(cn: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    dn
}

/// Completes a TLS handshake with the link at `addr` (as `localhost`, trusting `ca_pem`,
/// presenting `client`) and returns the certificate the server presented, DER.
pub async fn presented_certificate(
    addr: SocketAddr,
    ca_pem: &str,
    client: &Issued,
) -> Result<Vec<u8>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots
            .add(ca.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let chain = CertificateDer::pem_slice_iter(client.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let key =
        PrivateKeyDer::from_pem_slice(client.key_pem.as_bytes()).map_err(|e| e.to_string())?;
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_client_auth_cert(chain, key)
    .map_err(|e| e.to_string())?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
    let tls = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        connector.connect(name, tcp),
    )
    .await
    .map_err(|_| "no handshake within 10s".to_owned())?
    .map_err(|e| e.to_string())?;
    let (_, session) = tls.get_ref();
    session
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.to_vec())
        .ok_or_else(|| "no server certificate".to_owned())
}
