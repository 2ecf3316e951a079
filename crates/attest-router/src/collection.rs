//! A collection as the router sees it: its shape, index parameters and the replica set of each shard, taken
//! from meta's shard map (the one control plane, for `attest dev` and the cluster alike).

use attest_core::settings::CollectionThresholds;
use attest_ingest::ChunkingConfig;
use attest_proto::v1 as pb;
use serde::{Deserialize, Serialize};
use tracing::warn;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct IndexSettings {
    pub nlist: u32,
    pub m: u32,
    pub nbits: u32,
    pub nprobe: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectionRecord {
    pub name: String,
    pub shards: u32,
    pub replication: u32,
    pub dimension: u32,
    pub index: IndexSettings,
    pub seal_threshold: u64,
    pub embedder: String,
    /// `placement[shard]` = the replicas of that shard (meta's node ids).
    pub placement: Vec<Vec<ReplicaRef>>,
    /// How its documents are chunked (fixed at creation; None: meta holds none, the router's default applies).
    pub chunking: Option<ChunkingConfig>,
    /// Its answer thresholds (None: the answer tier's configured defaults).
    pub thresholds: Option<CollectionThresholds>,
}

/// The role of one replica in its shard's replica set, as meta's shard map says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplicaRole {
    /// Serves reads, takes writes.
    Active,
    /// A new copy being filled from a peer: takes writes, serves no reads yet.
    Joining,
    /// Being moved away: serves reads and takes writes until its replacement is active.
    Leaving,
}

impl ReplicaRole {
    pub fn serves_reads(self) -> bool {
        matches!(self, ReplicaRole::Active | ReplicaRole::Leaving)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaRef {
    pub node: u64,
    pub role: ReplicaRole,
}

fn role_from_proto(state: i32) -> ReplicaRole {
    match pb::ReplicaState::try_from(state).unwrap_or(pb::ReplicaState::Active) {
        pb::ReplicaState::Joining => ReplicaRole::Joining,
        pb::ReplicaState::Leaving => ReplicaRole::Leaving,
        _ => ReplicaRole::Active,
    }
}

/// Meta's collection → the router's record.
pub fn record_from_meta(c: &pb::CollectionMeta) -> CollectionRecord {
    let spec = c.spec.clone().unwrap_or_default();
    let index = spec.index.unwrap_or_default();
    let mut placement = vec![Vec::new(); c.shards as usize];
    for p in &c.placement {
        if let Some(slot) = placement.get_mut(p.shard as usize) {
            *slot = p
                .replicas
                .iter()
                .map(|r| ReplicaRef {
                    node: r.node_id,
                    role: role_from_proto(r.state),
                })
                .collect();
        }
    }
    CollectionRecord {
        name: c.name.clone(),
        shards: c.shards,
        replication: c.replication,
        dimension: spec.dimension,
        index: IndexSettings {
            nlist: index.nlist,
            m: index.m,
            nbits: index.nbits,
            nprobe: index.nprobe,
        },
        seal_threshold: spec.seal_threshold,
        embedder: spec.embedder,
        placement,
        chunking: stored_setting(&c.name, "chunking_json", &c.chunking_json, |j| {
            serde_json::from_str(j).map_err(|e| e.to_string())
        }),
        thresholds: stored_setting(
            &c.name,
            "thresholds_json",
            &c.thresholds_json,
            CollectionThresholds::from_stored,
        )
        .flatten(),
    }
}

/// One of the JSON settings meta keeps for a collection; one that does not parse is logged and left out, so
/// the defaults apply rather than the collection becoming unusable.
fn stored_setting<T>(
    collection: &str,
    field: &str,
    json: &str,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Option<T> {
    if json.trim().is_empty() {
        return None;
    }
    parse(json)
        .map_err(|e| {
            warn!(collection, field, error = %e, event = "collection_setting_ignored",
                "meta holds a setting this router cannot read; using the default");
        })
        .ok()
}

impl CollectionRecord {
    /// Refuses to embed text for this collection with `embedder` (an id, `Embedder::id`) when its vectors came
    /// from another model: vectors of two models share no space, and a search would rank by noise. A collection
    /// recorded without an embedder (created with vectors only) takes any.
    pub fn check_embedder(&self, embedder: &str) -> Result<(), crate::error::RouterError> {
        if self.embedder.is_empty() || self.embedder == embedder {
            return Ok(());
        }
        Err(crate::error::RouterError::FailedPrecondition(format!(
            "collection `{}` was embedded by {}, and this router embeds with {embedder}: run the router with \
             embedder.local.model: {} (or a remote embedder of that model), or send vectors of that model",
            self.name, self.embedder, self.embedder
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(embedder: &str) -> CollectionRecord {
        CollectionRecord {
            name: "docs".into(),
            shards: 1,
            replication: 1,
            dimension: 384,
            index: IndexSettings {
                nlist: 1,
                m: 8,
                nbits: 8,
                nprobe: 1,
            },
            seal_threshold: 0,
            embedder: embedder.into(),
            placement: Vec::new(),
            chunking: None,
            thresholds: None,
        }
    }

    #[test]
    fn another_model_is_refused_by_name() {
        assert!(record("all-minilm-l6-v2")
            .check_embedder("all-minilm-l6-v2")
            .is_ok());
        assert!(record("").check_embedder("bge-small-en-v1.5").is_ok());
        let err = record("all-minilm-l6-v2")
            .check_embedder("bge-small-en-v1.5")
            .unwrap_err();
        assert_eq!(err.code(), attest_proto::ErrorCode::FailedPrecondition);
        let text = err.to_string();
        assert!(
            text.contains("all-minilm-l6-v2") && text.contains("bge-small-en-v1.5"),
            "{text}"
        );
    }
}
