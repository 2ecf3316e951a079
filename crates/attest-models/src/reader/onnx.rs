//! The reader run by ONNX Runtime: a `reader.onnx` graph — f16 weights cast to f32 at load
//! (`scripts/reader/safetensors_to_onnx.py`, the MiniLM rounds) or int8 (`scripts/reader/export_onnx.py`, for a
//! backbone whose f16 weights are more than the repository takes: bge-small-en-v1.5, issue 41). The graph
//! returns both heads' logits and the span head's per-token logits in one pass. One session per thread, each
//! single-threaded (as the embedder's): [`super::model::ReaderModel::score`] spreads a call's batches over them.

use ort::value::Tensor;

use super::model::ReaderError;
use crate::onnx::{default_onnxruntime_library, runtime, OnnxError, SessionPool};

/// The graph's file in a reader model directory.
pub const ONNX_READER_FILE: &str = "reader.onnx";

pub struct OnnxReader {
    sessions: SessionPool,
}

/// One padded batch's outputs: `heads[r * 2 + h]` (h: 0 answerable, 1 supported) and
/// `span[(r * tokens + i) * 2 + s]` (s: 0 start, 1 end).
pub struct Logits {
    pub heads: Vec<f32>,
    pub span: Vec<f32>,
}

/// An error of ONNX Runtime's own (`OnnxError::Runtime` names it once).
fn model_error(e: ort::Error) -> ReaderError {
    OnnxError::from(e).into()
}

impl OnnxReader {
    /// Sessions over `graph` (already checked against the committed checksum), in the process's ONNX Runtime.
    pub fn load(graph: &[u8], threads: usize) -> Result<Self, ReaderError> {
        let env = runtime(&default_onnxruntime_library())?;
        let sessions = SessionPool::new(&env, graph, threads)?;
        Ok(OnnxReader { sessions })
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
        let mut session = self.sessions.session();
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
