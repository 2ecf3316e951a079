//! How the meta state machine is persisted: one RocksDB record per node, collection, key and manifest. An
//! apply writes only the records it changed, a restart rebuilds the same state from them, a snapshot replaces
//! them all, and a store written before the records (one `m/state` blob, before format version 1) is refused.

use std::collections::BTreeSet;
use std::path::Path;

use attest_meta::placement::Move;
use attest_meta::records::RecordKey;
use attest_meta::state::{
    ApiKeyRecord, CollectionDef, Command, ManifestRecord, NodeRole, StateMachine,
};
use attest_meta::storage::StateWrite;
use attest_meta::RocksStorage;
use raft::prelude::{ConfState, Entry, Snapshot};
use raft::Storage;

fn register(name: &str) -> Command {
    Command::RegisterNode {
        name: name.into(),
        address: format!("http://{name}"),
        role: NodeRole::Shard,
        zone: String::new(),
    }
}

fn create(name: &str, shards: u32, live: &[u64]) -> Command {
    Command::CreateCollection {
        def: CollectionDef {
            name: name.into(),
            shards,
            replication: 2,
            spec: None,
            chunking_json: String::new(),
            thresholds_json: String::new(),
        },
        live_nodes: live.to_vec(),
        created_ms: 42,
    }
}

fn report(collection: &str, shard: u32, node_id: u64, docs: u64) -> Command {
    Command::ReportManifests {
        manifests: vec![ManifestRecord {
            collection: collection.into(),
            shard,
            node_id,
            segments: vec![format!("seg-{docs}")],
            live_documents: docs,
        }],
    }
}

/// A storage and the state machine applied on it, entry by entry, as the Raft loop has them.
struct Node {
    storage: RocksStorage,
    state: StateMachine,
    index: u64,
}

impl Node {
    /// Bootstrapped (index 1) with one voter, as a one-node group starts.
    fn bootstrap(dir: &Path) -> Node {
        let storage = RocksStorage::open(dir).unwrap();
        let state = StateMachine::with_voters([(1, "http://m1".to_string())]);
        storage
            .bootstrap(ConfState::from((vec![1], vec![])), state.encode())
            .unwrap();
        Node {
            storage,
            state,
            index: 1,
        }
    }

    /// Appends the next entry to the log.
    fn append(&mut self, cmd: &Command) {
        self.index += 1;
        let entry = Entry {
            index: self.index,
            term: 1,
            data: cmd.encode().into(),
            ..Default::default()
        };
        self.storage.append(&[entry], None).unwrap();
    }

    /// Appends `cmd` as the next entry, applies it and persists what it changed.
    fn step(&mut self, cmd: &Command) -> StateWrite {
        self.append(cmd);
        self.state.apply(cmd).unwrap();
        self.persist()
    }

    /// Persists the changes of everything applied since the last persist.
    fn persist(&mut self) -> StateWrite {
        let changed = self.state.take_changes();
        self.storage
            .persist_applied(self.index, &self.state, &changed, None)
            .unwrap()
    }
}

/// Every key of the store at `dir` (opened after the storage was dropped), as text.
fn stored_keys(dir: &Path) -> BTreeSet<String> {
    let db = rocksdb::DB::open_default(dir).unwrap();
    db.iterator(rocksdb::IteratorMode::Start)
        .map(|item| String::from_utf8_lossy(&item.unwrap().0).into_owned())
        .filter(|k| !k.starts_with("e/"))
        .collect()
}

fn record_keys(state: &StateMachine) -> BTreeSet<String> {
    state
        .record_keys()
        .iter()
        .map(|k| String::from_utf8(k.to_bytes()).unwrap())
        .collect()
}

fn state_keys(keys: &BTreeSet<String>) -> BTreeSet<String> {
    keys.iter()
        .filter(|k| k.starts_with("s/"))
        .cloned()
        .collect()
}

#[test]
fn restart_after_applies_and_a_drop_gives_the_same_state() {
    let dir = tempfile::tempdir().unwrap();
    let (index, expected) = {
        let mut node = Node::bootstrap(dir.path());
        for n in ["s1", "s2", "s3"] {
            node.step(&register(n));
        }
        for c in ["keep", "gone", "moved"] {
            node.step(&create(c, 2, &[1, 2, 3]));
        }
        node.step(&report("keep", 0, 1, 10));
        node.step(&report("gone", 0, 1, 5));
        node.step(&report("gone", 1, 2, 6));
        node.step(&Command::PutApiKey {
            key: ApiKeyRecord {
                key_sha256: "ab".repeat(32),
                id: "ab".repeat(6),
                scopes: vec![1, 2],
                tenants: vec!["t".into()],
                ..Default::default()
            },
        });
        node.step(&Command::SetThresholds {
            collection: "keep".into(),
            thresholds_json: r#"{"min_score":0.5}"#.into(),
        });
        let dropped = node.step(&Command::DropCollection {
            name: "gone".into(),
        });
        assert!(dropped.put.is_empty());
        assert_eq!(
            dropped.deleted,
            vec![
                b"s/c/gone".to_vec(),
                b"s/m/gone/0/1".to_vec(),
                b"s/m/gone/1/2".to_vec()
            ],
            "a drop deletes the collection and its manifests, nothing else"
        );
        // A fourth node takes a replica of `moved` shard 0, which then catches up.
        node.step(&register("s4"));
        let from = node.state.collections["moved"].placement[0].replicas[0].node_id;
        node.step(&Command::ApplyRebalance {
            moves: vec![Move {
                collection: "moved".into(),
                shard: 0,
                from_node: from,
                to_node: 4,
            }],
        });
        node.step(&Command::ReplicaCaughtUp {
            collection: "moved".into(),
            shard: 0,
            node_id: 4,
        });
        let shard0 = &node.state.collections["moved"].placement[0];
        assert!(shard0.has_node(4) && !shard0.has_node(from));
        assert!(!node.state.collections.contains_key("gone"));
        // A lagging follower is sent the whole state, read back from the records.
        let snap = node.storage.snapshot(0, 2).unwrap();
        assert_eq!(snap.get_metadata().index, node.index);
        assert_eq!(StateMachine::decode(&snap.data).unwrap(), node.state);
        (node.index, node.state)
    };
    let reopened = RocksStorage::open(dir.path()).unwrap();
    let applied = reopened.applied_state().unwrap();
    assert_eq!(applied.index, index);
    assert_eq!(applied.state.as_ref(), Some(&expected));
    assert_eq!(applied.state.unwrap().encode(), expected.encode());
    drop(reopened);
    let keys = stored_keys(dir.path());
    assert_eq!(state_keys(&keys), record_keys(&expected));
    assert!(!keys.contains("m/state"));
}

#[test]
fn an_apply_touching_one_collection_of_many_writes_only_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut node = Node::bootstrap(dir.path());
    for n in ["s1", "s2", "s3"] {
        node.step(&register(n));
    }
    // 200 creates committed together are persisted by one write, as the Raft loop does with a batch.
    for i in 0..200 {
        let cmd = create(&format!("c{i}"), 3, &[1, 2, 3]);
        node.append(&cmd);
        node.state.apply(&cmd).unwrap();
    }
    assert_eq!(node.persist().put.len(), 200);
    let full = node.state.encode().len() as u64;

    let w = node.step(&Command::SetThresholds {
        collection: "c17".into(),
        thresholds_json: "{}".into(),
    });
    assert_eq!(w.put, vec![b"s/c/c17".to_vec()]);
    assert!(w.deleted.is_empty());
    let one = node
        .state
        .record(&RecordKey::Collection("c17".into()))
        .unwrap()
        .len();
    assert_eq!(w.bytes, (b"s/c/c17".len() + one) as u64);
    assert!(
        w.bytes * 100 < full,
        "{} bytes written of a {full}-byte state",
        w.bytes
    );

    // A heartbeat's manifest report writes its manifest only.
    let w = node.step(&report("c17", 0, 1, 3));
    assert_eq!(w.put, vec![b"s/m/c17/0/1".to_vec()]);
    assert!(w.deleted.is_empty());

    // A new node writes its record and the id counter.
    let w = node.step(&register("s4"));
    assert_eq!(w.put, vec![b"s/meta".to_vec(), b"s/n/4".to_vec()]);

    // A refused command writes nothing but the applied index.
    let refused = create("c17", 1, &[1, 2]);
    node.append(&refused);
    assert!(node.state.apply(&refused).is_err());
    assert_eq!(node.persist(), StateWrite::default());
    let Node { storage, state, .. } = node;
    drop(storage);
    let reopened = RocksStorage::open(dir.path()).unwrap();
    assert_eq!(reopened.applied_state().unwrap().state, Some(state));
}

#[test]
fn a_store_of_the_one_blob_layout_before_version_1_is_refused_naming_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = StateMachine::with_voters([(1, "http://m1".to_string())]);
    state.apply(&register("s1")).unwrap();
    {
        // Such a store held the log, hard state, conf state and snapshot keys of today, and its whole state as
        // one blob at `m/state`, without records or a format marker.
        let storage = RocksStorage::open(dir.path()).unwrap();
        storage
            .bootstrap(ConfState::from((vec![1], vec![])), state.encode())
            .unwrap();
        drop(storage);
        let db = rocksdb::DB::open_default(dir.path()).unwrap();
        let mut batch = rocksdb::WriteBatch::default();
        batch.delete_range(b"s/", b"s0");
        batch.delete(b"m/format");
        batch.put(b"m/state", state.encode());
        db.write(batch).unwrap();
    }
    let err = RocksStorage::open(dir.path()).err().unwrap().to_string();
    assert!(
        err.contains("meta store format version 0, but this build reads version 1"),
        "{err}"
    );
    assert!(err.contains("older release"), "{err}");
}

#[test]
fn installing_a_snapshot_replaces_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut node = Node::bootstrap(dir.path());
    for cmd in [
        register("s1"),
        register("s2"),
        create("old", 2, &[1, 2]),
        report("old", 0, 1, 4),
    ] {
        node.step(&cmd);
    }
    let storage = node.storage;
    // The leader's state: other nodes, another collection, another voter.
    let mut leader =
        StateMachine::with_voters([(1, "http://m1".to_string()), (2, "http://m2".to_string())]);
    for cmd in [
        register("x1"),
        register("x2"),
        register("x3"),
        create("new", 1, &[2, 3]),
    ] {
        leader.apply(&cmd).unwrap();
    }
    let mut snapshot = Snapshot::default();
    snapshot.mut_metadata().index = 50;
    snapshot.mut_metadata().term = 3;
    snapshot
        .mut_metadata()
        .set_conf_state(ConfState::from((vec![1, 2], vec![])));
    snapshot.data = leader.encode().into();
    assert_eq!(storage.apply_snapshot(snapshot).unwrap(), leader);
    drop(storage);

    let keys = stored_keys(dir.path());
    assert_eq!(state_keys(&keys), record_keys(&leader));
    assert!(!keys.contains("s/c/old") && !keys.contains("s/m/old/0/1"));
    let reopened = RocksStorage::open(dir.path()).unwrap();
    let applied = reopened.applied_state().unwrap();
    assert_eq!((applied.index, applied.state), (50, Some(leader)));
}
