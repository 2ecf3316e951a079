//! `ShardEngine`: one shard replica of one collection — the log, the growing segment, the sealed segments,
//! tombstones, sealing, compaction and recovery — behind a small synchronous API. The shard role calls it from
//! blocking threads, never from async tasks.
//!
//! Locking: writers take `log` then `state`; searches take only a read lock on `state`; sealing and compaction
//! take `maintenance` and hold `state` only briefly to swap segments in, so FAISS training never blocks search.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tracing::{info, warn};

use crate::chunk_store::StoredChunk;
use crate::config::{EngineConfig, MAX_TOP_K};
use crate::error::{IndexError, Result};
use crate::filter::Filter;
use crate::growing::GrowingSegment;
use crate::ivfpq::dot;
use crate::merge::MergeInput;
use crate::near_dup::{NearDupKeys, NearDupMatch};
use crate::quantizer::{
    enough_to_train, global_ids, quantizer_path, split_for_training, ShardQuantizer,
};
use crate::segment::{build_segment, segment_dir, Dense, Manifest, SealedSegment};
use crate::text_index::{bm25_search, TextIndex};
use crate::wal::{doc_key, DocVersion, IngestLog, LogOp, LoggedChunk};

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
}

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
}

/// The latest version of every document, by tenant then id: ids are per tenant, and lookups borrow (a search
/// checks every candidate row).
#[derive(Default)]
struct DocVersions(HashMap<String, HashMap<String, DocVersion>>);

impl DocVersions {
    /// From the log's map by [`doc_key`].
    fn from_log(by_key: HashMap<String, DocVersion>) -> Self {
        let mut out = DocVersions::default();
        for (key, v) in by_key {
            out.insert(crate::wal::doc_id_of_key(&key).to_string(), v);
        }
        out
    }
    fn get(&self, tenant: &str, doc_id: &str) -> Option<&DocVersion> {
        self.0.get(tenant)?.get(doc_id)
    }
    fn insert(&mut self, doc_id: String, version: DocVersion) {
        self.0
            .entry(version.tenant.clone())
            .or_default()
            .insert(doc_id, version);
    }
    fn live(&self) -> u64 {
        self.0
            .values()
            .flat_map(HashMap::values)
            .filter(|v| !v.deleted)
            .count() as u64
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
}

pub struct ShardEngine {
    dir: PathBuf,
    config: EngineConfig,
    log: Mutex<IngestLog>,
    state: RwLock<State>,
    /// One seal or compaction at a time.
    maintenance: Mutex<()>,
    background_seal: AtomicBool,
    rebuilt: Vec<String>,
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
    fn to_hit(&self, score: f32) -> Hit {
        Hit {
            chunk_id: self.chunk_id.to_string(),
            doc_id: self.doc_id.to_string(),
            title: self.title.to_string(),
            text: self.text.to_string(),
            metadata_json: self.metadata_json.to_string(),
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
    fn vector(&self, row: usize) -> Option<&'a [f32]> {
        match self {
            SegmentView::Growing(g) => (row < g.len()).then(|| g.vector(row)),
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
        let log = IngestLog::open(&dir.join("wal"))?;
        let versions = DocVersions::from_log(log.doc_versions()?);
        let mut manifest = match Manifest::load(dir) {
            Ok(m) => m,
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
                    warn!(segment = %meta.id, error = %e, event = "segment_corrupt", "refusing damaged segment; rebuilding it from the log");
                    let records = log.range(meta.min_seq, meta.max_seq)?;
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
                    )?;
                    sealed.push(Arc::new(SealedSegment::open(dir, &new_meta)?));
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
        let (rows, vectors) = live_rows_from_log(&records, &versions);
        for (i, row) in rows.into_iter().enumerate() {
            growing.push(
                row,
                &vectors[i * config.dimension..(i + 1) * config.dimension],
            )?;
        }
        growing.commit()?;
        info!(dir = %dir.display(), segments = sealed.len(), growing = growing.len(), event = "shard_recovered", "shard engine open");
        Ok(Arc::new(ShardEngine {
            dir: dir.to_path_buf(),
            config,
            log: Mutex::new(log),
            state: RwLock::new(State {
                versions,
                growing,
                frozen: None,
                sealed,
                manifest,
                quantizer,
            }),
            maintenance: Mutex::new(()),
            background_seal: AtomicBool::new(false),
            rebuilt,
        }))
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
                    next_version(held)
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
        let mut st = self.state.write();
        for ((op, version), seq) in ops.into_iter().zip(seqs) {
            if let LogOp::Upsert {
                doc_id,
                tenant,
                chunks,
            } = op
            {
                st.versions.insert(
                    doc_id.clone(),
                    DocVersion {
                        seq,
                        deleted: false,
                        tenant: tenant.clone(),
                        version,
                    },
                );
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
        let current = self.state.read().versions.get(tenant, doc_id).cloned();
        let live = current.as_ref().is_some_and(|v| !v.deleted);
        let held = current.as_ref().map_or(0, |v| v.version);
        let version = if version == 0 {
            if !live {
                return Ok(false);
            }
            next_version(held)
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
        self.state.write().versions.insert(
            doc_id.to_string(),
            DocVersion {
                seq: seqs[0],
                deleted: true,
                tenant: tenant.to_string(),
                version,
            },
        );
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
        let log = self.log.lock();
        let last_seq = log.last_seq();
        let page = log
            .doc_versions_after(after, limit)?
            .into_iter()
            .map(|(key, v)| (crate::wal::doc_id_of_key(&key).to_string(), v))
            .collect();
        Ok((page, last_seq))
    }

    /// The current content of each named (tenant, document id): live ones with every chunk and vector (from the
    /// log, which keeps every live row), deleted ones as tombstones. Unknown documents are left out.
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
                    tenant: v.tenant.clone(),
                    version: v.version,
                });
                continue;
            }
            let (tenant, chunks) = self.live_chunks(&log, v.seq, id)?;
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
    fn live_chunks(
        &self,
        log: &IngestLog,
        seq: u64,
        doc_id: &str,
    ) -> Result<(String, Vec<LoggedChunk>)> {
        match log.range(seq, seq)?.pop() {
            Some((_, LogOp::Upsert { tenant, chunks, .. })) => Ok((tenant, chunks)),
            _ => Err(IndexError::corrupt(
                self.dir.join("wal"),
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
        let log = self.log.lock();
        let st = self.state.read();
        let mut out = Vec::with_capacity(chunks.len());
        for (doc_id, chunk_ids) in wanted {
            let Some(v) = st.versions.get(tenant, doc_id).filter(|v| !v.deleted) else {
                continue;
            };
            let (_, logged) = self.live_chunks(&log, v.seq, doc_id)?;
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
                .map(|(r, score)| r.to_hit(score))
                .collect()
        };
        let mut out = LaneResults::default();
        if let Some(q) = p.query_vector {
            let mut cands = Vec::new();
            for view in &views {
                cands.extend(self.dense_candidates(view, q, p, &passes)?);
            }
            out.dense = hits(cands);
        }
        if let Some(text) = p.query_text.filter(|t| !t.trim().is_empty()) {
            out.bm25 = hits(self.bm25(&views, text, p, &passes)?);
        }
        Ok(out)
    }

    fn dense_candidates<'v>(
        &self,
        view: &SegmentView<'v>,
        q: &[f32],
        p: &SearchParams<'_>,
        passes: &dyn Fn(&RowView<'_>) -> bool,
    ) -> Result<Vec<(RowView<'v>, f32)>> {
        match view {
            SegmentView::Growing(g) => {
                let mut hits = Vec::new();
                for row in 0..g.len() {
                    let r = view.row(row).expect("row in range");
                    if passes(&r) {
                        hits.push((row, dot(q, g.vector(row))));
                    }
                }
                hits.sort_by(|a, b| b.1.total_cmp(&a.1));
                hits.truncate(p.k);
                Ok(hits
                    .into_iter()
                    .map(|(row, s)| (view.row(row).expect("row"), s))
                    .collect())
            }
            SegmentView::Sealed(seg) => {
                let Some(dense) = &seg.dense else {
                    return Ok(Vec::new());
                };
                let nprobe = p.nprobe.unwrap_or(self.config.ivfpq.nprobe);
                // Over-fetch so that tombstones, other tenants and filters still leave k; widen until they do.
                let mut fetch = (p.k * self.config.overfetch.max(1)).min(seg.meta.rows);
                loop {
                    let raw = dense.search(q, fetch, nprobe)?;
                    let exhausted = raw.len() < fetch || fetch >= seg.meta.rows;
                    let mut hits = Vec::new();
                    for (id, score) in raw {
                        let Some(row) = seg.row_of(id) else { continue };
                        let Some(r) = view.row(row) else { continue };
                        if !passes(&r) {
                            continue;
                        }
                        let score = match (p.exact_rescore, view.vector(row)) {
                            (true, Some(v)) => dot(q, v),
                            _ => score,
                        };
                        hits.push((r, score));
                    }
                    if hits.len() >= p.k || exhausted {
                        return Ok(top_k(hits, p.k));
                    }
                    fetch = (fetch * 4).min(seg.meta.rows);
                }
            }
        }
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
            let mut full = false;
            let mut hits = Vec::new();
            for (view, rows) in views.iter().zip(per_index) {
                full |= rows.len() == limit;
                for (row, score) in rows {
                    if let Some(r) = view.row(row as usize) {
                        if passes(&r) {
                            hits.push((r, score));
                        }
                    }
                }
            }
            if hits.len() >= p.k || !full || limit >= max_rows {
                return Ok(top_k(hits, p.k));
            }
            limit *= 4;
        }
    }

    pub fn stats(&self) -> EngineStats {
        // Lock order is log, then state (as writers take them): read the log position first and let go of it,
        // or a stats call holding `state` would wait for the log while a writer holding the log waits for `state`.
        let last_seq = self.log.lock().last_seq();
        let st = self.state.read();
        EngineStats {
            live_documents: st.versions.live(),
            growing_rows: (st.growing.len() + st.frozen.as_ref().map_or(0, |f| f.segment.len()))
                as u64,
            sealed_rows: st.sealed.iter().map(|s| s.meta.rows as u64).sum(),
            sealed_segments: st.sealed.len() as u32,
            last_seq,
            rebuilt_segments: self.rebuilt.clone(),
        }
    }

    /// Bytes this replica holds on disk (log, segments, manifest): a directory walk, so asked for on demand (the
    /// Stats RPC), never on the heartbeat's path.
    pub fn disk_bytes(&self) -> Result<u64> {
        crate::fsutil::tree_bytes(&self.dir)
    }

    /// Paths of the sealed segments' directories (for operators and tests).
    /// A consistent snapshot of this replica in `dest` (absent or empty) while it keeps serving: with seals and
    /// compactions held off, the log is checkpointed under the writers' lock (every write acknowledged before
    /// this call is in it), the segment manifest recorded with it, and the sealed segments it names hard-linked
    /// before a compaction may delete them; then every file is hashed into `SNAPSHOT.json`
    /// ([`crate::snapshot`]). Searches and writes go on meanwhile; writes wait only for the checkpoint.
    pub fn snapshot(&self, dest: &Path) -> Result<crate::snapshot::ShardSnapshot> {
        crate::snapshot::prepare_destination(dest)?;
        let (last_seq, live_documents) = {
            let _maintenance = self.maintenance.lock();
            let (manifest, last_seq, live_documents) = {
                let log = self.log.lock();
                let st = self.state.read();
                log.checkpoint(&dest.join("wal"))?;
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
            (last_seq, live_documents)
        };
        crate::snapshot::seal(dest, last_seq, live_documents)
    }

    pub fn segment_dirs(&self) -> Vec<PathBuf> {
        self.state
            .read()
            .sealed
            .iter()
            .map(|s| segment_dir(&self.dir, &s.meta.id))
            .collect()
    }

    fn seal_in_background(self: &Arc<Self>) {
        if self.background_seal.swap(true, Ordering::SeqCst) {
            return;
        }
        let engine = Arc::clone(self);
        std::thread::spawn(move || {
            if let Err(e) = engine.seal() {
                warn!(error = %e, event = "seal_failed", "sealing failed; rows stay in the growing segment");
            } else if let Err(e) = engine.merge_as_planned() {
                warn!(error = %e, event = "compaction_failed", "compaction failed; segments stay as they are");
            }
            engine.background_seal.store(false, Ordering::SeqCst);
        });
    }

    /// Seals the growing segment into an IVF_PQ segment now. Writes continue into a fresh growing segment
    /// meanwhile, and the frozen rows stay searchable until the sealed segment replaces them.
    pub fn seal(&self) -> Result<()> {
        let _m = self.maintenance.lock();
        let _slot = crate::maintenance::acquire();
        let (frozen, id) = {
            let log = self.log.lock();
            let mut st = self.state.write();
            if st.frozen.is_none() {
                if st.growing.is_empty() {
                    return Ok(());
                }
                let fresh = GrowingSegment::new(self.config.dimension)?;
                let old = std::mem::replace(&mut st.growing, fresh);
                let range = (st.manifest.sealed_through_seq + 1, log.last_seq());
                st.frozen = Some(Frozen {
                    segment: Arc::new(old),
                    seq_range: range,
                });
            }
            let f = st.frozen.as_ref().expect("frozen");
            let frozen = (Arc::clone(&f.segment), f.seq_range);
            (frozen, st.manifest.allocate_id())
        };
        let (segment, range) = frozen;
        let (rows, vectors) = {
            let st = self.state.read();
            let mut rows = Vec::new();
            let mut vectors = Vec::new();
            for (i, r) in segment.rows.iter().enumerate() {
                if st.is_live(&r.tenant, &r.doc_id, r.seq) {
                    rows.push(r.clone());
                    vectors.extend_from_slice(segment.vector(i));
                }
            }
            (rows, vectors)
        };
        let before = self.state.read().quantizer.clone();
        let quantizer = self.ensure_quantizer(&vectors, rows.len())?;
        let dense = encoded(quantizer.as_deref(), &rows, &vectors)?;
        let meta = build_segment(&self.dir, &id, range, &self.config, &rows, &vectors, dense)?;
        let opened = Arc::new(SealedSegment::open(&self.dir, &meta)?);
        {
            let mut st = self.state.write();
            st.sealed.push(opened);
            st.manifest.segments.push(meta);
            st.manifest.sealed_through_seq = range.1;
            st.manifest.store(&self.dir)?;
            st.frozen = None;
        }
        info!(segment = %id, rows = rows.len(), event = "segment_sealed", "sealed growing segment");
        if let Some(q) = before.filter(|_| !rows.is_empty()) {
            let drift = q.drift(&vectors)?;
            if drift > self.config.quantizer_drift_bound {
                info!(
                    version = q.meta.version,
                    drift,
                    event = "quantizer_drift",
                    "recent vectors drifted from the shard quantizer; training a new one"
                );
                self.train_quantizer(&vectors)?;
            }
        }
        Ok(())
    }

    /// The shard's quantizer, trained now on `vectors` if there is none yet and `rows` are enough for the
    /// configured parameters; none while the shard is smaller than that (segments train their own).
    fn ensure_quantizer(
        &self,
        vectors: &[f32],
        rows: usize,
    ) -> Result<Option<Arc<ShardQuantizer>>> {
        if let Some(q) = self.state.read().quantizer.clone() {
            return Ok(Some(q));
        }
        if !enough_to_train(&self.config.ivfpq, rows, self.config.dimension) {
            return Ok(None);
        }
        self.train_quantizer(vectors).map(Some)
    }

    /// Trains a new quantizer version on (a sample of) `vectors` and makes it the one new segments and merges
    /// encode with. Runs under the maintenance lock, beside searches and writes; the replaced version's file goes
    /// (every segment carries its own copy of the centroids and codebooks it was encoded with).
    fn train_quantizer(&self, vectors: &[f32]) -> Result<Arc<ShardQuantizer>> {
        let dim = self.config.dimension;
        let (version, sealed) = {
            let st = self.state.read();
            (st.manifest.quantizer_versions + 1, st.sealed.clone())
        };
        // The new version will encode the whole shard as its segments merge: train it on all of it, the new
        // rows and the sealed ones, evenly spread (the held-out tenth measures its baseline).
        let most = self.config.train_sample + self.config.train_sample / 9;
        let mixed = shard_sample(vectors, dim, &sealed, most);
        let (sample, held_out) =
            split_for_training(&mixed, dim, self.config.train_sample, &self.config.ivfpq);
        let q = Arc::new(ShardQuantizer::train(
            &self.dir,
            version,
            dim,
            &self.config.ivfpq,
            &sample,
            &held_out,
        )?);
        let replaced = {
            let mut st = self.state.write();
            let replaced = st.manifest.quantizer.replace(q.meta.clone());
            st.manifest.quantizer_versions = version;
            st.manifest.store(&self.dir)?;
            st.quantizer = Some(Arc::clone(&q));
            replaced
        };
        if let Some(old) = replaced {
            let _ = std::fs::remove_file(quantizer_path(&self.dir, old.version));
        }
        info!(
            version,
            rows = q.meta.trained_rows,
            baseline_error = q.meta.baseline_error,
            event = "quantizer_trained",
            "trained the shard quantizer"
        );
        Ok(q)
    }

    /// Merges segments as the tiered policy asks ([`crate::merge::plan`]) until it asks for nothing.
    pub fn merge_as_planned(&self) -> Result<()> {
        loop {
            let pick = {
                let st = self.state.read();
                let rows: Vec<usize> = st.sealed.iter().map(|s| s.meta.rows).collect();
                crate::merge::plan(
                    &rows,
                    self.config.merge_factor,
                    self.config.seal_threshold,
                    self.config.max_sealed_segments,
                )
                .map(|p| {
                    p.into_iter()
                        .map(|i| Arc::clone(&st.sealed[i]))
                        .collect::<Vec<_>>()
                })
            };
            match pick {
                Some(inputs) => self.merge_segments(inputs)?,
                None => return Ok(()),
            }
        }
    }

    /// Merges every sealed segment into one without tombstoned rows, then drops log records that no segment
    /// needs any more. Search results do not change.
    pub fn compact(&self) -> Result<()> {
        let inputs = self.state.read().sealed.clone();
        self.merge_segments(inputs)
    }

    /// Merges `inputs` into one segment of their live rows (in global id order when encoded with the shard's
    /// quantizer: the inputs' inverted lists are moved, not rebuilt), swaps it in, removes theirs.
    fn merge_segments(&self, inputs: Vec<Arc<SealedSegment>>) -> Result<()> {
        let _m = self.maintenance.lock();
        let _slot = crate::maintenance::acquire();
        if inputs.is_empty() {
            return Ok(());
        }
        let id = self.state.write().manifest.allocate_id();
        let (mut rows, mut vectors, mut ids, merging, range) = {
            let st = self.state.read();
            let (mut rows, mut vectors, mut ids, mut merging) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for seg in &inputs {
                let view = SegmentView::Sealed(seg);
                let own_ids = match seg.meta.quantizer {
                    Some(_) => (0..seg.meta.rows).map(|row| seg.id_of(row)).collect(),
                    None => {
                        global_ids((0..seg.meta.rows).map(|row| view.row(row).expect("row").seq))?
                    }
                };
                let mut live = Vec::with_capacity(seg.meta.rows);
                for (row, id) in own_ids.into_iter().enumerate() {
                    let r = view.row(row).expect("row");
                    let is_live = st.is_live(r.tenant, r.doc_id, r.seq);
                    if is_live {
                        rows.push(r.to_stored());
                        vectors.extend_from_slice(view.vector(row).expect("vector"));
                        ids.push(id);
                    }
                    live.push(is_live);
                }
                merging.push(MergeInput {
                    segment: Arc::clone(seg),
                    live,
                });
            }
            let lo = inputs.iter().map(|s| s.meta.min_seq).min().unwrap_or(0);
            let hi = inputs.iter().map(|s| s.meta.max_seq).max().unwrap_or(0);
            (rows, vectors, ids, merging, (lo, hi))
        };
        let dense = match self.ensure_quantizer(&vectors, rows.len())? {
            Some(q) => {
                let index = crate::merge::merged_dense(&self.dir, &q, &merging, &vectors, &ids)?;
                // Rows in id order, as the segment's id file must be; the index does not care.
                let dim = self.config.dimension;
                let mut order: Vec<usize> = (0..ids.len()).collect();
                order.sort_unstable_by_key(|&i| ids[i]);
                rows = order.iter().map(|&i| rows[i].clone()).collect();
                vectors = order
                    .iter()
                    .flat_map(|&i| vectors[i * dim..(i + 1) * dim].iter().copied())
                    .collect();
                ids = order.iter().map(|&i| ids[i]).collect();
                Dense::Encoded {
                    index,
                    ids,
                    quantizer: q.meta.version,
                }
            }
            None => Dense::Train,
        };
        drop(merging);
        let meta = build_segment(&self.dir, &id, range, &self.config, &rows, &vectors, dense)?;
        let opened = Arc::new(SealedSegment::open(&self.dir, &meta)?);
        let merged: Vec<String> = inputs.iter().map(|s| s.meta.id.clone()).collect();
        let sealed_through = {
            let mut st = self.state.write();
            st.sealed.retain(|s| !merged.contains(&s.meta.id));
            st.sealed.push(opened);
            st.manifest.segments.retain(|m| !merged.contains(&m.id));
            st.manifest.segments.push(meta);
            st.manifest.store(&self.dir)?;
            st.manifest.sealed_through_seq
        };
        for old in &merged {
            // Searches still holding the old Arc keep their mmaps; unlinking is safe on POSIX.
            let _ = std::fs::remove_dir_all(segment_dir(&self.dir, old));
        }
        self.forget_superseded(sealed_through)?;
        info!(segment = %id, rows = rows.len(), merged = merged.len(), event = "segments_compacted", "compaction done");
        Ok(())
    }

    /// Removes sealed-range log records whose rows are dead (superseded or deleted documents).
    fn forget_superseded(&self, sealed_through: u64) -> Result<()> {
        let mut log = self.log.lock();
        let records = log.range(1, sealed_through)?;
        let st = self.state.read();
        let dead: Vec<u64> = records
            .iter()
            .filter(|(seq, op)| match op {
                LogOp::Upsert { doc_id, tenant, .. } => !st.is_live(tenant, doc_id, *seq),
                LogOp::Delete { .. } => true,
            })
            .map(|(seq, _)| *seq)
            .collect();
        drop(st);
        log.forget(&dead)
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

/// A write version newer than `held`: microseconds since the epoch, so versions chosen by one node (or by
/// routers with roughly synchronised clocks) order writes by time, and never below `held + 1`.
pub fn next_version(held: u64) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    now.max(held + 1)
}

/// Best `k` by score, ties broken by chunk id so that results are deterministic.
/// Best `k` rows, best first (ties by chunk id), each chunk once.
fn top_k(mut rows: Vec<(RowView<'_>, f32)>, k: usize) -> Vec<(RowView<'_>, f32)> {
    rows.sort_by(|a, b| {
        b.1.total_cmp(&a.1)
            .then_with(|| a.0.chunk_id.cmp(b.0.chunk_id))
    });
    rows.dedup_by(|a, b| a.0.chunk_id == b.0.chunk_id);
    rows.truncate(k);
    rows
}

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

/// The dense index of new rows (a seal, or a damaged segment rebuilt): encoded with the shard's quantizer under
/// the rows' global ids when it has one, else trained on the rows themselves.
fn encoded(
    quantizer: Option<&ShardQuantizer>,
    rows: &[StoredChunk],
    vectors: &[f32],
) -> Result<Dense> {
    let Some(q) = quantizer else {
        return Ok(Dense::Train);
    };
    let ids = global_ids(rows.iter().map(|r| r.seq))?;
    let mut index = q.encoder()?;
    index.add(vectors, &ids)?;
    Ok(Dense::Encoded {
        index,
        ids,
        quantizer: q.meta.version,
    })
}

/// Quantizer files the manifest does not name: a training cut short by a crash, or a replaced version.
fn remove_orphan_quantizers(dir: &Path, manifest: &Manifest) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(dir.join("quantizer")) else {
        return Ok(());
    };
    let keep = manifest
        .quantizer
        .as_ref()
        .map(|q| quantizer_path(dir, q.version));
    for entry in entries {
        let path = entry?.path();
        if Some(&path) != keep.as_ref() {
            warn!(path = %path.display(), event = "orphan_quantizer_removed", "removing a quantizer file the manifest does not name");
            std::fs::remove_file(&path)?;
        }
    }
    Ok(())
}

/// At most `most` rows spread evenly over `fresh` (row-major) followed by every row of `sealed`, copied.
fn shard_sample(fresh: &[f32], dim: usize, sealed: &[Arc<SealedSegment>], most: usize) -> Vec<f32> {
    let fresh_rows = fresh.len() / dim;
    let total = fresh_rows + sealed.iter().map(|s| s.meta.rows).sum::<usize>();
    let step = total.div_ceil(most.max(1)).max(1);
    let mut out = Vec::with_capacity(total.div_ceil(step) * dim);
    let mut next = 0;
    for r in (0..fresh_rows).step_by(step) {
        out.extend_from_slice(&fresh[r * dim..(r + 1) * dim]);
        next = r + step;
    }
    let mut offset = fresh_rows;
    for seg in sealed {
        while next < offset + seg.meta.rows {
            if let Some(v) = seg.vectors.get(next - offset) {
                out.extend_from_slice(v);
            }
            next += step;
        }
        offset += seg.meta.rows;
    }
    out
}
