//! The router role: collections, ingest and hybrid search over shard nodes. Its HTTP API v1 and gRPC fronts are
//! `attest-api`'s; this crate is what they call.
//! It reaches shards only through [`client::ShardClient`] (in process or gRPC), never through the shard crate.
//!
//! # Layout
//! - [`router`]: `Router`, the services the fronts call, each over [`shared::Shared`] (config, shard map,
//!   embedders, write clock, metrics; write quorum, calls to every replica, stable placement):
//!   [`collections::Collections`] (create, drop, maintain, stats; [`tenant_scope`]: whose documents a collection
//!   holds), [`ingest::Ingest`] (validate → dedup → chunk → embed → place → write; delete; [`near_dups`] asks the
//!   shards whether a batch's documents are already stored, the router keeps no dedup state),
//!   [`search::Search`] (validate → embed → fan out → fuse), [`keys::Keys`], [`snapshots::Snapshots`] and
//!   [`reembed::Reembed`].
//! - [`measured`]: search, search batch, ingest and delete as the fronts call them, each counted and timed per
//!   collection and tenant around its unmeasured body.
//! - [`fanout`]: the concurrent shard fan-out, per-lane global merge and fusion into hits with provenance;
//!   [`payloads`]: the fetch of the returned hits' title, text and metadata after fusion.
//! - [`rrf`]: weighted Reciprocal Rank Fusion, one pure property-tested function.
//! - [`client`]: `ShardClient { Local, Grpc }`.
//! - [`replicas`]: replica calls through tower (deadline, retry, hedge, limit, shed); reads and quorum writes.
//! - [`collection`]: a collection's record (shape, index parameters, embedder, replica sets) as meta's map says;
//!   [`embedders`]: the embedder each collection is embedded by (the configured one, or the local model it
//!   records, loaded when first needed).
//! - [`topology`]: [`topology::ClusterView`], meta's shard map watched, and where each shard's replicas live.
//! - [`access`]: the scope each operation needs and the tenant/collection rewrites of a caller's key;
//!   [`keys`]: API keys minted, listed and revoked through meta; [`tenant_scope`]: actions on a whole
//!   collection (drop, thresholds, maintain, the cluster view) under a key limited to some tenants.
//! - [`snapshots`]: cluster snapshots (create, list, restore) coordinated over meta and the shard nodes;
//!   [`snapshot_jobs`]: the jobs that run them in the background.
//! - [`meta_jobs`]: meta's job table ([`meta_jobs::JobTable`]) and what every job recorded there shares
//!   (snapshots, re-embeddings): its record, its progress reports and cancellation, its end, and the job whose
//!   router fell silent.
//! - [`reembed`]: re-embedding a collection online with another model (a copy built beside it, writes
//!   mirrored, one switch).
//! - [`error`]: router errors and their gRPC / HTTP mapping.
//! - [`config`]: limits and defaults.

pub mod access;
pub mod client;
pub mod collection;
pub mod collections;
pub mod config;
pub mod embedders;
pub mod error;
pub mod fanout;
pub mod ingest;
pub mod keys;
pub mod measured;
pub mod meta_jobs;
pub mod near_dups;
pub mod payloads;
pub mod reembed;
pub mod replicas;
pub mod router;
pub mod rrf;
pub mod search;
pub mod shared;
pub mod snapshot_jobs;
pub mod snapshots;
pub mod tenant_scope;
pub mod topology;

pub use client::ShardClient;
pub use config::RouterConfig;
pub use error::RouterError;
pub use ingest::{IngestDocument, IngestReport};
pub use router::{Router, RouterBuilder};
