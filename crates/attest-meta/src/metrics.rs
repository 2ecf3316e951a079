//! Raft metrics of the meta role (docs/SPEC.md names): gauges `raft_term`, `raft_leader` (leader id, 0 when none),
//! `raft_commit_index` and `raft_applied_index`; counters `raft_proposals_total` (entries this node proposed)
//! and `raft_elections_total` (terms this node entered); counter `attest_meta_apply_bytes_total` (bytes of
//! state-machine records written by applies: keys and values put, keys deleted; what it costs to persist the
//! state now that an apply writes only the records it changed); counter `attest_meta_inbox_dropped_total{input}`
//! (inputs the Raft loop's full inbox refused, see `crate::inbox`). All labelled `meta_id` so that several meta
//! nodes in one process (tests) stay apart. `attest serve --role meta --http ADDR` serves them on `/metrics`.

use std::sync::Once;

pub const RAFT_TERM: &str = "raft_term";
pub const RAFT_LEADER: &str = "raft_leader";
pub const RAFT_COMMIT_INDEX: &str = "raft_commit_index";
pub const RAFT_APPLIED_INDEX: &str = "raft_applied_index";
pub const RAFT_PROPOSALS_TOTAL: &str = "raft_proposals_total";
pub const RAFT_ELECTIONS_TOTAL: &str = "raft_elections_total";
pub const APPLY_BYTES_TOTAL: &str = "attest_meta_apply_bytes_total";
pub const INBOX_DROPPED_TOTAL: &str = "attest_meta_inbox_dropped_total";

static DESCRIBE: Once = Once::new();

/// Sets the gauges of meta node `id`; a new term counts one election.
pub fn record_raft(id: u64, term: u64, leader: u64, commit: u64, applied: u64, new_term: bool) {
    describe();
    let label = id.to_string();
    ::metrics::gauge!(RAFT_TERM, "meta_id" => label.clone()).set(term as f64);
    ::metrics::gauge!(RAFT_LEADER, "meta_id" => label.clone()).set(leader as f64);
    ::metrics::gauge!(RAFT_COMMIT_INDEX, "meta_id" => label.clone()).set(commit as f64);
    ::metrics::gauge!(RAFT_APPLIED_INDEX, "meta_id" => label.clone()).set(applied as f64);
    if new_term {
        ::metrics::counter!(RAFT_ELECTIONS_TOTAL, "meta_id" => label).increment(1);
    }
}

/// Counts one entry proposed by meta node `id`.
pub fn record_proposal(id: u64) {
    describe();
    ::metrics::counter!(RAFT_PROPOSALS_TOTAL, "meta_id" => id.to_string()).increment(1);
}

/// Counts the state-machine bytes meta node `id` wrote for one batch of applied entries.
pub fn record_apply_bytes(id: u64, bytes: u64) {
    describe();
    ::metrics::counter!(APPLY_BYTES_TOTAL, "meta_id" => id.to_string()).increment(bytes);
}

/// Counts one input (`input`: its kind) that meta node `id`'s full Raft inbox refused.
pub fn record_inbox_dropped(id: u64, input: &'static str) {
    describe();
    ::metrics::counter!(INBOX_DROPPED_TOTAL, "meta_id" => id.to_string(), "input" => input)
        .increment(1);
}

fn describe() {
    DESCRIBE.call_once(|| {
        ::metrics::describe_gauge!(RAFT_TERM, "Current Raft term of this meta node.");
        ::metrics::describe_gauge!(
            RAFT_LEADER,
            "Raft leader id as this meta node sees it (0: none)."
        );
        ::metrics::describe_gauge!(RAFT_COMMIT_INDEX, "Raft commit index of this meta node.");
        ::metrics::describe_gauge!(
            RAFT_APPLIED_INDEX,
            "Last Raft entry applied to this meta node's state."
        );
        ::metrics::describe_counter!(RAFT_PROPOSALS_TOTAL, "Entries this meta node proposed.");
        ::metrics::describe_counter!(RAFT_ELECTIONS_TOTAL, "Raft terms this meta node entered.");
        ::metrics::describe_counter!(
            APPLY_BYTES_TOTAL,
            ::metrics::Unit::Bytes,
            "State-machine record bytes this meta node wrote when applying entries."
        );
        ::metrics::describe_counter!(
            INBOX_DROPPED_TOTAL,
            "Inputs (Raft messages, reports, requests) this meta node's full Raft inbox refused."
        );
    });
}
