//! The serving half of a bench run: opens a built IVF_PQ index and its full-precision vector file the way a
//! sealed segment serves them (memory-mapped), and measures one-query-at-a-time latency, throughput with 1
//! and 2 threads, recall@k against exact search, and the exact scan's own latency, all in the same process.

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use attest_index::ivfpq::{exact_search, exact_search_batch, IvfPqIndex};
use attest_index::sq8::Sq8File;
use attest_index::vector_file::VectorFile;
use serde::{Deserialize, Serialize};

use super::metrics::percentile;

/// The index and vectors of one bench run, opened for serving.
pub struct Served {
    pub index: IvfPqIndex,
    pub vectors: VectorFile,
    /// When set, candidates are re-scored from this SQ8 copy first, as a sealed segment with one does.
    pub compact: Option<Sq8File>,
    pub k: usize,
    pub overfetch: usize,
}

/// Latency and throughput of one pass over the query sample at one nprobe.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pass {
    pub nprobe: u32,
    /// PQ candidates re-scored per requested hit.
    #[serde(default)]
    pub overfetch: usize,
    /// Re-scored from the SQ8 copy, then the best `EXACT_REFINE × k` from the full vectors.
    #[serde(default)]
    pub sq8: bool,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub qps_1t: f64,
    pub recall_at_10: f64,
}

/// Exact search over the same vectors, for the same queries.
#[derive(Debug, Clone, Serialize)]
pub struct Exact {
    /// Ground truth for every query (one batched pass over the vector file).
    pub truth_s: f64,
    /// Single-query exact scans timed (the first N queries).
    pub timed_queries: usize,
    pub exact_p50_ms: f64,
}

impl Pass {
    pub fn with_recall(mut self, found: &[Vec<usize>], truth: &[Vec<usize>], k: usize) -> Pass {
        self.recall_at_10 = super::metrics::recall_at_k(found, truth, k);
        self
    }
}

impl Served {
    pub fn open(
        index_path: &Path,
        vectors_path: &Path,
        handles: usize,
        k: usize,
        overfetch: usize,
    ) -> anyhow::Result<Self> {
        Ok(Served {
            index: IvfPqIndex::open_mmap_with_handles(index_path, handles)
                .with_context(|| format!("opening {}", index_path.display()))?,
            vectors: VectorFile::open(vectors_path)
                .with_context(|| format!("opening {}", vectors_path.display()))?,
            compact: None,
            k,
            overfetch,
        })
    }

    /// The engine's dense path for one query: PQ candidates (`overfetch × k`) from the IVF_PQ index,
    /// re-scored exactly from the vector file (with an SQ8 copy: re-scored from it, then the best
    /// `EXACT_REFINE × k` exactly), best `k` kept.
    pub fn search(&self, query: &[f32], nprobe: u32) -> anyhow::Result<Vec<usize>> {
        let candidates = self
            .index
            .search(query, self.k * self.overfetch.max(1), nprobe)?;
        let rows = candidates.iter().map(|&(id, _)| id as usize);
        let rows: Vec<usize> = match &self.compact {
            Some(c) => c
                .rescore(query, rows)?
                .into_iter()
                .take(self.k * attest_index::engine::EXACT_REFINE)
                .map(|(row, _)| row)
                .collect(),
            None => rows.collect(),
        };
        let mut rescored = self.vectors.rescore(query, rows)?;
        rescored.truncate(self.k);
        Ok(rescored.into_iter().map(|(row, _)| row).collect())
    }

    /// One query at a time on this thread: per-query latencies and QPS, plus the hits of every query (for
    /// recall, computed once the ground truth exists). `recall_at_10` is NaN until `with_recall`.
    pub fn pass(&self, queries: &[f32], nprobe: u32) -> anyhow::Result<(Pass, Vec<Vec<usize>>)> {
        let dim = self.vectors.dim();
        let mut latencies = Vec::with_capacity(queries.len() / dim);
        let mut results = Vec::with_capacity(queries.len() / dim);
        let started = Instant::now();
        for q in queries.chunks_exact(dim) {
            let t = Instant::now();
            let hits = self.search(q, nprobe)?;
            latencies.push(t.elapsed().as_secs_f64() * 1e3);
            results.push(hits);
        }
        let wall = started.elapsed().as_secs_f64();
        let pass = Pass {
            nprobe,
            overfetch: self.overfetch,
            sq8: self.compact.is_some(),
            p50_ms: percentile(&latencies, 0.50),
            p95_ms: percentile(&latencies, 0.95),
            p99_ms: percentile(&latencies, 0.99),
            qps_1t: results.len() as f64 / wall,
            recall_at_10: f64::NAN,
        };
        Ok((pass, results))
    }

    /// Throughput with `threads` threads issuing queries concurrently (queries dealt round-robin).
    pub fn qps_threads(&self, queries: &[f32], nprobe: u32, threads: usize) -> anyhow::Result<f64> {
        let dim = self.vectors.dim();
        let all: Vec<&[f32]> = queries.chunks_exact(dim).collect();
        let started = Instant::now();
        std::thread::scope(|scope| -> anyhow::Result<()> {
            let workers: Vec<_> = (0..threads.max(1))
                .map(|t| {
                    let all = &all;
                    scope.spawn(move || -> anyhow::Result<()> {
                        for q in all.iter().skip(t).step_by(threads.max(1)) {
                            self.search(q, nprobe)?;
                        }
                        Ok(())
                    })
                })
                .collect();
            for w in workers {
                w.join().expect("bench worker panicked")?;
            }
            Ok(())
        })?;
        Ok(all.len() as f64 / started.elapsed().as_secs_f64())
    }

    /// Ground truth for every query (batched exact search over the vector file), then the latency of a plain
    /// single-query exact scan (what serving without an index would cost) for the first `timed` queries.
    pub fn exact(&self, queries: &[f32], timed: usize) -> anyhow::Result<(Vec<Vec<usize>>, Exact)> {
        let dim = self.vectors.dim();
        let rows = self
            .vectors
            .f32_rows()
            .context("the benchmark's vector file is f32")?;
        let started = Instant::now();
        let truth: Vec<Vec<usize>> = exact_search_batch(rows, dim, queries, self.k)?
            .into_iter()
            .map(|hits| hits.into_iter().map(|(row, _)| row).collect())
            .collect();
        let truth_s = started.elapsed().as_secs_f64();
        let exact_ms: Vec<f64> = queries
            .chunks_exact(dim)
            .take(timed.max(1))
            .map(|q| {
                let t = Instant::now();
                std::hint::black_box(exact_search(rows, dim, q, self.k));
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        Ok((
            truth,
            Exact {
                truth_s,
                timed_queries: exact_ms.len(),
                exact_p50_ms: percentile(&exact_ms, 0.5),
            },
        ))
    }
}
