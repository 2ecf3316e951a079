//! The web console: plain HTML, CSS and JavaScript modules (`crates/attest-api/console/`, no build step)
//! compiled into the binary and served at `/` (the page) and `/console/{file}` (its assets) by every process that
//! serves the router's HTTP routes — the router role and `attest dev`.
//!
//! The routes are open: the console holds no data and no secret. In the browser it calls only the public HTTP
//! API v1 of the same origin, with the key the user types (kept in `sessionStorage`, for the tab only) sent as
//! `Authorization: Bearer <key>`, so it can do exactly what that key may do. Its Content-Security-Policy admits
//! nothing but this origin: no CDN, font or script from elsewhere can be loaded, even by mistake.

use axum::extract::Path;
use axum::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// One embedded file: its name under `/console/`, media type and bytes.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $type:expr) => {
        Asset {
            name: $name,
            content_type: $type,
            bytes: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/console/", $name)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file of the console. A file added under `console/` must be listed here to be served.
static ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("console.css", "text/css; charset=utf-8"),
    asset!("js/app.js", JS),
    asset!("js/api.js", JS),
    asset!("js/ui.js", JS),
    asset!("js/collections.js", JS),
    asset!("js/ingest.js", JS),
    asset!("js/search.js", JS),
    asset!("js/ask.js", JS),
    asset!("js/cluster.js", JS),
    asset!("js/quality.js", JS),
];

/// Only this origin; `connect-src 'self'` keeps the API calls on it too.
const CSP: &str = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; \
                   connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// `GET /` and `GET /console/{*file}`, no key needed.
pub fn routes() -> axum::Router {
    axum::Router::new()
        .route("/", get(|| async { serve("index.html") }))
        .route(
            "/console/*file",
            get(|Path(file): Path<String>| async move { serve(&file) }),
        )
}

fn find(name: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.name == name)
}

fn serve(name: &str) -> Response {
    let Some(asset) = find(name) else {
        return (
            StatusCode::NOT_FOUND,
            [(CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("no console file `{name}`\n"),
        )
            .into_response();
    };
    let mut resp = asset.bytes.into_response();
    let headers = resp.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(asset.content_type));
    // The files change with the binary, not while it runs; revalidating keeps an upgraded node's console current.
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::{to_bytes, Body};
    use axum::http::Request;
    use tower::ServiceExt;

    async fn get(uri: &str) -> (StatusCode, String, String) {
        let resp = routes()
            .oneshot(Request::get(uri).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let ct = resp
            .headers()
            .get(CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let status = resp.status();
        let body = to_bytes(resp.into_body(), 1 << 20).await.unwrap();
        (status, ct, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn serves_the_page_at_the_root() {
        let (status, ct, body) = get("/").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(ct, "text/html; charset=utf-8");
        assert!(body.contains("<script type=\"module\" src=\"/console/js/app.js\">"));
    }

    #[tokio::test]
    async fn serves_assets_with_their_types() {
        assert_eq!(
            get("/console/console.css").await.1,
            "text/css; charset=utf-8"
        );
        let (status, ct, body) = get("/console/js/app.js").await;
        assert_eq!((status, ct.as_str()), (StatusCode::OK, JS));
        assert!(body.contains("import"));
    }

    #[tokio::test]
    async fn unknown_files_are_not_found() {
        for uri in ["/console/nope.js", "/console/../Cargo.toml", "/console/js/"] {
            assert_eq!(get(uri).await.0, StatusCode::NOT_FOUND, "{uri}");
        }
    }

    #[test]
    fn every_module_the_page_imports_is_embedded() {
        // An import of a file missing from ASSETS would fail in the browser only; catch it here.
        for asset in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
            let text = std::str::from_utf8(asset.bytes).unwrap();
            for line in text.lines().filter(|l| l.starts_with("import ")) {
                let target = line.split('"').nth(1).expect("import \"./x.js\"");
                let name = format!("js/{}", target.trim_start_matches("./"));
                assert!(find(&name).is_some(), "{} imports {name}", asset.name);
            }
        }
    }

    #[test]
    fn no_external_urls_in_the_console() {
        for asset in ASSETS {
            // The SVG namespace is a name, never fetched.
            let text =
                String::from_utf8_lossy(asset.bytes).replace("http://www.w3.org/2000/svg", "");
            assert!(
                !text.contains("https://") && !text.contains("http://"),
                "{} refers to another origin",
                asset.name
            );
        }
    }
}
