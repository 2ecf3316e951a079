//! The rules every role of Attest shares, with no heavy dependency: limits and defaults ([`limits`]), how a
//! configuration section reports what cannot be right ([`config_check`]), the shape of the per-collection
//! settings meta stores ([`settings`]), the shape of an API key's grant ([`keys`]), those rules as JSON Schema
//! for the API document ([`contract`]), UTC calendar time ([`clock`]), write versions ([`version`]), the
//! free-space reserve of data directories ([`disk`]), on-disk format versions ([`format`]) and what a RocksDB
//! directory of a newer format means ([`rocksdb_files`]). Router, meta, shard and engine use these instead of
//! restating them.

pub mod clock;
pub mod config_check;
pub mod contract;
pub mod disk;
pub mod format;
pub mod keys;
pub mod limits;
pub mod rocksdb_files;
pub mod settings;
pub mod version;

pub use config_check::ConfigProblems;
