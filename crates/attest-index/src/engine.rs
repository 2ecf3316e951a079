//! `ShardEngine`: one shard replica of one collection — the log, the growing segment, the sealed segments,
//! tombstones, sealing, compaction and recovery — behind a small synchronous API. The shard role calls it from
//! blocking threads, never from async tasks.
//!
//! Locking: writers take `log` then `state`; searches take only a read lock on `state`; sealing and compaction
//! take `maintenance` and hold `state` only briefly to swap segments in, so FAISS training never blocks search.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tracing::{info, warn};

use crate::chunk_store::StoredChunk;
use crate::config::{EngineConfig, MAX_TOP_K};
use crate::error::{IndexError, Result};
use crate::filter::Filter;
use crate::growing::GrowingSegment;
use crate::near_dup::{NearDupKeys, NearDupMatch};
use crate::quantizer::{quantizer_path, ShardQuantizer, MAX_CHUNKS_PER_DOCUMENT};
use crate::sealed_vectors::SealedVectors;
use crate::segment::{build_segment, segment_dir, Manifest, SealedSegment};
use crate::text_index::{bm25_search, TextIndex};
use crate::vector_file::VectorRow;
use crate::wal::{doc_key, DocVersion, IngestLog, LogOp, LogReader, LoggedChunk};

mod backlog;
mod dense;
mod exact;
mod log_vectors;
#[cfg(test)]
mod old_labels_tests;
mod ranking;
mod sealing;
mod tuning;
mod versions;
pub(crate) use exact::ExactQuery;
use ranking::{best_few, best_passing, rows_by_segment, top_k};
use sealing::{encoded, remove_orphan_quantizers};
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
    /// Opens (or creates) the engine in `dir` and recovers: damaged segments are rebuilt from the log, and the
    /// log past the last sealed segment is replayed into the growing segment.
    pub fn open(dir: &Path, config: EngineConfig) -> Result<Arc<Self>> {
        std::fs::create_dir_all(dir.join("segments"))?;
        let mut log = IngestLog::open(&dir.join(crate::wal::WAL_DIR))?;
        let mut versions = DocVersions::default();
        log.for_each_doc_version(|doc_id, v| {
            versions.insert(&v.tenant, doc_id, HeldVersion::of(&v));
        })?;
        let mut manifest = match Manifest::load(dir) {
            Ok(m) => m,
            // Not damage: a manifest of another release. Rebuilding would overwrite it with this build's layout.
            Err(e @ IndexError::Format(_)) => return Err(e),
            Err(e) => {
                // Everything live is still in the log: start from no segments and replay it all.
                warn!(error = %e, event = "manifest_corrupt", "manifest unreadable; rebuilding every segment from the log");
                Manifest::default()
            }
        };
        let quantizer = match manifest.quantizer.clone() {
            None => None,
            Some(meta) => match ShardQuantizer::open(dir, &meta) {
                Ok(q) => Some(Arc::new(q)),
                Err(e) => {
                    // Segments encoded with it carry their own copy and keep serving; the next seal trains anew.
                    warn!(error = %e, event = "quantizer_corrupt", "shard quantizer unreadable; training a new one at the next seal");
                    manifest.quantizer = None;
                    None
                }
            },
        };
        let mut sealed = Vec::new();
        let mut rebuilt = Vec::new();
        let metas = std::mem::take(&mut manifest.segments);
        for meta in metas {
            match SealedSegment::open(dir, &meta) {
                Ok(seg) => {
                    sealed.push(Arc::new(seg));
                    manifest.segments.push(meta);
                }
                Err(e) => {
                    if matches!(e, IndexError::Format(_)) {
                        warn!(segment = %meta.id, error = %e, event = "segment_older_layout", "segment of a layout this build does not read; rebuilding it from the log");
                    } else {
                        warn!(segment = %meta.id, error = %e, event = "segment_corrupt", "refusing damaged segment; rebuilding it from the log");
                    }
                    let records = log.range(meta.min_seq, meta.max_seq)?;
                    let lost = log_vectors::stripped_live_documents(&records, &versions);
                    if matches!(e, IndexError::Format(_)) && !lost.is_empty() {
                        // Not damage: every replica holds it in that layout, so forgetting would lose it.
                        warn!(segment = %meta.id, event = "segment_not_rebuildable", "the log holds no vectors to rebuild this segment in the current layout (keep_sealed_vectors_in_log is off): open it with a release that reads it");
                        return Err(e);
                    }
                    log_vectors::forget_stripped(&mut log, &mut versions, &lost, &meta.id)?;
                    let (rows, vectors) = live_rows_from_log(&records, &versions);
                    let id = manifest.allocate_id();
                    let dense = encoded(quantizer.as_deref(), &rows, &vectors)?;
                    let new_meta = build_segment(
                        dir,
                        &id,
                        (meta.min_seq, meta.max_seq),
                        &config,
                        &rows,
                        &vectors,
                        dense,
                        &mut crate::maintenance::Phases::default(),
                    )?;
                    sealed.push(Arc::new(SealedSegment::open_just_built(dir, &new_meta)?));
                    manifest.segments.push(new_meta);
                    rebuilt.push(meta.id.clone());
                }
            }
        }
        manifest.store(dir)?;
        remove_orphan_segments(dir, &manifest)?;
        remove_orphan_quantizers(dir, &manifest)?;

        let mut growing = GrowingSegment::new(config.dimension)?;
        let records = log.range(manifest.sealed_through_seq + 1, u64::MAX)?;
        // Stripped records past the manifest's mark: only where the manifest was lost and rebuilt empty.
        let lost = log_vectors::stripped_live_documents(&records, &versions);
        log_vectors::forget_stripped(&mut log, &mut versions, &lost, "growing")?;
        let (rows, vectors) = live_rows_from_log(&records, &versions);
        for (i, row) in rows.into_iter().enumerate() {
            growing.push(
                row,
                &vectors[i * config.dimension..(i + 1) * config.dimension],
            )?;
        }
        growing.commit()?;
        let sealed_vectors = log.sealed_vectors();
        if !config.keep_sealed_vectors_in_log.kept() {
            // Catches up a range a crash left between a seal and its compaction.
            sealed_vectors.drop_through(manifest.sealed_through_seq)?;
        }
        info!(dir = %dir.display(), segments = sealed.len(), growing = growing.len(), event = "shard_recovered", "shard engine open");
        // The last tuning, while the collection asks for the recall it was chosen for (a kept tuning's target is
        // never 0: without a target nothing is tuned); measured on these very segments, it is not measured again.
        let kept_tuning = crate::search_tuning::KeptTuning::load(dir)
            .filter(|k| k.tuned.target == config.recall_target);
        let tuned_on_these_segments =
            kept_tuning.is_some_and(|k| k.segments_issued == manifest.next_segment);
        Ok(Arc::new(ShardEngine {
            dir: dir.to_path_buf(),
            recall: crate::recall_probe::RecallProbe::new(config.recall_probe.clone()),
            config,
            log_reader: log.reader(),
            sealed_vectors,
            log: Mutex::new(log),
            state: RwLock::new(State {
                versions,
                growing,
                frozen: None,
                sealed,
                manifest,
                quantizer,
                dead: DeadRecords::default(),
            }),
            sealing: Mutex::new(()),
            merging: Mutex::new(()),
            quantizer_training: Mutex::new(()),
            background_seal: AtomicBool::new(false),
            background_merge: AtomicBool::new(false),
            seal_finished: (Mutex::new(()), parking_lot::Condvar::new()),
            rebuilt,
            last_write: parking_lot::Mutex::new(std::time::Instant::now()),
            tuned: RwLock::new(kept_tuning.map(|k| k.tuned)),
            tuning_due: AtomicBool::new(false),
            tuning_deferred: AtomicBool::new(false),
            recall_retraining: AtomicBool::new(false),
            recall_retrains: Default::default(),
            retrained_through: Default::default(),
            this: std::sync::OnceLock::new(),
        }))
        .inspect(|engine| {
            let _ = engine.this.set(Arc::downgrade(engine));
            engine.recall.attach(Arc::downgrade(engine));
            // A replica with sealed rows is tuned again after a restart unless its kept tuning measured these
            // segments (until then it serves with the kept setting).
            if !tuned_on_these_segments && !engine.state.read().sealed.is_empty() {
                engine.tuning_needed();
            }
        })
        .inspect(crate::idle_seal::watch)
    }

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

    /// The version this replica holds of the tenant's document (deleted or not); 0 when it never saw it.
    pub fn version_of(&self, tenant: &str, doc_id: &str) -> u64 {
        self.state
            .read()
            .versions
            .get(tenant, doc_id)
            .map_or(0, |v| v.version)
    }

    /// Up to `limit` (document id, version) pairs after the cursor `after` (catch-up listing, in [`doc_key`]
    /// order: the cursor of an entry is `doc_key(&version.tenant, &id)`, "" the first page), with the log
    /// position they reflect at least.
    pub fn doc_versions_after(
        &self,
        after: &str,
        limit: usize,
    ) -> Result<(Vec<(String, DocVersion)>, u64)> {
        // Without the writer lock, as the incremental listing: the position is read first, so the page reflects
        // at least it (a page is up to 1,000 reads, and writes waited on them after every restart).
        let last_seq = self.log_reader.last_seq();
        let page = self
            .log_reader
            .doc_versions_after(after, limit)?
            .into_iter()
            .map(|(key, v)| (crate::wal::doc_id_of_key(&key).to_string(), v))
            .collect();
        Ok((page, last_seq))
    }

    /// Documents changed after log position `after_seq` (their current version is a later record), from the next
    /// `page` entries of the log's changes index, with the position to list after next (None: the last page)
    /// and the log position they reflect at least: catch-up's incremental listing, at a cost that follows the
    /// changes rather than the shard's size.
    pub fn doc_versions_changed_after(
        &self,
        after_seq: u64,
        page: usize,
    ) -> Result<(crate::wal::VersionPage, Option<u64>, u64)> {
        // Without the writer lock (a listing page is 1,000 reads, and writes would wait on them): the position is
        // read first, so the page reflects at least it.
        let last_seq = self.log_reader.last_seq();
        let (entries, next) = self
            .log_reader
            .doc_versions_changed_after(after_seq, page)?;
        let entries = entries
            .into_iter()
            .map(|(key, v)| (crate::wal::doc_id_of_key(&key).to_string(), v))
            .collect();
        Ok((entries, next, last_seq))
    }

    /// Which ingest log this replica writes: its log positions compare only with others of the same id
    /// ([`crate::log_identity`]).
    pub fn log_id(&self) -> u64 {
        self.log_reader.log_id()
    }

    /// The note this replica last kept on peer node `peer`'s log (catch-up's cursor), if any.
    pub fn peer_note(&self, peer: u64) -> Result<Option<Vec<u8>>> {
        self.log_reader.peer_note(peer)
    }

    /// Keeps `note` on peer node `peer`'s log, across restarts; only once the writes it accounts for are
    /// applied (they are durable when `upsert` returns).
    pub fn keep_peer_note(&self, peer: u64, note: &[u8]) -> Result<()> {
        self.log_reader.keep_peer_note(peer, note)
    }

    /// The current content of each named (tenant, document id): live ones with every chunk and vector (from the
    /// log, which keeps every live row; a vector the log dropped from its sealed segment), deleted ones as
    /// tombstones. Unknown documents are left out.
    pub fn fetch_documents(&self, docs: &[(String, String)]) -> Result<Vec<FetchedDocument>> {
        let log = self.log.lock();
        let st = self.state.read();
        let mut out = Vec::with_capacity(docs.len());
        for (tenant, id) in docs {
            let Some(v) = st.versions.get(tenant, id) else {
                continue;
            };
            if v.deleted {
                out.push(FetchedDocument::Tombstone {
                    doc_id: id.clone(),
                    tenant: tenant.clone(),
                    version: v.version,
                });
                continue;
            }
            let (tenant, mut chunks) = self.live_chunks(v.seq, id)?;
            st.fill_sealed_vectors(&self.dir, v.seq, &mut chunks)?;
            let near_dup = log.near_dup_keys(&tenant, id)?;
            out.push(FetchedDocument::Live(DocumentWrite {
                doc_id: id.clone(),
                tenant,
                chunks,
                version: v.version,
                near_dup,
            }))
        }
        Ok(out)
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

    /// The current title, text and metadata of each named (doc id, chunk id) of `tenant`, read from the log (one
    /// read per document); chunks no longer live are left out. What a search returned ids of, fetched for the few
    /// hits a router keeps (`score` is 0).
    pub fn fetch_chunks(&self, tenant: &str, chunks: &[(String, String)]) -> Result<Vec<Hit>> {
        if tenant.is_empty() {
            return Err(IndexError::invalid("tenant", "a tenant is required"));
        }
        let mut wanted: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (doc_id, chunk_id) in chunks {
            wanted.entry(doc_id).or_default().push(chunk_id);
        }
        // No writer lock: a search's fetch must not queue behind an ingest's synced append. Holding `state` is
        // what keeps each record read here: versions cannot move on meanwhile, and a record is only forgotten
        // once they say it is dead.
        let st = self.state.read();
        let mut out = Vec::with_capacity(chunks.len());
        for (doc_id, chunk_ids) in wanted {
            let Some(v) = st.versions.get(tenant, doc_id).filter(|v| !v.deleted) else {
                continue;
            };
            let (_, logged) = self.live_chunks(v.seq, doc_id)?;
            out.extend(
                logged
                    .into_iter()
                    .filter(|c| chunk_ids.contains(&c.chunk_id.as_str()))
                    .map(|c| Hit {
                        chunk_id: c.chunk_id,
                        doc_id: doc_id.to_string(),
                        title: c.title,
                        text: c.text,
                        metadata_json: c.metadata_json,
                        score: 0.0,
                    }),
            );
        }
        Ok(out)
    }

    /// Dense and BM25 top-k of the tenant's live chunks that pass the filter.
    pub fn search(&self, p: &SearchParams<'_>) -> Result<LaneResults> {
        let out = self.search_with(p, self.setting_for(p))?;
        if let Some(q) = p.query_vector {
            self.recall
                .offer(p.tenant, q, p.filter, p.k, &out.dense, p.nprobe.is_none());
        }
        Ok(out)
    }

    /// [`Self::search`] with the dense lane's setting given (a tuning measures each setting with it).
    fn search_with(
        &self,
        p: &SearchParams<'_>,
        setting: crate::search_tuning::SearchSetting,
    ) -> Result<LaneResults> {
        if p.tenant.is_empty() {
            return Err(IndexError::invalid("tenant", "a tenant is required"));
        }
        if p.k == 0 || p.k > MAX_TOP_K {
            return Err(IndexError::invalid(
                "k",
                format!("must be between 1 and {MAX_TOP_K}"),
            ));
        }
        if let Some(q) = p.query_vector {
            check_vector(q, self.config.dimension, "query_vector")?;
        }
        let st = self.state.read();
        let views = st.views();
        let passes = |r: &RowView<'_>| {
            r.tenant == p.tenant
                && st.is_live(r.tenant, r.doc_id, r.seq)
                && p.filter.matches(r.metadata_json)
        };
        // Candidates are borrowed rows until the top k of a lane is known: only those k are copied out.
        let hits = |rows: Vec<(RowView<'_>, f32)>| -> Vec<Hit> {
            top_k(rows, p.k)
                .into_iter()
                .enumerate()
                .map(|(rank, (r, score))| r.to_hit(score, rank < p.payload_top))
                .collect()
        };
        let mut out = LaneResults::default();
        // A span per lane: a trace shows which lane of which shard a slow search spent its time in.
        if let Some(q) = p.query_vector {
            let _lane = tracing::info_span!("dense_lane", segments = views.len()).entered();
            out.dense = hits(self.dense_lane(&views, q, p, setting, &passes)?);
        }
        if let Some(text) = p.query_text.filter(|t| !t.trim().is_empty()) {
            let _lane = tracing::info_span!("bm25_lane", segments = views.len()).entered();
            out.bm25 = hits(self.bm25(&views, text, p, &passes)?);
        }
        Ok(out)
    }

    fn bm25<'v>(
        &self,
        views: &[SegmentView<'v>],
        text: &str,
        p: &SearchParams<'_>,
        passes: &dyn Fn(&RowView<'_>) -> bool,
    ) -> Result<Vec<(RowView<'v>, f32)>> {
        let indexes: Vec<&TextIndex> = views.iter().map(|v| v.text()).collect();
        let max_rows: usize = views.iter().map(|v| v.len()).sum();
        let mut limit = p.k * self.config.overfetch.max(1);
        loop {
            let per_index = bm25_search(&indexes, text, p.tenant, limit)?;
            let full = per_index.iter().any(|rows| rows.len() == limit);
            // One list over every segment (scores are comparable: global statistics), checked best first.
            let candidates: Vec<((usize, u64), f32)> = per_index
                .into_iter()
                .enumerate()
                .flat_map(|(segment, rows)| {
                    rows.into_iter().map(move |(row, s)| ((segment, row), s))
                })
                .collect();
            if self.config.prefetch_rows {
                // The rows the check below reads one by one: random reads where the cache does not hold them.
                let best = best_few(&candidates, p.k).into_iter();
                let rows = rows_by_segment(best.map(|(s, row)| (s, row as usize)), views.len());
                for (view, rows) in views.iter().zip(&rows) {
                    if let SegmentView::Sealed(s) = view {
                        s.chunks.read_ahead(rows);
                    }
                }
            }
            let row = |(segment, row): (usize, u64)| views[segment].row(row as usize);
            let hits: Vec<_> = best_passing(candidates, p.k, row, passes)
                .into_iter()
                .map(|(r, s, _)| (r, s))
                .collect();
            if hits.len() >= p.k || !full || limit >= max_rows {
                return Ok(hits);
            }
            limit *= 4;
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

/// What [`ShardEngine::fetch_documents`] returns for one document.
#[derive(Debug, Clone)]
pub enum FetchedDocument {
    Live(DocumentWrite),
    Tombstone {
        doc_id: String,
        tenant: String,
        version: u64,
    },
}

/// Candidates re-scored from the full vectors per requested hit after an SQ8 copy has ranked the PQ list (the
/// default of `engine.exact_refine`): SQ8 orders near neighbours almost exactly, so 2 × k are enough to put the
/// true top k in order.
pub const EXACT_REFINE: usize = 2;

/// The live rows (and their vectors, row-major) of upsert records.
fn live_rows_from_log(
    records: &[(u64, LogOp)],
    versions: &DocVersions,
) -> (Vec<StoredChunk>, Vec<f32>) {
    let mut rows = Vec::new();
    let mut vectors = Vec::new();
    for (seq, op) in records {
        if let LogOp::Upsert {
            doc_id,
            tenant,
            chunks,
        } = op
        {
            if !versions
                .get(tenant, doc_id)
                .is_some_and(|v| v.is_live_row(*seq))
            {
                continue;
            }
            for c in chunks {
                rows.push(StoredChunk {
                    chunk_id: c.chunk_id.clone(),
                    doc_id: doc_id.clone(),
                    tenant: tenant.clone(),
                    title: c.title.clone(),
                    text: c.text.clone(),
                    metadata_json: c.metadata_json.clone(),
                    seq: *seq,
                });
                vectors.extend_from_slice(&c.vector);
            }
        }
    }
    (rows, vectors)
}

/// Segment directories the manifest does not name are leftovers of a seal or compaction cut short by a crash.
fn remove_orphan_segments(dir: &Path, manifest: &Manifest) -> Result<()> {
    for entry in std::fs::read_dir(dir.join("segments"))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !manifest.segments.iter().any(|m| m.id == name) {
            warn!(segment = %name, event = "orphan_segment_removed", "removing segment not in the manifest");
            std::fs::remove_dir_all(entry.path())?;
        }
    }
    Ok(())
}
