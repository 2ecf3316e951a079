//! The HTTP side: [`require`] is axum middleware (`axum::middleware::from_fn_with_state((ring, scope), require)`
//! as a `route_layer`) that authenticates the `Authorization` header, refuses a key without the route's scope,
//! and hands the handler its [`Principal`] as a request extension. A route group without it has no principal,
//! and a handler that asks for one fails loudly (500), never open.

use std::sync::Arc;

use attest_core::keys::Scope;
use attest_telemetry::http_error::HttpError;
use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::keyring::{KeyRing, Principal};

/// What a route group's `route_layer` is given.
pub type Guard = (Arc<KeyRing>, Scope);

/// Authenticates the request and checks `scope`; the handler finds the [`Principal`] in its extensions.
pub async fn require(State((ring, scope)): State<Guard>, mut req: Request, next: Next) -> Response {
    let header = req
        .headers()
        .get(AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or("\u{0}"));
    match ring
        .authenticate_fresh(header)
        .await
        .and_then(|p| p.require(scope).map(|()| p))
    {
        Ok(principal) => {
            req.extensions_mut().insert::<Principal>(principal);
            next.run(req).await
        }
        Err(e) => HttpError(e).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret;
    use attest_proto::v1 as pb;
    use axum::body::Body;
    use axum::routing::get;
    use axum::Extension;
    use tower::ServiceExt;

    async fn status(app: &axum::Router, auth: Option<&str>) -> u16 {
        let mut req = axum::http::Request::builder().uri("/x");
        if let Some(a) = auth {
            req = req.header(AUTHORIZATION, a);
        }
        let resp = app
            .clone()
            .oneshot(req.body(Body::empty()).unwrap())
            .await
            .unwrap();
        resp.status().as_u16()
    }

    #[tokio::test]
    async fn routes_answer_by_key_and_scope() {
        let ring = KeyRing::open();
        ring.enable("the-admin-key-for-this-test").unwrap();
        let read = secret::mint();
        ring.apply(&pb::ClusterState {
            version: 1,
            api_keys: vec![pb::ApiKeyInfo {
                key_sha256: read.sha256_hex.clone(),
                id: read.id.clone(),
                scopes: vec![pb::Scope::Read as i32],
                tenants: vec!["a".into()],
                ..Default::default()
            }],
            ..Default::default()
        });
        let app = |scope| {
            axum::Router::new()
                .route(
                    "/x",
                    get(|Extension(p): Extension<Principal>| async move { p.key_id }),
                )
                .route_layer(axum::middleware::from_fn_with_state(
                    (Arc::clone(&ring), scope),
                    require,
                ))
        };
        let (reads, writes) = (app(Scope::Read), app(Scope::Write));
        let key = format!("Bearer {}", read.key);
        assert_eq!(status(&reads, None).await, 401);
        assert_eq!(status(&reads, Some("Bearer junk")).await, 401);
        assert_eq!(status(&reads, Some(&key)).await, 200);
        assert_eq!(status(&writes, Some(&key)).await, 403);
        assert_eq!(
            status(&writes, Some("Bearer the-admin-key-for-this-test")).await,
            200
        );
    }
}
