//! The ingest log's index of documents by the log position of their current version (column family `changes`:
//! the big-endian `seq` of a document's latest record → its [`crate::wal::doc_key`]), so that catch-up lists only
//! what changed after a position.
//!
//! Catch-up asks a peer every `repair_interval_ms` (10 s) for the documents it changed after the position of its
//! previous listing. Filtering the `docs` family by `seq` read every document to return a few: at 10M vectors
//! (1.67M documents a replica, 12 replicas on 3 nodes) an idle cluster spent 12–15 CPU-seconds of every 10 on
//! these listings, for ever (docs/bench/history.md, "10M, settled"). Here a listing reads the entries after the
//! position and the current version of each: its cost follows the changes, not the collection.
//!
//! The index holds one entry per entry of `docs`, kept in the same write batch: a write puts its document's new
//! position and deletes the one it replaces; a forgotten document takes its entry with it. A log of layout
//! version 1 (before the index) has it built once at open ([`build`]), the upgrade to version 2.

use std::collections::HashMap;

use rocksdb::{ColumnFamily, IteratorMode, WriteBatch, DB};

use crate::error::Result;

pub(crate) const CF_CHANGES: &str = "changes";

/// Entries written per batch while the index is built at open.
const BUILD_BATCH: usize = 10_000;

fn cf(db: &DB) -> &ColumnFamily {
    db.cf_handle(CF_CHANGES).expect("changes cf")
}

/// Builds the index from the `docs` family (`seq_of_version` reads a stored version's position); entries left by
/// an earlier build that did not finish are overwritten alike (no write happens before the log is open). Returns
/// how many documents it indexed.
pub(crate) fn build(
    db: &DB,
    docs: &ColumnFamily,
    seq_of_version: impl Fn(&[u8]) -> Result<u64>,
) -> Result<u64> {
    let changes = cf(db);
    let mut batch = WriteBatch::default();
    let mut indexed = 0u64;
    for item in db.iterator_cf(docs, IteratorMode::Start) {
        let (key, value) = item?;
        batch.put_cf(changes, seq_of_version(&value)?.to_be_bytes(), &key);
        indexed += 1;
        if batch.len() >= BUILD_BATCH {
            db.write(std::mem::take(&mut batch))?;
        }
    }
    db.write(batch)?;
    Ok(indexed)
}

/// What one append does to the index: each document's entry moves to its newest record's position.
pub(crate) struct ChangesWriter<'a> {
    db: &'a DB,
    /// Positions written in this batch, by document key: a second record of one document in the batch replaces
    /// the entry of the first, which the database does not hold yet.
    written: HashMap<String, u64>,
}

impl<'a> ChangesWriter<'a> {
    pub(crate) fn new(db: &'a DB) -> Self {
        ChangesWriter {
            db,
            written: HashMap::new(),
        }
    }

    /// Moves `doc_key`'s entry to `seq`; `stored_seq` is the position of the version the `docs` family holds
    /// for it now (None: a new document).
    pub(crate) fn moved(
        &mut self,
        batch: &mut WriteBatch,
        doc_key: &str,
        seq: u64,
        stored_seq: Option<u64>,
    ) {
        let changes = cf(self.db);
        let replaced = self.written.insert(doc_key.to_string(), seq).or(stored_seq);
        if let Some(old) = replaced {
            batch.delete_cf(changes, old.to_be_bytes());
        }
        batch.put_cf(changes, seq.to_be_bytes(), doc_key.as_bytes());
    }
}

/// Drops the entry of a document forgotten at position `seq`.
pub(crate) fn forgotten(db: &DB, batch: &mut WriteBatch, seq: u64) {
    batch.delete_cf(cf(db), seq.to_be_bytes());
}

/// Up to `limit` (position, document key) entries after position `after` (exclusive), in position order.
pub(crate) fn after(db: &DB, after: u64, limit: usize) -> Result<Vec<(u64, String)>> {
    let start = after.saturating_add(1).to_be_bytes();
    let mut out = Vec::with_capacity(limit.min(4096));
    for item in db.iterator_cf(
        cf(db),
        IteratorMode::From(&start, rocksdb::Direction::Forward),
    ) {
        let (key, doc_key) = item?;
        out.push((
            crate::wal::seq_key(&key)?,
            String::from_utf8_lossy(&doc_key).into_owned(),
        ));
        if out.len() >= limit {
            break;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use crate::wal::{doc_key, DocVersion, IngestLog, LogOp};

    #[derive(Debug, Clone)]
    enum Step {
        /// One append: (document, delete?) per op; a document may appear twice in one batch.
        Append(Vec<(u8, bool)>),
        /// Forget a document (what a damaged segment's live documents go through).
        Forget(u8),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            5 => prop::collection::vec((0u8..8, any::<bool>()), 1..5).prop_map(Step::Append),
            1 => (0u8..8).prop_map(Step::Forget),
        ]
    }

    fn op(doc: u8, delete: bool) -> LogOp {
        let (doc_id, tenant) = (format!("d{doc}"), "t".to_string());
        match delete {
            true => LogOp::Delete { doc_id, tenant },
            false => LogOp::Upsert {
                doc_id,
                tenant,
                chunks: Vec::new(),
            },
        }
    }

    /// Every document by key, from the full listing.
    fn all_documents(log: &IngestLog) -> BTreeMap<String, DocVersion> {
        let mut out = BTreeMap::new();
        log.for_each_doc_version(|id, v| {
            out.insert(doc_key(&v.tenant, id), v);
        })
        .unwrap();
        out
    }

    /// The incremental listing after `after`, page by page (`page` entries each), as catch-up reads it.
    fn changed_after(log: &IngestLog, after: u64, page: usize) -> BTreeMap<String, DocVersion> {
        let (mut out, mut from) = (BTreeMap::new(), after);
        loop {
            let (entries, next) = log.reader().doc_versions_changed_after(from, page).unwrap();
            for (key, v) in entries {
                assert!(out.insert(key.clone(), v).is_none(), "{key} listed twice");
            }
            match next {
                Some(seq) => from = seq,
                None => return out,
            }
        }
    }

    /// The index holds one entry per document, and for every position the incremental listing is exactly the
    /// documents whose current version is a later record (deletes included), each once — against the listing of every document, filtered — and stays so
    /// in a log upgraded from version 1, where the index is built at open.
    fn check(log: &IngestLog, page: usize) -> Result<(), TestCaseError> {
        let all = all_documents(log);
        prop_assert_eq!(log.changes_entries(), all.len(), "one entry per document");
        for after in 0..=log.last_seq() {
            let expected: BTreeMap<_, _> = all
                .iter()
                .filter(|(_, v)| v.seq > after)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            prop_assert_eq!(changed_after(log, after, page), expected, "after {}", after);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn the_changes_listing_is_the_documents_written_after_a_position(
            steps in prop::collection::vec(step(), 1..24),
            page in 1usize..4,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut log = IngestLog::open(dir.path()).unwrap();
            let mut version = 0;
            for s in steps {
                match s {
                    Step::Append(ops) => {
                        let ops: Vec<_> = ops
                            .into_iter()
                            .map(|(doc, delete)| {
                                version += 1;
                                (op(doc, delete), version)
                            })
                            .collect();
                        log.append(&ops).unwrap();
                    }
                    Step::Forget(doc) => {
                        let key = doc_key("t", &format!("d{doc}"));
                        if let Some(v) = all_documents(&log).get(&key) {
                            log.forget_documents(&[("t".into(), format!("d{doc}"), v.seq)]).unwrap();
                        }
                    }
                }
            }
            check(&log, page)?;
            log.as_version_1();
            drop(log);
            let log = IngestLog::open(dir.path()).unwrap();
            check(&log, page)?;
        }
    }
}
