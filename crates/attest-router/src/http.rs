//! HTTP API v1 (SPEC "HTTP API v1") over axum: collections, documents, search, `/v1/cluster`, `/healthz`,
//! `/readyz`, and the web console at `/` ([`crate::console`]).

use std::collections::HashMap;
use std::sync::Arc;

use attest_auth::audit::Action;
use attest_auth::Principal;
use attest_core::settings::CollectionThresholds;
use attest_ingest::{normalize_text, parse_jsonl, SourceDocument};
use attest_proto::v1 as pb;
use attest_telemetry::ops::MetricsRefresh;
use attest_telemetry::request_id::RequestId;
use axum::body::Bytes;
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{delete, get, post, put};
use axum::Extension;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::access::{self, audited, Op};
use crate::collection::CollectionRecord;
use crate::error::RouterError;
use crate::ingest::IngestDocument;
use crate::keys::{key_json, KeyGrant};
use crate::router::Router;

/// Largest request body accepted (SPEC: limits on every input).
pub const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// The API routes plus `/healthz`, `/readyz`, `/metrics`; every request gets a request id (see
/// [`attest_telemetry::request_id::http_middleware`]). `refresh` sets on-demand gauges before `/metrics`
/// renders (shard sizes in `attest dev`).
pub fn routes(router: Arc<Router>, refresh: Option<MetricsRefresh>) -> axum::Router {
    // Every API route carries the guard of its operation's scope (crate::access::Op): the handler gets the
    // caller's Principal; /healthz, /readyz and /metrics stay open.
    let guard = |op: Op| {
        axum::middleware::from_fn_with_state(
            (Arc::clone(router.keys()), op.scope()),
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
            post(ingest).route_layer(guard(Op::Ingest)),
        )
        .route(
            "/v1/collections/:name/documents/:id",
            delete(delete_document).route_layer(guard(Op::DeleteDocument)),
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
            get(crate::eval_reports::latest).route_layer(guard(Op::EvalReport)),
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
            post(crate::snapshot_http::create)
                .get(crate::snapshot_http::list)
                .route_layer(guard(Op::Snapshots)),
        )
        .route(
            "/v1/snapshots/:id",
            delete(crate::snapshot_http::delete).route_layer(guard(Op::Snapshots)),
        )
        .route(
            "/v1/snapshots/:id/progress",
            get(crate::snapshot_http::progress).route_layer(guard(Op::Snapshots)),
        )
        .route(
            "/v1/snapshots/restore",
            post(crate::snapshot_http::restore).route_layer(guard(Op::Snapshots)),
        )
        .route(
            "/v1/cluster",
            get(crate::cluster_http::cluster).route_layer(guard(Op::Cluster)),
        )
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(router)
        // The web console (open: it calls the routes above with the key its user types).
        .merge(crate::console::routes())
        .merge(attest_telemetry::ops::routes(
            attest_telemetry::ops::always_ready(),
            refresh,
        ))
        .layer(axum::middleware::from_fn(
            attest_telemetry::request_id::http_middleware,
        ))
}

async fn create_key(
    State(r): State<Arc<Router>>,
    Extension(p): Extension<Principal>,
    b: Result<Json<KeyGrant>, JsonRejection>,
) -> Result<impl IntoResponse, RouterError> {
    let grant = body(b)?;
    let tenants = grant.tenants.join(",");
    let created = r.create_key(&p, grant).await;
    let id = created
        .as_ref()
        .map(|(_, k)| k.id.clone())
        .unwrap_or_default();
    let action = Action::new("create_key").tenant(&tenants).target(&id);
    let (key, info) = audited(&p, action, created)?;
    let mut out = key_json(&info);
    out["key"] = json!(key);
    Ok((StatusCode::CREATED, Json(out)))
}

async fn list_keys(
    State(r): State<Arc<Router>>,
    Extension(p): Extension<Principal>,
) -> Result<Json<Value>, RouterError> {
    let keys = r.list_keys(&p).await?;
    Ok(Json(
        json!({"keys": keys.iter().map(key_json).collect::<Vec<_>>()}),
    ))
}

async fn revoke_key(
    State(r): State<Arc<Router>>,
    Extension(p): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<Value>, RouterError> {
    let revoked = r.revoke_key(&p, &id).await;
    let tenants = revoked
        .as_ref()
        .map(|k| k.tenants.join(","))
        .unwrap_or_default();
    let action = Action::new("revoke_key").tenant(&tenants).target(&id);
    let key = audited(&p, action, revoked)?;
    Ok(Json(key_json(&key)))
}

pub(crate) fn body<T>(r: Result<Json<T>, JsonRejection>) -> Result<T, RouterError> {
    r.map(|Json(v)| v)
        .map_err(|e| RouterError::Callee(attest_telemetry::http_error::json_rejection(e)))
}

pub fn collection_json(c: &CollectionRecord) -> Value {
    json!({
        "name": c.name, "shards": c.shards, "replication": c.replication, "dimension": c.dimension,
        "index": {"nlist": c.index.nlist, "m": c.index.m, "nbits": c.index.nbits, "nprobe": c.index.nprobe},
        "seal_threshold": c.seal_threshold, "embedder": c.embedder,
        "chunking": c.chunking, "thresholds": c.thresholds,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IndexBody {
    nlist: Option<u32>,
    m: Option<u32>,
    nbits: Option<u32>,
    nprobe: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateCollectionBody {
    name: String,
    shards: Option<u32>,
    replication: Option<u32>,
    index: Option<IndexBody>,
    /// `{"max_tokens", "overlap_tokens", "title_prefix"}`; checked by the router (unknown keys refused).
    chunking: Option<Value>,
    thresholds: Option<CollectionThresholds>,
}

async fn create_collection(
    State(r): State<Arc<Router>>,
    Extension(RequestId(rid)): Extension<RequestId>,
    Extension(p): Extension<Principal>,
    b: Result<Json<CreateCollectionBody>, JsonRejection>,
) -> Result<impl IntoResponse, RouterError> {
    let b = body(b)?;
    access::collection(&p, &b.name)?;
    // Leaving a field out asks for its default; an explicit 0 is a mistake, not a request for the default.
    let explicit_zero = [
        ("shards", b.shards),
        ("replication", b.replication),
        ("index.nlist", b.index.as_ref().and_then(|i| i.nlist)),
        ("index.m", b.index.as_ref().and_then(|i| i.m)),
        ("index.nbits", b.index.as_ref().and_then(|i| i.nbits)),
        ("index.nprobe", b.index.as_ref().and_then(|i| i.nprobe)),
    ];
    if let Some((field, _)) = explicit_zero.iter().find(|(_, v)| *v == Some(0)) {
        return Err(RouterError::invalid(
            *field,
            "must be at least 1 (leave it out for the default)",
        ));
    }
    let index = b.index.map(|i| pb::IndexParams {
        nlist: i.nlist.unwrap_or(0),
        m: i.m.unwrap_or(0),
        nbits: i.nbits.unwrap_or(0),
        nprobe: i.nprobe.unwrap_or(0),
    });
    let name = b.name.clone();
    let created = r
        .create_collection(
            pb::CreateCollectionRequest {
                name: b.name,
                shards: b.shards.unwrap_or(0),
                replication: b.replication.unwrap_or(1),
                index,
                chunking_json: b.chunking.map(|c| c.to_string()).unwrap_or_default(),
                thresholds_json: b.thresholds.map(|t| t.to_stored()).unwrap_or_default(),
            },
            &rid,
        )
        .await;
    let rec = audited(
        &p,
        Action::new("create_collection").collection(&name),
        created,
    )?;
    Ok((StatusCode::CREATED, Json(collection_json(&rec))))
}

async fn set_thresholds(
    State(r): State<Arc<Router>>,
    Extension(p): Extension<Principal>,
    Path(name): Path<String>,
    b: Result<Json<CollectionThresholds>, JsonRejection>,
) -> Result<Json<Value>, RouterError> {
    access::collection(&p, &name)?;
    let thresholds = body(b)?;
    let set = r.set_thresholds(&name, Some(thresholds)).await;
    let rec = audited(&p, Action::new("set_thresholds").collection(&name), set)?;
    Ok(Json(collection_json(&rec)))
}

async fn clear_thresholds(
    State(r): State<Arc<Router>>,
    Extension(p): Extension<Principal>,
    Path(name): Path<String>,
) -> Result<Json<Value>, RouterError> {
    access::collection(&p, &name)?;
    let cleared = r.set_thresholds(&name, None).await;
    let rec = audited(
        &p,
        Action::new("clear_thresholds").collection(&name),
        cleared,
    )?;
    Ok(Json(collection_json(&rec)))
}

async fn list_collections(
    State(r): State<Arc<Router>>,
    Extension(p): Extension<Principal>,
) -> Json<Value> {
    let visible: Vec<Value> = r
        .collections()
        .iter()
        .filter(|c| p.sees_collection(&c.name))
        .map(collection_json)
        .collect();
    Json(json!({ "collections": visible }))
}

async fn get_collection(
    State(r): State<Arc<Router>>,
    Extension(p): Extension<Principal>,
    Path(name): Path<String>,
) -> Result<Json<Value>, RouterError> {
    access::collection(&p, &name)?;
    Ok(Json(collection_json(&r.collection(&name)?)))
}

async fn drop_collection(
    State(r): State<Arc<Router>>,
    Extension(RequestId(rid)): Extension<RequestId>,
    Extension(p): Extension<Principal>,
    Path(name): Path<String>,
) -> Result<Json<Value>, RouterError> {
    access::collection(&p, &name)?;
    let dropped = r.drop_collection(&name, &rid).await;
    audited(
        &p,
        Action::new("drop_collection").collection(&name),
        dropped,
    )?;
    Ok(Json(json!({"dropped": name})))
}

/// One document of a JSON ingest body: the fields of [`attest_ingest::DOCUMENT_FIELDS`] and an optional
/// precomputed `vector`; any other field is refused, named by its path (`documents[3].colour`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DocumentBody {
    id: Value,
    #[serde(default)]
    title: Option<String>,
    text: String,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    tenant: Option<String>,
    #[serde(default)]
    vector: Option<Vec<f32>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DocumentsBody {
    documents: Vec<DocumentBody>,
}

fn id_string(v: &Value, i: usize) -> Result<String, RouterError> {
    match v {
        Value::String(s) if !s.is_empty() => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        _ => Err(RouterError::invalid(
            format!("documents[{i}].id"),
            "a non-empty string or a number",
        )),
    }
}

/// JSON `{documents: [...]}`: one bad document fails the request. NDJSON: malformed lines are reported by line
/// number and every other line is ingested.
/// Parsed documents of an ingest body, the NDJSON lines that did not parse (as refusals) and, for NDJSON, each
/// document's line number.
type ParsedBody = (Vec<IngestDocument>, Vec<Value>, Option<Vec<usize>>);

fn parse_documents(bytes: &[u8], ndjson: bool) -> Result<ParsedBody, RouterError> {
    // `index` is always the 0-based position in the request (for NDJSON the line's, with `line` beside it).
    if ndjson {
        let parsed = parse_jsonl(bytes);
        let rejected = parsed
            .errors
            .iter()
            .map(|e| json!({"index": e.line - 1, "line": e.line, "reason": e.reason}))
            .collect();
        let docs = parsed
            .documents
            .into_iter()
            .map(|source| IngestDocument {
                source,
                vector: None,
            })
            .collect();
        return Ok((docs, rejected, Some(parsed.lines)));
    }
    // The same refusal as every JSON body: the field is the path serde stopped at (`documents[3].colour`).
    let b = body(Json::<DocumentsBody>::from_bytes(bytes))?;
    let docs = b
        .documents
        .into_iter()
        .enumerate()
        .map(|(i, d)| {
            Ok(IngestDocument {
                source: SourceDocument {
                    id: id_string(&d.id, i)?,
                    title: normalize_text(d.title.as_deref().unwrap_or("")),
                    text: normalize_text(&d.text),
                    metadata: d.metadata.unwrap_or_default(),
                    tenant: d.tenant,
                },
                vector: d.vector,
            })
        })
        .collect::<Result<_, RouterError>>()?;
    Ok((docs, Vec::new(), None))
}

async fn ingest(
    State(r): State<Arc<Router>>,
    Extension(RequestId(rid)): Extension<RequestId>,
    Extension(p): Extension<Principal>,
    Path(name): Path<String>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Json<Value>, RouterError> {
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_ascii_lowercase();
    let ndjson = content_type.contains("ndjson") || content_type.contains("jsonl");
    if !ndjson && !content_type.contains("json") {
        return Err(RouterError::invalid(
            "content-type",
            format!("`{content_type}`: send application/json ({{\"documents\": [...]}}) or application/x-ndjson"),
        ));
    }
    // Parsing and NFKC normalisation of up to 32 MB run on the CPU pool, not on an async worker.
    let (docs, mut rejected, lines) =
        attest_telemetry::cpu::run_cpu_intensive(move || parse_documents(&bytes, ndjson))
            .await
            .map_err(|e| RouterError::Internal(e.to_string()))??;
    let mut docs = docs;
    let tenants = access::ingest(&p, &name, &mut docs, &r.config().default_tenant)?;
    let ingested = r.ingest(&name, docs, &rid).await;
    let tenants = tenants.join(",");
    let action = Action::new("ingest").collection(&name).tenant(&tenants);
    let report = audited(&p, action, ingested)?;
    let refusal = |i: usize, reason: String| match &lines {
        Some(lines) => json!({"index": lines[i] - 1, "line": lines[i], "reason": reason}),
        None => json!({"index": i, "reason": reason}),
    };
    rejected.extend(
        report
            .duplicates
            .iter()
            .map(|(i, other)| refusal(*i, format!("near-duplicate of document `{other}`"))),
    );
    rejected.extend(
        report
            .rejected
            .iter()
            .map(|(i, why)| refusal(*i, why.clone())),
    );
    rejected.sort_by_key(|r| r["index"].as_u64());
    Ok(Json(
        json!({"accepted": report.accepted, "rejected": rejected, "duplicates": report.duplicates.len(), "chunks": report.chunks}),
    ))
}

#[derive(Deserialize, Default)]
struct TenantQuery {
    tenant: Option<String>,
}

async fn delete_document(
    State(r): State<Arc<Router>>,
    Extension(RequestId(rid)): Extension<RequestId>,
    Extension(p): Extension<Principal>,
    Path((name, id)): Path<(String, String)>,
    q: axum::extract::Query<TenantQuery>,
) -> Result<Json<Value>, RouterError> {
    let tenant = access::delete(&p, &name, q.tenant.as_deref(), &r.config().default_tenant)?;
    let outcome = r.delete_document(&name, Some(&tenant), &id, &rid).await;
    let action = Action::new("delete_document")
        .collection(&name)
        .tenant(&tenant)
        .target(&id);
    if !access::audited_delete(&p, action, outcome)? {
        return Err(RouterError::NotFound(format!(
            "document `{id}` does not exist in `{name}`"
        )));
    }
    Ok(Json(json!({"deleted": id})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchBody {
    query: String,
    k: Option<i64>,
    lanes: Option<Vec<String>>,
    rrf_k: Option<f64>,
    weights: Option<HashMap<String, f64>>,
    filter: Option<Map<String, Value>>,
    tenant: Option<String>,
    nprobe: Option<u32>,
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

pub fn search_response_json(resp: &pb::SearchResponse) -> Value {
    let hits: Vec<Value> = resp
        .hits
        .iter()
        .map(|h| {
            let mut lanes = Map::new();
            if let Some(d) = &h.dense {
                lanes.insert("dense".into(), json!({"rank": d.rank, "score": d.score}));
            }
            if let Some(b) = &h.bm25 {
                lanes.insert("bm25".into(), json!({"rank": b.rank, "score": b.score}));
            }
            let metadata: Value = serde_json::from_str(&h.metadata_json).unwrap_or(json!({}));
            json!({"chunk_id": h.chunk_id, "doc_id": h.doc_id, "title": h.title, "text": h.text, "score": h.score,
                   "lanes": lanes, "shard": h.shard, "metadata": metadata})
        })
        .collect();
    json!({"hits": hits, "degraded": resp.degraded, "missing_shards": resp.missing_shards,
           "fallback_mode": resp.fallback_mode, "request_id": resp.request_id, "took_ms": resp.took_ms})
}

async fn search(
    State(r): State<Arc<Router>>,
    Extension(RequestId(rid)): Extension<RequestId>,
    Extension(p): Extension<Principal>,
    Path(name): Path<String>,
    b: Result<Json<SearchBody>, JsonRejection>,
) -> Result<Json<Value>, RouterError> {
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
    };
    access::search(&p, &mut req, &r.config().default_tenant)?;
    let resp = r.search(req, rid).await?;
    Ok(Json(search_response_json(&resp)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MaintainBody {
    #[serde(default)]
    seal: bool,
    #[serde(default)]
    compact: bool,
}

async fn maintain(
    State(r): State<Arc<Router>>,
    Extension(RequestId(rid)): Extension<RequestId>,
    Extension(p): Extension<Principal>,
    Path(name): Path<String>,
    b: Result<Json<MaintainBody>, JsonRejection>,
) -> Result<Json<Value>, RouterError> {
    access::collection(&p, &name)?;
    let b = body(b)?;
    let done = r.maintain(&name, b.seal, b.compact, &rid).await;
    audited(&p, Action::new("maintain").collection(&name), done)?;
    stats_json(&r, &name, &rid).await
}

async fn stats(
    State(r): State<Arc<Router>>,
    Extension(RequestId(rid)): Extension<RequestId>,
    Extension(p): Extension<Principal>,
    Path(name): Path<String>,
) -> Result<Json<Value>, RouterError> {
    access::collection(&p, &name)?;
    stats_json(&r, &name, &rid).await
}

async fn stats_json(r: &Router, name: &str, rid: &str) -> Result<Json<Value>, RouterError> {
    let shards: Vec<Value> = r
        .stats(name, rid)
        .await?
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            json!({"shard": i, "live_documents": s.live_documents, "growing_rows": s.growing_rows, "sealed_rows": s.sealed_rows,
                   "sealed_segments": s.sealed_segments, "last_seq": s.last_seq, "rebuilt_segments": s.rebuilt_segments,
                   "disk_bytes": s.disk_bytes})
        })
        .collect();
    Ok(Json(json!({"collection": name, "shards": shards})))
}
