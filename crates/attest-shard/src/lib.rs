//! The shard role: a node that hosts shard replicas of collections and serves `attest.v1.ShardService`.
//!
//! # Layout
//! - [`node`]: `ShardNode` — the replicas on this node (one `ShardEngine` each), opened again at start-up.
//! - [`service`]: the tonic service implementation; engine calls run on blocking threads.
//! - [`catchup`]: a replica copies from a peer every document the peer holds at a newer version.
//! - [`cluster`]: the node's part in a cluster — register, heartbeat, reconcile with the shard map.
//! - [`convert`]: proto ⇄ engine types (filters, hits).
//! - [`status`]: the one place where engine errors and refused requests become gRPC statuses, through the
//!   error vocabulary of `attest_proto::error` (code, message, field).
//! - [`server`]: `serve(node, listener, shutdown)`, with the gRPC health service; `serve_ops` for
//!   `/healthz`, `/readyz`, `/metrics`.
//! - [`startup_gate`]: while a node starts, only its peers' catch-up reads are answered; other calls wait.
//! - [`metrics`]: the shard gauges, published when `/metrics` is scraped.
//! - [`snapshot`]: snapshot a replica to a destination; stage a restore from one.

pub mod catchup;
pub mod cluster;
pub mod convert;
pub mod metrics;
pub mod node;
pub mod server;
pub mod service;
pub mod snapshot;
pub mod startup_gate;
pub mod status;
pub mod transfers;

pub use cluster::{run_cluster_agent, ClusterAgentConfig};
pub use node::{ShardNode, ShardNodeConfig};
pub use server::{serve, serve_gated, serve_ops};
pub use service::ShardServiceImpl;
pub use startup_gate::StartupGate;
