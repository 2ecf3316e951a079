//! The router's part of the OpenAPI 3.1 document of HTTP API v1: every route of [`crate::router::http::routes`], each
//! from the `#[utoipa::path]` on its handler, with the schemas of [`crate::router::wire`] and the types the handlers
//! send. [`document`] is what a standalone router serves at `GET /v1/openapi.json`; `attest dev` serves these
//! paths merged with the answer tier's (`attest_telemetry::openapi` assembles both).

use attest_core::contract;
use attest_router::config::RouterConfig;
use attest_router::search::LANES;
use attest_telemetry::openapi::limits::{constrain, rule};
use serde_json::json;
use utoipa::openapi::OpenApi;
use utoipa::OpenApi as _;

use crate::router::{
    cluster_http, documents_http, eval_reports, http, reembed_http, snapshot_http,
};

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
    reembed_http::start,
    reembed_http::jobs,
    reembed_http::job,
    reembed_http::cancel,
    cluster_http::cluster,
))]
struct RouterApi;

/// The router's own operations and schemas, with the limits of its `config` stated, to be assembled with the
/// shared parts.
pub fn paths(config: &RouterConfig) -> OpenApi {
    let documents = &config.limits;
    let id = json!({"minLength": 1, "maxLength": documents.max_id_len, "pattern": NO_CONTROL_CHARACTERS});
    let title = json!({"maxLength": documents.max_title_len});
    let text =
        json!({"maxLength": documents.max_text_bytes, "pattern": contract::NOT_BLANK_PATTERN});
    let collections = json!({"items": contract::collection_name()});
    let ratio = rule(contract::unit_interval());
    let destination = json!({"pattern": DESTINATION_PATTERN});
    // `attest_ingest`'s check of metadata: non-empty keys, scalar values or arrays of scalars.
    let scalar = json!(["string", "number", "boolean"]);
    let metadata = json!({
        "propertyNames": {"type": "string", "minLength": 1},
        "additionalProperties": {
            "type": ["string", "number", "boolean", "array"],
            "items": {"type": scalar}
        }
    });
    let limits = [
        // What the router's configuration sets.
        (
            "CreateCollectionBody",
            "shards",
            json!({"maximum": config.max_shards}),
        ),
        (
            "SearchBody",
            "k",
            json!({"minimum": 1, "maximum": config.max_k}),
        ),
        (
            "SearchBody",
            "query",
            json!({"maxLength": config.max_query_bytes}),
        ),
        (
            "SearchBody",
            "filter",
            json!({"maxProperties": config.max_filter_conditions}),
        ),
        (
            "DocumentsBody",
            "documents",
            json!({"maxItems": config.max_batch_documents}),
        ),
        ("DocumentBody", "id", id.clone()),
        ("DocumentBody", "title", title.clone()),
        ("DocumentBody", "text", text.clone()),
        ("DocumentLine", "id", id),
        ("DocumentLine", "title", title),
        ("DocumentLine", "text", text),
        // Rules of fields whose own description says more than the rule's.
        (
            "SearchBody",
            "lanes",
            json!({"items": {"type": "string", "enum": LANES}}),
        ),
        ("SearchBody", "rrf_k", json!({"exclusiveMinimum": 0})),
        (
            "SearchBody",
            "weights",
            json!({
                "propertyNames": {"type": "string", "enum": LANES},
                "additionalProperties": {"type": "number", "minimum": 0}
            }),
        ),
        ("CreateSnapshot", "id", rule(contract::snapshot_id())),
        // A u32, which utoipa calls int32 (whose largest value is half of it).
        (
            "CreateSnapshot",
            "keep",
            json!({"format": "int64", "maximum": u32::MAX}),
        ),
        ("CreateSnapshot", "destination", destination.clone()),
        ("RestoreSnapshot", "source", destination),
        ("DocumentBody", "metadata", metadata.clone()),
        // Of the collection's dimension (`dimension` of the collection), which differs by collection.
        ("DocumentBody", "vector", json!({"minItems": 1})),
        ("DocumentLine", "metadata", metadata),
        ("CreateSnapshot", "collections", collections.clone()),
        ("RestoreSnapshot", "collections", collections),
        ("CollectionThresholds", "min_confidence", ratio.clone()),
        (
            "CollectionThresholds",
            "hallucination_budget",
            ratio.clone(),
        ),
        ("CollectionThresholds", "coverage", ratio.clone()),
        ("CollectionThresholds", "hallucination_rate", ratio),
        (
            "CollectionThresholds",
            "data_hash",
            rule(contract::data_hash()),
        ),
    ];
    constrain(RouterApi::openapi(), &limits)
}

/// A snapshot destination: an absolute directory, a `file:` URL of one, or `s3://bucket[/prefix]` (which
/// directories a node admits is its operator's `snapshots.allowed_roots`, beyond what a schema can say).
const DESTINATION_PATTERN: &str = r"^[ \t\n\r\f\v]*(s3://[^/]|file:|/)";

/// What a document id may not hold (`attest_ingest`'s check of ids: control characters would corrupt storage
/// keys and log lines).
const NO_CONTROL_CHARACTERS: &str = r"^[^\u0000-\u001F\u007F-\u009F]*$";

/// The document a router with this `config` serves.
pub fn document(config: &RouterConfig) -> OpenApi {
    attest_telemetry::openapi::document([paths(config)])
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
        let doc = document(&RouterConfig::default());
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
        let json = serde_json::to_value(document(&RouterConfig::default())).unwrap();
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

    /// Every link leads to an operation of the document and sets only parameters that operation has; the
    /// operations that create a collection, a key and a snapshot each link onwards.
    #[test]
    fn links_lead_to_operations_that_take_what_they_set() {
        let json: serde_json::Value = serde_json::from_str(&attest_telemetry::openapi::to_json(
            &document(&RouterConfig::default()),
        ))
        .unwrap();
        let mut parameters = std::collections::BTreeMap::new();
        for item in json["paths"].as_object().unwrap().values() {
            for op in item.as_object().unwrap().values() {
                let names: BTreeSet<String> = op["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|p| p["name"].as_str().unwrap().to_string())
                    .collect();
                parameters.insert(op["operationId"].as_str().unwrap().to_string(), names);
            }
        }
        let mut linked_from = BTreeSet::new();
        for item in json["paths"].as_object().unwrap().values() {
            for op in item.as_object().unwrap().values() {
                for response in op["responses"].as_object().unwrap().values() {
                    for link in response["links"]
                        .as_object()
                        .into_iter()
                        .flat_map(|l| l.values())
                    {
                        let target = link["operationId"]
                            .as_str()
                            .expect("a link names its operationId");
                        let taken = &parameters[target];
                        for name in link["parameters"]
                            .as_object()
                            .into_iter()
                            .flat_map(|p| p.keys())
                        {
                            assert!(taken.contains(name), "{target} takes no parameter {name}");
                        }
                        linked_from.insert(op["operationId"].as_str().unwrap().to_string());
                    }
                }
            }
        }
        for source in [
            "create_collection",
            "create_key",
            "create_snapshot",
            "ingest_documents",
        ] {
            assert!(linked_from.contains(source), "{source} links nowhere");
        }
    }
}
