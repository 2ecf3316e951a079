//! The cluster credential: what one node presents to another (router → shard, shard → shard, every role →
//! meta, meta → meta). `ShardService` and `MetaService` accept only it when it is configured, so a tenant's API
//! key can never call them directly (SPEC "Security"; qdrant's internal traffic is guarded the same way).
//!
//! It travels as `authorization: Bearer <cluster key>` metadata; the check lives in `attest-auth`, the stamp
//! here, beside the clients every role uses to reach the internal services.

use std::sync::Arc;

use tonic::metadata::{Ascii, MetadataMap, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use crate::tls::ClientTls;

/// A channel whose every request carries the cluster credential (`ShardServiceClient<Stamped>`).
pub type Stamped = InterceptedService<Channel, ClusterCredential>;

/// The metadata key the credential travels in (the same as an API key's).
pub const AUTHORIZATION: &str = "authorization";

/// Shortest cluster key accepted: it is a long-lived shared secret, like the bootstrap admin key.
pub const MIN_CLUSTER_KEY_LEN: usize = 24;

/// The cluster key of a process and, with TLS, its client side (the cluster CA it trusts and the certificate
/// it presents under mutual TLS); or none (the internal services are then open, as in `attest dev` without
/// auth). Cheap to clone.
#[derive(Clone, Default)]
pub struct ClusterCredential {
    /// Shared: every internal client carries a copy in its interceptor.
    inner: Arc<Inner>,
}

#[derive(Clone, Default)]
struct Inner {
    key: Option<Arc<str>>,
    header: Option<MetadataValue<Ascii>>,
    tls: Option<ClientTls>,
}

impl std::fmt::Debug for ClusterCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key itself.
        f.debug_struct("ClusterCredential")
            .field("key", &self.inner.key.is_some())
            .field("tls", &self.inner.tls)
            .finish()
    }
}

impl ClusterCredential {
    /// No credential: nothing is stamped and nothing is checked.
    pub fn none() -> Self {
        ClusterCredential::default()
    }

    /// The credential of `key`, refused when it is too short or not a plain printable token.
    pub fn new(key: &str) -> Result<Self, String> {
        if key.len() < MIN_CLUSTER_KEY_LEN || !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!(
                "the cluster key must be at least {MIN_CLUSTER_KEY_LEN} printable ASCII characters without spaces"
            ));
        }
        let header = format!("Bearer {key}")
            .parse()
            .map_err(|_| "the cluster key is not valid in a gRPC header".to_string())?;
        Ok(ClusterCredential {
            inner: Arc::new(Inner {
                key: Some(Arc::from(key)),
                header: Some(header),
                tls: None,
            }),
        })
    }

    /// The same credential calling over TLS with `tls`.
    pub fn with_tls(mut self, tls: ClientTls) -> Self {
        Arc::make_mut(&mut self.inner).tls = Some(tls);
        self
    }

    /// The client side of TLS, when the cluster speaks it.
    pub fn tls(&self) -> Option<&ClientTls> {
        self.inner.tls.as_ref()
    }

    /// A lazily connecting gRPC channel to another node at `address`, over TLS when the cluster speaks it.
    pub fn channel(
        &self,
        address: &str,
        connect_timeout: std::time::Duration,
    ) -> Result<Channel, tonic::transport::Error> {
        crate::tls::channel(address, self.inner.tls.as_ref(), connect_timeout)
    }

    /// The key (for the server-side check).
    pub fn key(&self) -> Option<&str> {
        self.inner.key.as_deref()
    }

    /// Puts the credential on an outgoing request's metadata (nothing when none is configured).
    pub fn stamp(&self, metadata: &mut MetadataMap) {
        if let Some(header) = &self.inner.header {
            metadata.insert(AUTHORIZATION, header.clone());
        }
    }
}

/// As a client interceptor: stamps every request of a generated client made `with_interceptor`.
impl tonic::service::Interceptor for ClusterCredential {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        self.stamp(request.metadata_mut());
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_or_spaced_keys_are_refused_and_none_stamps_nothing() {
        assert!(ClusterCredential::new("short").is_err());
        assert!(ClusterCredential::new("a cluster key with spaces in it").is_err());
        let mut md = MetadataMap::new();
        ClusterCredential::none().stamp(&mut md);
        assert!(md.get(AUTHORIZATION).is_none());
        let c = ClusterCredential::new("0123456789abcdef0123456789").unwrap();
        c.stamp(&mut md);
        assert_eq!(
            md.get(AUTHORIZATION).unwrap().to_str().unwrap(),
            "Bearer 0123456789abcdef0123456789"
        );
        assert!(!format!("{c:?}").contains("0123"));
    }
}
