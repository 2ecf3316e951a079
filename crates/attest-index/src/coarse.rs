//! One coarse assignment for several IVF_PQ indexes encoded with the same quantizer (issue 18).
//!
//! Segments encoded with one version of the shard's quantizer ([`crate::quantizer`]) share its coarse
//! centroids and PQ codebooks. A query is then assigned to its `nprobe` nearest lists once
//! ([`IvfPqIndex::coarse_assign`]), each segment scans only those lists (FAISS `IndexIVF::search_preassigned`,
//! [`IvfPqIndex::search_assigned`]), and the PQ scores of different segments are comparable: the engine keeps
//! one candidate list for all of them and re-scores it once, as one segment of their combined size would. Before,
//! each of a 10M shard's eight segments assigned the query, re-scored 64 × k candidates from its SQ8 copy and
//! 2 × k from its full vectors (docs/bench/history.md "10M serving").

use crate::error::{IndexError, Result};
use crate::ivfpq::{best_first, faiss_status, IvfPqIndex};
use crate::simd::{dot, dot_f16, to_f16};

/// Lists beyond `nprobe` whose centroids half precision scores are checked again in f32, so that its rounding
/// does not change which lists are probed.
const SHORTLIST_MARGIN: usize = 8;

/// Keeps the `n` best-scoring lists (in no particular order).
fn keep_best_lists(lists: &mut Vec<(i64, f32)>, n: usize) {
    if n < lists.len() {
        lists.select_nth_unstable_by(n - 1, best_first);
        lists.truncate(n);
    }
}

/// The lists a query probes, best first, with its score against each list's centroid.
#[derive(Debug, Clone)]
pub struct CoarseAssignment {
    /// Lists of the quantizer the assignment was made with: only indexes with as many may use it.
    nlist: u32,
    lists: Vec<i64>,
    scores: Vec<f32>,
}

impl CoarseAssignment {
    pub fn nprobe(&self) -> usize {
        self.lists.len()
    }
}

impl IvfPqIndex {
    /// The `nprobe` lists (clamped to `1..=nlist`) whose centroids score best against `query`, best first, with
    /// their exact scores. Every centroid is scored from a half-precision copy ([`dot_f16`]: the loop is bound by
    /// memory, 6.3 MB of f32 centroids per query at 4,096 lists of 384 dimensions, 18% of a 10M search), and the
    /// best `nprobe + SHORTLIST_MARGIN` again from the f32 copy: the lists chosen are those f32 would choose
    /// unless half precision's rounding (below 2e-3 on a unit query) reorders lists past the margin, and the
    /// scores FAISS adds to each list's codes are exact.
    pub fn coarse_assign(&self, query: &[f32], nprobe: u32) -> Result<CoarseAssignment> {
        self.check_query(query)?;
        let nlist = self.params().nlist;
        let (exact, half) = self.centroids()?;
        let dim = self.dim();
        let mut best: Vec<(i64, f32)> = (0..)
            .zip(half.chunks_exact(dim))
            .map(|(list, c)| (list, dot_f16(query, c)))
            .collect();
        let nprobe = (nprobe.clamp(1, nlist) as usize).min(best.len());
        keep_best_lists(&mut best, nprobe + SHORTLIST_MARGIN);
        for (list, score) in &mut best {
            let at = *list as usize * dim;
            *score = dot(query, &exact[at..at + dim]);
        }
        keep_best_lists(&mut best, nprobe);
        best.sort_unstable_by(best_first);
        let (lists, scores) = best.into_iter().unzip();
        Ok(CoarseAssignment {
            nlist,
            lists,
            scores,
        })
    }

    /// The coarse centroids (nlist × dim), in f32 and in half precision, copied out of FAISS once: in a
    /// memory-mapped index they are a view into the file at whatever offset they were written, not aligned for
    /// `f32`.
    fn centroids(&self) -> Result<(&[f32], &[u16])> {
        if let Some((exact, half)) = self.centroids.get() {
            return Ok((exact, half));
        }
        let expected = self.params().nlist as usize * self.dim();
        let copied = self.with_free_handle(|index| unsafe {
            let ivf = faiss_sys::faiss_IndexIVF_cast(index.inner_ptr());
            if ivf.is_null() {
                return None;
            }
            let flat = faiss_sys::faiss_IndexFlat_cast(faiss_sys::faiss_IndexIVF_quantizer(ivf));
            if flat.is_null() {
                return None;
            }
            let (mut xb, mut len) = (std::ptr::null_mut(), 0usize);
            faiss_sys::faiss_IndexFlat_xb(flat, &mut xb, &mut len);
            if xb.is_null() || len != expected {
                return None;
            }
            let mut out = vec![0f32; len];
            // SAFETY: FAISS holds `len` floats at `xb` (maybe unaligned: bytes are copied) while the handle
            // lives, and it is ours until the closure returns.
            std::ptr::copy_nonoverlapping(xb.cast::<u8>(), out.as_mut_ptr().cast::<u8>(), len * 4);
            Some(out)
        });
        let copied = copied.ok_or_else(|| {
            IndexError::invalid(
                "index",
                format!("the coarse quantizer is not a flat index of {expected} floats"),
            )
        })?;
        let (exact, half) = self.centroids.get_or_init(|| {
            let half = to_f16(&copied);
            (copied, half)
        });
        Ok((exact, half))
    }

    /// Top-`k` by PQ score, best first, of the codes in the lists of `assignment` (made by an index encoded
    /// with the same quantizer: same centroids, or the lists mean nothing here). FAISS's `-1` padding is dropped.
    pub fn search_assigned(
        &self,
        query: &[f32],
        k: usize,
        assignment: &CoarseAssignment,
    ) -> Result<Vec<(i64, f32)>> {
        self.check_query(query)?;
        if assignment.nlist != self.params().nlist {
            return Err(IndexError::invalid(
                "assignment",
                format!(
                    "made for {} lists, this index has {}",
                    assignment.nlist,
                    self.params().nlist
                ),
            ));
        }
        let k = k.min(self.len());
        if k == 0 || assignment.lists.is_empty() {
            return Ok(Vec::new());
        }
        let mut labels = vec![-1i64; k];
        let mut scores = vec![0f32; k];
        let code = self.with_free_handle(|index| unsafe {
            let ivf = faiss_sys::faiss_IndexIVF_cast(index.inner_ptr());
            if ivf.is_null() {
                return -1;
            }
            // `search_preassigned` without parameters reads `nprobe` keys per query from the index's own
            // setting. This handle is ours until the call returns, and `search` passes its nprobe per call.
            faiss_sys::faiss_IndexIVF_set_nprobe(ivf, assignment.lists.len());
            faiss_sys::faiss_IndexIVF_search_preassigned(
                ivf,
                1,
                query.as_ptr(),
                k as i64,
                assignment.lists.as_ptr(),
                assignment.scores.as_ptr(),
                scores.as_mut_ptr(),
                labels.as_mut_ptr(),
                0,
            )
        });
        faiss_status(code, "search_preassigned")?;
        Ok(labels
            .into_iter()
            .zip(scores)
            .filter(|(label, _)| *label >= 0)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ivfpq::tests::unit_vectors as unit_rows;
    use crate::ivfpq::{IvfPqBuilder, IvfPqParams};

    /// Two indexes encoded with one trained quantizer, searched through one assignment, give what one index
    /// holding both halves gives: the same ids with the same scores.
    #[test]
    fn split_indexes_searched_through_one_assignment_equal_the_whole() {
        let dim = 16;
        let params = IvfPqParams {
            nlist: 16,
            m: 4,
            nbits: 6,
            nprobe: 4,
        };
        let data = unit_rows(2_000, dim, 7);
        let trained = IvfPqBuilder::train(dim, &params, &data).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ids: Vec<i64> = (0..2_000).map(|i| i * 3 + 1).collect();
        let write = |name: &str, range: std::ops::Range<usize>| {
            let mut b = trained.try_clone().unwrap();
            b.add(&data[range.start * dim..range.end * dim], &ids[range])
                .unwrap();
            let path = dir.path().join(name);
            b.write(&path).unwrap();
            IvfPqIndex::open_mmap_with_handles(&path, 1).unwrap()
        };
        let whole = write("whole", 0..2_000);
        let halves = [write("a", 0..900), write("b", 900..2_000)];
        for q in unit_rows(20, dim, 99).chunks(dim) {
            for nprobe in [1, 4, 16] {
                let expected = whole.search(q, 30, nprobe).unwrap();
                let assignment = halves[0].coarse_assign(q, nprobe).unwrap();
                assert_eq!(assignment.nprobe(), nprobe as usize);
                let mut got: Vec<(i64, f32)> = halves
                    .iter()
                    .flat_map(|h| h.search_assigned(q, 30, &assignment).unwrap())
                    .collect();
                got.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                got.truncate(expected.len());
                let score_of = |hits: &[(i64, f32)]| hits.iter().map(|h| h.1).collect::<Vec<_>>();
                let (want, have) = (score_of(&expected), score_of(&got));
                for (w, h) in want.iter().zip(&have) {
                    assert!(
                        (w - h).abs() < 1e-5,
                        "nprobe {nprobe}: {want:?} vs {have:?}"
                    );
                }
                let mut a: Vec<i64> = expected.iter().map(|h| h.0).collect();
                let mut b: Vec<i64> = got.iter().map(|h| h.0).collect();
                // Ties at the cut may order differently; the sets above the last score must match.
                let last = *want.last().unwrap();
                a.retain(|id| expected.iter().any(|h| h.0 == *id && h.1 > last + 1e-5));
                b.retain(|id| got.iter().any(|h| h.0 == *id && h.1 > last + 1e-5));
                a.sort_unstable();
                b.sort_unstable();
                assert_eq!(a, b, "nprobe {nprobe}");
            }
        }
    }

    /// At the engine's dimension, the lists chosen through the half-precision centroids are the lists f32
    /// scores choose, with f32's scores, best first.
    #[test]
    fn half_precision_shortlist_chooses_the_f32_lists() {
        let (dim, nlist) = (384, 256);
        let params = IvfPqParams {
            nlist,
            m: 8,
            nbits: 4,
            nprobe: 8,
        };
        let data = unit_rows(nlist as usize * 40, dim, 17);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index");
        let ids: Vec<i64> = (0..data.len() as i64 / dim as i64).collect();
        IvfPqIndex::build(&path, dim, &params, &data, &data, &ids).unwrap();
        let index = IvfPqIndex::open_mmap_with_handles(&path, 1).unwrap();
        let exact = index.centroids().unwrap().0.to_vec();
        for q in unit_rows(50, dim, 23).chunks(dim) {
            let mut want: Vec<(i64, f32)> = (0..)
                .zip(exact.chunks_exact(dim))
                .map(|(list, c)| (list, dot(q, c)))
                .collect();
            want.sort_by(best_first);
            for nprobe in [1, 8, 32] {
                let got = index.coarse_assign(q, nprobe).unwrap();
                let want = &want[..nprobe as usize];
                assert_eq!(got.lists, want.iter().map(|w| w.0).collect::<Vec<_>>());
                assert_eq!(got.scores, want.iter().map(|w| w.1).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn an_assignment_from_another_list_count_is_refused() {
        let dim = 8;
        let data = unit_rows(600, dim, 3);
        let dir = tempfile::tempdir().unwrap();
        let open = |nlist: u32, name: &str| {
            let params = IvfPqParams {
                nlist,
                m: 2,
                nbits: 4,
                nprobe: 2,
            };
            let path = dir.path().join(name);
            let ids: Vec<i64> = (0..600).collect();
            IvfPqIndex::build(&path, dim, &params, &data, &data, &ids).unwrap();
            IvfPqIndex::open_mmap_with_handles(&path, 1).unwrap()
        };
        let (four, eight) = (open(4, "four"), open(8, "eight"));
        let q = &data[..dim];
        let assignment = four.coarse_assign(q, 2).unwrap();
        let err = eight.search_assigned(q, 5, &assignment).unwrap_err();
        assert!(err.to_string().contains("4 lists"), "{err}");
        assert!(four.coarse_assign(&[f32::NAN; 8], 2).is_err());
        assert!(four.search_assigned(&q[..4], 5, &assignment).is_err());
    }
}
