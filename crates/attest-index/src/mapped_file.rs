//! A sealed segment's file mapped read-only, whole, with its path: how the stored chunks, the full vectors and
//! their SQ8 copies are read. What every such map needs is said here once: why mapping it is sound, the access
//! advice (random once checked, sequential for a merge's one pass, read-ahead of the rows a search is about to
//! read), and the view an exact scan restores the page cache from ([`crate::page_cache`]).

use std::fs::File;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use memmap2::Mmap;

use crate::error::Result;
use crate::page_cache::Mapped;

pub struct MappedFile {
    map: Mmap,
    path: PathBuf,
    read_ahead: ReadAhead,
}

/// Whether [`MappedFile::will_need`] finds what it is asked for already cached. While it nearly always does, a
/// batch is looked at one time in [`ReadAhead::SAMPLE`], and then only its first [`ReadAhead::PROBE`] parts: the
/// advice costs ~1 µs a part and a residency check (`mincore`) half that, where a search of a replica the cache
/// holds whole takes a few hundred µs. Otherwise every part is checked, and what is not cached is advised.
#[derive(Default)]
struct ReadAhead {
    batches: AtomicU32,
    /// Share of checked parts found cached, in 1/1,024ths, each check weighing 1/16 (relaxed: an estimate).
    cached: AtomicU32,
}

impl ReadAhead {
    const SAMPLE: u32 = 64;
    /// Parts of a sampled batch checked while the file is found cached.
    const PROBE: usize = 8;
    const WARM: u32 = 1_000;

    fn warm(&self) -> bool {
        self.cached.load(Ordering::Relaxed) >= Self::WARM
    }

    /// Whether to look at this batch at all (false: the file has been found cached and this is not a sample).
    fn look(&self) -> bool {
        let n = self.batches.fetch_add(1, Ordering::Relaxed);
        !self.warm() || n.is_multiple_of(Self::SAMPLE)
    }

    fn found(&self, cached: bool) {
        let old = self.cached.load(Ordering::Relaxed);
        let new = old - old / 16 + if cached { 1_024 / 16 } else { 0 };
        self.cached.store(new, Ordering::Relaxed);
    }
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
                read_ahead: ReadAhead::default(),
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

    /// Asks the kernel to start reading `parts` (parts of this map) into the page cache, without waiting for them.
    /// A search that is about to read dozens or hundreds of scattered rows of a file the cache does not hold
    /// (at 10M rows a node: the full vectors, the stored rows, part of the SQ8 copies) asks for all of them first,
    /// so that the disk reads them side by side rather than in one page fault after another
    /// (`cargo run -p attest-index --example cold_rows_bench`). A file found cached is only sampled
    /// ([`ReadAhead`]). Parts that are not of this map, or empty, are ignored.
    pub fn will_need<'a>(&self, parts: impl IntoIterator<Item = &'a [u8]>) {
        if !self.read_ahead.look() {
            return;
        }
        let probing = self.read_ahead.warm();
        for (n, part) in parts.into_iter().enumerate() {
            let start = (part.as_ptr() as usize).wrapping_sub(self.map.as_ptr() as usize);
            let inside = start < self.map.len() && part.len() <= self.map.len() - start;
            if !inside || part.is_empty() {
                continue;
            }
            if probing && n >= ReadAhead::PROBE && self.read_ahead.warm() {
                return;
            }
            let cached = crate::page_cache::all_resident(part) == Some(true);
            self.read_ahead.found(cached);
            #[cfg(unix)]
            if !cached {
                let _ = self
                    .map
                    .advise_range(memmap2::Advice::WillNeed, start, part.len());
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Once a file is found cached, one batch in SAMPLE is looked at; a part found uncached makes every batch
    /// looked at again.
    #[test]
    fn a_cached_file_is_only_sampled_until_a_part_is_found_uncached() {
        let read_ahead = ReadAhead::default();
        let looked = |batches: u32| (0..batches).filter(|_| read_ahead.look()).count();
        assert_eq!(
            looked(100),
            100,
            "a file not yet found cached is looked at every time"
        );
        (0..100).for_each(|_| read_ahead.found(true));
        assert!(read_ahead.warm());
        assert_eq!(looked(10 * ReadAhead::SAMPLE), 10);
        read_ahead.found(false);
        assert_eq!(
            looked(100),
            100,
            "one part read from disk: every batch looked at again"
        );
    }

    /// The pages asked for arrive in the cache without this process reading them; others stay on disk.
    #[cfg(target_os = "linux")]
    #[test]
    fn asked_for_pages_arrive_in_the_cache_unread() {
        use std::io::Write;
        use std::time::{Duration, Instant};

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows");
        let page = 4096;
        let mut file = File::create(&path).unwrap();
        file.write_all(&vec![5u8; 256 * page]).unwrap();
        // Clean pages: the kernel drops only those.
        file.sync_all().unwrap();
        let (mapped, ()) = MappedFile::open(&path, |_| Ok(())).unwrap();
        let file = File::open(&path).unwrap();
        assert!(crate::page_cache::drop_pages(&file, &mapped, 0));
        let resident = |pages: std::ops::Range<usize>| {
            crate::page_cache::all_resident(&mapped[pages.start * page..pages.end * page])
        };
        assert_eq!(resident(100..102), Some(false), "dropped");

        // A part straddling two pages, not aligned to either.
        mapped.will_need([&mapped[100 * page + 10..101 * page + 20]]);
        let deadline = Instant::now() + Duration::from_secs(20);
        while resident(100..102) != Some(true) {
            assert!(
                Instant::now() < deadline,
                "the asked-for pages never arrived"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(
            resident(200..202),
            Some(false),
            "pages not asked for stay out"
        );
        // Not of this map: ignored.
        mapped.will_need([&[0u8; 16][..]]);
    }
}
