//! Crash-safe file writes shared by the crate: whole-file replacement for sealed segment files (IVF-PQ
//! index, chunk store, vector file — the latter also written incrementally by `VectorFileWriter`) and the manifest, a recursive fsync for freshly built directories, and a directory's size on disk.
//!
//! A reader must only ever see either the old file or the complete new one, also after a power cut:
//! the bytes go to `<path>.tmp`, are fsynced, the tmp file is renamed over `path`, and the directory is
//! fsynced so that the rename itself is durable.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::Result;

/// `<path>.tmp`: the suffix is appended to the whole file name (`seg.ivfpq` → `seg.ivfpq.tmp`), so the tmp
/// file lives in the same directory and the final rename never crosses a filesystem.
pub(crate) fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".tmp");
    PathBuf::from(name)
}

/// Writes `bytes` to `path` atomically and durably.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomically_with(path, |tmp| {
        let mut file = File::create(tmp)?;
        file.write_all(bytes)?;
        Ok(())
    })
}

/// Lets `fill` produce the file at the tmp path it is given (for writers such as FAISS that insist on
/// opening the file themselves), then fsyncs it and renames it over `path`. A failed `fill` leaves `path`
/// untouched and removes the tmp file.
pub(crate) fn write_atomically_with<F>(path: &Path, fill: F) -> Result<()>
where
    F: FnOnce(&Path) -> Result<()>,
{
    let tmp = tmp_path(path);
    // A tmp file left by a crashed writer is garbage by definition.
    remove_if_exists(&tmp)?;
    let outcome = fill(&tmp).and_then(|()| {
        File::open(&tmp)?.sync_all()?;
        fs::rename(&tmp, path)?;
        sync_parent_dir(path)
    });
    if outcome.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    outcome
}

fn remove_if_exists(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
        _ => Ok(()),
    }
}

/// The CRC-32 of a file's bytes, read a MiB at a time: a segment's files run to gigabytes at 10M rows, and
/// reading one whole into memory would push the page cache out from under the searches.
pub fn file_crc32(path: &Path) -> Result<u32> {
    use std::io::Read;
    let mut file = File::open(path)?;
    let mut hasher = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut buf)? {
            0 => return Ok(hasher.finalize()),
            n => hasher.update(&buf[..n]),
        }
    }
}

/// Fsyncs every file and directory under `dir` (recursively), then `dir`'s parent, so that a freshly built
/// directory (a sealed segment) survives a power cut once this returns. Symlinks are not followed.
pub fn sync_tree(dir: &Path) -> Result<()> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                File::open(entry.path())?.sync_all()?;
            }
        }
        // A directory is synced after its entries were listed: its own fsync makes the names durable.
        File::open(&d)?.sync_all()?;
    }
    sync_parent_dir(dir)
}

/// Bytes of the files under `dir`, recursively (symlinks not followed). Files that vanish during the walk (a
/// compaction deleting the segments it merged) are not counted.
pub fn tree_bytes(dir: &Path) -> Result<u64> {
    let gone = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = match fs::read_dir(&d) {
            Err(e) if gone(&e) => continue,
            entries => entries?,
        };
        for entry in entries {
            let entry = entry?;
            match entry.metadata() {
                Ok(m) if m.is_dir() => stack.push(entry.path()),
                Ok(m) if m.is_file() => total += m.len(),
                Ok(_) => {}
                Err(e) if gone(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(total)
}

pub fn sync_parent_dir(path: &Path) -> Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(parent)?.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_bytes_sums_every_file_below() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("a/b")).unwrap();
        fs::write(dir.path().join("x"), [0u8; 10]).unwrap();
        fs::write(dir.path().join("a/b/y"), [0u8; 32]).unwrap();
        assert_eq!(tree_bytes(dir.path()).unwrap(), 42);
        assert_eq!(tree_bytes(&dir.path().join("missing")).unwrap(), 0);
    }

    #[test]
    fn replaces_file_and_leaves_no_tmp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.bin");
        write_atomically(&path, b"first").unwrap();
        write_atomically(&path, b"second").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"second");
        assert!(!tmp_path(&path).exists());
    }

    #[test]
    fn sync_tree_walks_nested_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let seg = dir.path().join("seg");
        fs::create_dir_all(seg.join("text")).unwrap();
        fs::write(seg.join("a"), b"a").unwrap();
        fs::write(seg.join("text").join("b"), b"b").unwrap();
        sync_tree(&seg).unwrap();
        assert!(sync_tree(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn failed_fill_keeps_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.bin");
        write_atomically(&path, b"old").unwrap();
        let err = write_atomically_with(&path, |tmp| {
            fs::write(tmp, b"partial")?;
            Err(crate::error::IndexError::Serialization("boom".into()))
        });
        assert!(err.is_err());
        assert_eq!(fs::read(&path).unwrap(), b"old");
        assert!(!tmp_path(&path).exists());
    }
}
