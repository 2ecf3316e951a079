//! The shard engine's integration tests, one binary (a module per file beside this one; `common` their fixtures):
//! on-disk behaviour, durability under SIGKILL, recall, the shard quantizer, near-duplicate keys, snapshots, write
//! versions and sealed vectors dropped from the log. Run one file's tests with
//! `cargo test -p attest-index --test integration engine::`.

mod common;
mod durability;
mod engine;
mod ivfpq_recall;
mod near_dups;
mod quantizer;
mod recall_probe;
mod sealed_vectors;
mod search_tuning;
mod snapshot;
mod versions;
