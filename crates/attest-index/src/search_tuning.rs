//! The recall a collection asks for, at the lowest search cost (issue 73). A collection states
//! `index.recall_target`; each replica measures, on a sample of its own data, the recall@k its dense lane delivers
//! at each `nprobe` and re-score depth, and serves with the fastest setting that reaches the target
//! ([`choose`]). It measures again after every seal, merge and quantizer training, once the replica's writes have
//! stopped for [`QUIET`], on one thread per process that rests between tunings so that it keeps under
//! `engine.search_tuning.cpu_share` of one core. A search that names its own `nprobe` is served with it. When no
//! setting reaches the target, the quantizer no longer fits the rows (they drifted from what it was trained on):
//! the replica trains it again and re-encodes its segments in the background, then tunes again
//! (`ShardEngine::retrain_for_recall`). When the live estimate of the searches served
//! with the tuned setting falls wholly below the target, the real queries are not what the tuning measured, and the
//! replica tunes again with them in its sample (`ShardEngine::own_recall_sampled`).
//!
//! The sample: rows of the replica drawn at random (each held out of its own results: its nearest neighbour is
//! itself) and the latest real searches the recall probe drew ([`crate::recall_probe`]). What they should find
//! is one exact scan of the replica for all of them ([`crate::engine::ShardEngine::exact_dense_batch`]).

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{OnceLock, Weak};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use crate::engine::ShardEngine;

/// Replicas waiting to be tuned, over every engine of the process (each waits once however often it is due).
const QUEUE: usize = 1024;

/// A replica written to this recently is not tuned until its writes stop: what a tuning measures while rows
/// arrive is discarded. Two seconds: longer than the gap between a bulk load's batches to one replica.
pub(crate) const QUIET: Duration = Duration::from_secs(2);

/// `engine.search_tuning`: how a replica measures the recall of its search settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SearchTuningConfig {
    /// Queries a tuning measures each setting with (rows of the replica, and recent searches). Default 500:
    /// recall@10 varies by about ±0.1 from query to query, so the mean is known to about ±0.005 (with 200, a
    /// tuning for 0.95 chose a setting that delivered 0.948 on other queries: docs/decisions/recall-target.md).
    pub queries: usize,
    /// The k of the recall@k a tuning measures. Default 10.
    pub k: usize,
    /// Share of one core the process's tuning thread may keep busy (it rests after each tuning). Default 0.2.
    pub cpu_share: f64,
}

impl Default for SearchTuningConfig {
    fn default() -> Self {
        SearchTuningConfig {
            queries: 500,
            k: 10,
            cpu_share: 0.2,
        }
    }
}

impl SearchTuningConfig {
    pub(crate) fn check(&self, p: &mut attest_core::ConfigProblems) {
        p.positive("search_tuning.queries", self.queries);
        p.positive("search_tuning.k", self.k);
        if !(self.cpu_share > 0.0 && self.cpu_share <= 1.0) {
            p.add(
                "search_tuning.cpu_share",
                format!("must be above 0 and at most 1, got {}", self.cpu_share),
            );
        }
    }
}

/// A dense search setting: lists probed, and how many of each k re-scored from the full vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchSetting {
    pub nprobe: u32,
    pub exact_refine: usize,
}

/// What a replica's last tuning chose, and what it measured. Kept in the replica's directory
/// ([`TUNED_FILE`]), so that a restarted replica serves with it until its next tuning: at 10M rows a tuning
/// thread takes tens of minutes to reach every replica of a process, and the configured setting meanwhile is the
/// slow one the target exists to avoid.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TunedSearch {
    pub setting: SearchSetting,
    /// Mean recall@k the chosen setting delivered on the sample, to a collection of `shards` shards
    /// ([`crate::delivered_recall`]).
    pub recall: f64,
    /// The collection's shard count it was measured for (1 in a tuning kept before shard counts were: a
    /// replica's own recall@k).
    #[serde(default = "one_shard")]
    pub shards: u32,
    /// Mean wall time of one of the sample's searches at the chosen setting, in microseconds (0 in a tuning kept
    /// by a version that did not time them).
    #[serde(default)]
    pub micros_per_query: f64,
    /// The target it was chosen for.
    pub target: f64,
    /// Whether some setting reached the target (when none did, the best one measured is served).
    pub reached: bool,
    /// Queries measured (those with at least one row to find).
    pub queries: usize,
    /// Sealed rows of the replica when it was measured.
    pub sealed_rows: u64,
    /// Unix ms of the tuning, and how long it took (the exact scan and every setting measured).
    pub tuned_at_ms: u64,
    pub took_ms: u64,
}

fn one_shard() -> u32 {
    1
}

/// `x` to 12 significant digits, so that [`TUNED_FILE`] reads back the very number served before a restart.
/// serde_json parses a decimal of more than 15 digits (a mean such as 0.9600000000000002) to the nearest double
/// only with its `float_roundtrip` feature, which would slow every float the API parses; 12 digits it parses
/// exactly.
pub fn as_kept(x: f64) -> f64 {
    format!("{x:.11e}").parse().unwrap_or(x)
}

/// The file of a replica's directory that holds its last tuning ([`KeptTuning`], JSON).
pub const TUNED_FILE: &str = "search_tuning.json";

/// A replica's last tuning as kept on disk, with the segment manifest's `next_segment` when it was measured:
/// every seal, merge and re-encoding issues a new segment id, so an equal one at open means the same segments
/// (nothing to tune again).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct KeptTuning {
    pub tuned: TunedSearch,
    pub segments_issued: u64,
    /// The [`CHOOSER`] that made it (0: one before choosers were numbered).
    #[serde(default)]
    pub chooser: u32,
}

impl KeptTuning {
    /// The tuning kept in `dir`, if one was and this version's [`CHOOSER`] made it (a damaged or unreadable file is
    /// no tuning: the replica tunes again).
    pub fn load(dir: &std::path::Path) -> Option<KeptTuning> {
        let bytes = std::fs::read(dir.join(TUNED_FILE)).ok()?;
        serde_json::from_slice(&bytes)
            .inspect_err(
                |e| warn!(error = %e, event = "search_tuning_unreadable", "tuning file ignored"),
            )
            .ok()
            .filter(|k: &KeptTuning| k.chooser == CHOOSER)
    }

    /// Keeps this tuning in `dir`, atomically.
    pub fn store(&self, dir: &std::path::Path) -> crate::error::Result<()> {
        let bytes = serde_json::to_vec_pretty(self).expect("a tuning serialises");
        crate::fsutil::write_atomically(&dir.join(TUNED_FILE), &bytes)
    }
}

/// Recall measured at one setting: the sample's mean, and that mean less one standard error — what is held
/// against the target, so that a setting whose sample reached it by luck (about one tuning in six) is not chosen —
/// and what a search cost at it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    pub setting: SearchSetting,
    pub recall: f64,
    pub low: f64,
    /// Mean wall time of one of the sample's searches, in microseconds.
    pub micros_per_query: f64,
}

impl Measured {
    /// From per-query recalls (at least one) and the time all those searches took.
    pub fn of(setting: SearchSetting, recalls: &[f64], took: Duration) -> Self {
        let (mean, error) = crate::recall_probe::mean_and_standard_error(recalls.iter().copied());
        Measured {
            setting,
            recall: mean,
            low: mean - error,
            micros_per_query: took.as_secs_f64() * 1e6 / recalls.len().max(1) as f64,
        }
    }

    fn reaches(&self, target: f64) -> bool {
        self.low >= target
    }
}

/// The `nprobe` values a tuning tries, smallest first: powers of two up to `nlist`, and `nlist` itself.
pub fn nprobe_ladder(nlist: u32) -> Vec<u32> {
    let mut ladder: Vec<u32> = std::iter::successors(Some(1u32), |n| n.checked_mul(2))
        .take_while(|&n| n < nlist)
        .collect();
    ladder.push(nlist.max(1));
    ladder
}

/// Which chooser a kept tuning was made by ([`KeptTuning::chooser`]): one made by another is measured again.
/// 3: the faster of the plain and re-scored settings that reach the target, by their measured time, measured
/// with the page cache as serving leaves it (2 timed them with the full vectors the exact scan had just read).
pub const CHOOSER: u32 = 3;

/// The fastest setting that reaches `target` ([`Measured::low`] at least the target), measuring as it goes.
///
/// Up the ladder, each `nprobe` without re-scoring, and with it until a re-scored setting reaches the target.
/// Which of the two is cheaper is a matter of memory, not of recall, so it is measured, not assumed: re-scoring
/// reads a random 4 bytes × dimension per candidate, nothing while the full vectors sit in the page cache, a disk
/// read each once a node holds more of them than its memory. The settings are timed with the cache as serving has
/// it: the exact scan that found the truth hands back the pages it read ([`crate::page_cache`]); timed right after
/// it, re-scoring looks free (docs/decisions/recall-target.md). The ladder stops once a setting without re-scoring
/// reaches the target, or costs as much as the re-scored one that does (more lists only cost more). When no
/// setting reaches the target, the best one measured is returned (`reached` false).
pub fn choose(
    nlist: u32,
    exact_refine: usize,
    target: f64,
    mut measure: impl FnMut(SearchSetting) -> Measured,
) -> (Measured, bool) {
    let mut at = |nprobe, exact_refine| {
        measure(SearchSetting {
            nprobe,
            exact_refine,
        })
    };
    let faster = |a: Measured, b: Measured| {
        if b.micros_per_query < a.micros_per_query {
            b
        } else {
            a
        }
    };
    let mut best: Option<Measured> = None;
    let mut rescored: Option<Measured> = None;
    for nprobe in nprobe_ladder(nlist) {
        let plain = at(nprobe, 0);
        match rescored {
            _ if plain.reaches(target) => {
                return (rescored.map_or(plain, |r| faster(plain, r)), true);
            }
            Some(r) if plain.micros_per_query >= r.micros_per_query => return (r, true),
            Some(_) => continue,
            None => best = Some(better(best, plain)),
        }
        if exact_refine == 0 {
            continue;
        }
        let refined = at(nprobe, exact_refine);
        if refined.reaches(target) {
            rescored = Some(refined);
        } else {
            best = Some(better(best, refined));
        }
    }
    match rescored {
        Some(r) => (r, true),
        None => (best.expect("the ladder has a step"), false),
    }
}

fn better(a: Option<Measured>, b: Measured) -> Measured {
    match a {
        Some(a) if a.recall >= b.recall => a,
        _ => b,
    }
}

/// Asks for `engine` to be tuned on the process's tuning thread (a replica already waiting is not queued twice).
pub(crate) fn schedule(engine: Weak<ShardEngine>) {
    let Some(strong) = engine.upgrade() else {
        return;
    };
    if !strong.mark_tuning_due() {
        return;
    }
    let cpu_share = strong.config().search_tuning.cpu_share;
    drop(strong);
    if queue().try_send((engine, cpu_share)).is_err() {
        warn!(
            event = "search_tuning_dropped",
            "too many replicas wait to be tuned; this one keeps its setting"
        );
    }
}

fn queue() -> &'static SyncSender<(Weak<ShardEngine>, f64)> {
    static SENDER: OnceLock<SyncSender<(Weak<ShardEngine>, f64)>> = OnceLock::new();
    SENDER.get_or_init(|| {
        let (tx, rx) = sync_channel(QUEUE);
        std::thread::Builder::new()
            .name("search-tuner".into())
            .spawn(move || tuner(rx))
            .expect("spawn the search-tuner thread");
        tx
    })
}

fn tuner(due: Receiver<(Weak<ShardEngine>, f64)>) {
    for (engine, cpu_share) in due {
        let Some(engine) = engine.upgrade() else {
            continue;
        };
        if engine.being_written() {
            engine.defer_tuning();
            continue;
        }
        let started = Instant::now();
        match engine.tune_search() {
            Some(t) if !t.reached => {
                warn!(
                    nprobe = t.setting.nprobe,
                    exact_refine = t.setting.exact_refine,
                    recall = t.recall,
                    target = t.target,
                    event = "search_tuning_short",
                    "no search setting reaches the recall target; serving the best one measured"
                );
                engine.retrain_for_recall();
            }
            Some(t) => info!(
                nprobe = t.setting.nprobe,
                exact_refine = t.setting.exact_refine,
                recall = t.recall,
                target = t.target,
                reached = t.reached,
                micros_per_query = t.micros_per_query,
                queries = t.queries,
                took_ms = t.took_ms,
                event = "search_tuned",
                "search setting chosen for the recall target"
            ),
            // Nothing to tune (no target, nothing sealed); the tuning cleared the replica's place in the queue.
            None => {}
        }
        drop(engine);
        // The exact scans' buffers, freed on this thread.
        crate::freed_memory::release();
        crate::recall_probe::rest_after(started.elapsed(), cpu_share);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A search's cost: 10 µs a list probed, and `rescoring_us` for its full-vector reads.
    fn timed(s: SearchSetting, recalls: &[f64], rescoring_us: u64) -> Measured {
        let per_query =
            10 * u64::from(s.nprobe) + if s.exact_refine > 0 { rescoring_us } else { 0 };
        Measured::of(
            s,
            recalls,
            Duration::from_micros(per_query * recalls.len() as u64),
        )
    }

    /// Recall that rises with nprobe, a little higher with re-scoring (every query alike: no spread); re-scoring
    /// costs `rescoring_us` a search. Records each setting measured in `seen`.
    fn curve<'a>(
        plain: &'a [(u32, f64)],
        refined_gain: f64,
        rescoring_us: u64,
        seen: &'a mut Vec<SearchSetting>,
    ) -> impl FnMut(SearchSetting) -> Measured + 'a {
        move |s| {
            seen.push(s);
            let base = plain
                .iter()
                .find(|(n, _)| *n == s.nprobe)
                .map_or(1.0, |(_, r)| *r);
            let recall = match s.exact_refine {
                0 => base,
                _ => (base + refined_gain).min(1.0),
            };
            timed(s, &[recall; 4], rescoring_us)
        }
    }

    fn setting(nprobe: u32, exact_refine: usize) -> SearchSetting {
        SearchSetting {
            nprobe,
            exact_refine,
        }
    }

    #[test]
    fn a_mean_that_reaches_the_target_by_less_than_its_error_does_not() {
        let m = Measured::of(setting(4, 0), &[1.0, 0.9, 1.0, 0.9], Duration::ZERO);
        assert!((m.recall - 0.95).abs() < 1e-9);
        // sd 0.0577 over 4 queries: a standard error of 0.0289.
        assert!((m.low - (0.95 - 0.0289)).abs() < 1e-3, "{m:?}");
        let (chosen, reached) = choose(4, 0, 0.95, |s| match s.nprobe {
            4 => timed(s, &[1.0, 0.9, 1.0, 0.9], 0),
            n => timed(s, &[n as f64 / 8.0; 4], 0),
        });
        assert!(!reached, "{chosen:?}");
    }

    #[test]
    fn the_ladder_doubles_up_to_nlist() {
        assert_eq!(nprobe_ladder(1), vec![1]);
        assert_eq!(nprobe_ladder(8), vec![1, 2, 4, 8]);
        assert_eq!(nprobe_ladder(12), vec![1, 2, 4, 8, 12]);
    }

    #[test]
    fn the_smallest_nprobe_that_reaches_the_target_without_rescoring_wins() {
        let plain = [(1, 0.5), (2, 0.7), (4, 0.9), (8, 0.96), (16, 0.99)];
        let mut seen = Vec::new();
        let (m, reached) = choose(16, 0, 0.95, curve(&plain, 0.0, 0, &mut seen));
        assert!(reached);
        assert_eq!(m.setting, setting(8, 0));
        assert_eq!(m.recall, 0.96);
        assert_eq!(m.micros_per_query, 80.0);
        assert_eq!(
            seen.last(),
            Some(&setting(8, 0)),
            "nothing measured past it"
        );
        let (m, _) = choose(16, 0, 0.6, curve(&plain, 0.0, 0, &mut Vec::new()));
        assert_eq!(m.setting.nprobe, 2);
    }

    #[test]
    fn rescoring_is_chosen_when_it_is_faster_and_not_when_its_reads_cost_more() {
        // Re-scoring reaches 0.95 at nprobe 4, plain search at nprobe 16 (0.93 at 8).
        let plain = [(1, 0.5), (2, 0.7), (4, 0.9), (8, 0.93), (16, 0.99)];
        // Full vectors in memory (5 µs to re-score): 45 µs at nprobe 4 beats 160 µs at 16, and the ladder stops
        // at nprobe 8 (80 µs, already slower): nprobe 16 is never measured.
        let mut seen = Vec::new();
        let (m, reached) = choose(16, 2, 0.95, curve(&plain, 0.06, 5, &mut seen));
        assert!(reached);
        assert_eq!(m.setting, setting(4, 2));
        assert_eq!(seen.last(), Some(&setting(8, 0)), "{seen:?}");
        // Full vectors read from disk (500 µs): the plain nprobe 16 is faster.
        let (m, reached) = choose(16, 2, 0.95, curve(&plain, 0.06, 500, &mut Vec::new()));
        assert!(reached);
        assert_eq!(m.setting, setting(16, 0));
        // Once one re-scored setting reaches the target, no deeper one is measured.
        let mut seen = Vec::new();
        choose(16, 2, 0.95, curve(&plain, 0.06, 500, &mut seen));
        assert_eq!(
            seen.iter().filter(|s| s.exact_refine > 0).count(),
            3,
            "{seen:?}"
        );
    }

    #[test]
    fn an_unreachable_target_serves_the_best_setting_measured() {
        let plain = [(1, 0.5), (2, 0.6), (4, 0.7)];
        let (m, reached) = choose(4, 2, 0.99, curve(&plain, 0.05, 5, &mut Vec::new()));
        assert!(!reached);
        assert_eq!(m.setting, setting(4, 2));
        assert!((m.recall - 0.75).abs() < 1e-9);
    }

    #[test]
    fn a_kept_figure_reads_back_exactly() {
        for x in [
            0.9600000000000002,
            111.59316000000001,
            109.05414999999999,
            1.0 / 3.0,
        ] {
            let kept = as_kept(x);
            assert!((kept - x).abs() <= x * 1e-11, "{x} → {kept}");
            let read: f64 = serde_json::from_str(&serde_json::to_string(&kept).unwrap()).unwrap();
            assert_eq!(read.to_bits(), kept.to_bits(), "{x} → {kept} → {read}");
        }
    }

    #[test]
    fn a_tuning_kept_by_another_chooser_is_measured_again() {
        let dir = tempfile::tempdir().unwrap();
        let tuned = TunedSearch {
            setting: setting(4, 2),
            shards: 6,
            recall: 0.96,
            micros_per_query: 45.0,
            target: 0.95,
            reached: true,
            queries: 500,
            sealed_rows: 1_000,
            tuned_at_ms: 1,
            took_ms: 1,
        };
        let kept = KeptTuning {
            tuned,
            segments_issued: 7,
            chooser: CHOOSER,
        };
        kept.store(dir.path()).unwrap();
        assert_eq!(KeptTuning::load(dir.path()), Some(kept));
        // As the version before choosers were numbered wrote it.
        let mut old = serde_json::to_value(kept).unwrap();
        old.as_object_mut().unwrap().remove("chooser");
        old["tuned"]
            .as_object_mut()
            .unwrap()
            .remove("micros_per_query");
        std::fs::write(dir.path().join(TUNED_FILE), old.to_string()).unwrap();
        assert_eq!(KeptTuning::load(dir.path()), None);
    }

    #[test]
    fn impossible_settings_are_refused() {
        let mut p = attest_core::ConfigProblems::new("engine");
        SearchTuningConfig {
            queries: 0,
            k: 0,
            cpu_share: 1.5,
        }
        .check(&mut p);
        assert_eq!(p.into_vec().len(), 3);
    }
}
