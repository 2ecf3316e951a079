//! Observability shared by every Attest role: JSON log lines, Prometheus metrics, request ids.
//!
//! # Layout
//! - [`logging`]: the JSON-lines log format (`timestamp`, `level`, `component`, `request_id`, `event`, fields)
//!   and [`logging::init`], used by the `attest` binary for every role.
//! - [`request_id`]: making, validating and carrying the request id across HTTP (`x-request-id` header) and
//!   gRPC (`x-request-id` metadata) hops.
//! - [`metrics`]: the metric names of docs/SPEC.md ("names are part of the interface"), the process-wide
//!   Prometheus recorder and small helpers to record stage latencies.
//! - [`collection_metrics`]: per-collection and per-tenant request, abstention and ingest metrics, each label
//!   capped ([`collection_metrics::LabelCap`]: the first N values, the rest `other`).
//! - [`ops`]: `/healthz`, `/readyz` and `/metrics` as an axum router that every role mounts.
//! - [`readiness`]: readiness set as a role starts (what it waits for), and gRPC health kept in step with it.
//! - [`incoming`]: accepted connections with `TCP_NODELAY` for every role's gRPC server.
//! - [`listener`]: a role's bound listener, plaintext or TLS, its accepted connections (tonic) and
//!   [`listener::serve_http`] (axum).
//! - [`tls`]: a listener's rustls configuration from PEM files, reloaded when they change; mutual TLS.
//! - [`http_error`]: the one HTTP error body of every role, from `attest_proto::ApiError`.
//! - [`openapi`]: the OpenAPI 3.1 document of HTTP API v1 (its shared parts and assembly) and
//!   `GET /v1/openapi.json`.
//! - [`disk`]: the guard of a data directory's free-space reserve (writes refused below it, `/readyz` note,
//!   `disk_*` gauges).
//! - [`cpu`]: the one bounded pool per process for CPU-heavy work (`run_cpu_intensive`).
//! - [`traces`]: OpenTelemetry spans over OTLP (off unless configured) and the W3C trace context on every hop.

pub mod collection_metrics;
pub mod cpu;
pub mod disk;
pub mod http_error;
pub mod incoming;
pub mod listener;
pub mod logging;
pub mod metrics;
pub mod openapi;
pub mod ops;
pub mod parse_errors;
pub mod readiness;
pub mod request_id;
pub mod tls;
pub mod traces;
