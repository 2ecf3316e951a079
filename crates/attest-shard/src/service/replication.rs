//! The two reads of catch-up a replica answers its peers: the listing of its documents' versions (all of them by
//! key, or those changed after a log position) and the current content of named documents
//! ([`crate::catchup`] is the asking side). A starting node answers these before it is ready
//! ([`crate::startup_gate`]).

use attest_index::FetchedDocument;
use attest_proto::v1 as pb;
use tonic::{Request, Response, Status};

use super::{blocking, ShardServiceImpl};
use crate::convert::write_to_proto;
use crate::status::{invalid, to_status};

/// Catch-up listing page size when the caller names none, and the most it may ask for (also the most
/// documents one fetch may name).
const DOC_VERSIONS_PAGE: usize = 1000;
pub(super) const MAX_DOC_VERSIONS_PAGE: usize = 10_000;

/// How an incremental listing's page cursor (`DocVersionsResponse.next_after`) starts: the log position of the
/// last entry it read. A full listing's cursor is a document key, which always holds the tenant separator.
const SEQ_CURSOR: &str = "seq:";

/// Where an incremental listing (`changed_after_seq` > 0) goes on from: its first page starts at that position,
/// later ones at their cursor. None for a full listing, and for a cursor of one (a pass begun against a release
/// that listed every document), which goes on as it began.
fn incremental_cursor(changed_after_seq: u64, cursor: &str) -> Option<u64> {
    if changed_after_seq == 0 {
        return None;
    }
    match cursor {
        "" => Some(changed_after_seq),
        c => c.strip_prefix(SEQ_CURSOR)?.parse().ok(),
    }
}

impl ShardServiceImpl {
    pub(super) async fn handle_doc_versions(
        &self,
        req: Request<pb::DocVersionsRequest>,
    ) -> Result<Response<pb::DocVersionsResponse>, Status> {
        let r = req.into_inner();
        let engine = self.engine(&r.collection, r.shard)?;
        let limit = match r.limit {
            0 => DOC_VERSIONS_PAGE,
            n => (n as usize).min(MAX_DOC_VERSIONS_PAGE),
        };
        let changed_after = r.changed_after_seq;
        let log_id = engine.log_id();
        let entry = |(doc_id, v): (String, attest_index::DocVersion)| pb::DocVersionEntry {
            doc_id,
            tenant: v.tenant,
            version: v.version,
            deleted: v.deleted,
        };
        if let Some(from) = incremental_cursor(changed_after, &r.after_doc_id) {
            let (page, next, last_seq) = blocking(move || {
                engine
                    .doc_versions_changed_after(from, limit)
                    .map_err(to_status)
            })
            .await?;
            return Ok(Response::new(pb::DocVersionsResponse {
                entries: page.into_iter().map(entry).collect(),
                next_after: next.map_or_else(String::new, |seq| format!("{SEQ_CURSOR}{seq}")),
                last_seq,
                log_id,
            }));
        }
        let after = r.after_doc_id.clone();
        let (page, last_seq) =
            blocking(move || engine.doc_versions_after(&after, limit).map_err(to_status)).await?;
        let next_after = if page.len() == limit {
            page.last()
                .map(|(id, v)| attest_index::doc_key(&v.tenant, id))
                .unwrap_or_default()
        } else {
            String::new()
        };
        Ok(Response::new(pb::DocVersionsResponse {
            entries: page
                .into_iter()
                .filter(|(_, v)| v.seq > changed_after)
                .map(entry)
                .collect(),
            next_after,
            last_seq,
            log_id,
        }))
    }

    pub(super) async fn handle_fetch_documents(
        &self,
        req: Request<pb::FetchDocumentsRequest>,
    ) -> Result<Response<pb::FetchDocumentsResponse>, Status> {
        let r = req.into_inner();
        if r.docs.len() > MAX_DOC_VERSIONS_PAGE {
            return Err(invalid("docs", format!("at most {MAX_DOC_VERSIONS_PAGE}")));
        }
        let engine = self.engine(&r.collection, r.shard)?;
        let docs: Vec<(String, String)> =
            r.docs.into_iter().map(|d| (d.tenant, d.doc_id)).collect();
        let fetched = blocking(move || engine.fetch_documents(&docs).map_err(to_status)).await?;
        let mut resp = pb::FetchDocumentsResponse::default();
        for f in fetched {
            match f {
                FetchedDocument::Live(w) => resp.documents.push(write_to_proto(w)),
                FetchedDocument::Tombstone {
                    doc_id,
                    tenant,
                    version,
                } => resp.tombstones.push(pb::DocVersionEntry {
                    doc_id,
                    tenant,
                    version,
                    deleted: true,
                }),
            }
        }
        Ok(Response::new(resp))
    }
}
