//! Raft gauges of the meta role (SPEC.md names): `raft_term`, `raft_leader` (leader id, 0 when none) and
//! `raft_commit_index`, labelled `meta_id` so that several meta nodes in one process (`attest dev`, tests)
//! stay apart.

use std::sync::Once;

pub const RAFT_TERM: &str = "raft_term";
pub const RAFT_LEADER: &str = "raft_leader";
pub const RAFT_COMMIT_INDEX: &str = "raft_commit_index";

static DESCRIBE: Once = Once::new();

/// Sets the three gauges of meta node `id`.
pub fn record_raft(id: u64, term: u64, leader: u64, commit: u64) {
    DESCRIBE.call_once(|| {
        ::metrics::describe_gauge!(RAFT_TERM, "Current Raft term of this meta node.");
        ::metrics::describe_gauge!(
            RAFT_LEADER,
            "Raft leader id as this meta node sees it (0: none)."
        );
        ::metrics::describe_gauge!(RAFT_COMMIT_INDEX, "Raft commit index of this meta node.");
    });
    let label = id.to_string();
    ::metrics::gauge!(RAFT_TERM, "meta_id" => label.clone()).set(term as f64);
    ::metrics::gauge!(RAFT_LEADER, "meta_id" => label.clone()).set(leader as f64);
    ::metrics::gauge!(RAFT_COMMIT_INDEX, "meta_id" => label).set(commit as f64);
}
