//! The reader model: a BERT encoder fine-tuned as a cross-encoder (`scripts/train-reader.sh`: all-MiniLM-L6-v2 in
//! rounds 1-7, bge-small-en-v1.5 from round 8), a tanh pooler over `[CLS]` and two logistic heads — `answerable`
//! (does this sentence answer the question?) and `supported` (does this evidence support this claim?) — and, in
//! weights that have it, a span head (a start and an end logit per token, SQuAD 2.0 style): the answerability of a
//! sentence is then its `answerable` logit plus `span_blend` (from `config.json`) times the span margin, the best
//! answer span of the sentence against `[CLS]` (the "no answer here" position).
//!
//! A model directory holds `tokenizer.json`, `config.json` and `reader.onnx`, a graph run by ONNX Runtime
//! (`super::onnx`): round 12 (MiniLM, the main reader: round 7 taught the company near misses,
//! [`RELATIVE_READER_DIR`]) as its f16 weights cast to f32 at
//! load (`scripts/reader/safetensors_to_onnx.py`: the logits candle computed from the same weights, 2.8× faster),
//! round 13 (bge-small-en-v1.5, round 8 taught the company near misses; the default ensemble's second member,
//! [`SECOND_READER_DIR`]) as an int8 graph
//! (`scripts/reader/export_onnx.py`). Each file is checked against the sha256 committed in its directory's
//! `reader.sha256` (both tables compiled in, so a swapped file is refused) by the same function that checks the
//! embedder's weights ([`crate::checksum::read_verified`]).

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::checksum::ChecksumError;
use crate::onnx::OnnxError;
use tokenizers::Tokenizer;

use super::input::{self, PairIds};
use super::onnx::{OnnxReader, ONNX_READER_FILE};

/// The committed checksums of the model files: the reader's and its second member's ([`SECOND_READER_DIR`]).
const CHECKSUMS: &str = concat!(
    include_str!("../../models/reader/reader.sha256"),
    include_str!("../../models/reader-bge/reader.sha256")
);
/// The model directory relative to a checkout's root.
pub const RELATIVE_READER_DIR: &str = "crates/attest-models/models/reader";
/// The committed second member's directory relative to a checkout's root (round 13, bge-small-en-v1.5).
pub const SECOND_READER_DIR: &str = "crates/attest-models/models/reader-bge";

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

/// A refused model file, named as the reader's.
impl From<ChecksumError> for ReaderError {
    fn from(e: ChecksumError) -> Self {
        match e {
            ChecksumError::Mismatch {
                file,
                expected,
                actual,
            } => ReaderError::Checksum {
                file,
                expected,
                actual,
            },
            ChecksumError::NoChecksum { file, .. } => ReaderError::File {
                file,
                why: "no committed checksum".into(),
            },
            ChecksumError::Unreadable { file, error } => ReaderError::File {
                file,
                why: error.to_string(),
            },
        }
    }
}

/// ONNX Runtime's refusals as the reader's: a library that fails its checksum is a refused file (as a refused
/// graph is), anything else a model error, said once.
impl From<OnnxError> for ReaderError {
    fn from(e: OnnxError) -> Self {
        match e {
            OnnxError::Checksum(refused) => refused.into(),
            other => ReaderError::Model(other.to_string()),
        }
    }
}

impl From<tokenizers::Error> for ReaderError {
    fn from(e: tokenizers::Error) -> Self {
        ReaderError::Model(format!("tokenizer: {e}"))
    }
}

/// Longest answer span the span head scores, in tokens (as trained: `MAX_SPAN` in scripts/reader/model.py).
pub const MAX_SPAN: usize = 30;

/// Which head scores a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Head {
    Answerable,
    Supported,
}

/// The loaded reader. Cheap to share behind an `Arc`; inference is blocking CPU work (call it off the async
/// workers).
pub struct ReaderModel {
    encoder: OnnxReader,
    /// How much of the span margin goes into answerability (0: no span head).
    span_blend: f32,
    tokenizer: Tokenizer,
    /// The tokens that split a sentence into its `;` parts.
    parts: PartTokens,
    /// Pairs per forward pass.
    batch: usize,
    /// Threads one `score` call spreads its batches over (each session runs on one core).
    threads: usize,
}

impl std::fmt::Debug for ReaderModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReaderModel").finish_non_exhaustive()
    }
}

/// Reads a model file whole and checks it against `reader.sha256`.
fn read_verified(dir: &Path, name: &str) -> Result<Vec<u8>, ReaderError> {
    Ok(crate::checksum::read_verified(CHECKSUMS, &dir.join(name))?)
}

impl ReaderModel {
    /// Loads and verifies the model in `dir` on the CPU; `score` runs `batch` pairs per forward pass, the batches
    /// of one call spread over `threads` threads.
    pub fn load(dir: &Path, batch: usize, threads: usize) -> Result<Self, ReaderError> {
        let started = Instant::now();
        let span_blend = config_span_blend(&read_verified(dir, "config.json")?)?;
        let mut tokenizer = Tokenizer::from_bytes(read_verified(dir, "tokenizer.json")?)?;
        tokenizer.with_truncation(None)?;
        tokenizer.with_padding(None);
        if !dir.join(ONNX_READER_FILE).exists() {
            return Err(ReaderError::File {
                file: dir.join(ONNX_READER_FILE),
                why: "missing (a reader.safetensors from scripts/reader/train.py runs once written as a graph by \
                      scripts/reader/safetensors_to_onnx.py)"
                    .into(),
            });
        }
        let encoder = OnnxReader::load(&read_verified(dir, ONNX_READER_FILE)?, threads)?;
        tracing::info!(
            dir = %dir.display(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "loaded reader model"
        );
        let parts = PartTokens::of(&tokenizer);
        Ok(ReaderModel {
            encoder,
            span_blend,
            tokenizer,
            parts,
            batch: batch.max(1),
            threads: threads.max(1),
        })
    }

    /// How much of the span margin goes into answerability (0: no span head in these weights).
    pub fn span_blend(&self) -> f32 {
        self.span_blend
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// One probability per pair from `head`, in input order.
    pub fn score(&self, head: Head, pairs: &[PairIds]) -> Result<Vec<f64>, ReaderError> {
        Ok(self
            .judge(head, pairs)?
            .into_iter()
            .map(|j| j.probability)
            .collect())
    }

    /// One judgement per pair from `head`, in input order: its probability and, from the span head, which `;`
    /// part of the sentence its best answer span starts in.
    pub fn judge(&self, head: Head, pairs: &[PairIds]) -> Result<Vec<Judgement>, ReaderError> {
        let lengths: Vec<usize> = pairs.iter().map(|p| p.ids.len()).collect();
        crate::batches::by_length(
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
        rows: impl Iterator<Item = &'a PairIds>,
    ) -> Result<Vec<Judgement>, ReaderError> {
        let rows: Vec<&PairIds> = rows.collect();
        let n = rows.len();
        let t = rows.iter().map(|r| r.ids.len()).max().unwrap_or(0);
        let (mut ids, mut types, mut mask) =
            (vec![0u32; n * t], vec![0u32; n * t], vec![0u32; n * t]);
        for (r, row) in rows.iter().enumerate() {
            let at = r * t;
            ids[at..at + row.ids.len()].copy_from_slice(&row.ids);
            types[at..at + row.types.len()].copy_from_slice(&row.types);
            mask[at..at + row.ids.len()].fill(1);
        }
        let with_span = head == Head::Answerable && self.span_blend > 0.0;
        let out = self.encoder.run((n, t), &ids, &types, &mask)?;
        let column = match head {
            Head::Answerable => 0,
            Head::Supported => 1,
        };
        Ok(rows
            .iter()
            .enumerate()
            .map(|(r, row)| {
                let mut logit = out.heads[r * 2 + column];
                let mut part = 0;
                if with_span {
                    let (lo, hi) = input::sentence_range(&row.ids);
                    let (margin, start) = best_span(&out.span[r * t * 2..(r + 1) * t * 2], lo, hi);
                    logit += self.span_blend * margin;
                    part = start.map_or(0, |start| self.parts.part_at(&row.ids[lo..start]));
                }
                Judgement {
                    probability: 1.0 / (1.0 + (-f64::from(logit)).exp()),
                    part,
                }
            })
            .collect())
    }
}

/// One pair's judgement by one model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Judgement {
    pub probability: f64,
    /// The `;` part of the sentence (0 for the first; brackets split nothing, as in [`attest_text::text::semicolon_parts`])
    /// where the best answer span starts; 0 without a span head.
    pub part: usize,
}

/// The token ids of `;`, `(` and `)` in a reader's vocabulary (BERT's tokenizer makes each punctuation mark a
/// token of its own), so the span head's start can be placed in a `;` part without mapping tokens to text.
#[derive(Debug, Clone, Copy)]
struct PartTokens {
    semicolon: Option<u32>,
    open: Option<u32>,
    close: Option<u32>,
}

impl PartTokens {
    fn of(tokenizer: &Tokenizer) -> Self {
        PartTokens {
            semicolon: tokenizer.token_to_id(";"),
            open: tokenizer.token_to_id("("),
            close: tokenizer.token_to_id(")"),
        }
    }

    /// The `;` part that the tokens after `before` start: the `;` outside brackets in `before`, counted.
    fn part_at(&self, before: &[u32]) -> usize {
        let mut depth = 0usize;
        let mut part = 0;
        for &t in before {
            let t = Some(t);
            if t == self.open {
                depth += 1;
            } else if t == self.close {
                depth = depth.saturating_sub(1);
            } else if t == self.semicolon && depth == 0 {
                part += 1;
            }
        }
        part
    }
}

/// `span_blend` of a reader's `config.json` (0 when absent: weights without a span head).
fn config_span_blend(config: &[u8]) -> Result<f32, ReaderError> {
    let config: serde_json::Value = serde_json::from_slice(config)
        .map_err(|e| ReaderError::Model(format!("config.json: {e}")))?;
    match config.get("span_blend") {
        None => Ok(0.0),
        Some(v) => v
            .as_f64()
            .map(|b| b as f32)
            .filter(|b| b.is_finite() && *b >= 0.0)
            .ok_or_else(|| {
                ReaderError::Model(format!(
                    "config.json: span_blend {v} is not a non-negative number"
                ))
            }),
    }
}

/// The span margin of one pair and where its best span starts: the best start + end logit over spans of at most
/// [`MAX_SPAN`] tokens inside `[lo, hi)`, minus `[CLS]`'s start + end (`tokens[2 i]`, `tokens[2 i + 1]`: token i's
/// start and end). Positive: an answer span beats "no answer here".
fn best_span(tokens: &[f32], lo: usize, hi: usize) -> (f32, Option<usize>) {
    let (start, end) = (|i: usize| tokens[2 * i], |i: usize| tokens[2 * i + 1]);
    let null = if tokens.len() >= 2 {
        start(0) + end(0)
    } else {
        0.0
    };
    let hi = hi.min(tokens.len() / 2);
    let mut best = (f32::NEG_INFINITY, None);
    for i in lo..hi {
        for j in i..hi.min(i + MAX_SPAN) {
            if start(i) + end(j) > best.0 {
                best = (start(i) + end(j), Some(i));
            }
        }
    }
    match best {
        (margin, Some(at)) => (margin - null, Some(at)),
        _ => (-null, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn onnx_runtime_errors_are_named_once_and_a_refused_library_as_a_refused_file() {
        let runtime = ReaderError::from(OnnxError::Runtime("no such input".into())).to_string();
        assert_eq!(runtime, "reader model: ONNX Runtime: no such input");
        let library = PathBuf::from("/opt/onnxruntime/libonnxruntime.so");
        let refused = ReaderError::from(OnnxError::Checksum(ChecksumError::Mismatch {
            file: library.clone(),
            expected: "aa".into(),
            actual: "bb".into(),
        }));
        assert!(
            matches!(&refused, ReaderError::Checksum { file, .. } if *file == library),
            "{refused}"
        );
    }

    #[test]
    fn an_onnx_readers_span_blend_comes_from_its_config() {
        assert_eq!(config_span_blend(br#"{"span_blend": 0.5}"#).unwrap(), 0.5);
        assert_eq!(config_span_blend(br#"{"hidden_size": 384}"#).unwrap(), 0.0);
        assert!(config_span_blend(br#"{"span_blend": -1}"#).is_err());
        assert!(config_span_blend(br#"{"span_blend": "x"}"#).is_err());
    }

    #[test]
    fn the_best_span_inside_the_sentence_against_cls_and_where_it_starts() {
        // [CLS] q [SEP] s1 s2 s3 [SEP]: the best span is s2..s3 (start 2.0 + end 3.0), CLS scores 1 + 1.
        let tokens = [
            1.0, 1.0, // [CLS]
            9.0, 9.0, // the question: outside the sentence, never counted
            0.0, 0.0, //
            0.0, -1.0, //
            2.0, 0.0, //
            0.0, 3.0, //
            9.0, 9.0,
        ];
        assert_eq!(best_span(&tokens, 3, 6), (3.0, Some(4)));
        // An end before the start does not count: start 5 at s3 can only end at s3.
        let tokens = [0.0, 0.0, 0.0, 4.0, 5.0, -5.0];
        assert_eq!(best_span(&tokens, 1, 3), (0.0 + 4.0, Some(1)));
        // No sentence: minus CLS.
        assert_eq!(best_span(&[1.0, 2.0], 1, 1), (-3.0, None));
    }

    #[test]
    fn a_span_start_is_placed_in_the_semicolon_part_outside_brackets() {
        let parts = PartTokens {
            semicolon: Some(1),
            open: Some(2),
            close: Some(3),
        };
        // a ; b ( c ; d ) e ; | f
        assert_eq!(parts.part_at(&[9, 1, 9, 2, 9, 1, 9, 3, 9, 1]), 2);
        assert_eq!(parts.part_at(&[9, 9]), 0);
        // A vocabulary without the marks puts every start in the first part.
        let none = PartTokens {
            semicolon: None,
            open: None,
            close: None,
        };
        assert_eq!(none.part_at(&[9, 1, 9]), 0);
    }
}
