//! Tests of the LLM judge against a loopback OpenAI-compatible server (a stand-in for the external endpoint)
//! that replays scripted replies and records the requests it was sent.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use serde_json::{json, Value};

use super::*;

/// One scripted reply of the loopback server.
enum Reply {
    /// 200 with this text as the assistant's message.
    Say(&'static str),
    /// An HTTP error status.
    Status(u16),
}

/// Serves exactly `replies.len()` requests, one per connection, then stops. Returns the base URL, the
/// request bodies seen and the server thread.
fn serve(replies: Vec<Reply>) -> (String, Arc<Mutex<Vec<Value>>>, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let handle = std::thread::spawn(move || {
        for reply in replies {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if line.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = line.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().unwrap();
                    }
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            record
                .lock()
                .unwrap()
                .push(serde_json::from_slice(&body).unwrap());
            let (status, payload) = match reply {
                // Server-Sent Events, as a streamed chat completion: the text in two deltas.
                Reply::Say(text) => {
                    let half = text.len() / 2;
                    let event = |delta: &str| {
                        format!(
                            "data: {}\n\n",
                            json!({"choices": [{"delta": {"content": delta}}]})
                        )
                    };
                    (
                        200,
                        format!(
                            "{}{}data: [DONE]\n\n",
                            event(&text[..half]),
                            event(&text[half..])
                        ),
                    )
                }
                Reply::Status(code) => (code, "{\"error\": \"scripted failure\"}".to_string()),
            };
            let mut stream = stream;
            write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{payload}",
                payload.len()
            )
            .unwrap();
        }
    });
    (url, seen, handle)
}

const QUESTION: &str = "Where was Marie Curie born?";
const PASSAGE: &str =
    "Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in Physics in 1903.";
const GOOD: &str = "Marie Curie was born in Warsaw.";
const BAD: &str = "Marie Curie was born in Lyon in 1871.";

#[test]
fn scores_are_the_first_number_in_range() {
    assert_eq!(parse_score("0.9"), Some(0.9));
    assert_eq!(parse_score("Score: 0.2"), Some(0.2));
    assert_eq!(parse_score("1."), Some(1.0));
    assert_eq!(parse_score("On a scale up to 10 I say 0.75."), Some(0.75));
    assert_eq!(parse_score("0"), Some(0.0));
    assert_eq!(parse_score("yes, it does"), None);
    assert_eq!(parse_score("7 out of 10"), None);
    assert_eq!(parse_score(""), None);
}

#[test]
fn the_llm_judge_scores_and_falls_back_to_the_learned_verifier() {
    let (url, seen, server) = serve(vec![
        Reply::Say("0.9"),
        Reply::Say("Score: 0.2"),
        Reply::Say("I think the passage is about physics."),
        Reply::Status(500),
    ]);
    let judge = LlmJudgeVerifier::new(
        OpenAiChatConfig {
            url,
            model: "judge".into(),
            timeout_ms: 5_000,
            ..Default::default()
        },
        16,
    );
    let learned = LearnedVerifier::bundled();

    assert_eq!(judge.support(QUESTION, GOOD, PASSAGE), 0.9);
    assert_eq!(judge.support(QUESTION, BAD, PASSAGE), 0.2);
    // Garbage and a failing endpoint: the learned verifier's own scores, which still tell the pair apart.
    let garbage = judge.support(QUESTION, GOOD, PASSAGE);
    assert_eq!(garbage, learned.support(QUESTION, GOOD, PASSAGE));
    let failed = judge.support(QUESTION, BAD, PASSAGE);
    assert_eq!(failed, learned.support(QUESTION, BAD, PASSAGE));
    assert!(garbage > failed + 0.2, "{garbage} vs {failed}");
    server.join().unwrap();

    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 4);
    for (request, claim) in seen.iter().zip([GOOD, BAD, GOOD, BAD]) {
        assert_eq!(request["temperature"], 0);
        assert_eq!(request["stream"], true);
        assert_eq!(request["model"], "judge");
        assert_eq!(request["max_tokens"], 16);
        assert_eq!(request["messages"][0]["role"], "system");
        assert_eq!(request["messages"][0]["content"], JUDGE_SYSTEM_PROMPT);
        let user = request["messages"][1]["content"].as_str().unwrap();
        assert!(user.contains(PASSAGE) && user.contains(claim), "{user}");
    }
}

#[test]
fn an_unreachable_judge_is_an_error_and_support_falls_back() {
    // A port that was just free: nothing listens there.
    let url = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let judge = LlmJudgeVerifier::new(
        OpenAiChatConfig {
            url,
            timeout_ms: 2_000,
            ..Default::default()
        },
        16,
    );
    assert!(matches!(
        judge.judge(QUESTION, GOOD, PASSAGE),
        Err(JudgeError::Unavailable(_))
    ));
    assert_eq!(
        judge.support(QUESTION, GOOD, PASSAGE),
        LearnedVerifier::bundled().support(QUESTION, GOOD, PASSAGE)
    );
}

#[test]
fn the_config_picks_the_back_end() {
    let parsed: VerifierConfig =
        serde_json::from_str(r#"{"backend": "llm", "llm": {"url": "http://judge:8000"}}"#).unwrap();
    assert_eq!(parsed.backend, VerifierBackend::Llm);
    assert_eq!(parsed.llm.url, "http://judge:8000");
    assert_eq!(parsed.reply_tokens, 16);
    assert_eq!(VerifierConfig::default().backend, VerifierBackend::Reader);
    assert!(serde_json::from_str::<VerifierConfig>(r#"{"backend": "oracle"}"#).is_err());
}

#[test]
fn a_missing_local_judge_falls_back() {
    let judge = GgufJudgeVerifier::new(
        GgufModel {
            path: "/nonexistent/model.gguf".into(),
            dequantize: true,
            context_tokens: 384,
        },
        16,
    );
    match judge.judge(QUESTION, GOOD, PASSAGE) {
        Err(JudgeError::Unavailable(message)) => {
            assert!(message.contains("install-llm.sh"), "{message}")
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert_eq!(
        judge.support(QUESTION, BAD, PASSAGE),
        LearnedVerifier::bundled().support(QUESTION, BAD, PASSAGE)
    );
}

#[test]
fn verifier_from_config_builds_the_named_back_end() {
    let learned = LearnedVerifier::bundled().support(QUESTION, BAD, PASSAGE);
    let reader_config = crate::reader::ReaderConfig {
        backend: crate::reader::ReaderBackend::Model,
        ..Default::default()
    };
    let mut verifier = VerifierConfig::default();
    let gguf = GgufModel {
        path: attest_models::gguf::default_llm_path(),
        dequantize: true,
        context_tokens: 384,
    };
    // `answer.claim_support_threshold`'s default.
    let claim_support_threshold = 0.5;
    // The reader's support head (blended with the lexical model) reads the claim against the passage.
    let loaded = crate::reader::Reader::from_config(&reader_config).unwrap();
    let reader = crate::verifier::verifier_from_config(&verifier, &gguf, loaded.as_ref());
    assert!(
        reader.support(QUESTION, BAD, PASSAGE) < claim_support_threshold,
        "the reader supports {BAD:?}"
    );
    verifier.backend = VerifierBackend::Learned;
    assert_eq!(
        crate::verifier::verifier_from_config(&verifier, &gguf, loaded.as_ref())
            .support(QUESTION, BAD, PASSAGE),
        learned
    );
    // `llm` without a URL: the learned verifier, not a judge that fails every call.
    verifier.backend = VerifierBackend::Llm;
    assert_eq!(
        crate::verifier::verifier_from_config(&verifier, &gguf, loaded.as_ref())
            .support(QUESTION, BAD, PASSAGE),
        learned
    );
    let (url, seen, server) = serve(vec![Reply::Say("0.35")]);
    verifier.llm.url = url;
    let judge = crate::verifier::verifier_from_config(&verifier, &gguf, loaded.as_ref());
    assert_eq!(judge.support(QUESTION, BAD, PASSAGE), 0.35);
    server.join().unwrap();
    assert_eq!(seen.lock().unwrap().len(), 1);
}
