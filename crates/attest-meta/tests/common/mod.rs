//! In-process sandbox cluster: real meta nodes (RocksDB, Raft thread, tonic server) on 127.0.0.1 ports in
//! one test process, with the transport filter for partitions. Every wait is bounded.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use attest_meta::{MetaClient, MetaConfig, MetaNode};
use attest_proto::v1 as pb;
use pb::meta_service_client::MetaServiceClient;
use tokio::net::TcpListener;
use tonic::transport::{Channel, Endpoint};

/// Timings of a sandbox cluster.
#[derive(Debug, Clone)]
pub struct Opts {
    pub tick_ms: u64,
    pub election_tick: usize,
    pub snapshot_threshold: u64,
    pub write_timeout_ms: u64,
    pub node_timeout_ms: u64,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            tick_ms: 50,
            election_tick: 10,
            snapshot_threshold: 1000,
            write_timeout_ms: 3000,
            node_timeout_ms: 10_000,
        }
    }
}

pub struct Sandbox {
    root: tempfile::TempDir,
    pub opts: Opts,
    pub addrs: BTreeMap<u64, SocketAddr>,
    pub nodes: BTreeMap<u64, MetaNode>,
    initial: Vec<(u64, String)>,
    /// (node, term) for every term a stopped node led.
    history: Vec<(u64, u64)>,
}

pub fn url(addr: SocketAddr) -> String {
    format!("http://{addr}")
}

async fn bind_again(addr: SocketAddr) -> TcpListener {
    let start = Instant::now();
    loop {
        match TcpListener::bind(addr).await {
            Ok(l) => return l,
            Err(e) if start.elapsed() < Duration::from_secs(10) => {
                eprintln!("rebinding {addr}: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("cannot rebind {addr}: {e}"),
        }
    }
}

impl Sandbox {
    /// Starts nodes `1..=n` as the initial voters.
    pub async fn start(n: u64, opts: Opts) -> Sandbox {
        let root = tempfile::tempdir().unwrap();
        let mut listeners = BTreeMap::new();
        for id in 1..=n {
            listeners.insert(id, TcpListener::bind("127.0.0.1:0").await.unwrap());
        }
        let addrs: BTreeMap<u64, SocketAddr> = listeners
            .iter()
            .map(|(id, l)| (*id, l.local_addr().unwrap()))
            .collect();
        let initial = addrs.iter().map(|(id, a)| (*id, url(*a))).collect();
        let mut sb = Sandbox {
            root,
            opts,
            addrs,
            nodes: BTreeMap::new(),
            initial,
            history: Vec::new(),
        };
        for (id, listener) in listeners {
            let node = MetaNode::start(sb.config(id, None), listener)
                .await
                .unwrap();
            sb.nodes.insert(id, node);
        }
        sb
    }

    pub fn config(&self, id: u64, join: Option<String>) -> MetaConfig {
        let mut c = MetaConfig::new(
            id,
            self.url(id),
            self.root.path().join(format!("meta-{id}")),
        );
        c.peers = self.initial.clone();
        c.join = join;
        c.tick_ms = self.opts.tick_ms;
        c.election_tick = self.opts.election_tick;
        c.snapshot_threshold = self.opts.snapshot_threshold;
        c.write_timeout_ms = self.opts.write_timeout_ms;
        c.node_timeout_ms = self.opts.node_timeout_ms;
        c
    }

    pub fn url(&self, id: u64) -> String {
        url(self.addrs[&id])
    }

    pub fn node(&self, id: u64) -> &MetaNode {
        &self.nodes[&id]
    }

    pub fn running(&self) -> Vec<u64> {
        self.nodes.keys().copied().collect()
    }

    /// Shuts a node down (its data directory stays).
    pub async fn stop(&mut self, id: u64) {
        let node = self.nodes.remove(&id).expect("running node");
        self.history
            .extend(node.terms_led().into_iter().map(|t| (id, t)));
        node.shutdown().await.unwrap();
    }

    /// Starts a stopped node again on the same port and data directory.
    pub async fn restart(&mut self, id: u64) {
        let listener = bind_again(self.addrs[&id]).await;
        let node = MetaNode::start(self.config(id, None), listener)
            .await
            .unwrap();
        self.nodes.insert(id, node);
    }

    /// Starts a new node `id` with an empty data directory that joins through node `via`.
    pub async fn join(&mut self, id: u64, via: u64) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        self.addrs.insert(id, listener.local_addr().unwrap());
        let mut config = self.config(id, Some(self.url(via)));
        // Like a real joining process, it knows only itself and the address it joins through.
        config.peers = vec![(id, self.url(id))];
        let node = MetaNode::start(config, listener).await.unwrap();
        self.nodes.insert(id, node);
    }

    /// A raw gRPC client of one node (no retries, no failover).
    pub fn grpc(&self, id: u64) -> MetaServiceClient<Channel> {
        MetaServiceClient::new(Endpoint::from_shared(self.url(id)).unwrap().connect_lazy())
    }

    /// A `MetaClient` over the given nodes.
    pub fn client(&self, ids: &[u64]) -> MetaClient {
        MetaClient::new(ids.iter().map(|id| self.url(*id))).unwrap()
    }

    /// The leader that a majority of the voters it knows (among running nodes) agree on.
    pub fn agreed_leader(&self) -> Option<u64> {
        let statuses: Vec<pb::MetaStatus> = self.nodes.values().map(|n| n.status()).collect();
        let leader = statuses
            .iter()
            .filter(|s| s.raft_role == "leader")
            .max_by_key(|s| s.term)?;
        let quorum = leader.voters.len() / 2 + 1;
        let agreeing = statuses
            .iter()
            .filter(|s| s.leader_id == leader.id && s.term == leader.term)
            .count();
        (agreeing >= quorum).then_some(leader.id)
    }

    pub async fn wait_leader(&self, timeout: Duration) -> u64 {
        let start = Instant::now();
        loop {
            if let Some(l) = self.agreed_leader() {
                return l;
            }
            assert!(
                start.elapsed() < timeout,
                "no leader within {timeout:?}: {:?}",
                self.nodes.values().map(|n| n.status()).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until `check` holds (polling every 20 ms), failing the test after `timeout`.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        what: &str,
        check: impl Fn(&Sandbox) -> bool,
    ) {
        let start = Instant::now();
        while !check(self) {
            assert!(
                start.elapsed() < timeout,
                "timed out after {timeout:?} waiting for {what}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// No term ever had two leaders (Raft election safety), over every node that ran.
    pub fn assert_no_split_brain(&self) {
        let mut all = self.history.clone();
        for (id, n) in &self.nodes {
            all.extend(n.terms_led().into_iter().map(|t| (*id, t)));
        }
        let mut by_term: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
        for (id, term) in all {
            by_term.entry(term).or_default().insert(id);
        }
        for (term, leaders) in by_term {
            assert_eq!(leaders.len(), 1, "term {term} had leaders {leaders:?}");
        }
    }

    pub async fn shutdown(mut self) {
        for id in self.running() {
            self.stop(id).await;
        }
    }
}

/// The replicated part of a cluster state (no liveness, version or leader).
pub fn replicated(s: &pb::ClusterState) -> String {
    let nodes: Vec<_> = s
        .nodes
        .iter()
        .map(|n| (n.id, &n.name, &n.address, n.role, &n.zone))
        .collect();
    format!(
        "{nodes:?}|{:?}|{:?}|{:?}|{:?}",
        s.collections, s.api_keys, s.manifests, s.meta_voters
    )
}

pub fn shard_node(name: &str, zone: &str) -> pb::RegisterNodeRequest {
    pb::RegisterNodeRequest {
        name: name.into(),
        address: format!("http://{name}:7700"),
        role: pb::NodeRole::Shard as i32,
        zone: zone.into(),
    }
}

pub fn collection(name: &str, shards: u32, replication: u32) -> pb::MetaCreateCollectionRequest {
    pb::MetaCreateCollectionRequest {
        name: name.into(),
        shards,
        replication,
        spec: Some(pb::CollectionSpec {
            dimension: 8,
            index: Some(pb::IndexParams {
                nlist: 4,
                m: 2,
                nbits: 8,
                nprobe: 2,
                recall_target: None,
            }),
            seal_threshold: 100,
            embedder: "test".into(),
            embedder_identity: None,
        }),
        chunking_json: "{}".into(),
        thresholds_json: "{}".into(),
        ..Default::default()
    }
}

/// Runs `f` and returns its output with how long it took.
pub async fn timed<T>(f: impl Future<Output = T>) -> (T, Duration) {
    let start = Instant::now();
    let out = f.await;
    (out, start.elapsed())
}
