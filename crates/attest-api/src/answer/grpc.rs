//! `attest.v1.AnswerService` over gRPC: `Ask` streams `sources` as soon as the first retrieval is ranked, one
//! `delta` per verified claim, then `done` with the whole response — the same events, in the same order, as the
//! HTTP Server-Sent Events of [`crate::answer::http`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use attest_answer::client::Caller;
use attest_answer::conversation::HistoryTurn;
use attest_answer::pipeline::{AnswerService, AskResponse, AskSources};
use attest_auth::Scope;
use attest_proto::v1 as pb;
use attest_proto::v1::answer_service_server::{AnswerService as AnswerRpc, AnswerServiceServer};
use attest_telemetry::request_id;
use futures::{Stream, StreamExt};
use tonic::{Request, Response, Status};

use crate::answer::streamed::StreamedTurn;

/// The gRPC face of an [`AnswerService`].
pub struct AnswerGrpc {
    service: Arc<AnswerService>,
}

impl AnswerGrpc {
    pub fn new(service: Arc<AnswerService>) -> Self {
        AnswerGrpc { service }
    }

    /// The tonic service, to add to a server (alone, or beside the router's in `attest dev`).
    pub fn server(service: Arc<AnswerService>) -> AnswerServiceServer<AnswerGrpc> {
        AnswerServiceServer::new(AnswerGrpc::new(service))
    }
}

type AskStream = Pin<Box<dyn Stream<Item = Result<pb::AskEvent, Status>> + Send>>;

#[tonic::async_trait]
impl AnswerRpc for AnswerGrpc {
    type AskStream = AskStream;

    async fn ask(&self, request: Request<pb::AskRequest>) -> Result<Response<AskStream>, Status> {
        let principal =
            attest_auth::grpc::principal(self.service.keys(), &request, Scope::Read).await?;
        let (request_id, span) = request_id::grpc_span(request.metadata());
        let req = request.into_inner();
        let caller = Caller::of(&principal, &req.collection, Some(&req.tenant))?;
        let history = req
            .history
            .iter()
            .map(|t| HistoryTurn::parse(&t.role, &t.content))
            .collect::<Result<Vec<_>, _>>()
            .map_err(Status::from)?;
        let mut turn = span.in_scope(|| {
            StreamedTurn::start(
                Arc::clone(&self.service),
                caller,
                req.collection,
                req.question,
                history,
                request_id,
            )
        });
        let Some(first) = turn.sources().await else {
            // The turn ended before retrieving (or failed): an error is the call's status, not a stream item.
            let answer = turn.ended().await.map_err(Status::from)?;
            let events = ask_events(&answer).into_iter().map(Ok);
            return Ok(Response::new(Box::pin(futures::stream::iter(events))));
        };
        let head = futures::stream::iter([Ok(sources_event(&first))]);
        let tail = futures::stream::once(async move {
            match turn.ended().await {
                Ok(answer) => ask_events(&answer).into_iter().map(Ok).collect(),
                // Too late for the call's status: the error ends the stream.
                Err(e) => vec![Err(Status::from(e))],
            }
        })
        .flat_map(futures::stream::iter);
        Ok(Response::new(Box::pin(head.chain(tail))))
    }
}

/// The first event of a turn that retrieved: its passages, ranked.
pub fn sources_event(sources: &AskSources) -> pb::AskEvent {
    pb::AskEvent {
        event: Some(pb::ask_event::Event::Sources(pb::AskSources {
            sources: sources
                .sources
                .iter()
                .map(|r| pb::RetrievedPassage {
                    chunk_id: r.chunk_id.clone(),
                    doc_id: r.doc_id.clone(),
                    title: r.title.clone(),
                    score: r.score,
                })
                .collect(),
        })),
    }
}

/// The events of a finished answer: a delta per claim (only verified claims ever reach `answer.claims` of an
/// answered response), then `done`.
pub fn ask_events(answer: &AskResponse) -> Vec<pb::AskEvent> {
    let mut events: Vec<pb::AskEvent> = Vec::new();
    if answer.status == "answered" {
        for claim in &answer.claims {
            events.push(pb::AskEvent {
                event: Some(pb::ask_event::Event::Delta(pb::AnswerDelta {
                    text: claim.text.clone(),
                    citations: claim.citations.clone(),
                    verdict: claim.verdict.as_str().to_string(),
                })),
            });
        }
    }
    events.push(pb::AskEvent {
        event: Some(pb::ask_event::Event::Done(to_proto(answer))),
    });
    events
}

/// The typed proto form of a response (plus the full JSON, for fields added after this message).
pub fn to_proto(answer: &AskResponse) -> pb::AskResult {
    pb::AskResult {
        status: answer.status.to_string(),
        answer: answer.answer.clone(),
        citations: answer
            .citations
            .iter()
            .map(|c| pb::AnswerCitation {
                n: c.n,
                chunk_id: c.chunk_id.clone(),
                doc_id: c.doc_id.clone(),
                title: c.title.clone(),
                quote: c.quote.clone(),
                score: c.score,
            })
            .collect(),
        claims: answer
            .claims
            .iter()
            .map(|c| pb::AnswerClaim {
                text: c.text.clone(),
                citations: c.citations.clone(),
                support: c.support,
                supported: c.supported,
                verdict: c.verdict.as_str().to_string(),
            })
            .collect(),
        confidence: answer.confidence,
        reason: answer.reason.unwrap_or_default().to_string(),
        suggestions: answer.suggestions.clone(),
        fallback_mode: answer.fallback_mode,
        degraded: answer.degraded,
        request_id: answer.request_id.clone(),
        latency_ms: answer
            .latency_ms
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect(),
        hops: answer.hops as u32,
        generator: answer.generator.to_string(),
        rewritten_question: answer.rewritten_question.clone().unwrap_or_default(),
        disclaimer: answer.disclaimer.unwrap_or_default().to_string(),
        near_miss: answer.near_miss.as_ref().map(|m| pb::NearMiss {
            kind: m.kind.to_string(),
            asked: m.asked.clone(),
            found: m.found.clone(),
            message: m.message.clone(),
            chunk_id: m.source.chunk_id.clone(),
            doc_id: m.source.doc_id.clone(),
            title: m.source.title.clone(),
            quote: m.source.quote.clone(),
        }),
        response_json: serde_json::to_string(answer).unwrap_or_default(),
    }
}

/// Serves the answer tier's gRPC API (with the gRPC health service, SERVING while `ready` holds) until
/// `shutdown` resolves.
pub async fn serve_grpc(
    service: Arc<AnswerService>,
    ready: attest_telemetry::ops::ReadinessCheck,
    listener: impl Into<attest_telemetry::listener::Listener>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error> {
    let health = attest_telemetry::readiness::ReadinessHealth::new(
        ready,
        vec![<AnswerServiceServer<AnswerGrpc> as tonic::server::NamedService>::NAME.into()],
    );
    tonic::transport::Server::builder()
        .add_service(health.server())
        .add_service(AnswerGrpc::server(service))
        .serve_with_incoming_shutdown(listener.into().incoming(), shutdown)
        .await
}
