//! Cluster snapshots, coordinated by the router: `create` (meta's state at a known Raft index, one replica's
//! snapshot of every shard, and a top-level manifest written last), `list`, and `restore` into this cluster
//! whatever its node count.
//!
//! Layout under the destination (a directory every node reaches, or `s3://bucket/prefix`):
//! `<id>/attest-snapshot.json` ([`ClusterManifest`], present only once the snapshot is complete, and refused
//! unless the checksum it records matches its content: `snapshots/manifest.rs`),
//! `<id>/meta-state.pb` (an `attest.v1.ClusterState` of the chosen collections and the API keys' hashes), and
//! `<id>/<collection>/shard-<n>/` (one replica snapshot each, uploaded by the shard node that holds it).
//!
//! Restore checks the manifest's checksum, the meta state and every replica manifest and file's presence and
//! size, then has every replica of the new placement download its shard, checking every file's sha256, into its
//! node's staging area — nothing is visible yet, and a failure discards what was staged. Only then are the
//! collections created in meta with that placement, and each replica created from its staged files.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use attest_core::limits;
use attest_proto::v1 as pb;
use attest_proto::{ApiError, ErrorCode};
use attest_snapshot::{SnapshotStore, StoreError};
use futures::stream::{self, StreamExt};
use prost::Message;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tracing::{info, warn};

use crate::error::RouterError;
use crate::replicas::ShardCall;
use crate::router::Router;

mod manifest;

use manifest::{read_manifest, read_unverified, ChecksumProblem};
pub use manifest::{
    ClusterManifest, CollectionSnapshot, ReplicaSnapshot, CLUSTER_MANIFEST, CLUSTER_SNAPSHOT_FORMAT,
};

pub const META_STATE: &str = "meta-state.pb";
/// A replica snapshot's own manifest (written by `attest_index::ShardEngine::snapshot`).
const REPLICA_MANIFEST: &str = "SNAPSHOT.json";
/// How long one replica's upload or download may take.
const REPLICA_TRANSFER_LIMIT: Duration = Duration::from_secs(6 * 3600);
/// Replica transfers in flight at once, over the whole cluster.
const PARALLEL_TRANSFERS: usize = 4;

/// `POST /v1/snapshots`.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSnapshot {
    /// A directory every shard node and this router reach, or `s3://bucket[/prefix]`.
    pub destination: String,
    /// Default: `snapshot-<UTC time>`.
    #[serde(default)]
    pub id: Option<String>,
    /// Default: every collection.
    #[serde(default)]
    pub collections: Vec<String>,
    /// Retention: once this snapshot is complete, delete the oldest complete snapshots of the destination
    /// beyond this many (this one included). Default: keep all.
    #[serde(default)]
    pub keep: Option<u32>,
}

/// `POST /v1/snapshots/restore`.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RestoreSnapshot {
    pub source: String,
    pub id: String,
    /// Default: every collection of the snapshot.
    #[serde(default)]
    pub collections: Vec<String>,
    /// Restore collection `old` as `new`.
    #[serde(default)]
    pub rename: BTreeMap<String, String>,
    /// Replace collections that exist (dropped once the snapshot's files are staged).
    #[serde(default)]
    pub force: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct RestoredCollection {
    pub name: String,
    pub from: String,
    pub shards: u32,
    pub replication: u32,
    pub live_documents: u64,
    pub bytes: u64,
}

/// How far one replica's upload of a snapshot has come (`GET /v1/snapshots/{id}/progress`).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ReplicaProgress {
    pub collection: String,
    pub shard: u32,
    /// Bytes in the destination so far.
    pub bytes: u64,
    /// Its `SNAPSHOT.json` is there: the replica's upload finished.
    pub complete: bool,
}

/// A snapshot found in a destination: its manifest, or why it cannot be read.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ListedSnapshot {
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manifest: Option<ClusterManifest>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

fn damaged(message: impl Into<String>) -> RouterError {
    RouterError::Callee(ApiError::new(
        ErrorCode::FailedPrecondition,
        format!("the snapshot is damaged: {}", message.into()),
    ))
}

fn from_store(field: &str, e: StoreError) -> RouterError {
    match e {
        StoreError::BadLocation(m) => RouterError::invalid(field, m),
        StoreError::Missing { .. } => RouterError::NotFound(e.to_string()),
        StoreError::Mismatch { .. } => damaged(e.to_string()),
        StoreError::Io { .. } | StoreError::Store { .. } => RouterError::Unavailable(e.to_string()),
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Snapshot ids become key prefixes: one name of `[A-Za-z0-9._-]`, 1–128 characters, not starting with `.`.
fn id_problem(id: &str) -> Option<&'static str> {
    let ok = (1..=128).contains(&id.len())
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    (!ok).then_some("use 1-128 characters from [A-Za-z0-9._-], not starting with '.'")
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `snapshot-YYYYMMDDTHHMMSSZ` from the clock.
fn default_id(ms: u64) -> String {
    format!(
        "snapshot-{}",
        attest_core::clock::UtcTime::from_unix_secs(ms / 1000).compact()
    )
}

fn open_store(location: &str, field: &str) -> Result<SnapshotStore, RouterError> {
    if location.trim().is_empty() {
        return Err(RouterError::invalid(field, "required"));
    }
    SnapshotStore::open(location).map_err(|e| from_store(field, e))
}

/// One shard's replicas, as a snapshot picks one.
#[derive(Clone, Copy)]
struct ShardReplicas<'a> {
    collection: &'a str,
    shard: u32,
    /// Every replica's node (peers to catch up from).
    all: &'a [u64],
    /// Those that may be snapshotted (not JOINING copies).
    candidates: &'a [u64],
}

/// The fields of a replica's `SNAPSHOT.json` the router needs.
#[derive(Deserialize)]
struct ReplicaManifest {
    last_seq: u64,
    live_documents: u64,
    files: Vec<ReplicaFile>,
}

#[derive(Deserialize)]
struct ReplicaFile {
    path: String,
    bytes: u64,
}

impl Router {
    pub async fn create_snapshot(
        &self,
        req: CreateSnapshot,
        request_id: &str,
    ) -> Result<ClusterManifest, RouterError> {
        let created_ms = now_ms();
        let id = req.id.unwrap_or_else(|| default_id(created_ms));
        if let Some(problem) = id_problem(&id) {
            return Err(RouterError::invalid("id", problem));
        }
        let store = open_store(&req.destination, "destination")?;
        let manifest_key = format!("{id}/{CLUSTER_MANIFEST}");
        if store
            .size_of(&manifest_key)
            .await
            .map_err(|e| from_store("destination", e))?
            .is_some()
        {
            return Err(RouterError::AlreadyExists(format!(
                "snapshot `{id}` already exists in {}",
                req.destination
            )));
        }
        // The state at a known Raft index (linearizable), and the view's endpoints brought up to it.
        let state = self.view.refresh(true).await?;
        let wanted: BTreeSet<&str> = req.collections.iter().map(String::as_str).collect();
        for name in &wanted {
            if !state.collections.iter().any(|c| c.name == *name) {
                return Err(RouterError::NotFound(format!(
                    "collection `{name}` does not exist"
                )));
            }
        }
        let chosen: Vec<pb::CollectionMeta> = state
            .collections
            .iter()
            .filter(|c| wanted.is_empty() || wanted.contains(c.name.as_str()))
            .cloned()
            .collect();
        info!(snapshot = %id, collections = chosen.len(), meta_version = state.version,
            event = "snapshot_started", "cluster snapshot started");

        // (collection, shard, every replica's node, the ones that may be snapshotted: not JOINING copies).
        type Job = (String, u32, Vec<u64>, Vec<u64>);
        let jobs: Vec<Job> = chosen
            .iter()
            .flat_map(|c| {
                c.placement.iter().map(|p| {
                    let all = p.replicas.iter().map(|r| r.node_id).collect();
                    let candidates = p
                        .replicas
                        .iter()
                        .filter(|r| r.state != pb::ReplicaState::Joining as i32)
                        .map(|r| r.node_id)
                        .collect();
                    (c.name.clone(), p.shard, all, candidates)
                })
            })
            .collect();
        let results: Vec<Result<(String, ReplicaSnapshot), RouterError>> = stream::iter(jobs)
            .map(|(collection, shard, all, candidates)| {
                let (id, destination) = (id.clone(), req.destination.clone());
                async move {
                    let prefix = format!("{id}/{collection}/shard-{shard}");
                    let replicas = ShardReplicas {
                        collection: &collection,
                        shard,
                        all: &all,
                        candidates: &candidates,
                    };
                    self.snapshot_replica(replicas, &destination, prefix, request_id)
                        .await
                        .map(|r| (collection, r))
                }
            })
            .buffer_unordered(PARALLEL_TRANSFERS)
            .collect()
            .await;
        let mut by_collection: BTreeMap<String, Vec<ReplicaSnapshot>> = BTreeMap::new();
        for r in results {
            let (collection, replica) = r?;
            by_collection.entry(collection).or_default().push(replica);
        }

        let meta_state = pb::ClusterState {
            version: state.version,
            collections: chosen.clone(),
            api_keys: state.api_keys.clone(),
            ..Default::default()
        }
        .encode_to_vec();
        let mut manifest = ClusterManifest {
            format: CLUSTER_SNAPSHOT_FORMAT,
            id: id.clone(),
            created_ms,
            meta_version: state.version,
            meta_state_sha256: sha256_hex(&meta_state),
            collections: chosen
                .iter()
                .map(|c| {
                    let mut replicas = by_collection.remove(&c.name).unwrap_or_default();
                    replicas.sort_by_key(|r| r.shard);
                    CollectionSnapshot {
                        name: c.name.clone(),
                        shards: c.shards,
                        replication: c.replication,
                        replicas,
                    }
                })
                .collect(),
            checksum: String::new(),
        };
        store
            .put_bytes(&format!("{id}/{META_STATE}"), meta_state)
            .await
            .map_err(|e| from_store("destination", e))?;
        // Last: a snapshot with its manifest is complete.
        store
            .put_bytes(&manifest_key, manifest.encode())
            .await
            .map_err(|e| from_store("destination", e))?;
        info!(snapshot = %id, bytes = manifest.total_bytes(), event = "snapshot_created", "cluster snapshot complete");
        if let Some(keep) = req.keep {
            self.prune_snapshots(&store, keep.max(1) as usize).await?;
        }
        Ok(manifest)
    }

    /// Deletes the oldest complete snapshots of `store` beyond the newest `keep` (by creation time).
    async fn prune_snapshots(&self, store: &SnapshotStore, keep: usize) -> Result<(), RouterError> {
        let mut complete: Vec<ClusterManifest> = Vec::new();
        for id in store
            .list_dirs("")
            .await
            .map_err(|e| from_store("destination", e))?
        {
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
            delete_snapshot_files(store, &old.id).await?;
            info!(snapshot = %old.id, keep, event = "snapshot_pruned", "snapshot deleted by retention");
        }
        Ok(())
    }

    /// Deletes snapshot `id` from `source` (its manifest first, so a half-deleted snapshot is never listed as
    /// complete).
    pub async fn delete_snapshot(&self, source: &str, id: &str) -> Result<(), RouterError> {
        if let Some(problem) = id_problem(id) {
            return Err(RouterError::invalid("id", problem));
        }
        let store = open_store(source, "from")?;
        let manifest_key = format!("{id}/{CLUSTER_MANIFEST}");
        let present = store
            .size_of(&manifest_key)
            .await
            .map_err(|e| from_store("from", e))?
            .is_some()
            || store
                .list_dirs("")
                .await
                .map_err(|e| from_store("from", e))?
                .iter()
                .any(|d| d == id);
        if !present {
            return Err(RouterError::NotFound(format!(
                "no snapshot `{id}` in {source}"
            )));
        }
        delete_snapshot_files(&store, id).await
    }

    /// One replica of the shard snapshotted and uploaded: the first candidate (live ones first) that manages.
    /// A write acknowledged by a quorum smaller than the replica set may be missing on any one replica, so the
    /// chosen one first catches up from enough of the others to meet every quorum.
    async fn snapshot_replica(
        &self,
        replicas: ShardReplicas<'_>,
        destination: &str,
        prefix: String,
        request_id: &str,
    ) -> Result<ReplicaSnapshot, RouterError> {
        let ShardReplicas {
            collection,
            shard,
            all,
            candidates,
        } = replicas;
        let catch_up_needed = (all.len() - self.write_quorum(all.len())) as u32;
        let mut candidates: Vec<_> = candidates
            .iter()
            .filter_map(|n| self.view.endpoint(*n))
            .collect();
        candidates.sort_by_key(|(_, alive)| !alive);
        let mut last_error = format!("no replica of shard {shard} of `{collection}` is reachable");
        for (endpoint, _) in candidates {
            let call = ShardCall::SnapshotShard {
                request_id: request_id.to_string(),
                req: pb::SnapshotShardRequest {
                    collection: collection.to_string(),
                    shard,
                    destination: destination.to_string(),
                    prefix: prefix.clone(),
                    peers: all
                        .iter()
                        .filter(|n| **n != endpoint.node_id)
                        .filter_map(|n| self.view.endpoint(*n))
                        .map(|(e, _)| e.address)
                        .collect(),
                    catch_up_needed,
                },
            };
            let response = endpoint
                .call_long(call, REPLICA_TRANSFER_LIMIT)
                .await
                .and_then(pb::SnapshotShardResponse::try_from);
            match response {
                Ok(r) => {
                    let m: ReplicaManifest =
                        serde_json::from_str(&r.manifest_json).map_err(|e| {
                            RouterError::Internal(format!(
                                "node {} sent an unreadable manifest: {e}",
                                endpoint.node_id
                            ))
                        })?;
                    return Ok(ReplicaSnapshot {
                        shard,
                        node_id: endpoint.node_id,
                        prefix,
                        manifest_sha256: r.manifest_sha256,
                        last_seq: m.last_seq,
                        live_documents: m.live_documents,
                        bytes: m.files.iter().map(|f| f.bytes).sum(),
                    });
                }
                Err(e) => {
                    warn!(collection, shard, node = endpoint.node_id, error = %e, event = "replica_snapshot_failed",
                        "replica snapshot failed; trying another replica");
                    last_error = format!("shard {shard} of `{collection}`: {}", e.message());
                }
            }
        }
        Err(RouterError::Unavailable(last_error))
    }

    /// What snapshot `id` has uploaded to `source` so far, per replica (read from the destination, so it can be
    /// asked while `create` runs, from any router).
    pub async fn snapshot_progress(
        &self,
        source: &str,
        id: &str,
    ) -> Result<Vec<ReplicaProgress>, RouterError> {
        if let Some(problem) = id_problem(id) {
            return Err(RouterError::invalid("id", problem));
        }
        let store = open_store(source, "from")?;
        let mut by_replica: BTreeMap<(String, u32), ReplicaProgress> = BTreeMap::new();
        for (key, size) in store
            .list_objects(id)
            .await
            .map_err(|e| from_store("from", e))?
        {
            let mut parts = key.splitn(4, '/');
            let (_, collection, shard, rest) =
                (parts.next(), parts.next(), parts.next(), parts.next());
            let (Some(collection), Some(shard), Some(rest)) = (
                collection,
                shard.and_then(|s| s.strip_prefix("shard-")?.parse::<u32>().ok()),
                rest,
            ) else {
                continue;
            };
            let entry = by_replica
                .entry((collection.to_string(), shard))
                .or_insert_with(|| ReplicaProgress {
                    collection: collection.to_string(),
                    shard,
                    bytes: 0,
                    complete: false,
                });
            entry.bytes += size;
            entry.complete |= rest == REPLICA_MANIFEST;
        }
        Ok(by_replica.into_values().collect())
    }

    /// Every snapshot in `source`, newest id last; incomplete ones (no manifest yet) are left out, damaged ones
    /// listed with their problem.
    pub async fn list_snapshots(&self, source: &str) -> Result<Vec<ListedSnapshot>, RouterError> {
        let store = open_store(source, "from")?;
        let mut out = Vec::new();
        for id in store
            .list_dirs("")
            .await
            .map_err(|e| from_store("from", e))?
        {
            match read_manifest(&store, &id).await {
                Ok(m) => out.push(ListedSnapshot {
                    id,
                    manifest: Some(m),
                    problem: None,
                }),
                Err(RouterError::NotFound(_)) => {}
                Err(e) => out.push(ListedSnapshot {
                    id,
                    manifest: None,
                    problem: Some(e.to_string()),
                }),
            }
        }
        Ok(out)
    }

    pub async fn restore_snapshot(
        &self,
        req: RestoreSnapshot,
        request_id: &str,
    ) -> Result<Vec<RestoredCollection>, RouterError> {
        if let Some(problem) = id_problem(&req.id) {
            return Err(RouterError::invalid("id", problem));
        }
        let store = open_store(&req.source, "source")?;
        let manifest = read_manifest(&store, &req.id).await?;
        let meta_key = format!("{}/{META_STATE}", req.id);
        let meta_bytes = store
            .get_bytes(&meta_key)
            .await
            .map_err(|e| from_store("source", e))?
            .ok_or_else(|| {
                RouterError::NotFound(format!("{meta_key}: not found in the snapshot"))
            })?;
        if sha256_hex(&meta_bytes) != manifest.meta_state_sha256 {
            return Err(damaged(format!(
                "{meta_key}: sha256 differs from the manifest's"
            )));
        }
        let meta_state = pb::ClusterState::decode(meta_bytes.as_slice())
            .map_err(|e| damaged(format!("{meta_key}: {e}")))?;

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
        let mut picked = Vec::new();
        for c in manifest
            .collections
            .iter()
            .filter(|c| wanted.is_empty() || wanted.contains(c.name.as_str()))
        {
            let meta = meta_state
                .collections
                .iter()
                .find(|m| m.name == c.name)
                .ok_or_else(|| damaged(format!("{meta_key}: no collection `{}`", c.name)))?;
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
            picked.push((c, meta, target));
        }
        let targets: BTreeSet<&str> = picked.iter().map(|(_, _, t)| t.as_str()).collect();
        if targets.len() != picked.len() {
            return Err(RouterError::invalid(
                "rename",
                "two collections would get the same name",
            ));
        }
        let state = self.view.refresh(true).await?;
        for (_, _, target) in &picked {
            if self.view.get(target).is_ok() && !req.force {
                return Err(RouterError::AlreadyExists(format!(
                    "collection `{target}` exists; restore over it with force (`--force`)"
                )));
            }
        }
        for (c, _, _) in &picked {
            for r in &c.replicas {
                check_replica_files(&store, r).await?;
            }
        }

        // Where each restored replica goes: meta's plan over this cluster's live shard nodes.
        let live_shard_nodes = state
            .nodes
            .iter()
            .filter(|n| n.role == pb::NodeRole::Shard as i32 && n.alive)
            .count() as u32;
        let mut plans = Vec::new();
        for (c, meta, target) in &picked {
            let request = pb::MetaCreateCollectionRequest {
                name: target.clone(),
                shards: c.shards,
                replication: c.replication.min(live_shard_nodes.max(1)),
                spec: meta.spec.clone(),
                chunking_json: meta.chunking_json.clone(),
                thresholds_json: meta.thresholds_json.clone(),
                placement: Vec::new(),
                dry_run: true,
            };
            let planned = self
                .view
                .meta()
                .create_collection(request.clone())
                .await
                .map_err(RouterError::from_status)?;
            plans.push((request, planned));
        }

        // Stage every replica's files on its node; any failure discards everything staged.
        let stage_jobs: Vec<(String, u32, u64, ReplicaSnapshot)> = picked
            .iter()
            .zip(&plans)
            .flat_map(|((c, _, target), (_, planned))| {
                planned.placement.iter().flat_map(move |p| {
                    let snapshot = &c.replicas[p.shard as usize];
                    p.replicas
                        .iter()
                        .map(move |r| (target.clone(), p.shard, r.node_id, snapshot.clone()))
                })
            })
            .collect();
        let staged: Vec<Result<(), RouterError>> = stream::iter(stage_jobs.clone())
            .map(|(target, shard, node, snapshot)| {
                let source = req.source.clone();
                async move {
                    self.stage_replica(&target, shard, node, &source, &snapshot, request_id)
                        .await
                }
            })
            .buffer_unordered(PARALLEL_TRANSFERS)
            .collect()
            .await;
        if let Some(Err(e)) = staged.into_iter().find(Result::is_err) {
            for (target, shard, node, _) in &stage_jobs {
                self.discard_staged(target, *shard, *node, request_id).await;
            }
            return Err(e);
        }

        // Now visible: replace what --force names, create each collection with the staged placement.
        let mut restored = Vec::new();
        for ((c, _, target), (request, planned)) in picked.iter().zip(plans) {
            if self.view.get(target).is_ok() {
                self.drop_collection(target, request_id).await?;
            }
            let mut create = request;
            create.dry_run = false;
            create.placement = planned.placement.clone();
            let created = self
                .view
                .meta()
                .create_collection(create)
                .await
                .map_err(RouterError::from_status)?;
            self.ensure_replicas(&created, request_id).await;
            info!(collection = %target, from = %c.name, snapshot = %req.id, event = "collection_restored",
                "collection restored from a snapshot");
            restored.push(RestoredCollection {
                name: target.clone(),
                from: c.name.clone(),
                shards: created.shards,
                replication: created.replication,
                live_documents: c.replicas.iter().map(|r| r.live_documents).sum(),
                bytes: c.replicas.iter().map(|r| r.bytes).sum(),
            });
        }
        Ok(restored)
    }

    async fn stage_replica(
        &self,
        collection: &str,
        shard: u32,
        node: u64,
        source: &str,
        snapshot: &ReplicaSnapshot,
        request_id: &str,
    ) -> Result<(), RouterError> {
        let (endpoint, _) = self.view.endpoint(node).ok_or_else(|| {
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
        let Some((endpoint, _)) = self.view.endpoint(node) else {
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

async fn delete_snapshot_files(store: &SnapshotStore, id: &str) -> Result<(), RouterError> {
    store
        .delete(&format!("{id}/{CLUSTER_MANIFEST}"))
        .await
        .map_err(|e| from_store("from", e))?;
    store
        .delete_prefix(id)
        .await
        .map_err(|e| from_store("from", e))?;
    Ok(())
}

/// The replica's manifest matches the cluster manifest, and every file it names is there at its size.
async fn check_replica_files(
    store: &SnapshotStore,
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
        let key = format!("{}/{}", r.prefix, f.path);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_single_safe_names_and_default_to_the_utc_time() {
        assert_eq!(default_id(0), "snapshot-19700101T000000Z");
        assert_eq!(default_id(1_795_600_000_000), "snapshot-20261125T094640Z");
        assert!(id_problem(&default_id(now_ms())).is_none());
        for bad in ["", ".hidden", "a/b", "a b", "..", &"x".repeat(129)] {
            assert!(id_problem(bad).is_some(), "{bad:?}");
        }
    }
}
