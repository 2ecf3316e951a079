//! `attest ask`: streams an answer over Server-Sent Events (claims as they come), then its citations, the
//! verification table (each claim's verdict: supported, partial or unsupported, kept or dropped) with its
//! one-line summary, or why it abstained; an out-of-corpus answer is printed with its disclaimer and no
//! citations.
//!
//! A conversation: every `ask` writes its question and answer to a conversation file (`--conversation`, default
//! `$XDG_STATE_HOME/attest/conversation.json`); `ask --follow-up` sends the turns in it as `history`, so "When
//! was he born?" after "Who was Nikola Tesla?" is asked about Tesla. An `ask` without `--follow-up` starts a new
//! conversation.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use attest_answer::verdict::VerdictCounts;

use crate::cli::AskArgs;
use crate::commands::{call, client, server_url, strings, unreachable};

/// The conversation file: the collection it is about and its turns, oldest first.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Conversation {
    collection: String,
    history: Vec<Value>,
}

/// Where the conversation is kept when `--conversation` is not given.
fn default_conversation_file() -> PathBuf {
    let state = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(std::env::temp_dir);
    state.join("attest").join("conversation.json")
}

/// The earlier turns a `--follow-up` continues: an error when there is no conversation to follow, or it was
/// about another collection.
fn earlier_turns(path: &Path, collection: &str) -> anyhow::Result<Vec<Value>> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "no conversation to follow up in {} (ask a question without --follow-up first)",
            path.display()
        )
    })?;
    let conversation: Conversation = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a conversation file", path.display()))?;
    if conversation.collection != collection {
        bail!(
            "the conversation in {} is about collection `{}`, not `{collection}`: ask without --follow-up to start one",
            path.display(),
            conversation.collection
        );
    }
    Ok(conversation.history)
}

/// Writes the conversation with this turn added (atomically: a crash leaves the old file or the new one).
fn remember(
    path: &Path,
    collection: &str,
    mut history: Vec<Value>,
    question: &str,
    out: &Value,
) -> anyhow::Result<()> {
    let reply = match out["status"].as_str() {
        Some("answered") => out["answer"].as_str().unwrap_or("").to_string(),
        _ => format!(
            "(no answer: {})",
            out["reason"].as_str().unwrap_or("abstained")
        ),
    };
    history.push(json!({"role": "user", "content": question}));
    history.push(json!({"role": "assistant", "content": reply}));
    let conversation = Conversation {
        collection: collection.to_string(),
        history,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(&conversation)?)
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

pub async fn ask(server: &str, args: AskArgs) -> anyhow::Result<()> {
    let server = &server_url(server)?;
    let url = format!("{server}/v1/collections/{}/ask", args.collection);
    let file = args
        .conversation
        .clone()
        .unwrap_or_else(default_conversation_file);
    let history = if args.follow_up {
        earlier_turns(&file, &args.collection)?
    } else {
        Vec::new()
    };
    let http = client()?;
    let body = json!({"question": args.question, "history": history, "stream": !args.json});
    let out = if args.json {
        let out = call(http.post(&url).json(&body)).await?;
        println!("{out}");
        out
    } else {
        let out = stream(&http, &url, &body).await?;
        print_result(&out);
        out
    };
    remember(&file, &args.collection, history, &args.question, &out)
}

/// Prints the claims as their `delta` events arrive; returns the `done` event's response.
async fn stream(http: &reqwest::Client, url: &str, body: &Value) -> anyhow::Result<Value> {
    let mut resp = http
        .post(url)
        .json(body)
        .send()
        .await
        .with_context(|| unreachable(url))?;
    if !resp.status().is_success() {
        let status = resp.status();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        bail!(
            "{status}: {}",
            body["error"]["message"].as_str().unwrap_or("no message")
        );
    }
    let mut buffer = String::new();
    let mut done: Option<Value> = None;
    while let Some(chunk) = resp.chunk().await? {
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            let name = event
                .lines()
                .find_map(|l| l.strip_prefix("event:"))
                .map(str::trim);
            let data: String = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect::<Vec<_>>()
                .join("\n");
            let value: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
            match name {
                Some("delta") => {
                    print!("{} ", with_markers(&value));
                    let _ = std::io::stdout().flush();
                }
                Some("done") => done = Some(value),
                _ => {}
            }
        }
    }
    let out = done.context("the stream ended without an answer")?;
    println!();
    Ok(out)
}

/// A claim's text with its markers before the sentence's final punctuation, as in the answer text.
fn with_markers(claim: &Value) -> String {
    let markers: String = claim["citations"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| format!(" [{n}]"))
        .collect();
    let text = claim["text"].as_str().unwrap_or("").trim_end();
    match text.char_indices().last() {
        Some((i, c)) if matches!(c, '.' | '!' | '?') => format!("{}{markers}{c}", &text[..i]),
        _ => format!("{text}{markers}"),
    }
}

/// What follows the streamed claims: the rewritten question, then the out-of-corpus answer, the abstention,
/// or the citations; the verification table; the confidence.
fn print_result(out: &Value) {
    if let Some(q) = out["rewritten_question"].as_str() {
        println!("asked as: {q}");
    }
    match out["status"].as_str() {
        Some("out_of_corpus") => {
            println!("{}", out["answer"].as_str().unwrap_or(""));
            println!("(out of corpus: general knowledge, no citations, not verified)");
            return;
        }
        Some("abstained") => {
            println!("abstained: {}", out["reason"].as_str().unwrap_or("unknown"));
            let suggestions: Vec<&str> = strings(&out["suggestions"]);
            if !suggestions.is_empty() {
                println!("did you mean: {}", suggestions.join("; "));
            }
            let near = &out["near_miss"];
            if let Some(message) = near["message"].as_str() {
                println!("found instead: {message}");
                println!(
                    "  {} ({}): \"{}\"",
                    near["source"]["title"].as_str().unwrap_or(""),
                    near["source"]["chunk_id"].as_str().unwrap_or(""),
                    near["source"]["quote"].as_str().unwrap_or("")
                );
            }
        }
        _ => {
            println!("\ncitations:");
            for c in out["citations"].as_array().into_iter().flatten() {
                println!(
                    "  [{}] {} ({}): \"{}\"",
                    c["n"],
                    c["title"].as_str().unwrap_or(""),
                    c["chunk_id"].as_str().unwrap_or(""),
                    c["quote"].as_str().unwrap_or("")
                );
            }
        }
    }
    print!("{}", verification_table(out));
    if out["status"] == "answered" {
        let mut confidence = format!(
            "confidence {:.2}",
            out["confidence"].as_f64().unwrap_or(0.0)
        );
        if out["fallback_mode"] == true {
            confidence.push_str(" (embedding service unavailable: BM25 only)");
        }
        println!("{confidence}");
    }
}

/// The claims checked (kept, then dropped) as a table, and the summary line; nothing when none was checked.
pub fn verification_table(out: &Value) -> String {
    let rows = |key: &str, kept: bool| {
        out[key]
            .as_array()
            .into_iter()
            .flatten()
            .map(move |c| (c, kept))
            .collect::<Vec<_>>()
    };
    let mut claims = rows("claims", true);
    claims.extend(rows("dropped_claims", false));
    if claims.is_empty() {
        return String::new();
    }
    let mut table = format!(
        "\n{:<12} {:>7}  {:<8} {:<8} claim\n",
        "verdict", "support", "cites", "kept"
    );
    for (c, kept) in claims {
        let cites: String = c["citations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|n| format!("[{n}]"))
            .collect();
        table.push_str(&format!(
            "{:<12} {:>7.2}  {:<8} {:<8} {}\n",
            c["verdict"].as_str().unwrap_or("unsupported"),
            c["support"].as_f64().unwrap_or(0.0),
            cites,
            if kept { "yes" } else { "dropped" },
            c["text"].as_str().unwrap_or("")
        ));
    }
    let counts: VerdictCounts = serde_json::from_value(out["verdicts"].clone()).unwrap_or_default();
    table.push_str(&counts.summary());
    table.push('\n');
    table
}
