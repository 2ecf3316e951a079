//! Shared fixtures for the engine's integration tests: small deterministic documents with unit vectors.

use attest_index::{
    DocumentWrite, EngineConfig, Filter, IvfPqParams, LoggedChunk, SearchParams, ShardEngine,
};
use rand::{Rng, SeedableRng};

pub const DIM: usize = 16;

pub fn config(seal_threshold: usize) -> EngineConfig {
    EngineConfig {
        dimension: DIM,
        ivfpq: IvfPqParams {
            nlist: 16,
            m: 4,
            nbits: 8,
            nprobe: 16,
        },
        seal_threshold,
        train_sample: 10_000,
        max_sealed_segments: 8,
        overfetch: 4,
        // The probe's thread and queue are the process's: a test that does not measure the probe leaves them to
        // the tests that do (its rests after other tests' samples made those wait past their deadlines).
        recall_probe: attest_index::recall_probe::RecallProbeConfig {
            sample_rate: 0.0,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A deterministic unit vector for a document.
/// A replica of `rows` documents ([`doc`]) opened with `config` and sealed: the searches of the probe's and the
/// tuning's tests run against sealed lists.
pub fn sealed_with(
    dir: &std::path::Path,
    config: EngineConfig,
    rows: usize,
) -> std::sync::Arc<ShardEngine> {
    let engine = ShardEngine::open(dir, config).unwrap();
    engine
        .upsert((0..rows).map(|d| doc(d, 0)).collect())
        .unwrap();
    engine.seal().unwrap();
    assert!(engine.stats().sealed_rows >= 2_000, "{:?}", engine.stats());
    engine
}

pub fn vector_for(doc: usize) -> Vec<f32> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(doc as u64);
    let v: Vec<f32> = (0..DIM).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / n).collect()
}

/// A query near stored document `i * 37 % rows` (its vector nudged toward an unstored one), not a stored row.
pub fn near_query(i: usize, rows: usize) -> Vec<f32> {
    let a = vector_for(i * 37 % rows);
    let b = vector_for(100_000 + i);
    a.iter().zip(&b).map(|(x, y)| x + 0.3 * y).collect()
}

/// The chunk ids (`doc-N#0`) of the exact top `k` of `q` among `rows` (row i is document `first + i`).
pub fn exact_top_k(q: &[f32], rows: &[Vec<f32>], first: usize, k: usize) -> Vec<String> {
    let mut scored: Vec<(usize, f32)> = rows
        .iter()
        .enumerate()
        .map(|(i, v)| (first + i, v.iter().zip(q).map(|(a, b)| a * b).sum()))
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    scored
        .iter()
        .take(k)
        .map(|(d, _)| format!("doc-{d}#0"))
        .collect()
}

/// Chunk ids of the dense lane's top `k` for `q` (tenant `t1`) served with `nprobe` (None: the replica's own
/// setting).
pub fn dense_ids_probing(
    engine: &ShardEngine,
    q: &[f32],
    k: usize,
    nprobe: Option<u32>,
) -> Vec<String> {
    let filter = Filter::default();
    engine
        .search(&SearchParams::dense("t1", q, k, nprobe, &filter))
        .unwrap()
        .dense
        .into_iter()
        .map(|h| h.chunk_id)
        .collect()
}

/// The share of the `exact` ids that were `served`.
pub fn recall_of(served: &[String], exact: &[String]) -> f64 {
    exact.iter().filter(|id| served.contains(id)).count() as f64 / exact.len() as f64
}

/// A unique word per document, so BM25 can find each one alone: fixed width, and letters the English
/// stemmer never strips (no vowels, no `s`/`d`/`y`), so two documents' words never share a stem.
pub fn token_for(doc: usize) -> String {
    const LETTERS: &[u8] = b"bcfghjklmn";
    let letters: String = format!("{doc:08}")
        .bytes()
        .map(|c| LETTERS[(c - b'0') as usize] as char)
        .collect();
    format!("zq{letters}x")
}

pub fn doc(doc: usize, version: usize) -> DocumentWrite {
    DocumentWrite {
        doc_id: format!("doc-{doc}"),
        tenant: "t1".into(),
        chunks: vec![LoggedChunk {
            chunk_id: format!("doc-{doc}#0"),
            title: format!("Title {doc}"),
            text: format!(
                "document {} version {version} about {}",
                doc,
                token_for(doc)
            ),
            metadata_json: format!(
                r#"{{"n":{doc},"parity":"{}"}}"#,
                if doc.is_multiple_of(2) { "even" } else { "odd" }
            ),
            vector: vector_for(doc),
        }],
        version: 0,
        near_dup: None,
    }
}

/// The top `k` of a search of tenant `t1` by a vector or a text (exact re-scoring): (dense, BM25) chunk ids.
fn lane_ids(
    engine: &ShardEngine,
    query_vector: Option<&[f32]>,
    query_text: Option<&str>,
    k: usize,
) -> (Vec<String>, Vec<String>) {
    let f = Filter::default();
    let p = SearchParams {
        tenant: "t1",
        query_vector,
        query_text,
        k,
        nprobe: None,
        filter: &f,
        exact_rescore: true,
        payload_top: attest_index::ALL_PAYLOADS,
    };
    let found = engine.search(&p).unwrap();
    let ids = |hits: Vec<attest_index::Hit>| hits.into_iter().map(|h| h.chunk_id).collect();
    (ids(found.dense), ids(found.bm25))
}

/// Chunk ids of the BM25 lane's top `k` for `text` (tenant `t1`).
pub fn bm25_ids(engine: &ShardEngine, text: &str, k: usize) -> Vec<String> {
    lane_ids(engine, None, Some(text), k).1
}

/// Chunk ids of the dense lane's top `k` for `q` (tenant `t1`, exact re-scoring).
pub fn dense_ids(engine: &ShardEngine, q: &[f32], k: usize) -> Vec<String> {
    dense_ids_probing(engine, q, k, None)
}

/// What a replica's catch-up does (`attest_shard::catchup`), in process: pages through `from`'s versions,
/// fetches the documents newer there than in `to` and writes them (deletes as deletes) with `from`'s versions.
pub fn copy_newer(from: &ShardEngine, to: &std::sync::Arc<ShardEngine>) {
    let mut after = String::new();
    loop {
        let (page, _) = from.doc_versions_after(&after, 16).unwrap();
        let Some((last_id, last)) = page.last() else {
            return;
        };
        after = attest_index::doc_key(&last.tenant, last_id);
        let wanted: Vec<(String, String)> = page
            .into_iter()
            .filter(|(id, v)| v.version > to.version_of(&v.tenant, id))
            .map(|(id, v)| (v.tenant, id))
            .collect();
        let mut upserts = Vec::new();
        for f in from.fetch_documents(&wanted).unwrap() {
            match f {
                attest_index::FetchedDocument::Live(w) => upserts.push(w),
                attest_index::FetchedDocument::Tombstone {
                    doc_id,
                    tenant,
                    version,
                } => {
                    to.delete_versioned(&tenant, &doc_id, version).unwrap();
                }
            }
        }
        to.upsert(upserts).unwrap();
    }
}
