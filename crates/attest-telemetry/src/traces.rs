//! OpenTelemetry traces: every `tracing` span of a role exported over OTLP (gRPC), off unless
//! `telemetry.otlp.endpoint` is set, and the W3C trace context (`traceparent`, `tracestate`) taken from callers
//! and passed on over every HTTP and gRPC hop, so a search or an ask is one trace across router, shards and the
//! answer tier.
//!
//! A role reads its config first and gives [`layer`]'s answer to [`crate::logging::init_with_traces`]: the
//! layer must be in the subscriber from the start (a layer added later through a reload cannot be reached by
//! `tracing-opentelemetry`'s context calls). Without it every function here is a no-op: no context is read or
//! written, and no span gets an OpenTelemetry context.
//!
//! The context rides on the spans already there: a handler's request span ([`crate::request_id::span`]) takes
//! the caller's context as its parent ([`set_parent_from_http`], [`set_parent_from_grpc`]), and every outgoing
//! internal gRPC request made by [`crate::request_id::grpc_request`] carries the current span's context
//! ([`inject_grpc`]). Work moved to the CPU pool runs inside the span it came from ([`crate::cpu`]).

use std::sync::OnceLock;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::KeyValue;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, TracerProvider};
use opentelemetry_sdk::Resource;
use serde::{Deserialize, Serialize};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Registry;

/// `telemetry` section of the config.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TelemetryConfig {
    pub otlp: OtlpConfig,
}

/// Where and how much to trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OtlpConfig {
    /// The collector's OTLP gRPC endpoint (`http://otel-collector:4317`); empty: no traces.
    pub endpoint: String,
    /// Share of traces started here that are recorded (0–1). A caller's sampling decision (its `traceparent`
    /// flags) is kept as it is.
    pub sample_ratio: f64,
}

impl Default for OtlpConfig {
    fn default() -> Self {
        OtlpConfig {
            endpoint: String::new(),
            sample_ratio: 1.0,
        }
    }
}

impl TelemetryConfig {
    /// Values that cannot be right, named as `telemetry.KEY`.
    pub fn problems(&self) -> Vec<String> {
        let ratio = self.otlp.sample_ratio;
        let mut problems = Vec::new();
        if !(0.0..=1.0).contains(&ratio) {
            problems.push(format!(
                "telemetry.otlp.sample_ratio: must be between 0 and 1 (got {ratio})"
            ));
        }
        let endpoint = self.otlp.endpoint.trim();
        if !endpoint.is_empty() && !endpoint.contains("://") {
            problems.push(format!(
                "telemetry.otlp.endpoint: must be a URL such as http://collector:4317 (got {endpoint})"
            ));
        }
        problems
    }
}

/// What becomes a span of a trace: Attest's own spans (targets `attest_*`) at info level and above. Not the
/// libraries' (the OTLP exporter's own gRPC calls would trace themselves), and not the log level's business.
pub fn recorded() -> tracing_subscriber::filter::Targets {
    tracing_subscriber::filter::Targets::new().with_target("attest_", tracing::Level::INFO)
}

/// The layer that turns `tracing` spans into OpenTelemetry spans (nearest the registry, below the log layers).
pub type OtelLayer =
    tracing_opentelemetry::OpenTelemetryLayer<Registry, opentelemetry_sdk::trace::Tracer>;

static PROVIDER: OnceLock<TracerProvider> = OnceLock::new();

/// Why traces could not be turned on.
#[derive(Debug, thiserror::Error)]
pub enum TraceSetupError {
    #[error("OTLP exporter for {endpoint}: {why}")]
    Exporter { endpoint: String, why: String },
    #[error("traces are already set up in this process")]
    Twice,
}

/// The layer exporting spans to `config.endpoint` as `service` (e.g. `attest-router`), `instance` naming this
/// process among its peers (its node name or address); `None` when no endpoint is set. Once per process, inside
/// the Tokio runtime the process keeps (the exporter's batch task runs there).
pub fn layer(
    config: &OtlpConfig,
    service: &str,
    instance: &str,
) -> Result<Option<OtelLayer>, TraceSetupError> {
    let endpoint = config.endpoint.trim();
    if endpoint.is_empty() {
        return Ok(None);
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .build()
        .map_err(|e| TraceSetupError::Exporter {
            endpoint: endpoint.to_string(),
            why: e.to_string(),
        })?;
    let provider = TracerProvider::builder()
        .with_batch_exporter(exporter, opentelemetry_sdk::runtime::Tokio)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            config.sample_ratio,
        ))))
        .with_resource(Resource::new([
            KeyValue::new("service.name", service.to_string()),
            KeyValue::new("service.instance.id", instance.to_string()),
            KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
        ]))
        .build();
    let tracer = provider.tracer("attest");
    PROVIDER.set(provider).map_err(|_| TraceSetupError::Twice)?;
    Ok(Some(tracing_opentelemetry::layer().with_tracer(tracer)))
}

/// Sends the spans still buffered (a stopping process); a no-op when traces are off. Not on an async worker:
/// it waits for the exporter's task.
pub fn flush() {
    if let Some(provider) = PROVIDER.get() {
        for result in provider.force_flush() {
            if let Err(e) = result {
                tracing::warn!(error = %e, event = "traces_flush_failed", "buffered spans not exported");
            }
        }
    }
}

struct HttpHeaders<'a>(&'a axum::http::HeaderMap);

impl Extractor for HttpHeaders<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

struct GrpcMetadata<'a>(&'a tonic::metadata::MetadataMap);

impl Extractor for GrpcMetadata<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0
            .keys()
            .filter_map(|k| match k {
                tonic::metadata::KeyRef::Ascii(k) => Some(k.as_str()),
                tonic::metadata::KeyRef::Binary(_) => None,
            })
            .collect()
    }
}

struct GrpcMetadataMut<'a>(&'a mut tonic::metadata::MetadataMap);

impl Injector for GrpcMetadataMut<'_> {
    fn set(&mut self, key: &str, value: String) {
        let key = tonic::metadata::MetadataKey::from_bytes(key.as_bytes());
        if let (Ok(key), Ok(value)) = (key, value.parse()) {
            self.0.insert(key, value);
        }
    }
}

fn propagator_extract(extractor: &dyn Extractor) -> opentelemetry::Context {
    TraceContextPropagator::new().extract(extractor)
}

/// Makes the caller's trace context (its `traceparent` header) the parent of `span`.
pub fn set_parent_from_http(span: &tracing::Span, headers: &axum::http::HeaderMap) {
    if PROVIDER.get().is_some() {
        span.set_parent(propagator_extract(&HttpHeaders(headers)));
    }
}

/// Makes the caller's trace context (its `traceparent` metadata) the parent of `span`.
pub fn set_parent_from_grpc(span: &tracing::Span, metadata: &tonic::metadata::MetadataMap) {
    if PROVIDER.get().is_some() {
        span.set_parent(propagator_extract(&GrpcMetadata(metadata)));
    }
}

/// Puts the current span's trace context into an outgoing request's metadata.
pub fn inject_grpc(metadata: &mut tonic::metadata::MetadataMap) {
    if PROVIDER.get().is_some() {
        let context = tracing::Span::current().context();
        TraceContextPropagator::new().inject_context(&context, &mut GrpcMetadataMut(metadata));
    }
}

/// The current span's trace context as HTTP headers (`traceparent`, `tracestate`), for an outgoing HTTP call
/// (the remote embedder, reranker, generator, judge); empty when traces are off.
pub fn http_headers() -> Vec<(String, String)> {
    let mut headers = std::collections::HashMap::new();
    if PROVIDER.get().is_some() {
        let context = tracing::Span::current().context();
        TraceContextPropagator::new().inject_context(&context, &mut headers);
    }
    headers.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_settings_are_named() {
        let mut config = TelemetryConfig::default();
        assert!(config.problems().is_empty(), "off by default");
        config.otlp.sample_ratio = 1.5;
        config.otlp.endpoint = "collector:4317".into();
        let problems = config.problems().join("\n");
        assert!(
            problems.contains("telemetry.otlp.sample_ratio"),
            "{problems}"
        );
        assert!(problems.contains("telemetry.otlp.endpoint"), "{problems}");
    }

    #[test]
    fn a_traceparent_survives_metadata() {
        let propagator = TraceContextPropagator::new();
        let mut metadata = tonic::metadata::MetadataMap::new();
        metadata.insert(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                .parse()
                .unwrap(),
        );
        let context = propagator.extract(&GrpcMetadata(&metadata));
        let mut out = tonic::metadata::MetadataMap::new();
        propagator.inject_context(&context, &mut GrpcMetadataMut(&mut out));
        assert_eq!(
            out.get("traceparent").unwrap().to_str().unwrap(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
    }
}
