//! Tests against the real all-MiniLM-L6-v2 weights installed by `scripts/install-model.sh`.
//! They fail (never skip) when the model is missing: CI installs it first.

use std::sync::{Arc, OnceLock};

use attest_embed::{
    cosine_similarity, default_model_dir, CachedEmbedder, EmbedError, Embedder,
    LocalEmbedderConfig, MiniLmEmbedder, MODEL_FILES,
};

/// MiniLM's configuration (bge is the default model).
fn minilm_config() -> LocalEmbedderConfig {
    LocalEmbedderConfig {
        model: attest_embed::LocalModel::MiniLm,
        ..LocalEmbedderConfig::default()
    }
}

/// One embedder shared by every test of this binary (loading hashes 90 MB).
fn embedder() -> Arc<MiniLmEmbedder> {
    static EMBEDDER: OnceLock<Arc<MiniLmEmbedder>> = OnceLock::new();
    EMBEDDER
        .get_or_init(|| {
            let dir = default_model_dir();
            let model = MiniLmEmbedder::load(&dir, &minilm_config()).unwrap_or_else(|e| {
                panic!(
                    "cannot load the model from {} (run scripts/install-model.sh): {e}",
                    dir.display()
                )
            });
            Arc::new(model)
        })
        .clone()
}

fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum::<f32>().sqrt()
}

#[test]
fn dimension_and_id() {
    let e = embedder();
    assert_eq!(e.dimension(), 384);
    assert_eq!(e.id(), "all-minilm-l6-v2");
    let v = e.embed(&["hello"]).unwrap();
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].len(), 384);
}

#[test]
fn vectors_are_unit_length() {
    let e = embedder();
    let texts = [
        "hello",
        "",
        "A much longer sentence about grounded retrieval, citations and answer verification.",
        "ünïcödé ✓ 東京",
    ];
    for (text, v) in texts.iter().zip(e.embed(&texts).unwrap()) {
        assert!((norm(&v) - 1.0).abs() < 1e-4, "{text:?}: norm {}", norm(&v));
        assert!(v.iter().all(|x| x.is_finite()), "{text:?}");
    }
}

#[test]
fn similar_sentences_are_closer() {
    let e = embedder();
    let v = e
        .embed(&[
            "A cat sits on the mat",
            "A kitten is sitting on a rug",
            "Stock markets fell sharply today",
        ])
        .unwrap();
    let related = cosine_similarity(&v[0], &v[1]);
    let unrelated = cosine_similarity(&v[0], &v[2]);
    assert!(
        related > unrelated + 0.2,
        "related {related}, unrelated {unrelated}"
    );
}

#[test]
fn batch_matches_single() {
    let e = embedder();
    let short = "A cat sits on the mat";
    let long_a = "Retrieval-augmented generation grounds the answers of a language model in \
                  passages fetched from an index, and every claim should cite its source.";
    let long_b = "Sharded vector indexes split a collection across machines; a router fans a \
                  query out to every shard and merges the partial top-k lists by score, \
                  which is exact as long as each shard returns its own top k.";
    let alone = e.embed(&[short]).unwrap().remove(0);
    let batched = e.embed(&[long_a, short, long_b]).unwrap();
    let in_batch = &batched[1];
    let cos = cosine_similarity(&alone, in_batch);
    assert!(cos > 0.999, "cosine {cos}");
    // The longer texts too, alone vs batched.
    let long_alone = e.embed(&[long_b]).unwrap().remove(0);
    assert!(cosine_similarity(&long_alone, &batched[2]) > 0.999);
}

#[test]
fn batches_and_threads_change_no_vector_and_keep_the_order() {
    let dir = default_model_dir();
    let load = |batch_size, threads| {
        MiniLmEmbedder::load(
            &dir,
            &LocalEmbedderConfig {
                batch_size,
                threads,
                ..minilm_config()
            },
        )
        .unwrap()
    };
    let texts: Vec<String> = (0..8)
        .map(|i| format!("sentence number {i} {}", "word ".repeat(i * 3)))
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    // One batch on one thread (the settings before), batches of 3 on one thread, batches of 3 over two threads.
    let one_batch = load(32, 1).embed(&refs).unwrap();
    for (batch, threads) in [(3, 1), (3, 2)] {
        let got = load(batch, threads).embed(&refs).unwrap();
        assert_eq!(got.len(), 8);
        for (i, (x, y)) in one_batch.iter().zip(&got).enumerate() {
            assert!(
                cosine_similarity(x, y) > 0.999,
                "text {i}, batch {batch} on {threads} threads"
            );
        }
    }
}

#[test]
fn empty_input_gives_no_vectors() {
    assert!(embedder().embed(&[]).unwrap().is_empty());
}

#[test]
fn long_text_is_truncated_not_rejected() {
    let e = embedder();
    let long = "token ".repeat(2000);
    assert_eq!(e.count_tokens(&long), 2000);
    let v = e.embed(&[long.as_str()]).unwrap();
    assert!((norm(&v[0]) - 1.0).abs() < 1e-4);
}

#[test]
fn counts_tokens_without_special_tokens() {
    let e = embedder();
    assert_eq!(e.count_tokens("hello world"), 2);
    assert_eq!(e.count_tokens(""), 0);
    // WordPiece splits rare words into several pieces.
    assert!(e.count_tokens("antidisestablishmentarianism") > 1);
}

#[test]
fn missing_model_dir_says_how_to_install() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere");
    let err = MiniLmEmbedder::load(&missing, &minilm_config()).unwrap_err();
    assert!(matches!(err, EmbedError::ModelMissing { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("install-model.sh"), "{message}");
    assert!(message.contains("nowhere"), "{message}");
}

#[test]
fn corrupted_file_fails_checksum() {
    let src = default_model_dir();
    let dir = tempfile::tempdir().unwrap();
    for file in MODEL_FILES {
        std::fs::copy(src.join(file), dir.path().join(file)).unwrap();
    }
    let config_path = dir.path().join("config.json");
    let original = std::fs::read_to_string(&config_path).unwrap();
    let altered = original.replace("\"num_hidden_layers\": 6", "\"num_hidden_layers\": 5");
    assert_ne!(
        original, altered,
        "config.json should mention num_hidden_layers"
    );
    std::fs::write(&config_path, altered).unwrap();
    let err = MiniLmEmbedder::load(dir.path(), &minilm_config()).unwrap_err();
    match &err {
        EmbedError::Checksum {
            file,
            expected,
            actual,
        } => {
            assert!(file.ends_with("config.json"), "{}", file.display());
            assert_ne!(expected, actual);
        }
        other => panic!("expected Checksum, got {other:?}"),
    }
}

#[test]
fn cache_returns_identical_vectors_and_counts_hits() {
    let cached = CachedEmbedder::new(embedder());
    let first = cached.embed(&["what is grounded retrieval?"]).unwrap();
    let second = cached.embed(&["what is grounded retrieval?"]).unwrap();
    assert_eq!(first, second);
    assert_eq!(cached.hits(), 1);
    assert_eq!(cached.misses(), 1);
    assert_eq!(cached.dimension(), 384);
}

#[test]
fn shared_across_threads() {
    let e = embedder();
    let expected = e.embed(&["concurrency check"]).unwrap().remove(0);
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let e = Arc::clone(&e);
            std::thread::spawn(move || e.embed(&["concurrency check"]).unwrap().remove(0))
        })
        .collect();
    for handle in handles {
        let v = handle.join().unwrap();
        assert!(cosine_similarity(&v, &expected) > 0.9999);
    }
}

/// The first components of sentence-transformers' embedding of this sentence (the
/// all-MiniLM-L6-v2 reference output): tokenization, BERT, mean pooling and normalisation
/// all have to match the Python pipeline for these to agree.
#[test]
fn matches_sentence_transformers_reference() {
    const REFERENCE: [f32; 8] = [
        0.067_656_9,
        0.063_496_0,
        0.048_713_1,
        0.079_305_0,
        0.037_448_1,
        0.002_652_8,
        0.039_374_9,
        -0.007_098_4,
    ];
    let v = embedder()
        .embed(&["This is an example sentence"])
        .unwrap()
        .remove(0);
    for (i, (got, want)) in v.iter().zip(REFERENCE).enumerate() {
        assert!((got - want).abs() < 1e-4, "component {i}: {got} vs {want}");
    }
}
