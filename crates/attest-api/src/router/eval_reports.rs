//! `GET /v1/collections/{name}/eval` (read scope): the latest `attest-lab eval --json` report of a collection, for the
//! web console's Quality page. Reports are files an operator (or a CI job) puts in the router's
//! `router.eval_reports_dir`: `DIR/{name}.json`, or any number of `DIR/{name}/*.json` of which the most recently
//! modified is the latest. The router only reads them; with no directory configured or no report stored the answer
//! is 404, and the console falls back to a report loaded in the browser.

use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;

use attest_auth::Principal;
use attest_router::access;
use attest_router::error::RouterError;
use attest_router::router::Router;
use axum::extract::{Path, State};
use axum::{Extension, Json};
use serde_json::Value;

/// Largest report read (a `--sweep` report with every curve is a few hundred kB).
const MAX_REPORT_BYTES: u64 = 16 * 1024 * 1024;

/// The latest `attest-lab eval --json` report stored for the collection (its shape is `attest-lab eval`'s, which this
/// router passes through unread).
#[utoipa::path(get, path = "/v1/collections/{name}/eval", tag = "collections", operation_id = "eval_report",
    params(("name" = String, Path, description = "The collection.")), security(("bearer_auth" = ["read"])),
    responses(
        (status = 200, description = "The report, as `attest-lab eval --json` wrote it.", body = Object),
        (status = 404, description = "NOT_FOUND: no report stored for it, or no report directory configured.",
            body = attest_telemetry::http_error::ErrorBody),
    ))]
pub async fn latest(
    State(r): State<Arc<Router>>,
    Extension(p): Extension<Principal>,
    Path(name): Path<String>,
) -> Result<Json<Value>, RouterError> {
    access::collection(&p, &name)?;
    let dir = r.config().eval_reports_dir.clone();
    let found = tokio::task::spawn_blocking(move || latest_report(dir.as_deref(), &name))
        .await
        .map_err(|e| RouterError::Internal(e.to_string()))??;
    Ok(Json(found))
}

/// The newest report of `name` under `dir`.
pub fn latest_report(dir: Option<&FsPath>, name: &str) -> Result<Value, RouterError> {
    if let Some(problem) = attest_core::limits::collection_name_problem(name) {
        return Err(RouterError::invalid("name", problem));
    }
    let Some(dir) = dir else {
        return Err(RouterError::NotFound(
            "no eval reports on this router (router.eval_reports_dir is not set)".into(),
        ));
    };
    let mut candidates: Vec<PathBuf> = vec![dir.join(format!("{name}.json"))];
    if let Ok(entries) = std::fs::read_dir(dir.join(name)) {
        candidates.extend(
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "json")),
        );
    }
    let newest = candidates
        .into_iter()
        .filter_map(|p| {
            let meta = std::fs::metadata(&p).ok().filter(|m| m.is_file())?;
            Some((meta.modified().ok()?, meta.len(), p))
        })
        .max();
    let Some((_, len, path)) = newest else {
        return Err(RouterError::NotFound(format!(
            "no eval report stored for `{name}`"
        )));
    };
    if len > MAX_REPORT_BYTES {
        return Err(RouterError::Internal(format!(
            "{} is larger than {MAX_REPORT_BYTES} bytes",
            path.display()
        )));
    }
    let bytes = std::fs::read(&path).map_err(|e| RouterError::Internal(e.to_string()))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| RouterError::Internal(format!("{} is not JSON: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_report_of_the_collection_is_served() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            latest_report(Some(dir.path()), "docs"),
            Err(RouterError::NotFound(_))
        ));
        std::fs::write(dir.path().join("docs.json"), r#"{"run": 1}"#).unwrap();
        assert_eq!(latest_report(Some(dir.path()), "docs").unwrap()["run"], 1);
        std::fs::create_dir(dir.path().join("docs")).unwrap();
        let newer = dir.path().join("docs").join("2026-11-25.json");
        std::fs::write(&newer, r#"{"run": 2}"#).unwrap();
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(&newer)
            .unwrap()
            .set_modified(later)
            .unwrap();
        assert_eq!(latest_report(Some(dir.path()), "docs").unwrap()["run"], 2);
        assert!(matches!(
            latest_report(Some(dir.path()), "other"),
            Err(RouterError::NotFound(_))
        ));
    }

    #[test]
    fn no_directory_or_a_path_for_a_name_is_refused() {
        assert!(matches!(
            latest_report(None, "docs"),
            Err(RouterError::NotFound(_))
        ));
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            latest_report(Some(dir.path()), "../etc"),
            Err(RouterError::InvalidArgument { .. })
        ));
    }
}
