//! The answer tier's fronts: ask over HTTP (JSON or Server-Sent Events) and gRPC, and their OpenAPI document.

pub mod grpc;
pub mod http;
pub mod openapi;
pub mod streamed;
