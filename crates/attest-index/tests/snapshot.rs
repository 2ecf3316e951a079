//! Snapshots of one shard replica (issue 17, item 1): taken while the replica serves, restored into an empty
//! directory that opens as a replica answering exactly as the source did; every write acknowledged before the
//! snapshot began is in it; a compaction running meanwhile breaks neither; a snapshot with a missing, truncated
//! or altered file is refused naming it, and nothing is restored.

use crate::common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use attest_index::snapshot::{self, SNAPSHOT_FILE};
use attest_index::{Filter, IndexError, SearchParams, ShardEngine};
use common::*;

/// The BM25 and dense hit ids for document `d`'s word and vector.
fn answers(engine: &ShardEngine, d: usize) -> (Vec<String>, Vec<String>) {
    let filter = Filter::default();
    let (text, vector) = (token_for(d), vector_for(d));
    let lanes = engine
        .search(&SearchParams {
            tenant: "t1",
            query_vector: Some(&vector),
            query_text: Some(&text),
            k: 5,
            nprobe: None,
            filter: &filter,
            exact_rescore: true,
            payload_top: attest_index::ALL_PAYLOADS,
        })
        .unwrap();
    let ids = |hits: Vec<attest_index::Hit>| hits.into_iter().map(|h| h.chunk_id).collect();
    (ids(lanes.bm25), ids(lanes.dense))
}

/// A replica with two sealed segments, a growing one and tombstones.
fn busy_engine(dir: &Path) -> Arc<ShardEngine> {
    let e = ShardEngine::open(dir, config(100_000)).unwrap();
    e.upsert((0..200).map(|d| doc(d, 0)).collect()).unwrap();
    e.seal().unwrap();
    e.upsert((200..400).map(|d| doc(d, 0)).collect()).unwrap();
    e.seal().unwrap();
    e.upsert((400..460).map(|d| doc(d, 0)).collect()).unwrap();
    for d in [5, 250, 410] {
        assert!(e.delete("t1", &format!("doc-{d}")).unwrap());
    }
    e
}

#[test]
fn a_restored_snapshot_answers_every_query_as_its_source() {
    let dir = tempfile::tempdir().unwrap();
    let source = busy_engine(&dir.path().join("source"));
    let taken = source.snapshot(&dir.path().join("snap")).unwrap();
    assert_eq!(taken.last_seq, source.stats().last_seq);
    assert_eq!(taken.live_documents, 457);
    assert!(taken.files.iter().any(|f| f.path.starts_with("wal/")));
    assert!(taken.files.iter().any(|f| f.path.starts_with("segments/")));

    let restored_snapshot =
        snapshot::restore(&dir.path().join("snap"), &dir.path().join("restored")).unwrap();
    assert_eq!(restored_snapshot, taken);
    let restored = ShardEngine::open(&dir.path().join("restored"), config(100_000)).unwrap();
    let (s, r) = (source.stats(), restored.stats());
    // The growing rows are replayed from the log, live ones only: the source still holds its deleted row.
    assert_eq!(
        (
            r.live_documents,
            r.sealed_segments,
            r.sealed_rows,
            r.last_seq
        ),
        (
            s.live_documents,
            s.sealed_segments,
            s.sealed_rows,
            s.last_seq
        )
    );
    assert!(r.rebuilt_segments.is_empty(), "{:?}", r.rebuilt_segments);
    // Same positions, but a log of its own from here on: its next records are not the source's.
    assert_ne!(restored.log_id(), source.log_id());
    // 50 fixture queries across both segments, the growing rows and the deleted documents.
    for d in (0..460).step_by(460 / 50 + 1).chain([5, 250, 410]) {
        assert_eq!(
            answers(&restored, d),
            answers(&source, d),
            "query for doc {d}"
        );
    }
}

#[test]
fn every_write_acknowledged_before_the_snapshot_is_in_it() {
    let dir = tempfile::tempdir().unwrap();
    // A small seal threshold: segments are sealed in the background while the writer runs.
    let engine = ShardEngine::open(&dir.path().join("source"), config(64)).unwrap();
    let acknowledged = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (engine, acknowledged, stop) = (
            Arc::clone(&engine),
            Arc::clone(&acknowledged),
            Arc::clone(&stop),
        );
        std::thread::spawn(move || {
            let mut d = 0;
            while !stop.load(Ordering::SeqCst) {
                engine.upsert(vec![doc(d, 0)]).unwrap();
                acknowledged.lock().unwrap().push(d);
                d += 1;
            }
        })
    };
    while acknowledged.lock().unwrap().len() < 150 {
        std::thread::yield_now();
    }
    let before: Vec<usize> = acknowledged.lock().unwrap().clone();
    engine.snapshot(&dir.path().join("snap")).unwrap();
    stop.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    let written = acknowledged.lock().unwrap().len();

    snapshot::restore(&dir.path().join("snap"), &dir.path().join("restored")).unwrap();
    let restored = ShardEngine::open(&dir.path().join("restored"), config(64)).unwrap();
    for &d in &before {
        assert!(
            restored.version_of("t1", &format!("doc-{d}")) > 0,
            "doc-{d} was acknowledged before the snapshot began but is not in it"
        );
    }
    for d in [before[0], before[before.len() / 2], *before.last().unwrap()] {
        assert_eq!(answers(&restored, d).0[0], format!("doc-{d}#0"));
    }
    // Writes went on while it was taken: the snapshot is a point in time, not the end state.
    let live = restored.stats().live_documents as usize;
    assert!(
        live >= before.len() && live <= written,
        "{live} of {written}"
    );
}

#[test]
fn a_compaction_during_the_snapshot_breaks_neither() {
    let dir = tempfile::tempdir().unwrap();
    let engine = ShardEngine::open(&dir.path().join("source"), config(100_000)).unwrap();
    for batch in 0..4 {
        engine
            .upsert(
                (batch * 100..batch * 100 + 100)
                    .map(|d| doc(d, 0))
                    .collect(),
            )
            .unwrap();
        engine.seal().unwrap();
    }
    assert_eq!(engine.stats().sealed_segments, 4);
    let compaction = {
        let engine = Arc::clone(&engine);
        std::thread::spawn(move || engine.compact())
    };
    let taken = engine.snapshot(&dir.path().join("snap")).unwrap();
    compaction.join().unwrap().unwrap();
    assert_eq!(engine.stats().sealed_segments, 1, "the compaction ran");

    snapshot::restore(&dir.path().join("snap"), &dir.path().join("restored")).unwrap();
    let restored = ShardEngine::open(&dir.path().join("restored"), config(100_000)).unwrap();
    assert_eq!(restored.stats().live_documents, taken.live_documents);
    assert!(restored.stats().rebuilt_segments.is_empty());
    for d in [0, 150, 299, 399] {
        assert_eq!(
            answers(&restored, d),
            answers(&engine, d),
            "query for doc {d}"
        );
    }
}

#[test]
fn a_missing_truncated_or_altered_file_is_refused_by_name_and_nothing_is_restored() {
    let dir = tempfile::tempdir().unwrap();
    let source = busy_engine(&dir.path().join("source"));
    let damages: [(&str, Damage); 3] = [
        ("altered segment file", |snap| {
            let victim = first_file(&snap.join("segments"));
            let mut bytes = std::fs::read(&victim).unwrap();
            bytes[0] ^= 0xff;
            std::fs::write(&victim, bytes).unwrap();
            name_of(&victim)
        }),
        ("missing log file", |snap| {
            let victim = first_file(&snap.join("wal"));
            std::fs::remove_file(&victim).unwrap();
            name_of(&victim)
        }),
        ("truncated snapshot manifest", |snap| {
            let path = snap.join(SNAPSHOT_FILE);
            let bytes = std::fs::read(&path).unwrap();
            std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
            SNAPSHOT_FILE.to_string()
        }),
    ];
    for (i, (what, damage)) in damages.iter().enumerate() {
        let snap = dir.path().join(format!("snap-{i}"));
        source.snapshot(&snap).unwrap();
        let named = damage(&snap);
        let target = dir.path().join(format!("restored-{i}"));
        match snapshot::restore(&snap, &target) {
            Err(IndexError::Corrupt { path, .. }) => {
                assert!(
                    path.ends_with(&named),
                    "{what}: refused naming {path:?}, not {named}"
                )
            }
            other => panic!("{what}: {other:?}"),
        }
        assert!(!target.exists(), "{what}: something was restored");
        let staging = dir.path().join(format!(".restored-{i}.restoring"));
        assert!(
            !staging.exists(),
            "{what}: the staging directory was left behind"
        );
        match snapshot::verify(&snap) {
            Err(IndexError::Corrupt { path, .. }) => {
                assert!(path.ends_with(&named), "{what}: {path:?}")
            }
            other => panic!("{what}: verify said {other:?}"),
        }
    }
}

/// Damages a snapshot directory and returns the name of the file it damaged.
type Damage = fn(&Path) -> String;

fn first_file(dir: &Path) -> std::path::PathBuf {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                stack.push(p);
            } else if std::fs::metadata(&p).unwrap().len() > 0 {
                return p;
            }
        }
    }
    panic!("no file under {}", dir.display())
}

fn name_of(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}
