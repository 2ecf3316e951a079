//! Per-question results of `attest-lab eval`: one record per question asked (what was asked, what came back,
//! what was expected), written as JSON lines by `--per-question` so that a failure can be read, not just
//! counted; and, from the same records, the hallucination rate and coverage by kind of text (the query's
//! `domain`) and by near-miss kind (its `kind`), each with its 95% Wilson interval.

use std::collections::BTreeMap;

use attest_answer::gate_trace::HopTrace;
use attest_answer::AskResponse;
use serde::{Deserialize, Serialize};

use super::data::Query;
use super::metrics::Rate;

/// Fields of the ask response that may carry the abstention's near-miss suggestion ("the documents give the
/// Drift Mini's charge time, not the Drift Max's"), first match wins. Read by name from the serialised
/// response so that this report follows the answer tier's field (`near_miss` today) whatever its type.
const NEAR_MISS_FIELDS: [&str; 2] = ["near_miss", "suggestion"];

/// How one question scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scored {
    /// Answerable, answered, and the answer holds a gold answer.
    Correct,
    /// Answerable, answered, but no gold answer in the answer.
    Wrong,
    /// Answerable, abstained.
    Missed,
    /// Unanswerable, answered.
    Hallucinated,
    /// Unanswerable, abstained.
    Abstained,
    /// A general-knowledge answer (status `out_of_corpus`): neither answered nor abstained.
    OutOfCorpus,
}

/// A cited document with the sentence quoted from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CitedDoc {
    pub n: u32,
    pub doc_id: String,
    pub quote: String,
}

/// One question asked, one line of the `--per-question` file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuestionRecord {
    pub id: String,
    pub question: String,
    pub domain: Option<String>,
    pub kind: Option<String>,
    pub answerable: bool,
    /// The response's status: `answered`, `abstained` or `out_of_corpus`.
    pub status: String,
    /// The abstention reason (`low_confidence`, `unsupported_claims`, …); null when answered.
    pub reason: Option<String>,
    pub scored: Scored,
    pub answer: String,
    pub confidence: f64,
    /// What the answer cites, in citation order.
    pub citations: Vec<CitedDoc>,
    pub gold_answers: Vec<String>,
    pub gold_doc: Option<String>,
    /// The abstention's suggestions (titles of the nearest documents).
    pub suggestions: Vec<String>,
    /// The abstention's near-miss suggestion (what the documents give instead, with its source), as the
    /// response's `near_miss` carries it; null when it gives none.
    pub near_miss: Option<serde_json::Value>,
    /// For a near-miss question, the document stating the neighbouring fact and that fact (the data set's
    /// `near_doc` / `near_answer`): an answer citing it gave the neighbour's fact.
    pub near_doc: Option<String>,
    pub near_answer: Option<String>,
    /// The whole ask, in milliseconds.
    pub total_ms: Option<f64>,
    /// What the coverage gate saw at each retrieval the reader read (`attest-lab replay` tries other bars on it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hops: Vec<HopTrace>,
}

impl QuestionRecord {
    /// The record of `q` answered by `a`; `accurate` says whether the answer holds a gold answer.
    pub fn of(q: &Query, a: &AskResponse, accurate: bool) -> QuestionRecord {
        let answered = a.status == "answered";
        let scored = match (a.status == "out_of_corpus", q.answerable, answered) {
            (true, _, _) => Scored::OutOfCorpus,
            (false, true, true) if accurate => Scored::Correct,
            (false, true, true) => Scored::Wrong,
            (false, true, false) => Scored::Missed,
            (false, false, true) => Scored::Hallucinated,
            (false, false, false) => Scored::Abstained,
        };
        QuestionRecord {
            id: q.id.clone(),
            question: q.text.clone(),
            domain: q.domain.clone(),
            kind: q.kind.clone(),
            answerable: q.answerable,
            status: a.status.to_string(),
            reason: a.reason.map(str::to_string),
            scored,
            answer: a.answer.clone(),
            confidence: a.confidence,
            citations: a
                .citations
                .iter()
                .map(|c| CitedDoc {
                    n: c.n,
                    doc_id: c.doc_id.clone(),
                    quote: c.quote.clone(),
                })
                .collect(),
            gold_answers: q.answers.clone(),
            gold_doc: q.gold_doc.clone(),
            suggestions: a.suggestions.clone(),
            near_miss: near_miss_of(a),
            near_doc: q.near_doc.clone(),
            near_answer: q.near_answer.clone(),
            // The pipeline's whole-turn entry (what the report's `latency_ms.total` is over).
            total_ms: a.latency_ms.get("total").copied(),
            hops: a.gate_trace.clone(),
        }
    }

    fn answered(&self) -> bool {
        self.status == "answered"
    }
}

/// The response's near-miss suggestion, whichever of [`NEAR_MISS_FIELDS`] carries it (null and empty
/// values are none).
fn near_miss_of(a: &AskResponse) -> Option<serde_json::Value> {
    let serde_json::Value::Object(mut fields) = serde_json::to_value(a).ok()? else {
        return None;
    };
    NEAR_MISS_FIELDS
        .iter()
        .filter_map(|name| fields.remove(*name))
        .find(|v| {
            !v.is_null() && v.as_str() != Some("") && v.as_array().is_none_or(|a| !a.is_empty())
        })
}

/// The hallucination rate (unanswerable questions answered / unanswerable) and coverage (answerable answered /
/// answerable) of a group of questions, each absent when the group has no question of its side.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupScores {
    pub questions: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hallucination: Option<Rate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<Rate>,
}

/// The records grouped by `key` (those without one are left out), scored. A general-knowledge answer is not
/// an answer here either, as in the overall figures.
pub fn breakdown(
    records: &[QuestionRecord],
    key: impl Fn(&QuestionRecord) -> Option<&str>,
) -> BTreeMap<String, GroupScores> {
    // (answerable answered, answerable, unanswerable answered, unanswerable) per group.
    let mut counts: BTreeMap<String, [usize; 4]> = BTreeMap::new();
    for r in records {
        let Some(k) = key(r) else { continue };
        let c = counts.entry(k.to_string()).or_default();
        let side = if r.answerable { 0 } else { 2 };
        c[side] += usize::from(r.answered());
        c[side + 1] += 1;
    }
    counts
        .into_iter()
        .map(|(k, [covered, answerable, hallucinated, unanswerable])| {
            let scores = GroupScores {
                questions: answerable + unanswerable,
                hallucination: (unanswerable > 0).then(|| Rate::of(hallucinated, unanswerable)),
                coverage: (answerable > 0).then(|| Rate::of(covered, answerable)),
            };
            (k, scores)
        })
        .collect()
}

/// The `--per-question` file: one JSON object per line, in the order asked.
pub fn to_jsonl(records: &[QuestionRecord]) -> serde_json::Result<String> {
    records
        .iter()
        .map(serde_json::to_string)
        .collect::<Result<Vec<_>, _>>()
        .map(|lines| lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(id: &str, answerable: bool, domain: &str, kind: &str) -> Query {
        Query {
            id: id.into(),
            text: format!("question {id}?"),
            answerable,
            answers: if answerable {
                vec!["14 days".into()]
            } else {
                Vec::new()
            },
            gold_doc: answerable.then(|| format!("doc-{id}")),
            source_doc_removed: None,
            tenant: None,
            domain: Some(domain.into()),
            kind: Some(kind.into()),
            near_doc: None,
            near_answer: None,
        }
    }

    fn response(status: &'static str) -> AskResponse {
        AskResponse {
            status,
            answer: if status == "answered" {
                "It fires at 14 days [1].".into()
            } else {
                String::new()
            },
            confidence: 0.7,
            reason: (status == "abstained").then_some("low_confidence"),
            citations: if status == "answered" {
                vec![attest_answer::cite::Citation {
                    n: 1,
                    chunk_id: "d1#0".into(),
                    doc_id: "d1".into(),
                    title: "Alerts".into(),
                    quote: "It fires at 14 days.".into(),
                    score: 1.0,
                }]
            } else {
                Vec::new()
            },
            ..Default::default()
        }
    }

    #[test]
    fn a_record_scores_the_turn_and_keeps_what_was_expected() {
        let q = query("q1", false, "runbook", "sibling_entity");
        let r = QuestionRecord::of(&q, &response("answered"), false);
        assert_eq!(r.scored, Scored::Hallucinated);
        assert_eq!(r.citations[0].doc_id, "d1");
        assert_eq!(r.reason, None);
        assert_eq!(r.near_miss, None);
        let q = query("q2", true, "api", "answerable");
        let r = QuestionRecord::of(&q, &response("abstained"), false);
        assert_eq!(
            (r.scored, r.reason.as_deref()),
            (Scored::Missed, Some("low_confidence"))
        );
        assert_eq!(r.gold_answers, vec!["14 days".to_string()]);
        assert_eq!(r.gold_doc.as_deref(), Some("doc-q2"));
        let r = QuestionRecord::of(&q, &response("answered"), true);
        assert_eq!(r.scored, Scored::Correct);
        let line: serde_json::Value =
            serde_json::from_str(&to_jsonl(std::slice::from_ref(&r)).unwrap()).unwrap();
        for field in [
            "id",
            "question",
            "domain",
            "kind",
            "answerable",
            "status",
            "reason",
            "answer",
            "confidence",
            "citations",
            "gold_answers",
            "gold_doc",
            "near_miss",
            "near_doc",
        ] {
            assert!(line.get(field).is_some(), "{field} missing from {line}");
        }
        assert_eq!(line["scored"], "correct");
    }

    #[test]
    fn groups_count_hallucination_and_coverage_apart_with_intervals() {
        let asked = [
            ("a1", true, "runbook", "answerable", "answered"),
            ("a2", true, "runbook", "answerable", "abstained"),
            ("u1", false, "runbook", "sibling_entity", "answered"),
            ("u2", false, "runbook", "attribute_absent", "abstained"),
            ("u3", false, "runbook", "sibling_entity", "abstained"),
            ("u4", false, "api", "sibling_entity", "answered"),
            // A general-knowledge answer is not counted as answered.
            ("u5", false, "api", "false_premise", "out_of_corpus"),
        ];
        let mut records: Vec<QuestionRecord> = asked
            .iter()
            .map(|(id, answerable, domain, kind, status)| {
                QuestionRecord::of(
                    &query(id, *answerable, domain, kind),
                    &response(status),
                    true,
                )
            })
            .collect();
        // A question without a domain is in neither group.
        let mut plain = records[0].clone();
        plain.domain = None;
        plain.kind = None;
        records.push(plain);

        let by_domain = breakdown(&records, |r| r.domain.as_deref());
        assert_eq!(by_domain.keys().collect::<Vec<_>>(), ["api", "runbook"]);
        let runbook = &by_domain["runbook"];
        assert_eq!(runbook.questions, 5);
        assert_eq!(runbook.hallucination, Some(Rate::of(1, 3)));
        assert_eq!(runbook.coverage, Some(Rate::of(1, 2)));
        let api = &by_domain["api"];
        assert_eq!(api.hallucination, Some(Rate::of(1, 2)));
        assert_eq!(api.coverage, None, "no answerable question about the API");

        let by_kind = breakdown(&records, |r| r.kind.as_deref());
        assert_eq!(
            by_kind["sibling_entity"].hallucination,
            Some(Rate::of(2, 3))
        );
        assert_eq!(
            by_kind["attribute_absent"].hallucination,
            Some(Rate::of(0, 1))
        );
        assert_eq!(by_kind["false_premise"].hallucination, Some(Rate::of(0, 1)));
        assert_eq!(by_kind["answerable"].hallucination, None);
        assert_eq!(by_kind["answerable"].coverage, Some(Rate::of(1, 2)));

        let json = serde_json::to_value(&by_domain).unwrap();
        let h = &json["runbook"]["hallucination"];
        assert_eq!((h["n"].as_u64(), h["hits"].as_u64()), (Some(3), Some(1)));
        assert!(h["lo"].as_f64().unwrap() < 1.0 / 3.0 && h["hi"].as_f64().unwrap() > 1.0 / 3.0);
        assert!(json["api"].get("coverage").is_none());
    }
}
