//! The gRPC side: a handler calls [`principal`] first with the scope its method needs; the caller's key travels
//! in the `authorization` metadata (`Bearer <key>`), as over HTTP.

use attest_core::keys::Scope;
use tonic::metadata::MetadataMap;
use tonic::{Request, Status};

use crate::keyring::{KeyRing, Principal};

/// The metadata key the credential travels in.
pub const AUTHORIZATION: &str = "authorization";

/// Authenticates a request's metadata and checks `scope` (UNAUTHENTICATED / PERMISSION_DENIED otherwise).
pub async fn principal<T>(
    ring: &KeyRing,
    request: &Request<T>,
    scope: Scope,
) -> Result<Principal, Status> {
    principal_of(ring, request.metadata(), scope).await
}

pub async fn principal_of(
    ring: &KeyRing,
    metadata: &MetadataMap,
    scope: Scope,
) -> Result<Principal, Status> {
    let header = metadata
        .get(AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or("\u{0}"));
    ring.authenticate_fresh(header)
        .await
        .and_then(|p| p.require(scope).map(|()| p))
        .map_err(|e| e.to_status())
}

/// Puts a principal's credential on an outgoing request made on its behalf (nothing when authentication is
/// off).
pub fn forward<T>(principal_credential: Option<&str>, request: &mut Request<T>) {
    if let Some(value) = principal_credential.and_then(|c| c.parse().ok()) {
        request.metadata_mut().insert(AUTHORIZATION, value);
    }
}
