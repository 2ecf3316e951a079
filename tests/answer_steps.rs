//! Steps 1–8 of SPEC "answer" through the real in-process router over a local shard and the real MiniLM
//! embedder: terminology (hit, miss, timeout, ambiguous, no glossary, the cache), curated memory (pins at each
//! cosine band, with and without a judge; notes never cited), the coverage gate (ground, bail, refine up to the
//! hop limit), every abstention reason these steps can trigger, and the structural lookup forcing an identifier's
//! passage into what the generator sees.

use crate::common;

use std::sync::Arc;

use attest_answer::rerank::LexicalReranker;
use attest_answer::{AnswerConfig, AnswerService, AskResponse, LearnedVerifier, RouterClient};
use attest_api::router::grpc::RouterServiceImpl;
use attest_embed::Embedder;
use attest_router::Router;
use serde_json::{json, Value};

type Doc<'a> = (&'a str, &'a str, &'a str, Value);

async fn ingest(router: &Router, collection: &str, docs: &[Doc<'_>]) {
    common::ingest_with_metadata(router, collection, docs).await;
}

struct Stack {
    _plane: attest_node::local::ControlPlane,
    _dir: tempfile::TempDir,
    router: Arc<Router>,
    embedder: Arc<dyn Embedder>,
}

async fn stack() -> Stack {
    attest_telemetry::metrics::install();
    let dir = tempfile::tempdir().unwrap();
    // Curated memory embeds with the model its thresholds were set with, as the answer tier does.
    let (router, plane, embedder) = common::router_and_memory_embedder(dir.path()).await;
    let router = Arc::new(router);
    Stack {
        _plane: plane,
        _dir: dir,
        router,
        embedder,
    }
}

impl Stack {
    /// The answer tier on its lexical back ends (reranker, verifier and reader), whose scores these tests set
    /// the gate's thresholds against; `tests/reader.rs` covers the reader.
    fn service(&self, mut config: AnswerConfig) -> AnswerService {
        config.reader.backend = attest_answer::reader::ReaderBackend::Lexical;
        AnswerService::new(
            RouterClient::Local(Arc::new(RouterServiceImpl::new(Arc::clone(&self.router)))),
            attest_answer::AnswerModels::load(&config)
                .unwrap()
                .with_verifier(Arc::new(LearnedVerifier::bundled())),
            Arc::new(LexicalReranker),
            Arc::clone(&self.embedder),
            config,
        )
        .unwrap()
    }
}

async fn ask(service: &AnswerService, collection: &str, question: &str) -> AskResponse {
    service.ask(collection, question, "test").await.unwrap()
}

fn cited_docs(a: &AskResponse) -> Vec<&str> {
    a.citations.iter().map(|c| c.doc_id.as_str()).collect()
}

fn glossary(term: &str, extra: Value) -> Value {
    let mut meta = json!({"kind": "glossary", "term": term});
    if let (Some(m), Some(e)) = (meta.as_object_mut(), extra.as_object()) {
        m.extend(e.clone());
    }
    meta
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminology_first_hit_miss_ambiguous_timeout_and_the_cache() {
    let s = stack().await;
    ingest(
        &s.router,
        "c",
        &[
            ("g-bm25", "BM25", "BM25 is a ranking function that scores documents by term frequency and inverse document frequency.", glossary("BM25", json!({"aliases": ["Okapi BM25"]}))),
            ("g-cim-energy", "CIM (energy)", "CIM is the Common Information Model, a standard for electric power systems.", glossary("CIM", json!({"sense": "energy"}))),
            ("g-cim-it", "CIM (IT)", "CIM is the Common Information Model of the DMTF for managing IT systems.", glossary("CIM", json!({"sense": "IT"}))),
            ("notes", "Search notes", "Our search uses BM25 for the lexical lane and MiniLM for the dense lane.", json!({})),
        ],
    )
    .await;
    common::create_collection(&s.router, "plain").await;
    ingest(
        &s.router,
        "plain",
        &[(
            "notes",
            "Search notes",
            "BM25 is the lexical lane of our search. MiniLM embeds the dense lane.",
            json!({}),
        )],
    )
    .await;
    let service = s.service(AnswerConfig::default());
    let lookups = common::counter("terminology_lookup_total", None);

    // Hit: the answer is the glossary definition, cited; nothing else is retrieved.
    let a = ask(&service, "c", "What is BM25?").await;
    assert_eq!((a.status, a.generator), ("answered", "glossary"), "{a:?}");
    assert_eq!(cited_docs(&a), vec!["g-bm25"]);
    assert!(
        a.answer.starts_with("BM25 is a ranking function"),
        "{}",
        a.answer
    );
    let t = a.terminology.as_ref().unwrap();
    assert_eq!(
        (t.term.as_str(), t.outcome, t.cached),
        ("BM25", "hit", false)
    );
    assert_eq!((t.matches.len(), t.matches[0].n), (1, 1));
    assert_eq!(a.hops, 0);
    assert!(!a.unverified_terminology && a.latency_ms.contains_key("terminology"));

    // The same term again (another spelling of the question): served from the cache.
    let cache_hits = service.terminology_cache_hits();
    let a = ask(&service, "c", "what's bm25").await;
    assert!(a.terminology.as_ref().unwrap().cached, "{a:?}");
    assert_eq!(cited_docs(&a), vec!["g-bm25"]);
    assert_eq!(service.terminology_cache_hits(), cache_hits + 1);
    // An alias is a hit too.
    let a = ask(&service, "c", "Define Okapi BM25").await;
    assert_eq!(a.terminology.as_ref().unwrap().outcome, "hit");
    assert_eq!(cited_docs(&a), vec!["g-bm25"]);

    // Ambiguous: both senses listed, each cited.
    let a = ask(&service, "c", "What is CIM?").await;
    assert_eq!(a.status, "answered", "{a:?}");
    let t = a.terminology.as_ref().unwrap();
    assert_eq!(t.outcome, "ambiguous");
    let mut senses: Vec<_> = t.matches.iter().map(|m| m.sense.clone().unwrap()).collect();
    senses.sort();
    assert_eq!(senses, vec!["IT", "energy"]);
    let mut docs = cited_docs(&a);
    docs.sort();
    assert_eq!(docs, vec!["g-cim-energy", "g-cim-it"], "{a:?}");

    // Miss: the glossary exists but lacks the term → abstain, never invent; suggest glossary terms.
    let a = ask(&service, "c", "What is FooBarBaz?").await;
    assert_eq!(
        (a.status, a.reason),
        ("abstained", Some("terminology_not_found")),
        "{a:?}"
    );
    assert!(a.answer.is_empty() && a.citations.is_empty());
    assert!(!a.suggestions.is_empty() && a.suggestions.len() <= 3);
    assert_eq!(a.terminology.as_ref().unwrap().outcome, "miss");

    // No glossary in the collection: an ordinary question, answered from retrieval.
    let a = ask(&service, "plain", "What is BM25?").await;
    assert_eq!(a.terminology.as_ref().unwrap().outcome, "no_glossary");
    assert_eq!((a.status, a.generator), ("answered", "extractive"), "{a:?}");
    assert_eq!(cited_docs(&a), vec!["notes"]);

    // Not a definition question: no lookup at all.
    let a = ask(
        &service,
        "c",
        "What is the name of the lexical lane of our search?",
    )
    .await;
    assert!(a.terminology.is_none(), "{a:?}");

    assert!(common::counter("terminology_lookup_total", None) >= lookups + 6.0);
    assert!(common::counter("terminology_cache_hit_total", None) >= 1.0);
    assert!(common::counter("terminology_hit_total", None) >= 3.0);
    assert!(common::counter("terminology_miss_total", None) >= 1.0);

    // Timeout: the real lookup cannot finish in 0 ms → normal retrieval, marked unverified, never from the
    // glossary path; timeouts are not cached.
    let mut config = AnswerConfig::default();
    config.terminology.timeout_ms = 0;
    let slow = s.service(config);
    for _ in 0..2 {
        let a = ask(&slow, "c", "What is BM25?").await;
        let t = a.terminology.as_ref().unwrap();
        assert_eq!((t.outcome, t.cached), ("timeout", false), "{a:?}");
        assert!(a.unverified_terminology);
        assert_ne!(a.generator, "glossary");
        assert_ne!(a.reason, Some("terminology_not_found"));
        assert!(a.hops >= 1);
        assert!(a.status == "answered" || a.reason.is_some(), "{a:?}");
    }
    assert_eq!(slow.terminology_cache_hits(), 0);
    assert!(common::counter("terminology_timeout_total", None) >= 2.0);
}

const PIN: &str = "How are writes made durable?";
const NOTE: &str = "Durability questions are about the ingest log, not about replication.";

async fn memory_stack() -> (Stack, tempfile::TempDir) {
    let s = stack().await;
    ingest(
        &s.router,
        "c",
        &[
            ("adr-0007", "Ingest log", "Writes become durable when every record is appended to the RocksDB log and synced before the acknowledgement.", json!({})),
            ("replication", "Replication", "Writes are copied to every replica of a shard and acknowledged on a quorum.", json!({})),
            ("owl", "Barn owl", "The barn owl hunts at night over open fields.", json!({})),
        ],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("memory.yaml"),
        format!(
            "c:\n  pins:\n    - question: {PIN}\n      refs: [adr-0007]\n  notes:\n    - text: {NOTE}\n      when: Are my writes safe if the process crashes?\n"
        ),
    )
    .unwrap();
    (s, dir)
}

fn memory_config(dir: &tempfile::TempDir) -> AnswerConfig {
    AnswerConfig {
        memory_file: Some(dir.path().join("memory.yaml")),
        // Only forced passages reach the generator when a pin is accepted: what it cites shows the forcing.
        passages: 1,
        ..AnswerConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curated_memory_pins_by_cosine_band_and_notes_never_cited() {
    let (s, dir) = memory_stack().await;
    let service = s.service(memory_config(&dir));
    // Real MiniLM cosines against the pinned question (measured): 0.946, 0.718, 0.755, 0.633.
    let a = ask(&service, "c", "How do writes become durable?").await;
    assert_eq!(a.pinned, vec!["adr-0007"], "{a:?}");
    assert_eq!(
        (a.status, cited_docs(&a)),
        ("answered", vec!["adr-0007"]),
        "{a:?}"
    );
    assert!(a.latency_ms.contains_key("memory"));

    // Border band, the judge (the lexical reranker: 2 of 3 question words in the pinned phrasing) accepts.
    let a = ask(&service, "c", "How durable are the writes of a shard?").await;
    assert_eq!(a.pinned, vec!["adr-0007"], "{a:?}");
    // Border band, the judge rejects (1 of 4 words).
    let a = ask(
        &service,
        "c",
        "How does the system ensure durability of writes?",
    )
    .await;
    assert!(a.pinned.is_empty(), "{a:?}");
    // Below the border: rejected whatever a judge would say.
    let a = ask(&service, "c", "How are writes replicated?").await;
    assert!(a.pinned.is_empty(), "{a:?}");

    // No judge: the border pin the judge accepted above is rejected.
    let mut config = memory_config(&dir);
    config.memory.judge_border = false;
    let unjudged = s.service(config);
    let a = ask(&unjudged, "c", "How durable are the writes of a shard?").await;
    assert!(a.pinned.is_empty(), "{a:?}");

    // A note (cosine 0.827 to its trigger) frames the answer and is never cited or quoted.
    for q in [
        "Will a crash lose my writes?",
        "Is my write safe when the server crashes?",
    ] {
        let a = ask(&service, "c", q).await;
        assert_eq!(a.notes, vec![NOTE], "{q}: {a:?}");
        assert!(!a.answer.contains("Durability questions"), "{a:?}");
        assert!(a
            .citations
            .iter()
            .all(|c| !c.quote.contains("Durability questions")));
        assert!(a.pinned.is_empty());
    }
    let a = ask(&service, "c", "When does the barn owl hunt?").await;
    assert!(a.notes.is_empty() && a.pinned.is_empty(), "{a:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coverage_gate_hop_limit_and_abstention_reasons() {
    let s = stack().await;
    ingest(
        &s.router,
        "c",
        &[
            ("owl", "Barn owl", "The barn owl hunts at night over open fields. It nests in old barns and church towers.", json!({})),
            ("fox", "Red fox", "The red fox lives at the edge of the forest and hunts small rodents.", json!({})),
            ("eel", "European eel", "The European eel migrates to the Sargasso Sea to spawn.", json!({})),
        ],
    )
    .await;
    common::create_collection(&s.router, "empty").await;
    let service = s.service(AnswerConfig::default());

    // Ground at once.
    let a = ask(&service, "c", "When does the barn owl hunt?").await;
    assert_eq!(
        (a.status, a.hops, a.route),
        ("answered", 1, "single_hop"),
        "{a:?}"
    );
    assert_eq!(cited_docs(&a), vec!["owl"]);
    for stage in [
        "route",
        "structural",
        "memory",
        "retrieve",
        "rerank",
        "generate",
        "verify",
        "total",
    ] {
        assert!(
            a.latency_ms.contains_key(stage),
            "{stage}: {:?}",
            a.latency_ms
        );
    }
    assert_eq!(a.reranker, "lexical");

    // Bail: the best candidate covers none of the question.
    let a = ask(
        &service,
        "c",
        "When did the emperor Hadrian build the northern wall?",
    )
    .await;
    assert_eq!(
        (a.status, a.reason, a.hops),
        ("abstained", Some("low_confidence"), 1),
        "{a:?}"
    );
    // No title names anything the question names: no suggestions rather than unrelated ones.
    assert!(a.suggestions.is_empty(), "{a:?}");

    // Refine: half the question is covered (0.50, between bail and ground); each hop adds the next title, and
    // the loop stops at the hop limit.
    let a = ask(&service, "c", "When does the barn owl sing in Peru?").await;
    assert_eq!(
        (a.status, a.reason, a.hops),
        ("abstained", Some("low_confidence"), 3),
        "{a:?}"
    );
    // The title near the question is suggested, the others are not.
    assert_eq!(a.suggestions, vec!["Barn owl"], "{a:?}");
    let two_hops = s.service(AnswerConfig {
        max_hops: 2,
        ..AnswerConfig::default()
    });
    let a = ask(&two_hops, "c", "When does the barn owl sing in Peru?").await;
    assert_eq!(a.hops, 2, "{a:?}");

    // Multi-hop questions retrieve their parts.
    let a = ask(
        &service,
        "c",
        "Where do both the barn owl and the red fox hunt?",
    )
    .await;
    assert_eq!(a.route, "multi_hop");
    assert!(a.hops <= 3);

    // Other reasons.
    let a = ask(&service, "empty", "When does the barn owl hunt?").await;
    assert_eq!(
        (a.status, a.reason),
        ("abstained", Some("no_results")),
        "{a:?}"
    );
    assert!(a.hops <= 3);
    for q in ["Thanks a lot!", "Hello there", "How are you?"] {
        let a = ask(&service, "c", q).await;
        assert_eq!(
            (a.status, a.reason, a.route, a.hops),
            ("abstained", Some("routed_no_retrieval"), "no_retrieval", 0),
            "{q}: {a:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structural_lookup_forces_the_identifiers_passage_in() {
    let s = stack().await;
    ingest(
        &s.router,
        "c",
        &[
            (
                "record-12",
                "Decision record twelve",
                "ADR-0012: sealed segments are memory-mapped.",
                json!({}),
            ),
            (
                "record-11",
                "Decision record eleven",
                "ADR-0011: we decide on segments every week.",
                json!({}),
            ),
            (
                "record-13",
                "Decision record thirteen",
                "ADR-0013: we decide how segments are compacted.",
                json!({}),
            ),
        ],
    )
    .await;
    // One passage reaches the generator: whichever it cites is the one that got through.
    let config = AnswerConfig {
        passages: 1,
        ..AnswerConfig::default()
    };
    let question = "What did ADR0012 decide about segments?";
    let a = ask(&s.service(config.clone()), "c", question).await;
    assert_eq!(a.identifiers, vec!["ADR0012"], "{a:?}");
    assert_eq!(
        (a.status, cited_docs(&a)),
        ("answered", vec!["record-12"]),
        "{a:?}"
    );

    // Without the lookup the better-covering decision records win the only slot.
    let plain = s.service(AnswerConfig {
        identifier_patterns: Vec::new(),
        ..config
    });
    let a = ask(&plain, "c", question).await;
    assert!(a.identifiers.is_empty());
    assert!(!cited_docs(&a).contains(&"record-12"), "{a:?}");
}
