//! Which sealed segments the background merges, and how a merged segment's dense index is made.
//!
//! The policy is tiered (quickwit's `StableLogMergePolicy`, simplified): a segment's level is
//! `floor(log_f(rows / base))` with `f = merge_factor` and `base = seal_threshold` (a freshly sealed segment is
//! level 0), and the `f` smallest segments of the lowest level holding `f` of them merge into one of the next
//! level. Every row is rewritten at most once per level — `log_f(rows / seal_threshold)` times in all — instead
//! of once per compaction of the whole shard, as merging everything did. `max_sealed_segments` stays a hard cap:
//! past it the smallest segments merge whatever their level.
//!
//! With the shard's quantizer ([`crate::quantizer`]) a merge moves the inputs' inverted lists into one index and
//! removes the labels of dead rows; an input encoded with an older version (or trained on its own rows) is
//! re-encoded with the current one, without training.

use std::path::Path;
use std::sync::Arc;

use crate::error::Result;
use crate::quantizer::ShardQuantizer;
use crate::segment::SealedSegment;

/// Indices into `rows` (the sealed segments' row counts) of the segments to merge now, or `None`.
pub fn plan(
    rows: &[usize],
    merge_factor: usize,
    base: usize,
    max_segments: usize,
) -> Option<Vec<usize>> {
    let f = merge_factor.max(2);
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by_key(|&i| (rows[i], i));
    let level = |r: usize| {
        let (mut level, mut bound) = (0u32, base.max(1).saturating_mul(f));
        while r >= bound {
            level += 1;
            bound = bound.saturating_mul(f);
        }
        level
    };
    let mut i = 0;
    while i < order.len() {
        let l = level(rows[order[i]]);
        let same: Vec<usize> = order[i..]
            .iter()
            .copied()
            .take_while(|&j| level(rows[j]) == l)
            .collect();
        if same.len() >= f {
            return Some(same.into_iter().take(f).collect());
        }
        i += same.len();
    }
    (rows.len() > max_segments).then(|| {
        let take = (rows.len() - max_segments + 1).max(f.min(rows.len()));
        order.into_iter().take(take).collect()
    })
}

/// One input of a merge: the segment, and which of its rows are still live.
pub struct MergeInput {
    pub segment: Arc<SealedSegment>,
    pub live: Vec<bool>,
}

/// A merge's dense index, with what its labels stand for.
pub struct MergedDense {
    pub index: crate::ivfpq::IvfPqBuilder,
    /// For each label, the position of its row among the merge's live rows (input order), or -1 for a dead one.
    pub live_of_label: Vec<i64>,
}

/// The merged dense index over the live rows of `inputs` (their vectors row-major in `vectors`, in input order).
/// Row `r` of input `i` is labelled `r` plus the rows of the inputs before it. The inverted lists of inputs
/// encoded with `quantizer`'s version (whose index returns row numbers) are moved over, each label offset so;
/// the others are re-encoded under those labels; dead labels are removed. The caller maps the labels to the merged
/// segment's rows as it writes the index ([`crate::ivfpq::IvfPqBuilder::write_relabelled`]).
pub fn merged_dense(
    root: &Path,
    quantizer: &ShardQuantizer,
    inputs: &[MergeInput],
    vectors: &[f32],
) -> Result<MergedDense> {
    let mut index = quantizer.encoder()?;
    let dim = index.dim();
    let mut dead = Vec::new();
    let mut live_of_label = Vec::with_capacity(inputs.iter().map(|i| i.live.len()).sum());
    let mut at = 0usize;
    for input in inputs {
        let seg = &input.segment;
        let first = live_of_label.len() as i64;
        // The labels of this input's rows that are (or are not) live.
        let labels_where = |live: bool| {
            (first..)
                .zip(&input.live)
                .filter(move |(_, l)| **l == live)
                .map(|(label, _)| label)
        };
        let live = input.live.iter().filter(|l| **l).count();
        let mut next_live = at as i64;
        for &is_live in &input.live {
            live_of_label.push(if is_live { next_live } else { -1 });
            next_live += i64::from(is_live);
        }
        let movable = seg.meta.quantizer == Some(quantizer.meta.version) && seg.meta.row_labels;
        if movable && seg.dense.is_some() {
            index.merge_file(&seg.dense_path(root), first)?;
            dead.extend(labels_where(false));
        } else if live > 0 {
            let live_labels: Vec<i64> = labels_where(true).collect();
            index.add(&vectors[at * dim..(at + live) * dim], &live_labels)?;
        }
        at += live;
    }
    index.remove_ids(&dead)?;
    Ok(MergedDense {
        index,
        live_of_label,
    })
}

/// Puts a merge's rows (with their vectors, `dim` floats each) in ascending id order and returns where each row
/// went (`moved_to[old] = new`). Rows are moved, not cloned, and rows already in order — inputs taken in log
/// order whose ranges do not interleave — are left as they are.
pub fn into_id_order<T>(
    ids: &mut Vec<i64>,
    rows: &mut Vec<T>,
    vectors: &mut Vec<f32>,
    dim: usize,
) -> Vec<usize> {
    if ids.windows(2).all(|w| w[0] < w[1]) {
        return (0..ids.len()).collect();
    }
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_unstable_by_key(|&i| ids[i]);
    let mut taken: Vec<Option<T>> = std::mem::take(rows).into_iter().map(Some).collect();
    *rows = order
        .iter()
        .map(|&i| taken[i].take().expect("each row once"))
        .collect();
    *vectors = order
        .iter()
        .flat_map(|&i| vectors[i * dim..(i + 1) * dim].iter().copied())
        .collect();
    *ids = order.iter().map(|&i| ids[i]).collect();
    let mut moved_to = vec![0; order.len()];
    for (new, &old) in order.iter().enumerate() {
        moved_to[old] = new;
    }
    moved_to
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_smallest_full_level_merges() {
        // base 100, factor 4: level 0 below 400, level 1 below 1,600.
        assert_eq!(plan(&[100, 90, 100], 4, 100, 16), None);
        assert_eq!(
            plan(&[100, 90, 100, 80], 4, 100, 16),
            Some(vec![3, 1, 0, 2])
        );
        // A full level 1 and a full level 0: level 0 first.
        let rows = [400, 500, 450, 600, 10, 20, 30, 40];
        assert_eq!(plan(&rows, 4, 100, 16), Some(vec![4, 5, 6, 7]));
        assert_eq!(plan(&rows[..4], 4, 100, 16), Some(vec![0, 2, 1, 3]));
    }

    #[test]
    fn past_the_cap_the_smallest_merge() {
        let rows = [100, 500, 2_000, 9_000];
        assert_eq!(plan(&rows, 4, 100, 3), Some(vec![0, 1, 2, 3]));
        assert_eq!(plan(&rows, 4, 100, 4), None);
        assert_eq!(plan(&[5, 7], 4, 100, 1), Some(vec![0, 1]));
    }

    #[test]
    fn rows_come_out_in_id_order_with_their_vectors() {
        let mut ids = vec![30, 10, 20];
        let mut rows = vec!["c", "a", "b"];
        let mut vectors = vec![3.0, 3.5, 1.0, 1.5, 2.0, 2.5];
        let moved_to = into_id_order(&mut ids, &mut rows, &mut vectors, 2);
        assert_eq!(moved_to, [2, 0, 1]);
        assert_eq!(ids, [10, 20, 30]);
        assert_eq!(rows, ["a", "b", "c"]);
        assert_eq!(vectors, [1.0, 1.5, 2.0, 2.5, 3.0, 3.5]);
        // Already in order: unchanged.
        assert_eq!(
            into_id_order(&mut ids, &mut rows, &mut vectors, 2),
            [0, 1, 2]
        );
        assert_eq!(rows, ["a", "b", "c"]);
    }

    proptest! {
        /// Sealing segments of `base` rows and merging as planned: the segment count stays within the cap and
        /// every row is rewritten at most once per level (plus the cap's merges, which the default never needs).
        #[test]
        fn write_amplification_is_logarithmic(seals in 1usize..400, f in 2usize..8) {
            let base = 1000;
            let mut segments: Vec<usize> = Vec::new();
            let mut written = 0usize;
            for _ in 0..seals {
                segments.push(base);
                written += base;
                while let Some(pick) = plan(&segments, f, base, 64) {
                    let merged: usize = pick.iter().map(|&i| segments[i]).sum();
                    written += merged;
                    let mut keep: Vec<usize> = segments
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| !pick.contains(i))
                        .map(|(_, r)| *r)
                        .collect();
                    keep.push(merged);
                    segments = keep;
                }
                prop_assert!(segments.len() <= 64);
            }
            let total = seals * base;
            let levels = ((total as f64 / base as f64).ln() / (f as f64).ln()).ceil() as usize + 1;
            prop_assert!(written <= total * (levels + 1), "{written} bytes written for {total} ({levels} levels)");
            prop_assert_eq!(segments.iter().sum::<usize>(), total);
        }
    }
}
