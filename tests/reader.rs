//! The reader (issue 13) through the real in-process router, shard and MiniLM embedder with the committed
//! reader model: answerability decides (the gold paragraph with its answer sentence removed abstains), the
//! support head separates a claim from its one-edit twin, every quote is a span of the cited document (never a
//! URL title, a title with dots or a fragment split inside one), and suggestions only name titles near the
//! question.

use crate::common;

use std::sync::Arc;

use attest_answer::reader::ReaderBackend;
use attest_answer::{AnswerConfig, AnswerService, AskResponse, RouterClient};
use attest_api::router::grpc::RouterServiceImpl;
use attest_embed::{build_embedder, Embedder, EmbedderConfig};
use attest_router::Router;

const BRIDGE_TITLE: &str = "https://news.example.com/2024/05/harbor-bridge.opens.html";
const BRIDGE: &str = "The Harbor Bridge was designed by the engineer Mara Lindqvist. It opened to traffic on 4 May 2024, two years late. It cost €1.2 billion — more than planned. Engineers said the cables “sing” in strong wind.";
const BRIDGE_NO_OPENING: &str = "The Harbor Bridge was designed by the engineer Mara Lindqvist. It cost €1.2 billion — more than planned. Engineers said the cables “sing” in strong wind.";
const COURT_TITLE: &str = "U.S. Dept. of Energy v. Smith";
const COURT: &str = "The U.S. Supreme Court ruled for Smith in 1998. The Dept. of Energy appealed to Congress, and lost again in 2001.";
const CAFE_TITLE: &str = "Café «Ölmühle», Wien";
const CAFE: &str = "Das Café „Ölmühle“ öffnete 1921 in Wien… Its owner, Zoë Brandt, baked apple strudel every morning for forty years.";

struct Stack {
    _dir: tempfile::TempDir,
    router: Arc<Router>,
    embedder: Arc<dyn Embedder>,
}

async fn stack() -> Stack {
    attest_telemetry::metrics::install();
    let dir = tempfile::tempdir().unwrap();
    let embedder = build_embedder(&EmbedderConfig::default()).unwrap();
    let (router, _plane) =
        common::router_with_collection_c(dir.path(), Arc::clone(&embedder)).await;
    let router = Arc::new(router);
    common::create_collection(&router, "removed").await;
    common::ingest_texts(
        &router,
        "c",
        &[
            ("bridge", BRIDGE_TITLE, BRIDGE),
            ("court", COURT_TITLE, COURT),
            ("cafe", CAFE_TITLE, CAFE),
        ],
    )
    .await;
    common::ingest_texts(
        &router,
        "removed",
        &[
            ("bridge", BRIDGE_TITLE, BRIDGE_NO_OPENING),
            ("court", COURT_TITLE, COURT),
            ("cafe", CAFE_TITLE, CAFE),
        ],
    )
    .await;
    Stack {
        _dir: dir,
        router,
        embedder,
    }
}

impl Stack {
    /// The answer tier with the reader on: it gates, composes and (as the default verifier) verifies.
    fn service(&self) -> AnswerService {
        let config = reader_config();
        AnswerService::new(
            RouterClient::Local(Arc::new(RouterServiceImpl::new(Arc::clone(&self.router)))),
            attest_answer::AnswerModels::load(&config).unwrap(),
            Arc::new(attest_answer::rerank::LexicalReranker),
            Arc::clone(&self.embedder),
            config,
        )
        .unwrap()
    }
}

/// The reader of `config` (the model back end, loaded).
fn model_reader(config: &AnswerConfig) -> attest_answer::reader::Reader {
    attest_answer::reader::Reader::from_config(&config.reader)
        .unwrap()
        .expect("the model back end")
}

fn reader_config() -> AnswerConfig {
    let mut config = AnswerConfig::default();
    config.reader.backend = ReaderBackend::Model;
    config
}

async fn ask(service: &AnswerService, collection: &str, question: &str) -> AskResponse {
    service.ask(collection, question, "test").await.unwrap()
}

fn text_of(doc_id: &str) -> &'static str {
    match doc_id {
        "bridge" => BRIDGE,
        "court" => COURT,
        "cafe" => CAFE,
        other => panic!("unknown document {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reader_answers_from_the_answer_sentence_and_abstains_without_it() {
    let s = stack().await;
    let service = s.service();

    let a = ask(&service, "c", "When did the Harbor Bridge open to traffic?").await;
    assert_eq!(a.status, "answered", "{a:?}");
    assert!(a.answer.contains("4 May 2024"), "{a:?}");
    assert!(a.latency_ms.contains_key("read"), "{a:?}");
    assert!(a.confidence > 0.0 && a.confidence <= 1.0);

    // The topic is there, the answer is not: the case word overlap answered.
    let a = ask(
        &service,
        "removed",
        "When did the Harbor Bridge open to traffic?",
    )
    .await;
    assert_eq!(a.status, "abstained", "{a:?}");

    // Nothing about the Inca empire: no answer, and no unrelated titles offered as suggestions.
    let a = ask(&service, "c", "Who founded the Inca empire in Cusco?").await;
    assert_eq!(a.status, "abstained", "{a:?}");
    assert!(a.suggestions.is_empty(), "{a:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_quote_is_a_span_of_the_cited_document_never_its_title() {
    let s = stack().await;
    let service = s.service();
    let mut answered = 0;
    for q in [
        "When did the Harbor Bridge open to traffic?",
        "Who designed the Harbor Bridge?",
        "Who did the Supreme Court rule for in 1998?",
        "Who baked apple strudel at the Café Ölmühle?",
    ] {
        let a = ask(&service, "c", q).await;
        if a.status != "answered" {
            continue;
        }
        answered += 1;
        assert!(!a.citations.is_empty(), "{a:?}");
        for c in &a.citations {
            let doc = text_of(&c.doc_id);
            assert!(
                doc.contains(&c.quote),
                "{q}: quote {:?} is not in {:?}",
                c.quote,
                c.doc_id
            );
            assert!(!c.quote.contains("https://"), "{q}: {:?}", c.quote);
            assert!(!c.quote.trim().is_empty());
        }
        for claim in &a.claims {
            assert!(claim.supported, "{q}: {claim:?}");
        }
    }
    assert!(answered >= 3, "answered {answered} of 4");
}

/// The reader's answerability of each sentence of one passage.
fn answerabilities(
    reader: &attest_answer::reader::Reader,
    question: &str,
    passage: attest_answer::reader::ToRead,
) -> Vec<f64> {
    reader.read(question, &[passage]).unwrap()[0]
        .iter()
        .map(|s| s.answerability)
        .collect()
}

#[test]
fn the_span_head_finds_the_answer_sentence_and_nothing_once_it_is_gone() {
    let config = reader_config();
    let reader = model_reader(&config);
    assert!(
        reader.model().span_blend() > 0.0,
        "the committed weights carry a span head"
    );
    let question = "When did the Harbor Bridge open to traffic?";
    let read = |text| {
        let passage = attest_answer::reader::ToRead {
            title: BRIDGE_TITLE,
            text,
        };
        answerabilities(&reader, question, passage)
    };
    let with = read(BRIDGE);
    let ground = config.reader.ground_threshold;
    // The opening sentence is the second one; it reads as the answer, and clears the gate.
    let best = (0..with.len())
        .max_by(|&a, &b| with[a].total_cmp(&with[b]))
        .unwrap();
    assert_eq!(best, 1, "{with:?}");
    assert!(with[1] >= ground, "{with:?}");
    // Without it the same passage names the bridge, its designer and its cost, and answers nothing asked.
    let without = read(BRIDGE_NO_OPENING);
    assert!(without.iter().all(|&s| s < ground), "{without:?}");
}

#[test]
fn the_span_head_names_the_semicolon_part_that_answers() {
    let config = reader_config();
    let reader = model_reader(&config);
    let part = |question: &str| {
        let passage = attest_answer::reader::ToRead {
            title: BRIDGE_TITLE,
            text: "The Harbor Bridge was designed by the engineer Mara Lindqvist (born 1961; died 2020); it opened \
                   to traffic on 4 May 2024, two years late.",
        };
        reader.read(question, &[passage]).unwrap()[0][0].answer_part
    };
    // The `;` inside the brackets splits nothing: the sentence has two parts.
    assert_eq!(part("Who designed the Harbor Bridge?"), 0);
    assert_eq!(part("When did the Harbor Bridge open to traffic?"), 1);
}

#[test]
fn an_ensembles_answerability_combines_its_models_by_its_rule() {
    use attest_answer::reader::EnsembleRule;
    let question = "When did the Harbor Bridge open to traffic?";
    let passage = attest_answer::reader::ToRead {
        title: BRIDGE_TITLE,
        text: BRIDGE,
    };
    let read = |config: &AnswerConfig| answerabilities(&model_reader(config), question, passage);
    let mut alone = reader_config();
    alone.reader.ensemble.clear();
    let mut second = alone.clone();
    second.reader.model_dir = Some(attest_models::locate_repository_dir(
        attest_answer::reader::SECOND_READER_DIR,
    ));
    let mut both = alone.clone();
    both.reader.ensemble = vec![attest_answer::reader::SECOND_READER_DIR.into()];
    assert_eq!(
        both.reader.ensemble_rule,
        EnsembleRule::Geometric,
        "the default"
    );
    let mut averaged = both.clone();
    averaged.reader.ensemble_rule = EnsembleRule::Mean;
    let (a, b) = (read(&alone), read(&second));
    let (geometric, mean) = (read(&both), read(&averaged));
    // Two different models (MiniLM and bge-small) judge the same sentences differently (relatively: both are
    // sure of this passage, so the off-answer sentences score near 0)…
    let relative = |x: f64, y: f64| (x - y).abs() / x.abs().max(y.abs());
    assert!(
        a.iter().zip(&b).any(|(&x, &y)| relative(x, y) > 0.5),
        "{a:?} {b:?}"
    );
    // …and the ensemble says their combination, sentence by sentence.
    for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
        let (g, m) = (geometric[i], mean[i]);
        if x == 0.0 && y == 0.0 {
            // Not read by either (the sentence meets the question only in its subject, "The Harbor Bridge was
            // designed by …"): not read by the ensemble either.
            assert_eq!((g, m), (0.0, 0.0), "{a:?} {b:?} {geometric:?} {mean:?}");
            continue;
        }
        assert!(relative(m, (x + y) / 2.0) < 1e-4, "{a:?} {b:?} {mean:?}");
        assert!(
            relative(g, (x * y).sqrt()) < 1e-4,
            "{a:?} {b:?} {geometric:?}"
        );
    }
}

#[test]
fn a_sentence_off_the_questions_topic_is_not_read() {
    let config = reader_config();
    let reader = model_reader(&config);
    // The answer type fits ("how many" → "five"), nothing else does: the model alone reads this as an answer.
    let off_topic = attest_answer::reader::ToRead {
        title: "United Methodist Church",
        text: "The United States is divided into five jurisdictions: Northeastern, Southeastern, North Central, \
               South Central and Western.",
    };
    let read = reader
        .read(
            "How many quadrangles does the Main Quadrangles have?",
            &[off_topic],
        )
        .unwrap();
    assert_eq!(
        read,
        vec![vec![attest_answer::reader::SentenceRead::default()]]
    );
    // The same sentence under a title the question names is read.
    let on_topic = attest_answer::reader::ToRead {
        title: "Main Quadrangles",
        ..off_topic
    };
    let read = reader
        .read(
            "How many quadrangles does the Main Quadrangles have?",
            &[on_topic],
        )
        .unwrap();
    assert!(read[0][0].answerability > 0.0, "{read:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_support_head_separates_a_claim_from_its_one_edit_twins() {
    let config = reader_config();
    let verifier = attest_answer::AnswerModels::load(&config).unwrap().verifier;
    let support = |claim: &str| verifier.support_in("", claim, BRIDGE_TITLE, BRIDGE);
    let right = support("The Harbor Bridge opened to traffic on 4 May 2024.");
    assert!(right >= config.claim_support_threshold, "right {right}");
    for twin in [
        "The Harbor Bridge opened to traffic on 4 May 2014.",
        "The Harbor Bridge was designed by the engineer Anna Svensson.",
        "The Harbor Bridge cost less than planned.",
    ] {
        let s = support(twin);
        assert!(s < right - 0.2, "{twin}: {s} vs {right}");
    }
}
