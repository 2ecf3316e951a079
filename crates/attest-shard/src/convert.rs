//! Conversions between proto messages and engine types.

use attest_index::{Condition, Filter, Hit, IvfPqParams};
use attest_proto::v1 as pb;
use tonic::Status;

use crate::status::invalid;

fn parse_json(s: &str, field: &str) -> Result<serde_json::Value, Status> {
    serde_json::from_str(s).map_err(|e| invalid(field, format!("not JSON ({e})")))
}

/// Proto filter → engine filter; a condition without a kind or with unparsable JSON is INVALID_ARGUMENT.
pub fn filter_from_proto(f: Option<&pb::Filter>) -> Result<Filter, Status> {
    let mut out = Filter::default();
    let Some(f) = f else { return Ok(out) };
    for (i, c) in f.conditions.iter().enumerate() {
        let field = c.field.clone();
        let name = format!("filter.conditions[{i}]");
        if field.is_empty() {
            return Err(invalid(format!("{name}.field"), "empty"));
        }
        let cond = match &c.kind {
            Some(pb::condition::Kind::EqualsJson(v)) => Condition::Equals {
                field,
                value: parse_json(v, &name)?,
            },
            Some(pb::condition::Kind::InJson(list)) => Condition::In {
                field,
                values: list
                    .values
                    .iter()
                    .map(|v| parse_json(v, &name))
                    .collect::<Result<_, _>>()?,
            },
            Some(pb::condition::Kind::Range(r)) => Condition::Range {
                field,
                gte: r.gte,
                gt: r.gt,
                lte: r.lte,
                lt: r.lt,
            },
            None => return Err(invalid(name, "no condition given")),
        };
        out.conditions.push(cond);
    }
    Ok(out)
}

/// A lane hit for the wire, with its title, text and metadata only when `with_payload`.
fn hit_to_proto(h: Hit, with_payload: bool) -> pb::LaneHit {
    let (title, text, metadata_json) = if with_payload {
        (h.title, h.text, h.metadata_json)
    } else {
        Default::default()
    };
    pb::LaneHit {
        chunk_id: h.chunk_id,
        doc_id: h.doc_id,
        score: h.score,
        title,
        text,
        metadata_json,
        has_payload: with_payload,
    }
}

/// Which hits of each lane carry their payload: every one with `include_payload`, else the best `payload_top`.
/// The engine copies text for those only, and the wire marks those only.
pub fn payload_top(r: &pb::ShardSearchRequest) -> usize {
    match r.include_payload {
        true => attest_index::ALL_PAYLOADS,
        false => r.payload_top as usize,
    }
}

/// One lane of a search answer, the best `payload_top` hits with their payloads.
pub fn lane_to_proto(hits: Vec<Hit>, payload_top: usize) -> Vec<pb::LaneHit> {
    hits.into_iter()
        .enumerate()
        .map(|(rank, h)| hit_to_proto(h, rank < payload_top))
        .collect()
}

pub fn params_from_proto(p: Option<&pb::IndexParams>) -> IvfPqParams {
    let d = IvfPqParams::default();
    match p {
        None => d,
        Some(p) => IvfPqParams {
            nlist: if p.nlist == 0 { d.nlist } else { p.nlist },
            m: if p.m == 0 { d.m } else { p.m },
            nbits: if p.nbits == 0 { d.nbits } else { p.nbits },
            nprobe: if p.nprobe == 0 { d.nprobe } else { p.nprobe },
        },
    }
}

/// A document of an upsert (or of a catch-up fetch) → the engine's write.
pub fn write_from_proto(d: pb::DocumentChunks) -> attest_index::DocumentWrite {
    attest_index::DocumentWrite {
        doc_id: d.doc_id,
        tenant: d.tenant,
        chunks: d
            .chunks
            .into_iter()
            .map(|c| attest_index::LoggedChunk {
                chunk_id: c.chunk_id,
                title: c.title,
                text: c.text,
                metadata_json: c.metadata_json,
                vector: c.vector,
            })
            .collect(),
        version: d.version,
        near_dup: d.near_dup.map(near_dup_from_proto),
    }
}

pub fn near_dup_from_proto(k: pb::NearDupKeys) -> attest_index::NearDupKeys {
    attest_index::NearDupKeys {
        signature: k.signature,
        bands: k.bands,
    }
}

/// The engine's write → the proto document (catch-up fetch answers).
pub fn write_to_proto(w: attest_index::DocumentWrite) -> pb::DocumentChunks {
    pb::DocumentChunks {
        doc_id: w.doc_id,
        tenant: w.tenant,
        chunks: w
            .chunks
            .into_iter()
            .map(|c| pb::ChunkRecord {
                chunk_id: c.chunk_id,
                title: c.title,
                text: c.text,
                metadata_json: c.metadata_json,
                vector: c.vector,
            })
            .collect(),
        version: w.version,
        near_dup: w.near_dup.map(|k| pb::NearDupKeys {
            signature: k.signature,
            bands: k.bands,
        }),
    }
}
