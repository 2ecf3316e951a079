//! Compiles `proto/attest/v1/*.proto` once for every role.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let files = [
        "attest/v1/common.proto",
        "attest/v1/shard.proto",
        "attest/v1/router.proto",
    ];
    for f in &files {
        println!("cargo:rerun-if-changed={}", root.join(f).display());
    }
    let paths: Vec<_> = files.iter().map(|f| root.join(f)).collect();
    tonic_build::configure().compile_protos(&paths, &[root])?;
    Ok(())
}
