//! Compiles `proto/attest/v1/*.proto` once for every role.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read at run time, not with env!(): a build-script binary cached in a shared target directory
    // may have been compiled from a checkout at another path.
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR")?;
    let root = std::path::Path::new(&manifest_dir).join("../../proto");
    let files = [
        "attest/v1/common.proto",
        "attest/v1/shard.proto",
        "attest/v1/router.proto",
        "attest/v1/answer.proto",
        "attest/v1/meta.proto",
    ];
    for f in &files {
        println!("cargo:rerun-if-changed={}", root.join(f).display());
    }
    let paths: Vec<_> = files.iter().map(|f| root.join(f)).collect();
    tonic_build::configure().compile_protos(&paths, &[root])?;
    Ok(())
}
