//! Deleting from a destination — `DELETE /v1/snapshots/{id}`, retention (`keep`) and a cancelled create —
//! removes only what Attest wrote there: the files a snapshot's manifest names (the manifest itself, the meta
//! state, each replica's `SNAPSHOT.json` and, in format 1, the files it lists under the replica's prefix), then
//! the blobs no snapshot names any more (`blobs.rs`). A folder is deleted from only when it is a snapshot: its
//! `attest-snapshot.json` parses as the manifest of that id. A plain folder, a symbolic link, or a manifest that
//! does not parse is refused with nothing deleted, and anything else inside a snapshot's folder stays.
//!
//! Which destinations may be touched at all is the node's configuration (`attest_snapshot::DestinationPolicy`,
//! checked where the store is opened): a request cannot point a delete at a node's data directory.

use attest_proto::{ApiError, ErrorCode};
use attest_snapshot::{SnapshotStore, BLOBS};
use tracing::{info, warn};

use super::manifest::{read_unverified, ChecksumProblem};
use super::{
    from_store, id_problem, open_store, ClusterManifest, ReplicaManifest, CLUSTER_MANIFEST,
    META_STATE, REPLICA_MANIFEST,
};
use crate::error::RouterError;
use crate::snapshots::Snapshots;

/// One '/'-separated relative name of `[A-Za-z0-9._-]` segments, none `.` or `..`.
fn safe_relative(path: &str) -> bool {
    !path.is_empty()
        && path.split('/').all(|part| {
            !part.is_empty()
                && part != "."
                && part != ".."
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        })
}

/// A replica prefix a manifest of snapshot `id` may name for deletion: inside the snapshot's own folder.
fn owned_prefix(id: &str, prefix: &str) -> bool {
    safe_relative(prefix)
        && prefix
            .strip_prefix(id)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The keys snapshot `manifest` names under its folder, its manifest first (a half-deleted snapshot is then never
/// listed as complete). Format 1 replicas' files are listed by their `SNAPSHOT.json`, read here.
async fn named_keys(
    store: &SnapshotStore,
    manifest: &ClusterManifest,
) -> Result<Vec<String>, RouterError> {
    let id = &manifest.id;
    let mut keys = vec![
        format!("{id}/{CLUSTER_MANIFEST}"),
        format!("{id}/{META_STATE}"),
    ];
    for r in manifest.collections.iter().flat_map(|c| &c.replicas) {
        if !owned_prefix(id, &r.prefix) {
            warn!(snapshot = %id, prefix = %r.prefix, event = "snapshot_prefix_foreign",
                "a replica prefix outside the snapshot's folder is left alone");
            continue;
        }
        let replica_manifest = format!("{}/{REPLICA_MANIFEST}", r.prefix);
        if manifest.blobs.is_empty() {
            let bytes = store
                .get_bytes(&replica_manifest)
                .await
                .map_err(|e| from_store("from", e))?;
            if let Some(m) = bytes.and_then(|b| serde_json::from_slice::<ReplicaManifest>(&b).ok())
            {
                keys.extend(
                    m.files
                        .iter()
                        .filter(|f| safe_relative(&f.path))
                        .map(|f| format!("{}/{}", r.prefix, f.path)),
                );
            }
        }
        keys.push(replica_manifest);
    }
    Ok(keys)
}

/// Deletes the files snapshot `manifest` names; returns how many keys were named.
async fn delete_named(
    store: &SnapshotStore,
    manifest: &ClusterManifest,
) -> Result<usize, RouterError> {
    let keys = named_keys(store, manifest).await?;
    for key in &keys {
        store.delete(key).await.map_err(|e| from_store("from", e))?;
    }
    Ok(keys.len())
}

/// What a cancelled create of snapshot `id` had uploaded under it: each planned replica's `SNAPSHOT.json`
/// (its files are blobs, collected later) and the meta state, should it be there.
pub(super) async fn delete_uploaded(
    store: &SnapshotStore,
    id: &str,
    prefixes: &[String],
) -> Result<(), RouterError> {
    let keys = prefixes
        .iter()
        .map(|p| format!("{p}/{REPLICA_MANIFEST}"))
        .chain([
            format!("{id}/{CLUSTER_MANIFEST}"),
            format!("{id}/{META_STATE}"),
        ]);
    for key in keys {
        store
            .delete(&key)
            .await
            .map_err(|e| from_store("from", e))?;
    }
    Ok(())
}

impl Snapshots {
    /// Deletes snapshot `id` from `source`: what its manifest names, then the blobs no snapshot names. Refused
    /// (nothing deleted) unless `id` is a snapshot's folder.
    pub async fn delete(&self, source: &str, id: &str) -> Result<(), RouterError> {
        if let Some(problem) = id_problem(id) {
            return Err(RouterError::invalid("id", problem));
        }
        let store = open_store(&self.destinations, source, "from")?;
        if let Some(problem) = store.entry_problem(id) {
            return Err(RouterError::invalid(
                "id",
                format!("{problem}; nothing deleted"),
            ));
        }
        let manifest = match read_unverified(&store, id).await {
            Ok(m) => m,
            Err(RouterError::NotFound(_)) => {
                let folder = store
                    .list_dirs("")
                    .await
                    .map_err(|e| from_store("from", e))?
                    .iter()
                    .any(|d| d == id);
                let why = if folder {
                    format!(": `{id}` has no {CLUSTER_MANIFEST}, so it is not a snapshot; nothing deleted")
                } else {
                    String::new()
                };
                return Err(RouterError::NotFound(format!(
                    "no snapshot `{id}` in {source}{why}"
                )));
            }
            Err(e) => {
                return Err(RouterError::Callee(ApiError::new(
                    ErrorCode::FailedPrecondition,
                    format!(
                        "`{id}` in {source} is not deleted: its manifest cannot be read as a snapshot's ({e}); \
                         nothing deleted"
                    ),
                )))
            }
        };
        let named = delete_named(&store, &manifest).await?;
        info!(snapshot = %id, keys = named, event = "snapshot_deleted", "snapshot deleted");
        self.collect_blobs(&store, source, None).await
    }

    /// Deletes the oldest complete snapshots of `store` beyond the newest `keep` (by creation time): what each
    /// one's manifest names. Folders that are not snapshots, and symbolic links, are left alone.
    pub(super) async fn prune_snapshots(
        &self,
        store: &SnapshotStore,
        location: &str,
        keep: usize,
        job: &str,
    ) -> Result<(), RouterError> {
        let mut complete: Vec<ClusterManifest> = Vec::new();
        for id in store
            .list_dirs("")
            .await
            .map_err(|e| from_store("destination", e))?
        {
            if id == BLOBS || id_problem(&id).is_some() || store.entry_problem(&id).is_some() {
                continue;
            }
            // Snapshots from before manifests were checksummed age out as they always did (restore refuses
            // them anyway); one whose checksum does not match is kept for someone to look at, its dates untrusted.
            if let Ok(m) = read_unverified(store, &id).await {
                if matches!(m.verify_checksum(), Ok(()) | Err(ChecksumProblem::Missing)) {
                    complete.push(m);
                }
            }
        }
        complete.sort_by_key(|m| std::cmp::Reverse((m.created_ms, m.id.clone())));
        for old in complete.iter().skip(keep) {
            delete_named(store, old).await?;
            info!(snapshot = %old.id, keep, event = "snapshot_pruned", "snapshot deleted by retention");
        }
        if complete.len() > keep {
            self.collect_blobs(store, location, Some(job)).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshots::{CollectionSnapshot, ReplicaSnapshot, CLUSTER_SNAPSHOT_FORMAT};

    #[test]
    fn only_prefixes_inside_the_snapshot_folder_are_its_own() {
        assert!(owned_prefix("s1", "s1/docs/shard-0"));
        for foreign in [
            "s10/docs/shard-0",
            "s1",
            "other/docs",
            "s1/../data",
            "s1/./x",
            "/s1/x",
            "s1//x",
            "",
        ] {
            assert!(!owned_prefix("s1", foreign), "{foreign:?}");
        }
    }

    fn replica(prefix: &str) -> ReplicaSnapshot {
        ReplicaSnapshot {
            shard: 0,
            node_id: 1,
            prefix: prefix.to_string(),
            manifest_sha256: String::new(),
            last_seq: 0,
            live_documents: 0,
            bytes: 0,
            skipped_bytes: 0,
        }
    }

    /// A manifest (edited, say) naming another folder or `..` files deletes none of them: only what is inside the
    /// snapshot's folder, and nothing unnamed there.
    #[tokio::test]
    async fn deletion_keeps_to_what_the_manifest_names_inside_its_folder() {
        let dir = tempfile::tempdir().unwrap();
        let store = SnapshotStore::open(dir.path().to_str().unwrap()).unwrap();
        for key in [
            "s1/attest-snapshot.json",
            "s1/meta-state.pb",
            "s1/docs/shard-0/SNAPSHOT.json",
            "s1/docs/shard-0/segments/a",
            "s1/notes.txt",
            "other/docs/shard-0/SNAPSHOT.json",
        ] {
            store.put_bytes(key, b"x".to_vec()).await.unwrap();
        }
        let files = r#"{"last_seq":0,"live_documents":0,"files":[
            {"path":"segments/a","bytes":1,"sha256":""},{"path":"../../other/x","bytes":1,"sha256":""}]}"#;
        store
            .put_bytes("s1/docs/shard-0/SNAPSHOT.json", files.as_bytes().to_vec())
            .await
            .unwrap();
        let manifest = ClusterManifest {
            format: CLUSTER_SNAPSHOT_FORMAT,
            id: "s1".into(),
            created_ms: 0,
            meta_version: 0,
            meta_state_sha256: String::new(),
            collections: vec![CollectionSnapshot {
                name: "docs".into(),
                shards: 2,
                replication: 1,
                replicas: vec![replica("s1/docs/shard-0"), replica("other/docs/shard-0")],
            }],
            blobs: String::new(),
            checksum: String::new(),
        };
        delete_named(&store, &manifest).await.unwrap();
        let mut left = Vec::new();
        for top in ["other", "s1"] {
            left.extend(
                store
                    .list_objects(top)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|(k, _)| k),
            );
        }
        assert_eq!(left, ["other/docs/shard-0/SNAPSHOT.json", "s1/notes.txt"]);
    }
}
