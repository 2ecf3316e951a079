//! Full vectors of a sealed segment, kept on disk next to the IVF-PQ index so that the top candidates of a PQ
//! search can be re-scored exactly. The file is memory-mapped and rows are read in place from the page cache.
//!
//! Rows are stored in half precision (version 2) when every value fits one (|v| ≤ 65,504): half the bytes of
//! f32 (0.77 of a 384-d row's 2.1 KB in a segment) and no ranking it changes that matters — a value keeps 11
//! significant bits, so an inner product of unit vectors moves by ~1e-5, a thousandth of the gap between
//! neighbours that a re-score separates (`docs/decisions/disk-per-row.md`). Vectors that do not fit (a caller's
//! unnormalised vectors past 65,504) keep f32 (version 1), as every file written before half precision does.
//!
//! # Format (little-endian)
//! ```text
//! 0   magic   b"ATVF"
//! 4   version u32 (1: f32 values, 2: f16 values)
//! 8   dim     u32
//! 12  count   u64
//! 20  zero padding up to 32, so that the data region is 32-byte aligned within the page-aligned map
//! 32  count × dim values, row-major
//! ```
//! There is no checksum of the data region here: the segment manifest checksums every file, and a
//! re-score must not have to read gigabytes at open. The header and the exact file length are checked.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::{IndexError, Result};
use crate::mapped_file::MappedFile;

// Rows are read as `&[f32]` / `&[u16]` over the file bytes, which is only correct where those are little-endian
// in memory.
#[cfg(not(target_endian = "little"))]
compile_error!(
    "VectorFile serves little-endian values in place; big-endian hosts are not supported"
);

const MAGIC: &[u8; 4] = b"ATVF";
const VERSION_F32: u32 = 1;
const VERSION_F16: u32 = 2;
pub(crate) const HEADER_LEN: usize = 32;

/// How a vector file holds its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    F32,
    F16,
}

/// Whether half precision holds `v` (NaN never: vectors are checked finite before they get here).
fn fits_half(v: f32) -> bool {
    v.abs() <= half::f16::MAX.to_f32()
}

impl Precision {
    /// Half precision where every value fits one, else f32.
    pub fn for_values(values: &[f32]) -> Self {
        if values.iter().all(|v| fits_half(*v)) {
            Precision::F16
        } else {
            Precision::F32
        }
    }

    fn version(self) -> u32 {
        match self {
            Precision::F32 => VERSION_F32,
            Precision::F16 => VERSION_F16,
        }
    }

    fn of_version(version: u32) -> Option<Self> {
        match version {
            VERSION_F32 => Some(Precision::F32),
            VERSION_F16 => Some(Precision::F16),
            _ => None,
        }
    }

    fn value_bytes(self) -> usize {
        match self {
            Precision::F32 => 4,
            Precision::F16 => 2,
        }
    }
}

/// One stored row, read in place: f32 values, or f16 ones (half precision bits).
#[derive(Debug, Clone, Copy)]
pub enum VectorRow<'a> {
    F32(&'a [f32]),
    F16(&'a [u16]),
}

impl<'a> VectorRow<'a> {
    /// Inner product with `query` (of the row's dimension).
    pub fn dot(&self, query: &[f32]) -> f32 {
        match self {
            VectorRow::F32(v) => crate::simd::dot(query, v),
            VectorRow::F16(v) => crate::simd::dot_f16(query, v),
        }
    }

    /// The values as f32.
    pub fn to_vec(&self) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.len());
        self.extend_into(&mut out);
        out
    }

    pub fn len(&self) -> usize {
        match self {
            VectorRow::F32(v) => v.len(),
            VectorRow::F16(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the values, as f32, to `out`.
    pub fn extend_into(&self, out: &mut Vec<f32>) {
        match self {
            VectorRow::F32(v) => out.extend_from_slice(v),
            VectorRow::F16(v) => out.extend(v.iter().map(|b| half::f16::from_bits(*b).to_f32())),
        }
    }
}

/// A read-only, memory-mapped vector file.
pub struct VectorFile {
    file: MappedFile,
    precision: Precision,
    dim: usize,
    len: usize,
}

impl std::fmt::Debug for VectorFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorFile")
            .field("path", &self.file.path())
            .field("precision", &self.precision)
            .field("dim", &self.dim)
            .field("len", &self.len)
            .finish()
    }
}

impl VectorFile {
    /// Writes `vectors` (row-major, `len / dim` rows) to `path` atomically (tmp + fsync + rename + dir fsync), in
    /// half precision where every value fits one ([`Precision::for_values`]).
    pub fn write(path: &Path, dim: usize, vectors: &[f32]) -> Result<()> {
        let mut writer = VectorFileWriter::create(path, dim, Precision::for_values(vectors))?;
        writer.append(vectors)?;
        writer.finish()
    }

    /// Maps the file read-only and validates magic, version, dim and that the length is exactly
    /// header + count × dim × the value size; anything else is `IndexError::Corrupt`.
    pub fn open(path: &Path) -> Result<Self> {
        let (file, version, dim, count) = map_row_file(
            path,
            MAGIC,
            &[VERSION_F32, VERSION_F16],
            |version, dim, count| {
                let value = Precision::of_version(version)?.value_bytes();
                count.checked_mul(dim)?.checked_mul(value)
            },
        )?;
        Ok(VectorFile {
            file,
            precision: Precision::of_version(version).expect("a version map_row_file accepted"),
            dim,
            len: count,
        })
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The mapped file (a merge advises it sequential; an exact scan restores the page cache from it).
    pub fn file(&self) -> &MappedFile {
        &self.file
    }

    /// The bytes of row `row` (None past the end).
    fn row_bytes(&self, row: usize) -> Option<&[u8]> {
        let size = self.dim * self.precision.value_bytes();
        let start = HEADER_LEN + row * size;
        (row < self.len).then(|| &self.file[start..start + size])
    }

    /// Starts reading `rows` into the page cache ([`MappedFile::will_need`]); rows past the end are skipped.
    pub fn read_ahead(&self, rows: impl IntoIterator<Item = usize>) {
        self.file
            .will_need(rows.into_iter().filter_map(|row| self.row_bytes(row)));
    }

    /// Row `row`, zero-copy from the map.
    pub fn get(&self, row: usize) -> Option<VectorRow<'_>> {
        let bytes = self.row_bytes(row)?;
        // SAFETY: the map is page-aligned and HEADER_LEN and every row size are multiples of the value size, so
        // `bytes` is aligned for the values; its length is exactly dim values (checked against the file length in
        // `open`); every bit pattern is a valid f32 / u16; the host is little-endian (compile-time check above);
        // and the slice borrows `self`, so the map outlives it.
        Some(unsafe {
            match self.precision {
                Precision::F32 => {
                    debug_assert_eq!(bytes.as_ptr() as usize % std::mem::align_of::<f32>(), 0);
                    VectorRow::F32(std::slice::from_raw_parts(
                        bytes.as_ptr().cast::<f32>(),
                        self.dim,
                    ))
                }
                Precision::F16 => {
                    debug_assert_eq!(bytes.as_ptr() as usize % std::mem::align_of::<u16>(), 0);
                    VectorRow::F16(std::slice::from_raw_parts(
                        bytes.as_ptr().cast::<u16>(),
                        self.dim,
                    ))
                }
            }
        })
    }

    /// Every row, row-major (`len() × dim()` floats), zero-copy from the map, where the file holds f32 (None in
    /// half precision): for scans over a whole file written as [`Precision::F32`] (a benchmark's ground truth).
    pub fn f32_rows(&self) -> Option<&[f32]> {
        if self.precision != Precision::F32 {
            return None;
        }
        let bytes = &self.file[HEADER_LEN..];
        // SAFETY: as in `get`: aligned (page-aligned map, 32-byte header), length checked in `open` to be
        // exactly len × dim × 4, every bit pattern is a valid little-endian f32, and the slice borrows `self`.
        Some(unsafe {
            std::slice::from_raw_parts(bytes.as_ptr().cast::<f32>(), self.len * self.dim)
        })
    }

    /// Exact inner product of `query` with each row in `rows`: the re-scoring step after an approximate
    /// search. Rows out of range are skipped. Returns `(row, score)` best first, ties by lower row.
    pub fn rescore(
        &self,
        query: &[f32],
        rows: impl IntoIterator<Item = usize>,
    ) -> Result<Vec<(usize, f32)>> {
        if query.len() != self.dim {
            return Err(IndexError::invalid(
                "query",
                format!("dimension {} != {}", query.len(), self.dim),
            ));
        }
        let mut out: Vec<(usize, f32)> = rows
            .into_iter()
            .filter_map(|r| self.get(r).map(|v| (r, v.dot(query))))
            .collect();
        out.sort_by(crate::ivfpq::best_first);
        Ok(out)
    }
}

/// Writes a vector file row batch by row batch, so that a caller never needs every vector in memory at once.
/// Rows go to `<path>.tmp`; `finish` fills in the row count, fsyncs and renames the file over `path`.
/// Dropping the writer without `finish` removes the tmp file and leaves `path` untouched.
pub struct VectorFileWriter {
    out: Option<std::io::BufWriter<File>>,
    path: PathBuf,
    tmp: PathBuf,
    precision: Precision,
    dim: usize,
    count: u64,
}

impl std::fmt::Debug for VectorFileWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorFileWriter")
            .field("path", &self.path)
            .field("dim", &self.dim)
            .field("count", &self.count)
            .finish()
    }
}

impl VectorFileWriter {
    /// Values of `precision`: half precision only for values that fit one ([`Precision::for_values`]; `append`
    /// refuses the others).
    pub fn create(path: &Path, dim: usize, precision: Precision) -> Result<Self> {
        if dim == 0 || dim > u32::MAX as usize {
            return Err(IndexError::invalid(
                "dim",
                format!("must be in 1..=2^32-1, got {dim}"),
            ));
        }
        let tmp = crate::fsutil::tmp_path(path);
        let mut out = std::io::BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
        out.write_all(&header(precision, dim, 0))?;
        Ok(VectorFileWriter {
            out: Some(out),
            path: path.to_path_buf(),
            tmp,
            precision,
            dim,
            count: 0,
        })
    }

    /// Appends row-major `vectors` (a multiple of `dim` floats).
    pub fn append(&mut self, vectors: &[f32]) -> Result<()> {
        if !vectors.len().is_multiple_of(self.dim) {
            return Err(IndexError::invalid(
                "vectors",
                format!(
                    "length {} is not a multiple of dim {}",
                    vectors.len(),
                    self.dim
                ),
            ));
        }
        let out = self.out.as_mut().expect("open until finish");
        match self.precision {
            Precision::F32 => {
                for v in vectors {
                    out.write_all(&v.to_le_bytes())?;
                }
            }
            Precision::F16 => {
                // A refused batch leaves the writer to be dropped, and its tmp file with it.
                if !vectors.iter().all(|v| fits_half(*v)) {
                    return Err(IndexError::invalid(
                        "vectors",
                        "a value past half precision's range (65,504) in a half-precision file",
                    ));
                }
                for bits in crate::simd::to_f16(vectors) {
                    out.write_all(&bits.to_le_bytes())?;
                }
            }
        }
        self.count += (vectors.len() / self.dim) as u64;
        Ok(())
    }

    /// Rows appended so far.
    pub fn len(&self) -> u64 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Writes the final header, fsyncs, renames over the target path and fsyncs its directory.
    pub fn finish(mut self) -> Result<()> {
        let mut file = self
            .out
            .take()
            .expect("open until finish")
            .into_inner()
            .map_err(|e| e.into_error())?;
        file.seek(SeekFrom::Start(0))?;
        file.write_all(&header(self.precision, self.dim, self.count))?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&self.tmp, &self.path)?;
        crate::fsutil::sync_parent_dir(&self.path)
    }
}

impl Drop for VectorFileWriter {
    fn drop(&mut self) {
        if self.out.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

fn header(precision: Precision, dim: usize, count: u64) -> [u8; HEADER_LEN] {
    row_file_header(MAGIC, precision.version(), dim, count)
}

/// The 32-byte header of a segment's row files (`vectors.f32`, `vectors.sq8`): magic, version, dim (u32), count
/// (u64), zero padding, little-endian.
pub(crate) fn row_file_header(
    magic: &[u8; 4],
    version: u32,
    dim: usize,
    count: u64,
) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0..4].copy_from_slice(magic);
    h[4..8].copy_from_slice(&version.to_le_bytes());
    h[8..12].copy_from_slice(&(dim as u32).to_le_bytes());
    h[12..20].copy_from_slice(&count.to_le_bytes());
    h
}

/// Maps a row file read-only ([`MappedFile::open`]) and checks its header: `magic`, a version of `versions`, a
/// non-zero dim, and a length of exactly the header plus `body_len(version, dim, count)` bytes. Anything else is
/// `IndexError::Corrupt`. Returns the map, version, dim and count.
pub(crate) fn map_row_file(
    path: &Path,
    magic: &[u8; 4],
    versions: &[u32],
    body_len: impl Fn(u32, usize, usize) -> Option<usize>,
) -> Result<(MappedFile, u32, usize, usize)> {
    let corrupt = |reason: String| IndexError::corrupt(path, reason);
    let (file, (found, dim, count)) = MappedFile::open(path, |bytes| {
        if bytes.len() < HEADER_LEN {
            return Err(corrupt(format!(
                "{} bytes is shorter than the {HEADER_LEN}-byte header",
                bytes.len()
            )));
        }
        if &bytes[0..4] != magic {
            return Err(corrupt(format!(
                "bad magic, not a {} file",
                String::from_utf8_lossy(magic)
            )));
        }
        let found = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes"));
        if !versions.contains(&found) {
            return Err(corrupt(format!("unsupported version {found}")));
        }
        let dim = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize;
        let count = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes"));
        if dim == 0 {
            return Err(corrupt("dim is 0".into()));
        }
        let count = usize::try_from(count).ok();
        let expected = count
            .and_then(|c| body_len(found, dim, c))
            .and_then(|b| b.checked_add(HEADER_LEN));
        match (count, expected) {
            (Some(count), Some(len)) if len == bytes.len() => Ok((found, dim, count)),
            _ => Err(corrupt(format!(
                "length {} does not match header ({count:?} rows × {dim} dims)",
                bytes.len()
            ))),
        }
    })?;
    Ok((file, found, dim, count))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: usize, dim: usize) -> Vec<f32> {
        (0..n * dim).map(|i| (i as f32 * 0.37).sin()).collect()
    }

    /// `values` as half precision gives them back.
    fn halved(values: &[f32]) -> Vec<f32> {
        values
            .iter()
            .map(|v| half::f16::from_f32(*v).to_f32())
            .collect()
    }

    fn all_rows(vf: &VectorFile) -> Vec<f32> {
        let mut out = Vec::new();
        for r in 0..vf.len() {
            vf.get(r).unwrap().extend_into(&mut out);
        }
        out
    }

    #[test]
    fn streamed_writer_matches_whole_write_and_cleans_up_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let dim = 5;
        let data = sample(77, dim);
        let (whole, streamed) = (dir.path().join("whole"), dir.path().join("streamed"));
        VectorFile::write(&whole, dim, &data).unwrap();
        let mut w = VectorFileWriter::create(&streamed, dim, Precision::F16).unwrap();
        for batch in data.chunks(dim * 10) {
            w.append(batch).unwrap();
        }
        assert!(w.append(&data[..3]).is_err());
        assert_eq!(w.len(), 77);
        w.finish().unwrap();
        assert_eq!(
            std::fs::read(&whole).unwrap(),
            std::fs::read(&streamed).unwrap()
        );
        let vf = VectorFile::open(&streamed).unwrap();
        assert_eq!(all_rows(&vf), halved(&data));

        let abandoned = dir.path().join("abandoned");
        let mut w = VectorFileWriter::create(&abandoned, dim, Precision::F32).unwrap();
        w.append(&data).unwrap();
        drop(w);
        assert!(!abandoned.exists());
        assert!(!crate::fsutil::tmp_path(&abandoned).exists());
    }

    #[test]
    fn round_trip_in_half_precision() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors.f32");
        let dim = 7;
        let data = sample(101, dim);
        VectorFile::write(&path, dim, &data).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().len() as usize,
            HEADER_LEN + data.len() * 2
        );
        let vf = VectorFile::open(&path).unwrap();
        assert_eq!((vf.dim(), vf.len(), vf.is_empty()), (dim, 101, false));
        assert_eq!(vf.precision(), Precision::F16);
        assert_eq!(vf.f32_rows(), None);
        let halved = halved(&data);
        for r in 0..101 {
            let row = vf.get(r).unwrap();
            assert_eq!(row.to_vec(), &halved[r * dim..(r + 1) * dim]);
            // Within half precision's rounding of the f32 written (11 significant bits).
            for (got, wrote) in row.to_vec().iter().zip(&data[r * dim..(r + 1) * dim]) {
                assert!(
                    (got - wrote).abs() <= wrote.abs() / 1024.0 + 1e-7,
                    "{got} {wrote}"
                );
            }
        }
        assert!(vf.get(101).is_none());
    }

    /// A value past half precision's range keeps the file in f32, as files written before half precision are
    /// (version 1): read exactly; a half-precision writer refuses such a value.
    #[test]
    fn values_past_half_precision_stay_f32() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors.f32");
        let mut data = sample(10, 4);
        data[17] = 1.0e6;
        VectorFile::write(&path, 4, &data).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().len() as usize,
            HEADER_LEN + data.len() * 4
        );
        assert_eq!(std::fs::read(&path).unwrap()[4], 1, "version 1");
        let vf = VectorFile::open(&path).unwrap();
        assert_eq!(vf.precision(), Precision::F32);
        assert_eq!(all_rows(&vf), data);
        assert_eq!(vf.f32_rows(), Some(&data[..]));
        assert!(matches!(vf.get(4), Some(VectorRow::F32(_))));
        let mut w = VectorFileWriter::create(&dir.path().join("h"), 4, Precision::F16).unwrap();
        assert!(matches!(
            w.append(&data),
            Err(IndexError::InvalidArgument { .. })
        ));
    }

    #[test]
    fn empty_file_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors.f32");
        VectorFile::write(&path, 384, &[]).unwrap();
        let vf = VectorFile::open(&path).unwrap();
        assert!(vf.is_empty());
        assert_eq!(vf.dim(), 384);
        assert!(vf.get(0).is_none());
    }

    #[test]
    fn invalid_arguments() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v");
        assert!(matches!(
            VectorFile::write(&path, 0, &[]),
            Err(IndexError::InvalidArgument { .. })
        ));
        assert!(matches!(
            VectorFile::write(&path, 3, &[1.0; 4]),
            Err(IndexError::InvalidArgument { .. })
        ));
        assert!(!path.exists());
    }

    #[test]
    fn wrong_length_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors.f32");
        VectorFile::write(&path, 4, &sample(10, 4)).unwrap();
        let good = std::fs::read(&path).unwrap();

        // Truncated by one byte, by a whole row, and extended by trailing junk.
        for bytes in [
            &good[..good.len() - 1],
            &good[..good.len() - 8],
            &[good.as_slice(), &[0u8; 4]].concat()[..],
        ] {
            std::fs::write(&path, bytes).unwrap();
            assert!(
                matches!(VectorFile::open(&path), Err(IndexError::Corrupt { .. })),
                "len {}",
                bytes.len()
            );
        }
        // Shorter than the header, empty, bad magic, bad version, absurd count.
        let mut bad_magic = good.clone();
        bad_magic[0] = b'X';
        let mut bad_version = good.clone();
        bad_version[4] = 9;
        let mut huge_count = good.clone();
        huge_count[12..20].copy_from_slice(&u64::MAX.to_le_bytes());
        for bytes in [
            &good[..10],
            &[][..],
            &bad_magic[..],
            &bad_version[..],
            &huge_count[..],
        ] {
            std::fs::write(&path, bytes).unwrap();
            assert!(
                matches!(VectorFile::open(&path), Err(IndexError::Corrupt { .. })),
                "len {}",
                bytes.len()
            );
        }
    }

    #[test]
    fn rescore_orders_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let data = [1.0, 0.0, 0.0, 1.0, 0.6, 0.8, 1.0, 0.0];
        for precision in [Precision::F32, Precision::F16] {
            let path = dir.path().join(format!("{precision:?}"));
            let mut w = VectorFileWriter::create(&path, 2, precision).unwrap();
            w.append(&data).unwrap();
            w.finish().unwrap();
            let vf = VectorFile::open(&path).unwrap();
            assert_eq!(vf.precision(), precision);
            let got = vf.rescore(&[1.0, 0.0], [1, 2, 3, 0, 99]).unwrap();
            let rows: Vec<usize> = got.iter().map(|(r, _)| *r).collect();
            assert_eq!(rows, vec![0, 3, 2, 1], "{precision:?}");
            assert!((got[2].1 - 0.6).abs() < 1e-3, "{precision:?}");
            assert!(vf.rescore(&[1.0], [0]).is_err());
        }
    }
}
