//! The router's part of the OpenAPI 3.1 document of HTTP API v1: every route of [`crate::http::routes`], each
//! from the `#[utoipa::path]` on its handler, with the schemas of [`crate::wire`] and the types the handlers
//! send. [`document`] is what a standalone router serves at `GET /v1/openapi.json`; `attest dev` serves these
//! paths merged with the answer tier's (`attest_telemetry::openapi` assembles both).

use utoipa::openapi::OpenApi;
use utoipa::OpenApi as _;

use crate::{cluster_http, documents_http, eval_reports, http, snapshot_http};

#[derive(utoipa::OpenApi)]
#[openapi(paths(
    http::create_collection,
    http::list_collections,
    http::get_collection,
    http::drop_collection,
    http::set_thresholds,
    http::clear_thresholds,
    http::maintain,
    http::stats,
    eval_reports::latest,
    documents_http::ingest,
    documents_http::delete_document,
    http::search,
    http::create_key,
    http::list_keys,
    http::revoke_key,
    snapshot_http::create,
    snapshot_http::list,
    snapshot_http::delete,
    snapshot_http::progress,
    snapshot_http::restore,
    snapshot_http::jobs,
    snapshot_http::job,
    snapshot_http::cancel,
    cluster_http::cluster,
))]
struct RouterApi;

/// The router's own operations and schemas, to be assembled with the shared parts.
pub fn paths() -> OpenApi {
    RouterApi::openapi()
}

/// The document a router serves.
pub fn document() -> OpenApi {
    attest_telemetry::openapi::document([paths()])
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use attest_telemetry::openapi::{documented_routes, registered_routes, BEARER};

    use super::*;

    /// The web console's page and assets: served beside the API, not part of its contract.
    const NOT_API: [&str; 2] = ["/", "/console/{file}"];

    #[test]
    fn every_registered_route_is_documented_and_every_documented_one_is_registered() {
        let doc = document();
        let mut registered = registered_routes(&http::api(attest_auth::KeyRing::open()));
        registered.extend(registered_routes(&http::open_routes(
            attest_telemetry::ops::always_ready(),
            None,
            &doc,
        )));
        registered.retain(|(_, path)| !NOT_API.contains(&path.as_str()));
        assert!(
            registered.len() > 20,
            "axum's routes could not be read: {registered:?}"
        );
        let documented = documented_routes(&doc);
        let undocumented: Vec<_> = registered.difference(&documented).collect();
        let unserved: Vec<_> = documented.difference(&registered).collect();
        assert!(
            undocumented.is_empty() && unserved.is_empty(),
            "routes without a #[utoipa::path] listed in openapi.rs: {undocumented:?}; \
             documented but not routed: {unserved:?}"
        );
    }

    #[test]
    fn api_routes_name_the_key_they_need_and_operation_ids_are_unique() {
        let json = serde_json::to_value(document()).unwrap();
        let mut ids = BTreeSet::new();
        for (path, item) in json["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let id = op["operationId"].as_str().unwrap_or_default().to_string();
                assert!(
                    ids.insert(id.clone()),
                    "{method} {path}: operationId `{id}` twice"
                );
                let guarded = op["security"]
                    .as_array()
                    .is_some_and(|s| s.iter().any(|r| r.get(BEARER).is_some()));
                let open = path == attest_telemetry::openapi::PATH || !path.starts_with("/v1/");
                assert_eq!(guarded, !open, "{method} {path}: security");
                if guarded {
                    assert!(op["responses"]["401"].is_object(), "{method} {path}");
                }
            }
        }
    }
}
