//! A scripted OpenAI-compatible chat server on loopback (a stand-in for an LLM endpoint, which is outside the
//! system): it answers each request by the kind its fixed system prompt says it is (generation, history
//! rewrite, out-of-corpus answer) with the next reply scripted for that kind, streamed as Server-Sent Events, and
//! keeps every request it was sent. A kind with no reply left answers 500, as a failing endpoint would.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::Value;

/// What a request is for, read from its system prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Generate,
    Rewrite,
    OutOfCorpus,
}

impl Kind {
    fn of(request: &Value) -> Option<Kind> {
        let system = request["messages"][0]["content"].as_str()?;
        if system == attest_answer::generate::SYSTEM_PROMPT {
            Some(Kind::Generate)
        } else if system == attest_answer::conversation::REWRITE_PROMPT {
            Some(Kind::Rewrite)
        } else if system == attest_answer::out_of_corpus::PROMPT {
            Some(Kind::OutOfCorpus)
        } else {
            None
        }
    }
}

/// The replies still to give, by kind.
type Replies = HashMap<Kind, VecDeque<String>>;
/// Every request received, with its kind (None: a system prompt this server does not know).
type Received = Vec<(Option<Kind>, Value)>;

#[derive(Clone, Default)]
pub struct ScriptedLlm {
    replies: Arc<Mutex<Replies>>,
    requests: Arc<Mutex<Received>>,
}

impl ScriptedLlm {
    /// Serves on `127.0.0.1:0` from a runtime of its own (so blocking callers and other runtimes can use it);
    /// returns its base URL.
    pub fn start(&self) -> String {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let addr = std_listener.local_addr().unwrap();
        let app = axum::Router::new()
            .route("/v1/chat/completions", axum::routing::post(chat))
            .with_state(self.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
                axum::serve(listener, app).await.unwrap();
            });
        });
        format!("http://{addr}")
    }

    /// The next reply to a request of `kind`.
    pub fn say(&self, kind: Kind, text: &str) {
        self.replies
            .lock()
            .unwrap()
            .entry(kind)
            .or_default()
            .push_back(text.to_string());
    }

    /// Every reply to requests of `kind`, for as long as the server runs.
    pub fn always(&self, kind: Kind, text: &str, times: usize) {
        for _ in 0..times {
            self.say(kind, text);
        }
    }

    /// The requests of `kind` received so far.
    pub fn requests(&self, kind: Kind) -> Vec<Value> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, _)| *k == Some(kind))
            .map(|(_, r)| r.clone())
            .collect()
    }
}

async fn chat(State(llm): State<ScriptedLlm>, Json(body): Json<Value>) -> Response {
    let kind = Kind::of(&body);
    llm.requests.lock().unwrap().push((kind, body));
    let reply = kind.and_then(|k| llm.replies.lock().unwrap().get_mut(&k)?.pop_front());
    let Some(text) = reply else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "no scripted reply").into_response();
    };
    streamed(&text)
}

/// `text` as an OpenAI-compatible streamed reply: three characters per chunk, so markers and ids arrive split
/// across chunks.
pub fn streamed(text: &str) -> Response {
    let chars: Vec<char> = text.chars().collect();
    let mut sse = String::new();
    for piece in chars.chunks(3) {
        let delta: String = piece.iter().collect();
        let chunk = serde_json::json!({"choices": [{"delta": {"content": delta}}]});
        sse.push_str(&format!("data: {chunk}\n\n"));
    }
    sse.push_str("data: [DONE]\n\n");
    ([("content-type", "text/event-stream")], sse).into_response()
}
