//! The agent's side of the link's mutual TLS: its client certificate and key (which name its
//! cluster), and the CA central's certificate must be signed by. Files are read again on every
//! connection attempt, so renewed certificates (cert-manager) are picked up on reconnect.

use tonic::transport::{Certificate, ClientTlsConfig, Identity};

pub use kstretch_runtime::tls::{TlsError, TlsFiles};

/// Reads and checks the files and builds the client TLS configuration; `server_name`
/// overrides the host of the URL as the name central's certificate is checked against.
pub fn client_config(
    files: &TlsFiles,
    server_name: Option<&str>,
) -> Result<ClientTlsConfig, TlsError> {
    let material = files.load()?;
    let mut config = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(material.ca))
        .identity(Identity::from_pem(material.cert, material.key));
    if let Some(name) = server_name {
        config = config.domain_name(name);
    }
    Ok(config)
}
