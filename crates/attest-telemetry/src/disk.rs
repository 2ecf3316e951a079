//! The guard of a data directory's free-space reserve (`attest_core::disk`): every write batch of a shard node
//! or meta asks it first, and below the reserve the write is refused with the disk-full error while reads go
//! on. The state is looked at again on every write and every `check_interval_ms` in the background, so writes
//! are accepted again as soon as space returns, with no restart. While a directory is full, `/readyz` of the
//! process says so (still ready: reads are served) and the `disk_full` gauge is 1.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use attest_core::disk::{self, DiskConfig, DiskFull, Space};
use parking_lot::Mutex;

use crate::metrics::{DISK_FREE_BYTES, DISK_FULL, DISK_WRITES_REFUSED_TOTAL};

/// Every live guard of the process, for `/readyz` (one process may hold several: `attest dev`'s meta and shard
/// nodes).
static GUARDS: Mutex<Vec<Weak<DiskGuard>>> = Mutex::new(Vec::new());

/// The reserve of one data directory and what was last seen of its filesystem.
#[derive(Debug)]
pub struct DiskGuard {
    dir: PathBuf,
    config: DiskConfig,
    free: AtomicU64,
    total: AtomicU64,
    full: AtomicBool,
}

impl DiskGuard {
    /// A guard of `dir`, looked at once now and then every `config.check_interval_ms` (when called inside a
    /// tokio runtime) for as long as the guard lives.
    pub fn new(dir: &Path, config: &DiskConfig) -> Arc<DiskGuard> {
        let guard = Arc::new(DiskGuard {
            dir: dir.to_path_buf(),
            config: config.clone(),
            free: AtomicU64::new(u64::MAX),
            total: AtomicU64::new(0),
            full: AtomicBool::new(false),
        });
        guard.refresh();
        let mut guards = GUARDS.lock();
        guards.retain(|g| g.strong_count() > 0);
        guards.push(Arc::downgrade(&guard));
        drop(guards);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let weak = Arc::downgrade(&guard);
            let every = Duration::from_millis(config.check_interval_ms.max(1));
            runtime.spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    match weak.upgrade() {
                        Some(guard) => drop(guard.refresh()),
                        None => return,
                    }
                }
            });
        }
        guard
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Before a write batch: `Err` (and `disk_writes_refused_total` counted) while the directory is below its
    /// reserve. Looks at the filesystem now (one `statvfs`), so freed space is seen by the next write.
    pub fn check_write(&self) -> Result<(), DiskFull> {
        match self.refresh() {
            None => Ok(()),
            Some(full) => {
                metrics::counter!(DISK_WRITES_REFUSED_TOTAL, "dir" => self.label()).increment(1);
                Err(full)
            }
        }
    }

    /// Whether the directory was below its reserve when last looked at.
    pub fn is_full(&self) -> bool {
        self.full.load(Ordering::Relaxed)
    }

    /// Looks at the filesystem, updates the gauges and logs a change of state; the disk-full error while below
    /// the reserve. A directory whose filesystem cannot be read is not called full (writes then meet the
    /// filesystem's own error).
    pub fn refresh(&self) -> Option<DiskFull> {
        let space = match disk::space_of(&self.dir) {
            Ok(space) => space,
            Err(e) => {
                tracing::warn!(dir = %self.dir.display(), error = %e, event = "disk_check_failed",
                    "cannot read the free space of the data directory");
                return None;
            }
        };
        self.free.store(space.free, Ordering::Relaxed);
        self.total.store(space.total, Ordering::Relaxed);
        let full = !self.config.allows_writes(space);
        let label = self.label();
        metrics::gauge!(DISK_FREE_BYTES, "dir" => label.clone()).set(space.free as f64);
        metrics::gauge!(DISK_FULL, "dir" => label).set(if full { 1.0 } else { 0.0 });
        let error = full.then(|| self.error(space));
        if self.full.swap(full, Ordering::Relaxed) != full {
            match &error {
                Some(e) => tracing::error!(dir = %self.dir.display(), free_bytes = space.free,
                    reserve_bytes = e.reserve, event = "disk_full", "{e}"),
                None => tracing::info!(dir = %self.dir.display(), free_bytes = space.free,
                    event = "disk_space_returned", "free space is above the reserve again: writes accepted"),
            }
        }
        error
    }

    fn error(&self, space: Space) -> DiskFull {
        DiskFull {
            dir: self.dir.clone(),
            space,
            reserve: self.config.reserve_bytes(space.total),
        }
    }

    fn label(&self) -> String {
        self.dir.display().to_string()
    }
}

/// What `/readyz` adds while a data directory of this process is below its reserve (looked at now): one line
/// per full directory, `disk full: writes refused (...)`.
pub fn readiness_notes() -> Vec<String> {
    let guards: Vec<Arc<DiskGuard>> = GUARDS.lock().iter().filter_map(Weak::upgrade).collect();
    let mut notes: Vec<String> = guards
        .iter()
        .filter_map(|g| g.refresh())
        .map(|e| {
            format!(
                "disk full: writes refused, reads served ({} has {} free, reserve {})",
                e.dir.display(),
                disk::bytes(e.space.free),
                disk::bytes(e.reserve)
            )
        })
        .collect();
    notes.dedup();
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reserve larger than any filesystem refuses writes and says so in `/readyz`'s notes; no reserve
    /// accepts them again, without a new guard.
    #[test]
    fn writes_are_refused_below_the_reserve_and_the_note_names_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let huge = DiskConfig {
            min_free_bytes: u64::MAX,
            ..DiskConfig::default()
        };
        let guard = DiskGuard::new(dir.path(), &huge);
        let refused = guard.check_write().unwrap_err();
        assert!(guard.is_full());
        assert!(refused.to_string().starts_with("disk full: data directory"));
        let notes = readiness_notes();
        assert!(
            notes
                .iter()
                .any(|n| n.contains(&dir.path().display().to_string())),
            "{notes:?}"
        );
        drop(guard);
        let none = DiskConfig {
            min_free_bytes: 0,
            ..DiskConfig::default()
        };
        let guard = DiskGuard::new(dir.path(), &none);
        guard.check_write().unwrap();
        assert!(!guard.is_full());
        assert!(
            !readiness_notes()
                .iter()
                .any(|n| n.contains(&dir.path().display().to_string())),
            "a dropped guard leaves no note"
        );
    }
}
