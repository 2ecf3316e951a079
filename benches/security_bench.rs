//! Benchmark: what authentication, TLS and tracing add to a search. Four clusters of real processes run side by
//! side on loopback, each `attest serve --role meta|shard|router` over the same 301 passages of
//! `data/squad-sample`: *plaintext* (`--insecure`, no keys), *keys* (API keys and the cluster key, still
//! plaintext), *tls_and_keys* (TLS on every listener with a CA made here, mutual TLS between the nodes, API keys)
//! and *traced* (plaintext, every span exported over OTLP to a sink in this process, sampled 1.0: the whole
//! cost of traces). Searches
//! are made with a read-only tenant key where keys are on. The same queries go to all three, in rotating
//! order so all see the same machine load, over a kept-alive HTTP(S) client as a service calling the router
//! would use; each latency is printed as a ratio of the plaintext one (p50, p95), for the BM25 lane alone
//! (where the transport is the largest share) and for the default hybrid search.
//!
//! `cargo build --workspace --all-targets && $CARGO_TARGET_DIR/debug/examples/security_bench [ROUNDS]`
//! (`ATTEST_BIN` overrides the binary). Prints one JSON object.

mod common;
mod otlp_sink;

use common::Procs;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use attest_lab::bench::metrics::percentile;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use serde_json::{json, Value};

const ADMIN: &str = "bench-admin-key-0123456789abcdef";
const CLUSTER_KEY: &str = "bench-cluster-key-0123456789abcdef";

/// Starts `attest ARGS` with `env` and returns the `key=` value of its "listening" line.
fn start(
    procs: &mut Procs,
    args: &[String],
    env: &[(&str, &str)],
    log: &Path,
    key: &str,
) -> anyhow::Result<String> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let line = common::start(procs, &args, env, log)?;
    common::value_in(&line, key)
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
    env: &[(&str, &str)],
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
        env,
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
        env,
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
        env,
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

/// One of the clusters compared: where its router is, how to reach it, what to search with.
struct Setup {
    name: &'static str,
    url: String,
    client: reqwest::blocking::Client,
    /// The admin key, for setting up (none: authentication off).
    admin: Option<&'static str>,
    /// The read-only tenant key searches are made with.
    reader: Option<String>,
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
    let plain = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()?;
    let plain_traced = plain.clone();
    let sink = otlp_sink::OtlpSink::start()?;
    let trusting = reqwest::blocking::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes())?)
        .timeout(Duration::from_secs(120))
        .build()?;
    // Plaintext and open; keys only (API keys and the cluster key, plaintext); TLS, mutual TLS and API keys.
    let keys_only = strings(&[
        "--insecure",
        "--admin-key",
        ADMIN,
        "--cluster-key",
        CLUSTER_KEY,
    ]);
    let mut secured = tls_flags;
    secured.extend(strings(&["--admin-key", ADMIN]));
    let mut setups = vec![
        Setup {
            name: "plaintext",
            url: cluster(
                &mut procs,
                dir.path(),
                "plain",
                &strings(&["--insecure"]),
                &[],
            )?,
            client: plain.clone(),
            admin: None,
            reader: None,
        },
        Setup {
            name: "keys",
            url: cluster(&mut procs, dir.path(), "keys", &keys_only, &[])?,
            client: plain,
            admin: Some(ADMIN),
            reader: None,
        },
        Setup {
            name: "tls_and_keys",
            url: cluster(&mut procs, dir.path(), "secure", &secured, &[])?,
            client: trusting,
            admin: Some(ADMIN),
            reader: None,
        },
        Setup {
            name: "traced",
            url: cluster(
                &mut procs,
                dir.path(),
                "traced",
                &strings(&["--insecure"]),
                &[("ATTEST__TELEMETRY__OTLP__ENDPOINT", sink.endpoint.as_str())],
            )?,
            client: plain_traced,
            admin: None,
            reader: None,
        },
    ];

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

    // The same collection and documents in each; searched with a read-only tenant key where keys are on.
    for setup in &mut setups {
        let url = &setup.url;
        let create = json!({"name": "bench", "shards": 1, "replication": 1});
        post(
            &setup.client,
            &format!("{url}/v1/collections"),
            setup.admin,
            &create,
        )?;
        if setup.admin.is_some() {
            let minted = post(
                &setup.client,
                &format!("{url}/v1/keys"),
                setup.admin,
                &json!({"scopes": ["read"], "tenants": ["*"]}),
            )?;
            setup.reader = Some(minted["key"].as_str().context("minted key")?.to_string());
        }
        for batch in corpus.chunks(64) {
            let docs = json!({"documents": batch});
            post(
                &setup.client,
                &format!("{url}/v1/collections/bench/documents"),
                setup.admin,
                &docs,
            )?;
        }
    }
    eprintln!("ingested {} passages into each cluster", corpus.len());

    let mut report = serde_json::Map::new();
    for (case, lanes) in [("bm25", Some(json!(["bm25"]))), ("hybrid", None)] {
        let mut ms: Vec<Vec<f64>> = vec![Vec::new(); setups.len()];
        // The first 20 rounds warm connections and caches and are not counted.
        for (i, q) in queries.iter().cycle().take(rounds + 20).enumerate() {
            let mut body = json!({"query": q, "k": 10});
            if let Some(l) = &lanes {
                body["lanes"] = l.clone();
            }
            // Rotate which cluster goes first, so none always runs right after another.
            for j in 0..setups.len() {
                let at = (i + j) % setups.len();
                let setup = &setups[at];
                let url = format!("{}/v1/collections/bench/search", setup.url);
                let started = Instant::now();
                post(&setup.client, &url, setup.reader.as_deref(), &body)?;
                if i >= 20 {
                    ms[at].push(started.elapsed().as_secs_f64() * 1000.0);
                }
            }
        }
        let mut figures = serde_json::Map::new();
        let base = {
            let b = &mut ms[0];
            b.sort_by(f64::total_cmp);
            (percentile(b, 0.5), percentile(b, 0.95))
        };
        for (setup, times) in setups.iter().zip(ms.iter_mut()) {
            times.sort_by(f64::total_cmp);
            let (p50, p95) = (percentile(times, 0.5), percentile(times, 0.95));
            figures.insert(
                setup.name.into(),
                json!({"searches": times.len(), "p50_ms": p50, "p95_ms": p95,
                       "ratio_p50": p50 / base.0, "ratio_p95": p95 / base.1}),
            );
        }
        report.insert(case.into(), Value::Object(figures));
    }
    report.insert("traced_spans_exported".into(), json!(sink.spans()));
    println!("{}", serde_json::to_string_pretty(&Value::Object(report))?);
    Ok(())
}
