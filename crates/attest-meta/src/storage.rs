//! `RocksStorage`: the Raft log, hard state, conf state, snapshot and applied state machine in RocksDB.
//!
//! Keys (one RocksDB, no column families):
//! - `e/<index, 8 bytes big-endian>` → `eraftpb::Entry` (rust-protobuf encoding)
//! - `m/hard_state`, `m/conf_state`, `m/snapshot_meta` → the raft-rs messages
//! - `m/snapshot_data` → the state machine at the snapshot index (bincode of the whole state)
//! - `m/applied` + `s/…` → applied index and the state machine at that index, one record per key (the scheme
//!   is in `records`), written together. An apply writes only the records its commands changed; installing
//!   a snapshot replaces every `s/` key.
//! - `m/format` → the store's format version ([`STORE_FORMAT`], `attest_core::format`).
//! - `m/state` → only in a store written before the records existed (the whole state as one blob): a layout
//!   older than format version 1, refused on open.
//!
//! Every write is one synced `WriteBatch`, so a crash leaves either the old or the new value of everything a
//! batch touches. The entries of the log (bounded by `snapshot_threshold` through compaction) are also kept in
//! memory, so `raft::Storage` reads never touch the disk, except `snapshot` (a lagging follower, rare), which
//! reads the applied records back; RocksDB is what survives a restart.

use std::collections::{BTreeSet, VecDeque};
use std::path::Path;

use parking_lot::RwLock;
use protobuf::Message as PbMessage;
use raft::prelude::*;
use raft::{GetEntriesContext, RaftState, StorageError};
use rocksdb::{Options, WriteBatch, WriteOptions, DB};

use crate::error::MetaError;
use crate::records::{self, RecordKey};
use crate::state::StateMachine;

const HARD_STATE: &[u8] = b"m/hard_state";
const CONF_STATE: &[u8] = b"m/conf_state";
const SNAPSHOT_META: &[u8] = b"m/snapshot_meta";
const SNAPSHOT_DATA: &[u8] = b"m/snapshot_data";
const APPLIED: &[u8] = b"m/applied";
/// Where a store of the layout before version 1 kept its whole state (only to recognise and refuse one).
const LEGACY_STATE: &[u8] = b"m/state";
/// The store's format version (u32, big-endian; absent in stores written before it was recorded: version 1).
const FORMAT: &[u8] = b"m/format";

/// Meta's store layout (`attest_core::format`): the keys of this module's header and `records`.
pub const STORE_FORMAT: attest_core::format::Layout = attest_core::format::Layout {
    what: "meta store",
    current: 1,
};

fn entry_key(index: u64) -> [u8; 10] {
    let mut k = [0u8; 10];
    k[..2].copy_from_slice(b"e/");
    k[2..].copy_from_slice(&index.to_be_bytes());
    k
}

/// What the state machine looked like when last persisted (restart input).
#[derive(Debug, Clone, Default)]
pub struct AppliedState {
    pub index: u64,
    /// `None` on a fresh store.
    pub state: Option<StateMachine>,
}

/// What one persist wrote of the state machine (the `attest_meta_apply_bytes_total` metric, tests, the
/// `apply_cost` example).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateWrite {
    /// Record keys put, in key order.
    pub put: Vec<Vec<u8>>,
    /// Keys deleted (records that no longer exist).
    pub deleted: Vec<Vec<u8>>,
    /// Bytes of those keys and of the values put.
    pub bytes: u64,
}

impl StateWrite {
    fn put(&mut self, batch: &mut WriteBatch, key: Vec<u8>, value: &[u8]) {
        batch.put(&key, value);
        self.bytes += (key.len() + value.len()) as u64;
        self.put.push(key);
    }

    fn delete(&mut self, batch: &mut WriteBatch, key: Vec<u8>) {
        batch.delete(&key);
        self.bytes += key.len() as u64;
        self.deleted.push(key);
    }

    /// Replaces every record with those of `state`.
    fn replace_all(&mut self, batch: &mut WriteBatch, state: &StateMachine) {
        batch.delete_range(records::START, records::END);
        for key in state.record_keys() {
            let value = state.record(&key).expect("listed records exist");
            self.put(batch, key.to_bytes(), &value);
        }
    }
}

struct Core {
    hard_state: HardState,
    conf_state: ConfState,
    /// Latest snapshot (metadata and data); index 0: none.
    snapshot: Snapshot,
    /// The stored log, `entries[0].index == snapshot index + 1` when not empty.
    entries: VecDeque<Entry>,
    /// Index of the state machine stored under `s/`.
    applied: u64,
}

impl Core {
    fn first_index(&self) -> u64 {
        self.entries
            .front()
            .map_or(self.snapshot.get_metadata().index + 1, |e| e.index)
    }

    fn last_index(&self) -> u64 {
        self.entries
            .back()
            .map_or(self.snapshot.get_metadata().index, |e| e.index)
    }
}

/// Raft storage on RocksDB. Owned by the Raft loop (inside its `RawNode`).
pub struct RocksStorage {
    db: DB,
    /// Every write holds it exclusively, so a reader holding it shared sees the `s/` records and `applied`
    /// of one persist.
    core: RwLock<Core>,
}

fn decode<M: PbMessage>(bytes: Option<Vec<u8>>) -> Result<M, MetaError> {
    match bytes {
        Some(b) => Ok(M::parse_from_bytes(&b)?),
        None => Ok(M::new()),
    }
}

fn encode<M: PbMessage>(m: &M) -> Vec<u8> {
    m.write_to_bytes().expect("raft messages always encode")
}

/// The stored state machine: the `s/` records, else none (fresh store).
fn load_state(db: &DB) -> Result<Option<StateMachine>, MetaError> {
    if db.get(records::META_KEY)?.is_some() {
        let iter = db.iterator(rocksdb::IteratorMode::From(
            records::START,
            rocksdb::Direction::Forward,
        ));
        let mut records = Vec::new();
        for item in iter {
            let (k, v) = item?;
            if k.as_ref() >= records::END {
                break;
            }
            records.push((k, v));
        }
        return Ok(Some(StateMachine::from_records(records)?));
    }
    Ok(None)
}

/// Meta's memtable (RocksDB preallocates each log file at 1.1 times it).
const WRITE_BUFFER_BYTES: usize = 4 << 20;
const MANIFEST_PREALLOCATION_BYTES: usize = 1 << 20;
/// Start-up on a nearly full disk says why it cannot start, naming the free space it needs, instead of
/// failing in RocksDB (`failed`: RocksDB's own out-of-space error, when it got that far).
fn refuse_without_room_to_open(path: &Path, failed: Option<&str>) -> Result<(), MetaError> {
    match attest_core::disk::no_room_to_open(path, "meta's Raft store", failed) {
        Some(why) => Err(MetaError::DiskFull(why)),
        None => Ok(()),
    }
}

impl RocksStorage {
    /// Opens (or creates) the store at `path` and loads it into memory.
    pub fn open(path: &Path) -> Result<Self, MetaError> {
        refuse_without_room_to_open(path, None)?;
        std::fs::create_dir_all(path)
            .map_err(|e| MetaError::Codec(format!("create {}: {e}", path.display())))?;
        let mut opts = Options::default();
        attest_core::rocksdb_files::harden(&mut opts);
        opts.create_if_missing(true);
        // Meta's state is small: RocksDB's defaults (a 64 MiB memtable, and so a log file preallocated at
        // 1.1 times that, ~70 MiB, plus a 4 MiB MANIFEST) made a nearly full disk unable to start it.
        opts.set_write_buffer_size(WRITE_BUFFER_BYTES);
        opts.set_max_total_wal_size(4 * WRITE_BUFFER_BYTES as u64);
        opts.set_manifest_preallocation_size(MANIFEST_PREALLOCATION_BYTES);
        let db = DB::open(&opts, path).map_err(|e| {
            if attest_core::disk::is_out_of_space(e.as_ref()) {
                if let Err(refused) = refuse_without_room_to_open(path, Some(e.as_ref())) {
                    return refused;
                }
            }
            MetaError::Open(attest_core::rocksdb_files::explain_open_error(
                path,
                e.as_ref(),
            ))
        })?;
        let recorded = match db.get(FORMAT)? {
            Some(b) => Some(u32::from_be_bytes(b.as_slice().try_into().map_err(
                |_| MetaError::Codec(format!("{}: bad format version", path.display())),
            )?)),
            None => None,
        };
        // The one-blob layout came before version 1: no marker, no records, the blob.
        let blob_only = recorded.is_none()
            && db.get(records::META_KEY)?.is_none()
            && db.get(LEGACY_STATE)?.is_some();
        let found = STORE_FORMAT
            .check(
                if blob_only { Some(0) } else { recorded },
                &path.display().to_string(),
            )
            .map_err(|e| MetaError::Open(e.to_string()))?;
        if recorded != Some(STORE_FORMAT.current) {
            // Recorded at open, the store's first write: from here on it is of the current version.
            let mut sync = rocksdb::WriteOptions::default();
            sync.set_sync(true);
            db.put_opt(FORMAT, STORE_FORMAT.current.to_be_bytes(), &sync)?;
            tracing::info!(path = %path.display(), from = found, to = STORE_FORMAT.current, event = "format_upgraded",
                "meta store format version recorded");
        }
        let hard_state: HardState = decode(db.get(HARD_STATE)?)?;
        let conf_state: ConfState = decode(db.get(CONF_STATE)?)?;
        let mut snapshot = Snapshot::default();
        snapshot.set_metadata(decode(db.get(SNAPSHOT_META)?)?);
        snapshot.data = db.get(SNAPSHOT_DATA)?.unwrap_or_default().into();
        let mut entries = VecDeque::new();
        let start = entry_key(0);
        let iter = db.iterator(rocksdb::IteratorMode::From(
            &start,
            rocksdb::Direction::Forward,
        ));
        for item in iter {
            let (k, v) = item?;
            if !k.starts_with(b"e/") {
                break;
            }
            entries.push_back(Entry::parse_from_bytes(&v)?);
        }
        let applied = db
            .get(APPLIED)?
            .map(|b| {
                let arr: [u8; 8] = b.as_slice().try_into().unwrap_or_default();
                u64::from_be_bytes(arr)
            })
            .unwrap_or(0);
        Ok(RocksStorage {
            db,
            core: RwLock::new(Core {
                hard_state,
                conf_state,
                snapshot,
                entries,
                applied,
            }),
        })
    }

    /// Nothing was ever stored: a fresh node (bootstrap or join).
    pub fn is_empty(&self) -> bool {
        let core = self.core.read();
        core.hard_state == HardState::default()
            && core.conf_state == ConfState::default()
            && core.snapshot.get_metadata().index == 0
            && core.entries.is_empty()
    }

    /// Initialises a fresh store as an initial voter: a snapshot at index 1, term 1, holding `conf_state` and
    /// the initial state machine. Every initial node writes the same one, and a node that joins later is
    /// caught up by snapshot first, because the log starts after index 1.
    pub fn bootstrap(&self, conf_state: ConfState, state: Vec<u8>) -> Result<(), MetaError> {
        let mut snapshot = Snapshot::default();
        let meta = snapshot.mut_metadata();
        meta.index = 1;
        meta.term = 1;
        meta.set_conf_state(conf_state);
        snapshot.data = state.into();
        self.apply_snapshot(snapshot).map(drop)
    }

    /// The state machine as last persisted, read back from RocksDB (start-up).
    pub fn applied_state(&self) -> Result<AppliedState, MetaError> {
        let core = self.core.read();
        Ok(AppliedState {
            index: core.applied,
            state: load_state(&self.db)?,
        })
    }

    /// Index of the state machine as last persisted.
    pub fn applied_index(&self) -> u64 {
        self.core.read().applied
    }

    pub fn snapshot_index(&self) -> u64 {
        self.core.read().snapshot.get_metadata().index
    }

    pub fn conf_state(&self) -> ConfState {
        self.core.read().conf_state.clone()
    }

    fn write(&self, batch: WriteBatch) -> Result<(), MetaError> {
        let mut opts = WriteOptions::default();
        opts.set_sync(true);
        self.db.write_opt(batch, &opts)?;
        Ok(())
    }

    /// Appends entries (replacing any conflicting suffix) and saves the hard state, in one synced batch.
    pub fn append(
        &self,
        entries: &[Entry],
        hard_state: Option<&HardState>,
    ) -> Result<(), MetaError> {
        let mut core = self.core.write();
        let mut batch = WriteBatch::default();
        if let Some(first) = entries.first() {
            if first.index < core.first_index() {
                return Err(MetaError::Codec(format!(
                    "append at {} overwrites compacted entries (first index {})",
                    first.index,
                    core.first_index()
                )));
            }
            if first.index > core.last_index() + 1 {
                return Err(MetaError::Codec(format!(
                    "append at {} leaves a gap after {}",
                    first.index,
                    core.last_index()
                )));
            }
            let last_new = entries.last().map_or(first.index, |e| e.index);
            if core.last_index() > last_new {
                batch.delete_range(entry_key(last_new + 1), entry_key(core.last_index() + 1));
            }
            for e in entries {
                batch.put(entry_key(e.index), encode(e));
            }
        }
        if let Some(hs) = hard_state {
            batch.put(HARD_STATE, encode(hs));
        }
        self.write(batch)?;
        if let Some(first) = entries.first() {
            let keep = (first.index - core.first_index()) as usize;
            core.entries.truncate(keep);
            core.entries.extend(entries.iter().cloned());
        }
        if let Some(hs) = hard_state {
            core.hard_state = hs.clone();
        }
        Ok(())
    }

    /// Records a new commit index (from a `LightReady`).
    pub fn set_commit(&self, commit: u64) -> Result<(), MetaError> {
        let mut core = self.core.write();
        let mut hs = core.hard_state.clone();
        hs.commit = commit;
        let mut batch = WriteBatch::default();
        batch.put(HARD_STATE, encode(&hs));
        self.write(batch)?;
        core.hard_state = hs;
        Ok(())
    }

    /// Persists the state machine after applying entries up to `index`: the records in `changed` (put, or
    /// deleted when `state` no longer holds them); with the conf state when a conf change was among the entries. The hard state's commit is raised
    /// to `index` in the same batch (applied entries are committed), so a restart never sees applied > commit.
    pub fn persist_applied(
        &self,
        index: u64,
        state: &StateMachine,
        changed: &BTreeSet<RecordKey>,
        conf_state: Option<&ConfState>,
    ) -> Result<StateWrite, MetaError> {
        let mut core = self.core.write();
        let mut batch = WriteBatch::default();
        batch.put(APPLIED, index.to_be_bytes());
        let mut written = StateWrite::default();
        for key in changed {
            match state.record(key) {
                Some(value) => written.put(&mut batch, key.to_bytes(), &value),
                None => written.delete(&mut batch, key.to_bytes()),
            }
        }
        if let Some(cs) = conf_state {
            batch.put(CONF_STATE, encode(cs));
        }
        let mut hs = core.hard_state.clone();
        if hs.commit < index {
            hs.commit = index;
            batch.put(HARD_STATE, encode(&hs));
        }
        self.write(batch)?;
        core.hard_state = hs;
        if let Some(cs) = conf_state {
            core.conf_state = cs.clone();
        }
        core.applied = index;
        Ok(written)
    }

    /// Installs a snapshot (received from the leader, or the bootstrap one): replaces the log, the conf state
    /// and the state machine (every `s/` record), and returns the state it holds.
    pub fn apply_snapshot(&self, snapshot: Snapshot) -> Result<StateMachine, MetaError> {
        let mut core = self.core.write();
        let meta = snapshot.get_metadata().clone();
        if meta.index < core.snapshot.get_metadata().index {
            return Err(MetaError::Raft(raft::Error::Store(
                StorageError::SnapshotOutOfDate,
            )));
        }
        let state = StateMachine::decode(&snapshot.data)?;
        let mut hs = core.hard_state.clone();
        hs.term = hs.term.max(meta.term);
        hs.commit = hs.commit.max(meta.index);
        let mut batch = WriteBatch::default();
        batch.delete_range(entry_key(0), entry_key(u64::MAX));
        batch.delete(entry_key(u64::MAX));
        batch.put(SNAPSHOT_META, encode(&meta));
        batch.put(SNAPSHOT_DATA, &snapshot.data);
        batch.put(CONF_STATE, encode(meta.get_conf_state()));
        batch.put(HARD_STATE, encode(&hs));
        batch.put(APPLIED, meta.index.to_be_bytes());
        StateWrite::default().replace_all(&mut batch, &state);
        self.write(batch)?;
        core.entries.clear();
        core.hard_state = hs;
        core.conf_state = meta.get_conf_state().clone();
        core.applied = meta.index;
        core.snapshot = snapshot;
        Ok(state)
    }

    /// Log compaction: stores a snapshot of the state machine at `applied` (the caller's current state) and
    /// deletes the entries up to it.
    pub fn compact(&self, applied: u64, state: Vec<u8>) -> Result<(), MetaError> {
        let mut core = self.core.write();
        if applied < core.first_index() || applied > core.last_index() {
            return Ok(());
        }
        let offset = (applied - core.first_index()) as usize;
        let term = core.entries[offset].term;
        let mut snapshot = Snapshot::default();
        let meta = snapshot.mut_metadata();
        meta.index = applied;
        meta.term = term;
        meta.set_conf_state(core.conf_state.clone());
        snapshot.data = state.into();
        let mut batch = WriteBatch::default();
        batch.put(SNAPSHOT_META, encode(snapshot.get_metadata()));
        batch.put(SNAPSHOT_DATA, &snapshot.data);
        batch.delete_range(entry_key(0), entry_key(applied + 1));
        self.write(batch)?;
        core.entries.drain(..=offset);
        core.snapshot = snapshot;
        Ok(())
    }
}

impl raft::Storage for RocksStorage {
    fn initial_state(&self) -> raft::Result<RaftState> {
        let core = self.core.read();
        Ok(RaftState::new(
            core.hard_state.clone(),
            core.conf_state.clone(),
        ))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        let core = self.core.read();
        if low < core.first_index() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if high > core.last_index() + 1 {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        let offset = core.first_index();
        let mut out: Vec<Entry> = core
            .entries
            .range((low - offset) as usize..(high - offset) as usize)
            .cloned()
            .collect();
        raft::util::limit_size(&mut out, max_size.into());
        Ok(out)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        let core = self.core.read();
        let snap = core.snapshot.get_metadata();
        if idx == snap.index {
            return Ok(snap.term);
        }
        if idx < core.first_index() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if idx > core.last_index() {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        Ok(core.entries[(idx - core.first_index()) as usize].term)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.core.read().first_index())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.core.read().last_index())
    }

    /// A snapshot of the state machine at the applied index, built on demand from the applied records this
    /// store holds (not the last compaction snapshot): its conf state then includes every voter added so
    /// far, so a node that just joined accepts it (raft-rs refuses a snapshot whose conf state lacks it).
    /// The data is the whole state encoded, as every snapshot's.
    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        let core = self.core.read();
        let applied = core.applied;
        let unavailable = || raft::Error::Store(StorageError::SnapshotTemporarilyUnavailable);
        if applied < request_index || applied < core.snapshot.get_metadata().index {
            return Err(unavailable());
        }
        let term = if applied == core.snapshot.get_metadata().index {
            core.snapshot.get_metadata().term
        } else if applied >= core.first_index() && applied <= core.last_index() {
            core.entries[(applied - core.first_index()) as usize].term
        } else {
            return Err(unavailable());
        };
        // Holding `core` keeps a persist from running between this read and `applied`.
        let state = match load_state(&self.db) {
            Ok(Some(state)) => state,
            Ok(None) => return Err(unavailable()),
            Err(e) => return Err(raft::Error::Store(StorageError::Other(Box::new(e)))),
        };
        let mut snapshot = Snapshot::default();
        let meta = snapshot.mut_metadata();
        meta.index = applied;
        meta.term = term;
        meta.set_conf_state(core.conf_state.clone());
        snapshot.data = state.encode().into();
        Ok(snapshot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::Storage;

    /// A state that differs from the default and from every other `n` (its last node id).
    fn state(n: u64) -> StateMachine {
        let mut s = StateMachine::with_voters([(1, "http://m1".to_string())]);
        s.last_node_id = n;
        s
    }

    #[test]
    fn the_store_records_its_format_and_refuses_a_newer_one() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = RocksStorage::open(dir.path()).unwrap();
            assert_eq!(
                s.db.get(FORMAT).unwrap().unwrap(),
                STORE_FORMAT.current.to_be_bytes(),
                "written at open"
            );
            s.db.put(FORMAT, (STORE_FORMAT.current + 1).to_be_bytes())
                .unwrap();
        }
        let err = RocksStorage::open(dir.path()).err().unwrap().to_string();
        assert!(
            err.contains("meta store format version 2, but this build reads version 1"),
            "{err}"
        );
    }

    /// Persists `state` at `index` with only the scalar record marked changed.
    fn persist(s: &RocksStorage, index: u64, state: &StateMachine) {
        s.persist_applied(index, state, &BTreeSet::from([RecordKey::Meta]), None)
            .unwrap();
    }

    fn entry(index: u64, term: u64) -> Entry {
        Entry {
            index,
            term,
            data: vec![index as u8; 3].into(),
            ..Default::default()
        }
    }

    #[test]
    fn log_survives_reopen_and_conflicts_are_truncated() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = RocksStorage::open(dir.path()).unwrap();
            assert!(s.is_empty());
            s.bootstrap(ConfState::from((vec![1, 2, 3], vec![])), state(1).encode())
                .unwrap();
            let ents: Vec<Entry> = (2..=6).map(|i| entry(i, 2)).collect();
            let hs = HardState {
                term: 2,
                vote: 1,
                ..Default::default()
            };
            s.append(&ents, Some(&hs)).unwrap();
            // A new leader overwrites 5..6 with a shorter suffix.
            s.append(&[entry(5, 3)], None).unwrap();
            assert_eq!(s.last_index().unwrap(), 5);
            persist(&s, 4, &state(4));
        }
        let s = RocksStorage::open(dir.path()).unwrap();
        assert!(!s.is_empty());
        assert_eq!(s.first_index().unwrap(), 2);
        assert_eq!(s.last_index().unwrap(), 5);
        assert_eq!(s.term(1).unwrap(), 1);
        assert_eq!(s.term(5).unwrap(), 3);
        let rs = s.initial_state().unwrap();
        assert_eq!(rs.hard_state.vote, 1);
        assert_eq!(rs.hard_state.commit, 4);
        assert_eq!(rs.conf_state.voters, vec![1, 2, 3]);
        let applied = s.applied_state().unwrap();
        assert_eq!(applied.index, 4);
        assert_eq!(applied.state, Some(state(4)));
        let got = s
            .entries(2, 6, None::<u64>, GetEntriesContext::empty(false))
            .unwrap();
        assert_eq!(
            got.iter().map(|e| e.index).collect::<Vec<_>>(),
            vec![2, 3, 4, 5]
        );
    }

    /// The records of a switch: the alias put with the copy, the old collection and its manifests deleted;
    /// what is read back after a reopen is the state that wrote them.
    #[test]
    fn a_switch_is_stored_as_records_and_survives_a_reopen() {
        use crate::state::{CollectionDef, Command, ManifestRecord, NodeRole};

        let dir = tempfile::tempdir().unwrap();
        let mut state = StateMachine::default();
        let create = |name: &str| Command::CreateCollection {
            def: CollectionDef {
                name: name.into(),
                shards: 1,
                replication: 1,
                spec: None,
                chunking_json: String::new(),
                thresholds_json: String::new(),
            },
            live_nodes: vec![1],
            created_ms: 1,
        };
        let report = |collection: &str| Command::ReportManifests {
            manifests: vec![ManifestRecord {
                collection: collection.into(),
                shard: 0,
                node_id: 1,
                segments: vec!["seg-1".into()],
                live_documents: 1,
            }],
        };
        let written = {
            let s = RocksStorage::open(dir.path()).unwrap();
            let mut index = 0;
            let mut step = |state: &mut StateMachine, cmd: Command| {
                state.apply(&cmd).unwrap();
                index += 1;
                let changed = state.take_changes();
                s.persist_applied(index, state, &changed, None).unwrap()
            };
            step(
                &mut state,
                Command::RegisterNode {
                    name: "s1".into(),
                    address: "http://s1".into(),
                    role: NodeRole::Shard,
                    zone: String::new(),
                },
            );
            for cmd in [create("docs"), report("docs"), create("docs~r1")] {
                step(&mut state, cmd);
            }
            step(
                &mut state,
                Command::SwitchCollection {
                    name: "docs".into(),
                    to: "docs~r1".into(),
                },
            )
        };
        assert_eq!(
            written.put,
            vec![b"s/c/docs~r1".to_vec(), b"s/a/docs".to_vec()]
        );
        assert_eq!(
            written.deleted,
            vec![b"s/c/docs".to_vec(), b"s/m/docs/0/1".to_vec()]
        );
        let reopened = RocksStorage::open(dir.path()).unwrap();
        let applied = reopened.applied_state().unwrap().state.unwrap();
        assert_eq!(applied, state);
        assert_eq!(applied.aliases["docs"], "docs~r1");
    }

    #[test]
    fn compaction_keeps_a_snapshot_and_drops_entries() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = RocksStorage::open(dir.path()).unwrap();
            s.bootstrap(ConfState::from((vec![1], vec![])), state(1).encode())
                .unwrap();
            let ents: Vec<Entry> = (2..=10).map(|i| entry(i, 2)).collect();
            s.append(&ents, None).unwrap();
            s.compact(7, b"at7".to_vec()).unwrap();
            assert_eq!(s.first_index().unwrap(), 8);
            assert!(matches!(
                s.entries(5, 8, None::<u64>, GetEntriesContext::empty(false)),
                Err(raft::Error::Store(StorageError::Compacted))
            ));
        }
        let s = RocksStorage::open(dir.path()).unwrap();
        assert_eq!(s.first_index().unwrap(), 8);
        assert_eq!(s.last_index().unwrap(), 10);
        assert_eq!(s.term(7).unwrap(), 2);
        // A snapshot sent to a follower is built from the applied state, not the compaction one.
        persist(&s, 9, &state(9));
        let snap = s.snapshot(0, 2).unwrap();
        assert_eq!(snap.get_metadata().index, 9);
        assert_eq!(snap.get_metadata().term, 2);
        assert_eq!(&snap.data[..], &state(9).encode()[..]);
        assert_eq!(snap.get_metadata().get_conf_state().voters, vec![1]);
        // A follower installing a later snapshot drops its whole log.
        let mut newer = Snapshot::default();
        newer.mut_metadata().index = 20;
        newer.mut_metadata().term = 4;
        newer
            .mut_metadata()
            .set_conf_state(ConfState::from((vec![1, 2], vec![])));
        newer.data = state(20).encode().into();
        assert_eq!(s.apply_snapshot(newer).unwrap(), state(20));
        assert_eq!(
            (s.first_index().unwrap(), s.last_index().unwrap()),
            (21, 20)
        );
        assert_eq!(s.applied_state().unwrap().index, 20);
        assert_eq!(s.applied_state().unwrap().state, Some(state(20)));
        assert_eq!(s.initial_state().unwrap().hard_state.commit, 20);
    }
}
