//! The real pipeline with the real local SmolLM2-135M-Instruct model (GGUF, candle) as its generator, the
//! extractive composer behind it, over an in-process router and a local shard. Whatever a 135M model writes,
//! every citation that reaches the user must resolve to a passage the router returned for that question, every
//! answer is `answered` or `abstained` with a reason, never an error.
//!
//! Needs the model installed by `make setup` (`scripts/install-llm.sh`) and the MiniLM embedder.

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;

use attest_answer::gguf_generator::GgufConfig;
use attest_answer::{AnswerConfig, AnswerService, LearnedVerifier, RouterClient};
use attest_api::router::grpc::RouterServiceImpl;
use attest_embed::{build_embedder, EmbedderConfig};
use attest_proto::v1 as pb;

const DOCS: [(&str, &str, &str); 5] = [
    (
        "doc-owl-01",
        "Barn owl",
        "The barn owl hunts at night over open fields. It nests in old barns and church towers.",
    ),
    (
        "doc-fox-02",
        "Red fox",
        "The red fox lives at the edge of the forest and hunts small rodents such as voles.",
    ),
    (
        "doc-eel-03",
        "European eel",
        "The European eel migrates to the Sargasso Sea to spawn. Its larvae drift back to Europe.",
    ),
    (
        "doc-oak-04",
        "English oak",
        "The English oak can live for more than a thousand years. Its acorns feed jays and squirrels.",
    ),
    (
        "doc-bee-05",
        "Honey bee",
        "A honey bee colony has one queen. Worker bees tell each other where flowers are by dancing.",
    ),
];

const QUESTIONS: [&str; 4] = [
    "When does the barn owl hunt?",
    "Where does the European eel spawn?",
    "How long can the English oak live?",
    "What is the boiling point of mercury?",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_citation_of_the_local_model_resolves_to_a_passage_retrieved_in_the_turn() {
    let gguf = GgufConfig {
        enabled: true,
        max_tokens: 64,
        ..Default::default()
    };
    assert!(
        gguf.path.is_file(),
        "the local model {} is missing: run scripts/install-llm.sh (or `make setup`)",
        gguf.path.display()
    );

    let dir = tempfile::tempdir().unwrap();
    let embedder = build_embedder(&EmbedderConfig::default()).unwrap();
    let (router, _plane) =
        common::router_with_collection_c(dir.path(), Arc::clone(&embedder)).await;
    let router = Arc::new(router);
    common::ingest_texts(&router, "c", &DOCS).await;

    let config = AnswerConfig {
        gguf,
        ..AnswerConfig::default()
    };
    // The router's largest k per search (the pipeline gathers `candidates` across several searches).
    let candidates = config.search_k;
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

    let mut by_generator: HashMap<&str, usize> = HashMap::new();
    for (i, question) in QUESTIONS.iter().enumerate() {
        let a = service
            .ask("c", question, &format!("smollm2-{i}"))
            .await
            .unwrap_or_else(|e| panic!("{question}: an error instead of an answer: {e}"));
        eprintln!(
            "{question} -> {} via {} ({:?}): {:?} latency {:?}",
            a.status, a.generator, a.reason, a.answer, a.latency_ms
        );
        *by_generator.entry(a.generator).or_default() += 1;
        assert!(
            ["gguf", "extractive", "none"].contains(&a.generator),
            "{a:?}"
        );
        match a.status {
            "answered" => assert!(!a.citations.is_empty() && !a.answer.is_empty(), "{a:?}"),
            "abstained" => {
                assert!(a.reason.is_some(), "{a:?}");
                assert!(a.answer.is_empty() && a.citations.is_empty(), "{a:?}");
            }
            other => panic!("status {other}: {a:?}"),
        }

        // What the router returns for this question, every candidate the pipeline could have seen.
        let hits = router
            .search()
            .run(
                pb::SearchRequest {
                    collection: "c".into(),
                    query: question.to_string(),
                    k: Some(candidates),
                    lanes: Vec::new(),
                    rrf_k: None,
                    weights: Default::default(),
                    filter: None,
                    tenant: String::new(),
                    nprobe: None,
                    vector: Vec::new(),
                },
                format!("check-{i}"),
            )
            .await
            .unwrap()
            .hits;
        let retrieved: HashMap<&str, &pb::Hit> =
            hits.iter().map(|h| (h.chunk_id.as_str(), h)).collect();
        for c in &a.citations {
            let hit = retrieved.get(c.chunk_id.as_str()).unwrap_or_else(|| {
                panic!("citation [{}] {} was not retrieved: {a:?}", c.n, c.chunk_id)
            });
            assert_eq!(c.doc_id, hit.doc_id, "{a:?}");
            assert!(
                hit.text.contains(c.quote.trim()),
                "quote {:?} is not in {:?}",
                c.quote,
                hit.text
            );
            assert!(
                a.answer.contains(&format!("[{}]", c.n)),
                "citation [{}] is not in the answer: {a:?}",
                c.n
            );
        }
        // Every marker in the answer and every claim's citation is one of the listed citations.
        let listed: Vec<u32> = a.citations.iter().map(|c| c.n).collect();
        for claim in &a.claims {
            if a.status == "answered" {
                assert!(claim.supported, "{a:?}");
                assert!(claim.citations.iter().all(|n| listed.contains(n)), "{a:?}");
            }
        }
        for marker in a.answer.split('[').skip(1) {
            let n: u32 = marker
                .split_once(']')
                .and_then(|(inside, _)| inside.parse().ok())
                .unwrap_or_else(|| panic!("a malformed marker reached the user: {a:?}"));
            assert!(listed.contains(&n), "marker [{n}] has no citation: {a:?}");
        }
        // Internal ids never reach the user in the text.
        assert!(!a.answer.contains("doc-"), "{a:?}");
    }
    eprintln!("generators: {by_generator:?}");
}
