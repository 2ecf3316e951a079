//! `POST /v1/collections/{name}/ask`: `{question, history?: [{role, content}], stream?, tenant?}` → the answer as
//! JSON, or with `stream: true` as Server-Sent Events: `sources` as soon as the first retrieval is ranked (the
//! passages, before they are read), one `delta` event per claim of the answer, then `done` with the whole
//! response (`error` instead when the turn fails after `sources`).
//! The route needs the `read` scope; the turn acts as the caller's key (its tenant, its credential). The
//! handler's `#[utoipa::path]` and the `ToSchema` of the types below are its part of the OpenAPI document
//! ([`crate::answer::openapi`]).

use std::convert::Infallible;
use std::sync::Arc;

use attest_answer::cite::CheckedClaim;
use attest_answer::client::Caller;
use attest_answer::conversation::HistoryTurn;
use attest_answer::error::AnswerError;
use attest_answer::pipeline::{AnswerService, AskResponse};
use attest_answer::verdict::Verdict;
use attest_auth::{KeyRing, Principal, Scope};
use attest_telemetry::http_error::ErrorBody;
use attest_telemetry::request_id::{http_middleware, RequestId};
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::answer::openapi::AskEvent;
use crate::answer::streamed::StreamedTurn;

/// Any other field is refused with a 400 naming it (`colour`, `history[0].colour`): a misspelt `stream` or
/// `tenant` is never silently dropped.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AskBody {
    question: String,
    /// Answer as Server-Sent Events (`text/event-stream`) instead of one JSON body.
    #[serde(default)]
    stream: bool,
    /// Default: the key's only tenant, else the default tenant.
    #[serde(default)]
    #[schema(schema_with = attest_core::contract::optional_tenant)]
    tenant: Option<String>,
    /// Earlier turns of the conversation, oldest first.
    #[serde(default)]
    history: Vec<WireTurn>,
}

fn role() -> utoipa::openapi::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(attest_answer::conversation::ROLES))
        .build()
}

/// One earlier turn of a conversation.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WireTurn {
    #[schema(schema_with = role)]
    role: String,
    content: String,
}

/// The data of one `delta` event of a streamed answer: a claim of the answer text, as verified.
#[derive(Serialize, ToSchema)]
pub struct AskDelta {
    pub text: String,
    /// The footnotes `[n]` the claim cites (`citations[].n` of the final response).
    pub citations: Vec<u32>,
    pub verdict: Verdict,
}

impl From<&CheckedClaim> for AskDelta {
    fn from(claim: &CheckedClaim) -> Self {
        AskDelta {
            text: claim.text.clone(),
            citations: claim.citations.clone(),
            verdict: claim.verdict,
        }
    }
}

pub fn routes(service: Arc<AnswerService>) -> axum::Router {
    api(Arc::clone(service.keys()))
        .with_state(service)
        .layer(axum::middleware::from_fn(http_middleware))
}

/// The routes before their state is given (so [`crate::answer::openapi`]'s test lists them without a service).
pub(crate) fn api(keys: Arc<KeyRing>) -> axum::Router<Arc<AnswerService>> {
    let guard =
        axum::middleware::from_fn_with_state((keys, Scope::Read), attest_auth::http::require);
    axum::Router::new().route("/v1/collections/:name/ask", post(ask).route_layer(guard))
}

/// Asks a question of a collection (with the conversation so far, if any): a grounded answer whose every claim
/// cites passages retrieved in this turn, each claim with its verdict, or an abstention with its reason.
#[utoipa::path(post, path = "/v1/collections/{name}/ask", tag = "answer", operation_id = "ask",
    params(("name" = String, Path, description = "The collection.")), request_body = AskBody,
    security(("bearer_auth" = ["read"])),
    responses(
        (status = 200, description = "The answer, or the abstention (`status`, `reason`). With `stream: true`, \
            Server-Sent Events instead: `sources` as soon as the first retrieval is ranked (data: `AskSources`), \
            one `delta` event per claim of an answer (data: `AskDelta`), then one `done` event (data: the \
            `AskResponse`); a failure after `sources` ends the stream with an `error` event (data: `ErrorBody`).",
            content((AskResponse = "application/json"), (AskEvent = "text/event-stream"))),
        (status = 404, description = "NOT_FOUND: no such collection.", body = ErrorBody),
        (status = 429, description = "RESOURCE_EXHAUSTED: the router or a shard shed the load.", body = ErrorBody),
    ))]
pub(crate) async fn ask(
    State(service): State<Arc<AnswerService>>,
    Extension(RequestId(request_id)): Extension<RequestId>,
    Extension(principal): Extension<Principal>,
    Path(collection): Path<String>,
    body: Result<Json<AskBody>, JsonRejection>,
) -> Result<Response, AnswerError> {
    let Json(body) =
        body.map_err(|e| AnswerError::Callee(attest_telemetry::http_error::json_rejection(e)))?;
    let caller = Caller::of(&principal, &collection, body.tenant.as_deref())?;
    let history = body
        .history
        .iter()
        .map(|t| HistoryTurn::parse(&t.role, &t.content))
        .collect::<Result<Vec<_>, _>>()?;
    if !body.stream {
        let answer = service
            .ask_in_conversation(&caller, &collection, &body.question, &history, &request_id)
            .await?;
        return Ok(Json(answer).into_response());
    }
    // Streamed: `sources` goes out while the turn reads, generates and verifies.
    let mut turn = StreamedTurn::start(
        service,
        caller,
        collection,
        body.question,
        history,
        request_id,
    );
    let Some(first) = turn.sources().await else {
        // The turn ended before retrieving (or failed): an error keeps its HTTP status, as unstreamed.
        let answer = turn.ended().await?;
        return Ok(Sse::new(futures::stream::iter(answer_events(&answer))).into_response());
    };
    let head = futures::stream::iter([event("sources", &first)]);
    let tail = futures::stream::once(async move {
        match turn.ended().await {
            Ok(answer) => answer_events(&answer),
            // Too late for a status: the error is the stream's last event, as `{"error": {...}}`.
            Err(e) => vec![event("error", &ErrorBody::from(e.api()))],
        }
    })
    .flat_map(futures::stream::iter);
    Ok(Sse::new(head.chain(tail)).into_response())
}

/// One SSE event with `data` as JSON.
fn event(name: &str, data: &impl Serialize) -> Result<Event, Infallible> {
    Ok(Event::default()
        .event(name)
        .data(serde_json::to_string(data).unwrap_or_default()))
}

/// A finished turn as events: one `delta` per claim, then `done` with the whole response. One delta per claim,
/// from the claims themselves: pairing them with the answer's sentences would drop the claims beyond the
/// sentence count whenever the text splits into fewer sentences than there are claims. A claim is sent only
/// once the turn has decided to answer with it: a claim shown and then withdrawn would be an answer the
/// passages did not support.
fn answer_events(answer: &AskResponse) -> Vec<Result<Event, Infallible>> {
    let claims = if answer.status == "answered" {
        answer.claims.as_slice()
    } else {
        &[]
    };
    let mut events: Vec<_> = claims
        .iter()
        .map(|claim| event("delta", &AskDelta::from(claim)))
        .collect();
    events.push(event("done", answer));
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused_field(body: &str) -> Option<String> {
        let e = Json::<AskBody>::from_bytes(body.as_bytes()).err()?;
        attest_telemetry::http_error::json_rejection(e).field
    }

    #[test]
    fn unknown_fields_of_an_ask_are_refused_by_name() {
        assert!(refused_field(r#"{"question": "q", "stream": true, "tenant": "t"}"#).is_none());
        assert_eq!(
            refused_field(r#"{"question": "q", "colour": "red"}"#).as_deref(),
            Some("colour")
        );
        assert_eq!(
            refused_field(
                r#"{"question": "q", "history": [{"role": "user", "content": "c", "at": 1}]}"#
            )
            .as_deref(),
            Some("history[0].at")
        );
    }
}
