//! The JSON bodies of HTTP API v1 as types: what the handlers of [`crate::router::http`] read and write. The OpenAPI
//! document ([`crate::router::openapi`]) describes these same types (`ToSchema`), so the contract cannot say one thing
//! while a handler sends another.

use std::collections::HashMap;

use attest_auth::keyring::scope_of;
use attest_core::contract;
use attest_core::keys::Scope;
use attest_core::settings::CollectionThresholds;
use attest_ingest::ChunkingConfig;
use attest_proto::v1 as pb;
use attest_router::collection::{CollectionRecord, IndexSettings};
use attest_router::error::RouterError;
use attest_router::snapshots::{ListedSnapshot, ReplicaProgress, RestoredCollection};
use axum::extract::rejection::JsonRejection;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
use utoipa::{IntoParams, ToSchema};

/// Index parameters of a new collection; each left out takes the router's default.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct IndexBody {
    #[schema(schema_with = contract::nlist)]
    pub nlist: Option<u32>,
    #[schema(schema_with = contract::pq_m)]
    pub m: Option<u32>,
    #[schema(schema_with = contract::nbits)]
    pub nbits: Option<u32>,
    #[schema(schema_with = contract::nprobe)]
    pub nprobe: Option<u32>,
    #[schema(schema_with = contract::recall_target)]
    pub recall_target: Option<f64>,
}

/// `POST /v1/collections`. A field left out takes its default; an explicit 0 is refused.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateCollectionBody {
    #[schema(schema_with = contract::collection_name)]
    pub name: String,
    #[schema(schema_with = contract::shards)]
    pub shards: Option<u32>,
    #[schema(schema_with = contract::replication)]
    pub replication: Option<u32>,
    pub index: Option<IndexBody>,
    /// Checked by the router (unknown keys refused); fixed at creation.
    #[schema(value_type = Option<ChunkingConfig>)]
    pub chunking: Option<Value>,
    pub thresholds: Option<CollectionThresholds>,
    /// The model that embeds its text, fixed at creation: the router's configured embedder (left out), or a
    /// local model the router loads for it (`all-minilm-l6-v2`, `bge-small-en-v1.5`).
    #[schema(schema_with = contract::embedder_model)]
    pub embedder: Option<String>,
}

/// `id` of a document: a non-empty string, or a number (stored as its decimal text).
fn string_or_number() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(SchemaType::from_iter([Type::String, Type::Number]))
}

/// One document of a JSON ingest body; any other field is refused, named by its path (`documents[3].colour`).
// The fields of `attest_ingest::DOCUMENT_FIELDS` and an optional precomputed `vector` (the test below holds them).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DocumentBody {
    #[schema(schema_with = string_or_number)]
    pub id: Value,
    #[serde(default)]
    pub title: Option<String>,
    pub text: String,
    /// Scalars or arrays of scalars; filterable in search.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Map<String, Value>>,
    /// Default: the key's only tenant, else the router's default tenant.
    #[serde(default)]
    #[schema(schema_with = contract::optional_tenant)]
    pub tenant: Option<String>,
    /// A precomputed embedding of the collection's dimension (else the router embeds the text).
    #[serde(default)]
    pub vector: Option<Vec<f32>>,
}

/// `POST /v1/collections/{name}/documents` as `application/json`: one bad document fails the request.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DocumentsBody {
    pub documents: Vec<DocumentBody>,
}

/// One line of an `application/x-ndjson` ingest body: a line with any other field is refused by its line number
/// (`_id` is read as `id`); blank lines are skipped.
// `attest_ingest::parse_jsonl` reads the lines; this type only describes one, and the test below holds its fields
// to `attest_ingest::DOCUMENT_FIELDS`.
#[allow(dead_code)]
#[derive(ToSchema)]
pub(crate) struct DocumentLine {
    #[schema(schema_with = string_or_number)]
    pub id: Value,
    pub title: Option<String>,
    pub text: String,
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Map<String, Value>>,
    pub tenant: Option<String>,
}

/// `POST /v1/collections/{name}/search`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchBody {
    /// The query text (may be empty when `vector` is given and only the dense lane runs).
    pub query: String,
    /// Hits to return, 1..=`max_k` (default 10).
    pub k: Option<i64>,
    /// `dense`, `bm25` (default: both).
    pub lanes: Option<Vec<String>>,
    /// The k of Reciprocal Rank Fusion (default 60).
    pub rrf_k: Option<f64>,
    /// Weight per lane in the fusion (`{"dense": 1, "bm25": 0.5}`); a lane not named keeps the router's default
    /// (`router.lane_weights`: dense 0.3, BM25 1).
    pub weights: Option<HashMap<String, f64>>,
    /// `{"field": scalar | [scalars] | {"in": [...]} | {"gte"|"gt"|"lte"|"lt": number, ...}}` over metadata.
    #[schema(value_type = Option<Object>)]
    pub filter: Option<Map<String, Value>>,
    #[schema(schema_with = contract::optional_tenant)]
    pub tenant: Option<String>,
    /// IVF lists probed (default: the collection's; at most its `nlist`).
    #[schema(schema_with = contract::nprobe)]
    pub nprobe: Option<u32>,
    /// The query's own vector (the collection's dimension): the dense lane searches with it instead of
    /// embedding `query`.
    pub vector: Option<Vec<f32>>,
}

/// `POST /v1/collections/{name}/maintain`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MaintainBody {
    /// Seal the growing segment into an indexed one.
    #[serde(default)]
    pub seal: bool,
    /// Merge sealed segments and drop deleted rows.
    #[serde(default)]
    pub compact: bool,
}

#[derive(Deserialize, Default, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct TenantQuery {
    /// The document's tenant (default: the key's only tenant, else the router's default tenant).
    #[param(schema_with = contract::optional_tenant)]
    pub tenant: Option<String>,
}

/// A collection as the API shows it.
#[derive(Serialize, ToSchema)]
pub struct CollectionView {
    pub name: String,
    pub shards: u32,
    pub replication: u32,
    pub dimension: u32,
    pub index: IndexSettings,
    /// Rows of a shard's growing segment at which it is sealed; 0: each shard's `engine.seal_threshold`.
    pub seal_threshold: u64,
    /// The id of the model that embeds its text (empty: none recorded).
    pub embedder: String,
    /// That embedder's whole identity (null: none recorded, as in a collection created before identities).
    pub embedder_identity: Option<EmbedderView>,
    /// Null: the router's default chunking.
    pub chunking: Option<ChunkingConfig>,
    /// Null: the answer tier's configured defaults.
    pub thresholds: Option<CollectionThresholds>,
}

impl From<&CollectionRecord> for CollectionView {
    fn from(c: &CollectionRecord) -> Self {
        CollectionView {
            name: c.name.clone(),
            shards: c.shards,
            replication: c.replication,
            dimension: c.dimension,
            index: c.index,
            seal_threshold: c.seal_threshold,
            embedder: c.embedder.model.clone(),
            embedder_identity: (!c.embedder.is_unrecorded()).then(|| EmbedderView {
                model: c.embedder.model.clone(),
                checksum: c.embedder.checksum.clone(),
                dimension: c.embedder.dimension,
                pooling: c.embedder.pooling.clone(),
                query_prefix: c.embedder.query_prefix.clone(),
            }),
            chunking: c.chunking.clone(),
            thresholds: c.thresholds.clone(),
        }
    }
}

/// What makes an embedder's vectors one space: a collection is embedded by the embedder of this identity only.
#[derive(Serialize, ToSchema)]
pub struct EmbedderView {
    pub model: String,
    /// sha256 (hex) of the model's published weights; empty when unknown (a remote service).
    pub checksum: String,
    pub dimension: u32,
    /// "mean" or "cls"; empty when unknown (a remote service).
    pub pooling: String,
    /// Put before each search query, never before passages.
    pub query_prefix: String,
}

/// The collections the key sees.
#[derive(Serialize, ToSchema)]
pub struct CollectionList {
    pub collections: Vec<CollectionView>,
}

#[derive(Serialize, ToSchema)]
pub struct Dropped {
    /// The collection dropped.
    pub dropped: String,
}

#[derive(Serialize, ToSchema)]
pub struct Deleted {
    /// The id of what was deleted.
    pub deleted: String,
}

/// A document of an ingest body that was not stored, and why.
#[derive(Serialize, ToSchema)]
pub struct Refusal {
    /// 0-based position in the request (for NDJSON, the line's).
    pub index: usize,
    /// 1-based line (NDJSON only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    pub reason: String,
}

#[derive(Serialize, ToSchema)]
pub struct IngestResult {
    /// Documents stored.
    pub accepted: u32,
    /// Documents not stored (malformed NDJSON lines, near-duplicates, ids repeated later in the request), by
    /// position.
    pub rejected: Vec<Refusal>,
    /// How many of `rejected` are near-duplicates of stored documents.
    pub duplicates: usize,
    /// Chunks written.
    pub chunks: u64,
}

/// A hit's rank and score in one lane.
#[derive(Serialize, ToSchema)]
pub struct LaneScore {
    pub rank: u32,
    pub score: f32,
}

/// The lanes that found a hit.
#[derive(Serialize, ToSchema)]
pub struct HitLanes {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dense: Option<LaneScore>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bm25: Option<LaneScore>,
}

#[derive(Serialize, ToSchema)]
pub struct SearchHit {
    pub chunk_id: String,
    pub doc_id: String,
    pub title: String,
    pub text: String,
    /// The fused score.
    pub score: f64,
    pub lanes: HitLanes,
    pub shard: u32,
    #[schema(value_type = Object)]
    pub metadata: Value,
}

#[derive(Serialize, ToSchema)]
pub struct SearchResult {
    pub hits: Vec<SearchHit>,
    /// Some shard did not answer: `missing_shards` names them.
    pub degraded: bool,
    pub missing_shards: Vec<u32>,
    /// The dense lane could not run (the embedder was unavailable): BM25 only.
    pub fallback_mode: bool,
    pub request_id: String,
    pub took_ms: f64,
}

impl From<&pb::SearchResponse> for SearchResult {
    fn from(resp: &pb::SearchResponse) -> Self {
        let lane = |l: &pb::LaneRank| LaneScore {
            rank: l.rank,
            score: l.score,
        };
        let hits = resp
            .hits
            .iter()
            .map(|h| SearchHit {
                chunk_id: h.chunk_id.clone(),
                doc_id: h.doc_id.clone(),
                title: h.title.clone(),
                text: h.text.clone(),
                score: h.score,
                lanes: HitLanes {
                    dense: h.dense.as_ref().map(lane),
                    bm25: h.bm25.as_ref().map(lane),
                },
                shard: h.shard,
                metadata: serde_json::from_str(&h.metadata_json)
                    .unwrap_or_else(|_| Value::Object(Map::new())),
            })
            .collect();
        SearchResult {
            hits,
            degraded: resp.degraded,
            missing_shards: resp.missing_shards.clone(),
            fallback_mode: resp.fallback_mode,
            request_id: resp.request_id.clone(),
            took_ms: resp.took_ms,
        }
    }
}

/// One shard's statistics (from one of its replicas).
#[derive(Serialize, ToSchema)]
pub struct ShardStats {
    pub shard: usize,
    pub live_documents: u64,
    pub growing_rows: u64,
    pub sealed_rows: u64,
    pub sealed_segments: u32,
    pub last_seq: u64,
    pub rebuilt_segments: Vec<String>,
    /// Size of the replica's files on disk.
    pub disk_bytes: u64,
    /// The replica's live recall@k estimate (a sample of its dense searches run again exactly); absent before
    /// its first sample or where `engine.recall_probe.sample_rate` is 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recall: Option<RecallEstimate>,
    /// The search setting the replica tuned for the collection's `index.recall_target`; absent before its first
    /// tuning (a replica with no sealed rows searches exactly) or without a target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tuned: Option<SearchTuning>,
    /// Times since the replica opened that its quantizer was trained again (and its segments re-encoded)
    /// because no search setting reached the recall target: its rows drifted from what it was trained on.
    pub recall_retrains: u64,
}

/// What a replica's last tuning chose and measured.
#[derive(Serialize, ToSchema)]
pub struct SearchTuning {
    /// Lists probed by a search that names no nprobe.
    pub nprobe: u32,
    /// Candidates per hit re-scored from the full vectors (0: the SQ8 copies' scores are final).
    pub exact_refine: u32,
    /// Mean recall@10 the setting delivered on the tuning's sample of the replica's rows and recent searches.
    pub recall: f64,
    pub target: f64,
    /// False: no setting reached the target, and the best one measured serves.
    pub reached: bool,
    pub queries: u32,
    pub tuned_at_ms: u64,
    /// Sealed rows of the replica when it was measured (fewer than the replica holds now: a seal since then has
    /// asked for the next tuning).
    pub sealed_rows: u64,
}

/// Recall@k of a replica's dense searches, measured on a sample of them.
#[derive(Serialize, ToSchema)]
pub struct RecallEstimate {
    /// Mean recall@k the samples in the window delivered to the collection's searches: the share of the true top
    /// k the router keeps from this replica's answers (its late ranks are rarely the collection's).
    pub recall: f64,
    /// The 95% interval of that mean.
    pub low: f64,
    pub high: f64,
    /// Samples in the window.
    pub samples: u64,
    /// Samples measured since the replica opened, and dropped because the probe was busy.
    pub measured: u64,
    pub dropped: u64,
    /// The collection's shard count the estimate counts the merge over (1: the replica's own recall@k).
    pub shards: u32,
}

#[derive(Serialize, ToSchema)]
pub struct CollectionStats {
    pub collection: String,
    pub shards: Vec<ShardStats>,
}

impl CollectionStats {
    pub fn new(collection: &str, shards: Vec<pb::ShardStatsResponse>) -> Self {
        let shards = shards
            .into_iter()
            .enumerate()
            .map(|(i, s)| ShardStats {
                shard: i,
                live_documents: s.live_documents,
                growing_rows: s.growing_rows,
                sealed_rows: s.sealed_rows,
                sealed_segments: s.sealed_segments,
                last_seq: s.last_seq,
                rebuilt_segments: s.rebuilt_segments,
                disk_bytes: s.disk_bytes,
                recall: s.recall.map(|r| RecallEstimate {
                    recall: r.recall,
                    low: r.low,
                    high: r.high,
                    samples: r.samples,
                    measured: r.measured,
                    dropped: r.dropped,
                    shards: r.shards,
                }),
                recall_retrains: s.recall_retrains,
                tuned: s.tuned.map(|t| SearchTuning {
                    nprobe: t.nprobe,
                    exact_refine: t.exact_refine,
                    recall: t.recall,
                    target: t.target,
                    reached: t.reached,
                    queries: t.queries,
                    tuned_at_ms: t.tuned_at_ms,
                    sealed_rows: t.sealed_rows,
                }),
            })
            .collect();
        CollectionStats {
            collection: collection.to_string(),
            shards,
        }
    }
}

/// A key's record (no hash: it identifies the key to no one but meta).
#[derive(Serialize, ToSchema)]
pub struct KeyView {
    pub id: String,
    /// `read`, `write`, `admin`.
    pub scopes: Vec<&'static str>,
    /// Tenants it may act for (`*`: any).
    pub tenants: Vec<String>,
    /// Collections it may act on (empty: all).
    pub collections: Vec<String>,
    /// Null: never expires.
    pub expires_at_ms: Option<u64>,
    pub created_ms: u64,
    pub revoked: bool,
}

impl From<&pb::ApiKeyInfo> for KeyView {
    fn from(k: &pb::ApiKeyInfo) -> Self {
        KeyView {
            id: k.id.clone(),
            scopes: k
                .scopes
                .iter()
                .filter_map(|&s| scope_of(s))
                .map(Scope::as_str)
                .collect(),
            tenants: k.tenants.clone(),
            collections: k.collections.clone(),
            expires_at_ms: (k.expires_at_ms != 0).then_some(k.expires_at_ms),
            created_ms: k.created_ms,
            revoked: k.revoked,
        }
    }
}

/// A key just minted: its record and the key itself, shown this once.
#[derive(Serialize, ToSchema)]
pub struct CreatedKey {
    #[serde(flatten)]
    pub info: KeyView,
    pub key: String,
}

#[derive(Serialize, ToSchema)]
pub struct KeyList {
    pub keys: Vec<KeyView>,
}

#[derive(Serialize, ToSchema)]
pub struct SnapshotList {
    pub snapshots: Vec<ListedSnapshot>,
}

#[derive(Serialize, ToSchema)]
pub struct SnapshotProgress {
    pub id: String,
    pub replicas: Vec<ReplicaProgress>,
}

#[derive(Serialize, ToSchema)]
pub struct Restored {
    pub collections: Vec<RestoredCollection>,
}

/// The body of a request, or why it could not be read as JSON of its type.
pub(crate) fn body<T>(r: Result<Json<T>, JsonRejection>) -> Result<T, RouterError> {
    r.map(|Json(v)| v)
        .map_err(|e| RouterError::Callee(attest_telemetry::http_error::json_rejection(e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn properties<T: utoipa::PartialSchema>() -> Vec<String> {
        let schema = serde_json::to_value(T::schema()).unwrap();
        let mut names: Vec<String> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_documented_document_fields_are_the_ones_ingest_accepts() {
        let mut fields: Vec<String> = attest_ingest::DOCUMENT_FIELDS
            .iter()
            .map(|f| f.to_string())
            .collect();
        fields.sort();
        assert_eq!(properties::<DocumentLine>(), fields);
        fields.push("vector".into());
        fields.sort();
        assert_eq!(properties::<DocumentBody>(), fields);
    }
}
