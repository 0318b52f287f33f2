//! PEM material for the link's mutual TLS: the CA, certificate and key files every kstretch
//! process is given, read and checked so that a wrong path or an empty file fails with its name
//! instead of as an opaque handshake error later; and [`Reloading`], which re-reads them while
//! the process runs so that renewed certificates are used without a restart.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_util::sync::CancellationToken;

use crate::Health;

/// The three PEM files of `--tls-ca`, `--tls-cert` and `--tls-key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Checked PEM bytes: at least one certificate in `ca` and `cert`, a private key in `key`.
#[derive(Clone)]
pub struct TlsMaterial {
    pub ca: Vec<u8>,
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
}

// Never print key material.
impl std::fmt::Debug for TlsMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsMaterial").finish_non_exhaustive()
    }
}

/// Why the TLS material cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {what} {path}: {source}")]
    Read {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} {origin} holds no PEM certificate")]
    NoCertificate { what: &'static str, origin: String },
    #[error("{what} {origin} is not valid PEM: {message}")]
    Pem {
        what: &'static str,
        origin: String,
        message: String,
    },
    #[error("private key {key} does not belong to certificate {cert}: {message}")]
    KeyMismatch {
        cert: String,
        key: String,
        message: String,
    },
}

impl TlsError {
    /// Stable, machine-readable reason.
    pub fn reason(&self) -> &'static str {
        match self {
            TlsError::Read { .. } => "tls-read",
            TlsError::NoCertificate { .. } => "tls-no-certificate",
            TlsError::Pem { .. } => "tls-pem",
            TlsError::KeyMismatch { .. } => "tls-key-mismatch",
        }
    }
}

impl TlsFiles {
    /// Reads and checks the three files.
    pub fn load(&self) -> Result<TlsMaterial, TlsError> {
        let material = TlsMaterial {
            ca: read("CA certificate", &self.ca)?,
            cert: read("certificate", &self.cert)?,
            key: read("private key", &self.key)?,
        };
        let origin = |p: &Path| p.display().to_string();
        material.check(&origin(&self.ca), &origin(&self.cert), &origin(&self.key))?;
        Ok(material)
    }

    /// The three files' bytes, unchecked.
    fn read_raw(&self) -> Result<TlsMaterial, TlsError> {
        Ok(TlsMaterial {
            ca: read("CA certificate", &self.ca)?,
            cert: read("certificate", &self.cert)?,
            key: read("private key", &self.key)?,
        })
    }
}

impl TlsMaterial {
    /// From PEM text already in memory.
    pub fn from_pem(ca: &str, cert: &str, key: &str) -> Result<Self, TlsError> {
        let material = TlsMaterial {
            ca: ca.as_bytes().to_vec(),
            cert: cert.as_bytes().to_vec(),
            key: key.as_bytes().to_vec(),
        };
        material.check("(in memory)", "(in memory)", "(in memory)")?;
        Ok(material)
    }

    fn check(&self, ca: &str, cert: &str, key: &str) -> Result<(), TlsError> {
        check_certs("CA certificate", ca, &self.ca)?;
        check_certs("certificate", cert, &self.cert)?;
        self.certified_key_from(cert, key).map(|_| ())
    }

    /// The certificate chain and its key, checked to belong together.
    pub fn certified_key(&self) -> Result<CertifiedKey, TlsError> {
        self.certified_key_from("(certificate)", "(private key)")
    }

    fn certified_key_from(&self, cert: &str, key: &str) -> Result<CertifiedKey, TlsError> {
        let private = PrivateKeyDer::from_pem_slice(&self.key).map_err(|e| TlsError::Pem {
            what: "private key",
            origin: key.to_owned(),
            message: e.to_string(),
        })?;
        let chain = CertificateDer::pem_slice_iter(&self.cert)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsError::Pem {
                what: "certificate",
                origin: cert.to_owned(),
                message: e.to_string(),
            })?;
        CertifiedKey::from_der(chain, private, &rustls::crypto::ring::default_provider()).map_err(
            |e| TlsError::KeyMismatch {
                cert: cert.to_owned(),
                key: key.to_owned(),
                message: e.to_string(),
            },
        )
    }

    /// The CA certificates, DER.
    pub fn ca_certificates(&self) -> Vec<CertificateDer<'static>> {
        CertificateDer::pem_slice_iter(&self.ca)
            .filter_map(Result::ok)
            .collect()
    }

    fn same_bytes(&self, other: &TlsMaterial) -> bool {
        self.ca == other.ca && self.cert == other.cert && self.key == other.key
    }
}

/// Metrics of TLS reloading.
#[derive(Debug, Clone, Default)]
pub struct TlsMetrics {
    reloads: Family<OutcomeLabel, Counter>,
    failing: Gauge,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

impl TlsMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "tls_reloads",
            "Changes of the TLS files seen, by outcome (loaded, or rejected: the previous \
             material stays in use)",
            m.reloads.clone(),
        );
        registry.register(
            "tls_reload_failing",
            "1 while the TLS files on disk are rejected and the previous material is served",
            m.failing.clone(),
        );
        m
    }
}

/// Name of the readiness check that reports the TLS material (always passing: a rejected
/// renewal leaves the previous, still valid material in use).
pub const CHECK: &str = "tls";

/// TLS material that follows its files: [`refresh`](Self::refresh) reads them again and, when
/// their contents changed and still make valid material, switches to it. Invalid new contents
/// (unparsable, a key of another certificate, a file half-written) are refused with an error
/// log and the previous material stays in use. Contents are compared, not inodes or mtimes:
/// Kubernetes renews a mounted Secret by swapping a symlink (`..data`).
///
/// `T` is what the user builds from checked material (a rustls certificate and verifier, a
/// tonic TLS configuration); it is built once per change. Cheap to clone.
pub struct Reloading<T> {
    files: Option<TlsFiles>,
    build: fn(&TlsMaterial) -> Result<T, TlsError>,
    state: Arc<RwLock<ReloadState<T>>>,
}

struct ReloadState<T> {
    current: Option<(TlsMaterial, Arc<T>)>,
    /// The last refused contents (or read error), so that the same refusal is logged once.
    rejected: Option<Result<TlsMaterial, String>>,
    metrics: TlsMetrics,
    health: Option<Health>,
}

impl<T> Clone for Reloading<T> {
    fn clone(&self) -> Self {
        Self {
            files: self.files.clone(),
            build: self.build,
            state: self.state.clone(),
        }
    }
}

impl<T> std::fmt::Debug for Reloading<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloading")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl<T> Reloading<T> {
    /// Loads `files` now; an error here fails start-up.
    pub fn load(
        files: TlsFiles,
        build: fn(&TlsMaterial) -> Result<T, TlsError>,
    ) -> Result<Self, TlsError> {
        let material = files.load()?;
        let value = build(&material)?;
        Ok(Self::with(
            Some(files),
            build,
            Some((material, Arc::new(value))),
        ))
    }

    /// Follows `files`, which may not be usable yet ([`refresh`](Self::refresh) reports why
    /// until they are).
    pub fn pending(files: TlsFiles, build: fn(&TlsMaterial) -> Result<T, TlsError>) -> Self {
        Self::with(Some(files), build, None)
    }

    /// Fixed material that never changes (tests, material given in memory).
    pub fn fixed(
        material: TlsMaterial,
        build: fn(&TlsMaterial) -> Result<T, TlsError>,
    ) -> Result<Self, TlsError> {
        let value = build(&material)?;
        Ok(Self::with(None, build, Some((material, Arc::new(value)))))
    }

    fn with(
        files: Option<TlsFiles>,
        build: fn(&TlsMaterial) -> Result<T, TlsError>,
        current: Option<(TlsMaterial, Arc<T>)>,
    ) -> Self {
        Self {
            files,
            build,
            state: Arc::new(RwLock::new(ReloadState {
                current,
                rejected: None,
                metrics: TlsMetrics::default(),
                health: None,
            })),
        }
    }

    /// Reports reloads in `metrics` and the readiness check [`CHECK`] of `health`.
    pub fn report_to(&self, metrics: TlsMetrics, health: Option<Health>) {
        if let Some(health) = &health {
            health.set_ready(CHECK, true, "loaded");
        }
        let mut state = self.write();
        state.metrics = metrics;
        state.health = health;
    }

    /// The material in use, if any was ever valid.
    pub fn current(&self) -> Option<Arc<T>> {
        self.read().current.as_ref().map(|(_, v)| v.clone())
    }

    /// Reads the files again and switches to their contents if they changed and are valid;
    /// returns the material in use afterwards, or why there is none.
    pub fn refresh(&self) -> Result<Arc<T>, TlsError> {
        let Some(files) = &self.files else {
            return self.current().ok_or_else(|| TlsError::NoCertificate {
                what: "TLS material",
                origin: "(none)".to_owned(),
            });
        };
        let loaded = files
            .load()
            .and_then(|material| (self.build)(&material).map(|value| (material, value)));
        let mut state = self.write();
        match loaded {
            Ok((material, value)) => {
                let changed = state
                    .current
                    .as_ref()
                    .is_none_or(|(old, _)| !old.same_bytes(&material));
                if changed {
                    if state.current.is_some() {
                        tracing::info!(cert = %files.cert.display(), "TLS: loaded the renewed certificate");
                    }
                    state
                        .metrics
                        .reloads
                        .get_or_create(&OutcomeLabel { outcome: "loaded" })
                        .inc();
                    state.current = Some((material, Arc::new(value)));
                }
                if state.rejected.take().is_some() {
                    state.metrics.failing.set(0);
                    if let Some(health) = &state.health {
                        health.set_ready(CHECK, true, "loaded");
                    }
                }
                state
                    .current
                    .as_ref()
                    .map(|(_, v)| v.clone())
                    .ok_or_else(|| TlsError::NoCertificate {
                        what: "TLS material",
                        origin: "(none)".to_owned(),
                    })
            }
            Err(err) => {
                // The same bytes as in use (e.g. a file that cannot be read only now) change
                // nothing; a refusal already reported is not reported again.
                let seen = match files.read_raw() {
                    Ok(raw) => {
                        if state
                            .current
                            .as_ref()
                            .is_some_and(|(old, _)| old.same_bytes(&raw))
                        {
                            return state.current.as_ref().map(|(_, v)| v.clone()).ok_or(err);
                        }
                        Ok(raw)
                    }
                    Err(e) => Err(e.to_string()),
                };
                let repeated = match (&state.rejected, &seen) {
                    (Some(Ok(a)), Ok(b)) => a.same_bytes(b),
                    (Some(Err(a)), Err(b)) => a == b,
                    _ => false,
                };
                if !repeated {
                    let keeping = if state.current.is_some() {
                        "; keeping the previous material"
                    } else {
                        ""
                    };
                    tracing::error!(
                        reason = err.reason(),
                        "TLS: refusing the new material: {err}{keeping}"
                    );
                    state
                        .metrics
                        .reloads
                        .get_or_create(&OutcomeLabel {
                            outcome: "rejected",
                        })
                        .inc();
                    state.metrics.failing.set(1);
                    if let Some(health) = &state.health {
                        health.set_ready(
                            CHECK,
                            true,
                            format!("files rejected, previous material in use: {err}"),
                        );
                    }
                    state.rejected = Some(seen);
                }
                match &state.current {
                    Some((_, v)) => Ok(v.clone()),
                    None => Err(err),
                }
            }
        }
    }

    /// Refreshes every `every` until `shutdown`.
    pub async fn watch(self, every: Duration, shutdown: CancellationToken) {
        if self.files.is_none() {
            return;
        }
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
            // Reading three small files: cheap enough for the runtime's thread.
            let _ = self.refresh();
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, ReloadState<T>> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, ReloadState<T>> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_owned(),
        source,
    })
}

fn check_certs(what: &'static str, origin: &str, pem: &[u8]) -> Result<(), TlsError> {
    let mut n = 0;
    for cert in CertificateDer::pem_slice_iter(pem) {
        cert.map_err(|e| TlsError::Pem {
            what,
            origin: origin.to_owned(),
            message: e.to_string(),
        })?;
        n += 1;
    }
    if n == 0 {
        return Err(TlsError::NoCertificate {
            what,
            origin: origin.to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_empty_files_are_named() {
        let dir = std::env::temp_dir().join(format!("kstretch-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let files = TlsFiles {
            ca: dir.join("missing-ca.pem"),
            cert: empty.clone(),
            key: empty.clone(),
        };
        let err = files.load().unwrap_err();
        assert_eq!(err.reason(), "tls-read");
        assert!(err.to_string().contains("missing-ca.pem"), "{err}");

        let files = TlsFiles {
            ca: empty.clone(),
            cert: empty.clone(),
            key: empty,
        };
        let err = files.load().unwrap_err();
        assert_eq!(err.reason(), "tls-no-certificate");
        assert!(err.to_string().contains("CA certificate"), "{err}");
    }

    #[test]
    fn garbage_is_not_pem() {
        let err = TlsMaterial::from_pem(
            "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n",
            "",
            "",
        )
        .unwrap_err();
        assert_eq!(err.reason(), "tls-pem");
        let err = TlsMaterial::from_pem("", "", "").unwrap_err();
        assert_eq!(err.reason(), "tls-no-certificate");
    }

    fn self_signed(name: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn cert_of(material: &Arc<TlsMaterial>) -> Vec<u8> {
        material.cert.clone()
    }

    #[test]
    fn a_key_of_another_certificate_is_refused() {
        let (cert, _) = self_signed("a");
        let (_, other_key) = self_signed("b");
        let err = TlsMaterial::from_pem(&cert, &cert, &other_key).unwrap_err();
        assert_eq!(err.reason(), "tls-key-mismatch");
        let (cert, key) = self_signed("a");
        assert!(
            TlsMaterial::from_pem(&cert, &cert, &key)
                .unwrap()
                .certified_key()
                .is_ok()
        );
    }

    #[test]
    fn reloading_follows_valid_changes_and_keeps_the_old_material_on_bad_ones() {
        let dir = std::env::temp_dir().join(format!("kstretch-tls-reload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = TlsFiles {
            ca: dir.join("ca.pem"),
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
        };
        let write = |cert: &str, key: &str| {
            std::fs::write(&files.ca, cert).unwrap();
            std::fs::write(&files.cert, cert).unwrap();
            std::fs::write(&files.key, key).unwrap();
        };
        let (first, first_key) = self_signed("first");
        write(&first, &first_key);
        let tls = Reloading::load(files.clone(), |m| Ok(m.clone())).unwrap();
        let metrics = TlsMetrics::default();
        let health = Health::new();
        tls.report_to(metrics.clone(), Some(health.clone()));
        assert_eq!(cert_of(&tls.current().unwrap()), first.as_bytes());

        // Unchanged: nothing happens.
        tls.refresh().unwrap();
        assert_eq!(
            metrics
                .reloads
                .get_or_create(&OutcomeLabel { outcome: "loaded" })
                .get(),
            0
        );

        // Renewed: switched.
        let (second, second_key) = self_signed("second");
        write(&second, &second_key);
        assert_eq!(cert_of(&tls.refresh().unwrap()), second.as_bytes());
        assert_eq!(
            metrics
                .reloads
                .get_or_create(&OutcomeLabel { outcome: "loaded" })
                .get(),
            1
        );

        // A key of another certificate, then garbage: refused once each, second kept.
        write(&first, &second_key);
        assert_eq!(cert_of(&tls.refresh().unwrap()), second.as_bytes());
        tls.refresh().unwrap();
        assert_eq!(metrics.failing.get(), 1);
        assert_eq!(
            metrics
                .reloads
                .get_or_create(&OutcomeLabel {
                    outcome: "rejected"
                })
                .get(),
            1
        );
        let (ready, reports) = health.readiness();
        assert!(ready);
        assert!(
            reports[0].detail.contains("previous material in use"),
            "{reports:?}"
        );
        write("garbage", "garbage");
        assert_eq!(cert_of(&tls.refresh().unwrap()), second.as_bytes());
        assert_eq!(
            metrics
                .reloads
                .get_or_create(&OutcomeLabel {
                    outcome: "rejected"
                })
                .get(),
            2
        );
        std::fs::remove_file(&files.key).unwrap();
        assert_eq!(cert_of(&tls.refresh().unwrap()), second.as_bytes());

        // Fixed again: the flag clears.
        let (third, third_key) = self_signed("third");
        write(&third, &third_key);
        assert_eq!(cert_of(&tls.refresh().unwrap()), third.as_bytes());
        assert_eq!(metrics.failing.get(), 0);
        assert_eq!(health.readiness().1[0].detail, "loaded");

        // Files that are not usable yet: an error until they are.
        std::fs::remove_file(&files.key).unwrap();
        let pending = Reloading::pending(files.clone(), |m| Ok(m.clone()));
        assert_eq!(pending.refresh().unwrap_err().reason(), "tls-read");
        write(&third, &third_key);
        assert!(pending.refresh().is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
