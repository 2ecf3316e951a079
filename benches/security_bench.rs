//! Benchmark: what authentication and TLS add to a search. Two clusters of real processes run side by side on
//! loopback, each `attest serve --role meta|shard|router` over the same 301 passages of `data/squad-sample`:
//! *plaintext* (`--insecure`, no keys) and *secured* (TLS on every listener with a CA made here, mutual TLS
//! between the nodes, API keys on, the search made with a read-only tenant key). The same queries go to both,
//! alternating one by one so both see the same machine load, over a kept-alive HTTPS/HTTP client as a service
//! calling the router would use; the secured latency is printed as a ratio of the plaintext one (p50, p95),
//! for the BM25 lane alone (where the transport is the largest share) and for the default hybrid search.
//!
//! `cargo build --workspace --all-targets && $CARGO_TARGET_DIR/debug/examples/security_bench [ROUNDS]`
//! (`ATTEST_BIN` overrides the binary). Prints one JSON object.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use serde_json::{json, Value};

const ADMIN: &str = "bench-admin-key-0123456789abcdef";

/// Child processes killed when dropped.
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts `attest ARGS` and returns the `key=` value of its "listening" line.
fn start(procs: &mut Procs, args: &[String], log: &Path, key: &str) -> anyhow::Result<String> {
    let bin = common::attest_bin()?;
    let mut child = Command::new(bin)
        .args(args)
        .env("ATTEST_LOG", "warn")
        .env("OPENBLAS_NUM_THREADS", "1")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log)?)
        .spawn()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().context("stdout")?).read_line(&mut line)?;
    procs.0.push(child);
    let value = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix(key))
        .with_context(|| format!("no {key} in {line:?} (see {})", log.display()))?;
    Ok(value.to_string())
}

/// A CA and one node certificate (server and client use) for loopback, written under `dir`; returns the TLS
/// flags of every role and the CA's PEM.
fn certificates(dir: &Path) -> anyhow::Result<(Vec<String>, String)> {
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "bench CA");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = ca.self_signed(&ca_key)?;
    let key = KeyPair::generate()?;
    let mut node = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])?;
    node.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let node = node.signed_by(&key, &ca, &ca_key)?;
    let (ca_path, cert, key_path) = (
        dir.join("ca.crt"),
        dir.join("node.crt"),
        dir.join("node.key"),
    );
    std::fs::write(&ca_path, ca.pem())?;
    std::fs::write(&cert, node.pem())?;
    std::fs::write(&key_path, key.serialize_pem())?;
    let flags = [
        ("--tls-cert", &cert),
        ("--tls-key", &key_path),
        ("--tls-ca", &ca_path),
    ]
    .iter()
    .flat_map(|(f, p)| [f.to_string(), p.display().to_string()])
    .collect();
    Ok((flags, ca.pem()))
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// meta + shard + router; `security` is either `--insecure` or the TLS flags and the admin key. Returns the
/// router's HTTP URL.
fn cluster(
    procs: &mut Procs,
    dir: &Path,
    name: &str,
    security: &[String],
) -> anyhow::Result<String> {
    let d = |role: &str| dir.join(format!("{name}-{role}"));
    let with = |mut args: Vec<String>, role: &str| {
        args.extend_from_slice(security);
        args.extend(["--data-dir".into(), d(role).display().to_string()]);
        args
    };
    let meta = start(
        procs,
        &with(
            strings(&[
                "serve",
                "--role",
                "meta",
                "--meta-id",
                "1",
                "--grpc",
                "127.0.0.1:0",
            ]),
            "meta",
        ),
        &d("meta.log"),
        "grpc=",
    )?;
    let meta = format!("http://{meta}");
    start(
        procs,
        &with(
            strings(&[
                "serve",
                "--role",
                "shard",
                "--meta",
                &meta,
                "--grpc",
                "127.0.0.1:0",
            ]),
            "shard",
        ),
        &d("shard.log"),
        "grpc=",
    )?;
    start(
        procs,
        &with(
            strings(&[
                "serve",
                "--role",
                "router",
                "--meta",
                &meta,
                "--http",
                "127.0.0.1:0",
                "--grpc",
                "127.0.0.1:0",
            ]),
            "router",
        ),
        &d("router.log"),
        "http=",
    )
}

/// POSTs `body` and requires a 2xx answer.
fn post(
    client: &reqwest::blocking::Client,
    url: &str,
    token: Option<&str>,
    body: &Value,
) -> anyhow::Result<Value> {
    let mut req = client.post(url).json(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send()?;
    let status = resp.status();
    let value: Value = resp.json().unwrap_or(Value::Null);
    anyhow::ensure!(status.is_success(), "{url}: {status} {value}");
    Ok(value)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() -> anyhow::Result<()> {
    let rounds: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(300);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = tempfile::tempdir()?;
    let (tls_flags, ca_pem) = certificates(dir.path())?;
    let mut procs = Procs(Vec::new());
    let plain_url = cluster(&mut procs, dir.path(), "plain", &strings(&["--insecure"]))?;
    let mut secured = tls_flags;
    secured.extend(strings(&["--admin-key", ADMIN]));
    let secure_url = cluster(&mut procs, dir.path(), "secure", &secured)?;

    let plain = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()?;
    let secure = reqwest::blocking::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes())?)
        .timeout(Duration::from_secs(120))
        .build()?;

    let corpus: Vec<Value> = std::fs::read_to_string(root.join("data/squad-sample/corpus.jsonl"))?
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    let queries: Vec<String> =
        std::fs::read_to_string(root.join("data/squad-sample/queries.jsonl"))?
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str::<Value>(l)
                    .map(|v| v["text"].as_str().unwrap_or("").to_string())
            })
            .collect::<Result<_, _>>()?;

    // The same collection and documents in both; the secured one searched with a read-only tenant key.
    let create = json!({"name": "bench", "shards": 1, "replication": 1});
    post(
        &plain,
        &format!("{plain_url}/v1/collections"),
        None,
        &create,
    )?;
    post(
        &secure,
        &format!("{secure_url}/v1/collections"),
        Some(ADMIN),
        &create,
    )?;
    let reader = post(
        &secure,
        &format!("{secure_url}/v1/keys"),
        Some(ADMIN),
        &json!({"scopes": ["read"], "tenants": ["*"]}),
    )?["key"]
        .as_str()
        .context("minted key")?
        .to_string();
    for batch in corpus.chunks(64) {
        let docs = json!({"documents": batch});
        post(
            &plain,
            &format!("{plain_url}/v1/collections/bench/documents"),
            None,
            &docs,
        )?;
        post(
            &secure,
            &format!("{secure_url}/v1/collections/bench/documents"),
            Some(ADMIN),
            &docs,
        )?;
    }
    eprintln!("ingested {} passages into both clusters", corpus.len());

    let mut report = serde_json::Map::new();
    for (case, lanes) in [("bm25", Some(json!(["bm25"]))), ("hybrid", None)] {
        let (mut plain_ms, mut secure_ms) = (Vec::new(), Vec::new());
        // Warm-up: connections made, caches and the embedder's first run out of the figures.
        for (i, q) in queries.iter().cycle().take(rounds + 20).enumerate() {
            let mut body = json!({"query": q, "k": 10});
            if let Some(l) = &lanes {
                body["lanes"] = l.clone();
            }
            // Alternate which cluster goes first, so neither always runs right after the other.
            let order: [bool; 2] = if i % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            };
            for secured in order {
                let started = Instant::now();
                if secured {
                    post(
                        &secure,
                        &format!("{secure_url}/v1/collections/bench/search"),
                        Some(&reader),
                        &body,
                    )?;
                } else {
                    post(
                        &plain,
                        &format!("{plain_url}/v1/collections/bench/search"),
                        None,
                        &body,
                    )?;
                }
                let ms = started.elapsed().as_secs_f64() * 1000.0;
                if i >= 20 {
                    if secured {
                        secure_ms.push(ms)
                    } else {
                        plain_ms.push(ms)
                    }
                }
            }
        }
        plain_ms.sort_by(f64::total_cmp);
        secure_ms.sort_by(f64::total_cmp);
        let (p50, s50) = (percentile(&plain_ms, 0.5), percentile(&secure_ms, 0.5));
        let (p95, s95) = (percentile(&plain_ms, 0.95), percentile(&secure_ms, 0.95));
        report.insert(
            case.into(),
            json!({
                "searches_each": plain_ms.len(),
                "plaintext_ms": {"p50": p50, "p95": p95},
                "secured_ms": {"p50": s50, "p95": s95},
                "ratio_p50": s50 / p50,
                "ratio_p95": s95 / p95,
            }),
        );
    }
    println!("{}", serde_json::to_string_pretty(&Value::Object(report))?);
    Ok(())
}
