//! The shard's own quantizer (issue 18): once the shard holds enough vectors to train the configured IVF_PQ
//! parameters in full it trains one quantizer (on at most `train_sample` of them), every later segment encodes with it, merges move inverted lists instead of
//! training again, drift past the bound trains a new version while the old segments keep serving, and the
//! quantizer survives restarts, damage and snapshots.

use crate::common;

use std::path::Path;
use std::sync::Arc;

use attest_index::{DocumentWrite, EngineConfig, Filter, LoggedChunk, SearchParams, ShardEngine};
use common::DIM;
use rand::{Rng, SeedableRng};
use serde_json::Value;

/// The shared fixture's 16 lists and 4 × 8-bit codes (624 rows train them in full, so the first seal of at least
/// that many rows trains the shard's quantizer, on at most 1,200 of them); merges take 3 segments of a level.
fn config() -> EngineConfig {
    EngineConfig {
        seal_threshold: 1_000_000, // sealed by hand
        train_sample: 1_200,
        merge_factor: 3,
        // Half the dimensions hold up to 2,000 unit vectors densely: PQ alone ranks near neighbours loosely (this
        // test is about the quantizer's life, not PQ's precision), so the exact re-score looks at 256 candidates.
        overfetch: 256,
        ..common::config(1_000_000)
    }
}

/// A unit vector of document `doc` with its weight in dimensions `dims` only (the data the quantizer is
/// trained on, or a shift away from it).
fn vector(doc: usize, dims: std::ops::Range<usize>) -> Vec<f32> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(doc as u64 * 7919 + 1);
    let mut v = vec![0f32; DIM];
    for d in dims {
        v[d] = rng.gen_range(-1.0..1.0);
    }
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / n).collect()
}

fn write(engine: &Arc<ShardEngine>, docs: std::ops::Range<usize>, dims: std::ops::Range<usize>) {
    let batch: Vec<DocumentWrite> = docs
        .map(|d| DocumentWrite {
            doc_id: format!("doc-{d}"),
            tenant: "t1".into(),
            chunks: (0..2)
                .map(|c| LoggedChunk {
                    chunk_id: format!("doc-{d}#{c}"),
                    title: format!("Title {d}"),
                    text: format!("document {d} chunk {c}"),
                    metadata_json: "{}".into(),
                    // The second chunk a little off the first: both distinct, the first the nearest to its vector.
                    vector: if c == 0 {
                        vector(d, dims.clone())
                    } else {
                        vector(d + 1_000_000, dims.clone())
                    },
                })
                .collect(),
            version: 0,
            near_dup: None,
        })
        .collect();
    engine.upsert(batch).unwrap();
}

/// The dense lane's top `k` for `q`.
fn dense_hits(
    engine: &ShardEngine,
    q: &[f32],
    k: usize,
    nprobe: Option<u32>,
    exact_rescore: bool,
) -> Vec<attest_index::Hit> {
    let filter = Filter::default();
    let params = SearchParams {
        tenant: "t1",
        query_vector: Some(q),
        query_text: None,
        k,
        nprobe,
        filter: &filter,
        exact_rescore,
        payload_top: attest_index::ALL_PAYLOADS,
    };
    engine.search(&params).unwrap().dense
}

/// The nearest chunk to `q` (dense lane, exact re-score).
fn nearest(engine: &ShardEngine, q: &[f32]) -> Option<String> {
    dense_hits(engine, q, 1, None, true)
        .first()
        .map(|h| h.chunk_id.clone())
}

fn manifest(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("MANIFEST.json")).unwrap()).unwrap()
}

/// The quantizer version of every segment, in manifest order.
fn segment_versions(dir: &Path) -> Vec<Value> {
    manifest(dir)["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["quantizer"].clone())
        .collect()
}

/// Every document of `docs` (vectors in `dims`) is its own vector's nearest chunk.
fn all_found(engine: &ShardEngine, docs: std::ops::Range<usize>, dims: std::ops::Range<usize>) {
    for d in docs {
        assert_eq!(
            nearest(engine, &vector(d, dims.clone())).as_deref(),
            Some(format!("doc-{d}#0").as_str()),
            "doc {d}"
        );
    }
}

#[test]
fn segments_share_one_quantizer_and_merge_without_retraining() {
    let dir = tempfile::tempdir().unwrap();
    let engine = ShardEngine::open(dir.path(), config()).unwrap();
    // 200 documents (400 rows) are too few for the shard's quantizer: that segment trains its own.
    write(&engine, 0..200, 0..DIM);
    engine.seal().unwrap();
    assert!(manifest(dir.path())["quantizer"].is_null());
    assert_eq!(segment_versions(dir.path()), vec![Value::Null]);
    // 400 more documents (1,200 rows in the shard) train it, and every later seal encodes with it.
    write(&engine, 200..600, 0..DIM);
    engine.seal().unwrap();
    assert_eq!(manifest(dir.path())["quantizer"]["version"], 1);
    write(&engine, 600..900, 0..DIM);
    for d in [0, 250, 610] {
        assert!(engine.delete("t1", &format!("doc-{d}")).unwrap());
    }
    write(&engine, 300..310, 0..DIM); // rewritten: their old rows are dead
    engine.seal().unwrap();
    assert_eq!(
        segment_versions(dir.path()),
        vec![Value::Null, Value::from(1), Value::from(1)]
    );
    let found = |engine: &ShardEngine| {
        (0..900)
            .filter(|&d| {
                nearest(engine, &vector(d, 0..DIM)).as_deref()
                    == Some(format!("doc-{d}#0").as_str())
            })
            .collect::<Vec<_>>()
    };
    let live: Vec<usize> = (0..900).filter(|d| ![0, 250, 610].contains(d)).collect();
    assert_eq!(found(&engine), live);

    // Three segments are a full level (merge factor 3): they merge, the quantizer is not trained again.
    engine.merge_as_planned().unwrap();
    let m = manifest(dir.path());
    assert_eq!(m["quantizer"]["version"], 1);
    assert_eq!(m["quantizer_versions"], 1, "merging trained nothing");
    assert_eq!(segment_versions(dir.path()), vec![Value::from(1)]);
    assert_eq!(
        m["segments"][0]["row_labels"], true,
        "its index returns row numbers"
    );
    let stats = engine.stats();
    assert_eq!(stats.sealed_segments, 1);
    assert_eq!(stats.sealed_rows, 2 * (900 - 3), "the dead rows are gone");
    assert_eq!(
        found(&engine),
        live,
        "every live document found, no dead one"
    );

    // A restart opens the same quantizer; a damaged one is refused, segments keep serving and the next seal
    // trains version 2 (never 1 again: segments encoded with version 1 are still there).
    drop(engine);
    let engine = ShardEngine::open(dir.path(), config()).unwrap();
    all_found(&engine, 1..250, 0..DIM);
    drop(engine);
    let qfile = dir.path().join("quantizer/v000001.faiss");
    let mut bytes = std::fs::read(&qfile).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&qfile, bytes).unwrap();
    let engine = ShardEngine::open(dir.path(), config()).unwrap();
    assert!(manifest(dir.path())["quantizer"].is_null());
    all_found(&engine, 1..250, 0..DIM);
    write(&engine, 900..1300, 0..DIM);
    engine.seal().unwrap();
    assert_eq!(manifest(dir.path())["quantizer"]["version"], 2);
    engine.compact().unwrap();
    assert_eq!(segment_versions(dir.path()), vec![Value::from(2)]);
    all_found(&engine, 900..1300, 0..DIM);
    all_found(&engine, 1..250, 0..DIM);
}

#[test]
fn drift_trains_a_new_version_while_the_old_segments_keep_serving() {
    let dir = tempfile::tempdir().unwrap();
    let engine = ShardEngine::open(dir.path(), config()).unwrap();
    // Trained at the first seal (800 rows, enough for the fixture's parameters: no segment trains its own) on
    // vectors in the first half of the dimensions ...
    write(&engine, 0..400, 0..DIM / 2);
    engine.seal().unwrap();
    all_found(&engine, 0..400, 0..DIM / 2);
    write(&engine, 400..800, 0..DIM / 2);
    engine.seal().unwrap();
    all_found(&engine, 0..800, 0..DIM / 2);
    write(&engine, 800..1000, 0..DIM / 2);
    engine.seal().unwrap();
    assert_eq!(
        manifest(dir.path())["quantizer_versions"],
        1,
        "same data: no drift"
    );
    // ... then the data moves to the other half: that seal is encoded with version 1, then version 2 is trained.
    write(&engine, 1000..1400, DIM / 2..DIM);
    engine.seal().unwrap();
    let m = manifest(dir.path());
    assert_eq!(m["quantizer"]["version"], 2, "{m}");
    assert_eq!(
        segment_versions(dir.path()),
        vec![Value::from(1), 1.into(), 1.into(), 1.into()]
    );
    all_found(&engine, 0..1000, 0..DIM / 2);
    write(&engine, 1400..1800, DIM / 2..DIM);
    engine.seal().unwrap();
    assert_eq!(
        manifest(dir.path())["quantizer_versions"],
        2,
        "the new data fits version 2"
    );
    assert_eq!(
        segment_versions(dir.path()),
        vec![Value::from(1), 1.into(), 1.into(), 1.into(), 2.into()]
    );
    assert!(dir.path().join("quantizer/v000002.faiss").exists());
    assert!(!dir.path().join("quantizer/v000001.faiss").exists());

    // Merging re-encodes the older segments with version 2 (no training) and moves version 2's lists.
    engine.compact().unwrap();
    assert_eq!(segment_versions(dir.path()), vec![Value::from(2)]);
    assert_eq!(manifest(dir.path())["quantizer_versions"], 2);
    all_found(&engine, 0..1000, 0..DIM / 2);
    all_found(&engine, 1000..1800, DIM / 2..DIM);

    // A snapshot carries the quantizer: the restored replica opens with it.
    let elsewhere = tempfile::tempdir().unwrap();
    let (snap, target) = (
        elsewhere.path().join("snapshot"),
        elsewhere.path().join("replica"),
    );
    engine.snapshot(&snap).unwrap();
    attest_index::snapshot::restore(&snap, &target).unwrap();
    let reopened = ShardEngine::open(&target, config()).unwrap();
    assert_eq!(manifest(&target)["quantizer"]["version"], 2);
    all_found(&reopened, 1000..1200, DIM / 2..DIM);
}

/// The dense top 10 of `q` as (chunk, score), PQ scores as they are (no re-score): what the candidate lists
/// themselves hold.
fn pq_top10(engine: &ShardEngine, q: &[f32]) -> Vec<(String, f32)> {
    dense_hits(engine, q, 10, Some(3), false)
        .into_iter()
        .map(|h| (h.chunk_id, h.score))
        .collect()
}

#[test]
fn segments_of_one_version_are_searched_as_one() {
    let dir = tempfile::tempdir().unwrap();
    // A shallow list (4 × k), so that which candidates of which segment make the cut matters.
    let config = EngineConfig {
        overfetch: 4,
        ..config()
    };
    let engine = ShardEngine::open(dir.path(), config).unwrap();
    for docs in [0..400, 400..700, 700..1000] {
        write(&engine, docs, 0..DIM);
        engine.seal().unwrap();
    }
    assert_eq!(
        segment_versions(dir.path()),
        vec![Value::from(1), 1.into(), 1.into()]
    );
    let queries: Vec<Vec<f32>> = (0..40).map(|i| vector(5_000_000 + i, 0..DIM)).collect();
    let apart: Vec<_> = queries.iter().map(|q| pq_top10(&engine, q)).collect();
    // One segment holding the same codes (the lists moved, not re-encoded) answers exactly the same: the three
    // were assigned once, scanned the same lists and kept the best of one list.
    engine.compact().unwrap();
    assert_eq!(engine.stats().sealed_segments, 1);
    let merged: Vec<_> = queries.iter().map(|q| pq_top10(&engine, q)).collect();
    assert!(apart.iter().all(|hits| hits.len() == 10));
    assert_eq!(apart, merged);
}

#[test]
fn a_changed_list_count_trains_a_new_version_at_the_next_seal() {
    let dir = tempfile::tempdir().unwrap();
    let engine = ShardEngine::open(dir.path(), config()).unwrap();
    write(&engine, 0..400, 0..DIM);
    engine.seal().unwrap();
    assert_eq!(manifest(dir.path())["quantizer"]["params"]["nlist"], 16);
    drop(engine);
    // The operator sizes the lists for a smaller shard; the restart alone trains nothing.
    let mut fewer = config();
    fewer.ivfpq.nlist = 8;
    fewer.ivfpq.nprobe = 8;
    let engine = ShardEngine::open(dir.path(), fewer.clone()).unwrap();
    assert_eq!(manifest(dir.path())["quantizer"]["version"], 1);
    write(&engine, 400..600, 0..DIM);
    engine.seal().unwrap();
    let m = manifest(dir.path());
    assert_eq!(m["quantizer"]["version"], 2, "{m}");
    assert_eq!(m["quantizer"]["params"]["nlist"], 8);
    // The seal was encoded with version 1; the old segments serve until a merge re-encodes them.
    assert_eq!(segment_versions(dir.path()), vec![Value::from(1), 1.into()]);
    all_found(&engine, 0..600, 0..DIM);
    write(&engine, 600..700, 0..DIM);
    engine.seal().unwrap();
    assert_eq!(
        manifest(dir.path())["quantizer_versions"],
        2,
        "trained once"
    );
    engine.compact().unwrap();
    assert_eq!(segment_versions(dir.path()), vec![Value::from(2)]);
    all_found(&engine, 0..700, 0..DIM);
}
