//! The dense index of a sealed segment: a FAISS `IVF<nlist>,PQ<m>x<nbits>` index over L2-normalised vectors
//! with the inner-product metric (so scores are cosine similarities), written once at seal time and opened
//! memory-mapped and read-only afterwards. Also the exact (brute-force) inner-product search used as ground
//! truth and by the growing segment.
//!
//! # File format
//! A plain FAISS index file (readable by any FAISS tool) followed by a 48-byte trailer, all little-endian:
//! ```text
//! faiss_len u64 | count u64 | dim u32 | nlist u32 | m u32 | nbits u32 | nprobe u32 | version u32
//! | crc32 u32 (of the FAISS bytes, then of the 40 trailer bytes before it) | magic b"ATPQ"
//! ```
//! FAISS stops reading at the end of its own data, so the trailer is invisible to it. It exists because
//! FAISS's readers are not hardened against damaged input: a truncated file can make the memory-mapped
//! reader compute offsets past the end of the map and crash the process instead of throwing. `open_mmap`
//! therefore verifies length and checksum *before* FAISS sees the file.
//!
//! # Memory mapping
//! faiss-rs's `IoFlags::MEM_MAP` is `0x1`, which FAISS 1.12 reads as `IO_FLAG_SKIP_STORAGE`; FAISS's own
//! `IO_FLAG_MMAP` (`0x646f0008`, on-disk inverted lists) does not fit faiss-rs's 16-bit `IoFlags`. The flag
//! that does what we want is `IO_FLAG_MMAP_IFC` (`1 << 9`): FAISS maps the whole file and the inverted lists'
//! codes and ids (and the coarse quantizer's centroids) become views into that map instead of heap copies.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::path::{Path, PathBuf};

use faiss::index::io::{read_index_with_flags, write_index};
use faiss::index::io_flags::IoFlags;
use faiss::index::{IndexImpl, SearchWithParamsMut};
use faiss::search_params::SearchParametersIVF;
use faiss::{Idx, Index, MetricType};
use parking_lot::Mutex;

use crate::error::{IndexError, Result};

mod exact;
mod trailer;
pub use exact::{exact_search, exact_search_batch};
use trailer::append_trailer;
pub(crate) use trailer::{verify_file, Trailer};

/// FAISS `IO_FLAG_READ_ONLY` (faiss/index_io.h).
const FAISS_IO_FLAG_READ_ONLY: i32 = 2;
/// FAISS `IO_FLAG_MMAP_IFC` (faiss/index_io.h): read through a mapping of the whole file, keeping the bulk
/// arrays (inverted lists, flat codes) as views into it.
const FAISS_IO_FLAG_MMAP_IFC: i32 = 1 << 9;

/// FAISS's k-means warns below this many training points per centroid (`min_points_per_centroid`).
pub const MIN_POINTS_PER_LIST: usize = 39;
/// `open_mmap` opens one FAISS handle per core, up to this many.
const MAX_SEARCH_HANDLES: usize = 8;
/// Beyond 16 bits per code a PQ codebook (2^nbits centroids per sub-quantizer) is not trainable in practice.
use attest_core::limits::MAX_NBITS;

/// IVF_PQ construction and search parameters.
///
/// The defaults are meant for 384-d embeddings and segments from ~50k up to a few million vectors (a
/// 10M-vector shard is several such segments):
/// - `nlist = 1024` coarse lists: with `nprobe = 32` a query scans ~3% of a segment's codes; for small
///   segments `effective` lowers it so that every list still gets enough training points.
/// - `m = 96` sub-quantizers: 4 dimensions each on 384-d, 96 bytes per vector (10M vectors → ~1 GB of codes
///   plus 8-byte ids, against 15 GB of raw f32). PQ distances only rank candidates; the engine re-scores the
///   top `overfetch × k` with the full vectors (`VectorFile::rescore`). On the 50k clustered fixture of
///   `tests/ivfpq_recall.rs`, recall@10 from PQ distances alone is 0.48 with m = 48, 0.71 with m = 96 and
///   0.90 with m = 192; after re-scoring the top 40 it is 0.91 with m = 48 and 0.997 with m = 96. m = 96 is
///   the smallest code that leaves a margin at the engine's default over-fetch (16 × k, see
///   `EngineConfig::overfetch`); m = 192 would buy raw-PQ recall with twice the memory and scan time.
/// - `nbits = 8`: 256 centroids per sub-quantizer, FAISS's fast byte-wise lookup-table path.
/// - `nprobe = 32`: lists probed per query by default (callers may override it per search). On that fixture
///   recall is already flat from nprobe 8 (clusters are well separated); 32 leaves room for real data, where
///   neighbours straddle list boundaries more often.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct IvfPqParams {
    pub nlist: u32,
    pub m: u32,
    pub nbits: u32,
    pub nprobe: u32,
}

impl Default for IvfPqParams {
    fn default() -> Self {
        use attest_core::limits as l;
        IvfPqParams {
            nlist: l::DEFAULT_NLIST,
            m: l::DEFAULT_M,
            nbits: l::DEFAULT_NBITS,
            nprobe: l::DEFAULT_NPROBE,
        }
    }
}

impl IvfPqParams {
    /// Rejects parameters no segment could be built with (zeros, more than 16 bits per code).
    pub fn validate(&self) -> Result<()> {
        for (field, value) in [
            ("nlist", self.nlist),
            ("m", self.m),
            ("nbits", self.nbits),
            ("nprobe", self.nprobe),
        ] {
            if value == 0 {
                return Err(IndexError::invalid(field, "must be at least 1"));
            }
        }
        if self.nbits > MAX_NBITS {
            return Err(IndexError::invalid(
                "nbits",
                format!("must be at most {MAX_NBITS}, got {}", self.nbits),
            ));
        }
        Ok(())
    }

    /// Parameters actually used for a segment trained on `n` vectors of `dim` dimensions:
    /// - `nlist` lowered so that each list gets at least ~39 training points (FAISS's own minimum), at least 1;
    /// - `m` lowered to the largest divisor of `dim` that is ≤ `m` (FAISS requires `dim % m == 0`);
    /// - `nbits` lowered so that `2^nbits ≤ n` (FAISS needs at least `2^nbits` training points per
    ///   sub-quantizer), but at least 1 — for `n = 1` `IvfPqIndex::build` repeats the training row;
    /// - `nprobe` clamped to `1..=nlist`.
    ///
    /// Pure: the same inputs always give the same result, so it can be recomputed and compared.
    pub fn effective(&self, n: usize, dim: usize) -> IvfPqParams {
        let n = n.max(1);
        let nlist = (self.nlist.max(1) as usize).min((n / MIN_POINTS_PER_LIST).max(1)) as u32;
        let m_cap = self.m.max(1) as usize;
        let m = if dim == 0 {
            m_cap
        } else {
            (1..=m_cap.min(dim))
                .rev()
                .find(|d| dim.is_multiple_of(*d))
                .unwrap_or(1)
        };
        let max_bits_for_n = n.ilog2(); // 2^floor(log2 n) ≤ n
        let nbits = self.nbits.clamp(1, MAX_NBITS).min(max_bits_for_n.max(1));
        let nprobe = self.nprobe.clamp(1, nlist);
        IvfPqParams {
            nlist,
            m: m as u32,
            nbits,
            nprobe,
        }
    }

    /// Bytes of one vector's PQ code in an inverted list (FAISS `ProductQuantizer::code_size`).
    pub fn code_size(&self) -> usize {
        (self.m as usize * self.nbits as usize).div_ceil(8)
    }

    /// `np`: no polysemous training. The index factory enables it by default for IVF-PQ; it reorders the
    /// codebooks by simulated annealing so that Hamming distances between codes approximate real ones, which
    /// only polysemous filtering (`polysemous_ht`, unused here) benefits from, and it dominated build time
    /// (minutes for a few thousand vectors).
    fn factory_description(&self) -> String {
        format!("IVF{},PQ{}x{}np", self.nlist, self.m, self.nbits)
    }
}

/// A sealed segment's IVF_PQ index, opened memory-mapped and read-only.
///
/// `Send + Sync`. faiss-rs's `search` takes `&mut self`; FAISS itself documents concurrent searches on a CPU
/// index as safe, but getting two `&mut IndexImpl` at once would be undefined behaviour on the Rust side, and
/// faiss-rs offers no `&self` search for a generic (`IndexImpl`) index. So the file is opened several times
/// (one handle per core by default): each handle is behind its own mutex, a search takes whichever handle is
/// free, and concurrent queries on one segment run in parallel. The handles map the same file, so the
/// inverted lists share the page cache; only FAISS's small per-handle structures are duplicated.
pub struct IvfPqIndex {
    handles: Vec<Mutex<IndexImpl>>,
    /// The coarse centroids in f32 and in half precision, copied once the index first assigns a query itself
    /// ([`crate::coarse`]).
    pub(crate) centroids: std::sync::OnceLock<(Vec<f32>, Vec<u16>)>,
    next_handle: std::sync::atomic::AtomicUsize,
    path: PathBuf,
    dim: usize,
    len: usize,
    params: IvfPqParams,
}

impl std::fmt::Debug for IvfPqIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IvfPqIndex")
            .field("path", &self.path)
            .field("dim", &self.dim)
            .field("len", &self.len)
            .field("params", &self.params)
            .finish()
    }
}

impl IvfPqIndex {
    /// Trains an IVF_PQ index (inner-product metric: vectors are L2-normalised, so IP = cosine) on `train`
    /// (row-major, n_train × dim), adds `vectors` under `ids` (the segment's row numbers), and writes it to
    /// `path` atomically (`path.tmp`, fsync, rename, fsync dir). The parameters are `params.effective(n_train,
    /// dim)`, which are returned. `train` must hold at least one row; `vectors` may be empty.
    pub fn build(
        path: &Path,
        dim: usize,
        params: &IvfPqParams,
        train: &[f32],
        vectors: &[f32],
        ids: &[i64],
    ) -> Result<IvfPqParams> {
        let mut builder = IvfPqBuilder::train(dim, params, train)?;
        builder.add(vectors, ids)?;
        builder.write(path)
    }

    /// Opens the index memory-mapped and read-only (FAISS `IO_FLAG_MMAP_IFC | IO_FLAG_READ_ONLY`): the
    /// inverted lists stay in the page cache, and the file shows in `/proc/self/maps`. A truncated, damaged or
    /// foreign file is `IndexError::Corrupt` — checked before FAISS parses it, and FAISS's own exceptions are
    /// mapped to `Corrupt` too.
    pub fn open_mmap(path: &Path) -> Result<Self> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self::open_mmap_with_handles(path, cores.min(MAX_SEARCH_HANDLES))
    }

    /// `open_mmap` with `handles` FAISS handles (at least 1): at most that many searches of this index run
    /// at the same time.
    pub fn open_mmap_with_handles(path: &Path, handles: usize) -> Result<Self> {
        let trailer = verify_file(path)?;
        let path_str = utf8_path(path)?;
        let corrupt = |reason: String| Err(IndexError::corrupt(path, reason));
        let mut opened = Vec::with_capacity(handles.max(1));
        for _ in 0..handles.max(1) {
            let flags = IoFlags::from(FAISS_IO_FLAG_MMAP_IFC | FAISS_IO_FLAG_READ_ONLY);
            let index = read_index_with_flags(path_str, flags).map_err(|e| {
                IndexError::corrupt(path, format!("FAISS could not read the index: {e}"))
            })?;
            if index.d() as usize != trailer.dim as usize {
                return corrupt(format!(
                    "FAISS index has dim {}, trailer says {}",
                    index.d(),
                    trailer.dim
                ));
            }
            if index.ntotal() != trailer.count {
                return corrupt(format!(
                    "FAISS index has {} vectors, trailer says {}",
                    index.ntotal(),
                    trailer.count
                ));
            }
            if index.metric_type() != MetricType::InnerProduct || !index.is_trained() {
                return corrupt("not a trained inner-product index".into());
            }
            opened.push(Mutex::new(index));
        }
        Ok(IvfPqIndex {
            handles: opened,
            centroids: std::sync::OnceLock::new(),
            next_handle: std::sync::atomic::AtomicUsize::new(0),
            path: path.to_path_buf(),
            dim: trailer.dim as usize,
            len: trailer.count as usize,
            params: trailer.params,
        })
    }

    /// Top-`k` by inner product, best first, as `(id, score)`. `nprobe` is clamped to `1..=nlist` and applies
    /// to this call only. `k > len()` returns `len()` hits at most; FAISS's `-1` padding ids are dropped.
    pub fn search(&self, query: &[f32], k: usize, nprobe: u32) -> Result<Vec<(i64, f32)>> {
        self.check_query(query)?;
        let k = k.min(self.len);
        if k == 0 {
            return Ok(Vec::new());
        }
        // Per-call search parameters instead of mutating the index's `nprobe`: nothing shared changes,
        // so concurrent callers with different nprobe cannot see each other's setting.
        let mut ivf = SearchParametersIVF::new()?;
        ivf.set_nprobe(nprobe.clamp(1, self.params.nlist) as usize);
        let sp = ivf.upcast();
        let result = self.with_free_handle(|index| index.search_with_params(query, k, &sp))?;
        Ok(result
            .labels
            .iter()
            .zip(&result.distances)
            .filter_map(|(label, &score)| label.get().map(|id| (id as i64, score)))
            .collect())
    }

    /// A query of this index's dimension, finite.
    pub(crate) fn check_query(&self, query: &[f32]) -> Result<()> {
        if query.len() != self.dim {
            return Err(IndexError::invalid(
                "query",
                format!("dimension {} != {}", query.len(), self.dim),
            ));
        }
        if query.iter().any(|x| !x.is_finite()) {
            return Err(IndexError::invalid("query", "contains NaN or infinity"));
        }
        Ok(())
    }

    /// Runs `f` on a handle nobody else is using, or waits for the next one in turn when all are busy.
    pub(crate) fn with_free_handle<T>(&self, f: impl FnOnce(&mut IndexImpl) -> T) -> T {
        use std::sync::atomic::Ordering::Relaxed;
        let start = self.next_handle.fetch_add(1, Relaxed);
        let n = self.handles.len();
        for i in 0..n {
            if let Some(mut index) = self.handles[(start + i) % n].try_lock() {
                return f(&mut index);
            }
        }
        f(&mut self.handles[start % n].lock())
    }

    /// Number of indexed vectors.
    pub fn len(&self) -> usize {
        self.len
    }

    /// FAISS handles open on the file (the number of searches that can run at once).
    pub fn handles(&self) -> usize {
        self.handles.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The effective parameters the index was built with (`nprobe` is the suggested default).
    pub fn params(&self) -> IvfPqParams {
        self.params
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// An IVF_PQ index under construction: trained once, then fed vectors in batches, then written. Only the
/// compressed codes (m bytes + an 8-byte id per vector) accumulate in memory, so a caller can stream more
/// raw vectors through it than would fit in RAM (`attest-lab bench` builds 10M × 384-d this way).
pub struct IvfPqBuilder {
    index: IndexImpl,
    dim: usize,
    count: usize,
    params: IvfPqParams,
}

impl std::fmt::Debug for IvfPqBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IvfPqBuilder")
            .field("dim", &self.dim)
            .field("count", &self.count)
            .field("params", &self.params)
            .finish()
    }
}

impl IvfPqBuilder {
    /// Trains the coarse quantizer and the PQ codebooks on `train` (row-major, at least one row) with
    /// `params.effective(n_train, dim)`.
    pub fn train(dim: usize, params: &IvfPqParams, train: &[f32]) -> Result<Self> {
        params.validate()?;
        if dim == 0 || dim > i32::MAX as usize {
            return Err(IndexError::invalid(
                "dim",
                format!("must be in 1..2^31, got {dim}"),
            ));
        }
        check_rows("train", train, dim)?;
        let n_train = train.len() / dim;
        if n_train == 0 {
            return Err(IndexError::invalid(
                "train",
                "at least one training vector is needed",
            ));
        }
        let eff = params.effective(n_train, dim);
        let mut index = faiss::index_factory(
            dim as u32,
            eff.factory_description(),
            MetricType::InnerProduct,
        )?;
        // k-means needs at least as many points as centroids; `effective` guarantees that except for the
        // PQ codebooks of a 1-row training set, where repeating the row is harmless (all codes coincide).
        let need = (eff.nlist as usize).max(1 << eff.nbits);
        index.train(&repeat_rows(train, dim, need))?;
        Ok(IvfPqBuilder {
            index,
            dim,
            count: 0,
            params: eff,
        })
    }

    /// Encodes and adds one batch of `vectors` (row-major) under `ids` (non-negative, one per row).
    pub fn add(&mut self, vectors: &[f32], ids: &[i64]) -> Result<()> {
        check_rows("vectors", vectors, self.dim)?;
        let n = vectors.len() / self.dim;
        if ids.len() != n {
            return Err(IndexError::invalid(
                "ids",
                format!("{} ids for {n} vectors", ids.len()),
            ));
        }
        if let Some(bad) = ids.iter().find(|&&id| id < 0) {
            return Err(IndexError::invalid(
                "ids",
                format!("ids must be non-negative, got {bad}"),
            ));
        }
        if n > 0 {
            let idx: Vec<Idx> = ids.iter().map(|&id| Idx::new(id as u64)).collect();
            self.index.add_with_ids(vectors, &idx)?;
            self.count += n;
        }
        Ok(())
    }

    /// Vectors added so far.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub(crate) fn from_parts(
        index: IndexImpl,
        dim: usize,
        count: usize,
        params: IvfPqParams,
    ) -> Self {
        IvfPqBuilder {
            index,
            dim,
            count,
            params,
        }
    }

    pub(crate) fn index(&self) -> &IndexImpl {
        &self.index
    }

    pub(crate) fn index_mut(&mut self) -> &mut IndexImpl {
        &mut self.index
    }

    pub(crate) fn set_len(&mut self, count: usize) {
        self.count = count;
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The effective parameters the index is trained with.
    pub fn params(&self) -> IvfPqParams {
        self.params
    }

    /// Writes the index with its trailer to `path` atomically and returns the effective parameters.
    pub fn write(self, path: &Path) -> Result<IvfPqParams> {
        self.write_relabelled(path, None)
    }

    /// [`Self::write`], with every label `l` of the index written as `rows[l]` when `rows` is given
    /// ([`crate::labels`]: a merged segment's index then returns its row numbers).
    pub fn write_relabelled(self, path: &Path, rows: Option<&[i64]>) -> Result<IvfPqParams> {
        let path_str = utf8_path(path)?;
        utf8_path(&crate::fsutil::tmp_path(path))?;
        let trailer = Trailer {
            faiss_len: 0,
            count: self.count as u64,
            dim: self.dim as u32,
            params: self.params,
        };
        crate::fsutil::write_atomically_with(path, |tmp| {
            let tmp_str = tmp.to_str().expect("checked UTF-8 above");
            write_index(&self.index, tmp_str)?;
            if let Some(rows) = rows {
                crate::labels::relabel_written(tmp, &self.index, self.params.code_size(), rows)?;
            }
            append_trailer(tmp, trailer)
        })?;
        tracing::debug!(path = path_str, n = self.count, params = ?self.params, "built IVF_PQ index");
        Ok(self.params)
    }
}

/// Set at build time when FAISS was compiled with its AVX2 kernels (`cmake/faiss-avx2.cmake`, named by the
/// workspace's `.cargo/config.toml` on x86-64).
const FAISS_BUILT_FOR_AVX2: bool =
    option_env!("CMAKE_TOOLCHAIN_FILE_x86_64_unknown_linux_gnu").is_some();

/// The SIMD level the linked FAISS was compiled for, as FAISS's `FAISS_OPT_LEVEL` names it.
pub fn faiss_opt_level() -> &'static str {
    if FAISS_BUILT_FOR_AVX2 {
        "avx2"
    } else {
        "generic"
    }
}

/// Refuses to go on, with the reason, on a CPU the linked FAISS cannot run on (it would stop on an illegal
/// instruction at the first search). `attest` calls this before any command, client commands included.
pub fn check_cpu() -> std::result::Result<(), String> {
    #[cfg(target_arch = "x86_64")]
    if FAISS_BUILT_FOR_AVX2
        && !(std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c"))
    {
        return Err("this attest binary's FAISS was built for AVX2, FMA and F16C (x86-64-v3, Intel Haswell / \
                    AMD Excavator or later) and this CPU lacks them; for older CPUs build it without \
                    `.cargo/config.toml`'s CMAKE_TOOLCHAIN_FILE setting, after `cargo clean -p faiss-sys` \
                    (README)"
            .to_string());
    }
    Ok(())
}

/// √rows rounded up to a power of two: the list count a set of `rows` vectors is searched best with. Lists of ~√n
/// vectors keep both the coarse search (nlist centroids) and the scan of nprobe lists small.
pub fn nlist_for_rows(rows: usize) -> u32 {
    ((rows as f64).sqrt().ceil() as u32).next_power_of_two()
}

/// Orders `(row, score)` best first: higher score, then lower row; NaN counts as the worst score.
pub(crate) fn best_first<T: Ord>(a: &(T, f32), b: &(T, f32)) -> Ordering {
    let rank = |s: f32| if s.is_nan() { f32::NEG_INFINITY } else { s };
    rank(b.1).total_cmp(&rank(a.1)).then_with(|| a.0.cmp(&b.0))
}

/// A FAISS C API status as a result: non-zero means FAISS threw (or the index was not an IVF one).
pub(crate) fn faiss_status(code: std::os::raw::c_int, what: &str) -> Result<()> {
    if code == 0 {
        Ok(())
    } else {
        Err(IndexError::invalid(
            "faiss",
            format!("{what} failed with code {code}"),
        ))
    }
}

fn check_rows(field: &str, data: &[f32], dim: usize) -> Result<()> {
    if !data.len().is_multiple_of(dim) {
        return Err(IndexError::invalid(
            field,
            format!("length {} is not a multiple of dim {dim}", data.len()),
        ));
    }
    if data.iter().any(|x| !x.is_finite()) {
        return Err(IndexError::invalid(field, "contains NaN or infinity"));
    }
    Ok(())
}

/// faiss-rs passes file names as C strings made from `&str`.
fn utf8_path(path: &Path) -> Result<&str> {
    path.to_str().ok_or_else(|| {
        IndexError::invalid("path", format!("{} is not valid UTF-8", path.display()))
    })
}

/// `data`'s rows cycled until there are at least `rows` of them.
fn repeat_rows(data: &[f32], dim: usize, rows: usize) -> Cow<'_, [f32]> {
    if data.len() >= rows * dim {
        return Cow::Borrowed(data);
    }
    Cow::Owned(data.iter().copied().cycle().take(rows * dim).collect())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::trailer::TRAILER_LEN;
    use super::*;
    use crate::simd::dot;
    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn index_is_send_and_sync() {
        assert_send_sync::<IvfPqIndex>();
    }

    pub(crate) fn unit_vectors(n: usize, dim: usize, seed: u64) -> Vec<f32> {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut v: Vec<f32> = (0..n * dim).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
        for row in v.chunks_exact_mut(dim) {
            let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
            row.iter_mut().for_each(|x| *x /= norm);
        }
        v
    }

    fn build_and_open(
        dir: &Path,
        n: usize,
        dim: usize,
        params: &IvfPqParams,
    ) -> (IvfPqIndex, Vec<f32>, IvfPqParams) {
        let vectors = unit_vectors(n, dim, n as u64);
        let ids: Vec<i64> = (0..n as i64).collect();
        let path = dir.join(format!("dense-{n}.faiss"));
        let eff = IvfPqIndex::build(&path, dim, params, &vectors, &vectors, &ids).unwrap();
        let index = IvfPqIndex::open_mmap(&path).unwrap();
        (index, vectors, eff)
    }

    fn p(nlist: u32, m: u32, nbits: u32, nprobe: u32) -> IvfPqParams {
        IvfPqParams {
            nlist,
            m,
            nbits,
            nprobe,
        }
    }

    #[test]
    fn streamed_batches_build_the_same_index_as_one_call() {
        let dir = tempfile::tempdir().unwrap();
        let (dim, n) = (16, 2_000);
        let params = p(16, 4, 8, 4);
        let vectors = unit_vectors(n, dim, 11);
        let ids: Vec<i64> = (0..n as i64).collect();
        let whole = dir.path().join("whole.faiss");
        IvfPqIndex::build(&whole, dim, &params, &vectors, &vectors, &ids).unwrap();
        let streamed = dir.path().join("streamed.faiss");
        let mut builder = IvfPqBuilder::train(dim, &params, &vectors).unwrap();
        for (rows, batch_ids) in vectors.chunks(dim * 300).zip(ids.chunks(300)) {
            builder.add(rows, batch_ids).unwrap();
        }
        assert_eq!(builder.len(), n);
        assert!(builder.add(&vectors[..dim], &[]).is_err());
        builder.write(&streamed).unwrap();
        let (a, b) = (
            IvfPqIndex::open_mmap(&whole).unwrap(),
            IvfPqIndex::open_mmap(&streamed).unwrap(),
        );
        assert_eq!(b.len(), n);
        for q in vectors.chunks(dim).take(20) {
            assert_eq!(a.search(q, 10, 4).unwrap(), b.search(q, 10, 4).unwrap());
        }
    }

    #[test]
    fn concurrent_searches_on_several_handles_match_sequential_ones() {
        let dir = tempfile::tempdir().unwrap();
        let (dim, n) = (16, 2_000);
        let (single, vectors, _) = build_and_open(dir.path(), n, dim, &p(16, 4, 8, 4));
        let pooled = IvfPqIndex::open_mmap_with_handles(single.path(), 3).unwrap();
        assert_eq!(pooled.handles(), 3);
        let expected: Vec<_> = vectors
            .chunks(dim)
            .take(60)
            .map(|q| single.search(q, 10, 4).unwrap())
            .collect();
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        vectors
                            .chunks(dim)
                            .take(60)
                            .map(|q| pooled.search(q, 10, 4).unwrap())
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            for w in workers {
                assert_eq!(w.join().unwrap(), expected);
            }
        });
    }

    #[test]
    fn batched_exact_search_agrees_with_the_scan() {
        let dim = 12;
        let vectors = unit_vectors(3_000, dim, 5);
        let queries = unit_vectors(7, dim, 6);
        let batch = exact_search_batch(&vectors, dim, &queries, 10).unwrap();
        for (q, got) in queries.chunks(dim).zip(&batch) {
            let want = exact_search(&vectors, dim, q, 10);
            let rows = |l: &[(usize, f32)]| l.iter().map(|h| h.0).collect::<Vec<_>>();
            assert_eq!(rows(got), rows(&want));
        }
    }

    #[test]
    fn defaults_are_documented_values() {
        assert_eq!(IvfPqParams::default(), p(1024, 96, 8, 32));
        assert_eq!(
            IvfPqParams::default().effective(5_000_000, 384),
            IvfPqParams::default()
        );
    }

    #[test]
    fn effective_examples() {
        let d = IvfPqParams::default();
        assert_eq!(d.effective(0, 384), p(1, 96, 1, 1));
        assert_eq!(d.effective(1, 384), p(1, 96, 1, 1));
        assert_eq!(d.effective(10, 384), p(1, 96, 3, 1));
        assert_eq!(d.effective(300, 384), p(7, 96, 8, 7));
        assert_eq!(d.effective(39 * 1024, 384), p(1024, 96, 8, 32));
        assert_eq!(d.effective(39 * 1024 - 1, 384), p(1023, 96, 8, 32));
        assert_eq!(d.effective(50_000, 384), p(1024, 96, 8, 32));
        assert_eq!(d.effective(50_000, 768), p(1024, 96, 8, 32));
        assert_eq!(d.effective(50_000, 100), p(1024, 50, 8, 32));
        assert_eq!(d.effective(50_000, 97), p(1024, 1, 8, 32));
        assert_eq!(d.effective(50_000, 1024), p(1024, 64, 8, 32));
    }

    proptest! {
        #[test]
        fn effective_is_buildable_and_monotone(
            nlist in 1u32..5000, m in 1u32..200, nbits in 1u32..=16, nprobe in 1u32..5000,
            n in 0usize..2_000_000, dim in 1usize..1024,
        ) {
            let p = IvfPqParams { nlist, m, nbits, nprobe };
            let e = p.effective(n, dim);
            prop_assert!(e.validate().is_ok());
            prop_assert!(e.nlist >= 1 && e.nlist <= nlist);
            prop_assert!(e.nlist == 1 || e.nlist as usize * MIN_POINTS_PER_LIST <= n);
            prop_assert!(e.m >= 1 && e.m <= m && dim % e.m as usize == 0);
            // No larger divisor of dim was available below m.
            prop_assert!(((e.m + 1)..=m.min(dim as u32)).all(|c| dim % c as usize != 0));
            prop_assert!(e.nbits >= 1 && e.nbits <= nbits);
            prop_assert!(n <= 1 || (1usize << e.nbits) <= n);
            prop_assert!(e.nbits == nbits || n < 2 || (1usize << (e.nbits + 1)) > n);
            prop_assert!(e.nprobe >= 1 && e.nprobe <= e.nlist && e.nprobe <= nprobe);
            prop_assert_eq!(e.effective(n, dim), e, "idempotent");
        }
    }

    #[test]
    fn validate_rejects_nonsense() {
        for p in [
            IvfPqParams {
                nlist: 0,
                ..Default::default()
            },
            IvfPqParams {
                m: 0,
                ..Default::default()
            },
            IvfPqParams {
                nbits: 0,
                ..Default::default()
            },
            IvfPqParams {
                nbits: 17,
                ..Default::default()
            },
            IvfPqParams {
                nprobe: 0,
                ..Default::default()
            },
        ] {
            assert!(
                matches!(p.validate(), Err(IndexError::InvalidArgument { .. })),
                "{p:?}"
            );
        }
    }

    #[test]
    fn small_segments_build_and_search() {
        let dir = tempfile::tempdir().unwrap();
        let dim = 384;
        for n in [1usize, 10, 300, 5000] {
            let (index, vectors, eff) = build_and_open(dir.path(), n, dim, &IvfPqParams::default());
            assert_eq!(eff, IvfPqParams::default().effective(n, dim));
            assert_eq!(index.params(), eff);
            assert_eq!(
                (index.len(), index.dim(), index.is_empty()),
                (n, dim, false)
            );
            // k larger than the index: at most n hits, all distinct valid ids, best first.
            let q = &vectors[0..dim];
            let hits = index.search(q, n + 5, eff.nlist).unwrap();
            assert!(
                !hits.is_empty() && hits.len() <= n,
                "n={n}: {} hits",
                hits.len()
            );
            assert!(
                hits.windows(2).all(|w| w[0].1 >= w[1].1),
                "n={n}: not best first"
            );
            let mut ids: Vec<i64> = hits.iter().map(|h| h.0).collect();
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(ids.len(), hits.len());
            assert!(ids.iter().all(|&id| (0..n as i64).contains(&id)));
            // Probing every list, a stored vector finds itself among its top hits.
            let top = index.search(q, 10, eff.nlist).unwrap();
            assert!(
                top.iter().any(|h| h.0 == 0),
                "n={n}: row 0 not in its own top 10: {top:?}"
            );
            assert!(index.search(q, 0, 1).unwrap().is_empty());
        }
    }

    #[test]
    fn search_rejects_bad_queries() {
        let dir = tempfile::tempdir().unwrap();
        let (index, _, _) = build_and_open(
            dir.path(),
            100,
            16,
            &IvfPqParams {
                m: 4,
                ..Default::default()
            },
        );
        assert!(matches!(
            index.search(&[0.0; 15], 5, 1),
            Err(IndexError::InvalidArgument { .. })
        ));
        let mut q = vec![0.0; 16];
        q[3] = f32::NAN;
        assert!(matches!(
            index.search(&q, 5, 1),
            Err(IndexError::InvalidArgument { .. })
        ));
    }

    #[test]
    fn build_rejects_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.faiss");
        let p = IvfPqParams::default();
        let v = unit_vectors(4, 8, 1);
        let ids = [0i64, 1, 2, 3];
        let invalid = |r: Result<IvfPqParams>| matches!(r, Err(IndexError::InvalidArgument { .. }));
        assert!(invalid(IvfPqIndex::build(&path, 0, &p, &v, &v, &ids)));
        assert!(invalid(IvfPqIndex::build(&path, 8, &p, &[], &v, &ids)));
        assert!(invalid(IvfPqIndex::build(&path, 8, &p, &v[..7], &v, &ids)));
        assert!(invalid(IvfPqIndex::build(&path, 8, &p, &v, &v, &ids[..3])));
        assert!(invalid(IvfPqIndex::build(
            &path,
            8,
            &p,
            &v,
            &v,
            &[0, 1, -1, 3]
        )));
        assert!(invalid(IvfPqIndex::build(
            &path,
            8,
            &IvfPqParams { nbits: 0, ..p },
            &v,
            &v,
            &ids
        )));
        let mut nan = v.clone();
        nan[5] = f32::NAN;
        assert!(invalid(IvfPqIndex::build(&path, 8, &p, &nan, &v, &ids)));
        assert!(!path.exists());
    }

    #[test]
    fn empty_vectors_build_an_empty_index() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.faiss");
        let train = unit_vectors(50, 8, 3);
        IvfPqIndex::build(&path, 8, &IvfPqParams::default(), &train, &[], &[]).unwrap();
        let index = IvfPqIndex::open_mmap(&path).unwrap();
        assert!(index.is_empty());
        assert!(index.search(&train[..8], 10, 4).unwrap().is_empty());
    }

    #[test]
    fn ids_are_the_given_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ids.faiss");
        let dim = 16;
        let v = unit_vectors(200, dim, 5);
        let ids: Vec<i64> = (0..200).map(|i| 1_000_000 + 7 * i).collect();
        let p = IvfPqParams {
            m: 16,
            ..Default::default()
        };
        IvfPqIndex::build(&path, dim, &p, &v, &v, &ids).unwrap();
        let index = IvfPqIndex::open_mmap(&path).unwrap();
        let hits = index.search(&v[dim * 42..dim * 43], 200, 1000).unwrap();
        assert_eq!(hits.len(), 200);
        assert_eq!(hits[0].0, 1_000_000 + 7 * 42);
    }

    #[test]
    fn nprobe_is_honoured_by_the_mmapped_index() {
        // Widely spread data in many lists: probing one list can only see that list's members, probing all
        // lists sees everything, so the hit counts differ if and only if nprobe reaches FAISS.
        let dir = tempfile::tempdir().unwrap();
        let dim = 32;
        let n = 4000;
        let p = IvfPqParams {
            nlist: 64,
            m: 8,
            nbits: 8,
            nprobe: 1,
        };
        let (index, vectors, eff) = build_and_open(dir.path(), n, dim, &p);
        assert_eq!(eff.nlist, 64);
        let q = &vectors[0..dim];
        let one = index.search(q, n, 1).unwrap();
        let all = index.search(q, n, 64).unwrap();
        let clamped = index.search(q, n, 10_000).unwrap();
        assert!(one.len() < n / 8, "nprobe=1 returned {} of {n}", one.len());
        assert_eq!(all.len(), n);
        assert_eq!(clamped.len(), n);
        // nprobe 0 is clamped to 1 rather than rejected by FAISS.
        assert_eq!(index.search(q, n, 0).unwrap().len(), one.len());
    }

    #[test]
    fn opened_index_is_memory_mapped() {
        let dir = tempfile::tempdir().unwrap();
        let (index, _, _) = build_and_open(
            dir.path(),
            300,
            64,
            &IvfPqParams {
                m: 16,
                ..Default::default()
            },
        );
        let canonical = std::fs::canonicalize(index.path()).unwrap();
        let needle = canonical.to_str().unwrap().to_string();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        assert!(
            maps.lines().any(|l| l.ends_with(&needle)),
            "{needle} not mapped:\n{maps}"
        );
        drop(index);
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        assert!(
            !maps.lines().any(|l| l.ends_with(&needle)),
            "{needle} still mapped after drop"
        );
    }

    fn corrupt_reason(path: &Path) -> String {
        match IvfPqIndex::open_mmap(path) {
            Err(IndexError::Corrupt { reason, .. }) => reason,
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }

    #[test]
    fn truncated_and_garbage_files_are_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let (index, _, _) = build_and_open(
            dir.path(),
            300,
            64,
            &IvfPqParams {
                m: 16,
                ..Default::default()
            },
        );
        let good = std::fs::read(index.path()).unwrap();
        drop(index);
        let path = dir.path().join("bad.faiss");

        for len in [
            0,
            1,
            47,
            48,
            49,
            100,
            good.len() / 2,
            good.len() - TRAILER_LEN,
            good.len() - 1,
        ] {
            std::fs::write(&path, &good[..len]).unwrap();
            corrupt_reason(&path);
        }
        let mut rng = StdRng::seed_from_u64(9);
        for pos in [
            0,
            10,
            good.len() / 3,
            good.len() - TRAILER_LEN - 1,
            good.len() - 20,
            good.len() - 1,
        ] {
            let mut bad = good.clone();
            bad[pos] ^= 1 << rng.gen_range(0..8);
            std::fs::write(&path, &bad).unwrap();
            corrupt_reason(&path);
        }
        let garbage: Vec<u8> = (0..good.len()).map(|_| rng.gen()).collect();
        std::fs::write(&path, &garbage).unwrap();
        corrupt_reason(&path);
        // Garbage behind a well-formed trailer with a matching checksum: FAISS itself rejects it, and its
        // exception must come back as Corrupt too.
        let body = b"this is not a faiss index at all".repeat(8);
        let trailer = Trailer {
            faiss_len: 0,
            count: 1,
            dim: 64,
            params: IvfPqParams::default(),
        };
        std::fs::write(&path, &body).unwrap();
        append_trailer(&path, trailer).unwrap();
        let reason = corrupt_reason(&path);
        assert!(reason.contains("FAISS"), "{reason}");
        // A missing file is an I/O error, not corruption.
        assert!(matches!(
            IvfPqIndex::open_mmap(&dir.path().join("missing")),
            Err(IndexError::Io(_))
        ));
    }

    #[test]
    fn concurrent_searches_agree_with_serial_ones() {
        let dir = tempfile::tempdir().unwrap();
        let dim = 32;
        let (index, vectors, _) = build_and_open(
            dir.path(),
            2000,
            dim,
            &IvfPqParams {
                m: 8,
                ..Default::default()
            },
        );
        let expected: Vec<_> = (0..40)
            .map(|i| {
                index
                    .search(&vectors[i * dim..(i + 1) * dim], 10, 8)
                    .unwrap()
            })
            .collect();
        let index = std::sync::Arc::new(index);
        let vectors = std::sync::Arc::new(vectors);
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (index, vectors) = (index.clone(), vectors.clone());
                std::thread::spawn(move || {
                    (0..40)
                        .map(|i| {
                            index
                                .search(&vectors[i * dim..(i + 1) * dim], 10, 8)
                                .unwrap()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap(), expected);
        }
    }

    /// The workspace builds FAISS with its AVX2 kernels on x86-64 (1.4× the searches per second at 10M vectors,
    /// docs/BENCHMARKS.md), and this machine can run them.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn faiss_is_built_for_avx2_and_the_cpu_check_passes_here() {
        assert_eq!(
            faiss_opt_level(),
            "avx2",
            ".cargo/config.toml no longer names cmake/faiss-avx2.cmake"
        );
        assert_eq!(check_cpu(), Ok(()));
    }

    #[test]
    fn exact_search_orders_best_first_with_row_ties() {
        let v = [1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.6, 0.8, -1.0, 0.0];
        assert_eq!(
            exact_search(&v, 2, &[1.0, 0.0], 3),
            vec![(0, 1.0), (2, 1.0), (3, 0.6)]
        );
        assert_eq!(exact_search(&v, 2, &[1.0, 0.0], 10).len(), 5);
        assert!(exact_search(&v, 2, &[1.0, 0.0], 0).is_empty());
        assert!(exact_search(&[], 2, &[1.0, 0.0], 3).is_empty());
        let with_nan = [f32::NAN, 0.0, 0.5, 0.0];
        assert_eq!(exact_search(&with_nan, 2, &[1.0, 0.0], 2)[0], (1, 0.5));
    }

    #[test]
    fn exact_search_matches_faiss_flat() {
        let dim = 37; // not a multiple of the 8-wide accumulator
        let n = 3000;
        let v = unit_vectors(n, dim, 11);
        let q = unit_vectors(20, dim, 12);
        let mut flat = faiss::index_factory(dim as u32, "Flat", MetricType::InnerProduct).unwrap();
        flat.add(&v).unwrap();
        let k = 25;
        let res = flat.search(&q, k).unwrap();
        for (qi, query) in q.chunks_exact(dim).enumerate() {
            let ours = exact_search(&v, dim, query, k);
            for (j, (row, score)) in ours.iter().enumerate() {
                let theirs = res.distances[qi * k + j];
                assert!(
                    (score - theirs).abs() < 1e-4,
                    "q{qi} rank {j}: {score} vs {theirs}"
                );
                assert!((dot(query, &v[row * dim..(row + 1) * dim]) - score).abs() < 1e-6);
            }
        }
    }
}
