//! The `attest` binary's library: one binary, one role per process, and the client commands (the binary is
//! `main.rs`; the tests drive the in-process stack of [`local`] through this library).
//!
//! # Layout
//! - [`cli`]: the command line (clap).
//! - [`config`]: YAML config, `ATTEST__SECTION__KEY` environment overrides, then flags.
//! - [`local`]: the in-process control plane (a one-voter meta, shard nodes registered through the cluster
//!   agent) and the stack over it that `attest dev` serves and `attest eval` measures.
//! - [`roles`]: `attest dev` (every role in one process) and `attest serve --role ...`.
//! - [`cluster`]: the cluster roles (`serve --role meta`, shard and router with `--meta`), `attest status`,
//!   `attest cluster rebalance`.
//! - [`drain`]: `attest cluster drain`, taking a shard node out of service (a pod's preStop, a scale-in).
//! - [`security`]: what `attest serve` requires before it serves (TLS, keys, the cluster credential) and its
//!   listeners, public (TLS) or internal (mutual TLS).
//! - [`ask`]: `attest ask`, streamed answers, the verification table, conversations (`--follow-up`).
//! - [`commands`]: client commands that talk to a running router over HTTP (collection, ingest, search).
//! - [`eval`]: `attest eval`, the quality gate over a BEIR-layout data set.
//! - [`bench`]: `attest bench`, the dense index at scale (and the cost model fitted to its runs).
//! - [`plot_font`]: the font of every PNG plot.
//! - [`train`]: `attest train verifier`, fitting the answer tier's local models.
//! - [`openapi`]: `attest openapi`, the OpenAPI document `attest dev` serves (router and answer tier merged).

pub mod ask;
pub mod bench;
pub mod cli;
pub mod cluster;
pub mod commands;
pub mod config;
pub mod drain;
pub mod eval;
pub mod keys;
pub mod local;
pub mod openapi;
pub mod plot_font;
pub mod roles;
pub mod security;
pub mod snapshots;
pub mod train;
