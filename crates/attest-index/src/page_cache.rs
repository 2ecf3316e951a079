//! Leaves the page cache as a one-off scan found it. An exact scan of a replica (a tuning's truth, a live recall
//! sample: `ShardEngine::exact_dense_batch`) reads every full vector and stored row of it once:
//! at 10M rows through the router, 1.3 GB of vectors and ~0.5 GB of rows a replica. Left in the cache they push out
//! what searches read (the SQ8 copies, the PQ lists), and a tuning that times its settings right after its scan
//! finds the full vectors resident, which while serving at 10M they are not: re-scoring looked cheap and served at
//! p95 370 ms (docs/decisions/recall-target.md). So the pages a scan brought in are dropped from the cache once it
//! is done; pages that were resident before it stay. Linux only (`mincore`, then `MADV_DONTNEED` to unmap them
//! from this process and `POSIX_FADV_DONTNEED` to drop them: `MADV_PAGEOUT` leaves file pages of a mapping
//! cached); elsewhere, a no-op.

use std::path::Path;

/// A read-only shared memory map of a whole file, and the file.
#[derive(Clone, Copy)]
pub(crate) struct Mapped<'a> {
    pub bytes: &'a [u8],
    pub path: &'a Path,
}

/// Which pages of some memory maps were resident when noted ([`Untouched::note`]).
pub(crate) struct Untouched<'a> {
    maps: Vec<(Mapped<'a>, Vec<u8>)>,
}

impl<'a> Untouched<'a> {
    /// Notes the resident pages of `maps` (each a whole memory map, page-aligned; borrowed until
    /// [`Untouched::restore`], so that none is unmapped meanwhile). A map whose residency cannot be read is left
    /// out: nothing of it is dropped.
    pub(crate) fn note(maps: impl IntoIterator<Item = Mapped<'a>>) -> Self {
        Untouched {
            maps: maps
                .into_iter()
                .filter_map(|map| resident(map.bytes).map(|pages| (map, pages)))
                .collect(),
        }
    }

    /// Drops from the cache each page that was not resident when noted and is now; answers how many.
    pub(crate) fn restore(self) -> usize {
        let page = page_size();
        let mut dropped = 0;
        for (map, before) in self.maps {
            let Some(now) = resident(map.bytes) else {
                continue;
            };
            let runs = brought_in(&before, &now);
            // Opened only when there is something to drop (the common case, a replica the cache holds whole, has
            // not); a file removed meanwhile (its segment merged away) has nothing left to keep cached.
            let Some(file) = (!runs.is_empty())
                .then(|| std::fs::File::open(map.path).ok())
                .flatten()
            else {
                continue;
            };
            for pages in runs {
                let (offset, end) = (pages.start * page, (pages.end * page).min(map.bytes.len()));
                if drop_pages(&file, &map.bytes[offset..end], offset) {
                    dropped += pages.len();
                }
            }
        }
        dropped
    }
}

/// The runs of pages resident `now` that were not `before` (one byte per page, bit 0: resident).
fn brought_in(before: &[u8], now: &[u8]) -> Vec<std::ops::Range<usize>> {
    let new = |i: usize| now[i] & 1 == 1 && before[i] & 1 == 0;
    let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
    for i in (0..now.len()).filter(|&i| new(i)) {
        match runs.last_mut() {
            Some(run) if run.end == i => run.end = i + 1,
            _ => runs.push(i..i + 1),
        }
    }
    runs
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size)
        .ok()
        .filter(|&s| s > 0)
        .unwrap_or(4096)
}

/// One byte per page of `map` (bit 0: resident), or None when the kernel will not say.
#[cfg(target_os = "linux")]
fn resident(map: &[u8]) -> Option<Vec<u8>> {
    if map.is_empty() {
        return None;
    }
    let page = page_size();
    let mut pages = vec![0u8; map.len().div_ceil(page)];
    // SAFETY: `map` is a live mapping starting on a page boundary (the caller's contract), and `pages` has one byte
    // for each page of its length, as mincore(2) writes.
    let rc = unsafe {
        libc::mincore(
            map.as_ptr() as *mut libc::c_void,
            map.len(),
            pages.as_mut_ptr(),
        )
    };
    (rc == 0).then_some(pages)
}

#[cfg(not(target_os = "linux"))]
fn resident(_map: &[u8]) -> Option<Vec<u8>> {
    None
}

/// Whether every page `bytes` touches is in the page cache (None when the kernel will not say). `bytes` lies in
/// a map that starts on a page boundary, so the page its first byte is on is part of the map.
pub(crate) fn all_resident(bytes: &[u8]) -> Option<bool> {
    let page = page_size();
    let skip = bytes.as_ptr() as usize % page;
    // SAFETY: the `skip` bytes before `bytes` are the start of its first page, inside the same map (above); the
    // slice is only handed to mincore, never read.
    let pages = unsafe { std::slice::from_raw_parts(bytes.as_ptr().sub(skip), bytes.len() + skip) };
    resident(pages).map(|flags| flags.iter().all(|f| f & 1 == 1))
}

/// Drops `range` (of a map of `file`, starting `offset` bytes into it) from this process's page tables and then
/// from the cache: clean file pages only, so a later read faults them in from disk again, unchanged.
#[cfg(target_os = "linux")]
pub(crate) fn drop_pages(file: &std::fs::File, range: &[u8], offset: usize) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: `range` lies within a live, page-aligned, read-only shared mapping of `file`; MADV_DONTNEED on such
    // a mapping only unmaps pages (the next access maps the file's same bytes again), and fadvise only advises.
    unsafe {
        libc::madvise(
            range.as_ptr() as *mut libc::c_void,
            range.len(),
            libc::MADV_DONTNEED,
        ) == 0
            && libc::posix_fadvise(
                file.as_raw_fd(),
                offset as libc::off_t,
                range.len() as libc::off_t,
                libc::POSIX_FADV_DONTNEED,
            ) == 0
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn drop_pages(_file: &std::fs::File, _range: &[u8], _offset: usize) -> bool {
    false
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// A file read through its map after it was noted is dropped again; one read before stays.
    #[test]
    fn pages_a_scan_brought_in_are_dropped_and_others_stay() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows");
        let page = page_size();
        {
            use std::io::Write;
            let mut file = std::fs::File::create(&path).unwrap();
            file.write_all(&vec![7u8; 64 * page]).unwrap();
            // Clean pages: the kernel drops only those (dirty ones wait for writeback).
            file.sync_all().unwrap();
        }
        let file = std::fs::File::open(&path).unwrap();
        // SAFETY: the file is not changed while mapped.
        let map = unsafe { memmap2::Mmap::map(&file).unwrap() };
        // One page a fault, no read-ahead: what the scan reads is what it brings in.
        map.advise(memmap2::Advice::Random).unwrap();
        let mapped = Mapped {
            bytes: &map[..],
            path: &path,
        };
        let is_resident = |p: &[u8], i: usize| p[i] & 1 == 1;
        // Cold, as a file not read since boot would be.
        assert!(drop_pages(&file, &map[..], 0));
        assert!((0..64).all(|i| !is_resident(&resident(&map).unwrap(), i)));

        let sum = |pages: std::ops::Range<usize>| -> u64 {
            pages.map(|p| u64::from(map[p * page])).sum()
        };
        assert_eq!(sum(0..16), 16 * 7, "read before the scan");
        let before = resident(&map).unwrap();
        let noted = Untouched::note([mapped]);
        assert_eq!(sum(0..64), 64 * 7, "the scan");
        let dropped = noted.restore();
        let after = resident(&map).unwrap();
        assert!(dropped >= 40, "dropped {dropped} of the 48 the scan read");
        for p in 0..64 {
            assert_eq!(
                is_resident(&after, p),
                is_resident(&before, p),
                "page {p}: resident after the scan as before it"
            );
        }
        assert_eq!(sum(0..64), 64 * 7, "the map reads the same bytes");
    }
}
