//! Sealed segments and the manifest that lists them.
//!
//! A sealed segment is a directory `segments/<id>/` holding
//! - `dense.faiss`: the IVF_PQ index, opened memory-mapped and read-only;
//! - `text/`: a tantivy index opened through its mmap directory;
//! - `chunks.rkyv`: chunk texts and metadata, read zero-copy;
//! - `vectors.f32`: the full vectors, for exact re-scoring of the top candidates;
//! - `vectors.sq8`: the same vectors quantised to a byte per dimension (a quarter of the size), which re-score
//!   the deep PQ candidate list in memory before the best few are re-scored from `vectors.f32` (a segment
//!   without one is of the layout before format version 1: refused, and rebuilt from the log);
//! - `ids.i64`, in a segment encoded with the shard's quantizer: the global id of each row (ascending), which a
//!   merge carries over. The IVF_PQ index returns row numbers (`row_labels`; a segment of the layout before
//!   format version 1, whose index returned these ids, is refused and rebuilt from the log).
//!
//! `MANIFEST.json` (replaced atomically) lists the segments with the log range each was built from and a CRC-32
//! of every file, which start-up verifies before serving a segment.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::chunk_store::{ChunkStore, StoredChunk};
use crate::config::EngineConfig;
use crate::error::{IndexError, Result};
use crate::ivfpq::{IvfPqBuilder, IvfPqIndex, IvfPqParams};
use crate::mapped_file::MappedFile;
use crate::sq8::Sq8File;
use crate::text_index::TextIndex;
use crate::vector_file::VectorFile;

const DENSE_FILE: &str = "dense.faiss";
const TEXT_DIR: &str = "text";
const CHUNKS_FILE: &str = "chunks.rkyv";
const VECTORS_FILE: &str = "vectors.f32";
const COMPACT_VECTORS_FILE: &str = "vectors.sq8";
const IDS_FILE: &str = "ids.i64";
const IDS_MAGIC: &[u8; 8] = b"ATIDS\0\0\x01";
pub const MANIFEST_FILE: &str = "MANIFEST.json";

/// What the manifest records about one sealed segment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentMeta {
    pub id: String,
    /// Log records `min_seq..=max_seq` are the segment's source: it is rebuilt from them if damaged.
    pub min_seq: u64,
    pub max_seq: u64,
    pub rows: usize,
    /// IVF_PQ parameters actually used (after `IvfPqParams::effective`).
    pub params: Option<IvfPqParams>,
    /// The shard quantizer version the dense index was encoded with; none: trained on its own rows.
    #[serde(default)]
    pub quantizer: Option<u64>,
    /// The dense index of a segment encoded with a quantizer returns row numbers, not the global ids of
    /// `ids.i64` (false: the earlier layout, labelled with the ids): a search reads a candidate's row without
    /// looking it up.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub row_labels: bool,
    /// Relative path → CRC-32 of every file of the segment.
    pub files: BTreeMap<String, u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Every log record up to here is in a sealed segment; the growing segment replays the rest.
    pub sealed_through_seq: u64,
    pub segments: Vec<SegmentMeta>,
    /// Source of fresh segment ids, so that a rebuilt or merged segment never reuses a directory name.
    pub next_segment: u64,
    /// The shard's quantizer, once trained.
    #[serde(default)]
    pub quantizer: Option<crate::quantizer::QuantizerMeta>,
    /// Quantizer versions issued so far (a damaged quantizer's version is never reused: segments encoded with
    /// it may still be merged).
    #[serde(default)]
    pub quantizer_versions: u64,
}

/// The segment manifest's layout (`attest_core::format`): `MANIFEST.json` and the segment files it lists.
pub const SEGMENTS_FORMAT: attest_core::format::Layout = attest_core::format::Layout {
    what: "segment manifest",
    current: 1,
};

/// `MANIFEST.json` as written: the manifest with the format version it is written in.
#[derive(Serialize)]
struct StoredManifest<'a> {
    format: u32,
    #[serde(flatten)]
    manifest: &'a Manifest,
}

/// `MANIFEST.json` as read: no version in manifests written before it was recorded.
#[derive(Deserialize)]
struct LoadedManifest {
    #[serde(default)]
    format: Option<u32>,
    #[serde(flatten)]
    manifest: Manifest,
}

impl Manifest {
    /// The manifest in `dir` (an empty one when there is none); refused when its format version is outside the
    /// window this build reads. The next [`Manifest::store`] writes it in the current version.
    pub fn load(dir: &Path) -> Result<Self> {
        let path = dir.join(MANIFEST_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let loaded: LoadedManifest = serde_json::from_slice(&bytes)
                    .map_err(|e| IndexError::corrupt(&path, e.to_string()))?;
                SEGMENTS_FORMAT.check(loaded.format, &path.display().to_string())?;
                Ok(loaded.manifest)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Manifest::default()),
            Err(e) => Err(e.into()),
        }
    }

    pub fn store(&self, dir: &Path) -> Result<()> {
        let stored = StoredManifest {
            format: SEGMENTS_FORMAT.current,
            manifest: self,
        };
        let bytes = serde_json::to_vec_pretty(&stored)
            .map_err(|e| IndexError::Serialization(e.to_string()))?;
        crate::fsutil::write_atomically(&dir.join(MANIFEST_FILE), &bytes)
    }

    pub fn allocate_id(&mut self) -> String {
        self.next_segment += 1;
        format!("seg-{:08}", self.next_segment)
    }
}

/// An open sealed segment.
pub struct SealedSegment {
    pub meta: SegmentMeta,
    pub dense: Option<IvfPqIndex>,
    /// The global id of each row when the dense index returns those (see [`Dense::Encoded`]).
    ids: Option<MappedFile>,
    pub text: TextIndex,
    pub chunks: ChunkStore,
    pub vectors: VectorFile,
    /// The SQ8 copy of `vectors`.
    pub compact: Sq8File,
}

pub fn segment_dir(root: &Path, id: &str) -> PathBuf {
    root.join("segments").join(id)
}

fn is_lock_file(name: &str) -> bool {
    name.starts_with(".tantivy-") && name.ends_with(".lock")
}

/// CRC-32 of every regular file under `dir`, keyed by path relative to `dir`.
fn checksum_files(dir: &Path) -> Result<BTreeMap<String, u32>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type()?.is_dir() {
                stack.push(path);
            } else if !is_lock_file(&name) {
                let rel = path
                    .strip_prefix(dir)
                    .expect("under dir")
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, crate::fsutil::file_crc32(&path)?);
            }
        }
    }
    Ok(out)
}

/// How a new segment's dense index is made.
pub enum Dense {
    /// Trained on the segment's own rows (no shard quantizer yet); the index returns row numbers.
    Train,
    /// Already holding exactly the rows' vectors, encoded with quantizer version `quantizer`: a seal's encoding
    /// (labelled with row numbers) or a merge's inverted lists (whose label `l` is row `relabel[l]`). `ids` are
    /// the rows' global ids (one per row, ascending).
    Encoded {
        index: IvfPqBuilder,
        relabel: Option<Vec<i64>>,
        ids: Vec<i64>,
        quantizer: u64,
    },
}

/// Builds a sealed segment from rows and their vectors (row-major) into `segments/<id>/`, fsyncs it and returns
/// its manifest entry. Nothing is visible until the caller stores a manifest that names it. Each step's time goes
/// into `phases` (the seal's or merge's log event).
#[allow(clippy::too_many_arguments)] // seal, merge and rebuild each pass all of them; a struct would be rebuilt by each
pub fn build_segment(
    root: &Path,
    id: &str,
    seq_range: (u64, u64),
    config: &EngineConfig,
    rows: &[StoredChunk],
    vectors: &[f32],
    dense: Dense,
    phases: &mut crate::maintenance::Phases,
) -> Result<SegmentMeta> {
    let dir = segment_dir(root, id);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    let (dim, train_sample) = (config.dimension, config.training_rows());
    let n = rows.len();
    // A segment that trains its own lists while the shard has no quantizer yet is re-encoded with the shard's
    // when it merges: the lists its own size calls for train in seconds, where the configured count, sized for
    // the whole shard, took minutes (4,096 lists, cut to 1,282 by 50,000 rows: 110–144 s a seal).
    let params = &IvfPqParams {
        nlist: config.ivfpq.nlist.min(crate::ivfpq::nlist_for_rows(n)),
        ..config.ivfpq
    };
    // The text index (one tantivy thread, so the index and its ties are the same on every build) is written on a
    // thread of its own while this one writes the dense index and the row files: a seal or merge uses both cores.
    let (used, quantizer) = std::thread::scope(|scope| -> Result<_> {
        let text = scope.spawn(|| {
            let started = std::time::Instant::now();
            let built = TextIndex::build_on_disk(
                &dir.join(TEXT_DIR),
                rows.iter().enumerate().map(|(i, r)| {
                    (
                        i as u64,
                        r.tenant.as_str(),
                        r.title.as_str(),
                        r.text.as_str(),
                    )
                }),
            );
            (built, started.elapsed())
        });
        let dense = write_dense(&dir, dim, params, train_sample, n, vectors, dense);
        phases.mark("dense");
        let files = dense.and_then(|d| {
            ChunkStore::write(&dir.join(CHUNKS_FILE), rows)?;
            phases.mark("chunks");
            VectorFile::write(&dir.join(VECTORS_FILE), dim, vectors)?;
            phases.mark("vectors");
            Sq8File::write(&dir.join(COMPACT_VECTORS_FILE), dim, vectors)?;
            phases.mark("sq8");
            Ok(d)
        });
        let (built, took) = text.join().expect("the text index thread does not panic");
        phases.add("text", took);
        phases.mark("text_wait");
        built?;
        files
    })?;
    crate::fsutil::sync_tree(&dir)?;
    phases.mark("sync");
    let files = checksum_files(&dir)?;
    phases.mark("checksums");
    Ok(SegmentMeta {
        id: id.to_string(),
        min_seq: seq_range.0,
        max_seq: seq_range.1,
        rows: n,
        params: used,
        quantizer,
        row_labels: quantizer.is_some(),
        files,
    })
}

/// Writes the dense index of a new segment of `n` rows: trained on its rows, or the encoded index it was given.
/// Returns the parameters used and the quantizer version encoded with, if any.
fn write_dense(
    dir: &Path,
    dim: usize,
    params: &IvfPqParams,
    train_sample: usize,
    n: usize,
    vectors: &[f32],
    dense: Dense,
) -> Result<(Option<IvfPqParams>, Option<u64>)> {
    Ok(match dense {
        _ if n == 0 => (None, None),
        Dense::Train => {
            let ids: Vec<i64> = (0..n as i64).collect();
            let train = crate::quantizer::spread(vectors, dim, train_sample);
            let used =
                IvfPqIndex::build(&dir.join(DENSE_FILE), dim, params, &train, vectors, &ids)?;
            (Some(used), None)
        }
        Dense::Encoded {
            index,
            relabel,
            ids,
            quantizer,
        } => {
            if index.len() != n || ids.len() != n || ids.windows(2).any(|w| w[0] >= w[1]) {
                return Err(IndexError::invalid(
                    "dense",
                    format!(
                        "{} encoded vectors and {} ids (ascending) for {n} rows",
                        index.len(),
                        ids.len()
                    ),
                ));
            }
            write_ids(&dir.join(IDS_FILE), &ids)?;
            let used = index.write_relabelled(&dir.join(DENSE_FILE), relabel.as_deref())?;
            (Some(used), Some(quantizer))
        }
    })
}

/// `ids.i64`: the magic, then one little-endian i64 per row.
fn write_ids(path: &Path, ids: &[i64]) -> Result<()> {
    let mut bytes = Vec::with_capacity(IDS_MAGIC.len() + ids.len() * 8);
    bytes.extend_from_slice(IDS_MAGIC);
    for id in ids {
        bytes.extend_from_slice(&id.to_le_bytes());
    }
    crate::fsutil::write_atomically(path, &bytes)
}

impl SealedSegment {
    /// Notes which pages of its full vectors and stored rows are resident, for a scan of every row to hand back
    /// the ones it brings in ([`crate::page_cache`]).
    pub(crate) fn untouched(&self) -> crate::page_cache::Untouched<'_> {
        crate::page_cache::Untouched::note([
            self.vectors.file().page_cache_view(),
            self.chunks.file().page_cache_view(),
        ])
    }

    /// Verifies every file against the manifest's checksums, then opens the segment (mmap). Any mismatch,
    /// missing file or unreadable structure is `IndexError::Corrupt`.
    pub fn open(root: &Path, meta: &SegmentMeta) -> Result<Self> {
        let dir = segment_dir(root, &meta.id);
        for (rel, expected) in &meta.files {
            let path = dir.join(rel);
            let actual = crate::fsutil::file_crc32(&path)
                .map_err(|e| IndexError::corrupt(&path, e.to_string()))?;
            if actual != *expected {
                return Err(IndexError::corrupt(
                    &path,
                    format!("checksum {actual:08x}, manifest says {expected:08x}"),
                ));
            }
        }
        Self::open_just_built(root, meta)
    }

    /// Opens a segment [`build_segment`] has just written, without reading its files once more for their
    /// checksums: the manifest's were computed from those very files a moment ago. Structure is still checked.
    pub fn open_just_built(root: &Path, meta: &SegmentMeta) -> Result<Self> {
        let dir = segment_dir(root, &meta.id);
        let dense = if meta.rows > 0 {
            Some(IvfPqIndex::open_mmap(&dir.join(DENSE_FILE))?)
        } else {
            None
        };
        let ids = match meta.quantizer {
            Some(_) if meta.rows > 0 => {
                let path = dir.join(IDS_FILE);
                let (map, ()) = MappedFile::open(&path, |bytes| {
                    if bytes.len() != IDS_MAGIC.len() + meta.rows * 8
                        || !bytes.starts_with(IDS_MAGIC)
                    {
                        return Err(IndexError::corrupt(
                            &path,
                            "not the ids of the segment's rows",
                        ));
                    }
                    Ok(())
                })?;
                Some(map)
            }
            _ => None,
        };
        let text = TextIndex::open_mmap(&dir.join(TEXT_DIR))?;
        let chunks = ChunkStore::open(&dir.join(CHUNKS_FILE))?;
        let vectors = VectorFile::open(&dir.join(VECTORS_FILE))?;
        if !meta.files.contains_key(COMPACT_VECTORS_FILE) {
            // The layout before format version 1 had no SQ8 copy: rebuilt from the log like any refused segment.
            return Err(SEGMENTS_FORMAT
                .check(Some(0), &dir.display().to_string())
                .expect_err("version 0 is outside every window")
                .into());
        }
        let compact = Sq8File::open(&dir.join(COMPACT_VECTORS_FILE))?;
        if chunks.len() != meta.rows
            || vectors.len() != meta.rows
            || compact.len() != meta.rows
            || dense.as_ref().is_some_and(|d| d.len() != meta.rows)
        {
            return Err(IndexError::corrupt(
                &dir,
                "row counts of the segment's files disagree",
            ));
        }
        if ids.is_some() && !meta.row_labels {
            // The layout before format version 1: an index labelled with global ids. Segments are derived
            // data: the engine rebuilds a refused one from the log, in the current layout.
            return Err(SEGMENTS_FORMAT
                .check(Some(0), &dir.display().to_string())
                .expect_err("version 0 is outside every window")
                .into());
        }
        let segment = SealedSegment {
            meta: meta.clone(),
            dense,
            ids,
            text,
            chunks,
            vectors,
            compact,
        };
        Ok(segment)
    }
}

impl SealedSegment {
    /// The row a label of the dense index names, if any (labels are row numbers).
    pub fn row_of(&self, label: i64) -> Option<usize> {
        usize::try_from(label)
            .ok()
            .filter(|&row| row < self.meta.rows)
    }

    /// The id the dense index holds row `row` under (its row number in a segment trained on its own rows).
    pub fn id_of(&self, row: usize) -> i64 {
        match &self.ids {
            None => row as i64,
            Some(map) => {
                let at = IDS_MAGIC.len() + row * 8;
                i64::from_le_bytes(map[at..at + 8].try_into().expect("8 bytes"))
            }
        }
    }

    /// The dense index file (a merge reads its inverted lists).
    pub fn dense_path(&self, root: &Path) -> PathBuf {
        segment_dir(root, &self.meta.id).join(DENSE_FILE)
    }
}

#[cfg(test)]
mod tests {
    use super::{Manifest, MANIFEST_FILE, SEGMENTS_FORMAT};

    #[test]
    fn a_manifest_is_written_with_its_format_and_one_without_reads_as_version_1() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(MANIFEST_FILE);
        std::fs::write(
            &path,
            br#"{"sealed_through_seq": 4, "segments": [], "next_segment": 2}"#,
        )
        .unwrap();
        let m = Manifest::load(dir.path()).unwrap();
        assert_eq!(m.sealed_through_seq, 4);
        m.store(dir.path()).unwrap();
        let stored: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(stored["format"], SEGMENTS_FORMAT.current);
        assert_eq!(Manifest::load(dir.path()).unwrap(), m);
        std::fs::write(
            &path,
            br#"{"format": 7, "sealed_through_seq": 4, "segments": [], "next_segment": 2}"#,
        )
        .unwrap();
        let err = Manifest::load(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("segment manifest format version 7, but this build reads version 1"),
            "{err}"
        );
    }
}
