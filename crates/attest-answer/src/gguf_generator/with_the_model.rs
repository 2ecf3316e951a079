//! The generator's tests with the real SmolLM2-135M-Instruct GGUF file (installed by `make setup` / `scripts/install-llm.sh`).

use std::sync::Arc;

use attest_models::gguf::{default_llm_path, CitationRule, DecodeRules, LocalLlm, StopReason};

use super::*;
use crate::footnotes::{Footnotes, Passage};
use crate::generate::{GenerateError, Generator};

fn model() -> Arc<LocalLlm> {
    let path = default_llm_path();
    LocalLlm::shared(&path, true).unwrap_or_else(|e| {
        panic!("these tests need the local model: {e} (run scripts/install-llm.sh)")
    })
}

fn passage(n: usize, text: &str) -> Passage {
    Passage {
        chunk_id: format!("doc-{n}#0"),
        doc_id: format!("doc-{n}"),
        title: format!("Title {n}"),
        text: text.into(),
        score: 1.0,
        sentence_reads: None,
    }
}

#[test]
fn the_generator_sees_only_the_top_passages_within_the_budget() {
    let model = model();
    let long = "The barn owl hunts at night over open fields and meadows. ".repeat(40);
    let footnotes = Footnotes::mint(vec![
        passage(1, &long),
        passage(2, "The red fox lives at the edge of the forest."),
        passage(3, &long),
        passage(4, "The European eel migrates to the Sargasso Sea."),
    ]);
    let generator = GgufGenerator::new(GgufConfig {
        max_passages: 3,
        context_tokens: 120,
        ..Default::default()
    });
    let user = generator
        .user_message(&model, "When does the barn owl hunt?", &footnotes)
        .unwrap();
    assert!(user.contains("[1] Title 1 — The barn owl"), "{user}");
    assert!(user.contains("[2] Title 2 — The red fox lives at the edge of the forest."));
    assert!(user.contains("[3] Title 3 — The barn owl"));
    assert!(
        !user.contains("[4]") && !user.contains("Sargasso"),
        "{user}"
    );
    assert!(user.ends_with(&format!(
        "Question: When does the barn owl hunt?\n\n{ANSWER_HINT}"
    )));
    assert!(!user.contains("doc-"), "an id reached the prompt: {user}");
    // The passage texts together fit the budget; the long ones were cut, the short one kept whole.
    let texts: Vec<&str> = user
        .split("\n\n")
        .filter_map(|part| part.split_once(" — ").map(|(_, text)| text))
        .collect();
    assert_eq!(texts.len(), 3, "{user}");
    let tokens: usize = texts
        .iter()
        .map(|t| model.tokenizer().encode(t).unwrap().len())
        .sum();
    assert!((100..=120).contains(&tokens), "{tokens} tokens: {user}");
    assert!(texts[0].len() < long.len() && long.starts_with(texts[0]));
}

#[test]
fn the_generator_answers_or_falls_through_and_a_missing_model_is_unavailable() {
    let footnotes = Footnotes::mint(vec![
        passage(1, "The barn owl hunts at night over open fields."),
        passage(2, "The red fox lives at the edge of the forest."),
    ]);
    let generator = GgufGenerator::new(GgufConfig {
        enabled: true,
        max_tokens: 48,
        ..Default::default()
    });
    assert_eq!(generator.name(), "gguf");
    // Whatever a 135M model writes: text with a marker, a decline, or a failure the chain falls back from.
    match generator.generate("When does the barn owl hunt?", &footnotes) {
        Ok(crate::generate::Generated::Text(text)) => {
            assert!(text.contains("[1]") || text.contains("[2]"), "{text}")
        }
        Ok(crate::generate::Generated::Declined) => {}
        Err(GenerateError::Unavailable(why)) => assert!(why.contains("local model"), "{why}"),
    }

    let missing = GgufGenerator::new(GgufConfig {
        enabled: true,
        path: "/nonexistent/SmolLM2.gguf".into(),
        ..Default::default()
    });
    match missing.generate("When does the barn owl hunt?", &footnotes) {
        Err(GenerateError::Unavailable(why)) => assert!(why.contains("install-llm.sh"), "{why}"),
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[test]
fn the_citation_rule_ends_every_sentence_with_a_shown_passage_number() {
    let model = model();
    let footnotes = Footnotes::mint(vec![
        passage(1, "The barn owl hunts at night over open fields."),
        passage(
            2,
            "The English oak can live for more than a thousand years.",
        ),
    ]);
    let generator = GgufGenerator::new(GgufConfig::default());
    let user = generator
        .user_message(&model, "How long can the English oak live?", &footnotes)
        .unwrap();
    let rule = CitationRule {
        passages: 2,
        exempt_prefix: crate::generate::MODEL_ABSTENTION.into(),
    };
    let c = model
        .chat(
            crate::generate::SYSTEM_PROMPT,
            &user,
            48,
            &DecodeRules {
                citation: Some(rule.clone()),
                max_sentences: None,
            },
        )
        .unwrap();
    assert!(c.forced_markers >= 1, "{c:?}");
    let claims = attest_text::claims::split_claims(&c.text);
    assert!(!claims.is_empty(), "{c:?}");
    for claim in &claims {
        assert!(!claim.citations.is_empty(), "uncited {claim:?} in {c:?}");
        assert!(claim.citations.iter().all(|n| (1..=2).contains(n)), "{c:?}");
    }
    // Without the rule the same prompt gives the same words, unmarked (the model does not cite by itself).
    let plain = model
        .chat(
            crate::generate::SYSTEM_PROMPT,
            &user,
            48,
            &DecodeRules::default(),
        )
        .unwrap();
    assert_eq!(plain.forced_markers, 0);
    let first_words = |t: &str| t.split('[').next().unwrap_or_default().trim().to_string();
    assert_eq!(first_words(&plain.text), first_words(&c.text));

    // With a sentence limit, decoding stops after the first sentence and its marker.
    let one = model
        .chat(
            crate::generate::SYSTEM_PROMPT,
            &user,
            48,
            &DecodeRules {
                citation: Some(rule),
                max_sentences: Some(1),
            },
        )
        .unwrap();
    let claims = attest_text::claims::split_claims(&one.text);
    assert_eq!(claims.len(), 1, "{one:?}");
    assert!(!claims[0].citations.is_empty(), "{one:?}");
    assert!(
        matches!(one.stop, StopReason::SentenceLimit | StopReason::EndOfTurn),
        "{one:?}"
    );
}

#[test]
fn a_repeated_sentence_ends_the_turn() {
    let model = model();
    // A prompt this model answers by copying its sentence over and over (seen while measuring speed).
    let sentence =
        "The barn owl hunts at night over open fields and nests in old barns and church towers. ";
    let passage = sentence.repeat(4);
    let user = format!(
        "Passages:\n\n[1] Barn owl — {passage}\n\n[2] Barn owl — {passage}\n\nQuestion: When does the barn owl hunt?"
    );
    let c = model
        .chat(
            crate::generate::SYSTEM_PROMPT,
            &user,
            96,
            &DecodeRules::default(),
        )
        .unwrap();
    assert_eq!(c.stop, StopReason::Repetition, "{c:?}");
    assert_eq!(c.text.matches("owl hunts at night").count(), 1, "{c:?}");
    assert!(c.generated_tokens < 40, "{c:?}");
}

#[test]
fn the_chain_puts_the_local_model_before_the_composer_and_falls_back_when_it_is_missing() {
    let footnotes = Footnotes::mint(vec![passage(
        1,
        "The barn owl hunts at night over open fields.",
    )]);
    let question = "When does the barn owl hunt?";
    let mut config = crate::config::AnswerConfig::default();
    let chain = crate::generate::GeneratorChain::configured(
        &config.llm,
        &config.gguf,
        config.composition(),
    );
    assert_eq!(chain.generate(question, &footnotes).generator, "extractive");

    config.gguf.enabled = true;
    config.gguf.path = "/nonexistent/SmolLM2.gguf".into();
    let chain = crate::generate::GeneratorChain::configured(
        &config.llm,
        &config.gguf,
        config.composition(),
    );
    assert_eq!(chain.generate(question, &footnotes).generator, "extractive");

    config.gguf.path = default_llm_path();
    let chain = crate::generate::GeneratorChain::configured(
        &config.llm,
        &config.gguf,
        config.composition(),
    );
    let outcome = chain.generate(question, &footnotes);
    assert_eq!(outcome.generator, "gguf", "{outcome:?}");
    match outcome.generated {
        crate::generate::Generated::Text(text) => assert!(text.contains("[1]"), "{text}"),
        other => panic!("expected text, got {other:?}"),
    }
}
