//! The replicated state machine: pure data plus a deterministic `apply`.
//!
//! Every meta node applies the same committed [`Command`]s in the same order and so holds the same
//! [`StateMachine`]. Nothing here reads a clock or the network: the leader puts the time and the set of live
//! nodes into the command before proposing it. A refused command ([`StateError`]) leaves the state unchanged
//! on every replica. A snapshot is the bincode encoding of the whole state (`BTreeMap`s: byte-identical on
//! every replica).
//!
//! Between snapshots the state is stored as one RocksDB record per node, collection, key and manifest
//! (`records`): every mutation below marks the record it touched, and after an apply the Raft loop writes
//! only those ([`StateMachine::take_changes`]).
//!
//! Collections are keyed by their stored name: a user's collection name, or `name~tag` for a copy of
//! collection `name` (a re-embedding's new index); an alias points a name at the copy that replaced the
//! collection ([`crate::aliases`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::drain::DrainKind;
use crate::error::StateError;
use crate::jobs::SnapshotJobRecord;
use crate::placement::{self, Candidate, Move, ShardReplicas};
use crate::records::RecordKey;

mod command;
mod validate;
pub use command::{Command, Output};
pub use validate::{scope_name, validate_collection_name, validate_key, validate_key_hash};

/// Default replication factor when a create request says 0 (the one rule of `attest_core::limits`).
pub const DEFAULT_REPLICATION: u32 = attest_core::limits::DEFAULT_REPLICATION;

/// Role of a data-plane node (mirrors `attest.v1.NodeRole`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeRole {
    Shard,
    Router,
    Answer,
}

/// A registered data-plane node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRecord {
    pub id: u64,
    /// Stable name; re-registering with it keeps the id.
    pub name: String,
    pub address: String,
    pub role: NodeRole,
    pub zone: String,
}

/// Index parameters of a collection (mirrors `attest.v1.IndexParams`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct IndexParamsRecord {
    pub nlist: u32,
    pub m: u32,
    pub nbits: u32,
    pub nprobe: u32,
}

/// Collection spec (mirrors `attest.v1.CollectionSpec`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct SpecRecord {
    pub dimension: u32,
    pub index: Option<IndexParamsRecord>,
    pub seal_threshold: u64,
    pub embedder: String,
}

/// What a create request asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectionDef {
    pub name: String,
    pub shards: u32,
    /// 0: [`DEFAULT_REPLICATION`].
    pub replication: u32,
    pub spec: Option<SpecRecord>,
    pub chunking_json: String,
    pub thresholds_json: String,
}

/// A collection and its shard map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectionRecord {
    pub name: String,
    pub shards: u32,
    pub replication: u32,
    pub spec: Option<SpecRecord>,
    /// One entry per shard, in shard order.
    pub placement: Vec<ShardReplicas>,
    pub chunking_json: String,
    pub thresholds_json: String,
    pub created_ms: u64,
}

/// A hashed API key and its grant (the key itself is never stored; see `attest_core::keys`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKeyRecord {
    /// Lowercase hex sha256 of the key.
    pub key_sha256: String,
    /// The public key id (`attest_core::keys::KEY_ID_HEX` hex digits), unique among keys.
    pub id: String,
    /// `attest.v1.Scope` values.
    pub scopes: Vec<i32>,
    /// Tenant names or `*`.
    pub tenants: Vec<String>,
    /// Collections the key may act on; empty = all.
    pub collections: Vec<String>,
    /// Unix ms after which the key is refused; 0 = never.
    pub expires_at_ms: u64,
    pub created_ms: u64,
    pub revoked: bool,
    /// The id of the key that minted this one ("" for the bootstrap admin key's). Not in the serde derive, so
    /// that logs, snapshots and records written before it still decode: a log entry carries it in
    /// [`Command::PutChildApiKey`], a snapshot after its other extensions, a record after the key's fields.
    #[serde(skip)]
    pub parent_id: String,
}

/// The sealed segments a shard node reported for one replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestRecord {
    pub collection: String,
    pub shard: u32,
    pub node_id: u64,
    pub segments: Vec<String>,
    pub live_documents: u64,
}

fn check_collection_def(def: &CollectionDef) -> Result<(), StateError> {
    validate_collection_name(&def.name)?;
    if def.shards == 0 {
        return Err(StateError::InvalidArgument(
            "shards must be at least 1".into(),
        ));
    }
    Ok(())
}

fn replication_of(def: &CollectionDef) -> u32 {
    if def.replication == 0 {
        DEFAULT_REPLICATION
    } else {
        def.replication
    }
}

/// The fields of [`StateMachine`] that snapshots carry after its serde fields.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct SnapshotExtension {
    draining: BTreeMap<u64, DrainKind>,
}

/// The fields snapshots carry after [`SnapshotExtension`] (absent from a snapshot written before them).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct SnapshotJobsExtension {
    snapshot_jobs: BTreeMap<String, SnapshotJobRecord>,
}

/// The fields snapshots carry after [`SnapshotJobsExtension`]: each minted key's parent (key sha256 → parent id,
/// keys without one left out).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct SnapshotKeyParentsExtension {
    key_parents: BTreeMap<String, String>,
}

/// The fields snapshots carry after [`SnapshotKeyParentsExtension`] (absent from a snapshot written before
/// aliases).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct SnapshotAliasesExtension {
    aliases: BTreeMap<String, String>,
}

/// The whole replicated metadata.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StateMachine {
    /// Raft voters (id → gRPC address), from the initial peers and the conf-change contexts.
    pub voters: BTreeMap<u64, String>,
    pub nodes: BTreeMap<u64, NodeRecord>,
    /// Last node id handed out (ids are never reused).
    pub last_node_id: u64,
    pub collections: BTreeMap<String, CollectionRecord>,
    /// Keyed by (collection, shard, node id).
    pub manifests: BTreeMap<(String, u32, u64), ManifestRecord>,
    /// Keyed by the key's sha256 (hex).
    pub api_keys: BTreeMap<String, ApiKeyRecord>,
    /// Shard nodes being drained (node id → why; see [`crate::drain`]). Not in the serde derive: snapshots
    /// carry it after the fields above ([`StateMachine::encode`]), so a snapshot written before it still decodes.
    #[serde(skip)]
    pub draining: BTreeMap<u64, DrainKind>,
    /// Snapshot jobs by id ([`crate::jobs`]); carried by snapshots after `draining`.
    #[serde(skip)]
    pub snapshot_jobs: BTreeMap<String, SnapshotJobRecord>,
    /// Collection names that resolve to a collection stored under another name (name → stored name
    /// `name~tag`; see [`crate::aliases`]); carried by snapshots after the keys' parents.
    #[serde(skip)]
    pub aliases: BTreeMap<String, String>,
    /// Records changed since the last [`StateMachine::take_changes`]: what the next persist writes. Local
    /// bookkeeping, not part of the replicated value: never serialized (snapshots and the legacy blob keep
    /// their format) and ignored by `==`.
    #[serde(skip)]
    pub(crate) changes: BTreeSet<RecordKey>,
}

/// Equality of the replicated value only (`changes` is bookkeeping). The destructuring makes a new field a
/// compile error here until it is compared.
impl PartialEq for StateMachine {
    fn eq(&self, other: &Self) -> bool {
        let StateMachine {
            voters,
            nodes,
            last_node_id,
            collections,
            manifests,
            api_keys,
            draining,
            snapshot_jobs,
            aliases,
            changes: _,
        } = self;
        *voters == other.voters
            && *nodes == other.nodes
            && *last_node_id == other.last_node_id
            && *collections == other.collections
            && *manifests == other.manifests
            && *api_keys == other.api_keys
            && *draining == other.draining
            && *snapshot_jobs == other.snapshot_jobs
            && *aliases == other.aliases
    }
}

impl Eq for StateMachine {}

impl StateMachine {
    /// A fresh state whose voters are the initial peers.
    pub fn with_voters(voters: impl IntoIterator<Item = (u64, String)>) -> Self {
        StateMachine {
            voters: voters.into_iter().collect(),
            ..Default::default()
        }
    }

    /// The snapshot encoding: the serde fields, then the fields added after snapshots existed
    /// ([`SnapshotExtension`]), so that an older snapshot (which ends after the serde fields) still decodes.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = bincode::serialize(self).expect("state always serializes");
        let extension = SnapshotExtension {
            draining: self.draining.clone(),
        };
        bytes.extend(bincode::serialize(&extension).expect("state always serializes"));
        let jobs = SnapshotJobsExtension {
            snapshot_jobs: self.snapshot_jobs.clone(),
        };
        bytes.extend(bincode::serialize(&jobs).expect("state always serializes"));
        let parents = SnapshotKeyParentsExtension {
            key_parents: self
                .api_keys
                .iter()
                .filter(|(_, k)| !k.parent_id.is_empty())
                .map(|(sha, k)| (sha.clone(), k.parent_id.clone()))
                .collect(),
        };
        bytes.extend(bincode::serialize(&parents).expect("state always serializes"));
        let aliases = SnapshotAliasesExtension {
            aliases: self.aliases.clone(),
        };
        bytes.extend(bincode::serialize(&aliases).expect("state always serializes"));
        bytes
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, bincode::Error> {
        let mut rest = bytes;
        let mut state: StateMachine = bincode::deserialize_from(&mut rest)?;
        if !rest.is_empty() {
            let extension: SnapshotExtension = bincode::deserialize_from(&mut rest)?;
            state.draining = extension.draining;
        }
        if !rest.is_empty() {
            let jobs: SnapshotJobsExtension = bincode::deserialize_from(&mut rest)?;
            state.snapshot_jobs = jobs.snapshot_jobs;
        }
        if !rest.is_empty() {
            let parents: SnapshotKeyParentsExtension = bincode::deserialize_from(&mut rest)?;
            for (sha, parent_id) in parents.key_parents {
                if let Some(k) = state.api_keys.get_mut(&sha) {
                    k.parent_id = parent_id;
                }
            }
        }
        if !rest.is_empty() {
            let aliases: SnapshotAliasesExtension = bincode::deserialize_from(&mut rest)?;
            state.aliases = aliases.aliases;
        }
        Ok(state)
    }

    /// The records changed since the last call (each to be put, or deleted when it no longer exists).
    pub fn take_changes(&mut self) -> BTreeSet<RecordKey> {
        std::mem::take(&mut self.changes)
    }

    /// Applies a conf change that added a voter (its address from the entry's context).
    pub fn add_voter(&mut self, id: u64, address: String) {
        self.voters.insert(id, address);
        self.changes.insert(RecordKey::Voter(id));
    }

    pub fn remove_voter(&mut self, id: u64) {
        self.voters.remove(&id);
        self.changes.insert(RecordKey::Voter(id));
    }

    /// Removes the manifests `gone` selects, marking each removed one.
    pub(crate) fn remove_manifests(&mut self, gone: impl Fn(&(String, u32, u64)) -> bool) {
        let changes = &mut self.changes;
        self.manifests.retain(|key, _| {
            if gone(key) {
                changes.insert(RecordKey::Manifest(key.0.clone(), key.1, key.2));
                false
            } else {
                true
            }
        });
    }

    /// Replicas per node over every collection (LEAVING replicas included: they still hold data).
    pub fn node_loads(&self) -> BTreeMap<u64, u64> {
        let mut load = BTreeMap::new();
        for c in self.collections.values() {
            for s in &c.placement {
                for r in &s.replicas {
                    *load.entry(r.node_id).or_default() += 1;
                }
            }
        }
        load
    }

    /// Every shard of every collection, for the rebalance planner.
    pub fn all_shards(&self) -> impl Iterator<Item = (&str, &ShardReplicas)> {
        self.collections
            .values()
            .flat_map(|c| c.placement.iter().map(move |s| (c.name.as_str(), s)))
    }

    /// Applies one command. On error nothing changed.
    pub fn apply(&mut self, cmd: &Command) -> Result<Output, StateError> {
        match cmd {
            Command::RegisterNode {
                name,
                address,
                role,
                zone,
            } => Ok(Output::Node(
                self.register_node(name, address, *role, zone)?,
            )),
            Command::CreateCollection {
                def,
                live_nodes,
                created_ms,
            } => Ok(Output::Collection(self.create_collection(
                def,
                live_nodes,
                *created_ms,
            )?)),
            Command::CreateCollectionPlaced {
                def,
                placement,
                created_ms,
            } => Ok(Output::Collection(self.create_collection_placed(
                def,
                placement,
                *created_ms,
            )?)),
            Command::DropCollection { name } => Ok(Output::Dropped(self.drop_collection(name)?)),
            Command::SwitchCollection { name, to } => {
                Ok(Output::Collection(self.switch_collection(name, to)?))
            }
            Command::ReplicaCaughtUp {
                collection,
                shard,
                node_id,
            } => Ok(Output::Collection(
                self.replica_caught_up(collection, *shard, *node_id)?,
            )),
            Command::ApplyRebalance { moves } => Ok(Output::Moves(self.apply_moves(moves))),
            Command::PutChildApiKey { key, parent_id } => {
                let key = ApiKeyRecord {
                    parent_id: parent_id.clone(),
                    ..key.clone()
                };
                self.apply(&Command::PutApiKey { key })
            }
            Command::PutApiKey { key } => {
                validate_key(key)?;
                let id_taken = self
                    .api_keys
                    .values()
                    .any(|k| k.id == key.id && k.key_sha256 != key.key_sha256);
                if id_taken {
                    return Err(StateError::AlreadyExists(format!("key id {}", key.id)));
                }
                self.api_keys.insert(key.key_sha256.clone(), key.clone());
                self.changes
                    .insert(RecordKey::ApiKey(key.key_sha256.clone()));
                Ok(Output::Done)
            }
            Command::ReportManifests { manifests } => {
                for m in manifests {
                    // Reports about unknown nodes or dropped collections are stale: ignored.
                    if !self.nodes.contains_key(&m.node_id)
                        || !self.collections.contains_key(&m.collection)
                    {
                        continue;
                    }
                    self.manifests
                        .insert((m.collection.clone(), m.shard, m.node_id), m.clone());
                    self.changes.insert(RecordKey::Manifest(
                        m.collection.clone(),
                        m.shard,
                        m.node_id,
                    ));
                }
                Ok(Output::Done)
            }
            Command::SetNodeDraining { name, drain } => {
                Ok(Output::Node(self.set_node_draining(name, *drain)?))
            }
            Command::PutSnapshotJob(put) => self.put_snapshot_job(put),
            Command::CancelSnapshotJob { id } => self.cancel_snapshot_job(id),
            Command::SetThresholds {
                collection,
                thresholds_json,
            } => {
                // The router may name the collection by its alias.
                let stored = self.resolve_collection(collection).to_string();
                let c = self
                    .collections
                    .get_mut(&stored)
                    .ok_or_else(|| StateError::NotFound(format!("collection {collection:?}")))?;
                c.thresholds_json = thresholds_json.clone();
                let record = c.clone();
                self.changes.insert(RecordKey::Collection(stored));
                Ok(Output::Collection(record))
            }
        }
    }

    fn register_node(
        &mut self,
        name: &str,
        address: &str,
        role: NodeRole,
        zone: &str,
    ) -> Result<NodeRecord, StateError> {
        if name.is_empty() {
            return Err(StateError::InvalidArgument("node name is empty".into()));
        }
        let existing = self.nodes.values().find(|n| n.name == name).map(|n| n.id);
        let id = match existing {
            Some(id) => id,
            None => {
                self.last_node_id += 1;
                self.changes.insert(RecordKey::Meta);
                self.last_node_id
            }
        };
        let record = NodeRecord {
            id,
            name: name.to_string(),
            address: address.to_string(),
            role,
            zone: zone.to_string(),
        };
        self.nodes.insert(id, record.clone());
        self.changes.insert(RecordKey::Node(id));
        self.end_drain_on_registration(id);
        Ok(record)
    }

    fn create_collection(
        &mut self,
        def: &CollectionDef,
        live_nodes: &[u64],
        created_ms: u64,
    ) -> Result<CollectionRecord, StateError> {
        self.check_new_collection(def)?;
        let record = self.plan_collection(def, live_nodes, created_ms)?;
        self.collections.insert(def.name.clone(), record.clone());
        self.changes.insert(RecordKey::Collection(def.name.clone()));
        Ok(record)
    }

    /// [`Self::create_collection`] with the placement given: every shard names `replication` distinct
    /// registered shard nodes.
    fn create_collection_placed(
        &mut self,
        def: &CollectionDef,
        placement: &[ShardReplicas],
        created_ms: u64,
    ) -> Result<CollectionRecord, StateError> {
        self.check_new_collection(def)?;
        let replication = replication_of(def);
        let placement_problem = if placement.len() != def.shards as usize {
            Some(format!(
                "placement names {} shards, the collection has {}",
                placement.len(),
                def.shards
            ))
        } else {
            placement.iter().enumerate().find_map(|(i, s)| {
                let nodes: BTreeSet<u64> = s.replicas.iter().map(|r| r.node_id).collect();
                if s.shard != i as u32 {
                    Some(format!("placement entry {i} is for shard {}", s.shard))
                } else if nodes.len() != s.replicas.len() || nodes.len() != replication as usize {
                    Some(format!(
                        "shard {i} needs {replication} distinct nodes, placement names {:?}",
                        nodes
                    ))
                } else {
                    nodes
                        .iter()
                        .find(|id| self.nodes.get(id).is_none_or(|n| n.role != NodeRole::Shard))
                        .map(|id| format!("shard {i}: node {id} is not a registered shard node"))
                }
            })
        };
        if let Some(problem) = placement_problem {
            return Err(StateError::InvalidArgument(problem));
        }
        let record = CollectionRecord {
            name: def.name.clone(),
            shards: def.shards,
            replication,
            spec: def.spec.clone(),
            placement: placement
                .iter()
                .map(|s| ShardReplicas::active(s.shard, s.replicas.iter().map(|r| r.node_id)))
                .collect(),
            chunking_json: def.chunking_json.clone(),
            thresholds_json: def.thresholds_json.clone(),
            created_ms,
        };
        self.collections.insert(def.name.clone(), record.clone());
        self.changes.insert(RecordKey::Collection(def.name.clone()));
        Ok(record)
    }

    fn check_new_collection(&self, def: &CollectionDef) -> Result<(), StateError> {
        check_collection_def(def)?;
        if self.collections.contains_key(&def.name) {
            return Err(StateError::AlreadyExists(format!(
                "collection {:?}",
                def.name
            )));
        }
        self.check_new_stored_name(&def.name)
    }

    /// The collection `create_collection` would record now (placement chosen over the live shard nodes), without
    /// recording it: a dry run answers this, also for a name in use (a restore plans before it replaces).
    pub fn plan_collection(
        &self,
        def: &CollectionDef,
        live_nodes: &[u64],
        created_ms: u64,
    ) -> Result<CollectionRecord, StateError> {
        check_collection_def(def)?;
        let replication = replication_of(def);
        let live: BTreeSet<u64> = live_nodes.iter().copied().collect();
        let loads = self.node_loads();
        let candidates: Vec<Candidate> = self
            .placement_targets(&live)
            .into_iter()
            .map(|id| Candidate {
                id,
                zone: self.nodes[&id].zone.clone(),
                load: loads.get(&id).copied().unwrap_or(0),
            })
            .collect();
        let placement = placement::place(&candidates, def.shards, replication)?
            .into_iter()
            .enumerate()
            .map(|(shard, ids)| ShardReplicas::active(shard as u32, ids))
            .collect();
        let record = CollectionRecord {
            name: def.name.clone(),
            shards: def.shards,
            replication,
            spec: def.spec.clone(),
            placement,
            chunking_json: def.chunking_json.clone(),
            thresholds_json: def.thresholds_json.clone(),
            created_ms,
        };
        Ok(record)
    }

    fn replica_caught_up(
        &mut self,
        collection: &str,
        shard: u32,
        node_id: u64,
    ) -> Result<CollectionRecord, StateError> {
        let c = self
            .collections
            .get_mut(collection)
            .ok_or_else(|| StateError::NotFound(format!("collection {collection:?}")))?;
        let s = c
            .placement
            .iter_mut()
            .find(|s| s.shard == shard)
            .ok_or_else(|| StateError::NotFound(format!("shard {shard} of {collection:?}")))?;
        if !placement::caught_up(s, node_id) {
            return Err(StateError::NotFound(format!(
                "node {node_id} holds no replica of {collection:?} shard {shard}"
            )));
        }
        // Manifests of replicas that left the map are no longer meaningful.
        let holders: BTreeSet<u64> = s.replicas.iter().map(|r| r.node_id).collect();
        let record = c.clone();
        self.changes
            .insert(RecordKey::Collection(collection.to_string()));
        self.remove_manifests(|(col, sh, n)| {
            col == collection && *sh == shard && !holders.contains(n)
        });
        Ok(record)
    }

    /// Applies the legal moves (a stale plan may contain moves that no longer apply) and returns them.
    fn apply_moves(&mut self, moves: &[Move]) -> Vec<Move> {
        let mut applied = Vec::new();
        for m in moves {
            let target_is_shard_node = self
                .nodes
                .get(&m.to_node)
                .is_some_and(|n| n.role == NodeRole::Shard);
            let Some(c) = self.collections.get_mut(&m.collection) else {
                continue;
            };
            let Some(s) = c.placement.iter_mut().find(|s| s.shard == m.shard) else {
                continue;
            };
            if target_is_shard_node
                && !s.has_pending_move()
                && placement::apply_move(s, m.from_node, m.to_node)
            {
                self.changes
                    .insert(RecordKey::Collection(m.collection.clone()));
                applied.push(m.clone());
            }
        }
        applied
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{Replica, ReplicaState};
    use attest_core::limits::owner_of_stored_name;
    use proptest::prelude::*;

    fn register(s: &mut StateMachine, name: &str, zone: &str) -> u64 {
        match s
            .apply(&Command::RegisterNode {
                name: name.into(),
                address: format!("http://{name}"),
                role: NodeRole::Shard,
                zone: zone.into(),
            })
            .unwrap()
        {
            Output::Node(n) => n.id,
            other => panic!("{other:?}"),
        }
    }

    fn def(name: &str, shards: u32, replication: u32) -> CollectionDef {
        CollectionDef {
            name: name.into(),
            shards,
            replication,
            spec: None,
            chunking_json: String::new(),
            thresholds_json: String::new(),
        }
    }

    #[test]
    fn same_name_keeps_its_id_and_ids_grow() {
        let mut s = StateMachine::default();
        let a = register(&mut s, "a", "");
        let b = register(&mut s, "b", "");
        assert_eq!((a, b), (1, 2));
        assert_eq!(register(&mut s, "a", "z9"), 1);
        assert_eq!(s.nodes[&1].zone, "z9");
        assert_eq!(register(&mut s, "c", ""), 3);
    }

    #[test]
    fn create_places_and_refuses_duplicates_and_missing_nodes() {
        let mut s = StateMachine::default();
        let ids: Vec<u64> = ["a", "b", "c"]
            .iter()
            .map(|n| register(&mut s, n, ""))
            .collect();
        let cmd = |d: CollectionDef, live: &[u64]| Command::CreateCollection {
            def: d,
            live_nodes: live.to_vec(),
            created_ms: 7,
        };
        let Output::Collection(c) = s.apply(&cmd(def("docs", 3, 0), &ids)).unwrap() else {
            panic!()
        };
        assert_eq!(c.replication, DEFAULT_REPLICATION);
        assert_eq!(c.placement.len(), 3);
        let before = s.clone();
        assert!(matches!(
            s.apply(&cmd(def("docs", 1, 1), &ids)),
            Err(StateError::AlreadyExists(_))
        ));
        assert!(matches!(
            s.apply(&cmd(def("other", 1, 2), &ids[..1])),
            Err(StateError::FailedPrecondition(_))
        ));
        assert_eq!(s, before, "a refused command changes nothing");
        assert_eq!(
            s.apply(&Command::DropCollection {
                name: "docs".into()
            }),
            Ok(Output::Dropped(true))
        );
        assert_eq!(
            s.apply(&Command::DropCollection {
                name: "docs".into()
            }),
            Ok(Output::Dropped(false))
        );
    }

    #[test]
    fn a_given_placement_is_recorded_as_planned_and_checked() {
        let mut s = StateMachine::default();
        let ids: Vec<u64> = ["a", "b", "c"]
            .iter()
            .map(|n| register(&mut s, n, ""))
            .collect();
        let planned = s.plan_collection(&def("docs", 2, 2), &ids, 7).unwrap();
        assert!(s.collections.is_empty(), "planning records nothing");
        let placed =
            |d: CollectionDef, placement: Vec<ShardReplicas>| Command::CreateCollectionPlaced {
                def: d,
                placement,
                created_ms: 7,
            };
        let shard = |n: u32, nodes: &[u64]| ShardReplicas {
            shard: n,
            replicas: nodes
                .iter()
                .map(|&node_id| Replica {
                    node_id,
                    state: ReplicaState::Active,
                })
                .collect(),
        };
        let before = s.clone();
        for (bad, why) in [
            (vec![shard(0, &ids[..2])], "too few shards"),
            (
                vec![shard(0, &ids[..2]), shard(1, &ids[..1])],
                "too few replicas",
            ),
            (
                vec![shard(0, &ids[..2]), shard(1, &[ids[0], ids[0]])],
                "same node twice",
            ),
            (
                vec![shard(0, &ids[..2]), shard(1, &[ids[0], 99])],
                "unknown node",
            ),
            (
                vec![shard(1, &ids[..2]), shard(0, &ids[1..])],
                "out of order",
            ),
        ] {
            assert!(
                matches!(
                    s.apply(&placed(def("docs", 2, 2), bad)),
                    Err(StateError::InvalidArgument(_))
                ),
                "{why}"
            );
        }
        assert_eq!(s, before, "a refused placement changes nothing");
        let Output::Collection(c) = s
            .apply(&placed(def("docs", 2, 2), planned.placement.clone()))
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(c, planned);
    }

    #[test]
    fn rebalance_then_caught_up_moves_a_replica() {
        let mut s = StateMachine::default();
        let ids: Vec<u64> = ["a", "b"].iter().map(|n| register(&mut s, n, "")).collect();
        s.apply(&Command::CreateCollection {
            def: def("docs", 2, 2),
            live_nodes: ids.clone(),
            created_ms: 0,
        })
        .unwrap();
        let c = register(&mut s, "c", "");
        let moves =
            placement::plan_rebalance(s.all_shards(), &[ids[0], ids[1], c], &BTreeSet::new());
        assert_eq!(moves.len(), 1);
        let Ok(Output::Moves(applied)) = s.apply(&Command::ApplyRebalance {
            moves: moves.clone(),
        }) else {
            panic!()
        };
        assert_eq!(applied, moves);
        // Applying the same plan twice is harmless: the shard has a move in flight.
        assert_eq!(
            s.apply(&Command::ApplyRebalance {
                moves: moves.clone()
            }),
            Ok(Output::Moves(vec![]))
        );
        let m = &moves[0];
        let Output::Collection(col) = s
            .apply(&Command::ReplicaCaughtUp {
                collection: "docs".into(),
                shard: m.shard,
                node_id: c,
            })
            .unwrap()
        else {
            panic!()
        };
        let shard = &col.placement[m.shard as usize];
        assert!(shard.has_node(c) && !shard.has_node(m.from_node));
        assert!(!shard.has_pending_move());
    }

    #[test]
    fn key_hash_is_validated() {
        let mut s = StateMachine::default();
        let key = |h: &str| Command::PutApiKey {
            key: ApiKeyRecord {
                key_sha256: h.into(),
                id: "0123456789ab".into(),
                scopes: vec![1],
                tenants: vec!["t".into()],
                ..Default::default()
            },
        };
        assert!(s.apply(&key("nothex")).is_err());
        assert!(s.apply(&key(&"ab".repeat(32))).is_ok());
        assert_eq!(s.api_keys.len(), 1);
        // The same id under another secret is refused; an unknown scope or no tenant too.
        assert!(s.apply(&key(&"cd".repeat(32))).is_err());
        let mut bad = ApiKeyRecord {
            key_sha256: "ef".repeat(32),
            id: "ba9876543210".into(),
            scopes: vec![7],
            tenants: vec!["t".into()],
            ..Default::default()
        };
        assert!(s.apply(&Command::PutApiKey { key: bad.clone() }).is_err());
        bad.scopes = vec![2];
        bad.tenants.clear();
        assert!(s.apply(&Command::PutApiKey { key: bad }).is_err());
        assert_eq!(s.api_keys.len(), 1);
    }

    fn arb_command() -> impl Strategy<Value = Command> {
        let node = prop::sample::select(vec!["a", "b", "c", "d"]);
        // Copies (`a~r1`) among the collection names, and creates and switches weighted up, so that runs hold
        // copies and aliases (a switch needs a collection and its copy).
        let name = prop::sample::select(vec!["a", "b", "c", "a~r1", "a~r2", "b~r1"]);
        prop_oneof![
            2 => (node, "[a-z]{0,3}").prop_map(|(n, z)| Command::RegisterNode {
                name: n.into(),
                address: format!("http://{n}"),
                role: NodeRole::Shard,
                zone: z,
            }),
            4 => (
                name.clone(),
                1u32..4,
                0u32..3,
                prop::collection::vec(1u64..6, 0..5)
            )
                .prop_map(|(n, sh, r, live)| Command::CreateCollection {
                    def: def(n, sh, r),
                    live_nodes: live,
                    created_ms: 1,
                }),
            1 => name.clone()
                .prop_map(|n| Command::DropCollection { name: n.into() }),
            1 => (name.clone(), 0u32..4, 1u64..6).prop_map(|(n, sh, id)| Command::ReplicaCaughtUp {
                collection: n.into(),
                shard: sh,
                node_id: id,
            }),
            1 => (name.clone(), "[a-z]{0,3}").prop_map(|(n, t)| Command::SetThresholds {
                collection: n.into(),
                thresholds_json: t,
            }),
            3 => (prop::sample::select(vec!["a", "b"]), name).prop_map(|(n, to)| {
                Command::SwitchCollection {
                    name: n.into(),
                    to: to.into(),
                }
            }),
        ]
    }

    proptest! {
        #[test]
        fn apply_is_deterministic_and_snapshots_round_trip(
            cmds in prop::collection::vec(arb_command(), 0..40)
        ) {
            let mut a = StateMachine::with_voters([(1, "http://m1".to_string())]);
            // Nodes and a collection to start from: creating a copy and switching to it need them.
            let prelude = ["a", "b", "c"]
                .map(|n| Command::RegisterNode {
                    name: n.into(),
                    address: format!("http://{n}"),
                    role: NodeRole::Shard,
                    zone: String::new(),
                });
            for cmd in &prelude {
                a.apply(cmd).unwrap();
            }
            a.apply(&Command::CreateCollection {
                def: def("a", 2, 2),
                live_nodes: vec![1, 2, 3],
                created_ms: 1,
            })
            .unwrap();
            let mut b = a.clone();
            for cmd in &cmds {
                let bytes = cmd.encode();
                let ra = a.apply(cmd);
                let rb = b.apply(&Command::decode(&bytes).unwrap());
                prop_assert_eq!(ra, rb);
            }
            prop_assert_eq!(&a, &b);
            prop_assert_eq!(a.encode(), b.encode());
            prop_assert_eq!(StateMachine::decode(&a.encode()).unwrap(), a.clone());
            for c in a.collections.values() {
                for s in &c.placement {
                    let set: BTreeSet<u64> = s.replicas.iter().map(|r| r.node_id).collect();
                    prop_assert_eq!(set.len(), s.replicas.len());
                }
            }
            // What `crate::aliases` promises: an alias names an existing copy of its own name and is no
            // record's name; a copy's collection exists.
            for (name, to) in &a.aliases {
                prop_assert!(a.collections.contains_key(to));
                prop_assert!(!a.collections.contains_key(name));
                prop_assert_eq!(owner_of_stored_name(to), name.as_str());
                prop_assert_ne!(to, name);
            }
            for stored in a.collections.keys() {
                let owner = owner_of_stored_name(stored);
                prop_assert!(a.collections.contains_key(owner) || a.aliases.contains_key(owner));
            }
        }
    }

    #[test]
    fn snapshots_carry_the_aliases_and_older_snapshots_still_decode() {
        let mut s = StateMachine::default();
        s.api_keys.insert(
            "ab".repeat(32),
            ApiKeyRecord {
                key_sha256: "ab".repeat(32),
                id: "0123456789ab".into(),
                parent_id: "ba9876543210".into(),
                ..Default::default()
            },
        );
        s.aliases.insert("docs".into(), "docs~r1".into());
        assert_eq!(StateMachine::decode(&s.encode()).unwrap(), s);

        // A snapshot written before aliases ends after the keys' parents.
        let mut older = bincode::serialize(&s).unwrap();
        older.extend(bincode::serialize(&SnapshotExtension::default()).unwrap());
        older.extend(bincode::serialize(&SnapshotJobsExtension::default()).unwrap());
        let parents = SnapshotKeyParentsExtension {
            key_parents: BTreeMap::from([("ab".repeat(32), "ba9876543210".to_string())]),
        };
        older.extend(bincode::serialize(&parents).unwrap());
        let decoded = StateMachine::decode(&older).unwrap();
        assert!(decoded.aliases.is_empty());
        assert_eq!(decoded.api_keys, s.api_keys, "the parents still decode");
    }
}
