//! TLS to the brokers: which CA certificates the client trusts and which certificate it
//! presents (mutual TLS), built once into a rustls configuration shared by every connection.
//! Host names are always verified against the broker's certificate.

use std::fmt;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::error::Error;

/// TLS settings of a client. Cheap to clone.
#[derive(Clone)]
pub struct Tls {
    config: Arc<rustls::ClientConfig>,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field(
                "client_certificate",
                &self.config.client_auth_cert_resolver.has_certs(),
            )
            .finish_non_exhaustive()
    }
}

impl Tls {
    /// Trusts the PEM certificates in `ca` (one or more: during a CA renewal both the old and
    /// the new one) and presents `identity` (certificate chain PEM, PKCS#8 key PEM) when given.
    pub fn new(ca: &str, identity: Option<(&str, &str)>) -> Result<Tls, Error> {
        let invalid = |what: &str, e: &dyn fmt::Display| Error::Config(format!("TLS {what}: {e}"));
        let mut roots = rustls::RootCertStore::empty();
        let cas = CertificateDer::pem_slice_iter(ca.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid("CA certificates", &e))?;
        if cas.is_empty() {
            return Err(Error::Config(
                "TLS CA certificates: none in the PEM text".into(),
            ));
        }
        for cert in cas {
            roots.add(cert).map_err(|e| invalid("CA certificate", &e))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid("protocol versions", &e))?
            .with_root_certificates(roots);
        let config = match identity {
            None => builder.with_no_client_auth(),
            Some((chain, key)) => {
                let chain = CertificateDer::pem_slice_iter(chain.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| invalid("client certificate", &e))?;
                let key = PrivateKeyDer::from_pem_slice(key.as_bytes())
                    .map_err(|e| invalid("client key", &e))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| invalid("client certificate and key", &e))?
            }
        };
        Ok(Tls {
            config: Arc::new(config),
        })
    }

    /// Whether both are the same settings (clones of one [`Tls::new`]).
    pub fn same_as(&self, other: &Tls) -> bool {
        Arc::ptr_eq(&self.config, &other.config)
    }

    /// Runs the TLS handshake over `tcp` to `address` ("host:port"), verifying the host.
    pub(crate) async fn connect(
        &self,
        address: &str,
        tcp: TcpStream,
    ) -> Result<TlsStream<TcpStream>, Error> {
        let unreachable = |message: String| Error::Unreachable {
            address: address.to_owned(),
            message,
        };
        let host = address
            .rsplit_once(':')
            .map_or(address, |(host, _)| host)
            .trim_start_matches('[')
            .trim_end_matches(']');
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| unreachable(format!("{host:?} is not a TLS server name: {e}")))?;
        TlsConnector::from(self.config.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| unreachable(format!("TLS handshake failed: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_without_usable_certificates_are_refused() {
        for (ca, what) in [
            ("", "none in the PEM text"),
            ("not a certificate", "none in the PEM text"),
            (
                "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
                "CA certificate",
            ),
        ] {
            let err = Tls::new(ca, None).unwrap_err();
            assert_eq!(err.reason(), "KafkaConfigInvalid");
            assert!(err.to_string().contains(what), "{err}");
        }
    }
}
