//! Features of (question, candidate) pairs for the learned reranker, computed in the answer tier from what the
//! router returns for each hit: the BM25 and dense lane scores and ranks, the fused score, the title and text.
//!
//! Some features are relative to the candidate pool (BM25 score over the pool's best, the gap to the pool's best
//! cosine, IDF computed over the pool's passages), so they assume `hits` is one turn's candidate list (~100–150
//! hits), as at training time. The others are absolute (coverage of the question's words), which is what lets
//! the top score tell an answerable question from one whose article is not in the corpus.
//!
//! The issue names a "best-sentence cosine" (the question embedded against every sentence of the passage).
//! Embedding every sentence of ~150 candidates with the local MiniLM costs seconds on the 2-core CPU, far
//! over the ask p95 budget (0.8 s), so the best-sentence features here are lexical (plain and IDF-weighted
//! coverage of the question by the best sentence); the dense lane's passage cosine stands in for semantics.
//! Scoring 150 candidates costs a few milliseconds.

use std::collections::{HashMap, HashSet};

use attest_proto::v1 as pb;

use attest_models::logistic::Sign;
use attest_text::relevance::sentence_relevance;
use attest_text::text;

/// Names of the features, in vector order (written next to the weights in the model file).
pub const FEATURE_NAMES: [&str; 14] = [
    "bm25_log",
    "bm25_rel",
    "bm25_rr",
    "dense_cos",
    "dense_gap",
    "dense_rr",
    "fused_rel",
    "coverage",
    "idf_coverage",
    "best_sentence",
    "idf_best_sentence",
    "bigram_coverage",
    "title_match",
    "both_lanes",
];

pub const FEATURE_COUNT: usize = FEATURE_NAMES.len();

/// The direction each feature may push the score: every one is evidence for the passage, so none may count
/// against it (a data set's quirks cannot teach the model that covering the question is bad). `bm25_log` is
/// free: it mostly measures how rare the question's words are, which says as much about the question as the
/// passage.
pub const FEATURE_SIGNS: [Sign; FEATURE_COUNT] = [
    Sign::Free,
    Sign::Positive,
    Sign::Positive,
    Sign::Positive,
    Sign::Positive,
    Sign::Positive,
    Sign::Positive,
    Sign::Positive,
    Sign::Positive,
    Sign::Positive,
    Sign::Positive,
    Sign::Positive,
    Sign::Positive,
    Sign::Positive,
];

pub type Row = [f64; FEATURE_COUNT];

/// What one hit contributes, tokenised once.
struct Prepared<'a> {
    hit: &'a pb::Hit,
    /// Content words of the text and the title together.
    words: HashSet<String>,
    title_words: HashSet<String>,
    bigrams: HashSet<(String, String)>,
}

/// The feature rows of `hits` against `question`, in input order.
pub fn pool_features(question: &str, hits: &[pb::Hit]) -> Vec<Row> {
    let question_words = text::content_words(question);
    let question_set: HashSet<String> = question_words.iter().cloned().collect();
    let question_bigrams: HashSet<(String, String)> = bigrams(&question_words);

    let prepared: Vec<Prepared> = hits
        .iter()
        .map(|hit| {
            let body = text::content_words(&hit.text);
            let title_words = text::content_set(&hit.title);
            let mut words: HashSet<String> = body.iter().cloned().collect();
            words.extend(title_words.iter().cloned());
            Prepared {
                hit,
                bigrams: bigrams(&body),
                words,
                title_words,
            }
        })
        .collect();

    // IDF of the question's words within the pool: a word every candidate has says little about which one
    // answers, a word few have says much.
    let n = prepared.len() as f64;
    let idf: HashMap<&str, f64> = question_set
        .iter()
        .map(|w| {
            let df = prepared.iter().filter(|p| p.words.contains(w)).count() as f64;
            (w.as_str(), ((n + 1.0) / (df + 0.5)).ln().max(0.0))
        })
        .collect();
    let idf_total: f64 = idf.values().sum();

    let bm25_best = hits
        .iter()
        .filter_map(|h| h.bm25.as_ref().map(|l| f64::from(l.score)))
        .fold(0.0, f64::max);
    let dense_scores: Vec<f64> = hits
        .iter()
        .filter_map(|h| h.dense.as_ref().map(|l| f64::from(l.score)))
        .collect();
    let dense_best = dense_scores
        .iter()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max);
    // A hit outside the dense lane's list scored no higher than the lowest cosine that made it.
    let dense_floor = dense_scores.iter().copied().fold(f64::INFINITY, f64::min);
    let fused_best = hits.iter().map(|h| h.score).fold(0.0, f64::max);

    prepared
        .iter()
        .map(|p| {
            let bm25 = p.hit.bm25.as_ref().map(|l| f64::from(l.score).max(0.0));
            let dense_cos = match (&p.hit.dense, dense_scores.is_empty()) {
                (Some(l), _) => f64::from(l.score),
                (None, false) => dense_floor,
                (None, true) => 0.0,
            };
            let dense_gap = if dense_scores.is_empty() {
                0.0
            } else {
                dense_cos - dense_best
            };
            let idf_of = |covered: &dyn Fn(&str) -> bool| -> f64 {
                if idf_total <= 0.0 {
                    return 0.0;
                }
                idf.iter()
                    .filter(|(w, _)| covered(w))
                    .map(|(_, v)| v)
                    .sum::<f64>()
                    / idf_total
            };
            let (best_sentence, idf_best_sentence) = text::sentences(&p.hit.text)
                .into_iter()
                .map(|s| {
                    let words = text::content_set(s);
                    let plain = sentence_relevance(&question_set, &p.title_words, s);
                    let weighted = idf_of(&|w| words.contains(w) || p.title_words.contains(w));
                    (plain, weighted)
                })
                .fold((0.0, 0.0), |a, b| (f64::max(a.0, b.0), f64::max(a.1, b.1)));
            [
                bm25.map_or(0.0, f64::ln_1p),
                match bm25 {
                    Some(s) if bm25_best > 0.0 => s / bm25_best,
                    _ => 0.0,
                },
                reciprocal_rank(p.hit.bm25.as_ref()),
                dense_cos,
                dense_gap,
                reciprocal_rank(p.hit.dense.as_ref()),
                if fused_best > 0.0 {
                    p.hit.score / fused_best
                } else {
                    0.0
                },
                fraction(
                    question_set.iter().filter(|w| p.words.contains(*w)).count(),
                    question_set.len(),
                ),
                idf_of(&|w| p.words.contains(w)),
                best_sentence,
                idf_best_sentence,
                fraction(
                    question_bigrams
                        .iter()
                        .filter(|b| p.bigrams.contains(*b))
                        .count(),
                    question_bigrams.len(),
                ),
                fraction(
                    p.title_words
                        .iter()
                        .filter(|w| question_set.contains(*w))
                        .count(),
                    p.title_words.len(),
                ),
                f64::from(u8::from(p.hit.bm25.is_some() && p.hit.dense.is_some())),
            ]
        })
        .collect()
}

/// `1 / (1 + rank)` of a lane's 1-based rank; 0 when the lane did not return the hit.
fn reciprocal_rank(lane: Option<&pb::LaneRank>) -> f64 {
    lane.map_or(0.0, |l| 1.0 / (1.0 + f64::from(l.rank)))
}

fn bigrams(words: &[String]) -> HashSet<(String, String)> {
    words
        .windows(2)
        .map(|w| (w[0].clone(), w[1].clone()))
        .collect()
}

fn fraction(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(
        title: &str,
        text: &str,
        bm25: Option<(u32, f32)>,
        dense: Option<(u32, f32)>,
    ) -> pb::Hit {
        pb::Hit {
            chunk_id: text.chars().take(12).collect(),
            title: title.into(),
            text: text.into(),
            score: 1.0 / (60.0 + f64::from(bm25.map_or(100, |b| b.0))),
            bm25: bm25.map(|(rank, score)| pb::LaneRank { rank, score }),
            dense: dense.map(|(rank, score)| pb::LaneRank { rank, score }),
            ..Default::default()
        }
    }

    fn feature(row: &Row, name: &str) -> f64 {
        let i = FEATURE_NAMES
            .iter()
            .position(|n| *n == name)
            .expect("a known feature");
        row[i]
    }

    #[test]
    fn features_of_hand_made_hits() {
        let q = "Which team won Super Bowl 50?";
        let hits = vec![
            hit(
                "Super_Bowl_50",
                "The game was played in California. The Denver Broncos team won Super Bowl 50 in 2016.",
                Some((1, 12.0)),
                Some((2, 0.7)),
            ),
            hit(
                "Nikola_Tesla",
                "Tesla was an inventor. He won no bowl.",
                Some((2, 3.0)),
                None,
            ),
            hit("Amazon", "The rainforest is large.", None, Some((1, 0.8))),
        ];
        let rows = pool_features(q, &hits);
        assert_eq!(rows.len(), 3);
        let (good, tesla, amazon) = (&rows[0], &rows[1], &rows[2]);

        assert_eq!(feature(good, "bm25_rel"), 1.0);
        assert_eq!(feature(tesla, "bm25_rel"), 0.25);
        assert_eq!(feature(amazon, "bm25_rel"), 0.0);
        assert!((feature(good, "bm25_log") - 13f64.ln()).abs() < 1e-9);
        assert_eq!(feature(good, "bm25_rr"), 0.5);
        assert_eq!(feature(amazon, "bm25_rr"), 0.0);
        assert!((feature(amazon, "dense_rr") - 0.5).abs() < 1e-12);
        assert!((feature(good, "dense_gap") + 0.1).abs() < 1e-6);
        // Tesla is not in the dense list: it gets the lowest cosine that made it (0.7).
        assert!((feature(tesla, "dense_cos") - 0.7).abs() < 1e-6);
        assert_eq!(feature(good, "both_lanes"), 1.0);
        assert_eq!(feature(tesla, "both_lanes"), 0.0);

        // Question content words: team, won, super, bowl, 50 — all in the second sentence of the good hit.
        assert_eq!(feature(good, "coverage"), 1.0);
        assert_eq!(feature(good, "best_sentence"), 1.0);
        assert_eq!(feature(good, "idf_best_sentence"), 1.0);
        assert_eq!(feature(good, "bigram_coverage"), 1.0);
        assert_eq!(feature(good, "title_match"), 1.0);
        assert_eq!(feature(tesla, "coverage"), 0.4); // won, bowl
        assert_eq!(feature(tesla, "title_match"), 0.0);
        assert_eq!(feature(amazon, "coverage"), 0.0);
        assert!(feature(tesla, "idf_coverage") < feature(tesla, "coverage"));
        assert!(feature(tesla, "bigram_coverage") < 0.5);
    }

    #[test]
    fn degenerate_inputs_give_finite_rows() {
        assert!(pool_features("anything", &[]).is_empty());
        let rows = pool_features("the of and", &[pb::Hit::default()]);
        assert!(rows[0].iter().all(|v| v.is_finite()));
        assert!(rows[0].iter().all(|v| *v == 0.0));
    }
}
