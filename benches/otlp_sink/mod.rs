//! An OTLP trace receiver on loopback that counts the spans it is sent: the collector's stand-in for the
//! benchmarks (it runs on a Tokio runtime of its own, so synchronous drivers can use it).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};

#[derive(Clone, Default)]
struct Counter(Arc<AtomicU64>);

#[tonic::async_trait]
impl TraceService for Counter {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let spans: usize = request
            .into_inner()
            .resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len())
            .sum();
        self.0.fetch_add(spans as u64, Ordering::Relaxed);
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// The running sink; stops with the process.
pub struct OtlpSink {
    /// `http://127.0.0.1:PORT`, what `telemetry.otlp.endpoint` is set to.
    pub endpoint: String,
    counted: Counter,
    _runtime: tokio::runtime::Runtime,
}

impl OtlpSink {
    pub fn start() -> anyhow::Result<OtlpSink> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let counted = Counter::default();
        runtime.spawn(
            tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(counted.clone()))
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        Ok(OtlpSink {
            endpoint,
            counted,
            _runtime: runtime,
        })
    }

    /// Spans received so far.
    pub fn spans(&self) -> u64 {
        self.counted.0.load(Ordering::Relaxed)
    }
}
