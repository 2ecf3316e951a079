//! Collection lifecycle on the router: create (meta places the replicas, every replica is ensured), drop,
//! maintain (seal / compact now) and per-shard statistics, with the limits of `attest_core::limits`.
//!
//! A create is idempotent: the same spec again answers the collection (a client whose first try timed out,
//! with meta perhaps having applied it, repeats it safely); another spec under the name is `ALREADY_EXISTS`.
//! A replication left out is `router.default_replication`, at most one per live shard node.

use std::sync::Arc;

use attest_core::limits;
use attest_core::settings::CollectionThresholds;
use attest_embed::EmbedderIdentity;
use attest_ingest::ChunkingConfig;
use attest_proto::v1 as pb;
use tracing::info;

use crate::collection::{CollectionRecord, IndexSettings};
use crate::error::RouterError;
use crate::replicas::{call_any, ShardCall};
use crate::shared::Shared;

/// How long one replica's seal or compaction may take when an operator asks for it.
const MAINTENANCE_LIMIT: std::time::Duration = std::time::Duration::from_secs(3600);

/// What a create request came to: the collection, and whether this request made it (`false`: it existed with
/// the same spec, as when a create whose answer was lost is repeated).
pub struct Created {
    pub record: CollectionRecord,
    pub new: bool,
}

/// Collections: their records as meta's shard map has them, and their life cycle.
#[derive(Clone)]
pub struct Collections {
    pub(crate) shared: Arc<Shared>,
}

impl Collections {
    pub(crate) fn new(shared: &Arc<Shared>) -> Self {
        Collections {
            shared: Arc::clone(shared),
        }
    }

    /// The collection of that name (its stored copy's record when a re-embedding switched it).
    pub fn get(&self, name: &str) -> Result<CollectionRecord, RouterError> {
        self.shared.view.get(name)
    }

    pub fn list(&self) -> Vec<CollectionRecord> {
        self.shared.view.list()
    }

    /// Creates a collection, or answers the one of that name when it already has the spec asked for (repeating a
    /// create is safe); a collection of that name with another spec is `ALREADY_EXISTS`.
    pub async fn create(
        &self,
        req: pb::CreateCollectionRequest,
        request_id: &str,
    ) -> Result<CollectionRecord, RouterError> {
        Ok(self.create_or_match(req, request_id).await?.record)
    }

    /// [`Collections::create`], saying whether the collection is new.
    pub async fn create_or_match(
        &self,
        req: pb::CreateCollectionRequest,
        request_id: &str,
    ) -> Result<Created, RouterError> {
        if let Some(problem) = limits::collection_name_problem(&req.name) {
            return Err(RouterError::invalid("name", problem));
        }
        let p = req.index.unwrap_or_default();
        // Leaving a number out asks for its default; an explicit 0 is a mistake, not a request for the default.
        let named = [
            ("shards", req.shards),
            ("replication", req.replication),
            ("index.nlist", p.nlist),
            ("index.m", p.m),
            ("index.nbits", p.nbits),
            ("index.nprobe", p.nprobe),
        ];
        if let Some((field, _)) = named.iter().find(|(_, v)| *v == Some(0)) {
            return Err(RouterError::invalid(
                *field,
                "must be at least 1 (leave it out for the default)",
            ));
        }
        let shards = req.shards.unwrap_or(self.shared.config.default_shards);
        if let Some(problem) = limits::shards_problem(shards) {
            return Err(RouterError::invalid("shards", problem));
        }
        if shards > self.shared.config.max_shards {
            return Err(RouterError::invalid(
                "shards",
                format!(
                    "must be at most {} (router.max_shards)",
                    self.shared.config.max_shards
                ),
            ));
        }
        if let Some(problem) = req.replication.and_then(limits::replication_problem) {
            return Err(RouterError::invalid("replication", problem));
        }
        let replication = req
            .replication
            .unwrap_or_else(|| self.default_replication());
        let index = IndexSettings {
            nlist: p.nlist.unwrap_or(limits::DEFAULT_NLIST),
            m: p.m.unwrap_or(limits::DEFAULT_M),
            nbits: p.nbits.unwrap_or(limits::DEFAULT_NBITS),
            nprobe: p.nprobe.unwrap_or(limits::DEFAULT_NPROBE),
            // An nprobe named alone is the setting the caller chose; otherwise the shards tune one for a target.
            recall_target: match (p.recall_target, p.nprobe) {
                (Some(target), _) => Some(target),
                (None, None) => Some(limits::DEFAULT_RECALL_TARGET),
                (None, Some(_)) => None,
            },
        };
        if let Some(problem) = index.recall_target.and_then(limits::recall_target_problem) {
            return Err(RouterError::invalid("index.recall_target", problem));
        }
        if index.nbits > limits::MAX_NBITS {
            return Err(RouterError::invalid(
                "index.nbits",
                format!("must be at most {}", limits::MAX_NBITS),
            ));
        }
        if index.nlist > limits::MAX_NLIST {
            return Err(RouterError::invalid(
                "index.nlist",
                format!("must be at most {}", limits::MAX_NLIST),
            ));
        }
        // The defaults are fitted to a small nlist or an odd dimension by the engine; what the caller chose must
        // fit as it is.
        if p.nprobe.is_some() {
            if let Some(problem) = limits::nprobe_problem(index.nprobe, index.nlist) {
                return Err(RouterError::invalid("index.nprobe", problem));
            }
        }
        if let Some(problem) = req
            .embedder
            .as_deref()
            .and_then(limits::embedder_model_problem)
        {
            return Err(RouterError::invalid("embedder", problem));
        }
        let model = self
            .shared
            .embedders
            .for_new(req.embedder.as_deref().unwrap_or_default())
            .await?;
        let embedder = model.passages.identity();
        let dimension = model.passages.dimension() as u32;
        if p.m.is_some() {
            if let Some(problem) = limits::pq_m_problem(index.m, dimension) {
                return Err(RouterError::invalid("index.m", problem));
            }
        }
        let chunking = self.chunking_for_create(&req.chunking_json)?;
        let thresholds = CollectionThresholds::from_stored(&req.thresholds_json)
            .map_err(|e| RouterError::invalid("thresholds", e))?;
        let wanted = Wanted {
            shards,
            replication,
            dimension,
            // Left out, any: a repeated create need not name the model its collection was made with.
            embedder: req.embedder.is_some().then_some(&embedder),
            chunking: &chunking,
            thresholds: thresholds.as_ref(),
        };
        if let Ok(existing) = self.shared.view.get(&req.name) {
            return wanted.matched(existing, &index);
        }
        let spec = pb::CollectionSpec {
            dimension,
            index: Some(index.to_proto()),
            // 0: each shard seals at its own `engine.seal_threshold`.
            seal_threshold: 0,
            embedder: embedder.model.clone(),
            embedder_identity: crate::collection::identity_to_proto(&embedder),
        };
        // Meta places the replicas (distinct nodes, spread over zones) and records the collection.
        let view = &self.shared.view;
        let created = view
            .meta()
            .create_collection(pb::MetaCreateCollectionRequest {
                name: req.name.clone(),
                shards,
                replication,
                spec: Some(spec),
                chunking_json: serde_json::to_string(&chunking).unwrap_or_default(),
                thresholds_json: thresholds
                    .as_ref()
                    .map(|t| t.to_stored())
                    .unwrap_or_default(),
                ..Default::default()
            })
            .await;
        let created = match created {
            Ok(created) => created,
            // Created meanwhile (this view had not seen it yet), perhaps by an earlier try of this very request
            // whose answer was lost: the same spec is this request's collection.
            Err(s) if s.code() == tonic::Code::AlreadyExists => {
                view.refresh(true).await?;
                let existing = view.get(&req.name)?;
                return wanted.matched(existing, &index);
            }
            Err(s) => return Err(RouterError::from_meta_write(s)),
        };
        let record = self.shared.ensure_replicas(&created, request_id).await;
        info!(collection = %record.name, shards, replication = record.replication, event = "collection_created", "collection created");
        Ok(Created { record, new: true })
    }

    /// The replication of a collection created without saying: the configured `default_replication`, at most one
    /// replica per shard node placement can use now (one node: 1), so that a small cluster (or `attest dev`)
    /// still creates it. An explicit replication is never lowered: with too few nodes it is refused.
    fn default_replication(&self) -> u32 {
        let nodes = u32::try_from(self.shared.view.placeable_shard_nodes()).unwrap_or(u32::MAX);
        self.shared.config.default_replication.min(nodes).max(1)
    }

    /// The chunking a new collection is created with: the request's (validated, unknown keys refused) or the
    /// router's configured default.
    fn chunking_for_create(&self, json: &str) -> Result<ChunkingConfig, RouterError> {
        if json.trim().is_empty() {
            return Ok(self.shared.config.chunking.clone());
        }
        let mut value: serde_json::Value = serde_json::from_str(json)
            .map_err(|e| RouterError::invalid("chunking", e.to_string()))?;
        let known = serde_json::to_value(ChunkingConfig::default()).expect("chunking serializes");
        if let (Some(given), Some(known)) = (value.as_object_mut(), known.as_object()) {
            if let Some(unknown) = given.keys().find(|k| !known.contains_key(*k)) {
                return Err(RouterError::invalid(
                    format!("chunking.{unknown}"),
                    "unknown field",
                ));
            }
        }
        let chunking: ChunkingConfig = serde_json::from_value(value)
            .map_err(|e| RouterError::invalid("chunking", e.to_string()))?;
        if let Some((key, problem)) = chunking.problem() {
            return Err(RouterError::invalid(format!("chunking.{key}"), problem));
        }
        Ok(chunking)
    }

    /// Replaces (`Some`) or clears (`None`) a collection's answer thresholds in meta; every answer replica
    /// picks them up on its next read of the cluster state.
    pub async fn set_thresholds(
        &self,
        name: &str,
        thresholds: Option<CollectionThresholds>,
    ) -> Result<CollectionRecord, RouterError> {
        self.shared.view.get(name)?;
        if let Some((field, problem)) = thresholds.as_ref().and_then(|t| t.problem()) {
            return Err(RouterError::invalid(field, problem));
        }
        let stored = thresholds
            .as_ref()
            .map(|t| t.to_stored())
            .unwrap_or_default();
        let updated = self
            .shared
            .view
            .meta()
            .set_collection_thresholds(name, &stored)
            .await
            .map_err(RouterError::from_meta_write)?;
        self.shared.view.insert(&updated);
        info!(collection = %name, thresholds = %stored, event = "thresholds_set", "collection thresholds set");
        self.shared.view.get(name)
    }

    /// Drops the collection, and the copy a re-embedding was building of it (meta drops both in one command).
    pub async fn remove(&self, name: &str, request_id: &str) -> Result<(), RouterError> {
        let rec = self.shared.view.get(name)?;
        let copy = self.shared.view.copy_of(name);
        if !self
            .shared
            .view
            .meta()
            .drop_collection(name)
            .await
            .map_err(RouterError::from_meta_write)?
        {
            return Err(RouterError::NotFound(format!(
                "collection `{name}` does not exist"
            )));
        }
        self.shared.view.remove(name);
        for rec in std::iter::once(rec).chain(copy) {
            self.shared.drop_replicas(&rec, request_id).await;
        }
        Ok(())
    }

    /// Seals and/or compacts every replica of every shard of a collection now (operators; tests). A compaction
    /// runs for as long as its segments take to merge (minutes on a 10M-row shard), so each replica's call is
    /// bounded by [`MAINTENANCE_LIMIT`], not by the per-attempt timeout of searches and writes.
    pub async fn maintain(
        &self,
        collection: &str,
        seal: bool,
        compact: bool,
        request_id: &str,
    ) -> Result<(), RouterError> {
        let rec = self.shared.view.get(collection)?;
        for shard in 0..rec.shards {
            let replicas = self.shared.view.write_replicas(&rec, shard as usize);
            if replicas.is_empty() {
                return Err(RouterError::Unavailable(format!(
                    "shard {shard} of `{collection}` has no reachable replica"
                )));
            }
            let calls = replicas.iter().map(|endpoint| {
                let call = ShardCall::Maintain {
                    request_id: request_id.to_string(),
                    req: pb::MaintainRequest {
                        collection: rec.stored_name.clone(),
                        shard,
                        seal,
                        compact,
                    },
                };
                endpoint.call_long(call, MAINTENANCE_LIMIT)
            });
            for outcome in futures::future::join_all(calls).await {
                outcome.map_err(RouterError::from_status)?;
            }
        }
        Ok(())
    }

    /// Per-shard statistics of a collection (from one replica of each shard).
    pub async fn stats(
        &self,
        collection: &str,
        request_id: &str,
    ) -> Result<Vec<pb::ShardStatsResponse>, RouterError> {
        let rec = self.shared.view.get(collection)?;
        let mut out = Vec::new();
        for shard in 0..rec.shards as usize {
            let replicas = self.shared.view.read_replicas(&rec, shard);
            let call = ShardCall::Stats {
                request_id: request_id.to_string(),
                req: pb::ShardStatsRequest {
                    collection: rec.stored_name.clone(),
                    shard: shard as u32,
                },
            };
            let (resp, _) = call_any(&replicas, call, &self.shared.config.replicas)
                .await
                .map_err(RouterError::from_status)?;
            out.push(resp.try_into().map_err(RouterError::from_status)?);
        }
        Ok(out)
    }
}

/// The spec a create request resolves to, to tell a repeated create (the same) from a name taken by another
/// collection.
struct Wanted<'a> {
    shards: u32,
    replication: u32,
    dimension: u32,
    /// None: any (the request named no model).
    embedder: Option<&'a EmbedderIdentity>,
    chunking: &'a ChunkingConfig,
    thresholds: Option<&'a CollectionThresholds>,
}

impl Wanted<'_> {
    /// `existing` when it has this spec and `index`; else `ALREADY_EXISTS` naming what differs.
    fn matched(
        &self,
        existing: CollectionRecord,
        index: &IndexSettings,
    ) -> Result<Created, RouterError> {
        let mut differs = Vec::new();
        if existing.shards != self.shards {
            differs.push(format!(
                "shards {} (asked {})",
                existing.shards, self.shards
            ));
        }
        if existing.replication != self.replication {
            differs.push(format!(
                "replication {} (asked {})",
                existing.replication, self.replication
            ));
        }
        if existing.index != *index {
            differs.push(format!("index {:?} (asked {index:?})", existing.index));
        }
        if let Some(wanted) = self.embedder {
            if existing.dimension != self.dimension
                || !existing.embedder.differences(wanted).is_empty()
            {
                differs.push(format!(
                    "embedder {} of {} dimensions (asked {})",
                    existing.embedder.model, existing.dimension, wanted.model
                ));
            }
        }
        if existing
            .chunking
            .as_ref()
            .is_some_and(|c| c != self.chunking)
        {
            differs.push("chunking".into());
        }
        if existing.thresholds.as_ref() != self.thresholds {
            differs.push("thresholds".into());
        }
        if differs.is_empty() {
            return Ok(Created {
                record: existing,
                new: false,
            });
        }
        Err(RouterError::AlreadyExists(format!(
            "collection `{}` already exists with another spec: {}",
            existing.name,
            differs.join(", ")
        )))
    }
}
