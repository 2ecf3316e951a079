//! Issue 44 item 1: one ask, or one search, is one trace across every hop. A cluster of processes — meta, two
//! shards, a router and an answer replica — each exporting spans over OTLP to a receiver in this test (a stand-in
//! for the collector, the one component outside the system). An ask sent with a caller's W3C `traceparent` must
//! give one trace, of that trace id, whose spans come from the answer tier, the router and both shard processes,
//! each with its parent in the trace: the answer's request span under the caller's span, the router's request
//! under an answer-tier span, each shard's request under one of the router's `shard_call` spans, the engine's
//! lanes under their shard's request. A search sent to the router's HTTP API likewise, from the router down.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{start_role_with_env, value_of, Proc};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use serde_json::json;

const ASK_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const SEARCH_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// One exported span with the process it came from.
#[derive(Debug, Clone)]
struct Received {
    service: String,
    instance: String,
    name: String,
    trace_id: String,
    span_id: String,
    parent: String,
}

#[derive(Default, Clone)]
struct Receiver(Arc<Mutex<Vec<Received>>>);

fn attribute(attributes: &[KeyValue], key: &str) -> String {
    attributes
        .iter()
        .find(|a| a.key == key)
        .and_then(|a| a.value.as_ref()?.value.as_ref())
        .map(|v| match v {
            AnyValue::StringValue(s) => s.clone(),
            other => format!("{other:?}"),
        })
        .unwrap_or_default()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut received = self.0.lock().unwrap();
        for resource_spans in request.into_inner().resource_spans {
            let attributes = resource_spans
                .resource
                .map(|r| r.attributes)
                .unwrap_or_default();
            let service = attribute(&attributes, "service.name");
            let instance = attribute(&attributes, "service.instance.id");
            for span in resource_spans.scope_spans.into_iter().flat_map(|s| s.spans) {
                received.push(Received {
                    service: service.clone(),
                    instance: instance.clone(),
                    name: span.name,
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent: hex(&span.parent_span_id),
                });
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// The receiver on a loopback port, served by `runtime` until it is dropped; returns its endpoint.
fn start_receiver(runtime: &tokio::runtime::Runtime, receiver: Receiver) -> String {
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let address = listener.local_addr().unwrap();
    runtime.spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(receiver))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    format!("http://{address}")
}

#[test]
fn an_ask_is_one_trace_across_answer_router_and_both_shards() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let receiver = Receiver::default();
    let endpoint = start_receiver(&runtime, receiver.clone());
    let dir = common::RunDir::new();
    let d = dir.path();
    let env = [
        ("ATTEST__TELEMETRY__OTLP__ENDPOINT", endpoint.as_str()),
        // Export every 100 ms instead of every 5 s, so the spans arrive while the test waits.
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    let start =
        |args: &[&str], name: &str| -> (Proc, String) { start_role_with_env(args, d, name, &env) };
    let (_meta, line) = start(
        &[
            "serve",
            "--insecure",
            "--role",
            "meta",
            "--meta-id",
            "1",
            "--grpc",
            "127.0.0.1:0",
        ],
        "meta",
    );
    let meta = format!("http://{}", value_of(&line, "grpc="));
    let shard = |name: &str| {
        start(
            &[
                "serve",
                "--insecure",
                "--role",
                "shard",
                "--meta",
                &meta,
                "--grpc",
                "127.0.0.1:0",
            ],
            name,
        )
    };
    let (_s1, _) = shard("shard-1");
    let (_s2, _) = shard("shard-2");
    let (_router, line) = start(
        &[
            "serve",
            "--insecure",
            "--role",
            "router",
            "--meta",
            &meta,
            "--http",
            "127.0.0.1:0",
            "--grpc",
            "127.0.0.1:0",
        ],
        "router",
    );
    let router = value_of(&line, "http=");
    let router_grpc = format!("http://{}", value_of(&line, "grpc="));
    let (_answer, line) = start(
        &[
            "serve",
            "--insecure",
            "--role",
            "answer",
            "--router",
            &router_grpc,
            "--meta",
            &meta,
            "--http",
            "127.0.0.1:0",
        ],
        "answer",
    );
    let answer = value_of(&line, "http=");

    let (s, b) = common::post(
        &format!("{router}/v1/collections"),
        &json!({"name": "c", "shards": 2, "replication": 1}),
    );
    assert_eq!(s, 201, "{b}");
    let docs: Vec<_> = (0..6)
        .map(|i| {
            json!({"id": format!("d{i}"), "title": format!("Heron note {i}"),
            "text": format!("The grey heron {i} hunts fish at night in the shallow river.")})
        })
        .collect();
    let (s, b) = common::post(
        &format!("{router}/v1/collections/c/documents"),
        &json!({ "documents": docs }),
    );
    assert_eq!(s, 200, "{b}");

    // An ask: the answer tier, the router it searches through, both shards.
    let response = common::http()
        .post(format!("{answer}/v1/collections/c/ask"))
        .header("traceparent", format!("00-{ASK_TRACE}-{CALLER_SPAN}-01"))
        .json(&json!({"question": "When does the grey heron hunt?"}))
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let trace = wait_for_trace(&receiver, ASK_TRACE, &["attest-answer", "attest-router"], d);
    check_parents(&trace, "attest-answer");
    let stages: HashSet<&str> = trace
        .iter()
        .filter(|s| s.service == "attest-answer")
        .map(|s| s.name.as_str())
        .collect();
    for stage in ["recall", "retrieve", "rerank", "verify_and_answer"] {
        assert!(stages.contains(stage), "no `{stage}` span: {stages:?}");
    }
    assert!(
        trace.iter().any(|s| s.name == "fan_out"),
        "no fan-out span in the router"
    );

    // A search straight to the router's HTTP API.
    let response = common::http()
        .post(format!("{router}/v1/collections/c/search"))
        .header("traceparent", format!("00-{SEARCH_TRACE}-{CALLER_SPAN}-01"))
        .json(&json!({"query": "heron at night"}))
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let trace = wait_for_trace(&receiver, SEARCH_TRACE, &["attest-router"], d);
    check_parents(&trace, "attest-router");
    drop(dir);
}

/// The spans of `trace_id` once every service in `services` and both shard processes (each with its engine
/// lanes) have reported, and every span's parent has arrived too (the root ends last). Fails after 60 s, keeping
/// the processes' logs in `logs`.
fn wait_for_trace(
    receiver: &Receiver,
    trace_id: &str,
    services: &[&str],
    logs: &std::path::Path,
) -> Vec<Received> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let trace: Vec<Received> = receiver
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.trace_id == trace_id)
            .cloned()
            .collect();
        let shard_instances: HashSet<&str> = trace
            .iter()
            .filter(|s| s.service == "attest-shard" && s.name == "request")
            .map(|s| s.instance.as_str())
            .collect();
        let lanes = trace.iter().filter(|s| s.name.ends_with("_lane")).count();
        let ids: HashSet<&str> = trace.iter().map(|s| s.span_id.as_str()).collect();
        let complete = trace
            .iter()
            .all(|s| s.parent == CALLER_SPAN || ids.contains(s.parent.as_str()));
        if services
            .iter()
            .all(|service| trace.iter().any(|s| s.service == *service))
            && shard_instances.len() == 2
            && lanes >= 2
            && complete
        {
            let mut per_name: HashMap<(&str, &str), usize> = HashMap::new();
            for s in &trace {
                *per_name
                    .entry((s.service.as_str(), s.name.as_str()))
                    .or_default() += 1;
            }
            eprintln!("trace {trace_id}, spans per (service, name): {per_name:?}");
            return trace;
        }
        if Instant::now() >= deadline {
            let all = receiver.0.lock().unwrap().len();
            panic!(
                "trace {trace_id} never covered every hop (logs in {}; kept): {trace:#?}; {all} spans received in all",
                logs.display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every span of `trace` hangs where it should: `entry`'s request span under the caller's span (and nothing
/// else there), the router's request under the answer tier, each shard's request under one of the router's
/// shard calls, the engine's lanes under their own shard's request, everything else under a span of the trace.
fn check_parents(trace: &[Received], entry: &str) {
    let by_id: HashMap<&str, &Received> = trace.iter().map(|s| (s.span_id.as_str(), s)).collect();
    for span in trace {
        if span.parent == CALLER_SPAN {
            assert_eq!(
                (span.service.as_str(), span.name.as_str()),
                (entry, "request"),
                "only the entry's request span hangs off the caller's span"
            );
            continue;
        }
        let parent = by_id
            .get(span.parent.as_str())
            .unwrap_or_else(|| panic!("{span:?}: its parent is not in the trace {trace:#?}"));
        match (span.service.as_str(), span.name.as_str()) {
            ("attest-router", "request") => assert_eq!(
                parent.service, "attest-answer",
                "the router's request comes from the answer tier: {span:?} under {parent:?}"
            ),
            ("attest-shard", "request") => assert_eq!(
                (parent.service.as_str(), parent.name.as_str()),
                ("attest-router", "shard_call"),
                "a shard's request comes from one of the router's shard calls"
            ),
            (_, "dense_lane" | "bm25_lane") => assert!(
                parent.service == "attest-shard" && parent.instance == span.instance,
                "an engine lane runs under its own shard's request: {span:?} under {parent:?}"
            ),
            _ => {}
        }
    }
}
