//! Snapshots of one shard replica (issue 17): what [`crate::ShardEngine::snapshot`] writes, how it is checked,
//! and how a replica is restored from it.
//!
//! A snapshot is a directory laid out like a shard's own — `wal/` (a RocksDB checkpoint of the log),
//! `segments/<id>/` (the sealed segments, hard links where the filesystem allows) and `MANIFEST.json` (the
//! segments, as the engine recorded them with that log), with the replica's `search_tuning.json` where its last
//! tuning was measured on those segments — plus `SNAPSHOT.json`: the log position every
//! acknowledged write up to is in, and the size and sha256 of every file. Restoring checks every file against
//! it as it copies it into a staging directory, which becomes the shard directory only when all matched: a
//! snapshot with a missing, truncated or altered file is refused naming the file and leaves nothing behind. The
//! restored directory opens as a normal replica (the growing segment is replayed from the log).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{IndexError, Result};

/// The file that describes a snapshot directory.
pub const SNAPSHOT_FILE: &str = "SNAPSHOT.json";
/// The replica snapshot's layout (`attest_core::format`): [`ShardSnapshot`] and the files it lists.
pub const SHARD_SNAPSHOT: attest_core::format::Layout = attest_core::format::Layout {
    what: "replica snapshot",
    current: 1,
};
/// The version [`ShardSnapshot`]s are written in.
pub const SNAPSHOT_FORMAT: u32 = SHARD_SNAPSHOT.current;

/// `SNAPSHOT.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardSnapshot {
    pub format: u32,
    pub created_ms: u64,
    /// Every write acknowledged up to this log sequence number is in the snapshot.
    pub last_seq: u64,
    pub live_documents: u64,
    /// Every file of the snapshot but this one, by path relative to the snapshot directory, in path order.
    pub files: Vec<SnapshotFile>,
}

impl ShardSnapshot {
    /// Bytes of all the files.
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.bytes).sum()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotFile {
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
}

/// Makes `dest` an empty directory, refusing one that holds anything (a snapshot never overwrites).
pub(crate) fn prepare_destination(dest: &Path) -> Result<()> {
    if dest.exists() && std::fs::read_dir(dest)?.next().is_some() {
        return Err(IndexError::invalid(
            "destination",
            format!("{} is not empty", dest.display()),
        ));
    }
    std::fs::create_dir_all(dest)?;
    Ok(())
}

/// Hard-links every file under `from` into the same place under `to` (copies where a link is impossible,
/// e.g. across filesystems). tantivy's lock files are left out: they belong to a running writer.
pub(crate) fn link_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type()?.is_dir() {
            link_tree(&source, &target)?;
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(".tantivy-") && name.ends_with(".lock") {
            continue;
        }
        if std::fs::hard_link(&source, &target).is_err() {
            std::fs::copy(&source, &target)?;
        }
    }
    Ok(())
}

/// Every regular file under `root`, as paths relative to it, in order.
fn files_under(root: &Path) -> Result<Vec<PathBuf>> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                walk(root, &entry.path(), out)?;
            } else {
                let path = entry.path();
                out.push(path.strip_prefix(root).unwrap_or(&path).to_path_buf());
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(root, root, &mut out)?;
    out.sort();
    Ok(out)
}

/// sha256 (hex) and length of a file, read in blocks.
pub fn hash_file(path: &Path) -> Result<(String, u64)> {
    Ok(hash_through(path, None)?)
}

/// Reads `from` in blocks, hashing it and writing each block to `to` when given: (sha256 hex, length).
fn hash_through(from: &Path, mut to: Option<&mut std::fs::File>) -> std::io::Result<(String, u64)> {
    let mut input = std::fs::File::open(from)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut bytes = 0u64;
    loop {
        let n = input.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        if let Some(out) = to.as_mut() {
            out.write_all(&buf[..n])?;
        }
        bytes += n as u64;
    }
    Ok((hex::encode(hasher.finalize()), bytes))
}

/// Hashes every file of the snapshot in `dir` and writes its `SNAPSHOT.json` (last, so a snapshot cut short
/// has none and is never taken for a whole one).
pub(crate) fn seal(dir: &Path, last_seq: u64, live_documents: u64) -> Result<ShardSnapshot> {
    let mut files = Vec::new();
    for relative in files_under(dir)? {
        let (sha256, bytes) = hash_file(&dir.join(&relative))?;
        files.push(SnapshotFile {
            path: relative.to_string_lossy().into_owned(),
            bytes,
            sha256,
        });
    }
    let snapshot = ShardSnapshot {
        format: SNAPSHOT_FORMAT,
        created_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        last_seq,
        live_documents,
        files,
    };
    let bytes = serde_json::to_vec_pretty(&snapshot)
        .map_err(|e| IndexError::Serialization(e.to_string()))?;
    crate::fsutil::write_atomically(&dir.join(SNAPSHOT_FILE), &bytes)?;
    Ok(snapshot)
}

/// Reads and checks `SNAPSHOT.json` of `dir`: its format, and that no path leaves the directory.
fn read_manifest(dir: &Path) -> Result<ShardSnapshot> {
    let manifest = dir.join(SNAPSHOT_FILE);
    let bytes = std::fs::read(&manifest)
        .map_err(|e| IndexError::corrupt(&manifest, format!("cannot read: {e}")))?;
    let snapshot: ShardSnapshot = serde_json::from_slice(&bytes)
        .map_err(|e| IndexError::corrupt(&manifest, format!("not a snapshot manifest: {e}")))?;
    SHARD_SNAPSHOT.check(Some(snapshot.format), &manifest.display().to_string())?;
    for file in &snapshot.files {
        let relative = Path::new(&file.path);
        if relative.is_absolute()
            || relative
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(IndexError::corrupt(
                &manifest,
                format!("`{}` is outside the snapshot", file.path),
            ));
        }
    }
    Ok(snapshot)
}

/// The refusal of `path` when what was read of it (`sha256`, `bytes`) is not what the snapshot recorded.
fn mismatch(path: &Path, file: &SnapshotFile, sha256: &str, bytes: u64) -> Option<IndexError> {
    if bytes != file.bytes {
        return Some(IndexError::corrupt(
            path,
            format!("{bytes} bytes, the snapshot recorded {}", file.bytes),
        ));
    }
    (sha256 != file.sha256)
        .then(|| IndexError::corrupt(path, "its sha256 differs from the snapshot's"))
}

/// Reads the snapshot in `dir` and checks every file it lists (present, same size, same sha256), naming the
/// first that is not; a path that would leave the directory is refused too.
pub fn verify(dir: &Path) -> Result<ShardSnapshot> {
    let snapshot = read_manifest(dir)?;
    for file in &snapshot.files {
        let path = dir.join(&file.path);
        let (sha256, bytes) = hash_file(&path)
            .map_err(|e| IndexError::corrupt(&path, format!("missing or unreadable: {e}")))?;
        if let Some(refusal) = mismatch(&path, file, &sha256, bytes) {
            return Err(refusal);
        }
    }
    Ok(snapshot)
}

/// Restores the snapshot in `snapshot_dir` into `target` (absent or empty); the caller then opens `target` as a
/// shard engine. Every file is checked as it is copied (one read of each byte) into a staging directory beside
/// `target`, which becomes `target` only when all of them matched: a refused snapshot leaves nothing behind.
pub fn restore(snapshot_dir: &Path, target: &Path) -> Result<ShardSnapshot> {
    let snapshot = read_manifest(snapshot_dir)?;
    if target.exists() && std::fs::read_dir(target)?.next().is_some() {
        return Err(IndexError::invalid(
            "target",
            format!("{} is not empty", target.display()),
        ));
    }
    let name = target
        .file_name()
        .map_or_else(|| "restore".into(), |n| n.to_string_lossy().into_owned());
    let staging = target.with_file_name(format!(".{name}.restoring"));
    if staging.exists() {
        // Left by a restore that was cut short.
        std::fs::remove_dir_all(&staging)?;
    }
    let copied = (|| {
        for file in &snapshot.files {
            let (from, to) = (snapshot_dir.join(&file.path), staging.join(&file.path));
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let (sha256, bytes) = copy_hashing(&from, &to)
                .map_err(|e| IndexError::corrupt(&from, format!("missing or unreadable: {e}")))?;
            if let Some(refusal) = mismatch(&from, file, &sha256, bytes) {
                return Err(refusal);
            }
        }
        Ok(())
    })();
    // A restored log goes on numbering from the snapshot's position, which its original has used since for
    // other writes: to the peers it is a new log (crate::log_identity).
    let copied = copied.and_then(|()| {
        let wal = staging.join(crate::wal::WAL_DIR);
        if wal.is_dir() {
            crate::wal::IngestLog::open(&wal)?.renew_id()?;
        }
        Ok(())
    });
    if let Err(e) = copied {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    if target.exists() {
        std::fs::remove_dir(target)?;
    }
    std::fs::rename(&staging, target)?;
    Ok(snapshot)
}

/// Copies `from` to `to` (synced), returning the sha256 (hex) and length of what was copied.
fn copy_hashing(from: &Path, to: &Path) -> std::io::Result<(String, u64)> {
    let mut output = std::fs::File::create(to)?;
    let hashed = hash_through(from, Some(&mut output))?;
    output.sync_all()?;
    Ok(hashed)
}
