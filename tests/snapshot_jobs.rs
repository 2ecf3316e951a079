//! Issue 44 item 4 through the real binaries: snapshots and restores are jobs recorded in meta. A cluster of
//! processes — meta, one shard node, two routers — where router A starts jobs and router B reads them:
//! - a snapshot job is followed from the other router to its manifest; a second snapshot of unchanged data
//!   re-uses the files the destination holds (content-addressed) and says how many bytes it skipped; deleting
//!   the first keeps what the second names (it restores) and collects what only the first named;
//! - a job is cancelled from router B while its shard's upload hangs (the shard process SIGSTOPped): it ends
//!   `cancelled` and leaves no snapshot;
//! - a restore job is followed to its collections, per-replica bytes included;
//! - a job whose router is SIGKILLed mid-transfer is recorded `failed`, naming that router, by router B.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{call, post, start_role, value_of, Proc};
use serde_json::{json, Value};

fn signal(proc: &Proc, sig: i32) {
    unsafe {
        libc::kill(proc.0.id() as i32, sig);
    }
}

fn job(router: &str, id: &str) -> Value {
    common::get_ok(&format!("{router}/v1/snapshots/jobs/{id}"))
}

/// Polls the job on `router` until `done` accepts it (at most `limit`).
fn wait_job(router: &str, id: &str, limit: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let j = job(router, id);
        if done(&j) {
            return j;
        }
        assert!(started.elapsed() < limit, "job {id} did not get there: {j}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn finished(j: &Value) -> bool {
    j["state"] != "running"
}

fn blobs(dest: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for dir in std::fs::read_dir(dest.join("blobs"))
        .into_iter()
        .flatten()
        .flatten()
    {
        for f in std::fs::read_dir(dir.path()).unwrap().flatten() {
            out.push(f.file_name().to_string_lossy().into_owned());
        }
    }
    out.sort();
    out
}

/// Field notes `ids` into collection `notes`, then sealed into a segment.
fn add_and_seal(router: &str, ids: std::ops::Range<u32>, text: &str) {
    let docs: Vec<_> = ids
        .map(|i| json!({"id": format!("n{i}"), "text": format!("Field note {i}: {text}.")}))
        .collect();
    let (s, body) = post(
        &format!("{router}/v1/collections/notes/documents"),
        &json!({ "documents": docs }),
    );
    assert_eq!(s, 200, "{body}");
    let (s, body) = post(
        &format!("{router}/v1/collections/notes/maintain"),
        &json!({"seal": true}),
    );
    assert_eq!(s, 200, "{body}");
}

/// The content hashes the replica manifests of snapshot `id` name (every collection's), sorted, once each.
fn named_by(dest: &Path, id: &str) -> Vec<String> {
    let mut named = Vec::new();
    for collection in std::fs::read_dir(dest.join(id)).unwrap().flatten() {
        let path = collection.path().join("shard-0/SNAPSHOT.json");
        if !path.exists() {
            continue;
        }
        let manifest: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        named.extend(
            manifest["files"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["sha256"].as_str().unwrap().to_string()),
        );
    }
    named.sort();
    named.dedup();
    named
}

fn role(d: &Path, name: &str, args: &[&str]) -> (Proc, String) {
    let mut all = vec!["serve", "--insecure"];
    all.extend_from_slice(args);
    start_role(&all, d, name)
}

#[test]
fn snapshot_jobs_outlive_their_router_skip_what_the_destination_holds_and_cancel() {
    let dir = common::RunDir::new();
    let d = dir.path();
    let dest = d.join("backups");
    let dest_s = dest.to_str().unwrap();
    let (_meta, line) = role(
        d,
        "meta",
        &["--role", "meta", "--meta-id", "1", "--grpc", "127.0.0.1:0"],
    );
    let meta = format!("http://{}", value_of(&line, "grpc="));
    let (shard, _) = role(
        d,
        "shard",
        &[
            "--role",
            "shard",
            "--meta",
            &meta,
            "--grpc",
            "127.0.0.1:0",
            "--snapshot-root",
            dest_s,
        ],
    );
    let router = |name: &str| {
        let (p, line) = role(
            d,
            name,
            &[
                "--role",
                "router",
                "--meta",
                &meta,
                "--http",
                "127.0.0.1:0",
                "--grpc",
                "127.0.0.1:0",
                "--snapshot-root",
                dest_s,
            ],
        );
        (p, value_of(&line, "http="))
    };
    let (mut router_a, a) = router("router-a");
    let (_router_b, b) = router("router-b");

    let (s, body) = post(
        &format!("{a}/v1/collections"),
        &json!({"name": "notes", "shards": 1, "replication": 1}),
    );
    assert_eq!(s, 201, "{body}");
    add_and_seal(&a, 0..40, "the heron waded the marsh at dawn");

    // A snapshot job, started on A and followed on B to its manifest.
    let (s, started) = post(
        &format!("{a}/v1/snapshots"),
        &json!({"destination": dest_s, "id": "s1"}),
    );
    assert_eq!(s, 202, "{started}");
    assert_eq!(started["state"], "running", "{started}");
    let id = started["id"].as_str().unwrap().to_string();
    let s1 = wait_job(&b, &id, Duration::from_secs(60), finished);
    assert_eq!(s1["state"], "succeeded", "{s1}");
    let total = s1["manifest"]["collections"][0]["replicas"][0]["bytes"]
        .as_u64()
        .unwrap();
    assert!(total > 0, "{s1}");
    assert_eq!(s1["transfers"][0]["state"], "done", "{s1}");
    assert_eq!(
        s1["transfers"][0]["bytes"].as_u64().unwrap()
            + s1["transfers"][0]["skipped_bytes"].as_u64().unwrap(),
        total,
        "{s1}"
    );
    let after_s1 = blobs(&dest);
    assert!(!after_s1.is_empty(), "content-addressed files under blobs/");

    // A few more documents, then a second snapshot: the files the destination already holds (the first
    // segment, unchanged table files) are not sent again.
    add_and_seal(&a, 40..44, "an egret joined the heron");
    let (s, started) = post(
        &format!("{a}/v1/snapshots"),
        &json!({"destination": dest_s, "id": "s2"}),
    );
    assert_eq!(s, 202, "{started}");
    let s2 = wait_job(
        &b,
        started["id"].as_str().unwrap(),
        Duration::from_secs(60),
        finished,
    );
    assert_eq!(s2["state"], "succeeded", "{s2}");
    let replica = &s2["manifest"]["collections"][0]["replicas"][0];
    let (bytes, skipped) = (
        replica["bytes"].as_u64().unwrap(),
        replica["skipped_bytes"].as_u64().unwrap(),
    );
    assert!(
        skipped * 2 > bytes,
        "most of a little-changed replica is skipped: {replica}"
    );

    // Deleting s1 keeps every file s2 names (s2 restores below) and collects those only s1 named.
    let (s, body) = call(
        "DELETE",
        &format!("{b}/v1/snapshots/s1?from={dest_s}"),
        None,
        None,
    );
    assert_eq!(s, 200, "{body}");
    let named = named_by(&dest, "s2");
    assert!(
        after_s1.iter().any(|b| !named.contains(b)),
        "s1 had files of its own"
    );
    assert_eq!(blobs(&dest), named, "exactly the files s2 names remain");

    // A restore job: staged, then created; per-replica bytes reported.
    let (s, started) = post(
        &format!("{b}/v1/snapshots/restore"),
        &json!({"source": dest_s, "id": "s2", "rename": {"notes": "notes-copy"}}),
    );
    assert_eq!(s, 202, "{started}");
    let restored = wait_job(
        &a,
        started["id"].as_str().unwrap(),
        Duration::from_secs(60),
        finished,
    );
    assert_eq!(restored["state"], "succeeded", "{restored}");
    assert_eq!(restored["restored"][0]["name"], "notes-copy", "{restored}");
    assert_eq!(restored["transfers"][0]["state"], "done", "{restored}");
    assert_eq!(
        restored["transfers"][0]["bytes"].as_u64().unwrap(),
        bytes,
        "{restored}"
    );
    let (s, found) = post(
        &format!("{a}/v1/collections/notes-copy/search"),
        &json!({"query": "heron marsh", "k": 3}),
    );
    assert_eq!(s, 200, "{found}");
    assert_eq!(found["hits"].as_array().unwrap().len(), 3, "{found}");

    // Retention: a snapshot with `keep: 1` after another write deletes s2 and collects what only s2 named.
    add_and_seal(&a, 44..46, "a bittern boomed");
    let (s, started) = post(
        &format!("{a}/v1/snapshots"),
        &json!({"destination": dest_s, "id": "s2b", "keep": 1}),
    );
    assert_eq!(s, 202, "{started}");
    let s2b = wait_job(
        &b,
        started["id"].as_str().unwrap(),
        Duration::from_secs(60),
        finished,
    );
    assert_eq!(s2b["state"], "succeeded", "{s2b}");
    assert!(!dest.join("s2").exists(), "s2 pruned");
    assert_eq!(
        blobs(&dest),
        named_by(&dest, "s2b"),
        "exactly the files s2b names remain"
    );

    // Cancelled from B while the shard's upload hangs: the job ends cancelled and leaves no snapshot.
    signal(&shard, libc::SIGSTOP);
    let (s, started) = post(
        &format!("{a}/v1/snapshots"),
        &json!({"destination": dest_s, "id": "s3"}),
    );
    assert_eq!(s, 202, "{started}");
    let id3 = started["id"].as_str().unwrap().to_string();
    let (s, asked) = post(&format!("{b}/v1/snapshots/jobs/{id3}/cancel"), &json!({}));
    assert_eq!(s, 200, "{asked}");
    let s3 = wait_job(&b, &id3, Duration::from_secs(30), finished);
    signal(&shard, libc::SIGCONT);
    assert_eq!(s3["state"], "cancelled", "{s3}");
    // An ended job's transfers ended with it (issue 69): none still reads `running`.
    assert_eq!(s3["transfers"][0]["state"], "cancelled", "{s3}");
    assert!(!dest.join("s3").join("attest-snapshot.json").exists());

    // The router running a job dies mid-transfer: the next reader records it failed, naming that router.
    signal(&shard, libc::SIGSTOP);
    let (s, started) = post(
        &format!("{a}/v1/snapshots"),
        &json!({"destination": dest_s, "id": "s4"}),
    );
    assert_eq!(s, 202, "{started}");
    let owner = started["router"].as_str().unwrap().to_string();
    signal(&router_a, libc::SIGKILL);
    let _ = router_a.0.wait();
    let id4 = started["id"].as_str().unwrap().to_string();
    let s4 = wait_job(&b, &id4, Duration::from_secs(90), finished);
    signal(&shard, libc::SIGCONT);
    assert_eq!(s4["state"], "failed", "{s4}");
    assert!(
        s4["transfers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["state"] != "running" && t["state"] != "pending"),
        "{s4}"
    );
    let error = s4["error"].as_str().unwrap();
    assert!(
        error.contains(&owner) && error.contains("stopped"),
        "{error}"
    );
    let all = common::get_ok(&format!("{b}/v1/snapshots/jobs"));
    let states: Vec<&str> = all["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["state"].as_str().unwrap())
        .collect();
    assert_eq!(
        states,
        [
            "succeeded",
            "succeeded",
            "succeeded",
            "succeeded",
            "cancelled",
            "failed"
        ],
        "{all}"
    );
}
