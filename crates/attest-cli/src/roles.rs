//! Starting roles: `attest dev` wires shard nodes, router and the local embedder in one process;
//! `attest serve --role shard|router` runs one role per process. Every role is started through its crate's
//! `serve(..., listener, shutdown)` function, as the tests do.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use attest_embed::{CachedEmbedder, Embedder, LocalEmbedderConfig, MiniLmEmbedder};
use attest_router::{Router, ShardClient};
use attest_shard::{ShardNode, ShardNodeConfig, ShardServiceImpl};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::info;

use crate::cli::{DevArgs, Role, ServeArgs};
use crate::config::{self, AttestConfig};

/// Resolves on SIGINT or SIGTERM and tells every server to stop.
fn shutdown_signal() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("signal handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        let _ = tx.send(true);
    });
    rx
}

async fn until(mut rx: watch::Receiver<bool>) {
    while !*rx.borrow() {
        if rx.changed().await.is_err() {
            return;
        }
    }
}

fn load_embedder(model_dir: Option<PathBuf>) -> anyhow::Result<Arc<dyn Embedder>> {
    let mut cfg = LocalEmbedderConfig::default();
    if let Some(d) = model_dir {
        cfg.model_dir = d;
    }
    let model = MiniLmEmbedder::load(&cfg.model_dir.clone(), &cfg)?;
    Ok(Arc::new(CachedEmbedder::with_capacity(model, 1024)))
}

fn open_node(dir: &Path, cfg: &AttestConfig) -> anyhow::Result<Arc<ShardNode>> {
    ShardNode::open(ShardNodeConfig {
        data_dir: dir.to_path_buf(),
        engine_defaults: cfg.engine.clone(),
    })
    .with_context(|| format!("opening shard node in {}", dir.display()))
}

async fn bind(addr: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))
}

pub async fn dev(args: DevArgs) -> anyhow::Result<()> {
    let cfg = config::load(args.config.as_deref(), std::env::vars())?;
    anyhow::ensure!(args.shards >= 1, "--shards must be at least 1");
    let embedder = load_embedder(args.model_dir.clone())?;
    let mut clients = Vec::new();
    for i in 0..args.shards {
        let node = open_node(&args.data_dir.join(format!("shard-node-{i}")), &cfg)?;
        clients.push(ShardClient::Local(Arc::new(ShardServiceImpl::new(node))));
    }
    let router = Arc::new(Router::new(
        cfg.router.clone(),
        &args.data_dir.join("router"),
        clients,
        embedder,
    )?);
    let http = bind(&args.http).await?;
    let grpc = bind(&args.grpc).await?;
    let (http_addr, grpc_addr) = (http.local_addr()?, grpc.local_addr()?);
    println!(
        "attest dev listening http=http://{http_addr} grpc={grpc_addr} shards={} data_dir={}",
        args.shards,
        args.data_dir.display()
    );
    info!(http = %http_addr, grpc = %grpc_addr, event = "dev_started", "attest dev started");
    let stop = shutdown_signal();
    let (a, b) = tokio::join!(
        attest_router::server::serve_http(Arc::clone(&router), http, until(stop.clone())),
        attest_router::server::serve_grpc(router, grpc, until(stop)),
    );
    a?;
    b?;
    Ok(())
}

pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let cfg = config::load(args.config.as_deref(), std::env::vars())?;
    let stop = shutdown_signal();
    match args.role {
        Role::Shard => {
            let node = open_node(&args.data_dir, &cfg)?;
            let listener = bind(&args.grpc).await?;
            println!(
                "attest shard listening grpc={} data_dir={}",
                listener.local_addr()?,
                args.data_dir.display()
            );
            attest_shard::serve(node, listener, until(stop)).await
        }
        Role::Router => {
            anyhow::ensure!(
                !args.shard_nodes.is_empty(),
                "--shard-nodes is required for the router role"
            );
            let clients = args
                .shard_nodes
                .iter()
                .map(|e| ShardClient::connect_lazy(e))
                .collect::<Result<Vec<_>, _>>()?;
            let embedder = load_embedder(args.model_dir.clone())?;
            let router = Arc::new(Router::new(
                cfg.router.clone(),
                &args.data_dir,
                clients,
                embedder,
            )?);
            let http = bind(&args.http).await?;
            let grpc = bind(&args.grpc).await?;
            println!(
                "attest router listening http=http://{} grpc={}",
                http.local_addr()?,
                grpc.local_addr()?
            );
            let (a, b) = tokio::join!(
                attest_router::server::serve_http(Arc::clone(&router), http, until(stop.clone())),
                attest_router::server::serve_grpc(router, grpc, until(stop)),
            );
            a?;
            b
        }
    }
}
