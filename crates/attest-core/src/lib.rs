//! The rules every role of Attest shares, with no dependency: limits and defaults ([`limits`]) and how a
//! configuration section reports what cannot be right ([`config_check`]). Router, meta, shard and engine use
//! these instead of restating them.

pub mod config_check;
pub mod limits;

pub use config_check::ConfigProblems;
