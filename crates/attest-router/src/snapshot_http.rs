//! HTTP routes of cluster snapshots (admin scope): `POST /v1/snapshots` creates one and answers its manifest,
//! `GET /v1/snapshots?from=DEST` lists a destination, `DELETE /v1/snapshots/{id}?from=DEST` deletes one,
//! `GET /v1/snapshots/{id}/progress?from=DEST` tells what a snapshot in progress has uploaded per replica,
//! `POST /v1/snapshots/restore` restores collections. Each create, delete and restore writes an audit line.

use std::sync::Arc;

use attest_auth::audit::Action;
use attest_auth::Principal;
use attest_telemetry::http_error::ErrorBody;
use attest_telemetry::request_id::RequestId;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::{Extension, Json};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::access::{self, audited};
use crate::error::RouterError;
use crate::http::body;
use crate::router::Router;
use crate::snapshots::{ClusterManifest, CreateSnapshot, RestoreSnapshot};
use crate::wire::{Deleted, Restored, SnapshotList, SnapshotProgress};

/// Snapshots collections (default: all) to a destination: meta's state, one replica of every shard, and the
/// manifest written last.
#[utoipa::path(post, path = "/v1/snapshots", tag = "snapshots", operation_id = "create_snapshot",
    request_body = CreateSnapshot, security(("bearer_auth" = ["admin"])),
    responses(
        (status = 201, description = "The complete snapshot's manifest.", body = ClusterManifest),
        (status = 404, description = "NOT_FOUND: a named collection does not exist.", body = ErrorBody),
        (status = 409, description = "ALREADY_EXISTS: the destination has a snapshot of this id.",
            body = ErrorBody),
    ))]
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
    Ok((StatusCode::CREATED, Json(manifest)))
}

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// The destination: a directory every node reaches, or `s3://bucket[/prefix]`.
    from: String,
}

/// The snapshots of a destination, each with its manifest or why it cannot be read.
#[utoipa::path(get, path = "/v1/snapshots", tag = "snapshots", operation_id = "list_snapshots",
    params(ListQuery), security(("bearer_auth" = ["admin"])),
    responses((status = 200, description = "The snapshots.", body = SnapshotList)))]
pub async fn list(
    State(r): State<Arc<Router>>,
    Extension(p): Extension<Principal>,
    q: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<SnapshotList>, RouterError> {
    access::whole_cluster(&p, "listing snapshots")?;
    let Query(q) = q.map_err(|e| RouterError::invalid("from", e.body_text()))?;
    let snapshots = r.list_snapshots(&q.from).await?;
    Ok(Json(SnapshotList { snapshots }))
}

/// Deletes a snapshot from a destination.
#[utoipa::path(delete, path = "/v1/snapshots/{id}", tag = "snapshots", operation_id = "delete_snapshot",
    params(("id" = String, Path, description = "The snapshot's id."), ListQuery), security(("bearer_auth" = ["admin"])),
    responses(
        (status = 200, description = "Deleted.", body = Deleted),
        (status = 404, description = "NOT_FOUND: no snapshot of this id there.", body = ErrorBody),
    ))]
pub async fn delete(
    State(r): State<Arc<Router>>,
    Extension(p): Extension<Principal>,
    Path(id): Path<String>,
    q: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Deleted>, RouterError> {
    access::whole_cluster(&p, "deleting a snapshot")?;
    let Query(q) = q.map_err(|e| RouterError::invalid("from", e.body_text()))?;
    let action = Action::new("delete_snapshot").target(&id);
    audited(&p, action, r.delete_snapshot(&q.from, &id).await)?;
    Ok(Json(Deleted { deleted: id }))
}

/// What a snapshot in progress has uploaded so far, per replica.
#[utoipa::path(get, path = "/v1/snapshots/{id}/progress", tag = "snapshots", operation_id = "snapshot_progress",
    params(("id" = String, Path, description = "The snapshot's id."), ListQuery), security(("bearer_auth" = ["admin"])),
    responses(
        (status = 200, description = "Bytes uploaded per replica.", body = SnapshotProgress),
        (status = 404, description = "NOT_FOUND: no snapshot of this id there.", body = ErrorBody),
    ))]
pub async fn progress(
    State(r): State<Arc<Router>>,
    Extension(p): Extension<Principal>,
    Path(id): Path<String>,
    q: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<SnapshotProgress>, RouterError> {
    access::whole_cluster(&p, "a snapshot's progress")?;
    let Query(q) = q.map_err(|e| RouterError::invalid("from", e.body_text()))?;
    let replicas = r.snapshot_progress(&q.from, &id).await?;
    Ok(Json(SnapshotProgress { id, replicas }))
}

/// Restores collections of a snapshot into this cluster, whatever its node count: every replica is staged and
/// checked before any collection is created.
#[utoipa::path(post, path = "/v1/snapshots/restore", tag = "snapshots", operation_id = "restore_snapshot",
    request_body = RestoreSnapshot, security(("bearer_auth" = ["admin"])),
    responses(
        (status = 200, description = "The collections restored.", body = Restored),
        (status = 404, description = "NOT_FOUND: no such snapshot, or a named collection is not in it.",
            body = ErrorBody),
        (status = 409, description = "ALREADY_EXISTS: a collection exists (`force` replaces it).",
            body = ErrorBody),
    ))]
pub async fn restore(
    State(r): State<Arc<Router>>,
    Extension(RequestId(rid)): Extension<RequestId>,
    Extension(p): Extension<Principal>,
    b: Result<Json<RestoreSnapshot>, JsonRejection>,
) -> Result<Json<Restored>, RouterError> {
    access::whole_cluster(&p, "a restore")?;
    let req = body(b)?;
    let collections = req.collections.join(",");
    let id = req.id.clone();
    let action = Action::new("restore_snapshot")
        .collection(&collections)
        .target(&id);
    let restored = audited(&p, action, r.restore_snapshot(req, &rid).await)?;
    Ok(Json(Restored {
        collections: restored,
    }))
}
