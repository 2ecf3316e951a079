//! `ShardEngine`: one shard replica of one collection — the log, the growing segment, the sealed segments,
//! tombstones, sealing, compaction and recovery — behind a small synchronous API. The shard role calls it from
//! blocking threads, never from async tasks.
//!
//! Locking: writers take `log` then `state`; searches take only a read lock on `state`; sealing and compaction
//! take `maintenance` and hold `state` only briefly to swap segments in, so FAISS training never blocks search.
//!
//! Here: the engine's state and its writes. Beside it: `open` (recovery), `search` (the two lanes and the
//! hits' fetch), `replication` (what catch-up lists and fetches), `sealing` (seals, merges, the quantizer),
//! `tuning` (the recall target's setting), `backlog` (writes waiting on seals), `dense`, `exact`, `ranking`,
//! `log_vectors` and `versions`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::chunk_store::StoredChunk;
use crate::config::EngineConfig;
use crate::error::{IndexError, Result};
use crate::filter::Filter;
use crate::growing::GrowingSegment;
use crate::near_dup::{NearDupKeys, NearDupMatch};
use crate::quantizer::{quantizer_path, ShardQuantizer, MAX_CHUNKS_PER_DOCUMENT};
use crate::sealed_vectors::SealedVectors;
use crate::segment::{segment_dir, Manifest, SealedSegment};
use crate::text_index::TextIndex;
use crate::vector_file::VectorRow;
use crate::wal::{doc_key, IngestLog, LogOp, LogReader, LoggedChunk};

mod backlog;
mod dense;
mod exact;
mod log_vectors;
#[cfg(test)]
mod old_labels_tests;
mod open;
mod ranking;
mod replication;
mod sealing;
mod search;
mod tuning;
mod versions;
pub(crate) use exact::ExactQuery;
pub use replication::FetchedDocument;
use versions::{DocVersions, HeldVersion};

/// One document's new content: it replaces every earlier chunk of `doc_id`.
#[derive(Debug, Clone)]
pub struct DocumentWrite {
    pub doc_id: String,
    pub tenant: String,
    pub chunks: Vec<LoggedChunk>,
    /// Write version (see [`DocVersion::version`]); 0: this engine picks one newer than what it holds.
    pub version: u64,
    /// The document's near-duplicate keys, kept with it (None: not tracked).
    pub near_dup: Option<NearDupKeys>,
}

/// A search against one shard. `tenant` is mandatory; a lane runs only when its query is given.
#[derive(Debug, Clone, Copy)]
pub struct SearchParams<'a> {
    pub tenant: &'a str,
    pub query_vector: Option<&'a [f32]>,
    pub query_text: Option<&'a str>,
    pub k: usize,
    pub nprobe: Option<u32>,
    pub filter: &'a Filter,
    pub exact_rescore: bool,
    /// Only the best `payload_top` hits of a lane carry their title, text and metadata; the others have ids and
    /// scores alone (the router fetches what it returns: issue 18). [`ALL_PAYLOADS`] for every hit's.
    pub payload_top: usize,
}

impl<'a> SearchParams<'a> {
    /// A search of the dense lane alone, re-scored, whose hits carry ids and scores only: what recall is
    /// measured with (a tuning, the benchmarks).
    pub fn dense(
        tenant: &'a str,
        query: &'a [f32],
        k: usize,
        nprobe: Option<u32>,
        filter: &'a Filter,
    ) -> Self {
        SearchParams {
            tenant,
            query_vector: Some(query),
            query_text: None,
            k,
            nprobe,
            filter,
            exact_rescore: true,
            payload_top: 0,
        }
    }
}

/// [`SearchParams::payload_top`] for every hit's payload.
pub const ALL_PAYLOADS: usize = usize::MAX;

#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub chunk_id: String,
    pub doc_id: String,
    pub title: String,
    pub text: String,
    pub metadata_json: String,
    pub score: f32,
}

/// Per-lane ranked lists, best first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LaneResults {
    pub dense: Vec<Hit>,
    pub bm25: Vec<Hit>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct EngineStats {
    pub live_documents: u64,
    pub growing_rows: u64,
    pub sealed_rows: u64,
    pub sealed_segments: u32,
    pub last_seq: u64,
    /// Segments found damaged at start-up and rebuilt from the log.
    pub rebuilt_segments: Vec<String>,
    /// Recall@k of this replica's dense searches, measured on a sample of them (None before the first).
    pub recall: Option<crate::recall_probe::RecallEstimate>,
    /// The search setting chosen for the collection's recall target (None before the first tuning, or without
    /// a target).
    pub tuned: Option<crate::search_tuning::TunedSearch>,
    /// Times since open the quantizer was trained again because no setting reached the recall target.
    pub recall_retrains: u64,
}

/// Log records that are dead (a replaced upsert, a delete) and not yet forgotten, kept as they die so that a
/// compaction forgets them without reading the whole log: scanning it after every merge made ingest quadratic (29 s
/// a merge at 2M rows, docs/BENCHMARKS.md). Until the first compaction of this process has scanned the log once, the
/// records that died before it started are known only to the log.
#[derive(Default)]
struct DeadRecords {
    seqs: Vec<u64>,
    scanned: bool,
}

impl DeadRecords {
    /// A record that died: `replaced` (what an upsert or delete replaced) when it was an upsert, and `own` for a
    /// delete record (dead from the start).
    fn died(&mut self, replaced: Option<HeldVersion>, own: Option<u64>) {
        self.seqs.extend(
            replaced
                .filter(|v| !v.deleted)
                .map(|v| v.seq)
                .into_iter()
                .chain(own),
        );
    }

    /// The records at or below `through`, taken out.
    fn take_through(&mut self, through: u64) -> Vec<u64> {
        let (now, later) = self.seqs.iter().partition(|&&s| s <= through);
        self.seqs = later;
        now
    }
}

/// A growing segment that is being sealed; it stays searchable until the sealed one replaces it.
struct Frozen {
    segment: Arc<GrowingSegment>,
    seq_range: (u64, u64),
}

struct State {
    versions: DocVersions,
    growing: GrowingSegment,
    frozen: Option<Frozen>,
    sealed: Vec<Arc<SealedSegment>>,
    manifest: Manifest,
    /// The shard's quantizer once trained (new segments encode with it).
    quantizer: Option<Arc<ShardQuantizer>>,
    dead: DeadRecords,
}

pub struct ShardEngine {
    dir: PathBuf,
    config: EngineConfig,
    log: Mutex<IngestLog>,
    /// Record reads without the writer lock (payload fetches of searches).
    log_reader: LogReader,
    /// Drops sealed rows' vectors from the log (`EngineConfig::keep_sealed_vectors_in_log` false).
    sealed_vectors: SealedVectors,
    state: RwLock<State>,
    /// One seal at a time. Merges run beside seals (their own lock): a merge of a million rows takes minutes,
    /// and writes wait on seals once the unsealed backlog is full. Taken before `merging` where both are.
    sealing: Mutex<()>,
    /// One merge (tiered, or a full compaction) at a time.
    merging: Mutex<()>,
    /// Held while the shard quantizer is trained: a seal and a merge may both find it missing or drifted.
    quantizer_training: Mutex<()>,
    background_seal: AtomicBool,
    background_merge: AtomicBool,
    /// Signalled when a seal finishes, for writes waiting on the backlog ([`backlog`]).
    seal_finished: (Mutex<()>, parking_lot::Condvar),
    rebuilt: Vec<String>,
    /// When the last write was logged (for sealing an idle backlog: [`crate::idle_seal`]).
    last_write: parking_lot::Mutex<std::time::Instant>,
    /// The sample of searches run again exactly, and the recall they measured ([`crate::recall_probe`]).
    recall: crate::recall_probe::RecallProbe,
    /// The setting the last tuning chose for the collection's recall target ([`crate::search_tuning`]).
    tuned: RwLock<Option<crate::search_tuning::TunedSearch>>,
    /// Whether this replica waits in the tuner's queue.
    tuning_due: AtomicBool,
    /// Whether a tuning it was due for waits for its writes to stop ([`ShardEngine::resume_deferred_tuning`]).
    tuning_deferred: AtomicBool,
    /// Whether a retraining for the recall target runs, how many have run since open, and the sealed range the
    /// last one covered (a target still out of reach with nothing new sealed is not retrained for again).
    recall_retraining: AtomicBool,
    recall_retrains: std::sync::atomic::AtomicU64,
    retrained_through: std::sync::atomic::AtomicU64,
    /// This engine, for the background work it asks for from `&self` (set once it is in its `Arc`).
    this: std::sync::OnceLock<std::sync::Weak<ShardEngine>>,
}

/// Read access to the rows of any segment kind.
enum SegmentView<'a> {
    Growing(&'a GrowingSegment),
    Sealed(&'a SealedSegment),
}

/// Borrowed fields of one row.
struct RowView<'a> {
    chunk_id: &'a str,
    doc_id: &'a str,
    tenant: &'a str,
    title: &'a str,
    text: &'a str,
    metadata_json: &'a str,
    seq: u64,
}

impl RowView<'_> {
    /// The hit, with its title, text and metadata copied out of the segment only `with_payload`.
    fn to_hit(&self, score: f32, with_payload: bool) -> Hit {
        let copy = |s: &str| {
            if with_payload {
                s.to_string()
            } else {
                String::new()
            }
        };
        Hit {
            chunk_id: self.chunk_id.to_string(),
            doc_id: self.doc_id.to_string(),
            title: copy(self.title),
            text: copy(self.text),
            metadata_json: copy(self.metadata_json),
            score,
        }
    }
    fn to_stored(&self) -> StoredChunk {
        StoredChunk {
            chunk_id: self.chunk_id.to_string(),
            doc_id: self.doc_id.to_string(),
            tenant: self.tenant.to_string(),
            title: self.title.to_string(),
            text: self.text.to_string(),
            metadata_json: self.metadata_json.to_string(),
            seq: self.seq,
        }
    }
}

impl<'a> SegmentView<'a> {
    fn len(&self) -> usize {
        match self {
            SegmentView::Growing(g) => g.len(),
            SegmentView::Sealed(s) => s.meta.rows,
        }
    }
    fn row(&self, row: usize) -> Option<RowView<'a>> {
        match self {
            SegmentView::Growing(g) => g.rows.get(row).map(|r| RowView {
                chunk_id: &r.chunk_id,
                doc_id: &r.doc_id,
                tenant: &r.tenant,
                title: &r.title,
                text: &r.text,
                metadata_json: &r.metadata_json,
                seq: r.seq,
            }),
            SegmentView::Sealed(s) => s.chunks.get(row).map(|r| RowView {
                chunk_id: r.chunk_id.as_str(),
                doc_id: r.doc_id.as_str(),
                tenant: r.tenant.as_str(),
                title: r.title.as_str(),
                text: r.text.as_str(),
                metadata_json: r.metadata_json.as_str(),
                seq: r.seq.to_native(),
            }),
        }
    }
    fn vector(&self, row: usize) -> Option<VectorRow<'a>> {
        match self {
            SegmentView::Growing(g) => (row < g.len()).then(|| VectorRow::F32(g.vector(row))),
            SegmentView::Sealed(s) => s.vectors.get(row),
        }
    }
    fn text(&self) -> &'a TextIndex {
        match self {
            SegmentView::Growing(g) => &g.text,
            SegmentView::Sealed(s) => &s.text,
        }
    }
}

fn check_vector(v: &[f32], dim: usize, field: &str) -> Result<()> {
    match attest_core::limits::vector_problem(v, dim) {
        Some(problem) => Err(IndexError::invalid(field, problem)),
        None => Ok(()),
    }
}

impl State {
    fn is_live(&self, tenant: &str, doc_id: &str, seq: u64) -> bool {
        self.versions
            .get(tenant, doc_id)
            .is_some_and(|v| v.is_live_row(seq))
    }

    fn views(&self) -> Vec<SegmentView<'_>> {
        let mut v = vec![SegmentView::Growing(&self.growing)];
        if let Some(f) = &self.frozen {
            v.push(SegmentView::Growing(&f.segment));
        }
        v.extend(self.sealed.iter().map(|s| SegmentView::Sealed(s)));
        v
    }
}

impl ShardEngine {
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Validates every document first (nothing is written if one is bad), then logs them durably in one synced
    /// batch and makes them searchable. Returns the last sequence number written.
    pub fn upsert(self: &Arc<Self>, docs: Vec<DocumentWrite>) -> Result<u64> {
        for (i, d) in docs.iter().enumerate() {
            if d.doc_id.is_empty() {
                return Err(IndexError::invalid(
                    format!("documents[{i}].doc_id"),
                    "empty",
                ));
            }
            if d.tenant.is_empty() {
                return Err(IndexError::invalid(
                    format!("documents[{i}].tenant"),
                    "empty",
                ));
            }
            if d.chunks.len() > MAX_CHUNKS_PER_DOCUMENT {
                return Err(IndexError::invalid(
                    format!("documents[{i}].chunks"),
                    format!(
                        "{} chunks; at most {MAX_CHUNKS_PER_DOCUMENT} per document",
                        d.chunks.len()
                    ),
                ));
            }
            for (j, c) in d.chunks.iter().enumerate() {
                check_vector(
                    &c.vector,
                    self.config.dimension,
                    &format!("documents[{i}].chunks[{j}].vector"),
                )?;
                if c.chunk_id.is_empty() {
                    return Err(IndexError::invalid(
                        format!("documents[{i}].chunks[{j}].chunk_id"),
                        "empty",
                    ));
                }
            }
        }
        self.wait_for_sealing()?;
        // Ids are per tenant: a document of another tenant with the same id is a different document.
        let mut log = self.log.lock();
        // Last writer wins by version: drop writes older than what this replica holds (a retried request, or a
        // catch-up that raced a newer write), and give unversioned writes a version newer than any seen.
        let mut ops: Vec<(LogOp, u64)> = Vec::with_capacity(docs.len());
        let mut keys: Vec<Option<NearDupKeys>> = Vec::with_capacity(docs.len());
        {
            let st = self.state.read();
            let mut pending: HashMap<String, u64> = HashMap::new();
            for d in docs {
                let key = doc_key(&d.tenant, &d.doc_id);
                let held = pending
                    .get(&key)
                    .copied()
                    .or_else(|| st.versions.get(&d.tenant, &d.doc_id).map(|v| v.version))
                    .unwrap_or(0);
                let version = if d.version == 0 {
                    attest_core::version::next_after(held)
                } else {
                    d.version
                };
                if version <= held {
                    continue;
                }
                pending.insert(key, version);
                keys.push(d.near_dup);
                ops.push((
                    LogOp::Upsert {
                        doc_id: d.doc_id,
                        tenant: d.tenant,
                        chunks: d.chunks,
                    },
                    version,
                ));
            }
        }
        if ops.is_empty() {
            return Ok(log.last_seq());
        }
        let seqs = log.append_with_keys(&ops, &keys)?;
        *self.last_write.lock() = std::time::Instant::now();
        let mut st = self.state.write();
        for ((op, version), seq) in ops.into_iter().zip(seqs) {
            if let LogOp::Upsert {
                doc_id,
                tenant,
                chunks,
            } = op
            {
                let held = HeldVersion {
                    seq,
                    version,
                    deleted: false,
                };
                let replaced = st.versions.insert(&tenant, &doc_id, held);
                st.dead.died(replaced, None);
                for c in chunks {
                    let row = StoredChunk {
                        chunk_id: c.chunk_id,
                        doc_id: doc_id.clone(),
                        tenant: tenant.clone(),
                        title: c.title,
                        text: c.text,
                        metadata_json: c.metadata_json,
                        seq,
                    };
                    st.growing.push(row, &c.vector)?;
                }
            }
        }
        st.growing.commit()?;
        let last = log.last_seq();
        let should_seal = st.growing.len() >= self.config.seal_threshold;
        drop(st);
        drop(log);
        if should_seal {
            self.seal_in_background();
        }
        Ok(last)
    }

    /// Tombstones every chunk of the tenant's document. Returns false when the tenant holds no such document.
    pub fn delete(&self, tenant: &str, doc_id: &str) -> Result<bool> {
        self.delete_versioned(tenant, doc_id, 0)
    }

    /// [`Self::delete`] at a write version (0: newer than what this replica holds). A versioned delete of a
    /// document this replica never saw still leaves a tombstone, so an older upsert arriving later (catch-up,
    /// a slow replica write) cannot resurrect it. Returns whether a live document was deleted.
    pub fn delete_versioned(&self, tenant: &str, doc_id: &str, version: u64) -> Result<bool> {
        if doc_id.is_empty() {
            return Err(IndexError::invalid("doc_id", "empty"));
        }
        let mut log = self.log.lock();
        let current = self.state.read().versions.get(tenant, doc_id);
        let live = current.as_ref().is_some_and(|v| !v.deleted);
        let held = current.as_ref().map_or(0, |v| v.version);
        let version = if version == 0 {
            if !live {
                return Ok(false);
            }
            attest_core::version::next_after(held)
        } else {
            version
        };
        if version <= held {
            return Ok(false);
        }
        let seqs = log.append(&[(
            LogOp::Delete {
                doc_id: doc_id.to_string(),
                tenant: tenant.to_string(),
            },
            version,
        )])?;
        let mut st = self.state.write();
        let held = HeldVersion {
            seq: seqs[0],
            version,
            deleted: true,
        };
        let replaced = st.versions.insert(tenant, doc_id, held);
        st.dead.died(replaced, Some(seqs[0]));
        Ok(live)
    }

    /// For each query (doc id, keys), the tenant's stored document most similar to it with similarity at least
    /// `threshold` (documents written with keys only; a query never matches its own id).
    pub fn near_duplicates(
        &self,
        tenant: &str,
        queries: &[(String, NearDupKeys)],
        threshold: f64,
    ) -> Result<Vec<Option<NearDupMatch>>> {
        // Under the writer lock: the keys of a batch are visible together or not at all.
        let log = self.log.lock();
        log.near_duplicates(tenant, queries, threshold)
    }

    /// The tenant and chunks of the live document `doc_id` whose upsert is log record `seq`; its absence is
    /// corruption (the log keeps every live row).
    fn live_chunks(&self, seq: u64, doc_id: &str) -> Result<(String, Vec<LoggedChunk>)> {
        match self.log_reader.range(seq, seq)?.pop() {
            Some((_, LogOp::Upsert { tenant, chunks, .. })) => Ok((tenant, chunks)),
            _ => Err(IndexError::corrupt(
                self.dir.join(crate::wal::WAL_DIR),
                format!("log record {seq} of live document `{doc_id}` is missing"),
            )),
        }
    }

    pub fn stats(&self) -> EngineStats {
        // Not through the log's lock: a writer holds it through its synced append, and every heartbeat and scrape
        // would queue behind the ingest.
        let last_seq = self.log_reader.last_seq();
        let st = self.state.read();
        EngineStats {
            live_documents: st.versions.live(),
            growing_rows: (st.growing.len() + st.frozen.as_ref().map_or(0, |f| f.segment.len()))
                as u64,
            sealed_rows: st.sealed.iter().map(|s| s.meta.rows as u64).sum(),
            sealed_segments: st.sealed.len() as u32,
            last_seq,
            rebuilt_segments: self.rebuilt.clone(),
            recall: self.recall.estimate(),
            tuned: self.tuned_search(),
            recall_retrains: self
                .recall_retrains
                .load(std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// The tenants with a live document in this replica, sorted (the Stats RPC: what a tenant-limited key's drop
    /// of the collection would destroy).
    pub fn tenants(&self) -> Vec<String> {
        self.state.read().versions.tenants()
    }

    /// Bytes this replica holds on disk (log, segments, manifest): a directory walk, so asked for on demand (the
    /// Stats RPC), never on the heartbeat's path.
    pub fn disk_bytes(&self) -> Result<u64> {
        crate::fsutil::tree_bytes(&self.dir)
    }

    /// A consistent snapshot of this replica in `dest` (absent or empty) while it keeps serving: with seals and
    /// compactions held off, the log is checkpointed under the writers' lock (every write acknowledged before
    /// this call is in it), the segment manifest recorded with it, and the sealed segments it names hard-linked
    /// before a compaction may delete them; then every file is hashed into `SNAPSHOT.json`
    /// ([`crate::snapshot`]). Searches and writes go on meanwhile; writes wait only for the checkpoint.
    pub fn snapshot(&self, dest: &Path) -> Result<crate::snapshot::ShardSnapshot> {
        crate::snapshot::prepare_destination(dest)?;
        let (last_seq, live_documents) = {
            let (_sealing, _merging) = (self.sealing.lock(), self.merging.lock());
            let (manifest, last_seq, live_documents) = {
                let log = self.log.lock();
                let st = self.state.read();
                log.checkpoint(&dest.join(crate::wal::WAL_DIR))?;
                let live = st.versions.live();
                (st.manifest.clone(), log.last_seq(), live)
            };
            for meta in &manifest.segments {
                crate::snapshot::link_tree(
                    &segment_dir(&self.dir, &meta.id),
                    &segment_dir(dest, &meta.id),
                )?;
            }
            if let Some(q) = &manifest.quantizer {
                let (from, to) = (
                    quantizer_path(&self.dir, q.version),
                    quantizer_path(dest, q.version),
                );
                std::fs::create_dir_all(to.parent().expect("under dest"))?;
                crate::snapshot::link_tree(
                    from.parent().expect("under dir"),
                    to.parent().expect("under dest"),
                )?;
            }
            manifest.store(dest)?;
            // The last tuning, where it was measured on these very segments: a replica restored from the
            // snapshot serves with it from its first search instead of the configured setting until its own
            // tuning (tens of minutes at 10M rows), and ranks as its source does. The file is replaced atomically,
            // so it is read whole; one measured on other segments is left behind.
            if let Some(kept) = crate::search_tuning::KeptTuning::load(&self.dir)
                .filter(|k| k.segments_issued == manifest.next_segment)
            {
                kept.store(dest)?;
            }
            (last_seq, live_documents)
        };
        crate::snapshot::seal(dest, last_seq, live_documents)
    }

    /// Paths of the sealed segments' directories (for operators and tests).
    pub fn segment_dirs(&self) -> Vec<PathBuf> {
        self.state
            .read()
            .sealed
            .iter()
            .map(|s| segment_dir(&self.dir, &s.meta.id))
            .collect()
    }
}

/// Candidates re-scored from the full vectors per requested hit after an SQ8 copy has ranked the PQ list (the
/// default of `engine.exact_refine`): SQ8 orders near neighbours almost exactly, so 2 × k are enough to put the
/// true top k in order.
pub const EXACT_REFINE: usize = 2;
