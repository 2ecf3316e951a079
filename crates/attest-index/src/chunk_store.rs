//! Chunk texts and metadata of a sealed segment, archived with rkyv and read zero-copy through a memory map:
//! a search hit is turned into a response by reading `&str`s straight out of the page cache.
//!
//! # Format
//! ```text
//! 0   magic        b"ATCS"
//! 4   version      u32 LE (= 1)
//! 8   archive_len  u64 LE
//! 16  crc32        u32 LE of the archive bytes
//! 20  zero padding up to 32 (keeps the archive 16-byte aligned inside the page-aligned map)
//! 32  rkyv 0.8 archive of Vec<StoredChunk>
//! ```
//! rkyv validation alone proves the archive is structurally safe to read, not that it is the data that was
//! written (a flipped letter in a text is still valid UTF-8), hence the CRC.

use std::path::Path;

use rkyv::vec::{ArchivedVec, VecResolver};
use rkyv::{Archive, Place, Serialize};

use crate::error::{IndexError, Result};
use crate::mapped_file::MappedFile;

const MAGIC: &[u8; 4] = b"ATCS";
const VERSION: u32 = 1;
const HEADER_LEN: usize = 32;
/// The widest span of a row's strings read ahead as one ([`ChunkStore::read_ahead`]): a few pages.
const READ_AHEAD_SPAN: usize = 64 << 10;

/// One chunk row of a sealed segment; the row number is the id used by the segment's dense and text indexes.
#[derive(Debug, Clone, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug), compare(PartialEq))]
pub struct StoredChunk {
    pub chunk_id: String,
    pub doc_id: String,
    pub tenant: String,
    pub title: String,
    pub text: String,
    pub metadata_json: String,
    pub seq: u64,
}

type ArchivedRows = ArchivedVec<ArchivedStoredChunk>;

/// Archives a borrowed slice exactly as a `Vec<StoredChunk>` would be, without cloning the rows first.
struct RowsRef<'a>(&'a [StoredChunk]);

impl Archive for RowsRef<'_> {
    type Archived = ArchivedRows;
    type Resolver = VecResolver;

    fn resolve(&self, resolver: Self::Resolver, out: Place<Self::Archived>) {
        ArchivedVec::resolve_from_slice(self.0, resolver, out);
    }
}

impl<S> Serialize<S> for RowsRef<'_>
where
    S: rkyv::rancor::Fallible + rkyv::ser::Allocator + rkyv::ser::Writer + ?Sized,
    StoredChunk: Serialize<S>,
{
    fn serialize(&self, serializer: &mut S) -> std::result::Result<Self::Resolver, S::Error> {
        ArchivedVec::<ArchivedStoredChunk>::serialize_from_slice(self.0, serializer)
    }
}

/// A read-only, memory-mapped chunk store.
pub struct ChunkStore {
    file: MappedFile,
    len: usize,
}

impl std::fmt::Debug for ChunkStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkStore")
            .field("path", &self.file.path())
            .field("len", &self.len)
            .finish()
    }
}

impl ChunkStore {
    /// Archives `chunks` (row `i` = `chunks[i]`) to `path` atomically (tmp + fsync + rename + dir fsync).
    pub fn write(path: &Path, chunks: &[StoredChunk]) -> Result<()> {
        let archive = rkyv::to_bytes::<rkyv::rancor::Error>(&RowsRef(chunks))
            .map_err(|e| IndexError::Serialization(e.to_string()))?;
        let mut bytes = Vec::with_capacity(HEADER_LEN + archive.len());
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&VERSION.to_le_bytes());
        bytes.extend_from_slice(&(archive.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&crc32fast::hash(&archive).to_le_bytes());
        bytes.resize(HEADER_LEN, 0);
        bytes.extend_from_slice(&archive);
        crate::fsutil::write_atomically(path, &bytes)
    }

    /// Maps the file, checks header and CRC, and validates the archive once with rkyv's bytecheck; a
    /// truncated, corrupt or foreign file is `IndexError::Corrupt`. Rows are then served zero-copy.
    pub fn open(path: &Path) -> Result<Self> {
        let corrupt = |reason: String| IndexError::corrupt(path, reason);
        let (file, len) = MappedFile::open(path, |bytes| {
            if bytes.len() < HEADER_LEN {
                return Err(corrupt(format!(
                    "{} bytes is shorter than the {HEADER_LEN}-byte header",
                    bytes.len()
                )));
            }
            if &bytes[0..4] != MAGIC {
                return Err(corrupt("bad magic, not a chunk store".into()));
            }
            let version = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes"));
            if version != VERSION {
                return Err(corrupt(format!("unsupported version {version}")));
            }
            let archive_len = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
            if archive_len != (bytes.len() - HEADER_LEN) as u64 {
                return Err(corrupt(format!(
                    "header says {archive_len} archive bytes, file holds {}",
                    bytes.len() - HEADER_LEN
                )));
            }
            let expected_crc = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes"));
            let archive = &bytes[HEADER_LEN..];
            let actual_crc = crc32fast::hash(archive);
            if actual_crc != expected_crc {
                return Err(corrupt(format!(
                    "checksum {actual_crc:08x}, header says {expected_crc:08x}"
                )));
            }
            let rows = rkyv::access::<ArchivedRows, rkyv::rancor::Error>(archive)
                .map_err(|e| corrupt(format!("invalid archive: {e}")))?;
            Ok(rows.len())
        })?;
        Ok(ChunkStore { file, len })
    }

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

    /// Row `row`, zero-copy from the map.
    pub fn get(&self, row: usize) -> Option<&ArchivedStoredChunk> {
        self.rows().get(row)
    }

    /// Starts reading `rows` into the page cache ([`MappedFile::will_need`]); rows past the end are skipped. First
    /// each row's fixed part (the archive's table of rows: where its strings are, and the short ones), all at
    /// once; then, reading those, the strings of each. A row's strings are archived one after another, so one
    /// span usually covers them; strings further apart than [`READ_AHEAD_SPAN`] are asked for one by one.
    pub fn read_ahead(&self, rows: &[usize]) {
        let table = self.rows().as_slice();
        let base = self.file.as_ptr() as usize;
        // The fixed parts' places are known without reading them.
        let fixed = |r: &ArchivedStoredChunk| {
            let at = r as *const ArchivedStoredChunk as usize - base;
            at..at + std::mem::size_of::<ArchivedStoredChunk>()
        };
        let wanted = || rows.iter().filter_map(|&row| table.get(row));
        self.file.will_need(wanted().map(|r| &self.file[fixed(r)]));
        let mut spans: Vec<&[u8]> = Vec::with_capacity(rows.len());
        for r in wanted() {
            let parts = [
                r.chunk_id.as_str(),
                r.doc_id.as_str(),
                r.tenant.as_str(),
                r.title.as_str(),
                r.text.as_str(),
                r.metadata_json.as_str(),
            ];
            // Short strings are held in the fixed part, asked for above.
            let inline = fixed(r);
            let apart = || {
                parts
                    .iter()
                    .filter(|p| !p.is_empty() && !inline.contains(&(p.as_ptr() as usize - base)))
            };
            let start = apart().map(|p| p.as_ptr() as usize - base).min();
            let end = apart().map(|p| p.as_ptr() as usize - base + p.len()).max();
            match (start, end) {
                (Some(start), Some(end)) if end - start <= READ_AHEAD_SPAN => {
                    spans.push(&self.file[start..end]);
                }
                _ => spans.extend(apart().map(|p| p.as_bytes())),
            }
        }
        self.file.will_need(spans);
    }

    /// Iterates over all rows in row order.
    pub fn iter(&self) -> impl Iterator<Item = &ArchivedStoredChunk> + '_ {
        self.rows().iter()
    }

    fn rows(&self) -> &ArchivedRows {
        // SAFETY: `open` validated exactly these bytes with `rkyv::access` (bytecheck) and only constructs a
        // `ChunkStore` on success; the map is read-only, never remapped, and the file is immutable once
        // sealed (written via tmp + rename), so the bytes are still the validated ones. Re-deriving the root
        // is O(1) (it sits at the end of the archive).
        unsafe { rkyv::access_unchecked::<ArchivedRows>(&self.file[HEADER_LEN..]) }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn chunk(i: usize) -> StoredChunk {
        StoredChunk {
            chunk_id: format!("doc-{}#{}", i / 3, i % 3),
            doc_id: format!("doc-{}", i / 3),
            tenant: ["acme", "übercorp", "東京"][i % 3].to_string(),
            title: if i.is_multiple_of(7) {
                String::new()
            } else {
                format!("Título {i} — ünïcödé 🦀")
            },
            text: format!("Chunk {i}: naïve café, 日本語のテキスト, emoji 👩‍🔬, RTL עברית. ")
                .repeat(1 + i % 5),
            metadata_json: format!(r#"{{"lang":"xx","n":{i}}}"#),
            seq: i as u64 * 10 + 1,
        }
    }

    fn write_sample(n: usize) -> (tempfile::TempDir, PathBuf, Vec<StoredChunk>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chunks.rkyv");
        let rows: Vec<StoredChunk> = (0..n).map(chunk).collect();
        ChunkStore::write(&path, &rows).unwrap();
        (dir, path, rows)
    }

    /// The rows asked for arrive in the cache, their text included, without being read; a row far from them stays
    /// on disk.
    #[cfg(target_os = "linux")]
    #[test]
    fn rows_read_ahead_arrive_in_the_cache_unread() {
        use std::time::{Duration, Instant};

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chunks.rkyv");
        let rows: Vec<StoredChunk> = (0..4000)
            .map(|i| StoredChunk {
                text: format!("row {i} ").repeat(120),
                ..chunk(i)
            })
            .collect();
        ChunkStore::write(&path, &rows).unwrap();
        let store = ChunkStore::open(&path).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        assert!(crate::page_cache::drop_pages(&file, &store.file, 0));
        // Where a row's text is: read from its fixed part, not from the text.
        let text = |row: usize| store.get(row).unwrap().text.as_str().as_bytes();
        let cached = |row: usize| crate::page_cache::all_resident(text(row));
        // Faulting the fixed parts back in (above) did not bring the texts: they are archived before the table.
        assert_eq!(cached(10), Some(false));
        assert!(crate::page_cache::drop_pages(&file, &store.file, 0));

        store.read_ahead(&[10, 11, 1_000_000]);
        let deadline = Instant::now() + Duration::from_secs(20);
        while cached(10) != Some(true) || cached(11) != Some(true) {
            assert!(
                Instant::now() < deadline,
                "the rows asked for never arrived"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(cached(3000), Some(false), "a row not asked for stays out");
        assert_eq!(store.get(11).unwrap().text.as_str(), rows[11].text);
    }

    #[test]
    fn round_trip_1000_with_unicode() {
        let (_dir, path, rows) = write_sample(1000);
        let store = ChunkStore::open(&path).unwrap();
        assert_eq!(store.len(), 1000);
        assert!(!store.is_empty());
        for (i, row) in rows.iter().enumerate() {
            let got = store.get(i).unwrap();
            assert_eq!(got, row);
            assert_eq!(got.text.as_str(), row.text);
            assert_eq!(got.seq.to_native(), row.seq);
            let owned: StoredChunk =
                rkyv::deserialize::<StoredChunk, rkyv::rancor::Error>(got).unwrap();
            assert_eq!(&owned, row);
        }
        assert!(store.get(1000).is_none());
        assert_eq!(store.iter().count(), 1000);
    }

    #[test]
    fn empty_store() {
        let (_dir, path, _) = write_sample(0);
        let store = ChunkStore::open(&path).unwrap();
        assert!(store.is_empty());
        assert!(store.get(0).is_none());
    }

    #[test]
    fn corrupt_bytes_are_corrupt() {
        let (_dir, path, _) = write_sample(50);
        let good = std::fs::read(&path).unwrap();
        // One flipped bit inside a text, in the rkyv root at the end, and in the header; then pure garbage.
        for pos in [HEADER_LEN + 100, good.len() - 3, 2, 9] {
            let mut bad = good.clone();
            bad[pos] ^= 0x04;
            std::fs::write(&path, &bad).unwrap();
            assert!(
                matches!(ChunkStore::open(&path), Err(IndexError::Corrupt { .. })),
                "flip at {pos}"
            );
        }
        let garbage: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        std::fs::write(&path, &garbage).unwrap();
        assert!(matches!(
            ChunkStore::open(&path),
            Err(IndexError::Corrupt { .. })
        ));
    }

    #[test]
    fn valid_checksum_over_invalid_archive_is_corrupt() {
        // The CRC matches but the archive is not an archive: bytecheck must still refuse it.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chunks.rkyv");
        let archive = [0xffu8; 64];
        let mut bytes = Vec::new();
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&VERSION.to_le_bytes());
        bytes.extend_from_slice(&(archive.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&crc32fast::hash(&archive).to_le_bytes());
        bytes.resize(HEADER_LEN, 0);
        bytes.extend_from_slice(&archive);
        std::fs::write(&path, &bytes).unwrap();
        let err = ChunkStore::open(&path).unwrap_err();
        assert!(
            matches!(&err, IndexError::Corrupt { reason, .. } if reason.contains("invalid archive")),
            "{err}"
        );
    }

    #[test]
    fn truncated_is_corrupt() {
        let (_dir, path, _) = write_sample(50);
        let good = std::fs::read(&path).unwrap();
        for len in [
            0,
            10,
            HEADER_LEN,
            HEADER_LEN + 1,
            good.len() / 2,
            good.len() - 1,
        ] {
            std::fs::write(&path, &good[..len]).unwrap();
            assert!(
                matches!(ChunkStore::open(&path), Err(IndexError::Corrupt { .. })),
                "truncated to {len}"
            );
        }
    }
}
