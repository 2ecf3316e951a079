//! A bounded least-recently-used map whose entries also expire after a time to live: the terminology cache
//! (SPEC "answer" step 4: keyed by collection + normalised term, 1000 entries, TTL 5–30 min). Time is passed in,
//! so tests move it by hand. The same idea as `attest_embed`'s query-embedding cache, plus expiry.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

#[derive(Debug)]
struct Entry<V> {
    value: V,
    stored: Instant,
    tick: u64,
}

/// Recency is a monotonically increasing tick; `by_tick` orders keys by last use, so eviction pops its first.
#[derive(Debug)]
pub struct LruTtl<V> {
    capacity: usize,
    ttl: Duration,
    tick: u64,
    entries: HashMap<String, Entry<V>>,
    by_tick: BTreeMap<u64, String>,
}

impl<V: Clone> LruTtl<V> {
    /// At most `capacity` entries (0 disables caching), each living `ttl` after it was stored.
    pub fn new(capacity: usize, ttl: Duration) -> Self {
        LruTtl {
            capacity,
            ttl,
            tick: 0,
            entries: HashMap::new(),
            by_tick: BTreeMap::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// The live value for `key`, marking it most recently used; an expired one is dropped.
    pub fn get(&mut self, key: &str, now: Instant) -> Option<V> {
        let expired = {
            let entry = self.entries.get(key)?;
            now.saturating_duration_since(entry.stored) >= self.ttl
        };
        if expired {
            self.remove(key);
            return None;
        }
        let tick = self.next_tick();
        let entry = self.entries.get_mut(key)?;
        self.by_tick.remove(&entry.tick);
        entry.tick = tick;
        self.by_tick.insert(tick, key.to_string());
        Some(entry.value.clone())
    }

    /// Stores `value` under `key` as of `now`, evicting the least recently used entry when full.
    pub fn insert(&mut self, key: String, value: V, now: Instant) {
        if self.capacity == 0 {
            return;
        }
        self.remove(&key);
        while self.entries.len() >= self.capacity {
            let Some((_, oldest)) = self.by_tick.pop_first() else {
                break;
            };
            self.entries.remove(&oldest);
        }
        let tick = self.next_tick();
        self.by_tick.insert(tick, key.clone());
        self.entries.insert(
            key,
            Entry {
                value,
                stored: now,
                tick,
            },
        );
    }

    fn remove(&mut self, key: &str) {
        if let Some(old) = self.entries.remove(key) {
            self.by_tick.remove(&old.tick);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(600);

    #[test]
    fn least_recently_used_is_evicted() {
        let t0 = Instant::now();
        let mut c = LruTtl::new(2, TTL);
        c.insert("a".into(), 1, t0);
        c.insert("b".into(), 2, t0);
        assert_eq!(c.get("a", t0), Some(1)); // a is now the most recent
        c.insert("c".into(), 3, t0);
        assert_eq!(c.len(), 2);
        assert_eq!(c.get("b", t0), None);
        assert_eq!((c.get("a", t0), c.get("c", t0)), (Some(1), Some(3)));
        // Re-inserting a key replaces it without evicting another.
        c.insert("c".into(), 4, t0);
        assert_eq!(
            (c.len(), c.get("c", t0), c.get("a", t0)),
            (2, Some(4), Some(1))
        );
    }

    #[test]
    fn entries_expire_after_the_ttl() {
        let t0 = Instant::now();
        let mut c = LruTtl::new(10, TTL);
        c.insert("a".into(), 1, t0);
        assert_eq!(c.get("a", t0 + TTL - Duration::from_secs(1)), Some(1));
        // Using an entry does not extend its life.
        assert_eq!(c.get("a", t0 + TTL), None);
        assert!(c.is_empty());
    }

    #[test]
    fn zero_capacity_caches_nothing() {
        let t0 = Instant::now();
        let mut c = LruTtl::new(0, TTL);
        c.insert("a".into(), 1, t0);
        assert_eq!(c.get("a", t0), None);
    }
}
