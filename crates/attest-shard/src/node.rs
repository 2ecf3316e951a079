//! `ShardNode`: the shard replicas hosted by one node, each a `ShardEngine` in
//! `<data_dir>/collections/<collection>/shard-<n>/` next to the `engine.json` it was created with.
//!
//! A snapshot restore stages a replica's files, verified, in `<data_dir>/restores/<collection>/shard-<n>/`
//! before the collection exists; creating that replica (`ensure`, from the router or the node's own reconcile)
//! then adopts the staged files instead of starting empty, so no write can reach an empty replica first.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use attest_core::disk::DiskConfig;
use attest_index::{EngineConfig, IndexError, ShardEngine};
use attest_telemetry::disk::DiskGuard;
use parking_lot::RwLock;
use serde_json;
use tracing::info;

const ENGINE_FILE: &str = "engine.json";
const RESTORES_DIR: &str = "restores";

#[derive(Debug, Clone)]
pub struct ShardNodeConfig {
    pub data_dir: PathBuf,
    /// Defaults for what a collection spec leaves unset (seal threshold, training sample, compaction).
    pub engine_defaults: EngineConfig,
}

pub struct ShardNode {
    config: ShardNodeConfig,
    replicas: RwLock<HashMap<(String, u32), Arc<ShardEngine>>>,
    /// What this node presents to its peers (set by the cluster agent): a snapshot first catches up from them.
    peer_credential: std::sync::OnceLock<attest_proto::ClusterCredential>,
    /// The snapshot uploads and restore downloads running here, for `TransferProgress`.
    pub(crate) transfers: crate::transfers::Transfers,
    /// The free-space reserve of the data directory (`disk` section): every write batch asks it first. Made
    /// at the first write when [`ShardNode::set_disk_reserve`] was not called (the default reserve).
    disk: RwLock<Option<Arc<DiskGuard>>>,
    /// The directories admitted as snapshot destinations (none until set).
    snapshot_destinations: std::sync::OnceLock<attest_snapshot::DestinationPolicy>,
}

/// Collection names (as meta stores them: a re-embedded collection's under a tagged name) become directory
/// names: the one rule of `attest_core::limits` keeps them to a safe alphabet and length.
pub fn valid_collection_name(name: &str) -> bool {
    attest_core::limits::stored_collection_name_problem(name).is_none()
}

fn check_collection_name(name: &str) -> Result<(), IndexError> {
    match attest_core::limits::stored_collection_name_problem(name) {
        Some(problem) => Err(IndexError::invalid("collection", problem)),
        None => Ok(()),
    }
}

impl ShardNode {
    /// Opens every replica found under the data directory (each recovers from its log).
    pub fn open(config: ShardNodeConfig) -> Result<Arc<Self>, IndexError> {
        attest_index::maintenance::set_max_concurrent(
            config.engine_defaults.max_concurrent_maintenance,
        );
        let root = config.data_dir.join("collections");
        std::fs::create_dir_all(&root)?;
        let mut replicas = HashMap::new();
        for coll in std::fs::read_dir(&root)? {
            let coll = coll?;
            let name = coll.file_name().to_string_lossy().into_owned();
            for shard_dir in std::fs::read_dir(coll.path())? {
                let shard_dir = shard_dir?;
                let dir_name = shard_dir.file_name().to_string_lossy().into_owned();
                let Some(n) = dir_name
                    .strip_prefix("shard-")
                    .and_then(|n| n.parse::<u32>().ok())
                else {
                    continue;
                };
                let Ok(bytes) = std::fs::read(shard_dir.path().join(ENGINE_FILE)) else {
                    continue;
                };
                let engine_config: EngineConfig = serde_json::from_slice(&bytes).map_err(|e| {
                    IndexError::corrupt(shard_dir.path().join(ENGINE_FILE), e.to_string())
                })?;
                let engine = ShardEngine::open(&shard_dir.path(), engine_config)?;
                info!(collection = %name, shard = n, event = "replica_opened", "replica opened");
                replicas.insert((name.clone(), n), engine);
            }
        }
        Ok(Arc::new(ShardNode {
            config,
            replicas: RwLock::new(replicas),
            peer_credential: std::sync::OnceLock::new(),
            transfers: Default::default(),
            disk: RwLock::new(None),
            snapshot_destinations: std::sync::OnceLock::new(),
        }))
    }

    /// Sets the free-space reserve of the data directory (the `disk` section; the default until called).
    pub fn set_disk_reserve(&self, disk: &DiskConfig) {
        *self.disk.write() = Some(DiskGuard::new(&self.config.data_dir, disk));
    }

    /// Before a write batch (upsert, delete, a replica created): the disk-full error while the data directory
    /// is below its reserve.
    pub fn check_disk(&self) -> Result<(), IndexError> {
        let guard =
            Arc::clone(self.disk.write().get_or_insert_with(|| {
                DiskGuard::new(&self.config.data_dir, &DiskConfig::default())
            }));
        Ok(guard.check_write()?)
    }

    /// Sets the credential this node presents to other shard nodes (once; later calls are ignored).
    pub fn set_peer_credential(&self, credential: attest_proto::ClusterCredential) {
        let _ = self.peer_credential.set(credential);
    }

    /// Sets which directories this node admits as snapshot destinations (once; later calls are ignored).
    /// Until then it admits none (`s3://` only).
    pub fn set_snapshot_destinations(&self, policy: attest_snapshot::DestinationPolicy) {
        let _ = self.snapshot_destinations.set(policy);
    }

    pub(crate) fn snapshot_destinations(&self) -> &attest_snapshot::DestinationPolicy {
        static NONE: std::sync::OnceLock<attest_snapshot::DestinationPolicy> =
            std::sync::OnceLock::new();
        self.snapshot_destinations
            .get()
            .unwrap_or_else(|| NONE.get_or_init(Default::default))
    }

    pub fn peer_credential(&self) -> Option<&attest_proto::ClusterCredential> {
        self.peer_credential.get()
    }

    pub fn data_dir(&self) -> &Path {
        &self.config.data_dir
    }

    pub fn defaults(&self) -> &EngineConfig {
        &self.config.engine_defaults
    }

    fn replica_dir(&self, collection: &str, shard: u32) -> PathBuf {
        self.config
            .data_dir
            .join("collections")
            .join(collection)
            .join(format!("shard-{shard}"))
    }

    /// Where a verified restore of the replica waits to be adopted.
    fn staged_dir(&self, collection: &str, shard: u32) -> PathBuf {
        self.config
            .data_dir
            .join(RESTORES_DIR)
            .join(collection)
            .join(format!("shard-{shard}"))
    }

    /// An empty directory to download a restore of the replica into (on the data directory's filesystem, so
    /// [`Self::commit_staged`] is a rename). Anything a cut-short download left there is removed.
    pub fn restore_download_dir(
        &self,
        collection: &str,
        shard: u32,
    ) -> Result<PathBuf, IndexError> {
        check_collection_name(collection)?;
        let dir = self
            .staged_dir(collection, shard)
            .with_extension("downloading");
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    /// Makes a complete, verified download the replica's staged restore (replacing an earlier one).
    pub fn commit_staged(
        &self,
        collection: &str,
        shard: u32,
        downloaded: &Path,
    ) -> Result<(), IndexError> {
        let staged = self.staged_dir(collection, shard);
        if staged.exists() {
            std::fs::remove_dir_all(&staged)?;
        }
        attest_index::fsutil::sync_tree(downloaded)?;
        std::fs::rename(downloaded, &staged)?;
        attest_index::fsutil::sync_parent_dir(&staged)?;
        info!(
            collection,
            shard,
            event = "restore_staged",
            "replica restore staged"
        );
        Ok(())
    }

    /// Drops a staged restore (a restore that failed elsewhere). Returns whether one was there.
    pub fn discard_staged(&self, collection: &str, shard: u32) -> Result<bool, IndexError> {
        let mut found = false;
        let staged = self.staged_dir(collection, shard);
        for dir in [staged.with_extension("downloading"), staged] {
            if dir.exists() {
                std::fs::remove_dir_all(&dir)?;
                found = true;
            }
        }
        Ok(found)
    }

    /// Every replica hosted here, as ((collection, shard), engine).
    pub fn replicas(&self) -> Vec<((String, u32), Arc<ShardEngine>)> {
        self.replicas
            .read()
            .iter()
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect()
    }

    pub fn get(&self, collection: &str, shard: u32) -> Option<Arc<ShardEngine>> {
        self.replicas
            .read()
            .get(&(collection.to_string(), shard))
            .cloned()
    }

    /// Creates the replica if missing — from its staged restore when there is one, which also replaces a replica
    /// already here (the restore was staged for the collection being created now). Returns whether it was created.
    pub fn ensure(
        &self,
        collection: &str,
        shard: u32,
        engine_config: EngineConfig,
    ) -> Result<bool, IndexError> {
        check_collection_name(collection)?;
        let mut replicas = self.replicas.write();
        let staged = self.staged_dir(collection, shard);
        let restoring = staged.join(attest_index::snapshot::SNAPSHOT_FILE).exists();
        let key = (collection.to_string(), shard);
        if replicas.contains_key(&key) && !restoring {
            return Ok(false);
        }
        let dir = self.replica_dir(collection, shard);
        if restoring {
            // Searches still holding the old engine keep its open files; the directory goes away with it.
            replicas.remove(&key);
            if dir.exists() {
                std::fs::remove_dir_all(&dir)?;
            }
            std::fs::create_dir_all(dir.parent().unwrap_or(&dir))?;
            std::fs::rename(&staged, &dir)?;
            info!(
                collection,
                shard,
                event = "restore_adopted",
                "replica created from its staged restore"
            );
        }
        std::fs::create_dir_all(&dir)?;
        let bytes = serde_json::to_vec_pretty(&engine_config)
            .map_err(|e| IndexError::Serialization(e.to_string()))?;
        let engine = ShardEngine::open(&dir, engine_config)?;
        // Written last: a replica directory without it is ignored at start-up (creation never finished).
        std::fs::write(dir.join(ENGINE_FILE), bytes)?;
        replicas.insert((collection.to_string(), shard), engine);
        Ok(true)
    }

    /// Drops the replica only if it is still `seen`, the engine a reconcile pass decided to drop from the shard
    /// map it read. The map may have moved on since: a snapshot restore can drop the collection and create it
    /// again, adopting its staged files, between the pass's read and this call; that new replica stays. The
    /// directory goes under the same lock as the check, so an adoption cannot land in between. `seen` is weak:
    /// holding the engine would keep its files locked against that adoption.
    pub fn drop_shard_if_same(
        &self,
        collection: &str,
        shard: u32,
        seen: &std::sync::Weak<ShardEngine>,
    ) -> Result<bool, IndexError> {
        let mut replicas = self.replicas.write();
        let key = (collection.to_string(), shard);
        let same = replicas
            .get(&key)
            .is_some_and(|now| std::sync::Weak::ptr_eq(&Arc::downgrade(now), seen));
        if !same {
            return Ok(false);
        }
        drop(replicas.remove(&key));
        let dir = self.replica_dir(collection, shard);
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        Ok(true)
    }

    pub fn drop_shard(&self, collection: &str, shard: u32) -> Result<bool, IndexError> {
        let removed = self
            .replicas
            .write()
            .remove(&(collection.to_string(), shard));
        let dir = self.replica_dir(collection, shard);
        if removed.is_some() || dir.exists() {
            drop(removed);
            std::fs::remove_dir_all(&dir)?;
            return Ok(true);
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_created_again_after_a_pass_decided_to_drop_it_stays() {
        let dir = tempfile::tempdir().unwrap();
        let node = ShardNode::open(ShardNodeConfig {
            data_dir: dir.path().to_path_buf(),
            engine_defaults: EngineConfig::default(),
        })
        .unwrap();
        node.ensure("c", 0, EngineConfig::default()).unwrap();
        let seen = Arc::downgrade(&node.get("c", 0).unwrap());
        // Between the pass's read and its drop, the collection is dropped and created again.
        node.drop_shard("c", 0).unwrap();
        node.ensure("c", 0, EngineConfig::default()).unwrap();
        assert!(!node.drop_shard_if_same("c", 0, &seen).unwrap());
        let now = Arc::downgrade(&node.get("c", 0).expect("the new replica stays"));
        assert!(node.replica_dir("c", 0).exists());
        assert!(node.drop_shard_if_same("c", 0, &now).unwrap());
        assert!(node.get("c", 0).is_none());
        assert!(!node.replica_dir("c", 0).exists());
    }
}
