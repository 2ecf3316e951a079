//! Issue 44 item 5 (its fixtures): what a release left on disk is opened and served by this build. Each
//! `tests/fixtures/format-N` was written by `scripts/make-format-fixture.sh N` with the build of that release
//! (`WRITTEN_BY` names it): an `attest dev` data directory — meta's RocksDB, two shard engines, each with its
//! RocksDB log, one sealed segment and a growing row or a tombstone — and a cluster snapshot of it. A copy of the
//! directory must start, find sealed and growing documents, not find the deleted one, and take new writes; the
//! snapshot must restore into an empty `attest dev`. A change of layout that strands existing data fails here.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{call, start_dev, Dev};
use serde_json::{json, Value};

/// Every on-disk version this build must read (the current one and the one before it).
const READABLE: &[u32] = &[1];

fn fixture(version: u32) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("fixtures/format-{version}"))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn ready(dev: &Dev) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while common::get_text(&format!("{}/readyz", dev.url)).0 != 200 {
        assert!(Instant::now() < deadline, "attest dev never became ready");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The ids of the BM25 hits for `query` in `notes`.
fn found(dev: &Dev, query: &str) -> Vec<String> {
    let (s, b) = call(
        "POST",
        &format!("{}/v1/collections/notes/search", dev.url),
        None,
        Some(&json!({"query": query, "k": 5, "lanes": ["bm25"]})),
    );
    assert_eq!(s, 200, "{b}");
    b["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["doc_id"].as_str().unwrap().to_string())
        .collect()
}

/// (id, title) of the fixture's passages: the first 40 of data/squad-sample; the first was deleted.
fn passages() -> Vec<(String, String)> {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/squad-sample/corpus.jsonl");
    std::fs::read_to_string(corpus)
        .unwrap()
        .lines()
        .take(40)
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (
                v["id"].as_str().unwrap().into(),
                v["text"].as_str().unwrap().into(),
            )
        })
        .collect()
}

/// What the fixture holds, as served by `dev`.
fn serves_the_fixture(dev: &Dev, version: u32) {
    let passages = passages();
    let (deleted, _) = &passages[0];
    assert!(
        found(dev, "zephyr lantern sings at dawn")
            .first()
            .map(String::as_str)
            == Some("growing-1"),
        "format {version}: the growing document"
    );
    // A sealed passage, by a distinctive stretch of its own text.
    let (sealed, text) = &passages[7];
    let words: Vec<&str> = text.split_whitespace().take(12).collect();
    assert!(
        found(dev, &words.join(" ")).contains(sealed),
        "format {version}: sealed passage {sealed}"
    );
    let (_, deleted_text) = &passages[0];
    let words: Vec<&str> = deleted_text.split_whitespace().take(12).collect();
    assert!(
        !found(dev, &words.join(" ")).contains(deleted),
        "format {version}: the deleted passage came back"
    );
}

#[test]
fn data_directories_of_earlier_releases_open_serve_and_take_writes() {
    for &version in READABLE {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        copy_dir(&fixture(version).join("data"), &data);
        let dev = start_dev(&data);
        ready(&dev);
        serves_the_fixture(&dev, version);
        let (s, b) = call(
            "POST",
            &format!("{}/v1/collections/notes/documents", dev.url),
            None,
            Some(
                &json!({"documents": [{"id": "after", "title": "After the upgrade",
                "text": "Written by this build into the old directory: quartz heron."}]}),
            ),
        );
        assert_eq!(s, 200, "format {version}: {b}");
        assert_eq!(
            found(&dev, "quartz heron").first().map(String::as_str),
            Some("after")
        );
    }
}

#[test]
fn snapshots_of_earlier_releases_restore() {
    for &version in READABLE {
        let dir = tempfile::tempdir().unwrap();
        // Under `attest dev`'s default snapshot root, `DATA_DIR/snapshots` (the one it admits).
        let snapshots = dir.path().join("data").join("snapshots");
        copy_dir(&fixture(version).join("snapshots"), &snapshots);
        let dev = start_dev(&dir.path().join("data"));
        ready(&dev);
        let (s, b) = call(
            "POST",
            &format!("{}/v1/snapshots/restore", dev.url),
            None,
            Some(
                &json!({"source": snapshots.display().to_string(), "id": format!("format-{version}")}),
            ),
        );
        assert_eq!(s, 202, "format {version}: {b}");
        let job = format!(
            "{}/v1/snapshots/jobs/{}",
            dev.url,
            b["id"].as_str().unwrap()
        );
        let started = std::time::Instant::now();
        let done = loop {
            let (_, j) = call("GET", &job, None, None);
            if j["state"] != "running" || started.elapsed() > std::time::Duration::from_secs(60) {
                break j;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        };
        assert_eq!(done["state"], "succeeded", "format {version}: {done}");
        serves_the_fixture(&dev, version);
    }
}

/// Sets the `format` of the JSON file at `path` to `version`.
fn mark(path: &Path, version: u32) {
    let mut v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    v["format"] = json!(version);
    std::fs::write(path, serde_json::to_vec(&v).unwrap()).unwrap();
}

#[test]
fn layouts_of_a_newer_release_are_refused_naming_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    copy_dir(&fixture(1).join("data"), &data);
    // A shard's segment manifest as a newer release would leave it: the process refuses to start (rebuilding
    // the segments from the log would overwrite that release's data with this build's layout).
    mark(
        &data.join("shard-node-0/collections/notes/shard-1/MANIFEST.json"),
        99,
    );
    let out = std::process::Command::new(common::attest_bin())
        .args([
            "dev",
            "--http",
            "127.0.0.1:0",
            "--grpc",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(&data)
        .env("ATTEST_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "attest dev started on a newer layout"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("segment manifest format version 99, but this build reads version 1"),
        "{stderr}"
    );

    // A cluster snapshot of a newer release: restore refuses it, naming both versions.
    // Under the fresh dev's default snapshot root (`DATA_DIR/snapshots`): a restore source must be under a root.
    let snapshots = dir.path().join("fresh").join("snapshots");
    copy_dir(&fixture(1).join("snapshots"), &snapshots);
    mark(&snapshots.join("format-1/attest-snapshot.json"), 99);
    let dev = start_dev(&dir.path().join("fresh"));
    ready(&dev);
    let (s, b) = call(
        "POST",
        &format!("{}/v1/snapshots/restore", dev.url),
        None,
        Some(&json!({"source": snapshots.display().to_string(), "id": "format-1"})),
    );
    assert_ne!(s, 200);
    let message = b["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message
            .contains("cluster snapshot format version 99, but this build reads versions 1 and 2"),
        "{b}"
    );
}
