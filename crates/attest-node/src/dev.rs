//! `attest dev`: every role in one process over the in-process stack of [`crate::local`] — meta, shard
//! nodes, router, answer tier and the local embedder — with the router's and the answer tier's HTTP routes on
//! one listener, and their gRPC services beside meta's on another.

use std::path::PathBuf;
use std::sync::Arc;

use attest_shard::ShardNode;
use attest_telemetry::ops::MetricsRefresh;
use tokio::net::TcpListener;
use tracing::info;
use utoipa::openapi::OpenApi;

use crate::config::AttestConfig;
use crate::local::LocalStack;
use crate::plumbing::{enable_auth, served_document, Shutdown};

/// What `attest dev` runs.
#[derive(Clone, Debug)]
pub struct DevConfig {
    pub config: AttestConfig,
    pub data_dir: PathBuf,
    /// Shard nodes in the process (so fan-out and fusion are real).
    pub shards: usize,
    pub model_dir: Option<PathBuf>,
    pub embedder_url: Option<String>,
    /// Turns authentication on (every API request then needs a key).
    pub admin_key: Option<String>,
}

/// The OpenAPI document of `attest dev`, whose one HTTP listener serves the router's and the answer tier's
/// routes: both parts assembled by `attest_telemetry::openapi::document`, the same function each standalone
/// role uses for its own (`attest openapi` prints it).
pub fn openapi_document(config: &AttestConfig) -> OpenApi {
    attest_telemetry::openapi::document([
        attest_api::router::openapi::paths(&config.router),
        attest_api::answer::openapi::paths(&config.answer),
    ])
}

/// Sets the shard gauges of every node before `/metrics` renders.
fn shard_metrics(nodes: Vec<Arc<ShardNode>>) -> MetricsRefresh {
    Arc::new(move || nodes.iter().for_each(|n| n.publish_metrics()))
}

/// With authentication on, `attest dev`'s internal services (meta on its gRPC listener, the shard nodes'
/// loopback ports) accept only a cluster key made for this run, which its own roles present; without it they
/// are open like the rest.
fn dev_credential(auth: bool) -> anyhow::Result<attest_proto::ClusterCredential> {
    if !auth {
        return Ok(attest_proto::ClusterCredential::none());
    }
    attest_proto::ClusterCredential::new(&attest_auth::secret::random_token())
        .map_err(|e| anyhow::anyhow!("cluster key: {e}"))
}

/// What answers on the HTTP listener while the stack starts (meta, shard nodes opening their indexes, the
/// embedding model loading: seconds, minutes on a large data directory): `/healthz` ok, `/readyz` and every other
/// route 503 saying it is starting, rather than connections waiting unanswered in the listen backlog. It
/// serves a second handle of the same socket and stops before the full app serves the first.
struct Starting {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Starting {
    fn serve(http: &TcpListener, shutdown: &Shutdown) -> anyhow::Result<Starting> {
        use std::os::fd::AsFd;
        let socket = std::net::TcpListener::from(http.as_fd().try_clone_to_owned()?);
        socket.set_nonblocking(true)?;
        let listener = TcpListener::from_std(socket)?;
        let readiness = attest_telemetry::readiness::Readiness::waiting(
            "attest dev is starting (meta, the shard nodes, the embedding model)",
        );
        let app = crate::plumbing::LateRoutes::default().serve_after(
            attest_telemetry::ops::routes(readiness.check(), None),
            readiness.check(),
        );
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let signalled = shutdown.signalled();
        let task = tokio::spawn(attest_telemetry::listener::serve_http(
            listener.into(),
            app,
            async move {
                tokio::select! {
                    _ = stopped => {}
                    _ = signalled => {}
                }
            },
        ));
        Ok(Starting { stop, task })
    }

    /// Stops answering (requests in flight finish); the listener's other handle serves from then on.
    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

/// The human start-up summary printed under the "listening" line (whose form supervisors and tests parse): where
/// to point a browser, a client or an agent, where the data lives, what embeds and what answers, whether keys are
/// needed, and where the logs go.
pub fn summary(
    cfg: &DevConfig,
    http: std::net::SocketAddr,
    grpc: std::net::SocketAddr,
) -> Vec<String> {
    use attest_answer::reader::ReaderBackend;
    use attest_embed::select::EmbedderBackend;
    let embedder = match (&cfg.embedder_url, cfg.config.embedder.backend) {
        (Some(url), _) => format!("remote, {url}"),
        (None, EmbedderBackend::Remote) => format!("remote, {}", cfg.config.embedder.remote.url),
        (None, _) => format!("{} (local)", cfg.config.embedder.local.model.id()),
    };
    let reader = &cfg.config.answer.reader;
    let answers = match reader.backend {
        ReaderBackend::Model => format!(
            "the reader ({} model{}), claims verified",
            1 + reader.ensemble.len(),
            if reader.ensemble.is_empty() { "" } else { "s" }
        ),
        ReaderBackend::Lexical => "word overlap (no reader model), claims verified".to_string(),
    };
    let generator = if cfg.config.answer.llm.url.trim().is_empty() {
        "extractive (no LLM configured)".to_string()
    } else {
        format!("LLM at {}", cfg.config.answer.llm.url)
    };
    let auth = if cfg.admin_key.is_some() {
        "on: every request needs an API key (the admin key makes others: attest key create)"
    } else {
        "off: any caller may do anything (--admin-key to turn keys on)"
    };
    vec![
        format!("HTTP API  http://{http}/v1   console  http://{http}/"),
        format!("gRPC      {grpc}"),
        format!(
            "data      {} ({} shards)",
            cfg.data_dir.display(),
            cfg.shards
        ),
        format!("embedder  {embedder}"),
        format!("answers   {answers}; generator {generator}"),
        format!("auth      {auth}"),
        "logs      JSON on stderr (--log-level info for every event; warnings only on a terminal)"
            .to_string(),
    ]
}

/// Serves every role on `http` and `grpc` until `shutdown`.
pub async fn serve(
    cfg: &DevConfig,
    http: TcpListener,
    grpc: TcpListener,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let (http_addr, grpc_addr) = (http.local_addr()?, grpc.local_addr()?);
    let starting = Starting::serve(&http, &shutdown)?;
    // Meta is served on the gRPC listener too, and records it as its address: `attest status --meta` works
    // against `attest dev`.
    let stack = LocalStack::start(
        &cfg.config,
        &cfg.data_dir,
        cfg.shards,
        cfg.model_dir.clone(),
        cfg.embedder_url.as_deref(),
        Some(format!("http://{grpc_addr}")),
        dev_credential(cfg.admin_key.is_some())?,
    )
    .await;
    starting.stop().await;
    let stack = stack?;
    // Before the "listening" line: a caller waiting for it must not see a start that then fails on a bad key.
    enable_auth(
        &[stack.router.key_ring(), stack.answer.keys()],
        cfg.admin_key.as_deref(),
    )?;
    crate::plumbing::say(format_args!(
        "attest dev listening http=http://{http_addr} grpc={grpc_addr} shards={} data_dir={}",
        cfg.shards,
        cfg.data_dir.display()
    ));
    for line in summary(cfg, http_addr, grpc_addr) {
        crate::plumbing::say(format_args!("  {line}"));
    }
    info!(http = %http_addr, grpc = %grpc_addr, startup_ms = started.elapsed().as_millis() as u64,
        faiss = attest_index::ivfpq::faiss_opt_level(), event = "dev_started", "attest dev started");
    let meta_service = stack.plane.meta_service();
    let (a, b) = tokio::join!(
        attest_api::router::server::serve_http(
            Arc::clone(&stack.router),
            Some(shard_metrics(stack.nodes().to_vec())),
            Some(attest_api::answer::http::routes(Arc::clone(&stack.answer))),
            served_document(openapi_document(&cfg.config), cfg.admin_key.as_deref()),
            http,
            shutdown.signalled()
        ),
        attest_api::router::server::serve_grpc_with(
            Arc::clone(&stack.router),
            |routes| routes
                .add_service(attest_api::answer::grpc::AnswerGrpc::server(Arc::clone(
                    &stack.answer
                )))
                .add_service(meta_service),
            grpc,
            shutdown.signalled()
        ),
    );
    stack.plane.shutdown().await?;
    a?;
    b?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Merging keeps the first schema of a name and drops the other's: two parts naming different types alike
    /// would lose one silently.
    #[test]
    fn the_parts_share_no_schema_name_with_a_different_shape() {
        let schemas = |doc: OpenApi| doc.components.unwrap_or_default().schemas;
        let config = AttestConfig::default();
        let router = schemas(attest_api::router::openapi::paths(&config.router));
        for (name, schema) in schemas(attest_api::answer::openapi::paths(&config.answer)) {
            if let Some(other) = router.get(&name) {
                assert_eq!(
                    serde_json::to_value(other).unwrap(),
                    serde_json::to_value(&schema).unwrap(),
                    "schema `{name}` differs between the router's and the answer tier's documents"
                );
            }
        }
        let paths = openapi_document(&AttestConfig::default()).paths.paths;
        assert!(paths.contains_key("/v1/collections/{name}/ask"));
        assert!(paths.contains_key("/v1/collections/{name}/search"));
    }
}
