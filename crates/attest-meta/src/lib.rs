//! The meta role of Attest: cluster metadata (data-plane nodes, collections and their shard map, segment
//! manifests, API keys, the meta voters themselves) replicated with Raft (raft-rs) over 1, 3 or 5 meta
//! nodes, stored in RocksDB.
//!
//! # Layout
//! - [`config`]: [`MetaConfig`], how a node starts (bootstrap peers or join address, timings).
//! - [`state`]: the state machine: serde commands, a deterministic `apply`, bincode snapshots.
//! - [`records`]: the state as one RocksDB record per key (the key scheme), so an apply writes only the
//!   records its commands changed.
//! - [`aliases`]: collection aliases and the switch of a collection's name to its re-embedded copy.
//! - [`drain`]: draining a shard node (restart or decommission), what placement and rebalance make of it.
//! - [`placement`]: replica placement and the rebalance planner (pure, property-tested).
//! - [`storage`]: [`RocksStorage`], `raft::Storage` on RocksDB with synced batches and log compaction.
//! - `node`: the Raft loop on its own thread (ready handling, proposals resolved on apply, ReadIndex).
//! - `inbox`: the loop's bounded inbox; what does not fit is refused at once and counted.
//! - [`transport`]: the [`Transport`] trait, the gRPC implementation (per-peer sender tasks, bounded queues)
//!   and the fault-injection [`Filter`] in front of it.
//! - `route`: leader routing for the service: propose and wait, forward to the leader, liveness.
//! - [`service`]: [`MetaServiceImpl`], the `attest.v1.MetaService` gRPC service.
//! - `server`: [`MetaNode`], one running node (Raft thread + tonic server), bootstrap and join.
//! - `guard`: `--bootstrap-if-empty`, join a group a peer holds or bootstrap (lowest id, no peer answers).
//! - `MetaClient` (re-exported from attest-proto): the client routers, shard nodes and the CLI use.
//! - `convert`: proto ⇄ state-machine types. [`error`]: [`MetaError`] and its one mapping to `Status`.
//! - [`metrics`]: the `raft_term`, `raft_leader`, `raft_commit_index` gauges, apply bytes written. `rlog`: raft-rs logs → tracing.

pub mod aliases;
pub mod config;
mod convert;
pub mod drain;
pub mod error;
mod guard;
mod inbox;
pub mod jobs;
pub mod metrics;
mod node;
pub mod placement;
pub mod records;
mod rlog;
mod route;
mod server;
pub mod service;
pub mod state;
pub mod storage;
pub mod transport;
pub mod watch;

use std::future::Future;

pub use attest_proto::MetaClient;
pub use config::MetaConfig;
pub use error::{MetaError, StateError};
pub use server::{GuardedMetaService, MetaNode};
pub use service::MetaServiceImpl;
pub use storage::RocksStorage;
pub use transport::{Filter, Transport};

/// Runs a meta node on `listener` until `shutdown` resolves, then stops it cleanly (server, Raft loop,
/// RocksDB closed).
pub async fn serve(
    config: MetaConfig,
    listener: impl Into<attest_telemetry::listener::Listener>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let node = MetaNode::start(config, listener).await?;
    shutdown.await;
    node.shutdown().await
}
