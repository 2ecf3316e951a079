//! Segments of the layout before format version 1, whose IVF_PQ index returns the rows' global ids instead of
//! their row numbers (`SegmentMeta::row_labels` false): refused at open and rebuilt from the log in the current
//! layout, so the shard serves the same documents.

use std::sync::Arc;

use rand::{Rng, SeedableRng};

use crate::ivfpq::{IvfPqBuilder, IvfPqParams};
use crate::segment::{segment_dir, Manifest};
use crate::{DocumentWrite, EngineConfig, Filter, LoggedChunk, SearchParams, ShardEngine};

const DIM: usize = 16;

fn config() -> EngineConfig {
    EngineConfig {
        dimension: DIM,
        ivfpq: IvfPqParams {
            nlist: 16,
            m: 4,
            nbits: 8,
            nprobe: 16,
        },
        seal_threshold: 1_000_000, // sealed by hand
        train_sample: 1_200,
        merge_factor: 3,
        overfetch: 256,
        ..Default::default()
    }
}

fn vector(doc: usize) -> Vec<f32> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(doc as u64 * 31 + 7);
    let v: Vec<f32> = (0..DIM).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / n).collect()
}

fn write(engine: &Arc<ShardEngine>, docs: std::ops::Range<usize>) {
    let batch = docs
        .map(|d| DocumentWrite {
            doc_id: format!("doc-{d}"),
            tenant: "t1".into(),
            chunks: vec![LoggedChunk {
                chunk_id: format!("doc-{d}#0"),
                title: String::new(),
                text: format!("document {d}"),
                metadata_json: "{}".into(),
                vector: vector(d),
            }],
            version: 0,
            near_dup: None,
        })
        .collect();
    engine.upsert(batch).unwrap();
}

/// Documents of `docs` whose own vector does not find them first (dense lane, exact re-score).
fn missed(engine: &ShardEngine, docs: std::ops::Range<usize>) -> Vec<usize> {
    let filter = Filter::default();
    docs.filter(|&d| {
        let q = vector(d);
        let params = SearchParams {
            tenant: "t1",
            query_vector: Some(&q),
            query_text: None,
            k: 1,
            nprobe: None,
            filter: &filter,
            exact_rescore: true,
            payload_top: crate::ALL_PAYLOADS,
        };
        let hits = engine.search(&params).unwrap().dense;
        hits.first().map(|h| h.chunk_id.as_str()) != Some(format!("doc-{d}#0").as_str())
    })
    .collect()
}

/// Rewrites every segment encoded with the quantizer in the earlier layout: the index labelled with the global ids
/// of the id file, the manifest without `row_labels`.
fn to_global_id_labels(dir: &std::path::Path) {
    let mut manifest = Manifest::load(dir).unwrap();
    for meta in manifest.segments.iter_mut().filter(|m| m.row_labels) {
        let segment = crate::segment::SealedSegment::open(dir, meta).unwrap();
        let ids: Vec<i64> = (0..meta.rows).map(|row| segment.id_of(row)).collect();
        let path = segment.dense_path(dir);
        drop(segment);
        IvfPqBuilder::read(&path)
            .unwrap()
            .write_relabelled(&path, Some(&ids))
            .unwrap();
        meta.row_labels = false;
        let crc = crate::fsutil::file_crc32(&path).unwrap();
        let rel = path.strip_prefix(segment_dir(dir, &meta.id)).unwrap();
        *meta.files.get_mut(rel.to_str().unwrap()).unwrap() = crc;
    }
    manifest.store(dir).unwrap();
}

#[test]
fn segments_labelled_with_global_ids_are_rebuilt_from_the_log_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let engine = ShardEngine::open(dir.path(), config()).unwrap();
    for docs in [0..700, 700..1_000, 1_000..1_300] {
        write(&engine, docs);
        engine.seal().unwrap();
    }
    assert!(engine.delete("t1", "doc-5").unwrap());
    assert!(engine.delete("t1", "doc-1100").unwrap());
    assert_eq!(missed(&engine, 0..1_300), [5, 1_100]);
    drop(engine);
    to_global_id_labels(dir.path());
    let labelled = |dir: &std::path::Path| {
        let m = Manifest::load(dir).unwrap();
        m.segments.iter().map(|s| s.row_labels).collect::<Vec<_>>()
    };
    assert_eq!(labelled(dir.path()), [false, false, false]);

    let engine = ShardEngine::open(dir.path(), config()).unwrap();
    assert_eq!(
        labelled(dir.path()),
        [true, true, true],
        "every segment rebuilt in the current layout"
    );
    assert_eq!(missed(&engine, 0..1_300), [5, 1_100]);
}
