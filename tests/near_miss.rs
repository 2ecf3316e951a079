//! Near misses on a company's own text (issue 68), end to end through `attest dev`: the small company corpus of
//! `tests/fixtures/company-nearmiss` (written by `data/company-nearmiss/generate.py --fixture`), its three near-miss
//! questions — another version (the Returns API v1's limit when only v2's is given), a sibling entity (the Drift
//! Max's charge time when only the Drift Mini's is given) and an absent attribute (an alert's out-of-hours
//! escalation when its runbook gives only its threshold) — abstain and name what the documents give instead, and
//! their answerable twins are answered with the fact.

use crate::common;

use common::{post, repo_root, start_dev, Dev};
use serde_json::{json, Value};

pub(crate) const COLLECTION: &str = "company";

/// Creates the collection and uploads the fixture's documents over HTTP, each under its company as tenant, its
/// kind of text as metadata (the fixture is a BEIR corpus, whose extra fields `attest ingest` rightly refuses).
pub(crate) fn ingest(dev: &Dev, corpus: &std::path::Path) {
    let (status, body) = post(
        &format!("{}/v1/collections", dev.url),
        &json!({ "name": COLLECTION }),
    );
    assert!(status == 200 || status == 201, "{body}");
    let documents: Vec<Value> = std::fs::read_to_string(corpus)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|d| {
            json!({
                "id": d["_id"], "title": d["title"], "text": d["text"], "tenant": d["tenant"],
                "metadata": { "domain": d["domain"] },
            })
        })
        .collect();
    let (status, body) = post(
        &format!("{}/v1/collections/{COLLECTION}/documents", dev.url),
        &json!({ "documents": documents }),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["accepted"], documents.len(), "{body}");
}

/// Asks as the fixture's company: its documents are ingested under that tenant (the `tenant` of each line).
fn ask(dev: &Dev, tenant: &str, question: &str) -> Value {
    let (status, body) = post(
        &format!("{}/v1/collections/{COLLECTION}/ask", dev.url),
        &json!({ "question": question, "tenant": tenant }),
    );
    assert_eq!(status, 200, "{body}");
    body
}

#[test]
fn near_misses_abstain_and_name_what_was_found_while_their_twins_are_answered() {
    let fixture = repo_root().join("tests/fixtures/company-nearmiss");
    let questions: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture.join("questions.json")).unwrap())
            .unwrap();
    let near_misses = questions["near_misses"].as_array().unwrap();
    let tenant = questions["company"].as_str().unwrap();
    let kinds: Vec<&str> = near_misses
        .iter()
        .map(|q| q["kind"].as_str().unwrap())
        .collect();
    for kind in ["other_condition", "sibling_entity", "attribute_absent"] {
        assert!(kinds.contains(&kind), "the fixture lacks a {kind} question");
    }

    let data = tempfile::tempdir().unwrap();
    let dev = start_dev(data.path());
    ingest(&dev, &fixture.join("corpus.jsonl"));

    let mut failures = Vec::new();
    for q in near_misses {
        let asked = q["question"].as_str().unwrap();
        let body = ask(&dev, tenant, asked);
        let near = &body["near_miss"];
        let neighbour = &q["expected_neighbour"];
        if body["status"] != "abstained" {
            failures.push(format!("{asked:?} was answered: {}", body["answer"]));
            continue;
        }
        // What the abstention names: the look-alike for a sibling or another version, the subject itself
        // when only the attribute is missing.
        let (kind, found) = match q["kind"].as_str().unwrap() {
            "attribute_absent" => ("not_stated", q["asked_name"].as_str().unwrap()),
            _ => ("sibling", neighbour["name"].as_str().unwrap()),
        };
        if near["kind"] != kind || near["found"] != found {
            failures.push(format!(
                "{asked:?}: expected a {kind} near miss naming {found:?}, got {near}"
            ));
            continue;
        }
        assert_eq!(near["asked"], q["asked_name"], "{near}");
        assert!(near["message"].as_str().unwrap().contains(found), "{near}");
        if kind == "sibling" {
            // The source is the neighbour's document, quoting the sentence that states its fact.
            assert_eq!(near["source"]["doc_id"], neighbour["doc"], "{near}");
            assert!(
                near["source"]["quote"]
                    .as_str()
                    .unwrap()
                    .contains(neighbour["value"].as_str().unwrap()),
                "{near}"
            );
        }
        // An abstention is never an answer: no answer text, no citations.
        assert_eq!(body["answer"], "", "{body}");
        assert!(body["citations"].as_array().unwrap().is_empty(), "{body}");
    }
    for q in near_misses {
        let twin = &q["twin"];
        let asked = twin["question"].as_str().unwrap();
        let body = ask(&dev, tenant, asked);
        let answer = body["answer"].as_str().unwrap_or("").to_lowercase();
        let gold = twin["answers"][0].as_str().unwrap().to_lowercase();
        if body["status"] != "answered" || !answer.contains(&gold) {
            failures.push(format!(
                "twin {asked:?}: expected an answer with {gold:?}, got {} {:?} ({})",
                body["status"], body["answer"], body["reason"]
            ));
            continue;
        }
        assert!(body["near_miss"].is_null(), "{body}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
