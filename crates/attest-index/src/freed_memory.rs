//! Hands the memory a seal, a merge or a tuning has freed back to the system. Each builds in buffers of its own
//! (rows and vectors collected, codes encoded, lists moved, exact scans' results) on threads of its own, and
//! glibc's allocator keeps what such threads free in their arenas for the next allocation instead of returning it:
//! a shard process that had just loaded its rows held several times the anonymous memory of the same process
//! restarted on the same files, and the page cache its mapped segments serve from was short by that much
//! (docs/decisions/freed-memory.md). `malloc_trim` returns the free pages of every arena; it runs once a job has
//! ended, off the request path. Elsewhere than on glibc, a no-op.

use tracing::{debug, Level};

/// Returns the free pages of the process's heap to the system, and logs what that changed (`freed_memory_released`,
/// at debug level, with the anonymous memory before and after).
pub fn release() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // The two reads of /proc are for the event alone: skipped when it would not be logged.
        let logged = tracing::enabled!(Level::DEBUG);
        let before = logged.then(anonymous_kb).flatten();
        // SAFETY: malloc_trim has no preconditions; it takes each arena's lock while it walks it.
        let released = unsafe { libc::malloc_trim(0) } == 1;
        if logged {
            debug!(
                released,
                anonymous_kb_before = before,
                anonymous_kb_after = anonymous_kb(),
                event = "freed_memory_released",
                "freed heap memory handed back to the system"
            );
        }
    }
}

/// The process's resident anonymous memory (`RssAnon` of `/proc/self/status`), in KiB; None where unreadable.
pub fn anonymous_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}
