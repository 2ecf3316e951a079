//! Measures the reader's `read` stage on this machine: the time to score the sentences of four passages for one
//! question, as the answer tier does per retrieval hop, for several batch sizes, thread counts and sentence
//! caps, each as a ratio against a one-thread baseline run alongside (the first variant is the shipped default).
//!
//!     cargo run -p attest-answer --example reader_speed [-- QUESTIONS]
//!
//! Passages: the gold paragraph of each question of `data/squad-sample` and the next three paragraphs of its
//! article (the reranker's top four are usually of one article).

use std::collections::HashMap;
use std::time::Instant;

use attest_answer::reader::{Reader, ReaderBackend, ReaderConfig, ToRead};

#[derive(serde::Deserialize)]
struct Doc {
    id: String,
    title: String,
    text: String,
}

#[derive(serde::Deserialize)]
struct Query {
    text: String,
    gold_doc: Option<String>,
}

fn lines<T: serde::de::DeserializeOwned>(path: &str) -> Result<Vec<T>, Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(path)?;
    Ok(text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?)
}

/// Milliseconds per question (mean, p95) of `read` with `config` over `work`.
fn measure(config: &ReaderConfig, work: &[(String, Vec<&Doc>)]) -> (f64, f64) {
    let reader = Reader::from_config(config)
        .expect("reader loads")
        .expect("model back end");
    let mut ms: Vec<f64> = work
        .iter()
        .map(|(q, docs)| {
            let passages: Vec<ToRead> = docs
                .iter()
                .map(|d| ToRead {
                    title: &d.title,
                    text: &d.text,
                })
                .collect();
            let t = Instant::now();
            reader.read(q, &passages).expect("read");
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let mean = ms.iter().sum::<f64>() / ms.len() as f64;
    ms.sort_by(f64::total_cmp);
    let p95 = ms[((ms.len() as f64 * 0.95).ceil() as usize).clamp(1, ms.len()) - 1];
    (mean, p95)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args().nth(1).map_or(Ok(30), |a| a.parse())?;
    let root = attest_models::locate_repository_dir("data/squad-sample");
    let docs: Vec<Doc> = lines(&root.join("corpus.jsonl").to_string_lossy())?;
    let queries: Vec<Query> = lines(&root.join("queries.jsonl").to_string_lossy())?;
    let at: HashMap<&str, usize> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| (d.id.as_str(), i))
        .collect();
    let work: Vec<(String, Vec<&Doc>)> = queries
        .iter()
        .filter_map(|q| {
            let i = *at.get(q.gold_doc.as_deref()?)?;
            let same: Vec<&Doc> = docs[i..]
                .iter()
                .filter(|d| d.title == docs[i].title)
                .take(4)
                .collect();
            Some((q.text.clone(), same))
        })
        .take(n)
        .collect();
    let shipped = ReaderConfig {
        backend: ReaderBackend::Model,
        ..ReaderConfig::default()
    };
    // The baseline: one thread, batches of 16, 20 sentences (the configuration before threads existed).
    let baseline = ReaderConfig {
        batch: 16,
        threads: 1,
        max_sentences: 20,
        ..shipped.clone()
    };
    // Warm the model (load, first allocations) before timing anything.
    measure(&baseline, &work[..1]);
    let (base, base_p95) = measure(&baseline, &work);
    println!(
        "{} questions; baseline (batch 16, threads 1, max_sentences 20): mean {base:.0} ms, p95 {base_p95:.0} ms",
        work.len()
    );
    let mut variants = vec![(shipped.batch, shipped.threads, shipped.max_sentences)];
    variants.extend([
        (4, 1, 20),
        (4, 2, 20),
        (4, 2, 12),
        (4, 2, 8),
        (2, 2, 8),
        (1, 2, 8),
    ]);
    for (batch, threads, max_sentences) in variants {
        let config = ReaderConfig {
            batch,
            threads,
            max_sentences,
            ..shipped.clone()
        };
        let (mean, p95) = measure(&config, &work);
        println!(
            "batch {batch:>2}, threads {threads}, max_sentences {max_sentences:>2}: mean {mean:>5.0} ms, \
             p95 {p95:>5.0} ms ({:.2}x the baseline mean)",
            mean / base
        );
    }
    Ok(())
}
