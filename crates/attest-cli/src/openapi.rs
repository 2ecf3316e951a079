//! The OpenAPI document of `attest dev`, whose one HTTP listener serves the router's and the answer tier's
//! routes: both parts assembled by `attest_telemetry::openapi::document`, the same function each standalone role
//! uses for its own. `attest openapi` prints it (`make openapi` writes docs/openapi.json, which a test of
//! tests/e2e.rs holds to what `attest dev` serves).

use utoipa::openapi::OpenApi;

use crate::cli::OpenapiArgs;

/// What `attest dev` serves at `/v1/openapi.json`.
pub fn dev_document() -> OpenApi {
    attest_telemetry::openapi::document([
        attest_router::openapi::paths(),
        attest_answer::openapi::paths(),
    ])
}

/// `attest openapi [--out FILE]`.
pub fn command(args: OpenapiArgs) -> anyhow::Result<()> {
    let json = attest_telemetry::openapi::to_json(&dev_document());
    match args.out {
        Some(path) => std::fs::write(&path, json)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display())),
        None => {
            print!("{json}");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Merging keeps the first schema of a name and drops the other's: two parts naming different types alike
    /// would lose one silently.
    #[test]
    fn the_parts_share_no_schema_name_with_a_different_shape() {
        let schemas = |doc: OpenApi| doc.components.unwrap_or_default().schemas;
        let router = schemas(attest_router::openapi::paths());
        for (name, schema) in schemas(attest_answer::openapi::paths()) {
            if let Some(other) = router.get(&name) {
                assert_eq!(
                    serde_json::to_value(other).unwrap(),
                    serde_json::to_value(&schema).unwrap(),
                    "schema `{name}` differs between the router's and the answer tier's documents"
                );
            }
        }
        let paths = dev_document().paths.paths;
        assert!(paths.contains_key("/v1/collections/{name}/ask"));
        assert!(paths.contains_key("/v1/collections/{name}/search"));
    }
}
