//! Measures a replica's snapshot and restore against the baselines of issue 17, in one run: the snapshot
//! (`ShardEngine::snapshot`: checkpoint, hard links, sha256 of every file) and the restore (verify + copy +
//! open) against `cp -r` of the same shard directory, and the restore against re-ingesting the same corpus with
//! its vectors supplied (upsert + seal). Vectors are random unit 384-d, one chunk of ~60 bytes of text each, all
//! sealed into one IVF_PQ segment (the default parameters).
//!
//!     cargo run --example snapshot_speed -p attest-index [-- VECTORS [DIR]]     # default 1000000, a temp dir
//!
//! Prints one JSON object (sizes in MB, times in seconds, throughputs in MB/s, ratios against the baselines).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use attest_index::snapshot;
use attest_index::{DocumentWrite, EngineConfig, LoggedChunk, ShardEngine};
use rand::{Rng, SeedableRng};

const DIM: usize = 384;

fn corpus(n: usize) -> Vec<DocumentWrite> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(17);
    (0..n)
        .map(|i| {
            let v: Vec<f32> = (0..DIM).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            DocumentWrite {
                doc_id: format!("doc-{i}"),
                tenant: "t".into(),
                chunks: vec![LoggedChunk {
                    chunk_id: format!("doc-{i}#0"),
                    title: format!("Document {i}"),
                    text: format!("passage number {i} of the snapshot benchmark corpus"),
                    metadata_json: "{}".into(),
                    vector: v.into_iter().map(|x| x / norm).collect(),
                }],
                version: 0,
                near_dup: None,
            }
        })
        .collect()
}

fn config(n: usize) -> EngineConfig {
    EngineConfig {
        dimension: DIM,
        // One seal at the end: the segment layout of a shard that has been compacted.
        seal_threshold: n + 1,
        ..Default::default()
    }
}

/// Ingests `docs` (batches of 10,000) and seals; seconds taken.
fn ingest(
    dir: &Path,
    docs: &[DocumentWrite],
) -> Result<(std::sync::Arc<ShardEngine>, f64), Box<dyn std::error::Error>> {
    let started = Instant::now();
    let engine = ShardEngine::open(dir, config(docs.len()))?;
    for batch in docs.chunks(10_000) {
        engine.upsert(batch.to_vec())?;
    }
    engine.seal()?;
    Ok((engine, started.elapsed().as_secs_f64()))
}

fn du_mb(dir: &Path) -> f64 {
    fn walk(p: &Path) -> u64 {
        std::fs::read_dir(p)
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| match e.file_type() {
                        Ok(t) if t.is_dir() => walk(&e.path()),
                        _ => e.metadata().map_or(0, |m| m.len()),
                    })
                    .sum()
            })
            .unwrap_or(0)
    }
    walk(dir) as f64 / 1e6
}

fn timed(f: impl FnOnce()) -> f64 {
    let started = Instant::now();
    f();
    started.elapsed().as_secs_f64()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(Ok(1_000_000), |a| a.parse())?;
    let temp = tempfile::tempdir()?;
    let root = std::env::args()
        .nth(2)
        .map_or_else(|| temp.path().to_path_buf(), Into::into);
    let docs = corpus(n);
    eprintln!("ingesting and sealing {n} vectors…");
    let (engine, ingest_s) = ingest(&root.join("source"), &docs)?;
    // Quiesce: the shard directory as it rests (RocksDB flushed by the snapshot's checkpoint anyway).
    let shard_mb = du_mb(&root.join("source"));

    let cp_s = timed(|| {
        let status = Command::new("cp")
            .arg("-r")
            .arg(root.join("source"))
            .arg(root.join("copy"))
            .status()
            .expect("cp");
        assert!(status.success());
    });
    let mut taken = None;
    let snapshot_s = timed(|| taken = Some(engine.snapshot(&root.join("snap")).expect("snapshot")));
    let taken = taken.expect("snapshot taken");
    let snapshot_mb = taken.total_bytes() as f64 / 1e6;
    let restore_s = timed(|| {
        snapshot::restore(&root.join("snap"), &root.join("restored")).expect("restore");
        ShardEngine::open(&root.join("restored"), config(n)).expect("open restored");
    });
    drop(engine);
    let (_, reingest_s) = ingest(&root.join("reingested"), &docs)?;

    let report = serde_json::json!({
        "vectors": n,
        "shard_mb": shard_mb,
        "snapshot_mb": snapshot_mb,
        "ingest_and_seal_s": ingest_s,
        "cp_r_s": cp_s,
        "cp_r_mb_per_s": shard_mb / cp_s,
        "snapshot_s": snapshot_s,
        "snapshot_mb_per_s": snapshot_mb / snapshot_s,
        "snapshot_vs_cp_r": snapshot_s / cp_s,
        "restore_s": restore_s,
        "restore_mb_per_s": snapshot_mb / restore_s,
        "restore_vs_cp_r": restore_s / cp_s,
        "reingest_with_vectors_s": reingest_s,
        "restore_vs_reingest": restore_s / reingest_s,
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
