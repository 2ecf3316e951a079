//! What the benchmark examples share: finding the `attest` binary they start roles with.

use std::path::{Path, PathBuf};

use anyhow::Context;

/// `$ATTEST_BIN`, else the `attest` binary of the same build as this example (`target/<profile>/attest`).
pub fn attest_bin() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("ATTEST_BIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe()?;
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .context("example directory")?
        .join("attest");
    anyhow::ensure!(
        bin.exists(),
        "{} not found: build with `cargo build --workspace --all-targets` or set ATTEST_BIN",
        bin.display()
    );
    Ok(bin)
}
