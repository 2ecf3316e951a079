//! The embedder's integration tests against the real model files, one binary (a module per file beside this one):
//! the candle back end and the ONNX Runtime back end.

mod minilm;
mod onnx;
