//! Sustained ingest into one shard through the engine (issue 18), against the one-shot build of the same vectors.
//!
//! `$CARGO_TARGET_DIR/debug/examples/engine_ingest --vectors 1000000 [--batch 1000] [--dir DIR] [--nlist N]`;
//! with `--serve DIR [--serve-recall] [--nprobe 4,8]`, only opens a shard directory a run ended with (a copy of
//! it) and times the recall queries there, at each nprobe in turn, in a process that has built nothing.
//!
//! The vectors are `attest-lab bench`'s clustered mixture (384-d, `vectors / 500` clusters, spread 0.5, seed 7).
//! Two runs, one after the other, each timed and with the bytes the process wrote to storage
//! (`/proc/self/io` `write_bytes`):
//! - `one-shot`: train IVF_PQ on a spread sample of `training_rows()` rows, add every vector, write the index and
//!   the vector file — what a bulk build does, the floor for the dense index alone;
//! - `engine`: the vectors upserted in batches (one chunk per document) into a `ShardEngine` with the default
//!   configuration — the WAL, the growing segment, a background seal once `seal_threshold` rows are in, encoding
//!   with the shard's quantizer, and the tiered merges after it, moving inverted lists, while the writer goes on
//!   (it waits only when a second segment's worth is in before that work is done: sustained ingest at the rate
//!   sealing keeps up with; `--serial`: the writer waits for every seal and its merges)
//!   — until everything is sealed and merged as planned.
//!
//! (The engine without a shard quantizer, measured against in docs/BENCHMARKS.md, went with
//! `engine.shard_quantizer`; run this file at the commit named there for that run.)
//!
//! The engine run ends with recall@10 of 200 queries (the mixture's query stream; dense lane, default nprobe and
//! over-fetch, exact re-score) against the exact top 10 over all vectors, so a faster ingest is not bought with
//! worse segments, and with the p50 / p95 and QPS of those searches (one at a time, on the segments the run ended
//! with: at 10M, up to `max_sealed_segments`) and the anonymous RSS after them. Prints each run's time, bytes
//! written, bytes on disk at its end, segments, recall and serving figures, then the engine's ratios to the
//! one-shot build; each run's files are removed once it is measured. With `ATTEST_LOG` set (e.g. `info`), the
//! engine's events go to stderr as JSON lines, each seal and merge with its phase timings.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use attest_index::ivfpq::IvfPqBuilder;
use attest_index::vector_file::{Precision, VectorFileWriter};
use attest_index::{DocumentWrite, EngineConfig, LoggedChunk, ShardEngine};
use attest_lab::bench::metrics::{percentile, recall_at_k, Memory};
use attest_lab::bench::mixture::Mixture;
use clap::Parser;

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 1_000_000)]
    vectors: usize,
    /// Documents per upsert.
    #[arg(long, default_value_t = 1000)]
    batch: usize,
    /// Where the runs write (removed after each); default a directory under ~/.cache.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Skip the one-shot build (no ratios are printed): for the engine's serving figures alone.
    #[arg(long)]
    skip_one_shot: bool,
    /// Keep the engine run's shard directory (under `--dir`) instead of removing it, for `--serve`.
    #[arg(long)]
    keep: bool,
    /// Pace the writer: it seals and merges on its own thread every segment's worth,
    /// so no ingest overlaps a seal or merge (the default lets the engine seal and merge in the background).
    #[arg(long)]
    serial: bool,
    /// Serve only: open the shard directory an earlier run ended with (a copy of its `engine` directory) in
    /// this fresh process and time the recall queries on it; prints latency, QPS and the anonymous RSS of a
    /// process that has only opened and searched it.
    #[arg(long)]
    serve: Option<PathBuf>,
    /// With `--serve`: also recall@10, against the exact top 10 over `--vectors` rows (minutes at 10M).
    #[arg(long)]
    serve_recall: bool,
    /// With `--serve`: this many other queries of the stream first, untimed, so that the timed ones find the
    /// segments' pages resident as a serving process would (a shard just written has the page cache full of
    /// what it wrote last).
    #[arg(long, default_value_t = 0)]
    warmup: usize,
    /// Lists probed per search (default: the engine's configured `ivfpq.nprobe`). With `--serve`, a
    /// comma-separated list times each in turn on the one opened shard.
    #[arg(long, value_delimiter = ',')]
    nprobe: Vec<u32>,
    /// Coarse lists of the shard's quantizer and of the one-shot build (default: the engine's `ivfpq.nlist`);
    /// √n rounded up to a power of two is what `attest-lab bench` builds with (4,096 at 10M).
    #[arg(long)]
    nlist: Option<u32>,
    /// Dense candidates per requested hit re-scored from the SQ8 copies (default: the engine's
    /// `compact_overfetch`).
    #[arg(long)]
    compact_overfetch: Option<usize>,
}

/// The engine's configuration for this run: the defaults, with `--nlist` and `--compact-overfetch` when given.
fn engine_config(args: &Args) -> EngineConfig {
    let mut config = EngineConfig::default();
    if let Some(nlist) = args.nlist {
        config.ivfpq.nlist = nlist;
    }
    if let Some(overfetch) = args.compact_overfetch {
        config.compact_overfetch = overfetch;
    }
    config
}

const DIM: usize = 384;
/// Rows generated at a time for the one-shot build.
const BATCH: usize = 50_000;

/// The rows of `rows` (the batch starting at row `start`) whose global number is a multiple of `step`.
fn spread_from(rows: &[f32], start: usize, step: usize) -> Vec<f32> {
    rows.chunks_exact(DIM)
        .enumerate()
        .filter(|(i, _)| (start + i).is_multiple_of(step))
        .flat_map(|(_, v)| v.iter().copied())
        .collect()
}

/// Bytes this process has caused to be written to storage so far.
fn write_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|io| {
            io.lines().find_map(|l| {
                l.strip_prefix("write_bytes: ")
                    .and_then(|v| v.trim().parse().ok())
            })
        })
        .unwrap_or(0)
}

struct Run {
    name: &'static str,
    seconds: f64,
    bytes: u64,
    segments: u32,
    recall: Option<f64>,
    /// How the recall queries were served (dense lane, one at a time, on the segments the run ended with).
    serving: Option<Serving>,
    /// What the run's directory holds on disk at its end.
    disk: u64,
}

/// The recall queries' searches: p50 and p95 in ms, queries per second of the one thread that ran them, and the
/// process's anonymous resident memory (MB, `/proc/self/status` RssAnon) right after them — the engine's heap
/// (document versions, the growing segment, PQ tables) beside this process's own query and truth vectors.
struct Serving {
    p50: f64,
    p95: f64,
    qps: f64,
    anon_rss_mb: f64,
}

impl std::fmt::Display for Serving {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "dense search p50 {:.2} ms p95 {:.2} ms, {:.0} QPS on one thread, anonymous RSS {:.0} MB",
            self.p50, self.p95, self.qps, self.anon_rss_mb
        )
    }
}

const QUERIES: usize = 200;

/// The exact top 10 (document numbers) of each query over all `n` vectors, generated batch by batch.
fn exact_top10(mixture: &Mixture, n: usize, queries: &[f32]) -> anyhow::Result<Vec<Vec<usize>>> {
    let mut best: Vec<Vec<(usize, f32)>> = vec![Vec::new(); QUERIES];
    for start in (0..n).step_by(BATCH) {
        let rows = mixture.rows(0, start, BATCH.min(n - start), 2);
        let found = attest_index::ivfpq::exact_search_batch(&rows, DIM, queries, 10)?;
        for (b, f) in best.iter_mut().zip(found) {
            b.extend(f.into_iter().map(|(row, s)| (start + row, s)));
            b.sort_by(|x, y| y.1.total_cmp(&x.1));
            b.truncate(10);
        }
    }
    Ok(best
        .into_iter()
        .map(|b| b.into_iter().map(|(r, _)| r).collect())
        .collect())
}

/// Recall@10 of the engine's dense lane against `truth`, and how those searches were served.
fn recall_and_latency(
    engine: &ShardEngine,
    queries: &[f32],
    truth: &[Vec<usize>],
    nprobe: Option<u32>,
) -> anyhow::Result<(f64, Serving)> {
    let filter = attest_index::Filter::default();
    let mut found = Vec::with_capacity(truth.len());
    let mut took = Vec::with_capacity(truth.len());
    for q in queries.chunks_exact(DIM) {
        let started = Instant::now();
        let lanes = engine.search(&attest_index::SearchParams {
            tenant: "t",
            query_vector: Some(q),
            query_text: None,
            k: 10,
            nprobe,
            filter: &filter,
            exact_rescore: true,
            payload_top: attest_index::ALL_PAYLOADS,
        })?;
        took.push(started.elapsed().as_secs_f64() * 1e3);
        // Document `d{n}` is row n of the mixture.
        found.push(
            lanes
                .dense
                .iter()
                .filter_map(|h| h.doc_id.strip_prefix('d')?.parse().ok())
                .collect(),
        );
    }
    let serving = Serving {
        p50: percentile(&took, 0.5),
        p95: percentile(&took, 0.95),
        qps: took.len() as f64 / (took.iter().sum::<f64>() / 1e3),
        anon_rss_mb: Memory::current().rss_anon_bytes as f64 / 1e6,
    };
    let recall = if truth.is_empty() {
        f64::NAN
    } else {
        recall_at_k(&found, truth, 10)
    };
    Ok((recall, serving))
}

fn one_shot(dir: &Path, mixture: &Mixture, n: usize, config: &EngineConfig) -> anyhow::Result<Run> {
    let (started, bytes) = (Instant::now(), write_bytes());
    // The training sample spread over all rows, as the engine's is (generated batch by batch, then picked).
    let step = (n / config.training_rows()).max(1);
    let mut train = Vec::new();
    for start in (0..n).step_by(BATCH) {
        let rows = mixture.rows(0, start, BATCH.min(n - start), 2);
        train.extend(spread_from(&rows, start, step));
    }
    let mut builder = IvfPqBuilder::train(DIM, &config.ivfpq, &train)?;
    drop(train);
    // As a seal writes them: half precision (the mixture's values fit it).
    let mut vectors = VectorFileWriter::create(&dir.join("vectors.f32"), DIM, Precision::F16)?;
    for start in (0..n).step_by(BATCH) {
        let count = BATCH.min(n - start);
        let rows = mixture.rows(0, start, count, 2);
        let ids: Vec<i64> = (start as i64..(start + count) as i64).collect();
        builder.add(&rows, &ids)?;
        vectors.append(&rows)?;
    }
    builder.write(&dir.join("dense.faiss"))?;
    vectors.finish()?;
    let (seconds, bytes) = (started.elapsed().as_secs_f64(), write_bytes() - bytes);
    Ok(Run {
        name: "one-shot",
        seconds,
        bytes,
        segments: 1,
        recall: None,
        serving: None,
        disk: attest_index::fsutil::tree_bytes(dir)?,
    })
}

fn sustained(
    name: &'static str,
    dir: &Path,
    mixture: &Mixture,
    n: usize,
    config: EngineConfig,
    truth: (&[f32], &[Vec<usize>]),
    args: &Args,
) -> anyhow::Result<Run> {
    let (batch, serial) = (args.batch, args.serial);
    let (started, bytes) = (Instant::now(), write_bytes());
    let seal_rows = config.seal_threshold as u64;
    let engine: Arc<ShardEngine> = ShardEngine::open(dir, config)?;
    for start in (0..n).step_by(batch) {
        let count = batch.min(n - start);
        let rows = mixture.rows(0, start, count, 2);
        let docs = (0..count)
            .map(|i| DocumentWrite {
                doc_id: format!("d{}", start + i),
                tenant: "t".into(),
                chunks: vec![LoggedChunk {
                    chunk_id: format!("d{}#0", start + i),
                    title: String::new(),
                    text: format!("vector {}", start + i),
                    metadata_json: "{}".into(),
                    vector: rows[i * DIM..(i + 1) * DIM].to_vec(),
                }],
                version: 0,
                near_dup: None,
            })
            .collect();
        engine.upsert(docs)?;
        // Sustained, not bursty. Unpaced, the growing segment outruns the seals and a few huge segments replace the
        // merges this measures.
        let waiting = engine.stats().growing_rows;
        if serial && waiting >= seal_rows {
            // The writer waits for each seal (and the merges after it) once a segment's worth of rows is in.
            engine.seal()?;
            engine.merge_as_planned()?;
        } else if !serial && waiting >= 2 * seal_rows {
            // The engine seals and merges in the background once a segment's worth is in, as in service, while
            // the writer goes on; a writer a second segment ahead of that work waits for it (what backpressure
            // does to a real writer) and seals what is waiting (`seal` takes the maintenance lock first).
            engine.seal()?;
        }
    }
    // Whatever the background has not sealed yet, then the merges the policy asks for.
    engine.seal()?;
    engine.merge_as_planned()?;
    let (seconds, bytes) = (started.elapsed().as_secs_f64(), write_bytes() - bytes);
    let (found, serving) =
        recall_and_latency(&engine, truth.0, truth.1, args.nprobe.first().copied())?;
    Ok(Run {
        name,
        seconds,
        bytes,
        segments: engine.stats().sealed_segments,
        recall: Some(found),
        serving: Some(serving),
        disk: engine.disk_bytes()?,
    })
}

/// `--serve`: the kept shard opened by this process alone, then the recall queries.
fn serve_only(dir: &Path, mixture: &Mixture, n: usize, args: &Args) -> anyhow::Result<()> {
    let (recall, warmup) = (args.serve_recall, args.warmup);
    let queries = mixture.rows(1, 0, QUERIES, 2);
    let truth = if recall {
        exact_top10(mixture, n, &queries)?
    } else {
        Vec::new()
    };
    let opened = Instant::now();
    let engine = ShardEngine::open(dir, engine_config(args))?;
    let open_seconds = opened.elapsed().as_secs_f64();
    let stats = engine.stats();
    println!(
        "serve {}: opened in {open_seconds:.1} s, {} live documents, {} sealed segment(s) + {} growing rows",
        dir.display(),
        stats.live_documents,
        stats.sealed_segments,
        stats.growing_rows,
    );
    let nprobes: Vec<Option<u32>> = match args.nprobe.as_slice() {
        [] => vec![None],
        given => given.iter().copied().map(Some).collect(),
    };
    for nprobe in nprobes {
        if warmup > 0 {
            let others = mixture.rows(1, QUERIES, warmup, 2);
            recall_and_latency(&engine, &others, &[], nprobe)?;
        }
        let (found, serving) = recall_and_latency(&engine, &queries, &truth, nprobe)?;
        println!(
            "  {warmup} warm-up queries, then {QUERIES} queries (nprobe {}): {serving}, recall@10 {found:.3}",
            nprobe.map_or("default".to_string(), |p| p.to_string()),
        );
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // The engine's JSON events (seals, merges, quantizer training with their timings) on stderr, when asked.
    if let Ok(filter) = std::env::var("ATTEST_LOG") {
        attest_telemetry::logging::init(&filter);
    }
    let root = args.dir.clone().unwrap_or_else(|| {
        PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| ".".into()))
            .join(".cache/attest-engine-ingest")
    });
    let n = args.vectors;
    let mixture = Mixture::new(DIM, (n / 500).max(10), 0.5, 7);
    let config = engine_config(&args);
    if let Some(dir) = &args.serve {
        return serve_only(dir, &mixture, n, &args);
    }
    let mut runs = Vec::new();
    let fresh = |name: &str| -> anyhow::Result<PathBuf> {
        let dir = root.join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    };
    // Each run's files go once it is measured: at 10M vectors the two would not fit on the disk together.
    let done = |run: Run| -> Run {
        if !(args.keep && run.name == "engine") {
            let _ = std::fs::remove_dir_all(root.join(run.name));
        }
        run
    };
    let queries = mixture.rows(1, 0, QUERIES, 2);
    let truth = exact_top10(&mixture, n, &queries)?;
    let truth = (queries.as_slice(), truth.as_slice());
    if !args.skip_one_shot {
        runs.push(done(one_shot(&fresh("one-shot")?, &mixture, n, &config)?));
    }
    runs.push(done(sustained(
        "engine",
        &fresh("engine")?,
        &mixture,
        n,
        config,
        truth,
        &args,
    )?));
    if !args.keep {
        let _ = std::fs::remove_dir_all(&root);
    }
    for r in &runs {
        println!(
            "{:<14} {n} vectors  {:>8.1} s  {:>8.0} MB written  {:>8.0} MB on disk  {} segment(s){}{}",
            r.name,
            r.seconds,
            r.bytes as f64 / 1e6,
            r.disk as f64 / 1e6,
            r.segments,
            r.recall
                .map_or(String::new(), |x| format!("  recall@10 {x:.3}")),
            r.serving
                .as_ref()
                .map_or(String::new(), |s| format!("  {s}"))
        );
    }
    let base = &runs[0];
    for r in runs.iter().skip(1).filter(|_| !args.skip_one_shot) {
        println!(
            "{} / one-shot: time {:.2}x, bytes written {:.2}x",
            r.name,
            r.seconds / base.seconds,
            r.bytes as f64 / base.bytes.max(1) as f64
        );
    }
    Ok(())
}
