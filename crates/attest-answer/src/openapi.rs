//! The answer tier's part of the OpenAPI 3.1 document of HTTP API v1: `POST /v1/collections/{name}/ask` from the
//! `#[utoipa::path]` on its handler, with the types it reads and sends (`AskResponse`, and `AskDelta`, the data
//! of a streamed answer's `delta` events). [`document`] is what an answer replica serves at
//! `GET /v1/openapi.json`; `attest dev` serves these paths merged with the router's.

use utoipa::openapi::OpenApi;
use utoipa::OpenApi as _;

use crate::http::{self, AskDelta};

#[derive(utoipa::OpenApi)]
#[openapi(paths(http::ask), components(schemas(AskDelta)))]
struct AnswerApi;

/// The answer tier's own operations and schemas, to be assembled with the shared parts.
pub fn paths() -> OpenApi {
    AnswerApi::openapi()
}

/// The document an answer replica serves.
pub fn document() -> OpenApi {
    attest_telemetry::openapi::document([paths()])
}

#[cfg(test)]
mod tests {
    use attest_telemetry::openapi::{documented_routes, registered_routes};

    use super::*;

    #[test]
    fn every_registered_route_is_documented_and_every_documented_one_is_registered() {
        let doc = document();
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
