//! bge-small-en-v1.5 under ONNX Runtime on the real graph, tokenizer and library (`scripts/install-bge.sh`, run by
//! `make models`). It fails (never skips) when a file is missing: CI installs them first.

use std::sync::OnceLock;

use attest_embed::{
    build_embedder, cosine_similarity, Embedder, EmbedderConfig, LocalEmbedderConfig, LocalModel,
    OnnxEmbedder, BGE_QUERY_PREFIX, BGE_SMALL_ID,
};

/// The bge models by `model`, each loaded once for the whole test binary.
pub(crate) fn loaded(model: LocalModel) -> &'static OnnxEmbedder {
    static BGE: OnceLock<OnnxEmbedder> = OnceLock::new();
    static TUNED: OnceLock<OnnxEmbedder> = OnceLock::new();
    let cell = match model {
        LocalModel::BgeSmall => &BGE,
        LocalModel::BgeSmallQa => &TUNED,
        LocalModel::MiniLm => panic!("not a bge model"),
    };
    cell.get_or_init(|| {
        let config = LocalEmbedderConfig {
            model,
            ..LocalEmbedderConfig::default()
        };
        OnnxEmbedder::from_config(&config)
            .unwrap_or_else(|e| panic!("{} (run `make models`): {e}", model.id()))
    })
}

fn bge() -> &'static OnnxEmbedder {
    loaded(LocalModel::BgeSmall)
}

/// With its query instruction, `e` ranks the passage that answers above a sibling product's and an unrelated one.
pub(crate) fn assert_finds_the_answering_passage(e: &OnnxEmbedder) {
    let passages = [
        "The Drift Max has a battery life of 10 hours.",
        "The Drift Mini takes 2 hours to charge.",
        "Our office in Lyon is closed on public holidays.",
    ];
    let vectors = e.embed(&passages).unwrap();
    let query = format!(
        "{}How long does the Drift Mini take to charge?",
        e.query_prefix()
    );
    let q = &e.embed(&[query.as_str()]).unwrap()[0];
    let scores: Vec<f32> = vectors.iter().map(|p| cosine_similarity(q, p)).collect();
    assert!(scores[1] > scores[0] && scores[1] > scores[2], "{scores:?}");
}

#[test]
fn bge_gives_its_authors_vectors() {
    // The first components of the [CLS] vector, normalised, as onnxruntime 1.32 in Python computes them from the
    // same graph and tokenizer (scripts/embedders/compare.py's pooling).
    let v = &bge()
        .embed(&["The Drift Mini takes 2 hours to charge."])
        .unwrap()[0];
    assert_eq!(v.len(), 384);
    let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4, "{norm}");
    for (got, want) in v.iter().zip([-0.06054f32, 0.02563, 0.02157, -0.0175]) {
        assert!((got - want).abs() < 2e-3, "{:?}", &v[..4]);
    }
}

#[test]
fn a_text_gets_the_same_vector_alone_and_among_others() {
    let texts = [
        "The Drift Mini takes 2 hours to charge.",
        "Requests for the bereavement leave must be submitted within 60 days of the event, with a copy of the notice.",
        "Paging escalates after 15 minutes.",
    ];
    let together = bge().embed(&texts).unwrap();
    for (text, v) in texts.iter().zip(&together) {
        let alone = &bge().embed(&[text]).unwrap()[0];
        assert!(cosine_similarity(v, alone) > 0.99999, "{text}");
    }
}

#[test]
fn the_query_instruction_finds_the_answering_passage() {
    let e = bge();
    assert_eq!((e.id(), e.query_prefix()), (BGE_SMALL_ID, BGE_QUERY_PREFIX));
    assert_finds_the_answering_passage(e);
}

#[test]
fn the_configuration_chooses_bge_and_the_collection_records_it() {
    let config: EmbedderConfig =
        serde_json::from_str(r#"{"local": {"model": "bge-small-en-v1.5"}}"#).unwrap();
    let embedder = build_embedder(&config).expect("bge from configuration");
    assert_eq!(embedder.id(), BGE_SMALL_ID);
    assert_eq!(embedder.dimension(), 384);
    assert_eq!(embedder.query_prefix(), BGE_QUERY_PREFIX);
    assert_eq!(
        build_embedder(&EmbedderConfig::default()).unwrap().id(),
        BGE_SMALL_ID,
        "bge is the default"
    );
    let minilm: EmbedderConfig =
        serde_json::from_str(r#"{"local": {"model": "all-minilm-l6-v2"}}"#).unwrap();
    let minilm = build_embedder(&minilm).unwrap();
    assert_eq!(
        (minilm.id(), minilm.query_prefix()),
        ("all-minilm-l6-v2", "")
    );
}
