//! The one test binary of Attest's cross-role suites: each module is a suite in the file of its name (`attest dev`
//! and the cluster roles driven through the real binary, and in-process stacks), `common/` their helpers. One
//! binary rather than one per suite: the suites share their helpers and their dependencies' generic code, which
//! were compiled and linked (FAISS included) 24 times. Run one suite with
//! `cargo test -p attest-tests --test integration cluster::`. `conversation` and `generator` are binaries of their
//! own: they assert exact counts of process-wide metrics (abstentions, dropped citations) that the in-process
//! answer tiers of other suites would also move.

mod common;

mod agent_heartbeat;
mod answer_steps;
mod bench;
mod catch_up_restart;
mod cli;
mod cluster;
mod cluster_credential;
mod cluster_defaults;
mod cluster_restart;
mod dev_control_plane;
mod disk_full;
mod e2e;
mod embedder_record;
mod eval;
mod fallback;
mod format_fixtures;
mod history;
mod mcp;
mod near_duplicates;
mod near_miss;
mod observability;
mod payloads;
mod processes;
mod reader;
mod reader_rerank;
mod reembed;
mod reranker_training;
mod revocation;
mod sandbox;
mod sealed_vectors_catch_up;
mod security;
mod smollm2;
mod snapshot_jobs;
mod snapshot_paths;
mod snapshots;
mod supplied_vectors;
mod tenant_grants;
mod tls;
mod traces;
