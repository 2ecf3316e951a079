//! TLS shared by every role: reading PEM files (named in every error), telling when they changed, and the
//! client side — which CA a node trusts for the servers it calls and the certificate it presents to them under
//! mutual TLS, both re-read when their files change (a node whose certificate was rotated must not present the
//! expired one until it restarts). [`endpoint`] is the one place every gRPC client of Attest (router → shard,
//! shard → shard, every role → meta, answer → router) gets its channel from, so that an address a node
//! advertised is reached over TLS with the cluster's trust once TLS is on. The server side, which uses the
//! same files, is `attest_telemetry::tls`.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tonic::transport::{Channel, Endpoint, Uri};

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

/// What a set of files looked like when last read: a change of any modification time or length means a
/// rotation. `metadata` follows symlinks, so a Kubernetes Secret volume swapping its `..data` link counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilesStamp(Vec<Option<(SystemTime, u64)>>);

impl FilesStamp {
    pub fn of<'a>(paths: impl IntoIterator<Item = &'a Path>) -> Self {
        FilesStamp(
            paths
                .into_iter()
                .map(|p| {
                    std::fs::metadata(p)
                        .ok()
                        .and_then(|m| Some((m.modified().ok()?, m.len())))
                })
                .collect(),
        )
    }
}

/// The trust (and, for mutual TLS, the identity) of a process's outgoing calls, re-read when the files
/// change. Cheap to clone.
#[derive(Clone)]
pub struct ClientTls {
    inner: Arc<Reloading>,
}

struct Reloading {
    ca: PathBuf,
    identity: Option<(PathBuf, PathBuf)>,
    loaded: Mutex<(FilesStamp, Arc<ClientConfig>)>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("ca", &self.inner.ca)
            .field("identity", &self.inner.identity.is_some())
            .finish()
    }
}

impl ClientTls {
    /// Trusts the CA certificates of `ca` (PEM) and, when `identity` (certificate, key) is given, presents it
    /// to servers that ask for a client certificate. The files are read now: bad ones stop the start.
    pub fn from_files(ca: &Path, identity: Option<(&Path, &Path)>) -> Result<Self, TlsError> {
        let identity = identity.map(|(c, k)| (c.to_path_buf(), k.to_path_buf()));
        let stamp = stamp_of(ca, identity.as_ref());
        let config = build_client(ca, identity.as_ref())?;
        Ok(ClientTls {
            inner: Arc::new(Reloading {
                ca: ca.to_path_buf(),
                identity,
                loaded: Mutex::new((stamp, Arc::new(config))),
            }),
        })
    }

    /// The configuration for the next connection: rebuilt first when a file changed; a rotation caught
    /// half-way keeps the previous one and is retried at the next connection.
    pub fn current(&self) -> Arc<ClientConfig> {
        let now = stamp_of(&self.inner.ca, self.inner.identity.as_ref());
        let mut loaded = self
            .inner
            .loaded
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if now != loaded.0 {
            match build_client(&self.inner.ca, self.inner.identity.as_ref()) {
                Ok(config) => {
                    tracing::info!(ca = %self.inner.ca.display(), event = "tls_client_reloaded",
                        "TLS client files changed: reloaded");
                    *loaded = (now, Arc::new(config));
                }
                Err(e) => tracing::warn!(error = %e, event = "tls_client_reload_failed",
                    "TLS client files changed but cannot be used yet: keeping the previous ones"),
            }
        }
        Arc::clone(&loaded.1)
    }
}

fn stamp_of(ca: &Path, identity: Option<&(PathBuf, PathBuf)>) -> FilesStamp {
    let mut paths = vec![ca];
    if let Some((cert, key)) = identity {
        paths.extend([cert.as_path(), key.as_path()]);
    }
    FilesStamp::of(paths)
}

fn build_client(
    ca: &Path,
    identity: Option<&(PathBuf, PathBuf)>,
) -> Result<ClientConfig, TlsError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_root_certificates(roots(ca)?);
    let mut config = match identity {
        Some((cert, key)) => builder
            .with_client_auth_cert(certificates(cert)?, private_key(key)?)
            .map_err(|e| {
                TlsError::Config(format!("{} with {}: {e}", cert.display(), key.display()))
            })?,
        None => builder.with_no_client_auth(),
    };
    // gRPC needs HTTP/2 negotiated.
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// `address` (`host:port`, `http://…` or `https://…`) with the scheme given.
pub fn scheme_for(address: &str, tls: bool) -> String {
    let bare = address
        .strip_prefix("http://")
        .or_else(|| address.strip_prefix("https://"))
        .unwrap_or(address);
    format!("{}://{bare}", if tls { "https" } else { "http" })
}

/// A lazily connecting gRPC channel to `address`, over TLS with `tls` when given (each new connection takes
/// the client configuration as its files are now), connections given up after `connect_timeout`.
pub fn channel(
    address: &str,
    tls: Option<&ClientTls>,
    connect_timeout: Duration,
) -> Result<Channel, tonic::transport::Error> {
    // Plain `http` for tonic in both cases: with TLS, the connector below does the handshake itself.
    let endpoint = Endpoint::from_shared(scheme_for(address.trim(), false))?
        .tcp_nodelay(true)
        .connect_timeout(connect_timeout);
    let Some(tls) = tls.cloned() else {
        return Ok(endpoint.connect_lazy());
    };
    let connector = tower::service_fn(move |uri: Uri| {
        let tls = tls.clone();
        async move {
            let host = uri
                .host()
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no host"))?
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let port = uri.port_u16().unwrap_or(443);
            let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
            tcp.set_nodelay(true)?;
            let name = ServerName::try_from(host)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            let stream = tokio_rustls::TlsConnector::from(tls.current())
                .connect(name, tcp)
                .await?;
            Ok::<_, io::Error>(hyper_util::rt::TokioIo::new(stream))
        }
    });
    Ok(endpoint.connect_with_connector_lazy(connector))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scheme_follows_tls_and_bad_files_are_named() {
        assert_eq!(scheme_for("127.0.0.1:1", false), "http://127.0.0.1:1");
        assert_eq!(scheme_for("http://h:1", true), "https://h:1");
        assert_eq!(scheme_for("https://h:1", false), "http://h:1");
        let e = ClientTls::from_files(Path::new("/nonexistent/ca.pem"), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("/nonexistent/ca.pem"), "{e}");
    }

    #[test]
    fn a_renewed_client_certificate_is_used_from_the_next_connection() {
        let dir = tempfile::tempdir().unwrap();
        let (ca, cert, key) = (
            dir.path().join("ca.crt"),
            dir.path().join("node.crt"),
            dir.path().join("node.key"),
        );
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        std::fs::write(&ca, ca_cert.pem()).unwrap();
        let node_key = rcgen::KeyPair::generate().unwrap();
        let issue = |name: &str| {
            let params = rcgen::CertificateParams::new(vec![name.to_string()]).unwrap();
            let pem = params
                .signed_by(&node_key, &ca_cert, &ca_key)
                .unwrap()
                .pem();
            std::fs::write(&cert, pem).unwrap();
        };
        issue("node");
        std::fs::write(&key, node_key.serialize_pem()).unwrap();

        let tls = ClientTls::from_files(&ca, Some((&cert, &key))).unwrap();
        let first = tls.current();
        assert!(
            Arc::ptr_eq(&first, &tls.current()),
            "unchanged files are not re-read"
        );
        assert!(first.client_auth_cert_resolver.has_certs());

        issue("node-renewed-with-a-longer-name");
        let renewed = tls.current();
        assert!(!Arc::ptr_eq(&first, &renewed), "the renewal is picked up");

        std::fs::write(&cert, "half-written").unwrap();
        assert!(
            Arc::ptr_eq(&renewed, &tls.current()),
            "a broken file keeps the last good one"
        );
    }
}
