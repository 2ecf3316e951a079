//! What one replica row costs on disk, part by part: the cost model's disk figure ([`super::cluster_plan`]).
//! The single-shard fit it replaces saw a one-shot build's index and f32 vector file only (1.64 KB a row at
//! 384-d), while a cluster replica also writes the SQ8 copy, the chunk store, the BM25 index, the ingest log and
//! the near-duplicate keys — the 10M run measured 1.4× the fit, the 200k run with every default 5× (WAL files).
//!
//! Parts proportional to the dimension are exact (the file formats); the parts that follow the text and the ids
//! are linear in their bytes, with the constants measured at 500k through the router (`log_breakdown` and the
//! segment files of one replica, docs/decisions/disk-per-row.md) and checked at 300k and 500k (within 2.5%).

use serde::Serialize;

/// What a collection's rows hold and how its replicas store them.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RowLayout {
    pub dimension: usize,
    /// PQ code bytes per row (`index.m` at 8 bits).
    pub pq_m: usize,
    /// Mean bytes of a chunk's text (with its title) and of a document id.
    pub text_bytes: usize,
    pub id_bytes: usize,
    pub chunks_per_document: f64,
    /// Full vectors in half precision (every value within ±65,504).
    pub half_precision: bool,
    /// The ingest log keeps sealed rows' vectors (`engine.keep_sealed_vectors_in_log` resolved: replication 1).
    pub log_keeps_vectors: bool,
    /// Band entries a shard stores per document (`router.dedup.stored_bands`); None: the check is off.
    pub near_dup_bands: Option<usize>,
}

impl RowLayout {
    /// The cluster benchmark's corpus with every default: 384-d, one chunk of 12 words per document,
    /// ids `d123456`; whether the log keeps vectors as `engine.keep_sealed_vectors_in_log` resolves it.
    pub fn cluster_benchmark(log_keeps_vectors: bool, near_dup_bands: Option<usize>) -> Self {
        RowLayout {
            dimension: 384,
            pq_m: attest_index::ivfpq::IvfPqParams::default().m as usize,
            text_bytes: 67,
            id_bytes: 7,
            chunks_per_document: 1.0,
            half_precision: true,
            log_keeps_vectors,
            near_dup_bands,
        }
    }
}

/// Bytes per replica row, by part.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RowBytes {
    pub full_vectors: f64,
    pub sq8: f64,
    pub pq_codes: f64,
    pub chunk_store: f64,
    pub text_index: f64,
    pub log: f64,
    pub near_dup: f64,
}

impl RowBytes {
    pub fn total(&self) -> f64 {
        self.full_vectors
            + self.sq8
            + self.pq_codes
            + self.chunk_store
            + self.text_index
            + self.log
            + self.near_dup
    }
}

/// Per row of the inverted lists beside its code: its id (8 bytes) and FAISS's list bookkeeping (22 bytes at
/// 83,000 rows and 256 lists, 32 at 33,000), and the row's entry in `ids.i64` (8).
const PQ_ROW_EXTRA: f64 = 34.0;
/// The chunk store's record beside its strings: rkyv's string headers, the sequence number, metadata `{}`.
const CHUNK_RECORD: f64 = 39.0;
/// tantivy's postings, positions, norms and stored id per byte of text, and per row.
const TEXT_INDEX_PER_BYTE: f64 = 0.45;
const TEXT_INDEX_PER_ROW: f64 = 12.0;
/// A stripped log record beside its text and ids (bincode lengths, version), its entries in the `docs` (18 bytes)
/// and `changes` (11) families, and the write-ahead file of what came after the last seal (~28 when settled).
const LOG_RECORD: f64 = 44.0;
/// A stored document's entry in the `dedup` family without its bands: key, the low byte of 128 MinHash values,
/// the header, RocksDB's entry overhead (nothing here is compressed: this build links no compression library).
const NEAR_DUP_DOCUMENT: f64 = 165.0;
/// Per band stored: its key in the document's entry (8) and its bucket entry — tenant, band and band key (shared
/// with the previous entry's key in part), the document id, RocksDB's 8-byte sequence footer.
const NEAR_DUP_PER_BAND: f64 = 24.0;

pub fn row_bytes(l: &RowLayout) -> RowBytes {
    let dim = l.dimension as f64;
    let (text, id) = (l.text_bytes as f64, l.id_bytes as f64);
    // Chunk ids are the document id with `#n`; the tenant is "default" (7 bytes) in the benchmark.
    let ids = 2.0 * id + 2.0 + 7.0;
    RowBytes {
        full_vectors: dim * if l.half_precision { 2.0 } else { 4.0 },
        sq8: dim,
        pq_codes: l.pq_m as f64 + PQ_ROW_EXTRA,
        chunk_store: text + ids + CHUNK_RECORD,
        text_index: text * TEXT_INDEX_PER_BYTE + TEXT_INDEX_PER_ROW,
        log: text + ids + LOG_RECORD + if l.log_keeps_vectors { 4.0 * dim } else { 0.0 },
        near_dup: l.near_dup_bands.map_or(0.0, |bands| {
            (NEAR_DUP_DOCUMENT + bands as f64 * (NEAR_DUP_PER_BAND + id))
                / l.chunks_per_document.max(1.0)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parts_follow_the_layout() {
        let replicated = row_bytes(&RowLayout::cluster_benchmark(false, Some(16)));
        let single = row_bytes(&RowLayout::cluster_benchmark(true, Some(16)));
        assert_eq!(replicated.full_vectors, 768.0);
        assert_eq!(single.log - replicated.log, 4.0 * 384.0, "kept vectors");
        let unchecked = row_bytes(&RowLayout::cluster_benchmark(false, None));
        assert_eq!(unchecked.near_dup, 0.0);
        assert_eq!(replicated.total() - unchecked.total(), replicated.near_dup);
        // A document of four chunks spreads its keys over them.
        let four = row_bytes(&RowLayout {
            chunks_per_document: 4.0,
            ..RowLayout::cluster_benchmark(false, Some(16))
        });
        assert!((four.near_dup * 4.0 - replicated.near_dup).abs() < 1e-9);
    }
}
