//! `keep_sealed_vectors_in_log = false`: sealed rows' vectors leave the log at the seal's compaction, fetches
//! read them from their segment, and a damaged segment's documents are forgotten and copied back by catch-up.

use std::path::Path;

use crate::common;

use attest_index::wal::{IngestLog, LogOp};
use attest_index::{DocumentWrite, EngineConfig, FetchedDocument, LoggedChunk, ShardEngine};
use common::*;

fn stripping(seal_threshold: usize) -> EngineConfig {
    EngineConfig {
        keep_sealed_vectors_in_log: attest_index::sealed_vectors::LogVectors::Drop,
        ..config(seal_threshold)
    }
}

/// Document `d` at write version `1000 + d`; every third one has a second chunk with a vector of its own, so a
/// record's rows are looked up by chunk, not by record alone.
fn document(d: usize) -> DocumentWrite {
    let mut w = doc(d, 0);
    w.version = 1000 + d as u64;
    if d.is_multiple_of(3) {
        let mut second = w.chunks[0].clone();
        second.chunk_id = format!("doc-{d}#1");
        second.vector = vector_for(d + 100_000);
        w.chunks.push(second);
    }
    w
}

fn ids(range: std::ops::Range<usize>) -> Vec<(String, String)> {
    range
        .map(|d| ("t1".to_string(), format!("doc-{d}")))
        .collect()
}

/// Asserts every document of `range` is fetched live with exactly the chunks it was written with, and their
/// vectors as written or as a sealed segment holds them (in half precision: `vector_file`).
fn assert_fetched_whole(e: &ShardEngine, range: std::ops::Range<usize>) {
    let fetched = e.fetch_documents(&ids(range.clone())).unwrap();
    assert_eq!(fetched.len(), range.len());
    for (d, f) in range.zip(fetched) {
        let FetchedDocument::Live(w) = f else {
            panic!("doc-{d} is not live: {f:?}");
        };
        let written = document(d).chunks;
        let halved = |v: &[f32]| -> Vec<f32> {
            v.iter().map(|x| half::f16::from_f32(*x).to_f32()).collect()
        };
        assert_eq!(w.chunks.len(), written.len(), "doc-{d}");
        for (got, wrote) in w.chunks.iter().zip(&written) {
            assert!(
                got.vector == wrote.vector || got.vector == halved(&wrote.vector),
                "doc-{d}: another vector"
            );
            let same_but_vector = LoggedChunk {
                vector: wrote.vector.clone(),
                ..got.clone()
            };
            assert_eq!(&same_but_vector, wrote, "doc-{d}");
        }
    }
}

/// (chunks with a vector, chunks without one) among the log's upserts, read once the engine is closed.
fn logged_vectors(dir: &Path) -> (usize, usize) {
    let log = IngestLog::open(&dir.join("wal")).unwrap();
    let (mut with, mut without) = (0, 0);
    for (_, op) in log.range(1, u64::MAX).unwrap() {
        if let LogOp::Upsert { chunks, .. } = op {
            for c in chunks {
                if c.vector.is_empty() {
                    without += 1;
                } else {
                    with += 1;
                }
            }
        }
    }
    (with, without)
}

/// Chunks of documents `range`.
fn chunks_of(range: std::ops::Range<usize>) -> usize {
    range.map(|d| document(d).chunks.len()).sum()
}

#[test]
fn sealed_rows_leave_the_log_and_are_fetched_from_their_segment() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = ShardEngine::open(dir.path(), stripping(100_000)).unwrap();
        e.upsert((0..300).map(document).collect()).unwrap();
        e.seal().unwrap();
        e.upsert((300..320).map(document).collect()).unwrap();
        assert_fetched_whole(&e, 0..320);
        assert_eq!(dense_ids(&e, &vector_for(150), 1), vec!["doc-150#0"]);
    }
    assert_eq!(
        logged_vectors(dir.path()),
        (chunks_of(300..320), chunks_of(0..300)),
        "sealed records lose their vectors, the growing segment's keep theirs"
    );
    // Reopened, with either setting (a log stripped once stays so), every document is whole.
    for config in [stripping(100_000), config(100_000)] {
        let e = ShardEngine::open(dir.path(), config).unwrap();
        assert_eq!(e.stats().live_documents, 320);
        assert_fetched_whole(&e, 0..320);
    }

    // The default keeps them.
    let kept = tempfile::tempdir().unwrap();
    {
        let e = ShardEngine::open(kept.path(), config(100_000)).unwrap();
        e.upsert((0..300).map(document).collect()).unwrap();
        e.seal().unwrap();
    }
    assert_eq!(logged_vectors(kept.path()), (chunks_of(0..300), 0));
}

#[test]
fn a_damaged_segment_forgets_its_documents_and_catch_up_copies_them_back() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = ShardEngine::open(a_dir.path(), config(100_000)).unwrap();
    let seg_dir = {
        let b = ShardEngine::open(b_dir.path(), stripping(100_000)).unwrap();
        for e in [&a, &b] {
            e.upsert((0..300).map(document).collect()).unwrap();
            e.seal().unwrap();
            e.upsert((300..310).map(document).collect()).unwrap();
        }
        b.segment_dirs().remove(0)
    };
    let faiss = seg_dir.join("dense.faiss");
    let mut bytes = std::fs::read(&faiss).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid..mid + 64].iter_mut().for_each(|b| *b ^= 0xff);
    std::fs::write(&faiss, bytes).unwrap();

    let b = ShardEngine::open(b_dir.path(), stripping(100_000)).unwrap();
    let s = b.stats();
    assert_eq!(
        s.rebuilt_segments.len(),
        1,
        "the damaged segment is reported"
    );
    assert_eq!(
        s.live_documents, 10,
        "the sealed documents are forgotten, the growing ones stay"
    );
    assert!(b.fetch_documents(&ids(0..300)).unwrap().is_empty());
    assert_eq!(b.version_of("t1", "doc-5"), 0);
    assert!(!dense_ids(&b, &vector_for(150), 3).contains(&"doc-150#0".to_string()));
    assert_fetched_whole(&b, 300..310);

    // The catch-up loop (attest_shard::catchup): a's versions, newer than b's, fetched and written to b.
    copy_newer(&a, &b);
    assert_eq!(b.stats().live_documents, 310);
    assert_fetched_whole(&b, 0..310);
    assert_eq!(dense_ids(&b, &vector_for(150), 1), vec!["doc-150#0"]);
}

/// Bytes of the write-ahead files (`*.log`) of a replica's ingest log.
fn write_ahead_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir.join("wal"))
        .unwrap()
        .flatten()
        .filter(|f| f.path().extension().is_some_and(|e| e == "log"))
        .map(|f| f.metadata().map_or(0, |m| m.len()))
        .sum()
}

/// A seal flushes the log's memtables (either layout): the write-ahead files holding the sealed rows go, rather
/// than staying until 256 MB of them force a flush (every row on disk twice in a replica under ~150,000 rows).
#[test]
fn a_seal_leaves_no_write_ahead_copy_of_the_rows_it_sealed() {
    for config in [config(100_000), stripping(100_000)] {
        let dir = tempfile::tempdir().unwrap();
        let e = ShardEngine::open(dir.path(), config).unwrap();
        for batch in 0..10 {
            e.upsert((batch * 300..(batch + 1) * 300).map(document).collect())
                .unwrap();
        }
        let before = write_ahead_bytes(dir.path());
        assert!(before > 500_000, "{before} bytes of WAL");
        e.seal().unwrap();
        // RocksDB deletes a released file after the flush returns: wait for it, bounded.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while write_ahead_bytes(dir.path()) * 10 > before && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let after = write_ahead_bytes(dir.path());
        assert!(
            after * 10 <= before,
            "{after} of {before} bytes of WAL left"
        );
        assert_fetched_whole(&e, 0..3000);
    }
}
