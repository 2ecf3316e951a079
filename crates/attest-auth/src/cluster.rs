//! [`ClusterGuard`]: the check in front of `ShardService` and `MetaService` (issue 15, node-to-node). With a
//! cluster key configured, a call must carry exactly that key; a minted API key is refused with
//! PERMISSION_DENIED (it authenticates people and services at the router, never a node), anything else (the
//! admin key included) with UNAUTHENTICATED. Without one the internal services are open (an `attest dev` without `--admin-key`).
//! On a listener under mutual TLS the handshake already proved the caller holds a certificate of the cluster
//! CA — the other form of the cluster credential — so the guard admits every call that got that far. On a
//! listener that asks for that certificate without requiring it (the embedder's, whose port kubelet probes
//! without one), the guarded routes admit a request whose connection presented a verified certificate, else only
//! the cluster key — and with no cluster key configured, nothing else.

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
    /// What the listener does with client certificates of the cluster CA.
    client_certificates: ClientCertificates,
}

/// A listener's client certificates, as the guard needs to know them.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
enum ClientCertificates {
    /// Not asked for (plaintext, or TLS without a cluster CA).
    #[default]
    None,
    /// Required by the handshake: every call that got in holds one.
    Required,
    /// Asked for, verified when presented, not required: each request says whether its connection had one.
    Optional,
}

impl ClusterGuard {
    pub fn new(credential: &ClusterCredential) -> Self {
        ClusterGuard {
            expected: credential.key().map(secret::digest),
            client_certificates: ClientCertificates::None,
        }
    }

    /// The guard of `listener`: the cluster key is checked unless the listener's mutual TLS already did it.
    pub fn for_listener(
        credential: &ClusterCredential,
        listener: &attest_telemetry::listener::Listener,
    ) -> Self {
        let client_certificates = if listener.requires_client_certificate() {
            ClientCertificates::Required
        } else if listener.client_certificate_optional() {
            ClientCertificates::Optional
        } else {
            ClientCertificates::None
        };
        ClusterGuard {
            client_certificates,
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

    /// The same check of an `Authorization` value (HTTP header or gRPC metadata), for a caller that presented
    /// no verified client certificate as far as this request can tell.
    pub fn check_header(&self, header: Option<&str>) -> Result<(), ApiError> {
        self.check_request(header, false)
    }

    /// The check of one request: `verified_certificate` says whether its connection presented a client
    /// certificate that verified against the cluster CA.
    pub fn check_request(
        &self,
        header: Option<&str>,
        verified_certificate: bool,
    ) -> Result<(), ApiError> {
        match self.client_certificates {
            ClientCertificates::Required => return Ok(()),
            ClientCertificates::Optional if verified_certificate => return Ok(()),
            ClientCertificates::Optional if self.expected.is_none() => {
                return Err(deny(
                    ErrorCode::Unauthenticated,
                    "no_certificate",
                    "internal services need a client certificate of the cluster CA",
                ))
            }
            ClientCertificates::Optional | ClientCertificates::None => {}
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
    let verified = req
        .extensions()
        .get::<attest_telemetry::listener::ClientCertificate>()
        .is_some_and(|c| c.verified);
    match guard.check_request(header, verified) {
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

    #[test]
    fn with_optional_certificates_a_request_needs_a_verified_one_or_the_key() {
        let key = "cluster-key-0123456789abcdef";
        let bearer = format!("Bearer {key}");
        let optional = |credential: &ClusterCredential| ClusterGuard {
            client_certificates: ClientCertificates::Optional,
            ..ClusterGuard::new(credential)
        };
        let keyed = optional(&ClusterCredential::new(key).unwrap());
        assert!(keyed.check_request(None, true).is_ok());
        assert!(keyed.check_request(Some(&bearer), false).is_ok());
        assert!(keyed.check_request(None, false).is_err());
        assert!(keyed
            .check_request(Some("Bearer wrong-key-0123456789abc"), false)
            .is_err());
        // No cluster key configured: the certificate is the only way in (never open).
        let keyless = optional(&ClusterCredential::none());
        assert!(keyless.check_request(None, true).is_ok());
        let e = keyless.check_request(Some(&bearer), false).unwrap_err();
        assert_eq!(e.to_status().code(), tonic::Code::Unauthenticated);
    }
}
