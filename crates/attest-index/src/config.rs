//! Per-shard engine configuration, with the defaults every deployment starts from.

use crate::ivfpq::IvfPqParams;
use crate::sealed_vectors::LogVectors;
use serde::{Deserialize, Serialize};

/// How one shard replica of a collection stores and searches its chunks.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct EngineConfig {
    /// Vector dimension of the collection; every write and query is checked against it.
    pub dimension: usize,
    /// IVF_PQ parameters for sealed segments (reduced per segment when it is small, see `IvfPqParams::effective`).
    /// Size `nlist` for the rows a shard will hold: √rows rounded up to a power of two (1,024 up to 1M rows,
    /// 4,096 at 10M), so that a probe scans lists of ~√rows codes. A shard trains its quantizer once it holds
    /// `nlist` × 39 rows; a changed `nlist`, `m` or `nbits` trains a new one at the next seal (old segments serve
    /// until a merge re-encodes them).
    pub ivfpq: IvfPqParams,
    /// Number of rows in the growing segment at which it is sealed into an IVF_PQ segment.
    pub seal_threshold: usize,
    /// At most this many rows are used to train a segment's quantizer (FAISS wants 39–256 per list); never
    /// fewer than `nlist` lists need ([`EngineConfig::training_rows`]).
    pub train_sample: usize,
    /// Sealed segments merge in the background by levels of `merge_factor` (see [`crate::merge`]); past this
    /// many the smallest merge whatever their level.
    pub max_sealed_segments: usize,
    /// Segments of one level merged together (quickwit's merge factor); each row is rewritten about
    /// `log_merge_factor(rows / seal_threshold)` times.
    pub merge_factor: usize,
    /// The shard's quantizer is trained again when a seal's vectors reconstruct this many times worse than its
    /// training vectors did (see [`crate::quantizer`]).
    pub quantizer_drift_bound: f32,
    /// Dense candidates fetched per requested hit before filters and exact re-scoring cut them down.
    /// 16: on 1M clustered 384-d vectors (`attest-lab bench`, docs/BENCHMARKS.md) recall@10 after re-scoring is
    /// 0.68 with 4 × k candidates, 0.85 with 8 × k and 0.96 with 16 × k, for +0.1 ms per query — PQ distances
    /// rank near neighbours poorly, so the exact re-score needs a deep candidate list.
    pub overfetch: usize,
    /// Dense candidates fetched per requested hit in a segment with an SQ8 copy of its vectors (never fewer than
    /// `overfetch`): all are re-scored from the copy (a byte per dimension, so it stays in memory), the best
    /// [`crate::engine::EXACT_REFINE`] × k of them from the full vectors. 64: at 10M clustered 384-d vectors
    /// recall@10 rises from 0.918 (16 × k re-scored exactly) to 0.991 at nprobe 8 (docs/decisions/sq8-rescoring.md, "Recall at
    /// 10M"); with one quantizer per shard and 4,096 lists it is 0.999 at nprobe 4, 388 searches a second on one
    /// core (48: 0.998, 32: 0.978; docs/decisions/serving-10m-engine.md).
    pub compact_overfetch: usize,
    /// Of the candidates ranked by their SQ8 copies, the best `exact_refine` × k are scored again from the full
    /// vectors ([`crate::engine::EXACT_REFINE`], 2). 0: the copies' scores are final and a search reads no full
    /// vector — each is a random read of 1.5 KB (384-d) in a file the page cache cannot hold once a node serves
    /// more rows than its memory (10M × 384-d is 15 GB of full vectors), where the copies (a quarter of it) can.
    pub exact_refine: usize,
    /// The k hits of a dense lane carry scores from the full vectors whatever `exact_refine` (which decides only
    /// how many candidates are re-scored to choose them). The router merges every shard's list by score, and SQ8
    /// scores, close enough to rank one shard's candidates, scramble a merge across shards where the neighbours
    /// lie close together: at 1M through the router (6 shards, every replica tuned to nprobe 1 with the copies'
    /// scores final) the shards' lists held 0.987 of the true top 10 and the merge by their scores kept 0.936
    /// (docs/decisions/live-recall-estimate.md "The merge"). Costs k full-vector reads a search. Default true.
    pub exact_scores: bool,
    /// A search asks the page cache for the stored rows (and full vectors) it is about to read, all at once,
    /// before reading them one by one ([`crate::mapped_file::MappedFile::will_need`]): where the cache does not
    /// hold them (10M rows a node) the disk reads them side by side. Default true; false only to measure it.
    pub prefetch_rows: bool,
    /// A replica whose last write is this old (ms) seals its growing segment when it holds at least
    /// `seal_idle_rows` rows, rather than scanning them flat in every search until more writes fill it
    /// ([`crate::idle_seal`]); 0: only `seal_threshold` seals. Default 30,000.
    pub seal_idle_ms: u64,
    /// See `seal_idle_ms`. Default 10,000, a fifth of `seal_threshold`: a flat scan of fewer costs a search under
    /// 0.5 ms at 384-d, and collections that small (the bundled sample, the QA evaluation sets) keep the exact
    /// scan they are measured with.
    pub seal_idle_rows: usize,
    /// `seal_idle_rows` for a replica whose shard quantizer is trained (it has held `nlist` × 39 rows): its
    /// backlog is encoded with that quantizer, and at 384-d a flat scan of 3,000–8,000 rows beside the sealed
    /// ones was 6% of a 10M cluster's search CPU (docs/decisions/cluster-10m-nprobe16.md). Default 1,000: a
    /// flat scan of fewer costs about what a segment's fixed search cost does.
    pub seal_idle_rows_quantized: usize,
    /// Seals that may run at once in this process, over all its replicas, and as many merges beside them
    /// (node-wide, each kind its own queue: see [`crate::maintenance`]). Default 1.
    pub max_concurrent_maintenance: usize,
    /// Whether the ingest log keeps the vectors of rows that sealed segments hold: `auto` (the default) drops them
    /// in replicas of collections with replication ≥ 2 and keeps them at replication 1; `true` / `false` decide for
    /// every new replica. Dropped saves ~4 bytes per dimension per row (1.5 KB of a 384-d row) but a damaged
    /// segment can then not be rebuilt from the log: its live documents are forgotten and copied back from a
    /// replica by catch-up ([`crate::sealed_vectors`]).
    pub keep_sealed_vectors_in_log: LogVectors,
    /// Rows a replica holds in memory unsealed (growing + being sealed) before writes wait for a seal
    /// ([`crate::engine`]'s backlog; at least twice `seal_threshold`). 200,000: four seals' worth, ~0.5 GB of 384-d
    /// rows per replica.
    pub max_unsealed_rows: usize,
    /// How long a write waits for the backlog to fall under `max_unsealed_rows` before it is refused as busy
    /// (`RESOURCE_EXHAUSTED`); under the router's replica write deadline (10 s), so the refusal, not a timeout,
    /// reaches it.
    pub unsealed_wait_ms: u64,
    /// The live recall estimate: a sample of searches run again exactly ([`crate::recall_probe`]).
    pub recall_probe: crate::recall_probe::RecallProbeConfig,
    /// The collection's `index.recall_target`: the replica serves searches that name no `nprobe` with the
    /// fastest setting that reached this recall@k on a sample of its data ([`crate::search_tuning`]). 0 (the
    /// engine's default, and collections created before targets): `ivfpq.nprobe` and `exact_refine` as set.
    pub recall_target: f64,
    /// How a replica measures its settings for the recall target.
    pub search_tuning: crate::search_tuning::SearchTuningConfig,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            dimension: 384,
            ivfpq: IvfPqParams::default(),
            seal_threshold: 50_000,
            train_sample: 100_000,
            max_sealed_segments: 16,
            // quickwit's and Lucene's 10, a little lower: at 10M rows in 50,000-row seals each row is rewritten
            // about twice (3 times at 4) and the shard ends with 4 segments (issue 18's sustained-ingest run).
            merge_factor: 8,
            quantizer_drift_bound: 1.5,
            overfetch: 16,
            compact_overfetch: 64,
            exact_refine: crate::engine::EXACT_REFINE,
            exact_scores: true,
            prefetch_rows: true,
            seal_idle_ms: 30_000,
            seal_idle_rows: 10_000,
            seal_idle_rows_quantized: 1_000,
            max_concurrent_maintenance: crate::maintenance::DEFAULT_MAX_CONCURRENT,
            keep_sealed_vectors_in_log: LogVectors::Auto,
            max_unsealed_rows: 200_000,
            unsealed_wait_ms: 5_000,
            recall_probe: Default::default(),
            recall_target: 0.0,
            search_tuning: Default::default(),
        }
    }
}

/// Metadata, query and batch limits enforced by the engine (SPEC "Limits on every input").
pub const MAX_TOP_K: usize = attest_core::limits::MAX_TOP_K;

impl EngineConfig {
    /// Rows the shard's quantizer trains on: `train_sample`, or more when `ivfpq.nlist` lists need more to get
    /// FAISS's minimum each (a shard configured for 4,096 lists trains on 159,744, not 100,000 — which would
    /// have trained 2,564 lists).
    pub fn training_rows(&self) -> usize {
        self.train_sample
            .max(self.ivfpq.nlist as usize * crate::ivfpq::MIN_POINTS_PER_LIST)
    }

    /// Values that cannot be right, named as `engine.KEY` (checked at start-up and by `attest config check`).
    pub fn problems(&self) -> attest_core::ConfigProblems {
        let mut p = attest_core::ConfigProblems::new("engine");
        if let Err(e) = self.ivfpq.validate() {
            p.add("ivfpq", e);
        }
        p.at_most(
            "ivfpq.nprobe",
            self.ivfpq.nprobe,
            self.ivfpq.nlist,
            "engine.ivfpq.nlist",
        );
        p.at_most(
            "ivfpq.nlist",
            self.ivfpq.nlist,
            attest_core::limits::MAX_NLIST,
            "the IVF limit",
        );
        p.positive("dimension", self.dimension);
        p.positive("seal_threshold", self.seal_threshold);
        p.positive("train_sample", self.train_sample);
        p.positive("max_sealed_segments", self.max_sealed_segments);
        if self.merge_factor < 2 {
            p.add(
                "merge_factor",
                format!("must be at least 2, got {}", self.merge_factor),
            );
        }
        if !(self.quantizer_drift_bound.is_finite() && self.quantizer_drift_bound > 1.0) {
            p.add(
                "quantizer_drift_bound",
                format!(
                    "must be a number above 1, got {}",
                    self.quantizer_drift_bound
                ),
            );
        }
        p.positive(
            "max_concurrent_maintenance",
            self.max_concurrent_maintenance,
        );
        p.positive("seal_idle_rows_quantized", self.seal_idle_rows_quantized);
        p.positive("overfetch", self.overfetch);
        p.positive("compact_overfetch", self.compact_overfetch);
        self.recall_probe.check(&mut p);
        if let Some(problem) = attest_core::limits::recall_target_problem(self.recall_target) {
            if self.recall_target != 0.0 {
                p.add("recall_target", problem);
            }
        }
        self.search_tuning.check(&mut p);
        p
    }
}
