//! Conversions between the proto messages (`attest.v1`) and the state machine's own serde types.
//!
//! The state machine keeps its own types so that its encoding (bincode, in snapshots and log entries) does
//! not depend on prost, and so that `apply` stays independent of the wire format.

use attest_proto::v1 as pb;

use crate::drain::DrainKind;
use crate::error::MetaError;
use crate::placement::{Move, ReplicaState, ShardReplicas};
use crate::state::{
    ApiKeyRecord, CollectionDef, CollectionRecord, IndexParamsRecord, ManifestRecord, NodeRecord,
    NodeRole, SpecRecord, StateMachine,
};

pub fn role_from_pb(role: i32) -> Result<NodeRole, MetaError> {
    match pb::NodeRole::try_from(role) {
        Ok(pb::NodeRole::Shard) => Ok(NodeRole::Shard),
        Ok(pb::NodeRole::Router) => Ok(NodeRole::Router),
        Ok(pb::NodeRole::Answer) => Ok(NodeRole::Answer),
        _ => Err(MetaError::InvalidArgument(format!(
            "role {role}: one of shard, router, answer"
        ))),
    }
}

pub fn role_to_pb(role: NodeRole) -> pb::NodeRole {
    match role {
        NodeRole::Shard => pb::NodeRole::Shard,
        NodeRole::Router => pb::NodeRole::Router,
        NodeRole::Answer => pb::NodeRole::Answer,
    }
}

/// A node with the liveness the leader computed.
pub fn node_to_pb(
    n: &NodeRecord,
    drain: Option<DrainKind>,
    last_heartbeat_ms: u64,
    alive: bool,
) -> pb::NodeInfo {
    pb::NodeInfo {
        draining: drain_to_pb(drain) as i32,
        id: n.id,
        name: n.name.clone(),
        address: n.address.clone(),
        role: role_to_pb(n.role) as i32,
        zone: n.zone.clone(),
        last_heartbeat_ms,
        alive,
    }
}

pub fn drain_to_pb(drain: Option<DrainKind>) -> pb::NodeDrain {
    match drain {
        None => pb::NodeDrain::None,
        Some(DrainKind::Restart) => pb::NodeDrain::Restart,
        Some(DrainKind::Decommission) => pb::NodeDrain::Decommission,
    }
}

pub fn drain_from_pb(drain: i32) -> Result<Option<DrainKind>, MetaError> {
    match pb::NodeDrain::try_from(drain) {
        Ok(pb::NodeDrain::None) => Ok(None),
        Ok(pb::NodeDrain::Restart) => Ok(Some(DrainKind::Restart)),
        Ok(pb::NodeDrain::Decommission) => Ok(Some(DrainKind::Decommission)),
        Err(_) => Err(MetaError::InvalidArgument(format!("unknown drain {drain}"))),
    }
}

pub fn spec_from_pb(spec: Option<pb::CollectionSpec>) -> Option<SpecRecord> {
    spec.map(|s| SpecRecord {
        dimension: s.dimension,
        embedder: extras_to_record(
            &s.embedder,
            s.embedder_identity.as_ref(),
            s.index.as_ref().and_then(|i| i.recall_target),
        ),
        index: s.index.map(|i| IndexParamsRecord {
            nlist: i.nlist,
            m: i.m,
            nbits: i.nbits,
            nprobe: i.nprobe,
        }),
        seal_threshold: s.seal_threshold,
    })
}

/// The spec's fields added after its record's encoding was fixed. The state machine's encoding (bincode) has no
/// room for a new field in an old record, so they are kept as JSON in the `embedder` string that used to hold
/// the model's id alone (as chunking and thresholds are kept as JSON): the embedder's whole identity, and the
/// index's recall target. A record of the id alone still reads, and a spec with neither is still written so.
#[derive(serde::Serialize, serde::Deserialize)]
struct SpecExtras {
    model: String,
    #[serde(flatten)]
    identity: Option<IdentityJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    recall_target: Option<f64>,
}

/// An embedder's identity beside its model's id.
#[derive(serde::Serialize, serde::Deserialize)]
struct IdentityJson {
    checksum: String,
    dimension: u32,
    pooling: String,
    query_prefix: String,
}

fn extras_to_record(
    model: &str,
    identity: Option<&pb::EmbedderIdentity>,
    recall_target: Option<f64>,
) -> String {
    let identity = identity.filter(|i| !i.model.is_empty());
    if identity.is_none() && recall_target.is_none() {
        return model.to_string();
    }
    serde_json::to_string(&SpecExtras {
        model: identity.map_or(model, |i| &i.model).to_string(),
        identity: identity.map(|i| IdentityJson {
            checksum: i.checksum.clone(),
            dimension: i.dimension,
            pooling: i.pooling.clone(),
            query_prefix: i.query_prefix.clone(),
        }),
        recall_target,
    })
    .expect("strings and numbers serialise")
}

/// The recorded model's id, its whole identity for a record written with one, and the index's recall target.
fn extras_from_record(recorded: &str) -> (String, Option<pb::EmbedderIdentity>, Option<f64>) {
    match serde_json::from_str::<SpecExtras>(recorded) {
        Ok(e) => (
            e.model.clone(),
            e.identity.map(|i| pb::EmbedderIdentity {
                model: e.model,
                checksum: i.checksum,
                dimension: i.dimension,
                pooling: i.pooling,
                query_prefix: i.query_prefix,
            }),
            e.recall_target,
        ),
        Err(_) => (recorded.to_string(), None, None),
    }
}

pub fn spec_to_pb(spec: &Option<SpecRecord>) -> Option<pb::CollectionSpec> {
    spec.as_ref().map(|s| {
        let (embedder, embedder_identity, recall_target) = extras_from_record(&s.embedder);
        pb::CollectionSpec {
            dimension: s.dimension,
            index: s.index.as_ref().map(|i| pb::IndexParams {
                nlist: i.nlist,
                m: i.m,
                nbits: i.nbits,
                nprobe: i.nprobe,
                recall_target,
            }),
            seal_threshold: s.seal_threshold,
            embedder,
            embedder_identity,
        }
    })
}

pub fn collection_def_from_pb(r: pb::MetaCreateCollectionRequest) -> CollectionDef {
    CollectionDef {
        name: r.name,
        shards: r.shards,
        replication: r.replication,
        spec: spec_from_pb(r.spec),
        chunking_json: r.chunking_json,
        thresholds_json: r.thresholds_json,
    }
}

/// A requested placement (replica states are ignored: a created replica starts ACTIVE).
pub fn placement_from_pb(p: &[pb::ShardPlacement]) -> Vec<ShardReplicas> {
    p.iter()
        .map(|s| ShardReplicas::active(s.shard, s.replicas.iter().map(|r| r.node_id)))
        .collect()
}

fn replica_state_to_pb(s: ReplicaState) -> pb::ReplicaState {
    match s {
        ReplicaState::Active => pb::ReplicaState::Active,
        ReplicaState::Joining => pb::ReplicaState::Joining,
        ReplicaState::Leaving => pb::ReplicaState::Leaving,
    }
}

pub fn collection_to_pb(c: &CollectionRecord) -> pb::CollectionMeta {
    pb::CollectionMeta {
        name: c.name.clone(),
        shards: c.shards,
        replication: c.replication,
        spec: spec_to_pb(&c.spec),
        placement: c
            .placement
            .iter()
            .map(|s| pb::ShardPlacement {
                shard: s.shard,
                replicas: s
                    .replicas
                    .iter()
                    .map(|r| pb::ReplicaPlacement {
                        node_id: r.node_id,
                        state: replica_state_to_pb(r.state) as i32,
                    })
                    .collect(),
            })
            .collect(),
        chunking_json: c.chunking_json.clone(),
        thresholds_json: c.thresholds_json.clone(),
        created_ms: c.created_ms,
    }
}

pub fn key_from_pb(k: pb::ApiKeyInfo) -> ApiKeyRecord {
    ApiKeyRecord {
        key_sha256: k.key_sha256.to_ascii_lowercase(),
        id: k.id,
        scopes: k.scopes,
        tenants: k.tenants,
        collections: k.collections,
        expires_at_ms: k.expires_at_ms,
        created_ms: k.created_ms,
        revoked: k.revoked,
        parent_id: k.parent_id,
    }
}

pub fn key_to_pb(k: &ApiKeyRecord) -> pb::ApiKeyInfo {
    pb::ApiKeyInfo {
        key_sha256: k.key_sha256.clone(),
        id: k.id.clone(),
        scopes: k.scopes.clone(),
        tenants: k.tenants.clone(),
        collections: k.collections.clone(),
        expires_at_ms: k.expires_at_ms,
        created_ms: k.created_ms,
        revoked: k.revoked,
        parent_id: k.parent_id.clone(),
    }
}

pub fn manifest_to_pb(m: &ManifestRecord) -> pb::SegmentManifest {
    pb::SegmentManifest {
        collection: m.collection.clone(),
        shard: m.shard,
        node_id: m.node_id,
        segments: m.segments.clone(),
        live_documents: m.live_documents,
    }
}

pub fn move_to_pb(m: &Move) -> pb::ReplicaMove {
    pb::ReplicaMove {
        collection: m.collection.clone(),
        shard: m.shard,
        from_node: m.from_node,
        to_node: m.to_node,
    }
}

pub fn voters_to_pb(state: &StateMachine) -> Vec<pb::MetaPeer> {
    state
        .voters
        .iter()
        .map(|(id, address)| pb::MetaPeer {
            id: *id,
            address: address.clone(),
        })
        .collect()
}

/// Every collection alias, by name (`crate::aliases`).
pub fn aliases_to_pb(state: &StateMachine) -> Vec<pb::CollectionAlias> {
    state
        .aliases
        .iter()
        .map(|(name, collection)| pb::CollectionAlias {
            name: name.clone(),
            collection: collection.clone(),
        })
        .collect()
}

/// Every data-plane node, with its drain and what `liveness(id)` tells of it (last heartbeat ms, alive).
pub fn cluster_state_nodes(
    state: &StateMachine,
    liveness: &impl Fn(u64) -> (u64, bool),
) -> Vec<pb::NodeInfo> {
    state
        .nodes
        .values()
        .map(|n| {
            let (hb, alive) = liveness(n.id);
            node_to_pb(n, state.draining.get(&n.id).copied(), hb, alive)
        })
        .collect()
}

/// The cluster state as routers and shard nodes read it. `liveness(id)` gives (last heartbeat ms, alive).
pub fn cluster_state_to_pb(
    state: &StateMachine,
    version: u64,
    leader_id: u64,
    liveness: impl Fn(u64) -> (u64, bool),
) -> pb::ClusterState {
    pb::ClusterState {
        version,
        nodes: cluster_state_nodes(state, &liveness),
        collections: state.collections.values().map(collection_to_pb).collect(),
        api_keys: state.api_keys.values().map(key_to_pb).collect(),
        manifests: state.manifests.values().map(manifest_to_pb).collect(),
        meta_voters: voters_to_pb(state),
        leader_id,
        aliases: aliases_to_pb(state),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(embedder: &str, identity: Option<pb::EmbedderIdentity>) -> pb::CollectionSpec {
        pb::CollectionSpec {
            dimension: 384,
            embedder: embedder.into(),
            embedder_identity: identity,
            ..Default::default()
        }
    }

    #[test]
    fn an_identity_survives_the_record_and_a_bare_model_id_still_reads() {
        let identity = pb::EmbedderIdentity {
            model: "bge-small-en-v1.5".into(),
            checksum: "ab".repeat(32),
            dimension: 384,
            pooling: "cls".into(),
            query_prefix: "Represent: ".into(),
        };
        let with = spec("bge-small-en-v1.5", Some(identity.clone()));
        let record = spec_from_pb(Some(with.clone()));
        assert!(record.as_ref().unwrap().embedder.starts_with('{'));
        assert_eq!(spec_to_pb(&record), Some(with));

        // A record written before identities: the model's id alone.
        let old = Some(SpecRecord {
            dimension: 384,
            embedder: "all-minilm-l6-v2".into(),
            ..Default::default()
        });
        assert_eq!(spec_to_pb(&old), Some(spec("all-minilm-l6-v2", None)));
        assert_eq!(spec_from_pb(spec_to_pb(&old)), old);
    }

    #[test]
    fn a_recall_target_survives_the_record_with_an_identity_or_without() {
        let index = |recall_target| pb::IndexParams {
            nlist: 1024,
            m: 96,
            nbits: 8,
            nprobe: 32,
            recall_target,
        };
        let identity = pb::EmbedderIdentity {
            model: "bge-small-en-v1.5".into(),
            checksum: "cd".repeat(32),
            dimension: 384,
            pooling: "cls".into(),
            query_prefix: String::new(),
        };
        for (model, identity) in [("bge-small-en-v1.5", Some(identity)), ("", None)] {
            for target in [Some(0.95), None] {
                let asked = pb::CollectionSpec {
                    index: Some(index(target)),
                    ..spec(model, identity.clone())
                };
                assert_eq!(spec_to_pb(&spec_from_pb(Some(asked.clone()))), Some(asked));
            }
        }
        // A record written before targets (an identity's JSON without one) reads as no target.
        let before = serde_json::json!({
            "model": "m", "checksum": "ab", "dimension": 384, "pooling": "mean", "query_prefix": ""
        });
        let (model, identity, target) = extras_from_record(&before.to_string());
        assert_eq!(
            (model.as_str(), identity.unwrap().pooling.as_str(), target),
            ("m", "mean", None)
        );
    }

    #[test]
    fn the_cluster_state_lists_the_aliases_by_name() {
        let mut state = StateMachine::default();
        state.aliases.insert("wiki".into(), "wiki~b2".into());
        state.aliases.insert("docs".into(), "docs~r1".into());
        let alias = |name: &str, collection: &str| pb::CollectionAlias {
            name: name.into(),
            collection: collection.into(),
        };
        let cs = cluster_state_to_pb(&state, 3, 1, |_| (0, true));
        assert_eq!(
            cs.aliases,
            vec![alias("docs", "docs~r1"), alias("wiki", "wiki~b2")]
        );
    }
}
