//! Client commands: they talk to a running router's HTTP API v1, with the key in `ATTEST_API_KEY` (if set) as
//! the bearer token.

use std::path::PathBuf;

use anyhow::{bail, Context};
use attest_ingest::{parse_file, SourceDocument};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Value};

use crate::cli::{CollectionCommand, IngestArgs, Lane, SearchArgs};

/// `--server`, checked before anything is sent: an absolute http(s) URL, without a trailing slash.
pub fn server_url(server: &str) -> anyhow::Result<String> {
    let url = reqwest::Url::parse(server)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
    anyhow::ensure!(
        url.is_some(),
        "--server `{server}` is not a valid URL (expected e.g. http://127.0.0.1:7700)"
    );
    Ok(server.trim_end_matches('/').to_string())
}

/// The environment variable client commands take their API key from.
pub const API_KEY_ENV: &str = "ATTEST_API_KEY";

/// The environment variable naming a PEM CA file that client commands trust for an `https://` server (a
/// cluster whose certificates a private CA signed).
pub const CA_CERT_ENV: &str = "ATTEST_CA_CERT";

/// An HTTP client that sends `Authorization: Bearer $ATTEST_API_KEY` when the variable is set, and trusts the CA
/// of `$ATTEST_CA_CERT` besides the system's.
pub fn client() -> anyhow::Result<reqwest::Client> {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Ok(key) = std::env::var(API_KEY_ENV) {
        let value = reqwest::header::HeaderValue::from_str(&format!("Bearer {}", key.trim()))
            .with_context(|| format!("{API_KEY_ENV} is not a valid header value"))?;
        headers.insert(reqwest::header::AUTHORIZATION, value);
    }
    let mut builder = reqwest::Client::builder().default_headers(headers);
    if let Ok(path) = std::env::var(CA_CERT_ENV) {
        let pem =
            std::fs::read(&path).with_context(|| format!("{CA_CERT_ENV}: cannot read {path}"))?;
        let ca = reqwest::Certificate::from_pem(&pem)
            .with_context(|| format!("{CA_CERT_ENV}: {path} is not a PEM certificate"))?;
        builder = builder.add_root_certificate(ca);
    }
    Ok(builder.build()?)
}

/// The strings of a JSON array, in order (none when it is not an array).
pub fn strings(array: &Value) -> Vec<&str> {
    array
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// What a client command says when nothing answers at `url`.
pub fn unreachable(url: &str) -> String {
    format!("cannot reach the router at {url} (is `attest dev` running? see --server)")
}

/// Sends a request and returns its JSON body; an error names the URL it could not reach, or the status and the
/// server's message.
pub async fn call(req: reqwest::RequestBuilder) -> anyhow::Result<Value> {
    let (http, req) = req.build_split();
    let req = req?;
    let url = req.url().clone();
    let resp = http
        .execute(req)
        .await
        .with_context(|| unreachable(url.as_str()))?;
    let status = resp.status();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        let msg = body["error"]["message"].as_str().unwrap_or("no message");
        bail!("{status}: {msg}");
    }
    Ok(body)
}

/// Stores a collection's answer thresholds in the cluster's meta through a running router.
pub async fn put_thresholds(
    server: &str,
    collection: &str,
    thresholds: &attest_core::settings::CollectionThresholds,
) -> anyhow::Result<()> {
    let server = server_url(server)?;
    let url = format!("{server}/v1/collections/{collection}/thresholds");
    call(client()?.put(url).json(thresholds)).await?;
    Ok(())
}

pub async fn collection(server: &str, cmd: CollectionCommand) -> anyhow::Result<()> {
    let server = &server_url(server)?;
    let http = client()?;
    match cmd {
        CollectionCommand::Create {
            name,
            shards,
            replication,
            nlist,
            m,
            nbits,
            nprobe,
            recall_target,
            embedder,
            json,
        } => {
            let index = json!({"nlist": nlist, "m": m, "nbits": nbits, "nprobe": nprobe,
                "recall_target": recall_target});
            let body = json!({"name": name, "shards": shards, "replication": replication,
                "index": index, "embedder": embedder});
            let out = call(http.post(format!("{server}/v1/collections")).json(&body)).await?;
            if json {
                println!("{out}");
            } else {
                println!(
                    "created collection {} ({} shards, replication {}, {}-d, embedded by {})",
                    out["name"].as_str().unwrap_or(""),
                    out["shards"],
                    out["replication"],
                    out["dimension"],
                    out["embedder"].as_str().unwrap_or("")
                );
            }
        }
        CollectionCommand::List { json } => {
            let out = call(http.get(format!("{server}/v1/collections"))).await?;
            if json {
                println!("{out}");
            } else {
                for c in out["collections"].as_array().into_iter().flatten() {
                    println!(
                        "{}\tshards={}\tdim={}\tnlist={}\tembedder={}",
                        c["name"].as_str().unwrap_or(""),
                        c["shards"],
                        c["dimension"],
                        c["index"]["nlist"],
                        c["embedder"].as_str().unwrap_or("")
                    );
                }
            }
        }
        CollectionCommand::Drop { name } => {
            call(http.delete(format!("{server}/v1/collections/{name}"))).await?;
            println!("dropped collection {name}");
        }
        CollectionCommand::Reembed {
            name,
            embedder,
            detach,
            json,
        } => crate::reembed::start(&http, server, &name, &embedder, detach, json).await?,
        CollectionCommand::ReembedCancel { id } => {
            let job = call(http.post(format!("{server}/v1/reembed/jobs/{id}/cancel"))).await?;
            println!(
                "asked {id} to stop (state {})",
                job["state"].as_str().unwrap_or("")
            );
        }
    }
    Ok(())
}

/// Files to ingest: the given files, and the supported files found under the given directories (sorted).
fn expand(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found = Vec::new();
            let mut stack = vec![p.clone()];
            while let Some(d) = stack.pop() {
                for e in
                    std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))?
                {
                    let path = e?.path();
                    if path.is_dir() {
                        stack.push(path);
                    } else if matches!(
                        path.extension().and_then(|x| x.to_str()),
                        Some("jsonl" | "ndjson" | "md" | "markdown" | "txt")
                    ) {
                        found.push(path);
                    }
                }
            }
            found.sort();
            out.extend(found);
        } else if p.exists() {
            out.push(p.clone());
        } else {
            bail!("{}: no such file or directory", p.display());
        }
    }
    Ok(out)
}

fn doc_json(d: &SourceDocument) -> Value {
    json!({"id": d.id, "title": d.title, "text": d.text, "metadata": d.metadata, "tenant": d.tenant})
}

async fn ensure_collection(
    http: &reqwest::Client,
    server: &str,
    name: &str,
    create: bool,
) -> anyhow::Result<()> {
    let url = format!("{server}/v1/collections/{name}");
    let resp = http
        .get(&url)
        .send()
        .await
        .with_context(|| unreachable(&url))?;
    if resp.status() == reqwest::StatusCode::NOT_FOUND {
        anyhow::ensure!(
            create,
            "collection `{name}` does not exist: create it with `attest collection create {name}`, or pass --create"
        );
        call(
            http.post(format!("{server}/v1/collections"))
                .json(&json!({"name": name})),
        )
        .await?;
        eprintln!("created collection {name}");
    }
    Ok(())
}

pub async fn ingest(server: &str, args: IngestArgs) -> anyhow::Result<()> {
    let http = client()?;
    let server = &server_url(server)?;
    let files = expand(&args.paths)?;
    anyhow::ensure!(
        !files.is_empty(),
        "no files to ingest: the directories hold no .jsonl, .ndjson, .md, .markdown or .txt file"
    );
    let mut documents: Vec<SourceDocument> = Vec::new();
    let mut malformed = 0usize;
    let mut unreadable = 0usize;
    for f in &files {
        // One unreadable file (binary, not UTF-8) is skipped with a warning; the others are ingested.
        let parsed = match parse_file(f) {
            Ok(parsed) => parsed,
            Err(e) => {
                eprintln!("warning: skipping {}: {e}", f.display());
                unreadable += 1;
                continue;
            }
        };
        for e in &parsed.errors {
            eprintln!("{}:{}: {}", f.display(), e.line, e.reason);
        }
        malformed += parsed.errors.len();
        documents.extend(parsed.documents);
    }
    anyhow::ensure!(
        unreadable < files.len(),
        "none of the {} files could be read",
        files.len()
    );
    ensure_collection(&http, server, &args.collection, args.create).await?;
    let bar = ProgressBar::new(documents.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} documents ({per_sec}, eta {eta}) {msg}")
            .expect("template"),
    );
    let (mut accepted, mut chunks, mut duplicates) = (0u64, 0u64, 0u64);
    let batch = args.batch.max(1);
    for part in documents.chunks(batch) {
        let body = json!({"documents": part.iter().map(doc_json).collect::<Vec<_>>()});
        let out = call(
            http.post(format!(
                "{server}/v1/collections/{}/documents",
                args.collection
            ))
            .json(&body),
        )
        .await?;
        accepted += out["accepted"].as_u64().unwrap_or(0);
        chunks += out["chunks"].as_u64().unwrap_or(0);
        duplicates += out["duplicates"].as_u64().unwrap_or(0);
        bar.inc(part.len() as u64);
    }
    bar.finish_and_clear();
    let summary = json!({"files": files.len() - unreadable, "skipped_files": unreadable, "accepted": accepted, "chunks": chunks, "duplicates": duplicates, "malformed_lines": malformed});
    if args.json {
        println!("{summary}");
    } else {
        println!(
            "ingested {accepted} documents ({chunks} chunks) from {} files into {}; {duplicates} near-duplicates skipped; {malformed} malformed lines; {unreadable} unreadable files skipped",
            files.len() - unreadable,
            args.collection
        );
    }
    Ok(())
}

fn snippet(text: &str, max: usize) -> String {
    let flat = text.replace('\n', " ");
    if flat.chars().count() <= max {
        return flat;
    }
    format!("{}…", flat.chars().take(max).collect::<String>())
}

pub async fn search(server: &str, args: SearchArgs) -> anyhow::Result<()> {
    let server = &server_url(server)?;
    let lanes: Vec<&str> = match args.lane {
        Lane::Dense => vec!["dense"],
        Lane::Bm25 => vec!["bm25"],
        Lane::Hybrid => vec!["dense", "bm25"],
    };
    let body = json!({"query": args.query, "k": args.k, "lanes": lanes, "tenant": args.tenant});
    let http = client()?;
    let out = call(
        http.post(format!(
            "{server}/v1/collections/{}/search",
            args.collection
        ))
        .json(&body),
    )
    .await?;
    if args.json {
        println!("{out}");
        return Ok(());
    }
    if out["fallback_mode"].as_bool() == Some(true) {
        println!("(embedding service unavailable: BM25-only results)");
    }
    if out["degraded"].as_bool() == Some(true) {
        println!(
            "(degraded: shards {} did not answer)",
            out["missing_shards"]
        );
    }
    for (i, h) in out["hits"].as_array().into_iter().flatten().enumerate() {
        let lane = |name: &str| {
            h["lanes"][name]["rank"]
                .as_u64()
                .map_or("-".to_string(), |r| r.to_string())
        };
        println!(
            "{:>2}. {:.4}  {}  [{}]  dense#{} bm25#{} shard {}\n    {}",
            i + 1,
            h["score"].as_f64().unwrap_or(0.0),
            h["doc_id"].as_str().unwrap_or(""),
            h["title"].as_str().unwrap_or(""),
            lane("dense"),
            lane("bm25"),
            h["shard"],
            snippet(h["text"].as_str().unwrap_or(""), 160)
        );
    }
    Ok(())
}
