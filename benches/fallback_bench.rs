//! Benchmark: search latency with the embedding service up against the same searches in fallback mode (BM25
//! only, breaker open), in one run; and the time from the embedding service's death (SIGKILL) or hang
//! (SIGSTOP) to the first answer in fallback mode.
//!
//! A real `attest serve --role embedder` process (the local MiniLM model behind the OpenAI-compatible API)
//! serves a router running in this process over one local shard holding `data/squad-sample`.
//!
//! `cargo build --workspace --all-targets && $CARGO_TARGET_DIR/debug/examples/fallback_bench [ROUNDS]`
//! (`ATTEST_BIN` overrides the `attest` binary next to the example's directory). Prints one JSON object.

mod common;

use common::attest_bin;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::Context;
use attest_embed::{build_embedder, EmbedderConfig};
use attest_lab::bench::metrics::percentile;
use attest_node::config::AttestConfig;
use attest_node::local::ControlPlane;
use attest_proto::v1 as pb;
use attest_router::{IngestDocument, Router};
use serde_json::{json, Value};

struct Embedder(Child);

impl Drop for Embedder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_embedder(bin: &Path) -> anyhow::Result<(Embedder, String)> {
    let mut child = Command::new(bin)
        .args([
            "serve",
            "--insecure",
            "--role",
            "embedder",
            "--http",
            "127.0.0.1:0",
        ])
        .env("ATTEST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()?;
    let line = common::listening_line(&mut child, true)?;
    let url = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http="))
        .with_context(|| format!("no address in {line:?}"))?
        .to_string();
    Ok((Embedder(child), url))
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: sending a signal to our own child process.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

async fn search(router: &Router, query: &str) -> anyhow::Result<(f64, bool)> {
    let started = Instant::now();
    let resp = router
        .search()
        .run(
            pb::SearchRequest {
                collection: "bench".into(),
                query: query.into(),
                k: Some(10),
                ..Default::default()
            },
            attest_telemetry::request_id::new_id(),
        )
        .await?;
    Ok((started.elapsed().as_secs_f64() * 1e3, resp.fallback_mode))
}

/// Latencies (ms) of every query, `rounds` times; checks each answer's mode.
async fn timed(
    router: &Router,
    queries: &[String],
    rounds: usize,
    expect_fallback: bool,
) -> anyhow::Result<Vec<f64>> {
    let mut out = Vec::new();
    for _ in 0..rounds {
        for q in queries {
            let (ms, fallback) = search(router, q).await?;
            anyhow::ensure!(
                fallback == expect_fallback,
                "unexpected fallback_mode={fallback}"
            );
            out.push(ms);
        }
    }
    out.sort_by(f64::total_cmp);
    Ok(out)
}

/// Searches until one comes back in fallback mode; the time since `since`.
async fn first_fallback(
    router: &Router,
    queries: &[String],
    since: Instant,
) -> anyhow::Result<f64> {
    for q in queries.iter().cycle().take(1000) {
        if search(router, q).await?.1 {
            return Ok(since.elapsed().as_secs_f64() * 1e3);
        }
    }
    anyhow::bail!("no fallback answer")
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let rounds: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(3);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let bin = attest_bin()?;
    let (mut embedder_proc, url) = start_embedder(&bin)?;

    let dir = tempfile::tempdir()?;
    let mut embedder_cfg = EmbedderConfig::default();
    embedder_cfg.use_remote_url(&url);
    let mut cfg = AttestConfig::default();
    // Every query must reach the embedder, or the cache would hide the service's state.
    cfg.router.query_cache_capacity = 0;
    let plane = ControlPlane::start(&cfg, dir.path(), 1, None, Default::default()).await?;
    let router = plane.router(&cfg, build_embedder(&embedder_cfg)?).await?;
    router
        .collections()
        .create(
            pb::CreateCollectionRequest {
                name: "bench".into(),
                shards: Some(1),
                replication: Some(1),
                index: None,
                ..Default::default()
            },
            "setup",
        )
        .await?;
    let corpus = std::fs::read(root.join("data/squad-sample/corpus.jsonl"))?;
    let docs: Vec<IngestDocument> = attest_ingest::parse_jsonl(&corpus)
        .documents
        .into_iter()
        .map(|source| IngestDocument {
            source,
            vector: None,
        })
        .collect();
    let ingest_started = Instant::now();
    let n_docs = docs.len();
    for batch in docs.chunks(32) {
        router
            .ingest()
            .run("bench", batch.to_vec(), "setup")
            .await?;
    }
    eprintln!(
        "ingested {n_docs} documents through the embedder in {:.1}s",
        ingest_started.elapsed().as_secs_f64()
    );
    let queries: Vec<String> =
        std::fs::read_to_string(root.join("data/squad-sample/queries.jsonl"))?
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|q| q["text"].as_str().map(str::to_string))
            .collect();

    // Warm both paths, then normal mode.
    timed(&router, &queries[..10], 1, false).await?;
    let normal = timed(&router, &queries, rounds, false).await?;

    // Hang: SIGSTOP; the first search waits out the embedder timeout, then answers from BM25. SIGCONT and
    // the next search is normal again (one failure does not open the breaker).
    let timeout_ms = embedder_cfg.remote.timeout_ms;
    signal(&embedder_proc.0, libc::SIGSTOP);
    let stopped_at = Instant::now();
    let hang_to_fallback_ms = first_fallback(&router, &queries, stopped_at).await?;
    signal(&embedder_proc.0, libc::SIGCONT);
    timed(&router, &queries[..3], 1, false).await?;

    // Death: SIGKILL; the first search after it is already a fallback answer.
    let killed_at = Instant::now();
    signal(&embedder_proc.0, libc::SIGKILL);
    let kill_to_fallback_ms = first_fallback(&router, &queries, killed_at).await?;
    let _ = embedder_proc.0.wait();
    // Open the breaker (5 failures in all), then fallback mode proper.
    timed(&router, &queries[..4], 1, true).await?;
    let fallback = timed(&router, &queries, rounds, true).await?;

    let (n50, n95) = (percentile(&normal, 0.5), percentile(&normal, 0.95));
    let (f50, f95) = (percentile(&fallback, 0.5), percentile(&fallback, 0.95));
    println!(
        "{}",
        json!({
            "documents": n_docs, "searches_per_mode": normal.len(),
            "normal_p50_ms": n50, "normal_p95_ms": n95,
            "fallback_p50_ms": f50, "fallback_p95_ms": f95,
            "fallback_over_normal_p50": f50 / n50,
            "kill_to_first_fallback_ms": kill_to_fallback_ms,
            "hang_to_first_fallback_ms": hang_to_fallback_ms, "embed_timeout_ms": timeout_ms,
        })
    );
    Ok(())
}
