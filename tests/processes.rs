//! The same fan-out across processes: a meta process, two `attest serve --role shard --meta ...` processes on
//! loopback and `attest serve --role router --meta ...`, the router reaching the shards through the gRPC shard
//! client. Killing a shard gives degraded results that name the shard it held. A router started before meta
//! answers listens at once, says in `/readyz` what it waits for, becomes ready when meta comes up, and stops
//! promptly on SIGTERM either way; so do meta (ready once it knows a leader), a shard (once registered), an answer
//! replica (once its router answers) and an embedder, on `/readyz` and gRPC health alike.

use crate::common;

use common::{post, start, value_of, Logs};
use serde_json::{json, Value};

/// Starts `attest ARGS --data-dir DATA` quietly and returns it with the value of `key=` it printed.
fn start_role(args: &[&str], data: &std::path::Path, key: &str) -> (common::Proc, String) {
    let (proc, line) = start(args, Some(data), Logs::Quiet);
    (proc, value_of(&line, key))
}

/// The shards of collection `c` that node `node` holds, as `attest status --json` reports them.
fn shards_on(meta: &str, node: u64) -> Vec<u64> {
    let status = common::attest_json(&["status", "--json", "--meta", meta]);
    status["collections"][0]["placement"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["replicas"][0]["node"] == node)
        .map(|p| p["shard"].as_u64().unwrap())
        .collect()
}

#[test]
fn router_fans_out_to_shard_processes_and_reports_missing_shards() {
    let dir = common::RunDir::new();
    let (_meta, meta_addr) = start_role(
        &[
            "serve",
            "--insecure",
            "--role",
            "meta",
            "--meta-id",
            "1",
            "--grpc",
            "127.0.0.1:0",
        ],
        &dir.path().join("meta"),
        "grpc=",
    );
    let meta = format!("http://{meta_addr}");
    let shard = |name: &str| {
        let (proc, line) = start(
            &[
                "serve",
                "--insecure",
                "--role",
                "shard",
                "--meta",
                &meta,
                "--grpc",
                "127.0.0.1:0",
            ],
            Some(&dir.path().join(name)),
            Logs::Quiet,
        );
        let id: u64 = value_of(&line, "node_id=").parse().unwrap();
        (proc, id)
    };
    let (shard_a, node_a) = shard("a");
    let (_shard_b, _) = shard("b");
    let (_router, url) = start_role(
        &[
            "serve",
            "--insecure",
            "--role",
            "router",
            "--http",
            "127.0.0.1:0",
            "--grpc",
            "127.0.0.1:0",
            "--meta",
            &meta,
        ],
        &dir.path().join("router"),
        "http=",
    );
    assert_eq!(
        post(
            &format!("{url}/v1/collections"),
            &json!({"name": "c", "shards": 2, "replication": 1})
        )
        .0,
        201
    );
    let docs: Vec<Value> = (0..40)
        .map(|i| json!({"id": format!("d{i}"), "title": format!("Animal {i}"), "text": format!("Paragraph {i} is about animal number {i}: the {} lives in the forest.", ["fox", "owl", "bear", "deer"][i % 4])}))
        .collect();
    let (s, b) = post(
        &format!("{url}/v1/collections/c/documents"),
        &json!({"documents": docs}),
    );
    assert_eq!((s, b["accepted"].as_u64()), (200, Some(40)), "{b}");

    let (s, b) = post(
        &format!("{url}/v1/collections/c/search"),
        &json!({"query": "where does the owl live", "k": 20}),
    );
    assert_eq!(s, 200, "{b}");
    let hits = b["hits"].as_array().unwrap();
    let shards: std::collections::HashSet<u64> =
        hits.iter().map(|h| h["shard"].as_u64().unwrap()).collect();
    assert_eq!(shards.len(), 2, "both shard processes answered: {b}");
    assert_eq!(b["degraded"], false);

    // Meta spreads the two shards over the two nodes: killing node a loses exactly the shard it held.
    let lost = shards_on(&meta, node_a);
    assert_eq!(lost.len(), 1, "one shard per node");
    drop(shard_a);
    let (s, b) = post(
        &format!("{url}/v1/collections/c/search"),
        &json!({"query": "where does the owl live", "k": 20}),
    );
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["degraded"], true);
    assert_eq!(b["missing_shards"], json!(lost));
    assert!(
        b["hits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["shard"] != lost[0]),
        "{b}"
    );
}

/// Sends SIGTERM and waits up to `limit` for the process to exit; panics if it is still running.
fn stops_within(proc: &mut common::Proc, limit: std::time::Duration) {
    unsafe {
        libc::kill(proc.0.id() as i32, libc::SIGTERM);
    }
    let deadline = std::time::Instant::now() + limit;
    while proc.0.try_wait().unwrap().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "still running {limit:?} after SIGTERM"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `/readyz` as (status, the reason in its JSON error body, or its text when ready).
fn readyz(http: &str) -> (u16, String) {
    let (status, body) = common::get_text(&format!("{http}/readyz"));
    let reason = serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
        .unwrap_or(body);
    (status, reason)
}

#[test]
fn a_router_listens_at_once_says_it_waits_for_meta_and_stops_on_sigterm() {
    let dir = common::RunDir::new();
    // Meta's address, not yet served: the router starts before it.
    let meta_port = unused_port();
    let meta = format!("http://127.0.0.1:{meta_port}");
    let router_args = [
        "serve",
        "--insecure",
        "--role",
        "router",
        "--meta",
        &meta,
        "--http",
        "127.0.0.1:0",
        "--grpc",
        "127.0.0.1:0",
    ];
    let limit = std::time::Duration::from_secs(60);
    let log = dir.path().join("router.log");
    let (mut router, line) =
        common::start_within(&router_args, &dir.path().join("router"), &log, &[], limit);
    let http = value_of(&line, "http=");
    assert_eq!(common::get_text(&format!("{http}/healthz")).0, 200);
    let (status, reason) = readyz(&http);
    assert_eq!(status, 503, "{reason}");
    assert!(
        reason.contains("waiting for the cluster state from meta") && reason.contains(&meta),
        "{reason}"
    );

    // Meta comes up at that address: the router becomes ready by itself.
    let (_meta, _) = start_role(
        &[
            "serve",
            "--insecure",
            "--role",
            "meta",
            "--meta-id",
            "1",
            "--grpc",
            &format!("127.0.0.1:{meta_port}"),
        ],
        &dir.path().join("meta"),
        "grpc=",
    );
    let deadline = std::time::Instant::now() + limit;
    loop {
        let (status, reason) = readyz(&http);
        if status == 200 {
            assert!(reason.starts_with("ready"), "{reason}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not ready a minute after meta started: {reason} (log: {})",
            log.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    stops_within(&mut router, std::time::Duration::from_secs(10));

    // A router whose meta never answers stops promptly too.
    let nowhere = [
        "serve",
        "--insecure",
        "--role",
        "router",
        "--meta",
        "http://127.0.0.1:9",
        "--http",
        "127.0.0.1:0",
        "--grpc",
        "127.0.0.1:0",
    ];
    let (mut stranded, _) = common::start_within(
        &nowhere,
        &dir.path().join("stranded"),
        &dir.path().join("stranded.log"),
        &[],
        limit,
    );
    stops_within(&mut stranded, std::time::Duration::from_secs(10));
}

/// Polls `/readyz` until `done` accepts its (status, reason); panics after `limit` with the last answer.
fn readyz_until(
    http: &str,
    limit: std::time::Duration,
    log: &std::path::Path,
    done: impl Fn(u16, &str) -> bool,
) -> String {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let (status, reason) = readyz(http);
        if done(status, &reason) {
            return reason;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "/readyz still {status} {reason:?} after {limit:?} (log: {})",
            log.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A port nothing listens on (bound by the OS, then released).
fn unused_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn meta_shard_answer_and_embedder_listen_at_once_say_what_they_wait_for_and_stop_on_sigterm() {
    let dir = common::RunDir::new();
    let limit = std::time::Duration::from_secs(60);
    let sigterm_limit = std::time::Duration::from_secs(10);
    let start = |name: &str, args: &[&str]| {
        let log = dir.path().join(format!("{name}.log"));
        let (proc, line) = common::start_within(args, &dir.path().join(name), &log, &[], limit);
        (proc, line, log)
    };

    // Meta: one of two voters, its peer never answering: it listens and serves its probes, but without a
    // leader it is not ready (HTTP and gRPC health); the gRPC `liveness` service says it runs.
    let peer = format!("http://127.0.0.1:{}", unused_port());
    let own_port = unused_port();
    let peers = format!("1=http://127.0.0.1:{own_port},2={peer}");
    let (mut lonely, line, log) = start(
        "lonely-meta",
        &[
            "serve",
            "--insecure",
            "--role",
            "meta",
            "--meta-id",
            "1",
            "--meta-peers",
            &peers,
            "--grpc",
            &format!("127.0.0.1:{own_port}"),
            "--http",
            "127.0.0.1:0",
        ],
    );
    let (http, grpc) = (value_of(&line, "http="), value_of(&line, "grpc="));
    let reason = readyz_until(&http, limit, &log, |s, r| {
        s == 503 && r.contains("Raft leader")
    });
    assert!(reason.contains("waiting for a Raft leader"), "{reason}");
    let (serving, not_serving) = (
        tonic_health::ServingStatus::Serving as i32,
        tonic_health::ServingStatus::NotServing as i32,
    );
    assert_eq!(common::grpc_health(&grpc, ""), not_serving);
    assert_eq!(common::grpc_health(&grpc, "liveness"), serving);
    stops_within(&mut lonely, sigterm_limit);

    // A single-voter meta elects itself: ready, on both.
    let (mut meta, line, log) = start(
        "meta",
        &[
            "serve",
            "--insecure",
            "--role",
            "meta",
            "--meta-id",
            "1",
            "--grpc",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
        ],
    );
    let (meta_http, meta_grpc) = (value_of(&line, "http="), value_of(&line, "grpc="));
    readyz_until(&meta_http, limit, &log, |s, _| s == 200);
    assert_eq!(common::grpc_health(&meta_grpc, ""), serving);

    // A shard whose meta does not answer: its probes answer at once and say it is registering.
    let nowhere = format!("http://127.0.0.1:{}", unused_port());
    let shard_args = |meta: &str| {
        [
            "serve",
            "--insecure",
            "--role",
            "shard",
            "--meta",
            meta,
            "--grpc",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
        ]
        .map(str::to_string)
    };
    let log = dir.path().join("stranded-shard.log");
    let args = shard_args(&nowhere);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut stranded = common::Proc(
        std::process::Command::new(common::attest_bin())
            .args(&args)
            .arg("--data-dir")
            .arg(dir.path().join("stranded-shard"))
            .env("ATTEST_LOG", "info,tantivy=warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    // The shard prints its "listening" line once registered; its ops port is in its log before that.
    let ops = wait_for_log_value(&log, "\"ops_http\":\"", limit);
    let reason = readyz_until(&ops, limit, &log, |s, r| {
        s == 503 && r.contains("registering")
    });
    assert!(reason.contains(&nowhere), "{reason}");
    stops_within(&mut stranded, sigterm_limit);

    // An answer replica whose router does not answer: models load, then it says it waits for the router.
    let router_nowhere = format!("http://127.0.0.1:{}", unused_port());
    let (mut answer, line, log) = start(
        "answer",
        &[
            "serve",
            "--insecure",
            "--role",
            "answer",
            "--router",
            &router_nowhere,
            "--http",
            "127.0.0.1:0",
        ],
    );
    let answer_http = value_of(&line, "http=");
    let reason = readyz_until(&answer_http, limit, &log, |s, r| {
        s == 503 && r.contains("router")
    });
    assert!(reason.contains(&router_nowhere), "{reason}");
    stops_within(&mut answer, sigterm_limit);

    // An embedder is ready once its model is loaded; it stops promptly.
    let (mut embedder, line, log) = start(
        "embedder",
        &[
            "serve",
            "--insecure",
            "--role",
            "embedder",
            "--http",
            "127.0.0.1:0",
        ],
    );
    readyz_until(&value_of(&line, "http="), limit, &log, |s, _| s == 200);
    stops_within(&mut embedder, sigterm_limit);
    stops_within(&mut meta, sigterm_limit);
}

/// The value that follows `key` in the first line of the JSON log at `log` that has it (up to the next `"`).
fn wait_for_log_value(log: &std::path::Path, key: &str, limit: std::time::Duration) -> String {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(rest) = text.split(key).nth(1) {
            if let Some(value) = rest.split('"').next() {
                return value.to_string();
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no {key} in {} after {limit:?}",
            log.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A reader that stops reading does not stop a role: `attest dev` whose standard output is closed before it prints
/// anything (`attest dev … | head -0`) still serves, and stops on SIGTERM.
#[test]
fn attest_dev_serves_with_its_standard_output_closed() {
    let dir = common::RunDir::new();
    let http = format!("127.0.0.1:{}", unused_port());
    let grpc = format!("127.0.0.1:{}", unused_port());
    let log = dir.path().join("dev.log");
    let mut child = std::process::Command::new(common::attest_bin())
        .args(["dev", "--http", &http, "--grpc", &grpc, "--data-dir"])
        .arg(dir.path().join("data"))
        .env("ATTEST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut dev = common::Proc(child);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        if let Some(status) = dev.0.try_wait().unwrap() {
            panic!(
                "attest dev exited ({status}) with its stdout closed: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        let ready = common::http()
            .get(format!("http://{http}/readyz"))
            .send()
            .is_ok_and(|r| r.status().as_u16() == 200);
        if ready {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "attest dev not ready within 120 s (log: {})",
            log.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    stops_within(&mut dev, std::time::Duration::from_secs(10));
}
