//! The ONNX Runtime back end against the candle one, on the real weights, graph and library installed by
//! `make models` (`scripts/install-model.sh`, which runs `scripts/install-onnxruntime.sh`). They fail (never skip)
//! when a file is missing: CI installs them first.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use attest_embed::{
    build_embedder, cosine_similarity, EmbedError, Embedder, EmbedderConfig, LocalEmbedderConfig,
    LocalRuntime, MiniLmEmbedder, OnnxEmbedder, ONNX_MODEL_FILE,
};

/// MiniLM's configuration (bge is the default model).
fn minilm_config() -> LocalEmbedderConfig {
    LocalEmbedderConfig {
        model: attest_embed::LocalModel::MiniLm,
        ..LocalEmbedderConfig::default()
    }
}

/// One of each, shared by every test of this binary (loading hashes 90 MB per runtime).
fn both() -> &'static (Arc<OnnxEmbedder>, Arc<MiniLmEmbedder>) {
    static BOTH: OnceLock<(Arc<OnnxEmbedder>, Arc<MiniLmEmbedder>)> = OnceLock::new();
    BOTH.get_or_init(|| {
        let config = minilm_config();
        let onnx = OnnxEmbedder::from_config(&config)
            .unwrap_or_else(|e| panic!("ONNX Runtime back end (run `make models`): {e}"));
        let candle = MiniLmEmbedder::from_config(&config).expect("candle back end");
        (Arc::new(onnx), Arc::new(candle))
    })
}

fn corpus(n: usize) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/squad-sample/corpus.jsonl");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .take(n)
        .map(|line| {
            let doc: serde_json::Value = serde_json::from_str(line).expect("json line");
            doc["text"].as_str().expect("text").to_string()
        })
        .collect()
}

#[test]
fn onnx_gives_candles_vectors() {
    let (onnx, candle) = both();
    assert_eq!(
        (onnx.id(), onnx.dimension()),
        (candle.id(), candle.dimension())
    );
    let mut texts = corpus(24);
    // Short, empty, non-ASCII and over-long inputs (the last is truncated to 256 tokens by both).
    texts.extend(["hi", "", "ünïcödé ✓ 東京 — «quotes»", &"word ".repeat(600)].map(String::from));
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let a = onnx.embed(&refs).unwrap();
    let b = candle.embed(&refs).unwrap();
    assert_eq!(a.len(), refs.len());
    for ((text, x), y) in refs.iter().zip(&a).zip(&b) {
        let cos = cosine_similarity(x, y);
        assert!(cos > 0.9999, "{text:.40?}: cosine {cos}");
        let norm = x.iter().map(|v| v * v).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{text:.40?}: norm {norm}");
    }
    assert_eq!(
        onnx.count_tokens("grounded retrieval"),
        candle.count_tokens("grounded retrieval")
    );
}

#[test]
fn a_vector_does_not_depend_on_its_batch_or_on_concurrent_calls() {
    let (onnx, _) = both();
    let texts = corpus(12);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let together = onnx.embed(&refs).unwrap();
    // Alone (no padding) and from four threads at once (sessions shared between calls).
    let alone: Vec<Vec<f32>> = refs
        .iter()
        .map(|t| onnx.embed(&[t]).unwrap().remove(0))
        .collect();
    let concurrent: Vec<Vec<Vec<f32>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| s.spawn(|| onnx.embed(&refs).unwrap()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, v) in together.iter().enumerate() {
        assert!(cosine_similarity(v, &alone[i]) > 0.99999, "text {i} alone");
        for run in &concurrent {
            assert!(
                cosine_similarity(v, &run[i]) > 0.99999,
                "text {i} concurrent"
            );
        }
    }
}

#[test]
fn the_default_configuration_builds_the_onnx_runtime() {
    let mut config = EmbedderConfig::default();
    assert_eq!(config.local.runtime, LocalRuntime::Onnx);
    config.local.model = attest_embed::LocalModel::MiniLm;
    let embedder = build_embedder(&config).expect("default embedder");
    let (onnx, _) = both();
    let text = "Which NFL team represented the AFC at Super Bowl 50?";
    let cos = cosine_similarity(
        &embedder.embed(&[text]).unwrap()[0],
        &onnx.embed(&[text]).unwrap()[0],
    );
    assert!(cos > 0.99999, "{cos}");
}

#[test]
fn a_tampered_graph_is_refused_by_its_checksum() {
    let installed = minilm_config().dir();
    let dir = tempfile::tempdir().unwrap();
    for f in ["config.json", "tokenizer.json"] {
        std::fs::copy(installed.join(f), dir.path().join(f)).unwrap();
    }
    std::fs::write(dir.path().join(ONNX_MODEL_FILE), b"not a graph").unwrap();
    let config = LocalEmbedderConfig {
        model_dir: Some(dir.path().to_path_buf()),
        ..minilm_config()
    };
    let err = OnnxEmbedder::from_config(&config).unwrap_err();
    assert!(matches!(err, EmbedError::Checksum { .. }), "{err}");
}
