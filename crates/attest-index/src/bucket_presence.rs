//! Which LSH buckets a replica's `dedup` column family holds entries in, as an in-memory Bloom filter, so that a
//! near-duplicate lookup of a new text — which shares no bucket with the corpus, the common case — is answered
//! from memory: one cache line per band, instead of a RocksDB seek that probes the memtable's and every table's
//! prefix filter (those seeks were 17% of the cluster's CPU through a 1M-vector ingest: every batch asks every
//! shard about every document, 32 bands each; docs/bench/history.md "1M, fourth session").
//!
//! It only over-approximates. A write inserts its buckets before its batch is written; the filter built at open
//! scans the column family in a background thread while writes go on inserting theirs (Bloom inserts commute, so
//! a bucket is in whichever way it arrives); a bucket whose entries were deleted stays in until the next build (a
//! lookup then seeks and finds nothing, as it did before). Until the first build finishes, lookups seek. Past its
//! capacity, where false positives climb, a filter twice the size is built the same way, the full one answering
//! meanwhile.
//!
//! Memory: [`BITS_PER_BUCKET`] bits per bucket of capacity, which doubles when full and is rounded up to a power
//! of two of blocks — 40 to 160 bytes per stored document at 32 bands (the SQ8 copy of its vector is 384), twice
//! that while a bigger filter is built beside the full one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::Mutex;
use rocksdb::{ReadOptions, DB};

/// Filter bits per bucket entry it is sized for: with [`PROBES`] probes in one 512-bit block, ~1% false positives
/// at capacity.
const BITS_PER_BUCKET: usize = 10;
const PROBES: u32 = 6;
/// Capacity of a filter over an empty or small column family.
const MIN_CAPACITY: usize = 1 << 16;
/// Bucket entries hashed between checks of the stop flag and hand-overs to the shared filter.
const SCAN_CHUNK: usize = 4096;

/// The hash a bucket (its key prefix: tenant, band, band key) is filtered by: FNV-1a, then a 64-bit finaliser so
/// that block choice and bit positions both get well-mixed bits.
pub(crate) fn bucket_hash(bucket: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bucket {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// A blocked Bloom filter: each hash sets [`PROBES`] bits of one 64-byte block.
struct Bloom {
    blocks: Vec<[u64; 8]>,
    /// Inserts so far (a bucket inserted twice counts twice: it only makes the estimate conservative).
    inserted: usize,
    capacity: usize,
}

impl Bloom {
    fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.max(MIN_CAPACITY);
        let blocks = (capacity * BITS_PER_BUCKET)
            .div_ceil(512)
            .next_power_of_two();
        Bloom {
            blocks: vec![[0; 8]; blocks],
            inserted: 0,
            capacity,
        }
    }

    fn positions(&self, hash: u64) -> (usize, impl Iterator<Item = (usize, u64)>) {
        let block = (hash >> 32) as usize & (self.blocks.len() - 1);
        // Bit positions from the low half, remixed so that they do not repeat the block choice.
        let bits = (hash as u32 as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let probes = (0..PROBES).map(move |i| {
            let bit = (bits >> (i * 9 + 8)) as usize & 511;
            (bit / 64, 1u64 << (bit % 64))
        });
        (block, probes)
    }

    fn insert(&mut self, hash: u64) {
        let (block, probes) = self.positions(hash);
        for (word, mask) in probes {
            self.blocks[block][word] |= mask;
        }
        self.inserted += 1;
    }

    fn may_contain(&self, hash: u64) -> bool {
        let (block, mut probes) = self.positions(hash);
        probes.all(|(word, mask)| self.blocks[block][word] & mask != 0)
    }

    fn is_full(&self) -> bool {
        self.inserted > self.capacity
    }
}

#[derive(Default)]
struct Filters {
    /// Answers lookups, once a build has finished.
    ready: Option<Bloom>,
    /// Being filled by a scan; writes insert into it too.
    building: Option<Bloom>,
}

struct Shared {
    filters: Mutex<Filters>,
    stop: AtomicBool,
}

/// The bucket filter of one `dedup` column family (see the module documentation).
pub(crate) struct BucketPresence {
    shared: Arc<Shared>,
    db: Arc<DB>,
    cf_name: &'static str,
    builder: Mutex<Option<JoinHandle<()>>>,
}

impl BucketPresence {
    /// Starts building the filter of `cf_name` (whose bucket keys begin with `b`, and whose bucket is `bucket_of`
    /// of such a key) in the background.
    pub(crate) fn open(db: Arc<DB>, cf_name: &'static str) -> Self {
        let presence = BucketPresence {
            shared: Arc::new(Shared {
                filters: Mutex::new(Filters::default()),
                stop: AtomicBool::new(false),
            }),
            db,
            cf_name,
            builder: Mutex::new(None),
        };
        let estimate = presence
            .db
            .cf_handle(cf_name)
            .and_then(|cf| {
                presence
                    .db
                    .property_int_value_cf(cf, "rocksdb.estimate-num-keys")
                    .ok()
                    .flatten()
            })
            .unwrap_or(0) as usize;
        presence.start_build(estimate.saturating_mul(3) / 2);
        presence
    }

    /// Keeps the `buckets` that may hold entries: all of them until a filter is built, then those it does not
    /// rule out. One lock for a whole lookup (a document's 32 bands).
    pub(crate) fn retain_possible(&self, buckets: &mut Vec<Vec<u8>>) {
        let filters = self.shared.filters.lock();
        if let Some(ready) = filters.ready.as_ref() {
            buckets.retain(|b| ready.may_contain(bucket_hash(b)));
        }
    }

    /// Whether `bucket` may hold entries: false only when a built filter says it holds none.
    #[cfg(test)]
    pub(crate) fn may_hold(&self, bucket: &[u8]) -> bool {
        let mut one = vec![bucket.to_vec()];
        self.retain_possible(&mut one);
        !one.is_empty()
    }

    /// Records that `buckets` are about to get entries: called by the log's only writer before the batch that
    /// writes them. A filter that this fills starts the build of a bigger one, which gets these buckets too: a
    /// bucket written after a build's scan began is always one inserted into that build.
    pub(crate) fn insert<'b>(&self, buckets: impl IntoIterator<Item = &'b [u8]>) {
        let hashes: Vec<u64> = buckets.into_iter().map(bucket_hash).collect();
        let insert_all = |f: &mut Bloom| hashes.iter().for_each(|h| f.insert(*h));
        let grow = {
            let mut filters = self.shared.filters.lock();
            let Filters { ready, building } = &mut *filters;
            for f in [ready.as_mut(), building.as_mut()].into_iter().flatten() {
                insert_all(f);
            }
            match (ready, building) {
                (Some(ready), None) if ready.is_full() => Some(ready.inserted * 2),
                _ => None,
            }
        };
        if let Some(capacity) = grow {
            self.start_build(capacity);
            if let Some(f) = self.shared.filters.lock().building.as_mut() {
                insert_all(f);
            }
        }
    }

    /// The capacity of the filter that answers lookups, once no build is under way (tests wait for it).
    #[cfg(test)]
    pub(crate) fn settled_capacity(&self) -> Option<usize> {
        let filters = self.shared.filters.lock();
        match (&filters.ready, &filters.building) {
            (Some(ready), None) => Some(ready.capacity),
            _ => None,
        }
    }

    fn start_build(&self, capacity: usize) {
        let mut builder = self.builder.lock();
        if let Some(previous) = builder.take() {
            // Finished (a build starts only when none is under way); joined so that none outlives the log.
            let _ = previous.join();
        }
        self.shared.filters.lock().building = Some(Bloom::with_capacity(capacity));
        let (db, shared, cf_name) = (Arc::clone(&self.db), Arc::clone(&self.shared), self.cf_name);
        let spawned = std::thread::Builder::new()
            .name("dedup-filter".into())
            .spawn(move || build(&db, &shared, cf_name));
        match spawned {
            Ok(handle) => *builder = Some(handle),
            Err(e) => {
                // No filter is built: lookups keep seeking, as they did before there was one.
                tracing::warn!(error = %e, event = "dedup_filter_failed", "could not start the near-duplicate filter's build");
                self.shared.filters.lock().building = None;
            }
        }
    }
}

impl Drop for BucketPresence {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(handle) = self.builder.get_mut().take() {
            let _ = handle.join();
        }
    }
}

/// Scans every bucket entry of `cf_name` into the filter being built, then makes it the one that answers.
fn build(db: &DB, shared: &Shared, cf_name: &str) {
    let Some(cf) = db.cf_handle(cf_name) else {
        shared.filters.lock().building = None;
        return;
    };
    let mut read = ReadOptions::default();
    // Across buckets, in key order (a prefix-extracted column family seeks within one prefix otherwise), and
    // without filling the block cache with a full scan.
    read.set_total_order_seek(true);
    read.fill_cache(false);
    let mut it = db.raw_iterator_cf_opt(cf, read);
    it.seek(b"b");
    let mut hashes = Vec::with_capacity(SCAN_CHUNK);
    let hand_over = |hashes: &mut Vec<u64>| {
        if let Some(f) = shared.filters.lock().building.as_mut() {
            hashes.iter().for_each(|h| f.insert(*h));
        }
        hashes.clear();
    };
    while let Some(key) = it.key() {
        if key.first() != Some(&b'b') {
            break;
        }
        hashes.push(bucket_hash(crate::near_dup::bucket_of(key)));
        if hashes.len() == SCAN_CHUNK {
            hand_over(&mut hashes);
            if shared.stop.load(Ordering::Acquire) {
                return;
            }
        }
        it.next();
    }
    let mut filters = shared.filters.lock();
    if let Err(e) = it.status() {
        tracing::warn!(error = %e, event = "dedup_filter_failed", "near-duplicate filter not built; lookups seek");
        filters.building = None;
        return;
    }
    if let Some(f) = filters.building.as_mut() {
        hashes.iter().for_each(|h| f.insert(*h));
    }
    filters.ready = filters.building.take();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserted_hashes_are_always_found_and_others_rarely() {
        let mut bloom = Bloom::with_capacity(100_000);
        let keys: Vec<Vec<u8>> = (0..100_000u64)
            .map(|i| format!("btenant\0{i}").into_bytes())
            .collect();
        keys.iter().for_each(|k| bloom.insert(bucket_hash(k)));
        assert!(keys.iter().all(|k| bloom.may_contain(bucket_hash(k))));
        let false_positives = (100_000..200_000u64)
            .filter(|i| bloom.may_contain(bucket_hash(format!("btenant\0{i}").as_bytes())))
            .count();
        assert!(
            false_positives < 2_500,
            "{false_positives} false positives in 100,000"
        );
        assert!(!bloom.is_full());
        bloom.insert(1);
        assert!(bloom.is_full());
    }
}
