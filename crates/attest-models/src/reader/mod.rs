//! The reader's model (issue 13): a BERT cross-encoder with an `answerable` head, a `supported` head and, in
//! weights that have it, a span head, committed under `models/reader*/` with its checksums and run by ONNX
//! Runtime. What it is asked and what its scores mean is the answer tier's (`attest_answer::reader`).
//!
//! - [`input`]: the token layout and the text each head reads (mirrors `scripts/reader/`).
//! - [`model`]: the model, checksummed like the embedder, scored in batches spread over threads.
//! - `onnx`: its ONNX Runtime graph, one session per thread.

pub mod input;
pub mod model;
mod onnx;

pub use model::{
    Head, Judgement, ReaderError, ReaderModel, RELATIVE_READER_DIR, SECOND_READER_DIR,
};
