//! `POST /v1/collections/{name}/ask`: `{question, stream?}` → the answer as JSON, or with `stream: true` as
//! Server-Sent Events: one `delta` event per claim of the answer text, then `done` with the whole response.

use std::convert::Infallible;
use std::sync::Arc;

use attest_telemetry::request_id::{http_middleware, RequestId};
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::json;

use crate::claims::split_claims;
use crate::error::AnswerError;
use crate::pipeline::AnswerService;

#[derive(Deserialize)]
struct AskBody {
    question: String,
    #[serde(default)]
    stream: bool,
}

pub fn routes(service: Arc<AnswerService>) -> axum::Router {
    axum::Router::new()
        .route("/v1/collections/:name/ask", post(ask))
        .with_state(service)
        .layer(axum::middleware::from_fn(http_middleware))
}

async fn ask(
    State(service): State<Arc<AnswerService>>,
    Extension(RequestId(request_id)): Extension<RequestId>,
    Path(collection): Path<String>,
    body: Result<Json<AskBody>, JsonRejection>,
) -> Result<Response, AnswerError> {
    let Json(body) =
        body.map_err(|e| AnswerError::Callee(attest_telemetry::http_error::json_rejection(e)))?;
    let answer = service
        .ask(&collection, &body.question, &request_id)
        .await?;
    if !body.stream {
        return Ok(Json(answer).into_response());
    }
    let mut events: Vec<Result<Event, Infallible>> = split_claims(&answer.answer)
        .iter()
        .zip(answer.claims.iter())
        .map(|(_, claim)| {
            Ok(Event::default()
                .event("delta")
                .data(json!({"text": claim.text, "citations": claim.citations}).to_string()))
        })
        .collect();
    events.push(Ok(Event::default()
        .event("done")
        .data(serde_json::to_string(&answer).unwrap_or_default())));
    Ok(Sse::new(futures::stream::iter(events)).into_response())
}
