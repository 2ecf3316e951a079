//! Sealing and merging a shard's segments: the background seal of the growing segment, the shard quantizer's
//! training and drift check ([`crate::quantizer`]), the tiered merges ([`crate::merge`]) and full compaction.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tracing::{info, warn};

use super::{Frozen, SegmentView, ShardEngine, State};
use crate::chunk_store::StoredChunk;
use crate::error::Result;
use crate::growing::GrowingSegment;
use crate::maintenance::{Phases, Work};
use crate::merge::MergeInput;
use crate::quantizer::{
    enough_to_train, evenly_spread, global_ids, quantizer_path, split_for_training, ShardQuantizer,
};
use crate::segment::{build_segment, segment_dir, Dense, Manifest, SealedSegment};
use crate::wal::LogOp;

impl ShardEngine {
    pub(super) fn seal_in_background(self: &Arc<Self>) {
        if self.background_seal.swap(true, Ordering::SeqCst) {
            return;
        }
        let engine = Arc::clone(self);
        std::thread::spawn(move || {
            // Rows that arrived during a seal are sealed next, so writes waiting on the backlog wait for seals
            // only; merges run on their own thread beside them.
            loop {
                if let Err(e) = engine.seal() {
                    warn!(error = %e, event = "seal_failed", "sealing failed; rows stay in the growing segment");
                    break;
                }
                engine.merge_in_background();
                if engine.unsealed_rows() < engine.config.seal_threshold {
                    break;
                }
            }
            engine.background_seal.store(false, Ordering::SeqCst);
            // Waiting writers start the next seal themselves.
            engine.notify_sealing();
        });
    }

    /// Starts merging as planned on a thread of its own unless one runs; a seal that ends during the last merge
    /// finds that thread running, so it looks at the plan again before it stops.
    fn merge_in_background(self: &Arc<Self>) {
        if self.background_merge.swap(true, Ordering::SeqCst) {
            return;
        }
        let engine = Arc::clone(self);
        std::thread::spawn(move || loop {
            let merged = engine.merge_as_planned();
            engine.background_merge.store(false, Ordering::SeqCst);
            if let Err(e) = merged {
                warn!(error = %e, event = "compaction_failed", "compaction failed; segments stay as they are");
                break;
            }
            let more = engine.planned_merge(&engine.state.read()).is_some();
            if !more || engine.background_merge.swap(true, Ordering::SeqCst) {
                break;
            }
        });
    }

    /// Seals the growing segment into an IVF_PQ segment now. Writes continue into a fresh growing segment
    /// meanwhile, and the frozen rows stay searchable until the sealed segment replaces them.
    pub fn seal(&self) -> Result<()> {
        let _m = self.sealing.lock();
        let _slot = crate::maintenance::acquire(Work::Seal);
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
        let mut phases = Phases::default();
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
        phases.mark("collect");
        let before = self.state.read().quantizer.clone();
        let quantizer = self.ensure_quantizer(&vectors)?;
        phases.mark("quantizer");
        let dense = encoded(quantizer.as_deref(), &rows, &vectors)?;
        phases.mark("encode");
        let meta = build_segment(
            &self.dir,
            &id,
            range,
            &self.config,
            &rows,
            &vectors,
            dense,
            &mut phases,
        )?;
        let opened = Arc::new(SealedSegment::open_just_built(&self.dir, &meta)?);
        phases.mark("open");
        {
            let mut st = self.state.write();
            st.sealed.push(opened);
            st.manifest.segments.push(meta);
            st.manifest.sealed_through_seq = range.1;
            st.manifest.store(&self.dir)?;
            st.frozen = None;
        }
        self.notify_sealing();
        if !self.config.keep_sealed_vectors_in_log.kept() {
            // Only now: a reader that finds a record stripped finds its rows in the sealed segments.
            self.sealed_vectors.drop_through(range.1)?;
            phases.mark("log_vectors");
        }
        // What the log holds of the sealed rows need not be in the WAL a second time.
        self.log_reader.flush_to_tables()?;
        phases.mark("log_flush");
        if let Some(q) = before.filter(|_| !rows.is_empty()) {
            let drift = q.drift(&vectors)?;
            phases.mark("drift");
            let reconfigured = self.reconfigured(&q);
            if drift > self.config.quantizer_drift_bound {
                info!(
                    version = q.meta.version,
                    drift,
                    event = "quantizer_drift",
                    "recent vectors drifted from the shard quantizer; training a new one"
                );
            } else if reconfigured {
                info!(
                    version = q.meta.version,
                    trained = ?q.meta.params,
                    configured = ?self.config.ivfpq,
                    event = "quantizer_reconfigured",
                    "the configured IVF_PQ parameters changed; training a new quantizer with them"
                );
            }
            if drift > self.config.quantizer_drift_bound || reconfigured {
                // The sealed segment is among the sealed ones now: the sample covers it.
                let _training = self.quantizer_training.lock();
                self.train_quantizer(&[])?;
                phases.mark("retrain");
            }
        }
        info!(segment = %id, rows = rows.len(), phases_ms = %phases.summary(), event = "segment_sealed", "sealed growing segment");
        // Its rows are searched through the index now, and a retrained quantizer lists them differently.
        self.tuning_needed();
        Ok(())
    }

    /// The shard's quantizer, trained now if there is none yet and the shard holds enough rows — its sealed rows
    /// and `fresh` (row-major; the rows being sealed) — to train the configured parameters in full (on at most
    /// `training_rows()` of them); none while it is smaller (segments train their own). So the first seal big
    /// enough trains it: waiting for `train_sample` rows would make that seal train its own index first, two
    /// trainings where one does (47 s and 59 s of the 131 s that 300,000 rows took, docs/BENCHMARKS.md).
    fn ensure_quantizer(&self, fresh: &[f32]) -> Result<Option<Arc<ShardQuantizer>>> {
        // Checked under the lock: a merge beside this seal may be training it now.
        let _training = self.quantizer_training.lock();
        let sealed_rows: usize = {
            let st = self.state.read();
            if let Some(q) = st.quantizer.clone() {
                return Ok(Some(q));
            }
            st.sealed.iter().map(|s| s.meta.rows).sum()
        };
        let rows = sealed_rows + fresh.len() / self.config.dimension;
        if !enough_to_train(&self.config.ivfpq, rows, self.config.dimension) {
            return Ok(None);
        }
        self.train_quantizer(fresh).map(Some)
    }

    /// Whether the configuration asks for other codes than `q` makes (lists, sub-quantizers, bits: an operator
    /// sizing `nlist` for a shard that has grown) and the shard holds enough rows to train them in full. Old
    /// segments keep serving and are re-encoded when they merge, as after drift.
    fn reconfigured(&self, q: &ShardQuantizer) -> bool {
        let (trained, configured) = (&q.meta.params, &self.config.ivfpq);
        let differs = (trained.nlist, trained.m, trained.nbits)
            != (configured.nlist, configured.m, configured.nbits);
        let rows: usize = self.state.read().sealed.iter().map(|s| s.meta.rows).sum();
        differs && enough_to_train(configured, rows, self.config.dimension)
    }

    /// Trains a new quantizer version on a sample of the shard (the sealed rows and `vectors`, the rows being
    /// sealed) and makes it the one new segments and merges encode with. The caller holds `quantizer_training`;
    /// searches, writes and the other kind of maintenance go on meanwhile. The replaced version's file goes
    /// (every segment carries its own copy of the centroids and codebooks it was encoded with).
    pub(super) fn train_quantizer(&self, vectors: &[f32]) -> Result<Arc<ShardQuantizer>> {
        let dim = self.config.dimension;
        let (version, sealed) = {
            let st = self.state.read();
            (st.manifest.quantizer_versions + 1, st.sealed.clone())
        };
        // The new version will encode the whole shard as its segments merge: train it on all of it, the new
        // rows and the sealed ones, evenly spread (the held-out tenth measures its baseline).
        let train_rows = self.config.training_rows();
        let mixed = shard_sample(vectors, dim, &sealed, train_rows + train_rows / 9);
        let (sample, held_out) = split_for_training(&mixed, dim, train_rows, &self.config.ivfpq);
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
        while self.merge_segments(|st| self.planned_merge(st))? {}
        Ok(())
    }

    /// The sealed segments the tiered policy would merge next, if any.
    fn planned_merge(&self, st: &State) -> Option<Vec<Arc<SealedSegment>>> {
        let rows: Vec<usize> = st.sealed.iter().map(|s| s.meta.rows).collect();
        crate::merge::plan(
            &rows,
            self.config.merge_factor,
            self.config.seal_threshold,
            self.config.max_sealed_segments,
        )
        .map(|p| p.into_iter().map(|i| Arc::clone(&st.sealed[i])).collect())
    }

    /// Merges every sealed segment into one without tombstoned rows, then drops log records that no segment
    /// needs any more. Search results do not change.
    pub fn compact(&self) -> Result<()> {
        self.merge_segments(|st| Some(st.sealed.clone()))?;
        Ok(())
    }

    /// Merges the segments `pick` chooses into one segment of their live rows (in global id order when encoded
    /// with the shard's quantizer: the inputs' inverted lists are moved, not rebuilt), swaps it in, removes
    /// theirs; false when `pick` chose nothing. `pick` sees the sealed segments once this merge holds the
    /// merging lock: chosen before, they could be ones another merge (the background's after a seal, a
    /// `Maintain` call's) has just merged and removed.
    fn merge_segments(
        &self,
        pick: impl FnOnce(&State) -> Option<Vec<Arc<SealedSegment>>>,
    ) -> Result<bool> {
        let _m = self.merging.lock();
        let _slot = crate::maintenance::acquire(Work::Merge);
        let Some(mut inputs) = pick(&self.state.read()).filter(|i| !i.is_empty()) else {
            return Ok(false);
        };
        // In log order, the inputs' rows usually come out in id order already, and the reorder below is skipped.
        inputs.sort_by_key(|s| s.meta.min_seq);
        let id = self.state.write().manifest.allocate_id();
        let mut phases = Phases::default();
        let (mut rows, mut vectors, mut ids, merging, range) = {
            let st = self.state.read();
            let most: usize = inputs.iter().map(|s| s.meta.rows).sum();
            let (mut rows, mut vectors, mut ids, mut merging) = (
                Vec::with_capacity(most),
                Vec::with_capacity(most * self.config.dimension),
                Vec::with_capacity(most),
                Vec::new(),
            );
            for seg in &inputs {
                // Read once, front to back: read-ahead, not a fault per page (the maps are advised random for
                // searches; these segments are removed after the merge).
                seg.chunks.file().advise_sequential();
                seg.vectors.file().advise_sequential();
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
                        view.vector(row).expect("vector").extend_into(&mut vectors);
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
        phases.mark("collect");
        // The inputs are still among the sealed segments: nothing fresh to add to the shard's rows.
        let dense = match self.ensure_quantizer(&[])? {
            Some(q) => {
                let merged = crate::merge::merged_dense(&self.dir, &q, &merging, &vectors)?;
                // Rows in id order, as the segment's id file must be; the index's labels follow them.
                let moved_to = crate::merge::into_id_order(
                    &mut ids,
                    &mut rows,
                    &mut vectors,
                    self.config.dimension,
                );
                let relabel = merged
                    .live_of_label
                    .iter()
                    .map(|&at| usize::try_from(at).map_or(-1, |at| moved_to[at] as i64))
                    .collect();
                Dense::Encoded {
                    index: merged.index,
                    relabel: Some(relabel),
                    ids,
                    quantizer: q.meta.version,
                }
            }
            None => Dense::Train,
        };
        drop(merging);
        phases.mark("merge_lists");
        let meta = build_segment(
            &self.dir,
            &id,
            range,
            &self.config,
            &rows,
            &vectors,
            dense,
            &mut phases,
        )?;
        let opened = Arc::new(SealedSegment::open_just_built(&self.dir, &meta)?);
        phases.mark("open");
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
        phases.mark("forget");
        info!(segment = %id, rows = rows.len(), merged = merged.len(), phases_ms = %phases.summary(), event = "segments_compacted", "compaction done");
        self.tuning_needed();
        Ok(true)
    }

    /// Removes sealed-range log records whose rows are dead (superseded or deleted documents): those the engine
    /// saw die ([`super::DeadRecords`]), after one scan of the log per process for those that died before it.
    fn forget_superseded(&self, sealed_through: u64) -> Result<()> {
        // The writers' lock throughout: no record dies while the dead ones are chosen and forgotten.
        let mut log = self.log.lock();
        let dead = if self.state.read().dead.scanned {
            self.state.write().dead.take_through(sealed_through)
        } else {
            // Once per process: the records that died before it started are known only to the log.
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
            let mut st = self.state.write();
            st.dead.take_through(sealed_through);
            st.dead.scanned = true;
            dead
        };
        let forgotten = log.forget(&dead);
        if forgotten.is_err() {
            // Not forgotten: the next compaction reads the log again rather than lose track of them.
            self.state.write().dead.scanned = false;
        }
        forgotten
    }
}

/// The dense index of new rows (a seal, or a damaged segment rebuilt): encoded with the shard's quantizer (labels
/// are row numbers) when it has one, else trained on the rows themselves.
pub(super) fn encoded(
    quantizer: Option<&ShardQuantizer>,
    rows: &[StoredChunk],
    vectors: &[f32],
) -> Result<Dense> {
    let Some(q) = quantizer else {
        return Ok(Dense::Train);
    };
    let ids = global_ids(rows.iter().map(|r| r.seq))?;
    let mut index = q.encoder()?;
    let row_numbers: Vec<i64> = (0..rows.len() as i64).collect();
    index.add(vectors, &row_numbers)?;
    Ok(Dense::Encoded {
        index,
        relabel: None,
        ids,
        quantizer: q.meta.version,
    })
}

/// Quantizer files the manifest does not name: a training cut short by a crash, or a replaced version.
pub(super) fn remove_orphan_quantizers(dir: &Path, manifest: &Manifest) -> Result<()> {
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
    let mut out = Vec::with_capacity(most.min(total) * dim);
    // Segments in order, each with the position of its first row among all of them.
    let mut segments = sealed.iter().scan(fresh_rows, |start, seg| {
        let first = *start;
        *start += seg.meta.rows;
        Some((first, seg))
    });
    let mut current = segments.next();
    for r in evenly_spread(total, most) {
        if r < fresh_rows {
            out.extend_from_slice(&fresh[r * dim..(r + 1) * dim]);
            continue;
        }
        while let Some((first, seg)) = current {
            if r < first + seg.meta.rows {
                if let Some(v) = seg.vectors.get(r - first) {
                    v.extend_into(&mut out);
                }
                break;
            }
            current = segments.next();
        }
    }
    out
}
