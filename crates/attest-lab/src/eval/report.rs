//! The `attest-lab eval` report: its JSON form, the human table, and the comparison against a baseline report that
//! fails the run (non-zero exit) when answer accuracy drops or the hallucination rate rises past the limits.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::metrics::{CurvePoint, Rate};
use super::questions::GroupScores;

/// Retrieval quality of one lane (`bm25`, `dense`, `hybrid`, `hybrid_rerank`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LaneScores {
    pub ndcg_at_10: f64,
    pub recall_at_10: f64,
    pub recall_at_100: f64,
    pub mrr_at_10: f64,
    pub queries: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AnswerScores {
    pub questions: usize,
    pub answerable: usize,
    pub unanswerable: usize,
    /// Unanswerable questions answered / unanswerable questions.
    pub hallucination_rate: f64,
    /// The hallucination rate's 95% interval (Wilson score; samples of a few hundred questions are wide).
    #[serde(default)]
    pub hallucination_ci95: [f64; 2],
    /// Answerable questions answered / answerable questions.
    pub coverage: f64,
    /// Answered answerable questions whose answer contains a gold answer string (normalised) / answered
    /// answerable questions.
    pub accuracy: f64,
    /// Claims of answered answerable questions that state a gold answer / all their claims: how much of what
    /// the answer keeps bears on the question (a true, cited, irrelevant sentence counts against it).
    #[serde(default)]
    pub answer_precision: f64,
    /// Citations resolving to a passage retrieved in that turn / all citations.
    pub citation_validity: f64,
    pub reasons: BTreeMap<String, usize>,
    /// Questions given a general-knowledge answer (status `out_of_corpus`, where the collection opted in):
    /// counted apart, never as answered (so never in coverage, accuracy or hallucination).
    #[serde(default)]
    pub out_of_corpus: usize,
    /// Every citation that did not resolve (its quote is not a span of the cited document, or its marker is
    /// not in the answer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invalid_citations: Vec<InvalidCitation>,
    /// Every unanswerable question answered, with what it cited: what to read when the hallucination rate
    /// moves, and what two runs on the same questions can be compared by.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unanswerable_answered: Vec<AnsweredCase>,
    /// Hallucination rate and coverage by kind of text (the queries' `domain`: runbook, api, …), each with
    /// its 95% interval; absent when no query names one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_domain: BTreeMap<String, GroupScores>,
    /// The same by the queries' `kind`: a near-miss kind's hallucination rate (`sibling_entity`,
    /// `attribute_absent`, …), the answerable questions' coverage; absent when no query names one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_kind: BTreeMap<String, GroupScores>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InvalidCitation {
    pub question_id: String,
    pub n: u32,
    pub doc_id: String,
    pub quote: String,
}

/// Unanswerable questions whose topic IS in the corpus: the gold paragraph with its answer sentences removed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AdversarialScores {
    pub questions: usize,
    /// Answered without the answer / questions: answers none of whose quotes states a gold answer.
    pub hallucination_rate: f64,
    /// Answered / questions, whatever was quoted.
    #[serde(default)]
    pub answered_rate: f64,
    /// Answered from another paragraph of the article that states the answer too (a quote states a gold
    /// answer): not a hallucination, counted apart.
    #[serde(default)]
    pub answered_elsewhere: usize,
    pub reasons: BTreeMap<String, usize>,
    /// Given a general-knowledge answer instead (status `out_of_corpus`): counted apart, never as answered.
    #[serde(default)]
    pub out_of_corpus: usize,
    /// The share answered under each confidence floor (`hallucination_rate` of each point; no coverage here):
    /// what a collection's `min_confidence` would do to this check.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_threshold: Vec<CurvePoint>,
    /// Every answer given, with what it quoted: what to read when this check goes wrong.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answers: Vec<AnsweredCase>,
}

/// One answer to a question the corpus was made unable to answer (an adversarial case, or an unanswerable
/// question of the set).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AnsweredCase {
    pub question_id: String,
    pub question: String,
    pub answer: String,
    pub confidence: f64,
    /// The cited documents, in citation order.
    pub doc_ids: Vec<String>,
    /// A quote states a gold answer (from another paragraph): not a hallucination (adversarial cases only).
    #[serde(default)]
    pub elsewhere: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub p50: f64,
    pub p95: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VerifierScores {
    pub auroc: f64,
    pub balanced_accuracy: f64,
    pub heldout_items: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    pub timestamp: String,
    pub git_commit: String,
    pub config_hash: String,
    pub data: String,
    pub data_hash: String,
    pub corpus_docs: usize,
    pub wall_s: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub retrieval: BTreeMap<String, LaneScores>,
    pub answers: AnswerScores,
    pub latency_ms: BTreeMap<String, Latency>,
    /// The verifier on each `--verifier-data` set, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub verifier: BTreeMap<String, VerifierScores>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adversarial: Option<AdversarialScores>,
    /// `--adversarial`'s question-perturbation cases (a number or name changed to one no document holds),
    /// asked against the whole collection: any answer counts as a hallucination.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perturbed: Option<AdversarialScores>,
    /// Corpus documents the router refused at ingest (near-duplicates, repeated ids), absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<Skipped>,
    /// The risk–coverage curve (answer only when confidence ≥ threshold).
    #[serde(default)]
    pub risk_coverage: Vec<CurvePoint>,
    pub meta: Meta,
}

/// What ingest left out of the corpus, and how many relevance judgements point at it (those queries cannot find
/// that document, whatever the lanes do).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    pub documents: usize,
    pub qrels_pointing_at_skipped: usize,
    /// `(document id, reason)`, the first 50.
    pub examples: Vec<(String, String)>,
}

impl Skipped {
    pub fn of(
        skipped: &[(String, String)],
        qrels: &std::collections::HashMap<String, std::collections::HashMap<String, u32>>,
    ) -> Option<Skipped> {
        if skipped.is_empty() {
            return None;
        }
        let ids: std::collections::HashSet<&str> =
            skipped.iter().map(|(id, _)| id.as_str()).collect();
        Some(Skipped {
            documents: skipped.len(),
            qrels_pointing_at_skipped: qrels
                .values()
                .flat_map(|judged| judged.keys())
                .filter(|doc| ids.contains(doc.as_str()))
                .count(),
            examples: skipped.iter().take(50).cloned().collect(),
        })
    }
}

/// Limits of the quality gate: how far a run may fall behind its baseline.
#[derive(Debug, Clone, Copy)]
pub struct GateLimits {
    /// Accuracy may drop by at most this (absolute, 0..1).
    pub max_accuracy_drop: f64,
    /// The hallucination rate may rise by at most this (absolute, 0..1).
    pub max_hallucination_rise: f64,
    /// The adversarial check's hallucination rate may rise by at most this (it asks few questions).
    pub max_adversarial_rise: f64,
    /// A verifier's AUROC on a set both reports scored may drop by at most this.
    pub max_auroc_drop: f64,
    /// Citation validity must stay at least this.
    pub min_citation_validity: f64,
}

impl Default for GateLimits {
    fn default() -> Self {
        GateLimits {
            max_accuracy_drop: 0.05,
            max_hallucination_rise: 0.01,
            max_adversarial_rise: 0.05,
            max_auroc_drop: 0.03,
            min_citation_validity: 1.0,
        }
    }
}

/// Which way a figure gets worse.
#[derive(Clone, Copy)]
enum Worse {
    Rise,
    Drop,
}

/// The failure of a 0..1 rate that moved from `before` to `after` the bad way by more than `limit`, in points.
fn past_limit(what: &str, worse: Worse, before: f64, after: f64, limit: f64) -> Option<String> {
    let (moved, verb) = match worse {
        Worse::Rise => (after - before, "rose"),
        Worse::Drop => (before - after, "dropped"),
    };
    (moved > limit + 1e-12).then(|| {
        format!(
            "{what} {verb} by {:.1} points ({before:.4} -> {after:.4}; limit {:.1})",
            moved * 100.0,
            limit * 100.0
        )
    })
}

/// The differences from a baseline, and the regressions past the limits (empty: the gate passes).
pub fn compare(now: &Report, base: &Report, limits: GateLimits) -> (Vec<String>, Vec<String>) {
    let mut lines = Vec::new();
    let mut failures = Vec::new();
    let mut diff = |name: &str, a: f64, b: f64| {
        lines.push(format!("{name:<32} {b:>8.4} -> {a:>8.4} ({:+.4})", a - b));
    };
    for (lane, s) in &now.retrieval {
        if let Some(b) = base.retrieval.get(lane) {
            diff(
                &format!("retrieval.{lane}.ndcg_at_10"),
                s.ndcg_at_10,
                b.ndcg_at_10,
            );
        }
    }
    let (a, b) = (&now.answers, &base.answers);
    diff("answers.accuracy", a.accuracy, b.accuracy);
    diff("answers.coverage", a.coverage, b.coverage);
    diff(
        "answers.hallucination_rate",
        a.hallucination_rate,
        b.hallucination_rate,
    );
    diff(
        "answers.citation_validity",
        a.citation_validity,
        b.citation_validity,
    );
    // Per kind of text: shown, not gated (a few dozen questions each; their intervals are wide).
    for (name, g) in &a.by_domain {
        let before = b.by_domain.get(name).and_then(|g| g.hallucination);
        if let (Some(x), Some(y)) = (g.hallucination, before) {
            diff(
                &format!("answers.by_domain.{name}.hallucination"),
                x.rate,
                y.rate,
            );
        }
    }
    failures.extend(past_limit(
        "accuracy",
        Worse::Drop,
        b.accuracy,
        a.accuracy,
        limits.max_accuracy_drop,
    ));
    failures.extend(past_limit(
        "hallucination rate",
        Worse::Rise,
        b.hallucination_rate,
        a.hallucination_rate,
        limits.max_hallucination_rise,
    ));
    if a.citation_validity < limits.min_citation_validity - 1e-12 {
        failures.push(format!(
            "citation validity {:.4} is below {:.4} ({} invalid citations)",
            a.citation_validity,
            limits.min_citation_validity,
            a.invalid_citations.len()
        ));
    }
    if let (Some(x), Some(y)) = (&now.adversarial, &base.adversarial) {
        diff(
            "adversarial.hallucination_rate",
            x.hallucination_rate,
            y.hallucination_rate,
        );
        failures.extend(past_limit(
            "adversarial hallucination rate",
            Worse::Rise,
            y.hallucination_rate,
            x.hallucination_rate,
            limits.max_adversarial_rise,
        ));
    }
    for (name, v) in &now.verifier {
        let Some(b) = base.verifier.get(name) else {
            continue;
        };
        diff(&format!("verifier.{name}.auroc"), v.auroc, b.auroc);
        if b.auroc - v.auroc > limits.max_auroc_drop + 1e-12 {
            failures.push(format!(
                "verifier AUROC on {name} dropped by {:.3} ({:.4} -> {:.4}; limit {:.3})",
                b.auroc - v.auroc,
                b.auroc,
                v.auroc,
                limits.max_auroc_drop
            ));
        }
    }
    (lines, failures)
}

/// The human table.
pub fn table(r: &Report) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "data {} ({} docs, {} questions; sha256 {}…)\n\n",
        r.meta.data,
        r.meta.corpus_docs,
        r.answers.questions,
        &r.meta.data_hash[..r.meta.data_hash.len().min(12)]
    ));
    out.push_str("lane                  nDCG@10  recall@10  recall@100  MRR@10\n");
    for (lane, s) in &r.retrieval {
        out.push_str(&format!(
            "{lane:<21} {:>7.4}  {:>9.4}  {:>10.4}  {:>6.4}\n",
            s.ndcg_at_10, s.recall_at_10, s.recall_at_100, s.mrr_at_10
        ));
    }
    let a = &r.answers;
    out.push_str(&format!(
        "\nanswers: coverage {:.4}  accuracy {:.4}  answer precision {:.4}  hallucination {:.4} (95% {:.4}–{:.4})  \
         citation validity {:.4}\n",
        a.coverage,
        a.accuracy,
        a.answer_precision,
        a.hallucination_rate,
        a.hallucination_ci95[0],
        a.hallucination_ci95[1],
        a.citation_validity
    ));
    if !a.reasons.is_empty() {
        let reasons: Vec<String> = a.reasons.iter().map(|(k, v)| format!("{k} {v}")).collect();
        out.push_str(&format!("abstentions: {}\n", reasons.join(", ")));
    }
    if a.out_of_corpus > 0 {
        out.push_str(&format!(
            "out of corpus: {} general-knowledge answers with the disclaimer (not counted as answered)\n",
            a.out_of_corpus
        ));
    }
    out.push_str(&groups_table("kind of text", &a.by_domain));
    out.push_str(&groups_table("near-miss kind", &a.by_kind));
    out.push_str("\nstage            p50 ms    p95 ms\n");
    for (stage, l) in &r.latency_ms {
        out.push_str(&format!("{stage:<15} {:>7.1}  {:>8.1}\n", l.p50, l.p95));
    }
    for c in &a.invalid_citations {
        out.push_str(&format!(
            "invalid citation: question {} [{}] {}: {:?}\n",
            c.question_id, c.n, c.doc_id, c.quote
        ));
    }
    if let Some(adv) = &r.adversarial {
        out.push_str(&format!(
            "\nadversarial (answer sentence removed from the gold paragraph): {} questions, hallucination {:.4} \
             (answered {:.4}, {} of them quoting the answer from another paragraph)\n",
            adv.questions, adv.hallucination_rate, adv.answered_rate, adv.answered_elsewhere
        ));
    }
    if let Some(p) = &r.perturbed {
        out.push_str(&format!(
            "perturbed questions (a number or name changed to one no document holds): {} questions, answered {:.4}\n",
            p.questions, p.answered_rate
        ));
    }
    for (name, v) in &r.verifier {
        out.push_str(&format!(
            "\nverifier on {name}: AUROC {:.4}, balanced accuracy {:.4} ({} held-out items)\n",
            v.auroc, v.balanced_accuracy, v.heldout_items
        ));
    }
    out
}

/// One line per group: its questions, hallucination rate and coverage, each as `rate (95% lo–hi) hits/n`;
/// empty for no groups.
fn groups_table(what: &str, groups: &BTreeMap<String, GroupScores>) -> String {
    if groups.is_empty() {
        return String::new();
    }
    let cell = |r: &Option<Rate>| r.map_or_else(|| "-".to_string(), |r| r.to_string());
    let mut out = format!(
        "\n{what:<18} {:>9}  {:<32} {:<32}\n",
        "questions", "hallucination (95%)", "coverage (95%)"
    );
    for (name, g) in groups {
        out.push_str(&format!(
            "{name:<18} {:>9}  {:<32} {:<32}\n",
            g.questions,
            cell(&g.hallucination),
            cell(&g.coverage)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(accuracy: f64, hallucination_rate: f64) -> Report {
        Report {
            answers: AnswerScores {
                accuracy,
                hallucination_rate,
                citation_validity: 1.0,
                ..Default::default()
            },
            meta: Meta {
                data_hash: "abc".into(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn the_gate_fails_on_an_accuracy_drop_or_a_hallucination_rise_past_the_limits() {
        let base = report(0.80, 0.010);
        let limits = GateLimits::default();
        assert!(compare(&report(0.76, 0.015), &base, limits).1.is_empty());
        let (_, f) = compare(&report(0.74, 0.010), &base, limits);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].contains("accuracy"));
        let (_, f) = compare(&report(0.80, 0.030), &base, limits);
        assert!(f.len() == 1 && f[0].contains("hallucination"), "{f:?}");
    }

    #[test]
    fn the_gate_tracks_invalid_citations_the_adversarial_check_and_the_verifiers() {
        let mut base = report(0.80, 0.010);
        base.adversarial = Some(AdversarialScores {
            questions: 30,
            hallucination_rate: 0.10,
            ..Default::default()
        });
        let scores = |auroc| VerifierScores {
            auroc,
            ..Default::default()
        };
        base.verifier.insert("vitaminc-train".into(), scores(0.90));
        let limits = GateLimits::default();
        let mut now = base.clone();
        assert!(compare(&now, &base, limits).1.is_empty());
        now.answers.citation_validity = 0.99;
        now.adversarial.as_mut().unwrap().hallucination_rate = 0.20;
        now.verifier.insert("vitaminc-train".into(), scores(0.80));
        // A set only one report scored is not compared.
        now.verifier.insert("other".into(), scores(0.10));
        let (_, f) = compare(&now, &base, limits);
        assert_eq!(f.len(), 3, "{f:?}");
        assert!(f[0].contains("citation validity"));
        assert!(f[1].contains("adversarial"));
        assert!(f[2].contains("vitaminc-train"));
    }

    #[test]
    fn reports_round_trip_through_json_and_print() {
        let mut r = report(0.9, 0.0);
        r.retrieval.insert(
            "bm25".into(),
            LaneScores {
                ndcg_at_10: 0.8,
                ..Default::default()
            },
        );
        let back: Report = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        assert!(table(&r).contains("bm25"));
        assert!(!table(&r).contains("kind of text"), "no domain, no block");
    }

    #[test]
    fn the_table_and_the_json_carry_the_groups() {
        let mut r = report(0.9, 0.25);
        r.answers.by_domain.insert(
            "runbook".into(),
            GroupScores {
                questions: 6,
                hallucination: Some(Rate::of(1, 4)),
                coverage: Some(Rate::of(2, 2)),
            },
        );
        r.answers.by_kind.insert(
            "sibling_entity".into(),
            GroupScores {
                questions: 4,
                hallucination: Some(Rate::of(1, 4)),
                coverage: None,
            },
        );
        let t = table(&r);
        let line = t.lines().find(|l| l.starts_with("runbook")).unwrap();
        assert!(line.contains("0.250 (0.046–0.699) 1/4"), "{t}");
        assert!(line.contains("1.000 (0.342–1.000) 2/2"), "{t}");
        assert!(
            t.contains("near-miss kind") && t.contains("sibling_entity"),
            "{t}"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(
            json["answers"]["by_domain"]["runbook"]["hallucination"]["n"],
            4
        );
        assert_eq!(
            json["answers"]["by_kind"]["sibling_entity"]["hallucination"]["hits"],
            1
        );
        let back: Report = serde_json::from_value(json).unwrap();
        assert_eq!(back, r);
    }
}
