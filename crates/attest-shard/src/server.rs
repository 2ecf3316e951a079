//! Serves the shard role: `attest.v1.ShardService` plus the gRPC health service on one listener, and
//! optionally `/healthz`, `/readyz`, `/metrics` over HTTP on another.

use std::future::Future;
use std::sync::Arc;

use attest_proto::v1::shard_service_server::ShardServiceServer;
use tokio::net::TcpListener;

use crate::node::ShardNode;
use crate::service::ShardServiceImpl;

use attest_proto::MAX_MESSAGE_BYTES;

/// Runs until `shutdown` resolves. The caller binds the listener (tests use `127.0.0.1:0`).
pub async fn serve(
    node: Arc<ShardNode>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    let (mut reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_serving::<ShardServiceServer<ShardServiceImpl>>()
        .await;
    let svc = ShardServiceServer::new(ShardServiceImpl::new(node))
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    tonic::transport::Server::builder()
        .add_service(health)
        .add_service(svc)
        .serve_with_incoming_shutdown(attest_telemetry::incoming::nodelay(listener), shutdown)
        .await?;
    Ok(())
}

/// `/healthz`, `/readyz` and `/metrics` (with this node's shard gauges) until `shutdown` resolves.
pub async fn serve_ops(
    node: Arc<ShardNode>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let routes = attest_telemetry::ops::routes(
        attest_telemetry::ops::always_ready(),
        Some(Arc::new(move || node.publish_metrics())),
    );
    axum::serve(listener, routes)
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}
