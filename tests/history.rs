//! Fault injection with a history checker (Jepsen's idea, at this project's scale): 3 meta + 3 shard processes
//! and a router on loopback, a collection of 3 shards with replication 2. Concurrent clients upsert (each write
//! a unique value, as a marker word in the text and `v` in the metadata) and delete a small set of document ids
//! through the router, recording every operation with the times it was invoked and completed and its outcome,
//! while a seeded nemesis SIGKILLs and restarts shard and meta processes and SIGSTOPs/SIGCONTs shard processes,
//! one fault at a time (a meta quorum and a replica of every shard stay up). Then everything is healed, the test
//! waits until every shard's replicas hold the same documents (read from each replica over the shard gRPC
//! service), reads every id back through the router (a BM25 search for the id's own word, filtered on the id),
//! and the checker (`history/checker.rs`) fails the run on a lost acknowledged write, a delete undone, a stale
//! value, a phantom or replicas that disagree.
//!
//! Bounded and replayable: `ATTEST_HISTORY_MINUTES` (default 0.75) sets how long the clients and the nemesis
//! run, `ATTEST_HISTORY_SEED` (default 43) the seed of the nemesis and of the clients' choices (thread timing
//! still varies from run to run). A failed run keeps the processes' logs, data and `history.txt` and says where.
//! `ATTEST_HISTORY_WIPE=1` breaks the cluster on purpose (a shard kill also loses that node's disk, right after
//! its peer was paused): that run must fail, which shows the suite catches lost writes end to end.
//! `ATTEST_HISTORY_KEEP=1` keeps the directory of a passing run too (a recorded long run).

use crate::common;

#[path = "history/checker.rs"]
mod checker;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use attest_proto::v1 as pb;
use checker::{Anomaly, Event, Op, Outcome, ReplicaState};
use common::{start_within, value_of, Proc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

const CLIENTS: usize = 4;
const IDS: usize = 30;
const SHARDS: u32 = 3;
/// What a client waits for an answer before it records the operation as unknown.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
/// A process that has not started (or a meta that has not rejoined) by then fails the run.
const START_LIMIT: Duration = Duration::from_secs(90);

/// The environment of every process: one BLAS thread (a 2-core machine runs seven processes), and anti-entropy
/// every 2 s instead of 10 s, so catch-up after the run is quick (and runs often during it).
const ENV: &[(&str, &str)] = &[
    ("OPENBLAS_NUM_THREADS", "1"),
    ("OMP_WAIT_POLICY", "PASSIVE"),
    ("ATTEST__AGENT__REPAIR_INTERVAL_MS", "2000"),
];

/// The temporary directory of the run (data, logs, history): removed after a passing run, kept (and named) after
/// a failing one, or with ATTEST_HISTORY_KEEP=1.
struct Workdir(Option<tempfile::TempDir>);

impl Workdir {
    fn path(&self) -> &Path {
        self.0.as_ref().unwrap().path()
    }
}

impl Drop for Workdir {
    fn drop(&mut self) {
        if std::thread::panicking() || std::env::var("ATTEST_HISTORY_KEEP").is_ok_and(|v| v == "1")
        {
            let kept = self.0.take().unwrap().keep();
            eprintln!(
                "the run's logs (logs/), data and history.txt are kept in {}",
                kept.display()
            );
        }
    }
}

/// Stops the clients when dropped, so a failing nemesis does not leave them calling a cluster that is gone.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Digits as consonants, so a marker word is one token that no stemmer changes.
fn letters(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '0'..='9' => b"bcdfghjklm"[(c as u8 - b'0') as usize] as char,
            _ => 'w',
        })
        .collect()
}

fn doc_id(i: usize) -> String {
    format!("d{i:02}")
}

/// The word only document `i` contains (in every version).
fn id_word(i: usize) -> String {
    format!("zk{}x", letters(&i.to_string()))
}

/// The word only the write of `value` contains.
fn marker(value: &str) -> String {
    format!("zv{}x", letters(value))
}

/// Microseconds since `t0`.
fn micros(t0: Instant) -> u64 {
    t0.elapsed().as_micros() as u64
}

/// Loopback ports below the ephemeral range (32768..), where no outgoing connection takes one while its process
/// is down: a block of 20 from a place that depends on the test's pid, all free now.
fn free_ports() -> Vec<u16> {
    let start = (std::process::id() % 80) as u16;
    for k in 0..80 {
        let base = 12_000 + ((start + k) % 80) * 100;
        let ports: Vec<u16> = (base..base + 20).collect();
        if ports
            .iter()
            .all(|p| TcpListener::bind(("127.0.0.1", *p)).is_ok())
        {
            return ports;
        }
    }
    panic!("no block of 20 free loopback ports in 12000..20000");
}

struct Cluster {
    metas: Vec<Option<Proc>>,
    shards: Vec<Option<Proc>>,
    /// Never faulted; kept alive as long as the cluster.
    router: Option<Proc>,
    meta_addrs: Vec<String>,
    shard_addrs: Vec<String>,
    /// Every meta address, comma-separated (`--meta`).
    meta_list: String,
    peers: String,
    url: String,
    dir: PathBuf,
    rt: tokio::runtime::Runtime,
}

impl Cluster {
    fn start(dir: &Path) -> Cluster {
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        let ports = free_ports();
        let meta_addrs: Vec<String> = (0..3).map(|i| format!("127.0.0.1:{}", ports[i])).collect();
        let shard_addrs: Vec<String> = (0..3)
            .map(|i| format!("127.0.0.1:{}", ports[10 + i]))
            .collect();
        let peers = meta_addrs
            .iter()
            .enumerate()
            .map(|(i, a)| format!("{}=http://{a}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let meta_list = meta_addrs
            .iter()
            .map(|a| format!("http://{a}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut cluster = Cluster {
            metas: (0..3).map(|_| None).collect(),
            shards: (0..3).map(|_| None).collect(),
            router: None,
            meta_addrs,
            shard_addrs,
            meta_list,
            peers,
            url: String::new(),
            dir: dir.to_path_buf(),
            rt: tokio::runtime::Runtime::new().unwrap(),
        };
        for i in 0..3 {
            cluster.start_meta(i);
        }
        for i in 0..3 {
            cluster.start_shard(i);
        }
        let (router, line) = start_within(
            &[
                "serve",
                "--insecure",
                "--role",
                "router",
                "--meta",
                &cluster.meta_list,
                "--http",
                "127.0.0.1:0",
                "--grpc",
                "127.0.0.1:0",
            ],
            &dir.join("router"),
            &dir.join("logs/router.log"),
            ENV,
            START_LIMIT,
        );
        cluster.router = Some(router);
        cluster.url = value_of(&line, "http=");
        let url = cluster.url.clone();
        wait_until(START_LIMIT, "the router ready", || {
            http(Duration::from_secs(5))
                .get(format!("{url}/readyz"))
                .send()
                .is_ok_and(|r| r.status().is_success())
        });
        cluster
    }

    fn start_meta(&mut self, i: usize) {
        let id = (i + 1).to_string();
        let (proc, _) = start_within(
            &[
                "serve",
                "--insecure",
                "--role",
                "meta",
                "--meta-id",
                &id,
                "--meta-peers",
                &self.peers,
                "--grpc",
                &self.meta_addrs[i],
            ],
            &self.dir.join(format!("meta-{id}")),
            &self.dir.join(format!("logs/meta-{id}.log")),
            ENV,
            START_LIMIT,
        );
        self.metas[i] = Some(proc);
    }

    /// Starts shard node `i` (again); returns once it has registered and caught up (it prints its address).
    fn start_shard(&mut self, i: usize) {
        let name = format!("shard-{}", i + 1);
        let (proc, _) = start_within(
            &[
                "serve",
                "--insecure",
                "--role",
                "shard",
                "--meta",
                &self.meta_list,
                "--grpc",
                &self.shard_addrs[i],
                "--node-name",
                &name,
            ],
            &self.dir.join(&name),
            &self.dir.join(format!("logs/{name}.log")),
            ENV,
            START_LIMIT,
        );
        self.shards[i] = Some(proc);
    }

    /// Raft status of meta `i`, if it answers.
    fn meta_status(&self, i: usize) -> Option<pb::MetaStatus> {
        let addr = format!("http://{}", self.meta_addrs[i]);
        self.rt.block_on(async {
            let mut client = pb::meta_service_client::MetaServiceClient::connect(addr)
                .await
                .ok()?;
            tokio::time::timeout(
                Duration::from_secs(2),
                client.status(pb::MetaStatusRequest {}),
            )
            .await
            .ok()?
            .ok()
            .map(|r| r.into_inner())
        })
    }

    fn status(&self) -> Value {
        common::attest_json(&["status", "--json", "--meta", &self.meta_list])
    }
}

fn signal(proc: &Proc, sig: i32) {
    unsafe {
        libc::kill(proc.0.id() as i32, sig);
    }
}

fn http(timeout: Duration) -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(timeout)
        .build()
        .unwrap()
}

/// Waits until `check` holds, polling; panics with `what` after `limit`.
fn wait_until(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while started.elapsed() < limit {
        if check() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("timed out after {limit:?} waiting for {what}");
}

/// A client: upserts and deletes random ids until `stop`, recording each operation.
fn client(c: usize, seed: u64, url: String, t0: Instant, stop: Arc<AtomicBool>) -> Vec<Event> {
    let mut rng =
        StdRng::seed_from_u64(seed ^ (0x9e37_79b9_7f4a_7c15_u64.wrapping_mul(c as u64 + 1)));
    let client = http(CLIENT_TIMEOUT);
    let mut history = Vec::new();
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let i = rng.gen_range(0..IDS);
        let id = doc_id(i);
        if rng.gen_bool(0.7) {
            seq += 1;
            let value = format!("{c}-{seq}");
            let filler: Vec<String> = (0..6)
                .map(|_| (0..6).map(|_| rng.gen_range(b'a'..=b'z') as char).collect())
                .collect();
            let doc = json!({
                "id": id,
                "title": format!("Record {id}"),
                "text": format!("Record {} holds {}: {}.", id_word(i), marker(&value), filler.join(" ")),
                "metadata": {"key": id, "v": value},
            });
            let invoke = micros(t0);
            let r = client
                .post(format!("{url}/v1/collections/c/documents"))
                .json(&json!({"documents": [doc]}))
                .send();
            let outcome = match r {
                Ok(r) if r.status().as_u16() == 200 => {
                    let b: Value = r.json().unwrap_or(Value::Null);
                    if b["accepted"] == 1 {
                        Outcome::Ok
                    } else if b["duplicates"].as_u64().unwrap_or(0) > 0 {
                        // Dropped by the router before anything is written.
                        Outcome::Failed(format!("near duplicate: {b}"))
                    } else {
                        Outcome::Unknown(format!("200 {b}"))
                    }
                }
                r => unknown_or_failed(r),
            };
            history.push(Event {
                client: c,
                id,
                op: Op::Write(value),
                invoke,
                complete: micros(t0),
                outcome,
            });
        } else {
            let invoke = micros(t0);
            let r = client
                .delete(format!("{url}/v1/collections/c/documents/{id}"))
                .send();
            let outcome = match r {
                Ok(r) if r.status().as_u16() == 200 => Outcome::Ok,
                Ok(r) if r.status().as_u16() == 404 => {
                    let text = r.text().unwrap_or_default();
                    if text.contains(&format!("document `{id}` does not exist")) {
                        Outcome::NotFound
                    } else {
                        Outcome::Unknown(format!("404 {text}"))
                    }
                }
                r => unknown_or_failed(r),
            };
            history.push(Event {
                client: c,
                id,
                op: Op::Delete,
                invoke,
                complete: micros(t0),
                outcome,
            });
        }
    }
    history
}

/// Any other answer. An error status may come from one replica after another already wrote (a write fails at
/// once with a replica's non-retryable error): unknown. Only a request that never reached the router failed.
fn unknown_or_failed(r: reqwest::Result<reqwest::blocking::Response>) -> Outcome {
    match r {
        Ok(r) => {
            let status = r.status().as_u16();
            let text = r.text().unwrap_or_default();
            Outcome::Unknown(format!(
                "{status} {}",
                text.chars().take(200).collect::<String>()
            ))
        }
        Err(e) if e.is_connect() => Outcome::Failed(format!("connect: {e}")),
        Err(e) if e.is_timeout() => Outcome::Unknown("timeout".into()),
        Err(e) => Outcome::Unknown(e.to_string()),
    }
}

#[derive(Debug, Default)]
struct Faults {
    shard_kills: usize,
    meta_kills: usize,
    pauses: usize,
    log: Vec<String>,
}

/// One fault at a time until `until`, each healed before the next: SIGKILL a shard process (restarted with its
/// data), SIGKILL a meta process (restarted; the next fault waits until it knows the leader and has applied the
/// log up to where the group was), or SIGSTOP a shard process (then SIGCONT). `wipe` (ATTEST_HISTORY_WIPE=1, a
/// deliberately broken cluster that must fail the run) turns each shard kill into a lost disk after a peer's
/// pause.
fn nemesis(
    cluster: &mut Cluster,
    rng: &mut StdRng,
    t0: Instant,
    until: Duration,
    wipe: bool,
) -> Faults {
    let mut faults = Faults::default();
    let note = |faults: &mut Faults, what: String| {
        let line = format!("[{:>8.3}s] {what}", t0.elapsed().as_secs_f64());
        eprintln!("nemesis {line}");
        faults.log.push(line);
    };
    loop {
        // With `wipe`, the run ends on a lost disk, so that writes it loses are not all overwritten later.
        let last = t0.elapsed() >= until;
        if last && !wipe {
            break;
        }
        std::thread::sleep(Duration::from_millis(rng.gen_range(300..1500)));
        let hold = Duration::from_millis(rng.gen_range(500..3000));
        let roll = rng.gen_range(0..100);
        if wipe && (roll < 40 || last) {
            // A broken disk, to show the suite catches lost writes: a replica misses writes while paused, its
            // peer acknowledged them alone and loses its data before anti-entropy copied them.
            let i = rng.gen_range(0..3);
            let j = (i + rng.gen_range(1..3)) % 3;
            // Longer than the router's replica deadline: writes it sent the paused replica are given up, not
            // merely delayed.
            let hold = hold + Duration::from_secs(3);
            note(
                &mut faults,
                format!(
                    "SIGSTOP shard-{} for {hold:?}, then SIGKILL shard-{} and WIPE its data",
                    j + 1,
                    i + 1
                ),
            );
            signal(cluster.shards[j].as_ref().unwrap(), libc::SIGSTOP);
            faults.pauses += 1;
            std::thread::sleep(hold);
            signal(cluster.shards[j].as_ref().unwrap(), libc::SIGCONT);
            drop(cluster.shards[i].take());
            faults.shard_kills += 1;
            std::fs::remove_dir_all(cluster.dir.join(format!("shard-{}", i + 1))).unwrap();
            cluster.start_shard(i);
            note(&mut faults, format!("shard-{} restarted empty", i + 1));
            if last {
                break;
            }
        } else if roll < 40 {
            let i = rng.gen_range(0..3);
            note(&mut faults, format!("SIGKILL shard-{} for {hold:?}", i + 1));
            drop(cluster.shards[i].take());
            faults.shard_kills += 1;
            std::thread::sleep(hold);
            let restarted = Instant::now();
            cluster.start_shard(i);
            note(
                &mut faults,
                format!(
                    "shard-{} restarted, serving after {:?}",
                    i + 1,
                    restarted.elapsed()
                ),
            );
        } else if roll < 75 {
            let i = rng.gen_range(0..3);
            note(&mut faults, format!("SIGSTOP shard-{} for {hold:?}", i + 1));
            let proc = cluster.shards[i].as_ref().unwrap();
            signal(proc, libc::SIGSTOP);
            faults.pauses += 1;
            std::thread::sleep(hold);
            signal(proc, libc::SIGCONT);
            note(&mut faults, format!("SIGCONT shard-{}", i + 1));
        } else {
            let i = rng.gen_range(0..3);
            let leader = (0..3)
                .filter_map(|j| cluster.meta_status(j))
                .map(|s| s.leader_id)
                .max()
                .unwrap_or(0);
            note(
                &mut faults,
                format!(
                    "SIGKILL meta-{} (leader: meta-{leader}) for {hold:?}",
                    i + 1
                ),
            );
            drop(cluster.metas[i].take());
            faults.meta_kills += 1;
            std::thread::sleep(hold);
            let restarted = Instant::now();
            cluster.start_meta(i);
            let mut target = None;
            wait_until(START_LIMIT, &format!("meta-{} to rejoin", i + 1), || {
                // The log the others had committed when it came back: it has rejoined once it applied that.
                let t = *target.get_or_insert_with(|| {
                    (0..3)
                        .filter(|&j| j != i)
                        .filter_map(|j| cluster.meta_status(j))
                        .map(|s| s.commit_index)
                        .max()
                        .unwrap_or(0)
                });
                cluster
                    .meta_status(i)
                    .is_some_and(|s| s.leader_id != 0 && s.applied_index >= t)
            });
            note(
                &mut faults,
                format!(
                    "meta-{} restarted, rejoined after {:?}",
                    i + 1,
                    restarted.elapsed()
                ),
            );
        }
    }
    faults
}

/// The value a stored document carries: its metadata `v`, if every chunk has it and the text has its marker.
fn value_in(chunks: &[(String, String)]) -> String {
    let values: Vec<Option<String>> = chunks
        .iter()
        .map(|(_, meta)| {
            let m: Value = serde_json::from_str(meta).unwrap_or(Value::Null);
            m["v"].as_str().map(str::to_string)
        })
        .collect();
    match values.first() {
        Some(Some(v))
            if values.iter().all(|x| x.as_deref() == Some(v))
                && chunks.iter().any(|(text, _)| text.contains(&marker(v))) =>
        {
            v.clone()
        }
        _ => format!("torn:{chunks:?}"),
    }
}

/// Every live document each replica of each shard of `c` holds, read from the replicas themselves (DocVersions,
/// then FetchDocuments): shard → [(replica name, state)]. Err: a replica did not answer.
fn replica_states(cluster: &Cluster) -> Result<BTreeMap<u32, Vec<(String, ReplicaState)>>, String> {
    let state = cluster.status();
    let nodes: BTreeMap<u64, (String, String)> = state["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["id"].as_u64().unwrap(),
                (
                    n["name"].as_str().unwrap().to_string(),
                    n["address"].as_str().unwrap().to_string(),
                ),
            )
        })
        .collect();
    let c = state["collections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "c")
        .ok_or("no collection c in the status")?;
    let mut out = BTreeMap::new();
    for s in c["placement"].as_array().unwrap() {
        let shard = s["shard"].as_u64().unwrap() as u32;
        let mut replicas = Vec::new();
        for r in s["replicas"].as_array().unwrap() {
            let (name, addr) = nodes[&r["node"].as_u64().unwrap()].clone();
            let held = cluster
                .rt
                .block_on(read_replica(addr, shard))
                .map_err(|e| format!("shard {shard} on {name}: {e}"))?;
            replicas.push((name, held));
        }
        out.insert(shard, replicas);
    }
    Ok(out)
}

async fn read_replica(addr: String, shard: u32) -> Result<ReplicaState, String> {
    let mut client = pb::shard_service_client::ShardServiceClient::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let mut live = Vec::new();
    let mut after = String::new();
    loop {
        let page = client
            .doc_versions(pb::DocVersionsRequest {
                collection: "c".into(),
                shard,
                after_doc_id: after.clone(),
                limit: 0,
                changed_after_seq: 0,
            })
            .await
            .map_err(|e| e.to_string())?
            .into_inner();
        live.extend(page.entries.into_iter().filter(|e| !e.deleted));
        if page.next_after.is_empty() {
            break;
        }
        after = page.next_after;
    }
    let mut state = ReplicaState::new();
    for batch in live.chunks(64) {
        let docs = client
            .fetch_documents(pb::FetchDocumentsRequest {
                collection: "c".into(),
                shard,
                docs: batch
                    .iter()
                    .map(|e| pb::DocRef {
                        tenant: e.tenant.clone(),
                        doc_id: e.doc_id.clone(),
                    })
                    .collect(),
            })
            .await
            .map_err(|e| e.to_string())?
            .into_inner();
        for d in docs.documents {
            let chunks: Vec<(String, String)> = d
                .chunks
                .iter()
                .map(|c| (c.text.clone(), c.metadata_json.clone()))
                .collect();
            state.insert(d.doc_id.clone(), (value_in(&chunks), d.version));
        }
    }
    Ok(state)
}

/// What the router serves for every id: a BM25 search for the id's own word, filtered on the id's metadata key.
fn router_reads(cluster: &Cluster) -> BTreeMap<String, Option<String>> {
    let client = http(Duration::from_secs(30));
    let mut out = BTreeMap::new();
    for i in 0..IDS {
        let id = doc_id(i);
        let mut last = String::new();
        let mut answer = None;
        wait_until(
            Duration::from_secs(60),
            &format!("the router to read {id} ({last})"),
            || {
                let r = client
                .post(format!("{}/v1/collections/c/search", cluster.url))
                .json(&json!({"query": id_word(i), "k": 10, "lanes": ["bm25"], "filter": {"key": id}}))
                .send();
                match r {
                    Ok(r) if r.status().as_u16() == 200 => {
                        let b: Value = r.json().unwrap();
                        if b["degraded"] == false {
                            answer = Some(b);
                            return true;
                        }
                        last = b.to_string();
                    }
                    Ok(r) => last = format!("{} {}", r.status(), r.text().unwrap_or_default()),
                    Err(e) => last = e.to_string(),
                }
                false
            },
        );
        let b = answer.unwrap();
        let mut values: Vec<String> = b["hits"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|h| h["doc_id"] == id.as_str())
            .map(|h| {
                value_in(&[(
                    h["text"].as_str().unwrap_or_default().to_string(),
                    h["metadata"].to_string(),
                )])
            })
            .collect();
        values.sort();
        values.dedup();
        let read = match values.len() {
            0 => None,
            1 => values.pop(),
            _ => Some(format!("several:{values:?}")),
        };
        out.insert(id, read);
    }
    out
}

fn minutes() -> f64 {
    std::env::var("ATTEST_HISTORY_MINUTES")
        .ok()
        .map(|m| {
            m.parse()
                .expect("ATTEST_HISTORY_MINUTES: minutes, e.g. 30 or 0.5")
        })
        .unwrap_or(0.75)
}

fn seed() -> u64 {
    std::env::var("ATTEST_HISTORY_SEED")
        .ok()
        .map(|s| s.parse().expect("ATTEST_HISTORY_SEED: an unsigned integer"))
        .unwrap_or(43)
}

#[test]
fn concurrent_history_survives_kills_and_pauses() {
    let started = Instant::now();
    let (seed, minutes) = (seed(), minutes());
    eprintln!("history: seed {seed} (ATTEST_HISTORY_SEED), {minutes} min of load and faults (ATTEST_HISTORY_MINUTES)");
    let work = Workdir(Some(tempfile::tempdir().unwrap()));
    let mut cluster = Cluster::start(work.path());
    eprintln!(
        "cluster up in {:?}: router {}, meta {}; logs in {}",
        started.elapsed(),
        cluster.url,
        cluster.meta_list,
        work.path().join("logs").display()
    );

    let created = Instant::now();
    let mut last = (0, Value::Null);
    wait_until(START_LIMIT, "collection c created", || {
        last = common::post(
            &format!("{}/v1/collections", cluster.url),
            &json!({"name": "c", "shards": SHARDS, "replication": 2}),
        );
        last.0 == 201 || last.0 == 409
    });
    wait_until(
        START_LIMIT,
        "every replica of c active and searchable",
        || {
            let st = cluster.status();
            let active = st["collections"].as_array().unwrap().iter().all(|c| {
                c["placement"].as_array().unwrap().iter().all(|s| {
                    s["replicas"].as_array().unwrap().len() == 2
                        && s["replicas"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .all(|r| r["state"] == "active")
                })
            });
            active && {
                let (s, b) = common::post(
                    &format!("{}/v1/collections/c/search", cluster.url),
                    &json!({"query": "record", "k": 1, "lanes": ["bm25"]}),
                );
                s == 200 && b["degraded"] == false
            }
        },
    );
    eprintln!(
        "collection c (3 shards, replication 2) ready after {:?}",
        created.elapsed()
    );

    // Load and faults.
    let t0 = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let _stop_if_failed = StopOnDrop(Arc::clone(&stop));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (url, stop) = (cluster.url.clone(), Arc::clone(&stop));
            std::thread::spawn(move || client(c, seed, url, t0, stop))
        })
        .collect();
    let mut rng = StdRng::seed_from_u64(seed);
    let wipe = std::env::var("ATTEST_HISTORY_WIPE").is_ok_and(|v| v == "1");
    if wipe {
        eprintln!(
            "ATTEST_HISTORY_WIPE=1: shard kills lose the disk; this run must fail with lost writes"
        );
    }
    let faults = nemesis(
        &mut cluster,
        &mut rng,
        t0,
        Duration::from_secs_f64(minutes * 60.0),
        wipe,
    );
    stop.store(true, Ordering::Relaxed);
    let mut history: Vec<Event> = clients
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    history.sort_by_key(|e| (e.invoke, e.complete));
    let load_time = t0.elapsed();
    let count = |f: &dyn Fn(&Event) -> bool| history.iter().filter(|e| f(e)).count();
    let writes = count(&|e| matches!(e.op, Op::Write(_)));
    let figures = format!(
        "{} operations in {:.1}s ({writes} writes: {} ok, {} unknown, {} failed; {} deletes: {} ok, {} not found, {} unknown, {} failed); \
         faults: {} shard kills, {} meta kills, {} shard pauses",
        history.len(),
        load_time.as_secs_f64(),
        count(&|e| matches!(e.op, Op::Write(_)) && e.outcome == Outcome::Ok),
        count(&|e| matches!(e.op, Op::Write(_)) && matches!(e.outcome, Outcome::Unknown(_))),
        count(&|e| matches!(e.op, Op::Write(_)) && matches!(e.outcome, Outcome::Failed(_))),
        history.len() - writes,
        count(&|e| e.op == Op::Delete && e.outcome == Outcome::Ok),
        count(&|e| e.op == Op::Delete && e.outcome == Outcome::NotFound),
        count(&|e| e.op == Op::Delete && matches!(e.outcome, Outcome::Unknown(_))),
        count(&|e| e.op == Op::Delete && matches!(e.outcome, Outcome::Failed(_))),
        faults.shard_kills,
        faults.meta_kills,
        faults.pauses,
    );
    eprintln!("history: {figures}");
    // A run where nothing was acknowledged, or nothing went wrong, would check nothing.
    assert!(
        count(&|e| matches!(e.op, Op::Write(_)) && e.outcome == Outcome::Ok) >= 50
            && count(&|e| e.op == Op::Delete && e.outcome == Outcome::Ok) >= 10,
        "too few operations acknowledged to check anything: {figures}"
    );
    assert!(
        faults.shard_kills + faults.meta_kills + faults.pauses >= 3,
        "too few faults: {figures}"
    );
    let mut record = String::new();
    for line in &faults.log {
        record.push_str(&format!("nemesis {line}\n"));
    }
    for e in &history {
        record.push_str(&format!("{e}\n"));
    }
    std::fs::write(work.path().join("history.txt"), &record).unwrap();

    // Healed (the nemesis heals each fault before the next): wait until every shard's replicas hold the same
    // documents, read everything, and read the replicas again: the same, or the reads are retried.
    let healed = Instant::now();
    let mut settled = None;
    let mut last_disagreement = Vec::new();
    let mut last_error = String::new();
    while healed.elapsed() < Duration::from_secs(120) && settled.is_none() {
        match replica_states(&cluster) {
            Ok(states) => {
                let disagree: Vec<Anomaly> = states
                    .iter()
                    .flat_map(|(shard, replicas)| checker::compare_replicas(*shard, replicas))
                    .collect();
                if disagree.is_empty() {
                    let reads = router_reads(&cluster);
                    if replica_states(&cluster).is_ok_and(|again| again == states) {
                        settled = Some((states, reads));
                    }
                } else {
                    last_disagreement = disagree;
                }
            }
            Err(e) => last_error = e,
        }
        if settled.is_none() {
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    let caught_up = healed.elapsed();

    let mut anomalies = Vec::new();
    match &settled {
        Some((states, reads)) => {
            anomalies.extend(checker::check(&history, reads, "the router"));
            for (shard, replicas) in states {
                for (name, held) in replicas {
                    let finals: BTreeMap<String, Option<String>> = (0..IDS)
                        .map(doc_id)
                        .filter(|id| attest_router::router::shard_for(id, SHARDS) == *shard)
                        .map(|id| {
                            let v = held.get(&id).map(|(v, _)| v.clone());
                            (id, v)
                        })
                        .collect();
                    let reader = format!("shard {shard} on {name}");
                    let relevant: Vec<Event> = history
                        .iter()
                        .filter(|e| finals.contains_key(&e.id))
                        .cloned()
                        .collect();
                    anomalies.extend(checker::check(&relevant, &finals, &reader));
                }
            }
            // The router serves what the replicas (agreeing) hold.
            let stored: BTreeMap<String, Option<String>> = (0..IDS)
                .map(doc_id)
                .map(|id| {
                    let shard = attest_router::router::shard_for(&id, SHARDS);
                    let v = states[&shard][0].1.get(&id).map(|(v, _)| v.clone());
                    (id, v)
                })
                .collect();
            anomalies.extend(checker::compare_reads(
                ("the router", reads),
                ("the replicas", &stored),
            ));
            let live = reads.values().filter(|v| v.is_some()).count();
            eprintln!(
                "replicas agreed {caught_up:?} after the run; {live} of {IDS} ids live; every id read through the router and from each replica"
            );
        }
        None => {
            assert!(
                !last_disagreement.is_empty(),
                "the replicas could not be read within 120 s: {last_error}"
            );
            anomalies.extend(last_disagreement);
        }
    }

    eprintln!(
        "history: seed {seed}; {figures}; {} anomalies; wall {:.1}s",
        anomalies.len(),
        started.elapsed().as_secs_f64()
    );
    if !anomalies.is_empty() {
        let mut report = String::new();
        for a in &anomalies {
            report.push_str(&format!("{a}\n"));
        }
        // One excerpt per id and kind (each replica and the router usually report the same thing).
        let mut shown = std::collections::BTreeSet::new();
        for a in &anomalies {
            if shown.insert((a.id().to_string(), a.kind())) {
                report.push_str(&format!(
                    "{} {}:\n{}",
                    a.kind(),
                    a.id(),
                    checker::excerpt(&history, a)
                ));
            }
        }
        panic!(
            "{} anomalies (seed {seed}, replay with ATTEST_HISTORY_SEED={seed}):\n{report}",
            anomalies.len()
        );
    }
    drop(cluster);
}
