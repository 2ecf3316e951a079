//! [`CachedEmbedder`]: a bounded LRU cache of embeddings in front of any [`Embedder`].
//!
//! Meant for query embeddings: the same question asked twice is embedded once. Keys are the
//! exact text (no normalisation), values the vectors the inner embedder returned.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::embedder::Embedder;
use crate::error::EmbedError;

/// Default number of cached texts.
pub const DEFAULT_CACHE_CAPACITY: usize = 1024;

/// Least-recently-used map from text to vector. Recency is a monotonically increasing tick;
/// `by_tick` orders entries by their last use, so eviction pops its first entry.
#[derive(Debug)]
struct Lru {
    capacity: usize,
    tick: u64,
    entries: HashMap<String, (Vec<f32>, u64)>,
    by_tick: BTreeMap<u64, String>,
}

impl Lru {
    fn new(capacity: usize) -> Self {
        Self {
            capacity,
            tick: 0,
            entries: HashMap::new(),
            by_tick: BTreeMap::new(),
        }
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// The cached vector for `key`, marking it most recently used.
    fn get(&mut self, key: &str) -> Option<Vec<f32>> {
        let tick = self.next_tick();
        let (vector, last) = self.entries.get_mut(key)?;
        let key = self
            .by_tick
            .remove(last)
            .expect("every entry has its tick in by_tick");
        *last = tick;
        let vector = vector.clone();
        self.by_tick.insert(tick, key);
        Some(vector)
    }

    fn insert(&mut self, key: String, vector: Vec<f32>) {
        if self.capacity == 0 {
            return;
        }
        let tick = self.next_tick();
        if let Some((old_vector, last)) = self.entries.get_mut(&key) {
            self.by_tick.remove(last);
            *old_vector = vector;
            *last = tick;
            self.by_tick.insert(tick, key);
            return;
        }
        while self.entries.len() >= self.capacity {
            let Some((_, oldest)) = self.by_tick.pop_first() else {
                break;
            };
            self.entries.remove(&oldest);
        }
        self.by_tick.insert(tick, key.clone());
        self.entries.insert(key, (vector, tick));
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.by_tick.clear();
    }
}

/// Wraps an [`Embedder`] with a bounded LRU cache keyed by the exact text.
///
/// Hits and misses are counted per input text: a text found in the cache is a hit; a text
/// embedded by the inner embedder is a miss (a duplicate within one call is embedded once and
/// counts as a hit). A capacity of 0 disables caching (every text is a miss).
#[derive(Debug)]
pub struct CachedEmbedder<E> {
    inner: E,
    cache: Mutex<Lru>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl<E: Embedder> CachedEmbedder<E> {
    /// A cache of [`DEFAULT_CACHE_CAPACITY`] texts.
    pub fn new(inner: E) -> Self {
        Self::with_capacity(inner, DEFAULT_CACHE_CAPACITY)
    }

    /// A cache of at most `capacity` texts.
    pub fn with_capacity(inner: E, capacity: usize) -> Self {
        Self {
            inner,
            cache: Mutex::new(Lru::new(capacity)),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The wrapped embedder.
    pub fn inner(&self) -> &E {
        &self.inner
    }

    /// Texts served from the cache so far.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Texts that had to be embedded so far.
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// Texts currently cached.
    pub fn len(&self) -> usize {
        self.cache.lock().len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Most texts kept.
    pub fn capacity(&self) -> usize {
        self.cache.lock().capacity
    }

    /// Drops every cached vector (the counters are kept).
    pub fn clear(&self) {
        self.cache.lock().clear();
    }
}

impl<E: Embedder> Embedder for CachedEmbedder<E> {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out: Vec<Option<Vec<f32>>> = Vec::with_capacity(texts.len());
        // Distinct texts to embed, and for each input position waiting on one, its index there.
        let mut to_embed: Vec<&str> = Vec::new();
        let mut pending: HashMap<&str, usize> = HashMap::new();
        let mut waiting: Vec<(usize, usize)> = Vec::new();
        let (mut hits, mut misses) = (0u64, 0u64);
        {
            let mut cache = self.cache.lock();
            for (position, &text) in texts.iter().enumerate() {
                if let Some(vector) = cache.get(text) {
                    hits += 1;
                    out.push(Some(vector));
                    continue;
                }
                out.push(None);
                let slot = match pending.get(text) {
                    Some(&slot) => {
                        hits += 1;
                        slot
                    }
                    None => {
                        misses += 1;
                        to_embed.push(text);
                        pending.insert(text, to_embed.len() - 1);
                        to_embed.len() - 1
                    }
                };
                waiting.push((position, slot));
            }
        }
        self.hits.fetch_add(hits, Ordering::Relaxed);
        self.misses.fetch_add(misses, Ordering::Relaxed);

        if !to_embed.is_empty() {
            // The lock is not held while the (slow) inner embedder runs.
            let vectors = self.inner.embed(&to_embed)?;
            if vectors.len() != to_embed.len() {
                return Err(EmbedError::Model(format!(
                    "embedder returned {} vectors for {} texts",
                    vectors.len(),
                    to_embed.len()
                )));
            }
            for &(position, slot) in &waiting {
                out[position] = Some(vectors[slot].clone());
            }
            let mut cache = self.cache.lock();
            for (text, vector) in to_embed.iter().zip(vectors) {
                cache.insert((*text).to_string(), vector);
            }
        }
        Ok(out
            .into_iter()
            .map(|v| v.expect("every position is filled"))
            .collect())
    }

    fn count_tokens(&self, text: &str) -> usize {
        self.inner.count_tokens(text)
    }

    fn query_prefix(&self) -> &str {
        self.inner.query_prefix()
    }
    fn identity(&self) -> crate::EmbedderIdentity {
        self.inner.identity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Embeds a text as [len, first byte, 1]; counts the texts it was asked to embed.
    #[derive(Default)]
    struct Fake {
        calls: AtomicUsize,
        texts: AtomicUsize,
    }

    impl Embedder for Fake {
        fn id(&self) -> &str {
            "fake"
        }
        fn dimension(&self) -> usize {
            3
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.texts.fetch_add(texts.len(), Ordering::SeqCst);
            Ok(texts
                .iter()
                .map(|t| {
                    vec![
                        t.len() as f32,
                        f32::from(t.bytes().next().unwrap_or(0)),
                        1.0,
                    ]
                })
                .collect())
        }
        fn count_tokens(&self, text: &str) -> usize {
            text.split_whitespace().count()
        }
    }

    #[test]
    fn second_lookup_is_a_hit() {
        let cached = CachedEmbedder::new(Fake::default());
        let first = cached.embed(&["hello"]).unwrap();
        let second = cached.embed(&["hello"]).unwrap();
        assert_eq!(first, second);
        assert_eq!((cached.hits(), cached.misses()), (1, 1));
        assert_eq!(cached.inner().texts.load(Ordering::SeqCst), 1);
        assert_eq!(cached.id(), "fake");
        assert_eq!(cached.dimension(), 3);
        assert_eq!(cached.count_tokens("a b c"), 3);
    }

    #[test]
    fn mixed_batch_keeps_order_and_embeds_only_misses() {
        let cached = CachedEmbedder::new(Fake::default());
        cached.embed(&["bb"]).unwrap();
        let out = cached.embed(&["a", "bb", "ccc", "a"]).unwrap();
        assert_eq!(out[0], vec![1.0, f32::from(b'a'), 1.0]);
        assert_eq!(out[1], vec![2.0, f32::from(b'b'), 1.0]);
        assert_eq!(out[2], vec![3.0, f32::from(b'c'), 1.0]);
        assert_eq!(out[3], out[0]);
        // "bb" cached and the second "a" deduplicated: hits; "a" and "ccc": misses.
        assert_eq!((cached.hits(), cached.misses()), (2, 3));
        assert_eq!(cached.inner().texts.load(Ordering::SeqCst), 3);
        assert_eq!(cached.len(), 3);
    }

    #[test]
    fn evicts_least_recently_used() {
        let cached = CachedEmbedder::with_capacity(Fake::default(), 2);
        cached.embed(&["a"]).unwrap();
        cached.embed(&["b"]).unwrap();
        cached.embed(&["a"]).unwrap(); // "a" is now more recent than "b"
        cached.embed(&["c"]).unwrap(); // evicts "b"
        assert_eq!(cached.len(), 2);
        let before = cached.misses();
        cached.embed(&["a"]).unwrap();
        assert_eq!(cached.misses(), before, "a stays cached");
        cached.embed(&["b"]).unwrap();
        assert_eq!(cached.misses(), before + 1, "b was evicted");
        assert_eq!(cached.len(), 2);
    }

    #[test]
    fn zero_capacity_disables_caching() {
        let cached = CachedEmbedder::with_capacity(Fake::default(), 0);
        cached.embed(&["a"]).unwrap();
        cached.embed(&["a"]).unwrap();
        assert_eq!((cached.hits(), cached.misses()), (0, 2));
        assert!(cached.is_empty());
    }

    #[test]
    fn clear_empties_and_empty_input_is_fine() {
        let cached = CachedEmbedder::new(Fake::default());
        assert!(cached.embed(&[]).unwrap().is_empty());
        assert_eq!(cached.inner().calls.load(Ordering::SeqCst), 0);
        cached.embed(&["x", "y"]).unwrap();
        assert_eq!(cached.len(), 2);
        cached.clear();
        assert!(cached.is_empty());
        assert_eq!(cached.capacity(), DEFAULT_CACHE_CAPACITY);
    }

    #[test]
    fn lru_stays_consistent_under_churn() {
        let mut lru = Lru::new(8);
        for i in 0..200u32 {
            lru.insert(format!("k{}", i % 13), vec![i as f32]);
            let _ = lru.get(&format!("k{}", (i * 7) % 13));
            assert!(lru.len() <= 8);
            assert_eq!(lru.len(), lru.by_tick.len());
            for (key, (_, tick)) in &lru.entries {
                assert_eq!(lru.by_tick.get(tick), Some(key));
            }
        }
    }
}
