//! The agent's side of the link's mutual TLS: its client certificate and key (which name its
//! cluster), and the CA central's certificate must be signed by. The files are followed
//! ([`ClientTls`]): they are read again before every connection attempt and every few seconds,
//! so renewed certificates (cert-manager, a rotated Secret) are used by the next connection
//! without a restart; invalid new files are refused and the previous material kept.

use kstretch_runtime::tls::{Reloading, TlsMaterial};
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

pub use kstretch_runtime::tls::{TlsError, TlsFiles};

/// The agent's TLS material, following its files.
pub type ClientTls = Reloading<TlsMaterial>;

/// Follows `files`, which need not be usable yet: until they are, every connection attempt
/// fails with the reason.
pub fn follow(files: TlsFiles) -> ClientTls {
    Reloading::pending(files, |material| Ok(material.clone()))
}

/// Reads the files again and builds the client TLS configuration from the newest valid
/// material; `server_name` overrides the host of the URL as the name central's certificate is
/// checked against.
pub fn client_config(
    tls: &ClientTls,
    server_name: Option<&str>,
) -> Result<ClientTlsConfig, TlsError> {
    let material = tls.refresh()?;
    let mut config = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&material.ca))
        .identity(Identity::from_pem(&material.cert, &material.key));
    if let Some(name) = server_name {
        config = config.domain_name(name);
    }
    Ok(config)
}
