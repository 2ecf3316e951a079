//! A replica's part of the recall target ([`crate::search_tuning`]): which setting a search is served with, the
//! sample a tuning measures on, and the measurement.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tracing::{info, warn};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::exact::ExactQuery;
use super::{SearchParams, SegmentView, ShardEngine};
use crate::delivered_recall::{hits, rank_weights, share_kept};
use crate::filter::Filter;
use crate::search_tuning::{choose, Measured, SearchSetting, TunedSearch};

/// Own-setting samples the live estimate holds before it may ask for a tuning: a 95% interval of about ±0.03.
pub(crate) const RETUNE_AFTER_SAMPLES: usize = 50;

/// One query of a tuning's sample: a row of the replica (`own` is its chunk, left out of both result lists) or
/// a recent search.
struct SampleQuery {
    tenant: String,
    vector: Vec<f32>,
    own: Option<String>,
}

impl ShardEngine {
    /// The setting a search is served with: the `nprobe` it names (with the configured re-score depth), else
    /// the last tuning's choice, else the configured ones.
    pub(super) fn setting_for(&self, p: &SearchParams<'_>) -> SearchSetting {
        let configured = SearchSetting {
            nprobe: self.config.ivfpq.nprobe,
            exact_refine: self.config.exact_refine,
        };
        match p.nprobe {
            Some(nprobe) => SearchSetting {
                nprobe,
                ..configured
            },
            None => self.tuned.read().map_or(configured, |t| t.setting),
        }
    }

    /// What the last tuning chose (None before one, or without a recall target).
    pub fn tuned_search(&self) -> Option<TunedSearch> {
        *self.tuned.read()
    }

    /// Measures the recall and time of each setting on a sample of this replica and serves the fastest that
    /// reaches the collection's `recall_target` from now on; returns the choice. None (nothing changes) without a
    /// target or without sealed rows (a growing segment is scanned exactly). Runs on the caller's thread, for as long as
    /// one exact scan of the replica and a few hundred searches per setting take.
    pub fn tune_search(&self) -> Option<TunedSearch> {
        // Cleared first: a seal that ends while this runs asks for another tuning.
        self.tuning_due.store(false, Ordering::SeqCst);
        let started = std::time::Instant::now();
        let target = self.config.recall_target;
        let (sealed_rows, seed, segments_issued) = {
            let st = self.state.read();
            let rows: u64 = st
                .sealed
                .iter()
                .filter(|s| s.dense.is_some())
                .map(|s| s.meta.rows as u64)
                .sum();
            (
                rows,
                st.manifest.sealed_through_seq,
                st.manifest.next_segment,
            )
        };
        if target <= 0.0 || sealed_rows == 0 {
            return None;
        }
        // Rows written while it measures are served and missing from the truth, so every setting measured after
        // them would look worse than the first (seen at 1M under a bulk load: nprobe 1 "best", a retrain asked
        // for): such a tuning is discarded, and the seal those writes lead to asks for the next one.
        let written_through = self.log_reader.last_seq();
        let tuning = &self.config.search_tuning;
        let k = tuning.k.min(crate::config::MAX_TOP_K - 1);
        // Seeded by the data: the same replica is measured on the same rows.
        let sample = self.tuning_sample(tuning.queries, &mut StdRng::seed_from_u64(seed));
        let filter = Filter::default();
        let exact: Vec<ExactQuery<'_>> = sample
            .iter()
            .map(|q| ExactQuery {
                tenant: &q.tenant,
                vector: &q.vector,
                filter: &filter,
            })
            .collect();
        let truth: Vec<Vec<String>> = self
            .exact_dense_batch(&exact, k + 1)
            .into_iter()
            .zip(&sample)
            .map(|(ids, q)| without_own(ids, q.own.as_deref(), k))
            .collect();
        let measured = sample.iter().zip(&truth).filter(|(_, t)| !t.is_empty());
        let queries = measured.clone().count();
        if queries == 0 {
            return None;
        }
        // Measured as the collection receives it: a miss at a late rank is mostly not the collection's
        // ([`crate::delivered_recall`]).
        let shards = self.recall.collection_shards();
        // The same k for every query: its rank weights once, outside the timed searches.
        let weights = rank_weights(k, shards, k);
        let written_under = || self.log_reader.last_seq() != written_through;
        let recall_at = |setting: SearchSetting| {
            if written_under() {
                // Discarded below whatever it measures: the rest of the ladder costs nothing.
                return Measured::of(setting, &[0.0], std::time::Duration::ZERO);
            }
            let searching = std::time::Instant::now();
            let recalls: Vec<f64> = measured
                .clone()
                .map(|(q, truth)| {
                    let p = SearchParams::dense(
                        &q.tenant,
                        &q.vector,
                        k + 1,
                        Some(setting.nprobe),
                        &filter,
                    );
                    let served = match self.search_with(&p, setting) {
                        Ok(lanes) => lanes.dense.into_iter().map(|h| h.chunk_id).collect(),
                        Err(_) => Vec::new(),
                    };
                    let served = without_own(served, q.own.as_deref(), k);
                    share_kept(&hits(&served, truth), &weights).unwrap_or(0.0)
                })
                .collect();
            Measured::of(setting, &recalls, searching.elapsed())
        };
        let (chosen, reached) = choose(
            self.config.ivfpq.nlist,
            self.config.exact_refine,
            target,
            recall_at,
        );
        if written_under() {
            tracing::info!(
                event = "search_tuning_discarded",
                "rows were written while the tuning measured; its figures are not kept"
            );
            return None;
        }
        let tuned = TunedSearch {
            setting: chosen.setting,
            shards,
            recall: crate::search_tuning::as_kept(chosen.recall),
            micros_per_query: crate::search_tuning::as_kept(chosen.micros_per_query),
            target,
            reached,
            queries,
            sealed_rows,
            tuned_at_ms: attest_core::clock::unix_ms(),
            took_ms: started.elapsed().as_millis() as u64,
        };
        let kept = crate::search_tuning::KeptTuning {
            tuned,
            segments_issued,
            chooser: crate::search_tuning::CHOOSER,
        };
        if let Err(e) = kept.store(&self.dir) {
            // Served all the same; a restart tunes again before it has the setting back.
            warn!(error = %e, event = "search_tuning_not_kept", "the tuning could not be written to disk");
        }
        *self.tuned.write() = Some(tuned);
        if self.recall.collection_shards() != tuned.shards {
            // The shard map was read while it measured: the next tuning measures for the count now known.
            self.tuning_needed();
        }
        Some(tuned)
    }

    /// Rows drawn at random from every segment (live ones, each once), and the recent searches the recall probe
    /// drew: up to half the sample, so that the measurement follows the traffic once there is some.
    fn tuning_sample(&self, n: usize, rng: &mut StdRng) -> Vec<SampleQuery> {
        let mut sample: Vec<SampleQuery> = self
            .recall
            .recent_queries()
            .into_iter()
            .take(n / 2)
            .map(|(tenant, vector)| SampleQuery {
                tenant,
                vector,
                own: None,
            })
            .collect();
        let st = self.state.read();
        let views = st.views();
        let total: usize = views.iter().map(SegmentView::len).sum();
        let mut seen = std::collections::HashSet::new();
        // Bounded tries: a replica of mostly dead rows gives a smaller sample, not a long loop.
        for _ in 0..n * 4 {
            if sample.len() >= n || total == 0 {
                break;
            }
            let mut at = rng.gen_range(0..total);
            let Some(view) = views.iter().find(|v| {
                let inside = at < v.len();
                if !inside {
                    at -= v.len();
                }
                inside
            }) else {
                continue;
            };
            let (Some(row), Some(vector)) = (view.row(at), view.vector(at)) else {
                continue;
            };
            if !st.is_live(row.tenant, row.doc_id, row.seq) || !seen.insert(row.chunk_id) {
                continue;
            }
            sample.push(SampleQuery {
                tenant: row.tenant.to_string(),
                vector: vector.to_vec(),
                own: Some(row.chunk_id.to_string()),
            });
        }
        sample
    }

    /// Called by the recall probe after each sample of a search served with this replica's own setting. When
    /// the live estimate of those (at least [`RETUNE_AFTER_SAMPLES`] of them) lies wholly below the target, the
    /// real queries are not what the tuning measured — they lie away from the stored rows, or the rows moved —
    /// so the replica tunes again with the recent searches in its sample (and, if no setting reaches the target
    /// on them, trains its quantizer again: [`Self::retrain_for_recall`]).
    pub(crate) fn own_recall_sampled(&self) {
        let target = self.config.recall_target;
        let Some(e) = self.recall.own_estimate() else {
            return;
        };
        let enough = RETUNE_AFTER_SAMPLES.min(self.config.recall_probe.window) as u64;
        if target <= 0.0 || e.samples < enough || e.high >= target {
            return;
        }
        info!(
            recall = e.recall,
            high = e.high,
            target,
            samples = e.samples,
            event = "recall_estimate_below_target",
            "searches deliver less recall than the target; tuning again with the recent searches"
        );
        self.recall.clear_own();
        self.tuning_needed();
    }

    /// Records the collection's shard count from the shard map (every reconcile pass, and each EnsureShard): the
    /// estimate reads its samples with it from now on, and a tuning measured for another count is done again.
    pub fn set_collection_shards(&self, shards: u32) {
        if shards == 0 || !self.recall.set_collection_shards(shards) {
            return;
        }
        if self.tuned_search().is_some_and(|t| t.shards != shards) {
            info!(
                shards,
                event = "search_tuning_shards_changed",
                "the collection's shard count differs from the one the tuning measured for; tuning again"
            );
            self.tuning_needed();
        }
    }

    /// Called when a tuning found no setting that reaches the target: the quantizer no longer fits the data
    /// (rows sealed since it was trained lie where its lists and codebooks do not). Trains it again on the
    /// replica's rows and re-encodes every segment with it — a full compaction — on a thread of its own; the
    /// compaction asks for a tuning when it ends. Once per sealed range: a target out of reach of a fresh
    /// quantizer too (PQ's error caps recall) is not retrained for again until more rows are sealed.
    pub(crate) fn retrain_for_recall(self: &Arc<Self>) {
        let sealed_through = self.state.read().manifest.sealed_through_seq;
        if self.retrained_through.load(Ordering::SeqCst) >= sealed_through
            || self.recall_retraining.swap(true, Ordering::SeqCst)
        {
            return;
        }
        self.retrained_through
            .store(sealed_through, Ordering::SeqCst);
        let engine = Arc::clone(self);
        std::thread::spawn(move || {
            warn!(
                sealed_through,
                event = "quantizer_retrain_for_recall",
                "no search setting reaches the recall target; training the quantizer again"
            );
            let retrained = engine.retrain_and_compact();
            match retrained {
                Ok(()) => {
                    engine.recall_retrains.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    warn!(error = %e, event = "quantizer_retrain_failed", "retraining for the recall target failed")
                }
            }
            engine.recall_retraining.store(false, Ordering::SeqCst);
        });
    }

    fn retrain_and_compact(&self) -> crate::error::Result<()> {
        if self.state.read().quantizer.is_some() {
            let _training = self.quantizer_training.lock();
            self.train_quantizer(&[])?;
        }
        // Segments trained on their own rows are trained again as one; the others are encoded again with the
        // new version.
        self.compact()
    }

    /// Marks the replica due for tuning; false when it already was (it waits in the queue once).
    pub(crate) fn mark_tuning_due(&self) -> bool {
        !self.tuning_due.swap(true, Ordering::SeqCst)
    }

    /// Whether the replica was written to in the last [`crate::search_tuning::QUIET`]. A tuning started now would
    /// be discarded (rows written while it measures), after an exact scan of the replica for nothing: under a
    /// bulk load at 10M each seal's tuning did that, on a fifth of a core per process.
    pub(crate) fn being_written(&self) -> bool {
        self.last_write.lock().elapsed() < crate::search_tuning::QUIET
    }

    /// Leaves the tuning the replica is due for until its writes stop ([`Self::resume_deferred_tuning`]).
    pub(crate) fn defer_tuning(&self) {
        self.tuning_deferred.store(true, Ordering::SeqCst);
        self.tuning_due.store(false, Ordering::SeqCst);
    }

    /// Asks again for a tuning deferred by writes, once they have stopped (from the idle-seal thread, once a
    /// second).
    pub(crate) fn resume_deferred_tuning(&self) {
        if !self.being_written() && self.tuning_deferred.swap(false, Ordering::SeqCst) {
            self.tuning_needed();
        }
    }

    /// Asks for a tuning in the background, when the collection has a recall target (after a seal, a merge, a
    /// quantizer training, and at open).
    pub(super) fn tuning_needed(&self) {
        if self.config.recall_target <= 0.0 {
            return;
        }
        if let Some(engine) = self.this.get() {
            crate::search_tuning::schedule(engine.clone());
        }
    }
}

/// The first `k` ids other than the query's own row.
fn without_own(ids: Vec<String>, own: Option<&str>, k: usize) -> Vec<String> {
    ids.into_iter()
        .filter(|id| Some(id.as_str()) != own)
        .take(k)
        .collect()
}
