//! The embedding models run in process, and what every embedder is. `attest-embed` builds on these (the remote
//! clients, the cache, the circuit breaker, the embedder role) and re-exports them.
//!
//! - [`embedder`]: the [`Embedder`] trait every embedder implements (synchronous; callers run it on a blocking
//!   thread), plus small vector helpers; [`identity`]: [`EmbedderIdentity`], what makes two embedders give vectors
//!   of one space; [`error`]: [`EmbedError`].
//! - [`minilm`]: [`MiniLmEmbedder`], all-MiniLM-L6-v2 run by candle (tokenize, forward with the attention mask,
//!   mean pooling, L2 normalisation).
//! - [`onnx`]: [`OnnxEmbedder`], the local models under ONNX Runtime (the default runtime): MiniLM (5.5× candle's
//!   throughput at the same vectors) and bge-small-en-v1.5 (CLS pooling, a query instruction; see
//!   [`Embedder::query_prefix`]).
//! - [`config`]: [`LocalEmbedderConfig`] (model directory, runtime, batch size, threads, maximum sequence length),
//!   the local models' ids and the checksums of their files.

pub mod config;
pub mod embedder;
pub mod error;
pub mod identity;
pub mod minilm;
pub mod onnx;

pub use config::{
    default_dir, default_model_dir, LocalEmbedderConfig, LocalModel, LocalRuntime, BGE_QA_ID,
    BGE_QUERY_PREFIX, BGE_SMALL_ID, MINILM_ID, MODEL_DIR_ENV,
};
pub use embedder::{cosine_similarity, Embedder};
pub use error::EmbedError;
pub use identity::EmbedderIdentity;
pub use minilm::{MiniLmEmbedder, MINILM_DIMENSION, MODEL_FILES};
pub use onnx::{OnnxEmbedder, ONNX_MODEL_FILE};
