//! The ingest log's copies of vectors that sealed segments already hold, dropped at compaction where the replica's
//! collection has another replica to copy a damaged segment's rows back from ([`LogVectors`],
//! `engine.keep_sealed_vectors_in_log`: `auto` by default).
//!
//! The log keeps every live row so that a damaged segment can be rebuilt from it; its vectors are most of its
//! bytes (1.5 KB of a 384-d row's ~1.6 KB) and the segment's `vectors.f32` holds the same floats again. Dropped,
//! a replica row costs ~1.5 KB less disk. What changes:
//! - a record at or below [`SealedVectors::drop_through`] loses its chunks' vectors when RocksDB next compacts
//!   it: a compaction filter on the `log` family rewrites the value, everything else of the record stays;
//! - readers that need a sealed row's vector (catch-up's document fetch) read it from its segment;
//! - a damaged segment can no longer be rebuilt from the log: its live documents are forgotten at open and the
//!   next catch-up copies them from a replica (at replication 1 they would be lost: `auto` keeps them there).
//!
//! Log keys are ascending sequence numbers, so RocksDB moves a flushed table down the levels without rewriting it
//! (a trivial move runs no filter). After each seal the newly sealed range is therefore compacted by hand, again
//! while a table within it still holds vectors (RocksDB 7.9 moves tables trivially in manual compactions too, and
//! an automatic one may move a table below the levels a manual one planned); how far that has been done is
//! recorded in the log's `meta` family, so a range a crash left uncompacted is done at the next open.

use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rocksdb::compaction_filter::{CompactionFilter, Decision};
use rocksdb::compaction_filter_factory::{CompactionFilterContext, CompactionFilterFactory};
use rocksdb::DB;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::Result;
use crate::wal::LogOp;

/// Whether a replica's ingest log keeps the vectors of rows its sealed segments hold (`engine.keep_sealed_vectors_in_log`:
/// `auto`, `true` or `false`). Resolved per replica when it is created, from its collection's replication, and
/// stored with its engine config: a replica keeps the layout it was created with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogVectors {
    /// Dropped where the collection has replication ≥ 2 (a damaged segment's rows are copied back from a
    /// replica), kept at replication 1 and where the replication is not known.
    #[default]
    Auto,
    Keep,
    Drop,
}

impl LogVectors {
    /// The choice for a replica of a collection with `replication` replicas per shard (0: not known).
    pub fn for_replication(self, replication: u32) -> Self {
        match self {
            LogVectors::Auto if replication >= 2 => LogVectors::Drop,
            LogVectors::Auto if replication == 1 => LogVectors::Keep,
            chosen => chosen,
        }
    }

    /// Whether the log keeps them (an unresolved `auto` keeps them: nothing says a replica can give them back).
    pub fn kept(self) -> bool {
        self != LogVectors::Drop
    }
}

impl Serialize for LogVectors {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            LogVectors::Auto => s.serialize_str("auto"),
            LogVectors::Keep => s.serialize_bool(true),
            LogVectors::Drop => s.serialize_bool(false),
        }
    }
}

impl<'de> Deserialize<'de> for LogVectors {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Flag(bool),
            Word(String),
        }
        match Written::deserialize(d)? {
            Written::Flag(true) => Ok(LogVectors::Keep),
            Written::Flag(false) => Ok(LogVectors::Drop),
            Written::Word(w) if w == "auto" => Ok(LogVectors::Auto),
            Written::Word(w) => Err(serde::de::Error::custom(format!(
                "expected true, false or \"auto\", got {w:?}"
            ))),
        }
    }
}

/// Compactions of one newly sealed range at most (see [`SealedVectors::drop_through`]).
const MAX_PASSES: usize = 4;
/// Bytes a stripped record takes in a table at most on average (ids, title, text and metadata of its chunks;
/// ~80 in the cluster benchmark, where one with its 384-d vector takes ~1,600).
const STRIPPED_RECORD_MOST: u64 = 768;

/// How far the log's sealed vectors have been compacted away (u64, big-endian, in the `meta` family).
pub(crate) const KEY_DROPPED_THROUGH: &[u8] = b"vectors_dropped_through";

/// The log record `value` with every chunk's vector removed, or `None` when it holds none (a delete, a record
/// already stripped, or bytes that do not decode — those are left as they are).
pub(crate) fn stripped(value: &[u8]) -> Option<Vec<u8>> {
    let mut op: LogOp = bincode::deserialize(value).ok()?;
    let LogOp::Upsert { chunks, .. } = &mut op else {
        return None;
    };
    if chunks.iter().all(|c| c.vector.is_empty()) {
        return None;
    }
    for c in chunks.iter_mut() {
        c.vector = Vec::new();
    }
    bincode::serialize(&op).ok()
}

/// Makes one [`StripFilter`] per compaction; all share the bound the engine moves.
pub(crate) struct StripFactory {
    pub(crate) through: Arc<AtomicU64>,
    name: CString,
}

impl StripFactory {
    pub(crate) fn new(through: Arc<AtomicU64>) -> Self {
        StripFactory {
            through,
            name: CString::new("attest.log.sealed_vectors").expect("no NUL"),
        }
    }
}

impl CompactionFilterFactory for StripFactory {
    type Filter = StripFilter;

    fn create(&mut self, _context: CompactionFilterContext) -> StripFilter {
        StripFilter {
            through: self.through.load(Ordering::Acquire),
            name: self.name.clone(),
            changed: Vec::new(),
        }
    }

    fn name(&self) -> &CStr {
        &self.name
    }
}

/// Strips the vectors of records at or below the bound read when its compaction started.
pub(crate) struct StripFilter {
    through: u64,
    name: CString,
    /// The last changed value: RocksDB copies it before the next call (see `filter`).
    changed: Vec<u8>,
}

impl CompactionFilter for StripFilter {
    fn filter(&mut self, _level: u32, key: &[u8], value: &[u8]) -> Decision {
        let Ok(seq) = <[u8; 8]>::try_from(key).map(u64::from_be_bytes) else {
            return Decision::Keep;
        };
        if seq > self.through {
            return Decision::Keep;
        }
        match stripped(value) {
            Some(bytes) => {
                self.changed = bytes;
                // SAFETY: the slice only has to outlive this call, not the program: RocksDB's C wrapper
                // (`rocksdb_compactionfilter_t::Filter` in db/c.cc) copies the new value into its own string
                // before the callback returns, and a factory-made filter is called by one thread at a time, so
                // `changed` is not touched until the copy is done. The crate asks for `'static` only because its
                // closure-based API cannot name that lifetime.
                let bytes: &'static [u8] = unsafe { std::mem::transmute(self.changed.as_slice()) };
                Decision::Change(bytes)
            }
            None => Decision::Keep,
        }
    }

    fn name(&self) -> &CStr {
        &self.name
    }
}

/// The engine's handle on dropping sealed vectors from the log; usable without the log's writer lock (RocksDB
/// compacts beside writes).
#[derive(Clone)]
pub struct SealedVectors {
    pub(crate) db: Arc<DB>,
    pub(crate) through: Arc<AtomicU64>,
}

impl SealedVectors {
    /// Records at or below `seq` (rows now held by sealed segments) may lose their vectors: the bound is raised
    /// and the range not yet compacted since is compacted now (blocking: a maintenance thread's work).
    pub fn drop_through(&self, seq: u64) -> Result<()> {
        self.through.fetch_max(seq, Ordering::AcqRel);
        let meta = self.db.cf_handle(crate::wal::CF_META).expect("meta cf");
        let done = match self.db.get_cf(meta, KEY_DROPPED_THROUGH)? {
            Some(b) => <[u8; 8]>::try_from(b.as_slice()).map_or(0, u64::from_be_bytes),
            None => 0,
        };
        if done >= seq {
            return Ok(());
        }
        let log = self.db.cf_handle(crate::wal::CF_LOG).expect("log cf");
        let mut from = done + 1;
        for _ in 0..MAX_PASSES {
            let (lo, hi) = (from.to_be_bytes(), seq.to_be_bytes());
            self.db.compact_range_cf(log, Some(&lo[..]), Some(&hi[..]));
            // A manual compaction plans its levels when it starts; an automatic one may meanwhile move a table
            // below them without rewriting it (seen at 1M: 266 MB of a replica's log left whole), so the range
            // is compacted again from the first table still holding vectors.
            match self.first_unstripped_table(from, seq)? {
                Some(start) => from = start,
                None => break,
            }
        }
        // Not synced: lost, the range is compacted again (a no-op for stripped records). A table still left is
        // stripped by the next compaction that reads it (every compaction runs the filter).
        self.db
            .put_cf(meta, KEY_DROPPED_THROUGH, seq.to_be_bytes())?;
        Ok(())
    }

    /// The first key of the first table of the `log` family that lies within `from..=to` and still holds
    /// vectors (more than [`STRIPPED_RECORD_MOST`] bytes a record on average); None when there is none.
    pub(crate) fn first_unstripped_table(&self, from: u64, to: u64) -> Result<Option<u64>> {
        let key = |k: &Option<Vec<u8>>| {
            k.as_deref()
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map(u64::from_be_bytes)
        };
        let mut first: Option<u64> = None;
        for f in self.db.live_files()? {
            let (Some(start), Some(end)) = (key(&f.start_key), key(&f.end_key)) else {
                continue;
            };
            let whole = f.column_family_name == crate::wal::CF_LOG
                && f.num_entries > 0
                && f.size as u64 / f.num_entries > STRIPPED_RECORD_MOST;
            // A table reaching past `to` legitimately holds vectors; the next seal's range covers it.
            if whole && end >= from && end <= to {
                first = Some(first.map_or(start, |s| s.min(start)));
            }
        }
        Ok(first)
    }

    /// The bound records are stripped through (0: none).
    pub fn through(&self) -> u64 {
        self.through.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::LoggedChunk;

    fn upsert(vector: Vec<f32>) -> LogOp {
        LogOp::Upsert {
            doc_id: "d".into(),
            tenant: "t".into(),
            chunks: vec![LoggedChunk {
                chunk_id: "d#0".into(),
                title: "title".into(),
                text: "text".into(),
                metadata_json: "{}".into(),
                vector,
            }],
        }
    }

    #[test]
    fn a_stripped_record_keeps_everything_but_its_vectors() {
        let with = bincode::serialize(&upsert(vec![0.5; 384])).unwrap();
        let without = stripped(&with).expect("has vectors");
        assert_eq!(
            bincode::deserialize::<LogOp>(&without).unwrap(),
            upsert(Vec::new())
        );
        assert!(without.len() + 384 * 4 <= with.len());
        assert_eq!(stripped(&without), None, "already stripped");
        let delete = LogOp::Delete {
            doc_id: "d".into(),
            tenant: "t".into(),
        };
        assert_eq!(stripped(&bincode::serialize(&delete).unwrap()), None);
        assert_eq!(stripped(b"not a record"), None);
    }

    #[test]
    fn a_sealed_range_is_compacted_until_no_table_in_it_holds_vectors() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = crate::wal::IngestLog::open(dir.path()).unwrap();
        // Floats that do not compress (tables are compressed: a constant vector would take a few bytes).
        let mut state = 7u32;
        let mut vector = || {
            (0..384)
                .map(|_| {
                    state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    state as f32 / u32::MAX as f32
                })
                .collect::<Vec<f32>>()
        };
        for _ in 0..4 {
            let ops: Vec<(LogOp, u64)> = (0..500).map(|_| (upsert(vector()), 0)).collect();
            log.append(&ops).unwrap();
        }
        let handle = log.sealed_vectors();
        let cf = handle.db.cf_handle(crate::wal::CF_LOG).unwrap();
        // Tables holding vectors, moved to the bottom before anything was sealed: what a seal can find.
        handle.db.compact_range_cf(cf, None::<&[u8]>, None::<&[u8]>);
        assert_eq!(handle.first_unstripped_table(1, 2000).unwrap(), Some(1));
        handle.drop_through(1500).unwrap();
        assert_eq!(handle.first_unstripped_table(1, 1500).unwrap(), None);
        let vectors: Vec<bool> = log
            .range(1, 2000)
            .unwrap()
            .into_iter()
            .map(|(_, op)| match op {
                LogOp::Upsert { chunks, .. } => !chunks[0].vector.is_empty(),
                LogOp::Delete { .. } => unreachable!(),
            })
            .collect();
        assert_eq!(vectors.iter().filter(|v| !**v).count(), 1500);
        assert!(
            vectors[1500..].iter().all(|v| *v),
            "unsealed records keep theirs"
        );
    }

    #[test]
    fn auto_drops_the_log_vectors_only_where_a_replica_can_give_them_back() {
        assert_eq!(LogVectors::Auto.for_replication(2), LogVectors::Drop);
        assert_eq!(LogVectors::Auto.for_replication(3), LogVectors::Drop);
        assert_eq!(LogVectors::Auto.for_replication(1), LogVectors::Keep);
        assert!(LogVectors::Auto.for_replication(0).kept(), "unknown: kept");
        assert_eq!(LogVectors::Keep.for_replication(2), LogVectors::Keep);
        assert_eq!(LogVectors::Drop.for_replication(1), LogVectors::Drop);
        // Replicas created before `auto` stored a flag; the flag still reads, and every form round-trips.
        for (written, read) in [
            ("true", LogVectors::Keep),
            ("false", LogVectors::Drop),
            ("\"auto\"", LogVectors::Auto),
        ] {
            let parsed: LogVectors = serde_json::from_str(written).unwrap();
            assert_eq!(parsed, read);
            assert_eq!(serde_json::to_string(&parsed).unwrap(), written);
        }
        let wrong = serde_json::from_str::<LogVectors>("\"sometimes\"").unwrap_err();
        assert!(wrong.to_string().contains("auto"), "{wrong}");
    }
}
