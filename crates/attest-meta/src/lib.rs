//! Cluster metadata under Raft (being written).
