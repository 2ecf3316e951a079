//! The content-addressed files of a destination (`blobs/`, cluster snapshot format 2) are shared by its
//! snapshots, so deleting a snapshot deletes only its own folder; the blobs no snapshot names any more are then
//! collected here: every snapshot folder's replica `SNAPSHOT.json` (complete or not) names the blobs it uses,
//! and every other blob is deleted.
//!
//! A snapshot being taken uploads blobs before its replica manifests name them, so collection is skipped while
//! another create job of this cluster writes to the same destination (meta's jobs say so); those blobs are
//! collected after a later delete. The job whose retention collects is not one of them: its own files are named
//! by its replica manifests by then. Two clusters sharing one destination would need the same care across clusters, which
//! this does not give: give each cluster its own destination (or prefix).

use std::collections::BTreeSet;

use attest_snapshot::{blob_key, SnapshotStore, BLOBS};
use tracing::info;

use super::{from_store, ReplicaManifest, REPLICA_MANIFEST};
use crate::error::RouterError;
use crate::snapshot_jobs::{JobKind, JobState};
use crate::snapshots::Snapshots;

impl Snapshots {
    /// Deletes the blobs of `store` (at `location`) that no snapshot names, unless a create job other than
    /// `collecting_job` is writing there.
    pub(super) async fn collect_blobs(
        &self,
        store: &SnapshotStore,
        location: &str,
        collecting_job: Option<&str>,
    ) -> Result<(), RouterError> {
        let writing = self.jobs().await?.into_iter().any(|j| {
            j.kind == JobKind::Create
                && j.state == JobState::Running
                && j.location == location
                && Some(j.id.as_str()) != collecting_job
        });
        if writing {
            info!(location, event = "snapshot_blobs_kept",
                "a snapshot is being taken to this destination: unused files are collected after a later delete");
            return Ok(());
        }
        let err = |e| from_store("from", e);
        let mut named = BTreeSet::new();
        for dir in store.list_dirs("").await.map_err(err)? {
            // A link may lead anywhere (a node's data directory): only the destination's own folders are read.
            if dir == BLOBS || store.entry_problem(&dir).is_some() {
                continue;
            }
            for (key, _) in store.list_objects(&dir).await.map_err(err)? {
                if !key.ends_with(&format!("/{REPLICA_MANIFEST}")) {
                    continue;
                }
                let Some(bytes) = store.get_bytes(&key).await.map_err(err)? else {
                    continue;
                };
                // A replica manifest that does not parse names nothing we can keep for it; it is refused on
                // restore anyway.
                if let Ok(m) = serde_json::from_slice::<ReplicaManifest>(&bytes) {
                    named.extend(m.files.into_iter().map(|f| f.sha256));
                }
            }
        }
        let (mut deleted, mut freed) = (0u64, 0u64);
        for (key, size) in store.list_objects(BLOBS).await.map_err(err)? {
            let sha256 = key.rsplit('/').next().unwrap_or_default();
            // Only what Attest writes there: a blob's key is its sha256.
            if blob_key(BLOBS, sha256).as_deref() != Some(key.as_str()) {
                continue;
            }
            if !named.contains(sha256) {
                store.delete(&key).await.map_err(err)?;
                deleted += 1;
                freed += size;
            }
        }
        info!(
            location,
            deleted,
            freed,
            kept = named.len(),
            event = "snapshot_blobs_collected",
            "files no snapshot names deleted"
        );
        Ok(())
    }
}
