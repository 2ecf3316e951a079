//! Near-duplicate keys of the documents a shard holds, kept durably beside its ingest log so that every router
//! asks the data plane (not its own memory) whether a text is already stored: two routers agree, a restart
//! forgets nothing, and memory is bounded by the corpus on disk.
//!
//! The router computes a document's MinHash signature and its LSH band keys (`attest_ingest::dedup`); the
//! shard stores them in the log's RocksDB, column family `dedup`, written in the same synced batch as the
//! document (so they can never disagree with it):
//! - `s` + tenant + `\0` + doc id → the document's band keys and the low byte of each MinHash value
//!   ([`StoredKeys`]): read to compare signatures and to remove the band entries when the document is replaced or
//!   deleted. Keys written before low bytes are the whole [`NearDupKeys`] (bincode) and still read;
//! - `b` + tenant + `\0` + band (u16 BE) + band key (u64 BE) + doc id → empty: the LSH buckets, found by a
//!   prefix scan.
//!
//! Everything is per tenant: a tenant's text never matches, nor names, another tenant's document.
//!
//! Almost every bucket a lookup asks for is empty (a new text shares no band with the corpus), and an ingest
//! batch asks 32 per document of every shard. So the column family filters by bucket ([`column_options`]): its
//! prefix extractor cuts a bucket key to its bucket, and bloom filters over those prefixes (in the memtable and
//! in every table) answer "empty" without walking the memtable's skip list or reading a block; whole-key filters
//! do the same for a new document's `s` key. Files written before the extractor existed have no prefix filter
//! and are read as before.

use std::collections::{BTreeSet, HashMap};

use rocksdb::{
    BlockBasedOptions, ColumnFamily, Options, ReadOptions, SliceTransform, WriteBatch, DB,
};
use serde::{Deserialize, Serialize};

use crate::bucket_presence::BucketPresence;
use crate::error::{IndexError, Result};

/// A document's MinHash signature and its LSH band keys (one per band, in band order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NearDupKeys {
    pub signature: Vec<u32>,
    pub bands: Vec<u64>,
}

/// The stored document most similar to a query, at or above the threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct NearDupMatch {
    pub doc_id: String,
    pub similarity: f64,
}

fn doc_key(tenant: &str, doc_id: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(2 + tenant.len() + doc_id.len());
    k.push(b's');
    k.extend_from_slice(tenant.as_bytes());
    k.push(0);
    k.extend_from_slice(doc_id.as_bytes());
    k
}

pub(crate) fn bucket_prefix(tenant: &str, band: usize, key: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(12 + tenant.len());
    k.push(b'b');
    k.extend_from_slice(tenant.as_bytes());
    k.push(0);
    k.extend_from_slice(&(band as u16).to_be_bytes());
    k.extend_from_slice(&key.to_be_bytes());
    k
}

/// Band number and band key after the tenant's `\0`.
const BUCKET_TAIL: usize = 2 + 8;

/// Whether `key` is a bucket entry (or a bucket's seek prefix): `b` + tenant + `\0` + band + band key ….
fn in_bucket_domain(key: &[u8]) -> bool {
    key.first() == Some(&b'b')
        && key
            .iter()
            .position(|b| *b == 0)
            .is_some_and(|zero| key.len() > zero + BUCKET_TAIL)
}

/// The bucket of a bucket entry: the key up to its band key (the document id cut off).
pub(crate) fn bucket_of(key: &[u8]) -> &[u8] {
    match key.iter().position(|b| *b == 0) {
        Some(zero) if key.len() > zero + BUCKET_TAIL => &key[..=zero + BUCKET_TAIL],
        _ => key,
    }
}

/// Options of the column family these keys live in: buckets as prefixes, bloom-filtered (see the header).
pub(crate) fn column_options() -> Options {
    let mut opts = Options::default();
    opts.set_prefix_extractor(SliceTransform::create(
        "attest.near_dup.bucket",
        bucket_of,
        Some(in_bucket_domain),
    ));
    opts.set_memtable_prefix_bloom_ratio(0.1);
    opts.set_memtable_whole_key_filtering(true);
    let mut table = BlockBasedOptions::default();
    table.set_bloom_filter(10.0, false);
    table.set_whole_key_filtering(true);
    opts.set_block_based_table_factory(&table);
    opts
}

fn bucket_key(tenant: &str, band: usize, key: u64, doc_id: &str) -> Vec<u8> {
    let mut k = bucket_prefix(tenant, band, key);
    k.extend_from_slice(doc_id.as_bytes());
    k
}

/// Starts a stored value of low bytes. A value written before them is bincode, whose first 8 bytes are the
/// signature's length as a u64 (little-endian), below 2^32: its bytes 4..8 are zero, never these.
const LOW_BYTES_MAGIC: &[u8; 8] = b"ATNDb8v1";

/// A document's keys as a shard stores them. Only the low byte of each MinHash value is kept ("b-bit minwise
/// hashing", Li and König, 2010): two values that differ still agree in their low byte one time in 256, which
/// [`StoredKeys::similarity`] takes out again; the estimate stays unbiased and its spread at 128 values grows by
/// well under a percent, for a quarter of the signature's bytes (RocksDB compresses nothing here: the signature
/// was 512 of a document's ~1,050 bytes in the family, measured at 500k).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredKeys {
    bands: Vec<u64>,
    signature: StoredSignature,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum StoredSignature {
    /// Written before low bytes.
    Whole(Vec<u32>),
    LowBytes(Vec<u8>),
}

/// How often two different MinHash values agree in their low byte.
const LOW_BYTE_AGREEMENT: f64 = 1.0 / 256.0;

impl StoredKeys {
    fn encode(keys: &NearDupKeys) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            LOW_BYTES_MAGIC.len() + 2 + keys.bands.len() * 8 + keys.signature.len(),
        );
        out.extend_from_slice(LOW_BYTES_MAGIC);
        out.extend_from_slice(&(keys.bands.len() as u16).to_le_bytes());
        for band in &keys.bands {
            out.extend_from_slice(&band.to_le_bytes());
        }
        out.extend(keys.signature.iter().map(|v| *v as u8));
        out
    }

    fn decode(bytes: &[u8]) -> Result<Self> {
        let Some(rest) = bytes.strip_prefix(LOW_BYTES_MAGIC.as_slice()) else {
            let whole: NearDupKeys = bincode::deserialize(bytes)
                .map_err(|e| IndexError::Serialization(e.to_string()))?;
            return Ok(StoredKeys {
                bands: whole.bands,
                signature: StoredSignature::Whole(whole.signature),
            });
        };
        let short = || IndexError::Serialization("near-duplicate keys cut short".into());
        let (count, rest) = rest.split_first_chunk::<2>().ok_or_else(short)?;
        let bands_len = u16::from_le_bytes(*count) as usize * 8;
        if rest.len() < bands_len {
            return Err(short());
        }
        let (bands, signature) = rest.split_at(bands_len);
        Ok(StoredKeys {
            bands: bands
                .chunks_exact(8)
                .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
                .collect(),
            signature: StoredSignature::LowBytes(signature.to_vec()),
        })
    }

    /// The estimated Jaccard similarity of the stored text and the one `query` is the signature of.
    fn similarity(&self, query: &[u32]) -> f64 {
        match &self.signature {
            StoredSignature::Whole(stored) => similarity(query, stored),
            StoredSignature::LowBytes(stored) => {
                if stored.is_empty() || stored.len() != query.len() {
                    return 0.0;
                }
                let agree = query
                    .iter()
                    .zip(stored)
                    .filter(|(q, s)| **q as u8 == **s)
                    .count();
                let raw = agree as f64 / stored.len() as f64;
                ((raw - LOW_BYTE_AGREEMENT) / (1.0 - LOW_BYTE_AGREEMENT)).clamp(0.0, 1.0)
            }
        }
    }

    /// The keys as a replica sends them on (low bytes as values below 256: stored again, they stay the same).
    fn to_keys(&self) -> NearDupKeys {
        NearDupKeys {
            signature: match &self.signature {
                StoredSignature::Whole(values) => values.clone(),
                StoredSignature::LowBytes(bytes) => bytes.iter().map(|b| u32::from(*b)).collect(),
            },
            bands: self.bands.clone(),
        }
    }
}

fn stored(db: &DB, cf: &ColumnFamily, tenant: &str, doc_id: &str) -> Result<Option<StoredKeys>> {
    db.get_cf(cf, doc_key(tenant, doc_id))?
        .map(|bytes| StoredKeys::decode(&bytes))
        .transpose()
}

/// Fraction of equal signature slots: the MinHash estimate of Jaccard similarity (0 for unequal lengths,
/// which only signatures of different MinHash settings have).
pub fn similarity(a: &[u32], b: &[u32]) -> f64 {
    if a.is_empty() || a.len() != b.len() {
        return 0.0;
    }
    a.iter().zip(b).filter(|(x, y)| x == y).count() as f64 / a.len() as f64
}

/// Collects one batch's changes of near-duplicate keys for the log's write batch. Several writes of one document
/// in a batch are followed in order, so only the last one's keys remain.
///
/// The changes go into the batch sorted by key ([`Self::write_to`]): RocksDB inserts a batch into the memtable's
/// skip list in batch order, starting each search from where the previous insert ended, so 32 band keys per
/// document in hash order cost a full descent each (`FindSpliceForLevel` was the largest RocksDB cost of a
/// shard's ingest), while the same keys sorted land near one another.
pub(crate) struct NearDupWriter<'a> {
    db: &'a DB,
    cf: &'a ColumnFamily,
    /// Told of every bucket the batch puts an entry in, before the batch is written.
    presence: Option<&'a BucketPresence>,
    /// Band keys as this batch leaves them, for documents it already touched (None: none).
    pending: HashMap<(String, String), Option<Vec<u64>>>,
    /// Puts (Some value) and deletes (None), in the order the documents' writes made them.
    changes: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl<'a> NearDupWriter<'a> {
    pub(crate) fn new(
        db: &'a DB,
        cf: &'a ColumnFamily,
        presence: Option<&'a BucketPresence>,
    ) -> Self {
        NearDupWriter {
            db,
            cf,
            presence,
            pending: HashMap::new(),
            changes: Vec::new(),
        }
    }

    /// The document's keys become `keys` (None: it is deleted, or its new text is not tracked).
    pub(crate) fn replace(
        &mut self,
        tenant: &str,
        doc_id: &str,
        keys: Option<&NearDupKeys>,
    ) -> Result<()> {
        let id = (tenant.to_string(), doc_id.to_string());
        let old = match self.pending.get(&id) {
            Some(k) => k.clone(),
            None => stored(self.db, self.cf, tenant, doc_id)?.map(|k| k.bands),
        };
        if let Some(old) = &old {
            for (band, key) in old.iter().enumerate() {
                self.changes
                    .push((bucket_key(tenant, band, *key, doc_id), None));
            }
        }
        match keys {
            Some(k) => {
                self.changes
                    .push((doc_key(tenant, doc_id), Some(StoredKeys::encode(k))));
                for (band, key) in k.bands.iter().enumerate() {
                    self.changes
                        .push((bucket_key(tenant, band, *key, doc_id), Some(Vec::new())));
                }
            }
            None if old.is_some() => self.changes.push((doc_key(tenant, doc_id), None)),
            None => {}
        }
        self.pending.insert(id, keys.map(|k| k.bands.clone()));
        Ok(())
    }

    /// Puts the changes into `batch`, sorted by key; the sort is stable, so changes of one key keep their order
    /// (a band entry deleted and put again by two writes of one document ends put).
    pub(crate) fn write_to(mut self, batch: &mut WriteBatch) {
        self.changes.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(presence) = self.presence {
            presence.insert(
                self.changes
                    .iter()
                    .filter(|(key, value)| value.is_some() && in_bucket_domain(key))
                    .map(|(key, _)| bucket_of(key)),
            );
        }
        for (key, value) in self.changes {
            match value {
                Some(value) => batch.put_cf(self.cf, key, value),
                None => batch.delete_cf(self.cf, key),
            }
        }
    }
}

/// The tenant's stored document most similar to `query` with similarity ≥ `threshold`, other than
/// `doc_id` itself (re-sending a document is an update, not a duplicate); the smallest id on ties.
pub(crate) fn best_match(
    db: &DB,
    cf: &ColumnFamily,
    presence: Option<&BucketPresence>,
    tenant: &str,
    doc_id: &str,
    query: &NearDupKeys,
    threshold: f64,
) -> Result<Option<NearDupMatch>> {
    let mut candidates = BTreeSet::new();
    // Only the buckets that may hold entries are sought (for a new text, usually none).
    let mut buckets: Vec<Vec<u8>> = query
        .bands
        .iter()
        .enumerate()
        .map(|(band, key)| bucket_prefix(tenant, band, *key))
        .collect();
    if let Some(presence) = presence {
        presence.retain_possible(&mut buckets);
    }
    if buckets.is_empty() {
        return Ok(None);
    }
    // One iterator for every band, each seek confined to its bucket (so the prefix filters apply).
    let mut read = ReadOptions::default();
    read.set_prefix_same_as_start(true);
    let mut it = db.raw_iterator_cf_opt(cf, read);
    for prefix in buckets {
        it.seek(&prefix);
        while let Some(k) = it.key() {
            let Some(id) = k.strip_prefix(prefix.as_slice()) else {
                break;
            };
            let id = String::from_utf8_lossy(id).into_owned();
            if id != doc_id {
                candidates.insert(id);
            }
            it.next();
        }
        it.status()?;
    }
    drop(it);
    let mut best: Option<NearDupMatch> = None;
    for id in candidates {
        let Some(keys) = stored(db, cf, tenant, &id)? else {
            continue;
        };
        let sim = keys.similarity(&query.signature);
        if sim >= threshold && best.as_ref().is_none_or(|b| sim > b.similarity) {
            best = Some(NearDupMatch {
                doc_id: id,
                similarity: sim,
            });
        }
    }
    Ok(best)
}

/// The stored keys of one document (catch-up copies them with the document).
pub(crate) fn keys_of(
    db: &DB,
    cf: &ColumnFamily,
    tenant: &str,
    doc_id: &str,
) -> Result<Option<NearDupKeys>> {
    Ok(stored(db, cf, tenant, doc_id)?.map(|k| k.to_keys()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database with the `dedup` column family as the ingest log opens it.
    fn open_dedup(dir: &std::path::Path) -> DB {
        let mut db_opts = Options::default();
        db_opts.create_if_missing(true);
        db_opts.create_missing_column_families(true);
        DB::open_cf_descriptors(
            &db_opts,
            dir,
            [rocksdb::ColumnFamilyDescriptor::new(
                "dedup",
                column_options(),
            )],
        )
        .unwrap()
    }

    #[test]
    fn a_bucket_is_its_entries_prefix() {
        let entry = bucket_key("acme", 3, 0xdead_beef, "doc-1");
        let seek = bucket_prefix("acme", 3, 0xdead_beef);
        assert!(in_bucket_domain(&entry) && in_bucket_domain(&seek));
        assert_eq!(bucket_of(&entry), seek.as_slice());
        assert_eq!(bucket_of(&seek), seek.as_slice());
        // Another band, key or tenant is another bucket; `s` keys are not buckets (whole-key filtered).
        assert_ne!(
            bucket_of(&bucket_key("acme", 4, 0xdead_beef, "doc-1")),
            seek.as_slice()
        );
        assert_ne!(
            bucket_of(&bucket_key("acm", 3, 0xdead_beef, "doc-1")),
            seek.as_slice()
        );
        assert!(!in_bucket_domain(&doc_key("acme", "doc-1")));
        assert!(!in_bucket_domain(b"b"));
    }

    /// Lookups through the filtered column family find what is there (across flushes to tables, where the
    /// table filters apply) and nothing of another bucket.
    #[test]
    fn filtered_lookups_find_the_stored_neighbours() {
        let dir = tempfile::tempdir().unwrap();
        let db = open_dedup(dir.path());
        let cf = db.cf_handle("dedup").unwrap();
        let keys = |first: u64| NearDupKeys {
            signature: (0..8).map(|i| i as u32 + first as u32).collect(),
            bands: (0..4).map(|b| first * 100 + b).collect(),
        };
        let mut batch = WriteBatch::default();
        let mut writer = NearDupWriter::new(&db, cf, None);
        writer.replace("t", "a", Some(&keys(1))).unwrap();
        writer.write_to(&mut batch);
        db.write(batch).unwrap();
        db.flush_cf(cf).unwrap();
        let mut batch = WriteBatch::default();
        let mut writer = NearDupWriter::new(&db, cf, None);
        writer.replace("t", "b", Some(&keys(2))).unwrap();
        writer.write_to(&mut batch);
        db.write(batch).unwrap();
        // `a` is in a table, `b` in the memtable; each is found by a query sharing its bands.
        for (id, first) in [("a", 1), ("b", 2)] {
            let found = best_match(&db, cf, None, "t", "query", &keys(first), 0.9).unwrap();
            assert_eq!(found.map(|m| m.doc_id), Some(id.to_string()));
        }
        assert_eq!(
            best_match(&db, cf, None, "t", "query", &keys(3), 0.1).unwrap(),
            None
        );
        assert_eq!(
            best_match(&db, cf, None, "u", "query", &keys(1), 0.1).unwrap(),
            None
        );
        assert_eq!(
            best_match(&db, cf, None, "t", "a", &keys(1), 0.1).unwrap(),
            None,
            "not itself"
        );
        assert_eq!(keys_of(&db, cf, "t", "a").unwrap(), Some(keys(1)));
        assert_eq!(keys_of(&db, cf, "t", "c").unwrap(), None);
    }

    /// Changes go into the batch sorted by key; several writes of one document in one batch still end as the
    /// last one left them (a bucket entry put, deleted and put again stays; one put then deleted goes).
    #[test]
    fn sorted_changes_keep_the_order_of_one_documents_writes() {
        let dir = tempfile::tempdir().unwrap();
        let db = open_dedup(dir.path());
        let cf = db.cf_handle("dedup").unwrap();
        let keys = |bands: [u64; 4], sig: u32| NearDupKeys {
            signature: vec![sig; 8],
            bands: bands.to_vec(),
        };
        let first = keys([100, 101, 102, 103], 1);
        let second = keys([100, 201, 202, 203], 2);
        let mut batch = WriteBatch::default();
        let mut writer = NearDupWriter::new(&db, cf, None);
        writer.replace("t", "a", Some(&first)).unwrap();
        writer.replace("t", "a", Some(&second)).unwrap();
        writer
            .replace("t", "b", Some(&keys([300, 301, 302, 303], 3)))
            .unwrap();
        writer.replace("t", "b", None).unwrap();
        writer.write_to(&mut batch);
        db.write(batch).unwrap();

        assert_eq!(keys_of(&db, cf, "t", "a").unwrap(), Some(second.clone()));
        assert_eq!(keys_of(&db, cf, "t", "b").unwrap(), None);
        // Band 0's entry (put, deleted, put again) stays; band 1's first key (put, then deleted) is gone.
        let found = best_match(&db, cf, None, "t", "q", &keys([100, 0, 0, 0], 2), 0.9).unwrap();
        assert_eq!(found.map(|m| m.doc_id), Some("a".to_string()));
        assert_eq!(
            best_match(&db, cf, None, "t", "q", &keys([0, 101, 0, 0], 1), 0.1).unwrap(),
            None
        );
        assert_eq!(
            best_match(&db, cf, None, "t", "q", &keys([0, 0, 302, 0], 3), 0.1).unwrap(),
            None
        );
    }

    /// Keys stored whole by a release before low bytes still read: found, compared exactly, sent on, and their
    /// band entries removed when the document changes.
    #[test]
    fn keys_stored_whole_before_low_bytes_still_work() {
        let dir = tempfile::tempdir().unwrap();
        let db = open_dedup(dir.path());
        let cf = db.cf_handle("dedup").unwrap();
        let old = NearDupKeys {
            signature: vec![70_000; 8],
            bands: vec![11, 12, 13, 14],
        };
        let mut batch = WriteBatch::default();
        batch.put_cf(cf, doc_key("t", "a"), bincode::serialize(&old).unwrap());
        for (band, key) in old.bands.iter().enumerate() {
            batch.put_cf(cf, bucket_key("t", band, *key, "a"), []);
        }
        db.write(batch).unwrap();
        let found = best_match(&db, cf, None, "t", "q", &old, 1.0).unwrap();
        assert_eq!(found.map(|m| m.similarity), Some(1.0), "compared whole");
        // 70,000 and 70,000 + 256 agree in their low byte only: a whole signature tells them apart.
        let other = NearDupKeys {
            signature: vec![70_256; 8],
            ..old.clone()
        };
        assert_eq!(
            best_match(&db, cf, None, "t", "q", &other, 0.1).unwrap(),
            None
        );
        assert_eq!(keys_of(&db, cf, "t", "a").unwrap(), Some(old.clone()));

        let mut batch = WriteBatch::default();
        let mut writer = NearDupWriter::new(&db, cf, None);
        writer.replace("t", "a", None).unwrap();
        writer.write_to(&mut batch);
        db.write(batch).unwrap();
        let left = db.iterator_cf(cf, rocksdb::IteratorMode::Start).count();
        assert_eq!(left, 0, "the old value's band entries went with it");
    }

    /// The low-byte estimate follows the whole signature's similarity (within 0.03 at 128 values, over pairs of
    /// every similarity), and a stored value of 128 values and 16 bands takes under 300 bytes.
    #[test]
    fn low_bytes_estimate_the_similarity_in_a_quarter_of_the_bytes() {
        let mut state = 0x9E37_79B9_u32;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state
        };
        let mut worst: f64 = 0.0;
        for same in (0..=128).step_by(8) {
            let a: Vec<u32> = (0..128).map(|_| next()).collect();
            let b: Vec<u32> = a
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    if i < same {
                        *v
                    } else {
                        v.wrapping_add(1 + next() % 1_000_000)
                    }
                })
                .collect();
            let keys = NearDupKeys {
                signature: b.clone(),
                bands: (0..16).collect(),
            };
            let bytes = StoredKeys::encode(&keys);
            assert!(bytes.len() < 300, "{} bytes", bytes.len());
            let stored = StoredKeys::decode(&bytes).unwrap();
            assert_eq!(stored.bands, keys.bands);
            worst = worst.max((stored.similarity(&a) - similarity(&a, &b)).abs());
        }
        assert!(worst < 0.03, "worst gap {worst}");
        assert!(
            StoredKeys::decode(b"ATNDb8v1\x05\x00").is_err(),
            "cut short"
        );
    }
}
