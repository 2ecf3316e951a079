//! The snapshot store on a local directory.

use crate::common;

use std::sync::Arc;

use attest_snapshot::{SnapshotStore, StoreError};
use common::{assert_refused_as_altered, sha256_hex, write_file, Progress, MIB};

fn open(dir: &std::path::Path) -> SnapshotStore {
    SnapshotStore::open(dir.to_str().unwrap()).unwrap()
}

#[tokio::test]
async fn round_trip_in_parts_and_resume_skips_finished_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dest_dir = tmp.path().join("dest");
    let store = open(&dest_dir).with_part_size(MIB);
    assert_eq!(store.location(), dest_dir.to_str().unwrap());

    let local = tmp.path().join("segment.faiss");
    let len = 3 * MIB + MIB / 2 + 7;
    let data = write_file(&local, len, 1);
    let progress = Progress::default();
    let sent = store
        .upload_file(&local, "snap-1/shards/0/segment.faiss", &|n| {
            progress.record(n)
        })
        .await
        .unwrap();
    assert_eq!(sent, len as u64);
    assert_eq!(progress.bytes(), len as u64);
    assert_eq!(progress.calls(), 4, "one progress call per part");
    // The object is a plain file under the directory.
    assert_eq!(
        std::fs::read(dest_dir.join("snap-1/shards/0/segment.faiss")).unwrap(),
        data
    );
    assert_eq!(
        store
            .size_of("snap-1/shards/0/segment.faiss")
            .await
            .unwrap(),
        Some(len as u64)
    );
    assert_eq!(
        store
            .hash_object("snap-1/shards/0/segment.faiss")
            .await
            .unwrap(),
        (len as u64, sha256_hex(&data))
    );

    let restored = tmp.path().join("restore/nested/dir/segment.faiss");
    let down = Progress::default();
    store
        .download_verified(
            "snap-1/shards/0/segment.faiss",
            &restored,
            len as u64,
            &sha256_hex(&data),
            &|n| down.record(n),
        )
        .await
        .unwrap();
    assert_eq!(std::fs::read(&restored).unwrap(), data);
    assert_eq!(down.bytes(), len as u64);

    // Resume: the same file again is skipped, nothing sent.
    let again = Progress::default();
    assert_eq!(
        store
            .upload_file(&local, "snap-1/shards/0/segment.faiss", &|n| again
                .record(n))
            .await
            .unwrap(),
        0
    );
    assert_eq!(again.calls(), 0);

    // An object of another size at the key (a partial leftover) is replaced.
    store
        .put_bytes("snap-1/shards/0/other", b"short".to_vec())
        .await
        .unwrap();
    assert_eq!(
        store
            .upload_file(&local, "snap-1/shards/0/other", &|_| {})
            .await
            .unwrap(),
        len as u64
    );
    assert_eq!(
        store.hash_object("snap-1/shards/0/other").await.unwrap().1,
        sha256_hex(&data)
    );

    // A small file (below the part size) goes in one put.
    let small = tmp.path().join("manifest.json");
    let small_data = write_file(&small, 1000, 2);
    let once = Progress::default();
    assert_eq!(
        store
            .upload_file(&small, "snap-1/manifest.json", &|n| once.record(n))
            .await
            .unwrap(),
        1000
    );
    assert_eq!(once.calls(), 1);
    assert_eq!(
        store.get_bytes("snap-1/manifest.json").await.unwrap(),
        Some(small_data)
    );

    // An empty file round-trips too.
    let empty = tmp.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    assert_eq!(
        store
            .upload_file(&empty, "snap-1/empty", &|_| {})
            .await
            .unwrap(),
        0
    );
    assert_eq!(store.size_of("snap-1/empty").await.unwrap(), Some(0));
    let empty_back = tmp.path().join("restore/empty");
    store
        .download_verified("snap-1/empty", &empty_back, 0, &sha256_hex(b""), &|_| {})
        .await
        .unwrap();
    assert_eq!(std::fs::metadata(&empty_back).unwrap().len(), 0);
}

#[tokio::test]
async fn corrupted_object_is_refused_naming_the_key_and_dest_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let dest_dir = tmp.path().join("dest");
    let store = open(&dest_dir).with_part_size(MIB);
    let local = tmp.path().join("chunks.rkyv");
    let len = 2 * MIB + 5;
    let data = write_file(&local, len, 3);
    let key = "snap-2/shards/1/chunks.rkyv";
    store.upload_file(&local, key, &|_| {}).await.unwrap();

    // Flip one byte of the stored file: same size, another hash.
    let stored = dest_dir.join(key);
    let mut bytes = std::fs::read(&stored).unwrap();
    bytes[len / 2] ^= 0x01;
    std::fs::write(&stored, &bytes).unwrap();

    let restored = tmp.path().join("restore/chunks.rkyv");
    let err = store
        .download_verified(key, &restored, len as u64, &sha256_hex(&data), &|_| {})
        .await
        .unwrap_err();
    assert_refused_as_altered(&err, key, &restored);
    assert_ne!(store.hash_object(key).await.unwrap().1, sha256_hex(&data));

    // A truncated object: refused on its size, before anything is written.
    std::fs::write(&stored, &data[..len - 1]).unwrap();
    let err = store
        .download_verified(key, &restored, len as u64, &sha256_hex(&data), &|_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::Mismatch { reason, .. } if reason.contains("size")),
        "{err}"
    );
    assert!(err.to_string().contains(key), "{err}");
    assert!(!restored.exists());
}

#[tokio::test]
async fn missing_object_is_missing_and_dest_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(&tmp.path().join("dest"));
    let restored = tmp.path().join("restore/x");
    std::fs::create_dir_all(restored.parent().unwrap()).unwrap();
    std::fs::write(&restored, b"stale").unwrap();
    let err = store
        .download_verified(
            "snap-9/shards/0/x",
            &restored,
            5,
            &sha256_hex(b"stale"),
            &|_| {},
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::Missing { key } if key == "snap-9/shards/0/x"),
        "{err}"
    );
    assert!(err.to_string().contains("snap-9/shards/0/x"), "{err}");
    assert!(!restored.exists());
    assert!(matches!(
        store.hash_object("nope").await,
        Err(StoreError::Missing { .. })
    ));
    assert_eq!(store.get_bytes("nope").await.unwrap(), None);
    assert_eq!(store.size_of("nope/deeper").await.unwrap(), None);

    // A missing local file names the file and the key.
    let err = store
        .upload_file(&tmp.path().join("absent.bin"), "snap-9/absent", &|_| {})
        .await
        .unwrap_err();
    assert!(matches!(&err, StoreError::Io { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("snap-9/absent") && message.contains("absent.bin"),
        "{message}"
    );
}

#[tokio::test]
async fn list_dirs_and_delete_prefix() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(&tmp.path().join("dest"));
    assert_eq!(store.list_dirs("").await.unwrap(), Vec::<String>::new());
    for key in [
        "snap-b/manifest.json",
        "snap-a/manifest.json",
        "snap-a/shards/0/f",
        "snap-a/shards/1/f",
        "top.txt",
    ] {
        store.put_bytes(key, key.as_bytes().to_vec()).await.unwrap();
    }
    assert_eq!(store.list_dirs("").await.unwrap(), vec!["snap-a", "snap-b"]);
    assert_eq!(store.list_dirs("snap-a").await.unwrap(), vec!["shards"]);
    assert_eq!(
        store.list_dirs("snap-a/shards/").await.unwrap(),
        vec!["0", "1"]
    );
    assert_eq!(
        store.list_dirs("snap-b").await.unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(
        store.list_dirs("absent").await.unwrap(),
        Vec::<String>::new()
    );

    assert_eq!(store.delete_prefix("snap-a").await.unwrap(), 3);
    assert_eq!(store.size_of("snap-a/manifest.json").await.unwrap(), None);
    assert_eq!(
        store.get_bytes("top.txt").await.unwrap(),
        Some(b"top.txt".to_vec())
    );
    assert!(store.delete_prefix("").await.is_err());
    assert!(store.delete_prefix("/").await.is_err());
}

/// The upload is dropped after its first part. To make "after its first part" certain (the next part's read
/// and write may otherwise both finish before the test's task is polled again), the runtime has one blocking
/// thread and the first progress call occupies it until the upload is dropped: the second part cannot start.
#[test]
fn interrupted_multipart_upload_leaves_no_object_and_rerun_completes() {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(1)
        .build()
        .unwrap()
        .block_on(interrupted_multipart_upload())
}

async fn interrupted_multipart_upload() {
    let tmp = tempfile::tempdir().unwrap();
    let dest_dir = tmp.path().join("dest");
    let store = open(&dest_dir)
        .with_part_size(MIB)
        .with_upload_concurrency(1);
    let local = tmp.path().join("big");
    let len = 4 * MIB + 1;
    let data = write_file(&local, len, 4);
    let key = "snap-3/big";

    let first_part = Arc::new(tokio::sync::Notify::new());
    let notify = first_part.clone();
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let gate = std::sync::Mutex::new(Some(gate));
    let signal = move |_| {
        if let Some(gate) = gate.lock().unwrap().take() {
            tokio::task::spawn_blocking(move || gate.recv());
            notify.notify_one();
        }
    };
    let upload = store.upload_file(&local, key, &signal);
    let interrupted = tokio::select! {
        biased;
        _ = first_part.notified() => true,
        _ = upload => false,
    };
    release.send(()).unwrap();
    assert!(interrupted, "the upload was cancelled after its first part");
    assert_eq!(
        store.size_of(key).await.unwrap(),
        None,
        "no visible object after an interrupted upload"
    );
    assert_eq!(store.list_dirs("").await.unwrap(), vec!["snap-3"]);

    assert_eq!(
        store.upload_file(&local, key, &|_| {}).await.unwrap(),
        len as u64
    );
    let restored = tmp.path().join("restore/big");
    store
        .download_verified(key, &restored, len as u64, &sha256_hex(&data), &|_| {})
        .await
        .unwrap();
    assert_eq!(std::fs::read(&restored).unwrap(), data);
}

#[test]
fn locations() {
    let tmp = tempfile::tempdir().unwrap();
    let created = tmp.path().join("a/b/c");
    SnapshotStore::open(created.to_str().unwrap()).unwrap();
    assert!(created.is_dir(), "a directory location is created");
    let url = format!("file://{}", tmp.path().join("via-url").display());
    SnapshotStore::open(&url).unwrap();
    assert!(tmp.path().join("via-url").is_dir());

    for bad in [
        "",
        "   ",
        "gs://bucket/x",
        "http://host/x",
        "file://host/x",
        "s3://",
        "s3:///prefix",
    ] {
        match SnapshotStore::open(bad) {
            Err(StoreError::BadLocation(message)) => {
                assert!(message.contains(&format!("{bad:?}")), "{bad:?}: {message}")
            }
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    let err = SnapshotStore::open_with("s3://bucket", &[("aws_no_such_option", "1")]).unwrap_err();
    assert!(err.to_string().contains("aws_no_such_option"), "{err}");
    let err =
        SnapshotStore::open_with(created.to_str().unwrap(), &[("aws_region", "x")]).unwrap_err();
    assert!(matches!(err, StoreError::BadLocation(_)), "{err}");
    // An S3 location opens without contacting anything.
    let s3 = SnapshotStore::open_with("s3://bucket/some/prefix", &[("aws_region", "us-east-1")])
        .unwrap();
    assert_eq!(s3.location(), "s3://bucket/some/prefix");
}
