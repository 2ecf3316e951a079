//! One embedder per collection, through the real binary (`attest dev`, issue 70): a collection records the model
//! that embedded it; `attest dev` started with another model (bge-small-en-v1.5) refuses to embed text for it —
//! searches and ingests alike, naming both models — while a collection it creates records bge, is searched with
//! bge's query instruction and finds its documents. Searches bringing their own vectors are not refused.

use crate::common;

use common::{call, start_with_env, value_of, Logs};
use serde_json::{json, Value};

/// `attest dev` over `data` with `model` as its local embedder.
fn dev(data: &std::path::Path, model: &str) -> (common::Proc, String) {
    let (proc, line) = start_with_env(
        &["dev", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"],
        Some(data),
        Logs::Quiet,
        &[("ATTEST__EMBEDDER__LOCAL__MODEL", model)],
    );
    (proc, value_of(&line, "http="))
}

fn docs() -> Value {
    json!({"documents": [
        {"id": "mini", "title": "Drift Mini", "text": "The Drift Mini takes 2 hours to charge from empty."},
        {"id": "lyon", "title": "Offices", "text": "Our office in Lyon is closed on public holidays."}
    ]})
}

fn search(url: &str, collection: &str, lanes: Value) -> (u16, Value) {
    call(
        "POST",
        &format!("{url}/v1/collections/{collection}/search"),
        None,
        Some(
            &json!({"query": "How long does the Drift Mini take to charge?", "k": 2, "lanes": lanes}),
        ),
    )
}

#[test]
fn a_collection_is_embedded_by_one_model_and_another_is_refused_by_name() {
    let data = tempfile::tempdir().unwrap();
    {
        let (mut proc, url) = dev(data.path(), "all-minilm-l6-v2");
        let (status, body) = call(
            "POST",
            &format!("{url}/v1/collections"),
            None,
            Some(&json!({"name": "old"})),
        );
        assert_eq!(status, 201, "{body}");
        let (status, body) = call(
            "POST",
            &format!("{url}/v1/collections/old/documents"),
            None,
            Some(&docs()),
        );
        assert_eq!(status, 200, "{body}");
        proc.terminate();
    }

    let (_proc, url) = dev(data.path(), "bge-small-en-v1.5");
    let (status, old) = call("GET", &format!("{url}/v1/collections/old"), None, None);
    assert_eq!(
        (status, old["embedder"].as_str()),
        (200, Some("all-minilm-l6-v2")),
        "{old}"
    );

    // Text this router would embed with bge, for vectors MiniLM made: refused, naming both.
    for (status, body) in [
        search(&url, "old", json!(["dense"])),
        call(
            "POST",
            &format!("{url}/v1/collections/old/documents"),
            None,
            Some(&docs()),
        ),
    ] {
        let text = body.to_string();
        assert_eq!(status, 400, "{body}");
        assert!(
            text.contains("FAILED_PRECONDITION")
                && text.contains("all-minilm-l6-v2")
                && text.contains("bge-small-en-v1.5"),
            "{text}"
        );
    }
    // BM25 alone embeds nothing: still served.
    let (status, body) = search(&url, "old", json!(["bm25"]));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["hits"][0]["doc_id"], "mini", "{body}");

    // A new collection records bge and is searched with it.
    let (status, body) = call(
        "POST",
        &format!("{url}/v1/collections"),
        None,
        Some(&json!({"name": "new"})),
    );
    assert_eq!(status, 201, "{body}");
    let (_, new) = call("GET", &format!("{url}/v1/collections/new"), None, None);
    assert_eq!(new["embedder"], "bge-small-en-v1.5", "{new}");
    let (status, body) = call(
        "POST",
        &format!("{url}/v1/collections/new/documents"),
        None,
        Some(&docs()),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = search(&url, "new", json!(["dense"]));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["hits"][0]["doc_id"], "mini", "{body}");
}
