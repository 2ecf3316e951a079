//! The reader model run with candle: all-MiniLM-L6-v2's BERT encoder fine-tuned as a cross-encoder
//! (`scripts/train-reader.sh`), a tanh pooler over `[CLS]` and two logistic heads — `answerable` (does this
//! sentence answer the question?) and `supported` (does this evidence support this claim?).
//!
//! The model directory holds `reader.safetensors` (f16), `tokenizer.json` and `config.json`; each is checked
//! against the sha256 committed in `models/reader/reader.sha256` (compiled in, so a swapped file is refused),
//! like the embedder's weights.

use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::{DType, Device, IndexOp, Tensor};
use candle_nn::{Linear, Module, VarBuilder};
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use sha2::{Digest, Sha256};
use tokenizers::Tokenizer;

use super::input::PairIds;

/// The committed checksums of the model files.
const CHECKSUMS: &str = include_str!("../../models/reader/reader.sha256");
/// The files of a reader model directory, smallest first.
pub const READER_FILES: [&str; 3] = ["config.json", "tokenizer.json", "reader.safetensors"];
/// The model directory relative to a checkout's root.
pub const RELATIVE_READER_DIR: &str = "crates/attest-answer/models/reader";

#[derive(Debug, thiserror::Error)]
pub enum ReaderError {
    #[error("reader model file {file}: {why}")]
    File { file: PathBuf, why: String },
    #[error("reader model file {file}: sha256 {actual}, expected {expected}")]
    Checksum {
        file: PathBuf,
        expected: String,
        actual: String,
    },
    #[error("reader model: {0}")]
    Model(String),
}

impl From<candle_core::Error> for ReaderError {
    fn from(e: candle_core::Error) -> Self {
        ReaderError::Model(e.to_string())
    }
}

impl From<tokenizers::Error> for ReaderError {
    fn from(e: tokenizers::Error) -> Self {
        ReaderError::Model(format!("tokenizer: {e}"))
    }
}

/// Which head scores a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Head {
    Answerable,
    Supported,
}

/// The loaded reader. Cheap to share behind an `Arc`; inference is blocking CPU work (call it off the async
/// workers).
pub struct ReaderModel {
    bert: BertModel,
    pooler: Linear,
    answerable: Linear,
    supported: Linear,
    tokenizer: Tokenizer,
    device: Device,
    /// Pairs per forward pass.
    batch: usize,
    /// Threads one `score` call spreads its batches over (candle's CPU forward pass uses one core).
    threads: usize,
}

impl std::fmt::Debug for ReaderModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReaderModel").finish_non_exhaustive()
    }
}

fn expected_sha256(file: &str) -> Option<&'static str> {
    CHECKSUMS.lines().find_map(|line| {
        let mut parts = line.split_whitespace();
        let hash = parts.next()?;
        (parts.next()?.trim_start_matches('*') == file).then_some(hash)
    })
}

fn read_verified(dir: &Path, name: &str) -> Result<Vec<u8>, ReaderError> {
    let file = dir.join(name);
    let bytes = std::fs::read(&file).map_err(|e| ReaderError::File {
        file: file.clone(),
        why: e.to_string(),
    })?;
    let expected = expected_sha256(name).ok_or_else(|| ReaderError::File {
        file: file.clone(),
        why: "no committed checksum".into(),
    })?;
    let actual = hex::encode(Sha256::digest(&bytes));
    if !actual.eq_ignore_ascii_case(expected) {
        return Err(ReaderError::Checksum {
            file,
            expected: expected.into(),
            actual,
        });
    }
    Ok(bytes)
}

impl ReaderModel {
    /// Loads and verifies the model in `dir` on the CPU; `score` runs `batch` pairs per forward pass, the batches
    /// of one call spread over `threads` threads.
    pub fn load(dir: &Path, batch: usize, threads: usize) -> Result<Self, ReaderError> {
        let started = Instant::now();
        let device = Device::Cpu;
        let config: BertConfig = serde_json::from_slice(&read_verified(dir, "config.json")?)
            .map_err(|e| ReaderError::Model(format!("config.json: {e}")))?;
        let mut tokenizer = Tokenizer::from_bytes(read_verified(dir, "tokenizer.json")?)?;
        tokenizer.with_truncation(None)?;
        tokenizer.with_padding(None);
        let weights = read_verified(dir, "reader.safetensors")?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)?;
        let bert = BertModel::load(vb.clone(), &config)?;
        let h = config.hidden_size;
        let heads = vb.pp("reader");
        let pooler = candle_nn::linear(h, h, heads.pp("pooler"))?;
        let answerable = candle_nn::linear(h, 1, heads.pp("answerable"))?;
        let supported = candle_nn::linear(h, 1, heads.pp("supported"))?;
        tracing::info!(
            dir = %dir.display(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "loaded reader model"
        );
        Ok(ReaderModel {
            bert,
            pooler,
            answerable,
            supported,
            tokenizer,
            device,
            batch: batch.max(1),
            threads: threads.max(1),
        })
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// One probability per pair from `head`, in input order.
    pub fn score(&self, head: Head, pairs: &[PairIds]) -> Result<Vec<f64>, ReaderError> {
        let lengths: Vec<usize> = pairs.iter().map(|p| p.ids.len()).collect();
        attest_embed::batches::by_length(
            &lengths,
            self.batch,
            self.threads,
            |batch| self.forward(head, batch.iter().map(|&i| &pairs[i])),
            || ReaderError::Model("a reader thread panicked".into()),
        )
    }

    fn forward<'a>(
        &self,
        head: Head,
        rows: impl Iterator<Item = &'a PairIds> + Clone,
    ) -> Result<Vec<f64>, ReaderError> {
        let n = rows.clone().count();
        let t = rows.clone().map(|r| r.ids.len()).max().unwrap_or(0);
        let (mut ids, mut types, mut mask) =
            (vec![0u32; n * t], vec![0u32; n * t], vec![0u32; n * t]);
        for (r, row) in rows.enumerate() {
            let at = r * t;
            ids[at..at + row.ids.len()].copy_from_slice(&row.ids);
            types[at..at + row.types.len()].copy_from_slice(&row.types);
            mask[at..at + row.ids.len()].fill(1);
        }
        let shape = (n, t);
        let ids = Tensor::from_vec(ids, shape, &self.device)?;
        let types = Tensor::from_vec(types, shape, &self.device)?;
        let mask = Tensor::from_vec(mask, shape, &self.device)?;
        let hidden = self.bert.forward(&ids, &types, Some(&mask))?;
        let pooled = self.pooler.forward(&hidden.i((.., 0, ..))?)?.tanh()?;
        let logits = match head {
            Head::Answerable => self.answerable.forward(&pooled)?,
            Head::Supported => self.supported.forward(&pooled)?,
        };
        let logits: Vec<f32> = logits.squeeze(1)?.to_vec1()?;
        Ok(logits
            .into_iter()
            .map(|l| 1.0 / (1.0 + (-f64::from(l)).exp()))
            .collect())
    }
}
