//! The write-ahead ingest log, in RocksDB.
//!
//! Three column families:
//! - `log`: sequence number (u64, big-endian) → one [`LogOp`] (bincode). Kept for every live row, so a sealed
//!   segment that is found corrupt at start-up can be rebuilt from it; compaction drops superseded records.
//! - `docs`: [`doc_key`] (tenant, document id) → its latest [`DocVersion`]. This *is* the tombstone set: a row
//!   is live only when it carries its document's latest upsert sequence number. Ids are per tenant: two tenants
//!   may each hold a document `a`, and neither can learn from a write that the other holds one.
//! - `meta`: engine bookkeeping (`last_seq`, the format version, the log's id and the notes on peers' logs of
//!   [`crate::log_identity`]).
//! - `dedup`: the near-duplicate keys of live documents ([`crate::near_dup`]), changed in the same batch as
//!   the documents they describe; which of its buckets hold entries is also kept in memory
//!   ([`crate::bucket_presence`]), so that lookups of new texts need not seek.
//!
//! Sync policy: every append is one `WriteBatch` written with `sync = true` (fsync of the RocksDB WAL) before
//! the call returns, so an acknowledged write survives `kill -9` and power loss. Callers batch whole requests
//! into one append, which makes the fsync a group commit.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rocksdb::{ColumnFamilyDescriptor, IteratorMode, Options, WriteBatch, WriteOptions, DB};
use serde::{Deserialize, Serialize};

use crate::bucket_presence::BucketPresence;
use crate::changes::{self, ChangesWriter};
use crate::error::{IndexError, Result};
use crate::near_dup::{self, NearDupKeys, NearDupMatch, NearDupWriter};
use crate::sealed_vectors::{SealedVectors, StripFactory};

/// The error of a write to a log whose write `first` failed: disk full when that was the filesystem out of
/// space (the caller frees space and restarts), else the storage error; both say the log is read-only now.
fn refused_since(first: &IndexError) -> IndexError {
    let message = format!(
        "the ingest log refuses writes since a write failed ({first}); reads go on, restart the node once the \
         cause is fixed"
    );
    if first.is_disk_full() {
        IndexError::DiskFull(format!("disk full: {message}"))
    } else {
        IndexError::RocksDb(message)
    }
}

/// The ingest log's directory in a shard directory (and in a snapshot of one).
pub const WAL_DIR: &str = "wal";

pub(crate) const CF_LOG: &str = "log";
const CF_DOCS: &str = "docs";
pub(crate) const CF_META: &str = "meta";
const CF_DEDUP: &str = "dedup";

/// RocksDB keeps a write-ahead file until every column family with data in it has flushed its memtable, and
/// `meta` (one key rewritten per append) never fills one: unbounded, every WAL file since the last start stays
/// on disk (measured on a 500,000-row replica: 1.28 GB of files holding nothing the tables do not, beside
/// 1.11 GB of tables). Past this many bytes of WAL, RocksDB flushes the column families that hold the oldest.
const MAX_TOTAL_WAL_BYTES: u64 = 256 << 20;
const KEY_LAST_SEQ: &[u8] = b"last_seq";
/// The log's format version (u32, big-endian; absent in logs written before it was recorded: version 1).
const KEY_FORMAT: &[u8] = b"format";

/// The ingest log's layout (`attest_core::format`): the column families and encodings of this module.
pub const LOG_FORMAT: attest_core::format::Layout = attest_core::format::Layout {
    what: "shard ingest log",
    // 2: the `changes` family ([`crate::changes`]), built from `docs` when a version-1 log opens.
    current: 2,
};

/// A page of a catch-up listing: (document key or id, its current version) pairs.
pub type VersionPage = Vec<(String, DocVersion)>;

/// Separates tenant and document id in a [`doc_key`]; tenants never contain it
/// ([`attest_core::keys::tenant_problem`]).
const DOC_KEY_SEPARATOR: char = '\0';

/// The key of a document in the `docs` column family and the engine's version map. Keys sort by tenant, then
/// document id, which is also the order of the catch-up listing (its cursor is a key).
pub fn doc_key(tenant: &str, doc_id: &str) -> String {
    let mut key = String::with_capacity(tenant.len() + 1 + doc_id.len());
    key.push_str(tenant);
    key.push(DOC_KEY_SEPARATOR);
    key.push_str(doc_id);
    key
}

/// The document id of a [`doc_key`].
pub fn doc_id_of_key(key: &str) -> &str {
    key.split_once(DOC_KEY_SEPARATOR).map_or(key, |(_, id)| id)
}

/// One chunk as written to the log: everything needed to rebuild any segment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggedChunk {
    pub chunk_id: String,
    pub title: String,
    pub text: String,
    pub metadata_json: String,
    pub vector: Vec<f32>,
}

/// One logged operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum LogOp {
    /// Replaces every chunk of `doc_id`.
    Upsert {
        doc_id: String,
        tenant: String,
        chunks: Vec<LoggedChunk>,
    },
    Delete {
        doc_id: String,
        tenant: String,
    },
}

impl LogOp {
    pub fn doc_id(&self) -> &str {
        match self {
            LogOp::Upsert { doc_id, .. } | LogOp::Delete { doc_id, .. } => doc_id,
        }
    }

    pub fn tenant(&self) -> &str {
        match self {
            LogOp::Upsert { tenant, .. } | LogOp::Delete { tenant, .. } => tenant,
        }
    }

    /// The [`doc_key`] of the document this operation writes.
    pub fn doc_key(&self) -> String {
        doc_key(self.tenant(), self.doc_id())
    }
}

/// The latest state of one document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocVersion {
    pub seq: u64,
    pub deleted: bool,
    /// The tenant that owns the document: another tenant can neither overwrite nor delete it.
    pub tenant: String,
    /// Write version (chosen by the router, the same on every replica): a write older than this one is
    /// ignored, so replicas converge whatever order writes and catch-up arrive in. Local seqs differ per
    /// replica; versions do not.
    pub version: u64,
}

/// Handle on the log. `append` is serialised by the engine's writer lock.
pub struct IngestLog {
    db: Arc<DB>,
    /// Written only by `append` (under the engine's writer lock); read without it through [`LogReader`].
    last_seq: Arc<AtomicU64>,
    /// Which near-duplicate buckets hold entries, so that lookups of new texts need not seek.
    presence: BucketPresence,
    /// Records at or below this lose their vectors at compaction ([`crate::sealed_vectors`]; 0: none do).
    strip_through: Arc<AtomicU64>,
    /// Which log this is ([`crate::log_identity`]).
    log_id: Arc<AtomicU64>,
    /// The first write RocksDB failed, after which the log refuses writes until it is opened again. RocksDB
    /// keeps a log writer that failed (ENOSPC, EIO) in an error state; Debian's build asserts when that writer
    /// is synced again, which aborts the process. So a failed write makes the log read-only here instead:
    /// reads and searches go on, writes get the error, and a restart reopens it (RocksDB recovers from its
    /// files; what was acknowledged was synced before).
    failed: Arc<std::sync::OnceLock<IndexError>>,
}

/// Reads of log records that need no writer lock (RocksDB reads are safe beside writes): what a search's payload
/// fetch uses, so that it does not queue behind an ingest's synced append. A record a reader is told to read stays
/// until the engine's state says it is dead, which the reader holds still while it reads (see
/// `ShardEngine::fetch_chunks`).
#[derive(Clone)]
pub struct LogReader {
    db: Arc<DB>,
    last_seq: Arc<AtomicU64>,
    log_id: Arc<AtomicU64>,
}

/// Every column family of the log, in the order they are opened.
const ALL_FAMILIES: [&str; 5] = [CF_LOG, CF_DOCS, CF_META, CF_DEDUP, changes::CF_CHANGES];

impl LogReader {
    /// Flushes every column family's memtable to its tables, so that RocksDB can delete the write-ahead files
    /// holding what they held. A seal calls it: until the WAL bound (`MAX_TOTAL_WAL_BYTES`) forces a flush, a
    /// replica of under ~150,000 rows otherwise keeps every write twice, once in a table and once in the WAL
    /// (measured: 3.5 KB of WAL per row of a 33,000-row replica, beside 2.1 KB of segment).
    pub fn flush_to_tables(&self) -> Result<()> {
        for name in ALL_FAMILIES {
            let cf = self.db.cf_handle(name).expect("log column family");
            self.db.flush_cf(cf)?;
        }
        Ok(())
    }

    /// Records `lo..=hi`, in order (see [`IngestLog::range`]).
    pub fn range(&self, lo: u64, hi: u64) -> Result<Vec<(u64, LogOp)>> {
        records(&self.db, lo, hi)
    }

    /// Documents whose current version is a record after `after_seq`, in log order, from the next `limit`
    /// entries of the changes index; with the position to list after next (None: none left): catch-up's
    /// listing of what changed. Reads need no writer lock: a write moves a document's entry and its
    /// version in one batch.
    pub fn doc_versions_changed_after(
        &self,
        after_seq: u64,
        limit: usize,
    ) -> Result<(VersionPage, Option<u64>)> {
        let docs = self.db.cf_handle(CF_DOCS).expect("docs cf");
        let entries = changes::after(&self.db, after_seq, limit)?;
        let next = (entries.len() >= limit)
            .then(|| entries.last().map(|(seq, _)| *seq))
            .flatten();
        let mut out = Vec::with_capacity(entries.len());
        for (seq, key) in entries {
            let version = self.db.get_cf(&docs, key.as_bytes())?;
            let version = version.map(|v| decode::<DocVersion>(&v)).transpose()?;
            // The index and `docs` change in one batch; a document that moved since the entry was read has an
            // entry at its newer position, listed later.
            if let Some(v) = version.filter(|v| v.seq == seq) {
                out.push((key, v));
            }
        }
        Ok((out, next))
    }

    /// Up to `limit` (key, version) pairs with [`doc_key`]s after `after` (exclusive), in key order: catch-up's
    /// full listing. No writer lock: the iterator reads one consistent view of `docs`.
    pub fn doc_versions_after(&self, after: &str, limit: usize) -> Result<VersionPage> {
        doc_versions_after(&self.db, after, limit)
    }

    /// The sequence number of the last durable record, without waiting for a writer: stats, heartbeats and
    /// scrapes read it while an ingest holds the writer lock through its synced append.
    pub fn last_seq(&self) -> u64 {
        self.last_seq.load(Ordering::Acquire)
    }

    /// Which log this is: its positions compare only with others of the same id ([`crate::log_identity`]).
    pub fn log_id(&self) -> u64 {
        self.log_id.load(Ordering::Acquire)
    }

    /// The note last kept on peer node `peer`'s log (catch-up's cursor), if any.
    pub fn peer_note(&self, peer: u64) -> Result<Option<Vec<u8>>> {
        crate::log_identity::peer_note(&self.db, peer)
    }

    /// Keeps `note` on peer node `peer`'s log; keep it only after the writes it accounts for are durable.
    pub fn keep_peer_note(&self, peer: u64, note: &[u8]) -> Result<()> {
        crate::log_identity::keep_peer_note(&self.db, peer, note)
    }
}

/// See [`LogReader::doc_versions_after`].
fn doc_versions_after(db: &DB, after: &str, limit: usize) -> Result<VersionPage> {
    let docs = db.cf_handle(CF_DOCS).expect("docs cf");
    let mut out = Vec::with_capacity(limit.min(4096));
    let mode = if after.is_empty() {
        IteratorMode::Start
    } else {
        IteratorMode::From(after.as_bytes(), rocksdb::Direction::Forward)
    };
    for item in db.iterator_cf(&docs, mode) {
        let (k, v) = item?;
        if !after.is_empty() && k.as_ref() == after.as_bytes() {
            continue;
        }
        out.push((String::from_utf8_lossy(&k).into_owned(), decode(&v)?));
        if out.len() >= limit {
            break;
        }
    }
    Ok(out)
}

/// A key that is a log position (big-endian u64): the `log` and `changes` families'.
pub(crate) fn seq_key(key: &[u8]) -> Result<u64> {
    Ok(u64::from_be_bytes(key.try_into().map_err(|_| {
        IndexError::Serialization("bad log position key".into())
    })?))
}

/// Records `lo..=hi` of the log column family, in order.
fn records(db: &DB, lo: u64, hi: u64) -> Result<Vec<(u64, LogOp)>> {
    let log = db.cf_handle(CF_LOG).expect("log cf");
    let start = lo.to_be_bytes();
    let mut out = Vec::new();
    for item in db.iterator_cf(
        &log,
        IteratorMode::From(&start, rocksdb::Direction::Forward),
    ) {
        let (k, v) = item?;
        let seq = seq_key(&k)?;
        if seq > hi {
            break;
        }
        out.push((seq, decode(&v)?));
    }
    Ok(out)
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    bincode::serialize(value).map_err(|e| IndexError::Serialization(e.to_string()))
}

fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<T> {
    bincode::deserialize(bytes).map_err(|e| IndexError::Serialization(e.to_string()))
}

/// Whether `docs` holds a key without the tenant separator (the layout before per-tenant ids).
fn has_bare_document_keys(db: &DB) -> Result<bool> {
    let docs = db.cf_handle(CF_DOCS).expect("docs cf");
    for item in db.iterator_cf(docs, IteratorMode::Start) {
        let (k, _) = item?;
        if !k.contains(&(DOC_KEY_SEPARATOR as u8)) {
            return Ok(true);
        }
    }
    Ok(false)
}

impl IngestLog {
    pub fn open(path: &Path) -> Result<Self> {
        Self::open_with_wal_bound(path, MAX_TOTAL_WAL_BYTES)
    }

    fn open_with_wal_bound(path: &Path, max_total_wal_bytes: u64) -> Result<Self> {
        if let Some(why) = attest_core::disk::no_room_to_open(path, "the ingest log", None) {
            return Err(IndexError::DiskFull(why));
        }
        let mut opts = Options::default();
        attest_core::rocksdb_files::harden(&mut opts);
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        opts.set_max_total_wal_size(max_total_wal_bytes);
        let strip_through = Arc::new(AtomicU64::new(0));
        let mut log_opts = Options::default();
        log_opts.set_compaction_filter_factory(StripFactory::new(Arc::clone(&strip_through)));
        let mut log_opts = Some(log_opts);
        let cfs = ALL_FAMILIES.map(|name| {
            let options = match name {
                CF_LOG => log_opts.take().expect("one log family"),
                CF_DEDUP => near_dup::column_options(),
                _ => Options::default(),
            };
            ColumnFamilyDescriptor::new(name, options)
        });
        let db = DB::open_cf_descriptors(&opts, path, cfs).map_err(|e| {
            IndexError::RocksDb(attest_core::rocksdb_files::explain_open_error(
                path,
                e.as_ref(),
            ))
        })?;
        let meta = db.cf_handle(CF_META).expect("meta cf");
        let recorded = match db.get_cf(meta, KEY_FORMAT)? {
            Some(b) => {
                Some(u32::from_be_bytes(b.as_slice().try_into().map_err(
                    |_| IndexError::corrupt(path, "bad format version"),
                )?))
            }
            None => None,
        };
        // Logs from before ids were per tenant keyed `docs` by the bare document id: a layout before version 1.
        // Only an unmarked log can be one (one scan, once: the marker is written below).
        let found = match recorded {
            None if has_bare_document_keys(&db)? => Some(0),
            other => other,
        };
        let found = LOG_FORMAT.check(found, &path.display().to_string())?;
        if found < 2 {
            // Before the version is recorded: a build cut short is done again at the next open.
            let docs = db.cf_handle(CF_DOCS).expect("docs cf");
            let indexed = changes::build(&db, docs, |v| Ok(decode::<DocVersion>(v)?.seq))?;
            tracing::info!(path = %path.display(), documents = indexed, event = "changes_indexed",
                "ingest log: documents indexed by log position");
        }
        if recorded != Some(LOG_FORMAT.current) {
            // Recorded at open, the log's first write: from here on it is of the current version.
            let mut sync = WriteOptions::default();
            sync.set_sync(true);
            db.put_cf_opt(meta, KEY_FORMAT, LOG_FORMAT.current.to_be_bytes(), &sync)?;
            tracing::info!(path = %path.display(), from = found, to = LOG_FORMAT.current, event = "format_upgraded",
                "ingest log format version recorded");
        }
        let last_seq = match db.get_cf(meta, KEY_LAST_SEQ)? {
            Some(b) => u64::from_be_bytes(
                b.as_slice()
                    .try_into()
                    .map_err(|_| IndexError::corrupt(path, "bad last_seq"))?,
            ),
            None => 0,
        };
        let log_id = crate::log_identity::ensure(&db)?;
        let db = Arc::new(db);
        let log = IngestLog {
            presence: BucketPresence::open(Arc::clone(&db), CF_DEDUP),
            db,
            last_seq: Arc::new(AtomicU64::new(last_seq)),
            strip_through,
            log_id: Arc::new(AtomicU64::new(log_id)),
            failed: Arc::default(),
        };
        Ok(log)
    }

    pub fn last_seq(&self) -> u64 {
        self.last_seq.load(Ordering::Acquire)
    }

    /// Which log this is ([`crate::log_identity`]).
    pub fn log_id(&self) -> u64 {
        self.log_id.load(Ordering::Acquire)
    }

    /// Makes this a new log to its peers: a restored snapshot numbers its next records from the snapshot's
    /// position, which the original log has already used for others.
    pub fn renew_id(&mut self) -> Result<u64> {
        let id = crate::log_identity::renew(&self.db)?;
        self.log_id.store(id, Ordering::Release);
        Ok(id)
    }

    /// A consistent copy of the whole log at `path` (which must not exist): a RocksDB checkpoint, hard links to
    /// the immutable table files and a copy of the rest, after the memtables are flushed.
    pub fn checkpoint(&self, path: &Path) -> Result<()> {
        rocksdb::checkpoint::Checkpoint::new(&self.db)?.create_checkpoint(path)?;
        Ok(())
    }

    /// Writes `batch` durably (synced), unless an earlier write failed: then, and when this one fails, the
    /// error, and the log refuses writes until it is opened again (see `failed`).
    fn write_synced(&self, batch: WriteBatch) -> Result<()> {
        if let Some(first) = self.failed.get() {
            return Err(refused_since(first));
        }
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        match self.db.write_opt(batch, &wo) {
            Ok(()) => Ok(()),
            Err(raw) => {
                let e = IndexError::from(raw.clone());
                tracing::error!(error = %e, event = "ingest_log_write_failed",
                    "ingest log write failed: the log refuses writes until the node restarts");
                let _ = self.failed.set(IndexError::from(raw));
                Err(refused_since(&e))
            }
        }
    }

    /// Durably appends `ops` (each with its write version) in one synced batch; returns their sequence numbers,
    /// in order. Every document they touch loses its near-duplicate keys (see [`Self::append_with_keys`]).
    pub fn append(&mut self, ops: &[(LogOp, u64)]) -> Result<Vec<u64>> {
        self.append_with_keys(ops, &[])
    }

    /// [`Self::append`], where `keys[i]` (when given) are the near-duplicate keys of the document `ops[i]`
    /// upserts; a delete, or an upsert without keys, removes the document's keys.
    pub fn append_with_keys(
        &mut self,
        ops: &[(LogOp, u64)],
        keys: &[Option<NearDupKeys>],
    ) -> Result<Vec<u64>> {
        let log = self.db.cf_handle(CF_LOG).expect("log cf");
        let docs = self.db.cf_handle(CF_DOCS).expect("docs cf");
        let meta = self.db.cf_handle(CF_META).expect("meta cf");
        let dedup = self.db.cf_handle(CF_DEDUP).expect("dedup cf");
        let mut near_dups = NearDupWriter::new(&self.db, dedup, Some(&self.presence));
        let mut changed = ChangesWriter::new(&self.db);
        let mut batch = WriteBatch::default();
        let mut seqs = Vec::with_capacity(ops.len());
        let mut seq = self.last_seq();
        for (i, (op, write_version)) in ops.iter().enumerate() {
            let (LogOp::Upsert { tenant, .. } | LogOp::Delete { tenant, .. }) = op;
            let new_keys = match op {
                LogOp::Upsert { .. } => keys.get(i).and_then(Option::as_ref),
                LogOp::Delete { .. } => None,
            };
            near_dups.replace(tenant, op.doc_id(), new_keys)?;
            seq += 1;
            batch.put_cf(&log, seq.to_be_bytes(), encode(op)?);
            let version = DocVersion {
                seq,
                deleted: matches!(op, LogOp::Delete { .. }),
                tenant: tenant.clone(),
                version: *write_version,
            };
            let key = op.doc_key();
            let stored = match self.db.get_cf(&docs, key.as_bytes())? {
                Some(v) => Some(decode::<DocVersion>(&v)?.seq),
                None => None,
            };
            changed.moved(&mut batch, &key, seq, stored);
            batch.put_cf(&docs, key.as_bytes(), encode(&version)?);
            seqs.push(seq);
        }
        near_dups.write_to(&mut batch);
        batch.put_cf(&meta, KEY_LAST_SEQ, seq.to_be_bytes());
        self.write_synced(batch)?;
        // Published once durable: a reader never sees a sequence number the log could lose.
        self.last_seq.store(seq, Ordering::Release);
        Ok(seqs)
    }

    /// For each query (doc id, keys), the tenant's most similar stored document at or above `threshold`.
    pub fn near_duplicates(
        &self,
        tenant: &str,
        queries: &[(String, NearDupKeys)],
        threshold: f64,
    ) -> Result<Vec<Option<NearDupMatch>>> {
        let dedup = self.db.cf_handle(CF_DEDUP).expect("dedup cf");
        queries
            .iter()
            .map(|(doc_id, keys)| {
                near_dup::best_match(
                    &self.db,
                    dedup,
                    Some(&self.presence),
                    tenant,
                    doc_id,
                    keys,
                    threshold,
                )
            })
            .collect()
    }

    /// The near-duplicate keys stored for a document (None when it has none).
    pub fn near_dup_keys(&self, tenant: &str, doc_id: &str) -> Result<Option<NearDupKeys>> {
        let dedup = self.db.cf_handle(CF_DEDUP).expect("dedup cf");
        near_dup::keys_of(&self.db, dedup, tenant, doc_id)
    }

    /// Calls `f` with every document's id and latest version, one at a time: the engine builds its own map
    /// from them at start-up without holding a second one of 10M entries.
    pub fn for_each_doc_version(&self, mut f: impl FnMut(&str, DocVersion)) -> Result<()> {
        let docs = self.db.cf_handle(CF_DOCS).expect("docs cf");
        for item in self.db.iterator_cf(&docs, IteratorMode::Start) {
            let (k, v) = item?;
            f(doc_id_of_key(&String::from_utf8_lossy(&k)), decode(&v)?);
        }
        Ok(())
    }

    /// Entries of the changes index.
    #[cfg(test)]
    pub(crate) fn changes_entries(&self) -> usize {
        changes::after(&self.db, 0, usize::MAX).unwrap().len()
    }

    /// Makes this log look as a version-1 log does (no changes index, format 1): what the upgrade test opens.
    #[cfg(test)]
    pub(crate) fn as_version_1(&self) {
        let changes = self.db.cf_handle(changes::CF_CHANGES).expect("changes cf");
        for item in self.db.iterator_cf(changes, IteratorMode::Start) {
            self.db.delete_cf(changes, item.unwrap().0).unwrap();
        }
        let meta = self.db.cf_handle(CF_META).expect("meta cf");
        self.db
            .put_cf(meta, KEY_FORMAT, 1u32.to_be_bytes())
            .unwrap();
    }

    /// Up to `limit` (key, version) pairs with [`doc_key`]s after `after` (exclusive), in key order: the
    /// catch-up listing ([`LogReader::doc_versions_after`]).
    pub fn doc_versions_after(
        &self,
        after: &str,
        limit: usize,
    ) -> Result<Vec<(String, DocVersion)>> {
        doc_versions_after(&self.db, after, limit)
    }

    /// Records with `lo <= seq <= hi`, in order.
    pub fn range(&self, lo: u64, hi: u64) -> Result<Vec<(u64, LogOp)>> {
        records(&self.db, lo, hi)
    }

    /// A reader of records that needs no writer lock.
    pub fn reader(&self) -> LogReader {
        LogReader {
            db: Arc::clone(&self.db),
            last_seq: Arc::clone(&self.last_seq),
            log_id: Arc::clone(&self.log_id),
        }
    }

    /// The handle that lets sealed rows' vectors go from the log (used only when the engine is configured so).
    pub fn sealed_vectors(&self) -> SealedVectors {
        SealedVectors {
            db: Arc::clone(&self.db),
            through: Arc::clone(&self.strip_through),
        }
    }

    /// Forgets documents as if never written — their version, their record `seq` and their near-duplicate
    /// keys — in one synced batch: what the engine does with the live documents of a damaged segment it cannot
    /// rebuild (their vectors were dropped from the log), so that catch-up copies them from a replica. The notes
    /// on peers' logs go in the same batch: they say what this log holds from each peer, which is no longer so,
    /// and the next catch-up must list everything to find what was forgotten.
    pub fn forget_documents(&mut self, docs: &[(String, String, u64)]) -> Result<()> {
        let log = self.db.cf_handle(CF_LOG).expect("log cf");
        let docs_cf = self.db.cf_handle(CF_DOCS).expect("docs cf");
        let dedup = self.db.cf_handle(CF_DEDUP).expect("dedup cf");
        let mut near_dups = NearDupWriter::new(&self.db, dedup, Some(&self.presence));
        let mut batch = WriteBatch::default();
        for (tenant, doc_id, seq) in docs {
            near_dups.replace(tenant, doc_id, None)?;
            batch.delete_cf(&log, seq.to_be_bytes());
            batch.delete_cf(&docs_cf, doc_key(tenant, doc_id).as_bytes());
            changes::forgotten(&self.db, &mut batch, *seq);
        }
        crate::log_identity::forget_peer_notes(&self.db, &mut batch)?;
        near_dups.write_to(&mut batch);
        self.write_synced(batch)?;
        Ok(())
    }

    /// Drops records that no segment can need any more (superseded upserts, deletes of dropped rows).
    pub fn forget(&mut self, seqs: &[u64]) -> Result<()> {
        let log = self.db.cf_handle(CF_LOG).expect("log cf");
        let mut batch = WriteBatch::default();
        for s in seqs {
            batch.delete_cf(&log, s.to_be_bytes());
        }
        self.write_synced(batch)?;
        Ok(())
    }

    /// Sequence numbers of every record still in the log.
    pub fn all_seqs(&self) -> Result<Vec<u64>> {
        let log = self.db.cf_handle(CF_LOG).expect("log cf");
        let mut out = Vec::new();
        for item in self.db.iterator_cf(&log, IteratorMode::Start) {
            let (k, _) = item?;
            out.push(seq_key(&k)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Every document's latest version by [`doc_key`], as the engine reads them at start-up.
    fn doc_versions(log: &IngestLog) -> HashMap<String, DocVersion> {
        let mut out = HashMap::new();
        log.for_each_doc_version(|doc_id, v| {
            out.insert(doc_key(&v.tenant, doc_id), v);
        })
        .unwrap();
        out
    }

    fn upsert(doc: &str, n: usize) -> LogOp {
        let chunks = (0..n)
            .map(|i| LoggedChunk {
                chunk_id: format!("{doc}#{i}"),
                title: "t".into(),
                text: format!("text {i}"),
                metadata_json: "{}".into(),
                vector: vec![i as f32; 4],
            })
            .collect();
        LogOp::Upsert {
            doc_id: doc.into(),
            tenant: "default".into(),
            chunks,
        }
    }

    /// Bytes of RocksDB's write-ahead files in `dir` (one RocksDB deletes while they are listed counts 0).
    fn wal_file_bytes(dir: &Path) -> u64 {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum()
    }

    /// Write-ahead files do not pile up behind the `meta` column family's memtable, which never fills.
    /// RocksDB flushes and deletes old files in the background, so the test waits (bounded) for them
    /// to go rather than sampling a peak that depends on how loaded the machine is: without the bound
    /// every byte appended (~12 MB) stays in write-ahead files for good. The bound is enforced on a
    /// write (the write that finds the files over it forces the flush that frees the oldest), so the
    /// wait goes on writing a little: on a loaded machine the last bulk append could return before the
    /// flushes it scheduled had freed anything, and nothing would ever force the rest.
    #[test]
    fn write_ahead_files_stay_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = IngestLog::open_with_wal_bound(dir.path(), 1 << 20).unwrap();
        // ~12 MB of appends: many WAL files' worth at a 1 MB bound.
        for batch in 0..60 {
            let ops: Vec<(LogOp, u64)> = (0..50)
                .map(|i| (upsert(&format!("d{batch}-{i}"), 8), 1))
                .map(|(mut op, v)| {
                    if let LogOp::Upsert { chunks, .. } = &mut op {
                        chunks.iter_mut().for_each(|c| c.vector = vec![0.5; 128]);
                    }
                    (op, v)
                })
                .collect();
            log.append(&ops).unwrap();
        }
        assert_eq!(log.reader().last_seq(), 60 * 50);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        let mut kept = wal_file_bytes(dir.path());
        let mut trickle = 0;
        while kept >= 3 << 20 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
            trickle += 1;
            log.append(&[(upsert(&format!("trickle-{trickle}"), 1), 1)])
                .unwrap();
            kept = wal_file_bytes(dir.path());
        }
        assert!(kept < 3 << 20, "{kept} bytes of WAL files kept");
    }

    /// The filter's capacity once no build is under way, waiting (bounded) for the background one.
    fn settled_filter(log: &IngestLog) -> usize {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            if let Some(capacity) = log.presence.settled_capacity() {
                return capacity;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the bucket filter was never built"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Near-duplicate lookups answered through the in-memory bucket filter still find every stored document:
    /// after a reopen (the filter built by a scan while writes go on), and once it fills and a bigger one is
    /// built; an unknown bucket is answered from memory.
    #[test]
    fn near_duplicates_are_found_through_the_bucket_filter() {
        let dir = tempfile::tempdir().unwrap();
        let keys = |i: u64| NearDupKeys {
            signature: vec![i as u32; 8],
            bands: (0..4).map(|b| i * 10 + b).collect(),
        };
        let write = |log: &mut IngestLog, docs: std::ops::Range<u64>| {
            let ops: Vec<(LogOp, u64)> = docs
                .clone()
                .map(|i| (upsert(&format!("d{i}"), 1), 1))
                .collect();
            let k: Vec<Option<NearDupKeys>> = docs.map(|i| Some(keys(i))).collect();
            log.append_with_keys(&ops, &k).unwrap();
        };
        let found = |log: &IngestLog, i: u64| {
            log.near_duplicates("default", &[("query".to_string(), keys(i))], 0.9)
                .unwrap()
                .pop()
                .flatten()
                .map(|m| m.doc_id)
        };
        {
            let mut log = IngestLog::open(dir.path()).unwrap();
            write(&mut log, 0..100);
        }
        let mut log = IngestLog::open(dir.path()).unwrap();
        write(&mut log, 100..200);
        let first = settled_filter(&log);
        for i in (0..200).step_by(7) {
            assert_eq!(found(&log, i), Some(format!("d{i}")), "document {i}");
        }
        let unknown = crate::near_dup::bucket_prefix("default", 0, 999_999);
        assert!(!log.presence.may_hold(&unknown), "answered from memory");
        assert_eq!(found(&log, 999_999), None);

        // 4 buckets per document: past the first filter's capacity, a bigger one is built.
        let docs = first as u64 / 4 + 1_000;
        for start in (200..200 + docs).step_by(2_000) {
            write(&mut log, start..(start + 2_000).min(200 + docs));
        }
        assert!(settled_filter(&log) > first);
        for i in (0..200 + docs).step_by(997) {
            assert_eq!(found(&log, i), Some(format!("d{i}")), "document {i}");
        }
    }

    #[test]
    fn appended_records_survive_reopen_with_versions() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut log = IngestLog::open(dir.path()).unwrap();
            let reader = log.reader();
            assert_eq!(reader.last_seq(), 0);
            assert_eq!(
                log.append(&[(upsert("a", 2), 10), (upsert("b", 1), 11)])
                    .unwrap(),
                vec![1, 2]
            );
            // The lock-free reader (stats, heartbeats) follows every append.
            assert_eq!(reader.last_seq(), 2);
            assert_eq!(
                log.append(&[(
                    LogOp::Delete {
                        doc_id: "a".into(),
                        tenant: "default".into()
                    },
                    12
                )])
                .unwrap(),
                vec![3]
            );
        }
        let log = IngestLog::open(dir.path()).unwrap();
        assert_eq!(log.last_seq(), 3);
        assert_eq!(log.reader().last_seq(), 3);
        let v = doc_versions(&log);
        let (a, b) = (doc_key("default", "a"), doc_key("default", "b"));
        assert_eq!(
            v[&a],
            DocVersion {
                seq: 3,
                deleted: true,
                tenant: "default".into(),
                version: 12
            }
        );
        let page = log.doc_versions_after("", 1).unwrap();
        assert_eq!(page.len(), 1);
        assert_eq!(page[0].0, a);
        let rest = log.doc_versions_after(&a, 10).unwrap();
        assert_eq!(rest.len(), 1);
        assert_eq!((rest[0].0.as_str(), rest[0].1.version), (b.as_str(), 11));
        assert_eq!((v[&b].seq, v[&b].deleted), (2, false));
        let recs = log.range(2, 3).unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].1, upsert("b", 1));
    }

    #[test]
    fn the_log_records_its_format_and_refuses_a_newer_one() {
        let dir = tempfile::tempdir().unwrap();
        {
            let log = IngestLog::open(dir.path()).unwrap();
            let meta = log.db.cf_handle(CF_META).unwrap();
            let stored = log.db.get_cf(&meta, KEY_FORMAT).unwrap().unwrap();
            assert_eq!(stored, LOG_FORMAT.current.to_be_bytes(), "written at open");
            log.db
                .put_cf(&meta, KEY_FORMAT, (LOG_FORMAT.current + 1).to_be_bytes())
                .unwrap();
        }
        let err = IngestLog::open(dir.path()).err().unwrap().to_string();
        assert!(
            err.contains(&format!(
                "shard ingest log format version {}, but this build reads versions 1 and {}",
                LOG_FORMAT.current + 1,
                LOG_FORMAT.current
            )),
            "{err}"
        );
    }

    #[test]
    fn forget_removes_only_named_records() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = IngestLog::open(dir.path()).unwrap();
        log.append(&[
            (upsert("a", 1), 1),
            (upsert("a", 1), 2),
            (upsert("b", 1), 3),
        ])
        .unwrap();
        log.forget(&[1]).unwrap();
        assert_eq!(log.all_seqs().unwrap(), vec![2, 3]);
    }

    #[test]
    fn an_unmarked_log_keyed_by_bare_document_ids_is_refused_as_older_than_version_1() {
        let dir = tempfile::tempdir().unwrap();
        let version = DocVersion {
            seq: 1,
            deleted: false,
            tenant: "acme".into(),
            version: 7,
        };
        {
            let log = IngestLog::open(dir.path()).unwrap();
            let docs = log.db.cf_handle(CF_DOCS).unwrap();
            log.db
                .put_cf(&docs, b"legacy-doc", encode(&version).unwrap())
                .unwrap();
            let meta = log.db.cf_handle(CF_META).unwrap();
            log.db.delete_cf(&meta, KEY_FORMAT).unwrap();
        }
        let err = IngestLog::open(dir.path()).err().unwrap().to_string();
        assert!(
            err.contains(
                "shard ingest log format version 0, but this build reads versions 1 and 2"
            ),
            "{err}"
        );
    }
}
