//! Benchmark: local embedding throughput of all-MiniLM-L6-v2 under both runtimes (candle, ONNX Runtime) in one
//! run, on the bundled squad-sample paragraphs (real chunk lengths, embedded in one call as an ingest does) and
//! questions (one text per call, as a search does). Every row carries its ratio to the candle runtime at its
//! former default (batch 4 on 2 threads) measured in the same run.
//!
//! `cargo run --example embed_throughput [TEXTS]` — prints one JSON object per line.

mod common;

use std::path::Path;
use std::time::Instant;

use attest_embed::{
    Embedder, LocalEmbedderConfig, LocalModel, LocalRuntime, MiniLmEmbedder, OnnxEmbedder,
};
use common::texts_of;
use serde_json::json;

fn load(runtime: LocalRuntime, batch_size: usize, threads: usize) -> Box<dyn Embedder> {
    let config = LocalEmbedderConfig {
        model: LocalModel::MiniLm,
        runtime,
        batch_size,
        threads,
        ..LocalEmbedderConfig::default()
    };
    match runtime {
        LocalRuntime::Candle => Box::new(MiniLmEmbedder::from_config(&config).expect("candle")),
        LocalRuntime::Onnx => Box::new(OnnxEmbedder::from_config(&config).expect("onnx")),
    }
}

/// Texts per second embedding all of `texts` in one call (after a warm-up call).
fn one_call(model: &dyn Embedder, texts: &[&str]) -> f64 {
    model.embed(&texts[..texts.len().min(8)]).expect("warm-up");
    let started = Instant::now();
    model.embed(texts).expect("embedding");
    texts.len() as f64 / started.elapsed().as_secs_f64()
}

/// Texts per second embedding `texts` one per call.
fn one_by_one(model: &dyn Embedder, texts: &[&str]) -> f64 {
    let started = Instant::now();
    for t in texts {
        model.embed(&[t]).expect("embedding");
    }
    texts.len() as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("TEXTS is a number"))
        .unwrap_or(64);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/squad-sample");
    let passages = texts_of(&root.join("corpus.jsonl"), "text", n);
    let questions = texts_of(&root.join("queries.jsonl"), "text", n);
    let passages: Vec<&str> = passages.iter().map(String::as_str).collect();
    let questions: Vec<&str> = questions.iter().map(String::as_str).collect();

    let baseline = one_call(&*load(LocalRuntime::Candle, 4, 2), &passages);
    let name = |r: LocalRuntime| match r {
        LocalRuntime::Candle => "candle",
        LocalRuntime::Onnx => "onnx",
    };
    for runtime in [LocalRuntime::Candle, LocalRuntime::Onnx] {
        for (batch, threads) in [(4, 2), (1, 2), (8, 2), (4, 1), (1, 1)] {
            let rate = if (runtime, batch, threads) == (LocalRuntime::Candle, 4, 2) {
                baseline
            } else {
                one_call(&*load(runtime, batch, threads), &passages)
            };
            println!(
                "{}",
                json!({"runtime": name(runtime), "batch": batch, "threads": threads, "passages": passages.len(),
                       "passages_per_s": rate, "vs_candle_4x2": rate / baseline})
            );
        }
        let model = load(runtime, 4, 2);
        let mean_tokens = questions
            .iter()
            .map(|q| model.count_tokens(q))
            .sum::<usize>() as f64
            / questions.len() as f64;
        let rate = one_by_one(&*model, &questions);
        println!(
            "{}",
            json!({"runtime": name(runtime), "questions": questions.len(), "mean_tokens": mean_tokens,
                   "one_per_call_per_s": rate, "mean_ms": 1000.0 / rate})
        );
    }
}
