//! Where each collection's shards live and how to reach their replicas. Two sources:
//! - `Static`: a single-process deployment (`attest dev`, `attest serve --role router --shard-nodes ...`):
//!   a fixed list of shard nodes, the collection catalog in `catalog.json`, one replica per shard.
//! - `Cluster`: the shard map kept by meta under Raft, watched (polled) through the meta proto client. Node
//!   addresses, liveness and replica roles come from there; one tower stack per node
//!   ([`crate::replicas::ReplicaEndpoint`]) is kept across refreshes so that its concurrency limit holds.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use attest_proto::v1 as pb;
use attest_proto::MetaClient;
use parking_lot::RwLock;
use tracing::{info, warn};

use crate::catalog::{Catalog, CollectionRecord, IndexSettings, ReplicaRef, ReplicaRole};
use crate::client::ShardClient;
use crate::error::RouterError;
use crate::replicas::{ReplicaEndpoint, ReplicaPolicy};

pub enum Topology {
    Static {
        catalog: Catalog,
        /// Node `i` of every placement is `nodes[i]`.
        nodes: Vec<ReplicaEndpoint>,
    },
    Cluster(Arc<ClusterView>),
}

impl Topology {
    pub fn get(&self, name: &str) -> Result<CollectionRecord, RouterError> {
        match self {
            Topology::Static { catalog, .. } => catalog.get(name),
            Topology::Cluster(view) => view.get(name),
        }
    }

    pub fn list(&self) -> Vec<CollectionRecord> {
        match self {
            Topology::Static { catalog, .. } => catalog.list(),
            Topology::Cluster(view) => view.snapshot.read().collections.values().cloned().collect(),
        }
    }

    /// Replicas that can answer a search of `shard`, in the order to try them: live ones first, and the
    /// starting replica rotated per call so the load spreads over the replica set.
    pub fn read_replicas(&self, rec: &CollectionRecord, shard: usize) -> Vec<ReplicaEndpoint> {
        let refs: Vec<&ReplicaRef> = rec.placement[shard]
            .iter()
            .filter(|r| r.role.serves_reads())
            .collect();
        match self {
            Topology::Static { nodes, .. } => refs
                .iter()
                .filter_map(|r| nodes.get(r.node as usize).cloned())
                .collect(),
            Topology::Cluster(view) => view.ordered(&refs),
        }
    }

    /// Every replica a write to `shard` goes to (joining copies included).
    pub fn write_replicas(&self, rec: &CollectionRecord, shard: usize) -> Vec<ReplicaEndpoint> {
        let refs: Vec<&ReplicaRef> = rec.placement[shard].iter().collect();
        match self {
            Topology::Static { nodes, .. } => refs
                .iter()
                .filter_map(|r| nodes.get(r.node as usize).cloned())
                .collect(),
            Topology::Cluster(view) => {
                let snap = view.snapshot.read();
                refs.iter()
                    .filter_map(|r| snap.endpoints.get(&r.node).cloned())
                    .collect()
            }
        }
    }
}

/// The router's copy of meta's cluster state.
#[derive(Default)]
struct Snapshot {
    version: u64,
    collections: BTreeMap<String, CollectionRecord>,
    alive: HashMap<u64, bool>,
    endpoints: HashMap<u64, ReplicaEndpoint>,
}

pub struct ClusterView {
    meta: MetaClient,
    policy: ReplicaPolicy,
    snapshot: RwLock<Snapshot>,
    /// Spreads reads over replicas.
    next_start: AtomicUsize,
}

fn role_from_proto(state: i32) -> ReplicaRole {
    match pb::ReplicaState::try_from(state).unwrap_or(pb::ReplicaState::Active) {
        pb::ReplicaState::Joining => ReplicaRole::Joining,
        pb::ReplicaState::Leaving => ReplicaRole::Leaving,
        _ => ReplicaRole::Active,
    }
}

/// Meta's collection → the router's record.
pub fn record_from_meta(c: &pb::CollectionMeta) -> CollectionRecord {
    let spec = c.spec.clone().unwrap_or_default();
    let index = spec.index.unwrap_or_default();
    let mut placement = vec![Vec::new(); c.shards as usize];
    for p in &c.placement {
        if let Some(slot) = placement.get_mut(p.shard as usize) {
            *slot = p
                .replicas
                .iter()
                .map(|r| ReplicaRef {
                    node: r.node_id,
                    role: role_from_proto(r.state),
                })
                .collect();
        }
    }
    CollectionRecord {
        name: c.name.clone(),
        shards: c.shards,
        replication: c.replication,
        dimension: spec.dimension,
        index: IndexSettings {
            nlist: index.nlist,
            m: index.m,
            nbits: index.nbits,
            nprobe: index.nprobe,
        },
        seal_threshold: spec.seal_threshold,
        embedder: spec.embedder,
        placement,
    }
}

impl ClusterView {
    /// Reads the cluster state once (so the router starts with the shard map) and returns the view.
    pub async fn connect(
        meta: MetaClient,
        policy: ReplicaPolicy,
    ) -> Result<Arc<Self>, RouterError> {
        let view = Arc::new(ClusterView {
            meta,
            policy,
            snapshot: RwLock::new(Snapshot::default()),
            next_start: AtomicUsize::new(0),
        });
        view.refresh(false).await?;
        Ok(view)
    }

    pub fn meta(&self) -> &MetaClient {
        &self.meta
    }

    /// Re-reads the cluster state from meta and applies it (keeps the tower stack of every known node).
    pub async fn refresh(&self, linearizable: bool) -> Result<(), RouterError> {
        let state = self
            .meta
            .cluster_state(linearizable)
            .await
            .map_err(RouterError::from_status)?;
        self.apply(&state);
        Ok(())
    }

    fn apply(&self, state: &pb::ClusterState) {
        let mut snap = self.snapshot.write();
        if state.version < snap.version {
            return; // an older state from a lagging meta follower
        }
        // Liveness is soft state outside the Raft log: it can change at the same version, so it is taken from
        // every poll; the map and the node list change only with the version.
        snap.alive = state.nodes.iter().map(|n| (n.id, n.alive)).collect();
        if state.version == snap.version && snap.version != 0 {
            return;
        }
        snap.version = state.version;
        snap.collections = state
            .collections
            .iter()
            .map(|c| (c.name.clone(), record_from_meta(c)))
            .collect();
        for n in state
            .nodes
            .iter()
            .filter(|n| n.role == pb::NodeRole::Shard as i32)
        {
            let stale = snap
                .endpoints
                .get(&n.id)
                .is_none_or(|e| e.address != n.address);
            if stale {
                match ShardClient::connect_lazy(&n.address) {
                    Ok(client) => {
                        let endpoint = ReplicaEndpoint::new(n.id, &n.address, client, &self.policy);
                        snap.endpoints.insert(n.id, endpoint);
                    }
                    Err(e) => {
                        warn!(node = n.id, address = %n.address, error = %e, event = "bad_node_address", "node address unusable")
                    }
                }
            }
        }
        info!(
            version = state.version,
            collections = snap.collections.len(),
            nodes = snap.endpoints.len(),
            event = "shard_map_updated",
            "cluster state applied"
        );
    }

    /// Polls meta every `interval` while the view is in use (stops once the router is dropped).
    pub fn spawn_watch(self: &Arc<Self>, interval: Duration) -> tokio::task::JoinHandle<()> {
        let weak: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(view) = weak.upgrade() else { return };
                if let Err(e) = view.refresh(false).await {
                    warn!(error = %e, event = "meta_watch_failed", "cluster state not refreshed; keeping the last one");
                }
            }
        })
    }

    fn get(&self, name: &str) -> Result<CollectionRecord, RouterError> {
        self.snapshot
            .read()
            .collections
            .get(name)
            .cloned()
            .ok_or_else(|| RouterError::NotFound(format!("collection `{name}` does not exist")))
    }

    /// Applies a collection meta just returned by a write (so the caller sees its own write at once).
    pub fn insert(&self, c: &pb::CollectionMeta) {
        self.snapshot
            .write()
            .collections
            .insert(c.name.clone(), record_from_meta(c));
    }

    pub fn remove(&self, name: &str) {
        self.snapshot.write().collections.remove(name);
    }

    fn ordered(&self, refs: &[&ReplicaRef]) -> Vec<ReplicaEndpoint> {
        let snap = self.snapshot.read();
        let mut live = Vec::new();
        let mut rest = Vec::new();
        for r in refs {
            if let Some(e) = snap.endpoints.get(&r.node) {
                if snap.alive.get(&r.node).copied().unwrap_or(true) {
                    live.push(e.clone());
                } else {
                    rest.push(e.clone());
                }
            }
        }
        if !live.is_empty() {
            let start = self.next_start.fetch_add(1, Ordering::Relaxed) % live.len();
            live.rotate_left(start);
        }
        live.extend(rest);
        live
    }
}
