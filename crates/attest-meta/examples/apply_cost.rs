//! What a Raft apply costs to persist with 1,000 collections: the bytes of state records written per apply
//! now (only the records a command changed) against the size of the whole encoded state, which is what
//! every apply wrote before (one `m/state` blob).
//!
//! Opens a fresh storage in a temp dir, registers 3 shard nodes, creates 1,000 collections (3 shards, 2
//! replicas), then applies 100 heartbeat-like commands (99 manifest reports, one new node), each persisted as
//! the Raft loop does. Run: `cargo run --example apply_cost`.

use std::time::Instant;

use attest_meta::state::{CollectionDef, Command, ManifestRecord, NodeRole, StateMachine};
use attest_meta::RocksStorage;
use raft::prelude::{ConfState, Entry};

const COLLECTIONS: usize = 1000;
const APPLIES: usize = 100;

/// A storage and the state machine applied on it, as the Raft loop has them.
struct Node {
    storage: RocksStorage,
    state: StateMachine,
    index: u64,
}

impl Node {
    /// Appends `cmd` as the next entry, applies it and persists what it changed; returns the bytes written.
    fn step(&mut self, cmd: &Command) -> anyhow::Result<u64> {
        self.index += 1;
        let entry = Entry {
            index: self.index,
            term: 1,
            data: cmd.encode().into(),
            ..Default::default()
        };
        self.storage.append(&[entry], None)?;
        self.state.apply(cmd)?;
        let changed = self.state.take_changes();
        let written = self
            .storage
            .persist_applied(self.index, &self.state, &changed, None)?;
        Ok(written.bytes)
    }
}

fn register(name: &str) -> Command {
    Command::RegisterNode {
        name: name.into(),
        address: format!("http://{name}:7000"),
        role: NodeRole::Shard,
        zone: String::new(),
    }
}

fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let storage = RocksStorage::open(dir.path())?;
    let state = StateMachine::with_voters([(1, "http://meta-1:7100".to_string())]);
    storage.bootstrap(ConfState::from((vec![1], vec![])), state.encode())?;
    let mut node = Node {
        storage,
        state,
        index: 1,
    };
    for n in ["shard-1", "shard-2", "shard-3"] {
        node.step(&register(n))?;
    }
    let started = Instant::now();
    for i in 0..COLLECTIONS {
        node.step(&Command::CreateCollection {
            def: CollectionDef {
                name: format!("collection-{i:04}"),
                shards: 3,
                replication: 2,
                spec: None,
                chunking_json: r#"{"max_tokens":256,"overlap":32}"#.into(),
                thresholds_json: String::new(),
            },
            live_nodes: vec![1, 2, 3],
            created_ms: 1_700_000_000_000 + i as u64,
        })?;
    }
    let setup = started.elapsed();

    let started = Instant::now();
    let (mut written, mut full) = (0u64, 0u64);
    for i in 0..APPLIES {
        let cmd = if i == APPLIES / 2 {
            register("shard-4")
        } else {
            // A shard node's heartbeat reporting the segments of one replica that changed.
            let collection = format!("collection-{:04}", (i * 37) % COLLECTIONS);
            let shard = (i % 3) as u32;
            let replica =
                &node.state.collections[&collection].placement[shard as usize].replicas[0];
            Command::ReportManifests {
                manifests: vec![ManifestRecord {
                    collection,
                    shard,
                    node_id: replica.node_id,
                    segments: (0..4).map(|s| format!("seg-{i:06}-{s}")).collect(),
                    live_documents: 10_000 + i as u64,
                }],
            }
        };
        written += node.step(&cmd)?;
        // What the same apply wrote before: the whole state, encoded.
        full += node.state.encode().len() as u64;
    }
    let applies = started.elapsed();

    let per_apply = written as f64 / APPLIES as f64;
    let full_state = full as f64 / APPLIES as f64;
    println!(
        "setup: {} collections created in {:.2?}; {} applies in {:.2?}",
        node.state.collections.len(),
        setup,
        APPLIES,
        applies
    );
    println!(
        "apply bytes: {per_apply:.0} per apply vs full state {full_state:.0} (ratio {:.5})",
        per_apply / full_state
    );
    Ok(())
}
