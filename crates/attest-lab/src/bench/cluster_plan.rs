//! The cost model ([`super::fit`]) applied to a whole cluster: what a collection of `shards` × `replication`
//! replicas of `vectors` rows costs to ingest, store and search, predicted from the single-shard fits before a
//! cluster run; and, with the ratios a run measured against its prediction, the plan for a larger collection
//! (shards, nodes, memory, disk, ingest hours).
//!
//! The single-shard fits describe a one-shot build on this machine (both cores); a replica's sustained ingest
//! costs `sustained_factor` times that (the engine's measured ratio), and replicas sharing a machine share its
//! cores, so a machine ingests its replicas one after the other in effect. A routed search waits for the slowest
//! shard, then merges: the shard's p95 plus the router's measured overhead.

use serde::Serialize;

use super::fit::{predict_quantity, CostModel, BUDGET};
use super::row_bytes::{row_bytes, RowLayout};

/// A collection laid out on a cluster.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Shape {
    pub vectors: u64,
    pub shards: u32,
    pub replication: u32,
    /// Shard nodes the replicas are spread over.
    pub nodes: u32,
    /// Machines those nodes run on (a local cluster: 1; a real one: one per node).
    pub machines: u32,
    pub nprobe: u32,
    /// What a row holds and how a replica stores it: the disk figure ([`super::row_bytes`]).
    pub rows: RowLayout,
}

/// What a replica costs on disk whatever its rows: the shard quantizer (~0.8 MB at nlist 256 and 384-d, the
/// coarse centroids and PQ codebooks), RocksDB's options and manifest files, the segment manifest.
const REPLICA_FIXED_BYTES: f64 = 1.5e6;

/// Measured ÷ predicted for the costs a cluster run checks (1.0: the model as fitted). `latency` scales a
/// shard's search time: a local cluster's routed p95 is the CPU of every shard's search queued on the same
/// cores, not what one node per machine would see, so a run measures the CPU one shard search takes instead.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Corrections {
    pub ingest: f64,
    pub disk: f64,
    pub latency: f64,
}

impl Corrections {
    pub const NONE: Corrections = Corrections {
        ingest: 1.0,
        disk: 1.0,
        latency: 1.0,
    };
}

/// What the engine's sustained ingest costs against the one-shot build, and what routing adds to a search.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Overheads {
    pub sustained_factor: f64,
    pub router_overhead_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ClusterEstimate {
    pub shape: Shape,
    pub rows_per_replica: u64,
    pub nlist: u32,
    pub replicas: u64,
    pub ingest_s: f64,
    pub disk_bytes: f64,
    pub disk_bytes_per_node: f64,
    pub index_bytes_per_node: f64,
    pub rss_bytes_per_node: f64,
    pub shard_p50_ms: f64,
    pub shard_p95_ms: f64,
    pub p95_ms: f64,
}

/// The cluster figures of `shape` from `model`, scaled by `c`.
pub fn estimate(model: &CostModel, shape: Shape, o: Overheads, c: Corrections) -> ClusterEstimate {
    let rows = shape.vectors.div_ceil(u64::from(shape.shards.max(1)));
    let nlist = attest_index::ivfpq::nlist_for_rows(rows as usize).clamp(16, 65_536);
    let at = |q: &str| predict_quantity(model, q, rows as f64, nlist, shape.nprobe);
    let replicas = u64::from(shape.shards) * u64::from(shape.replication);
    let per_node = replicas as f64 / f64::from(shape.nodes.max(1));
    let per_machine = replicas as f64 / f64::from(shape.machines.max(1));
    let shard_p95_ms = at("p95_ms") * c.latency;
    let disk_bytes = replicas as f64
        * (rows as f64 * row_bytes(&shape.rows).total() + REPLICA_FIXED_BYTES)
        * c.disk;
    ClusterEstimate {
        shape,
        rows_per_replica: rows,
        nlist,
        replicas,
        ingest_s: per_machine * at("build_s") * o.sustained_factor * c.ingest,
        disk_bytes,
        disk_bytes_per_node: disk_bytes / f64::from(shape.nodes.max(1)),
        index_bytes_per_node: per_node * at("index_bytes"),
        rss_bytes_per_node: per_node * at("rss_bytes"),
        shard_p50_ms: at("p50_ms") * c.latency,
        shard_p95_ms,
        p95_ms: shard_p95_ms + o.router_overhead_ms,
    }
}

/// A machine a plan places nodes on: the memory and disk one node may use.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Machine {
    pub ram_bytes: f64,
    pub disk_bytes: f64,
}

/// The smallest layout of `collection`'s vectors at its replication (its nprobe and rows as given; its shards,
/// nodes and machines are what the plan finds) whose shards meet the single-node budget (p95 and mapped index,
/// corrected) and whose nodes hold their replicas in half their memory and 80% of their disk; one node per
/// machine, at least `replication` of them (replicas of a shard on different nodes).
pub fn plan(
    model: &CostModel,
    collection: Shape,
    machine: Machine,
    o: Overheads,
    c: Corrections,
) -> ClusterEstimate {
    let replication = collection.replication;
    let shape = |shards: u32, nodes: u32| Shape {
        shards,
        nodes,
        machines: nodes,
        ..collection
    };
    let shard_fits = |e: &ClusterEstimate| {
        e.p95_ms <= BUDGET.max_p95_ms
            && e.index_bytes_per_node / (e.replicas as f64 / f64::from(e.shape.nodes))
                <= BUDGET.max_index_bytes
    };
    let mut shards = 1u32;
    while shards < 4096 && !shard_fits(&estimate(model, shape(shards, 1), o, c)) {
        shards += 1;
    }
    let mut nodes = replication.max(1);
    loop {
        let e = estimate(model, shape(shards, nodes), o, c);
        let fits = e.rss_bytes_per_node + e.index_bytes_per_node <= machine.ram_bytes / 2.0
            && e.disk_bytes_per_node <= machine.disk_bytes * 0.8;
        if fits || nodes >= 4096 {
            return e;
        }
        nodes += 1;
    }
}
