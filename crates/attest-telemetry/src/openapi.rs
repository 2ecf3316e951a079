//! The OpenAPI 3.1 document of HTTP API v1: the parts every role shares, the assembly of a role's document from
//! its own parts, and `GET /v1/openapi.json`, which serves it.
//!
//! Nothing here is written by hand for one route: each operation comes from the `#[utoipa::path]` on its handler
//! and each schema from a `ToSchema` derive on the type the handler reads or writes. What every operation shares
//! follows from how the app is built, and is added by [`document`] from those rules rather than repeated on
//! each handler: a route behind the API-key guard (its `security` names `bearer_auth`) can answer 401 and 403; a
//! route under `/v1/` can answer 500 and 503; a route with a body or parameters can answer 400, one with a body
//! 413; and 429 and 503 carry `Retry-After`. A resource's path parameter has its rule wherever it appears
//! ([`limits`]), and each operation that creates a resource links to those that take its id (`links`).
//!
//! The router serves its document, an answer replica its own, and `attest dev` the union (its one listener has
//! both route sets). [`registered_routes`] and [`documented_routes`] let each crate test that the routes it
//! registers and the operations its document describes are the same set.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr, Response, ResponseBuilder};
use utoipa::{Modify, OpenApi as _};

use crate::http_error::{ErrorBody, ErrorDetail};

pub mod limits;
mod links;

/// Where every role serves its document.
pub const PATH: &str = "/v1/openapi.json";

/// The security scheme of the API-key guard, as operations name it.
pub const BEARER: &str = "bearer_auth";

#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "Attest HTTP API v1",
        description = "Collections, documents, hybrid search, grounded answers and cluster administration. \
            Generated from the handlers (`attest openapi`); errors answer `ErrorBody` with the status of its code."
    ),
    paths(crate::ops::healthz, crate::ops::readyz, crate::ops::metrics, openapi_json),
    components(schemas(ErrorBody, ErrorDetail)),
    modifiers(&SecuritySchemes),
    tags(
        (name = "collections", description = "Collections: their shape, thresholds, statistics and maintenance."),
        (name = "documents", description = "Documents in and out of a collection."),
        (name = "search", description = "Hybrid (dense + BM25) search with fused ranks."),
        (name = "answer", description = "Grounded answers with citations, verdicts and abstention."),
        (name = "keys", description = "API keys (admin scope)."),
        (name = "snapshots", description = "Cluster snapshots and restores (admin scope)."),
        (name = "cluster", description = "The cluster as meta sees it (admin scope)."),
        (name = "ops", description = "Probes, metrics and this document; no API key needed."),
    )
)]
struct Shared;

struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, doc: &mut OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An API key (`POST /v1/keys`, `attest key create`, or the admin key the process was \
                         started with) as `Authorization: Bearer <key>`. Its scope (`read` < `write` < `admin`), \
                         tenants and collections bound what it may do. A process started without keys \
                         (`attest dev` without `--admin-key`) accepts every request.",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "metrics_token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "The token of `attest serve --metrics-token`, when the operator set one.",
                    ))
                    .build(),
            ),
        );
    }
}

/// This document.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "ops", operation_id = "openapi",
    responses((status = 200, description = "The OpenAPI 3.1 document of what this process serves.",
        body = serde_json::Value)))]
async fn openapi_json(State(json): State<Arc<str>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        json.to_string(),
    )
}

/// A role's document: the shared parts, then each of `parts` (a role's own paths and schemas), then the
/// responses every operation shares (module docs).
pub fn document(parts: impl IntoIterator<Item = OpenApi>) -> OpenApi {
    let mut doc = Shared::openapi();
    for part in parts {
        doc.merge(part);
    }
    for (path, item) in doc.paths.paths.iter_mut() {
        for (_, op) in operations_mut(item) {
            add_shared_responses(path, op);
            limits::path_parameters(path, op);
        }
    }
    links::add(&mut doc);
    doc
}

/// The document as served and committed (`docs/openapi.json`): pretty JSON, keys in a fixed order (utoipa keeps
/// paths, schemas and properties in sorted maps), ending in a newline.
pub fn to_json(doc: &OpenApi) -> String {
    let mut json = doc
        .to_pretty_json()
        .expect("an OpenAPI document serialises");
    json.push('\n');
    links::camel_case(&json)
}

/// `GET /v1/openapi.json` serving `doc` (open: the contract is no secret, and clients read it before they have
/// a key).
pub fn route(doc: &OpenApi) -> axum::Router {
    let json: Arc<str> = to_json(doc).into();
    axum::Router::new().route(PATH, get(openapi_json).with_state(json))
}

fn operations(item: &PathItem) -> impl Iterator<Item = (&'static str, &Operation)> {
    [
        ("GET", &item.get),
        ("PUT", &item.put),
        ("POST", &item.post),
        ("DELETE", &item.delete),
        ("OPTIONS", &item.options),
        ("HEAD", &item.head),
        ("PATCH", &item.patch),
        ("TRACE", &item.trace),
    ]
    .into_iter()
    .filter_map(|(method, op)| op.as_ref().map(|op| (method, op)))
}

fn operations_mut(item: &mut PathItem) -> impl Iterator<Item = (&'static str, &mut Operation)> {
    [
        ("GET", &mut item.get),
        ("PUT", &mut item.put),
        ("POST", &mut item.post),
        ("DELETE", &mut item.delete),
        ("OPTIONS", &mut item.options),
        ("HEAD", &mut item.head),
        ("PATCH", &mut item.patch),
        ("TRACE", &mut item.trace),
    ]
    .into_iter()
    .filter_map(|(method, op)| op.as_mut().map(|op| (method, op)))
}

fn error_response(description: &str) -> Response {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build(),
        )
        .build()
}

fn retry_after() -> utoipa::openapi::header::Header {
    HeaderBuilder::new()
        .schema(ObjectBuilder::new().schema_type(Type::Integer).build())
        .description(Some("Seconds to wait before retrying."))
        .build()
}

/// Whether an operation sits behind the API-key guard (its `security` names [`BEARER`]).
fn is_guarded(op: &Operation) -> bool {
    op.security
        .iter()
        .flatten()
        .any(|requirement| serde_json::to_value(requirement).is_ok_and(|v| v.get(BEARER).is_some()))
}

/// The document of a process that authenticates no one (`attest dev` without `--admin-key`, a role started
/// without one): no operation needs a key and none answers 401 or 403. A client, or a fuzzer, reading what such
/// a process serves is told what it really does; the committed document is that of a process with keys.
pub fn without_api_keys(mut doc: OpenApi) -> OpenApi {
    for item in doc.paths.paths.values_mut() {
        for (_, op) in operations_mut(item) {
            if is_guarded(op) {
                op.security = None;
                op.responses.responses.remove("401");
                op.responses.responses.remove("403");
            }
        }
    }
    doc
}

fn add_shared_responses(path: &str, op: &mut Operation) {
    let guarded = is_guarded(op);
    let has_body = op.request_body.is_some();
    let has_parameters = op.parameters.as_ref().is_some_and(|p| !p.is_empty());
    let api = path.starts_with("/v1/") && path != PATH;
    let shared: [(&str, bool, &str); 6] = [
        ("400", has_body || has_parameters,
            "INVALID_ARGUMENT (or FAILED_PRECONDITION, OUT_OF_RANGE): a field or parameter is not valid; \
             `field` names it (`documents[3].colour`, `k`; `body` for a body that is not the JSON expected)."),
        ("401", guarded, "UNAUTHENTICATED: no API key, or one that is unknown, expired or revoked."),
        ("403", guarded,
            "PERMISSION_DENIED: the key's scope, tenants or collections do not cover this request."),
        ("413", has_body, "PAYLOAD_TOO_LARGE: the body is over the size limit."),
        ("500", api, "INTERNAL: a fault of the server."),
        ("503", api, "UNAVAILABLE: a dependency (meta, a shard) cannot answer now; retry after `Retry-After`."),
    ];
    let responses = &mut op.responses.responses;
    for (status, applies, description) in shared {
        if applies && !responses.contains_key(status) {
            responses.insert(status.into(), RefOr::T(error_response(description)));
        }
    }
    // Load shed and unavailability are retried later: whatever an operation declared for them, they say when.
    for status in ["429", "503"] {
        if let Some(RefOr::T(response)) = responses.get_mut(status) {
            response
                .headers
                .entry("Retry-After".into())
                .or_insert_with(retry_after);
        }
    }
}

/// Every (method, path) the document describes, paths as OpenAPI writes them (`/v1/keys/{id}`).
pub fn documented_routes(doc: &OpenApi) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, item) in &doc.paths.paths {
        for (method, _) in operations(item) {
            out.insert((method.to_string(), path.clone()));
        }
    }
    out
}

/// Every (method, path) `router` routes, paths in OpenAPI's form (`:id` and `*file` become `{id}` and `{file}`);
/// `HEAD` is left out where it comes with `GET`. A route whose methods cannot be told (a nested service) is
/// listed with method `*`, which no document describes.
///
/// axum has no public listing of its routes. Its `Debug` form names every path (`paths: {RouteId(n): "/p"}`) and
/// each method router's `Allow` header (`allow_header: Bytes(b"GET,HEAD")`), and that is what this reads: for
/// tests, which fail loudly (no route found) if an axum upgrade changes the form.
pub fn registered_routes<S>(router: &axum::Router<S>) -> BTreeSet<(String, String)> {
    let debug = format!("{router:?}");
    // Only the main path router: the fallback router's routes are not routes of the API.
    let debug = debug.split(", fallback_router:").next().unwrap_or("");
    let mut out = BTreeSet::new();
    let mut rest = debug;
    while let Some(at) = rest.find("RouteId(") {
        rest = &rest[at + "RouteId(".len()..];
        let Some((id, after)) = rest.split_once("): ") else {
            break;
        };
        if !after.starts_with('"') {
            continue;
        }
        let path = after[1..].split('"').next().unwrap_or("");
        let endpoint = format!("RouteId({id}): ");
        let methods = match debug.find(&format!("{endpoint}MethodRouter(")) {
            Some(start) => allowed_methods(&debug[start..]),
            None => vec!["*".to_string()],
        };
        for method in methods {
            out.insert((method, openapi_path(path)));
        }
    }
    out
}

/// The methods of the first `allow_header: Bytes(b"...")` in `debug`.
fn allowed_methods(debug: &str) -> Vec<String> {
    let Some(at) = debug.find("allow_header: Bytes(b\"") else {
        return vec!["*".to_string()];
    };
    let list = debug[at + "allow_header: Bytes(b\"".len()..]
        .split('"')
        .next()
        .unwrap_or("");
    let methods: Vec<&str> = list.split(',').filter(|m| !m.is_empty()).collect();
    methods
        .iter()
        .filter(|m| !(**m == "HEAD" && methods.contains(&"GET")))
        .map(|m| m.to_string())
        .collect()
}

fn openapi_path(axum_path: &str) -> String {
    axum_path
        .split('/')
        .map(|segment| match segment.strip_prefix([':', '*']) {
            Some(name) => format!("{{{name}}}"),
            None => segment.to_string(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::{delete, post};

    #[test]
    fn the_routes_of_an_app_are_read_with_their_methods() {
        let app: axum::Router = axum::Router::new()
            .route("/v1/things", post(|| async {}).get(|| async {}))
            .route("/v1/things/:id", delete(|| async {}))
            .route("/files/*file", get(|| async {}))
            .merge(route(&document([])))
            .merge(crate::ops::routes(crate::ops::always_ready(), None));
        let listed = registered_routes(&app);
        let expected: BTreeSet<(String, String)> = [
            ("GET", "/v1/things"),
            ("POST", "/v1/things"),
            ("DELETE", "/v1/things/{id}"),
            ("GET", "/files/{file}"),
            ("GET", PATH),
            ("GET", "/healthz"),
            ("GET", "/readyz"),
            ("GET", "/metrics"),
        ]
        .into_iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
        assert_eq!(listed, expected);
    }

    #[test]
    fn the_shared_document_describes_its_own_routes_and_the_error_body() {
        let doc = document([]);
        let app = route(&doc).merge(crate::ops::routes(crate::ops::always_ready(), None));
        assert_eq!(registered_routes(&app), documented_routes(&doc));
        let json: serde_json::Value = serde_json::from_str(&to_json(&doc)).unwrap();
        assert_eq!(json["openapi"], "3.1.0");
        let code = &json["components"]["schemas"]["ErrorDetail"]["properties"]["code"];
        assert!(
            code["enum"]
                .as_array()
                .unwrap()
                .contains(&"PAYLOAD_TOO_LARGE".into()),
            "{code}"
        );
        assert!(json["components"]["securitySchemes"][BEARER].is_object());
        // The probes are open and answer no API errors.
        assert!(json["paths"]["/healthz"]["get"]["security"].is_null());
        assert!(json["paths"]["/healthz"]["get"]["responses"]["500"].is_null());
    }

    #[tokio::test]
    async fn the_document_is_served_as_committed() {
        use tower::ServiceExt;
        let doc = document([]);
        let response = route(&doc)
            .oneshot(
                axum::http::Request::get(PATH)
                    .body(axum::body::Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let body = axum::body::to_bytes(response.into_body(), 1 << 22)
            .await
            .unwrap();
        assert_eq!(std::str::from_utf8(&body).unwrap(), to_json(&doc));
    }
}
