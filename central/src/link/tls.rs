//! Central's side of the link's mutual TLS: its own certificate and key, and the CA that must
//! have signed every agent's client certificate. Loaded and checked at start-up, so a wrong
//! path or an empty file fails loudly instead of at the first handshake; afterwards the files
//! are followed ([`Reloading`]) and every new handshake uses what they hold now (streams
//! already open keep their session). The TLS handshake is done here, not by tonic, because
//! tonic's server TLS is fixed at start.

use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use kstretch_runtime::tls::{Reloading, TlsMaterial};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;

pub use kstretch_runtime::tls::{TlsError, TlsFiles};

use super::metrics::LinkMetrics;

/// How long a client may take to complete the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What one version of the files makes: the server's certificate and the verifier of agents'
/// certificates.
pub struct ServerKeys {
    certified: Arc<CertifiedKey>,
    verifier: Arc<dyn ClientCertVerifier>,
}

impl std::fmt::Debug for ServerKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerKeys").finish_non_exhaustive()
    }
}

fn build(material: &TlsMaterial) -> Result<ServerKeys, TlsError> {
    let certified = Arc::new(material.certified_key()?);
    let mut roots = RootCertStore::empty();
    for ca in material.ca_certificates() {
        roots.add(ca).map_err(|e| TlsError::Pem {
            what: "CA certificate",
            origin: "(CA bundle)".to_owned(),
            message: e.to_string(),
        })?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()
    .map_err(|e| TlsError::Pem {
        what: "CA certificate",
        origin: "(CA bundle)".to_owned(),
        message: e.to_string(),
    })?;
    Ok(ServerKeys {
        certified,
        verifier,
    })
}

/// Checked PEM material for the link server, following its files.
#[derive(Debug, Clone)]
pub struct ServerTls(Reloading<ServerKeys>);

impl ServerTls {
    pub fn load(files: &TlsFiles) -> Result<Self, TlsError> {
        Reloading::load(files.clone(), build).map(Self)
    }

    /// From PEM text already in memory (tests); never changes.
    pub fn from_pem(ca: &str, cert: &str, key: &str) -> Result<Self, TlsError> {
        Reloading::fixed(TlsMaterial::from_pem(ca, cert, key)?, build).map(Self)
    }

    /// The reloading handle: to report to metrics and health, and to watch the files.
    pub fn reloading(&self) -> &Reloading<ServerKeys> {
        &self.0
    }

    /// rustls server configuration that requires a client certificate signed by the CA and
    /// reads the current files' material at every handshake.
    pub(crate) fn config(&self) -> Result<Arc<rustls::ServerConfig>, rustls::Error> {
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(Arc::new(CurrentVerifier(self.0.clone())))
        .with_cert_resolver(Arc::new(CurrentCert(self.0.clone())));
        // gRPC is HTTP/2 only.
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Arc::new(config))
    }
}

#[derive(Debug)]
struct CurrentCert(Reloading<ServerKeys>);

impl ResolvesServerCert for CurrentCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.0.current().map(|k| k.certified.clone())
    }
}

#[derive(Debug)]
struct CurrentVerifier(Reloading<ServerKeys>);

impl CurrentVerifier {
    fn current(&self) -> Result<Arc<ServerKeys>, rustls::Error> {
        self.0
            .current()
            .ok_or_else(|| rustls::Error::General("no TLS material loaded".to_owned()))
    }
}

impl ClientCertVerifier for CurrentVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    // No CA hints (they would have to outlive a reload); agents present their one certificate
    // anyway.
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.current()?
            .verifier
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current()?
            .verifier
            .verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current()?
            .verifier
            .verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.current()
            .map(|k| k.verifier.supported_verify_schemes())
            .unwrap_or_default()
    }
}

/// Accepts TCP connections on `listener` and completes their TLS handshakes concurrently (a
/// slow client never holds up the others); yields the connections that passed, until
/// `shutdown`. Refused handshakes count in the link's `refused_streams` as `tls-handshake`.
pub(crate) fn incoming(
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
    metrics: LinkMetrics,
    shutdown: CancellationToken,
) -> impl Stream<Item = Result<TlsStream<TcpStream>, std::io::Error>> + Send + 'static {
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                _ = shutdown.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            let (tcp, remote) = match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    tracing::warn!("cannot accept a link connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let _ = tcp.set_nodelay(true);
            let (acceptor, tx, metrics) = (acceptor.clone(), tx.clone(), metrics.clone());
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => {
                        let _ = tx.send(Ok(tls)).await;
                    }
                    Ok(Err(e)) => {
                        metrics.refused("tls-handshake");
                        tracing::info!(%remote, "refused a link connection: TLS handshake: {e}");
                    }
                    Err(_) => {
                        metrics.refused("tls-handshake");
                        tracing::info!(%remote, "refused a link connection: no TLS handshake within 10 s");
                    }
                }
            });
        }
    });
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
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
        assert!(tls.unwrap().config().is_ok());
        let err = ServerTls::from_pem(&cert.pem(), &cert.pem(), "nope").unwrap_err();
        assert_eq!(err.reason(), "tls-pem");
        let other = rcgen::KeyPair::generate().unwrap();
        let err =
            ServerTls::from_pem(&cert.pem(), &cert.pem(), &other.serialize_pem()).unwrap_err();
        assert_eq!(err.reason(), "tls-key-mismatch");
    }
}
