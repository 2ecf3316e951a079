//! Defaults and refusals of a cluster started as a user starts one (`scripts/local-cluster.sh`, the real
//! binary): a collection created without saying gets the router's `default_replication` (2) over HTTP and from
//! `attest collection create` (which takes `--replication`), shrunk to the shard nodes there are; creating again
//! with the same spec is idempotent; a create meta cannot confirm in time (every meta paused) is a 504
//! `DEADLINE_EXCEEDED` saying it may have been applied, over HTTP and gRPC; an answer replica with keys and no
//! meta refuses to start, and the script starts it with meta; `attest dev` answers `/readyz` 503 while it
//! starts; and hyper's own 431 carries the JSON error body.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::local_cluster::LocalCluster;
use crate::common::{self, attest_bin, call, post, value_of, Logs};

const ADMIN: &str = "cluster-defaults-admin-key-0123456789";

/// Polls `check` until it holds, or panics naming `what` after `limit`.
fn wait_until(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `attest --server ROUTER collection create ARGS --json`, parsed.
fn cli_create(router: &str, args: &[&str]) -> Value {
    let mut all = vec!["--server", router, "collection", "create"];
    all.extend_from_slice(args);
    all.push("--json");
    serde_json::from_slice(&common::attest_ok(&all, &[])).unwrap()
}

/// Every shard node of the cluster alive, as meta says.
fn shard_nodes_alive(cluster: &LocalCluster) -> usize {
    cluster.status()["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["role"] == "shard" && n["alive"] == true)
        .count()
}

/// The meta processes of the cluster, stopped (SIGSTOP) while this lives and continued when it is dropped, also
/// when the test fails.
struct Paused(Vec<i32>);

impl Paused {
    fn metas(cluster: &LocalCluster) -> Paused {
        let pids: Vec<i32> = (1..=3)
            .map(|i| {
                std::fs::read_to_string(cluster.pid_file(&format!("meta-{i}")))
                    .unwrap()
                    .trim()
                    .parse()
                    .unwrap()
            })
            .collect();
        for &pid in &pids {
            assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
        }
        Paused(pids)
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        for &pid in &self.0 {
            unsafe {
                libc::kill(pid, libc::SIGCONT);
            }
        }
    }
}

#[test]
fn cluster_defaults_to_two_replicas_creates_idempotently_and_answers_504_when_meta_may_have_applied(
) {
    let cluster = LocalCluster::up();
    let router = cluster.router.clone();
    let collections = format!("{router}/v1/collections");
    wait_until(Duration::from_secs(30), "3 live shard nodes", || {
        shard_nodes_alive(&cluster) == 3
    });

    // HTTP, no replication given: the router's default_replication, 2.
    let (s, created) = post(&collections, &json!({"name": "by-http", "shards": 2}));
    assert_eq!(s, 201, "{created}");
    assert_eq!(created["replication"], 2, "{created}");
    // The same request again (an answer lost, say): the same collection, 200; another spec: 409.
    let (s, again) = post(&collections, &json!({"name": "by-http", "shards": 2}));
    assert_eq!(s, 200, "{again}");
    assert_eq!(again, created);
    let (s, other) = post(&collections, &json!({"name": "by-http", "shards": 3}));
    assert_eq!(s, 409, "{other}");
    assert_eq!(other["error"]["code"], "ALREADY_EXISTS", "{other}");
    let (s, other) = post(
        &collections,
        &json!({"name": "by-http", "shards": 2, "replication": 3}),
    );
    assert_eq!(s, 409, "{other}");

    // The CLI: the default too, and --replication.
    let by_cli = cli_create(&router, &["by-cli", "--shards", "1"]);
    assert_eq!(by_cli["replication"], 2, "{by_cli}");
    let three = cli_create(&router, &["three", "--shards", "1", "--replication", "3"]);
    assert_eq!(three["replication"], 3, "{three}");
    let status = cluster.status();
    let replicas_of = |name: &str| {
        status["collections"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {status}"))["replication"]
            .clone()
    };
    assert_eq!(replicas_of("by-http"), 2);
    assert_eq!(replicas_of("by-cli"), 2);
    assert_eq!(replicas_of("three"), 3);

    // Every meta paused: the create cannot be confirmed; over HTTP and gRPC alike it is a 504 /
    // DEADLINE_EXCEEDED that says it may have been applied, not a 503 "nothing happened".
    let grpc = format!("http://127.0.0.1:{}", cluster.base + 101);
    let spec = json!({"name": "paused", "shards": 1, "replication": 2});
    let paused = Paused::metas(&cluster);
    let over_grpc = std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            use attest_proto::v1 as pb;
            let mut client = pb::router_service_client::RouterServiceClient::connect(grpc)
                .await
                .unwrap();
            client
                .create_collection(pb::CreateCollectionRequest {
                    name: "paused-grpc".into(),
                    shards: Some(1),
                    replication: Some(2),
                    ..Default::default()
                })
                .await
                .unwrap_err()
        })
    });
    let (s, body) = post(&collections, &spec);
    let grpc_status = over_grpc.join().unwrap();
    drop(paused);
    assert_eq!(s, 504, "{body}");
    assert_eq!(body["error"]["code"], "DEADLINE_EXCEEDED", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("may have been applied"), "{message}");
    assert_eq!(
        grpc_status.code(),
        tonic::Code::DeadlineExceeded,
        "{grpc_status:?}"
    );
    assert!(
        grpc_status.message().contains("may have been applied"),
        "{grpc_status:?}"
    );

    // Meta back: repeating the request is safe whether or not the first one was applied; then it is there.
    wait_until(
        Duration::from_secs(60),
        "meta and 3 live shard nodes back",
        || {
            let out = Command::new(attest_bin())
                .args(["status", "--json", "--meta", &cluster.metas])
                .env("ATTEST_LOG", "error")
                .output()
                .unwrap();
            out.status.success()
                && serde_json::from_slice::<Value>(&out.stdout).is_ok_and(|st| {
                    st["nodes"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter(|n| n["role"] == "shard" && n["alive"] == true)
                        .count()
                        == 3
                })
        },
    );
    let mut repeated = (0, Value::Null);
    wait_until(
        Duration::from_secs(60),
        "the repeated create answered",
        || {
            repeated = post(&collections, &spec);
            repeated.0 != 503 && repeated.0 != 504
        },
    );
    assert!(
        [200, 201].contains(&repeated.0),
        "{} {}",
        repeated.0,
        repeated.1
    );
    assert_eq!(repeated.1["replication"], 2, "{}", repeated.1);
    let (s, third) = post(&collections, &spec);
    assert_eq!(s, 200, "{third}");
}

#[test]
fn a_one_shard_node_cluster_defaults_to_one_replica_and_its_answer_tier_reads_keys_from_meta() {
    // The script with its answer replica and keys on, as an operator runs it with ATTEST_ADMIN_KEY set.
    let cluster = LocalCluster::up_with_shard_env(&[
        ("ATTEST_CLUSTER_SHARDS", "1"),
        ("ATTEST_CLUSTER_ANSWER", "1"),
        ("ATTEST_ADMIN_KEY", ADMIN),
    ]);
    let router = cluster.router.clone();
    let collections = format!("{router}/v1/collections");
    wait_until(Duration::from_secs(30), "1 live shard node", || {
        shard_nodes_alive(&cluster) == 1
    });

    // The default shrinks to the one node; an explicit 2 is refused, not lowered.
    let (s, created) = call(
        "POST",
        &collections,
        Some(ADMIN),
        Some(&json!({"name": "small"})),
    );
    assert_eq!(s, 201, "{created}");
    assert_eq!(created["replication"], 1, "{created}");
    let (s, refused) = call(
        "POST",
        &collections,
        Some(ADMIN),
        Some(&json!({"name": "wide", "replication": 2})),
    );
    assert_eq!(s, 400, "{refused}");
    assert_eq!(refused["error"]["code"], "FAILED_PRECONDITION", "{refused}");

    // A key minted through the router is known to the answer replica (it reads the key ring from meta).
    let (s, minted) = call(
        "POST",
        &format!("{router}/v1/keys"),
        Some(ADMIN),
        Some(&json!({"scopes": ["read"], "tenants": ["*"]})),
    );
    assert_eq!(s, 201, "{minted}");
    let key = minted["key"].as_str().unwrap().to_string();
    let answer = std::fs::read_to_string(cluster.dir.path().join("answer.addr"))
        .unwrap()
        .trim()
        .to_string();
    let ask = format!("{answer}/v1/collections/small/ask");
    let mut last = (0, Value::Null);
    wait_until(Duration::from_secs(60), "the minted key accepted", || {
        last = call("POST", &ask, Some(&key), Some(&json!({"question": "q"})));
        last.0 != 401 && last.0 != 503
    });
    let (s, body) = call(
        "POST",
        &ask,
        Some("not-a-key"),
        Some(&json!({"question": "q"})),
    );
    assert_eq!(s, 401, "{body}");
}

#[test]
fn an_answer_replica_with_keys_and_no_meta_refuses_to_start() {
    let dir = common::RunDir::new();
    let mut child = Command::new(attest_bin())
        .args([
            "serve",
            "--insecure",
            "--role",
            "answer",
            "--router",
            "http://127.0.0.1:1",
            "--http",
            "127.0.0.1:0",
            "--admin-key",
            ADMIN,
            "--data-dir",
        ])
        .arg(dir.path().join("answer"))
        .env("ATTEST_LOG", "error")
        .env_remove("ATTEST_META")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the answer replica kept running with --admin-key and no --meta");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(!exit.success(), "{stderr}");
    assert!(stderr.contains("--admin-key needs --meta"), "{stderr}");
}

/// A free loopback port (bound and released: `attest dev` must listen on a port known before it prints it).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn attest_dev_answers_readyz_503_while_it_starts() {
    let dir = common::RunDir::new();
    let port = free_port();
    let mut child = Command::new(attest_bin())
        .args([
            "dev",
            "--http",
            &format!("127.0.0.1:{port}"),
            "--grpc",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(dir.path().join("dev"))
        .env("ATTEST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let _dev = common::Proc(child);
    // The first answer to /readyz comes while it starts (loading the model alone takes longer than a
    // connection): 503 saying so, not a connection left waiting until it is ready.
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(300))
        .build()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/readyz");
    let started = Instant::now();
    let first = loop {
        match client.get(&url).send() {
            Ok(r) => break (r.status().as_u16(), r.text().unwrap()),
            Err(_) => {
                assert!(
                    started.elapsed() < Duration::from_secs(60),
                    "never listened"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    };
    assert_eq!(first.0, 503, "{first:?}");
    assert!(first.1.contains("starting"), "{first:?}");
    // Then it starts, and is ready.
    let mut stdout = BufReader::new(stdout);
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(value_of(&line, "http="), format!("http://127.0.0.1:{port}"));
    let (s, body) = common::get_text(&url);
    assert_eq!(s, 200, "{body}");
}

#[test]
fn hypers_own_431_carries_the_json_error_body() {
    let dir = common::RunDir::new();
    // A standalone shard node with its probe listener: the same HTTP server every role uses.
    let (_shard, line) = common::start(
        &[
            "serve",
            "--insecure",
            "--role",
            "shard",
            "--grpc",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
        ],
        Some(&dir.path().join("shard")),
        Logs::Quiet,
    );
    let http = value_of(&line, "http=");
    let address = http.trim_start_matches("http://").to_string();
    // 200 headers: over hyper's limit of 100, refused before any route sees the request.
    let mut request = String::from("GET /healthz HTTP/1.1\r\nhost: x\r\n");
    for i in 0..200 {
        request.push_str(&format!("x-h{i}: v\r\n"));
    }
    request.push_str("\r\n");
    let mut stream = std::net::TcpStream::connect(&address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    assert!(head.starts_with("HTTP/1.1 431 "), "{response}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{head}"
    );
    let body: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {response}"));
    assert_eq!(body["error"]["code"], "INVALID_ARGUMENT", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("headers too large"),
        "{body}"
    );
    // The listener goes on serving.
    let (s, _) = common::get_text(&format!("{http}/healthz"));
    assert_eq!(s, 200);
}
