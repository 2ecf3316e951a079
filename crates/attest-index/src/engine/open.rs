//! Opening a replica: its log read, its sealed segments checked (damaged ones rebuilt from the log), leftovers
//! of a seal or merge cut short removed, and the log past the last sealed segment replayed into the growing
//! segment, before the engine takes a write or a search.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tracing::{info, warn};

use super::sealing::{encoded, remove_orphan_quantizers};
use super::versions::{DocVersions, HeldVersion};
use super::{log_vectors, DeadRecords, ShardEngine, State};
use crate::chunk_store::StoredChunk;
use crate::config::EngineConfig;
use crate::error::{IndexError, Result};
use crate::growing::GrowingSegment;
use crate::quantizer::ShardQuantizer;
use crate::segment::{build_segment, Manifest, SealedSegment};
use crate::wal::{IngestLog, LogOp};

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
