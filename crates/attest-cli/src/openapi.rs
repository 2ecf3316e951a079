//! `attest openapi`: prints the OpenAPI document `attest dev` serves ([`attest_node::dev::openapi_document`];
//! `make openapi` writes docs/openapi.json, which a test of tests/cli.rs holds to what `attest dev` serves).

use crate::cli::OpenapiArgs;

/// `attest openapi [--out FILE]`.
pub fn command(args: OpenapiArgs) -> anyhow::Result<()> {
    let json = attest_telemetry::openapi::to_json(&attest_node::dev::openapi_document(
        &attest_node::config::AttestConfig::default(),
    ));
    match args.out {
        Some(path) => std::fs::write(&path, json)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display())),
        None => {
            print!("{json}");
            Ok(())
        }
    }
}
