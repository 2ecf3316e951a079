//! Ingest pipeline of Attest: turns raw corpora into validated, normalised documents, drops
//! near duplicates, and cuts documents into token-budgeted chunks for embedding.
//!
//! # Layout
//!
//! - [`error`]: `IngestError`, shared by every stage.
//! - [`normalize`]: `normalize_text` (NFKC, control characters, whitespace, paragraph breaks).
//! - [`document`]: `SourceDocument` and the `DocumentLimits` it is validated against.
//! - [`parse`]: JSONL / Markdown / plain-text parsers with per-line error reporting.
//! - [`dedup`]: MinHash-LSH near-duplicate index with deterministic hashing.
//! - [`chunk`]: sentence-packing chunker with title prefix and overlap.

pub mod chunk;
pub mod dedup;
pub mod document;
pub mod error;
pub mod normalize;
pub mod parse;

pub use chunk::{chunk_document, Chunk, ChunkingConfig, TokenCounter, WhitespaceTokenCounter};
pub use dedup::{MinHashConfig, NearDuplicateIndex, Sketch};
pub use document::{normalized_within, DocumentLimits, SourceDocument, DOCUMENT_FIELDS};
pub use error::IngestError;
pub use normalize::normalize_text;
pub use parse::{
    parse_file, parse_file_with, parse_jsonl, parse_jsonl_with, parse_markdown,
    parse_markdown_with, parse_plain_text, parse_plain_text_with, LineError, Parsed,
};
