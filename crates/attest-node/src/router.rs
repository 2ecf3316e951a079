//! The router role: HTTP API v1 and the gRPC router service over meta's shard map. It listens at once and is
//! ready once its embedding model is loaded and it holds the shard map (its watch logs each failed read of
//! meta and retries).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context;
use attest_proto::FollowMode;
use attest_router::topology::ClusterView;
use attest_router::Router;
use attest_telemetry::ops::ReadinessCheck;

use crate::node_config::NodeConfig;
use crate::plumbing::security::Security;
use crate::plumbing::{
    enable_auth, finish, load_blocking, load_embedder, meta_client, served_document, url_of,
    HttpTask, LateRoutes, Listeners, Shutdown,
};

/// Serves a router on `listeners.http` and `listeners.grpc` until `shutdown`.
pub async fn serve(
    cfg: &NodeConfig,
    listeners: Listeners,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        !cfg.meta.is_empty(),
        "the router role needs --meta (the meta nodes whose shard map it serves)"
    );
    let security = Security::for_node(cfg)?;
    let http = security.public(
        listeners
            .http
            .context("the router needs an HTTP listener")?,
    );
    let grpc = security.public(listeners.grpc.context("the router needs a gRPC listener")?);
    let view = ClusterView::unconnected(
        meta_client(&cfg.meta, security.credential().clone())?,
        cfg.config.router.replicas.clone(),
    );
    tracing::info!(meta = %cfg.meta.join(","), event = "router_waiting_for_meta",
        "not ready until the cluster state is read from meta");
    let watch = view.spawn_watch(
        FollowMode::from_setting(cfg.config.router.meta_watch),
        Duration::from_millis(cfg.config.router.meta_poll_ms),
    );
    let router: Arc<OnceLock<Arc<Router>>> = Arc::default();
    let ready: ReadinessCheck = {
        let (router, view) = (Arc::clone(&router), Arc::clone(&view));
        Arc::new(move || {
            view.readiness()?;
            match router.get() {
                Some(_) => Ok(()),
                None => Err("loading the embedding model".into()),
            }
        })
    };
    let late = LateRoutes::default();
    let app = late.serve_after(
        attest_telemetry::ops::routes(Arc::clone(&ready), None),
        Arc::clone(&ready),
    );
    crate::plumbing::say(format_args!(
        "attest router listening http={} grpc={}",
        url_of(&http)?,
        grpc.local_addr()?
    ));
    crate::plumbing::announce_when_ready(cfg.role, Arc::clone(&ready), &shutdown);
    let http = HttpTask::start(http, app, &shutdown);
    let served = async {
        let (embedder_cfg, model_dir, url) = (
            cfg.embedder_config(),
            cfg.model_dir.clone(),
            cfg.embedder_url.clone(),
        );
        let load = load_blocking("loading the embedding model", move || {
            load_embedder(&embedder_cfg, model_dir, url.as_deref())
        });
        let Some(embedder) = shutdown.unless_signalled(load).await else {
            return Ok(());
        };
        let built = Arc::new(
            Router::builder(cfg.config.router.clone(), Arc::clone(&view), embedder?)
                .local_embedder_settings(cfg.config.embedder.local.clone())
                .snapshot_destinations(
                    cfg.config
                        .snapshot_destinations(std::slice::from_ref(&cfg.data_dir))?,
                )
                .build(),
        );
        enable_auth(&[built.key_ring()], cfg.admin_key.as_deref())?;
        late.set(attest_api::router::http::routes(
            Arc::clone(&built),
            None,
            &served_document(
                attest_api::router::openapi::document(&cfg.config.router),
                cfg.admin_key.as_deref(),
            ),
        ));
        let _ = router.set(Arc::clone(&built));
        attest_api::router::server::serve_grpc(built, grpc, shutdown.signalled()).await
    }
    .await;
    watch.abort();
    finish(Some(http), served).await
}
