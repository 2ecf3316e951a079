//! The meta cluster's integration tests, one binary (a module per file beside this one; `common` their helpers):
//! a 3-node cluster in one process, membership changes, partitions over real sockets, persistence and the watch.

mod cluster;
mod common;
mod membership;
mod partition;
mod persistence;
mod watch;
