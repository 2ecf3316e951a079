//! The shard side of cluster snapshots: `SnapshotShard` (snapshot one replica while it serves, upload it to
//! the destination) and `StageRestore` / `DiscardRestore` (download a replica's snapshot, checking every file,
//! into the node's staging area, where creating the replica adopts it — see [`crate::node`]).
//!
//! The local snapshot is taken in `<data_dir>/snapshots/` (hard links need the same filesystem) and removed
//! once uploaded. Content-addressed (the request names `blobs`, cluster snapshot format 2): each file goes to
//! the blob of its sha256, and a blob the destination already holds — an earlier snapshot's, or an interrupted
//! run's — is not sent again (its bytes are reported as skipped). Otherwise (format 1) the files go under the
//! snapshot's prefix, and a re-run skips those whose names are content-unique (RocksDB table files, sealed
//! segment files). Both directions report their bytes to [`crate::transfers`] as they go. A directory
//! destination must be one this node admits (`snapshots.allowed_roots`: [`ShardNode::set_snapshot_destinations`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use attest_index::snapshot::{ShardSnapshot, SNAPSHOT_FILE};
use attest_index::ShardEngine;
use attest_proto::v1 as pb;
use attest_proto::{ApiError, ErrorCode};
use attest_snapshot::{blob_key, StoreError};
use sha2::{Digest, Sha256};
use tonic::Status;
use tracing::info;

use crate::catchup::{catch_up_from, PeerCursor};
use crate::node::ShardNode;
use crate::service::blocking;
use crate::status::{invalid, to_status};

const LOCAL_SNAPSHOTS_DIR: &str = "snapshots";

/// A destination error as a gRPC status: the message names the file (key) it concerns.
pub fn store_status(e: StoreError) -> Status {
    let code = match e {
        StoreError::BadLocation(_) => ErrorCode::InvalidArgument,
        StoreError::Missing { .. } => ErrorCode::NotFound,
        StoreError::Mismatch { .. } => ErrorCode::FailedPrecondition,
        StoreError::Io { .. } | StoreError::Store { .. } => ErrorCode::Unavailable,
    };
    ApiError::new(code, e.to_string()).to_status()
}

/// A key prefix the router chose: '/'-separated relative names of `[A-Za-z0-9._-]`, none `.` or `..`.
fn check_prefix(prefix: &str) -> Result<(), Status> {
    let ok = !prefix.is_empty()
        && prefix.split('/').all(|part| {
            !part.is_empty()
                && part != "."
                && part != ".."
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        });
    if ok {
        Ok(())
    } else {
        Err(invalid(
            "prefix",
            format!("{prefix:?} is not a relative path of [A-Za-z0-9._-] names"),
        ))
    }
}

/// Files named by their content: the same name in the destination is the same bytes.
fn content_unique(path: &str) -> bool {
    path.starts_with("segments/") || (path.starts_with("wal/") && path.ends_with(".sst"))
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Removes a directory tree when dropped (the local copy of a snapshot, whatever happens to the upload).
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub async fn snapshot_shard(
    node: Arc<ShardNode>,
    engine: Arc<ShardEngine>,
    r: pb::SnapshotShardRequest,
) -> Result<pb::SnapshotShardResponse, Status> {
    check_prefix(&r.prefix)?;
    let store = node
        .snapshot_destinations()
        .open(&r.destination)
        .map_err(store_status)?;
    let local = node
        .data_dir()
        .join(LOCAL_SNAPSHOTS_DIR)
        .join(r.prefix.replace('/', "__"));
    let _cleanup = RemoveOnDrop(local.clone());
    catch_up_first(&node, &engine, &r).await?;
    // The snapshot, and its manifest's bytes as written (what the router checksums), off the async workers.
    let (snapshot, manifest) = {
        let local = local.clone();
        blocking(move || {
            let io = |e: std::io::Error| Status::internal(format!("{}: {e}", local.display()));
            if local.exists() {
                std::fs::remove_dir_all(&local).map_err(io)?;
            }
            let snapshot = engine.snapshot(&local).map_err(to_status)?;
            let manifest = std::fs::read(local.join(SNAPSHOT_FILE)).map_err(io)?;
            Ok((snapshot, manifest))
        })
        .await?
    };
    let running = node
        .transfers
        .start(&r.collection, r.shard, snapshot.total_bytes());
    let progress = running.progress();
    let (mut sent, mut skipped) = (0, 0);
    for file in &snapshot.files {
        let key = if r.blobs.is_empty() {
            let key = format!("{}/{}", r.prefix, file.path);
            if !content_unique(&file.path)
                && store.size_of(&key).await.map_err(store_status)?.is_some()
            {
                store.delete(&key).await.map_err(store_status)?;
            }
            key
        } else {
            blob_key(&r.blobs, &file.sha256)
                .ok_or_else(|| Status::internal(format!("{}: bad sha256", file.path)))?
        };
        let n = store
            .upload_file(&local.join(&file.path), &key, &|n| progress.add_done(n))
            .await
            .map_err(store_status)?;
        sent += n;
        if n == 0 && !r.blobs.is_empty() {
            skipped += file.bytes;
            progress.add_skipped(file.bytes);
        }
    }
    // Last: a replica snapshot whose manifest is in the destination is complete.
    let manifest_sha256 = sha256_hex(&manifest);
    store
        .put_bytes(&format!("{}/{SNAPSHOT_FILE}", r.prefix), manifest.clone())
        .await
        .map_err(store_status)?;
    info!(collection = %r.collection, shard = r.shard, prefix = %r.prefix, bytes = snapshot.total_bytes(),
        sent, skipped, last_seq = snapshot.last_seq, event = "replica_snapshot_uploaded", "replica snapshot uploaded");
    Ok(pb::SnapshotShardResponse {
        manifest_json: String::from_utf8_lossy(&manifest).into_owned(),
        manifest_sha256,
        bytes_sent: sent,
        bytes_skipped: skipped,
    })
}

/// When this replica may lack an acknowledged write (a write quorum smaller than the replica set), copies what
/// the peers hold newer; at least `catch_up_needed` of them must answer.
async fn catch_up_first(
    node: &ShardNode,
    engine: &Arc<ShardEngine>,
    r: &pb::SnapshotShardRequest,
) -> Result<(), Status> {
    let needed = r.catch_up_needed as usize;
    if needed == 0 {
        return Ok(());
    }
    let credential = node.peer_credential().ok_or_else(|| {
        Status::failed_precondition(
            "this node has no peer credential yet (not registered with meta)",
        )
    })?;
    let mut reached = 0;
    let mut problems = Vec::new();
    for peer in &r.peers {
        let pass = match crate::cluster::connect_peer(peer, credential) {
            Ok(client) => {
                let mut cursor = PeerCursor::default();
                catch_up_from(
                    Arc::clone(engine),
                    &client,
                    &r.collection,
                    r.shard,
                    &mut cursor,
                )
                .await
            }
            Err(e) => Err(Status::unavailable(e.to_string())),
        };
        match pass {
            Ok(report) => {
                reached += 1;
                info!(collection = %r.collection, shard = r.shard, peer = %peer, copied = report.copied,
                    tombstones = report.tombstones, event = "snapshot_caught_up", "caught up from a peer before the snapshot");
            }
            Err(e) => problems.push(format!("{peer}: {}", e.message())),
        }
    }
    if reached < needed {
        return Err(Status::unavailable(format!(
            "caught up from {reached} of the {needed} peers a consistent snapshot needs ({})",
            problems.join("; ")
        )));
    }
    Ok(())
}

pub async fn stage_restore(
    node: Arc<ShardNode>,
    r: pb::StageRestoreRequest,
) -> Result<pb::StageRestoreResponse, Status> {
    check_prefix(&r.prefix)?;
    let store = node
        .snapshot_destinations()
        .open(&r.source)
        .map_err(store_status)?;
    let manifest_key = format!("{}/{SNAPSHOT_FILE}", r.prefix);
    let manifest = store
        .get_bytes(&manifest_key)
        .await
        .map_err(store_status)?
        .ok_or_else(|| {
            store_status(StoreError::Missing {
                key: manifest_key.clone(),
            })
        })?;
    if sha256_hex(&manifest) != r.manifest_sha256 {
        return Err(Status::failed_precondition(format!(
            "{manifest_key}: sha256 differs from the cluster manifest's"
        )));
    }
    let snapshot: ShardSnapshot = serde_json::from_slice(&manifest)
        .map_err(|e| Status::failed_precondition(format!("{manifest_key}: unreadable: {e}")))?;
    let download = {
        let (node, collection) = (Arc::clone(&node), r.collection.clone());
        blocking(move || {
            node.restore_download_dir(&collection, r.shard)
                .map_err(to_status)
        })
        .await?
    };
    let cleanup = RemoveOnDrop(download.clone());
    let running = node
        .transfers
        .start(&r.collection, r.shard, snapshot.total_bytes());
    for file in &snapshot.files {
        let dest = safe_join(&download, &file.path).ok_or_else(|| {
            Status::failed_precondition(format!("{manifest_key}: bad file name {:?}", file.path))
        })?;
        let key = if r.blobs.is_empty() {
            format!("{}/{}", r.prefix, file.path)
        } else {
            blob_key(&r.blobs, &file.sha256).ok_or_else(|| {
                Status::failed_precondition(format!(
                    "{manifest_key}: bad sha256 for {:?}",
                    file.path
                ))
            })?
        };
        store
            .download_verified(&key, &dest, file.bytes, &file.sha256, &|n| {
                running.progress().add_done(n)
            })
            .await
            .map_err(store_status)?;
    }
    {
        let (download, collection) = (download.clone(), r.collection.clone());
        blocking(move || {
            std::fs::write(download.join(SNAPSHOT_FILE), &manifest)
                .map_err(|e| Status::internal(format!("{}: {e}", download.display())))?;
            node.commit_staged(&collection, r.shard, &download)
                .map_err(to_status)
        })
        .await?;
    }
    drop(cleanup); // the download directory is the staged one now: nothing left to remove
    info!(collection = %r.collection, shard = r.shard, bytes = snapshot.total_bytes(),
        event = "replica_restore_staged", "replica snapshot downloaded and verified");
    Ok(pb::StageRestoreResponse {
        bytes: snapshot.total_bytes(),
        live_documents: snapshot.live_documents,
    })
}

pub fn transfer_progress(
    node: &ShardNode,
    r: &pb::TransferProgressRequest,
) -> pb::TransferProgressResponse {
    node.transfers.report(&r.collection, r.shard)
}

/// `dir/relative` when `relative` stays inside `dir` (a manifest names files, never `..` or absolute paths).
fn safe_join(dir: &Path, relative: &str) -> Option<PathBuf> {
    let path = Path::new(relative);
    path.components()
        .all(|c| matches!(c, std::path::Component::Normal(_)))
        .then(|| dir.join(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_and_file_names_stay_inside() {
        assert!(check_prefix("snap-1/docs/shard-0").is_ok());
        for bad in ["", "/abs", "a//b", "a/../b", "a/./b", "a b", "a\\b"] {
            assert!(check_prefix(bad).is_err(), "{bad:?}");
        }
        assert!(safe_join(Path::new("/d"), "wal/000012.sst").is_some());
        assert!(safe_join(Path::new("/d"), "../x").is_none());
        assert!(safe_join(Path::new("/d"), "/etc/passwd").is_none());
        assert!(content_unique("wal/000012.sst") && content_unique("segments/seg-3/vectors.f32"));
        assert!(!content_unique("wal/CURRENT") && !content_unique("MANIFEST.json"));
    }
}
