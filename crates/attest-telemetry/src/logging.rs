//! JSON log lines: one object per line with `timestamp` (RFC 3339, UTC), `level`, `component` (the crate that
//! logged, without the `attest_` prefix), `request_id`, `event`, `message` and the event's own fields.
//!
//! The request id comes from the event's own `request_id` field or, failing that, from the nearest enclosing
//! span that has one, so handlers open `info_span!("request", request_id = %id)` once and every line logged
//! inside it carries the id.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// The field name that carries the request id, in events and spans.
pub const REQUEST_ID_FIELD: &str = "request_id";

/// Libraries that log their own working at info (ONNX Runtime: ~1,300 lines of "Reserving memory in BFCArena" and
/// graph rewrites as `attest dev` starts; tantivy: a line per merge; rmcp, the MCP SDK of `attest mcp`: a line per
/// session event). They log at warn unless a filter names them ("info,ort=info" asks for ONNX Runtime's lines).
pub const QUIET_RUNTIMES: [&str; 3] = ["ort", "tantivy", "rmcp"];

/// `filter` with each of [`QUIET_RUNTIMES`] it does not name set to warn.
pub fn with_quiet_runtimes(filter: &str) -> String {
    let named = |target: &str| {
        filter
            .split(',')
            .any(|directive| directive.trim().split(['=', '[', ':']).next() == Some(target))
    };
    let mut out = filter.to_string();
    for target in QUIET_RUNTIMES.iter().filter(|t| !named(t)) {
        if !out.is_empty() {
            out.push(',');
        }
        out.push_str(target);
        out.push_str("=warn");
    }
    out
}

/// Installs the JSON formatter on stderr for the whole process (a second call is ignored).
pub fn init(filter: &str) {
    init_with_writer(filter, std::io::stderr, None);
}

/// As [`init`], with the spans also exported as traces when `traces` is given ([`crate::traces::layer`]).
pub fn init_with_traces(filter: &str, traces: Option<crate::traces::OtelLayer>) {
    let exporting = traces.is_some();
    init_with_writer(filter, std::io::stderr, traces);
    if exporting {
        tracing::info!(event = "traces_enabled", "exporting traces over OTLP");
    }
}

/// As [`init_with_traces`], writing to `writer` (tests capture the lines). The log level filters the log lines
/// only: traces record Attest's own spans at info level whatever the log level (`warn` logs still trace).
pub fn init_with_writer<W>(filter: &str, writer: W, traces: Option<crate::traces::OtelLayer>)
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_new(with_quiet_runtimes(filter))
        .unwrap_or_else(|_| EnvFilter::new(with_quiet_runtimes("info")));
    let logs = RequestIdLayer
        .and_then(
            tracing_subscriber::fmt::layer()
                .event_format(JsonLines)
                .with_writer(writer),
        )
        .with_filter(filter);
    let traces = traces.map(|layer| layer.with_filter(crate::traces::recorded()));
    let _ = tracing_subscriber::registry()
        .with(traces)
        .with(logs)
        .try_init();
}

/// Remembers the `request_id` of every span that declares one, for [`JsonLines`].
pub struct RequestIdLayer;

struct SpanRequestId(String);

impl<S> Layer<S> for RequestIdLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = JsonFields::default();
        attrs.record(&mut fields);
        if let Some(Value::String(rid)) = fields.0.remove(REQUEST_ID_FIELD) {
            if let Some(span) = ctx.span(id) {
                span.extensions_mut().insert(SpanRequestId(rid));
            }
        }
    }
}

/// The event formatter.
pub struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = JsonFields::default();
        event.record(&mut fields);
        let mut fields = fields.0;
        let meta = event.metadata();

        let mut timestamp = String::new();
        tracing_subscriber::fmt::time::SystemTime.format_time(&mut Writer::new(&mut timestamp))?;
        let request_id = fields.remove(REQUEST_ID_FIELD).or_else(|| {
            ctx.event_scope().and_then(|scope| {
                scope.into_iter().find_map(|span| {
                    span.extensions()
                        .get::<SpanRequestId>()
                        .map(|r| Value::String(r.0.clone()))
                })
            })
        });
        let event_name = fields
            .remove("event")
            .unwrap_or_else(|| Value::String("log".into()));

        let mut line = Map::new();
        line.insert("timestamp".into(), Value::String(timestamp));
        line.insert("level".into(), Value::String(meta.level().to_string()));
        line.insert(
            "component".into(),
            Value::String(component_of(meta.target()).to_string()),
        );
        line.insert("request_id".into(), request_id.unwrap_or(Value::Null));
        line.insert("event".into(), event_name);
        line.extend(fields);
        writeln!(writer, "{}", Value::Object(line))
    }
}

/// `attest_router::fanout` → `router`; other crates keep their first path segment (`tantivy`, `tower`).
pub fn component_of(target: &str) -> &str {
    let krate = target.split("::").next().unwrap_or(target);
    krate.strip_prefix("attest_").unwrap_or(krate)
}

/// Collects tracing fields into a JSON object.
#[derive(Default)]
struct JsonFields(Map<String, Value>);

impl Visit for JsonFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0
            .insert(field.name().into(), Value::String(value.into()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), Value::Bool(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0
            .insert(field.name().into(), Value::String(value.to_string()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().into(), Value::String(format!("{value:?}")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Captured {
        type Writer = Captured;
        fn make_writer(&'w self) -> Self::Writer {
            self.clone()
        }
    }

    fn lines_of(f: impl FnOnce()) -> Vec<Value> {
        let out = Captured::default();
        let subscriber = tracing_subscriber::registry().with(RequestIdLayer).with(
            tracing_subscriber::fmt::layer()
                .event_format(JsonLines)
                .with_writer(out.clone()),
        );
        tracing::subscriber::with_default(subscriber, f);
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).expect("every line is one JSON object"))
            .collect()
    }

    #[test]
    fn lines_carry_the_span_request_id_and_the_required_keys() {
        let lines = lines_of(|| {
            let span = tracing::info_span!("request", request_id = "req-7");
            let _g = span.enter();
            tracing::info!(shard = 3, event = "fanout_done", "fan-out finished");
            tracing::warn!(request_id = "req-own", "explicit id wins");
        });
        assert_eq!(lines.len(), 2);
        let first = &lines[0];
        for key in ["timestamp", "level", "component", "request_id", "event"] {
            assert!(first.get(key).is_some(), "{key} missing in {first}");
        }
        assert_eq!(first["request_id"], "req-7");
        assert_eq!(first["event"], "fanout_done");
        assert_eq!(first["level"], "INFO");
        assert_eq!(first["shard"], 3);
        assert_eq!(first["message"], "fan-out finished");
        assert_eq!(first["component"], "telemetry");
        assert!(first["timestamp"].as_str().unwrap().ends_with('Z'));
        assert_eq!(lines[1]["request_id"], "req-own");
        assert_eq!(lines[1]["event"], "log");
    }

    #[test]
    fn lines_outside_a_request_have_a_null_request_id() {
        let lines = lines_of(|| tracing::info!("started"));
        assert_eq!(lines[0]["request_id"], Value::Null);
    }

    #[test]
    fn component_names() {
        assert_eq!(component_of("attest_router::fanout"), "router");
        assert_eq!(component_of("tantivy::indexer"), "tantivy");
    }

    #[test]
    fn third_party_runtimes_log_at_warn_unless_the_filter_names_them() {
        assert_eq!(
            with_quiet_runtimes("info"),
            "info,ort=warn,tantivy=warn,rmcp=warn"
        );
        assert_eq!(
            with_quiet_runtimes("info,tantivy=info"),
            "info,tantivy=info,ort=warn,rmcp=warn"
        );
        assert_eq!(
            with_quiet_runtimes("debug,ort=info,tantivy=error"),
            "debug,ort=info,tantivy=error,rmcp=warn"
        );
        assert_eq!(with_quiet_runtimes(""), "ort=warn,tantivy=warn,rmcp=warn");
    }
}
