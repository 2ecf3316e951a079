//! The local all-MiniLM-L6-v2 embedder: a 6-layer BERT run on the CPU with candle.
//!
//! Pipeline per batch: WordPiece tokenization (truncated to `max_seq_len`, padded to the longest
//! text of the batch) → `BertModel::forward` with the attention mask → mean pooling over the
//! unmasked tokens → L2 normalisation. This is what sentence-transformers does for this model.

use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams, TruncationStrategy};

use crate::embed::config::{LocalEmbedderConfig, MINILM_CHECKSUMS, MINILM_ID};
use crate::embed::embedder::Embedder;
use crate::embed::error::EmbedError;

/// Dimension of all-MiniLM-L6-v2 vectors.
pub const MINILM_DIMENSION: usize = 384;
/// The files the embedder needs in its model directory, in the order they are verified
/// (smallest first, so a corrupted small file is reported without hashing the weights).
pub const MODEL_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// Reads a model file whole and checks it against its line in `table`.
fn read_verified(table: &str, dir: &Path, name: &str) -> Result<Vec<u8>, EmbedError> {
    Ok(crate::checksum::read_verified(table, &dir.join(name))?)
}

/// What every runtime of the model reads besides its weights: the BERT configuration and the two tokenizers,
/// after checking the settings and that `files` (the runtime's model files) are all in `dir`, each against its
/// line in the model's checksum table.
pub(crate) struct TextSide {
    pub bert: BertConfig,
    /// Truncates to `max_seq_len` and pads to the longest text of a batch.
    pub tokenizer: Tokenizer,
    /// Neither truncates nor pads: for [`Embedder::count_tokens`].
    pub counter: Tokenizer,
}

impl TextSide {
    pub(crate) fn load(
        dir: &Path,
        config: &LocalEmbedderConfig,
        files: &[&str],
        table: &str,
    ) -> Result<Self, EmbedError> {
        if config.batch_size == 0 || config.threads == 0 {
            return Err(EmbedError::InvalidInput(
                "batch_size and threads must be at least 1".into(),
            ));
        }
        if config.max_seq_len < 2 {
            return Err(EmbedError::InvalidInput(
                "max_seq_len must be at least 2 (room for [CLS] and [SEP])".into(),
            ));
        }
        if !dir.is_dir() {
            return Err(EmbedError::ModelMissing {
                dir: dir.to_path_buf(),
                hint: "the directory does not exist".into(),
                install: config.model.install_script(),
            });
        }
        let missing: Vec<&str> = files
            .iter()
            .copied()
            .filter(|f| !dir.join(f).is_file())
            .collect();
        if !missing.is_empty() {
            return Err(EmbedError::ModelMissing {
                dir: dir.to_path_buf(),
                hint: format!("missing {}", missing.join(", ")),
                install: config.model.install_script(),
            });
        }
        let config_bytes = read_verified(table, dir, "config.json")?;
        let bert: BertConfig = serde_json::from_slice(&config_bytes)
            .map_err(|e| EmbedError::Model(format!("parsing config.json: {e}")))?;
        if config.max_seq_len > bert.max_position_embeddings {
            return Err(EmbedError::InvalidInput(format!(
                "max_seq_len {} exceeds the model's {} positions",
                config.max_seq_len, bert.max_position_embeddings
            )));
        }
        let tokenizer_bytes = read_verified(table, dir, "tokenizer.json")?;
        let (tokenizer, counter) = build_tokenizers(&tokenizer_bytes, config, &bert)?;
        Ok(Self {
            bert,
            tokenizer,
            counter,
        })
    }

    /// Token ids and attention masks of one batch, row-major `[texts, tokens]` (every text padded to the longest).
    pub(crate) fn encode_batch(
        &self,
        texts: &[&str],
    ) -> Result<(usize, Vec<u32>, Vec<u32>), EmbedError> {
        let encodings = self
            .tokenizer
            .encode_batch_fast(texts.to_vec(), true)
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        let len = encodings.first().map_or(0, |e| e.get_ids().len());
        let mut ids = Vec::with_capacity(encodings.len() * len);
        let mut mask = Vec::with_capacity(encodings.len() * len);
        for encoding in &encodings {
            if encoding.get_ids().len() != len {
                return Err(EmbedError::Tokenizer(
                    "batch encodings are not padded to one length".into(),
                ));
            }
            ids.extend_from_slice(encoding.get_ids());
            mask.extend_from_slice(encoding.get_attention_mask());
        }
        Ok((len, ids, mask))
    }

    /// Model tokens in `text` without special tokens.
    pub(crate) fn count_tokens(&self, text: &str) -> usize {
        match self.counter.encode_fast(text, false) {
            Ok(encoding) => encoding.len(),
            Err(err) => {
                // Never expected for BERT WordPiece; fall back to a generous estimate.
                tracing::warn!(error = %err, "tokenizer failed while counting tokens");
                text.split_whitespace().count() * 2
            }
        }
    }
}

/// all-MiniLM-L6-v2 sentence embedder (384-d, L2-normalised, mean pooled).
///
/// Cheap to share: wrap it in an `Arc` and call [`Embedder::embed`] from any thread.
pub struct MiniLmEmbedder {
    model: BertModel,
    text: TextSide,
    device: Device,
    config: LocalEmbedderConfig,
    dimension: usize,
}

impl std::fmt::Debug for MiniLmEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLmEmbedder")
            .field("id", &MINILM_ID)
            .field("dimension", &self.dimension)
            .field("device", &self.device)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "cuda")]
fn default_device() -> Result<Device, EmbedError> {
    Ok(Device::cuda_if_available(0)?)
}

#[cfg(not(feature = "cuda"))]
fn default_device() -> Result<Device, EmbedError> {
    Ok(Device::Cpu)
}

impl MiniLmEmbedder {
    /// Loads the model from its directory ([`LocalEmbedderConfig::dir`]).
    pub fn from_config(config: &LocalEmbedderConfig) -> Result<Self, EmbedError> {
        Self::load(&config.dir(), config)
    }

    /// Loads the model from `dir` (which takes precedence over `config.model_dir`) on the CPU, or on the
    /// first CUDA GPU when built with the `cuda` feature and one is present.
    ///
    /// Fails with [`EmbedError::ModelMissing`] when a file is absent, [`EmbedError::Checksum`]
    /// when one does not match `models/minilm.sha256`, [`EmbedError::InvalidInput`] for an unusable
    /// configuration. Each file is read and hashed once per load (about a second for the 90 MB
    /// of weights).
    pub fn load(dir: &Path, config: &LocalEmbedderConfig) -> Result<Self, EmbedError> {
        Self::load_on(dir, config, default_device()?)
    }

    /// Like [`MiniLmEmbedder::load`], on a given candle device.
    pub fn load_on(
        dir: &Path,
        config: &LocalEmbedderConfig,
        device: Device,
    ) -> Result<Self, EmbedError> {
        let started = Instant::now();
        let text = TextSide::load(dir, config, &MODEL_FILES, MINILM_CHECKSUMS)?;
        let weights = read_verified(MINILM_CHECKSUMS, dir, "model.safetensors")?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)?;
        let model = BertModel::load(vb, &text.bert)?;
        let dimension = text.bert.hidden_size;

        let embedder = Self {
            model,
            text,
            device,
            config: LocalEmbedderConfig {
                model_dir: Some(dir.to_path_buf()),
                ..config.clone()
            },
            dimension,
        };
        tracing::info!(
            model = MINILM_ID,
            dir = %dir.display(),
            dimension = embedder.dimension,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "loaded embedding model"
        );
        Ok(embedder)
    }

    /// The settings this embedder runs with (`model_dir` is the directory it was loaded from).
    pub fn config(&self) -> &LocalEmbedderConfig {
        &self.config
    }

    /// The directory the model was loaded from.
    pub fn model_dir(&self) -> PathBuf {
        self.config.dir()
    }

    /// Longest input, in tokens including `[CLS]` and `[SEP]`; longer texts are truncated.
    pub fn max_seq_len(&self) -> usize {
        self.config.max_seq_len
    }

    /// Embeds one batch (all texts padded to the longest).
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let n = texts.len();
        let (len, ids, mask) = self.text.encode_batch(texts)?;
        // One text per call: every token has type 0.
        let type_ids = vec![0u32; ids.len()];
        let ids = Tensor::from_vec(ids, (n, len), &self.device)?;
        let type_ids = Tensor::from_vec(type_ids, (n, len), &self.device)?;
        let mask = Tensor::from_vec(mask, (n, len), &self.device)?;

        // (n, len, hidden); padded positions are masked out of attention.
        let hidden = self.model.forward(&ids, &type_ids, Some(&mask))?;

        // Mean over the real tokens only.
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (n, len, 1)
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?; // (n, hidden)
        let counts = mask.sum(1)?.clamp(1e-9f32, f32::MAX)?; // (n, 1)
        let mean = summed.broadcast_div(&counts)?;

        let norms = mean
            .sqr()?
            .sum_keepdim(1)?
            .sqrt()?
            .clamp(1e-12f32, f32::MAX)?;
        Ok(mean.broadcast_div(&norms)?.to_vec2::<f32>()?)
    }
}

/// The embedding tokenizer (truncating, batch-padding) and the counting one (neither).
fn build_tokenizers(
    bytes: &[u8],
    config: &LocalEmbedderConfig,
    bert_config: &BertConfig,
) -> Result<(Tokenizer, Tokenizer), EmbedError> {
    let mut counter =
        Tokenizer::from_bytes(bytes).map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
    counter
        .with_truncation(None)
        .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
    counter.with_padding(None);

    let mut tokenizer = counter.clone();
    let pad_token = "[PAD]".to_string();
    let pad_id = tokenizer
        .token_to_id(&pad_token)
        .unwrap_or(bert_config.pad_token_id as u32);
    tokenizer.with_padding(Some(PaddingParams {
        strategy: PaddingStrategy::BatchLongest,
        pad_id,
        pad_type_id: 0,
        pad_token,
        ..PaddingParams::default()
    }));
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: config.max_seq_len,
            strategy: TruncationStrategy::LongestFirst,
            stride: 0,
            ..TruncationParams::default()
        }))
        .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
    Ok((tokenizer, counter))
}

/// Both runtimes' `embed`: `texts` in batches of `config.batch_size` by length over `config.threads` threads,
/// each batch through `embed_batch`. Padding is masked, so grouping by length does not change a vector.
pub(crate) fn embed_by_length(
    texts: &[&str],
    config: &LocalEmbedderConfig,
    embed_batch: impl Fn(&[&str]) -> Result<Vec<Vec<f32>>, EmbedError> + Sync,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    if texts.is_empty() {
        return Ok(Vec::new());
    }
    let lengths: Vec<usize> = texts.iter().map(|t| t.len()).collect();
    crate::batches::by_length(
        &lengths,
        config.batch_size,
        config.threads,
        |batch| embed_batch(&batch.iter().map(|&i| texts[i]).collect::<Vec<_>>()),
        || EmbedError::Model("an embedding thread panicked".into()),
    )
}

impl Embedder for MiniLmEmbedder {
    fn id(&self) -> &str {
        MINILM_ID
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        embed_by_length(texts, &self.config, |batch| self.embed_batch(batch))
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
    use crate::checksum::expected_sha256;

    #[test]
    fn checksums_cover_every_model_file() {
        for file in MODEL_FILES {
            let hash = expected_sha256(MINILM_CHECKSUMS, file)
                .unwrap_or_else(|| panic!("no hash for {file}"));
            assert_eq!(hash.len(), 64, "{file}");
            assert!(hash.chars().all(|c| c.is_ascii_hexdigit()), "{file}");
        }
        assert_eq!(expected_sha256(MINILM_CHECKSUMS, "nope.bin"), None);
    }

    #[test]
    fn embedder_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<MiniLmEmbedder>();
    }

    #[test]
    fn rejects_bad_configuration() {
        let dir = tempfile::tempdir().unwrap();
        let config = LocalEmbedderConfig {
            batch_size: 0,
            ..LocalEmbedderConfig::default()
        };
        assert!(matches!(
            MiniLmEmbedder::load(dir.path(), &config),
            Err(EmbedError::InvalidInput(_))
        ));
    }

    #[test]
    fn names_missing_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), "{}").unwrap();
        let err = MiniLmEmbedder::load(dir.path(), &LocalEmbedderConfig::default()).unwrap_err();
        let EmbedError::ModelMissing { hint, .. } = &err else {
            panic!("expected ModelMissing, got {err:?}");
        };
        assert!(
            hint.contains("tokenizer.json") && hint.contains("model.safetensors"),
            "{hint}"
        );
        assert!(!hint.contains("config.json"), "{hint}");
    }
}
