//! The `attest` binary's library: the command line, the client commands and the operator's commands. Roles are
//! started by `attest_node` (the binary turns `attest serve`'s and `attest dev`'s arguments into its
//! configuration); evaluation, benchmarks and training are the `attest-lab` binary's.
//!
//! # Layout
//! - [`cli`]: the command line (clap).
//! - [`node_args`]: `attest serve` / `attest dev` arguments → `attest_node::NodeConfig` / `DevConfig`.
//! - [`cluster`]: `attest status`, `attest cluster rebalance`, `attest meta remove` (through meta).
//! - [`drain`]: `attest cluster drain`, taking a shard node out of service (a pod's preStop, a scale-in).
//! - [`ask`]: `attest ask`, streamed answers, the verification table, conversations (`--follow-up`).
//! - [`commands`]: client commands that talk to a running router over HTTP (collection, ingest, search).
//! - [`keys`], [`snapshots`]: `attest key ...`, `attest snapshot ...` through a running router.
//! - [`mcp`]: `attest mcp`, a Model Context Protocol server (search, ask, collections) for agents.
//! - [`openapi`]: `attest openapi`, the OpenAPI document `attest dev` serves (router and answer tier merged).

pub mod ask;
pub mod cli;
pub mod cluster;
pub mod commands;
pub mod drain;
pub mod keys;
pub mod mcp;
pub mod node_args;
pub mod openapi;
pub mod reembed;
pub mod snapshots;
