//! The benchmark's corpus and queries: `attest-lab bench`'s clustered mixture (384-d, `n / 500` clusters, spread
//! 0.5, seed 7 — the vectors `engine_ingest` measures the single engine with), a short synthetic text per
//! document so BM25 has something to index, and the exact top 10 of each query by brute force.
//!
//! Document `d{i}` is row `i` of the mixture's corpus stream; the documents written while a shard is down are
//! `o{i}`, row `i` of stream 2; queries are stream 1. Texts are words of a made-up 20,000-word vocabulary drawn
//! log-uniformly (a few very common words, a long tail, like real text), seeded by the row, so every run and
//! every retry sends the same bytes.

use attest_lab::bench::mixture::Mixture;
use attest_proto::v1 as pb;
use rand::{Rng, SeedableRng};

pub const DIM: usize = 384;
pub const K: usize = 10;
const VOCABULARY: u32 = 20_000;
const SYLLABLES: [&str; 20] = [
    "ka", "lo", "mi", "ne", "ru", "ta", "so", "vi", "de", "pa", "gu", "be", "ho", "zi", "fa", "we",
    "ny", "cho", "tre", "sal",
];

/// The corpus stream of the mixture, the query stream and the stream of the documents written during an
/// outage.
pub const CORPUS: u64 = 0;
pub const QUERIES: u64 = 1;
pub const OUTAGE: u64 = 2;

pub fn mixture(n: usize) -> Mixture {
    Mixture::new(DIM, (n / 500).max(10), 0.5, 7)
}

/// Word `k` of the vocabulary: its digits in base 20 as syllables ("kalomi").
fn word(mut k: u32) -> String {
    let mut w = String::new();
    loop {
        w.push_str(SYLLABLES[(k % 20) as usize]);
        k /= 20;
        if k == 0 {
            return w;
        }
    }
}

/// `count` words drawn log-uniformly from the vocabulary with the seed `seed`.
pub fn words(seed: u64, count: usize) -> String {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let max = f64::from(VOCABULARY).ln();
    (0..count)
        .map(|_| word((rng.gen::<f64>() * max).exp() as u32 - 1))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The id of row `row` of `stream`.
pub fn doc_id(stream: u64, row: usize) -> String {
    match stream {
        OUTAGE => format!("o{row}"),
        _ => format!("d{row}"),
    }
}

/// Documents `start..start + count` of `stream`, each with its vector and 12 words.
pub fn documents(mixture: &Mixture, stream: u64, start: usize, count: usize) -> Vec<pb::Document> {
    let rows = mixture.rows(stream, start, count, 1);
    rows.chunks_exact(DIM)
        .enumerate()
        .map(|(i, v)| pb::Document {
            id: doc_id(stream, start + i),
            text: words((stream << 40) + (start + i) as u64, 12),
            vector: v.to_vec(),
            ..Default::default()
        })
        .collect()
}

/// The text of query `q` (three words, as a short keyword query).
pub fn query_text(q: usize) -> String {
    words((QUERIES << 40) + q as u64, 3)
}

/// The exact top `K` ids of each query over the given row ranges of the mixture's streams, by brute force
/// (FAISS's exact search), 50,000 rows at a time.
pub fn exact_top_k(
    mixture: &Mixture,
    sources: &[(u64, usize)],
    queries: &[f32],
) -> anyhow::Result<Vec<Vec<String>>> {
    exact_top_k_stored(mixture, sources, queries, false)
}

/// [`exact_top_k`] over the rows as a shard stores them (`half`: rounded to f16, as `engine.vectors` keeps
/// them): the top 10 a shard's own exact search — the live estimate's — finds.
pub fn exact_top_k_stored(
    mixture: &Mixture,
    sources: &[(u64, usize)],
    queries: &[f32],
    half: bool,
) -> anyhow::Result<Vec<Vec<String>>> {
    const BATCH: usize = 50_000;
    let mut best: Vec<Vec<(String, f32)>> = vec![Vec::new(); queries.len() / DIM];
    for &(stream, n) in sources {
        for start in (0..n).step_by(BATCH) {
            let mut rows = mixture.rows(stream, start, BATCH.min(n - start), 2);
            if half {
                for x in &mut rows {
                    *x = half::f16::from_f32(*x).to_f32();
                }
            }
            let found = attest_index::ivfpq::exact_search_batch(&rows, DIM, queries, K)?;
            for (b, f) in best.iter_mut().zip(found) {
                b.extend(
                    f.into_iter()
                        .map(|(row, s)| (doc_id(stream, start + row), s)),
                );
                b.sort_by(|x, y| y.1.total_cmp(&x.1));
                b.truncate(K);
            }
        }
    }
    Ok(best
        .into_iter()
        .map(|b| b.into_iter().map(|(id, _)| id).collect())
        .collect())
}

/// Share of `truth` found in `found` (recall@K of one query).
pub fn recall(found: &[String], truth: &[String]) -> f64 {
    if truth.is_empty() {
        return f64::NAN;
    }
    truth.iter().filter(|t| found.contains(t)).count() as f64 / truth.len() as f64
}
