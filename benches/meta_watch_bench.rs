//! `meta_watch_bench` — what following meta's cluster state costs, polled and watched (issue 44 item 3).
//!
//! One meta process (`attest serve --role meta`) holds a cluster state of `--collections` collections ×
//! `--shards` shards, replication 2, placed on 3 shard nodes that this driver registers and heartbeats itself:
//! the state is what is measured, and 3,000 shard engines would not fit this machine (no router calls a shard
//! here). `--routers` router processes follow it, each reaching meta through a loopback proxy of its own that
//! counts the bytes meta sends it (every byte on the wire: HTTP/2 frames, headers, the state). For each mode —
//! `poll` (`router.meta_watch: false`: the whole state every `router.meta_poll_ms`, 500 ms, what every router
//! did before) and `watch` (the default) — on fresh router processes:
//!   1. idle: bytes per second from meta to all routers over `--seconds`;
//!   2. churn: the same while the driver writes one API key to meta per second (each write changes the state);
//!   3. propagation, `--rounds` times: a key minted through router 1 (`POST /v1/keys`), the time until every other
//!      router and an answer replica accept it; then revoked through router 1, the time until every one of them
//!      refuses it (401). The answer replica's own bytes from meta are reported apart (idle).
//!
//! Prints one JSON line per mode, then the ratios poll / watch. Build with the workspace
//! (`cargo build --workspace --all-targets`), then `$CARGO_TARGET_DIR/debug/examples/meta_watch_bench`.
//! `ATTEST_BIN` overrides the `attest` binary next to the example's directory.

mod common;

use common::{start, Procs};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use attest_lab::bench::metrics::percentile;
use attest_proto::v1 as pb;
use attest_proto::{ClusterCredential, MetaClient};
use clap::Parser;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const ADMIN: &str = "bench-admin-key-0123456789abcdef";
const CLUSTER: &str = "bench-cluster-key-0123456789abcdef";

#[derive(Parser)]
#[command(about = "Bytes from meta and key propagation, routers polling against routers watching")]
struct Cli {
    #[arg(long, default_value_t = 1000)]
    collections: usize,
    #[arg(long, default_value_t = 3)]
    shards: u32,
    #[arg(long, default_value_t = 4)]
    routers: usize,
    /// Seconds each of idle and churn is measured.
    #[arg(long, default_value_t = 30.0)]
    seconds: f64,
    /// Keys minted and revoked per mode.
    #[arg(long, default_value_t = 10)]
    rounds: usize,
    /// Work directory (data, logs); a temporary one if not given.
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// The `key=` address of a listening line as `host:port` (these roles listen in plaintext).
fn value_in(line: &str, key: &str) -> anyhow::Result<String> {
    Ok(common::value_in(line, key)?
        .trim_start_matches("http://")
        .to_string())
}

/// A front that checks API keys: a router or an answer replica, at `host:port`.
enum Front {
    Router(String),
    Answer(String),
}

/// A loopback proxy to `upstream`; the bytes it passes from upstream to its clients are added to `counted`.
async fn counting_proxy(upstream: String, counted: Arc<AtomicU64>) -> anyhow::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?.to_string();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let (upstream, counted) = (upstream.clone(), Arc::clone(&counted));
            tokio::spawn(async move {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    return;
                };
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                let up = tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
                    let _ = server_write.shutdown().await;
                });
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match server_read.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            counted.fetch_add(n as u64, Ordering::Relaxed);
                            if client_write.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    }
                }
                let _ = client_write.shutdown().await;
                up.abort();
            });
        }
    });
    Ok(address)
}

/// A made-up key record (read scope, every tenant): a write that changes the state.
fn churn_key(i: u64) -> pb::ApiKeyInfo {
    pb::ApiKeyInfo {
        key_sha256: format!("{i:064x}"),
        scopes: vec![pb::Scope::Read as i32],
        tenants: vec!["*".into()],
        id: format!("{:012x}", 0xc0ffee_000000u64 + i),
        ..Default::default()
    }
}

/// The HTTP status a front gives `key` on a call that does no work past the key check: a router's view of one
/// collection, an answer replica's ask of an empty question (refused as invalid once the key is accepted).
async fn status_with(http: &reqwest::Client, front: &Front, key: &str) -> anyhow::Result<u16> {
    let request = match front {
        Front::Router(base) => http.get(format!("http://{base}/v1/collections/c0")),
        Front::Answer(base) => http
            .post(format!("http://{base}/v1/collections/c0/ask"))
            .json(&json!({"question": ""})),
    };
    Ok(request.bearer_auth(key).send().await?.status().as_u16())
}

/// Milliseconds until every front in `others` gives `key` a status that `done` accepts (polled every 2 ms).
async fn until_every(
    http: &reqwest::Client,
    others: &[Front],
    key: &str,
    done: impl Fn(u16) -> bool,
) -> anyhow::Result<f64> {
    let start = Instant::now();
    for front in others {
        while !done(status_with(http, front, key).await?) {
            ensure!(
                start.elapsed() < Duration::from_secs(30),
                "a front did not change its answer"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    Ok(start.elapsed().as_secs_f64() * 1e3)
}

/// Bytes per second meta sends to the routers over `seconds`.
async fn rate(counted: &[Arc<AtomicU64>], seconds: f64) -> f64 {
    let total = || {
        counted
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum::<u64>()
    };
    let before = total();
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    (total() - before) as f64 / seconds
}

/// Starts a front (`role_args`: its role and what only it takes) with keys on and `setting` in its environment,
/// reaching meta at `meta_grpc` through a counting proxy of its own; its listening line and the proxy's count.
async fn start_front(
    procs: &mut Procs,
    dir: &Path,
    meta_grpc: &str,
    name: &str,
    role_args: &[&str],
    setting: (&str, &str),
) -> anyhow::Result<(String, Arc<AtomicU64>)> {
    let bytes = Arc::new(AtomicU64::new(0));
    let proxy = counting_proxy(meta_grpc.to_string(), Arc::clone(&bytes)).await?;
    let (meta_url, data) = (format!("http://{proxy}"), dir.join(name));
    let mut args = vec!["serve", "--insecure"];
    args.extend_from_slice(role_args);
    args.extend([
        "--meta",
        &meta_url,
        "--http",
        "127.0.0.1:0",
        "--admin-key",
        ADMIN,
        "--cluster-key",
        CLUSTER,
        "--data-dir",
        data.to_str().context("data path")?,
    ]);
    let log = dir.join(format!("{name}.log"));
    let line = tokio::task::block_in_place(|| start(procs, &args, &[setting], &log))?;
    Ok((line, bytes))
}

/// One mode on fresh routers: idle and churn rates, propagation times.
async fn measure(
    cli: &Cli,
    dir: &Path,
    meta_grpc: &str,
    meta: &MetaClient,
    watch: bool,
    churn_from: u64,
) -> anyhow::Result<Value> {
    let mode = if watch { "watch" } else { "poll" };
    let mut procs = Procs(Vec::new());
    let mut counted = Vec::new();
    let mut routers = Vec::new();
    let setting = if watch { "true" } else { "false" };
    for i in 0..cli.routers {
        let (line, bytes) = start_front(
            &mut procs,
            dir,
            meta_grpc,
            &format!("{mode}-router-{i}"),
            &["--role", "router", "--grpc", "127.0.0.1:0"],
            ("ATTEST__ROUTER__META_WATCH", setting),
        )
        .await?;
        routers.push((value_in(&line, "http=")?, value_in(&line, "grpc=")?));
        counted.push(bytes);
    }
    // One answer replica (behind router 0), reaching meta through a proxy of its own.
    let router_url = format!("http://{}", routers[0].1);
    let (line, answer_bytes) = start_front(
        &mut procs,
        dir,
        meta_grpc,
        &format!("{mode}-answer"),
        &["--role", "answer", "--router", &router_url],
        ("ATTEST__ANSWER__META_WATCH", setting),
    )
    .await?;
    let answer = value_in(&line, "http=")?;
    let mut others: Vec<Front> = routers[1..]
        .iter()
        .map(|(http, _)| Front::Router(http.clone()))
        .collect();
    others.push(Front::Answer(answer));
    let minter = routers[0].0.clone();
    // Start-up reads are not what is measured.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let answer_before = answer_bytes.load(Ordering::Relaxed);
    let idle = rate(&counted, cli.seconds).await;
    let answer_idle = (answer_bytes.load(Ordering::Relaxed) - answer_before) as f64 / cli.seconds;

    let writer = {
        let meta = meta.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            for i in churn_from.. {
                tick.tick().await;
                if let Err(e) = meta.put_api_key(churn_key(i)).await {
                    eprintln!("churn write failed: {e}");
                }
            }
        })
    };
    let churn = rate(&counted, cli.seconds).await;
    writer.abort();

    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()?;
    let (mut accept, mut refuse) = (Vec::new(), Vec::new());
    for _ in 0..cli.rounds {
        let minted: Value = http
            .post(format!("http://{minter}/v1/keys"))
            .bearer_auth(ADMIN)
            .json(&json!({"scopes": ["read"], "tenants": ["*"]}))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let (id, key) = (
            minted["id"].as_str().context("id")?.to_string(),
            minted["key"].as_str().context("key")?.to_string(),
        );
        accept.push(until_every(&http, &others, &key, |s| s != 401).await?);
        http.delete(format!("http://{minter}/v1/keys/{id}"))
            .bearer_auth(ADMIN)
            .send()
            .await?
            .error_for_status()?;
        refuse.push(until_every(&http, &others, &key, |s| s == 401).await?);
        // Let the revocation's own reads pass before the next round.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let line = json!({
        "mode": mode,
        "collections": cli.collections,
        "shards": cli.shards,
        "routers": cli.routers,
        "idle_bytes_per_s": idle.round(),
        "churn_bytes_per_s": churn.round(),
        "answer_idle_bytes_per_s": answer_idle.round(),
        "new_key_ms": {"p50": percentile(&accept, 0.5), "max": percentile(&accept, 1.0)},
        "revoked_key_ms": {"p50": percentile(&refuse, 0.5), "max": percentile(&refuse, 1.0)},
    });
    println!("{line}");
    Ok(line)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let tmp = tempfile::tempdir()?;
    let dir = cli.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir)?;
    let mut procs = Procs(Vec::new());
    let meta_data = dir.join("meta");
    let meta_line = start(
        &mut procs,
        &[
            "serve",
            "--insecure",
            "--role",
            "meta",
            "--meta-id",
            "1",
            "--grpc",
            "127.0.0.1:0",
            "--cluster-key",
            CLUSTER,
            "--data-dir",
            meta_data.to_str().context("data path")?,
        ],
        &[],
        &dir.join("meta.log"),
    )?;
    let meta_grpc = value_in(&meta_line, "grpc=")?;
    let credential = ClusterCredential::new(CLUSTER).map_err(anyhow::Error::msg)?;
    let meta = MetaClient::with_credential([format!("http://{meta_grpc}")], credential)?;

    // Three shard nodes that stay alive (their heartbeats come from here), then the collections.
    let mut nodes = Vec::new();
    for i in 0..3 {
        let node = meta
            .register_node(pb::RegisterNodeRequest {
                name: format!("bench-shard-{i}"),
                address: format!("http://127.0.0.1:{}", 1 + i),
                role: pb::NodeRole::Shard as i32,
                zone: String::new(),
            })
            .await?;
        nodes.push(node.id);
    }
    let heartbeats = {
        let meta = meta.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(500));
            loop {
                tick.tick().await;
                for id in &nodes {
                    let _ = meta.heartbeat(*id, vec![]).await;
                }
            }
        })
    };
    let started = Instant::now();
    for c in 0..cli.collections {
        meta.create_collection(pb::MetaCreateCollectionRequest {
            name: format!("c{c}"),
            shards: cli.shards,
            replication: 2,
            // What a router records (its defaults, MiniLM's dimension, the chunking it writes down).
            spec: Some(pb::CollectionSpec {
                dimension: 384,
                index: Some(pb::IndexParams {
                    nlist: 1024,
                    m: 48,
                    nbits: 8,
                    nprobe: 32,
                    recall_target: None,
                }),
                seal_threshold: 0,
                embedder: "minilm-l6-v2".into(),
                embedder_identity: None,
            }),
            chunking_json: r#"{"max_tokens":256,"overlap_tokens":32,"title_prefix":true}"#.into(),
            ..Default::default()
        })
        .await
        .with_context(|| format!("creating c{c}"))?;
    }
    let state = meta.cluster_state(true).await?;
    eprintln!(
        "{} collections × {} shards created in {:.1} s; the whole state is {} bytes",
        cli.collections,
        cli.shards,
        started.elapsed().as_secs_f64(),
        prost::Message::encoded_len(&state)
    );

    let poll = measure(&cli, &dir, &meta_grpc, &meta, false, 1).await?;
    let watch = measure(&cli, &dir, &meta_grpc, &meta, true, 1_000_000).await?;
    heartbeats.abort();
    let ratio = |what: &str| {
        poll[what].as_f64().unwrap_or(0.0) / watch[what].as_f64().unwrap_or(1.0).max(1.0)
    };
    println!(
        "{}",
        json!({
            "summary": "poll / watch",
            "idle_bytes_ratio": ratio("idle_bytes_per_s"),
            "churn_bytes_ratio": ratio("churn_bytes_per_s"),
            "revoked_key_max_ms": {"poll": poll["revoked_key_ms"]["max"], "watch": watch["revoked_key_ms"]["max"]},
            "new_key_max_ms": {"poll": poll["new_key_ms"]["max"], "watch": watch["new_key_ms"]["max"]},
        })
    );
    Ok(())
}
