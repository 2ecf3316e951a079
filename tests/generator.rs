//! The gauntlet in the real pipeline, against a loopback OpenAI-compatible chat server (a stand-in for an LLM
//! endpoint, which is outside the system) that replays scripted, streamed outputs split at awkward places:
//! invented footnote numbers, repeated and malformed markers, a leaked chunk id, a sentence the passage does not
//! support, a model that declines, a server that fails. Each is dropped, revised away or turned into an
//! abstention as docs/SPEC.md says; real ids never reach the model.

#[allow(dead_code)] // a binary of its own uses a few of the shared helpers
mod common;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use attest_answer::generate::SYSTEM_PROMPT;
use attest_answer::{AnswerConfig, AnswerService, LearnedVerifier, RouterClient};
use attest_api::router::grpc::RouterServiceImpl;
use attest_embed::{build_embedder, EmbedderConfig};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::Value;

#[derive(Clone)]
enum Script {
    Say(&'static str),
    Fail,
}

#[derive(Clone, Default)]
struct Llm {
    scripts: Arc<Mutex<VecDeque<Script>>>,
    requests: Arc<Mutex<Vec<Value>>>,
}

async fn chat(State(llm): State<Llm>, Json(body): Json<Value>) -> Response {
    llm.requests.lock().unwrap().push(body);
    let script = llm
        .scripts
        .lock()
        .unwrap()
        .pop_front()
        .expect("a scripted reply");
    match script {
        Script::Fail => (StatusCode::INTERNAL_SERVER_ERROR, "model crashed").into_response(),
        Script::Say(text) => common::llm::streamed(text),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripted_llm_outputs_go_through_the_gauntlet_and_the_verifier() {
    attest_telemetry::metrics::install();
    let llm = Llm::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(chat))
        .with_state(llm.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let dir = tempfile::tempdir().unwrap();
    let embedder = build_embedder(&EmbedderConfig::default()).unwrap();
    let (router, _plane) =
        common::router_with_collection_c(dir.path(), Arc::clone(&embedder)).await;
    let router = Arc::new(router);
    let docs = [
        ("doc-owl-01", "", "The barn owl hunts at night over open fields. It nests in old barns and church towers."),
        ("doc-fox-02", "", "The red fox lives at the edge of the forest and hunts small rodents."),
        ("doc-eel-03", "", "The European eel migrates to the Sargasso Sea to spawn."),
    ];
    common::ingest_texts(&router, "c", &docs).await;

    let mut config = AnswerConfig::default();
    config.llm.url = format!("http://{addr}");
    let service = AnswerService::new(
        RouterClient::Local(Arc::new(RouterServiceImpl::new(Arc::clone(&router)))),
        attest_answer::AnswerModels::load(&config)
            .unwrap()
            .with_verifier(Arc::new(LearnedVerifier::bundled())),
        Arc::new(attest_answer::rerank::LexicalReranker),
        embedder,
        config,
    )
    .unwrap();
    let question = "When does the barn owl hunt?";
    let mut turn = 0;
    let mut ask = |script: Script| {
        llm.scripts.lock().unwrap().push_back(script);
        turn += 1;
        let service = &service;
        let id = format!("turn-{turn}");
        async move { service.ask("c", question, &id).await.unwrap() }
    };

    // Repeated and invented markers are dropped; the claim left without a citation is revised away.
    let a = ask(Script::Say(
        "The barn owl hunts at night [1][1]. It lives on the Moon [7].",
    ))
    .await;
    assert_eq!(a.status, "answered", "{a:?}");
    assert_eq!(a.generator, "openai");
    assert_eq!(a.answer, "The barn owl hunts at night [1].");
    assert_eq!(a.citations.len(), 1);
    assert_eq!(a.citations[0].doc_id, "doc-owl-01");
    assert_eq!(
        common::counter("citation_dropped_total", Some(("why", "repeated"))),
        1.0
    );
    assert_eq!(
        common::counter("citation_dropped_total", Some(("why", "unminted"))),
        1.0
    );

    // A leaked chunk id is cut out, split across stream chunks or not.
    let a = ask(Script::Say(
        "According to doc-owl-01#0 the barn owl hunts at night over open fields [1].",
    ))
    .await;
    assert_eq!(a.status, "answered", "{a:?}");
    assert!(!a.answer.contains("doc-owl"), "{}", a.answer);
    assert_eq!(
        common::counter("citation_dropped_total", Some(("why", "leaked_id"))),
        1.0
    );

    // A malformed marker leaves the only claim uncited: nothing supported remains, so it abstains.
    let a = ask(Script::Say("The barn owl hunts at night [1, 2].")).await;
    assert_eq!(
        (a.status, a.reason),
        ("abstained", Some("unsupported_claims")),
        "{a:?}"
    );
    assert!(a.answer.is_empty() && a.citations.is_empty());
    assert_eq!(
        common::counter("citation_dropped_total", Some(("why", "malformed"))),
        1.0
    );

    // A sentence its passage does not support is dropped by the revision pass; the rest stands.
    let a = ask(Script::Say(
        "The barn owl hunts at night [1]. The barn owl migrates to Peru every winter [1].",
    ))
    .await;
    assert_eq!(a.status, "answered", "{a:?}");
    assert_eq!(a.answer, "The barn owl hunts at night [1].");
    assert_eq!(a.claims.len(), 1);
    assert!(a.claims[0].supported);

    // The model declines: a clean abstention with its own reason.
    let a = ask(Script::Say("I cannot answer from the given passages.")).await;
    assert_eq!(
        (a.status, a.reason),
        ("abstained", Some("model_abstained")),
        "{a:?}"
    );
    assert!(a.answer.is_empty() && a.citations.is_empty());

    // The endpoint fails: the extractive composer answers instead.
    let a = ask(Script::Fail).await;
    assert_eq!((a.status, a.generator), ("answered", "extractive"), "{a:?}");
    assert!(
        a.citations.iter().all(|c| c.doc_id == "doc-owl-01"),
        "{a:?}"
    );

    // What the model saw: the fixed system prompt, passages only in the user message, no internal id.
    let requests = llm.requests.lock().unwrap();
    assert_eq!(requests.len(), 6);
    for r in requests.iter() {
        assert_eq!(r["messages"][0]["role"], "system");
        assert_eq!(r["messages"][0]["content"], SYSTEM_PROMPT);
        assert_eq!(r["temperature"], 0);
        let user = r["messages"][1]["content"].as_str().unwrap();
        assert!(user.contains("[1]") && user.contains(question));
        assert!(
            !r.to_string().contains("doc-owl-01"),
            "an id reached the model: {r}"
        );
    }
}
