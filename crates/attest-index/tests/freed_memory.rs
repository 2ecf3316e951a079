//! The freed memory of a finished job handed back to the system ([`attest_index::freed_memory`]). A test binary of
//! its own: it reads the whole process's anonymous memory, which tests running beside it would move.

use attest_index::freed_memory::{anonymous_kb, release};

/// Many small blocks freed on a thread of their own (as a seal's are) stay in that thread's arena; after a
/// release the process holds far less of them.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn what_a_finished_job_freed_is_handed_back() {
    const BLOCKS: usize = 200_000;
    const BLOCK: usize = 1024;
    std::thread::spawn(|| {
        let mut kept = Vec::with_capacity(BLOCKS);
        let mut freed = Vec::with_capacity(BLOCKS);
        for i in 0..2 * BLOCKS {
            // Every other block stays until the end, so the arena's top is never free and cannot be trimmed
            // from the top alone: only a walk of the whole arena finds the free pages between.
            let block = vec![i as u8; BLOCK];
            if i % 2 == 0 {
                freed.push(block);
            } else {
                kept.push(block);
            }
        }
        drop(freed);
        let held = anonymous_kb().expect("RssAnon");
        // Keep one block in 64 (one a page or so): most pages hold nothing live once the rest go.
        kept.retain(|b| b[0] % 64 == 1);
        let after_free = anonymous_kb().expect("RssAnon");
        release();
        let after_release = anonymous_kb().expect("RssAnon");
        let total_kb = (2 * BLOCKS * BLOCK / 1024) as u64;
        assert!(
            held > total_kb / 2,
            "the blocks were resident: {held} kB held of {total_kb} kB allocated"
        );
        assert!(
            after_free.saturating_sub(after_release) > total_kb / 4,
            "freed {after_free} kB → {after_release} kB after the release (of {total_kb} kB allocated)"
        );
        drop(kept);
    })
    .join()
    .unwrap();
}
