//! The free-space reserve of a data directory, one rule for every role that writes one (shard nodes, meta; `attest
//! dev` runs both): below the reserve a node refuses writes with a disk-full error and keeps serving reads, like
//! Elasticsearch's flood stage or etcd's NOSPACE alarm. Refusing before the filesystem is full is what keeps
//! RocksDB away from an out-of-space write, whose failure leaves its log writer unusable (and Debian's build,
//! compiled with assertions, aborts on the next sync of that writer).
//!
//! The check itself (`statvfs` on the directory) is here; the guard that keeps its state, logs changes and
//! publishes gauges is `attest_telemetry::disk`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::ConfigProblems;

/// Default reserve: room for what may still be written after the last check passed (a 32 MiB request, RocksDB's
/// preallocated next log file, a memtable flush, a segment seal) without reaching the end of the filesystem.
pub const DEFAULT_MIN_FREE_BYTES: u64 = 256 << 20;

/// The `disk` section of the configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DiskConfig {
    /// Writes are refused while the data directory's filesystem has less than this many bytes free (default
    /// 256 MiB).
    pub min_free_bytes: u64,
    /// ... or less than this fraction of its size free (0..1; default 0, off). The larger of the two is the
    /// reserve.
    pub min_free_ratio: f64,
    /// How often a node looks at its free space between writes, for `/readyz` and the `disk_*` gauges
    /// (default 1000 ms). Every write batch also looks first.
    pub check_interval_ms: u64,
}

impl Default for DiskConfig {
    fn default() -> Self {
        DiskConfig {
            min_free_bytes: DEFAULT_MIN_FREE_BYTES,
            min_free_ratio: 0.0,
            check_interval_ms: 1000,
        }
    }
}

impl DiskConfig {
    /// The bytes that must stay free on a filesystem of `total` bytes.
    pub fn reserve_bytes(&self, total: u64) -> u64 {
        let by_ratio = (total as f64 * self.min_free_ratio.clamp(0.0, 1.0)) as u64;
        self.min_free_bytes.max(by_ratio)
    }

    /// Whether `space` leaves the reserve: writes may go on.
    pub fn allows_writes(&self, space: Space) -> bool {
        space.free >= self.reserve_bytes(space.total)
    }

    pub fn problems(&self) -> ConfigProblems {
        let mut p = ConfigProblems::new("disk");
        p.unit_interval("min_free_ratio", self.min_free_ratio);
        p.positive("check_interval_ms", self.check_interval_ms);
        p
    }
}

/// Free and total bytes of a filesystem (free: what an unprivileged writer may still use).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Space {
    pub free: u64,
    pub total: u64,
}

/// The space of the filesystem holding `dir` (its nearest existing ancestor, for a directory not made yet).
pub fn space_of(dir: &Path) -> std::io::Result<Space> {
    use std::os::unix::ffi::OsStrExt;
    let existing = dir
        .ancestors()
        .find(|p| p.exists())
        .unwrap_or_else(|| Path::new("."));
    let mut path = existing.as_os_str().as_bytes().to_vec();
    path.push(0);
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated and `stat` is a valid out-pointer for the call.
    let rc = unsafe { libc::statvfs(path.as_ptr().cast(), &mut stat) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let unit = stat.f_frsize as u64;
    Ok(Space {
        free: (stat.f_bavail as u64).saturating_mul(unit),
        total: (stat.f_blocks as u64).saturating_mul(unit),
    })
}

/// Writes refused because `dir` is below its reserve: the message names the directory and its free bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "disk full: data directory {} has {} free of {}, below the reserve of {} (disk.min_free_bytes / \
     disk.min_free_ratio); writes are refused until space is freed, reads are served",
    dir.display(), bytes(space.free), bytes(space.total), bytes(*reserve)
)]
pub struct DiskFull {
    pub dir: PathBuf,
    pub space: Space,
    pub reserve: u64,
}

/// The free space opening a RocksDB store needs (meta's Raft store, a shard's ingest log): a preallocated log
/// file, a MANIFEST, an OPTIONS file, the info log's header and the first flush, with room.
pub const OPEN_NEEDS_BYTES: u64 = 16 << 20;

/// Why `what` cannot be opened in `dir`, when its filesystem has less than [`OPEN_NEEDS_BYTES`] free or
/// `failed` (RocksDB's own out-of-space error, when an open got that far) says so; `None` where there is room,
/// or where the filesystem cannot be asked (the open then says what is wrong). Opening on a full disk is refused
/// before RocksDB writes a byte: a store whose first writes fail is left half made, and its info log aborts the
/// process on Debian's build (see [`crate::rocksdb_files::harden`]).
pub fn no_room_to_open(dir: &Path, what: &str, failed: Option<&str>) -> Option<String> {
    let space = space_of(dir).ok()?;
    if space.free >= OPEN_NEEDS_BYTES && failed.is_none() {
        return None;
    }
    Some(format!(
        "disk full: {what} cannot be opened in {}: the filesystem has {} free and opening needs at least {}; \
         free space (or grow the disk) and try again{}",
        dir.display(),
        bytes(space.free),
        bytes(OPEN_NEEDS_BYTES),
        failed.map(|e| format!(" (RocksDB: {e})")).unwrap_or_default()
    ))
}

/// `N bytes (X MiB)`: exact for a script, readable for a person.
pub fn bytes(n: u64) -> String {
    format!("{n} bytes ({:.1} MiB)", n as f64 / f64::from(1u32 << 20))
}

/// Whether an error message from RocksDB or the OS says the filesystem is out of space (ENOSPC), which the
/// reserve exists to prevent but a write racing another process can still meet.
pub fn is_out_of_space(message: &str) -> bool {
    message.contains("No space left on device") || message.contains("NoSpace")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserve_is_the_larger_of_bytes_and_ratio() {
        let c = DiskConfig {
            min_free_bytes: 100,
            min_free_ratio: 0.1,
            ..DiskConfig::default()
        };
        assert_eq!(c.reserve_bytes(500), 100, "10% of 500 is below 100 bytes");
        assert_eq!(
            c.reserve_bytes(10_000),
            1000,
            "10% of 10,000 is above 100 bytes"
        );
        assert!(c.allows_writes(Space {
            free: 1000,
            total: 10_000
        }));
        assert!(!c.allows_writes(Space {
            free: 999,
            total: 10_000
        }));
        assert!(!c.allows_writes(Space { free: 0, total: 0 }));
        let off = DiskConfig {
            min_free_bytes: 0,
            min_free_ratio: 0.0,
            ..DiskConfig::default()
        };
        assert!(off.allows_writes(Space { free: 0, total: 1 }));
    }

    #[test]
    fn defaults_are_valid_and_bad_values_are_named() {
        assert!(DiskConfig::default().problems().is_empty());
        assert_eq!(DiskConfig::default().min_free_bytes, 256 << 20);
        let bad = DiskConfig {
            min_free_ratio: 1.5,
            check_interval_ms: 0,
            ..DiskConfig::default()
        };
        let p = bad.problems().into_vec();
        assert!(
            p.iter().any(|p| p.starts_with("disk.min_free_ratio")),
            "{p:?}"
        );
        assert!(
            p.iter().any(|p| p.starts_with("disk.check_interval_ms")),
            "{p:?}"
        );
    }

    #[test]
    fn space_of_reads_the_filesystem_and_the_message_names_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let space = space_of(&dir.path().join("not/made/yet")).unwrap();
        assert!(space.total > 0 && space.free <= space.total, "{space:?}");
        let full = DiskFull {
            dir: dir.path().to_path_buf(),
            space: Space {
                free: 1 << 20,
                total: 64 << 20,
            },
            reserve: 8 << 20,
        };
        let message = full.to_string();
        assert!(
            message.starts_with("disk full: data directory "),
            "{message}"
        );
        assert!(
            message.contains(&dir.path().display().to_string()),
            "{message}"
        );
        assert!(
            message.contains("1048576 bytes (1.0 MiB) free"),
            "{message}"
        );
        assert!(is_out_of_space(
            "IO error: No space left on device: While appending to file: /x/000012.log"
        ));
        assert!(!is_out_of_space("IO error: Permission denied"));
    }
}
