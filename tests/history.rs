//! Fault injection with a history checker (Jepsen's idea, at this project's scale): 3 meta + 3 shard processes
//! and a router on loopback, a collection of 3 shards with replication 2. Concurrent clients upsert (each write
//! a unique value, as a marker word in the text and `v` in the metadata) and delete a small set of document ids
//! through the router, recording every operation with the times it was invoked and completed and its outcome,
//! while a seeded nemesis (`history/nemesis.rs`) SIGKILLs and restarts shard and meta processes, SIGSTOPs/SIGCONTs
//! shard processes and partitions shard nodes off the network, one fault at a time (a meta quorum and a replica
//! of every shard stay up and reachable). Then everything is healed, the test waits until every shard's replicas
//! hold the same documents (read from each replica over the shard gRPC service), reads every id back through the
//! router (a BM25 search for the id's own word, filtered on the id), and the checker (`history/checker.rs`) fails
//! the run on a lost acknowledged write, a delete undone, a stale value, a phantom or replicas that disagree.
//!
//! A partition: each shard node runs behind a loopback TCP proxy the test owns (`history/proxy.rs`) and
//! advertises the proxy's address, so meta records it and the router and the peer shards (writes, reads,
//! repair, catch-up) reach the node only through it, across the node's restarts too (`history/cluster.rs`). A
//! partitioned proxy relays nothing and closes nothing: bytes on open connections are discarded and new
//! connections are accepted and left unanswered, as when packets are dropped, so callers learn of it only from
//! their deadlines. What the partition cuts is the way in: the node itself keeps running and still reaches meta
//! (heartbeats, so meta keeps it in the shard map) and its peers (its own repairs go through their proxies). The
//! heal relays new connections again and closes the blackholed ones.
//!
//! Bounded and replayable: `ATTEST_HISTORY_MINUTES` (default 0.75) sets how long the clients and the nemesis
//! run, `ATTEST_HISTORY_SEED` (default 43) the seed of the nemesis and of the clients' choices (thread timing
//! still varies from run to run). A failed run keeps the processes' logs, data and `history.txt` and says where.
//! `ATTEST_HISTORY_WIPE=1` breaks the cluster on purpose (a shard kill also loses that node's disk, right after
//! its peer was paused): that run must fail, which shows the suite catches lost writes end to end.
//! `ATTEST_HISTORY_KEEP=1` keeps the directory of a passing run too (a recorded long run).
//!
//! Layout: this file runs the clients and the test; `history/cluster.rs` starts the processes and the proxies,
//! `history/proxy.rs` is the proxy (and its own test), `history/nemesis.rs` the faults, `history/readback.rs`
//! reads the healed cluster back, `history/checker.rs` judges the history against it.

use crate::common;

#[path = "history/checker.rs"]
mod checker;
#[path = "history/cluster.rs"]
mod cluster;
#[path = "history/nemesis.rs"]
mod nemesis;
#[path = "history/proxy.rs"]
mod proxy;
#[path = "history/readback.rs"]
mod readback;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use checker::{Anomaly, Event, Op, Outcome};
use cluster::Cluster;
use nemesis::nemesis;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use readback::{replica_states, router_reads};
use serde_json::{json, Value};

const CLIENTS: usize = 4;
const IDS: usize = 30;
const SHARDS: u32 = 3;
/// What a client waits for an answer before it records the operation as unknown.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
/// A process that has not started (or a meta that has not rejoined) by then fails the run.
const START_LIMIT: Duration = Duration::from_secs(90);

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
fn concurrent_history_survives_kills_pauses_and_partitions() {
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
    cluster.assert_shards_behind_proxies();

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
    // Restarted shard nodes came back behind the same proxies.
    cluster.assert_shards_behind_proxies();
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
         faults: {} shard kills, {} meta kills, {} shard pauses, {} shard partitions",
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
        faults.partitions,
    );
    eprintln!("history: {figures}");
    // A run where nothing was acknowledged, or nothing went wrong, would check nothing.
    assert!(
        count(&|e| matches!(e.op, Op::Write(_)) && e.outcome == Outcome::Ok) >= 50
            && count(&|e| e.op == Op::Delete && e.outcome == Outcome::Ok) >= 10,
        "too few operations acknowledged to check anything: {figures}"
    );
    assert!(faults.total() >= 3, "too few faults: {figures}");
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
                        .filter(|id| attest_router::shared::shard_for(id, SHARDS) == *shard)
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
                    let shard = attest_router::shared::shard_for(&id, SHARDS);
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
