//! Starting Attest's roles. One function per role with the same shape, `serve(config, listeners, shutdown)`,
//! used by the `attest` binary (which turns its arguments into a [`NodeConfig`]), by `attest dev`'s in-process
//! stack, and by the tests and benchmarks. Every role listens at once, says in its log and `/readyz` what it
//! waits for, and stops promptly when `shutdown` is triggered, at any point of its start-up.
//!
//! # Layout (each file imports only the ones above it in this list)
//! - [`config`]: the YAML configuration with `ATTEST__SECTION__KEY` overrides, checked at load.
//! - [`node_config`]: [`NodeConfig`], what one node runs (role, addresses, identity, credentials).
//! - [`plumbing`]: listeners, shutdown, TLS and credentials, the meta client, authentication, the embedder.
//! - [`meta`], [`shard`], [`router`], [`answer`], [`embedder`]: one role each.
//! - [`local`]: the control plane and the stack over it in one process (`attest dev`, `attest-lab eval`).
//! - [`dev`]: `attest dev`, every role in one process.

pub mod answer;
pub mod config;
pub mod dev;
pub mod embedder;
pub mod local;
pub mod meta;
pub mod node_config;
pub mod plumbing;
pub mod router;
pub mod shard;
pub mod traces;

pub use config::AttestConfig;
pub use node_config::{Credentials, MetaId, NodeConfig, Role};
pub use plumbing::{Listeners, Shutdown};

/// Serves `cfg.role` on `listeners` until `shutdown`.
pub async fn serve(
    cfg: &NodeConfig,
    listeners: Listeners,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    if let Some(token) = &cfg.metrics_token {
        attest_telemetry::ops::protect_metrics(token);
    }
    match cfg.role {
        Role::Meta => meta::serve(cfg, listeners, shutdown).await,
        Role::Shard => shard::serve(cfg, listeners, shutdown).await,
        Role::Router => router::serve(cfg, listeners, shutdown).await,
        Role::Answer => answer::serve(cfg, listeners, shutdown).await,
        Role::Embedder => embedder::serve(cfg, listeners, shutdown).await,
    }
}
