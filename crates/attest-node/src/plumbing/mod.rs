//! The plumbing every role shares, below the role files: listeners and their addresses, shutdown, the meta
//! client, authentication, the embedder, and routes that appear once start-up has loaded what they need.
//! Nothing here knows a role's wiring; the role files import this module, never each other.
//!
//! - [`security`]: TLS listeners (public or internal) and the cluster credential of a node.

pub mod security;

use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use anyhow::Context;
use attest_embed::{build_embedder, Embedder, EmbedderBackend, EmbedderConfig};
use attest_proto::{ClusterCredential, MetaClient};
use attest_telemetry::listener::Listener;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::info;

use crate::node_config::{NodeConfig, Role};

/// The listeners of one role, bound before anything else starts so that probes get an answer at once.
#[derive(Debug, Default)]
pub struct Listeners {
    pub http: Option<TcpListener>,
    pub grpc: Option<TcpListener>,
}

impl Listeners {
    /// Binds the addresses of `cfg`, or each role's defaults: router HTTP 7700 and gRPC 7701, answer HTTP 7750,
    /// embedder HTTP 7900, meta gRPC 7601, shard gRPC 7801 in a cluster (7701 alone). Optional listeners (the
    /// ops HTTP port of meta and shard, gRPC health of embedder and answer) only when given.
    pub async fn bind(cfg: &NodeConfig) -> anyhow::Result<Listeners> {
        let (http_default, grpc_default) = match cfg.role {
            Role::Router => (Some("127.0.0.1:7700"), Some("127.0.0.1:7701")),
            Role::Answer => (Some("127.0.0.1:7750"), None),
            Role::Embedder => (Some("127.0.0.1:7900"), None),
            Role::Meta => (None, Some("127.0.0.1:7601")),
            Role::Shard if cfg.meta.is_empty() => (None, Some("127.0.0.1:7701")),
            Role::Shard => (None, Some("127.0.0.1:7801")),
        };
        Ok(Listeners {
            http: bind_optional(cfg.http.as_deref().or(http_default)).await?,
            grpc: bind_optional(cfg.grpc.as_deref().or(grpc_default)).await?,
        })
    }
}

/// Binds `addr`, naming it when it cannot.
pub async fn bind(addr: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))
}

pub async fn bind_optional(addr: Option<&str>) -> anyhow::Result<Option<TcpListener>> {
    match addr {
        Some(a) => Ok(Some(bind(a).await?)),
        None => Ok(None),
    }
}

/// `http://ADDR` or `https://ADDR`: how clients reach `listener`.
pub fn url_of(listener: &Listener) -> anyhow::Result<String> {
    Ok(format!(
        "{}://{}",
        listener.scheme(),
        listener.local_addr()?
    ))
}

/// ` grpc=ADDR` for a "listening" line, or nothing.
pub(crate) fn grpc_suffix(listener: Option<&Listener>) -> anyhow::Result<String> {
    Ok(match listener {
        Some(l) => format!(" grpc={}", l.local_addr()?),
        None => String::new(),
    })
}

/// ` NAME=URL` for a "listening" line, or nothing.
pub(crate) fn listening_suffix(name: &str, listener: Option<&Listener>) -> anyhow::Result<String> {
    Ok(match listener {
        Some(l) => format!(" {name}={}", url_of(l)?),
        None => String::new(),
    })
}

/// How often [`announce_when_ready`] looks.
const ANNOUNCE_INTERVAL: std::time::Duration = std::time::Duration::from_millis(50);

/// Prints `attest ROLE ready` on standard output the first time `ready` holds, after the role's "listening"
/// line: what a script or test starting a role waits for before it sends traffic (`/readyz` says the same).
pub(crate) fn announce_when_ready(
    role: Role,
    ready: attest_telemetry::ops::ReadinessCheck,
    shutdown: &Shutdown,
) {
    let stopped = shutdown.signalled();
    tokio::spawn(async move {
        let became_ready = async {
            while ready().is_err() {
                tokio::time::sleep(ANNOUNCE_INTERVAL).await;
            }
        };
        tokio::select! {
            _ = became_ready => say_ready(role),
            _ = stopped => {}
        }
    });
}

/// `attest ROLE ready` on standard output. Whoever started the process may have stopped reading after the
/// "listening" line: a closed pipe is not an error here.
pub(crate) fn say_ready(role: Role) {
    say(format_args!("attest {} ready", role.name()));
}

/// Prints one start-up line to stdout (supervisors and tests read the addresses from it), ignoring a closed
/// pipe: a reader that stopped reading (`attest dev | head`) must not stop the role.
pub(crate) fn say(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout(), "{line}");
}

/// An HTTP server started before the rest of its role, so that probes answer while the role starts.
pub(crate) struct HttpTask(tokio::task::JoinHandle<std::io::Result<()>>);

impl HttpTask {
    /// Serves `app` on `listener` in its own task until `shutdown`.
    pub fn start(listener: Listener, app: axum::Router, shutdown: &Shutdown) -> HttpTask {
        HttpTask(tokio::spawn(attest_telemetry::listener::serve_http(
            listener,
            app,
            shutdown.signalled(),
        )))
    }
}

/// Ends a role whose HTTP server (if any) was started first: when the role's own work `served` failed, the
/// server is stopped and the failure returned; otherwise the server stops with the shutdown and is waited for.
pub(crate) async fn finish(
    http: Option<HttpTask>,
    served: anyhow::Result<()>,
) -> anyhow::Result<()> {
    let Some(HttpTask(task)) = http else {
        return served;
    };
    if served.is_err() {
        task.abort();
        return served;
    }
    task.await??;
    Ok(())
}

/// Tells every server of a process to stop; cloned into each. Resolves at once for a server started after it
/// was signalled, so a role stopped in the middle of its start-up stops there.
#[derive(Clone, Debug)]
pub struct Shutdown(watch::Receiver<bool>);

/// The sending side of a [`Shutdown`].
#[derive(Debug)]
pub struct ShutdownTrigger(watch::Sender<bool>);

impl ShutdownTrigger {
    pub fn trigger(&self) {
        let _ = self.0.send(true);
    }

    pub fn subscribe(&self) -> Shutdown {
        Shutdown(self.0.subscribe())
    }
}

impl Shutdown {
    /// A shutdown and what triggers it.
    pub fn new() -> (ShutdownTrigger, Shutdown) {
        let (tx, rx) = watch::channel(false);
        (ShutdownTrigger(tx), Shutdown(rx))
    }

    /// Triggered by SIGINT or SIGTERM.
    pub fn on_signals() -> Shutdown {
        let (trigger, shutdown) = Shutdown::new();
        tokio::spawn(async move {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("signal handler");
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            trigger.trigger();
        });
        shutdown
    }

    /// Resolves once shutdown is triggered (or its trigger is gone).
    pub fn signalled(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.0.clone();
        async move {
            while !*rx.borrow() {
                if rx.changed().await.is_err() {
                    return;
                }
            }
        }
    }

    /// Runs `work` unless shutdown comes first: `None` then.
    pub async fn unless_signalled<T>(&self, work: impl Future<Output = T>) -> Option<T> {
        tokio::select! {
            out = work => Some(out),
            _ = self.signalled() => None,
        }
    }
}

/// A client of the meta group at `addresses` presenting `credential`.
pub fn meta_client(
    addresses: &[String],
    credential: ClusterCredential,
) -> anyhow::Result<MetaClient> {
    anyhow::ensure!(!addresses.is_empty(), "no meta address given (--meta)");
    MetaClient::with_credential(addresses, credential)
        .map_err(|e| anyhow::anyhow!("bad meta address: {e}"))
}

/// Turns authentication on for these key rings when an admin key is given; says which way it went.
pub(crate) fn enable_auth(
    rings: &[&Arc<attest_auth::KeyRing>],
    admin_key: Option<&str>,
) -> anyhow::Result<()> {
    match admin_key {
        Some(key) => {
            for ring in rings {
                ring.enable(key)
                    .map_err(|e| anyhow::anyhow!("--admin-key: {e}"))?;
            }
            info!(
                event = "auth_enabled",
                "authentication on: every API request needs a key"
            );
        }
        None => {
            tracing::warn!(event = "auth_disabled",
            "authentication off: any caller may do anything (give --admin-key / ATTEST_ADMIN_KEY)")
        }
    }
    Ok(())
}

/// The OpenAPI document a process serves: as generated, or, when it was started without an admin key and so
/// authenticates no one, without the key requirements it does not enforce.
pub(crate) fn served_document(
    doc: utoipa::openapi::OpenApi,
    admin_key: Option<&str>,
) -> utoipa::openapi::OpenApi {
    match admin_key {
        Some(_) => doc,
        None => attest_telemetry::openapi::without_api_keys(doc),
    }
}

/// The configured embedder, with the command line's overrides: `model_dir` for the local model,
/// `embedder_url` to use a remote service instead. Loading a model is blocking work: call it off the async
/// workers ([`load_blocking`]).
pub fn load_embedder(
    config: &EmbedderConfig,
    model_dir: Option<PathBuf>,
    embedder_url: Option<&str>,
) -> anyhow::Result<Arc<dyn Embedder>> {
    let mut config = config.clone();
    if let Some(dir) = model_dir {
        config.local.model_dir = Some(dir);
    }
    if let Some(url) = embedder_url {
        config.use_remote_url(url);
    }
    if config.backend == EmbedderBackend::Remote {
        info!(url = %config.remote.url, event = "embedder_remote", "embedding through a remote service");
    }
    Ok(build_embedder(&config)?)
}

/// Curated memory's embedder ([`attest_answer::memory::memory_embedder_config`]: a local one runs the model its
/// thresholds were set with). `model_dir` names the configured model's directory, so it is used only when memory
/// runs that model.
pub fn load_memory_embedder(
    config: &EmbedderConfig,
    model_dir: Option<PathBuf>,
    embedder_url: Option<&str>,
) -> anyhow::Result<Arc<dyn Embedder>> {
    if embedder_url.is_some() {
        return load_embedder(config, model_dir, embedder_url);
    }
    let memory = attest_answer::memory::memory_embedder_config(config);
    let model_dir = model_dir.filter(|_| memory.local.model == config.local.model);
    load_embedder(&memory, model_dir, None)
}

/// Runs model loading (or another blocking start-up step) on the blocking pool.
pub async fn load_blocking<T: Send + 'static>(
    what: &str,
    work: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .with_context(|| format!("{what} panicked"))?
}

/// Routes that exist only once start-up has made them (an API needing models loaded): until then every
/// request outside the probe routes answers 503 saying what the role waits for. Error bodies are the one JSON
/// error body throughout, as `with_json_errors` makes them.
#[derive(Clone, Default)]
pub(crate) struct LateRoutes(Arc<OnceLock<axum::Router>>);

impl LateRoutes {
    pub fn set(&self, routes: axum::Router) {
        let _ = self
            .0
            .set(attest_telemetry::http_error::with_json_errors(routes));
    }

    /// The app to serve: `probes` (health, readiness, metrics) answered at once, everything else by the late
    /// routes once they are set.
    pub fn serve_after(
        &self,
        probes: axum::Router,
        ready: attest_telemetry::ops::ReadinessCheck,
    ) -> axum::Router {
        let late = self.clone();
        probes
            .fallback(move |req: axum::extract::Request| {
                let late = late.clone();
                let ready = Arc::clone(&ready);
                async move {
                    use axum::response::IntoResponse;
                    use tower::ServiceExt;
                    match late.0.get() {
                        Some(routes) => routes.clone().oneshot(req).await.into_response(),
                        None => (
                            axum::http::StatusCode::SERVICE_UNAVAILABLE,
                            format!(
                                "not ready: {}",
                                ready().err().unwrap_or_else(|| "starting".into())
                            ),
                        )
                            .into_response(),
                    }
                }
            })
            .layer(axum::middleware::map_response(
                attest_telemetry::http_error::json_error_bodies,
            ))
    }
}

/// Thread-pool settings that must be in the environment before libgomp and OpenBLAS initialise (they read it
/// when loaded, before `main`): FAISS calls OpenBLAS inside OpenMP regions, and two spinning pools on a small
/// machine slow index training down by orders of magnitude. Unless the caller chose otherwise, re-execs the
/// binary once with them set; every binary that runs FAISS calls it first thing in `main`.
pub fn ensure_thread_pool_environment() {
    use std::os::unix::process::CommandExt;
    let wanted = [
        ("OPENBLAS_NUM_THREADS", "1"),
        ("OMP_WAIT_POLICY", "PASSIVE"),
    ];
    if wanted.iter().all(|(k, _)| std::env::var_os(k).is_some()) {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let mut cmd = std::process::Command::new(exe);
    cmd.args(std::env::args_os().skip(1));
    for (k, v) in wanted {
        if std::env::var_os(k).is_none() {
            cmd.env(k, v);
        }
    }
    // Only returns if exec failed; then carry on with the inherited environment.
    let _ = cmd.exec();
}
