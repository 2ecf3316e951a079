//! Write versions, the one rule for them: last writer wins by version, and every replica of a document applies
//! the same one. A version is microseconds since the Unix epoch, so versions chosen by different nodes with roughly
//! synchronised clocks order writes by time, and it is never at or below the version it must follow. The router
//! stamps every write with its [`WriteClock`]; a shard replica gives a write that came without a version
//! [`next_after`] the one it holds.

use std::sync::atomic::{AtomicU64, Ordering};

/// Microseconds since the Unix epoch (0 if the clock is before it).
fn now_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// A write version newer than `held`: now, or `held + 1` when the clock has not passed `held`.
pub fn next_after(held: u64) -> u64 {
    now_micros().max(held + 1)
}

/// Hands out write versions, each [`next_after`] the last one it handed out: strictly increasing across the
/// threads that share it.
#[derive(Debug, Default)]
pub struct WriteClock {
    last: AtomicU64,
}

impl WriteClock {
    pub fn next(&self) -> u64 {
        let mut last = self.last.load(Ordering::Relaxed);
        loop {
            let v = next_after(last);
            match self
                .last
                .compare_exchange_weak(last, v, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return v,
                Err(seen) => last = seen,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_follows_what_is_held_and_the_clock() {
        let now = now_micros();
        assert!(next_after(0) >= now);
        let future = now + 3_600_000_000;
        assert_eq!(next_after(future), future + 1);
    }

    #[test]
    fn the_clock_never_repeats_a_version_across_threads() {
        let clock = std::sync::Arc::new(WriteClock::default());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let clock = std::sync::Arc::clone(&clock);
                std::thread::spawn(move || {
                    let versions: Vec<u64> = (0..1000).map(|_| clock.next()).collect();
                    assert!(versions.windows(2).all(|w| w[0] < w[1]));
                    versions
                })
            })
            .collect();
        let mut all: Vec<u64> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 4000);
    }
}
