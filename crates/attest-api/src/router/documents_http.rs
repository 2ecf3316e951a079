//! The documents routes of HTTP API v1: `POST /v1/collections/{name}/documents` (a JSON body, or NDJSON with
//! refusals by line) and `DELETE /v1/collections/{name}/documents/{id}`.

use std::sync::Arc;

use attest_auth::audit::Action;
use attest_auth::Principal;
use attest_ingest::{normalized_within, parse_jsonl_with, DocumentLimits, SourceDocument};
use attest_router::access::{self, audited};
use attest_router::error::RouterError;
use attest_router::ingest::{document_error, IngestDocument};
use attest_router::router::Router;
use attest_telemetry::http_error::ErrorBody;
use attest_telemetry::request_id::RequestId;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::{Extension, Json};
use serde_json::Value;

use crate::router::wire::body;
use crate::router::wire::{
    Deleted, DocumentLine, DocumentsBody, IngestResult, Refusal, TenantQuery,
};

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

/// Parsed documents of an ingest body, the NDJSON lines that did not parse (as refusals) and, for NDJSON, each
/// document's line number.
type ParsedBody = (Vec<IngestDocument>, Vec<Refusal>, Option<Vec<usize>>);

fn parse_documents(
    bytes: &[u8],
    ndjson: bool,
    limits: &DocumentLimits,
) -> Result<ParsedBody, RouterError> {
    // `index` is always the 0-based position in the request (for NDJSON the line's, with `line` beside it).
    if ndjson {
        let parsed = parse_jsonl_with(bytes, limits);
        let rejected = parsed
            .errors
            .iter()
            .map(|e| Refusal {
                index: e.line - 1,
                line: Some(e.line),
                reason: e.reason.clone(),
            })
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
            let normalized = |s: &str, field: &str, max: usize| {
                normalized_within(s, field, max).map_err(|e| document_error(i, e))
            };
            let title = d.title.as_deref().unwrap_or("");
            Ok(IngestDocument {
                source: SourceDocument {
                    id: id_string(&d.id, i)?,
                    title: normalized(title, "title", limits.max_title_len)?,
                    text: normalized(&d.text, "text", limits.max_text_bytes)?,
                    metadata: d.metadata.unwrap_or_default(),
                    tenant: d.tenant,
                },
                vector: d.vector,
            })
        })
        .collect::<Result<_, RouterError>>()?;
    Ok((docs, Vec::new(), None))
}

/// Ingests documents: JSON `{documents: [...]}` (one bad document fails the request), or NDJSON, one document
/// per line (a malformed line is refused by its line number and the others are ingested).
#[utoipa::path(post, path = "/v1/collections/{name}/documents", tag = "documents",
    operation_id = "ingest_documents", params(("name" = String, Path, description = "The collection.")), security(("bearer_auth" = ["write"])),
    request_body(description = "The documents, as JSON or as NDJSON (`application/x-ndjson`; \
        `application/jsonl` is read the same way).",
        content((DocumentsBody = "application/json"), (DocumentLine = "application/x-ndjson"))),
    responses(
        (status = 200, description = "What was stored and what was refused, by position.", body = IngestResult),
        (status = 404, description = "NOT_FOUND: no such collection.", body = ErrorBody),
        (status = 429, description = "RESOURCE_EXHAUSTED: a shard shed the load.", body = ErrorBody),
    ))]
pub(crate) async fn ingest(
    State(r): State<Arc<Router>>,
    Extension(RequestId(rid)): Extension<RequestId>,
    Extension(p): Extension<Principal>,
    Path(name): Path<String>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Json<IngestResult>, RouterError> {
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
    let limits = r.config().limits.clone();
    let (docs, mut rejected, lines) =
        attest_telemetry::cpu::run_cpu_intensive(move || parse_documents(&bytes, ndjson, &limits))
            .await
            .map_err(|e| RouterError::Internal(e.to_string()))??;
    let mut docs = docs;
    let tenants = access::ingest(&p, &name, &mut docs, &r.config().default_tenant)?;
    let ingested = r.ingest().run(&name, docs, &rid).await;
    let tenants = tenants.join(",");
    let action = Action::new("ingest").collection(&name).tenant(&tenants);
    let report = audited(&p, action, ingested)?;
    let refusal = |i: usize, reason: String| match &lines {
        Some(lines) => Refusal {
            index: lines[i] - 1,
            line: Some(lines[i]),
            reason,
        },
        None => Refusal {
            index: i,
            line: None,
            reason,
        },
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
    rejected.sort_by_key(|r| r.index);
    Ok(Json(IngestResult {
        accepted: report.accepted,
        rejected,
        duplicates: report.duplicates.len(),
        chunks: report.chunks,
    }))
}

/// Deletes a document (every chunk of it) from its tenant.
#[utoipa::path(delete, path = "/v1/collections/{name}/documents/{id}", tag = "documents",
    operation_id = "delete_document",
    params(("name" = String, Path, description = "The collection."), ("id" = String, Path, description = "The document's id."), TenantQuery),
    security(("bearer_auth" = ["write"])),
    responses(
        (status = 200, description = "Deleted.", body = Deleted),
        (status = 404, description = "NOT_FOUND: no such collection, or no such document in the tenant.",
            body = ErrorBody),
        (status = 429, description = "RESOURCE_EXHAUSTED: a shard shed the load.", body = ErrorBody),
    ))]
pub(crate) async fn delete_document(
    State(r): State<Arc<Router>>,
    Extension(RequestId(rid)): Extension<RequestId>,
    Extension(p): Extension<Principal>,
    Path((name, id)): Path<(String, String)>,
    q: Result<axum::extract::Query<TenantQuery>, QueryRejection>,
) -> Result<Json<Deleted>, RouterError> {
    // A misspelt `?tenent=` must not quietly delete from the default tenant instead.
    let axum::extract::Query(q) = q.map_err(|e| {
        let text = e.body_text();
        let field = text
            .split_once("unknown field `")
            .and_then(|(_, rest)| rest.split_once('`'))
            .map_or("query", |(name, _)| name)
            .to_string();
        RouterError::invalid(field, text)
    })?;
    let tenant = access::delete(&p, &name, q.tenant.as_deref(), &r.config().default_tenant)?;
    let outcome = r.ingest().delete(&name, Some(&tenant), &id, &rid).await;
    let action = Action::new("delete_document")
        .collection(&name)
        .tenant(&tenant)
        .target(&id);
    if !access::audited_delete(&p, action, outcome)? {
        return Err(RouterError::NotFound(format!(
            "document `{id}` does not exist in `{name}`"
        )));
    }
    Ok(Json(Deleted { deleted: id }))
}
