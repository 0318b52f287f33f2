//! Central's side of the link's mutual TLS: its own certificate and key, and the CA that must
//! have signed every agent's client certificate. Loaded and checked at start-up, so a wrong
//! path or an empty file fails loudly instead of at the first handshake.

use kstretch_runtime::tls::TlsMaterial;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};

pub use kstretch_runtime::tls::{TlsError, TlsFiles};

/// Checked PEM material for the link server.
#[derive(Debug, Clone)]
pub struct ServerTls(TlsMaterial);

impl ServerTls {
    pub fn load(files: &TlsFiles) -> Result<Self, TlsError> {
        files.load().map(Self)
    }

    /// From PEM text already in memory (tests).
    pub fn from_pem(ca: &str, cert: &str, key: &str) -> Result<Self, TlsError> {
        TlsMaterial::from_pem(ca, cert, key).map(Self)
    }

    /// Server TLS that requires a client certificate signed by the CA (rustls refuses the
    /// handshake otherwise).
    pub(crate) fn config(&self) -> ServerTlsConfig {
        ServerTlsConfig::new()
            .identity(Identity::from_pem(&self.0.cert, &self.0.key))
            .client_ca_root(Certificate::from_pem(&self.0.ca))
            .client_auth_optional(false)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn valid_pem_is_accepted() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["central".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let tls = ServerTls::from_pem(&cert.pem(), &cert.pem(), &key.serialize_pem());
        assert!(tls.is_ok());
        let err = ServerTls::from_pem(&cert.pem(), &cert.pem(), "nope").unwrap_err();
        assert_eq!(err.reason(), "tls-pem");
    }
}
