//! `attest-lab bench`: the dense index at scale, measured the way a shard serves it.
//!
//! A run builds one IVF_PQ index through the engine's own path (`IvfPqBuilder`, then the full-precision
//! `VectorFile` used for exact re-scoring), streaming the vectors in batches so that raw vectors never all
//! sit in RAM. Then a fresh process (`attest-lab bench ... --serve-only`, started by the run itself, as a shard
//! restarts onto sealed segments) reopens both memory-mapped and measures one-query-at-a-time latency,
//! throughput with 1 and 2 threads, its resident memory, recall@10 against exact search and the exact
//! scan's latency: memory the build's allocator kept would otherwise count as serving memory.
//! `--fit` turns several runs into a cost model and plots.
//!
//! - [`mixture`]: the streamed Gaussian-mixture vectors.
//! - [`fashion`]: the Fashion-MNIST loader (Debian `dataset-fashion-mnist`).
//! - [`serve`]: the serving measurements.
//! - [`fit`]: the cost model and its projection to 100M vectors.
//! - [`cluster_plan`]: the cost model applied to a whole cluster (predictions, plans).
//! - [`plot`]: latency against n, recall against QPS.

pub mod cluster_plan;
pub mod fashion;
pub mod fit;
pub mod metrics;
pub mod mixture;
pub mod plot;
pub mod row_bytes;
pub mod serve;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use attest_index::ivfpq::{IvfPqBuilder, IvfPqParams};
use attest_index::sq8::Sq8File;
use attest_index::vector_file::{Precision, VectorFile, VectorFileWriter};
use serde::{Deserialize, Serialize};

use crate::cli::BenchArgs;
use attest_node::config;

use self::metrics::Memory;
use self::serve::{Pass, Served};

const K: usize = 10;
/// The build figures, written beside the index for the serving process.
const BUILD_FILE: &str = "build.json";
/// Threads for the concurrent-throughput figure (`qps_2t`), and FAISS handles opened for it.
const SERVING_THREADS: usize = 2;
/// Default nprobe values of the Fashion-MNIST recall/QPS curve.
const FASHION_SWEEP: [u32; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/// One bench run: every figure the issue names, with what it was measured on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchReport {
    pub dataset: String,
    pub n: usize,
    pub dim: usize,
    pub queries: usize,
    pub k: usize,
    pub params: IvfPqParams,
    pub overfetch: usize,
    pub clusters: Option<usize>,
    pub train_rows: usize,
    /// Index build (training + adding + writing both files), excluding vector generation.
    pub build_s: f64,
    pub train_s: f64,
    pub generate_s: f64,
    pub disk_bytes: u64,
    pub index_bytes: u64,
    pub vectors_bytes: u64,
    /// The SQ8 copy of the vectors (not in `disk_bytes`) and the time to write it.
    #[serde(default)]
    pub compact_bytes: u64,
    #[serde(default)]
    pub compact_s: f64,
    /// Resident memory while serving (after the query passes), split into heap and mapped-file pages.
    pub rss_bytes: u64,
    pub rss_anon_bytes: u64,
    pub rss_file_bytes: u64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub qps_1t: f64,
    pub qps_2t: f64,
    pub recall_at_10: f64,
    pub exact_p50_ms: f64,
    pub exact_timed_queries: usize,
    pub truth_s: f64,
    pub speedup_vs_exact: f64,
    /// Recall and speed at other nprobe values (`--sweep`; always for Fashion-MNIST), then re-scored from the
    /// SQ8 copy (`--sweep-compact`, points with `sq8: true`).
    pub curve: Vec<Pass>,
    pub host: Host,
    pub timestamp: String,
    pub git_commit: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Host {
    pub cores: usize,
    pub cpu: String,
    pub openblas_coretype: Option<String>,
}

impl Host {
    fn current() -> Host {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("model name"))
                    .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
            })
            .unwrap_or_default();
        Host {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu,
            openblas_coretype: std::env::var("OPENBLAS_CORETYPE").ok(),
        }
    }
}

/// The built files of a run and what building them cost (`build.json` beside them, read by the serving
/// process).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Built {
    index: PathBuf,
    vectors: PathBuf,
    /// The SQ8 copy of `vectors` (runs built before it existed have none).
    #[serde(default)]
    compact: Option<PathBuf>,
    /// Writing the SQ8 copy from the finished vector file (not part of `build_s`).
    #[serde(default)]
    compact_s: f64,
    params: IvfPqParams,
    train_rows: usize,
    build_s: f64,
    train_s: f64,
    generate_s: f64,
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    if !args.fit.is_empty() {
        return fit::run(
            &args.fit,
            args.project_n,
            args.plots.as_deref(),
            args.json.as_deref(),
        );
    }
    let cfg = config::load(args.config.as_deref(), std::env::vars())?;
    let engine = cfg.engine;
    let scratch;
    let dir: PathBuf = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            d.clone()
        }
        None => {
            scratch = tempfile::tempdir().context("creating a scratch directory")?;
            scratch.path().to_path_buf()
        }
    };
    let overfetch = args.overfetch.unwrap_or(engine.overfetch).max(1);
    validate(&args)?;
    if !args.serve_only {
        let built = if args.fashion_mnist {
            build_fashion_mnist(&args, &engine.ivfpq, &dir)?
        } else {
            build_mixture(&args, &engine.ivfpq, engine.train_sample, &dir)?
        };
        std::fs::write(dir.join(BUILD_FILE), serde_json::to_vec_pretty(&built)?)?;
        return serve_in_child(&dir);
    }
    let built: Built =
        serde_json::from_slice(&std::fs::read(dir.join(BUILD_FILE)).with_context(|| {
            format!("--serve-only needs a built --dir ({BUILD_FILE} missing)")
        })?)?;
    let mut report = if args.fashion_mnist {
        let (test, dim) = fashion::load_images(&args.fashion_mnist_dir, "t10k")?;
        let sweep: Vec<u32> = if args.sweep.is_empty() {
            FASHION_SWEEP.to_vec()
        } else {
            args.sweep.clone()
        };
        let mut r = measure(
            &args,
            &built,
            &test[..test.len().min(args.queries * dim)],
            overfetch,
            &sweep,
        )?;
        r.dataset = "fashion_mnist".into();
        r
    } else {
        let mixture = mixture_of(&args);
        let queries = mixture.rows(1, 0, args.queries, SERVING_THREADS);
        let mut r = measure(&args, &built, &queries, overfetch, &args.sweep)?;
        r.dataset = "gaussian_mixture".into();
        r.clusters = Some(mixture.clusters());
        r
    };
    report.generate_s = built.generate_s;
    println!("{}", table(&report));
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// Runs the serving half in a new process of this binary with the same arguments, on the files just built.
fn serve_in_child(dir: &Path) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("locating the attest-lab binary")?;
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    args.push("--serve-only".into());
    if !args.iter().any(|a| a == "--dir") {
        args.push("--dir".into());
        args.push(dir.into());
    }
    let status = std::process::Command::new(exe)
        .args(args)
        .status()
        .context("starting the serving process")?;
    anyhow::ensure!(status.success(), "the serving process failed: {status}");
    Ok(())
}

fn validate(args: &BenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.vectors >= 1, "--vectors must be at least 1");
    anyhow::ensure!((1..=4096).contains(&args.dim), "--dim must be in 1..=4096");
    anyhow::ensure!(args.queries >= 1, "--queries must be at least 1");
    anyhow::ensure!(args.batch >= 1, "--batch must be at least 1");
    anyhow::ensure!(
        args.spread.is_finite() && args.spread > 0.0,
        "--spread must be a positive number"
    );
    Ok(())
}

/// [`attest_index::ivfpq::nlist_for_rows`], between 16 and 65,536 lists (training cost ∝ nlist stays moderate on
/// a 2-core machine).
fn default_nlist(n: usize) -> u32 {
    attest_index::ivfpq::nlist_for_rows(n).clamp(16, 65_536)
}

fn mixture_of(args: &BenchArgs) -> mixture::Mixture {
    let clusters = args.clusters.unwrap_or((args.vectors / 500).max(10));
    mixture::Mixture::new(args.dim, clusters, args.spread, 7)
}

fn params_for(args: &BenchArgs, engine_params: &IvfPqParams, n: usize) -> IvfPqParams {
    IvfPqParams {
        nlist: args.nlist.unwrap_or_else(|| default_nlist(n)),
        m: args.m.unwrap_or(engine_params.m),
        nprobe: args.nprobe.unwrap_or(engine_params.nprobe),
        ..*engine_params
    }
}

fn build_mixture(
    args: &BenchArgs,
    engine_params: &IvfPqParams,
    train_sample: usize,
    dir: &Path,
) -> anyhow::Result<Built> {
    let (n, dim) = (args.vectors, args.dim);
    let mixture = mixture_of(args);
    let params = params_for(args, engine_params, n);
    // FAISS wants ≥ 39 points per list; 40 per list (or the engine's sample, if larger) keeps k-means honest
    // without training on millions of rows. Mixture rows are i.i.d., so the first rows are a fair sample.
    let train_rows = train_sample.max(40 * params.nlist as usize).min(n);
    build_streamed(
        dir,
        n,
        dim,
        &params,
        train_rows,
        args.batch,
        |start, count| mixture.rows(0, start, count, SERVING_THREADS),
    )
}

fn build_fashion_mnist(
    args: &BenchArgs,
    engine_params: &IvfPqParams,
    dir: &Path,
) -> anyhow::Result<Built> {
    let (train, dim) = fashion::load_images(&args.fashion_mnist_dir, "train")?;
    let n = train.len() / dim;
    let params = params_for(args, engine_params, n);
    build_streamed(dir, n, dim, &params, n, args.batch, |start, count| {
        train[start * dim..(start + count) * dim].to_vec()
    })
}

/// Trains on the first `train_rows` rows, then adds all `n` rows batch by batch to the index and the vector
/// file. `rows(start, count)` produces the vectors; its time is reported apart from the build.
fn build_streamed(
    dir: &Path,
    n: usize,
    dim: usize,
    params: &IvfPqParams,
    train_rows: usize,
    batch: usize,
    rows: impl Fn(usize, usize) -> Vec<f32>,
) -> anyhow::Result<Built> {
    let index_path = dir.join("dense.ivfpq");
    let vectors_path = dir.join("vectors.f32");
    let started = Instant::now();
    let mut generate_s = 0.0;
    let mut timed_rows = |start: usize, count: usize| {
        let t = Instant::now();
        let r = rows(start, count);
        generate_s += t.elapsed().as_secs_f64();
        r
    };
    let train = timed_rows(0, train_rows);
    let train_started = Instant::now();
    let mut builder = IvfPqBuilder::train(dim, params, &train)?;
    let train_s = train_started.elapsed().as_secs_f64();
    drop(train);
    eprintln!(
        "trained {:?} on {train_rows} rows in {train_s:.1}s",
        builder.params()
    );
    // f32: the exact ground truth is scanned from this file.
    let mut writer = VectorFileWriter::create(&vectors_path, dim, Precision::F32)?;
    let progress = indicatif::ProgressBar::new(n as u64).with_style(
        indicatif::ProgressStyle::with_template("adding {pos}/{len} vectors {wide_bar} {eta}")
            .expect("valid template"),
    );
    for start in (0..n).step_by(batch) {
        let count = batch.min(n - start);
        let vectors = timed_rows(start, count);
        let ids: Vec<i64> = (start as i64..(start + count) as i64).collect();
        builder.add(&vectors, &ids)?;
        writer.append(&vectors)?;
        progress.inc(count as u64);
    }
    progress.finish_and_clear();
    let params = builder.write(&index_path)?;
    writer.finish()?;
    let build_s = started.elapsed().as_secs_f64() - generate_s;
    eprintln!("built {n} vectors in {build_s:.1}s (+{generate_s:.1}s generating them)");
    let compact_started = Instant::now();
    let compact_path = dir.join("vectors.sq8");
    let written = VectorFile::open(&vectors_path)?;
    let rows = written.f32_rows().context("the vector file is f32")?;
    Sq8File::write(&compact_path, dim, rows)?;
    let compact_s = compact_started.elapsed().as_secs_f64();
    eprintln!("wrote the SQ8 copy in {compact_s:.1}s");
    Ok(Built {
        index: index_path,
        vectors: vectors_path,
        compact: Some(compact_path),
        compact_s,
        params,
        train_rows,
        build_s,
        train_s,
        generate_s,
    })
}

/// Opens what was built and measures it (in the serving process). The order matters: serving memory is read
/// after the timed passes and before the exact search, whose full scans map every vector into this process.
fn measure(
    args: &BenchArgs,
    built: &Built,
    queries: &[f32],
    overfetch: usize,
    sweep: &[u32],
) -> anyhow::Result<BenchReport> {
    let served = Served::open(&built.index, &built.vectors, SERVING_THREADS, K, overfetch)?;
    let dim = served.vectors.dim();
    let nq = queries.len() / dim;
    let nprobe = built.params.nprobe;
    // A first, untimed pass brings the probed lists into the page cache: steady-state serving, not a cold
    // disk, is what the latency figures describe.
    served.pass(queries, nprobe)?;
    let (pass, found) = served.pass(queries, nprobe)?;
    let qps_2t = served.qps_threads(queries, nprobe, SERVING_THREADS)?;
    let memory = Memory::current();
    eprintln!(
        "served {nq} queries: p50 {:.2} ms, {:.0} QPS (1 thread), {qps_2t:.0} QPS (2 threads)",
        pass.p50_ms, pass.qps_1t
    );
    let (truth, exact) = served.exact(queries, args.exact_queries.min(nq))?;
    let pass = pass.with_recall(&found, &truth, K);
    let mut curve = Vec::new();
    let mut served = served;
    let overfetches = if args.sweep_overfetch.is_empty() {
        vec![overfetch]
    } else {
        args.sweep_overfetch.clone()
    };
    for &o in &overfetches {
        served.overfetch = o.max(1);
        for &p in sweep {
            let (point, found) = served.pass(queries, p)?;
            curve.push(point.with_recall(&found, &truth, K));
        }
    }
    // The same sweep re-scored from the SQ8 copy, in the same process after the same exact scan: the f32 curve
    // above is its baseline.
    if let (Some(path), false) = (&built.compact, args.sweep_compact.is_empty()) {
        served.compact =
            Some(Sq8File::open(path).with_context(|| format!("opening {}", path.display()))?);
        for &o in &args.sweep_compact {
            served.overfetch = o.max(1);
            for &p in sweep {
                let (point, found) = served.pass(queries, p)?;
                curve.push(point.with_recall(&found, &truth, K));
            }
        }
    }
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let (index_bytes, vectors_bytes) = (size(&built.index), size(&built.vectors));
    let compact_bytes = built.compact.as_deref().map_or(0, size);
    Ok(BenchReport {
        dataset: String::new(),
        n: served.index.len(),
        dim,
        queries: nq,
        k: K,
        params: built.params,
        overfetch,
        clusters: None,
        train_rows: built.train_rows,
        build_s: built.build_s,
        train_s: built.train_s,
        generate_s: built.generate_s,
        disk_bytes: index_bytes + vectors_bytes,
        index_bytes,
        vectors_bytes,
        compact_bytes,
        compact_s: built.compact_s,
        rss_bytes: memory.rss_bytes,
        rss_anon_bytes: memory.rss_anon_bytes,
        rss_file_bytes: memory.rss_file_bytes,
        p50_ms: pass.p50_ms,
        p95_ms: pass.p95_ms,
        p99_ms: pass.p99_ms,
        qps_1t: pass.qps_1t,
        qps_2t,
        recall_at_10: pass.recall_at_10,
        exact_p50_ms: exact.exact_p50_ms,
        exact_timed_queries: exact.timed_queries,
        truth_s: exact.truth_s,
        speedup_vs_exact: exact.exact_p50_ms / pass.p50_ms,
        curve,
        host: Host::current(),
        timestamp: crate::eval::now_rfc3339(),
        git_commit: crate::eval::git_commit(),
    })
}

/// The report as a short human-readable table.
pub fn table(r: &BenchReport) -> String {
    let mb = |b: u64| b as f64 / 1e6;
    let mut out = format!(
        "{} n={} dim={} nlist={} m={} nprobe={} overfetch={}\n\
         build {:.1} s (train {:.1} s on {} rows)   disk {:.1} MB (index {:.1} + vectors {:.1})\n\
         serving RSS {:.1} MB (heap {:.1}, mapped files {:.1})\n\
         latency p50 {:.3} ms  p95 {:.3} ms  p99 {:.3} ms   QPS 1 thread {:.0}, 2 threads {:.0}\n\
         recall@10 {:.4}   exact p50 {:.2} ms   speed-up vs exact {:.1}x\n",
        r.dataset,
        r.n,
        r.dim,
        r.params.nlist,
        r.params.m,
        r.params.nprobe,
        r.overfetch,
        r.build_s,
        r.train_s,
        r.train_rows,
        mb(r.disk_bytes),
        mb(r.index_bytes),
        mb(r.vectors_bytes),
        mb(r.rss_bytes),
        mb(r.rss_anon_bytes),
        mb(r.rss_file_bytes),
        r.p50_ms,
        r.p95_ms,
        r.p99_ms,
        r.qps_1t,
        r.qps_2t,
        r.recall_at_10,
        r.exact_p50_ms,
        r.speedup_vs_exact
    );
    if !r.curve.is_empty() {
        out.push_str("nprobe  overfetch  rescore  recall@10  p50_ms  p95_ms   qps_1t\n");
        for p in &r.curve {
            out.push_str(&format!(
                "{:>6}  {:>9}  {:>7}  {:>9.4}  {:>6.3}  {:>6.3}  {:>7.0}\n",
                p.nprobe,
                p.overfetch,
                if p.sq8 { "sq8" } else { "f32" },
                p.recall_at_10,
                p.p50_ms,
                p.p95_ms,
                p.qps_1t
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nlist_grows_with_the_square_root_of_n() {
        assert_eq!(default_nlist(1_000_000), 1024);
        assert_eq!(default_nlist(10_000_000), 4096);
        assert_eq!(default_nlist(60_000), 256);
        assert_eq!(default_nlist(10), 16);
    }
}
