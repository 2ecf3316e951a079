//! The reader run by ONNX Runtime: a `reader.onnx` graph — f16 weights cast to f32 at load
//! (`scripts/reader/safetensors_to_onnx.py`, the MiniLM rounds) or int8 (`scripts/reader/export_onnx.py`, for a
//! backbone whose f16 weights are more than the repository takes: bge-small-en-v1.5, issue 41). The graph
//! returns both heads' logits and the span head's per-token logits in one pass. One session per thread, each
//! single-threaded (as the embedder's): [`super::model::ReaderModel::score`] spreads a call's batches over them.

use std::sync::atomic::{AtomicUsize, Ordering};

use ort::session::Session;
use ort::value::Tensor;
use parking_lot::Mutex;

use super::model::ReaderError;

/// The graph's file in a reader model directory.
pub const ONNX_READER_FILE: &str = "reader.onnx";

pub struct OnnxReader {
    sessions: Vec<Mutex<Session>>,
    next: AtomicUsize,
}

/// One padded batch's outputs: `heads[r * 2 + h]` (h: 0 answerable, 1 supported) and
/// `span[(r * tokens + i) * 2 + s]` (s: 0 start, 1 end).
pub struct Logits {
    pub heads: Vec<f32>,
    pub span: Vec<f32>,
}

fn model_error(e: impl std::fmt::Display) -> ReaderError {
    ReaderError::Model(format!("ONNX Runtime: {e}"))
}

impl OnnxReader {
    /// Sessions over `graph` (already checked against the committed checksum), in the process's ONNX Runtime.
    pub fn load(graph: &[u8], threads: usize) -> Result<Self, ReaderError> {
        let library = attest_embed::config::default_onnxruntime_library();
        let env = attest_embed::onnx::runtime(&library).map_err(model_error)?;
        let sessions = (0..threads.max(1))
            .map(|_| attest_embed::onnx::new_session(&env, graph).map(Mutex::new))
            .collect::<Result<Vec<_>, _>>()
            .map_err(model_error)?;
        Ok(OnnxReader {
            sessions,
            next: AtomicUsize::new(0),
        })
    }

    /// A free session, else the next one in turn.
    fn session(&self) -> parking_lot::MutexGuard<'_, Session> {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let n = self.sessions.len();
        (0..n)
            .find_map(|i| self.sessions[(start + i) % n].try_lock())
            .unwrap_or_else(|| self.sessions[start % n].lock())
    }

    /// Runs `rows` × `tokens` padded inputs (row-major).
    pub fn run(
        &self,
        (rows, tokens): (usize, usize),
        ids: &[u32],
        types: &[u32],
        mask: &[u32],
    ) -> Result<Logits, ReaderError> {
        let shape = [rows as i64, tokens as i64];
        let tensor = |v: &[u32]| {
            Tensor::from_array((shape, v.iter().map(|&x| i64::from(x)).collect::<Vec<i64>>()))
                .map_err(model_error)
        };
        let inputs = ort::inputs![
            "input_ids" => tensor(ids)?,
            "token_type_ids" => tensor(types)?,
            "attention_mask" => tensor(mask)?,
        ];
        let mut session = self.session();
        let outputs = session.run(inputs).map_err(model_error)?;
        let extract = |name: &str, want: usize| -> Result<Vec<f32>, ReaderError> {
            let (_, values) = outputs[name]
                .try_extract_tensor::<f32>()
                .map_err(model_error)?;
            if values.len() != want {
                return Err(ReaderError::Model(format!(
                    "the reader graph's `{name}` has {} values, expected {want}",
                    values.len()
                )));
            }
            Ok(values.to_vec())
        };
        Ok(Logits {
            heads: extract("heads", rows * 2)?,
            span: extract("span", rows * tokens * 2)?,
        })
    }
}
