//! The server side of TLS for every listener: a rustls configuration read from PEM files and rebuilt when the
//! files change (Kubernetes rewrites a mounted Secret in place when a certificate is rotated, and a restart
//! for that would drop every connection), optionally requiring a client certificate signed by the cluster CA
//! (mutual TLS: only nodes of the cluster get in). [`crate::listener`] accepts connections with it.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::Mutex;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

/// A TLS file that could not be used, named.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path}: {message}")]
    Pem { path: PathBuf, message: String },
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// Where a listener's certificate, key and (for mutual TLS) client CA are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTlsFiles {
    /// PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// PEM CA certificates: when set, a client must present a certificate signed by one of them.
    pub client_ca: Option<PathBuf>,
}

impl ServerTlsFiles {
    fn paths(&self) -> impl Iterator<Item = &Path> {
        [Some(&self.cert), Some(&self.key), self.client_ca.as_ref()]
            .into_iter()
            .flatten()
            .map(PathBuf::as_path)
    }
}

/// What the files looked like when they were last read: a change of any modification time or length means
/// a rotation.
type Stamp = Vec<Option<(SystemTime, u64)>>;

fn stamp(files: &ServerTlsFiles) -> Stamp {
    files
        .paths()
        .map(|p| {
            // `metadata` follows symlinks: a Secret volume swaps its `..data` link, which changes the target.
            std::fs::metadata(p)
                .ok()
                .and_then(|m| Some((m.modified().ok()?, m.len())))
        })
        .collect()
}

struct Loaded {
    stamp: Stamp,
    config: Arc<ServerConfig>,
}

/// A listener's TLS configuration, re-read from its files when they change. Cheap to share.
pub struct ServerTls {
    files: ServerTlsFiles,
    loaded: Mutex<Loaded>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("files", &self.files)
            .finish()
    }
}

impl ServerTls {
    /// Reads the files now: a process with a bad certificate must not start.
    pub fn load(files: ServerTlsFiles) -> Result<Arc<ServerTls>, TlsError> {
        let stamp = stamp(&files);
        let config = Arc::new(build(&files)?);
        Ok(Arc::new(ServerTls {
            files,
            loaded: Mutex::new(Loaded { stamp, config }),
        }))
    }

    /// Whether a client must present a certificate of the cluster CA.
    pub fn requires_client_certificate(&self) -> bool {
        self.files.client_ca.is_some()
    }

    /// The configuration for the next handshake: rebuilt first when a file changed since the last one. A
    /// rotation caught half-way (a new certificate beside the old key) keeps the previous configuration and
    /// is retried at the next connection.
    pub fn current(&self) -> Arc<ServerConfig> {
        let now = stamp(&self.files);
        let mut loaded = self.loaded.lock();
        if now != loaded.stamp {
            match build(&self.files) {
                Ok(config) => {
                    tracing::info!(cert = %self.files.cert.display(), event = "tls_reloaded",
                        "TLS certificate files changed: reloaded");
                    loaded.config = Arc::new(config);
                    loaded.stamp = now;
                }
                Err(e) => {
                    tracing::warn!(error = %e, event = "tls_reload_failed",
                        "TLS certificate files changed but cannot be used yet: serving the previous ones");
                }
            }
        }
        Arc::clone(&loaded.config)
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn pem_error(path: &Path, message: impl Into<String>) -> TlsError {
    TlsError::Pem {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// The certificates of a PEM file (at least one).
pub fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(path)?;
    let certs = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(path, e.to_string()))?;
    if certs.is_empty() {
        return Err(pem_error(path, "no PEM certificate in it"));
    }
    Ok(certs)
}

/// The private key of a PEM file.
pub fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read(path)?;
    rustls_pemfile::private_key(&mut pem.as_slice())
        .map_err(|e| pem_error(path, e.to_string()))?
        .ok_or_else(|| pem_error(path, "no PEM private key in it"))
}

/// A root store of the CA certificates in `path`.
pub fn roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in certificates(path)? {
        roots
            .add(cert)
            .map_err(|e| pem_error(path, format!("not a usable CA certificate: {e}")))?;
    }
    Ok(roots)
}

/// The crypto provider of every TLS configuration (ring, as tonic's and reqwest's).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn build(files: &ServerTlsFiles) -> Result<ServerConfig, TlsError> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match &files.client_ca {
        Some(ca) => {
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots(ca)?), provider())
                    .build()
                    .map_err(|e| TlsError::Config(format!("client CA {}: {e}", ca.display())))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(certificates(&files.cert)?, private_key(&files.key)?)
        .map_err(|e| {
            TlsError::Config(format!(
                "{} with {}: {e}",
                files.cert.display(),
                files.key.display()
            ))
        })?;
    // gRPC clients require HTTP/2 to be negotiated; HTTP clients may take either.
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate for `name` and its key, as PEM.
    fn self_signed(name: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec![name.to_string()]).unwrap();
        (params.self_signed(&key).unwrap().pem(), key.serialize_pem())
    }

    #[test]
    fn a_rotated_certificate_is_read_at_the_next_handshake_and_a_broken_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let files = ServerTlsFiles {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
            client_ca: None,
        };
        let write = |(cert, key): (String, String)| {
            std::fs::write(&files.cert, cert).unwrap();
            std::fs::write(&files.key, key).unwrap();
        };
        write(self_signed("first"));
        let tls = ServerTls::load(files.clone()).unwrap();
        let first = tls.current();
        assert!(
            Arc::ptr_eq(&first, &tls.current()),
            "unchanged files are not re-read"
        );
        assert_eq!(first.alpn_protocols[0], b"h2");

        write(self_signed("second-name-changes-the-length"));
        let second = tls.current();
        assert!(!Arc::ptr_eq(&first, &second), "a rotation is picked up");

        // Half-way through a rotation (a certificate that is not PEM yet): the previous configuration stays.
        std::fs::write(&files.cert, "not yet").unwrap();
        assert!(Arc::ptr_eq(&second, &tls.current()));
        assert!(!tls.requires_client_certificate());
    }

    #[test]
    fn a_missing_or_empty_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = ServerTlsFiles {
            cert: dir.path().join("absent.crt"),
            key: dir.path().join("absent.key"),
            client_ca: None,
        };
        let e = ServerTls::load(missing).unwrap_err().to_string();
        assert!(e.contains("absent.crt"), "{e}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let e = certificates(&empty).unwrap_err().to_string();
        assert!(
            e.contains("empty.pem") && e.contains("no PEM certificate"),
            "{e}"
        );
    }
}
