//! Where each collection's shards live and how to reach their replicas: the shard map kept by meta under Raft,
//! followed through the meta proto client (a watch by version, see [`StateFollower`]). Node addresses, liveness and replica roles come from there;
//! one tower stack per node ([`crate::replicas::ReplicaEndpoint`]) is kept across refreshes so that its
//! concurrency limit holds. A process that hosts some shard nodes itself (`attest dev`) hands their in-process
//! clients over by address, and calls them without a network hop.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::Duration;

use attest_auth::KeyRing;
use attest_core::limits;
use attest_proto::v1 as pb;
use attest_proto::{FollowMode, MetaClient, StateFollower};
use parking_lot::RwLock;
use tracing::{info, warn};

use crate::client::ShardClient;
use crate::collection::{caller_names, record_from_meta, CollectionRecord, ReplicaRef};
use crate::error::RouterError;
use crate::replicas::{ReadFrom, ReplicaEndpoint, ReplicaPolicy};

/// Meta's collections as callers name them, and the copies being built: a collection stored under its own name
/// is itself; an alias is the collection it resolves to, under the alias; a collection stored as `name~tag`
/// that no alias names is the copy a re-embedding of `name` is building (hidden from callers, written beside
/// `name`).
fn split_collections(
    state: &pb::ClusterState,
) -> (
    BTreeMap<String, CollectionRecord>,
    BTreeMap<String, CollectionRecord>,
) {
    let names = caller_names(state);
    let mut named = BTreeMap::new();
    let mut copies = BTreeMap::new();
    for c in &state.collections {
        let mut record = record_from_meta(c);
        match names.get(&c.name).cloned().flatten() {
            Some(name) => {
                record.name = name.clone();
                named.insert(name, record);
            }
            None => {
                copies.insert(limits::owner_of_stored_name(&c.name).to_string(), record);
            }
        }
    }
    // A copy of a collection that is gone is nobody's (meta drops them together; a moment's state may not).
    copies.retain(|owner, _| named.contains_key(owner));
    (named, copies)
}

/// The router's copy of meta's cluster state.
#[derive(Default)]
struct Snapshot {
    version: u64,
    /// By the name callers use (an alias shows the collection it resolves to under its own name).
    collections: BTreeMap<String, CollectionRecord>,
    /// The copy a re-embedding is building of each collection that has one, by the collection's name
    /// (its record under its stored name `name~tag`; see [`split_collections`]).
    copies: BTreeMap<String, CollectionRecord>,
    alive: HashMap<u64, bool>,
    /// Shard nodes being drained (meta's `NodeInfo.draining`): read from only when no other replica answers.
    draining: HashSet<u64>,
    endpoints: HashMap<u64, ReplicaEndpoint>,
}

pub struct ClusterView {
    meta: MetaClient,
    /// The API keys of the same state (authentication is off until the node enables it).
    keys: Arc<KeyRing>,
    policy: ReplicaPolicy,
    snapshot: RwLock<Snapshot>,
    /// With [`ReadFrom::Spread`], the next starting replica of each (collection, shard). Per shard, so that each
    /// shard's replicas take turns exactly; one counter for all shards let a fixed pattern of calls per search
    /// (shards × fan-outs) keep landing on the same replica of a shard.
    next_start: parking_lot::Mutex<HashMap<(String, usize), usize>>,
    /// In-process clients of the shard nodes this process hosts, by the address they registered with.
    local: HashMap<String, ShardClient>,
    /// `None` once a cluster state has been applied; until then, why not (what `/readyz` says).
    waiting: RwLock<Option<String>>,
}

impl ClusterView {
    /// Reads the cluster state once (so the router starts with the shard map) and returns the view.
    pub async fn connect(
        meta: MetaClient,
        policy: ReplicaPolicy,
    ) -> Result<Arc<Self>, RouterError> {
        Self::connect_with_local(meta, policy, HashMap::new()).await
    }

    /// Like [`ClusterView::connect`], with in-process clients for the shard nodes registered at these
    /// addresses (the others are reached over gRPC).
    pub async fn connect_with_local(
        meta: MetaClient,
        policy: ReplicaPolicy,
        local: HashMap<String, ShardClient>,
    ) -> Result<Arc<Self>, RouterError> {
        let view = Self::build(meta, policy, local);
        view.refresh(false).await?;
        Ok(view)
    }

    /// A view that has read nothing yet: it is not ready ([`ClusterView::readiness`]) until its watch
    /// ([`ClusterView::spawn_watch`]) has applied a state from meta. What a router started before meta answers
    /// uses, so that it listens, and says what it waits for, at once.
    pub fn unconnected(meta: MetaClient, policy: ReplicaPolicy) -> Arc<Self> {
        Self::build(meta, policy, HashMap::new())
    }

    fn build(
        meta: MetaClient,
        policy: ReplicaPolicy,
        local: HashMap<String, ShardClient>,
    ) -> Arc<Self> {
        let waiting = format!(
            "waiting for the cluster state from meta ({})",
            meta.addresses().join(", ")
        );
        let view = Arc::new(ClusterView {
            meta,
            keys: KeyRing::open(),
            policy,
            snapshot: RwLock::new(Snapshot::default()),
            next_start: parking_lot::Mutex::new(HashMap::new()),
            local,
            waiting: RwLock::new(Some(waiting)),
        });
        view.keys.refresh_from(&view.meta);
        view
    }

    /// `Ok` once the view holds a cluster state from meta (the shard map); else what it is waiting for.
    pub fn readiness(&self) -> Result<(), String> {
        match &*self.waiting.read() {
            None => Ok(()),
            Some(why) => Err(why.clone()),
        }
    }

    pub fn meta(&self) -> &MetaClient {
        &self.meta
    }

    /// The key ring this view keeps in step with meta.
    pub fn keys(&self) -> &Arc<KeyRing> {
        &self.keys
    }

    /// Re-reads the cluster state from meta, applies it (keeps the tower stack of every known node) and returns
    /// it, for a caller that needs the state at a known Raft index and the view brought up to it in one read.
    pub async fn refresh(&self, linearizable: bool) -> Result<pb::ClusterState, RouterError> {
        match self.meta.cluster_state(linearizable).await {
            Ok(state) => {
                self.accept(&state);
                Ok(state)
            }
            Err(status) => {
                self.note_unreachable(&status);
                Err(RouterError::from_status(status))
            }
        }
    }

    /// Applies a state read from meta; the view is ready from the first.
    fn accept(&self, state: &pb::ClusterState) {
        self.apply(state);
        *self.waiting.write() = None;
    }

    /// Until a first state is applied, readiness says why meta has not given one.
    fn note_unreachable(&self, status: &tonic::Status) {
        let mut waiting = self.waiting.write();
        if let Some(why) = waiting.as_mut() {
            *why = format!(
                "waiting for the cluster state from meta ({}): {}",
                self.meta.addresses().join(", "),
                status.message()
            );
        }
    }

    fn apply(&self, state: &pb::ClusterState) {
        self.keys.apply(state);
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
        snap.draining = state
            .nodes
            .iter()
            .filter(|n| n.draining != pb::NodeDrain::None as i32)
            .map(|n| n.id)
            .collect();
        (snap.collections, snap.copies) = split_collections(state);
        // Turn counters of dropped collections go with them.
        self.next_start
            .lock()
            .retain(|(collection, _), _| snap.collections.contains_key(collection));
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
                let client = match self.local.get(&n.address) {
                    Some(local) => Ok(local.clone()),
                    None => ShardClient::connect_lazy(&n.address, self.meta.credential().clone()),
                };
                match client {
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

    /// Follows meta's cluster state while the view is in use (a watch by version, or a poll every `poll`; see
    /// [`StateFollower`]); the task ends once the router is dropped.
    pub fn spawn_watch(
        self: &Arc<Self>,
        mode: FollowMode,
        poll: Duration,
    ) -> tokio::task::JoinHandle<()> {
        let weak: Weak<Self> = Arc::downgrade(self);
        let mut follower = StateFollower::new(self.meta.clone(), mode, poll);
        tokio::spawn(async move {
            loop {
                let next = follower.next().await;
                let Some(view) = weak.upgrade() else { return };
                match next {
                    Ok(Some(state)) => view.accept(&state),
                    Ok(None) => {}
                    Err(status) => {
                        view.note_unreachable(&status);
                        warn!(error = %status, event = "meta_watch_failed", "cluster state not refreshed; keeping the last one");
                    }
                }
            }
        })
    }

    pub fn get(&self, name: &str) -> Result<CollectionRecord, RouterError> {
        self.snapshot
            .read()
            .collections
            .get(name)
            .cloned()
            .ok_or_else(|| RouterError::NotFound(format!("collection `{name}` does not exist")))
    }

    /// The copy a re-embedding of `name` is building, when there is one: writes to `name` land in it too.
    pub fn copy_of(&self, name: &str) -> Option<CollectionRecord> {
        self.snapshot.read().copies.get(name).cloned()
    }

    /// [`ClusterView::get`] and [`ClusterView::copy_of`] from one state: a write takes both at its start, so
    /// that a switch while it runs finds it holding the copy it mirrors into (which is then the collection).
    pub fn get_with_copy(
        &self,
        name: &str,
    ) -> Result<(CollectionRecord, Option<CollectionRecord>), RouterError> {
        let snap = self.snapshot.read();
        let rec =
            snap.collections.get(name).cloned().ok_or_else(|| {
                RouterError::NotFound(format!("collection `{name}` does not exist"))
            })?;
        Ok((rec, snap.copies.get(name).cloned()))
    }

    /// Applies a collection meta just returned by a create (so the caller sees its own write at once).
    pub fn insert(&self, c: &pb::CollectionMeta) {
        let mut record = record_from_meta(c);
        let mut snap = self.snapshot.write();
        let owner = limits::owner_of_stored_name(&c.name);
        let aliased = snap
            .collections
            .get(owner)
            .is_some_and(|held| held.stored_name == c.name);
        if owner == c.name || aliased {
            record.name = owner.to_string();
            snap.collections.insert(owner.to_string(), record);
        } else {
            snap.copies.insert(owner.to_string(), record);
        }
    }

    /// Forgets a copy meta no longer holds (by its stored name).
    pub fn remove_copy(&self, stored_name: &str) {
        self.snapshot
            .write()
            .copies
            .retain(|_, copy| copy.stored_name != stored_name);
    }

    pub fn remove(&self, name: &str) {
        let mut snap = self.snapshot.write();
        snap.collections.remove(name);
        snap.copies.remove(name);
    }

    pub fn list(&self) -> Vec<CollectionRecord> {
        self.snapshot.read().collections.values().cloned().collect()
    }

    /// Shard nodes meta would place a new replica on now: alive and not being drained.
    pub fn placeable_shard_nodes(&self) -> usize {
        let snap = self.snapshot.read();
        snap.endpoints
            .keys()
            .filter(|id| {
                snap.alive.get(id).copied().unwrap_or(false) && !snap.draining.contains(id)
            })
            .count()
    }

    /// Replicas that can answer a search of `shard`, in the order to try them: live ones first (starting with
    /// the first of the placement, or taking turns per call: [`ReadFrom`]), then live ones being drained (a node
    /// going away: its peers serve while it stops), then the rest.
    pub fn read_replicas(&self, rec: &CollectionRecord, shard: usize) -> Vec<ReplicaEndpoint> {
        let turn = match self.policy.read_from {
            ReadFrom::First => 0,
            ReadFrom::Spread => {
                let mut next = self.next_start.lock();
                let counter = next.entry((rec.name.clone(), shard)).or_default();
                *counter = counter.wrapping_add(1);
                *counter
            }
        };
        self.ordered(rec, shard, turn)
    }

    /// The replicas of `shard` for a second call about the same read (fetching the payloads of a search's hits):
    /// `first` (the replica that answered the search) first, then the order of [`Self::read_replicas`], without
    /// taking a turn (a turn per call would make every search start on the same replica).
    pub fn replicas_for_follow_up(
        &self,
        rec: &CollectionRecord,
        shard: usize,
        first: Option<u64>,
    ) -> Vec<ReplicaEndpoint> {
        let mut replicas = self.ordered(rec, shard, 0);
        if let Some(node) = first {
            replicas.sort_by_key(|r| r.node_id != node);
        }
        replicas
    }

    /// The endpoint of a shard node, and whether its last heartbeat is recent.
    pub fn endpoint(&self, node: u64) -> Option<(ReplicaEndpoint, bool)> {
        let snap = self.snapshot.read();
        let alive = snap.alive.get(&node).copied().unwrap_or(true);
        snap.endpoints.get(&node).map(|e| (e.clone(), alive))
    }

    /// Every replica a write to `shard` goes to (joining copies included).
    pub fn write_replicas(&self, rec: &CollectionRecord, shard: usize) -> Vec<ReplicaEndpoint> {
        let snap = self.snapshot.read();
        rec.placement[shard]
            .iter()
            .filter_map(|r| snap.endpoints.get(&r.node).cloned())
            .collect()
    }

    /// The replicas of `shard` that serve reads, live and not draining first (rotated left by `turn`), then
    /// draining, then dead.
    fn ordered(&self, rec: &CollectionRecord, shard: usize, turn: usize) -> Vec<ReplicaEndpoint> {
        let refs: Vec<&ReplicaRef> = rec.placement[shard]
            .iter()
            .filter(|r| r.role.serves_reads())
            .collect();
        let snap = self.snapshot.read();
        let mut live = Vec::new();
        let mut draining = Vec::new();
        let mut rest = Vec::new();
        for r in refs {
            if let Some(e) = snap.endpoints.get(&r.node) {
                if !snap.alive.get(&r.node).copied().unwrap_or(true) {
                    rest.push(e.clone());
                } else if snap.draining.contains(&r.node) {
                    draining.push(e.clone());
                } else {
                    live.push(e.clone());
                }
            }
        }
        if !live.is_empty() {
            let start = turn % live.len();
            live.rotate_left(start);
        }
        live.extend(draining);
        live.extend(rest);
        live
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three live shard nodes; one collection of three shards × 2, placed as meta places them (each shard's
    /// first replica on a different node).
    fn state() -> pb::ClusterState {
        let nodes = (1..=3)
            .map(|id| pb::NodeInfo {
                id,
                name: format!("shard-{id}"),
                address: format!("http://127.0.0.1:{}", 1000 + id),
                role: pb::NodeRole::Shard as i32,
                alive: true,
                ..Default::default()
            })
            .collect();
        let placement = [[1, 2], [3, 1], [2, 3]]
            .iter()
            .zip(0..)
            .map(|(nodes, shard)| pb::ShardPlacement {
                shard,
                replicas: nodes
                    .iter()
                    .map(|&node_id| pb::ReplicaPlacement {
                        node_id,
                        state: pb::ReplicaState::Active as i32,
                    })
                    .collect(),
            })
            .collect();
        pb::ClusterState {
            version: 1,
            nodes,
            collections: vec![pb::CollectionMeta {
                name: "c".into(),
                shards: 3,
                replication: 2,
                placement,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// The node each of `reads` reads of `shard` tries first.
    fn first_tried(view: &ClusterView, shard: usize, reads: usize) -> Vec<u64> {
        let rec = view.get("c").expect("collection applied");
        (0..reads)
            .map(|_| view.read_replicas(&rec, shard)[0].node_id)
            .collect()
    }

    fn view(read_from: ReadFrom) -> Arc<ClusterView> {
        let meta = MetaClient::new(["http://127.0.0.1:1"]).unwrap();
        let view = ClusterView::unconnected(
            meta,
            ReplicaPolicy {
                read_from,
                ..ReplicaPolicy::default()
            },
        );
        view.apply(&state());
        view
    }

    #[tokio::test]
    async fn reads_start_on_the_first_replica_or_take_turns() {
        let first = view(ReadFrom::First);
        for (shard, node) in [(0, 1), (1, 3), (2, 2)] {
            assert_eq!(
                first_tried(&first, shard, 4),
                vec![node; 4],
                "shard {shard}"
            );
        }
        let spread = view(ReadFrom::Spread);
        let mut tried = first_tried(&spread, 0, 4);
        assert_ne!(tried[0], tried[1], "spread reads take turns: {tried:?}");
        tried.sort_unstable();
        assert_eq!(tried, vec![1, 1, 2, 2]);
    }

    #[tokio::test]
    async fn a_dead_first_replica_leaves_its_reads_to_the_next() {
        let view = view(ReadFrom::First);
        let mut state = state();
        state.nodes[0].alive = false;
        view.apply(&state);
        assert_eq!(first_tried(&view, 0, 3), vec![2; 3]);
        assert_eq!(first_tried(&view, 1, 3), vec![3; 3]);
    }

    #[tokio::test]
    async fn an_alias_shows_its_collection_under_its_name_and_a_copy_is_hidden() {
        let view = view(ReadFrom::First);
        let mut state = state();
        state.version = 2;
        let stored = |name: &str| pb::CollectionMeta {
            name: name.into(),
            ..state.collections[0].clone()
        };
        state.collections = vec![stored("docs~r1"), stored("docs~r2"), stored("other~r9")];
        state.aliases.push(pb::CollectionAlias {
            name: "docs".into(),
            collection: "docs~r1".into(),
        });
        view.apply(&state);
        let docs = view.get("docs").unwrap();
        assert_eq!(
            (docs.name.as_str(), docs.stored_name.as_str()),
            ("docs", "docs~r1")
        );
        assert_eq!(view.copy_of("docs").unwrap().stored_name, "docs~r2");
        let names: Vec<String> = view.list().into_iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            ["docs"],
            "copies, and a copy of no collection, are not listed"
        );
        assert!(view.get("docs~r2").is_err() && view.copy_of("other").is_none());
    }
}
