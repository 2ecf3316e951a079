//! The control plane in one process, and the stack over it: what `attest dev` serves, `attest-lab eval` measures and
//! the in-process tests drive.
//!
//! There is one control plane, the cluster's: a single-voter meta (raft-rs on RocksDB under `DATA_DIR/meta`)
//! and shard nodes that register and reconcile through the same agent as a cluster shard
//! ([`attest_shard::run_cluster_agent`]). Each shard node serves gRPC on a loopback port (so its registered
//! address is real: `attest status` and peers reach it), while this process's router calls it in process.
//! Restarting on the same data directory keeps collections (in meta) and data (in the shard nodes, which
//! register again under the same names and so keep their node ids).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use attest_answer::rerank::Reranker;
use attest_answer::{AnswerService, RouterClient};
use attest_api::router::grpc::RouterServiceImpl;
use attest_auth::cluster::ClusterGuard;
use attest_embed::Embedder;
use attest_meta::{MetaConfig, MetaNode};
use attest_proto::meta_client::with_scheme;
use attest_proto::v1::router_service_server::RouterService as RouterServiceApi;
use attest_proto::{ClusterCredential, FollowMode, MetaClient};
use attest_router::topology::ClusterView;
use attest_router::{Router, ShardClient};
use attest_shard::{ClusterAgentConfig, ShardNode, ShardServiceImpl};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::config::AttestConfig;
use crate::plumbing::{Shutdown, ShutdownTrigger};

/// The meta node id of the in-process control plane (its only voter).
const LOCAL_META_ID: u64 = 1;

/// How long start-up waits for a shard node's first registration and reconcile pass.
const SHARD_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// A single-voter meta and `shards` shard nodes joined to it, all in this process.
pub struct ControlPlane {
    meta: MetaNode,
    /// Where this process reaches meta (its own loopback listener).
    meta_address: String,
    /// What the in-process roles present to meta and the shard nodes' gRPC (none: they are open).
    credential: ClusterCredential,
    pub nodes: Vec<Arc<ShardNode>>,
    /// In-process clients of the shard nodes, by the address each registered with.
    local_clients: HashMap<String, ShardClient>,
    stop: ShutdownTrigger,
    tasks: Vec<JoinHandle<anyhow::Result<()>>>,
    /// The snapshot destinations its shard nodes and router admit.
    snapshot_destinations: attest_snapshot::DestinationPolicy,
}

/// Where `attest dev` admits directory snapshot destinations when no root is configured.
pub const DEFAULT_SNAPSHOT_ROOT: &str = "snapshots";

impl ControlPlane {
    /// Starts meta under `data_dir/meta` and shard nodes under `data_dir/shard-node-I`, and waits until every
    /// node has registered and reconciled with the shard map. `advertise` is the address meta records for
    /// itself (the address clients are told; `attest dev` gives its gRPC address, where it serves meta too).
    pub async fn start(
        cfg: &AttestConfig,
        data_dir: &Path,
        shards: usize,
        advertise: Option<String>,
        credential: ClusterCredential,
    ) -> anyhow::Result<ControlPlane> {
        anyhow::ensure!(shards >= 1, "--shards must be at least 1");
        refuse_pre_meta_layout(data_dir)?;
        // Snapshots go under the configured roots (default `DATA_DIR/snapshots`), never into meta's or a shard
        // node's directory.
        let mut snapshots = cfg.clone();
        if snapshots.snapshots.allowed_roots.is_empty() {
            snapshots.snapshots.allowed_roots = vec![data_dir.join(DEFAULT_SNAPSHOT_ROOT)];
        }
        let node_dirs: Vec<PathBuf> = std::iter::once(data_dir.join("meta"))
            .chain((0..shards).map(|i| data_dir.join(format!("shard-node-{i}"))))
            .collect();
        let snapshot_destinations = snapshots.snapshot_destinations(&node_dirs)?;
        let meta_listener = TcpListener::bind("127.0.0.1:0").await?;
        let meta_address = with_scheme(&meta_listener.local_addr()?.to_string());
        let advertise = advertise.unwrap_or_else(|| meta_address.clone());
        let meta = MetaNode::start(
            MetaConfig {
                id: LOCAL_META_ID,
                advertise_address: advertise.clone(),
                peers: vec![(LOCAL_META_ID, advertise)],
                join: None,
                data_dir: data_dir.join("meta"),
                cluster_credential: credential.clone(),
                disk: cfg.disk.clone(),
                ..cfg.meta.clone()
            },
            meta_listener,
        )
        .await
        .context("starting the in-process meta")?;
        let client = MetaClient::with_credential([meta_address.as_str()], credential.clone())?;
        let (stop, _) = Shutdown::new();
        let mut plane = ControlPlane {
            meta,
            meta_address,
            credential: credential.clone(),
            nodes: Vec::new(),
            local_clients: HashMap::new(),
            stop,
            tasks: Vec::new(),
            snapshot_destinations,
        };
        let mut ready = Vec::new();
        for i in 0..shards {
            let node =
                crate::shard::open_node(&data_dir.join(format!("shard-node-{i}")), &cfg.engine)?;
            node.set_disk_reserve(&cfg.disk);
            node.set_snapshot_destinations(plane.snapshot_destinations.clone());
            let listener = TcpListener::bind("127.0.0.1:0").await?;
            let address = with_scheme(&listener.local_addr()?.to_string());
            plane.tasks.push(tokio::spawn(attest_shard::serve(
                Arc::clone(&node),
                listener,
                ClusterGuard::new(&credential),
                plane.stop.subscribe().signalled(),
            )));
            let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
            plane
                .tasks
                .push(tokio::spawn(attest_shard::run_cluster_agent(
                    Arc::clone(&node),
                    client.clone(),
                    ClusterAgentConfig {
                        // Stable across restarts, so meta gives the node its id (and its replicas) back.
                        name: format!("local-shard-node-{i}"),
                        advertise: address.clone(),
                        ..cfg.agent.clone()
                    },
                    ready_tx,
                    plane.stop.subscribe().signalled(),
                )));
            ready.push(ready_rx);
            plane.local_clients.insert(
                address,
                ShardClient::Local(Arc::new(ShardServiceImpl::new(Arc::clone(&node)))),
            );
            plane.nodes.push(node);
        }
        for (i, rx) in ready.into_iter().enumerate() {
            tokio::time::timeout(SHARD_READY_TIMEOUT, rx)
                .await
                .with_context(|| format!("shard node {i} did not register with meta in time"))?
                .with_context(|| format!("shard node {i} stopped before it was ready"))?;
        }
        Ok(plane)
    }

    /// A router over this control plane's shard map, calling the local shard nodes in process.
    pub async fn router(
        &self,
        cfg: &AttestConfig,
        embedder: Arc<dyn Embedder>,
    ) -> anyhow::Result<Router> {
        let view = ClusterView::connect_with_local(
            self.meta_client()?,
            cfg.router.replicas.clone(),
            self.local_clients.clone(),
        )
        .await
        .context("reading the shard map from the in-process meta")?;
        view.spawn_watch(
            FollowMode::from_setting(cfg.router.meta_watch),
            Duration::from_millis(cfg.router.meta_poll_ms),
        );
        Ok(Router::builder(cfg.router.clone(), view, embedder)
            .local_embedder_settings(cfg.embedder.local.clone())
            .snapshot_destinations(self.snapshot_destinations.clone())
            .build())
    }

    pub fn meta_client(&self) -> anyhow::Result<MetaClient> {
        Ok(MetaClient::with_credential(
            [self.meta_address.as_str()],
            self.credential.clone(),
        )?)
    }

    /// The meta service, to be served beside the router's on `attest dev`'s gRPC listener.
    pub fn meta_service(&self) -> attest_meta::GuardedMetaService {
        self.meta.service()
    }

    /// Stops the agents and shard servers, then meta (its Raft loop and RocksDB).
    pub async fn shutdown(self) -> anyhow::Result<()> {
        self.stop.trigger();
        for task in self.tasks {
            match task.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "local shard task failed"),
                Err(e) => tracing::warn!(error = %e, "local shard task panicked"),
            }
        }
        self.meta.shutdown().await
    }
}

/// Data directories written before `attest dev` ran meta kept collections in `router/catalog.json`. Their shard
/// nodes would find no collection in a new meta and drop every replica they hold: refuse instead.
fn refuse_pre_meta_layout(data_dir: &Path) -> anyhow::Result<()> {
    let catalog = data_dir.join("router").join("catalog.json");
    anyhow::ensure!(
        !catalog.exists() || data_dir.join("meta").exists(),
        "{} was written by an older `attest dev` (collections in {}); its data would be dropped by the \
         shard map of the new control plane. Use a new --data-dir and ingest again",
        data_dir.display(),
        catalog.display()
    );
    Ok(())
}

/// Every role in one process over the in-process control plane: what `attest dev` serves and `attest-lab eval`
/// measures.
pub struct LocalStack {
    pub plane: ControlPlane,
    pub router: Arc<Router>,
    /// The router's gRPC service, called in process.
    pub router_service: Arc<RouterServiceImpl>,
    pub answer: Arc<AnswerService>,
    /// The reranker the answer tier ranks candidates with.
    pub reranker: Arc<dyn Reranker>,
}

impl LocalStack {
    /// Starts the control plane with `shards` shard nodes under `data_dir`, the router over it and the answer
    /// tier over the router. `attest dev` keeps one replica per shard unless a collection asks for more.
    pub async fn start(
        cfg: &AttestConfig,
        data_dir: &Path,
        shards: usize,
        model_dir: Option<PathBuf>,
        embedder_url: Option<&str>,
        advertise: Option<String>,
        credential: ClusterCredential,
    ) -> anyhow::Result<LocalStack> {
        let embedder = crate::plumbing::load_embedder(&cfg.embedder, model_dir, embedder_url)?;
        let mut cfg = cfg.clone();
        cfg.router.default_replication = 1;
        let plane = ControlPlane::start(&cfg, data_dir, shards, advertise, credential).await?;
        let router = Arc::new(plane.router(&cfg, Arc::clone(&embedder)).await?);
        let router_service = Arc::new(RouterServiceImpl::new(Arc::clone(&router)));
        let reranker = attest_answer::rerank::from_config(&cfg.answer.rerank)?;
        // Curated memory embeds with the model its thresholds were set with: the router's own embedder when it
        // is that model.
        let memory_embedder = if embedder.id() == attest_answer::memory::MEMORY_MODEL.id()
            || embedder_url.is_some()
        {
            embedder
        } else {
            crate::plumbing::load_memory_embedder(&cfg.embedder, None, None)?
        };
        let answer = crate::answer::answer_service(
            RouterClient::Local(Arc::clone(&router_service) as Arc<dyn RouterServiceApi>),
            memory_embedder,
            Arc::clone(&reranker),
            &cfg,
        )?;
        answer.watch_meta(plane.meta_client()?);
        Ok(LocalStack {
            plane,
            router,
            router_service,
            answer,
            reranker,
        })
    }

    pub fn nodes(&self) -> &[Arc<ShardNode>] {
        &self.plane.nodes
    }
}
