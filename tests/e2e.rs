//! End to end through the real binary: `attest dev` with 2 shard nodes and the local MiniLM embedder, the
//! bundled squad sample ingested with `attest ingest`, then hybrid search and the bad-input table over HTTP and
//! gRPC.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use attest_proto::v1 as pb;
use attest_proto::v1::answer_service_client::AnswerServiceClient;
use common::{http, post, repo_root, start_dev, Dev};
use serde_json::{json, Value};

fn attest(dev: &Dev, args: &[&str]) -> String {
    let out = Command::new(common::attest_bin())
        .args(args)
        .env("ATTEST_SERVER", &dev.url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "attest {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn search(dev: &Dev, collection: &str, query: &str, k: u32) -> Value {
    let (status, body) = post(
        &format!("{}/v1/collections/{collection}/search", dev.url),
        &json!({"query": query, "k": k}),
    );
    assert_eq!(status, 200, "{body}");
    body
}

#[test]
fn dev_ingest_and_hybrid_search_find_gold_paragraphs() {
    let data = tempfile::tempdir().unwrap();
    let dev = start_dev(data.path());
    let root = repo_root();
    let corpus = root.join("data/squad-sample/corpus.jsonl");
    let started = Instant::now();
    let out = attest(
        &dev,
        &[
            "ingest",
            "--collection",
            "squad",
            "--create",
            "--json",
            corpus.to_str().unwrap(),
        ],
    );
    let summary: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(summary["accepted"], 301, "{summary}");
    eprintln!("ingested in {:?}: {summary}", started.elapsed());

    let queries: Vec<Value> = std::fs::read_to_string(root.join("data/squad-sample/queries.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|q: &Value| q["answerable"] == true)
        .collect();
    assert_eq!(queries.len(), 100);
    let mut found = 0;
    let mut both_shards = std::collections::HashSet::new();
    for q in &queries {
        let body = search(&dev, "squad", q["text"].as_str().unwrap(), 10);
        let hits = body["hits"].as_array().unwrap();
        assert!(hits.len() <= 10);
        for h in hits {
            both_shards.insert(h["shard"].as_u64().unwrap());
        }
        if hits.iter().any(|h| h["doc_id"] == q["gold_doc"]) {
            found += 1;
        }
        assert_eq!(body["degraded"], false);
        assert_eq!(body["fallback_mode"], false);
    }
    eprintln!("gold in top 10: {found}/100");
    assert!(
        found >= 90,
        "gold paragraph in the top 10 for {found}/100 questions"
    );
    assert_eq!(both_shards.len(), 2, "hits come from both shards");

    // Provenance: a hit found by both lanes carries both ranks.
    let body = search(&dev, "squad", "Which team won Super Bowl 50?", 5);
    let top = &body["hits"][0];
    assert!(
        top["lanes"]["dense"]["rank"].is_u64() && top["lanes"]["bm25"]["rank"].is_u64(),
        "{top}"
    );

    // The CLI prints results too.
    let text = attest(
        &dev,
        &[
            "search",
            "--collection",
            "squad",
            "--k",
            "3",
            "--lane",
            "bm25",
            "Denver Broncos Super Bowl",
        ],
    );
    assert!(text.contains("Super Bowl"), "{text}");

    // Restart: everything acknowledged is still there, and the same search finds the same hits.
    let doc_ids = |body: &Value| -> Vec<String> {
        body["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["doc_id"].as_str().unwrap().to_string())
            .collect()
    };
    let before = doc_ids(&search(&dev, "squad", "Which team won Super Bowl 50?", 10));
    drop(dev);
    let dev = start_dev(data.path());
    let body = search(&dev, "squad", "Which team won Super Bowl 50?", 10);
    assert_eq!(doc_ids(&body), before, "{body}");
    // The gold paragraph's vector came back too: the dense lane alone ranks it among its best (BM25 ranks it
    // below its tenth, and the hybrid weighs dense at 0.3 by default).
    let (status, dense) = post(
        &format!("{}/v1/collections/squad/search", dev.url),
        &json!({"query": "Which team won Super Bowl 50?", "k": 5, "lanes": ["dense"]}),
    );
    assert_eq!(status, 200, "{dense}");
    assert!(
        doc_ids(&dense).iter().any(|d| d == "squad-dev-a0000-p000"),
        "{dense}"
    );

    ask_through_dev(&dev, &root);
}

/// Chunks re-join sentences with single spaces: compare texts with every whitespace run as one space.
/// "Who won Super Bowl 50?" is answered with the Denver Broncos, or not at all.
fn assert_the_broncos_or_nothing(dev: &Dev) {
    let winner = ask(dev, "Who won Super Bowl 50?");
    assert!(
        winner["status"] == "abstained"
            || (winner["status"] == "answered"
                && winner["answer"]
                    .as_str()
                    .unwrap()
                    .contains("Denver Broncos")),
        "{winner}"
    );
}

/// Issue 41 again, on the console's corpus (40 paragraphs of the Super Bowl 50 article): there, a reader on
/// bge-small (round 8) answered the winner question from the Super Bowl XIX sentence ("… won by the home team
/// 49ers"), which no eval set caught; the default must not.
#[test]
fn the_winner_question_holds_on_a_corpus_of_one_article() {
    let data = tempfile::tempdir().unwrap();
    let dev = start_dev(data.path());
    let corpus = repo_root().join("tests/browser/fixtures/squad-slice.jsonl");
    attest(
        &dev,
        &[
            "ingest",
            "--collection",
            "squad",
            "--create",
            corpus.to_str().unwrap(),
        ],
    );
    assert_the_broncos_or_nothing(&dev);
}

fn squash(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn ask(dev: &Dev, question: &str) -> Value {
    let (status, body) = post(
        &format!("{}/v1/collections/squad/ask", dev.url),
        &json!({"question": question}),
    );
    assert_eq!(status, 200, "{body}");
    body
}

/// `attest.v1.AnswerService/Ask` over gRPC: the streamed deltas and the final response.
fn ask_grpc(dev: &Dev, question: &str) -> (Vec<pb::AnswerDelta>, pb::AskResult) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut client = AnswerServiceClient::connect(dev.grpc.clone())
            .await
            .unwrap();
        let mut stream = client
            .ask(pb::AskRequest {
                collection: "squad".into(),
                question: question.into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        let (mut deltas, mut done, mut sources) = (Vec::new(), None, None);
        while let Some(event) = stream.message().await.unwrap() {
            match event.event.unwrap() {
                pb::ask_event::Event::Sources(s) => {
                    assert!(
                        deltas.is_empty() && done.is_none() && sources.is_none(),
                        "sources come first, once"
                    );
                    sources = Some(s);
                }
                pb::ask_event::Event::Delta(d) => {
                    assert!(sources.is_some(), "a delta before the sources");
                    assert!(done.is_none(), "a delta after done");
                    deltas.push(d);
                }
                pb::ask_event::Event::Done(r) => done = Some(r),
            }
        }
        (deltas, done.expect("the stream ends with done"))
    })
}

/// The answer tier on the squad sample: answerable questions answered with the gold paragraph cited, questions
/// from articles not in the sample abstain, every citation quotes its own document, a removed article's
/// question abstains, SSE streams, bad input gets clear errors.
fn ask_through_dev(dev: &Dev, root: &Path) {
    let corpus: std::collections::HashMap<String, String> =
        std::fs::read_to_string(root.join("data/squad-sample/corpus.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .map(|d| {
                (
                    d["id"].as_str().unwrap().to_string(),
                    squash(&attest_ingest::normalize_text(d["text"].as_str().unwrap())),
                )
            })
            .collect();
    let queries: Vec<Value> = std::fs::read_to_string(root.join("data/squad-sample/queries.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (mut answered_gold, mut hallucinated) = (0, 0);
    // The first question answered with its gold paragraph cited: the streaming checks below ask it again.
    let mut example: Option<(String, String)> = None;
    for q in &queries {
        let a = ask(dev, q["text"].as_str().unwrap());
        assert!(
            a["latency_ms"]["total"].is_f64() && a["request_id"].is_string(),
            "{a}"
        );
        if a["status"] != "answered" {
            assert!(
                a["reason"].is_string() && a["citations"] == json!([]),
                "{a}"
            );
            continue;
        }
        if q["answerable"] != true {
            hallucinated += 1;
        }
        let text = a["answer"].as_str().unwrap();
        let citations = a["citations"].as_array().unwrap();
        assert!(!citations.is_empty(), "{a}");
        for c in citations {
            let source = &corpus[c["doc_id"].as_str().unwrap()];
            let quote = squash(c["quote"].as_str().unwrap());
            assert!(
                !quote.is_empty() && source.contains(&quote),
                "quote not in its document: {c}"
            );
            assert!(text.contains(&format!("[{}]", c["n"])), "{a}");
        }
        assert!(a["claims"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["supported"] == true));
        if citations.iter().any(|c| c["doc_id"] == q["gold_doc"]) {
            answered_gold += 1;
        }
        // Not the paragraph deleted below.
        if citations.iter().any(|c| c["doc_id"] == q["gold_doc"])
            && q["gold_doc"] != "squad-dev-a0000-p045"
        {
            example.get_or_insert_with(|| {
                (
                    q["text"].as_str().unwrap().to_string(),
                    q["gold_doc"].as_str().unwrap().to_string(),
                )
            });
        }
    }
    eprintln!("ask: answered with the gold paragraph cited {answered_gold}/100, unanswerable answered {hallucinated}/50");
    assert!(
        answered_gold >= 60,
        "answered with gold cited: {answered_gold}/100"
    );
    let (example, gold) = example.expect("some question answered with its gold paragraph");
    assert!(
        hallucinated <= 2,
        "unanswerable answered: {hallucinated}/50"
    );

    // Issue 41: under the default configuration (the reader on, gated with the lexical gate) the winner is the
    // Broncos or nothing; with the reader alone it was once answered from the halftime-show sentence.
    assert_the_broncos_or_nothing(dev);

    // Remove the article a question is about: the question now abstains.
    let question = "Who tackled Ronnie Hillman for a loss of yardage?";
    let before = ask(dev, question);
    assert_eq!(
        before["citations"][0]["doc_id"], "squad-dev-a0000-p045",
        "{before}"
    );
    let status = http()
        .delete(format!(
            "{}/v1/collections/squad/documents/squad-dev-a0000-p045",
            dev.url
        ))
        .send()
        .unwrap()
        .status();
    assert_eq!(status, 200);
    let after = ask(dev, question);
    assert_eq!(after["status"], "abstained", "{after}");
    assert!(after["suggestions"].as_array().unwrap().len() <= 3);

    // Streaming.
    let resp = http()
        .post(format!("{}/v1/collections/squad/ask", dev.url))
        .json(&json!({"question": example, "stream": true}))
        .send()
        .unwrap();
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let body = resp.text().unwrap();
    // `sources` first (the first retrieval's passages, before reading), then a delta per claim, then `done`.
    let events: Vec<(&str, Value)> = body
        .split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let name = e
                .lines()
                .find_map(|l| l.strip_prefix("event: "))
                .unwrap_or("");
            let data = e
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .unwrap_or("null");
            (name, serde_json::from_str(data).unwrap())
        })
        .collect();
    let names: Vec<&str> = events.iter().map(|(n, _)| *n).collect();
    assert_eq!(names.first(), Some(&"sources"), "{body}");
    assert_eq!(names.last(), Some(&"done"), "{body}");
    let done = &events.last().unwrap().1;
    assert_eq!(done["status"], "answered", "{done}");
    let claims = done["claims"].as_array().unwrap();
    assert_eq!(
        names[1..names.len() - 1],
        vec!["delta"; claims.len()][..],
        "{body}"
    );
    let sources = events[0].1["sources"].as_array().unwrap();
    assert!(sources.iter().any(|s| s["doc_id"] == gold), "{body}");
    for c in done["citations"].as_array().unwrap() {
        assert!(
            sources.iter().any(|s| s["chunk_id"] == c["chunk_id"]),
            "a cited passage the sources event did not name: {body}"
        );
    }

    // gRPC streaming: deltas (each a verified claim) then the whole response, as over HTTP.
    let (deltas, done) = ask_grpc(dev, &example);
    assert_eq!(done.status, "answered", "{done:?}");
    assert!(
        !deltas.is_empty() && deltas.len() == done.claims.len(),
        "{deltas:?} {done:?}"
    );
    for (delta, claim) in deltas.iter().zip(&done.claims) {
        assert!(claim.supported && delta.text == claim.text && delta.citations == claim.citations);
        for n in &delta.citations {
            assert!(done.citations.iter().any(|c| c.n == *n), "{done:?}");
        }
    }
    assert!(done.citations.iter().any(|c| c.doc_id == gold), "{done:?}");
    assert!(done.latency_ms.contains_key("total") && !done.request_id.is_empty());
    let json: Value = serde_json::from_str(&done.response_json).unwrap();
    assert_eq!(json["status"], "answered");
    let (deltas, done) = ask_grpc(dev, "Who was the first emperor of the Inca empire?");
    assert_eq!(
        (deltas.len(), done.status.as_str()),
        (0, "abstained"),
        "{done:?}"
    );
    assert!(!done.reason.is_empty());

    // Bad input.
    let (status, body) = post(
        &format!("{}/v1/collections/squad/ask", dev.url),
        &json!({"question": "  "}),
    );
    assert_eq!(
        (status, body["error"]["field"].as_str()),
        (400, Some("question")),
        "{body}"
    );
    let (status, _) = post(
        &format!("{}/v1/collections/missing/ask", dev.url),
        &json!({"question": "x"}),
    );
    assert_eq!(status, 404);

    // The CLI streams the answer, then citations and claims.
    let text = attest(dev, &["ask", "--collection", "squad", &example]);
    assert!(
        text.contains("citations:") && text.contains(&gold),
        "{text}"
    );
}

#[test]
fn bad_input_gets_clear_errors_and_writes_nothing() {
    let data = tempfile::tempdir().unwrap();
    let dev = start_dev(data.path());
    let u = &dev.url;
    assert_eq!(
        post(&format!("{u}/v1/collections"), &json!({"name": "c"})).0,
        201
    );
    // Creating again with the same spec is idempotent; another spec under the name is a conflict.
    assert_eq!(
        post(&format!("{u}/v1/collections"), &json!({"name": "c"})).0,
        200
    );
    assert_eq!(
        post(
            &format!("{u}/v1/collections"),
            &json!({"name": "c", "shards": 3})
        )
        .0,
        409
    );
    assert_eq!(
        post(&format!("{u}/v1/collections"), &json!({"name": "../etc"})).0,
        400
    );

    let (s, b) = post(
        &format!("{u}/v1/collections/nope/search"),
        &json!({"query": "x"}),
    );
    assert_eq!((s, b["error"]["code"].as_str()), (404, Some("NOT_FOUND")));
    // Unknown routes and methods answer the same JSON error body as every error (bodies over the limit: the
    // unit tests of `attest_telemetry::http_error`).
    let r = http().get(format!("{u}/v1/no-such-route")).send().unwrap();
    assert_eq!(r.status().as_u16(), 404);
    assert_eq!(r.json::<Value>().unwrap()["error"]["code"], "NOT_FOUND");
    let r = http().put(format!("{u}/v1/collections")).send().unwrap();
    assert_eq!(r.status().as_u16(), 405);
    assert_eq!(
        r.json::<Value>().unwrap()["error"]["code"],
        "INVALID_ARGUMENT"
    );
    // A misspelt query parameter of a delete is refused, not ignored (it would delete from the default tenant).
    let r = http()
        .delete(format!("{u}/v1/collections/c/documents/x?tenent=b"))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert_eq!(r.json::<Value>().unwrap()["error"]["field"], "tenent");
    for k in [0, 101] {
        let (s, b) = post(
            &format!("{u}/v1/collections/c/search"),
            &json!({"query": "x", "k": k}),
        );
        assert_eq!((s, b["error"]["field"].as_str()), (400, Some("k")), "{b}");
    }
    let (s, b) = post(
        &format!("{u}/v1/collections/c/search"),
        &json!({"query": "  "}),
    );
    assert_eq!((s, b["error"]["field"].as_str()), (400, Some("query")));
    let (s, _) = post(
        &format!("{u}/v1/collections/c/search"),
        &json!({"query": "x".repeat(5000)}),
    );
    assert_eq!(s, 400);
    // Filters are bounded too (router.max_filter_conditions 32, router.max_filter_values 1024).
    let wide: serde_json::Map<String, Value> =
        (0..33).map(|i| (format!("f{i}"), json!(i))).collect();
    let (s, b) = post(
        &format!("{u}/v1/collections/c/search"),
        &json!({"query": "x", "filter": wide}),
    );
    assert_eq!(
        (s, b["error"]["field"].as_str()),
        (400, Some("filter")),
        "{b}"
    );
    let many: Vec<u32> = (0..1025).collect();
    let (s, b) = post(
        &format!("{u}/v1/collections/c/search"),
        &json!({"query": "x", "filter": {"tag": {"in": many}}}),
    );
    assert_eq!(
        (s, b["error"]["field"].as_str()),
        (400, Some("filter.tag")),
        "{b}"
    );

    // Wrong dimension: the request fails naming the field, and the valid document beside it is not written.
    let docs = json!({"documents": [
        {"id": "ok", "text": "a perfectly fine paragraph about zebras"},
        {"id": "bad", "text": "vector too short", "vector": [0.1, 0.2]}
    ]});
    let (s, b) = post(&format!("{u}/v1/collections/c/documents"), &docs);
    assert_eq!(
        (s, b["error"]["field"].as_str()),
        (400, Some("documents[1].vector")),
        "{b}"
    );
    let hits = search(&dev, "c", "zebras", 5);
    assert!(hits["hits"].as_array().unwrap().is_empty());
    let (s, _) = post(
        &format!("{u}/v1/collections/nope/documents"),
        &json!({"documents": [{"id": "x", "text": "y"}]}),
    );
    assert_eq!(s, 404);

    // NDJSON: malformed lines and invalid UTF-8 are reported with their line numbers; the rest is ingested.
    let mut ndjson = b"{\"id\": \"g1\", \"text\": \"giraffes are tall\"}\n{not json\n".to_vec();
    ndjson.extend_from_slice(b"{\"id\": \"g2\", \"text\": \"bad \xff\xfe bytes\"}\n{\"id\": \"g3\", \"text\": \"okapis are related to giraffes\"}\n");
    // An unknown field refuses its line, named: a misspelt `tenant` must not land in the default tenant.
    ndjson.extend_from_slice(
        b"{\"id\": \"g4\", \"text\": \"giraffes sleep standing\", \"tenat\": \"a\"}\n",
    );
    let r = http()
        .post(format!("{u}/v1/collections/c/documents"))
        .header("content-type", "application/x-ndjson")
        .body(ndjson)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let b: Value = r.json().unwrap();
    assert_eq!(b["accepted"], 2, "{b}");
    let lines: Vec<u64> = b["rejected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, vec![2, 3, 5]);
    assert!(
        b["rejected"][2]["reason"]
            .as_str()
            .unwrap()
            .contains("unknown field `tenat`"),
        "{b}"
    );
    let found = search(&dev, "c", "giraffes", 5);
    let ids: Vec<&str> = found["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["doc_id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"g1") && ids.contains(&"g3") && !ids.contains(&"g2") && !ids.contains(&"g4"),
        "{ids:?}"
    );

    // The same id twice in one request: the first is refused (`duplicate id in batch`), only what is stored is
    // counted; `index` is the 0-based position in the request (NDJSON adds `line`).
    let (s, b) = post(
        &format!("{u}/v1/collections/c/documents"),
        &json!({"documents": [
            {"id": "twin", "text": "the first twin text about marmots"},
            {"id": "other", "text": "badgers dig setts in woodland banks"},
            {"id": "twin", "text": "the second twin text about lemmings"}
        ]}),
    );
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["accepted"], 2, "{b}");
    assert_eq!(
        b["rejected"],
        json!([{"index": 0, "reason": "duplicate id in batch"}]),
        "{b}"
    );
    let r = http()
        .post(format!("{u}/v1/collections/c/documents"))
        .header("content-type", "application/x-ndjson")
        .body("{\"id\": \"n1\", \"text\": \"voles nest in tall grass\"}\n\n{\"id\": \"n1\", \"text\": \"shrews eat insects all day\"}\n")
        .send()
        .unwrap();
    let b: Value = r.json().unwrap();
    assert_eq!(
        b["rejected"],
        json!([{"index": 0, "line": 1, "reason": "duplicate id in batch"}]),
        "{b}"
    );
    // JSON sent as text/plain, unknown fields, explicit zeros, all-zero weights and vectors, a query of NULs, a
    // filter mixing `in` and a range: each a 400 naming the field, nothing done.
    let r = http()
        .post(format!("{u}/v1/collections/c/documents"))
        .header("content-type", "text/plain")
        .body(r#"{"documents": [{"id": "plain", "text": "sent as text"}]}"#)
        .send()
        .unwrap();
    let (status, b): (u16, Value) = (r.status().as_u16(), r.json().unwrap());
    assert_eq!(
        (status, b["error"]["field"].as_str()),
        (400, Some("content-type")),
        "{b}"
    );
    for (path, body, field) in [
        ("search", json!({"query": "marmots", "top_k": 3}), "top_k"),
        ("search", json!({"query": "marmots", "nprobe": 0}), "nprobe"),
        (
            "search",
            json!({"query": "marmots", "nprobe": 1_000_000}),
            "nprobe",
        ),
        (
            "search",
            json!({"query": "marmots", "nprobe": 1e6}),
            "nprobe",
        ),
        (
            "documents",
            json!({"documents": [
                {"id": "ok", "text": "wombats dig long burrows"},
                {"id": "bad", "text": "wombats again", "colour": "brown"}
            ]}),
            "documents[1].colour",
        ),
        ("ask", json!({"question": "x", "colour": "red"}), "colour"),
        (
            "ask",
            json!({"question": "x", "history": [{"role": "user", "content": "y", "at": 1}]}),
            "history[0].at",
        ),
        (
            "search",
            json!({"query": "marmots", "weights": {"dense": 0.0, "bm25": 0.0}}),
            "weights",
        ),
        ("search", json!({"query": "\u{0}\u{0}"}), "query"),
        (
            "search",
            json!({"query": "marmots", "filter": {"year": {"in": [1], "gte": 2}}}),
            "filter.year",
        ),
        (
            "documents",
            json!({"documents": [{"id": "z", "text": "zero vector", "vector": vec![0.0; 384]}]}),
            "documents[0].vector",
        ),
    ] {
        let (s, b) = post(&format!("{u}/v1/collections/c/{path}"), &body);
        assert_eq!(
            (s, b["error"]["field"].as_str()),
            (400, Some(field)),
            "{body}: {b}"
        );
    }
    let (s, b) = post(
        &format!("{u}/v1/collections/c/search"),
        &json!({"query": "marmots", "top_k": 3}),
    );
    assert!(
        b["error"]["message"].as_str().unwrap().contains("top_k"),
        "{s} {b}"
    );
    // The good document beside the one with an unknown field was not written either.
    let wombats = search(&dev, "c", "wombats", 10);
    assert!(
        !wombats["hits"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["text"].as_str().unwrap().contains("wombats")),
        "{wombats}"
    );
    for (body, field) in [
        (json!({"name": "zero-shards", "shards": 0}), "shards"),
        (
            json!({"name": "zero-nlist", "index": {"nlist": 0}}),
            "index.nlist",
        ),
        (
            json!({"name": "wide-probe", "index": {"nlist": 8, "nprobe": 16}}),
            "index.nprobe",
        ),
        (
            json!({"name": "huge-probe", "index": {"nprobe": 1_000_000}}),
            "index.nprobe",
        ),
        // The dev embedder's 384 dimensions split into 96 sub-vectors, not 7 or 768.
        (json!({"name": "odd-m", "index": {"m": 7}}), "index.m"),
        (json!({"name": "wide-m", "index": {"m": 768}}), "index.m"),
        (
            json!({"name": "colour", "index": {"nlist": 8, "colour": 1}}),
            "index.colour",
        ),
    ] {
        let (s, b) = post(&format!("{u}/v1/collections"), &body);
        assert_eq!(
            (s, b["error"]["field"].as_str()),
            (400, Some(field)),
            "{body}: {b}"
        );
    }
    let (_, listed) = common::get_text(&format!("{u}/v1/collections"));
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(
        listed["collections"].as_array().unwrap().len(),
        1,
        "{listed}"
    );

    // Delete: gone from search; deleting again is NOT_FOUND.
    let r = http()
        .delete(format!("{u}/v1/collections/c/documents/g1"))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let found = search(&dev, "c", "giraffes", 5);
    assert!(!found["hits"]
        .as_array()
        .unwrap()
        .iter()
        .any(|h| h["doc_id"] == "g1"));
    // Deleting again, or deleting what never existed, is NOT_FOUND and writes nothing to any log.
    let last_seq = |dev: &Dev| -> u64 {
        let (s, b) = common::get_text(&format!("{}/v1/collections/c/stats", dev.url));
        assert_eq!(s, 200, "{b}");
        let b: Value = serde_json::from_str(&b).unwrap();
        b["shards"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["last_seq"].as_u64().unwrap())
            .sum()
    };
    let before = last_seq(&dev);
    for id in ["g1", "never-stored"] {
        let r = http()
            .delete(format!("{u}/v1/collections/c/documents/{id}"))
            .send()
            .unwrap();
        assert_eq!(r.status().as_u16(), 404, "{id}");
        let b: Value = r.json().unwrap();
        assert_eq!(b["error"]["code"], "NOT_FOUND", "{b}");
    }
    assert_eq!(
        last_seq(&dev),
        before,
        "a delete of nothing appends nothing"
    );
}

/// The bad-input table of docs/SPEC.md over gRPC, row by row: the code of the HTTP rows, the field in
/// `x-attest-field`, and nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_over_grpc_gets_the_same_errors_and_writes_nothing() {
    use attest_proto::v1::router_service_client::RouterServiceClient;
    use tonic::Code;

    let data = tempfile::tempdir().unwrap();
    let dev = start_dev(data.path());
    let mut router = RouterServiceClient::connect(dev.grpc.clone())
        .await
        .unwrap();
    router
        .create_collection(pb::CreateCollectionRequest {
            name: "c".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let field = |s: &tonic::Status| {
        s.metadata()
            .get("x-attest-field")
            .map(|v| v.to_str().unwrap().to_string())
    };
    let search = |collection: &str, query: &str, k: Option<u32>| pb::SearchRequest {
        collection: collection.into(),
        query: query.into(),
        k,
        ..Default::default()
    };
    let wide = pb::Filter {
        conditions: (0..33)
            .map(|i| pb::Condition {
                field: format!("f{i}"),
                kind: Some(pb::condition::Kind::EqualsJson(i.to_string())),
            })
            .collect(),
    };
    let rows: Vec<(&str, pb::SearchRequest, Code, Option<&str>)> = vec![
        (
            "unknown collection",
            search("nope", "x", None),
            Code::NotFound,
            None,
        ),
        (
            "k = 0",
            search("c", "x", Some(0)),
            Code::InvalidArgument,
            Some("k"),
        ),
        (
            "k over the limit",
            search("c", "x", Some(101)),
            Code::InvalidArgument,
            Some("k"),
        ),
        (
            "empty query",
            search("c", " \t", None),
            Code::InvalidArgument,
            Some("query"),
        ),
        (
            "oversize query",
            search("c", &"x".repeat(5000), None),
            Code::InvalidArgument,
            Some("query"),
        ),
        (
            "unknown lane",
            pb::SearchRequest {
                lanes: vec!["sparse".into()],
                ..search("c", "x", None)
            },
            Code::InvalidArgument,
            Some("lanes"),
        ),
        (
            "too many filter conditions",
            pb::SearchRequest {
                filter: Some(wide),
                ..search("c", "x", None)
            },
            Code::InvalidArgument,
            Some("filter"),
        ),
        (
            "nprobe = 0",
            pb::SearchRequest {
                nprobe: Some(0),
                ..search("c", "x", None)
            },
            Code::InvalidArgument,
            Some("nprobe"),
        ),
        (
            "nprobe over the collection's nlist",
            pb::SearchRequest {
                nprobe: Some(1_000_000),
                ..search("c", "x", None)
            },
            Code::InvalidArgument,
            Some("nprobe"),
        ),
    ];
    for (what, request, code, named) in rows {
        let status = router.search(request).await.unwrap_err();
        assert_eq!(status.code(), code, "{what}: {status:?}");
        if let Some(named) = named {
            assert_eq!(field(&status).as_deref(), Some(named), "{what}: {status:?}");
        }
    }
    // Index parameters go through the same rules as over HTTP: `m` must divide the dimension (384).
    let status = router
        .create_collection(pb::CreateCollectionRequest {
            name: "odd-m".into(),
            index: Some(pb::IndexRequest {
                m: Some(7),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert_eq!(field(&status).as_deref(), Some("index.m"), "{status:?}");
    // An explicit 0 (or an empty model) is refused over gRPC as over HTTP: only leaving a field out asks for its
    // default.
    for (request, named) in [
        (
            pb::CreateCollectionRequest {
                name: "no-shards".into(),
                shards: Some(0),
                ..Default::default()
            },
            "shards",
        ),
        (
            pb::CreateCollectionRequest {
                name: "no-lists".into(),
                index: Some(pb::IndexRequest {
                    nlist: Some(0),
                    ..Default::default()
                }),
                ..Default::default()
            },
            "index.nlist",
        ),
        (
            pb::CreateCollectionRequest {
                name: "no-model".into(),
                embedder: Some(String::new()),
                ..Default::default()
            },
            "embedder",
        ),
    ] {
        let status = router.create_collection(request).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert_eq!(field(&status).as_deref(), Some(named), "{status:?}");
    }

    // A batch over the limit is refused whole; bad documents in a batch are reported by index and skipped.
    let doc = |id: &str, text: &str| pb::Document {
        id: id.into(),
        text: text.into(),
        ..Default::default()
    };
    let too_many = pb::IngestRequest {
        collection: "c".into(),
        documents: (0..1001)
            .map(|i| doc(&format!("d{i}"), "zebras graze"))
            .collect(),
    };
    // (PAYLOAD_TOO_LARGE: 413 over HTTP, RESOURCE_EXHAUSTED over gRPC.)
    let status = router.ingest(too_many).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(
        status.metadata().get("x-attest-code").unwrap(),
        "PAYLOAD_TOO_LARGE"
    );
    // A bad document refuses the whole request, naming it; the good one beside it is not written either.
    for (bad, named) in [
        (doc("", "no id"), "documents[1].id"),
        (doc("blank", "   "), "documents[1].text"),
        (
            doc("ctl\u{7}id", "a control character in the id"),
            "documents[1].id",
        ),
    ] {
        let request = pb::IngestRequest {
            collection: "c".into(),
            documents: vec![doc("ok", "a perfectly fine paragraph about zebras"), bad],
        };
        let status = router.ingest(request).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{named}: {status:?}");
        assert_eq!(field(&status).as_deref(), Some(named), "{status:?}");
    }
    let nothing = router
        .search(pb::SearchRequest {
            lanes: vec!["bm25".into()],
            ..search("c", "zebras", Some(10))
        })
        .await
        .unwrap()
        .into_inner()
        .hits;
    assert!(nothing.is_empty(), "{nothing:?}");
    let good = pb::IngestRequest {
        collection: "c".into(),
        documents: vec![doc("ok", "a perfectly fine paragraph about zebras")],
    };
    assert_eq!(router.ingest(good).await.unwrap().into_inner().accepted, 1);
    // Now it is there, alone.
    let hits = router
        .search(pb::SearchRequest {
            lanes: vec!["bm25".into()],
            ..search("c", "zebras", Some(10))
        })
        .await
        .unwrap()
        .into_inner()
        .hits;
    let ids: Vec<&str> = hits.iter().map(|h| h.doc_id.as_str()).collect();
    assert_eq!(ids, vec!["ok"], "{hits:?}");
}
