//! Attest's edge: how callers reach the router and answer tiers. Everything here turns a request into a call on
//! `attest_router::Router` or `attest_answer::pipeline::AnswerService` and its result into a response; what the
//! tiers do lives in their own crates, which know nothing of HTTP bodies, routes or the console.
//!
//! # Layout
//! - [`router`]: HTTP API v1 ([`router::http`] and the routes of documents, snapshots, re-embedding, the cluster
//!   view and eval reports), its JSON bodies as types ([`router::wire`]), its OpenAPI document generated from the
//!   handlers and those types ([`router::openapi`]), the web console's embedded files ([`router::console`]), the
//!   router's gRPC service ([`router::grpc`]) and how both are served ([`router::server`]).
//! - [`answer`]: `POST /v1/collections/{name}/ask` (JSON, or Server-Sent Events with `stream: true`;
//!   [`answer::http`]), `attest.v1.AnswerService/Ask`, server-streaming ([`answer::grpc`]), their part of the
//!   OpenAPI document ([`answer::openapi`]) and the streamed turn both faces share ([`answer::streamed`]).

pub mod answer;
pub mod router;
