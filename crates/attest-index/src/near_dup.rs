//! Near-duplicate keys of the documents a shard holds, kept durably beside its ingest log so that every router
//! asks the data plane (not its own memory) whether a text is already stored: two routers agree, a restart
//! forgets nothing, and memory is bounded by the corpus on disk.
//!
//! The router computes a document's MinHash signature and its LSH band keys (`attest_ingest::dedup`); the
//! shard stores them in the log's RocksDB, column family `dedup`, written in the same synced batch as the
//! document (so they can never disagree with it):
//! - `s` + tenant + `\0` + doc id → the document's [`NearDupKeys`] (bincode): read to compare signatures and
//!   to remove the band entries when the document is replaced or deleted;
//! - `b` + tenant + `\0` + band (u16 BE) + band key (u64 BE) + doc id → empty: the LSH buckets, found by a
//!   prefix scan.
//!
//! Everything is per tenant: a tenant's text never matches, nor names, another tenant's document.

use std::collections::{BTreeSet, HashMap};

use rocksdb::{ColumnFamily, IteratorMode, WriteBatch, DB};
use serde::{Deserialize, Serialize};

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

fn bucket_prefix(tenant: &str, band: usize, key: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(12 + tenant.len());
    k.push(b'b');
    k.extend_from_slice(tenant.as_bytes());
    k.push(0);
    k.extend_from_slice(&(band as u16).to_be_bytes());
    k.extend_from_slice(&key.to_be_bytes());
    k
}

fn bucket_key(tenant: &str, band: usize, key: u64, doc_id: &str) -> Vec<u8> {
    let mut k = bucket_prefix(tenant, band, key);
    k.extend_from_slice(doc_id.as_bytes());
    k
}

fn stored(db: &DB, cf: &ColumnFamily, tenant: &str, doc_id: &str) -> Result<Option<NearDupKeys>> {
    match db.get_cf(cf, doc_key(tenant, doc_id))? {
        Some(bytes) => bincode::deserialize(&bytes)
            .map(Some)
            .map_err(|e| IndexError::Serialization(e.to_string())),
        None => Ok(None),
    }
}

/// Fraction of equal signature slots: the MinHash estimate of Jaccard similarity (0 for unequal lengths,
/// which only signatures of different MinHash settings have).
pub fn similarity(a: &[u32], b: &[u32]) -> f64 {
    if a.is_empty() || a.len() != b.len() {
        return 0.0;
    }
    a.iter().zip(b).filter(|(x, y)| x == y).count() as f64 / a.len() as f64
}

/// Puts one batch's changes of near-duplicate keys into the log's write batch. Several writes of one document
/// in a batch are followed in order, so only the last one's keys remain.
pub(crate) struct NearDupWriter<'a> {
    db: &'a DB,
    cf: &'a ColumnFamily,
    /// Keys as this batch leaves them, for documents it already touched (None: none).
    pending: HashMap<(String, String), Option<NearDupKeys>>,
}

impl<'a> NearDupWriter<'a> {
    pub(crate) fn new(db: &'a DB, cf: &'a ColumnFamily) -> Self {
        NearDupWriter {
            db,
            cf,
            pending: HashMap::new(),
        }
    }

    /// The document's keys become `keys` (None: it is deleted, or its new text is not tracked).
    pub(crate) fn replace(
        &mut self,
        batch: &mut WriteBatch,
        tenant: &str,
        doc_id: &str,
        keys: Option<&NearDupKeys>,
    ) -> Result<()> {
        let id = (tenant.to_string(), doc_id.to_string());
        let old = match self.pending.get(&id) {
            Some(k) => k.clone(),
            None => stored(self.db, self.cf, tenant, doc_id)?,
        };
        if let Some(old) = &old {
            for (band, key) in old.bands.iter().enumerate() {
                batch.delete_cf(self.cf, bucket_key(tenant, band, *key, doc_id));
            }
        }
        match keys {
            Some(k) => {
                let bytes =
                    bincode::serialize(k).map_err(|e| IndexError::Serialization(e.to_string()))?;
                batch.put_cf(self.cf, doc_key(tenant, doc_id), bytes);
                for (band, key) in k.bands.iter().enumerate() {
                    batch.put_cf(self.cf, bucket_key(tenant, band, *key, doc_id), []);
                }
            }
            None if old.is_some() => batch.delete_cf(self.cf, doc_key(tenant, doc_id)),
            None => {}
        }
        self.pending.insert(id, keys.cloned());
        Ok(())
    }
}

/// The tenant's stored document most similar to `query` with similarity ≥ `threshold`, other than
/// `doc_id` itself (re-sending a document is an update, not a duplicate); the smallest id on ties.
pub(crate) fn best_match(
    db: &DB,
    cf: &ColumnFamily,
    tenant: &str,
    doc_id: &str,
    query: &NearDupKeys,
    threshold: f64,
) -> Result<Option<NearDupMatch>> {
    let mut candidates = BTreeSet::new();
    for (band, key) in query.bands.iter().enumerate() {
        let prefix = bucket_prefix(tenant, band, *key);
        let iter = db.iterator_cf(cf, IteratorMode::From(&prefix, rocksdb::Direction::Forward));
        for item in iter {
            let (k, _) = item?;
            let Some(id) = k.strip_prefix(prefix.as_slice()) else {
                break;
            };
            let id = String::from_utf8_lossy(id).into_owned();
            if id != doc_id {
                candidates.insert(id);
            }
        }
    }
    let mut best: Option<NearDupMatch> = None;
    for id in candidates {
        let Some(keys) = stored(db, cf, tenant, &id)? else {
            continue;
        };
        let sim = similarity(&query.signature, &keys.signature);
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
    stored(db, cf, tenant, doc_id)
}
