//! The shard storage engine of Attest: everything one shard replica keeps on disk and searches.
//!
//! # Layout
//! - [`engine`]: `ShardEngine` — writes, deletes (tombstones), search, sealing, compaction, recovery.
//! - [`wal`]: the RocksDB write-ahead ingest log and the per-document version map (the tombstones).
//! - [`near_dup`]: the near-duplicate keys (MinHash signature, LSH bands) of live documents, beside the log.
//! - [`sealed_vectors`]: the log's copies of sealed rows' vectors, dropped at compaction where configured.
//! - [`growing`]: the growing segment — exact vector search and an in-RAM tantivy index.
//! - [`segment`]: sealed segments on disk and the manifest that lists them with checksums.
//! - [`ivfpq`]: the FAISS IVF_PQ index of a sealed segment, opened memory-mapped.
//! - `labels`: rewrites a merged IVF_PQ file's labels to the segment's row numbers.
//! - [`coarse`]: one coarse assignment searched in every segment encoded with the same quantizer.
//! - [`text_index`]: tantivy BM25 per segment with statistics shared across segments.
//! - [`chunk_store`]: chunk texts and metadata archived with rkyv, read zero-copy.
//! - [`vector_file`]: full vectors on disk for exact re-scoring.
//! - `simd`: the inner products of the scan loops (f32, and f32 against f16 centroids).
//! - [`sq8`]: the byte-per-dimension copy of those vectors that re-scores deep candidate lists in memory.
//! - [`filter`]: metadata filters (equality, membership, range).
//! - [`maintenance`]: the node-wide limit on concurrent seals and compactions.
//! - [`recall_probe`]: the live recall estimate — a sample of searches run again exactly, off the request path.
//! - [`search_tuning`]: the collection's recall target — each replica measures its search settings and serves
//!   with the fastest that reaches it.
//! - [`snapshot`]: a replica's consistent snapshot (log checkpoint, linked segments, sha256 of every file),
//!   verified and restored.
//! - [`config`]: engine configuration and limits.
//! - [`error`]: the crate's error type.

mod bucket_presence;
mod changes;
pub mod chunk_store;
pub mod coarse;
pub mod config;
mod delivered_recall;
pub mod engine;
pub mod error;
pub mod filter;
pub mod freed_memory;
pub mod fsutil;
pub mod growing;
mod idle_seal;
pub mod ivfpq;
mod labels;
mod log_identity;
pub mod maintenance;
pub mod mapped_file;
pub mod merge;
pub mod near_dup;
pub(crate) mod page_cache;
pub mod quantizer;
pub mod recall_probe;
pub mod sealed_vectors;
pub mod search_tuning;
pub mod segment;
#[doc(hidden)]
pub mod simd;
pub mod snapshot;
pub mod sq8;
pub mod text_index;
pub mod vector_file;
pub mod wal;

pub use config::{EngineConfig, MAX_TOP_K};
pub use engine::{
    DocumentWrite, EngineStats, FetchedDocument, Hit, LaneResults, SearchParams, ShardEngine,
    ALL_PAYLOADS,
};
pub use error::{IndexError, Result};
pub use filter::{Condition, Filter};
pub use ivfpq::IvfPqParams;
pub use near_dup::{NearDupKeys, NearDupMatch};
pub use sealed_vectors::LogVectors;
pub use wal::{doc_key, DocVersion, LoggedChunk};
