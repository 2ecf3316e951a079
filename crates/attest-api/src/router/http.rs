//! HTTP API v1 (SPEC "HTTP API v1") over axum: collections, documents, search, `/v1/cluster`, `/healthz`,
//! `/readyz`, `/v1/openapi.json`, and the web console at `/` ([`crate::router::console`]). Each handler carries its
//! operation's `#[utoipa::path]`; the bodies it reads and writes are the types of [`crate::router::wire`].

use std::sync::Arc;

use attest_auth::audit::Action;
use attest_auth::{KeyRing, Principal};
use attest_core::settings::CollectionThresholds;
use attest_proto::v1 as pb;
use attest_router::access::{self, audited, Op};
use attest_router::error::RouterError;
use attest_router::keys::KeyGrant;
use attest_router::router::Router;
use attest_router::tenant_scope::whole_collection;
use attest_telemetry::http_error::ErrorBody;
use attest_telemetry::ops::MetricsRefresh;
use attest_telemetry::request_id::RequestId;
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{delete, get, post, put};
use axum::Extension;
use axum::Json;
use serde_json::{Map, Value};

use crate::router::wire::{
    body, CollectionList, CollectionStats, CollectionView, CreateCollectionBody, CreatedKey,
    Dropped, KeyList, KeyView, MaintainBody, SearchBody, SearchResult,
};

/// Largest request body accepted (SPEC: limits on every input).
pub const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// The API routes plus `/healthz`, `/readyz`, `/metrics` and `/v1/openapi.json` serving `openapi` (the router's
/// document, or `attest dev`'s with the answer tier's routes too); every request gets a request id (see
/// [`attest_telemetry::request_id::http_middleware`]). `refresh` sets on-demand gauges before `/metrics`
/// renders (shard sizes in `attest dev`).
pub fn routes(
    router: Arc<Router>,
    refresh: Option<MetricsRefresh>,
    openapi: &utoipa::openapi::OpenApi,
) -> axum::Router {
    let view = Arc::clone(router.view());
    let ready: attest_telemetry::ops::ReadinessCheck = Arc::new(move || view.readiness());
    api(Arc::clone(router.key_ring()))
        .with_state(router)
        .merge(open_routes(ready, refresh, openapi))
        .layer(axum::middleware::from_fn(
            attest_telemetry::request_id::http_middleware,
        ))
}

/// The routes that need no API key: the web console (it calls the API with the key its user types), the
/// probes (`/readyz` answers `ready` once the router holds the shard map from meta), `/metrics` (its own token,
/// if any) and the OpenAPI document.
pub(crate) fn open_routes(
    ready: attest_telemetry::ops::ReadinessCheck,
    refresh: Option<MetricsRefresh>,
    openapi: &utoipa::openapi::OpenApi,
) -> axum::Router {
    crate::router::console::routes()
        .merge(attest_telemetry::ops::routes(ready, refresh))
        .merge(attest_telemetry::openapi::route(openapi))
}

/// The API routes, before their state is given (so [`crate::router::openapi`]'s test lists them without a cluster).
pub(crate) fn api(keys: Arc<KeyRing>) -> axum::Router<Arc<Router>> {
    // Every API route carries the guard of its operation's scope (attest_router::access::Op): the handler gets the
    // caller's Principal.
    let guard = |op: Op| {
        axum::middleware::from_fn_with_state(
            (Arc::clone(&keys), op.scope()),
            attest_auth::http::require,
        )
    };
    axum::Router::new()
        .route(
            "/v1/collections",
            post(create_collection)
                .route_layer(guard(Op::CreateCollection))
                .merge(get(list_collections).route_layer(guard(Op::ListCollections))),
        )
        .route(
            "/v1/collections/:name",
            delete(drop_collection)
                .route_layer(guard(Op::DropCollection))
                .merge(get(get_collection).route_layer(guard(Op::GetCollection))),
        )
        .route(
            "/v1/collections/:name/documents",
            post(crate::router::documents_http::ingest).route_layer(guard(Op::Ingest)),
        )
        .route(
            "/v1/collections/:name/documents/:id",
            delete(crate::router::documents_http::delete_document)
                .route_layer(guard(Op::DeleteDocument)),
        )
        .route(
            "/v1/collections/:name/search",
            post(search).route_layer(guard(Op::Search)),
        )
        .route(
            "/v1/collections/:name/maintain",
            post(maintain).route_layer(guard(Op::Maintain)),
        )
        .route(
            "/v1/collections/:name/stats",
            get(stats).route_layer(guard(Op::Stats)),
        )
        .route(
            "/v1/collections/:name/eval",
            get(crate::router::eval_reports::latest).route_layer(guard(Op::EvalReport)),
        )
        .route(
            "/v1/collections/:name/thresholds",
            put(set_thresholds)
                .delete(clear_thresholds)
                .route_layer(guard(Op::SetThresholds)),
        )
        .route(
            "/v1/keys",
            post(create_key)
                .get(list_keys)
                .route_layer(guard(Op::ManageKeys)),
        )
        .route(
            "/v1/keys/:id",
            delete(revoke_key).route_layer(guard(Op::ManageKeys)),
        )
        .route(
            "/v1/snapshots",
            post(crate::router::snapshot_http::create)
                .get(crate::router::snapshot_http::list)
                .route_layer(guard(Op::Snapshots)),
        )
        .route(
            "/v1/snapshots/:id",
            delete(crate::router::snapshot_http::delete).route_layer(guard(Op::Snapshots)),
        )
        .route(
            "/v1/snapshots/:id/progress",
            get(crate::router::snapshot_http::progress).route_layer(guard(Op::Snapshots)),
        )
        .route(
            "/v1/snapshots/restore",
            post(crate::router::snapshot_http::restore).route_layer(guard(Op::Snapshots)),
        )
        .route(
            "/v1/snapshots/jobs",
            get(crate::router::snapshot_http::jobs).route_layer(guard(Op::Snapshots)),
        )
        .route(
            "/v1/snapshots/jobs/:id",
            get(crate::router::snapshot_http::job).route_layer(guard(Op::Snapshots)),
        )
        .route(
            "/v1/snapshots/jobs/:id/cancel",
            post(crate::router::snapshot_http::cancel).route_layer(guard(Op::Snapshots)),
        )
        .route(
            "/v1/collections/:name/reembed",
            post(crate::router::reembed_http::start).route_layer(guard(Op::Reembed)),
        )
        .route(
            "/v1/reembed/jobs",
            get(crate::router::reembed_http::jobs).route_layer(guard(Op::Reembed)),
        )
        .route(
            "/v1/reembed/jobs/:id",
            get(crate::router::reembed_http::job).route_layer(guard(Op::Reembed)),
        )
        .route(
            "/v1/reembed/jobs/:id/cancel",
            post(crate::router::reembed_http::cancel).route_layer(guard(Op::Reembed)),
        )
        .route(
            "/v1/cluster",
            get(crate::router::cluster_http::cluster).route_layer(guard(Op::Cluster)),
        )
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
}

/// Mints an API key within the caller's own grant; the key itself is in this answer only.
#[utoipa::path(post, path = "/v1/keys", tag = "keys", operation_id = "create_key",
    request_body = KeyGrant, security(("bearer_auth" = ["admin"])),
    responses((status = 201, description = "The key (shown this once) and its record.", body = CreatedKey)))]
pub(crate) async fn create_key(
    State(r): State<Arc<Router>>,
    Extension(p): Extension<Principal>,
    b: Result<Json<KeyGrant>, JsonRejection>,
) -> Result<impl IntoResponse, RouterError> {
    // A body that is not a grant is a refused mint like any other: audited (issue 69).
    let grant = body(b).inspect_err(|e| {
        attest_auth::audit::record(&p, &Action::new("create_key"), Some(e.code()))
    })?;
    let (key, info) = r.keys().create(&p, grant).await?;
    let created = CreatedKey {
        info: KeyView::from(&info),
        key,
    };
    Ok((StatusCode::CREATED, Json(created)))
}

/// The keys within the caller's grant (records, never keys or hashes).
#[utoipa::path(get, path = "/v1/keys", tag = "keys", operation_id = "list_keys",
    security(("bearer_auth" = ["admin"])),
    responses((status = 200, description = "The keys, oldest first.", body = KeyList)))]
pub(crate) async fn list_keys(
    State(r): State<Arc<Router>>,
    Extension(p): Extension<Principal>,
) -> Result<Json<KeyList>, RouterError> {
    let keys = r.keys().list(&p).await?;
    Ok(Json(KeyList {
        keys: keys.iter().map(KeyView::from).collect(),
    }))
}

/// Revokes a key (revoking twice is fine).
#[utoipa::path(delete, path = "/v1/keys/{id}", tag = "keys", operation_id = "revoke_key",
    params(("id" = String, Path, description = "The key's id.")), security(("bearer_auth" = ["admin"])),
    responses(
        (status = 200, description = "The revoked key's record.", body = KeyView),
        (status = 404, description = "NOT_FOUND: no key with this id.", body = ErrorBody),
    ))]
pub(crate) async fn revoke_key(
    State(r): State<Arc<Router>>,
    Extension(p): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<KeyView>, RouterError> {
    let key = r.keys().revoke(&p, &id).await?;
    Ok(Json(KeyView::from(&key)))
}

/// A body that must be a JSON object: serde reads a struct from an array too (`[]` as `{}`), which the API
/// document does not allow (found by `make api-fuzz`).
fn object_body<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Result<T, RouterError> {
    if !v.is_object() {
        return Err(RouterError::Callee(attest_proto::ApiError::invalid(
            "body",
            "the body must be a JSON object",
        )));
    }
    serde_json::from_value(v)
        .map_err(|e| RouterError::Callee(attest_proto::ApiError::invalid("body", e.to_string())))
}

/// Creates a collection and places its shards' replicas on the shard nodes.
#[utoipa::path(post, path = "/v1/collections", tag = "collections", operation_id = "create_collection",
    request_body = CreateCollectionBody, security(("bearer_auth" = ["admin"])),
    responses(
        (status = 201, description = "The collection, created.", body = CollectionView),
        (status = 200, description = "The collection, which existed with this spec (creating is idempotent).", body = CollectionView),
        (status = 409, description = "ALREADY_EXISTS: a collection of this name exists with another spec.", body = ErrorBody),
        (status = 504, description = "DEADLINE_EXCEEDED: meta did not confirm in time; it may have been created.", body = ErrorBody),
    ))]
pub(crate) async fn create_collection(
    State(r): State<Arc<Router>>,
    Extension(RequestId(rid)): Extension<RequestId>,
    Extension(p): Extension<Principal>,
    b: Result<Json<CreateCollectionBody>, JsonRejection>,
) -> Result<impl IntoResponse, RouterError> {
    let b = body(b)?;
    access::collection(&p, &b.name)?;
    let index = b.index.map(|i| pb::IndexRequest {
        nlist: i.nlist,
        m: i.m,
        nbits: i.nbits,
        nprobe: i.nprobe,
        recall_target: i.recall_target,
    });
    let name = b.name.clone();
    let created = r
        .collections()
        .create_or_match(
            pb::CreateCollectionRequest {
                name: b.name,
                shards: b.shards,
                replication: b.replication,
                index,
                chunking_json: b.chunking.map(|c| c.to_string()).unwrap_or_default(),
                thresholds_json: b.thresholds.map(|t| t.to_stored()).unwrap_or_default(),
                embedder: b.embedder,
            },
            &rid,
        )
        .await;
    let created = audited(
        &p,
        Action::new("create_collection").collection(&name),
        created,
    )?;
    // 200: it existed with this spec already (a repeated create).
    let status = if created.new {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(CollectionView::from(&created.record))))
}

/// Sets the collection's answer thresholds (what `attest-lab eval --sweep` measures).
#[utoipa::path(put, path = "/v1/collections/{name}/thresholds", tag = "collections",
    operation_id = "set_thresholds", params(("name" = String, Path, description = "The collection.")), request_body = CollectionThresholds,
    security(("bearer_auth" = ["admin"])),
    responses(
        (status = 200, description = "The collection, with its thresholds.", body = CollectionView),
        (status = 404, description = "NOT_FOUND: no such collection.", body = ErrorBody),
    ))]
pub(crate) async fn set_thresholds(
    State(r): State<Arc<Router>>,
    Extension(RequestId(rid)): Extension<RequestId>,
    Extension(p): Extension<Principal>,
    Path(name): Path<String>,
    b: Result<Json<CollectionThresholds>, JsonRejection>,
) -> Result<Json<CollectionView>, RouterError> {
    access::collection(&p, &name)?;
    let thresholds = body(b)?;
    let set =
        match whole_collection(r.collections(), &p, "set the thresholds of", &name, &rid).await {
            Ok(()) => {
                r.collections()
                    .set_thresholds(&name, Some(thresholds))
                    .await
            }
            Err(refused) => Err(refused),
        };
    let rec = audited(&p, Action::new("set_thresholds").collection(&name), set)?;
    Ok(Json(CollectionView::from(&rec)))
}

/// Clears the collection's thresholds: the answer tier's configured defaults apply again.
#[utoipa::path(delete, path = "/v1/collections/{name}/thresholds", tag = "collections",
    operation_id = "clear_thresholds", params(("name" = String, Path, description = "The collection.")), security(("bearer_auth" = ["admin"])),
    responses(
        (status = 200, description = "The collection, without thresholds.", body = CollectionView),
        (status = 404, description = "NOT_FOUND: no such collection.", body = ErrorBody),
    ))]
pub(crate) async fn clear_thresholds(
    State(r): State<Arc<Router>>,
    Extension(RequestId(rid)): Extension<RequestId>,
    Extension(p): Extension<Principal>,
    Path(name): Path<String>,
) -> Result<Json<CollectionView>, RouterError> {
    access::collection(&p, &name)?;
    let cleared =
        match whole_collection(r.collections(), &p, "clear the thresholds of", &name, &rid).await {
            Ok(()) => r.collections().set_thresholds(&name, None).await,
            Err(refused) => Err(refused),
        };
    let rec = audited(
        &p,
        Action::new("clear_thresholds").collection(&name),
        cleared,
    )?;
    Ok(Json(CollectionView::from(&rec)))
}

/// The collections the key sees.
#[utoipa::path(get, path = "/v1/collections", tag = "collections", operation_id = "list_collections",
    security(("bearer_auth" = ["read"])),
    responses((status = 200, description = "The collections.", body = CollectionList)))]
pub(crate) async fn list_collections(
    State(r): State<Arc<Router>>,
    Extension(p): Extension<Principal>,
) -> Json<CollectionList> {
    let collections = r
        .collections()
        .list()
        .iter()
        .filter(|c| p.sees_collection(&c.name))
        .map(CollectionView::from)
        .collect();
    Json(CollectionList { collections })
}

/// One collection.
#[utoipa::path(get, path = "/v1/collections/{name}", tag = "collections", operation_id = "get_collection",
    params(("name" = String, Path, description = "The collection.")), security(("bearer_auth" = ["read"])),
    responses(
        (status = 200, description = "The collection.", body = CollectionView),
        (status = 404, description = "NOT_FOUND: no such collection.", body = ErrorBody),
    ))]
pub(crate) async fn get_collection(
    State(r): State<Arc<Router>>,
    Extension(p): Extension<Principal>,
    Path(name): Path<String>,
) -> Result<Json<CollectionView>, RouterError> {
    access::collection(&p, &name)?;
    Ok(Json(CollectionView::from(&r.collections().get(&name)?)))
}

/// Drops a collection and every replica of its shards.
#[utoipa::path(delete, path = "/v1/collections/{name}", tag = "collections", operation_id = "drop_collection",
    params(("name" = String, Path, description = "The collection.")), security(("bearer_auth" = ["admin"])),
    responses(
        (status = 200, description = "Dropped.", body = Dropped),
        (status = 404, description = "NOT_FOUND: no such collection.", body = ErrorBody),
    ))]
pub(crate) async fn drop_collection(
    State(r): State<Arc<Router>>,
    Extension(RequestId(rid)): Extension<RequestId>,
    Extension(p): Extension<Principal>,
    Path(name): Path<String>,
) -> Result<Json<Dropped>, RouterError> {
    access::collection(&p, &name)?;
    let dropped = match whole_collection(r.collections(), &p, "drop", &name, &rid).await {
        Ok(()) => r.collections().remove(&name, &rid).await,
        Err(refused) => Err(refused),
    };
    audited(
        &p,
        Action::new("drop_collection").collection(&name),
        dropped,
    )?;
    Ok(Json(Dropped { dropped: name }))
}

/// `{"field": scalar | [scalars] | {"in": [...]} | {"gte"|"gt"|"lte"|"lt": number, ...}}` → proto filter.
pub fn filter_from_json(f: &Map<String, Value>) -> Result<pb::Filter, RouterError> {
    use pb::condition::Kind;
    let mut conditions = Vec::new();
    for (field, v) in f {
        let bad = |why: &str| RouterError::invalid(format!("filter.{field}"), why.to_string());
        let kind = match v {
            Value::Object(o) if o.contains_key("in") && o.len() > 1 => return Err(bad(
                "`in` cannot be combined with range keys in one condition (one would be dropped)",
            )),
            Value::Object(o) if o.contains_key("in") => match &o["in"] {
                Value::Array(items) => Kind::InJson(pb::JsonList {
                    values: items.iter().map(|i| i.to_string()).collect(),
                }),
                _ => return Err(bad("`in` takes an array")),
            },
            Value::Object(o) => {
                let num = |key: &str| -> Result<Option<f64>, RouterError> {
                    match o.get(key) {
                        None => Ok(None),
                        Some(x) => x
                            .as_f64()
                            .map(Some)
                            .ok_or_else(|| bad("range bounds must be numbers")),
                    }
                };
                if o.keys()
                    .any(|key| !["gte", "gt", "lte", "lt"].contains(&key.as_str()))
                {
                    return Err(bad("use {\"in\": [...]} or range keys gte, gt, lte, lt"));
                }
                Kind::Range(pb::Range {
                    gte: num("gte")?,
                    gt: num("gt")?,
                    lte: num("lte")?,
                    lt: num("lt")?,
                })
            }
            Value::Array(items) => Kind::InJson(pb::JsonList {
                values: items.iter().map(|i| i.to_string()).collect(),
            }),
            Value::Null => return Err(bad("null is not a filter")),
            scalar => Kind::EqualsJson(scalar.to_string()),
        };
        conditions.push(pb::Condition {
            field: field.clone(),
            kind: Some(kind),
        });
    }
    Ok(pb::Filter { conditions })
}

/// Hybrid search: the dense and BM25 lanes fanned out to every shard, fused with weighted RRF.
#[utoipa::path(post, path = "/v1/collections/{name}/search", tag = "search", operation_id = "search",
    params(("name" = String, Path, description = "The collection.")), request_body = SearchBody, security(("bearer_auth" = ["read"])),
    responses(
        (status = 200, description = "The hits, with each lane's rank and score.", body = SearchResult),
        (status = 404, description = "NOT_FOUND: no such collection.", body = ErrorBody),
        (status = 429, description = "RESOURCE_EXHAUSTED: a shard shed the load.", body = ErrorBody),
    ))]
pub(crate) async fn search(
    State(r): State<Arc<Router>>,
    Extension(RequestId(rid)): Extension<RequestId>,
    Extension(p): Extension<Principal>,
    Path(name): Path<String>,
    b: Result<Json<SearchBody>, JsonRejection>,
) -> Result<Json<SearchResult>, RouterError> {
    let b = body(b)?;
    let k = match b.k {
        None => None,
        Some(k) if (0..=u32::MAX as i64).contains(&k) => Some(k as u32),
        Some(_) => {
            return Err(RouterError::invalid(
                "k",
                format!("must be between 1 and {}", r.config().max_k),
            ))
        }
    };
    let mut req = pb::SearchRequest {
        collection: name,
        query: b.query,
        k,
        lanes: b.lanes.unwrap_or_default(),
        rrf_k: b.rrf_k,
        weights: b.weights.unwrap_or_default(),
        filter: b.filter.as_ref().map(filter_from_json).transpose()?,
        tenant: b.tenant.unwrap_or_default(),
        nprobe: b.nprobe,
        vector: b.vector.unwrap_or_default(),
    };
    access::search(&p, &mut req, &r.config().default_tenant)?;
    let resp = r.search().run(req, rid).await?;
    Ok(Json(SearchResult::from(&resp)))
}

/// Seals and/or compacts every replica of the collection; answers its statistics after.
#[utoipa::path(post, path = "/v1/collections/{name}/maintain", tag = "collections", operation_id = "maintain",
    params(("name" = String, Path, description = "The collection.")), request_body = MaintainBody, security(("bearer_auth" = ["admin"])),
    responses(
        (status = 200, description = "The collection's statistics after maintenance.", body = CollectionStats),
        (status = 404, description = "NOT_FOUND: no such collection.", body = ErrorBody),
        (status = 429, description = "RESOURCE_EXHAUSTED: a shard shed the load.", body = ErrorBody),
    ))]
pub(crate) async fn maintain(
    State(r): State<Arc<Router>>,
    Extension(RequestId(rid)): Extension<RequestId>,
    Extension(p): Extension<Principal>,
    Path(name): Path<String>,
    b: Result<Json<serde_json::Value>, JsonRejection>,
) -> Result<Json<CollectionStats>, RouterError> {
    access::collection(&p, &name)?;
    let b: MaintainBody = object_body(body(b)?)?;
    let done = match whole_collection(r.collections(), &p, "maintain", &name, &rid).await {
        Ok(()) => {
            r.collections()
                .maintain(&name, b.seal, b.compact, &rid)
                .await
        }
        Err(refused) => Err(refused),
    };
    audited(&p, Action::new("maintain").collection(&name), done)?;
    stats_json(&r, &name, &rid).await
}

/// Per-shard statistics of the collection.
#[utoipa::path(get, path = "/v1/collections/{name}/stats", tag = "collections", operation_id = "collection_stats",
    params(("name" = String, Path, description = "The collection.")), security(("bearer_auth" = ["read"])),
    responses(
        (status = 200, description = "The statistics of each shard.", body = CollectionStats),
        (status = 404, description = "NOT_FOUND: no such collection.", body = ErrorBody),
        (status = 429, description = "RESOURCE_EXHAUSTED: a shard shed the load.", body = ErrorBody),
    ))]
pub(crate) async fn stats(
    State(r): State<Arc<Router>>,
    Extension(RequestId(rid)): Extension<RequestId>,
    Extension(p): Extension<Principal>,
    Path(name): Path<String>,
) -> Result<Json<CollectionStats>, RouterError> {
    access::collection(&p, &name)?;
    stats_json(&r, &name, &rid).await
}

async fn stats_json(
    r: &Router,
    name: &str,
    rid: &str,
) -> Result<Json<CollectionStats>, RouterError> {
    Ok(Json(CollectionStats::new(
        name,
        r.collections().stats(name, rid).await?,
    )))
}
