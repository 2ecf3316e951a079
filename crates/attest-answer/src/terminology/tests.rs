//! Unit tests of the terminology step: which questions are definition questions, how glossary hits are sorted
//! into outcomes, and the definition text.

use super::*;

const MAX: usize = 4;

#[test]
fn definition_questions_and_their_terms() {
    let table: &[(&str, Option<&str>)] = &[
        ("What is BM25?", Some("BM25")),
        ("what's CIMXML", Some("CIMXML")),
        ("What is a vector index?", Some("vector index")),
        ("What are embeddings?", Some("embeddings")),
        ("What is the Kalevala?", Some("Kalevala")),
        ("What does RRF mean?", Some("RRF")),
        ("What does IVF_PQ stand for?", Some("IVF_PQ")),
        (
            "Define reciprocal rank fusion.",
            Some("reciprocal rank fusion"),
        ),
        ("What is meant by grounding?", Some("grounding")),
        ("What is the meaning of TF-IDF?", Some("TF-IDF")),
        (
            "What is \"write amplification\"?",
            Some("write amplification"),
        ),
        ("What is Bill of Rights?", Some("Bill of Rights")),
        // SQuAD-style questions are not definitions.
        ("What is the name of the church built in 1925?", None),
        ("What is the largest city in Poland?", None),
        ("What is Tesla known for?", None),
        ("What is Beyoncé's middle name?", None),
        ("What is the population of Warsaw today?", None),
        ("What is another name for the Kalevala?", None),
        ("What is one of the main goals of the project?", None),
        ("What are some of the reasons it failed?", None),
        ("What is a very long term made of many words here?", None),
        ("When was Tesla born?", None),
        ("What year did it close?", None),
        ("What is?", None),
    ];
    for (q, want) in table {
        assert_eq!(definition_term(q, MAX).as_deref(), *want, "{q}");
    }
}

#[test]
fn term_keys_meet_across_case_plural_and_separators() {
    assert_eq!(
        normalise_term("Vector embeddings"),
        normalise_term("vector-embedding")
    );
    assert_eq!(normalise_term("VECTOR INDEX"), "vector index");
    assert_eq!(normalise_term("TF-IDF"), "tf idf");
    assert_ne!(normalise_term("BM25"), normalise_term("BM2"));
}

fn entry(doc: &str, meta: serde_json::Value, text: &str) -> pb::Hit {
    pb::Hit {
        chunk_id: format!("{doc}#0"),
        doc_id: doc.into(),
        title: String::new(),
        text: text.into(),
        metadata_json: meta.to_string(),
        ..Default::default()
    }
}

#[test]
fn hits_are_sorted_into_outcomes() {
    use serde_json::json;
    let bm25 = entry(
        "g-bm25",
        json!({"kind": "glossary", "term": "BM25", "aliases": ["Okapi BM25"]}),
        "BM25 is a ranking function.",
    );
    let rrf = entry(
        "g-rrf",
        json!({"kind": "glossary", "term": "RRF", "aliases": ["reciprocal rank fusion"]}),
        "RRF fuses ranked lists.",
    );
    let cim_energy = entry(
        "g-cim-1",
        json!({"kind": "glossary", "term": "CIM", "sense": "energy"}),
        "CIM is the Common Information Model.",
    );
    let cim_it = entry(
        "g-cim-2",
        json!({"kind": "glossary", "term": "CIM", "sense": "IT"}),
        "CIM is the Common Information Model of the DMTF.",
    );
    let not_glossary = entry("doc-1", json!({"kind": "faq"}), "BM25 appears here.");

    assert_eq!(classify("BM25", vec![]), Lookup::NoGlossary);
    assert_eq!(
        classify("BM25", vec![not_glossary.clone()]),
        Lookup::NoGlossary
    );
    match classify("okapi bm25", vec![rrf.clone(), bm25.clone(), bm25.clone()]) {
        Lookup::Hit(e) => assert_eq!((e.term.as_str(), e.hit.doc_id.as_str()), ("BM25", "g-bm25")),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        classify("Reciprocal Rank Fusion", vec![rrf.clone()]).outcome(),
        "hit"
    );
    assert_eq!(
        classify("FooBarBaz", vec![rrf.clone(), bm25.clone(), not_glossary]),
        Lookup::Miss {
            nearest: vec!["RRF".into(), "BM25".into()]
        }
    );
    match classify("CIM", vec![cim_energy, rrf, cim_it]) {
        Lookup::Ambiguous(v) => {
            let senses: Vec<_> = v.iter().map(|e| e.sense.clone().unwrap()).collect();
            assert_eq!(senses, vec!["energy", "IT"]);
        }
        other => panic!("{other:?}"),
    }
    assert!(Lookup::Timeout.unverified() && !Lookup::NoGlossary.unverified());
}

#[test]
fn definition_text_cites_each_entry() {
    let mut one = entry(
        "g",
        serde_json::json!({"kind": "glossary", "term": "BM25"}),
        "BM25\nBM25 is a ranking function. It weighs term frequency. A third sentence.",
    );
    one.title = "BM25".into();
    let e = |hit: pb::Hit| GlossaryEntry {
        term: "BM25".into(),
        sense: None,
        hit,
    };
    assert_eq!(
        definition_text(&[e(one.clone())], 2),
        "BM25 is a ranking function [1]. It weighs term frequency [1]."
    );
    let two = entry("h", serde_json::json!({}), "Another sense. More.");
    assert_eq!(
        definition_text(&[e(one), e(two)], 2),
        "BM25 is a ranking function [1]. Another sense [2]."
    );
}
