//! Text embedders for Attest.
//!
//! Turns text into dense, L2-normalised vectors for the vector index, and counts model tokens
//! for the chunker's budget. The production embedder is all-MiniLM-L6-v2 (384-d), run locally on
//! the CPU by ONNX Runtime (or candle) from weights installed on disk by `make models`; nothing is
//! ever fetched from a model hub at run time. The weights are verified against the sha256 hashes
//! committed in `models.sha256` on every load (through `attest_models::checksum`); ONNX Runtime is
//! `attest_models::onnx`'s, shared with the reader.
//!
//! # Layout
//! - [`embedder`]: the [`Embedder`] trait every embedder implements (synchronous; callers run it
//!   on a blocking thread), plus small vector helpers.
//! - [`minilm`]: [`MiniLmEmbedder`], the local all-MiniLM-L6-v2 BERT model (tokenize, forward
//!   with attention mask, mean pooling, L2 normalisation).
//! - [`onnx`]: [`OnnxMiniLmEmbedder`], the same model under ONNX Runtime (the default runtime: 5.5× candle's
//!   throughput at the same vectors), the runtime library loaded at start-up and checksummed like the weights.
//! - [`bge`]: [`OnnxBgeEmbedder`], bge-small-en-v1.5 under ONNX Runtime (CLS pooling, a query instruction; see
//!   [`Embedder::query_prefix`]), chosen with `embedder.local.model`.
//! - [`config`]: [`LocalEmbedderConfig`] (model directory, runtime, batch size, threads, max sequence length) and
//!   [`default_model_dir`].
//! - [`cache`]: [`CachedEmbedder`], a bounded LRU cache of embeddings keyed by exact text, for
//!   repeated queries.
//! - [`remote`]: [`RemoteEmbedder`], HTTP clients for OpenAI-compatible `/v1/embeddings` and
//!   text-embeddings-inference `/embed` (batching, timeouts, a retry budget).
//! - [`breaker`]: [`CircuitBreaker`] (closed → open → half-open → closed) with its gauge and trip counter.
//! - [`guarded`]: [`GuardedEmbedder`], embedding metrics plus the breaker in front of a remote embedder.
//! - [`select`]: [`EmbedderConfig`] (the `embedder:` config section) and [`build_embedder`].
//! - [`server`]: `attest serve --role embedder`, an embedding service speaking both HTTP APIs.
//! - [`error`]: the [`EmbedError`] enum.

pub mod bge;
pub mod breaker;
pub mod cache;
pub mod config;
pub mod embedder;
pub mod error;
pub mod guarded;
pub mod identity;
pub mod minilm;
pub mod onnx;
pub mod remote;
pub mod select;
pub mod server;

pub use bge::OnnxBgeEmbedder;
pub use breaker::{BreakerConfig, BreakerState, CircuitBreaker};
pub use cache::{CachedEmbedder, DEFAULT_CACHE_CAPACITY};
pub use config::{
    default_dir, default_model_dir, LocalEmbedderConfig, LocalModel, LocalRuntime,
    BGE_QUERY_PREFIX, BGE_SMALL_ID, MINILM_ID, MODEL_DIR_ENV,
};
pub use embedder::{cosine_similarity, Embedder};
pub use error::EmbedError;
pub use guarded::GuardedEmbedder;
pub use identity::EmbedderIdentity;
pub use minilm::{MiniLmEmbedder, MINILM_DIMENSION, MODEL_FILES};
pub use onnx::{OnnxMiniLmEmbedder, ONNX_MODEL_FILE};
pub use remote::{RemoteApi, RemoteEmbedder, RemoteEmbedderConfig};
pub use select::{build_embedder, EmbedderBackend, EmbedderConfig};
