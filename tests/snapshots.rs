//! Issue 17 through the real binary: `attest snapshot create | list | restore` against `attest dev` processes.
//! A snapshot taken while a writer keeps ingesting and a compaction runs holds every document acknowledged
//! before `create` started; a snapshot restored into another `attest dev` with a different number of shard
//! nodes answers 50 fixture queries exactly as the source (ids and order); a snapshot with a corrupted file, a
//! missing file or a truncated manifest is refused naming the file, and nothing changes, as is a manifest edited
//! into other valid JSON (shard entries swapped, a collection dropped: its checksum no longer matches) or one
//! without a checksum; restoring over an existing collection needs `--force`. Each process's log is kept in the
//! test's temp directory.

use crate::common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{call, start_with_env, value_of, Logs, Proc};
use serde_json::{json, Value};

struct DevNode {
    _proc: Proc,
    url: String,
}

/// `attest dev` with `shard_nodes` shard nodes and these extra environment variables, its data in `dir/NAME`,
/// its log in `dir/NAME.log`, and `dir/backups` admitted as a snapshot destination (`--snapshot-root`).
fn dev(dir: &Path, name: &str, shard_nodes: &str, env: &[(&str, &str)]) -> DevNode {
    let log = dir.join(format!("{name}.log"));
    eprintln!("{name} log: {}", log.display());
    let root = dir.join("backups");
    let (proc, line) = start_with_env(
        &[
            "dev",
            "--http",
            "127.0.0.1:0",
            "--grpc",
            "127.0.0.1:0",
            "--shards",
            shard_nodes,
            "--snapshot-root",
            root.to_str().unwrap(),
        ],
        Some(&dir.join(name)),
        Logs::InfoTo(&log),
        env,
    );
    DevNode {
        _proc: proc,
        url: value_of(&line, "http="),
    }
}

/// `attest ARGS --server URL` → (success, stdout, stderr).
fn attest(url: &str, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(common::attest_bin())
        .args(args)
        .args(["--server", url])
        .env("ATTEST_LOG", "error")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn attest_json(url: &str, args: &[&str]) -> Value {
    let (ok, out, err) = attest(url, args);
    assert!(ok, "attest {args:?}: {err}");
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The first `n` questions of the bundled SQuAD sample.
fn fixture_queries(n: usize) -> Vec<String> {
    include_str!("../data/squad-sample/queries.jsonl")
        .lines()
        .take(n)
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

/// Ids of the top 10 hybrid hits, in order.
fn top_ids(url: &str, collection: &str, query: &str) -> Vec<String> {
    let (s, b) = call(
        "POST",
        &format!("{url}/v1/collections/{collection}/search"),
        None,
        // The setting named, not left to the replica's recall tuning (issue 73): a tuning runs once writes stop and
        // may change the re-score depth, so an original tuned a moment before its restored copy (or after) ranks a
        // few near ties differently while both are right (CI at 66d5f3a: two hits 8th and 9th swapped).
        Some(&json!({"query": query, "k": 10, "nprobe": attest_core::limits::DEFAULT_NPROBE})),
    );
    assert_eq!(s, 200, "{b}");
    b["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["doc_id"].as_str().unwrap().to_string())
        .collect()
}

/// Each shard's last search tuning (`GET …/stats` `shards[i].tuned`; null before one), in shard order.
fn tunings(url: &str, collection: &str) -> Vec<Value> {
    common::shard_stats(url, collection)
        .iter()
        .map(|shard| shard.get("tuned").cloned().unwrap_or(Value::Null))
        .collect()
}

/// Whether the "live" tenant's document `id` (its text carries the token `id`) is searchable.
fn live_doc_present(url: &str, collection: &str, id: &str) -> bool {
    let (s, b) = call(
        "POST",
        &format!("{url}/v1/collections/{collection}/search"),
        None,
        Some(&json!({"query": token(id), "k": 3, "tenant": "live", "lanes": ["bm25"]})),
    );
    assert_eq!(s, 200, "{b}");
    b["hits"]
        .as_array()
        .unwrap()
        .iter()
        .any(|h| h["doc_id"] == id)
}

fn token(id: &str) -> String {
    format!("marker{}", id.replace('-', ""))
}

fn collections(url: &str) -> Vec<String> {
    let b = common::get_ok(&format!("{url}/v1/collections"));
    let mut names: Vec<String> = b["collections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

/// Creates collection `squad` from these JSONL lines (all accepted) and seals them into segments.
fn ingest_and_seal(url: &str, file: &Path, lines: &[&str]) {
    std::fs::write(file, lines.join("\n")).unwrap();
    let out = attest_json(
        url,
        &[
            "ingest",
            "--collection",
            "squad",
            "--create",
            "--json",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(out["accepted"], lines.len(), "{out}");
    let (s, b) = call(
        "POST",
        &format!("{url}/v1/collections/squad/maintain"),
        None,
        Some(&json!({"seal": true})),
    );
    assert_eq!(s, 200, "{b}");
}

#[test]
fn snapshots_are_consistent_under_ingest_restore_elsewhere_and_refuse_damage() {
    let tmp = common::RunDir::new();
    let dir = tmp.path();
    let dest = dir.join("backups");
    let dest_s = dest.to_str().unwrap();
    let a = dev(dir, "source", "2", &[]);

    // A corpus of 120 SQuAD paragraphs, sealed into segments, then more writes left in the growing segment.
    let corpus: Vec<&str> = include_str!("../data/squad-sample/corpus.jsonl")
        .lines()
        .take(120)
        .collect();
    ingest_and_seal(&a.url, &dir.join("first.jsonl"), &corpus[..100]);
    let file = dir.join("more.jsonl");
    std::fs::write(&file, corpus[100..].join("\n")).unwrap();
    let out = attest_json(
        &a.url,
        &[
            "ingest",
            "--collection",
            "squad",
            "--json",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(out["accepted"], 20, "{out}");

    // A writer keeps ingesting (tenant "live") through the snapshot; a compaction runs beside it.
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (url, acked, stop) = (a.url.clone(), Arc::clone(&acked), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let id = format!("live-{i}");
                let (s, b) = call(
                    "POST",
                    &format!("{url}/v1/collections/squad/documents"),
                    None,
                    Some(&json!({"documents": [{"id": id, "tenant": "live",
                        "text": format!("Entry {i} of the running log carries {}.", token(&id))}]})),
                );
                assert_eq!(s, 200, "{b}");
                acked.lock().unwrap().push(id);
                i += 1;
            }
        })
    };
    while acked.lock().unwrap().len() < 10 {
        std::thread::sleep(Duration::from_millis(20));
    }
    let compaction = {
        let url = a.url.clone();
        std::thread::spawn(move || {
            call(
                "POST",
                &format!("{url}/v1/collections/squad/maintain"),
                None,
                Some(&json!({"seal": true, "compact": true})),
            )
        })
    };
    let before: Vec<String> = acked.lock().unwrap().clone();
    let s1 = attest_json(
        &a.url,
        &[
            "snapshot",
            "create",
            "--to",
            dest_s,
            "--id",
            "under-load",
            "--json",
        ],
    );
    let (s, b) = compaction.join().unwrap();
    assert_eq!(s, 200, "compaction beside the snapshot: {b}");
    stop.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    assert_eq!(s1["id"], "under-load");
    assert_eq!(
        s1["collections"][0]["replicas"].as_array().unwrap().len(),
        2,
        "{s1}"
    );
    eprintln!(
        "snapshot under load: {} acknowledged before, {} in all",
        before.len(),
        acked.lock().unwrap().len()
    );

    // A quiet snapshot of the same collection, and the source's answers to 50 fixture queries.
    let s2 = attest_json(
        &a.url,
        &[
            "snapshot", "create", "--to", dest_s, "--id", "quiet", "--json",
        ],
    );
    // Its progress, read from the destination: every replica uploaded, manifest included.
    let progress = common::get_ok(&format!(
        "{}/v1/snapshots/quiet/progress?from={dest_s}",
        a.url
    ));
    let replicas = progress["replicas"].as_array().unwrap();
    assert_eq!(replicas.len(), 2, "{progress}");
    for (r, m) in replicas
        .iter()
        .zip(s2["collections"][0]["replicas"].as_array().unwrap())
    {
        assert_eq!(r["complete"], true, "{progress}");
        assert!(
            r["bytes"].as_u64().unwrap() > m["bytes"].as_u64().unwrap(),
            "{progress} vs {m}"
        );
    }
    let queries = fixture_queries(50);
    let expected: Vec<Vec<String>> = queries
        .iter()
        .map(|q| top_ids(&a.url, "squad", q))
        .collect();
    let listed = attest_json(&a.url, &["snapshot", "list", "--from", dest_s, "--json"]);
    let ids: Vec<&str> = listed["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["quiet", "under-load"], "{listed}");

    // Restored into another `attest dev` with one shard node instead of two.
    let b_dev = dev(dir, "target", "1", &[]);
    let restored = attest_json(
        &b_dev.url,
        &["snapshot", "restore", "--from", dest_s, "quiet", "--json"],
    );
    assert_eq!(restored["collections"][0]["name"], "squad", "{restored}");
    assert_eq!(restored["collections"][0]["replication"], 1, "{restored}");
    for (q, want) in queries.iter().zip(&expected) {
        assert_eq!(&top_ids(&b_dev.url, "squad", q), want, "query {q:?}");
    }
    assert_eq!(s2["collections"][0]["shards"], 2);

    // The snapshot taken under load, restored under another name: everything acknowledged before it began.
    attest_json(
        &b_dev.url,
        &[
            "snapshot",
            "restore",
            "--from",
            dest_s,
            "under-load",
            "--rename",
            "squad=squad_load",
            "--json",
        ],
    );
    for id in &before {
        assert!(
            live_doc_present(&b_dev.url, "squad_load", id),
            "{id} was acknowledged before the snapshot"
        );
    }

    // Over an existing collection: refused without --force, replaced with it.
    let (ok, _, err) = attest(
        &b_dev.url,
        &["snapshot", "restore", "--from", dest_s, "quiet"],
    );
    assert!(!ok && err.contains("--force"), "{err}");
    attest_json(
        &b_dev.url,
        &[
            "snapshot", "restore", "--from", dest_s, "quiet", "--force", "--json",
        ],
    );
    assert_eq!(top_ids(&b_dev.url, "squad", &queries[0]), expected[0]);

    // Damage, each refused naming the file, with nothing changed.
    let unchanged = collections(&b_dev.url);
    let quiet = dest.join("quiet");
    let segment_file = largest_segment_blob(&dest, &quiet.join("squad/shard-0/SNAPSHOT.json"));
    let relative = segment_file
        .strip_prefix(&dest)
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let original = std::fs::read(&segment_file).unwrap();
    let mut flipped = original.clone();
    flipped[original.len() / 2] ^= 0x40;
    let refused = |why: &str, names: &str| {
        let (ok, _, err) = attest(
            &b_dev.url,
            &[
                "snapshot",
                "restore",
                "--from",
                dest_s,
                "quiet",
                "--rename",
                "squad=damaged",
            ],
        );
        assert!(!ok, "{why}: restored");
        assert!(
            err.contains(names),
            "{why}: the error does not name {names}: {err}"
        );
        assert_eq!(
            collections(&b_dev.url),
            unchanged,
            "{why}: something changed"
        );
    };
    std::fs::write(&segment_file, &flipped).unwrap();
    refused("a corrupted file", &relative);
    std::fs::remove_file(&segment_file).unwrap();
    refused("a missing file", &relative);
    std::fs::write(&segment_file, &original).unwrap();
    let manifest = quiet.join("attest-snapshot.json");
    let text = std::fs::read(&manifest).unwrap();
    std::fs::write(&manifest, &text[..text.len() / 2]).unwrap();
    refused("a truncated manifest", "quiet/attest-snapshot.json");
    // Edits that keep the manifest valid JSON: its checksum no longer matches. Swapped shard entries would put
    // each shard's documents where their ids do not route (undeletable); a dropped collection would go unnoticed.
    let original_manifest: Value = serde_json::from_slice(&text).unwrap();
    let edit = |change: &dyn Fn(&mut Value)| {
        let mut edited = original_manifest.clone();
        change(&mut edited);
        std::fs::write(&manifest, serde_json::to_vec_pretty(&edited).unwrap()).unwrap();
    };
    let mismatch = "quiet/attest-snapshot.json: checksum mismatch";
    edit(&|m| {
        m["collections"][0]["replicas"]
            .as_array_mut()
            .unwrap()
            .swap(0, 1)
    });
    refused("swapped shard entries", mismatch);
    let listed = attest_json(&a.url, &["snapshot", "list", "--from", dest_s, "--json"]);
    let problem = listed["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "quiet")
        .and_then(|s| s["problem"].as_str())
        .unwrap_or_default();
    assert!(problem.contains(mismatch), "{listed}");
    edit(&|m| m["collections"].as_array_mut().unwrap().clear());
    refused("a dropped collection", mismatch);
    edit(&|m| {
        m.as_object_mut().unwrap().remove("checksum");
    });
    refused("a manifest without a checksum", "has no checksum");
    // The untouched manifest, pretty-printed as written or not, still restores.
    std::fs::write(&manifest, serde_json::to_vec(&original_manifest).unwrap()).unwrap();
    attest_json(
        &b_dev.url,
        &[
            "snapshot",
            "restore",
            "--from",
            dest_s,
            "quiet",
            "--rename",
            "squad=intact",
            "--json",
        ],
    );
    assert_eq!(top_ids(&b_dev.url, "intact", &queries[0]), expected[0]);
    std::fs::write(&manifest, &text).unwrap();
    // Retention keeps the newest two complete snapshots; delete removes one. (Without --json: the progress bars
    // path, then a line per shard.)
    let (ok, out, err) = attest(
        &a.url,
        &[
            "snapshot", "create", "--to", dest_s, "--id", "latest", "--keep", "2",
        ],
    );
    assert!(ok, "{err}");
    assert!(
        out.contains("latest") && out.contains("squad/shard-1"),
        "{out}"
    );
    let ids = |url: &str| -> Vec<String> {
        attest_json(url, &["snapshot", "list", "--from", dest_s, "--json"])["snapshots"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids(&a.url), ["latest", "quiet"]);
    assert!(
        !dest.join("under-load").exists(),
        "a pruned snapshot left files"
    );
    let (ok, _, err) = attest(&a.url, &["snapshot", "delete", "--from", dest_s, "quiet"]);
    assert!(ok, "{err}");
    assert_eq!(ids(&a.url), ["latest"]);
    let (ok, _, err) = attest(&a.url, &["snapshot", "delete", "--from", dest_s, "quiet"]);
    assert!(!ok && err.contains("no snapshot `quiet`"), "{err}");
    // Nothing staged was left behind on the target's shard node.
    let staged = dir.join("target").join("shard-node-0/restores/damaged");
    assert!(
        !staged.exists() || std::fs::read_dir(&staged).unwrap().next().is_none(),
        "a refused restore left staged files in {}",
        staged.display()
    );
}

/// The largest file under `dir` (a segment's vectors or index).
/// The content-addressed file (`blobs/…`) of the largest sealed segment file a replica manifest names.
fn largest_segment_blob(dest: &Path, replica_manifest: &Path) -> std::path::PathBuf {
    let m: Value = serde_json::from_slice(&std::fs::read(replica_manifest).unwrap()).unwrap();
    let file = m["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["path"].as_str().unwrap().starts_with("segments/"))
        .max_by_key(|f| f["bytes"].as_u64().unwrap())
        .expect("a sealed segment file");
    let sha = file["sha256"].as_str().unwrap();
    dest.join("blobs").join(&sha[..2]).join(sha)
}

/// A moto S3 server on 127.0.0.1 (scripts/s3-test-server.sh makes its environment on first use), killed on drop.
struct Moto {
    child: std::process::Child,
    endpoint: String,
    log: std::path::PathBuf,
}

impl Moto {
    fn start(dir: &Path) -> Moto {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = dir.join("moto.log");
        eprintln!("moto log: {}", log.display());
        let child = std::process::Command::new("bash")
            .arg(common::repo_root().join("scripts/s3-test-server.sh"))
            .arg(port.to_string())
            .stdin(std::process::Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(dir.join("moto.err")).unwrap())
            .spawn()
            .unwrap();
        let mut moto = Moto {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            log,
        };
        // The first run ever makes the virtual environment from PyPI.
        let deadline = std::time::Instant::now() + Duration::from_secs(300);
        loop {
            if let Some(status) = moto.child.try_wait().unwrap() {
                panic!("moto exited ({status}); see {}", moto.log.display());
            }
            if common::http()
                .get(&moto.endpoint)
                .send()
                .is_ok_and(|r| r.status().is_success())
            {
                return moto;
            }
            assert!(std::time::Instant::now() < deadline, "moto did not answer");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn snapshots_go_to_s3_compatible_storage_and_back() {
    let tmp = common::RunDir::new();
    let dir = tmp.path();
    let moto = Moto::start(dir);
    let r = common::http()
        .put(format!("{}/attest-backups", moto.endpoint))
        .send()
        .unwrap();
    assert!(
        r.status().is_success(),
        "creating the bucket: {}",
        r.status()
    );
    // The nodes take their credentials and endpoint from the environment, as in a pod.
    let env = [
        ("AWS_ENDPOINT_URL", moto.endpoint.as_str()),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_REGION", "us-east-1"),
    ];
    let node = dev(dir, "dev", "2", &env);
    let url = node.url.clone();

    let corpus: Vec<&str> = include_str!("../data/squad-sample/corpus.jsonl")
        .lines()
        .take(40)
        .collect();
    ingest_and_seal(&url, &dir.join("corpus.jsonl"), &corpus);

    // Every shard tuned for the collection's recall target (in the background, once its writes stopped) before the
    // snapshot, so that the snapshot carries the tuning and the restored copy serves with it from the start.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let tuned = loop {
        let now = tunings(&url, "squad");
        if now.iter().all(|t| !t.is_null()) {
            break now;
        }
        assert!(std::time::Instant::now() < deadline, "untuned: {now:?}");
        std::thread::sleep(Duration::from_millis(100));
    };

    let dest = "s3://attest-backups/cluster-a";
    let made = attest_json(
        &url,
        &[
            "snapshot", "create", "--to", dest, "--id", "nightly", "--json",
        ],
    );
    assert!(
        made["collections"][0]["replicas"][0]["bytes"]
            .as_u64()
            .unwrap()
            > 0,
        "{made}"
    );
    let listed = attest_json(&url, &["snapshot", "list", "--from", dest, "--json"]);
    assert_eq!(listed["snapshots"][0]["id"], "nightly", "{listed}");
    let progress = common::get_ok(&format!("{url}/v1/snapshots/nightly/progress?from={dest}"));
    assert_eq!(progress["replicas"][0]["complete"], true, "{progress}");
    // The objects are in the bucket, under the prefix.
    let objects = common::http()
        .get(format!(
            "{}/attest-backups?list-type=2&prefix=cluster-a/nightly/",
            moto.endpoint
        ))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(
        objects.contains("cluster-a/nightly/attest-snapshot.json"),
        "{objects}"
    );
    assert!(
        objects.contains("cluster-a/nightly/squad/shard-0/SNAPSHOT.json"),
        "{objects}"
    );
    // The replicas' files, content-addressed beside the snapshots (format 2).
    let blobs = common::http()
        .get(format!(
            "{}/attest-backups?list-type=2&prefix=cluster-a/blobs/",
            moto.endpoint
        ))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(blobs.contains("<Key>cluster-a/blobs/"), "{blobs}");

    attest_json(
        &url,
        &[
            "snapshot",
            "restore",
            "--from",
            dest,
            "nightly",
            "--rename",
            "squad=squad_copy",
            "--json",
        ],
    );
    assert_eq!(
        tunings(&url, "squad_copy"),
        tuned,
        "the copy serves with its source's tunings"
    );
    let queries = fixture_queries(10);
    for q in &queries {
        assert_eq!(
            top_ids(&url, "squad_copy", q),
            top_ids(&url, "squad", q),
            "query {q:?}"
        );
    }
}
