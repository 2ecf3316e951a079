//! HTTP routes of cluster snapshots (admin scope): `POST /v1/snapshots` creates one and answers its manifest,
//! `GET /v1/snapshots?from=DEST` lists a destination, `DELETE /v1/snapshots/{id}?from=DEST` deletes one,
//! `GET /v1/snapshots/{id}/progress?from=DEST` tells what a snapshot in progress has uploaded per replica,
//! `GET /v1/snapshots/{id}/progress?from=DEST` tells what a snapshot in progress has uploaded per replica,
//! `POST /v1/snapshots/restore` restores collections. Each create, delete and restore writes an audit line.

use std::sync::Arc;

use attest_auth::Principal;
use attest_telemetry::request_id::RequestId;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::access::audited;
use crate::error::RouterError;
use crate::http::body;
use crate::router::Router;
use crate::snapshots::{CreateSnapshot, RestoreSnapshot};

pub async fn create(
    State(r): State<Arc<Router>>,
    Extension(RequestId(rid)): Extension<RequestId>,
    Extension(p): Extension<Principal>,
    b: Result<Json<CreateSnapshot>, JsonRejection>,
) -> Result<impl IntoResponse, RouterError> {
    let req = body(b)?;
    let collections = req.collections.join(",");
    let manifest = audited(
        &p,
        "create_snapshot",
        &collections,
        "",
        r.create_snapshot(req, &rid).await,
    )?;
    Ok((StatusCode::CREATED, Json(json!(manifest))))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    from: String,
}

pub async fn list(
    State(r): State<Arc<Router>>,
    q: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, RouterError> {
    let Query(q) = q.map_err(|e| RouterError::invalid("from", e.body_text()))?;
    let snapshots = r.list_snapshots(&q.from).await?;
    Ok(Json(json!({ "snapshots": snapshots })))
}

pub async fn delete(
    State(r): State<Arc<Router>>,
    Extension(p): Extension<Principal>,
    Path(id): Path<String>,
    q: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, RouterError> {
    let Query(q) = q.map_err(|e| RouterError::invalid("from", e.body_text()))?;
    audited(
        &p,
        "delete_snapshot",
        "",
        "",
        r.delete_snapshot(&q.from, &id).await,
    )?;
    Ok(Json(json!({ "deleted": id })))
}

pub async fn progress(
    State(r): State<Arc<Router>>,
    Path(id): Path<String>,
    q: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, RouterError> {
    let Query(q) = q.map_err(|e| RouterError::invalid("from", e.body_text()))?;
    let replicas = r.snapshot_progress(&q.from, &id).await?;
    Ok(Json(json!({ "id": id, "replicas": replicas })))
}

pub async fn restore(
    State(r): State<Arc<Router>>,
    Extension(RequestId(rid)): Extension<RequestId>,
    Extension(p): Extension<Principal>,
    b: Result<Json<RestoreSnapshot>, JsonRejection>,
) -> Result<Json<Value>, RouterError> {
    let req = body(b)?;
    let collections = req.collections.join(",");
    let restored = audited(
        &p,
        "restore_snapshot",
        &collections,
        "",
        r.restore_snapshot(req, &rid).await,
    )?;
    Ok(Json(json!({ "collections": restored })))
}
