//! The shard role: a shard node's storage served over gRPC, alone or joined to meta (`--meta`). It listens at
//! once; `/readyz` says it is replaying its log, then registering and reconciling with the shard map. Until it
//! is ready its gRPC service answers only its peers' catch-up reads; other calls wait (callers hedge or time
//! out), as `attest_shard::startup_gate` says.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use anyhow::Context;
use attest_auth::cluster::ClusterGuard;
use attest_index::EngineConfig;
use attest_proto::meta_client::with_scheme;
use attest_shard::{ClusterAgentConfig, ShardNode, ShardNodeConfig};
use attest_telemetry::readiness::Readiness;

use crate::node_config::NodeConfig;
use crate::plumbing::security::Security;
use crate::plumbing::{
    finish, listening_suffix, load_blocking, meta_client, url_of, HttpTask, Listeners, Shutdown,
};

/// Opens a shard node's storage under `dir` with the configured engine defaults (replaying its log: blocking).
pub fn open_node(dir: &Path, engine: &EngineConfig) -> anyhow::Result<Arc<ShardNode>> {
    ShardNode::open(ShardNodeConfig {
        data_dir: dir.to_path_buf(),
        engine_defaults: engine.clone(),
    })
    .with_context(|| format!("opening shard node in {}", dir.display()))
}

/// Serves a shard node on `listeners.grpc` (and `/healthz`, `/readyz`, `/metrics` on `listeners.http`) until
/// `shutdown`.
pub async fn serve(
    cfg: &NodeConfig,
    listeners: Listeners,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let security = Security::for_node(cfg)?;
    let tcp = listeners
        .grpc
        .context("the shard role needs a gRPC listener")?;
    let listener = security.internal(tcp);
    let ops = listeners.http.map(|l| security.public(l));
    let ops_url = listening_suffix("http", ops.as_ref())?;
    // The "listening" line waits for registration (it names the node id); the log says at once where it listens.
    tracing::info!(grpc = %listener.local_addr()?,
        ops_http = %ops.as_ref().map(url_of).transpose()?.unwrap_or_default(),
        event = "shard_listening", "listening; serving once its data is open (and it has registered with meta)");
    let readiness = Readiness::waiting(format!(
        "opening the shard node's data in {} (replaying its log)",
        cfg.data_dir.display()
    ));
    let opened: Arc<OnceLock<Arc<ShardNode>>> = Arc::default();
    let ops_task = ops.map(|l| {
        let opened = Arc::clone(&opened);
        let refresh: attest_telemetry::ops::MetricsRefresh = Arc::new(move || {
            if let Some(node) = opened.get() {
                node.publish_metrics();
            }
        });
        HttpTask::start(
            l,
            attest_telemetry::ops::routes(readiness.check(), Some(refresh)),
            &shutdown,
        )
    });
    let served = serve_node(
        cfg, &security, listener, &ops_url, &readiness, &opened, &shutdown,
    )
    .await;
    finish(ops_task, served).await
}

/// Opens the node, joins the cluster when `--meta` is given, then serves gRPC until `shutdown`.
async fn serve_node(
    cfg: &NodeConfig,
    security: &Security,
    listener: attest_telemetry::listener::Listener,
    ops_url: &str,
    readiness: &Readiness,
    opened: &OnceLock<Arc<ShardNode>>,
    shutdown: &Shutdown,
) -> anyhow::Result<()> {
    let (dir, engine) = (cfg.data_dir.clone(), cfg.config.engine.clone());
    let open = load_blocking("opening the shard node", move || open_node(&dir, &engine));
    let Some(node) = shutdown.unless_signalled(open).await else {
        return Ok(());
    };
    let node = node?;
    node.set_disk_reserve(&cfg.config.disk);
    node.set_snapshot_destinations(
        cfg.config
            .snapshot_destinations(std::slice::from_ref(&cfg.data_dir))?,
    );
    let _ = opened.set(Arc::clone(&node));
    if cfg.meta.is_empty() {
        readiness.set_ready();
        crate::plumbing::say(format_args!(
            "attest shard listening grpc={}{ops_url} data_dir={}",
            listener.local_addr()?,
            cfg.data_dir.display()
        ));
        crate::plumbing::say_ready(cfg.role);
        let guard = ClusterGuard::for_listener(security.credential(), &listener);
        return attest_shard::serve(node, listener, guard, shutdown.signalled()).await;
    }
    let agent = ClusterAgentConfig {
        name: cfg
            .node_name
            .clone()
            .unwrap_or_else(|| node_name_from(&cfg.data_dir)),
        // The bound address, so `--grpc 127.0.0.1:0` advertises the port it got.
        advertise: match &cfg.advertise {
            Some(a) => a.clone(),
            None => with_scheme(&listener.local_addr()?.to_string()),
        },
        zone: cfg.zone.clone(),
        ..cfg.config.agent.clone()
    };
    let meta = meta_client(&cfg.meta, security.credential().clone())?;
    let guard = ClusterGuard::for_listener(meta.credential(), &listener);
    readiness.set_waiting(format!(
        "registering with meta ({}) and reconciling with the shard map",
        cfg.meta.join(",")
    ));
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let agent_task = tokio::spawn(attest_shard::run_cluster_agent(
        Arc::clone(&node),
        meta,
        agent,
        ready_tx,
        shutdown.signalled(),
    ));
    // Served from now on, behind the gate: peers restarting beside this node catch up from it during its own
    // first pass, while searches and writes wait for the node to be ready (attest_shard::startup_gate).
    let (gate, gated) = attest_shard::StartupGate::closed();
    let local_addr = listener.local_addr()?;
    let server = tokio::spawn(attest_shard::serve_gated(
        node,
        listener,
        guard,
        gated,
        shutdown.signalled(),
    ));
    let node_id = match shutdown.unless_signalled(ready_rx).await {
        Some(Ok(id)) => id,
        Some(Err(_)) => {
            server.abort();
            agent_task.await??;
            anyhow::bail!("the cluster agent stopped before the node was ready");
        }
        None => {
            let stopped = agent_task.await?;
            server.await??;
            return stopped;
        }
    };
    gate.open();
    readiness.set_ready();
    crate::plumbing::say(format_args!(
        "attest shard listening grpc={local_addr}{ops_url} node_id={node_id} meta={} data_dir={}",
        cfg.meta.join(","),
        cfg.data_dir.display()
    ));
    crate::plumbing::say_ready(cfg.role);
    let served = server.await?;
    agent_task.await??;
    served
}

fn node_name_from(dir: &Path) -> String {
    std::fs::canonicalize(dir)
        .unwrap_or_else(|_| dir.to_path_buf())
        .display()
        .to_string()
}
