//! HTTP routes of cluster snapshots (admin scope): `POST /v1/snapshots` creates one and answers its manifest,
//! `GET /v1/snapshots?from=DEST` lists a destination, `DELETE /v1/snapshots/{id}?from=DEST` deletes one,
//! `GET /v1/snapshots/{id}/progress?from=DEST` tells what a snapshot in progress has uploaded per replica,
//! `GET /v1/snapshots/{id}/progress?from=DEST` tells what a snapshot in progress has uploaded per replica,
//! `POST /v1/snapshots/restore` restores collections. Each create, delete and restore writes an audit line.

use std::sync::Arc;

use attest_auth::audit::Action;
use attest_auth::Principal;
use attest_telemetry::request_id::RequestId;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::access::{self, audited};
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
    access::whole_cluster(&p, "a snapshot")?;
    let req = body(b)?;
    let collections = req.collections.join(",");
    let created = r.create_snapshot(req, &rid).await;
    let id = created.as_ref().map(|m| m.id.clone()).unwrap_or_default();
    let action = Action::new("create_snapshot")
        .collection(&collections)
        .target(&id);
    let manifest = audited(&p, action, created)?;
    Ok((StatusCode::CREATED, Json(json!(manifest))))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    from: String,
}

pub async fn list(
    State(r): State<Arc<Router>>,
    Extension(p): Extension<Principal>,
    q: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, RouterError> {
    access::whole_cluster(&p, "listing snapshots")?;
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
    access::whole_cluster(&p, "deleting a snapshot")?;
    let Query(q) = q.map_err(|e| RouterError::invalid("from", e.body_text()))?;
    let action = Action::new("delete_snapshot").target(&id);
    audited(&p, action, r.delete_snapshot(&q.from, &id).await)?;
    Ok(Json(json!({ "deleted": id })))
}

pub async fn progress(
    State(r): State<Arc<Router>>,
    Extension(p): Extension<Principal>,
    Path(id): Path<String>,
    q: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, RouterError> {
    access::whole_cluster(&p, "a snapshot's progress")?;
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
    access::whole_cluster(&p, "a restore")?;
    let req = body(b)?;
    let collections = req.collections.join(",");
    let id = req.id.clone();
    let action = Action::new("restore_snapshot")
        .collection(&collections)
        .target(&id);
    let restored = audited(&p, action, r.restore_snapshot(req, &rid).await)?;
    Ok(Json(json!({ "collections": restored })))
}
