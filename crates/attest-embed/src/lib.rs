//! Text embedders for Attest.
//!
//! Turns text into dense, L2-normalised vectors for the vector index, and counts model tokens
//! for the chunker's budget. The local models (bge-small-en-v1.5 by default, all-MiniLM-L6-v2) run on the CPU
//! from weights installed on disk by `make models`; nothing is ever fetched from a model hub at run time. Their
//! runtimes, the [`Embedder`] trait, [`EmbedderIdentity`] and [`EmbedError`] are `attest_models::embed`'s, re-exported
//! here under the names they always had ([`embedder`], [`minilm`], [`onnx`], [`config`], [`identity`],
//! [`error`]), so that no crate above the models crate touches ONNX Runtime or candle.
//!
//! # Layout
//! - [`cache`]: [`CachedEmbedder`], a bounded LRU cache of embeddings keyed by exact text, for
//!   repeated queries.
//! - [`remote`]: [`RemoteEmbedder`], HTTP clients for OpenAI-compatible `/v1/embeddings` and
//!   text-embeddings-inference `/embed` (batching, timeouts, a retry budget).
//! - [`breaker`]: [`CircuitBreaker`] (closed → open → half-open → closed) with its gauge and trip counter.
//! - [`guarded`]: [`GuardedEmbedder`], embedding metrics plus the breaker in front of a remote embedder.
//! - [`select`]: [`EmbedderConfig`] (the `embedder:` config section) and [`build_embedder`].
//! - [`server`]: `attest serve --role embedder`, an embedding service speaking both HTTP APIs.

pub use attest_models::embed::{config, embedder, error, identity, minilm, onnx};
pub mod breaker;
pub mod cache;
pub mod guarded;
pub mod remote;
pub mod select;
pub mod server;

pub use breaker::{BreakerConfig, BreakerState, CircuitBreaker};
pub use cache::{CachedEmbedder, DEFAULT_CACHE_CAPACITY};
pub use config::{
    default_dir, default_model_dir, LocalEmbedderConfig, LocalModel, LocalRuntime, BGE_QA_ID,
    BGE_QUERY_PREFIX, BGE_SMALL_ID, MINILM_ID, MODEL_DIR_ENV,
};
pub use embedder::{cosine_similarity, Embedder};
pub use error::EmbedError;
pub use guarded::GuardedEmbedder;
pub use identity::EmbedderIdentity;
pub use minilm::{MiniLmEmbedder, MINILM_DIMENSION, MODEL_FILES};
pub use onnx::{OnnxEmbedder, ONNX_MODEL_FILE};
pub use remote::{RemoteApi, RemoteEmbedder, RemoteEmbedderConfig};
pub use select::{build_embedder, EmbedderBackend, EmbedderConfig};
