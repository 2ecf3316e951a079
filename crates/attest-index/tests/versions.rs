//! Write versions: last writer wins by version on every replica, tombstones of unseen documents, and the
//! catch-up reads (version listing, document fetch) that let a lagging replica copy what it missed.

use crate::common;

use attest_index::{DocumentWrite, FetchedDocument, ShardEngine};
use common::*;

fn versioned(d: usize, text_version: usize, version: u64) -> DocumentWrite {
    DocumentWrite {
        version,
        ..doc(d, text_version)
    }
}

fn text_of(e: &ShardEngine, d: usize) -> Option<String> {
    match e
        .fetch_documents(&[("t1".into(), format!("doc-{d}"))])
        .unwrap()
        .pop()
    {
        Some(FetchedDocument::Live(w)) => Some(w.chunks[0].text.clone()),
        _ => None,
    }
}

#[test]
fn an_older_write_never_replaces_a_newer_one() {
    let dir = tempfile::tempdir().unwrap();
    let e = ShardEngine::open(dir.path(), config(1000)).unwrap();
    e.upsert(vec![versioned(1, 2, 200)]).unwrap();
    e.upsert(vec![versioned(1, 1, 100)]).unwrap();
    assert!(text_of(&e, 1).unwrap().contains("version 2"));
    assert_eq!(e.version_of("t1", "doc-1"), 200);
    // The same version again (a retried write) is a no-op, not a second row.
    e.upsert(vec![versioned(1, 2, 200)]).unwrap();
    assert_eq!(e.stats().live_documents, 1);
    assert_eq!(e.stats().growing_rows, 1);
    // A newer one wins, and searches see only it.
    e.upsert(vec![versioned(1, 3, 300)]).unwrap();
    assert!(text_of(&e, 1).unwrap().contains("version 3"));
}

#[test]
fn a_versioned_delete_of_an_unseen_document_blocks_older_upserts() {
    let dir = tempfile::tempdir().unwrap();
    let e = ShardEngine::open(dir.path(), config(1000)).unwrap();
    assert!(!e.delete_versioned("t1", "doc-4", 500).unwrap());
    // A tombstone is not a live document (the count is kept as versions are recorded, not recounted).
    assert_eq!(e.stats().live_documents, 0);
    e.upsert(vec![versioned(4, 1, 400)]).unwrap();
    assert_eq!(e.stats().live_documents, 0);
    assert!(
        text_of(&e, 4).is_none(),
        "an older upsert resurrected a deleted document"
    );
    match e
        .fetch_documents(&[("t1".into(), "doc-4".into())])
        .unwrap()
        .pop()
    {
        Some(FetchedDocument::Tombstone {
            version, tenant, ..
        }) => {
            assert_eq!((version, tenant.as_str()), (500, "t1"))
        }
        other => panic!("expected a tombstone, got {other:?}"),
    }
    // A newer upsert brings it back.
    e.upsert(vec![versioned(4, 2, 600)]).unwrap();
    assert!(text_of(&e, 4).unwrap().contains("version 2"));
    // A stale delete does nothing.
    assert!(!e.delete_versioned("t1", "doc-4", 550).unwrap());
    assert!(text_of(&e, 4).is_some());
    e.upsert(vec![versioned(5, 1, 0), versioned(6, 1, 0)])
        .unwrap();
    assert_eq!(e.stats().live_documents, 3);
    assert!(e.delete("t1", "doc-5").unwrap());
    e.upsert(vec![versioned(6, 2, 0)]).unwrap();
    assert_eq!(
        e.stats().live_documents,
        2,
        "a delete drops one, a replacement none"
    );
    drop(e);
    let e = ShardEngine::open(dir.path(), config(1000)).unwrap();
    assert_eq!(
        e.stats().live_documents,
        2,
        "the count rebuilt from the log"
    );
}

#[test]
fn unversioned_writes_get_increasing_versions() {
    let dir = tempfile::tempdir().unwrap();
    let e = ShardEngine::open(dir.path(), config(1000)).unwrap();
    e.upsert(vec![doc(1, 1)]).unwrap();
    let v1 = e.version_of("t1", "doc-1");
    e.upsert(vec![doc(1, 2)]).unwrap();
    let v2 = e.version_of("t1", "doc-1");
    assert!(v2 > v1 && v1 > 0);
    assert!(text_of(&e, 1).unwrap().contains("version 2"));
    assert!(e.delete("t1", "doc-1").unwrap());
    assert!(e.version_of("t1", "doc-1") > v2);
    // An unversioned delete of a missing document writes nothing.
    assert!(!e.delete("t1", "doc-99").unwrap());
    assert_eq!(e.version_of("t1", "doc-99"), 0);
}

#[test]
fn a_replica_copies_everything_it_missed_through_listing_and_fetch() {
    let a_dir = tempfile::tempdir().unwrap();
    let b_dir = tempfile::tempdir().unwrap();
    let a = ShardEngine::open(a_dir.path(), config(30)).unwrap();
    let b = ShardEngine::open(b_dir.path(), config(30)).unwrap();
    // Both got the first writes; b missed the rest (it was down), including a delete and a replacement.
    let first: Vec<_> = (0..20).map(|d| versioned(d, 0, 1000 + d as u64)).collect();
    a.upsert(first.clone()).unwrap();
    b.upsert(first).unwrap();
    a.upsert((20..70).map(|d| versioned(d, 0, 2000 + d as u64)).collect())
        .unwrap();
    a.upsert(vec![versioned(3, 1, 3000)]).unwrap();
    a.delete_versioned("t1", "doc-5", 3001).unwrap();
    a.seal().unwrap();

    // The catch-up loop: page through a's versions, fetch what is newer, apply it with a's versions.
    copy_newer(&a, &b);
    assert_eq!(b.stats().live_documents, a.stats().live_documents);
    for d in 0..70 {
        let id = format!("doc-{d}");
        assert_eq!(b.version_of("t1", &id), a.version_of("t1", &id), "{id}");
    }
    assert!(text_of(&b, 3).unwrap().contains("version 1"));
    assert!(text_of(&b, 5).is_none());
    assert_eq!(text_of(&b, 69), text_of(&a, 69));
}

#[test]
fn stats_beside_writes_never_deadlocks() {
    // Writers take the log, then the state; `stats` once took them the other way round, and a heartbeat's
    // stats call beside an ingest froze a shard process. Both loops must finish.
    let dir = tempfile::tempdir().unwrap();
    let e = ShardEngine::open(dir.path(), config(100_000)).unwrap();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let writer = {
        let (e, done) = (std::sync::Arc::clone(&e), done_tx.clone());
        std::thread::spawn(move || {
            for round in 0..300 {
                e.upsert(vec![doc(round % 50, round)]).unwrap();
            }
            done.send("writer").unwrap();
        })
    };
    let reader = {
        let (e, done) = (std::sync::Arc::clone(&e), done_tx);
        std::thread::spawn(move || {
            for _ in 0..20_000 {
                let _ = e.stats();
            }
            done.send("stats").unwrap();
        })
    };
    for _ in 0..2 {
        done_rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("writer and stats deadlocked");
    }
    writer.join().unwrap();
    reader.join().unwrap();
    assert_eq!(e.stats().live_documents, 50);
}
