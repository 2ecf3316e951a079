//! Near-duplicate detection with MinHash signatures and LSH banding, so that mirrored or
//! lightly edited copies of a document are indexed once.
//!
//! Hashing is seeded and hand-rolled (FNV-1a + SplitMix64) rather than `RandomState`, so the
//! same corpus yields the same duplicate decisions on every run and machine.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use unicode_segmentation::UnicodeSegmentation;

/// Texts with fewer words than one word shingle are shingled by characters, this many at a time.
const CHAR_SHINGLE: usize = 4;

/// Fixed seed of the permutation family; changing it changes every signature.
const SEED: u64 = 0x5EED_A77E_57D0_C5ED;

/// MinHash / LSH parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MinHashConfig {
    /// Signature length (hash permutations). Default 128.
    pub num_perm: usize,
    /// LSH bands; `num_perm / bands` rows per band. Default 32 (4 rows), which makes a pair at
    /// Jaccard 0.9 a candidate with probability ≈ 1 − 1e-15 while keeping buckets selective.
    pub bands: usize,
    /// Words per shingle. Default 5.
    pub shingle_words: usize,
    /// Minimum estimated Jaccard similarity for a duplicate. Default 0.9.
    pub threshold: f64,
    /// Bands of a document's sketch that a shard stores and looks up: the first ones ([`Self::stored_bands`]).
    /// Default 16 of the 32: a band of 4 rows of a pair at the threshold (Jaccard 0.9) matches with probability
    /// 0.9⁴ = 0.66, so the pair is still a candidate with probability 1 − 0.34¹⁶ = 1 − 4·10⁻⁸, for half the
    /// bucket entries per stored document (~0.4 KB of a shard's disk per document and replica). The signature is
    /// stored and compared whole. Documents stored under another value keep being found: a lookup asks a prefix
    /// of the bands, and every document is stored under one.
    pub stored_bands: usize,
}

impl MinHashConfig {
    /// The band keys of `bands` (a sketch's) that a shard stores and looks up: the first `stored_bands`, at least
    /// one.
    pub fn stored_bands<'a>(&self, bands: &'a [u64]) -> &'a [u64] {
        &bands[..self.stored_band_count().min(bands.len())]
    }

    /// How many band keys of each document a shard stores: `stored_bands`, at least one, at most the bands a
    /// sketch has (`bands`, within 1..=`num_perm`).
    pub fn stored_band_count(&self) -> usize {
        self.stored_bands
            .max(1)
            .min(self.bands.clamp(1, self.num_perm.max(1)))
    }
}

impl Default for MinHashConfig {
    fn default() -> Self {
        MinHashConfig {
            num_perm: 128,
            bands: 32,
            shingle_words: 5,
            threshold: 0.9,
            stored_bands: 16,
        }
    }
}

/// A text's MinHash signature (`bands * rows` minima) and the hash of each of its bands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sketch {
    pub signature: Vec<u32>,
    pub bands: Vec<u64>,
}

/// An in-memory set of documents' MinHash signatures, queried and grown one document at a time.
#[derive(Debug, Clone)]
pub struct NearDuplicateIndex {
    config: MinHashConfig,
    rows: usize,
    seeds: Vec<u64>,
    keys: Vec<String>,
    /// Signatures of `keys`, concatenated (`bands * rows` values each).
    signatures: Vec<u32>,
    /// Per band: band hash → indices into `keys`, in insertion order. Only looked up, never
    /// iterated, so `HashMap`'s per-process ordering cannot reach a result.
    buckets: Vec<HashMap<u64, Vec<usize>>>,
}

impl NearDuplicateIndex {
    /// Out-of-range settings are clamped rather than rejected: `num_perm ≥ 1`,
    /// `1 ≤ bands ≤ num_perm`, `shingle_words ≥ 1`; any `num_perm % bands` surplus is unused.
    pub fn new(config: MinHashConfig) -> Self {
        let num_perm = config.num_perm.max(1);
        let bands = config.bands.clamp(1, num_perm);
        let rows = num_perm / bands;
        let mut state = SEED;
        let seeds = (0..bands * rows)
            .map(|_| {
                state = state.wrapping_add(GOLDEN);
                mix(state)
            })
            .collect();
        NearDuplicateIndex {
            config,
            rows,
            seeds,
            keys: Vec::new(),
            signatures: Vec::new(),
            buckets: vec![HashMap::new(); bands],
        }
    }

    pub fn config(&self) -> &MinHashConfig {
        &self.config
    }

    /// Number of documents inserted.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Returns the key of an already inserted document whose estimated Jaccard similarity to
    /// `text` is at least the threshold (the most similar one, the earliest on ties), or inserts
    /// `text` under `key` and returns `None`.
    pub fn check_and_insert(&mut self, key: &str, text: &str) -> Option<String> {
        let sketch = self.sketch(text);
        self.check_and_insert_sketch(key, &sketch)
    }

    /// A text's MinHash signature and LSH band keys under this index's settings: what a shard stores to
    /// answer near-duplicate queries for documents it holds.
    pub fn sketch(&self, text: &str) -> Sketch {
        let signature = self.signature(text);
        let bands = signature
            .chunks_exact(self.rows)
            .enumerate()
            .map(|(band, rows)| band_hash(band, rows))
            .collect();
        Sketch { signature, bands }
    }

    /// [`Self::check_and_insert`] for a text already sketched by [`Self::sketch`].
    pub fn check_and_insert_sketch(&mut self, key: &str, sketch: &Sketch) -> Option<String> {
        let mut candidates: Vec<usize> = sketch
            .bands
            .iter()
            .zip(&self.buckets)
            .filter_map(|(k, bucket)| bucket.get(k))
            .flatten()
            .copied()
            .collect();
        candidates.sort_unstable();
        candidates.dedup();

        let mut best: Option<(usize, f64)> = None;
        for idx in candidates {
            let sim = similarity(&sketch.signature, self.stored(idx));
            if sim >= self.config.threshold && !matches!(best, Some((_, s)) if s >= sim) {
                best = Some((idx, sim));
            }
        }
        if let Some((idx, _)) = best {
            return Some(self.keys[idx].clone());
        }

        let idx = self.keys.len();
        self.keys.push(key.to_string());
        self.signatures.extend_from_slice(&sketch.signature);
        for (bucket, k) in self.buckets.iter_mut().zip(&sketch.bands) {
            bucket.entry(*k).or_default().push(idx);
        }
        None
    }

    fn stored(&self, idx: usize) -> &[u32] {
        let len = self.seeds.len();
        &self.signatures[idx * len..(idx + 1) * len]
    }

    /// 32-bit minima halve the memory of 64-bit ones; a spurious 32-bit tie (2^-32 per slot)
    /// does not move the Jaccard estimate measurably.
    fn signature(&self, text: &str) -> Vec<u32> {
        let mut sig = vec![u32::MAX; self.seeds.len()];
        for_each_shingle(text, self.config.shingle_words.max(1), |h| {
            for (slot, seed) in sig.iter_mut().zip(&self.seeds) {
                let v = (mix(h ^ seed) >> 32) as u32;
                if v < *slot {
                    *slot = v;
                }
            }
        });
        sig
    }
}

/// Fraction of equal signature slots: the MinHash estimate of Jaccard similarity.
fn similarity(a: &[u32], b: &[u32]) -> f64 {
    if a.is_empty() {
        return 0.0;
    }
    let equal = a.iter().zip(b).filter(|(x, y)| x == y).count();
    equal as f64 / a.len() as f64
}

/// Calls `f` with the hash of every shingle of `text`. Words are Unicode words, lower-cased,
/// so case and punctuation edits do not count as differences.
fn for_each_shingle(text: &str, k: usize, mut f: impl FnMut(u64)) {
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower.unicode_words().collect();
    if words.len() >= k {
        for window in words.windows(k) {
            let mut h = Fnv::new();
            for w in window {
                h.write(w.as_bytes());
                // 0xFF never occurs in UTF-8, so ["ab","c"] and ["a","bc"] hash apart.
                h.write(&[0xFF]);
            }
            f(h.finish());
        }
        return;
    }
    let joined = words.join(" ");
    let chars: Vec<(usize, char)> = joined.char_indices().collect();
    if chars.len() < CHAR_SHINGLE {
        let mut h = Fnv::new();
        h.write(joined.as_bytes());
        f(h.finish());
        return;
    }
    for start in 0..=chars.len() - CHAR_SHINGLE {
        let from = chars[start].0;
        let to = chars
            .get(start + CHAR_SHINGLE)
            .map_or(joined.len(), |(i, _)| *i);
        let mut h = Fnv::new();
        h.write(&joined.as_bytes()[from..to]);
        f(h.finish());
    }
}

fn band_hash(band: usize, rows: &[u32]) -> u64 {
    let mut h = Fnv::new();
    h.write(&(band as u64).to_le_bytes());
    for r in rows {
        h.write(&r.to_le_bytes());
    }
    mix(h.finish())
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64 finaliser: a bijective avalanche mix, used as a seeded hash permutation.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a 64, finished with [`mix`] because raw FNV is weak in its high bits.
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xCBF2_9CE4_8422_2325)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01B3);
        }
    }

    fn finish(&self) -> u64 {
        mix(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pseudo-random text over a 5000-word vocabulary.
    fn text(seed: u64, words: usize) -> Vec<String> {
        let mut s = seed;
        (0..words)
            .map(|_| {
                s = s.wrapping_add(GOLDEN);
                format!("w{}", mix(s) % 5000)
            })
            .collect()
    }

    fn index() -> NearDuplicateIndex {
        NearDuplicateIndex::new(MinHashConfig::default())
    }

    #[test]
    fn identical_texts_are_duplicates() {
        let mut idx = index();
        let t = text(1, 200).join(" ");
        assert_eq!(idx.check_and_insert("a", &t), None);
        assert_eq!(idx.check_and_insert("b", &t).as_deref(), Some("a"));
        assert_eq!(idx.len(), 1);
    }

    #[test]
    fn one_word_edit_in_200_is_a_duplicate() {
        let edited = |seed: u64| {
            let base = text(seed, 200);
            let mut edited = base.clone();
            edited[(seed as usize * 37) % 200] = "changed".to_string();
            (base.join(" "), edited.join(" "))
        };
        let (base, copy) = edited(0);
        let mut idx = index();
        assert_eq!(idx.check_and_insert("orig", &base), None);
        assert_eq!(idx.check_and_insert("copy", &copy).as_deref(), Some("orig"));

        // True Jaccard is 191/201 ≈ 0.95; with 128 permutations the estimate has σ ≈ 0.019, so
        // about 1% of such pairs land under 0.9. Pin the rate, not every pair.
        let found = (0..200)
            .filter(|&seed| {
                let (base, copy) = edited(seed);
                let mut idx = index();
                idx.check_and_insert("orig", &base);
                idx.check_and_insert("copy", &copy).is_some()
            })
            .count();
        assert!(found >= 194, "only {found}/200 one-word edits detected");
    }

    #[test]
    fn case_and_punctuation_do_not_matter() {
        let mut idx = index();
        idx.check_and_insert("a", "The quick brown fox jumps over the lazy dog today");
        assert_eq!(
            idx.check_and_insert("b", "the QUICK brown fox, jumps over the lazy dog today!")
                .as_deref(),
            Some("a")
        );
    }

    #[test]
    fn unrelated_texts_are_not_duplicates() {
        let mut idx = index();
        for seed in 0..50 {
            let t = text(1000 + seed, 200).join(" ");
            assert_eq!(idx.check_and_insert(&format!("d{seed}"), &t), None);
        }
        assert_eq!(idx.len(), 50);
        // Half the words shared is far below 0.9.
        let mut half = text(1000, 200);
        half.truncate(100);
        half.extend(text(77, 100));
        assert_eq!(idx.check_and_insert("half", &half.join(" ")), None);
    }

    #[test]
    fn short_texts_use_character_shingles() {
        let mut idx = index();
        assert_eq!(idx.check_and_insert("a", "hello world"), None);
        assert_eq!(
            idx.check_and_insert("b", "Hello, world!").as_deref(),
            Some("a")
        );
        assert_eq!(idx.check_and_insert("c", "goodbye moon"), None);
        assert_eq!(idx.check_and_insert("d", "ab"), None);
        assert_eq!(idx.check_and_insert("e", "AB").as_deref(), Some("d"));
        assert_eq!(idx.check_and_insert("f", ""), None);
        assert_eq!(idx.check_and_insert("g", "  ").as_deref(), Some("f"));
    }

    #[test]
    fn deterministic_across_instances() {
        let a = index();
        let b = index();
        let t = text(9, 300).join(" ");
        assert_eq!(a.signature(&t), b.signature(&t));
        // Pinned so that a change of hashing (which would silently re-decide duplicates across
        // runs) is noticed.
        assert_eq!(a.signature("a b c d e f")[..2], PINNED);
    }

    const PINNED: [u32; 2] = [82_025_990, 845_819_463];

    #[test]
    fn returns_most_similar_candidate() {
        // Two stored texts that are not duplicates of each other (J ≈ 0.17) but both resemble
        // the query (J ≈ 0.42 and ≈ 0.53); the closer one must be reported.
        let mut idx = NearDuplicateIndex::new(MinHashConfig {
            bands: 64,
            threshold: 0.3,
            ..MinHashConfig::default()
        });
        let base = text(5, 200);
        let a = [&base[..120], &text(6, 80)[..]].concat();
        let b = [&text(7, 60)[..], &base[60..]].concat();
        assert_eq!(idx.check_and_insert("a", &a.join(" ")), None);
        assert_eq!(idx.check_and_insert("b", &b.join(" ")), None);
        assert_eq!(
            idx.check_and_insert("q", &base.join(" ")).as_deref(),
            Some("b")
        );
    }

    #[test]
    fn degenerate_configs_do_not_panic() {
        for (num_perm, bands, shingle_words) in [(0, 0, 0), (1, 5, 1), (10, 3, 100), (7, 7, 2)] {
            let mut idx = NearDuplicateIndex::new(MinHashConfig {
                num_perm,
                bands,
                shingle_words,
                threshold: 0.9,
                stored_bands: bands,
            });
            assert_eq!(idx.check_and_insert("a", "some text here"), None);
            assert_eq!(
                idx.check_and_insert("b", "some text here").as_deref(),
                Some("a")
            );
            assert_eq!(idx.check_and_insert("c", ""), None);
        }
    }

    /// Half the bands stored (the default): pairs at and above the threshold stay candidates in those bands
    /// alone — over 200 pairs of Jaccard ≈ 0.90–0.95 (one word in every 95–190 changed: each changes 5 shingles), every one shares a stored
    /// band — while a stored prefix never runs past the sketch.
    #[test]
    fn pairs_at_the_threshold_share_a_stored_band() {
        let config = MinHashConfig::default();
        let idx = NearDuplicateIndex::new(config.clone());
        for pair in 0..200u64 {
            let words = text(100 + pair, 800);
            let every = 95 + (pair % 96) as usize;
            let edited: Vec<String> = words
                .iter()
                .enumerate()
                .map(|(i, w)| {
                    if i % every == 0 {
                        format!("{w}x")
                    } else {
                        w.clone()
                    }
                })
                .collect();
            let (a, b) = (idx.sketch(&words.join(" ")), idx.sketch(&edited.join(" ")));
            let stored = config.stored_bands(&a.bands);
            assert_eq!(stored.len(), 16);
            assert!(
                stored
                    .iter()
                    .zip(config.stored_bands(&b.bands))
                    .any(|(x, y)| x == y),
                "pair {pair} (one word in {every} changed) shares no stored band"
            );
        }
        let few = MinHashConfig {
            stored_bands: 99,
            ..MinHashConfig::default()
        };
        assert_eq!(few.stored_bands(&[1, 2, 3]), &[1, 2, 3]);
        let none = MinHashConfig {
            stored_bands: 0,
            ..MinHashConfig::default()
        };
        assert_eq!(none.stored_bands(&[1, 2, 3]), &[1]);
    }
}
