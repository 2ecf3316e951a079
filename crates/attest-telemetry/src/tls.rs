//! The server side of TLS for every listener: a rustls configuration read from PEM files and rebuilt when the
//! files change (Kubernetes rewrites a mounted Secret in place when a certificate is rotated, and a restart
//! for that would drop every connection), optionally requiring a client certificate signed by the cluster CA
//! (mutual TLS: only nodes of the cluster get in). [`crate::listener`] accepts connections with it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use attest_proto::tls::{certificates, private_key, provider, roots, FilesStamp, TlsError};
use parking_lot::Mutex;
use rustls::server::WebPkiClientVerifier;
use rustls::ServerConfig;

/// Where a listener's certificate, key and (for mutual TLS) client CA are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTlsFiles {
    /// PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// PEM CA certificates: when set, a client must present a certificate signed by one of them (unless
    /// `client_cert_optional`).
    pub client_ca: Option<PathBuf>,
    /// With `client_ca`: ask for a client certificate but let a client without one in (a certificate that IS
    /// presented must still verify). For a listener whose probes (kubelet has no certificate) share the port with
    /// an internal API: the guard then wants a verified certificate or the cluster key on the API's routes.
    pub client_cert_optional: bool,
}

impl ServerTlsFiles {
    fn paths(&self) -> impl Iterator<Item = &Path> {
        [Some(&self.cert), Some(&self.key), self.client_ca.as_ref()]
            .into_iter()
            .flatten()
            .map(PathBuf::as_path)
    }
}

fn stamp(files: &ServerTlsFiles) -> FilesStamp {
    FilesStamp::of(files.paths())
}

struct Loaded {
    stamp: FilesStamp,
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
        self.files.client_ca.is_some() && !self.files.client_cert_optional
    }

    /// Whether a client certificate, when presented, is verified against the cluster CA (required or not).
    pub fn verifies_client_certificates(&self) -> bool {
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

fn build(files: &ServerTlsFiles) -> Result<ServerConfig, TlsError> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match &files.client_ca {
        Some(ca) => {
            let mut verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots(ca)?), provider());
            if files.client_cert_optional {
                verifier = verifier.allow_unauthenticated();
            }
            let verifier = verifier
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
            client_cert_optional: false,
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
            client_cert_optional: false,
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
