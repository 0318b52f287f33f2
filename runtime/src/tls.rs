//! PEM material for the link's mutual TLS: the CA, certificate and key files every kstretch
//! process is given, read and checked so that a wrong path or an empty file fails with its name
//! instead of as an opaque handshake error later.

use std::path::{Path, PathBuf};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

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
}

impl TlsError {
    /// Stable, machine-readable reason.
    pub fn reason(&self) -> &'static str {
        match self {
            TlsError::Read { .. } => "tls-read",
            TlsError::NoCertificate { .. } => "tls-no-certificate",
            TlsError::Pem { .. } => "tls-pem",
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
        PrivateKeyDer::from_pem_slice(&self.key)
            .map(|_| ())
            .map_err(|e| TlsError::Pem {
                what: "private key",
                origin: key.to_owned(),
                message: e.to_string(),
            })
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
}
