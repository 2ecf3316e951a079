//! Serves the shard role: `attest.v1.ShardService` plus the gRPC health service on one listener, and
//! optionally `/healthz`, `/readyz`, `/metrics` over HTTP on another.

use std::future::Future;
use std::sync::Arc;

use attest_auth::cluster::ClusterGuard;
use attest_proto::v1::shard_service_server::ShardServiceServer;
use attest_telemetry::listener::Listener;
use tonic::service::interceptor::InterceptedService;

use crate::node::ShardNode;
use crate::service::ShardServiceImpl;
use crate::startup_gate::{GateLayer, StartupGate};

use attest_proto::MAX_MESSAGE_BYTES;

/// Runs until `shutdown` resolves. The caller binds the listener (tests use `127.0.0.1:0`; plaintext or TLS);
/// `guard` admits only the cluster credential when one is configured (the health service stays open, for
/// probes).
pub async fn serve(
    node: Arc<ShardNode>,
    listener: impl Into<Listener>,
    guard: ClusterGuard,
    shutdown: impl Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    serve_gated(node, listener, guard, StartupGate::open_layer(), shutdown).await
}

/// As [`serve`], for a node still starting: until `gate`'s [`crate::StartupGate`] opens, only its peers'
/// catch-up reads are answered and every other call waits ([`crate::startup_gate`]).
pub async fn serve_gated(
    node: Arc<ShardNode>,
    listener: impl Into<Listener>,
    guard: ClusterGuard,
    gate: GateLayer,
    shutdown: impl Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    let (mut reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_serving::<ShardServiceServer<ShardServiceImpl>>()
        .await;
    let svc = ShardServiceServer::new(ShardServiceImpl::new(node))
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let svc = InterceptedService::new(svc, guard);
    tonic::transport::Server::builder()
        .layer(gate)
        .add_service(health)
        .add_service(svc)
        .serve_with_incoming_shutdown(listener.into().incoming(), shutdown)
        .await?;
    Ok(())
}

/// `/healthz`, `/readyz` and `/metrics` (with this node's shard gauges) until `shutdown` resolves.
pub async fn serve_ops(
    node: Arc<ShardNode>,
    listener: impl Into<Listener>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let routes = attest_telemetry::ops::routes(
        attest_telemetry::ops::always_ready(),
        Some(Arc::new(move || node.publish_metrics())),
    );
    attest_telemetry::listener::serve_http(listener.into(), routes, shutdown).await?;
    Ok(())
}
