//! The answer tier's part of the OpenAPI 3.1 document of HTTP API v1: `POST /v1/collections/{name}/ask` from the
//! `#[utoipa::path]` on its handler, with the types it reads and sends (`AskResponse`, and `AskDelta`, the data
//! of a streamed answer's `delta` events). [`document`] is what an answer replica serves at
//! `GET /v1/openapi.json`; `attest dev` serves these paths merged with the router's.

use std::borrow::Cow;

use attest_answer::config::AnswerConfig;
use attest_answer::pipeline::{AskSources, Retrieved};
use attest_telemetry::openapi::limits::constrain;
use serde_json::json;
use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::openapi::{OpenApi, RefOr};
use utoipa::OpenApi as _;

use crate::answer::http::{self, AskDelta};

/// One Server-Sent Event of a streamed answer, as a client parses it (`{event, data}`): `sources` (an
/// [`AskSources`]), `delta` events whose data is an [`AskDelta`] in JSON, then one `done` whose data is the whole
/// `AskResponse` (or a last `error`). OpenAPI describes an event
/// stream by the schema of one event; each event's `data` is JSON text, described by `contentMediaType` and
/// `contentSchema` (JSON Schema 2020-12, which OpenAPI 3.1 schemas are).
pub struct AskEvent;

impl utoipa::PartialSchema for AskEvent {
    fn schema() -> RefOr<Schema> {
        let event = |name: &str, payload: &str| {
            let mut data = ObjectBuilder::new()
                .schema_type(Type::String)
                .content_media_type("application/json")
                .build();
            let mut content_schema = Extensions::default();
            content_schema.insert(
                "contentSchema".into(),
                serde_json::json!({ "$ref": format!("#/components/schemas/{payload}") }),
            );
            data.extensions = Some(content_schema);
            ObjectBuilder::new()
                .property(
                    "event",
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .enum_values(Some([name])),
                )
                .required("event")
                .property("data", data)
                .required("data")
                .build()
        };
        RefOr::T(Schema::OneOf(
            OneOfBuilder::new()
                .item(event("sources", "AskSources"))
                .item(event("delta", "AskDelta"))
                .item(event("done", "AskResponse"))
                .item(event("error", "ErrorBody"))
                .description(Some(
                    "One event of a streamed answer: first `sources` (the first retrieval's passages, as \
                     `AskSources` JSON, before they are read; absent when the turn retrieves nothing), then a \
                     `delta` per claim of an answer (`AskDelta` JSON), then the final `done` (the `AskResponse` \
                     JSON) — or, for a failure after `sources`, a final `error` (`ErrorBody` JSON).",
                ))
                .build(),
        ))
    }
}

impl utoipa::ToSchema for AskEvent {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("AskEvent")
    }
}

#[derive(utoipa::OpenApi)]
#[openapi(
    paths(http::ask),
    components(schemas(AskDelta, AskEvent, AskSources, Retrieved))
)]
struct AnswerApi;

/// The answer tier's own operations and schemas, with the limits of its `config` stated, to be assembled with
/// the shared parts.
pub fn paths(config: &AnswerConfig) -> OpenApi {
    constrain(
        AnswerApi::openapi(),
        &[(
            "AskBody",
            "question",
            json!({
                "minLength": 1,
                "maxLength": config.max_question_bytes,
                "pattern": attest_core::contract::NOT_BLANK_PATTERN
            }),
        )],
    )
}

/// The document an answer replica with this `config` serves.
pub fn document(config: &AnswerConfig) -> OpenApi {
    attest_telemetry::openapi::document([paths(config)])
}

#[cfg(test)]
mod tests {
    use attest_telemetry::openapi::{documented_routes, registered_routes};

    use super::*;

    #[test]
    fn every_registered_route_is_documented_and_every_documented_one_is_registered() {
        let doc = document(&AnswerConfig::default());
        let app = attest_telemetry::openapi::route(&doc).merge(attest_telemetry::ops::routes(
            attest_telemetry::ops::always_ready(),
            None,
        ));
        let mut registered = registered_routes(&http::api(attest_auth::KeyRing::open()));
        registered.extend(registered_routes(&app));
        assert_eq!(registered, documented_routes(&doc));
        let json = serde_json::to_value(&doc).unwrap();
        let ask = &json["paths"]["/v1/collections/{name}/ask"]["post"];
        assert!(
            ask["responses"]["200"]["content"]["text/event-stream"].is_object(),
            "{ask}"
        );
        assert!(json["components"]["schemas"]["AskDelta"].is_object());
    }
}
