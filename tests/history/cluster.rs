//! The cluster of the history suite (`tests/history.rs`): 3 meta and 3 shard processes and a router, on
//! loopback, each shard node behind a [`Proxy`] of its own that it advertises, so that the nemesis can partition
//! it. Meta and shard nodes listen on fixed ports (a restarted process listens where it did); the proxies and
//! the router on ports from the OS.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use attest_proto::v1 as pb;
use serde_json::Value;

use super::proxy::Proxy;
use super::{http, wait_until, START_LIMIT};
use crate::common::{self, start_within, value_of, Proc};

/// The environment of every process: one BLAS thread (a 2-core machine runs seven processes), and anti-entropy
/// every 2 s instead of 10 s, so catch-up after the run is quick (and runs often during it).
const ENV: &[(&str, &str)] = &[
    ("OPENBLAS_NUM_THREADS", "1"),
    ("OMP_WAIT_POLICY", "PASSIVE"),
    ("ATTEST__AGENT__REPAIR_INTERVAL_MS", "2000"),
];

/// Loopback ports below the ephemeral range (32768..), where no outgoing connection takes one while its process
/// is down: a block of 20 from a place that depends on the test's pid, all free now.
fn free_ports() -> Vec<u16> {
    let start = (std::process::id() % 80) as u16;
    for k in 0..80 {
        let base = 12_000 + ((start + k) % 80) * 100;
        let ports: Vec<u16> = (base..base + 20).collect();
        if ports
            .iter()
            .all(|p| TcpListener::bind(("127.0.0.1", *p)).is_ok())
        {
            return ports;
        }
    }
    panic!("no block of 20 free loopback ports in 12000..20000");
}

pub(super) struct Cluster {
    pub(super) metas: Vec<Option<Proc>>,
    pub(super) shards: Vec<Option<Proc>>,
    /// Never faulted; kept alive as long as the cluster.
    router: Option<Proc>,
    meta_addrs: Vec<String>,
    /// Each shard node's own gRPC address (fixed, so a restarted node listens where its proxy connects).
    shard_addrs: Vec<String>,
    /// The proxy in front of each shard node: the address it advertises, so the router and its peers reach it
    /// only through the proxy, which the nemesis partitions. Dropped after the processes (fields drop in order).
    pub(super) proxies: Vec<Proxy>,
    /// Every meta address, comma-separated (`--meta`).
    pub(super) meta_list: String,
    peers: String,
    pub(super) url: String,
    pub(super) dir: PathBuf,
    pub(super) rt: tokio::runtime::Runtime,
}

impl Cluster {
    pub(super) fn start(dir: &Path) -> Cluster {
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        let ports = free_ports();
        let meta_addrs: Vec<String> = (0..3).map(|i| format!("127.0.0.1:{}", ports[i])).collect();
        let shard_addrs: Vec<String> = (0..3)
            .map(|i| format!("127.0.0.1:{}", ports[10 + i]))
            .collect();
        let peers = meta_addrs
            .iter()
            .enumerate()
            .map(|(i, a)| format!("{}=http://{a}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let meta_list = meta_addrs
            .iter()
            .map(|a| format!("http://{a}"))
            .collect::<Vec<_>>()
            .join(",");
        let proxies = shard_addrs
            .iter()
            .map(|a| Proxy::start(a.parse().unwrap()))
            .collect();
        let mut cluster = Cluster {
            metas: (0..3).map(|_| None).collect(),
            shards: (0..3).map(|_| None).collect(),
            router: None,
            meta_addrs,
            shard_addrs,
            proxies,
            meta_list,
            peers,
            url: String::new(),
            dir: dir.to_path_buf(),
            rt: tokio::runtime::Runtime::new().unwrap(),
        };
        for i in 0..3 {
            cluster.start_meta(i);
        }
        for i in 0..3 {
            cluster.start_shard(i);
        }
        let (router, line) = start_within(
            &[
                "serve",
                "--insecure",
                "--role",
                "router",
                "--meta",
                &cluster.meta_list,
                "--http",
                "127.0.0.1:0",
                "--grpc",
                "127.0.0.1:0",
            ],
            &dir.join("router"),
            &dir.join("logs/router.log"),
            ENV,
            START_LIMIT,
        );
        cluster.router = Some(router);
        cluster.url = value_of(&line, "http=");
        let url = cluster.url.clone();
        wait_until(START_LIMIT, "the router ready", || {
            http(Duration::from_secs(5))
                .get(format!("{url}/readyz"))
                .send()
                .is_ok_and(|r| r.status().is_success())
        });
        cluster
    }

    pub(super) fn start_meta(&mut self, i: usize) {
        let id = (i + 1).to_string();
        let (proc, _) = start_within(
            &[
                "serve",
                "--insecure",
                "--role",
                "meta",
                "--meta-id",
                &id,
                "--meta-peers",
                &self.peers,
                "--grpc",
                &self.meta_addrs[i],
            ],
            &self.dir.join(format!("meta-{id}")),
            &self.dir.join(format!("logs/meta-{id}.log")),
            ENV,
            START_LIMIT,
        );
        self.metas[i] = Some(proc);
    }

    /// Starts shard node `i` (again), advertising its proxy; returns once it has registered and caught up (it
    /// prints its address).
    pub(super) fn start_shard(&mut self, i: usize) {
        let name = format!("shard-{}", i + 1);
        let advertise = self.proxy_url(i);
        let (proc, _) = start_within(
            &[
                "serve",
                "--insecure",
                "--role",
                "shard",
                "--meta",
                &self.meta_list,
                "--grpc",
                &self.shard_addrs[i],
                "--advertise",
                &advertise,
                "--node-name",
                &name,
            ],
            &self.dir.join(&name),
            &self.dir.join(format!("logs/{name}.log")),
            ENV,
            START_LIMIT,
        );
        self.shards[i] = Some(proc);
    }

    /// The address shard node `i` advertises: its proxy's.
    pub(super) fn proxy_url(&self, i: usize) -> String {
        format!("http://{}", self.proxies[i].addr())
    }

    /// Panics unless meta records each shard node at its proxy's address: the address the router and the peer
    /// shards take from the shard map, so that a partitioned proxy cuts the node off from them.
    pub(super) fn assert_shards_behind_proxies(&self) {
        let status = self.status();
        for i in 0..self.proxies.len() {
            let name = format!("shard-{}", i + 1);
            let recorded = status["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|n| n["name"] == name.as_str())
                .map(|n| n["address"].clone());
            assert_eq!(
                recorded,
                Some(Value::from(self.proxy_url(i))),
                "meta's address of {name}: {status}"
            );
        }
    }

    /// Raft status of meta `i`, if it answers.
    pub(super) fn meta_status(&self, i: usize) -> Option<pb::MetaStatus> {
        let addr = format!("http://{}", self.meta_addrs[i]);
        self.rt.block_on(async {
            let mut client = pb::meta_service_client::MetaServiceClient::connect(addr)
                .await
                .ok()?;
            tokio::time::timeout(
                Duration::from_secs(2),
                client.status(pb::MetaStatusRequest {}),
            )
            .await
            .ok()?
            .ok()
            .map(|r| r.into_inner())
        })
    }

    pub(super) fn status(&self) -> Value {
        common::attest_json(&["status", "--json", "--meta", &self.meta_list])
    }
}
