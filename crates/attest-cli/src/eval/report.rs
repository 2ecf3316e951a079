//! The `attest eval` report: its JSON form, the human table, and the comparison against a baseline report that
//! fails the run (non-zero exit) when answer accuracy drops or the hallucination rate rises past the limits.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::metrics::CurvePoint;

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
    /// Answerable questions answered / answerable questions.
    pub coverage: f64,
    /// Answered answerable questions whose answer contains a gold answer string (normalised) / answered
    /// answerable questions.
    pub accuracy: f64,
    /// Citations resolving to a passage retrieved in that turn / all citations.
    pub citation_validity: f64,
    pub reasons: BTreeMap<String, usize>,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verifier: Option<VerifierScores>,
    /// The risk–coverage curve (answer only when confidence ≥ threshold).
    #[serde(default)]
    pub risk_coverage: Vec<CurvePoint>,
    pub meta: Meta,
}

/// Limits of the quality gate: how far a run may fall behind its baseline.
#[derive(Debug, Clone, Copy)]
pub struct GateLimits {
    /// Accuracy may drop by at most this (absolute, 0..1).
    pub max_accuracy_drop: f64,
    /// The hallucination rate may rise by at most this (absolute, 0..1).
    pub max_hallucination_rise: f64,
}

impl Default for GateLimits {
    fn default() -> Self {
        GateLimits {
            max_accuracy_drop: 0.05,
            max_hallucination_rise: 0.01,
        }
    }
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
    if b.accuracy - a.accuracy > limits.max_accuracy_drop + 1e-12 {
        failures.push(format!(
            "accuracy dropped by {:.1} points ({:.4} -> {:.4}; limit {:.1})",
            (b.accuracy - a.accuracy) * 100.0,
            b.accuracy,
            a.accuracy,
            limits.max_accuracy_drop * 100.0
        ));
    }
    if a.hallucination_rate - b.hallucination_rate > limits.max_hallucination_rise + 1e-12 {
        failures.push(format!(
            "hallucination rate rose by {:.1} points ({:.4} -> {:.4}; limit {:.1})",
            (a.hallucination_rate - b.hallucination_rate) * 100.0,
            b.hallucination_rate,
            a.hallucination_rate,
            limits.max_hallucination_rise * 100.0
        ));
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
    out.push_str("lane            nDCG@10  recall@10  recall@100  MRR@10\n");
    for (lane, s) in &r.retrieval {
        out.push_str(&format!(
            "{lane:<15} {:>7.4}  {:>9.4}  {:>10.4}  {:>6.4}\n",
            s.ndcg_at_10, s.recall_at_10, s.recall_at_100, s.mrr_at_10
        ));
    }
    let a = &r.answers;
    out.push_str(&format!(
        "\nanswers: coverage {:.4}  accuracy {:.4}  hallucination {:.4}  citation validity {:.4}\n",
        a.coverage, a.accuracy, a.hallucination_rate, a.citation_validity
    ));
    if !a.reasons.is_empty() {
        let reasons: Vec<String> = a.reasons.iter().map(|(k, v)| format!("{k} {v}")).collect();
        out.push_str(&format!("abstentions: {}\n", reasons.join(", ")));
    }
    out.push_str("\nstage            p50 ms    p95 ms\n");
    for (stage, l) in &r.latency_ms {
        out.push_str(&format!("{stage:<15} {:>7.1}  {:>8.1}\n", l.p50, l.p95));
    }
    if let Some(v) = &r.verifier {
        out.push_str(&format!(
            "\nverifier: AUROC {:.4}, balanced accuracy {:.4} ({} held-out items)\n",
            v.auroc, v.balanced_accuracy, v.heldout_items
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
    }
}
