//! A full disk is a state, not a crash (SPEC "Bad input": writes refused with an error naming the disk, reads
//! served, no crash, writes resume when space returns). `attest dev` runs on a small tmpfs this test mounts;
//! a filler file takes the free space below the configured reserve (`disk.min_free_bytes`): writes answer 507
//! `DISK_FULL` naming the data directory, searches are answered, `/readyz` and `disk_full` say so, every
//! acknowledged document is still there, and once the filler is deleted writes are accepted again by the same
//! process. With no reserve at all (`disk.min_free_bytes: 0`) RocksDB itself meets the full filesystem: writes
//! still answer `DISK_FULL`, a collection made then waits for room instead of opening its log, and the process
//! never aborts (Debian's RocksDB asserts on its info log's second failed write; see
//! `attest_core::rocksdb_files::harden`). Skipped, with a message saying why, only where a tmpfs cannot be
//! mounted (not root, no `CAP_SYS_ADMIN`).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{get_text, post, start_with_env, value_of, Logs, RunDir};
use serde_json::{json, Value};

/// The tmpfs the test mounts, and the reserve `attest dev` keeps on it.
const TMPFS_MIB: u64 = 256;
const RESERVE_MIB: u64 = 64;

/// A tmpfs mounted at a directory, unmounted when dropped (after what runs on it: declare it first).
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `mib` MiB at `dir`; `None` where mounting is not possible here.
    fn mount(dir: &Path, mib: u64) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs(dir.to_path_buf())),
            Ok(o) => {
                eprintln!(
                    "SKIPPED disk_full: cannot mount a tmpfs at {} (needs root or CAP_SYS_ADMIN): {}",
                    dir.display(),
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("SKIPPED disk_full: cannot run mount: {e}");
                None
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazy: a process still holding a file there must not leave the mount behind.
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Free bytes of the filesystem holding `dir`.
/// `attest dev` with one shard on `data`, logging to `log`, with `env` (the disk settings) on top.
fn start_dev(data: &Path, log: &Path, env: &[(&str, &str)]) -> (common::Proc, String) {
    start_with_env(
        &[
            "dev",
            "--http",
            "127.0.0.1:0",
            "--grpc",
            "127.0.0.1:0",
            "--shards",
            "1",
        ],
        Some(data),
        Logs::InfoTo(log),
        env,
    )
}

/// Collection `c` with documents d0..d19, acknowledged.
fn collection_of_twenty(url: &str) {
    let (s, b) = post(
        &format!("{url}/v1/collections"),
        &json!({"name": "c", "shards": 1}),
    );
    assert_eq!(s, 201, "{b}");
    let (s, b) = post(&format!("{url}/v1/collections/c/documents"), &docs(0, 20));
    assert_eq!((s, b["accepted"].as_u64()), (200, Some(20)), "{b}");
}

fn free_bytes(dir: &Path) -> u64 {
    attest_core::disk::space_of(dir).unwrap().free
}

/// Allocates a file of `len` bytes at `path` (really allocated: a sparse file would not take the space).
fn fill(path: &Path, len: u64) {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::create(path).unwrap();
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len as libc::off_t) };
    assert_eq!(
        rc,
        0,
        "fallocate {len} bytes: {}",
        std::io::Error::last_os_error()
    );
}

fn docs(from: usize, to: usize) -> Value {
    let docs: Vec<Value> = (from..to)
        .map(|i| {
            json!({"id": format!("d{i}"), "text": format!(
                "Paragraph {i} is about animal number {i}: the {} lives in the forest.",
                ["fox", "owl", "bear", "deer"][i % 4]
            )})
        })
        .collect();
    json!({ "documents": docs })
}

fn live_documents(url: &str) -> u64 {
    live_documents_of(url, "c")
}

fn live_documents_of(url: &str, collection: &str) -> u64 {
    common::shard_stats(url, collection)
        .iter()
        .map(|s| s["live_documents"].as_u64().unwrap())
        .sum()
}

/// Waits (up to 20 s) for `cond`, polling.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn metric(url: &str, name: &str, dir: &Path) -> Option<f64> {
    let (_, text) = get_text(&format!("{url}/metrics"));
    let prefix = format!("{name}{{dir=\"{}", dir.display());
    text.lines()
        .find(|l| l.starts_with(&prefix))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

#[test]
fn a_full_disk_refuses_writes_serves_reads_and_recovers_without_a_restart() {
    let run = RunDir::new();
    let Some(tmpfs) = Tmpfs::mount(&run.path().join("disk"), TMPFS_MIB) else {
        return;
    };
    let data = tmpfs.0.join("data");
    let log = run.path().join("dev.log");
    eprintln!("dev log: {}", log.display());
    let reserve = (RESERVE_MIB << 20).to_string();
    let (mut dev, line) = start_dev(
        &data,
        &log,
        &[
            ("ATTEST__DISK__MIN_FREE_BYTES", reserve.as_str()),
            ("ATTEST__DISK__CHECK_INTERVAL_MS", "100"),
        ],
    );
    let url = value_of(&line, "http=");
    collection_of_twenty(&url);
    assert_eq!(live_documents(&url), 20);

    // Take the free space below the reserve, leaving half of it: writes must stop before the disk is full.
    let filler = tmpfs.0.join("filler");
    let free = free_bytes(&tmpfs.0);
    assert!(
        free > (RESERVE_MIB << 20),
        "the tmpfs has {free} bytes free after start-up, no more than the reserve"
    );
    fill(&filler, free - (RESERVE_MIB << 19));

    let (s, b) = post(&format!("{url}/v1/collections/c/documents"), &docs(20, 30));
    assert_eq!(s, 507, "a write on a full disk: {b}");
    assert_eq!(b["error"]["code"], "DISK_FULL", "{b}");
    let message = b["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("disk full") && message.contains(&data.display().to_string()),
        "the message names the disk: {message}"
    );
    assert!(message.contains("bytes"), "and its free bytes: {message}");
    assert!(!message.contains("quorum"), "not a quorum error: {message}");
    let (s, b) = common::call(
        "DELETE",
        &format!("{url}/v1/collections/c/documents/d1"),
        None,
        None,
    );
    assert_eq!((s, &b["error"]["code"]), (507, &json!("DISK_FULL")), "{b}");

    // Reads go on, the process lives, nothing acknowledged is lost, and the state is reported.
    let (s, b) = post(
        &format!("{url}/v1/collections/c/search"),
        &json!({"query": "where does the owl live", "k": 5}),
    );
    assert_eq!(s, 200, "{b}");
    assert!(!b["hits"].as_array().unwrap().is_empty(), "{b}");
    assert_eq!(live_documents(&url), 20);
    assert!(dev.0.try_wait().unwrap().is_none(), "attest dev is alive");
    let (s, body) = get_text(&format!("{url}/readyz"));
    assert_eq!(s, 200, "still ready for reads: {body}");
    assert!(
        body.starts_with("ready") && body.contains("disk full: writes refused"),
        "{body}"
    );
    wait_for("disk_full = 1", || {
        metric(&url, "disk_full", &data) == Some(1.0)
    });
    assert!(metric(&url, "disk_writes_refused_total", &data).unwrap_or(0.0) >= 1.0);

    // Space returns: the same process accepts writes again.
    std::fs::remove_file(&filler).unwrap();
    let (s, b) = post(&format!("{url}/v1/collections/c/documents"), &docs(20, 30));
    assert_eq!((s, b["accepted"].as_u64()), (200, Some(10)), "{b}");
    assert_eq!(live_documents(&url), 30);
    let (s, body) = get_text(&format!("{url}/readyz"));
    assert_eq!(s, 200);
    assert!(!body.contains("disk full"), "{body}");
    wait_for("disk_full = 0", || {
        metric(&url, "disk_full", &data) == Some(0.0)
    });
    dev.terminate();
}

/// `disk.min_free_bytes: 0`: nothing stops writes before the filesystem is full, so RocksDB's own writes fail
/// (the ingest log's, a new collection's log opening, its info log). The process must live through all of it.
#[test]
fn with_no_reserve_rocksdb_meets_the_full_disk_and_the_process_lives() {
    let run = RunDir::new();
    // Smaller than the ingest log's preallocated log file (1.1 × its 64 MiB memtable), so its writes meet the
    // full disk rather than space RocksDB took ahead.
    let Some(tmpfs) = Tmpfs::mount(&run.path().join("disk"), 64) else {
        return;
    };
    let data = tmpfs.0.join("data");
    let log = run.path().join("dev.log");
    eprintln!("dev log: {}", log.display());
    let start = |log: &Path| {
        start_dev(
            &data,
            log,
            &[
                ("ATTEST__DISK__MIN_FREE_BYTES", "0"),
                ("ATTEST__DISK__MIN_FREE_RATIO", "0"),
            ],
        )
    };
    let (mut dev, line) = start(&log);
    let url = value_of(&line, "http=");
    collection_of_twenty(&url);

    // Every byte taken: the next writes reach RocksDB and fail there (a write may still fit in space RocksDB
    // preallocated; each answer is either all accepted or the disk error).
    // Another process takes whatever space appears (RocksDB and tantivy free files as they work).
    let fillers: Vec<PathBuf> = (0..50)
        .map(|i| tmpfs.0.join(format!("filler-{i}")))
        .collect();
    let take_the_rest = |i: usize| {
        let free = free_bytes(&tmpfs.0);
        if free > 0 {
            fill(&fillers[i], free);
        }
    };
    let mut acked = 20;
    let mut refused = None;
    for batch in 0..fillers.len() {
        take_the_rest(batch);
        let from = 100 + batch * 10;
        let (s, b) = post(
            &format!("{url}/v1/collections/c/documents"),
            &docs(from, from + 10),
        );
        match s {
            200 => acked += b["accepted"].as_u64().unwrap(),
            _ => {
                refused = Some((s, b));
                break;
            }
        }
    }
    let (s, b) = refused.expect("a write refused on a full disk");
    assert_eq!((s, &b["error"]["code"]), (507, &json!("DISK_FULL")), "{b}");

    // A collection made now: meta has room in its preallocated log, the shard has none to open a new one. Opening
    // a RocksDB on a full disk is what aborted the process (its info log); the node waits for room instead.
    let (created, b) = post(
        &format!("{url}/v1/collections"),
        &json!({"name": "later", "shards": 1}),
    );
    assert!(
        created == 201 || created == 507,
        "create on a full disk: {created} {b}"
    );
    if created == 201 {
        wait_for(
            "the shard refusing to open the new collection's log",
            || {
                std::fs::read_to_string(&log)
                    .unwrap_or_default()
                    .contains("the ingest log cannot be opened")
            },
        );
    }
    let (s, b) = post(
        &format!("{url}/v1/collections/c/documents"),
        &docs(900, 901),
    );
    assert_eq!((s, &b["error"]["code"]), (507, &json!("DISK_FULL")), "{b}");
    let (s, b) = post(
        &format!("{url}/v1/collections/c/search"),
        &json!({"query": "where does the owl live", "k": 5}),
    );
    assert_eq!(s, 200, "{b}");
    assert_eq!(live_documents(&url), acked);
    assert!(dev.0.try_wait().unwrap().is_none(), "attest dev is alive");

    // Room again: the new collection's log opens without a restart and takes writes.
    for filler in fillers.iter().filter(|f| f.exists()) {
        std::fs::remove_file(filler).unwrap();
    }
    if created != 201 {
        let (s, b) = post(
            &format!("{url}/v1/collections"),
            &json!({"name": "later", "shards": 1}),
        );
        assert_eq!(s, 201, "{b}");
    }
    wait_for("the new collection taking writes", || {
        post(
            &format!("{url}/v1/collections/later/documents"),
            &docs(0, 5),
        )
        .0 == 200
    });
    assert_eq!(live_documents_of(&url, "later"), 5);
    assert!(dev.0.try_wait().unwrap().is_none(), "attest dev is alive");
    dev.terminate();

    // The log that met the error refuses writes until it is opened again (RocksDB keeps it stopped): after a
    // restart every acknowledged document is there and it takes writes.
    let (mut dev, line) = start(&run.path().join("dev-2.log"));
    let url = value_of(&line, "http=");
    assert_eq!(live_documents(&url), acked);
    let (s, b) = post(
        &format!("{url}/v1/collections/c/documents"),
        &docs(900, 901),
    );
    assert_eq!((s, b["accepted"].as_u64()), (200, Some(1)), "{b}");
    dev.terminate();
}
