//! The router's fronts: HTTP API v1, gRPC, the OpenAPI document and the web console.

pub mod cluster_http;
pub mod console;
pub mod documents_http;
pub mod eval_reports;
pub mod grpc;
pub mod http;
pub mod openapi;
pub mod reembed_http;
pub mod server;
pub mod snapshot_http;
pub mod wire;
