//! The shard's own IVF_PQ quantizer (issue 18): coarse centroids and PQ codebooks trained once the shard holds
//! enough vectors for the configured `nlist` and `2^nbits` codewords (on at most `EngineConfig::training_rows` of them),
//! persisted as `quantizer/v<N>.faiss` (a trained, empty index with the usual trailer) and recorded in the
//! manifest with its version. Every segment sealed after that encodes with it — no k-means per segment — and a
//! merge of segments of the same version moves their inverted lists into one index (FAISS `IndexIVF::merge_from`)
//! and removes the dead ids instead of training and encoding again ([`crate::merge`]).
//!
//! Drift: the quantizer keeps the mean squared reconstruction error of its training sample. Each seal measures
//! the error of a sample of its own vectors; past `quantizer_drift_bound` × that baseline the data has moved away
//! from the codebooks and a new version is trained on the new vectors. Segments of older versions keep serving
//! (each segment's index file carries its own centroids and codebooks) and are re-encoded, without training, the
//! next time they are merged. A changed `nlist`, `m` or `nbits` in the configuration trains a new version the same
//! way (the operator sizing the lists for a grown shard).
//!
//! Labels: a segment encoded with a quantizer keeps the global id of each row (see [`global_ids`]) in its id file,
//! and its index returns row numbers (`SegmentMeta::row_labels`). A merge offsets each input's labels into one space and maps them to the merged
//! segment's rows as it writes the index ([`crate::merge`]).

use std::path::{Path, PathBuf};

use faiss::index::io::read_index;
use faiss::index::TryClone;
use faiss::selector::IdSelector;
use faiss::{Idx, Index};
use serde::{Deserialize, Serialize};

use crate::error::{IndexError, Result};
use crate::ivfpq::{faiss_status, verify_file, IvfPqBuilder, IvfPqParams};

/// Bits of a global row id that number the chunks of one log record (a document write).
const CHUNK_BITS: u32 = 16;
/// Most chunks one document may have: a chunk's position in its document must fit its global id.
pub const MAX_CHUNKS_PER_DOCUMENT: usize = 1 << CHUNK_BITS;
/// Most vectors of the training set whose reconstruction error is the baseline (measured once per version).
const ERROR_SAMPLE: usize = 2_000;
/// Most vectors of a seal whose reconstruction error is compared with the baseline. Encoding a vector costs
/// ~150 µs here, and every seal measures: 2,000 took 59 s of a 10M-row ingest (docs/BENCHMARKS.md). The mean
/// over 500 spread rows is within a few percent of the seal's, against a bound of 1.5 × the baseline.
const DRIFT_SAMPLE: usize = 500;

/// What the manifest records about the shard's quantizer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuantizerMeta {
    /// Increases with every retraining; a segment records the version it was encoded with.
    pub version: u64,
    pub params: IvfPqParams,
    /// Vectors it was trained on.
    pub trained_rows: usize,
    /// Mean squared reconstruction error of (a sample of) its training vectors.
    pub baseline_error: f32,
    /// CRC-32 of the file.
    pub crc: u32,
}

/// The trained quantizer, in memory: every encoder is a copy of it.
pub struct ShardQuantizer {
    pub meta: QuantizerMeta,
    trained: parking_lot::Mutex<IvfPqBuilder>,
}

impl std::fmt::Debug for ShardQuantizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardQuantizer")
            .field("meta", &self.meta)
            .finish()
    }
}

/// `quantizer/v<version>.faiss` under the shard directory.
pub fn quantizer_path(root: &Path, version: u64) -> PathBuf {
    root.join("quantizer").join(format!("v{version:06}.faiss"))
}

/// True when `rows` vectors are enough to train the configured parameters in full (not the reduced ones a small
/// segment gets from [`IvfPqParams::effective`]).
pub fn enough_to_train(params: &IvfPqParams, rows: usize, dim: usize) -> bool {
    params.effective(rows, dim) == *params
}

impl ShardQuantizer {
    /// Trains version `version` on `sample` (row-major) and writes it under `root` (atomically, fsynced). The
    /// baseline error is measured on `held_out` (vectors of the same data not trained on: the training vectors
    /// themselves reconstruct better than any new ones, most of all from a small sample).
    pub fn train(
        root: &Path,
        version: u64,
        dim: usize,
        params: &IvfPqParams,
        sample: &[f32],
        held_out: &[f32],
    ) -> Result<Self> {
        let trained = IvfPqBuilder::train(dim, params, sample)?;
        let baseline_error = trained.reconstruction_error(spread(held_out, dim, ERROR_SAMPLE))?;
        let path = quantizer_path(root, version);
        std::fs::create_dir_all(path.parent().expect("under root"))?;
        let params = trained.try_clone()?.write(&path)?;
        let crc = crate::fsutil::file_crc32(&path)?;
        Ok(ShardQuantizer {
            meta: QuantizerMeta {
                version,
                params,
                trained_rows: sample.len() / dim,
                baseline_error,
                crc,
            },
            trained: parking_lot::Mutex::new(trained),
        })
    }

    /// Opens the quantizer the manifest names, checking its file; a damaged one is `Corrupt`.
    pub fn open(root: &Path, meta: &QuantizerMeta) -> Result<Self> {
        let path = quantizer_path(root, meta.version);
        let crc = crate::fsutil::file_crc32(&path)?;
        if crc != meta.crc {
            return Err(IndexError::corrupt(
                &path,
                format!("checksum {crc:08x}, manifest says {:08x}", meta.crc),
            ));
        }
        let trained = IvfPqBuilder::read(&path)?;
        if !trained.is_empty() {
            return Err(IndexError::corrupt(&path, "a quantizer holds no vectors"));
        }
        Ok(ShardQuantizer {
            meta: meta.clone(),
            trained: parking_lot::Mutex::new(trained),
        })
    }

    /// An empty index trained with this quantizer, to add or merge vectors into.
    pub fn encoder(&self) -> Result<IvfPqBuilder> {
        self.trained.lock().try_clone()
    }

    /// The reconstruction error of (a sample of) `vectors` over this quantizer's baseline: 1 means as well
    /// encoded as its training data.
    pub fn drift(&self, vectors: &[f32]) -> Result<f32> {
        let trained = self.trained.lock();
        let sample = spread(vectors, trained.dim(), DRIFT_SAMPLE);
        let error = trained.reconstruction_error(sample)?;
        Ok(error / self.meta.baseline_error.max(f32::EPSILON))
    }
}

/// `take` of the positions `0..n` (all of them when `take ≥ n`), evenly spread, ascending.
pub fn evenly_spread(n: usize, take: usize) -> impl Iterator<Item = usize> {
    let take = take.min(n);
    (0..take).map(move |j| (j as u128 * n as u128 / take as u128) as usize)
}

/// `data` (row-major) split for training: at most `most` rows evenly spread to train on, and rows not among
/// them to measure the baseline error on — the rows left over, or when every row is needed every tenth row (if
/// the rest still trains `params` in full; otherwise everything trains and is measured).
pub fn split_for_training(
    data: &[f32],
    dim: usize,
    most: usize,
    params: &IvfPqParams,
) -> (Vec<f32>, Vec<f32>) {
    let n = data.len() / dim.max(1);
    let row = |r: usize| &data[r * dim..(r + 1) * dim];
    let (train, held): (Vec<usize>, Vec<usize>) = if n > most {
        // Exactly `most`: a stride of whole rows could leave half of them, too few for the lists asked for.
        let mut picked = vec![false; n];
        evenly_spread(n, most).for_each(|r| picked[r] = true);
        (0..n).partition(|&r| picked[r])
    } else if enough_to_train(params, n - n / 10, dim) && n >= 10 {
        (0..n).partition(|r| r % 10 != 9)
    } else {
        return (data.to_vec(), data.to_vec());
    };
    let rows = |pick: Vec<usize>| {
        pick.into_iter()
            .flat_map(row)
            .copied()
            .collect::<Vec<f32>>()
    };
    (rows(train), rows(held))
}

/// At most `most` rows of `data`, evenly spread (rows arrive grouped by topic).
pub fn spread(data: &[f32], dim: usize, most: usize) -> std::borrow::Cow<'_, [f32]> {
    let n = data.len() / dim.max(1);
    if n <= most {
        return std::borrow::Cow::Borrowed(data);
    }
    let step = n.div_ceil(most.max(1));
    std::borrow::Cow::Owned(
        (0..n)
            .step_by(step)
            .flat_map(|r| data[r * dim..(r + 1) * dim].iter().copied())
            .collect(),
    )
}

/// Global ids of rows given by their log sequence numbers (in row order; the chunks of one log record
/// contiguous and in order, as every segment holds them): the record's sequence number in the high bits, the
/// chunk's position in it in the low 16. Unique within the shard, so the inverted lists of any segments can be
/// merged as they are, and ascending in row order.
pub fn global_ids(seqs: impl IntoIterator<Item = u64>) -> Result<Vec<i64>> {
    let mut out = Vec::new();
    let mut previous: Option<u64> = None;
    let mut chunk = 0u64;
    for seq in seqs {
        chunk = if previous == Some(seq) { chunk + 1 } else { 0 };
        previous = Some(seq);
        if chunk >= 1 << CHUNK_BITS || seq >= 1 << (63 - CHUNK_BITS) {
            return Err(IndexError::invalid(
                "rows",
                format!("record {seq} chunk {chunk} has no global id"),
            ));
        }
        out.push(((seq << CHUNK_BITS) | chunk) as i64);
    }
    Ok(out)
}

impl IvfPqBuilder {
    /// Reads a written index into memory (not mapped), to add to or merge into it.
    pub fn read(path: &Path) -> Result<Self> {
        let trailer = verify_file(path)?;
        let path_str = path
            .to_str()
            .ok_or_else(|| IndexError::invalid("path", "not UTF-8"))?;
        let index = read_index(path_str)
            .map_err(|e| IndexError::corrupt(path, format!("FAISS could not read it: {e}")))?;
        Ok(IvfPqBuilder::from_parts(
            index,
            trailer.dim as usize,
            trailer.count as usize,
            trailer.params,
        ))
    }

    /// An independent copy.
    pub fn try_clone(&self) -> Result<Self> {
        Ok(IvfPqBuilder::from_parts(
            self.index().try_clone()?,
            self.dim(),
            self.len(),
            self.params(),
        ))
    }

    /// Moves every entry of the index written at `path` into this one, `add_to_labels` added to its label
    /// (FAISS `merge_from`'s `add_id`): both must have been encoded with the same trained quantizer (the caller
    /// knows by its version; FAISS checks the shapes).
    pub fn merge_file(&mut self, path: &Path, add_to_labels: i64) -> Result<usize> {
        let other = IvfPqBuilder::read(path)?;
        if other.dim() != self.dim() || other.params() != self.params() {
            return Err(IndexError::invalid(
                "merge",
                format!("{} was built with other parameters", path.display()),
            ));
        }
        let moved = other.len();
        // SAFETY: both pointers are live FAISS indexes owned by their builders for the whole call; the casts
        // return null (checked) for anything that is not an IndexIVF.
        let code = unsafe {
            let into = faiss_sys::faiss_IndexIVF_cast(self.index().inner_ptr());
            let from = faiss_sys::faiss_IndexIVF_cast(other.index().inner_ptr());
            if into.is_null() || from.is_null() {
                return Err(IndexError::invalid("merge", "not an IVF index"));
            }
            faiss_sys::faiss_IndexIVF_merge_from(into, from, add_to_labels)
        };
        faiss_status(code, "merge_from")?;
        self.set_len(self.len() + moved);
        Ok(moved)
    }

    /// Removes the entries with these ids; returns how many there were.
    pub fn remove_ids(&mut self, ids: &[i64]) -> Result<usize> {
        if ids.is_empty() {
            return Ok(0);
        }
        let idx: Vec<Idx> = ids.iter().map(|&id| Idx::new(id as u64)).collect();
        let selector = IdSelector::batch(&idx)?;
        let removed = self.index_mut().remove_ids(&selector)?;
        self.set_len(self.len() - removed);
        Ok(removed)
    }

    /// Mean squared error between `vectors` and their reconstruction from this index's codes (coarse list and
    /// PQ code: FAISS's standalone codec).
    pub fn reconstruction_error(&self, vectors: impl AsRef<[f32]>) -> Result<f32> {
        let vectors = vectors.as_ref();
        let dim = self.dim();
        let n = vectors.len() / dim;
        if n == 0 {
            return Ok(0.0);
        }
        let ptr = self.index().inner_ptr();
        let mut code_size = 0usize;
        // SAFETY: `ptr` is a live, trained index; the buffers are sized as FAISS documents (n × code size bytes,
        // n × dim floats).
        unsafe {
            faiss_status(
                faiss_sys::faiss_Index_sa_code_size(ptr, &mut code_size),
                "sa_code_size",
            )?;
            let mut codes = vec![0u8; n * code_size];
            faiss_status(
                faiss_sys::faiss_Index_sa_encode(
                    ptr,
                    n as i64,
                    vectors.as_ptr(),
                    codes.as_mut_ptr(),
                ),
                "sa_encode",
            )?;
            let mut decoded = vec![0f32; n * dim];
            faiss_status(
                faiss_sys::faiss_Index_sa_decode(
                    ptr,
                    n as i64,
                    codes.as_ptr(),
                    decoded.as_mut_ptr(),
                ),
                "sa_decode",
            )?;
            let total: f64 = vectors
                .iter()
                .zip(&decoded)
                .map(|(a, b)| f64::from(a - b).powi(2))
                .sum();
            Ok((total / n as f64) as f32)
        }
    }
}
