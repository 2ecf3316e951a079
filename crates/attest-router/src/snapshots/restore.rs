//! Restore of a cluster snapshot, in two steps: [`Snapshots::plan_restore`] checks the request against the
//! snapshot and this cluster (what the HTTP request answers), then [`Snapshots::run_restore`], the job's work,
//! stages every replica of the new placement on its node (each file checked against its sha256), and only then
//! creates the collections. A failure or a cancellation while staging discards everything staged; once the
//! collections are being created the restore is past cancelling.

use std::collections::BTreeSet;

use attest_core::limits;
use attest_proto::v1 as pb;
use attest_snapshot::{blob_key, SnapshotStore};
use prost::Message;
use tracing::{info, warn};

use super::manifest::read_manifest;
use super::{
    damaged, from_store, id_problem, open_store, sha256_hex, ClusterManifest, CollectionSnapshot,
    ReplicaManifest, ReplicaSnapshot, RestoreSnapshot, RestoredCollection, CLUSTER_MANIFEST,
    META_STATE, PARALLEL_TRANSFERS, REPLICA_MANIFEST, REPLICA_TRANSFER_LIMIT,
};
use crate::error::RouterError;
use crate::replicas::ShardCall;
use crate::snapshot_jobs::JobTracker;
use crate::snapshots::Snapshots;
use futures::stream::{self, StreamExt};

/// One collection to restore: its snapshot, its meta record in the snapshot, its name here, and the
/// create request meta planned (its placement is where the staged replicas go).
struct Picked {
    snapshot: CollectionSnapshot,
    target: String,
    request: pb::MetaCreateCollectionRequest,
    planned: pb::CollectionMeta,
}

/// A checked restore, ready to run.
pub(crate) struct RestorePlan {
    req: RestoreSnapshot,
    /// Where the snapshot's files are (empty: under each replica's prefix, format 1).
    blobs: String,
    picked: Vec<Picked>,
}

/// (collection as restored, shard, node, the replica's snapshot).
type StageJob = (String, u32, u64, ReplicaSnapshot);

impl RestorePlan {
    fn stage_jobs(&self) -> Vec<StageJob> {
        self.picked
            .iter()
            .flat_map(|p| {
                p.planned.placement.iter().flat_map(move |sp| {
                    let snapshot = &p.snapshot.replicas[sp.shard as usize];
                    sp.replicas
                        .iter()
                        .map(move |r| (p.target.clone(), sp.shard, r.node_id, snapshot.clone()))
                })
            })
            .collect()
    }
}

impl Snapshots {
    /// Everything a restore can be refused for before any file moves: the snapshot's manifest and meta state,
    /// the names, collections that exist (without `force`), every replica's files present at their sizes,
    /// and meta's placement over this cluster's live shard nodes.
    pub(crate) async fn plan_restore(
        &self,
        req: RestoreSnapshot,
    ) -> Result<RestorePlan, RouterError> {
        if let Some(problem) = id_problem(&req.id) {
            return Err(RouterError::invalid("id", problem));
        }
        let store = open_store(&self.destinations, &req.source, "source")?;
        if let Some(problem) = store.entry_problem(&req.id) {
            return Err(RouterError::invalid("id", problem));
        }
        let manifest = read_manifest(&store, &req.id).await?;
        let meta_state = read_meta_state(&store, &req.id, &manifest).await?;

        // Which collections, under which names.
        let wanted: BTreeSet<&str> = req.collections.iter().map(String::as_str).collect();
        for name in wanted
            .iter()
            .copied()
            .chain(req.rename.keys().map(String::as_str))
        {
            if !manifest.collections.iter().any(|c| c.name == *name) {
                return Err(RouterError::NotFound(format!(
                    "collection `{name}` is not in snapshot `{}`",
                    req.id
                )));
            }
        }
        let mut chosen = Vec::new();
        for c in manifest
            .collections
            .iter()
            .filter(|c| wanted.is_empty() || wanted.contains(c.name.as_str()))
        {
            let meta = meta_state
                .collections
                .iter()
                .find(|m| m.name == c.name)
                .ok_or_else(|| {
                    damaged(format!(
                        "{}/{META_STATE}: no collection `{}`",
                        req.id, c.name
                    ))
                })?;
            let target = req
                .rename
                .get(&c.name)
                .cloned()
                .unwrap_or_else(|| c.name.clone());
            if let Some(problem) = limits::collection_name_problem(&target) {
                return Err(RouterError::invalid(
                    "rename",
                    format!("`{target}`: {problem}"),
                ));
            }
            if c.replicas.len() != c.shards as usize {
                return Err(damaged(format!(
                    "{}/{CLUSTER_MANIFEST}: `{}` has {} of its {} shards",
                    req.id,
                    c.name,
                    c.replicas.len(),
                    c.shards
                )));
            }
            chosen.push((c.clone(), meta.clone(), target));
        }
        let targets: BTreeSet<&str> = chosen.iter().map(|(_, _, t)| t.as_str()).collect();
        if targets.len() != chosen.len() {
            return Err(RouterError::invalid(
                "rename",
                "two collections would get the same name",
            ));
        }
        let state = self.shared.view.refresh(true).await?;
        for (_, _, target) in &chosen {
            if self.shared.view.get(target).is_ok() && !req.force {
                return Err(RouterError::AlreadyExists(format!(
                    "collection `{target}` exists; restore over it with force (`--force`)"
                )));
            }
        }
        for (c, _, _) in &chosen {
            for r in &c.replicas {
                check_replica_files(&store, &manifest.blobs, r).await?;
            }
        }

        // Where each restored replica goes: meta's plan over this cluster's live shard nodes.
        let live_shard_nodes = state
            .nodes
            .iter()
            .filter(|n| n.role == pb::NodeRole::Shard as i32 && n.alive)
            .count() as u32;
        let mut picked = Vec::new();
        for (snapshot, meta, target) in chosen {
            let request = pb::MetaCreateCollectionRequest {
                name: target.clone(),
                shards: snapshot.shards,
                replication: snapshot.replication.min(live_shard_nodes.max(1)),
                spec: meta.spec.clone(),
                chunking_json: meta.chunking_json.clone(),
                thresholds_json: meta.thresholds_json.clone(),
                placement: Vec::new(),
                dry_run: true,
            };
            let planned = self
                .shared
                .view
                .meta()
                .create_collection(request.clone())
                .await
                .map_err(RouterError::from_status)?;
            picked.push(Picked {
                snapshot,
                target,
                request,
                planned,
            });
        }
        Ok(RestorePlan {
            blobs: manifest.blobs.clone(),
            req,
            picked,
        })
    }

    /// The restore's work: stage every replica (all or nothing), then create the collections.
    pub(crate) async fn run_restore(
        &self,
        plan: RestorePlan,
        tracker: &JobTracker,
        request_id: &str,
    ) -> Result<Vec<RestoredCollection>, RouterError> {
        let stage_jobs = plan.stage_jobs();
        for (target, shard, node, _) in &stage_jobs {
            tracker.plan(target, *shard, *node);
        }
        let staging = stream::iter(stage_jobs.clone())
            .map(|(target, shard, node, snapshot)| {
                let (source, blobs) = (plan.req.source.clone(), plan.blobs.clone());
                async move {
                    tracker.started_on(&target, shard, node);
                    let staged = self
                        .stage_replica(
                            &target,
                            shard,
                            node,
                            (&source, &blobs),
                            &snapshot,
                            request_id,
                        )
                        .await;
                    tracker.finished(&target, shard, node, staged.is_ok(), (snapshot.bytes, 0));
                    staged
                }
            })
            .buffer_unordered(PARALLEL_TRANSFERS)
            .collect::<Vec<Result<(), RouterError>>>();
        let staged = tokio::select! {
            staged = staging => staged.into_iter().find(Result::is_err).unwrap_or(Ok(())),
            _ = tracker.cancelled() => Err(RouterError::Callee(attest_proto::ApiError::new(
                attest_proto::ErrorCode::Cancelled, "the restore was cancelled while staging"))),
        };
        // Cancelled at the last moment: nothing is visible yet, so it still stops here.
        let staged = staged.and_then(|()| {
            if tracker.is_cancelled() {
                Err(RouterError::Callee(attest_proto::ApiError::new(
                    attest_proto::ErrorCode::Cancelled,
                    "the restore was cancelled before its collections were created",
                )))
            } else {
                Ok(())
            }
        });
        if let Err(e) = staged {
            for (target, shard, node, _) in &stage_jobs {
                self.discard_staged(target, *shard, *node, request_id).await;
            }
            return Err(e);
        }

        // Now visible: replace what `force` names, create each collection with the staged placement.
        let mut restored = Vec::new();
        for p in plan.picked {
            if self.shared.view.get(&p.target).is_ok() {
                self.collections.remove(&p.target, request_id).await?;
            }
            let mut create = p.request;
            create.dry_run = false;
            create.placement = p.planned.placement.clone();
            let created = self
                .shared
                .view
                .meta()
                .create_collection(create)
                .await
                .map_err(RouterError::from_status)?;
            self.shared.ensure_replicas(&created, request_id).await;
            info!(collection = %p.target, from = %p.snapshot.name, snapshot = %plan.req.id,
                event = "collection_restored", "collection restored from a snapshot");
            restored.push(RestoredCollection {
                name: p.target.clone(),
                from: p.snapshot.name.clone(),
                shards: created.shards,
                replication: created.replication,
                live_documents: p.snapshot.replicas.iter().map(|r| r.live_documents).sum(),
                bytes: p.snapshot.replicas.iter().map(|r| r.bytes).sum(),
            });
        }
        Ok(restored)
    }

    /// Has `node` download one replica's snapshot from `(source, blobs)` into its staging area.
    async fn stage_replica(
        &self,
        collection: &str,
        shard: u32,
        node: u64,
        (source, blobs): (&str, &str),
        snapshot: &ReplicaSnapshot,
        request_id: &str,
    ) -> Result<(), RouterError> {
        let (endpoint, _) = self.shared.view.endpoint(node).ok_or_else(|| {
            RouterError::Unavailable(format!("shard node {node} is not in the cluster view"))
        })?;
        let call = ShardCall::StageRestore {
            request_id: request_id.to_string(),
            req: pb::StageRestoreRequest {
                collection: collection.to_string(),
                shard,
                source: source.to_string(),
                prefix: snapshot.prefix.clone(),
                manifest_sha256: snapshot.manifest_sha256.clone(),
                blobs: blobs.to_string(),
            },
        };
        endpoint
            .call_long(call, REPLICA_TRANSFER_LIMIT)
            .await
            .and_then(pb::StageRestoreResponse::try_from)
            .map(|_| ())
            .map_err(|s| match s.code() {
                tonic::Code::FailedPrecondition => damaged(s.message()),
                _ => RouterError::from_status(s),
            })
    }

    async fn discard_staged(&self, collection: &str, shard: u32, node: u64, request_id: &str) {
        let Some((endpoint, _)) = self.shared.view.endpoint(node) else {
            return;
        };
        let call = ShardCall::DiscardRestore {
            request_id: request_id.to_string(),
            req: pb::DiscardRestoreRequest {
                collection: collection.to_string(),
                shard,
            },
        };
        if let Err(e) = endpoint.call(call).await {
            warn!(collection, shard, node, error = %e, event = "discard_restore_failed",
                "a staged restore could not be discarded; it is replaced by the next restore of this replica");
        }
    }
}

/// Every file of the snapshot there as its manifest says: the meta state (its sha256) and every replica's
/// manifest (its sha256) and files (their sizes).
pub(super) async fn check_files(
    store: &SnapshotStore,
    manifest: &ClusterManifest,
) -> Result<(), RouterError> {
    read_meta_state(store, &manifest.id, manifest).await?;
    for r in manifest.collections.iter().flat_map(|c| &c.replicas) {
        check_replica_files(store, &manifest.blobs, r).await?;
    }
    Ok(())
}

/// The snapshot's `meta-state.pb`, checked against the manifest's sha256.
async fn read_meta_state(
    store: &SnapshotStore,
    id: &str,
    manifest: &ClusterManifest,
) -> Result<pb::ClusterState, RouterError> {
    let meta_key = format!("{id}/{META_STATE}");
    let meta_bytes = store
        .get_bytes(&meta_key)
        .await
        .map_err(|e| from_store("source", e))?
        .ok_or_else(|| RouterError::NotFound(format!("{meta_key}: not found in the snapshot")))?;
    if sha256_hex(&meta_bytes) != manifest.meta_state_sha256 {
        return Err(damaged(format!(
            "{meta_key}: sha256 differs from the manifest's"
        )));
    }
    pb::ClusterState::decode(meta_bytes.as_slice()).map_err(|e| damaged(format!("{meta_key}: {e}")))
}

/// The replica's manifest matches the cluster manifest, and every file it names is there at its size (under
/// `blobs` by its sha256, or under the replica's prefix when `blobs` is empty).
async fn check_replica_files(
    store: &SnapshotStore,
    blobs: &str,
    r: &ReplicaSnapshot,
) -> Result<(), RouterError> {
    let key = format!("{}/{REPLICA_MANIFEST}", r.prefix);
    let bytes = store
        .get_bytes(&key)
        .await
        .map_err(|e| from_store("source", e))?
        .ok_or_else(|| damaged(format!("{key}: missing")))?;
    if sha256_hex(&bytes) != r.manifest_sha256 {
        return Err(damaged(format!(
            "{key}: sha256 differs from the cluster manifest's"
        )));
    }
    let m: ReplicaManifest =
        serde_json::from_slice(&bytes).map_err(|e| damaged(format!("{key}: {e}")))?;
    for f in &m.files {
        let key = if blobs.is_empty() {
            format!("{}/{}", r.prefix, f.path)
        } else {
            blob_key(blobs, &f.sha256)
                .ok_or_else(|| damaged(format!("{key}: bad sha256 for {:?}", f.path)))?
        };
        match store
            .size_of(&key)
            .await
            .map_err(|e| from_store("source", e))?
        {
            None => return Err(damaged(format!("{key}: missing"))),
            Some(n) if n != f.bytes => {
                return Err(damaged(format!(
                    "{key}: {n} bytes, the manifest says {}",
                    f.bytes
                )))
            }
            Some(_) => {}
        }
    }
    Ok(())
}
