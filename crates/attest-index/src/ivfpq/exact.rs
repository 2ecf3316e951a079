//! The exact (brute-force) inner-product search: ground truth for tests and benchmarks, and the search of the
//! growing segment, which has no index yet.

use faiss::Index;

use super::{best_first, check_rows};
use crate::error::Result;
use crate::simd::dot;

/// Brute-force top-`k` by inner product over `vectors` (row-major, `len / dim` rows): `(row, score)` best
/// first, ties broken by the lower row; NaN scores rank last. Ground truth for tests and the search of the
/// growing segment.
///
/// # Panics
/// If `dim` is 0, `vectors.len()` is not a multiple of `dim`, or `query.len() != dim` (callers validate
/// dimensions at their API boundary).
pub fn exact_search(vectors: &[f32], dim: usize, query: &[f32], k: usize) -> Vec<(usize, f32)> {
    assert!(dim > 0, "dim must be positive");
    assert_eq!(
        vectors.len() % dim,
        0,
        "vectors length is not a multiple of dim"
    );
    assert_eq!(query.len(), dim, "query dimension");
    if k == 0 {
        return Vec::new();
    }
    let mut scored: Vec<(usize, f32)> = vectors
        .chunks_exact(dim)
        .enumerate()
        .map(|(row, v)| (row, dot(query, v)))
        .collect();
    if k < scored.len() {
        scored.select_nth_unstable_by(k - 1, best_first);
        scored.truncate(k);
    }
    scored.sort_by(best_first);
    scored
}

/// Exact top-`k` by inner product for a batch of `queries` (row-major) over `vectors`: one `(row, score)`
/// list per query, best first. Scans `vectors` in blocks through a FAISS flat index, which scores a whole
/// block against every query with one BLAS matrix product, so ground truth for thousands of queries over
/// millions of rows costs one pass over the data instead of one per query. Used by `attest-lab bench`.
pub fn exact_search_batch(
    vectors: &[f32],
    dim: usize,
    queries: &[f32],
    k: usize,
) -> Result<Vec<Vec<(usize, f32)>>> {
    check_rows("vectors", vectors, dim)?;
    check_rows("queries", queries, dim)?;
    const BLOCK_ROWS: usize = 262_144;
    let nq = queries.len() / dim;
    let mut best: Vec<Vec<(usize, f32)>> = vec![Vec::with_capacity(2 * k); nq];
    for (block_no, block) in vectors.chunks(BLOCK_ROWS * dim).enumerate() {
        let offset = block_no * BLOCK_ROWS;
        let mut flat = faiss::index::flat::FlatIndex::new_ip(dim as u32)?;
        flat.add(block)?;
        let found = flat.search(queries, k.min(block.len() / dim))?;
        let per_query = found.labels.len() / nq.max(1);
        for (q, list) in best.iter_mut().enumerate() {
            let range = q * per_query..(q + 1) * per_query;
            list.extend(
                found.labels[range.clone()]
                    .iter()
                    .zip(&found.distances[range])
                    .filter_map(|(label, &score)| {
                        label.get().map(|r| (offset + r as usize, score))
                    }),
            );
            list.sort_by(best_first);
            list.truncate(k);
        }
    }
    Ok(best)
}
