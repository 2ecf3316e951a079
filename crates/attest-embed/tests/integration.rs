//! The embedder's integration tests against the real model files, one binary (a module per file beside this one):
//! the candle back end, the ONNX Runtime back end, and bge-small-en-v1.5.

mod bge;
mod minilm;
mod onnx;
