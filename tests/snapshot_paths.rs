//! Issue 69 through the real binary: snapshot destinations are configured, not requested. Against `attest dev`
//! (its default root `DATA_DIR/snapshots`), a delete or a retention pointed at a plain folder, the node's data
//! directory, a `../` path or a symbolic link out of the root is refused with a 4xx naming the rule, and nothing
//! is deleted: the folder, the shard data and every document are still there. A destination outside the roots
//! is refused (a restore from `/etc` too: 400, not 503); a snapshot under the root still creates, lists,
//! restores and deletes; `snapshot list` shows a snapshot with a missing or truncated file as damaged; the
//! progress of a snapshot that does not exist is 404.

use crate::common;

use std::path::{Path, PathBuf};

use common::{call, start_with_env, value_of, Logs, Proc, RunDir};
use serde_json::{json, Value};

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

/// Live documents of `collection`, over its shards.
fn documents(url: &str, collection: &str) -> u64 {
    common::shard_stats(url, collection)
        .iter()
        .map(|s| s["live_documents"].as_u64().unwrap())
        .sum()
}

/// Every file under `dir` (following no link), relative, sorted: what must survive a refused delete.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path().strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

fn snapshot_ids(url: &str, from: &str) -> Vec<(String, Option<String>)> {
    attest_json(url, &["snapshot", "list", "--from", from, "--json"])["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap().to_string(),
                s["problem"].as_str().map(str::to_string),
            )
        })
        .collect()
}

fn a_blob(root: &Path) -> PathBuf {
    let blobs = root.join("blobs");
    let mut found: Vec<PathBuf> = files_under(&blobs)
        .into_iter()
        .map(|f| blobs.join(f))
        .collect();
    found.sort_by_key(|f| std::fs::metadata(f).unwrap().len());
    found.pop().expect("a blob")
}

#[test]
fn snapshot_deletes_and_destinations_stay_inside_the_configured_roots() {
    let run = RunDir::new();
    let dir = run.path();
    let data = dir.join("dev");
    let log = dir.join("dev.log");
    eprintln!("dev log: {}", log.display());
    let (_dev, line): (Proc, String) = start_with_env(
        &["dev", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"],
        Some(&data),
        Logs::InfoTo(&log),
        &[],
    );
    let url = value_of(&line, "http=");
    let root = data.join("snapshots");
    let root_s = root.to_str().unwrap().to_string();
    let data_s = data.to_str().unwrap().to_string();

    let corpus: Vec<&str> = include_str!("../data/squad-sample/corpus.jsonl")
        .lines()
        .take(40)
        .collect();
    let file = dir.join("notes.jsonl");
    std::fs::write(&file, corpus.join("\n")).unwrap();
    let out = attest_json(
        &url,
        &[
            "ingest",
            "--collection",
            "notes",
            "--create",
            "--json",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(out["accepted"], corpus.len(), "{out}");
    let count = documents(&url, "notes");
    assert_eq!(count, corpus.len() as u64);

    // Out of the box, `attest dev` admits its own snapshots folder: a snapshot there is taken.
    let good = attest_json(
        &url,
        &[
            "snapshot", "create", "--to", &root_s, "--id", "good", "--json",
        ],
    );
    assert_eq!(good["id"], "good", "{good}");
    assert_eq!(snapshot_ids(&url, &root_s), [("good".to_string(), None)]);

    // What the refused requests aim at: a plain folder in the root, links in the root to the data directory,
    // to a shard node's directory and to a folder outside, and that folder.
    std::fs::create_dir_all(root.join("plain")).unwrap();
    std::fs::write(root.join("plain/keep.txt"), "mine").unwrap();
    let outside = dir.join("outside");
    std::fs::create_dir_all(outside.join("victim")).unwrap();
    std::fs::write(outside.join("victim/keep.txt"), "mine").unwrap();
    std::os::unix::fs::symlink(&data, root.join("to-data")).unwrap();
    std::os::unix::fs::symlink(data.join("shard-node-0"), root.join("shard-node-0")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("to-outside")).unwrap();
    let replicas: Vec<PathBuf> = ["shard-node-0", "shard-node-1"]
        .iter()
        .map(|node| data.join(node).join("collections/notes"))
        .filter(|d| d.is_dir())
        .collect();
    assert!(
        !replicas.is_empty(),
        "no replica of `notes` under {}",
        data.display()
    );

    let q = |s: &str| s.replace('%', "%25").replace('&', "%26");
    let refused = |method: &str, path: &str, body: Option<Value>, rule: &str, status: u16| {
        let (s, b) = call(method, &format!("{url}{path}"), None, body.as_ref());
        assert_eq!(s, status, "{method} {path} {body:?}: {b}");
        let message = b.to_string();
        assert!(
            message.contains(rule),
            "{method} {path}: the answer does not name `{rule}`: {message}"
        );
    };
    let delete = |id: &str, from: &str, rule: &str, status: u16| {
        refused(
            "DELETE",
            &format!("/v1/snapshots/{id}?from={}", q(from)),
            None,
            rule,
            status,
        )
    };
    // Delete: an id naming a plain folder, the data directory (directly, and through the root), `..`, links.
    delete("plain", &root_s, "not a snapshot", 404);
    delete(
        "shard-node-0",
        &data_s,
        "contains the node's data directory",
        400,
    );
    delete("shard-node-0", &root_s, "symbolic link", 400);
    delete(
        "collections",
        &format!("{data_s}/shard-node-0"),
        "inside the node's data directory",
        400,
    );
    delete(
        "shard-node-0",
        &format!("{root_s}/to-data"),
        "contains the node's data directory",
        400,
    );
    delete("victim", &format!("{root_s}/../../outside"), "`..`", 400);
    delete(
        "victim",
        &format!("{root_s}/to-outside"),
        "a symbolic link in",
        400,
    );
    delete(
        "victim",
        outside.to_str().unwrap(),
        "outside the allowed snapshot roots",
        400,
    );
    delete("..%2Fshard-node-0", &root_s, "`id`", 400);
    delete("good", "/etc", "outside the allowed snapshot roots", 400);
    // Retention (a create with `keep`) pointed at the same places.
    let create = |destination: &str, rule: &str| {
        refused(
            "POST",
            "/v1/snapshots",
            Some(json!({"destination": destination, "id": "pruner", "keep": 1})),
            rule,
            400,
        )
    };
    create(&data_s, "contains the node's data directory");
    create(
        &format!("{root_s}/to-data"),
        "contains the node's data directory",
    );
    create(&format!("{root_s}/../.."), "`..`");
    create(&format!("{root_s}/to-outside"), "a symbolic link in");
    create(
        outside.to_str().unwrap(),
        "outside the allowed snapshot roots",
    );
    // A restore from outside the roots is the request's fault: 400, not 503. So is a listing.
    refused(
        "POST",
        "/v1/snapshots/restore",
        Some(json!({"source": "/etc", "id": "passwd"})),
        "outside the allowed snapshot roots",
        400,
    );
    refused(
        "GET",
        &format!("/v1/snapshots?from={}", q(outside.to_str().unwrap())),
        None,
        "outside the allowed snapshot roots",
        400,
    );
    refused(
        "GET",
        &format!("/v1/snapshots/nonexistent/progress?from={}", q(&root_s)),
        None,
        "no snapshot `nonexistent`",
        404,
    );
    let (ok, _, err) = attest(
        &url,
        &["snapshot", "delete", "--from", &data_s, "shard-node-0"],
    );
    assert!(!ok && err.contains("data directory"), "{err}");

    // Retention under the root deletes the older snapshot and nothing else.
    let newer = attest_json(
        &url,
        &[
            "snapshot", "create", "--to", &root_s, "--id", "newer", "--keep", "1", "--json",
        ],
    );
    assert_eq!(newer["id"], "newer", "{newer}");
    assert!(!root.join("good").exists(), "retention kept `good`");

    // Nothing refused was touched: the folders, the shard's files, every document.
    assert!(root.join("plain/keep.txt").is_file());
    assert!(outside.join("victim/keep.txt").is_file());
    assert!(std::fs::symlink_metadata(root.join("shard-node-0")).is_ok());
    for replica in &replicas {
        assert!(replica.is_dir(), "{} is gone", replica.display());
    }
    assert_eq!(documents(&url, "notes"), count);
    common::get_ok(&format!("{url}/readyz"));

    // A missing or truncated file makes the listing say the snapshot is damaged; whole again, it is not.
    let blob = a_blob(&root);
    let original = std::fs::read(&blob).unwrap();
    std::fs::write(&blob, &original[..original.len() / 2]).unwrap();
    let listed = snapshot_ids(&url, &root_s);
    assert!(
        listed[0]
            .1
            .as_deref()
            .is_some_and(|p| p.contains("damaged")),
        "{listed:?}"
    );
    let (ok, out, _) = attest(&url, &["snapshot", "list", "--from", &root_s]);
    assert!(ok && out.contains("newer  DAMAGED"), "{out}");
    std::fs::remove_file(&blob).unwrap();
    assert!(snapshot_ids(&url, &root_s)[0]
        .1
        .as_deref()
        .is_some_and(|p| p.contains("missing")));
    std::fs::write(&blob, &original).unwrap();
    assert_eq!(snapshot_ids(&url, &root_s), [("newer".to_string(), None)]);

    // The snapshot under the root restores and deletes.
    attest_json(
        &url,
        &[
            "snapshot",
            "restore",
            "--from",
            &root_s,
            "newer",
            "--rename",
            "notes=notes-copy",
            "--json",
        ],
    );
    assert_eq!(documents(&url, "notes-copy"), count);
    let (ok, _, err) = attest(&url, &["snapshot", "delete", "--from", &root_s, "newer"]);
    assert!(ok, "{err}");
    assert!(snapshot_ids(&url, &root_s).is_empty());
    assert!(!root.join("newer").exists());
    assert!(root.join("plain/keep.txt").is_file());
    assert_eq!(documents(&url, "notes"), count);
}
