//! The local all-MiniLM-L6-v2 embedder under ONNX Runtime: the same model, tokenizer and vectors as
//! [`crate::embed::MiniLmEmbedder`] (candle), 5.5× its passages per second on this CPU (docs/BENCHMARKS.md).
//!
//! The graph (`model.onnx`, written from the installed safetensors by `scripts/onnx/export_minilm.py`) holds the
//! whole embedder, pooling and normalisation included: this side tokenizes, feeds ids and masks, and reads the
//! finished vectors. ONNX Runtime itself is the CPU library of its PyPI wheel, loaded once per process from
//! `embedder.local.onnxruntime_library` (`crate::onnx`); both files are checked against
//! `attest-models`' `onnx.sha256` when loaded.
//!
//! Each of `threads` sessions runs on one core with its own arena; a call spreads its length-sorted batches over
//! them (`crate::batches`), and concurrent calls (a query beside an ingest) take whichever session is free.

use std::time::Instant;

use ort::value::Tensor;

use crate::checksum::read_verified;
use crate::embed::config::LocalEmbedderConfig;
use crate::embed::config::{MINILM_CHECKSUMS, MINILM_ID};
use crate::embed::embedder::Embedder;
use crate::embed::error::EmbedError;
use crate::embed::minilm::TextSide;
use crate::onnx::{runtime, SessionPool, ONNX_CHECKSUMS};

/// The graph's file name in the model directory.
pub const ONNX_MODEL_FILE: &str = "model.onnx";
/// The files this runtime needs in the model directory.
pub const ONNX_MODEL_FILES: [&str; 3] = ["config.json", "tokenizer.json", ONNX_MODEL_FILE];

/// The graph's input and output names (`scripts/onnx/export_minilm.py`).
const INPUT_IDS: &str = "input_ids";
const ATTENTION_MASK: &str = "attention_mask";
const EMBEDDING: &str = "embedding";

/// What an ONNX embedder loads: its BERT configuration and tokenizers, and a session of its graph per thread.
pub(crate) struct LoadedGraph {
    pub sessions: SessionPool,
    pub text: TextSide,
}

/// Loads the model in `config`'s directory (`config.json` and `tokenizer.json` checked against `text_table`,
/// `model.onnx` against `graph_table`) and ONNX Runtime, and logs it as model `id`.
pub(crate) fn load_graph(
    config: &LocalEmbedderConfig,
    text_table: &str,
    graph_table: &str,
    id: &str,
) -> Result<LoadedGraph, EmbedError> {
    let started = Instant::now();
    let dir = config.dir();
    let text = TextSide::load(&dir, config, &ONNX_MODEL_FILES, text_table)?;
    let env = runtime(&config.onnxruntime_library)?;
    let graph = read_verified(graph_table, &dir.join(ONNX_MODEL_FILE))?;
    let sessions = SessionPool::new(&env, &graph, config.threads)?;
    tracing::info!(
        model = id,
        runtime = "onnx",
        dir = %dir.display(),
        sessions = sessions.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "loaded embedding model"
    );
    Ok(LoadedGraph { sessions, text })
}

/// Token ids and masks of a batch as the `[texts, tokens]` int64 tensors a BERT graph takes.
pub(crate) fn id_tensors(
    text: &TextSide,
    texts: &[&str],
) -> Result<(Tensor<i64>, Tensor<i64>, usize), EmbedError> {
    let (len, ids, mask) = text.encode_batch(texts)?;
    let shape = [texts.len() as i64, len as i64];
    let as_i64 = |v: Vec<u32>| v.into_iter().map(i64::from).collect::<Vec<i64>>();
    let ids = Tensor::from_array((shape, as_i64(ids))).map_err(model_error)?;
    let mask = Tensor::from_array((shape, as_i64(mask))).map_err(model_error)?;
    Ok((ids, mask, len))
}

/// all-MiniLM-L6-v2 (384-d, L2-normalised, mean pooled) run by ONNX Runtime.
pub struct OnnxMiniLmEmbedder {
    sessions: SessionPool,
    text: TextSide,
    config: LocalEmbedderConfig,
    dimension: usize,
}

impl std::fmt::Debug for OnnxMiniLmEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnnxMiniLmEmbedder")
            .field("id", &MINILM_ID)
            .field("dimension", &self.dimension)
            .field("sessions", &self.sessions.len())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl OnnxMiniLmEmbedder {
    /// Loads the graph from `config.model_dir` and ONNX Runtime from `config.onnxruntime_library`.
    ///
    /// Fails with [`EmbedError::ModelMissing`] / [`EmbedError::RuntimeMissing`] when a file is absent,
    /// [`EmbedError::Checksum`] when one does not match its committed hash, [`EmbedError::InvalidInput`] for an
    /// unusable configuration.
    pub fn from_config(config: &LocalEmbedderConfig) -> Result<Self, EmbedError> {
        let loaded = load_graph(config, MINILM_CHECKSUMS, ONNX_CHECKSUMS, MINILM_ID)?;
        Ok(Self {
            sessions: loaded.sessions,
            dimension: loaded.text.bert.hidden_size,
            text: loaded.text,
            config: config.clone(),
        })
    }

    /// The settings this embedder runs with.
    pub fn config(&self) -> &LocalEmbedderConfig {
        &self.config
    }

    /// Embeds one batch (all texts padded to the longest; the graph masks the padding).
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let n = texts.len();
        let (ids, mask, _) = id_tensors(&self.text, texts)?;
        let mut session = self.sessions.session();
        let outputs = session
            .run(ort::inputs![INPUT_IDS => ids, ATTENTION_MASK => mask])
            .map_err(model_error)?;
        let (out_shape, values) = outputs[EMBEDDING]
            .try_extract_tensor::<f32>()
            .map_err(model_error)?;
        if out_shape.len() != 2 || out_shape[0] != n as i64 || out_shape[1] != self.dimension as i64
        {
            return Err(EmbedError::Model(format!(
                "the graph returned shape {out_shape:?} for {n} texts of dimension {}",
                self.dimension
            )));
        }
        Ok(values.chunks(self.dimension).map(<[f32]>::to_vec).collect())
    }
}

pub(crate) fn model_error(err: ort::Error) -> EmbedError {
    EmbedError::Model(format!("ONNX Runtime: {err}"))
}

impl Embedder for OnnxMiniLmEmbedder {
    fn id(&self) -> &str {
        MINILM_ID
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        crate::embed::minilm::embed_by_length(texts, &self.config, |batch| self.embed_batch(batch))
    }

    fn count_tokens(&self, text: &str) -> usize {
        self.text.count_tokens(text)
    }

    fn identity(&self) -> crate::embed::EmbedderIdentity {
        crate::embed::LocalModel::MiniLm.identity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_graph_is_named() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["config.json", "tokenizer.json"] {
            std::fs::write(dir.path().join(f), "{}").unwrap();
        }
        let config = LocalEmbedderConfig {
            model_dir: Some(dir.path().to_path_buf()),
            ..LocalEmbedderConfig::default()
        };
        let err = OnnxMiniLmEmbedder::from_config(&config).unwrap_err();
        assert!(err.to_string().contains(ONNX_MODEL_FILE), "{err}");
    }
}
