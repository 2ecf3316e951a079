//! The engine's side of dropping sealed rows' vectors from the log ([`crate::sealed_vectors`]): where a record
//! read from the log has lost its vectors, they are read from the sealed segment that holds its rows; and which
//! documents a damaged segment takes with it when the log can no longer rebuild them.

use std::path::Path;

use tracing::warn;

use super::{SegmentView, State};
use crate::error::{IndexError, Result};
use crate::segment::SealedSegment;
use crate::wal::{IngestLog, LogOp, LoggedChunk};

use super::versions::DocVersions;

/// Forgets `lost` ([`stripped_live_documents`]) before the segment they were sealed in (`segment`, damaged or
/// unlisted) is rebuilt from the log: their vectors were there alone. A replica has them, and catch-up copies them
/// back once they are unknown here.
pub(super) fn forget_stripped(
    log: &mut IngestLog,
    versions: &mut DocVersions,
    lost: &[(String, String, u64)],
    segment: &str,
) -> Result<()> {
    if lost.is_empty() {
        return Ok(());
    }
    log.forget_documents(lost)?;
    for (tenant, doc_id, _) in lost {
        versions.remove(tenant, doc_id);
    }
    warn!(segment, documents = lost.len(), event = "segment_documents_forgotten",
        "the log holds no vectors of these live documents (keep_sealed_vectors_in_log is off): forgotten, to be copied back from a replica");
    Ok(())
}

/// The live documents among `records` whose record has lost its vectors: (tenant, document id, seq).
pub(super) fn stripped_live_documents(
    records: &[(u64, LogOp)],
    versions: &DocVersions,
) -> Vec<(String, String, u64)> {
    records
        .iter()
        .filter_map(|(seq, op)| match op {
            LogOp::Upsert {
                doc_id,
                tenant,
                chunks,
            } if chunks.iter().any(|c| c.vector.is_empty())
                && versions
                    .get(tenant, doc_id)
                    .is_some_and(|v| v.is_live_row(*seq)) =>
            {
                Some((tenant.clone(), doc_id.clone(), *seq))
            }
            _ => None,
        })
        .collect()
}

/// The rows of `segment` written by record `seq`, in chunk order: found by binary search where the rows are in
/// record order (every seal, and every merge that ends in id order), else by a scan.
fn rows_of_record(segment: &SealedSegment, seq: u64) -> Vec<usize> {
    let seq_at = |row: usize| segment.chunks.get(row).map(|r| r.seq.to_native());
    let rows = segment.meta.rows;
    let first = partition_point(rows, |row| seq_at(row).is_some_and(|s| s < seq));
    let found: Vec<usize> = (first..rows)
        .take_while(|&r| seq_at(r) == Some(seq))
        .collect();
    if !found.is_empty() {
        return found;
    }
    (0..rows).filter(|&r| seq_at(r) == Some(seq)).collect()
}

/// The first index in `0..len` for which `before` is false (`before` true then false along the range).
fn partition_point(len: usize, before: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

impl State {
    /// Gives every chunk of record `seq` without a vector the vector its sealed row holds. The record's rows are
    /// live (the caller holds this state, in which they are), so a sealed segment has them; not finding them is
    /// damage.
    pub(super) fn fill_sealed_vectors(
        &self,
        dir: &Path,
        seq: u64,
        chunks: &mut [LoggedChunk],
    ) -> Result<()> {
        if chunks.iter().all(|c| !c.vector.is_empty()) {
            return Ok(());
        }
        for segment in self
            .sealed
            .iter()
            .filter(|s| (s.meta.min_seq..=s.meta.max_seq).contains(&seq))
        {
            let rows = rows_of_record(segment, seq);
            if rows.is_empty() {
                continue;
            }
            let view = SegmentView::Sealed(segment);
            for chunk in chunks.iter_mut().filter(|c| c.vector.is_empty()) {
                let vector = rows
                    .iter()
                    .find(|&&r| {
                        view.row(r)
                            .is_some_and(|row| row.chunk_id == chunk.chunk_id)
                    })
                    .and_then(|&r| view.vector(r));
                if let Some(v) = vector {
                    chunk.vector = v.to_vec();
                }
            }
        }
        match chunks.iter().find(|c| c.vector.is_empty()) {
            None => Ok(()),
            Some(c) => Err(IndexError::corrupt(
                dir.join("segments"),
                format!(
                    "chunk `{}` of log record {seq} has no vector in the log and none in a sealed segment",
                    c.chunk_id
                ),
            )),
        }
    }
}
