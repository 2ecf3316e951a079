//! Re-embedding a collection online, through the real binary (`attest dev`, issue 70 item 3): a collection
//! MiniLM filled is re-embedded with bge-small-en-v1.5 while a writer and a searcher keep at it. No search fails,
//! no write is lost (the documents written during the job are all there afterwards, with new vectors, and a
//! document deleted during the job stays deleted), and the collection then records bge and is searched with it.
//! A snapshot keeps the collection under its name and restores it. A cancelled re-embedding drops its copy and
//! leaves the collection as it was; the job's errors are clear.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common;

use common::{call, start_with_env, value_of, Logs};
use serde_json::{json, Value};

/// `attest dev` over `data/node`, with `data/backups` admitted as a snapshot destination.
fn dev(data: &std::path::Path) -> (common::Proc, String) {
    let root = data.join("backups");
    let (proc, line) = start_with_env(
        &[
            "dev",
            "--http",
            "127.0.0.1:0",
            "--grpc",
            "127.0.0.1:0",
            "--snapshot-root",
            root.to_str().unwrap(),
        ],
        Some(&data.join("node")),
        Logs::Quiet,
        &[("ATTEST__EMBEDDER__LOCAL__MODEL", "all-minilm-l6-v2")],
    );
    (proc, value_of(&line, "http="))
}

fn doc(i: usize) -> Value {
    json!({"id": format!("d{i}"), "title": format!("Unit {i}"),
        "text": format!("Sensor unit {i} reports its battery at {} percent after the {i}th cycle.", i % 100)})
}

fn ingest(url: &str, docs: Vec<Value>) -> (u16, Value) {
    call(
        "POST",
        &format!("{url}/v1/collections/fleet/documents"),
        None,
        Some(&json!({ "documents": docs })),
    )
}

fn search(url: &str, query: &str, lanes: Value) -> (u16, Value) {
    call(
        "POST",
        &format!("{url}/v1/collections/fleet/search"),
        None,
        Some(&json!({"query": query, "k": 3, "lanes": lanes})),
    )
}

fn get(url: &str, path: &str) -> Value {
    common::get_ok(&format!("{url}{path}"))
}

/// Reads the job until it is no longer running (bounded).
fn wait_for_end(url: &str, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        let job = get(url, &format!("/v1/reembed/jobs/{id}"));
        if job["state"] != "running" {
            return job;
        }
        assert!(Instant::now() < deadline, "job still running: {job}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn wait_snapshot_job(url: &str, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let job = get(url, &format!("/v1/snapshots/jobs/{id}"));
        if job["state"] != "running" {
            return job;
        }
        assert!(
            Instant::now() < deadline,
            "snapshot job still running: {job}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn live_documents(url: &str) -> u64 {
    let stats = get(url, "/v1/collections/fleet/stats");
    stats["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["live_documents"].as_u64().unwrap())
        .sum()
}

#[test]
fn a_collection_is_reembedded_while_it_serves_and_takes_writes() {
    let data = tempfile::tempdir().unwrap();
    let (_proc, url) = dev(data.path());
    let (status, body) = call(
        "POST",
        &format!("{url}/v1/collections"),
        None,
        Some(&json!({"name": "fleet", "shards": 2})),
    );
    assert_eq!(status, 201, "{body}");
    const BEFORE: usize = 300;
    for batch in (0..BEFORE).collect::<Vec<_>>().chunks(100) {
        let (status, body) = ingest(&url, batch.iter().map(|i| doc(*i)).collect());
        assert_eq!(status, 200, "{body}");
    }

    // Refusals name the problem and start nothing.
    let reembed = |collection: &str, body: Value| {
        call(
            "POST",
            &format!("{url}/v1/collections/{collection}/reembed"),
            None,
            Some(&body),
        )
    };
    let (status, body) = reembed("fleet", json!({"embedder": "all-minilm-l6-v2"}));
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "embedder", "{body}");
    let (status, body) = reembed("fleet", json!({"embedder": "gte-base"}));
    assert_eq!(status, 400, "{body}");
    let (status, body) = reembed("nowhere", json!({"embedder": "bge-small-en-v1.5"}));
    assert_eq!(status, 404, "{body}");

    // A writer and a searcher run through the whole job.
    let stop = Arc::new(AtomicBool::new(false));
    let failed_searches = Arc::new(AtomicUsize::new(0));
    let searches = Arc::new(AtomicUsize::new(0));
    let searcher = {
        let (url, stop) = (url.clone(), Arc::clone(&stop));
        let (failed, done) = (Arc::clone(&failed_searches), Arc::clone(&searches));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let (status, body) =
                    search(&url, "battery of sensor unit 17", json!(["dense", "bm25"]));
                if status != 200 || body["hits"].as_array().is_none_or(|h| h.is_empty()) {
                    eprintln!("search failed during the job: {status} {body}");
                    failed.fetch_add(1, Ordering::Relaxed);
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let (status, job) = reembed("fleet", json!({"embedder": "bge-small-en-v1.5"}));
    assert_eq!(status, 202, "{job}");
    let id = job["id"].as_str().unwrap().to_string();
    assert_eq!(job["from_embedder"], "all-minilm-l6-v2", "{job}");
    // One re-embedding at a time.
    let (status, body) = reembed("fleet", json!({"embedder": "bge-small-en-v1.5"}));
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "ALREADY_EXISTS", "{body}");

    // Written while the job runs: new documents, a changed one and a deleted one.
    let mut written = BEFORE;
    while get(&url, &format!("/v1/reembed/jobs/{id}"))["state"] == "running" && written < 600 {
        let (status, body) = ingest(&url, (written..written + 20).map(doc).collect());
        assert_eq!(status, 200, "{body}");
        written += 20;
    }
    assert!(written > BEFORE, "documents were written while the job ran");
    let changed = json!({"id": "d5", "title": "Unit 5", "text": "Sensor unit 5 was retired to the museum in Lyon."});
    let (status, body) = ingest(&url, vec![changed]);
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(
        "DELETE",
        &format!("{url}/v1/collections/fleet/documents/d7"),
        None,
        None,
    );
    assert_eq!(status, 200, "{body}");

    let job = wait_for_end(&url, &id);
    stop.store(true, Ordering::Relaxed);
    searcher.join().unwrap();
    assert_eq!(job["state"], "succeeded", "{job}");
    assert!(job["passes"].as_u64().unwrap() >= 2, "{job}");
    assert!(searches.load(Ordering::Relaxed) > 0);
    assert_eq!(
        failed_searches.load(Ordering::Relaxed),
        0,
        "failed searches"
    );

    // The collection records bge now, and holds every document written before and during the job (less the
    // deleted one): nothing lost.
    let c = get(&url, "/v1/collections/fleet");
    assert_eq!(c["name"], "fleet", "{c}");
    assert_eq!(c["embedder"], "bge-small-en-v1.5", "{c}");
    assert_eq!(c["embedder_identity"]["pooling"], "cls", "{c}");
    let listed = get(&url, "/v1/collections");
    let names: Vec<&str> = listed["collections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fleet"], "the copy never shows: {listed}");
    assert_eq!(live_documents(&url), (written - 1) as u64);
    let (status, body) = search(
        &url,
        "which unit went to the museum in Lyon",
        json!(["dense"]),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["hits"][0]["doc_id"], "d5", "{body}");
    assert_eq!(body["degraded"], json!(false), "{body}");
    let last = written - 1;
    let (status, body) = search(
        &url,
        &format!("battery of sensor unit {last} after the {last}th cycle"),
        json!(["bm25"]),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["hits"][0]["doc_id"], format!("d{last}"), "{body}");
    let (status, body) = search(
        &url,
        "Sensor unit 7 reports its battery at 7 percent after the 7th cycle",
        json!(["bm25", "dense"]),
    );
    assert_eq!(status, 200, "{body}");
    assert!(
        !body["hits"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["doc_id"] == "d7"),
        "the document deleted during the job stays deleted: {body}"
    );

    // A snapshot keeps it under its name (not the name it is stored under), and restores it as it is.
    let backups = data.path().join("backups");
    let (status, job) = call(
        "POST",
        &format!("{url}/v1/snapshots"),
        None,
        Some(&json!({"destination": backups, "id": "after", "collections": ["fleet"]})),
    );
    assert_eq!(status, 202, "{job}");
    let job = wait_snapshot_job(&url, job["id"].as_str().unwrap());
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["manifest"]["collections"][0]["name"], "fleet", "{job}");
    let (status, job) = call(
        "POST",
        &format!("{url}/v1/snapshots/restore"),
        None,
        Some(&json!({"source": backups, "id": "after", "rename": {"fleet": "fleet-restored"}})),
    );
    assert_eq!(status, 202, "{job}");
    let job = wait_snapshot_job(&url, job["id"].as_str().unwrap());
    assert_eq!(job["state"], "succeeded", "{job}");
    let restored = get(&url, "/v1/collections/fleet-restored");
    assert_eq!(restored["embedder"], "bge-small-en-v1.5", "{restored}");
    let stats = get(&url, "/v1/collections/fleet-restored/stats");
    let held: u64 = stats["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["live_documents"].as_u64().unwrap())
        .sum();
    assert_eq!(held, (written - 1) as u64, "{stats}");

    // Writes after the switch go to the new index; a drop removes it.
    let (status, body) = ingest(&url, vec![doc(9_999)]);
    assert_eq!(status, 200, "{body}");
    assert_eq!(live_documents(&url), written as u64);
    let (status, body) = call("DELETE", &format!("{url}/v1/collections/fleet"), None, None);
    assert_eq!(status, 200, "{body}");
    let (status, _) = call("GET", &format!("{url}/v1/collections/fleet"), None, None);
    assert_eq!(status, 404);
}

#[test]
fn a_cancelled_reembedding_leaves_the_collection_as_it_was() {
    let data = tempfile::tempdir().unwrap();
    let (_proc, url) = dev(data.path());
    let (status, body) = call(
        "POST",
        &format!("{url}/v1/collections"),
        None,
        Some(&json!({"name": "fleet", "shards": 1})),
    );
    assert_eq!(status, 201, "{body}");
    for batch in (0..1_000).collect::<Vec<_>>().chunks(100) {
        let (status, body) = ingest(&url, batch.iter().map(|i| doc(*i)).collect());
        assert_eq!(status, 200, "{body}");
    }
    let (status, job) = call(
        "POST",
        &format!("{url}/v1/collections/fleet/reembed"),
        None,
        Some(&json!({"embedder": "bge-small-en-v1.5"})),
    );
    assert_eq!(status, 202, "{job}");
    let id = job["id"].as_str().unwrap().to_string();
    let (status, body) = call(
        "POST",
        &format!("{url}/v1/reembed/jobs/{id}/cancel"),
        None,
        None,
    );
    assert_eq!(status, 200, "{body}");
    let job = wait_for_end(&url, &id);
    assert_eq!(job["state"], "cancelled", "{job}");

    let c = get(&url, "/v1/collections/fleet");
    assert_eq!(c["embedder"], "all-minilm-l6-v2", "{c}");
    assert_eq!(live_documents(&url), 1_000);
    let (status, body) = search(&url, "battery of sensor unit 17", json!(["dense"]));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["degraded"], json!(false), "{body}");
    // The copy is gone from meta: another re-embedding may start, and reembed jobs list both.
    let jobs = get(&url, "/v1/reembed/jobs");
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 1, "{jobs}");
    let snapshot_jobs = get(&url, "/v1/snapshots/jobs");
    assert_eq!(snapshot_jobs["jobs"], json!([]), "{snapshot_jobs}");
    let cluster = get(&url, "/v1/cluster");
    assert!(
        !cluster.to_string().contains("fleet~"),
        "the copy is dropped: {cluster}"
    );
}
