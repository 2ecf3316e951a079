//! The embedder's integration tests against the real model files, one binary (a module per file beside this one):
//! the candle back end, the ONNX Runtime back end, bge-small-en-v1.5 and its fine-tuned copy.

mod bge;
mod bge_qa;
mod minilm;
mod onnx;
