//! The answer tier role: `POST /v1/collections/{name}/ask` over HTTP (and the streaming gRPC API with
//! `--grpc`), reaching the router over gRPC. It listens at once and is ready once its models are loaded and
//! the router answers its health check as SERVING (re-checked every second: a router that goes away makes the
//! replica unready, so traffic moves to replicas that can answer).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use attest_answer::rerank::Reranker;
use attest_answer::{AnswerService, RouterClient};
use attest_embed::Embedder;
use attest_telemetry::readiness::Readiness;

use crate::config::AttestConfig;
use crate::node_config::NodeConfig;
use crate::plumbing::security::Security;
use crate::plumbing::{
    enable_auth, finish, grpc_suffix, load_blocking, load_memory_embedder, meta_client,
    served_document, url_of, HttpTask, LateRoutes, Listeners, Shutdown,
};

/// How often a replica checks that its router answers.
const ROUTER_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// The answer tier with the configured back ends; `embedder` embeds questions for curated memory. Loads its
/// models: blocking.
pub fn answer_service(
    router: RouterClient,
    embedder: Arc<dyn Embedder>,
    reranker: Arc<dyn Reranker>,
    cfg: &AttestConfig,
) -> anyhow::Result<Arc<AnswerService>> {
    Ok(Arc::new(AnswerService::new(
        router,
        attest_answer::AnswerModels::load(&cfg.answer)?,
        reranker,
        embedder,
        cfg.answer.clone(),
    )?))
}

/// Serves an answer replica on `listeners.http` (and gRPC on `listeners.grpc`) until `shutdown`.
pub async fn serve(
    cfg: &NodeConfig,
    listeners: Listeners,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let endpoint = cfg
        .router
        .clone()
        .context("--router (the router's gRPC endpoint) is required for the answer role")?;
    let security = Security::for_node(cfg)?;
    let http = security.public(
        listeners
            .http
            .context("the answer role needs an HTTP listener")?,
    );
    let grpc = listeners.grpc.map(|l| security.public(l));
    let readiness = Readiness::waiting("loading the answer tier's models");
    let late = LateRoutes::default();
    let app = late.serve_after(
        attest_telemetry::ops::routes(readiness.check(), None).merge(
            attest_telemetry::openapi::route(&served_document(
                attest_api::answer::openapi::document(&cfg.config.answer),
                cfg.admin_key.as_deref(),
            )),
        ),
        readiness.check(),
    );
    crate::plumbing::say(format_args!(
        "attest answer listening http={}{} router={endpoint}",
        url_of(&http)?,
        grpc_suffix(grpc.as_ref())?
    ));
    crate::plumbing::announce_when_ready(cfg.role, readiness.check(), &shutdown);
    let http = HttpTask::start(http, app, &shutdown);
    let served = async {
        let router = RouterClient::connect_lazy(&endpoint, security.client_tls())?;
        let (node, router_client) = (cfg.clone(), router.clone());
        let load = load_blocking("loading the answer tier's models", move || {
            let embedder = load_memory_embedder(
                &node.embedder_config(),
                node.model_dir.clone(),
                node.embedder_url.as_deref(),
            )?;
            let reranker = attest_answer::rerank::from_config(&node.config.answer.rerank)?;
            answer_service(router_client, embedder, reranker, &node.config)
        });
        let Some(answer) = shutdown.unless_signalled(load).await else {
            return Ok(());
        };
        let answer = answer?;
        if !cfg.meta.is_empty() {
            answer.watch_meta(meta_client(&cfg.meta, security.credential().clone())?);
        }
        enable_auth(&[answer.keys()], cfg.admin_key.as_deref())?;
        late.set(attest_api::answer::http::routes(Arc::clone(&answer)));
        let checker = tokio::spawn(follow_router(
            endpoint.clone(),
            security.client_tls().cloned(),
            readiness.clone(),
        ));
        let served = match grpc {
            Some(listener) => attest_api::answer::grpc::serve_grpc(
                answer,
                readiness.check(),
                listener,
                shutdown.signalled(),
            )
            .await
            .map_err(anyhow::Error::from),
            None => {
                shutdown.signalled().await;
                Ok(())
            }
        };
        checker.abort();
        served
    }
    .await;
    finish(Some(http), served).await
}

/// Keeps `readiness` at ready while the router at `endpoint` answers its gRPC health check as SERVING.
async fn follow_router(
    endpoint: String,
    tls: Option<attest_proto::tls::ClientTls>,
    readiness: Readiness,
) {
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::HealthCheckRequest;
    let channel = match attest_proto::tls::channel(&endpoint, tls.as_ref(), ROUTER_CHECK_INTERVAL) {
        Ok(channel) => channel,
        Err(e) => {
            readiness.set_waiting(format!("the router endpoint {endpoint} is unusable: {e}"));
            return;
        }
    };
    let mut client = HealthClient::new(channel);
    loop {
        let check = tokio::time::timeout(
            ROUTER_CHECK_INTERVAL,
            client.check(HealthCheckRequest {
                service: String::new(),
            }),
        )
        .await;
        match check {
            Ok(Ok(r)) if r.get_ref().status == tonic_health::ServingStatus::Serving as i32 => {
                readiness.set_ready()
            }
            Ok(Ok(_)) => readiness.set_waiting(format!("the router at {endpoint} is not ready")),
            Ok(Err(e)) => readiness.set_waiting(format!(
                "the router at {endpoint} does not answer ({})",
                e.message()
            )),
            Err(_) => readiness.set_waiting(format!("the router at {endpoint} does not answer")),
        }
        tokio::time::sleep(ROUTER_CHECK_INTERVAL).await;
    }
}
