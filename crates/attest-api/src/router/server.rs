//! Serves the router: HTTP API v1 on one listener, gRPC (router service + health) on another.

use std::future::Future;
use std::sync::Arc;

use attest_proto::v1::router_service_server::RouterServiceServer;
use attest_router::router::Router;
use attest_telemetry::listener::Listener;
use attest_telemetry::ops::MetricsRefresh;

use crate::router::grpc::RouterServiceImpl;

/// Serves HTTP API v1; `extra` routes (the answer tier's, in `attest dev`) share the listener, and `openapi` is
/// the document of them all (`crate::router::openapi::document()` for the router alone), served at `/v1/openapi.json`.
pub async fn serve_http(
    router: Arc<Router>,
    refresh: Option<MetricsRefresh>,
    extra: Option<axum::Router>,
    openapi: utoipa::openapi::OpenApi,
    listener: impl Into<Listener>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let mut app = crate::router::http::routes(router, refresh, &openapi);
    if let Some(extra) = extra {
        app = app.merge(extra);
    }
    attest_telemetry::listener::serve_http(
        listener.into(),
        attest_telemetry::http_error::with_json_errors(app),
        shutdown,
    )
    .await?;
    Ok(())
}

pub async fn serve_grpc(
    router: Arc<Router>,
    listener: impl Into<Listener>,
    shutdown: impl Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    serve_grpc_with(router, |routes| routes, listener, shutdown).await
}

/// Serves the router's gRPC services, and those `add_services` adds (the answer tier's, in `attest dev`), on
/// one listener.
pub async fn serve_grpc_with(
    router: Arc<Router>,
    add_services: impl FnOnce(tonic::service::Routes) -> tonic::service::Routes,
    listener: impl Into<Listener>,
    shutdown: impl Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    // gRPC health says SERVING once the router holds the shard map, as `/readyz` does.
    let view = Arc::clone(router.view());
    let health = attest_telemetry::readiness::ReadinessHealth::new(
        Arc::new(move || view.readiness()),
        vec![<RouterServiceServer<RouterServiceImpl> as tonic::server::NamedService>::NAME.into()],
    )
    .server();
    let routes = add_services(
        tonic::service::Routes::new(health)
            .add_service(RouterServiceServer::new(RouterServiceImpl::new(router))),
    );
    tonic::transport::Server::builder()
        .add_routes(routes)
        .serve_with_incoming_shutdown(listener.into().incoming(), shutdown)
        .await?;
    Ok(())
}
