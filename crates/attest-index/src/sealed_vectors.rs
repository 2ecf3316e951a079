//! The ingest log's copies of vectors that sealed segments already hold, dropped at compaction when the engine
//! is configured so (`EngineConfig::keep_sealed_vectors_in_log = false`).
//!
//! The log keeps every live row so that a damaged segment can be rebuilt from it; its vectors are most of its
//! bytes (1.5 KB of a 384-d row's ~1.6 KB) and the segment's `vectors.f32` holds the same floats again. Dropped,
//! a replica row costs ~1.5 KB less disk. What changes:
//! - a record at or below [`SealedVectors::drop_through`] loses its chunks' vectors when RocksDB next compacts
//!   it: a compaction filter on the `log` family rewrites the value, everything else of the record stays;
//! - readers that need a sealed row's vector (catch-up's document fetch) read it from its segment;
//! - a damaged segment can no longer be rebuilt from the log: its live documents are forgotten at open and the
//!   next catch-up copies them from a replica (at replication 1 they are lost, hence opt-in).
//!
//! Log keys are ascending sequence numbers, so RocksDB would move a flushed file down the levels without
//! rewriting it (a trivial move runs no filter). After each seal the newly sealed range is therefore compacted
//! by hand (a manual compaction with a filter never moves a file trivially); how far that has been done is
//! recorded in the log's `meta` family, so a range a crash left uncompacted is done at the next open.

use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rocksdb::compaction_filter::{CompactionFilter, Decision};
use rocksdb::compaction_filter_factory::{CompactionFilterContext, CompactionFilterFactory};
use rocksdb::DB;

use crate::error::Result;
use crate::wal::LogOp;

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
        let from = (done + 1).to_be_bytes();
        let to = seq.to_be_bytes();
        self.db
            .compact_range_cf(log, Some(&from[..]), Some(&to[..]));
        // Not synced: lost, the range is compacted again (a no-op for stripped records).
        self.db
            .put_cf(meta, KEY_DROPPED_THROUGH, seq.to_be_bytes())?;
        Ok(())
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
}
