//! Applying a [`pb::ClusterStateDelta`] to the cluster state it was made against, giving the state meta would
//! have sent whole: the same records in the same order (collections by name, keys by hash, manifests by
//! collection, shard and node, as meta keeps them).

use std::collections::BTreeMap;

use crate::v1 as pb;

/// Why a delta cannot be applied to a held state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a delta from version {delta} does not apply to the state at version {held}")]
pub struct DeltaMismatch {
    pub held: u64,
    pub delta: u64,
}

fn manifest_key(m: &pb::SegmentManifest) -> (String, u32, u64) {
    (m.collection.clone(), m.shard, m.node_id)
}

/// Puts `changed` into the records keyed by `key`, removes `removed`, and returns them in key order.
fn merge<K: Ord, V>(
    held: Vec<V>,
    changed: Vec<V>,
    removed: impl IntoIterator<Item = K>,
    key: impl Fn(&V) -> K,
) -> Vec<V> {
    let mut records: BTreeMap<K, V> = held.into_iter().map(|v| (key(&v), v)).collect();
    for gone in removed {
        records.remove(&gone);
    }
    for v in changed {
        records.insert(key(&v), v);
    }
    records.into_values().collect()
}

/// `held` moved forward by `delta` (which must have been made against `held`'s version).
pub fn apply_delta(
    held: pb::ClusterState,
    delta: pb::ClusterStateDelta,
) -> Result<pb::ClusterState, DeltaMismatch> {
    if delta.since_version != held.version {
        return Err(DeltaMismatch {
            held: held.version,
            delta: delta.since_version,
        });
    }
    Ok(pb::ClusterState {
        version: delta.version,
        nodes: delta.nodes,
        meta_voters: delta.meta_voters,
        leader_id: delta.leader_id,
        collections: merge(
            held.collections,
            delta.collections,
            delta.removed_collections,
            |c| c.name.clone(),
        ),
        api_keys: merge(held.api_keys, delta.api_keys, delta.removed_api_keys, |k| {
            k.key_sha256.clone()
        }),
        manifests: merge(
            held.manifests,
            delta.manifests,
            delta.removed_manifests.iter().map(manifest_key),
            manifest_key,
        ),
        // Every delta carries the aliases whole.
        aliases: delta.aliases,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collection(name: &str, shards: u32) -> pb::CollectionMeta {
        pb::CollectionMeta {
            name: name.into(),
            shards,
            ..Default::default()
        }
    }

    fn manifest(collection: &str, shard: u32, node_id: u64) -> pb::SegmentManifest {
        pb::SegmentManifest {
            collection: collection.into(),
            shard,
            node_id,
            segments: vec![format!("seg-{node_id}")],
            ..Default::default()
        }
    }

    #[test]
    fn a_delta_puts_removes_and_keeps_meta_order() {
        let held = pb::ClusterState {
            version: 7,
            collections: vec![collection("a", 1), collection("c", 1), collection("d", 1)],
            manifests: vec![manifest("a", 0, 1), manifest("c", 0, 2)],
            api_keys: vec![pb::ApiKeyInfo {
                key_sha256: "aa".into(),
                ..Default::default()
            }],
            leader_id: 1,
            ..Default::default()
        };
        let delta = pb::ClusterStateDelta {
            since_version: 7,
            version: 9,
            leader_id: 2,
            nodes: vec![pb::NodeInfo {
                id: 4,
                ..Default::default()
            }],
            collections: vec![collection("b", 2), collection("c", 3)],
            removed_collections: vec!["d".into()],
            removed_api_keys: vec!["aa".into()],
            removed_manifests: vec![pb::SegmentManifest {
                collection: "c".into(),
                shard: 0,
                node_id: 2,
                ..Default::default()
            }],
            manifests: vec![manifest("b", 1, 3)],
            ..Default::default()
        };
        let now = apply_delta(held, delta).unwrap();
        assert_eq!(now.version, 9);
        assert_eq!(now.leader_id, 2);
        assert_eq!(now.nodes.len(), 1, "nodes come whole");
        let names: Vec<(&str, u32)> = now
            .collections
            .iter()
            .map(|c| (c.name.as_str(), c.shards))
            .collect();
        assert_eq!(names, vec![("a", 1), ("b", 2), ("c", 3)]);
        assert!(now.api_keys.is_empty());
        let manifests: Vec<_> = now.manifests.iter().map(manifest_key).collect();
        assert_eq!(
            manifests,
            vec![("a".to_string(), 0, 1), ("b".to_string(), 1, 3)]
        );
    }

    #[test]
    fn a_delta_made_against_another_version_is_refused() {
        let held = pb::ClusterState {
            version: 7,
            ..Default::default()
        };
        let delta = pb::ClusterStateDelta {
            since_version: 6,
            version: 9,
            ..Default::default()
        };
        assert_eq!(
            apply_delta(held, delta),
            Err(DeltaMismatch { held: 7, delta: 6 })
        );
    }
}
