//! A sealed segment's file mapped read-only, whole, with its path: how the stored chunks, the full vectors and
//! their SQ8 copies are read. What every such map needs is said here once: why mapping it is sound, the access
//! advice (random once checked, sequential for a merge's one pass), and the view an exact scan restores the page
//! cache from ([`crate::page_cache`]).

use std::fs::File;
use std::ops::Deref;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::error::Result;
use crate::page_cache::Mapped;

pub struct MappedFile {
    map: Mmap,
    path: PathBuf,
}

impl std::fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedFile")
            .field("path", &self.path)
            .field("bytes", &self.map.len())
            .finish()
    }
}

impl MappedFile {
    /// Maps `path` and hands its bytes to `check` (a header, a length, a checksum); once they pass, the map is
    /// advised for random access — searches fetch scattered rows, and read-ahead would only evict useful pages —
    /// and returned with what `check` found.
    pub fn open<T>(path: &Path, check: impl FnOnce(&[u8]) -> Result<T>) -> Result<(Self, T)> {
        let file = File::open(path)?;
        // SAFETY: sealed segment files are written once (tmp + rename) and never modified in place, so the mapped
        // bytes cannot change or shrink under us while the map lives.
        let map = unsafe { Mmap::map(&file)? };
        let checked = check(&map)?;
        #[cfg(unix)]
        {
            let _ = map.advise(memmap2::Advice::Random);
        }
        Ok((
            MappedFile {
                map,
                path: path.to_path_buf(),
            },
            checked,
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Advises the kernel that the whole file is about to be read in order (a merge reading its inputs once):
    /// read-ahead instead of one fault per page. The inputs are removed after the merge, so the advice is not undone.
    pub fn advise_sequential(&self) {
        #[cfg(unix)]
        {
            let _ = self.map.advise(memmap2::Advice::Sequential);
        }
    }

    /// The whole map as [`crate::page_cache::Untouched`] notes it.
    pub(crate) fn page_cache_view(&self) -> Mapped<'_> {
        Mapped {
            bytes: &self.map,
            path: &self.path,
        }
    }
}

impl Deref for MappedFile {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.map
    }
}
