//! Benchmark: local embedding throughput (texts/s) of the candle MiniLM model at batch 1 and batch 32, on the
//! bundled squad-sample paragraphs (real chunk lengths) and on its questions (real query lengths); then the
//! passages embedded in one call, as an ingest does, for several batch sizes and thread counts against the
//! default (batch 32, one thread) in the same run.
//!
//! `cargo run -p attest-embed --example embed_throughput [TEXTS]` — prints one JSON object.

use std::path::Path;
use std::time::Instant;

use attest_embed::{Embedder, LocalEmbedderConfig, MiniLmEmbedder};
use serde_json::{json, Value};

fn texts_of(file: &Path, field: &str, limit: usize) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v[field].as_str().map(str::to_string))
        .take(limit)
        .collect()
}

/// Texts per second embedding `texts` in batches of `batch`.
fn throughput(model: &MiniLmEmbedder, texts: &[String], batch: usize) -> f64 {
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let started = Instant::now();
    for b in refs.chunks(batch) {
        model.embed(b).expect("embedding");
    }
    texts.len() as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("TEXTS is a number"))
        .unwrap_or(64);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/squad-sample");
    let model = MiniLmEmbedder::from_config(&LocalEmbedderConfig::default()).expect("model");
    let passages = texts_of(&root.join("corpus.jsonl"), "text", n);
    let questions = texts_of(&root.join("queries.jsonl"), "text", n);
    let mean_tokens = |t: &[String]| {
        t.iter().map(|x| model.count_tokens(x)).sum::<usize>() as f64 / t.len() as f64
    };
    throughput(&model, &passages[..8.min(passages.len())], 8); // warm-up
    let report = json!({
        "threads": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "passages": {"texts": passages.len(), "mean_tokens": mean_tokens(&passages),
            "batch_1_texts_per_s": throughput(&model, &passages, 1),
            "batch_32_texts_per_s": throughput(&model, &passages, 32)},
        "questions": {"texts": questions.len(), "mean_tokens": mean_tokens(&questions),
            "batch_1_texts_per_s": throughput(&model, &questions, 1),
            "batch_32_texts_per_s": throughput(&model, &questions, 32)},
    });
    println!("{report}");
    let refs: Vec<&str> = passages.iter().map(String::as_str).collect();
    let one_call = |batch_size: usize, threads: usize| -> f64 {
        let config = LocalEmbedderConfig {
            batch_size,
            threads,
            ..LocalEmbedderConfig::default()
        };
        let model = MiniLmEmbedder::from_config(&config).expect("model");
        let started = Instant::now();
        model.embed(&refs).expect("embedding");
        refs.len() as f64 / started.elapsed().as_secs_f64()
    };
    let baseline = one_call(32, 1);
    for (batch, threads) in [(32, 1), (8, 1), (4, 1), (1, 1), (8, 2), (4, 2), (1, 2)] {
        let rate = if (batch, threads) == (32, 1) {
            baseline
        } else {
            one_call(batch, threads)
        };
        println!(
            "{}",
            json!({"batch": batch, "threads": threads, "passages_per_s": rate, "vs_batch_32_one_thread": rate / baseline})
        );
    }
}
