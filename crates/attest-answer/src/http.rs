//! `POST /v1/collections/{name}/ask`: `{question, history?: [{role, content}], stream?, tenant?}` → the answer as
//! JSON, or with `stream: true` as Server-Sent Events: one `delta` event per claim of the answer text, then `done`
//! with the whole response.
//! The route needs the `read` scope; the turn acts as the caller's key (its tenant, its credential).

use std::convert::Infallible;
use std::sync::Arc;

use attest_auth::{Principal, Scope};
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
use crate::client::Caller;
use crate::conversation::HistoryTurn;
use crate::error::AnswerError;
use crate::pipeline::AnswerService;

/// Any other field is refused with a 400 naming it (`colour`, `history[0].colour`): a misspelt `stream` or
/// `tenant` is never silently dropped.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AskBody {
    question: String,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    tenant: Option<String>,
    /// Earlier turns of the conversation, oldest first.
    #[serde(default)]
    history: Vec<WireTurn>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireTurn {
    role: String,
    content: String,
}

pub fn routes(service: Arc<AnswerService>) -> axum::Router {
    let guard = axum::middleware::from_fn_with_state(
        (Arc::clone(service.keys()), Scope::Read),
        attest_auth::http::require,
    );
    axum::Router::new()
        .route("/v1/collections/:name/ask", post(ask).route_layer(guard))
        .with_state(service)
        .layer(axum::middleware::from_fn(http_middleware))
}

async fn ask(
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
    let answer = service
        .ask_in_conversation(&caller, &collection, &body.question, &history, &request_id)
        .await?;
    if !body.stream {
        return Ok(Json(answer).into_response());
    }
    let mut events: Vec<Result<Event, Infallible>> = split_claims(&answer.answer)
        .iter()
        .zip(answer.claims.iter())
        .map(|(_, claim)| {
            Ok(Event::default().event("delta").data(
                json!({"text": claim.text, "citations": claim.citations, "verdict": claim.verdict})
                    .to_string(),
            ))
        })
        .collect();
    events.push(Ok(Event::default()
        .event("done")
        .data(serde_json::to_string(&answer).unwrap_or_default())));
    Ok(Sse::new(futures::stream::iter(events)).into_response())
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
