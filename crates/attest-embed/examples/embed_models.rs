//! Benchmark: the local models' throughput on this machine in one run (issue 70: the new default must ingest at
//! least 0.5× today's texts per second): all-MiniLM-L6-v2, bge-small-en-v1.5 and its fine-tuned copy, all under
//! ONNX Runtime at their defaults (MiniLM batches of 4, the bge models one text per pass; 2 threads), on the bundled
//! squad-sample paragraphs (embedded in one call, as an ingest does) and questions (one per call, as a search does, bge's with its query
//! instruction). Every row carries its ratio to MiniLM measured in the same run; the models take turns, `ROUNDS`
//! times, and the best round of each is kept (the machine is shared).
//!
//! `cargo run --example embed_models [TEXTS [ROUNDS]]` — prints one JSON object per line.

mod common;

use std::path::Path;
use std::time::Instant;

use attest_embed::{build_embedder, Embedder, EmbedderConfig, LocalModel};
use common::texts_of;
use serde_json::json;

/// (passages per second in one call, questions per second one per call).
fn rates(model: &dyn Embedder, passages: &[&str], questions: &[String]) -> (f64, f64) {
    model
        .embed(&passages[..passages.len().min(8)])
        .expect("warm-up");
    let started = Instant::now();
    model.embed(passages).expect("embedding");
    let passages_per_s = passages.len() as f64 / started.elapsed().as_secs_f64();
    let started = Instant::now();
    for q in questions {
        let asked = format!("{}{q}", model.query_prefix());
        model.embed(&[asked.as_str()]).expect("embedding");
    }
    (
        passages_per_s,
        questions.len() as f64 / started.elapsed().as_secs_f64(),
    )
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .map_or(128, |a| a.parse().expect("TEXTS is a number"));
    let rounds: usize = args
        .next()
        .map_or(3, |a| a.parse().expect("ROUNDS is a number"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/squad-sample");
    let passages = texts_of(&root.join("corpus.jsonl"), "text", n);
    let questions = texts_of(&root.join("queries.jsonl"), "text", n);
    let passages: Vec<&str> = passages.iter().map(String::as_str).collect();

    let models: Vec<Box<dyn Embedder>> = LocalModel::ALL
        .into_iter()
        .map(|model| {
            let mut config = EmbedderConfig::default();
            config.local.model = model;
            Box::new(build_embedder(&config).expect("run `make models`")) as Box<dyn Embedder>
        })
        .collect();
    let mut best = vec![(0.0f64, 0.0f64); models.len()];
    for _ in 0..rounds {
        for (model, best) in models.iter().zip(&mut best) {
            let (p, q) = rates(model.as_ref(), &passages, &questions);
            *best = (best.0.max(p), best.1.max(q));
        }
    }
    let (base_p, base_q) = best[0];
    for (model, (p, q)) in models.iter().zip(best) {
        println!(
            "{}",
            json!({"model": model.id(), "passages": passages.len(), "passages_per_s": p,
                   "vs_minilm": p / base_p, "questions_per_s": q, "question_ms": 1000.0 / q,
                   "question_vs_minilm": q / base_q, "rounds": rounds})
        );
    }
}
