//! Engine behaviour end to end on disk: search after write, tombstones, compaction, corrupt segments, bad input.

use crate::common;

use attest_index::{
    Condition, DocumentWrite, EngineConfig, Filter, IndexError, SearchParams, ShardEngine,
};
use common::*;
use serde_json::json;

#[test]
fn writes_are_searchable_at_once_in_both_lanes() {
    let dir = tempfile::tempdir().unwrap();
    let e = ShardEngine::open(dir.path(), config(1000)).unwrap();
    e.upsert((0..20).map(|d| doc(d, 0)).collect()).unwrap();
    assert_eq!(bm25_ids(&e, &token_for(7), 5), vec!["doc-7#0"]);
    assert_eq!(dense_ids(&e, &vector_for(7), 1), vec!["doc-7#0"]);
}

#[test]
fn sealed_segments_serve_the_same_results_and_survive_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = ShardEngine::open(dir.path(), config(100_000)).unwrap();
        e.upsert((0..400).map(|d| doc(d, 0)).collect()).unwrap();
        e.seal().unwrap();
        e.upsert((400..450).map(|d| doc(d, 0)).collect()).unwrap();
        let s = e.stats();
        assert_eq!(
            (s.sealed_segments, s.sealed_rows, s.growing_rows),
            (1, 400, 50)
        );
    }
    let e = ShardEngine::open(dir.path(), config(100_000)).unwrap();
    let s = e.stats();
    assert_eq!(
        (s.sealed_segments, s.sealed_rows, s.growing_rows),
        (1, 400, 50)
    );
    for d in [3, 250, 399, 420] {
        assert_eq!(bm25_ids(&e, &token_for(d), 3), vec![format!("doc-{d}#0")]);
        assert_eq!(dense_ids(&e, &vector_for(d), 1), vec![format!("doc-{d}#0")]);
    }
}

#[test]
fn deleted_and_replaced_documents_never_come_back() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = ShardEngine::open(dir.path(), config(100_000)).unwrap();
        e.upsert((0..300).map(|d| doc(d, 0)).collect()).unwrap();
        e.seal().unwrap();
        assert!(e.delete("t1", "doc-5").unwrap());
        assert!(
            !e.delete("t2", "doc-6").unwrap(),
            "another tenant cannot delete"
        );
        e.upsert(vec![doc(6, 1)]).unwrap();
        assert!(bm25_ids(&e, &token_for(5), 5).is_empty());
        assert!(!dense_ids(&e, &vector_for(5), 5).contains(&"doc-5#0".to_string()));
        e.seal().unwrap();
        e.compact().unwrap();
        assert!(bm25_ids(&e, &token_for(5), 5).is_empty());
    }
    let e = ShardEngine::open(dir.path(), config(100_000)).unwrap();
    assert!(bm25_ids(&e, &token_for(5), 5).is_empty());
    assert!(!dense_ids(&e, &vector_for(5), 5).contains(&"doc-5#0".to_string()));
    // The replaced document is found once, with its new text.
    let f = Filter::default();
    let p = SearchParams {
        tenant: "t1",
        query_vector: None,
        query_text: Some(&token_for(6)),
        k: 5,
        nprobe: None,
        filter: &f,
        exact_rescore: true,
        payload_top: attest_index::ALL_PAYLOADS,
    };
    let hits = e.search(&p).unwrap().bm25;
    assert_eq!(hits.len(), 1);
    assert!(hits[0].text.contains("version 1"));
    assert_eq!(e.stats().live_documents, 299);
}

#[test]
fn compaction_leaves_results_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let e = ShardEngine::open(dir.path(), config(100_000)).unwrap();
    for batch in 0..3 {
        e.upsert(
            (batch * 200..(batch + 1) * 200)
                .map(|d| doc(d, 0))
                .collect(),
        )
        .unwrap();
        e.seal().unwrap();
    }
    assert_eq!(e.stats().sealed_segments, 3);
    let queries: Vec<usize> = (0..600).step_by(37).collect();
    let before: Vec<(Vec<String>, Vec<String>)> = queries
        .iter()
        .map(|&d| {
            (
                bm25_ids(&e, &format!("document {}", token_for(d)), 10),
                dense_ids(&e, &vector_for(d), 10),
            )
        })
        .collect();
    e.compact().unwrap();
    assert_eq!(e.stats().sealed_segments, 1);
    let after: Vec<(Vec<String>, Vec<String>)> = queries
        .iter()
        .map(|&d| {
            (
                bm25_ids(&e, &format!("document {}", token_for(d)), 10),
                dense_ids(&e, &vector_for(d), 10),
            )
        })
        .collect();
    assert_eq!(before, after);
}

#[test]
fn corrupt_segment_is_refused_reported_and_rebuilt_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let seg_dir = {
        let e = ShardEngine::open(dir.path(), config(100_000)).unwrap();
        e.upsert((0..300).map(|d| doc(d, 0)).collect()).unwrap();
        e.seal().unwrap();
        e.segment_dirs().remove(0)
    };
    // Flip bytes in the middle of the FAISS file, and truncate the chunk store.
    let faiss = seg_dir.join("dense.faiss");
    let mut bytes = std::fs::read(&faiss).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid..mid + 64].iter_mut().for_each(|b| *b ^= 0xff);
    std::fs::write(&faiss, bytes).unwrap();
    let chunks = seg_dir.join("chunks.rkyv");
    let len = std::fs::metadata(&chunks).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&chunks)
        .unwrap()
        .set_len(len / 2)
        .unwrap();

    let e = ShardEngine::open(dir.path(), config(100_000)).unwrap();
    let s = e.stats();
    assert_eq!(
        s.rebuilt_segments.len(),
        1,
        "the damaged segment is reported"
    );
    assert_eq!((s.sealed_segments, s.sealed_rows), (1, 300));
    assert!(!seg_dir.exists(), "the damaged files are not served");
    for d in [0, 150, 299] {
        assert_eq!(bm25_ids(&e, &token_for(d), 3), vec![format!("doc-{d}#0")]);
        assert_eq!(dense_ids(&e, &vector_for(d), 1), vec![format!("doc-{d}#0")]);
    }
}

#[test]
fn tenant_and_metadata_filters_are_applied_in_the_shard() {
    let dir = tempfile::tempdir().unwrap();
    let e = ShardEngine::open(dir.path(), config(100_000)).unwrap();
    e.upsert((0..200).map(|d| doc(d, 0)).collect()).unwrap();
    e.seal().unwrap();
    e.upsert((200..260).map(|d| doc(d, 0)).collect()).unwrap();
    let f = Filter {
        conditions: vec![
            Condition::Equals {
                field: "parity".into(),
                value: json!("even"),
            },
            Condition::Range {
                field: "n".into(),
                gte: Some(100.0),
                gt: None,
                lte: None,
                lt: Some(230.0),
            },
        ],
    };
    let p = SearchParams {
        tenant: "t1",
        query_vector: Some(&vector_for(3)),
        query_text: Some("document"),
        k: 50,
        nprobe: None,
        filter: &f,
        exact_rescore: true,
        payload_top: attest_index::ALL_PAYLOADS,
    };
    let r = e.search(&p).unwrap();
    assert_eq!(r.dense.len(), 50);
    for h in r.dense.iter().chain(&r.bm25) {
        let n: usize = h.doc_id.trim_start_matches("doc-").parse().unwrap();
        assert!(
            n.is_multiple_of(2) && (100..230).contains(&n),
            "{} passed the filter",
            h.doc_id
        );
    }
    let other = SearchParams { tenant: "t2", ..p };
    let r = e.search(&other).unwrap();
    assert!(
        r.dense.is_empty() && r.bm25.is_empty(),
        "another tenant sees nothing"
    );
}

#[test]
fn bad_input_is_rejected_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let e = ShardEngine::open(dir.path(), config(100_000)).unwrap();
    let mut wrong_dim = doc(1, 0);
    wrong_dim.chunks[0].vector.pop();
    let mut nan = doc(2, 0);
    nan.chunks[0].vector[3] = f32::NAN;
    let mut inf = doc(3, 0);
    inf.chunks[0].vector[0] = f32::INFINITY;
    // One chunk more than a global row id can number (attest_index::quantizer).
    let mut huge = doc(4, 0);
    huge.chunks = (0..=attest_index::quantizer::MAX_CHUNKS_PER_DOCUMENT)
        .map(|i| attest_index::LoggedChunk {
            chunk_id: format!("doc-4#{i}"),
            ..huge.chunks[0].clone()
        })
        .collect();
    for (bad, field) in [
        (wrong_dim, "documents[1].chunks[0].vector"),
        (nan, "documents[1].chunks[0].vector"),
        (inf, "documents[1].chunks[0].vector"),
        (huge, "documents[1].chunks"),
    ] {
        match e.upsert(vec![doc(10, 0), bad]) {
            Err(IndexError::InvalidArgument { field: f, .. }) => assert_eq!(f, field),
            other => panic!("expected invalid argument, got {other:?}"),
        }
    }
    assert_eq!(e.stats().last_seq, 0, "nothing was logged");
    assert!(
        bm25_ids(&e, &token_for(10), 5).is_empty(),
        "the valid document of a rejected batch is not written"
    );
    let f = Filter::default();
    for k in [0, 1001] {
        let p = SearchParams {
            tenant: "t1",
            query_vector: None,
            query_text: Some("x"),
            k,
            nprobe: None,
            filter: &f,
            exact_rescore: true,
            payload_top: attest_index::ALL_PAYLOADS,
        };
        assert!(matches!(
            e.search(&p),
            Err(IndexError::InvalidArgument { .. })
        ));
    }
    let short = vec![0.5f32; DIM - 1];
    let p = SearchParams {
        tenant: "t1",
        query_vector: Some(&short),
        query_text: None,
        k: 5,
        nprobe: None,
        filter: &f,
        exact_rescore: true,
        payload_top: attest_index::ALL_PAYLOADS,
    };
    assert!(matches!(
        e.search(&p),
        Err(IndexError::InvalidArgument { .. })
    ));
}

#[test]
fn ids_are_per_tenant_and_a_write_never_reveals_another_tenants_id() {
    let dir = tempfile::tempdir().unwrap();
    let as_tenant = |tenant: &str, d: usize, version: usize| DocumentWrite {
        tenant: tenant.into(),
        ..doc(d, version)
    };
    let texts = |e: &ShardEngine, tenant: &str, d: usize| -> Vec<String> {
        let f = Filter::default();
        let p = SearchParams {
            tenant,
            query_vector: None,
            query_text: Some(&token_for(d)),
            k: 10,
            nprobe: None,
            filter: &f,
            exact_rescore: true,
            payload_top: attest_index::ALL_PAYLOADS,
        };
        e.search(&p)
            .unwrap()
            .bm25
            .into_iter()
            .map(|h| h.text)
            .collect()
    };
    {
        let e = ShardEngine::open(dir.path(), config(100_000)).unwrap();
        e.upsert(vec![as_tenant("t1", 7, 1)]).unwrap();
        // t2 writes the same id: accepted as its own document, not refused with "belongs to another tenant".
        e.upsert(vec![as_tenant("t2", 7, 2)]).unwrap();
        e.seal().unwrap();
        assert_eq!(e.stats().live_documents, 2);
        assert_eq!(texts(&e, "t1", 7).len(), 1);
        assert!(texts(&e, "t1", 7)[0].contains("version 1"));
        assert!(texts(&e, "t2", 7)[0].contains("version 2"));
        // One tenant's delete and replacement leave the other's document alone.
        assert!(e.delete("t2", "doc-7").unwrap());
        assert!(texts(&e, "t2", 7).is_empty());
        assert!(texts(&e, "t1", 7)[0].contains("version 1"));
        e.upsert(vec![as_tenant("t2", 7, 3)]).unwrap();
        e.seal().unwrap();
        e.compact().unwrap();
    }
    let e = ShardEngine::open(dir.path(), config(100_000)).unwrap();
    assert!(texts(&e, "t1", 7)[0].contains("version 1"));
    assert!(texts(&e, "t2", 7)[0].contains("version 3"));
    assert_eq!(texts(&e, "t2", 7).len(), 1);
    assert!(e.version_of("t1", "doc-7") < e.version_of("t2", "doc-7"));
    assert_eq!(e.version_of("t3", "doc-7"), 0);
}

#[test]
fn fetched_chunks_are_the_live_ones_of_the_tenant_across_seal_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let refs = |docs: &[usize]| -> Vec<(String, String)> {
        docs.iter()
            .map(|d| (format!("doc-{d}"), format!("doc-{d}#0")))
            .chain([("doc-1".to_string(), "doc-1#9".to_string())])
            .collect()
    };
    let texts = |e: &ShardEngine, tenant: &str, docs: &[usize]| -> Vec<(String, String)> {
        let mut got: Vec<(String, String)> = e
            .fetch_chunks(tenant, &refs(docs))
            .unwrap()
            .into_iter()
            .map(|h| (h.chunk_id, h.text))
            .collect();
        got.sort();
        got
    };
    {
        let e = ShardEngine::open(dir.path(), config(100_000)).unwrap();
        e.upsert((0..4).map(|d| doc(d, 1)).collect()).unwrap();
        e.seal().unwrap();
        e.upsert(vec![doc(2, 2)]).unwrap();
        assert!(e.delete("t1", "doc-3").unwrap());
        let got = texts(&e, "t1", &[0, 2, 3]);
        // doc-3 deleted, doc-1#9 never existed: left out; doc-2 in its current version, from the growing log.
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].0, "doc-0#0");
        assert!(got[1].1.contains("version 2"), "{got:?}");
        let full = e.fetch_chunks("t1", &refs(&[0])).unwrap();
        assert_eq!(full[0].title, "Title 0");
        assert_eq!(full[0].metadata_json, r#"{"n":0,"parity":"even"}"#);
        // Another tenant names the same ids: nothing.
        assert!(texts(&e, "t2", &[0, 2]).is_empty());
        assert!(e.fetch_chunks("", &refs(&[0])).is_err());
    }
    let e = ShardEngine::open(dir.path(), config(100_000)).unwrap();
    let got = texts(&e, "t1", &[0, 1, 2, 3]);
    assert_eq!(
        got.iter().map(|g| g.0.as_str()).collect::<Vec<_>>(),
        ["doc-0#0", "doc-1#0", "doc-2#0"]
    );
}

/// A sealed segment keeps an SQ8 copy of its vectors (listed and checksummed in the manifest) and ranks the deep
/// PQ list with it; what the dense lane returns is still scored exactly. A segment written before the copy
/// existed (no `vectors.sq8`: the layout before format version 1) is rebuilt from the log at open, with a copy,
/// and serves the same hits.
#[test]
fn sealed_segments_rank_with_the_sq8_copy_and_score_exactly_and_old_segments_are_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let queries = [3, 77, 150, 299];
    let dense = |e: &ShardEngine, d: usize| {
        let f = Filter::default();
        let q = vector_for(d);
        let p = SearchParams {
            tenant: "t1",
            query_vector: Some(&q),
            query_text: None,
            k: 5,
            nprobe: None,
            filter: &f,
            exact_rescore: true,
            payload_top: attest_index::ALL_PAYLOADS,
        };
        e.search(&p).unwrap().dense
    };
    let with_copy = {
        let e = ShardEngine::open(dir.path(), config(100_000)).unwrap();
        e.upsert((0..300).map(|d| doc(d, 0)).collect()).unwrap();
        e.seal().unwrap();
        let seg = e.segment_dirs().remove(0);
        let copy = attest_index::sq8::Sq8File::open(&seg.join("vectors.sq8")).unwrap();
        assert_eq!(copy.len(), 300);
        queries.map(|d| dense(&e, d))
    };
    for (hits, d) in with_copy.iter().zip(queries) {
        assert_eq!(hits[0].chunk_id, format!("doc-{d}#0"));
        for h in hits {
            let n: usize = h.doc_id["doc-".len()..].parse().unwrap();
            let exact: f32 = vector_for(d)
                .iter()
                .zip(vector_for(n))
                .map(|(a, b)| a * b)
                .sum();
            // Exact up to the full vectors' half precision (11 significant bits: under 2^-11 for unit vectors).
            assert!((h.score - exact).abs() < 5e-4, "{h:?} vs {exact}");
        }
    }
    // The manifest checksums the copy: damaging it is caught at start-up like any segment file.
    let manifest_path = dir.path().join(attest_index::segment::MANIFEST_FILE);
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    assert!(manifest["segments"][0]["files"]["vectors.sq8"].is_u64());
    // As a segment of an older release: no copy, not in the manifest.
    let seg_id = manifest["segments"][0]["id"].as_str().unwrap().to_string();
    std::fs::remove_file(
        dir.path()
            .join("segments")
            .join(&seg_id)
            .join("vectors.sq8"),
    )
    .unwrap();
    manifest["segments"][0]["files"]
        .as_object_mut()
        .unwrap()
        .remove("vectors.sq8");
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let e = ShardEngine::open(dir.path(), config(100_000)).unwrap();
    assert_eq!(e.stats().rebuilt_segments, vec![seg_id.clone()]);
    let rebuilt = e.segment_dirs().remove(0);
    assert!(
        rebuilt.join("vectors.sq8").exists(),
        "rebuilt with its copy"
    );
    let without_copy = queries.map(|d| dense(&e, d));
    let ids = |runs: &[Vec<attest_index::Hit>]| -> Vec<Vec<String>> {
        runs.iter()
            .map(|h| h.iter().map(|h| h.chunk_id.clone()).collect())
            .collect()
    };
    assert_eq!(ids(&with_copy), ids(&without_copy));
}

/// Two merges at once (the background's after a seal and a `Maintain` call's, say) each choose their inputs once
/// they hold the maintenance lock: the second sees the first's result instead of segments it has just removed,
/// so neither fails and no row is merged twice.
#[test]
fn concurrent_compactions_merge_each_row_once() {
    let dir = tempfile::tempdir().unwrap();
    let e = ShardEngine::open(dir.path(), config(100_000)).unwrap();
    for part in 0..3 {
        e.upsert((part * 100..part * 100 + 100).map(|d| doc(d, 0)).collect())
            .unwrap();
        e.seal().unwrap();
    }
    assert_eq!(e.stats().sealed_segments, 3);
    let start = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        let runs: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    e.compact()
                })
            })
            .collect();
        for r in runs {
            r.join().unwrap().unwrap();
        }
    });
    let stats = e.stats();
    assert_eq!((stats.sealed_segments, stats.sealed_rows), (1, 300));
    for d in [0, 150, 299] {
        assert_eq!(dense_ids(&e, &vector_for(d), 1), vec![format!("doc-{d}#0")]);
    }
}

/// Payload fetches read the log without the writer lock, beside writers that replace the very documents fetched,
/// seal and compact (which forgets superseded records): every fetch still finds every live chunk.
#[test]
fn fetches_beside_writes_seals_and_compactions_find_every_live_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let e = ShardEngine::open(dir.path(), config(100_000)).unwrap();
    e.upsert((0..300).map(|d| doc(d, 0)).collect()).unwrap();
    e.seal().unwrap();
    let wanted: Vec<(String, String)> = (0..50)
        .map(|d| (format!("doc-{d}"), format!("doc-{d}#0")))
        .collect();
    let writing = std::sync::atomic::AtomicBool::new(true);
    std::thread::scope(|s| {
        s.spawn(|| {
            for version in 1..=6 {
                e.upsert((0..300).map(|d| doc(d, version)).collect())
                    .unwrap();
                e.seal().unwrap();
                e.compact().unwrap();
            }
            writing.store(false, std::sync::atomic::Ordering::SeqCst);
        });
        let mut fetches = 0;
        while writing.load(std::sync::atomic::Ordering::SeqCst) || fetches < 10 {
            let hits = e.fetch_chunks("t1", &wanted).unwrap();
            assert_eq!(hits.len(), 50, "fetch {fetches}");
            assert!(hits.iter().all(|h| h.text.contains("version")));
            fetches += 1;
        }
    });
    let hits = e.fetch_chunks("t1", &wanted).unwrap();
    assert!(hits.iter().all(|h| h.text.contains("version 6")));
}

/// The log's records after the engine in `dir` has closed: the doc id of each upsert, `None` for a delete.
fn logged(dir: &std::path::Path) -> Vec<Option<String>> {
    let log = attest_index::wal::IngestLog::open(&dir.join("wal")).unwrap();
    log.range(1, log.last_seq())
        .unwrap()
        .into_iter()
        .map(|(_, op)| match op {
            attest_index::wal::LogOp::Upsert { doc_id, .. } => Some(doc_id),
            attest_index::wal::LogOp::Delete { .. } => None,
        })
        .collect()
}

/// A compaction forgets the log records of replaced and deleted documents: those that died while the engine ran
/// (kept as they die, no scan of the log) and, after a restart, those that died before it (one scan).
#[test]
fn compactions_forget_dead_records_seen_dying_and_from_before_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let e = ShardEngine::open(dir.path(), config(100_000)).unwrap();
    e.upsert((0..40).map(|d| doc(d, 0)).collect()).unwrap();
    e.seal().unwrap();
    // Replaced and deleted, then sealed: dead but not yet forgotten (no compaction since).
    e.upsert((0..5).map(|d| doc(d, 1)).collect()).unwrap();
    assert!(e.delete("t1", "doc-30").unwrap());
    e.seal().unwrap();
    drop(e);
    let before = logged(dir.path());
    assert_eq!(
        before.len(),
        40 + 5 + 1,
        "nothing forgotten without a compaction"
    );

    // After a restart: those died before this process; more die in it; a compaction forgets both kinds.
    let e = ShardEngine::open(dir.path(), config(100_000)).unwrap();
    e.upsert((5..8).map(|d| doc(d, 1)).collect()).unwrap();
    assert!(e.delete("t1", "doc-31").unwrap());
    e.seal().unwrap();
    e.compact().unwrap();
    // Only what died in this process from here on: replaced again, deleted, then compacted.
    e.upsert((0..2).map(|d| doc(d, 2)).collect()).unwrap();
    assert!(e.delete("t1", "doc-32").unwrap());
    e.seal().unwrap();
    e.compact().unwrap();
    let live = e.stats();
    drop(e);

    let mut left = logged(dir.path());
    assert!(
        left.iter().all(Option::is_some),
        "delete records forgotten: {left:?}"
    );
    left.sort();
    let mut want: Vec<Option<String>> = (0..40)
        .filter(|d| ![30, 31, 32].contains(d))
        .map(|d| Some(format!("doc-{d}")))
        .collect();
    want.sort();
    assert_eq!(left, want, "one record per live document");
    assert_eq!(live.sealed_rows, 37);
    // Nothing live was forgotten: a reopened engine serves the latest version of each.
    let e = ShardEngine::open(dir.path(), config(100_000)).unwrap();
    let wanted: Vec<(String, String)> = [0, 1, 2, 6, 9]
        .iter()
        .map(|d| (format!("doc-{d}"), format!("doc-{d}#0")))
        .collect();
    let hits = e.fetch_chunks("t1", &wanted).unwrap();
    assert_eq!(hits.len(), 5);
    for (d, version) in [(0, 2), (1, 2), (2, 1), (6, 1), (9, 0)] {
        let hit = hits.iter().find(|h| h.doc_id == format!("doc-{d}"));
        let text = &hit.expect("fetched").text;
        assert!(text.contains(&format!("version {version}")), "{text}");
    }
}

/// Only the best `payload_top` hits of each lane carry title, text and metadata; the rest come with ids and
/// scores alone, in the same order and with the same scores as with every payload.
#[test]
fn only_the_best_payload_top_hits_carry_their_payload() {
    let dir = tempfile::tempdir().unwrap();
    let e = ShardEngine::open(dir.path(), config(1000)).unwrap();
    e.upsert((0..30).map(|d| doc(d, 0)).collect()).unwrap();
    let f = Filter::default();
    let search = |payload_top: usize| {
        let p = SearchParams {
            tenant: "t1",
            query_vector: Some(&vector_for(3)),
            query_text: Some("document"),
            k: 8,
            nprobe: None,
            filter: &f,
            exact_rescore: true,
            payload_top,
        };
        e.search(&p).unwrap()
    };
    let (all, top3) = (search(attest_index::ALL_PAYLOADS), search(3));
    for (every, cut) in [(&all.dense, &top3.dense), (&all.bm25, &top3.bm25)] {
        assert_eq!(every.len(), 8);
        for (rank, (a, b)) in every.iter().zip(cut).enumerate() {
            assert_eq!(
                (&a.chunk_id, &a.doc_id, a.score),
                (&b.chunk_id, &b.doc_id, b.score)
            );
            assert!(!a.text.is_empty() && !a.title.is_empty());
            match rank < 3 {
                true => assert_eq!(a, b),
                false => {
                    assert!(b.text.is_empty() && b.title.is_empty() && b.metadata_json.is_empty())
                }
            }
        }
    }
}

/// Asking the page cache ahead (`engine.prefetch_rows`) changes when rows are read, never which are returned:
/// both lanes over two sealed segments, with deleted documents among the best candidates, give the same hits
/// and scores with it on and off.
#[test]
fn prefetching_rows_changes_no_result() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = ShardEngine::open(dir.path(), config(100_000)).unwrap();
        e.upsert((0..1_500).map(|d| doc(d, 0)).collect()).unwrap();
        e.seal().unwrap();
        e.upsert((1_500..3_000).map(|d| doc(d, 0)).collect())
            .unwrap();
        e.seal().unwrap();
        for d in (0..3_000).step_by(7) {
            assert!(e.delete("t1", &format!("doc-{d}")).unwrap());
        }
    }
    let search = |prefetch_rows: bool| {
        let e = ShardEngine::open(
            dir.path(),
            EngineConfig {
                prefetch_rows,
                ..config(100_000)
            },
        )
        .unwrap();
        assert_eq!(e.stats().sealed_segments, 2);
        let f = Filter::default();
        (0..40)
            .map(|i| {
                let q = near_query(i, 3_000);
                let text = token_for((i * 61 % 428) * 7 + 3);
                let p = SearchParams {
                    tenant: "t1",
                    query_vector: Some(&q),
                    query_text: Some(&text),
                    k: 10,
                    nprobe: Some(4),
                    filter: &f,
                    exact_rescore: true,
                    payload_top: attest_index::ALL_PAYLOADS,
                };
                let found = e.search(&p).unwrap();
                let hits = |h: Vec<attest_index::Hit>| -> Vec<(String, u32)> {
                    h.into_iter()
                        .map(|h| (h.chunk_id, h.score.to_bits()))
                        .collect()
                };
                (hits(found.dense), hits(found.bm25))
            })
            .collect::<Vec<_>>()
    };
    let (on, off) = (search(true), search(false));
    assert!(on
        .iter()
        .all(|(dense, bm25)| dense.len() == 10 && !bm25.is_empty()));
    let number = |id: &str| -> usize { id["doc-".len()..id.len() - "#0".len()].parse().unwrap() };
    let returned = on.iter().flat_map(|(dense, bm25)| dense.iter().chain(bm25));
    assert!(
        returned.map(|(id, _)| number(id)).all(|d| d % 7 != 0),
        "a deleted document came back"
    );
    assert_eq!(on, off);
}

/// The hits of a dense lane carry their full vectors' scores even where the setting ranks candidates by their
/// SQ8 copies alone (`exact_refine` 0): the router merges the shards' lists by score, and copies' scores scramble
/// that merge (`engine.exact_scores`). Switched off, the copies' scores are what a hit carries.
#[test]
fn dense_hits_carry_their_full_vectors_scores_whatever_the_re_scoring_depth() {
    let f16 = |v: Vec<f32>| -> Vec<f32> {
        v.into_iter()
            .map(|x| half::f16::from_f32(x).to_f32())
            .collect()
    };
    let worst_error = |exact_scores: bool| {
        let dir = tempfile::tempdir().unwrap();
        let e = sealed_with(
            dir.path(),
            EngineConfig {
                exact_refine: 0,
                exact_scores,
                ..config(1_000)
            },
            3_000,
        );
        let mut worst = 0.0f32;
        for i in 0..20 {
            let q = near_query(i, 3_000);
            let filter = Filter::default();
            let hits = e
                .search(&SearchParams::dense("t1", &q, 10, Some(4), &filter))
                .unwrap()
                .dense;
            assert_eq!(hits.len(), 10);
            for h in hits {
                let d: usize = h.doc_id.trim_start_matches("doc-").parse().unwrap();
                let stored = f16(vector_for(d));
                let exact: f32 = stored.iter().zip(&q).map(|(a, b)| a * b).sum();
                worst = worst.max((h.score - exact).abs());
            }
        }
        worst
    };
    let exact = worst_error(true);
    assert!(exact < 1e-4, "scores off by {exact}");
    let copies = worst_error(false);
    assert!(
        copies > 1e-3,
        "the SQ8 copies' scores should differ: {copies}"
    );
}
