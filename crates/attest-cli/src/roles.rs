//! Starting roles: `attest dev` serves the in-process stack of [`crate::local`] (meta, shard nodes, router,
//! answer tier and the local embedder in one process);
//! `attest serve --role meta|shard|router|embedder|answer` runs one role per process (the cluster wiring of
//! meta, shard and router is in `cluster.rs`). Every role is started through its crate's
//! `serve(..., listener, shutdown)` function, as the tests do.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use attest_answer::rerank::Reranker;
use attest_answer::{AnswerService, RouterClient};
use attest_embed::{build_embedder, Embedder, EmbedderBackend, EmbedderConfig};
use attest_shard::ShardNode;
use attest_telemetry::listener::Listener;
use attest_telemetry::ops::MetricsRefresh;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::info;

use crate::cli::{DevArgs, Role, ServeArgs};
use crate::config::{self, AttestConfig};
use crate::local::LocalStack;

const DEFAULT_ROUTER_HTTP: &str = "127.0.0.1:7700";
const DEFAULT_GRPC: &str = "127.0.0.1:7701";

/// The gRPC health service alone, for roles whose API is HTTP (embedder, answer), when `--grpc` is given.
async fn serve_grpc_health(
    listener: Option<Listener>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    let Some(listener) = listener else {
        shutdown.await;
        return Ok(());
    };
    let (mut reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("", tonic_health::ServingStatus::Serving)
        .await;
    tonic::transport::Server::builder()
        .add_service(health)
        .serve_with_incoming_shutdown(listener.incoming(), shutdown)
        .await?;
    Ok(())
}
const DEFAULT_EMBEDDER_HTTP: &str = "127.0.0.1:7900";
const DEFAULT_ANSWER_HTTP: &str = "127.0.0.1:7750";

/// The answer tier with the configured back ends (defaults: extractive composer, learned verifier, learned
/// reranker); `embedder` embeds questions for curated memory.
pub(crate) fn answer_service(
    router: RouterClient,
    embedder: Arc<dyn Embedder>,
    reranker: Arc<dyn Reranker>,
    cfg: &AttestConfig,
) -> anyhow::Result<Arc<AnswerService>> {
    Ok(Arc::new(AnswerService::new(
        router,
        attest_answer::verifier::verifier_from_config(&cfg.answer),
        reranker,
        embedder,
        cfg.answer.clone(),
    )?))
}

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

pub(crate) async fn until(mut rx: watch::Receiver<bool>) {
    while !*rx.borrow() {
        if rx.changed().await.is_err() {
            return;
        }
    }
}

/// The configured embedder, with the command line's overrides: `--model-dir` for the local model,
/// `--embedder-url` to use a remote service instead.
pub(crate) fn load_embedder(
    config: &EmbedderConfig,
    model_dir: Option<PathBuf>,
    embedder_url: Option<&str>,
) -> anyhow::Result<Arc<dyn Embedder>> {
    let mut config = config.clone();
    if let Some(dir) = model_dir {
        config.local.model_dir = dir;
    }
    if let Some(url) = embedder_url {
        config.use_remote_url(url);
    }
    if config.backend == EmbedderBackend::Remote {
        info!(url = %config.remote.url, event = "embedder_remote", "embedding through a remote service");
    }
    Ok(build_embedder(&config)?)
}

/// Sets the shard gauges of every node before `/metrics` renders.
fn shard_metrics(nodes: Vec<Arc<ShardNode>>) -> MetricsRefresh {
    Arc::new(move || nodes.iter().for_each(|n| n.publish_metrics()))
}

pub(crate) async fn bind_optional(addr: Option<&str>) -> anyhow::Result<Option<TcpListener>> {
    match addr {
        Some(a) => Ok(Some(bind(a).await?)),
        None => Ok(None),
    }
}

/// ` grpc=ADDR` for a "listening" line, or nothing.
fn grpc_suffix(listener: &Option<Listener>) -> anyhow::Result<String> {
    Ok(match listener {
        Some(l) => format!(" grpc={}", l.local_addr()?),
        None => String::new(),
    })
}

/// `http://ADDR` or `https://ADDR`: how clients reach `listener`.
pub(crate) fn url_of(listener: &Listener) -> anyhow::Result<String> {
    Ok(format!(
        "{}://{}",
        listener.scheme(),
        listener.local_addr()?
    ))
}

async fn bind(addr: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))
}

/// Turns authentication on for these key rings when an admin key is given; says which way it went.
fn enable_auth(
    rings: &[&Arc<attest_auth::KeyRing>],
    admin_key: Option<&str>,
) -> anyhow::Result<()> {
    match admin_key {
        Some(key) => {
            for ring in rings {
                ring.enable(key)
                    .map_err(|e| anyhow::anyhow!("--admin-key: {e}"))?;
            }
            info!(
                event = "auth_enabled",
                "authentication on: every API request needs a key"
            );
        }
        None => {
            tracing::warn!(event = "auth_disabled",
            "authentication off: any caller may do anything (give --admin-key / ATTEST_ADMIN_KEY)")
        }
    }
    Ok(())
}

/// The OpenAPI document a process serves: as generated, or, when it was started without an admin key and so
/// authenticates no one, without the key requirements it does not enforce.
fn served_document(
    doc: utoipa::openapi::OpenApi,
    admin_key: Option<&str>,
) -> utoipa::openapi::OpenApi {
    match admin_key {
        Some(_) => doc,
        None => attest_telemetry::openapi::without_api_keys(doc),
    }
}

/// With authentication on, `attest dev`'s internal services (meta on its gRPC listener, the shard nodes'
/// loopback ports) accept only a cluster key made for this run, which its own roles present; without it they
/// are open like the rest.
fn dev_credential(auth: bool) -> anyhow::Result<attest_proto::ClusterCredential> {
    if !auth {
        return Ok(attest_proto::ClusterCredential::none());
    }
    attest_proto::ClusterCredential::new(&attest_auth::secret::random_token())
        .map_err(|e| anyhow::anyhow!("cluster key: {e}"))
}

pub async fn dev(args: DevArgs) -> anyhow::Result<()> {
    let cfg = config::load(args.config.as_deref(), std::env::vars())?;
    let started = std::time::Instant::now();
    let http = bind(&args.http).await?;
    let grpc = bind(&args.grpc).await?;
    let (http_addr, grpc_addr) = (http.local_addr()?, grpc.local_addr()?);
    // Meta is served on the gRPC listener too, and records it as its address: `attest status --meta` works
    // against `attest dev`.
    let stack = LocalStack::start(
        &cfg,
        &args.data_dir,
        args.shards,
        args.model_dir.clone(),
        args.embedder_url.as_deref(),
        Some(format!("http://{grpc_addr}")),
        dev_credential(args.admin_key.is_some())?,
    )
    .await?;
    // Before the "listening" line: a caller waiting for it must not see a start that then fails on a bad key.
    enable_auth(
        &[stack.router.keys(), stack.answer.keys()],
        args.admin_key.as_deref(),
    )?;
    println!(
        "attest dev listening http=http://{http_addr} grpc={grpc_addr} shards={} data_dir={}",
        args.shards,
        args.data_dir.display()
    );
    info!(http = %http_addr, grpc = %grpc_addr, startup_ms = started.elapsed().as_millis() as u64,
        faiss = attest_index::ivfpq::faiss_opt_level(), event = "dev_started", "attest dev started");
    let stop = shutdown_signal();
    let meta_service = stack.plane.meta_service();
    let (a, b) = tokio::join!(
        attest_router::server::serve_http(
            Arc::clone(&stack.router),
            Some(shard_metrics(stack.nodes().to_vec())),
            Some(attest_answer::http::routes(Arc::clone(&stack.answer))),
            served_document(crate::openapi::dev_document(), args.admin_key.as_deref()),
            http,
            until(stop.clone())
        ),
        attest_router::server::serve_grpc_with(
            Arc::clone(&stack.router),
            |routes| routes
                .add_service(attest_answer::grpc::AnswerGrpc::server(Arc::clone(
                    &stack.answer
                )))
                .add_service(meta_service),
            grpc,
            until(stop)
        ),
    );
    stack.plane.shutdown().await?;
    a?;
    b?;
    Ok(())
}

pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let mut cfg = config::load(args.config.as_deref(), std::env::vars())?;
    let security = crate::security::Security::from_args(&args)?;
    if let Some(token) = &args.metrics_token {
        attest_telemetry::ops::protect_metrics(token);
    }
    // A remote embedder inside the cluster is an internal service: it has a certificate of the cluster's CA
    // and admits the cluster credential (this node's certificate under mutual TLS, else the cluster key).
    let remote = &mut cfg.embedder.remote;
    if remote.ca_file.is_none() && args.tls_ca.is_some() {
        remote.ca_file = args.tls_ca.clone();
        remote.client_cert_file = args.tls_cert.clone();
        remote.client_key_file = args.tls_key.clone();
    }
    if remote.api_key.is_none() {
        remote.api_key = args.cluster_key.clone();
    }
    let stop = shutdown_signal();
    match args.role {
        Role::Meta => crate::cluster::serve_meta(&args, &cfg, &security, until(stop)).await,
        Role::Shard if !args.meta.is_empty() => {
            let node = crate::local::open_node(&args.data_dir, &cfg)?;
            crate::cluster::serve_shard_in_cluster(&args, &cfg, &security, node, stop).await
        }
        Role::Shard => {
            let node = crate::local::open_node(&args.data_dir, &cfg)?;
            let listener =
                security.internal(bind(args.grpc.as_deref().unwrap_or(DEFAULT_GRPC)).await?);
            let ops = match &args.http {
                Some(addr) => Some(security.public(bind(addr).await?)),
                None => None,
            };
            println!(
                "attest shard listening grpc={}{} data_dir={}",
                listener.local_addr()?,
                match &ops {
                    Some(l) => format!(" http={}", url_of(l)?),
                    None => String::new(),
                },
                args.data_dir.display()
            );
            let guard =
                attest_auth::cluster::ClusterGuard::for_listener(security.credential(), &listener);
            let grpc = attest_shard::serve(Arc::clone(&node), listener, guard, until(stop.clone()));
            match ops {
                Some(ops) => {
                    let (a, b) =
                        tokio::join!(grpc, attest_shard::serve_ops(node, ops, until(stop)));
                    a?;
                    b
                }
                None => grpc.await,
            }
        }
        Role::Answer => {
            let endpoint = args
                .router
                .as_deref()
                .context("--router (the router's gRPC endpoint) is required for the answer role")?;
            let embedder = load_embedder(
                &cfg.embedder,
                args.model_dir.clone(),
                args.embedder_url.as_deref(),
            )?;
            let reranker = attest_answer::rerank::from_config(&cfg.answer.rerank)?;
            let answer = answer_service(
                RouterClient::connect_lazy(endpoint, security.client_tls())?,
                embedder,
                reranker,
                &cfg,
            )?;
            if !args.meta.is_empty() {
                answer.watch_meta(crate::cluster::meta_client(
                    &args.meta,
                    security.credential().clone(),
                )?);
            }
            enable_auth(&[answer.keys()], args.admin_key.as_deref())?;
            let http =
                security.public(bind(args.http.as_deref().unwrap_or(DEFAULT_ANSWER_HTTP)).await?);
            let grpc = bind_optional(args.grpc.as_deref())
                .await?
                .map(|l| security.public(l));
            println!(
                "attest answer listening http={}{} router={endpoint}",
                url_of(&http)?,
                grpc_suffix(&grpc)?
            );
            let app = attest_telemetry::http_error::with_json_errors(
                attest_answer::http::routes(Arc::clone(&answer))
                    .merge(attest_telemetry::ops::routes(
                        attest_telemetry::ops::always_ready(),
                        None,
                    ))
                    .merge(attest_telemetry::openapi::route(&served_document(
                        attest_answer::openapi::document(),
                        args.admin_key.as_deref(),
                    ))),
            );
            // `--grpc`: the streaming `attest.v1.AnswerService` with the gRPC health service.
            let grpc_stop = until(stop.clone());
            let serve_answer_grpc = async move {
                match grpc {
                    Some(listener) => {
                        attest_answer::grpc::serve_grpc(answer, listener, grpc_stop).await?
                    }
                    None => grpc_stop.await,
                }
                anyhow::Ok(())
            };
            let (a, b) = tokio::join!(
                attest_telemetry::listener::serve_http(http, app, until(stop)),
                serve_answer_grpc,
            );
            a?;
            b
        }
        Role::Embedder => {
            let mut local = cfg.embedder.clone();
            local.backend = EmbedderBackend::Local;
            let embedder = load_embedder(&local, args.model_dir.clone(), None)?;
            // The embedding API is internal (the routers and answer replicas call it); `/healthz`, `/readyz`
            // and `/metrics` on the same port stay reachable by kubelet, which has no client certificate (the
            // guard wants one, or the cluster key, on the API routes only); the gRPC health service is public.
            let http = security
                .internal_http(bind(args.http.as_deref().unwrap_or(DEFAULT_EMBEDDER_HTTP)).await?);
            let guard =
                attest_auth::cluster::ClusterGuard::for_listener(security.credential(), &http);
            let health = bind_optional(args.grpc.as_deref())
                .await?
                .map(|l| security.public(l));
            println!(
                "attest embedder listening http={}{} model={} dimension={}",
                url_of(&http)?,
                grpc_suffix(&health)?,
                embedder.id(),
                embedder.dimension()
            );
            let (a, b) = tokio::join!(
                attest_embed::server::serve(
                    embedder,
                    cfg.embed_server.clone(),
                    guard,
                    http,
                    until(stop.clone())
                ),
                serve_grpc_health(health, until(stop)),
            );
            a?;
            b
        }
        Role::Router => {
            anyhow::ensure!(
                !args.meta.is_empty(),
                "the router role needs --meta (the meta nodes whose shard map it serves)"
            );
            let embedder = load_embedder(
                &cfg.embedder,
                args.model_dir.clone(),
                args.embedder_url.as_deref(),
            )?;
            let router = crate::cluster::cluster_router(&args, &cfg, &security, embedder).await?;
            enable_auth(&[router.keys()], args.admin_key.as_deref())?;
            let http =
                security.public(bind(args.http.as_deref().unwrap_or(DEFAULT_ROUTER_HTTP)).await?);
            let grpc = security.public(bind(args.grpc.as_deref().unwrap_or(DEFAULT_GRPC)).await?);
            println!(
                "attest router listening http={} grpc={}",
                url_of(&http)?,
                grpc.local_addr()?
            );
            let (a, b) = tokio::join!(
                attest_router::server::serve_http(
                    Arc::clone(&router),
                    None,
                    None,
                    served_document(
                        attest_router::openapi::document(),
                        args.admin_key.as_deref()
                    ),
                    http,
                    until(stop.clone())
                ),
                attest_router::server::serve_grpc(router, grpc, until(stop)),
            );
            a?;
            b
        }
    }
}
