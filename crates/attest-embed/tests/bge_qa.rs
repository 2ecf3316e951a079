//! The fine-tuned bge-small (`attest-bge-small-qa`, issue 70) under ONNX Runtime on its committed graph and
//! tokenizer (crates/attest-models/models/bge-qa, checked against bge-qa.sha256 on load). It fails (never skips)
//! when ONNX Runtime's library is missing: CI installs it first (`make models`).

use attest_embed::{
    build_embedder, Embedder, EmbedderConfig, LocalModel, BGE_QA_ID, BGE_QUERY_PREFIX,
};

use crate::bge::{assert_finds_the_answering_passage, loaded};

fn tuned() -> &'static attest_embed::OnnxEmbedder {
    loaded(LocalModel::BgeSmallQa)
}

#[test]
fn the_committed_graph_gives_the_exported_vectors() {
    // The first components of the normalised [CLS] vector as onnxruntime 1.32 in Python computes them from the
    // committed graph and tokenizer (scripts/embedders/export_onnx.py's check, one text per pass).
    let v = &tuned()
        .embed(&["The Drift Mini takes 2 hours to charge."])
        .unwrap()[0];
    assert_eq!(v.len(), 384);
    for (got, want) in v.iter().zip([-0.05775f32, 0.01984, 0.00501, -0.01561]) {
        assert!((got - want).abs() < 2e-3, "{:?}", &v[..4]);
    }
}

#[test]
fn it_finds_the_passage_that_answers_among_siblings() {
    assert_finds_the_answering_passage(tuned());
}

#[test]
fn chosen_by_configuration_it_records_its_own_weights() {
    let config: EmbedderConfig =
        serde_json::from_str(r#"{"local": {"model": "attest-bge-small-qa"}}"#).unwrap();
    let embedder = build_embedder(&config).expect("the fine-tuned model from configuration");
    assert_eq!(embedder.id(), BGE_QA_ID);
    assert_eq!(
        (embedder.dimension(), embedder.query_prefix()),
        (384, BGE_QUERY_PREFIX)
    );
    let identity = embedder.identity();
    assert_eq!(
        (identity.pooling.as_str(), identity.dimension),
        ("cls", 384)
    );
    // Another model than bge's for a collection: same shape, other weights.
    let bge = LocalModel::BgeSmall.identity();
    assert_ne!(identity.checksum, bge.checksum);
    assert!(!identity.differences(&bge).is_empty());

    let candle: EmbedderConfig =
        serde_json::from_str(r#"{"local": {"model": "attest-bge-small-qa", "runtime": "candle"}}"#)
            .unwrap();
    let err = build_embedder(&candle)
        .err()
        .expect("candle refused")
        .to_string();
    assert!(err.contains("ONNX Runtime only"), "{err}");
}
