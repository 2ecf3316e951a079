//! A collection as the router sees it: its shape, index parameters and the replica set of each shard, taken
//! from meta's shard map (the one control plane, for `attest dev` and the cluster alike).

use std::collections::HashMap;

use attest_core::settings::CollectionThresholds;
use attest_embed::EmbedderIdentity;
use attest_ingest::ChunkingConfig;
use attest_proto::v1 as pb;
use serde::{Deserialize, Serialize};
use tracing::warn;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct IndexSettings {
    pub nlist: u32,
    pub m: u32,
    pub nbits: u32,
    /// Lists probed by a search that names none, until the shards have tuned a setting for `recall_target`.
    pub nprobe: u32,
    /// The recall@10 each shard tunes the setting of a search that names no nprobe to reach; absent: `nprobe`
    /// serves every such search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recall_target: Option<f64>,
}

impl IndexSettings {
    pub fn from_proto(p: &pb::IndexParams) -> Self {
        IndexSettings {
            nlist: p.nlist,
            m: p.m,
            nbits: p.nbits,
            nprobe: p.nprobe,
            recall_target: p.recall_target,
        }
    }

    pub fn to_proto(&self) -> pb::IndexParams {
        pb::IndexParams {
            nlist: self.nlist,
            m: self.m,
            nbits: self.nbits,
            nprobe: self.nprobe,
            recall_target: self.recall_target,
        }
    }

    /// The `nprobe` a shard is asked to search with when the caller names none: none under a recall target, so
    /// each replica serves its tuned setting.
    pub fn default_nprobe(&self) -> Option<u32> {
        self.recall_target.is_none().then_some(self.nprobe)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectionRecord {
    /// The name callers use.
    pub name: String,
    /// The name meta and the shard nodes keep it under: its name, or after a re-embedding the copy's
    /// `name~tag` ([`attest_core::limits::stored_collection_name`]). Every call to a shard names this.
    pub stored_name: String,
    pub shards: u32,
    pub replication: u32,
    pub dimension: u32,
    pub index: IndexSettings,
    pub seal_threshold: u64,
    /// The embedder that fills it (its model empty: none recorded, any embedder serves it).
    pub embedder: EmbedderIdentity,
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

/// The name callers use for each collection of meta's state, by its stored name: its own, or the alias that
/// resolves to it; `None` for a collection stored as `name~tag` that no alias names — the copy a re-embedding of
/// `name` is building, which callers never see.
pub fn caller_names(state: &pb::ClusterState) -> HashMap<String, Option<String>> {
    let aliased: HashMap<&str, &str> = state
        .aliases
        .iter()
        .map(|a| (a.collection.as_str(), a.name.as_str()))
        .collect();
    state
        .collections
        .iter()
        .map(|c| {
            let name = match aliased.get(c.name.as_str()) {
                Some(alias) => Some(alias.to_string()),
                None if attest_core::limits::owner_of_stored_name(&c.name) != c.name => None,
                None => Some(c.name.clone()),
            };
            (c.name.clone(), name)
        })
        .collect()
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
        stored_name: c.name.clone(),
        shards: c.shards,
        replication: c.replication,
        dimension: spec.dimension,
        index: IndexSettings::from_proto(&index),
        seal_threshold: spec.seal_threshold,
        embedder: identity_from_proto(&spec.embedder, spec.dimension, spec.embedder_identity),
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

/// A spec's embedder: its whole identity, or for a collection created before identities the model's id alone.
pub fn identity_from_proto(
    model: &str,
    dimension: u32,
    identity: Option<pb::EmbedderIdentity>,
) -> EmbedderIdentity {
    match identity {
        Some(i) if !i.model.is_empty() => EmbedderIdentity {
            model: i.model,
            checksum: i.checksum,
            dimension: i.dimension,
            pooling: i.pooling,
            query_prefix: i.query_prefix,
        },
        _ if model.is_empty() => EmbedderIdentity::default(),
        _ => EmbedderIdentity::of_model(model, dimension),
    }
}

/// What a spec records of `identity` (none for an unrecorded one).
pub fn identity_to_proto(identity: &EmbedderIdentity) -> Option<pb::EmbedderIdentity> {
    (!identity.is_unrecorded()).then(|| pb::EmbedderIdentity {
        model: identity.model.clone(),
        checksum: identity.checksum.clone(),
        dimension: identity.dimension,
        pooling: identity.pooling.clone(),
        query_prefix: identity.query_prefix.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_round_trips_and_a_bare_model_id_reads_as_the_model_alone() {
        let bge = attest_embed::LocalModel::BgeSmall.identity();
        assert_eq!(
            identity_from_proto(&bge.model, 384, identity_to_proto(&bge)),
            bge
        );
        assert_eq!(
            identity_from_proto("all-minilm-l6-v2", 384, None),
            EmbedderIdentity::of_model("all-minilm-l6-v2", 384)
        );
        assert!(identity_from_proto("", 384, None).is_unrecorded());
        assert_eq!(identity_to_proto(&EmbedderIdentity::default()), None);
    }

    #[test]
    fn a_search_naming_no_nprobe_leaves_it_to_the_replicas_under_a_recall_target() {
        let mut index = IndexSettings {
            nlist: 1024,
            m: 48,
            nbits: 8,
            nprobe: 32,
            recall_target: None,
        };
        assert_eq!(
            index.default_nprobe(),
            Some(32),
            "no target: the collection's own"
        );
        index.recall_target = Some(0.95);
        assert_eq!(index.default_nprobe(), None, "each replica's tuned setting");
    }
}
