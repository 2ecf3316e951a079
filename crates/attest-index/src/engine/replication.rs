//! What a replica tells and gives its peers: the version it holds of a document, its listings of documents by
//! key or by the log position of their last change (catch-up's two listings), its log's identity, the notes it
//! keeps on its peers' logs, and the current content of named documents (catch-up's fetch).

use super::{DocumentWrite, ShardEngine};
use crate::error::Result;
use crate::wal::DocVersion;

impl ShardEngine {
    /// The version this replica holds of the tenant's document (deleted or not); 0 when it never saw it.
    pub fn version_of(&self, tenant: &str, doc_id: &str) -> u64 {
        self.state
            .read()
            .versions
            .get(tenant, doc_id)
            .map_or(0, |v| v.version)
    }

    /// Up to `limit` (document id, version) pairs after the cursor `after` (catch-up listing, in
    /// [`crate::wal::doc_key`] order: the cursor of an entry is `doc_key(&version.tenant, &id)`, "" the first
    /// page), with the log position they reflect at least.
    pub fn doc_versions_after(
        &self,
        after: &str,
        limit: usize,
    ) -> Result<(Vec<(String, DocVersion)>, u64)> {
        // Without the writer lock, as the incremental listing: the position is read first, so the page reflects
        // at least it (a page is up to 1,000 reads, and writes waited on them after every restart).
        let last_seq = self.log_reader.last_seq();
        let page = self
            .log_reader
            .doc_versions_after(after, limit)?
            .into_iter()
            .map(|(key, v)| (crate::wal::doc_id_of_key(&key).to_string(), v))
            .collect();
        Ok((page, last_seq))
    }

    /// Documents changed after log position `after_seq` (their current version is a later record), from the next
    /// `page` entries of the log's changes index, with the position to list after next (None: the last page)
    /// and the log position they reflect at least: catch-up's incremental listing, at a cost that follows the
    /// changes rather than the shard's size.
    pub fn doc_versions_changed_after(
        &self,
        after_seq: u64,
        page: usize,
    ) -> Result<(crate::wal::VersionPage, Option<u64>, u64)> {
        // Without the writer lock (a listing page is 1,000 reads, and writes would wait on them): the position is
        // read first, so the page reflects at least it.
        let last_seq = self.log_reader.last_seq();
        let (entries, next) = self
            .log_reader
            .doc_versions_changed_after(after_seq, page)?;
        let entries = entries
            .into_iter()
            .map(|(key, v)| (crate::wal::doc_id_of_key(&key).to_string(), v))
            .collect();
        Ok((entries, next, last_seq))
    }

    /// Which ingest log this replica writes: its log positions compare only with others of the same id
    /// ([`crate::log_identity`]).
    pub fn log_id(&self) -> u64 {
        self.log_reader.log_id()
    }

    /// The note this replica last kept on peer node `peer`'s log (catch-up's cursor), if any.
    pub fn peer_note(&self, peer: u64) -> Result<Option<Vec<u8>>> {
        self.log_reader.peer_note(peer)
    }

    /// Keeps `note` on peer node `peer`'s log, across restarts; only once the writes it accounts for are
    /// applied (they are durable when `upsert` returns).
    pub fn keep_peer_note(&self, peer: u64, note: &[u8]) -> Result<()> {
        self.log_reader.keep_peer_note(peer, note)
    }

    /// The current content of each named (tenant, document id): live ones with every chunk and vector (from the
    /// log, which keeps every live row; a vector the log dropped from its sealed segment), deleted ones as
    /// tombstones. Unknown documents are left out.
    pub fn fetch_documents(&self, docs: &[(String, String)]) -> Result<Vec<FetchedDocument>> {
        let log = self.log.lock();
        let st = self.state.read();
        let mut out = Vec::with_capacity(docs.len());
        for (tenant, id) in docs {
            let Some(v) = st.versions.get(tenant, id) else {
                continue;
            };
            if v.deleted {
                out.push(FetchedDocument::Tombstone {
                    doc_id: id.clone(),
                    tenant: tenant.clone(),
                    version: v.version,
                });
                continue;
            }
            let (tenant, mut chunks) = self.live_chunks(v.seq, id)?;
            st.fill_sealed_vectors(&self.dir, v.seq, &mut chunks)?;
            let near_dup = log.near_dup_keys(&tenant, id)?;
            out.push(FetchedDocument::Live(DocumentWrite {
                doc_id: id.clone(),
                tenant,
                chunks,
                version: v.version,
                near_dup,
            }))
        }
        Ok(out)
    }
}

/// What [`ShardEngine::fetch_documents`] returns for one document.
#[derive(Debug, Clone)]
pub enum FetchedDocument {
    Live(DocumentWrite),
    Tombstone {
        doc_id: String,
        tenant: String,
        version: u64,
    },
}
