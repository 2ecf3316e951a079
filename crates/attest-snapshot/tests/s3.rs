//! The snapshot store on S3: against a `moto` server (PyPI, pinned) on 127.0.0.1, started by each test through
//! scripts/s3-test-server.sh (which makes its virtual environment on first use) and killed when the test ends.

use crate::common;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use attest_snapshot::{SnapshotStore, StoreError};
use common::{assert_refused_as_altered, sha256_hex, write_file, Progress, MIB};

/// S3's smallest part (all but the last).
const PART: usize = 5 * MIB;
/// How long the server may take to answer: the first run makes the virtual environment (PyPI).
const STARTUP: Duration = Duration::from_secs(300);

/// A moto server on 127.0.0.1, killed on drop; its log is kept (and its tail printed) when the test failed.
struct Moto {
    child: Child,
    port: u16,
    log: Option<tempfile::TempPath>,
}

impl Moto {
    async fn start() -> Moto {
        let port = {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        // The package directory cargo runs the test from, not the one it was compiled in: a target directory
        // shared between checkouts (CI's and a working copy's) holds a binary compiled in the other.
        let package = std::env::var_os("CARGO_MANIFEST_DIR")
            .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
        let script = package.join("../../scripts/s3-test-server.sh");
        let log = tempfile::Builder::new()
            .prefix("attest-moto-")
            .suffix(".log")
            .tempfile()
            .unwrap();
        let child = Command::new("bash")
            .arg(&script)
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(log.reopen().unwrap())
            .stderr(log.reopen().unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", script.display()));
        let mut moto = Moto {
            child,
            port,
            log: Some(log.into_temp_path()),
        };
        moto.wait_ready().await;
        moto
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn log_text(&self) -> String {
        self.log
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default()
    }

    /// Waits until the server answers HTTP (or has exited, or STARTUP passed).
    async fn wait_ready(&mut self) {
        let client = reqwest::Client::new();
        let deadline = Instant::now() + STARTUP;
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tick.tick().await;
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "the moto server exited ({status}) before answering:\n{}",
                    self.log_text()
                );
            }
            let answer = client
                .get(self.endpoint())
                .timeout(Duration::from_secs(2))
                .send()
                .await;
            if answer.is_ok_and(|r| r.status().is_success()) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the moto server did not answer in {STARTUP:?}:\n{}",
                self.log_text()
            );
        }
    }

    /// Creates a bucket (object_store cannot; moto takes an unsigned PUT).
    async fn create_bucket(&self, bucket: &str) {
        let answer = reqwest::Client::new()
            .put(format!("{}/{bucket}", self.endpoint()))
            .send()
            .await
            .unwrap();
        assert!(
            answer.status().is_success(),
            "creating bucket {bucket}: {}",
            answer.status()
        );
    }

    /// The multipart uploads in progress in `bucket` (ListMultipartUploads), as the count of `<Upload>` entries.
    async fn uploads_in_progress(&self, bucket: &str) -> usize {
        let body = reqwest::Client::new()
            .get(format!("{}/{bucket}?uploads", self.endpoint()))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(body.contains("ListMultipartUploadsResult"), "{body}");
        body.matches("<Upload>").count()
    }

    fn store(&self, bucket: &str, prefix: &str) -> SnapshotStore {
        let endpoint = self.endpoint();
        SnapshotStore::open_with(
            &format!("s3://{bucket}/{prefix}"),
            &[
                ("aws_endpoint_url", endpoint.as_str()),
                ("aws_allow_http", "true"),
                ("aws_access_key_id", "testing"),
                ("aws_secret_access_key", "testing"),
                ("aws_region", "us-east-1"),
            ],
        )
        .unwrap()
        .with_part_size(PART)
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            if let Some(log) = self.log.take() {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                let tail: Vec<&str> = text
                    .lines()
                    .rev()
                    .take(40)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                match log.keep() {
                    Ok(path) => eprintln!("moto server log kept at {}; its tail:", path.display()),
                    Err(e) => eprintln!("moto server log could not be kept ({e}); its tail:"),
                }
                eprintln!("{}", tail.join("\n"));
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_round_trip_in_parts_resume_and_corruption() {
    let started = Instant::now();
    let moto = Moto::start().await;
    eprintln!("moto answered after {:?}", started.elapsed());
    moto.create_bucket("snaps").await;
    let store = moto.store("snaps", "cluster-a");
    let tmp = tempfile::tempdir().unwrap();

    // ~12 MiB: three parts of 5, 5 and 2 MiB.
    let local = tmp.path().join("vectors.f32");
    let len = 12 * MIB + 321;
    let data = write_file(&local, len, 11);
    let key = "snap-1/shards/0/vectors.f32";
    let progress = Progress::default();
    let sent = store
        .upload_file(&local, key, &|n| progress.record(n))
        .await
        .unwrap();
    assert_eq!(sent, len as u64);
    assert_eq!(progress.bytes(), len as u64);
    assert_eq!(progress.calls(), 3, "one progress call per part");
    assert_eq!(store.size_of(key).await.unwrap(), Some(len as u64));
    assert_eq!(
        store.hash_object(key).await.unwrap(),
        (len as u64, sha256_hex(&data))
    );
    assert_eq!(moto.uploads_in_progress("snaps").await, 0);

    let restored = tmp.path().join("restore/shards/0/vectors.f32");
    let down = Progress::default();
    store
        .download_verified(key, &restored, len as u64, &sha256_hex(&data), &|n| {
            down.record(n)
        })
        .await
        .unwrap();
    assert_eq!(std::fs::read(&restored).unwrap(), data);
    assert_eq!(down.bytes(), len as u64);

    // Resume skips it.
    assert_eq!(store.upload_file(&local, key, &|_| {}).await.unwrap(), 0);

    // Small objects, listing under the prefix.
    store
        .put_bytes("snap-1/manifest.json", b"{\"v\":1}".to_vec())
        .await
        .unwrap();
    store
        .put_bytes("snap-2/manifest.json", b"{}".to_vec())
        .await
        .unwrap();
    assert_eq!(
        store.get_bytes("snap-1/manifest.json").await.unwrap(),
        Some(b"{\"v\":1}".to_vec())
    );
    assert_eq!(store.get_bytes("snap-3/manifest.json").await.unwrap(), None);
    assert_eq!(store.list_dirs("").await.unwrap(), vec!["snap-1", "snap-2"]);
    assert_eq!(store.list_dirs("snap-1/shards").await.unwrap(), vec!["0"]);
    // The prefix is honoured: the same bucket seen from the top has only `cluster-a`.
    assert_eq!(
        moto.store("snaps", "").list_dirs("").await.unwrap(),
        vec!["cluster-a"]
    );

    // Corruption: other bytes of the same size.
    let mut other = data.clone();
    other[len - 1] ^= 0xff;
    store.put_bytes(key, other).await.unwrap();
    let err = store
        .download_verified(key, &restored, len as u64, &sha256_hex(&data), &|_| {})
        .await
        .unwrap_err();
    assert_refused_as_altered(&err, key, &restored);

    // Missing.
    let err = store
        .download_verified("snap-1/absent", &restored, 1, &sha256_hex(b"x"), &|_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::Missing { key } if key == "snap-1/absent"),
        "{err}"
    );
    assert!(!restored.exists());

    // A bucket that does not exist: an error naming the key.
    let err = moto
        .store("no-such-bucket", "")
        .put_bytes("k/x", b"x".to_vec())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("k/x"), "{err}");
    eprintln!("s3 round trip test took {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_interrupted_multipart_upload_leaves_nothing_and_resumes() {
    let started = Instant::now();
    let moto = Moto::start().await;
    moto.create_bucket("resume").await;
    // One part in flight, so the cancellation lands between parts, long before the upload could complete.
    let store = moto.store("resume", "").with_upload_concurrency(1);
    let tmp = tempfile::tempdir().unwrap();
    let local = tmp.path().join("segment.tantivy");
    let len = 12 * MIB + 99;
    let data = write_file(&local, len, 12);
    let key = "snap-7/shards/3/segment.tantivy";

    let first_part = Arc::new(tokio::sync::Notify::new());
    let notify = first_part.clone();
    let sent = Progress::default();
    let signal = |n| {
        sent.record(n);
        notify.notify_one();
    };
    let upload = store.upload_file(&local, key, &signal);
    let interrupted = tokio::select! {
        biased;
        _ = first_part.notified() => true,
        _ = upload => false,
    };
    assert!(interrupted, "the upload was cancelled after its first part");
    assert_eq!(sent.calls(), 1);
    assert_eq!(sent.bytes(), PART as u64);
    assert_eq!(
        store.size_of(key).await.unwrap(),
        None,
        "an interrupted multipart upload leaves no visible object"
    );
    assert_eq!(store.list_dirs("").await.unwrap(), Vec::<String>::new());

    // The dropped upload is aborted in the background: wait until S3 lists no upload in progress.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    loop {
        tick.tick().await;
        if moto.uploads_in_progress("resume").await == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the interrupted multipart upload was never aborted"
        );
    }

    // The re-run sends the whole file and the result verifies.
    let rerun = Progress::default();
    assert_eq!(
        store
            .upload_file(&local, key, &|n| rerun.record(n))
            .await
            .unwrap(),
        len as u64
    );
    assert_eq!(rerun.bytes(), len as u64);
    let restored = tmp.path().join("restore/segment.tantivy");
    store
        .download_verified(key, &restored, len as u64, &sha256_hex(&data), &|_| {})
        .await
        .unwrap();
    assert_eq!(std::fs::read(&restored).unwrap(), data);
    // A second re-run (the snapshot run again after finishing) sends nothing.
    assert_eq!(store.upload_file(&local, key, &|_| {}).await.unwrap(), 0);
    eprintln!("s3 interrupted upload test took {:?}", started.elapsed());
}
