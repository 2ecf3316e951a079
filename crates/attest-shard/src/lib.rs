//! The shard role: a node that hosts shard replicas of collections and serves `attest.v1.ShardService`.
//!
//! # Layout
//! - [`node`]: `ShardNode` — the replicas on this node (one `ShardEngine` each), opened again at start-up.
//! - [`service`]: the tonic service implementation; engine calls run on blocking threads.
//! - [`convert`]: proto ⇄ engine types (filters, hits).
//! - [`status`]: the one place where engine errors become gRPC status codes.
//! - [`server`]: `serve(node, listener, shutdown)`, with the gRPC health service; `serve_ops` for
//!   `/healthz`, `/readyz`, `/metrics`.
//! - [`metrics`]: the shard gauges, published when `/metrics` is scraped.

pub mod convert;
pub mod metrics;
pub mod node;
pub mod server;
pub mod service;
pub mod status;

pub use node::{ShardNode, ShardNodeConfig};
pub use server::{serve, serve_ops};
pub use service::ShardServiceImpl;
