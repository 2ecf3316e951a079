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
use std::sync::Arc;
use std::time::Duration;

use attest_core::{contract, limits};
use attest_proto::v1 as pb;
use attest_proto::{ApiError, ErrorCode};
use attest_snapshot::{DestinationPolicy, SnapshotStore, StoreError, BLOBS};
use futures::stream::{self, StreamExt};
use prost::Message;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tracing::{info, warn};

use crate::collection::caller_names;
use crate::collections::Collections;
use crate::error::RouterError;
use crate::meta_jobs::JobTable;
use crate::replicas::ShardCall;
use crate::shared::Shared;
use crate::snapshot_jobs::JobTracker;

mod blobs;
mod cleanup;
mod manifest;
mod restore;

use manifest::read_manifest;
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
    #[schema(schema_with = contract::snapshot_id)]
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
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

/// A snapshot found in a destination: its manifest, and why it cannot be restored when it is damaged (a manifest
/// that does not check is left out, a file it names that is missing or of another size is not).
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

/// Snapshot ids become key prefixes ([`limits::snapshot_id_problem`]), and the blobs' folder is not one.
fn id_problem(id: &str) -> Option<String> {
    if id == BLOBS {
        return Some("`blobs` holds the destination's shared files; choose another id".into());
    }
    limits::snapshot_id_problem(id)
}

/// `snapshot-YYYYMMDDTHHMMSSZ` from the clock.
fn default_id(ms: u64) -> String {
    format!(
        "snapshot-{}",
        attest_core::clock::UtcTime::from_unix_secs(ms / 1000).compact()
    )
}

/// The destination, when this router admits it (`snapshots.allowed_roots`: a bad path is `field`'s 400).
fn open_store(
    policy: &DestinationPolicy,
    location: &str,
    field: &str,
) -> Result<SnapshotStore, RouterError> {
    if location.trim().is_empty() {
        return Err(RouterError::invalid(field, "required"));
    }
    policy.open(location).map_err(|e| from_store(field, e))
}

/// One shard's replicas, as a snapshot picks one.
#[derive(Clone, Copy)]
struct ShardReplicas<'a> {
    collection: &'a str,
    /// What its shard nodes know it by ([`CreatePlan::stored_names`]).
    stored_name: &'a str,
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
    sha256: String,
}

/// A checked snapshot, ready to run ([`Snapshots::plan_create`]).
pub(crate) struct CreatePlan {
    pub id: String,
    created_ms: u64,
    store: SnapshotStore,
    destination: String,
    keep: Option<u32>,
    /// Under the names callers use (a re-embedded collection's alias, not its stored `name~tag`).
    chosen: Vec<pb::CollectionMeta>,
    /// The stored name of each chosen collection (what its shard nodes know it by), by its name.
    stored_names: BTreeMap<String, String>,
    meta_version: u64,
    api_keys: Vec<pb::ApiKeyInfo>,
}

/// Cluster snapshots: created, listed and restored, each create or restore as a job recorded in meta
/// ([`crate::snapshot_jobs`]).
#[derive(Clone)]
pub struct Snapshots {
    pub(crate) shared: Arc<Shared>,
    /// A restore replaces collections (`force`) and creates them.
    pub(crate) collections: Collections,
    pub(crate) table: JobTable,
    /// The directories this router admits as snapshot destinations (none until configured).
    pub(crate) destinations: DestinationPolicy,
}

impl Snapshots {
    pub(crate) fn new(
        shared: &Arc<Shared>,
        collections: Collections,
        table: JobTable,
        destinations: DestinationPolicy,
    ) -> Self {
        Snapshots {
            shared: Arc::clone(shared),
            collections,
            table,
            destinations,
        }
    }

    /// Everything a snapshot can be refused for before any file moves: its id, the destination, an existing
    /// snapshot of that id, the collections named. Takes the state (linearizable) the snapshot records.
    pub(crate) async fn plan_create(&self, req: CreateSnapshot) -> Result<CreatePlan, RouterError> {
        let created_ms = attest_core::clock::unix_ms();
        let id = req.id.clone().unwrap_or_else(|| default_id(created_ms));
        if let Some(problem) = id_problem(&id) {
            return Err(RouterError::invalid("id", problem));
        }
        let store = open_store(&self.destinations, &req.destination, "destination")?;
        if let Some(problem) = store.entry_problem(&id) {
            return Err(RouterError::invalid("id", problem));
        }
        if store
            .size_of(&format!("{id}/{CLUSTER_MANIFEST}"))
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
        let state = self.shared.view.refresh(true).await?;
        // Collections as callers know them: a re-embedded one under its name (restored under it, without the
        // tag it is stored with), a re-embedding's unfinished copy not at all.
        let names = caller_names(&state);
        let mut stored_names = BTreeMap::new();
        let mut known = Vec::new();
        for c in &state.collections {
            if let Some(name) = names.get(&c.name).cloned().flatten() {
                stored_names.insert(name.clone(), c.name.clone());
                known.push(pb::CollectionMeta { name, ..c.clone() });
            }
        }
        let wanted: BTreeSet<&str> = req.collections.iter().map(String::as_str).collect();
        for name in &wanted {
            if !stored_names.contains_key(*name) {
                return Err(RouterError::NotFound(format!(
                    "collection `{name}` does not exist"
                )));
            }
        }
        let chosen = known
            .into_iter()
            .filter(|c| wanted.is_empty() || wanted.contains(c.name.as_str()))
            .collect();
        Ok(CreatePlan {
            id,
            created_ms,
            store,
            destination: req.destination,
            keep: req.keep,
            chosen,
            stored_names,
            meta_version: state.version,
            api_keys: state.api_keys,
        })
    }

    /// The snapshot's work: one replica of every shard uploaded, then the meta state, then the manifest (last:
    /// a snapshot with its manifest is complete), then retention. A cancellation removes what was uploaded
    /// under the snapshot's id.
    pub(crate) async fn run_create(
        &self,
        plan: CreatePlan,
        tracker: &JobTracker,
        request_id: &str,
    ) -> Result<ClusterManifest, RouterError> {
        let CreatePlan { id, store, .. } = &plan;
        info!(snapshot = %id, collections = plan.chosen.len(), meta_version = plan.meta_version,
            event = "snapshot_started", "cluster snapshot started");
        // (collection, shard, every replica's node, the ones that may be snapshotted: not JOINING copies).
        type Job = (String, u32, Vec<u64>, Vec<u64>);
        let jobs: Vec<Job> = plan
            .chosen
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
        for (collection, shard, _, _) in &jobs {
            tracker.plan(collection, *shard, 0);
        }
        let uploads = stream::iter(jobs)
            .map(|(collection, shard, all, candidates)| {
                let destination = plan.destination.clone();
                let stored_name = plan
                    .stored_names
                    .get(&collection)
                    .cloned()
                    .unwrap_or_else(|| collection.clone());
                async move {
                    let prefix = format!("{id}/{collection}/shard-{shard}");
                    let replicas = ShardReplicas {
                        collection: &collection,
                        stored_name: &stored_name,
                        shard,
                        all: &all,
                        candidates: &candidates,
                    };
                    self.snapshot_replica(replicas, &destination, prefix, tracker, request_id)
                        .await
                        .map(|r| (collection, r))
                }
            })
            .buffer_unordered(PARALLEL_TRANSFERS)
            .collect::<Vec<Result<(String, ReplicaSnapshot), RouterError>>>();
        let results = tokio::select! {
            results = uploads => results,
            _ = tracker.cancelled() => {
                let prefixes: Vec<String> = plan
                    .chosen
                    .iter()
                    .flat_map(|c| c.placement.iter().map(|p| format!("{id}/{}/shard-{}", c.name, p.shard)))
                    .collect();
                cleanup::delete_uploaded(store, id, &prefixes).await?;
                return Err(RouterError::Callee(ApiError::new(
                    ErrorCode::Cancelled,
                    "the snapshot was cancelled; what it had uploaded under its id is deleted",
                )));
            }
        };
        let mut by_collection: BTreeMap<String, Vec<ReplicaSnapshot>> = BTreeMap::new();
        for r in results {
            let (collection, replica) = r?;
            by_collection.entry(collection).or_default().push(replica);
        }

        let meta_state = pb::ClusterState {
            version: plan.meta_version,
            collections: plan.chosen.clone(),
            api_keys: plan.api_keys.clone(),
            ..Default::default()
        }
        .encode_to_vec();
        let mut manifest = ClusterManifest {
            format: CLUSTER_SNAPSHOT_FORMAT,
            id: id.clone(),
            created_ms: plan.created_ms,
            meta_version: plan.meta_version,
            meta_state_sha256: sha256_hex(&meta_state),
            collections: plan
                .chosen
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
            blobs: BLOBS.to_string(),
            checksum: String::new(),
        };
        store
            .put_bytes(&format!("{id}/{META_STATE}"), meta_state)
            .await
            .map_err(|e| from_store("destination", e))?;
        // Last: a snapshot with its manifest is complete.
        store
            .put_bytes(&format!("{id}/{CLUSTER_MANIFEST}"), manifest.encode())
            .await
            .map_err(|e| from_store("destination", e))?;
        info!(snapshot = %id, bytes = manifest.total_bytes(), skipped_bytes = manifest.skipped_bytes(),
            event = "snapshot_created", "cluster snapshot complete");
        if let Some(keep) = plan.keep {
            self.prune_snapshots(
                store,
                &plan.destination,
                keep.max(1) as usize,
                &tracker.id(),
            )
            .await?;
        }
        Ok(manifest)
    }

    /// One replica of the shard snapshotted and uploaded: the first candidate (live ones first) that manages.
    /// A write acknowledged by a quorum smaller than the replica set may be missing on any one replica, so the
    /// chosen one first catches up from enough of the others to meet every quorum.
    async fn snapshot_replica(
        &self,
        replicas: ShardReplicas<'_>,
        destination: &str,
        prefix: String,
        tracker: &JobTracker,
        request_id: &str,
    ) -> Result<ReplicaSnapshot, RouterError> {
        let ShardReplicas {
            collection,
            stored_name,
            shard,
            all,
            candidates,
        } = replicas;
        let catch_up_needed = (all.len() - self.shared.write_quorum(all.len())) as u32;
        let mut candidates: Vec<_> = candidates
            .iter()
            .filter_map(|n| self.shared.view.endpoint(*n))
            .collect();
        candidates.sort_by_key(|(_, alive)| !alive);
        let mut last_error = format!("no replica of shard {shard} of `{collection}` is reachable");
        for (endpoint, _) in candidates {
            let call = ShardCall::SnapshotShard {
                request_id: request_id.to_string(),
                req: pb::SnapshotShardRequest {
                    collection: stored_name.to_string(),
                    shard,
                    destination: destination.to_string(),
                    prefix: prefix.clone(),
                    peers: all
                        .iter()
                        .filter(|n| **n != endpoint.node_id)
                        .filter_map(|n| self.shared.view.endpoint(*n))
                        .map(|(e, _)| e.address)
                        .collect(),
                    catch_up_needed,
                    blobs: BLOBS.to_string(),
                },
            };
            tracker.started(collection, shard, endpoint.node_id);
            let response = endpoint
                .call_long(call, REPLICA_TRANSFER_LIMIT)
                .await
                .and_then(pb::SnapshotShardResponse::try_from);
            let sent = response
                .as_ref()
                .map_or((0, 0), |r| (r.bytes_sent, r.bytes_skipped));
            tracker.finished(collection, shard, endpoint.node_id, response.is_ok(), sent);
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
                        skipped_bytes: r.bytes_skipped,
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
    pub async fn progress(
        &self,
        source: &str,
        id: &str,
    ) -> Result<Vec<ReplicaProgress>, RouterError> {
        if let Some(problem) = id_problem(id) {
            return Err(RouterError::invalid("id", problem));
        }
        let store = open_store(&self.destinations, source, "from")?;
        let mut by_replica: BTreeMap<(String, u32), ReplicaProgress> = BTreeMap::new();
        let mut manifests = Vec::new();
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
            if rest == REPLICA_MANIFEST {
                entry.complete = true;
                manifests.push((key.clone(), size, (collection.to_string(), shard)));
            }
        }
        // Content-addressed replicas (format 2) keep only their manifest under the prefix: count the files
        // it names.
        for (key, size, replica) in manifests {
            let named = store
                .get_bytes(&key)
                .await
                .map_err(|e| from_store("from", e))?
                .and_then(|b| serde_json::from_slice::<ReplicaManifest>(&b).ok())
                .map_or(0, |m| m.files.iter().map(|f| f.bytes).sum::<u64>());
            if let Some(entry) = by_replica.get_mut(&replica) {
                entry.bytes = entry.bytes.max(named + size);
            }
        }
        // Nothing there yet is a snapshot that does not exist, unless a create of it is only starting.
        if by_replica.is_empty()
            && store
                .list_objects(id)
                .await
                .map_err(|e| from_store("from", e))?
                .is_empty()
        {
            let starting = self.jobs().await?.iter().any(|j| {
                j.kind == crate::snapshot_jobs::JobKind::Create
                    && j.state == crate::snapshot_jobs::JobState::Running
                    && j.snapshot == id
                    && j.location == source
            });
            if !starting {
                return Err(RouterError::NotFound(format!(
                    "no snapshot `{id}` in {source}"
                )));
            }
        }
        Ok(by_replica.into_values().collect())
    }

    /// Every snapshot in `source`, newest id last; incomplete ones (no manifest yet) are left out, damaged ones
    /// listed with their problem: a manifest that does not check, or a file it names (through the replica
    /// manifests) missing or of another size — what restore would refuse before moving a byte.
    pub async fn list(&self, source: &str) -> Result<Vec<ListedSnapshot>, RouterError> {
        let store = open_store(&self.destinations, source, "from")?;
        let mut out = Vec::new();
        for id in store
            .list_dirs("")
            .await
            .map_err(|e| from_store("from", e))?
        {
            // A link may lead anywhere (a node's data directory): only the destination's own folders are read.
            if store.entry_problem(&id).is_some() {
                continue;
            }
            match read_manifest(&store, &id).await {
                Ok(m) => {
                    let problem = restore::check_files(&store, &m).await.err();
                    out.push(ListedSnapshot {
                        id,
                        manifest: Some(m),
                        problem: problem.map(|e| e.to_string()),
                    })
                }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_single_safe_names_and_default_to_the_utc_time() {
        assert_eq!(default_id(0), "snapshot-19700101T000000Z");
        assert_eq!(default_id(1_795_600_000_000), "snapshot-20261125T094640Z");
        assert!(id_problem(&default_id(attest_core::clock::unix_ms())).is_none());
        for bad in ["", ".hidden", "a/b", "a b", "..", "blobs", &"x".repeat(129)] {
            assert!(id_problem(bad).is_some(), "{bad:?}");
        }
    }
}
