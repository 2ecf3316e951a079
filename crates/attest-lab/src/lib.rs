//! Attest's lab: what measures and trains the product, kept out of the production `attest` binary (and so
//! the only crate that draws plots).
//!
//! # Layout
//! - [`cli`]: the command line (clap).
//! - [`eval`]: `attest-lab eval`, the quality gate over a BEIR-layout data set, on the in-process stack of
//!   `attest_node::local`.
//! - [`bench`]: `attest-lab bench`, the dense index at scale (and the cost model fitted to its runs).
//! - [`train`]: `attest-lab train verifier|reranker`, fitting the answer tier's local models.
//! - [`rules`]: `attest-lab rules`, what each reader rule costs on gold sentences and catches on near misses.
//! - [`replay`]: `attest-lab replay`, the coverage gate's bars tried on what an eval run read.
//! - [`plot_font`]: the font of every PNG plot.

pub mod bench;
pub mod cli;
pub mod eval;
pub mod plot_font;
pub mod replay;
pub mod rules;
pub mod train;
