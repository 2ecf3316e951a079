//! The client side of TLS: which CA a node trusts for the servers it calls, and the certificate it presents
//! to them under mutual TLS; and [`endpoint`], the one place every gRPC client of Attest (router → shard,
//! shard → shard, every role → meta, answer → router) gets its channel from, so that an `http://` address a
//! node advertised becomes `https://` with the cluster's trust once TLS is on.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

/// The trust (and, for mutual TLS, the identity) of a process's outgoing gRPC calls. Cheap to clone.
#[derive(Clone)]
pub struct ClientTls {
    /// Shared: the configuration is large and travels inside every client's credential.
    config: Arc<ClientTlsConfig>,
    /// The CA file, to tell operators which one in errors and to build HTTP clients.
    ca: Arc<PathBuf>,
    /// The CA certificates (PEM), for HTTP clients of the same trust.
    ca_pem: Arc<Vec<u8>>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls").field("ca", &self.ca).finish()
    }
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

impl ClientTls {
    /// Trusts the CA certificates of `ca` (PEM) and, when `identity` (certificate, key) is given, presents it
    /// to servers that ask for a client certificate.
    pub fn from_files(ca: &Path, identity: Option<(&Path, &Path)>) -> Result<Self, String> {
        let ca_pem = read(ca)?;
        if !String::from_utf8_lossy(&ca_pem).contains("-----BEGIN CERTIFICATE-----") {
            return Err(format!("{}: no PEM certificate in it", ca.display()));
        }
        let mut config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&ca_pem));
        if let Some((cert, key)) = identity {
            config = config.identity(Identity::from_pem(read(cert)?, read(key)?));
        }
        Ok(ClientTls {
            config: Arc::new(config),
            ca: Arc::new(ca.to_path_buf()),
            ca_pem: Arc::new(ca_pem),
        })
    }

    /// The CA certificates this client trusts, as PEM.
    pub fn ca_pem(&self) -> &[u8] {
        &self.ca_pem
    }
}

/// `address` (`host:port`, `http://…` or `https://…`) with the scheme this client speaks: `https` when `tls`
/// is given, else `http`.
pub fn scheme_for(address: &str, tls: bool) -> String {
    let bare = address
        .strip_prefix("http://")
        .or_else(|| address.strip_prefix("https://"))
        .unwrap_or(address);
    format!("{}://{bare}", if tls { "https" } else { "http" })
}

/// A gRPC endpoint of `address`, over TLS with `tls` when given. Callers add their own timeouts.
pub fn endpoint(
    address: &str,
    tls: Option<&ClientTls>,
) -> Result<Endpoint, tonic::transport::Error> {
    let endpoint =
        Endpoint::from_shared(scheme_for(address.trim(), tls.is_some()))?.tcp_nodelay(true);
    match tls {
        Some(tls) => endpoint.tls_config(ClientTlsConfig::clone(&tls.config)),
        None => Ok(endpoint),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scheme_follows_tls() {
        assert_eq!(scheme_for("127.0.0.1:1", false), "http://127.0.0.1:1");
        assert_eq!(scheme_for("http://h:1", true), "https://h:1");
        assert_eq!(scheme_for("https://h:1", false), "http://h:1");
        assert!(
            ClientTls::from_files(Path::new("/nonexistent/ca.pem"), None)
                .unwrap_err()
                .contains("/nonexistent/ca.pem")
        );
    }
}
