//! The readers as a second-stage reranker (`answer.rerank.readers`, issue 70), with the committed readers: a
//! passage that covers every word of the question and answers nothing falls below the one that answers it, in
//! the function the answer tier and `attest-lab eval --reader-rerank` share and in a streamed ask's sources;
//! with the setting off, or the readers' weight at 0, the reranker's order stands.

use crate::common;

use std::sync::Arc;

use attest_answer::pipeline::AskSources;
use attest_answer::reader::{Reader, ToRead};
use attest_answer::rerank::readers::{reorder, ReaderRerankConfig};
use attest_answer::rerank::LexicalReranker;
use attest_answer::{AnswerConfig, AnswerService, RouterClient};
use attest_api::router::grpc::RouterServiceImpl;
use attest_embed::{build_embedder, EmbedderConfig};
use attest_proto::v1 as pb;

const QUESTION: &str = "When did the Harbor Bridge open to traffic?";
/// Every content word of the question in one sentence with its title, and no date.
const DECOY_TITLE: &str = "Harbor Bridge traffic";
const DECOY: &str = "When the Harbor Bridge opened to traffic is a question the city museum answers on its website.";
/// The answer, its words spread over two sentences.
const ANSWER_TITLE: &str = "Mara Lindqvist";
const ANSWER: &str = "Mara Lindqvist designed the Harbor Bridge. It opened to traffic on 4 May 2024, two years late.";

fn hit(id: &str, title: &str, text: &str) -> pb::Hit {
    pb::Hit {
        doc_id: id.into(),
        chunk_id: format!("{id}#0"),
        title: title.into(),
        text: text.into(),
        ..Default::default()
    }
}

fn readers() -> Reader {
    Reader::from_config(&AnswerConfig::default().reader)
        .unwrap()
        .expect("the model back end")
}

fn order(reader: &Reader, settings: ReaderRerankConfig) -> Vec<String> {
    let mut ranked = vec![
        (hit("decoy", DECOY_TITLE, DECOY), 0.9),
        (hit("answer", ANSWER_TITLE, ANSWER), 0.3),
        (hit("tail", "Harbor", "Boats moor in the harbor."), 0.2),
    ];
    reorder(
        reader,
        &settings,
        QUESTION,
        &mut ranked,
        |(h, _)| h,
        |(_, s)| *s,
    )
    .unwrap();
    ranked.into_iter().map(|(h, _)| h.doc_id).collect()
}

#[test]
fn the_readers_put_the_passage_that_answers_first() {
    let reader = readers();
    let on = ReaderRerankConfig {
        depth: 20,
        ..Default::default()
    };
    assert_eq!(order(&reader, on), ["answer", "decoy", "tail"]);
    // Off, unweighted, or too shallow to reach the answer: the reranker's order.
    for unchanged in [
        ReaderRerankConfig::default(),
        ReaderRerankConfig { weight: 0.0, ..on },
        ReaderRerankConfig { depth: 1, ..on },
    ] {
        assert_eq!(
            order(&reader, unchanged),
            ["decoy", "answer", "tail"],
            "{unchanged:?}"
        );
    }

    // Each passage gets its own reading: one sentence apiece, however many passages.
    let passages = [
        ToRead {
            title: ANSWER_TITLE,
            text: ANSWER,
        },
        ToRead {
            title: DECOY_TITLE,
            text: DECOY,
        },
    ];
    let read = reader.read_each(QUESTION, &passages, 1).unwrap();
    for sentences in &read {
        assert_eq!(
            sentences.iter().filter(|s| s.answerability > 0.0).count(),
            1,
            "{read:?}"
        );
    }
    assert!(read[0][1].answerability > 0.5, "{read:?}");
}

/// The sources a streamed ask sends first, with `settings`.
async fn sources(settings: ReaderRerankConfig) -> Vec<String> {
    attest_telemetry::metrics::install();
    let dir = tempfile::tempdir().unwrap();
    let embedder = build_embedder(&EmbedderConfig::default()).unwrap();
    let (router, _plane) =
        common::router_with_collection_c(dir.path(), Arc::clone(&embedder)).await;
    let router = Arc::new(router);
    common::ingest_texts(
        &router,
        "c",
        &[
            ("decoy", DECOY_TITLE, DECOY),
            ("answer", ANSWER_TITLE, ANSWER),
        ],
    )
    .await;
    let mut config = AnswerConfig::default();
    config.rerank.readers = settings;
    let service = AnswerService::new(
        RouterClient::Local(Arc::new(RouterServiceImpl::new(Arc::clone(&router)))),
        attest_answer::AnswerModels::load(&config).unwrap(),
        Arc::new(LexicalReranker),
        embedder,
        config,
    )
    .unwrap();
    let (to, mut from) = tokio::sync::mpsc::unbounded_channel::<AskSources>();
    let caller = Default::default();
    service
        .ask_streamed(&caller, "c", QUESTION, &[], "req-rr", to)
        .await
        .unwrap();
    let first = from.recv().await.expect("a sources event");
    first.sources.into_iter().map(|s| s.doc_id).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_ask_lists_the_passage_that_answers_first() {
    assert_eq!(
        sources(ReaderRerankConfig::default()).await,
        ["decoy", "answer"]
    );
    let on = ReaderRerankConfig {
        depth: 20,
        ..Default::default()
    };
    assert_eq!(sources(on).await, ["answer", "decoy"]);
}
