//! The collection catalog of a single-process deployment (`attest dev`): names, shard counts, index parameters
//! and which shard node holds which shard, kept in `<data_dir>/catalog.json` (replaced atomically). In a
//! cluster the meta role's Raft state plays this part.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};

use crate::error::RouterError;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
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
    /// `placement[shard]` = the replicas of that shard (node ids: the shard node's index in a single-process
    /// deployment, meta's node id in a cluster).
    #[serde(deserialize_with = "placement_any_form")]
    pub placement: Vec<Vec<ReplicaRef>>,
}

/// The role of one replica in its shard's replica set (as meta's shard map says; always `Active` in a
/// single-process deployment).
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

/// Catalogs written before replica sets stored one node index per shard: read both forms.
fn placement_any_form<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Vec<Vec<ReplicaRef>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Entry {
        Node(u64),
        Replicas(Vec<ReplicaRef>),
    }
    let entries = Vec::<Entry>::deserialize(d)?;
    Ok(entries
        .into_iter()
        .map(|e| match e {
            Entry::Node(node) => vec![ReplicaRef {
                node,
                role: ReplicaRole::Active,
            }],
            Entry::Replicas(r) => r,
        })
        .collect())
}

pub struct Catalog {
    path: PathBuf,
    collections: RwLock<BTreeMap<String, CollectionRecord>>,
}

impl Catalog {
    pub fn open(data_dir: &Path) -> Result<Self, RouterError> {
        std::fs::create_dir_all(data_dir).map_err(|e| RouterError::Internal(e.to_string()))?;
        let path = data_dir.join("catalog.json");
        let collections = match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b)
                .map_err(|e| RouterError::Internal(format!("{}: {e}", path.display())))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(RouterError::Internal(e.to_string())),
        };
        Ok(Catalog {
            path,
            collections: RwLock::new(collections),
        })
    }

    fn persist(&self, map: &BTreeMap<String, CollectionRecord>) -> Result<(), RouterError> {
        let io = |e: std::io::Error| RouterError::Internal(format!("catalog: {e}"));
        let tmp = self.path.with_extension("tmp");
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        f.write_all(&serde_json::to_vec_pretty(map).expect("serialisable"))
            .map_err(io)?;
        f.sync_all().map_err(io)?;
        std::fs::rename(&tmp, &self.path).map_err(io)?;
        Ok(())
    }

    pub fn get(&self, name: &str) -> Result<CollectionRecord, RouterError> {
        self.collections
            .read()
            .get(name)
            .cloned()
            .ok_or_else(|| RouterError::NotFound(format!("collection `{name}` does not exist")))
    }

    pub fn list(&self) -> Vec<CollectionRecord> {
        self.collections.read().values().cloned().collect()
    }

    pub fn insert(&self, record: CollectionRecord) -> Result<(), RouterError> {
        let mut map = self.collections.write();
        if map.contains_key(&record.name) {
            return Err(RouterError::AlreadyExists(format!(
                "collection `{}` already exists",
                record.name
            )));
        }
        map.insert(record.name.clone(), record);
        self.persist(&map)
    }

    pub fn remove(&self, name: &str) -> Result<CollectionRecord, RouterError> {
        let mut map = self.collections.write();
        let rec = map
            .remove(name)
            .ok_or_else(|| RouterError::NotFound(format!("collection `{name}` does not exist")))?;
        self.persist(&map)?;
        Ok(rec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogs_of_the_single_replica_form_still_load() {
        let old = r#"{"name":"c","shards":2,"replication":1,"dimension":4,
            "index":{"nlist":8,"m":2,"nbits":8,"nprobe":4},"seal_threshold":10,"embedder":"e","placement":[0,1]}"#;
        let rec: CollectionRecord = serde_json::from_str(old).unwrap();
        assert_eq!(
            rec.placement[1],
            vec![ReplicaRef {
                node: 1,
                role: ReplicaRole::Active
            }]
        );
        let again: CollectionRecord =
            serde_json::from_str(&serde_json::to_string(&rec).unwrap()).unwrap();
        assert_eq!(again, rec);
    }
}
