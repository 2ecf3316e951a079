//! The embedder role: an embedding service (OpenAI-compatible `/v1/embeddings` and text-embeddings-inference
//! `/embed`) over the local model, for routers and answer replicas. It listens at once and is ready once the
//! model is loaded.

use std::sync::Arc;

use anyhow::Context;
use attest_embed::EmbedderBackend;
use attest_telemetry::readiness::Readiness;

use crate::node_config::NodeConfig;
use crate::plumbing::security::Security;
use crate::plumbing::{
    finish, grpc_suffix, load_blocking, load_embedder, url_of, HttpTask, LateRoutes, Listeners,
    Shutdown,
};

/// Serves the embedding API on `listeners.http` (and gRPC health on `listeners.grpc`) until `shutdown`.
pub async fn serve(
    cfg: &NodeConfig,
    listeners: Listeners,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let security = Security::for_node(cfg)?;
    // The embedding API is internal (routers and answer replicas call it); `/healthz`, `/readyz` and
    // `/metrics` on the same port stay reachable by kubelet, which has no client certificate (the guard wants
    // one, or the cluster key, on the API routes only); the gRPC health service is public.
    let http = security.internal_http(
        listeners
            .http
            .context("the embedder role needs an HTTP listener")?,
    );
    let guard = attest_auth::cluster::ClusterGuard::for_listener(security.credential(), &http);
    let health = listeners.grpc.map(|l| security.public(l));
    let readiness = Readiness::waiting("loading the embedding model");
    let late = LateRoutes::default();
    let app = late.serve_after(
        attest_telemetry::ops::routes(readiness.check(), None),
        readiness.check(),
    );
    crate::plumbing::say(format_args!(
        "attest embedder listening http={}{}",
        url_of(&http)?,
        grpc_suffix(health.as_ref())?
    ));
    crate::plumbing::announce_when_ready(cfg.role, readiness.check(), &shutdown);
    let http = HttpTask::start(http, app, &shutdown);
    let health_task = health.map(|listener| {
        let health =
            attest_telemetry::readiness::ReadinessHealth::new(readiness.check(), Vec::new());
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(health.server())
                .serve_with_incoming_shutdown(listener.incoming(), shutdown.signalled()),
        )
    });
    let mut local = cfg.config.embedder.clone();
    local.backend = EmbedderBackend::Local;
    let model_dir = cfg.model_dir.clone();
    let load = load_blocking("loading the embedding model", move || {
        load_embedder(&local, model_dir, None)
    });
    // `None`: stopped while loading.
    let loaded = shutdown.unless_signalled(load).await.transpose();
    if let Ok(Some(embedder)) = &loaded {
        tracing::info!(model = %embedder.id(), dimension = embedder.dimension(),
            event = "embedder_loaded", "embedding model loaded");
        late.set(attest_embed::server::guarded_routes(
            Arc::clone(embedder),
            cfg.config.embed_server.clone(),
            guard,
        ));
        readiness.set_ready();
    }
    finish(Some(http), loaded.map(drop)).await?;
    if let Some(task) = health_task {
        task.await??;
    }
    Ok(())
}
