//! The recall a shard delivers, measured on its own traffic (issue 73). Every vector database leaves nprobe to the
//! operator and none says what recall the cluster gives now. Here a sample of real dense searches
//! (`engine.recall_probe.sample_rate`, drawn at random) is run again exactly — every live row of the tenant scored from
//! its full vector ([`ShardEngine::exact_dense_batch`]) — and which of its exact top k the search returned joins a
//! rolling window. The estimate is the mean and 95% interval of what each sample delivers to the collection's
//! searches ([`crate::delivered_recall`]: the router merges the k best of every shard's k, so a replica's late ranks
//! count for little), read with the collection's shard count as the node last learned it
//! ([`RecallEstimate`], `attest_search_recall_estimate`, the Stats RPC).
//!
//! Never on the request path, and bounded: a search only offers its sample to a queue of [`QUEUE`] places (a full
//! queue drops it); one thread per process runs the exact searches, and after each pass it rests so that its busy
//! time stays under `engine.recall_probe.cpu_share` of one core. A pass measures a replica's samples together in
//! one scan: at 10M rows a scan reads ~1.8 GB a replica, and one sample a scan gave 9 samples in a minute of
//! serving, too few to hold the estimate to ±0.02. A pass's cost is its scan, nearly whatever it measures, so the
//! thread gathers samples for `engine.recall_probe.gather_ms` after the first (or until the queue is full) before
//! it scans: a pass started on the first sample alone, and straight after a 10M load the estimate held 3 samples
//! after four minutes of serving (a pass from disk, then up to ten minutes' rest).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{OnceLock, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::engine::{ExactQuery, Hit, ShardEngine};
use crate::filter::Filter;

/// Samples waiting for the probe thread, over every engine of the process (more are dropped): the most one pass
/// measures. A sample is a query vector and k ids, so the queue stays small.
const QUEUE: usize = 128;

/// Recent unfiltered searches a replica keeps for its tuning sample ([`crate::search_tuning`]).
const RECENT: usize = 100;

/// `engine.recall_probe`: how much of the traffic is measured again exactly, at what CPU cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RecallProbeConfig {
    /// Share of dense searches run again exactly (each drawn at random); 0 turns the estimate off. Default 0.01.
    pub sample_rate: f64,
    /// Share of one core the process's probe thread may keep busy (it rests between exact searches to stay
    /// under it; samples arriving meanwhile are dropped). Default 0.05.
    pub cpu_share: f64,
    /// Samples the estimate is the mean of (the most recent). Default 200: a 95% interval of about ±0.01 where
    /// recall varies by ±0.07 from query to query.
    pub window: usize,
    /// How long the probe thread waits, after the first sample of a pass, for more before it scans (it scans at
    /// once when its queue is full). A scan costs about the same for one sample as for a hundred. Default 60 000:
    /// a minute's delay to the first estimate, where a pass at 10M costs tens of seconds and then ten minutes'
    /// rest. 0: scan at once with what is waiting.
    pub gather_ms: u64,
}

impl Default for RecallProbeConfig {
    fn default() -> Self {
        RecallProbeConfig {
            sample_rate: 0.01,
            cpu_share: 0.05,
            window: 200,
            gather_ms: 60_000,
        }
    }
}

impl RecallProbeConfig {
    pub(crate) fn check(&self, p: &mut attest_core::ConfigProblems) {
        p.unit_interval("recall_probe.sample_rate", self.sample_rate);
        if !(self.cpu_share > 0.0 && self.cpu_share <= 1.0) {
            p.add(
                "recall_probe.cpu_share",
                format!("must be above 0 and at most 1, got {}", self.cpu_share),
            );
        }
        p.positive("recall_probe.window", self.window);
    }
}

/// A replica's rolling recall@k estimate: the share of its collection's true top k that searches deliver.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RecallEstimate {
    /// Mean recall@k the samples in the window delivered (counted over `shards` shards).
    pub recall: f64,
    /// 95% interval of the mean (normal approximation; the whole 0..1 with fewer than two samples).
    pub low: f64,
    pub high: f64,
    /// Samples in the window.
    pub samples: u64,
    /// Samples measured since the replica opened, and samples dropped because the probe was busy.
    pub measured: u64,
    pub dropped: u64,
    /// Exact scans of the replica that measured them (a scan measures every sample of the replica it gathered).
    pub scans: u64,
    /// The collection's shards the router merges over, as the estimate counts them (1 where not known: the
    /// replica's own recall@k).
    pub shards: u32,
}

/// What one sample found: whether the search served each of the replica's exact top ranks, at its depth k.
#[derive(Debug, Clone, PartialEq)]
struct Outcome {
    hits: Vec<bool>,
    k: usize,
}

/// One search to run again exactly.
struct Sample {
    engine: Weak<ShardEngine>,
    tenant: String,
    query: Vec<f32>,
    filter: Filter,
    served: Vec<String>,
    k: usize,
    cpu_share: f64,
    gather: Duration,
    /// Served with the replica's own (tuned) setting: the search named no nprobe.
    own_setting: bool,
}

/// A replica's part: which searches it samples and the window of their recalls.
pub(crate) struct RecallProbe {
    config: RecallProbeConfig,
    /// Set once the engine is in its `Arc` (a sample names the engine to search again).
    engine: OnceLock<Weak<ShardEngine>>,
    window: Mutex<VecDeque<Outcome>>,
    /// The same for the samples served with the replica's own setting alone: what its recall target is held to.
    own_window: Mutex<VecDeque<Outcome>>,
    /// The collection's shard count, as the node last read it from the shard map (0: not known yet).
    shards: AtomicU32,
    /// The latest sampled searches without a filter (tenant, query vector), newest last.
    recent: Mutex<VecDeque<(String, Vec<f32>)>>,
    measured: AtomicU64,
    dropped: AtomicU64,
    /// Exact scans of this replica the probe ran: what the estimate cost.
    scans: AtomicU64,
}

impl RecallProbe {
    pub(crate) fn new(config: RecallProbeConfig) -> Self {
        RecallProbe {
            config,
            engine: OnceLock::new(),
            window: Mutex::new(VecDeque::new()),
            own_window: Mutex::new(VecDeque::new()),
            shards: AtomicU32::new(0),
            recent: Mutex::new(VecDeque::new()),
            measured: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            scans: AtomicU64::new(0),
        }
    }

    pub(crate) fn attach(&self, engine: Weak<ShardEngine>) {
        let _ = self.engine.set(engine);
    }

    /// Called by every dense search with what it served; a sample of them is queued for the probe thread.
    pub(crate) fn offer(
        &self,
        tenant: &str,
        query: &[f32],
        filter: &Filter,
        k: usize,
        served: &[Hit],
        own_setting: bool,
    ) {
        // Drawn at random, not every N-th: traffic that repeats in cycles (a benchmark's query list, a client's
        // polling) would otherwise be sampled at the same few queries.
        let rate = self.config.sample_rate;
        if rate <= 0.0 || (rate < 1.0 && rand::random::<f64>() >= rate) {
            return;
        }
        let Some(engine) = self.engine.get() else {
            return;
        };
        if filter.conditions.is_empty() {
            let mut recent = self.recent.lock();
            recent.push_back((tenant.to_string(), query.to_vec()));
            if recent.len() > RECENT {
                recent.pop_front();
            }
        }
        let sample = Sample {
            engine: engine.clone(),
            tenant: tenant.to_string(),
            query: query.to_vec(),
            filter: filter.clone(),
            served: served.iter().map(|h| h.chunk_id.clone()).collect(),
            k,
            cpu_share: self.config.cpu_share,
            gather: Duration::from_millis(self.config.gather_ms),
            own_setting,
        };
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = queue().try_send(sample)
        {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn record(&self, outcome: Outcome, own_setting: bool) {
        if own_setting {
            push_within(
                &mut self.own_window.lock(),
                outcome.clone(),
                self.config.window,
            );
        }
        let mut window = self.window.lock();
        push_within(&mut window, outcome, self.config.window);
        // Counted under the window's lock: whoever sees the count sees the sample in the window.
        self.measured.fetch_add(1, Ordering::Relaxed);
    }

    /// Records the collection's shard count (from the shard map); returns whether it changed. The samples keep
    /// their ranks, so the estimate reads them with the new count at once.
    pub(crate) fn set_collection_shards(&self, shards: u32) -> bool {
        self.shards.swap(shards, Ordering::Relaxed) != shards
    }

    /// The collection's shard count as last recorded. Not known yet (a replica restarted, before its first pass
    /// over the shard map) counts as one shard: plain recall@k, the lower of the two figures.
    pub(crate) fn collection_shards(&self) -> u32 {
        self.shards.load(Ordering::Relaxed).max(1)
    }

    /// The estimate over the samples served with the replica's own setting (None before the first).
    pub(crate) fn own_estimate(&self) -> Option<RecallEstimate> {
        self.estimate_over(&self.own_window.lock())
    }

    /// Mean and interval of what the samples delivered, over the collection's shards.
    fn estimate_over(&self, window: &VecDeque<Outcome>) -> Option<RecallEstimate> {
        let shards = self.collection_shards();
        // One weight vector per distinct k (a window holds a few), not one per sample and read.
        let mut weights: HashMap<usize, Vec<f64>> = HashMap::new();
        let delivered: Vec<f64> = window
            .iter()
            .filter_map(|o| {
                let w = weights
                    .entry(o.k)
                    .or_insert_with(|| crate::delivered_recall::rank_weights(o.k, shards, o.k));
                crate::delivered_recall::share_kept(&o.hits, w)
            })
            .collect();
        estimate_of(delivered.into_iter()).map(|e| RecallEstimate { shards, ..e })
    }

    /// Forgets the own-setting samples: the setting changed, and the next ones measure the new one.
    pub(crate) fn clear_own(&self) {
        self.own_window.lock().clear();
    }

    /// The latest sampled searches without a filter (tenant, query vector), newest first.
    pub(crate) fn recent_queries(&self) -> Vec<(String, Vec<f32>)> {
        self.recent.lock().iter().rev().cloned().collect()
    }

    /// The estimate over the window (None before the first sample).
    pub(crate) fn estimate(&self) -> Option<RecallEstimate> {
        let window = self.window.lock();
        self.estimate_over(&window).map(|e| RecallEstimate {
            measured: self.measured.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            scans: self.scans.load(Ordering::Relaxed),
            ..e
        })
    }
}

fn push_within<T>(window: &mut VecDeque<T>, item: T, most: usize) {
    window.push_back(item);
    while window.len() > most {
        window.pop_front();
    }
}

/// Mean and 95% interval of per-query recalls.
fn estimate_of(recalls: impl ExactSizeIterator<Item = f64> + Clone) -> Option<RecallEstimate> {
    let n = recalls.len();
    if n == 0 {
        return None;
    }
    let (mean, error) = mean_and_standard_error(recalls);
    let (low, high) = if n < 2 {
        (0.0, 1.0)
    } else {
        let half = 1.96 * error;
        ((mean - half).max(0.0), (mean + half).min(1.0))
    };
    Some(RecallEstimate {
        recall: mean,
        low,
        high,
        samples: n as u64,
        measured: 0,
        dropped: 0,
        scans: 0,
        shards: 1,
    })
}

/// The mean of per-query recalls and its standard error (0 with fewer than two): the live estimate's interval and
/// the margin a tuning holds against the target ([`crate::search_tuning::Measured`]).
pub(crate) fn mean_and_standard_error(
    recalls: impl ExactSizeIterator<Item = f64> + Clone,
) -> (f64, f64) {
    let n = recalls.len().max(1) as f64;
    let mean = recalls.clone().sum::<f64>() / n;
    if n < 2.0 {
        return (mean, 0.0);
    }
    let variance = recalls.map(|r| (r - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, (variance / n).sqrt())
}

/// Longest rest of the probe's and the tuner's threads, whatever the last pass cost: a 10M replica's pass from disk
/// takes tens of seconds, and a shorter cap (the probe's was 60 s) let such passes run well above their share.
pub(crate) const MAX_REST: Duration = Duration::from_secs(600);

/// Sleeps long enough after `busy` of work that a thread doing only this keeps under `cpu_share` of one core:
/// the probe's and the tuner's background threads.
pub(crate) fn rest_after(busy: Duration, cpu_share: f64) {
    std::thread::sleep(rest_for(busy, cpu_share));
}

/// The rest after `busy` that keeps a thread at `cpu_share`, at most [`MAX_REST`].
fn rest_for(busy: Duration, cpu_share: f64) -> Duration {
    Duration::from_secs_f64(busy.as_secs_f64() * (1.0 / cpu_share - 1.0)).min(MAX_REST)
}

/// The process's queue; its thread starts with the first sample offered and lives as long as the process.
fn queue() -> &'static SyncSender<Sample> {
    static QUEUE_SENDER: OnceLock<SyncSender<Sample>> = OnceLock::new();
    QUEUE_SENDER.get_or_init(|| {
        let (tx, rx) = sync_channel(QUEUE);
        std::thread::Builder::new()
            .name("recall-probe".into())
            .spawn(move || probe(rx))
            .expect("spawn the recall-probe thread");
        tx
    })
}

fn probe(samples: Receiver<Sample>) {
    while let Ok(first) = samples.recv() {
        let waiting = gathered(first, &samples);
        let started = Instant::now();
        let cpu_share = waiting.iter().map(|s| s.cpu_share).fold(1.0, f64::min);
        for batch in grouped(waiting, |a, b| a.engine.ptr_eq(&b.engine)) {
            measure(batch);
        }
        rest_after(started.elapsed(), cpu_share);
    }
}

/// The first sample and those that arrive while it gathers (at most [`QUEUE`] in all): one pass's samples. No
/// sample waits longer than its own replica's `gather`: one configured to scan at once ends the gathering.
fn gathered(first: Sample, samples: &Receiver<Sample>) -> Vec<Sample> {
    let mut until = Instant::now() + first.gather;
    let mut waiting = vec![first];
    while waiting.len() < QUEUE {
        let left = until.saturating_duration_since(Instant::now());
        let next = if left.is_zero() {
            samples.try_recv().ok()
        } else {
            samples.recv_timeout(left).ok()
        };
        let Some(sample) = next else {
            break;
        };
        until = until.min(Instant::now() + sample.gather);
        waiting.push(sample);
    }
    waiting
}

/// `items` in groups of those `same` pairs, each group in arrival order, groups in order of their first item.
fn grouped<T>(items: Vec<T>, same: impl Fn(&T, &T) -> bool) -> Vec<Vec<T>> {
    let mut groups: Vec<Vec<T>> = Vec::new();
    for item in items {
        match groups.iter_mut().find(|g| same(&g[0], &item)) {
            Some(group) => group.push(item),
            None => groups.push(vec![item]),
        }
    }
    groups
}

/// Runs one replica's samples again exactly, in one scan, and records each one's recall.
fn measure(batch: Vec<Sample>) {
    let Some(engine) = batch[0].engine.upgrade() else {
        return;
    };
    let queries: Vec<ExactQuery<'_>> = batch
        .iter()
        .map(|s| ExactQuery {
            tenant: &s.tenant,
            vector: &s.query,
            filter: &s.filter,
        })
        .collect();
    let deepest = batch.iter().map(|s| s.k).max().unwrap_or(0);
    let exact = engine.exact_dense_batch(&queries, deepest);
    engine.recall_probe().scans.fetch_add(1, Ordering::Relaxed);
    for (sample, mut exact) in batch.iter().zip(exact) {
        exact.truncate(sample.k);
        // A tenant with no passing row has no recall to measure.
        if exact.is_empty() {
            continue;
        }
        let outcome = Outcome {
            hits: crate::delivered_recall::hits(&sample.served, &exact),
            k: sample.k,
        };
        engine.recall_probe().record(outcome, sample.own_setting);
        if sample.own_setting {
            engine.own_recall_sampled();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_is_the_window_mean_with_its_interval() {
        assert_eq!(
            estimate_of(std::iter::empty::<f64>().collect::<Vec<_>>().into_iter()),
            None
        );
        let one = estimate_of(vec![0.9].into_iter()).unwrap();
        assert_eq!(
            (one.recall, one.low, one.high, one.samples),
            (0.9, 0.0, 1.0, 1)
        );
        let many: Vec<f64> = (0..100)
            .map(|i| if i % 10 == 0 { 0.8 } else { 1.0 })
            .collect();
        let e = estimate_of(many.into_iter()).unwrap();
        assert!((e.recall - 0.98).abs() < 1e-9);
        assert!(
            // sd 0.06 over 100 samples: ±1.96 × 0.006.
            (e.low - 0.9682).abs() < 1e-3 && (e.high - 0.9918).abs() < 1e-3,
            "{e:?}"
        );
    }

    #[test]
    fn the_estimate_counts_the_collections_shards_once_they_are_known() {
        let probe = RecallProbe::new(RecallProbeConfig::default());
        let ids = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // Served its first three ranks of four, twice: 0.75 of its own top 4.
        for _ in 0..2 {
            let hits =
                crate::delivered_recall::hits(&ids(&["a", "b", "c"]), &ids(&["a", "b", "c", "d"]));
            probe.record(Outcome { hits, k: 4 }, true);
        }
        let own = probe.estimate().unwrap();
        assert_eq!((own.recall, own.shards, own.samples), (0.75, 1, 2));
        // Over four shards the last rank is rarely the collection's: most of what it delivers is kept.
        assert!(probe.set_collection_shards(4));
        assert!(!probe.set_collection_shards(4));
        let merged = probe.estimate().unwrap();
        assert_eq!(merged.shards, 4);
        assert!(merged.recall > 0.99, "{merged:?}");
        assert_eq!(probe.own_estimate().unwrap().recall, merged.recall);
    }

    #[test]
    fn a_pass_measures_each_replicas_samples_together_in_arrival_order() {
        let samples = vec![(1, 'a'), (2, 'b'), (1, 'c'), (3, 'd'), (2, 'e'), (1, 'f')];
        assert_eq!(
            grouped(samples, |x, y| x.0 == y.0),
            vec![
                vec![(1, 'a'), (1, 'c'), (1, 'f')],
                vec![(2, 'b'), (2, 'e')],
                vec![(3, 'd')],
            ]
        );
        assert!(grouped(Vec::<u8>::new(), |x, y| x == y).is_empty());
    }

    #[test]
    fn a_long_pass_rests_long_enough_to_keep_the_share() {
        let secs = |s: f64| Duration::from_secs_f64(s);
        assert_eq!(rest_for(secs(1.0), 0.05), secs(19.0));
        // A 10M pass of 30 s at the default share: 570 s, where a 60 s cap made it a third of a core.
        assert_eq!(rest_for(secs(30.0), 0.05), secs(570.0));
        assert_eq!(rest_for(secs(300.0), 0.05), MAX_REST);
        assert_eq!(rest_for(secs(5.0), 1.0), Duration::ZERO);
    }

    fn sample(gather_ms: u64) -> Sample {
        Sample {
            engine: Weak::new(),
            tenant: "t".into(),
            query: vec![0.0],
            filter: Filter::default(),
            served: Vec::new(),
            k: 1,
            cpu_share: 1.0,
            gather: Duration::from_millis(gather_ms),
            own_setting: false,
        }
    }

    #[test]
    fn a_pass_gathers_until_its_queue_is_full_or_a_sample_will_not_wait() {
        let long = 600_000;
        let (tx, rx) = sync_channel(QUEUE * 2);
        // A full queue ends the gathering at once; what is beyond it waits for the next pass.
        for _ in 0..QUEUE + 5 {
            tx.send(sample(long)).unwrap();
        }
        let started = Instant::now();
        assert_eq!(gathered(sample(long), &rx).len(), QUEUE);
        assert_eq!(rx.try_iter().count(), 6);
        // A sample of a replica that scans at once ends it too, with what is already waiting.
        tx.send(sample(long)).unwrap();
        tx.send(sample(0)).unwrap();
        tx.send(sample(long)).unwrap();
        assert_eq!(gathered(sample(long), &rx).len(), 4);
        // Gather 0 takes what waits, nothing more.
        assert_eq!(gathered(sample(0), &rx).len(), 1);
        assert!(started.elapsed() < Duration::from_secs(60));
    }

    #[test]
    fn impossible_settings_are_refused() {
        let mut p = attest_core::ConfigProblems::new("engine");
        RecallProbeConfig {
            sample_rate: 2.0,
            cpu_share: 0.0,
            window: 0,
            gather_ms: 0,
        }
        .check(&mut p);
        assert_eq!(p.into_vec().len(), 3);
    }
}
