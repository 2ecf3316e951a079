//! The shard node's part in a cluster: it registers with meta, heartbeats (with a report of every replica it
//! hosts, in a task of its own so no reconcile pass can delay it), and reconciles itself with the shard map — creating the replicas placed on it, copying what they
//! missed from peers ([`crate::catchup`]), telling meta when a new (JOINING) copy has caught up, and dropping
//! replicas the map no longer places here (after a rebalance, or a dropped collection).
//!
//! Meta is reached only through the proto client (`attest_proto::MetaClient`); peers through the shard proto
//! client. Every step is idempotent, so a crash anywhere is repaired by the next pass.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use attest_proto::credential::{ClusterCredential, Stamped};
use attest_proto::v1 as pb;
use attest_proto::v1::shard_service_client::ShardServiceClient;
use attest_proto::{FollowMode, MetaClient, StateFollower};
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use crate::catchup::{catch_up_from, PeerCursor};
use crate::node::ShardNode;
use crate::service::engine_config_from_spec;
use attest_index::ShardEngine;
use attest_proto::MAX_MESSAGE_BYTES;

/// How the node takes part in the cluster. The timings are the `agent` section of the YAML config; the identity
/// (name, address, zone) comes from flags.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterAgentConfig {
    /// Stable node name (meta gives the same id back to the same name after a restart).
    #[serde(skip)]
    pub name: String,
    /// The gRPC address routers and peers reach this node at.
    #[serde(skip)]
    pub advertise: String,
    #[serde(skip)]
    pub zone: String,
    pub heartbeat_interval_ms: u64,
    /// Follow meta's cluster state by a watch (a change to the shard map is applied as soon as meta applies it).
    /// Off: the whole state is re-read on every reconcile pass.
    pub meta_watch: bool,
    /// How often the shard map is applied (the last state the watch delivered; re-read when not watching) and
    /// repairs that are due are run.
    pub reconcile_interval_ms: u64,
    /// How often an ACTIVE replica lists what its peers changed since the last pass (anti-entropy for writes
    /// it missed while up, e.g. a timed-out replica write).
    pub repair_interval_ms: u64,
    /// Per-call limit on a peer during catch-up.
    pub peer_timeout_ms: u64,
}

impl Default for ClusterAgentConfig {
    fn default() -> Self {
        ClusterAgentConfig {
            name: String::new(),
            advertise: String::new(),
            zone: String::new(),
            heartbeat_interval_ms: 1000,
            meta_watch: true,
            reconcile_interval_ms: 1000,
            repair_interval_ms: 10_000,
            peer_timeout_ms: 30_000,
        }
    }
}

impl ClusterAgentConfig {
    /// Timings that cannot be right, named as `agent.KEY`; `node_timeout_ms` is meta's: a heartbeat interval
    /// at or above it would get a healthy node declared dead.
    pub fn problems(&self, node_timeout_ms: u64) -> attest_core::ConfigProblems {
        let mut p = attest_core::ConfigProblems::new("agent");
        p.positive("heartbeat_interval_ms", self.heartbeat_interval_ms);
        p.positive("reconcile_interval_ms", self.reconcile_interval_ms);
        p.positive("repair_interval_ms", self.repair_interval_ms);
        p.positive("peer_timeout_ms", self.peer_timeout_ms);
        if self.heartbeat_interval_ms >= node_timeout_ms {
            p.add(
                "heartbeat_interval_ms",
                format!(
                    "must be less than meta.node_timeout_ms ({node_timeout_ms}; got {})",
                    self.heartbeat_interval_ms
                ),
            );
        }
        p
    }
}

/// One replica of this node, as the shard map places it.
#[derive(Debug, Clone)]
struct Assignment {
    collection: String,
    shard: u32,
    state: pb::ReplicaState,
    spec: Option<pb::CollectionSpec>,
    /// The collection's replicas per shard (whether a new replica's log keeps its sealed vectors).
    replication: u32,
    /// The collection's shard count (what the recall estimate and tuning count the router's merge over).
    shards: u32,
    /// Other replicas holding data (ACTIVE or LEAVING): (node id, address).
    peers: Vec<(u64, String)>,
}

/// The agent's memory between passes.
#[derive(Default)]
struct AgentState {
    node_id: u64,
    /// When each replica last ran a repair pass.
    last_repair: HashMap<(String, u32), Instant>,
    peers: HashMap<String, ShardServiceClient<Stamped>>,
}

/// Registers the node, then heartbeats and reconciles until `shutdown`. `ready` fires after the first
/// reconcile pass (replicas created, a first catch-up tried against every reachable peer), so the caller can
/// start serving only once the node holds what it missed while down.
pub async fn run_cluster_agent(
    node: Arc<ShardNode>,
    meta: MetaClient,
    config: ClusterAgentConfig,
    ready: tokio::sync::oneshot::Sender<u64>,
    shutdown: impl Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    tokio::pin!(shutdown);
    node.set_peer_credential(meta.credential().clone());
    let mut state = AgentState::default();
    let registration = pb::RegisterNodeRequest {
        name: config.name.clone(),
        address: config.advertise.clone(),
        role: pb::NodeRole::Shard as i32,
        zone: config.zone.clone(),
    };
    loop {
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            r = meta.register_node(registration.clone()) => match r {
                Ok(info) => {
                    state.node_id = info.id;
                    info!(node_id = info.id, name = %config.name, event = "node_registered", "registered with meta");
                    break;
                }
                Err(e) => {
                    warn!(error = %e, event = "register_failed", "meta not reachable yet; retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    }
    // Heartbeats run in their own task from here on: a reconcile pass (a catch-up from a slow peer may take
    // `peer_timeout_ms`, longer than meta's node timeout) must never make meta declare a live node dead.
    let heartbeats = tokio::spawn(heartbeat_loop(
        Arc::clone(&node),
        meta.clone(),
        state.node_id,
        Duration::from_millis(config.heartbeat_interval_ms),
    ));
    let _stop_heartbeats = AbortOnDrop(heartbeats);
    let first = tokio::select! {
        _ = &mut shutdown => return Ok(()),
        r = read_and_reconcile(&node, &meta, &config, &mut state) => r,
    };
    if let Err(e) = first {
        warn!(error = %e, event = "reconcile_failed", "first reconcile pass failed; serving what is here");
    }
    let _ = ready.send(state.node_id);

    let reconcile_every = Duration::from_millis(config.reconcile_interval_ms);
    let mut reconcile_tick = tokio::time::interval(reconcile_every);
    reconcile_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Watching, the follower task keeps the newest state here and each pass applies it; a change also starts a
    // pass at once. Polling, each pass reads the state itself.
    let (latest_tx, mut latest) = tokio::sync::watch::channel(None);
    let _stop_follower = match FollowMode::from_setting(config.meta_watch) {
        FollowMode::Watch => Some(AbortOnDrop(tokio::spawn(follow_state(
            StateFollower::new(meta.clone(), FollowMode::Watch, reconcile_every),
            latest_tx,
        )))),
        FollowMode::Poll => None,
    };
    loop {
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            _ = reconcile_tick.tick() => {}
            Ok(()) = latest.changed() => {}
        }
        let delivered = latest.borrow_and_update().clone();
        let pass = match delivered {
            Some(cluster) => reconcile(&node, &meta, &config, &mut state, &cluster).await,
            None if !config.meta_watch => {
                read_and_reconcile(&node, &meta, &config, &mut state).await
            }
            None => continue, // watching, and nothing delivered yet
        };
        if let Err(e) = pass {
            warn!(error = %e, event = "reconcile_failed", "reconcile pass failed");
        }
    }
}

/// Hands every state the follower delivers to the reconcile loop (until the agent stops).
async fn follow_state(
    mut follower: StateFollower,
    latest: tokio::sync::watch::Sender<Option<Arc<pb::ClusterState>>>,
) {
    loop {
        match follower.next().await {
            Ok(Some(cluster)) => {
                latest.send_replace(Some(Arc::new(cluster)));
            }
            Ok(None) => {}
            Err(e) => {
                warn!(error = %e, event = "meta_watch_failed", "shard map not refreshed; keeping the last one")
            }
        }
    }
}

/// Stops a spawned task when the agent returns.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Sends a heartbeat (with a report of every replica) every `interval` until aborted.
async fn heartbeat_loop(node: Arc<ShardNode>, meta: MetaClient, node_id: u64, interval: Duration) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // Stats take engine locks that a write may hold for an fsync: not on an async worker.
        let reports = {
            let node = Arc::clone(&node);
            match tokio::task::spawn_blocking(move || replica_reports(&node)).await {
                Ok(reports) => reports,
                Err(e) => {
                    warn!(error = %e, event = "heartbeat_failed", "replica report failed");
                    continue;
                }
            }
        };
        if let Err(e) = meta.heartbeat(node_id, reports).await {
            warn!(error = %e, event = "heartbeat_failed", "heartbeat not delivered");
        }
    }
}

fn replica_reports(node: &ShardNode) -> Vec<pb::ReplicaReport> {
    node.replicas()
        .into_iter()
        .map(|((collection, shard), engine)| {
            let stats = engine.stats();
            pb::ReplicaReport {
                collection,
                shard,
                live_documents: stats.live_documents,
                segments: engine
                    .segment_dirs()
                    .iter()
                    .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                    .collect(),
                last_seq: stats.last_seq,
            }
        })
        .collect()
}

/// This node's replicas in the map, with the peers each can copy from.
fn assignments(state: &pb::ClusterState, me: u64) -> Vec<Assignment> {
    let address: HashMap<u64, &str> = state
        .nodes
        .iter()
        .map(|n| (n.id, n.address.as_str()))
        .collect();
    let mut out = Vec::new();
    for c in &state.collections {
        for p in &c.placement {
            let Some(mine) = p.replicas.iter().find(|r| r.node_id == me) else {
                continue;
            };
            let peers = p
                .replicas
                .iter()
                .filter(|r| r.node_id != me)
                .filter(|r| {
                    matches!(
                        r.state(),
                        pb::ReplicaState::Active | pb::ReplicaState::Leaving
                    )
                })
                .filter_map(|r| address.get(&r.node_id).map(|a| (r.node_id, a.to_string())))
                .collect();
            out.push(Assignment {
                collection: c.name.clone(),
                shard: p.shard,
                state: mine.state(),
                spec: c.spec.clone(),
                replication: c.replication,
                shards: c.shards,
                peers,
            });
        }
    }
    out
}

/// One reconcile pass on the state as meta gives it now.
async fn read_and_reconcile(
    node: &Arc<ShardNode>,
    meta: &MetaClient,
    config: &ClusterAgentConfig,
    state: &mut AgentState,
) -> anyhow::Result<()> {
    let cluster = meta.cluster_state(false).await?;
    reconcile(node, meta, config, state, &cluster).await
}

/// Creates and drops replicas to match `cluster`'s shard map, and runs the catch-ups and repairs that are due.
async fn reconcile(
    node: &Arc<ShardNode>,
    meta: &MetaClient,
    config: &ClusterAgentConfig,
    state: &mut AgentState,
    cluster: &pb::ClusterState,
) -> anyhow::Result<()> {
    let me = state.node_id;
    if !cluster.nodes.iter().any(|n| n.id == me) {
        // A state that does not know us yet (a lagging meta follower): change nothing on its word.
        return Ok(());
    }
    let assigned = assignments(cluster, me);
    let wanted: HashSet<(String, u32)> = assigned
        .iter()
        .map(|a| (a.collection.clone(), a.shard))
        .collect();

    // Replicas the map no longer places here: their data lives on elsewhere (the map only removes a LEAVING
    // replica once its replacement is ACTIVE) or the collection is gone. A drop is the one step a stale map must
    // not take (the map followed by the watch may be a moment old: a snapshot restore drops a collection and
    // creates it again, adopting staged files, in less): it is confirmed against meta's state now, and the
    // replica dropped only if it is still the engine seen here before that read.
    let unwanted: Vec<_> = node
        .replicas()
        .into_iter()
        .filter(|(key, _)| !wanted.contains(key))
        .map(|(key, engine)| (key, Arc::downgrade(&engine)))
        .collect();
    if !unwanted.is_empty() {
        let now = meta.cluster_state(true).await?;
        let still: HashSet<(String, u32)> = assignments(&now, me)
            .into_iter()
            .map(|a| (a.collection, a.shard))
            .collect();
        for ((collection, shard), engine) in unwanted {
            if still.contains(&(collection.clone(), shard)) {
                continue;
            }
            let n = Arc::clone(node);
            let c = collection.clone();
            let dropped =
                tokio::task::spawn_blocking(move || n.drop_shard_if_same(&c, shard, &engine))
                    .await??;
            if dropped {
                info!(collection = %collection, shard, event = "replica_removed", "replica no longer placed here; dropped");
            }
        }
    }

    for a in assigned {
        // Only a replica missing here costs a blocking call; the pass runs every second for every replica.
        let created = if node.get(&a.collection, a.shard).is_some() {
            false
        } else {
            let engine_config =
                engine_config_from_spec(a.spec.as_ref(), a.replication, node.defaults())?;
            let n = Arc::clone(node);
            let (c, s) = (a.collection.clone(), a.shard);
            tokio::task::spawn_blocking(move || n.ensure(&c, s, engine_config)).await??
        };
        if created {
            info!(collection = %a.collection, shard = a.shard, event = "replica_created", "replica placed here created");
        }
        if let Some(engine) = node.get(&a.collection, a.shard) {
            // An atomic store, and a tuning asked for only when the count changed.
            engine.set_collection_shards(a.shards);
        }
        let key = (a.collection.clone(), a.shard);
        let joining = a.state == pb::ReplicaState::Joining;
        let due = joining
            || state
                .last_repair
                .get(&key)
                .is_none_or(|t| t.elapsed() >= Duration::from_millis(config.repair_interval_ms));
        if !due {
            continue;
        }
        state.last_repair.insert(key.clone(), Instant::now());
        let Some(engine) = node.get(&a.collection, a.shard) else {
            continue;
        };
        let mut complete_from_a_peer = false;
        for (peer_id, address) in &a.peers {
            let client = match peer_client(state, address, meta.credential()) {
                Ok(c) => c,
                Err(e) => {
                    warn!(peer = peer_id, error = %e, event = "peer_address_bad", "cannot reach peer");
                    continue;
                }
            };
            // The replica's log is where the cursor lives (one point read a pass): a replica dropped and placed
            // here again starts with none, and a restarted node goes on from where it stood.
            let mut cursor = kept_cursor(&engine, *peer_id).await;
            let before = cursor.clone();
            let pass = tokio::time::timeout(
                Duration::from_millis(config.peer_timeout_ms),
                catch_up_from(
                    Arc::clone(&engine),
                    &client,
                    &a.collection,
                    a.shard,
                    &mut cursor,
                ),
            )
            .await;
            if cursor != before {
                keep_cursor(&engine, *peer_id, &cursor).await;
            }
            match pass {
                Ok(Ok(_)) => complete_from_a_peer = true,
                Ok(Err(e)) => {
                    warn!(collection = %a.collection, shard = a.shard, peer = peer_id, error = %e,
                        event = "catch_up_failed", "catch-up from peer failed; next pass retries")
                }
                Err(_) => {
                    // Where the listing got to says whether the peer was slow to list or did not answer at all.
                    let listing = cursor.under_way.as_ref();
                    warn!(collection = %a.collection, shard = a.shard, peer = peer_id,
                        listing_changes_after = listing.map(|l| l.changed_after_seq),
                        listed_through = listing.map(|l| l.after.as_str()),
                        peer_last_seq = listing.map(|l| l.peer_last_seq),
                        event = "catch_up_timed_out", "catch-up from peer timed out; next pass retries")
                }
            }
        }
        if joining && complete_from_a_peer {
            meta.replica_caught_up(&a.collection, a.shard, me).await?;
            info!(collection = %a.collection, shard = a.shard, event = "replica_activated", "new replica caught up; now active");
        }
    }
    Ok(())
}

/// The catch-up cursor `engine`'s log keeps on peer `peer` (none: a first pass lists everything).
async fn kept_cursor(engine: &Arc<ShardEngine>, peer: u64) -> PeerCursor {
    let e = Arc::clone(engine);
    let note = tokio::task::spawn_blocking(move || e.peer_note(peer))
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()));
    let cursor = match note {
        Ok(None) => return PeerCursor::default(),
        Ok(Some(note)) => PeerCursor::from_note(&note).ok_or_else(|| "not a cursor".to_string()),
        Err(e) => Err(e),
    };
    cursor.unwrap_or_else(|error| {
        warn!(peer, %error, event = "catch_up_cursor_unreadable", "kept catch-up cursor unreadable; listing everything");
        PeerCursor::default()
    })
}

/// Keeps `cursor` in `engine`'s log for the next start. The pages it accounts for are applied (durable) by now;
/// a cursor not kept only makes the next start's first pass list more.
async fn keep_cursor(engine: &Arc<ShardEngine>, peer: u64, cursor: &PeerCursor) {
    let (e, note) = (Arc::clone(engine), cursor.to_note());
    let kept = tokio::task::spawn_blocking(move || e.keep_peer_note(peer, &note)).await;
    if let Err(error) = kept
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()))
    {
        warn!(peer, %error, event = "catch_up_cursor_not_kept", "catch-up cursor not kept; a restart lists more");
    }
}

/// A peer's client, presenting the credential this node presents to meta (the cluster's).
fn peer_client(
    state: &mut AgentState,
    address: &str,
    credential: &ClusterCredential,
) -> anyhow::Result<ShardServiceClient<Stamped>> {
    if let Some(c) = state.peers.get(address) {
        return Ok(c.clone());
    }
    let client = connect_peer(address, credential)?;
    state.peers.insert(address.to_string(), client.clone());
    Ok(client)
}

/// A client of another shard node, presenting `credential` (the cluster's).
pub(crate) fn connect_peer(
    address: &str,
    credential: &ClusterCredential,
) -> anyhow::Result<ShardServiceClient<Stamped>> {
    let channel = credential.channel(address, Duration::from_secs(2))?;
    Ok(
        ShardServiceClient::with_interceptor(channel, credential.clone())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(node_id: u64, state: pb::ReplicaState) -> pb::ReplicaPlacement {
        pb::ReplicaPlacement {
            node_id,
            state: state as i32,
        }
    }

    #[test]
    fn assignments_name_only_peers_that_hold_data() {
        let state = pb::ClusterState {
            nodes: (1..=3)
                .map(|id| pb::NodeInfo {
                    id,
                    address: format!("http://n{id}"),
                    ..Default::default()
                })
                .collect(),
            collections: vec![pb::CollectionMeta {
                name: "c".into(),
                placement: vec![
                    pb::ShardPlacement {
                        shard: 0,
                        replicas: vec![
                            replica(1, pb::ReplicaState::Active),
                            replica(2, pb::ReplicaState::Joining),
                            replica(3, pb::ReplicaState::Leaving),
                        ],
                    },
                    pb::ShardPlacement {
                        shard: 1,
                        replicas: vec![replica(3, pb::ReplicaState::Active)],
                    },
                ],
                ..Default::default()
            }],
            ..Default::default()
        };
        let mine = assignments(&state, 2);
        assert_eq!(mine.len(), 1);
        assert_eq!(mine[0].state, pb::ReplicaState::Joining);
        let peers: Vec<u64> = mine[0].peers.iter().map(|p| p.0).collect();
        assert_eq!(peers, vec![1, 3]);
        let for_one = assignments(&state, 1);
        assert_eq!(
            for_one[0].peers.iter().map(|p| p.0).collect::<Vec<_>>(),
            vec![3]
        );
        assert!(assignments(&state, 9).is_empty());
    }
}
