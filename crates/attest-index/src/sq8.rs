//! An 8-bit scalar-quantised copy of a segment's vectors (SQ8), a quarter of the size of `vectors.f32`, so that
//! re-scoring a deep PQ candidate list stays in memory at 10M vectors (3.8 GB instead of 15 GB at 384-d). Each
//! dimension keeps its own range: `x ≈ low[d] + step[d] × code`, with `step = (high − low) / 255` over the rows
//! the file was written from. A query is scored against a row without decoding it:
//! `q·x ≈ q·low + Σ (q∘step)·code`.
//!
//! The engine re-scores the PQ candidates from this copy, then only the best few exactly from the f32 file
//! (`SegmentView::rescore` in the engine): SQ8 orders near neighbours almost exactly where PQ codes do not.
//!
//! # Format (little-endian)
//! ```text
//! 0   magic   b"ATQ8"
//! 4   version u32 (= 1)
//! 8   dim     u32
//! 12  count   u64
//! 20  zero padding up to 32
//! 32  low     dim × f32
//! ..  step    dim × f32
//! ..  codes   count × dim u8, row-major
//! ```
//! Like `vectors.f32` it carries no checksum of its own: the segment manifest checksums every file.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::error::{IndexError, Result};
use crate::mapped_file::MappedFile;
use crate::vector_file::{map_row_file, row_file_header, HEADER_LEN};

const MAGIC: &[u8; 4] = b"ATQ8";
const VERSION: u32 = 1;
const LEVELS: f32 = 255.0;

/// A read-only, memory-mapped SQ8 vector file.
pub struct Sq8File {
    file: MappedFile,
    dim: usize,
    len: usize,
    low: Vec<f32>,
    step: Vec<f32>,
}

impl std::fmt::Debug for Sq8File {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sq8File")
            .field("path", &self.file.path())
            .field("dim", &self.dim)
            .field("len", &self.len)
            .finish()
    }
}

/// A query prepared for scoring against one file's codes.
pub struct Sq8Query {
    scaled: Vec<f32>,
    offset: f32,
}

impl Sq8File {
    /// Quantises `rows` (row-major, a multiple of `dim` floats) to `path` atomically (tmp + fsync + rename +
    /// dir fsync), each dimension over its own range in `rows`. Reads `rows` twice (range and finiteness, then
    /// codes) and never copies them, so a memory-mapped file's rows of any size can be passed.
    pub fn write(path: &Path, dim: usize, rows: &[f32]) -> Result<()> {
        if dim == 0 || dim > u32::MAX as usize || !rows.len().is_multiple_of(dim) {
            return Err(IndexError::invalid(
                "vectors",
                format!("{} floats are not rows of dimension {dim}", rows.len()),
            ));
        }
        let count = rows.len() / dim;
        let (mut low, mut high) = (vec![f32::INFINITY; dim], vec![f32::NEG_INFINITY; dim]);
        let mut finite = true;
        for row in rows.chunks_exact(dim) {
            for ((l, h), &x) in low.iter_mut().zip(high.iter_mut()).zip(row) {
                // Compares, not `f32::min`/`max` (whose NaN rules keep the loop scalar); NaN is refused below.
                finite &= x.is_finite();
                *l = if x < *l { x } else { *l };
                *h = if x > *h { x } else { *h };
            }
        }
        if !finite {
            return Err(IndexError::invalid(
                "vectors",
                "a vector holds NaN or infinity",
            ));
        }
        let step: Vec<f32> = low
            .iter()
            .zip(&high)
            .map(|(&l, &h)| if h > l { (h - l) / LEVELS } else { 0.0 })
            .collect();
        if count == 0 {
            low.fill(0.0);
        }
        let tmp = crate::fsutil::tmp_path(path);
        let result = (|| -> Result<()> {
            let mut out = BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
            out.write_all(&header(dim, count as u64))?;
            for v in low.iter().chain(&step) {
                out.write_all(&v.to_le_bytes())?;
            }
            // A multiply and a saturating cast per value, no branch and no call to `round`, so the loop
            // vectorises: x ≥ low, so adding a half and truncating rounds to nearest; a constant dimension
            // (scale 0) codes 0. This loop was most of the `sq8` phase of every seal and merge.
            let scale: Vec<f32> = step
                .iter()
                .map(|&s| if s > 0.0 { 1.0 / s } else { 0.0 })
                .collect();
            let mut codes = vec![0u8; dim];
            for row in rows.chunks_exact(dim) {
                for (((c, &x), &l), &k) in codes.iter_mut().zip(row).zip(&low).zip(&scale) {
                    *c = ((x - l) * k + 0.5).min(LEVELS) as u8;
                }
                out.write_all(&codes)?;
            }
            let file = out.into_inner().map_err(|e| e.into_error())?;
            file.sync_all()?;
            Ok(())
        })();
        if let Err(e) = result {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        std::fs::rename(&tmp, path)?;
        crate::fsutil::sync_parent_dir(path)
    }

    /// Maps the file read-only and checks magic, version, dim and that the length is exactly what the header
    /// says; anything else is `IndexError::Corrupt`.
    pub fn open(path: &Path) -> Result<Self> {
        let (file, _, dim, count) = map_row_file(path, MAGIC, &[VERSION], |_, dim, count| {
            count.checked_mul(dim)?.checked_add(dim * 8)
        })?;
        let floats = |at: usize| -> Vec<f32> {
            file[at..at + dim * 4]
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
                .collect()
        };
        let (low, step) = (floats(HEADER_LEN), floats(HEADER_LEN + dim * 4));
        Ok(Sq8File {
            file,
            dim,
            len: count,
            low,
            step,
        })
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `query` prepared for [`Sq8File::score`] (its dimension is checked here, once).
    pub fn prepare(&self, query: &[f32]) -> Result<Sq8Query> {
        if query.len() != self.dim {
            return Err(IndexError::invalid(
                "query",
                format!("dimension {} != {}", query.len(), self.dim),
            ));
        }
        Ok(Sq8Query {
            scaled: query.iter().zip(&self.step).map(|(q, s)| q * s).collect(),
            offset: crate::simd::dot(query, &self.low),
        })
    }

    /// The approximate inner product of the prepared query with row `row` (None past the end).
    pub fn score(&self, query: &Sq8Query, row: usize) -> Option<f32> {
        if row >= self.len {
            return None;
        }
        let start = self.row_start(row);
        let codes = &self.file[start..start + self.dim];
        Some(query.offset + crate::simd::dot_u8(&query.scaled, codes))
    }

    /// Byte offset of row `row`'s codes: after the header and the per-dimension `low` and `step` (an f32 each).
    fn row_start(&self, row: usize) -> usize {
        HEADER_LEN + self.dim * 8 + row * self.dim
    }

    /// Starts reading `rows` into the page cache ([`MappedFile::will_need`]); rows past the end are skipped. (The
    /// copies of a replica's rows are a quarter of its full vectors, and where even they outgrow the cache a
    /// re-score of 64 × k of them is that many page faults.)
    pub fn read_ahead(&self, rows: impl IntoIterator<Item = usize>) {
        self.file.will_need(
            rows.into_iter()
                .filter(|&row| row < self.len)
                .map(|row| &self.file[self.row_start(row)..self.row_start(row) + self.dim]),
        );
    }

    /// Asks the CPU to start loading row `row` (nothing past the end): the re-scoring reads thousands of rows at
    /// random places of the file, each a wait on memory unless it was asked for a few rows ahead.
    pub fn prefetch(&self, row: usize) {
        if row >= self.len {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let start = self.row_start(row);
            // Every 64-byte line the row touches (the header leaves rows unaligned); the mapping starts on a page.
            for line in (start & !63..start + self.dim).step_by(64) {
                // SAFETY: a prefetch never faults, and `line` is inside the mapping (row < len).
                unsafe { _mm_prefetch::<_MM_HINT_T0>(self.file.as_ptr().add(line).cast()) };
            }
        }
    }

    /// Approximate inner products of `query` with each row of `rows` (rows out of range skipped), best first,
    /// ties by lower row.
    pub fn rescore(
        &self,
        query: &[f32],
        rows: impl IntoIterator<Item = usize>,
    ) -> Result<Vec<(usize, f32)>> {
        let q = self.prepare(query)?;
        let mut out: Vec<(usize, f32)> = rows
            .into_iter()
            .filter_map(|r| self.score(&q, r).map(|s| (r, s)))
            .collect();
        out.sort_by(crate::ivfpq::best_first);
        Ok(out)
    }
}

fn header(dim: usize, count: u64) -> [u8; HEADER_LEN] {
    row_file_header(MAGIC, VERSION, dim, count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit_rows(n: usize, dim: usize, seed: u64) -> Vec<f32> {
        let mut state = seed;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        };
        let mut rows: Vec<f32> = (0..n * dim).map(|_| next()).collect();
        for r in rows.chunks_exact_mut(dim) {
            let norm = r.iter().map(|x| x * x).sum::<f32>().sqrt();
            r.iter_mut().for_each(|x| *x /= norm);
        }
        rows
    }

    #[test]
    fn scores_are_within_the_quantisation_error_and_rank_like_exact() {
        let (n, dim) = (2_000, 64);
        let rows = unit_rows(n, dim, 7);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.sq8");
        Sq8File::write(&path, dim, &rows).unwrap();
        let f = Sq8File::open(&path).unwrap();
        assert_eq!((f.len(), f.dim()), (n, dim));
        assert_eq!(
            std::fs::metadata(&path).unwrap().len() as usize,
            HEADER_LEN + dim * 8 + n * dim
        );
        let query = &unit_rows(1, dim, 99)[..];
        let exact: Vec<(usize, f32)> = (0..n)
            .map(|r| (r, crate::simd::dot(query, &rows[r * dim..(r + 1) * dim])))
            .collect();
        let approx = f.rescore(query, 0..n).unwrap();
        // Each coordinate is off by at most half a step, so the score by at most Σ |q_d| × step_d / 2.
        let bound: f32 = query
            .iter()
            .zip(&f.step)
            .map(|(q, s)| q.abs() * s / 2.0)
            .sum();
        for &(r, s) in &approx {
            assert!((s - exact[r].1).abs() <= bound * 1.001, "row {r}");
        }
        let mut best_exact = exact.clone();
        best_exact.sort_by(crate::ivfpq::best_first);
        let top = |v: &[(usize, f32)]| v[..10].iter().map(|x| x.0).collect::<Vec<_>>();
        let overlap = top(&approx)
            .iter()
            .filter(|r| top(&best_exact).contains(r))
            .count();
        assert!(overlap >= 9, "top-10 overlap {overlap}");
        // Out-of-range rows are skipped, a wrong dimension is an error.
        assert_eq!(f.rescore(query, [n, n + 5]).unwrap(), vec![]);
        assert!(f.prepare(&query[1..]).is_err());
    }

    #[test]
    fn a_constant_dimension_and_an_empty_file_are_fine() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sq8");
        Sq8File::write(&path, 2, &[0.5, 1.0, 0.5, -1.0]).unwrap();
        let f = Sq8File::open(&path).unwrap();
        let scores = f.rescore(&[1.0, 1.0], [0, 1]).unwrap();
        assert_eq!(scores[0].0, 0);
        assert!((scores[0].1 - 1.5).abs() < 1e-3 && (scores[1].1 + 0.5).abs() < 1e-3);
        let empty = dir.path().join("e.sq8");
        Sq8File::write(&empty, 3, &[]).unwrap();
        assert!(Sq8File::open(&empty).unwrap().is_empty());
    }

    #[test]
    fn bad_input_and_damaged_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.sq8");
        assert!(Sq8File::write(&path, 2, &[1.0, 2.0, 3.0]).is_err());
        assert!(Sq8File::write(&path, 1, &[f32::NAN]).is_err());
        assert!(!path.exists() && !crate::fsutil::tmp_path(&path).exists());
        Sq8File::write(&path, 2, &[1.0, 2.0, 3.0, 4.0]).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        assert!(matches!(
            Sq8File::open(&path),
            Err(IndexError::Corrupt { .. })
        ));
        let mut wrong = bytes.clone();
        wrong[0] = b'X';
        std::fs::write(&path, &wrong).unwrap();
        assert!(matches!(
            Sq8File::open(&path),
            Err(IndexError::Corrupt { .. })
        ));
    }
}
