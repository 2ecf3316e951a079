//! How long a search's payload fetch (`ShardEngine::fetch_chunks`, 10 chunks) takes on its own and while a writer
//! upserts batches of 200 documents back to back (each a synced log append): the fetch reads without the writer
//! lock, so it must not queue behind the appends.
//!
//! `$CARGO_TARGET_DIR/debug/examples/fetch_under_ingest [FETCHES]` prints p50 / p99 in ms of both phases as JSON.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use attest_index::{DocumentWrite, EngineConfig, IvfPqParams, LoggedChunk, ShardEngine};

const DIM: usize = 16;

fn doc(d: usize, version: usize) -> DocumentWrite {
    let v: Vec<f32> = (0..DIM)
        .map(|i| ((d * 31 + i * 7) % 17) as f32 + 1.0)
        .collect();
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    DocumentWrite {
        doc_id: format!("doc-{d}"),
        tenant: "t".into(),
        chunks: vec![LoggedChunk {
            chunk_id: format!("doc-{d}#0"),
            title: format!("Title {d}"),
            text: format!("document {d} version {version} {}", "text ".repeat(100)),
            metadata_json: "{}".into(),
            vector: v.into_iter().map(|x| x / n).collect(),
        }],
        version: 0,
        near_dup: None,
    }
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1]
}

fn main() {
    let fetches: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("FETCHES is a number"))
        .unwrap_or(100_000);
    let dir = tempfile::tempdir().unwrap();
    let config = EngineConfig {
        dimension: DIM,
        ivfpq: IvfPqParams {
            nlist: 16,
            m: 4,
            nbits: 8,
            nprobe: 16,
        },
        seal_threshold: 1_000_000,
        ..EngineConfig::default()
    };
    let e = ShardEngine::open(dir.path(), config).unwrap();
    e.upsert((0..1000).map(|d| doc(d, 0)).collect()).unwrap();
    let wanted: Vec<(String, String)> = (0..10)
        .map(|d| (format!("doc-{}", d * 97), format!("doc-{}#0", d * 97)))
        .collect();
    let time = |n: usize| -> Vec<f64> {
        (0..n)
            .map(|_| {
                let t = Instant::now();
                assert_eq!(e.fetch_chunks("t", &wanted).unwrap().len(), 10);
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect()
    };
    let mut alone = time(fetches);
    let writing = AtomicBool::new(true);
    let mut beside = std::thread::scope(|s| {
        s.spawn(|| {
            let mut version = 1;
            while writing.load(Ordering::SeqCst) {
                e.upsert((1000..1200).map(|d| doc(d, version)).collect())
                    .unwrap();
                version += 1;
            }
        });
        let t = time(fetches);
        writing.store(false, Ordering::SeqCst);
        t
    });
    println!(
        "{}",
        serde_json::json!({
            "fetches": fetches,
            "alone_p50_ms": percentile(&mut alone, 0.5), "alone_p99_ms": percentile(&mut alone, 0.99),
            "beside_writes_p50_ms": percentile(&mut beside, 0.5), "beside_writes_p99_ms": percentile(&mut beside, 0.99),
        })
    );
}
