//! Helpers shared by the tests that drive the real `attest` binary: starting role processes on loopback,
//! reading the address they print, and small HTTP calls.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

pub mod llm;
pub mod local_cluster;
pub mod meta;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

/// The `attest` binary of this build. These suites live in their own workspace member, so cargo does not build
/// another package's binary for them: `make test` builds every target first (`cargo build --workspace
/// --all-targets`), which puts it beside the test executables' `deps/` directory. A binary older than a source
/// file of the crates would test stale code: refused with the fix.
pub fn attest_bin() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| built_binary("attest")).clone()
}

/// The `attest-lab` binary of this build (evaluation, benchmarks, training), checked like [`attest_bin`].
pub fn lab_bin() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| built_binary("attest-lab")).clone()
}

/// `name` beside this test executable's `deps/`, refused when a source file it is built from is newer: those
/// its dep-info file (`name.d`, written by cargo beside it) lists under the repository, with their crates'
/// `Cargo.toml`; without one, every source file of `crates/`.
fn built_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().unwrap().parent().unwrap().join(name);
    let built = |p: &Path| p.metadata().and_then(|m| m.modified()).ok();
    let Some(bin_built) = built(&bin) else {
        panic!(
            "{} is missing: run `cargo build --workspace --all-targets` (or `make test`) first",
            bin.display()
        );
    };
    let newest_source = match sources_of(&bin) {
        Some(sources) => sources
            .into_iter()
            .filter_map(|p| built(&p).map(|m| (p, m)))
            .max_by_key(|(_, m)| *m),
        None => newest_crate_source(),
    };
    if let Some((path, modified)) = newest_source {
        assert!(
            modified <= bin_built,
            "{} is older than {}: rebuild it with `cargo build --workspace --all-targets`",
            bin.display(),
            path.display()
        );
    }
    bin
}

/// The repository's files `bin` was compiled from, by its dep-info file, and the `Cargo.toml` of each crate they
/// belong to; `None` without a dep-info file. A crate the binary does not link (`attest-lab` for `attest`)
/// cannot make it look stale.
fn sources_of(bin: &Path) -> Option<Vec<PathBuf>> {
    let info = std::fs::read_to_string(bin.with_extension("d")).ok()?;
    let (_, deps) = info.lines().next()?.split_once(": ")?;
    let root = repo_root();
    let crates = root.join("crates");
    let mut files = Vec::new();
    let mut path = String::new();
    let mut chars = deps.chars().peekable();
    // Paths are separated by spaces; a space inside a path is written `\ `.
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&' ') => {
                path.push(' ');
                chars.next();
            }
            ' ' => files.push(PathBuf::from(std::mem::take(&mut path))),
            c => path.push(c),
        }
    }
    files.push(PathBuf::from(path));
    let mut sources: Vec<PathBuf> = files
        .into_iter()
        .filter(|p| !p.as_os_str().is_empty() && p.starts_with(&root))
        .collect();
    let manifests: std::collections::BTreeSet<PathBuf> = sources
        .iter()
        .filter_map(|p| p.strip_prefix(&crates).ok()?.components().next())
        .map(|krate| crates.join(krate).join("Cargo.toml"))
        .collect();
    sources.extend(manifests);
    Some(sources)
}

/// The newest `.rs` or `.toml` file of `crates/` that goes into a binary (a crate's own tests, benches and
/// examples never do: editing one leaves `cargo build` nothing to do).
fn newest_crate_source() -> Option<(PathBuf, std::time::SystemTime)> {
    let crates = repo_root().join("crates");
    newest_file(&crates, &|p| {
        let outside_binaries = p.strip_prefix(&crates).unwrap_or(p).components().any(|c| {
            matches!(
                c.as_os_str().to_str(),
                Some("tests" | "benches" | "examples")
            )
        });
        p.extension().is_some_and(|e| e == "rs" || e == "toml") && !outside_binaries
    })
}

/// The most recently modified file under `dir` that `wanted` accepts.
fn newest_file(
    dir: &Path,
    wanted: &dyn Fn(&Path) -> bool,
) -> Option<(PathBuf, std::time::SystemTime)> {
    let mut newest: Option<(PathBuf, std::time::SystemTime)> = None;
    for entry in std::fs::read_dir(dir).ok()?.filter_map(Result::ok) {
        let path = entry.path();
        let found = if path.is_dir() {
            newest_file(&path, wanted)
        } else if wanted(&path) {
            entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .map(|m| (path, m))
        } else {
            None
        };
        if let Some((p, m)) = found {
            if newest.as_ref().is_none_or(|(_, best)| m > *best) {
                newest = Some((p, m));
            }
        }
    }
    newest
}

/// A child process killed when dropped, so a failing test leaves nothing running.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Proc {
    /// SIGTERM, then wait: the role shuts down cleanly and flushes its logs.
    pub fn terminate(&mut self) {
        unsafe {
            libc::kill(self.0.id() as i32, libc::SIGTERM);
        }
        let _ = self.0.wait();
    }
}

/// How a started process logs.
pub enum Logs<'a> {
    /// Warnings and errors to the test's stderr.
    Quiet,
    /// Everything at info level, into this file.
    InfoTo(&'a Path),
}

/// Starts `attest ARGS [--data-dir DATA]` and returns it with its first stdout line (where it listens).
pub fn start(args: &[&str], data: Option<&Path>, logs: Logs<'_>) -> (Proc, String) {
    start_with_env(args, data, logs, &[])
}

/// How long [`start`] waits for a role to say it is ready.
const READY_LIMIT: Duration = Duration::from_secs(120);

/// [`start`] with extra environment variables (what a pod's environment would give it).
pub fn start_with_env(
    args: &[&str],
    data: Option<&Path>,
    logs: Logs<'_>,
    env: &[(&str, &str)],
) -> (Proc, String) {
    let mut cmd = Command::new(attest_bin());
    cmd.args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::piped());
    if let Some(data) = data {
        cmd.arg("--data-dir").arg(data);
    }
    match logs {
        Logs::Quiet => cmd.env("ATTEST_LOG", "warn").stderr(Stdio::inherit()),
        Logs::InfoTo(path) => cmd
            .env("ATTEST_LOG", "info,tantivy=warn")
            .stderr(std::fs::File::create(path).unwrap()),
    };
    let mut child = cmd.spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    // Routers, answer replicas and embedders listen at once and print `attest ROLE ready` once they can serve
    // (shard map read, models loaded, router reachable): the caller gets them ready.
    let waits = args
        .windows(2)
        .any(|w| w[0] == "--role" && ["router", "answer", "embedder"].contains(&w[1]));
    // The rest of its standard output is read to the end, so that no later line meets a closed pipe.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = stdout.lines().map_while(Result::ok);
        let _ = tx.send(lines.any(|l| l.ends_with(" ready")));
        lines.for_each(drop);
    });
    if waits {
        match rx.recv_timeout(READY_LIMIT) {
            Ok(true) => {}
            Ok(false) => panic!("attest {args:?} exited before it was ready"),
            Err(_) => panic!("attest {args:?} was not ready within {READY_LIMIT:?}"),
        }
    }
    (Proc(child), line)
}

/// [`start_with_env`] for a process that may be restarted and must not hang a test: its data in `data`, its
/// info-level log appended to `log` (a restart keeps one file), and a panic naming the log when it has not
/// printed its first line within `limit` (or exited first). Its stdout is drained after that line.
pub fn start_within(
    args: &[&str],
    data: &Path,
    log: &Path,
    env: &[(&str, &str)],
    limit: Duration,
) -> (Proc, String) {
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    let mut child = Command::new(attest_bin())
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .envs(env.iter().copied())
        .env("ATTEST_LOG", "info,tantivy=warn")
        .stdout(Stdio::piped())
        .stderr(log_file)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let _ = tx.send(lines.next().and_then(Result::ok));
        for _ in lines {}
    });
    let proc = Proc(child);
    match rx.recv_timeout(limit) {
        Ok(Some(line)) => (proc, line),
        Ok(None) => panic!(
            "attest {args:?} exited before it listened; see {}",
            log.display()
        ),
        Err(_) => panic!(
            "attest {args:?} did not listen within {limit:?}; see {}",
            log.display()
        ),
    }
}

/// `attest dev` on loopback ports over `data`, killed when dropped.
pub struct Dev {
    pub proc: Proc,
    /// `http://host:port` of the HTTP API.
    pub url: String,
    /// `http://host:port` of the gRPC services (router, answer tier, meta).
    pub grpc: String,
}

pub fn start_dev(data: &Path) -> Dev {
    let (proc, line) = start(
        &["dev", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"],
        Some(data),
        Logs::Quiet,
    );
    Dev {
        proc,
        url: value_of(&line, "http="),
        grpc: format!("http://{}", value_of(&line, "grpc=")),
    }
}

/// Runs `attest ARGS` (errors only) with these extra environment variables, requires success and returns its
/// stdout.
pub fn attest_ok(args: &[&str], env: &[(&str, &str)]) -> Vec<u8> {
    let out = Command::new(attest_bin())
        .args(args)
        .envs(env.iter().copied())
        .env("ATTEST_LOG", "error")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "attest {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Runs `attest ARGS`, requires success and parses its stdout as JSON (`status --json`, ...).
pub fn attest_json(args: &[&str]) -> Value {
    serde_json::from_slice(&attest_ok(args, &[])).unwrap()
}

/// The value of `key=` in a "listening" line.
pub fn value_of(line: &str, key: &str) -> String {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key))
        .unwrap_or_else(|| panic!("no {key} in {line:?}"))
        .to_string()
}

pub fn http() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap()
}

/// An HTTP call with an optional bearer token: (status, JSON body or null).
pub fn call(method: &str, url: &str, token: Option<&str>, body: Option<&Value>) -> (u16, Value) {
    let client = http();
    let mut req = match method {
        "GET" => client.get(url),
        "POST" => client.post(url),
        "PUT" => client.put(url),
        "DELETE" => client.delete(url),
        other => panic!("method {other}"),
    };
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(b) = body {
        req = req.json(b);
    }
    let r = req.send().unwrap();
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

/// Starts `attest ARGS` with its data in `dir/NAME` and its info-level log in `dir/NAME.log` (named on stderr,
/// so a failed run's logs can be found); returns it with its "listening" line.
pub fn start_role(args: &[&str], dir: &Path, name: &str) -> (Proc, String) {
    start_role_with_env(args, dir, name, &[])
}

/// The working directory of a multi-process test (data, and the roles' logs that [`start_role`] names): removed
/// after a passing run, kept after a failing one (its path printed), so a rare failure can be read afterwards.
pub struct RunDir(Option<tempfile::TempDir>);

impl RunDir {
    pub fn new() -> Self {
        RunDir(Some(tempfile::tempdir().unwrap()))
    }

    pub fn path(&self) -> &Path {
        self.0.as_ref().unwrap().path()
    }
}

impl Default for RunDir {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let kept = self.0.take().unwrap().keep();
            eprintln!("the run's data and logs are kept in {}", kept.display());
        }
    }
}

/// [`start_role`] with extra environment variables.
pub fn start_role_with_env(
    args: &[&str],
    dir: &Path,
    name: &str,
    env: &[(&str, &str)],
) -> (Proc, String) {
    let log = dir.join(format!("{name}.log"));
    eprintln!("{name} log: {}", log.display());
    start_with_env(args, Some(&dir.join(name)), Logs::InfoTo(&log), env)
}

/// The gRPC health status of `service` ("" for the whole server) at `addr` (`host:port`).
pub fn grpc_health(addr: &str, service: &str) -> i32 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        tonic_health::pb::health_client::HealthClient::new(channel)
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner()
            .status
    })
}

pub fn post(url: &str, body: &Value) -> (u16, Value) {
    let r = http().post(url).json(body).send().unwrap();
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

/// `GET url` without a key, which must answer 200: its JSON body.
pub fn get_ok(url: &str) -> Value {
    let (s, b) = call("GET", url, None, None);
    assert_eq!(s, 200, "GET {url}: {b}");
    b
}

/// The per-shard stats of `collection` (`GET /v1/collections/{collection}/stats` `shards`), asked without a key.
pub fn shard_stats(url: &str, collection: &str) -> Vec<Value> {
    let b = get_ok(&format!("{url}/v1/collections/{collection}/stats"));
    b["shards"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("no shards in {b}"))
}

pub fn get_text(url: &str) -> (u16, String) {
    let r = http().get(url).send().unwrap();
    let status = r.status().as_u16();
    (status, r.text().unwrap_or_default())
}

/// [`router_with_collection_c`] with the default embedder, and the embedder the answer tier gives curated memory
/// (the model its thresholds were set with, `attest_answer::memory::memory_embedder_config`).
pub async fn router_and_memory_embedder(
    dir: &Path,
) -> (
    attest_router::Router,
    attest_node::local::ControlPlane,
    std::sync::Arc<dyn attest_embed::Embedder>,
) {
    let config = attest_embed::EmbedderConfig::default();
    let (router, plane) =
        router_with_collection_c(dir, attest_embed::build_embedder(&config).unwrap()).await;
    let memory =
        attest_embed::build_embedder(&attest_answer::memory::memory_embedder_config(&config))
            .unwrap();
    (router, plane, memory)
}

/// A router over one in-process shard node in `dir`, with collection `c` (1 shard) created: the smallest real
/// stack for in-process tests of what sits on top of the router (the control plane `attest dev` runs: a
/// one-voter meta and a shard node registered with it). Keep the [`ControlPlane`] alive as long as the router.
pub async fn router_with_collection_c(
    dir: &Path,
    embedder: std::sync::Arc<dyn attest_embed::Embedder>,
) -> (attest_router::Router, attest_node::local::ControlPlane) {
    let cfg = attest_node::AttestConfig::default();
    let plane = attest_node::local::ControlPlane::start(&cfg, dir, 1, None, Default::default())
        .await
        .unwrap();
    let router = plane.router(&cfg, embedder).await.unwrap();
    create_collection(&router, "c").await;
    (router, plane)
}

/// Creates a one-shard collection `name`.
pub async fn create_collection(router: &attest_router::Router, name: &str) {
    router
        .collections()
        .create(
            attest_proto::v1::CreateCollectionRequest {
                name: name.into(),
                shards: Some(1),
                replication: Some(1),
                index: None,
                ..Default::default()
            },
            "setup",
        )
        .await
        .unwrap();
}

/// Ingests `(id, title, text)` documents into `collection`, all of them accepted.
pub async fn ingest_texts(
    router: &attest_router::Router,
    collection: &str,
    docs: &[(&str, &str, &str)],
) {
    let with_metadata: Vec<(&str, &str, &str, Value)> = docs
        .iter()
        .map(|(id, title, text)| (*id, *title, *text, Value::Null))
        .collect();
    ingest_with_metadata(router, collection, &with_metadata).await;
}

/// Ingests `(id, title, text, metadata object)` documents into `collection`, all of them accepted.
pub async fn ingest_with_metadata(
    router: &attest_router::Router,
    collection: &str,
    docs: &[(&str, &str, &str, Value)],
) {
    let report = router
        .ingest()
        .run(
            collection,
            docs.iter()
                .map(|(id, title, text, meta)| attest_router::IngestDocument {
                    vector: None,
                    source: attest_ingest::SourceDocument {
                        id: id.to_string(),
                        title: title.to_string(),
                        text: text.to_string(),
                        metadata: meta.as_object().cloned().unwrap_or_default(),
                        ..Default::default()
                    },
                })
                .collect(),
            "setup",
        )
        .await
        .unwrap();
    assert_eq!(report.accepted as usize, docs.len());
}

/// The value of this process's counter `name` (summed over the series whose `label` has the given value, or over
/// all of them), as `/metrics` would show it.
pub fn counter(name: &str, label: Option<(&str, &str)>) -> f64 {
    let text = attest_telemetry::metrics::render();
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name)
        .filter(|s| label.is_none_or(|(k, v)| s.labels.get(k) == Some(v)))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v) => v,
            _ => 0.0,
        })
        .sum()
}

/// A pseudo-random unit vector of the local embedder's dimension (384), for documents and queries that bring
/// their own: in 384 dimensions any two are nearly orthogonal, so each is its own nearest.
pub fn unit(seed: u64) -> Vec<f32> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let v: Vec<f32> = (0..384).map(|_| rng.gen::<f32>() - 0.5).collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / norm).collect()
}
