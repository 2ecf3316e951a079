//! `MetaConfig`: how one meta node starts (identity, bootstrap or join, timings).

use std::path::PathBuf;
use std::time::Duration;

use attest_proto::ClusterCredential;
use serde::{Deserialize, Serialize};

/// Configuration of one meta node. The timings come from the `meta` section of the YAML config; the identity
/// (id, addresses, peers, join, data directory) from flags, so it is not read from or written to YAML.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct MetaConfig {
    /// Raft id of this node; unique in the group, never 0.
    #[serde(skip)]
    pub id: u64,
    /// gRPC address other meta nodes and clients reach this node at (`http://host:port`). Stored in the
    /// replicated voter map, so it must stay stable across restarts.
    #[serde(skip)]
    pub advertise_address: String,
    /// Initial voters `(id, address)`, identical on every initial node (this node included). Used only when
    /// the data directory is empty and `join` is `None`. A single-node cluster is `[(id, own address)]`.
    #[serde(skip)]
    pub peers: Vec<(u64, String)>,
    /// Address of an existing member to join through (`AddMetaNode`), used only with an empty data dir.
    #[serde(skip)]
    pub join: Option<String>,
    /// `--bootstrap-if-empty`: with an empty data dir and no `join`, ask the `peers` for the group first and
    /// join through the one that answers; bootstrap (alone) only when none answers within `bootstrap_wait_ms`
    /// and this node has the lowest id of `peers` (see `crate::guard`).
    #[serde(skip)]
    pub bootstrap_if_empty: bool,
    /// RocksDB directory of the Raft log and state.
    #[serde(skip)]
    pub data_dir: PathBuf,
    /// What this node presents to other meta nodes and requires of every caller (none: open).
    #[serde(skip)]
    pub cluster_credential: ClusterCredential,
    /// The free-space reserve of `data_dir` (the top-level `disk` section, shared by every role): below it,
    /// proposals are refused with the disk-full error.
    #[serde(skip)]
    pub disk: attest_core::disk::DiskConfig,
    /// Raft tick interval (default 100 ms).
    pub tick_ms: u64,
    /// Ticks without a leader before an election (default 10: a timeout of 1–2 s, randomised).
    pub election_tick: usize,
    /// Ticks between leader heartbeats (default 3).
    pub heartbeat_tick: usize,
    /// Applied entries kept in the log before a snapshot is taken and the log compacted (default 1000).
    pub snapshot_threshold: u64,
    /// A data-plane node without a heartbeat for this long is reported not alive (default 10 s).
    pub node_timeout_ms: u64,
    /// How long a write (leader discovery, forwarding, commit and apply) may take before `Unavailable`
    /// (default 3 s). In a minority partition a proposal never commits, so this is what the caller sees.
    pub write_timeout_ms: u64,
    /// With `bootstrap_if_empty`: how long the lowest-id node waits for a peer to answer before it bootstraps
    /// (default 5 s). Long enough for running peers to answer, short enough for a first install.
    pub bootstrap_wait_ms: u64,
}

impl Default for MetaConfig {
    /// The default timings, with no identity yet (id 0 does not validate).
    fn default() -> Self {
        let mut c = MetaConfig::new(0, "", "");
        c.peers.clear();
        c
    }
}

impl MetaConfig {
    /// A config with the defaults above; `peers` is `[(id, advertise_address)]` (a one-node cluster).
    pub fn new(
        id: u64,
        advertise_address: impl Into<String>,
        data_dir: impl Into<PathBuf>,
    ) -> Self {
        let advertise_address = advertise_address.into();
        MetaConfig {
            id,
            peers: vec![(id, advertise_address.clone())],
            advertise_address,
            join: None,
            bootstrap_if_empty: false,
            data_dir: data_dir.into(),
            cluster_credential: ClusterCredential::none(),
            disk: Default::default(),
            tick_ms: 100,
            election_tick: 10,
            heartbeat_tick: 3,
            snapshot_threshold: 1000,
            node_timeout_ms: 10_000,
            write_timeout_ms: 3_000,
            bootstrap_wait_ms: 5_000,
        }
    }

    pub fn tick(&self) -> Duration {
        Duration::from_millis(self.tick_ms.max(1))
    }

    pub fn write_timeout(&self) -> Duration {
        Duration::from_millis(self.write_timeout_ms.max(1))
    }

    pub fn bootstrap_wait(&self) -> Duration {
        Duration::from_millis(self.bootstrap_wait_ms)
    }

    pub fn node_timeout(&self) -> Duration {
        Duration::from_millis(self.node_timeout_ms)
    }

    /// Checks the parts a mistake in would only show up later as a cluster that never elects. (That the
    /// initial peers include this node is checked at bootstrap, the only time they are used.)
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.id != 0, "meta id must not be 0");
        anyhow::ensure!(
            !self.advertise_address.is_empty(),
            "meta advertise address is empty"
        );
        anyhow::ensure!(
            self.heartbeat_tick >= 1 && self.election_tick > self.heartbeat_tick,
            "election_tick must be greater than heartbeat_tick"
        );
        Ok(())
    }
}

impl MetaConfig {
    /// Timings that cannot be right, named as `meta.KEY` (the identity comes from flags and is checked by
    /// [`MetaConfig::validate`] when the node starts).
    pub fn timing_problems(&self) -> attest_core::ConfigProblems {
        let mut p = attest_core::ConfigProblems::new("meta");
        p.positive("tick_ms", self.tick_ms);
        p.positive("heartbeat_tick", self.heartbeat_tick);
        if self.election_tick <= self.heartbeat_tick {
            p.add(
                "election_tick",
                format!(
                    "must be greater than meta.heartbeat_tick ({}; got {})",
                    self.heartbeat_tick, self.election_tick
                ),
            );
        }
        p.positive("snapshot_threshold", self.snapshot_threshold);
        p.positive("node_timeout_ms", self.node_timeout_ms);
        p.positive("write_timeout_ms", self.write_timeout_ms);
        p.positive("bootstrap_wait_ms", self.bootstrap_wait_ms);
        p
    }
}
