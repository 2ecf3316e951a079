//! Errors of the embedding layer.

use std::path::PathBuf;

use crate::checksum::ChecksumError;
use crate::onnx::OnnxError;

/// Everything that can go wrong loading a model or embedding text.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The model directory or one of its files is absent.
    #[error(
        "embedding model not found in {}: {hint}; install it with `{install}` (or `make models`)",
        dir.display()
    )]
    ModelMissing {
        /// The directory that was searched.
        dir: PathBuf,
        /// What exactly is missing.
        hint: String,
        /// The script that installs the model.
        install: &'static str,
    },
    /// ONNX Runtime's shared library is absent (`embedder.local.runtime: onnx`).
    #[error(
        "ONNX Runtime not found at {}; install it with `scripts/install-onnxruntime.sh` (or `make models`), \
         point `embedder.local.onnxruntime_library` or ORT_DYLIB_PATH at it, or set `embedder.local.runtime: candle`",
        library.display()
    )]
    RuntimeMissing {
        /// The library path that was tried.
        library: PathBuf,
    },
    /// A model file does not match the sha256 committed for it (`models/minilm.sha256`, `onnx.sha256`).
    #[error(
        "checksum mismatch for {}: expected sha256 {expected}, found {actual}; reinstall it with `make models`",
        file.display()
    )]
    Checksum {
        /// The offending file.
        file: PathBuf,
        /// The committed hash (hex).
        expected: String,
        /// The hash of the file on disk (hex).
        actual: String,
    },
    /// The model could not be loaded or run.
    #[error("embedding model error: {0}")]
    Model(String),
    /// The tokenizer could not be loaded or failed on an input.
    #[error("tokenizer error: {0}")]
    Tokenizer(String),
    /// The caller passed something unusable (bad configuration, bad input).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The embedder cannot serve requests right now.
    #[error("embedder unavailable: {0}")]
    Unavailable(String),
}

/// A refused model file: a mismatch is [`EmbedError::Checksum`] (reinstall), anything else a model error.
impl From<ChecksumError> for EmbedError {
    fn from(err: ChecksumError) -> Self {
        match err {
            ChecksumError::Mismatch {
                file,
                expected,
                actual,
            } => EmbedError::Checksum {
                file,
                expected,
                actual,
            },
            other => EmbedError::Model(other.to_string()),
        }
    }
}

/// ONNX Runtime's failures in the embedder's words: a missing library says how to install it, a refused file
/// how to reinstall it.
impl From<OnnxError> for EmbedError {
    fn from(err: OnnxError) -> Self {
        match err {
            OnnxError::RuntimeMissing { library } => EmbedError::RuntimeMissing { library },
            OnnxError::Checksum(err) => err.into(),
            OnnxError::AlreadyLoaded { .. } => EmbedError::InvalidInput(err.to_string()),
            OnnxError::Runtime(_) => EmbedError::Model(err.to_string()),
        }
    }
}

impl From<candle_core::Error> for EmbedError {
    fn from(err: candle_core::Error) -> Self {
        EmbedError::Model(err.to_string())
    }
}
