//! One embedder per collection, through the real binary (`attest dev`, issue 70): a collection records the whole
//! identity of the embedder that filled it (model, weights' checksum, dimension, pooling, query prefix). `attest
//! dev` started later with another model (bge-small-en-v1.5) keeps embedding that collection's queries and
//! documents with the model it records (loaded for it), while a collection it creates records bge and is searched
//! with bge's query instruction; a new collection may name either local model, and an unknown one is refused.

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

fn create(url: &str, body: Value) -> (u16, Value) {
    call("POST", &format!("{url}/v1/collections"), None, Some(&body))
}

fn ingest(url: &str, collection: &str, body: &Value) -> (u16, Value) {
    call(
        "POST",
        &format!("{url}/v1/collections/{collection}/documents"),
        None,
        Some(body),
    )
}

/// The model, pooling and weights' checksum a collection records.
fn recorded(url: &str, collection: &str) -> (String, String, String) {
    let c = common::get_ok(&format!("{url}/v1/collections/{collection}"));
    let identity = &c["embedder_identity"];
    assert_eq!(c["embedder"], identity["model"], "{c}");
    assert_eq!(identity["dimension"], 384, "{c}");
    let field = |f: &str| identity[f].as_str().unwrap_or_default().to_string();
    (field("model"), field("pooling"), field("checksum"))
}

#[test]
fn a_collection_is_embedded_by_the_model_it_records_whatever_the_router_is_configured_with() {
    let data = tempfile::tempdir().unwrap();
    let minilm_checksum;
    {
        let (mut proc, url) = dev(data.path(), "all-minilm-l6-v2");
        let (status, body) = create(&url, json!({"name": "old"}));
        assert_eq!(status, 201, "{body}");
        let (model, pooling, checksum) = recorded(&url, "old");
        assert_eq!(
            (model.as_str(), pooling.as_str()),
            ("all-minilm-l6-v2", "mean")
        );
        assert_eq!(checksum.len(), 64, "{checksum}");
        minilm_checksum = checksum;
        let (status, body) = ingest(&url, "old", &docs());
        assert_eq!(status, 200, "{body}");
        proc.terminate();
    }

    let (_proc, url) = dev(data.path(), "bge-small-en-v1.5");
    let (model, pooling, checksum) = recorded(&url, "old");
    assert_eq!(
        (model.as_str(), pooling.as_str(), checksum.as_str()),
        ("all-minilm-l6-v2", "mean", minilm_checksum.as_str())
    );
    // The collection MiniLM filled is searched and written with MiniLM, not with the configured bge.
    let (status, body) = search(&url, "old", json!(["dense"]));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["hits"][0]["doc_id"], "mini", "{body}");
    assert_eq!(body["degraded"], json!(false), "{body}");
    let max = json!({"documents": [
        {"id": "max", "title": "Drift Max", "text": "The Drift Max weighs 240 grams without its case."}
    ]});
    let (status, body) = ingest(&url, "old", &max);
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(
        "POST",
        &format!("{url}/v1/collections/old/search"),
        None,
        Some(&json!({"query": "How heavy is the Drift Max?", "k": 1, "lanes": ["dense"]})),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["hits"][0]["doc_id"], "max", "{body}");

    // A new collection records bge, with its pooling and query instruction, and is searched with it.
    let (status, body) = create(&url, json!({"name": "new"}));
    assert_eq!(status, 201, "{body}");
    let (model, pooling, _) = recorded(&url, "new");
    assert_eq!(
        (model.as_str(), pooling.as_str()),
        ("bge-small-en-v1.5", "cls")
    );
    let (_, new) = call("GET", &format!("{url}/v1/collections/new"), None, None);
    assert!(
        new["embedder_identity"]["query_prefix"]
            .as_str()
            .is_some_and(|p| p.starts_with("Represent this sentence")),
        "{new}"
    );
    let (status, body) = ingest(&url, "new", &docs());
    assert_eq!(status, 200, "{body}");
    let (status, body) = search(&url, "new", json!(["dense"]));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["hits"][0]["doc_id"], "mini", "{body}");

    // A new collection may name the other local model; an unknown model is refused by field.
    let (status, body) = create(
        &url,
        json!({"name": "named", "embedder": "all-minilm-l6-v2"}),
    );
    assert_eq!(status, 201, "{body}");
    assert_eq!(recorded(&url, "named").0, "all-minilm-l6-v2");
    for bad in ["gte-base", ""] {
        let (status, body) = create(&url, json!({"name": "bad", "embedder": bad}));
        assert_eq!(status, 400, "{bad:?}: {body}");
        assert!(body.to_string().contains("embedder"), "{body}");
    }

    // Creating again without naming a model answers the collection; naming another is a conflict.
    let (status, body) = create(&url, json!({"name": "old"}));
    assert_eq!(status, 200, "{body}");
    let (status, body) = create(
        &url,
        json!({"name": "old", "embedder": "bge-small-en-v1.5"}),
    );
    assert_eq!(status, 409, "{body}");
    assert!(body.to_string().contains("all-minilm-l6-v2"), "{body}");
}
