//! HTTP routes of cluster snapshots (admin scope): `POST /v1/snapshots` starts a snapshot job and
//! `POST /v1/snapshots/restore` a restore job (both answer 202 with the job once the request is checked;
//! `attest_router::snapshot_jobs`), `GET /v1/snapshots/jobs[/{id}]` reads jobs, `POST /v1/snapshots/jobs/{id}/cancel`
//! stops one, `GET /v1/snapshots?from=DEST` lists a destination, `DELETE /v1/snapshots/{id}?from=DEST` deletes
//! one, `GET /v1/snapshots/{id}/progress?from=DEST` tells what a snapshot has uploaded per replica, read from
//! the destination. Each create, delete, restore and cancel writes an audit line.

use std::sync::Arc;

use attest_auth::audit::Action;
use attest_auth::Principal;
use attest_router::access::{self, audited};
use attest_router::error::RouterError;
use attest_router::router::Router;
use attest_router::snapshot_jobs::{SnapshotJob, SnapshotJobList};
use attest_router::snapshots::{CreateSnapshot, RestoreSnapshot};
use attest_telemetry::http_error::ErrorBody;
use attest_telemetry::request_id::RequestId;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::{Extension, Json};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::router::wire::body;
use crate::router::wire::{Deleted, SnapshotList, SnapshotProgress};

/// Starts a snapshot of collections (default: all) to a destination: meta's state, one replica of every
/// shard, and the manifest written last. Answers the job once the request is checked.
#[utoipa::path(post, path = "/v1/snapshots", tag = "snapshots", operation_id = "create_snapshot",
    request_body = CreateSnapshot, security(("bearer_auth" = ["admin"])),
    responses(
        (status = 202, description = "The snapshot job, running; its `manifest` once it succeeds.",
            body = SnapshotJob),
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
    let started = r.snapshots().start_create(req, rid).await;
    let target = started
        .as_ref()
        .map(|j| j.snapshot.clone())
        .unwrap_or_default();
    let action = Action::new("create_snapshot")
        .collection(&collections)
        .target(&target);
    let job = audited(&p, action, started)?;
    Ok((StatusCode::ACCEPTED, Json(job)))
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
    let snapshots = r.snapshots().list(&q.from).await?;
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
    audited(&p, action, r.snapshots().delete(&q.from, &id).await)?;
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
    let replicas = r.snapshots().progress(&q.from, &id).await?;
    Ok(Json(SnapshotProgress { id, replicas }))
}

/// Starts a restore of collections of a snapshot into this cluster, whatever its node count: every replica is
/// staged and checked before any collection is created. Answers the job once the request is checked.
#[utoipa::path(post, path = "/v1/snapshots/restore", tag = "snapshots", operation_id = "restore_snapshot",
    request_body = RestoreSnapshot, security(("bearer_auth" = ["admin"])),
    responses(
        (status = 202, description = "The restore job, running; its `restored` collections once it succeeds.",
            body = SnapshotJob),
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
) -> Result<impl IntoResponse, RouterError> {
    access::whole_cluster(&p, "a restore")?;
    let req = body(b)?;
    let (collections, id) = (req.collections.join(","), req.id.clone());
    let action = Action::new("restore_snapshot")
        .collection(&collections)
        .target(&id);
    let job = audited(&p, action, r.snapshots().start_restore(req, rid).await)?;
    Ok((StatusCode::ACCEPTED, Json(job)))
}

/// The snapshot jobs meta keeps (running ones, and the last finished ones), oldest first.
#[utoipa::path(get, path = "/v1/snapshots/jobs", tag = "snapshots", operation_id = "list_snapshot_jobs",
    security(("bearer_auth" = ["admin"])),
    responses((status = 200, description = "The jobs.", body = SnapshotJobList)))]
pub async fn jobs(
    State(r): State<Arc<Router>>,
    Extension(p): Extension<Principal>,
) -> Result<Json<SnapshotJobList>, RouterError> {
    access::whole_cluster(&p, "snapshot jobs")?;
    Ok(Json(SnapshotJobList {
        jobs: r.snapshots().jobs().await?,
    }))
}

/// A snapshot or restore job: its state, per-replica bytes, and its result or error.
#[utoipa::path(get, path = "/v1/snapshots/jobs/{id}", tag = "snapshots", operation_id = "get_snapshot_job",
    params(("id" = String, Path, description = "The job's id.")), security(("bearer_auth" = ["admin"])),
    responses(
        (status = 200, description = "The job.", body = SnapshotJob),
        (status = 404, description = "NOT_FOUND: no job of this id.", body = ErrorBody),
    ))]
pub async fn job(
    State(r): State<Arc<Router>>,
    Extension(p): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<SnapshotJob>, RouterError> {
    access::whole_cluster(&p, "a snapshot job")?;
    Ok(Json(r.snapshots().job(&id).await?))
}

/// Asks a running job to stop: a snapshot deletes what it uploaded, a restore discards what it staged (a
/// restore already creating its collections finishes). Answers the job; a finished one is left as it is.
#[utoipa::path(post, path = "/v1/snapshots/jobs/{id}/cancel", tag = "snapshots",
    operation_id = "cancel_snapshot_job",
    params(("id" = String, Path, description = "The job's id.")), security(("bearer_auth" = ["admin"])),
    responses(
        (status = 200, description = "The job, `cancel_requested` set while it runs.", body = SnapshotJob),
        (status = 404, description = "NOT_FOUND: no job of this id.", body = ErrorBody),
    ))]
pub async fn cancel(
    State(r): State<Arc<Router>>,
    Extension(p): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<SnapshotJob>, RouterError> {
    access::whole_cluster(&p, "cancelling a snapshot job")?;
    let action = Action::new("cancel_snapshot_job").target(&id);
    Ok(Json(audited(
        &p,
        action,
        r.snapshots().cancel_job(&id).await,
    )?))
}
