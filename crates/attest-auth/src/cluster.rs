//! [`ClusterGuard`]: the check in front of `ShardService` and `MetaService` (issue 15, node-to-node). With a
//! cluster key configured, a call must carry exactly that key; a minted API key is refused with
//! PERMISSION_DENIED (it authenticates people and services at the router, never a node), anything else (the
//! admin key included) with UNAUTHENTICATED. Without one the internal services are open (an `attest dev` without `--admin-key`).
//! On a listener under mutual TLS the handshake already proved the caller holds a certificate of the cluster
//! CA — the other form of the cluster credential — so the guard admits every call that got that far.

use attest_proto::credential::{ClusterCredential, AUTHORIZATION};
use attest_proto::{ApiError, ErrorCode};
use subtle::ConstantTimeEq;
use tonic::metadata::MetadataMap;
use tonic::{Request, Status};

use crate::keyring::deny;
use crate::secret;

/// A tonic interceptor: `ShardServiceServer::with_interceptor(svc, ClusterGuard::new(&credential))`. The default
/// guard is open.
#[derive(Clone, Default)]
pub struct ClusterGuard {
    expected: Option<[u8; 32]>,
    /// The listener requires a client certificate of the cluster CA.
    mutual_tls: bool,
}

impl ClusterGuard {
    pub fn new(credential: &ClusterCredential) -> Self {
        ClusterGuard {
            expected: credential.key().map(secret::digest),
            mutual_tls: false,
        }
    }

    /// The guard of `listener`: the cluster key is checked unless the listener's mutual TLS already did it.
    pub fn for_listener(
        credential: &ClusterCredential,
        listener: &attest_telemetry::listener::Listener,
    ) -> Self {
        ClusterGuard {
            mutual_tls: listener.requires_client_certificate(),
            ..Self::new(credential)
        }
    }

    /// Ok under mutual TLS, when no cluster key is configured, or when the metadata carries it.
    pub fn check(&self, metadata: &MetadataMap) -> Result<(), Status> {
        let header = metadata
            .get(AUTHORIZATION)
            .map(|v| v.to_str().unwrap_or("\u{0}"));
        self.check_header(header).map_err(|e| e.to_status())
    }

    /// The same check of an `Authorization` value (HTTP header or gRPC metadata).
    pub fn check_header(&self, header: Option<&str>) -> Result<(), ApiError> {
        if self.mutual_tls {
            return Ok(());
        }
        let Some(expected) = self.expected else {
            return Ok(());
        };
        let Some(header) = header else {
            return Err(deny(
                ErrorCode::Unauthenticated,
                "missing",
                "internal services need the cluster credential",
            ));
        };
        let Some(token) = secret::bearer(header) else {
            return Err(deny(
                ErrorCode::Unauthenticated,
                "malformed",
                "the authorization must be `Bearer <key>`",
            ));
        };
        if bool::from(secret::digest(token).ct_eq(&expected)) {
            return Ok(());
        }
        if secret::key_id(token).is_some() {
            return Err(deny(
                ErrorCode::PermissionDenied,
                "not_cluster",
                "an API key cannot call internal services",
            ));
        }
        Err(deny(
            ErrorCode::Unauthenticated,
            "unknown",
            "not the cluster credential",
        ))
    }
}

/// axum middleware for an internal HTTP API (the embedder's): `route_layer(from_fn_with_state(guard, require))`.
pub async fn require(
    axum::extract::State(guard): axum::extract::State<ClusterGuard>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let header = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or("\u{0}"));
    match guard.check_header(header) {
        Ok(()) => next.run(req).await,
        Err(e) => attest_telemetry::http_error::HttpError(e).into_response(),
    }
}

impl tonic::service::Interceptor for ClusterGuard {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        self.check(request.metadata())?;
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(value: Option<&str>) -> MetadataMap {
        let mut md = MetadataMap::new();
        if let Some(v) = value {
            md.insert(AUTHORIZATION, v.parse().unwrap());
        }
        md
    }

    #[test]
    fn only_the_cluster_key_passes_once_configured() {
        let key = "cluster-key-0123456789abcdef";
        let guard = ClusterGuard::new(&ClusterCredential::new(key).unwrap());
        assert!(guard
            .check(&metadata(Some(&format!("Bearer {key}"))))
            .is_ok());
        let code = |v: Option<&str>| guard.check(&metadata(v)).unwrap_err().code();
        assert_eq!(code(None), tonic::Code::Unauthenticated);
        assert_eq!(code(Some(key)), tonic::Code::Unauthenticated);
        assert_eq!(
            code(Some("Bearer cluster-key-0123456789abcdeX")),
            tonic::Code::Unauthenticated
        );
        let api_key = secret::mint().key;
        assert_eq!(
            code(Some(&format!("Bearer {api_key}"))),
            tonic::Code::PermissionDenied
        );
        let open = ClusterGuard::new(&ClusterCredential::none());
        assert!(open.check(&metadata(None)).is_ok());
    }
}
