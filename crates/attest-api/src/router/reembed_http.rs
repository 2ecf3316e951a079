//! HTTP routes of re-embedding (admin scope, a key unlimited in tenants and collections: the job reads and
//! rewrites every tenant's documents): `POST /v1/collections/{name}/reembed` starts one (202 with the job once
//! the request is checked and the copy created; [`attest_router::reembed`]), `GET /v1/reembed/jobs[/{id}]` reads jobs,
//! `POST /v1/reembed/jobs/{id}/cancel` stops one. Starts and cancels write an audit line.

use std::sync::Arc;

use attest_auth::audit::Action;
use attest_auth::Principal;
use attest_core::contract;
use attest_router::access::{self, audited};
use attest_router::error::RouterError;
use attest_router::reembed::{ReembedJob, ReembedJobList};
use attest_router::router::Router;
use attest_telemetry::http_error::ErrorBody;
use attest_telemetry::request_id::RequestId;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::{Extension, Json};
use serde::Deserialize;

use crate::router::wire::body;

/// `POST /v1/collections/{name}/reembed`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReembedRequest {
    /// The model to embed the collection with: one the router runs (its configured embedder, or a local model it
    /// loads: `all-minilm-l6-v2`, `bge-small-en-v1.5`).
    #[schema(schema_with = contract::named_embedder_model)]
    pub embedder: String,
}

/// Starts re-embedding a collection with another model: new vectors and index are built beside the old ones
/// while the collection serves and takes writes (they land in both), then the collection switches to them at
/// once. Answers the job once the request is checked and the copy created.
#[utoipa::path(post, path = "/v1/collections/{name}/reembed", tag = "collections", operation_id = "reembed_collection",
    params(("name" = String, Path, description = "The collection.")),
    request_body = ReembedRequest, security(("bearer_auth" = ["admin"])),
    responses(
        (status = 202, description = "The job, running.", body = ReembedJob),
        (status = 400, description = "INVALID_ARGUMENT: no such model, or the collection's own.", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: no such collection.", body = ErrorBody),
        (status = 409, description = "ALREADY_EXISTS: a re-embedding of it is running.", body = ErrorBody),
    ))]
pub async fn start(
    State(r): State<Arc<Router>>,
    Extension(RequestId(rid)): Extension<RequestId>,
    Extension(p): Extension<Principal>,
    Path(name): Path<String>,
    b: Result<Json<ReembedRequest>, JsonRejection>,
) -> Result<impl IntoResponse, RouterError> {
    access::whole_cluster(&p, "re-embedding a collection")?;
    let req = body(b)?;
    let action = Action::new("reembed_collection")
        .collection(&name)
        .target(&req.embedder);
    let job = audited(
        &p,
        action,
        r.reembed().start(&name, &req.embedder, &rid).await,
    )?;
    Ok((StatusCode::ACCEPTED, Json(job)))
}

/// The re-embedding jobs meta keeps (running ones, and the last finished ones), oldest first.
#[utoipa::path(get, path = "/v1/reembed/jobs", tag = "collections", operation_id = "list_reembed_jobs",
    security(("bearer_auth" = ["admin"])),
    responses((status = 200, description = "The jobs.", body = ReembedJobList)))]
pub async fn jobs(
    State(r): State<Arc<Router>>,
    Extension(p): Extension<Principal>,
) -> Result<Json<ReembedJobList>, RouterError> {
    access::whole_cluster(&p, "re-embedding jobs")?;
    Ok(Json(ReembedJobList {
        jobs: r.reembed().jobs().await?,
    }))
}

/// A re-embedding job: its phase, documents copied per shard, and its error.
#[utoipa::path(get, path = "/v1/reembed/jobs/{id}", tag = "collections", operation_id = "get_reembed_job",
    params(("id" = String, Path, description = "The job's id.")), security(("bearer_auth" = ["admin"])),
    responses(
        (status = 200, description = "The job.", body = ReembedJob),
        (status = 404, description = "NOT_FOUND: no job of this id.", body = ErrorBody),
    ))]
pub async fn job(
    State(r): State<Arc<Router>>,
    Extension(p): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<ReembedJob>, RouterError> {
    access::whole_cluster(&p, "a re-embedding job")?;
    Ok(Json(r.reembed().job(&id).await?))
}

/// Asks a running re-embedding to stop: its copy is dropped and the collection serves as before (one already
/// switching finishes). Answers the job; a finished one is left as it is.
#[utoipa::path(post, path = "/v1/reembed/jobs/{id}/cancel", tag = "collections", operation_id = "cancel_reembed_job",
    params(("id" = String, Path, description = "The job's id.")), security(("bearer_auth" = ["admin"])),
    responses(
        (status = 200, description = "The job, `cancel_requested` set while it runs.", body = ReembedJob),
        (status = 404, description = "NOT_FOUND: no job of this id.", body = ErrorBody),
    ))]
pub async fn cancel(
    State(r): State<Arc<Router>>,
    Extension(p): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<ReembedJob>, RouterError> {
    access::whole_cluster(&p, "cancelling a re-embedding job")?;
    let action = Action::new("cancel_reembed_job").target(&id);
    Ok(Json(audited(&p, action, r.reembed().cancel(&id).await)?))
}
