//! The remote reranker against a loopback HTTP server that checks each request and replies from a script.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::*;

/// One scripted reply.
enum Reply {
    /// 200 with this JSON body.
    Json(Value),
    /// An HTTP error status.
    Status(u16),
    /// Nothing for this long, then the connection closes.
    Stall(Duration),
}

/// A request as the server saw it.
struct Seen {
    request_line: String,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Serves exactly `replies.len()` requests, one per connection, then stops.
fn serve(replies: Vec<Reply>) -> (String, mpsc::Receiver<Seen>, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let url = format!("http://{}", listener.local_addr().expect("local addr"));
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::spawn(move || {
        for reply in replies {
            let Ok((mut stream, _)) = listener.accept() else {
                return;
            };
            let mut reader = BufReader::new(stream.try_clone().expect("clone stream"));
            let mut request_line = String::new();
            reader.read_line(&mut request_line).expect("request line");
            let mut headers = Vec::new();
            let mut length = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).expect("header line");
                if line.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = line.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().expect("content length");
                    }
                    headers.push((name.trim().to_string(), value.trim().to_string()));
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).expect("body");
            let _ = tx.send(Seen {
                request_line: request_line.trim().to_string(),
                headers,
                body: serde_json::from_slice(&body).expect("a JSON body"),
            });
            let (status, payload) = match reply {
                Reply::Json(v) => (200, v.to_string()),
                Reply::Status(code) => (code, json!({"error": "scripted"}).to_string()),
                Reply::Stall(d) => {
                    std::thread::sleep(d);
                    continue;
                }
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}",
                payload.len()
            );
        }
    });
    (url, rx, handle)
}

fn hit(title: &str, text: &str) -> pb::Hit {
    pb::Hit {
        title: title.into(),
        text: text.into(),
        ..Default::default()
    }
}

fn pool() -> Vec<pb::Hit> {
    vec![
        hit("Nikola_Tesla", "Tesla moved to New York in 1884."),
        hit("", "The Amazon is a river."),
        hit("Paris", "Paris is the capital of France."),
    ]
}

fn reranker(url: &str, api: RemoteApi, timeout_ms: u64) -> RemoteReranker {
    RemoteReranker::new(RemoteRerankConfig {
        url: url.into(),
        api,
        model: "bge-reranker-base".into(),
        api_key: Some("secret".into()),
        timeout_ms,
    })
}

#[test]
fn tei_request_and_scores_in_input_order() {
    let (url, seen, server) = serve(vec![Reply::Json(
        json!([{"index": 2, "score": 0.2}, {"index": 0, "score": 0.9}, {"index": 1, "score": 0.01}]),
    )]);
    let r = reranker(&url, RemoteApi::Tei, 2_000);
    assert_eq!(r.name(), "remote");
    let scores = attest_telemetry::request_id::with_current("req-42", || {
        r.score("When did Tesla move to New York?", &pool())
    })
    .expect("scores");
    assert_eq!(scores, vec![0.9, 0.01, 0.2]);
    let req = seen.recv().expect("one request");
    assert_eq!(req.request_line, "POST /rerank HTTP/1.1");
    assert_eq!(req.header("x-request-id"), Some("req-42"));
    assert_eq!(req.header("authorization"), Some("Bearer secret"));
    assert_eq!(req.body["query"], "When did Tesla move to New York?");
    assert_eq!(req.body["raw_scores"], false);
    assert_eq!(
        req.body["texts"],
        json!([
            "Nikola Tesla\nTesla moved to New York in 1884.",
            "The Amazon is a river.",
            "Paris\nParis is the capital of France."
        ])
    );
    server.join().expect("server thread");
}

#[test]
fn cohere_request_raw_logits_go_through_the_sigmoid_and_missing_items_score_zero() {
    let (url, seen, server) = serve(vec![Reply::Json(json!({
        "results": [{"index": 1, "relevance_score": 2.0}, {"index": 0, "relevance_score": -1.0}]
    }))]);
    let r = reranker(&format!("{url}/"), RemoteApi::Cohere, 2_000);
    let scores = r.score("What is the Amazon?", &pool()).expect("scores");
    assert!((scores[0] - 1.0 / (1.0 + 1f64.exp())).abs() < 1e-12);
    assert!((scores[1] - 1.0 / (1.0 + (-2f64).exp())).abs() < 1e-12);
    assert_eq!(scores[2], 0.0);
    let req = seen.recv().expect("one request");
    assert_eq!(req.request_line, "POST /v1/rerank HTTP/1.1");
    assert_eq!(req.body["model"], "bge-reranker-base");
    assert_eq!(req.body["top_n"], 3);
    assert_eq!(req.body["documents"][1], "The Amazon is a river.");
    server.join().expect("server thread");
}

#[test]
fn failures_are_unavailable() {
    let (url, _seen, server) = serve(vec![
        Reply::Status(503),
        Reply::Json(json!({"unexpected": true})),
        Reply::Json(json!([{"index": 7, "score": 0.5}])),
        Reply::Stall(Duration::from_millis(1_500)),
    ]);
    let r = reranker(&url, RemoteApi::Tei, 300);
    for case in ["503", "not a list", "index out of range", "timeout"] {
        match r.score("q", &pool()) {
            Err(RerankError::Unavailable(why)) => assert!(!why.is_empty(), "{case}"),
            other => panic!("{case}: expected Unavailable, got {other:?}"),
        }
    }
    server.join().expect("server thread");

    // Nothing listening at all.
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://{}", l.local_addr().expect("addr"))
    };
    assert!(matches!(
        reranker(&closed, RemoteApi::Cohere, 300).score("q", &pool()),
        Err(RerankError::Unavailable(_))
    ));
}

#[test]
fn an_empty_pool_asks_nothing_and_endpoints_resolve() {
    let r = reranker("http://127.0.0.1:9", RemoteApi::Tei, 100);
    assert_eq!(r.score("q", &[]).expect("no call"), Vec::<f64>::new());
    assert_eq!(
        rerank_endpoint("http://tei:8080/", RemoteApi::Tei),
        "http://tei:8080/rerank"
    );
    assert_eq!(
        rerank_endpoint("http://x/v1/rerank", RemoteApi::Cohere),
        "http://x/v1/rerank"
    );
    assert_eq!(
        rerank_endpoint("http://x", RemoteApi::Cohere),
        "http://x/v1/rerank"
    );
}
