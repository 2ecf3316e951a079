//! The readers as a second-stage reranker (`answer.rerank.readers`, issue 70): the reranker's best `depth`
//! candidates reordered by how sure the readers are that one of a candidate's sentences answers the question,
//! mixed with the reranker's score. The readers read the question and the passage together, as a cross-encoder
//! does; the learned reranker's features cannot, and on forum posts that is where it falls short (docs/decisions/
//! embedders.md "The readers as a second-stage reranker").
//!
//! The order changes, the scores do not: every candidate keeps the reranker's calibrated score, against which the
//! coverage gate's thresholds were chosen. Off by default (`depth: 0`): it reads `depth × sentences` sentences
//! with every reader per retrieval hop, on top of the answer tier's own reading (0.3–0.4 s more at p50 on 2
//! cores), and on held-in forum posts it more than doubled hallucination (6.6% → 14.5%) while it added 2.1 points
//! of coverage on held-in articles (docs/decisions/embedders.md "Whether the answer tier reorders by default").

use serde::{Deserialize, Serialize};

use crate::reader::{Reader, ReaderError, ToRead};
use attest_proto::v1 as pb;

/// The `answer.rerank.readers` config section.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReaderRerankConfig {
    /// The reranker's best this many candidates are reordered (0: off).
    pub depth: usize,
    /// The readers' share of a reordered candidate's score: `weight · answerability + (1 − weight) · reranked`
    /// (both 0..1). 0.5 chosen on shift-reddit's held-in posts (0.6940 nDCG@10 against 0.6193 for the readers
    /// alone and 0.6143 for the reranker's order, each candidate's 8 best sentences read).
    pub weight: f64,
    /// Sentences read per candidate, those covering most of the question first. 1 chosen on the same posts:
    /// 0.6833 against 0.6940 for 8, an eighth of the reading (held out: 0.6462, the reranker's order 0.6033).
    pub sentences: usize,
}

impl Default for ReaderRerankConfig {
    fn default() -> Self {
        ReaderRerankConfig {
            depth: 0,
            weight: 0.5,
            sentences: 1,
        }
    }
}

impl ReaderRerankConfig {
    /// Whether it reorders anything.
    pub fn enabled(&self) -> bool {
        self.depth > 0
    }

    /// A weight outside 0..1 or no sentence to read is refused (at start-up, not per question).
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.weight) {
            return Err(format!(
                "rerank.readers.weight must be in 0..1, not {}",
                self.weight
            ));
        }
        if self.enabled() && self.sentences == 0 {
            return Err("rerank.readers.sentences must be at least 1".into());
        }
        Ok(())
    }
}

/// Reorders `ranked` (best first) in place: its first `config.depth` by the mixed score of
/// [`ReaderRerankConfig`], `hit` and `score` giving each item's candidate and reranked score (0..1). Ties keep
/// the reranked order, and the rest follow unchanged; a reading that fails leaves `ranked` as it was. Blocking:
/// the readers run here, all the candidates in one reading.
pub fn reorder<T>(
    reader: &Reader,
    config: &ReaderRerankConfig,
    question: &str,
    ranked: &mut Vec<T>,
    hit: impl Fn(&T) -> &pb::Hit,
    score: impl Fn(&T) -> f64,
) -> Result<(), ReaderError> {
    let head: Vec<(ToRead, f64)> = ranked
        .iter()
        .take(config.depth)
        .map(|item| {
            let h = hit(item);
            let passage = ToRead {
                title: &h.title,
                text: &h.text,
            };
            (passage, score(item))
        })
        .collect();
    let order = order(reader, config, question, &head)?;
    apply_order(ranked, &order);
    Ok(())
}

/// The order of `head` (passages with their reranked scores, best first) by the mixed score: indices into
/// `head`, best first, ties in the reranked order. Blocking: the readers run here, in one reading.
pub fn order(
    reader: &Reader,
    config: &ReaderRerankConfig,
    question: &str,
    head: &[(ToRead, f64)],
) -> Result<Vec<usize>, ReaderError> {
    if head.is_empty() {
        return Ok(Vec::new());
    }
    let passages: Vec<ToRead> = head.iter().map(|(p, _)| *p).collect();
    let read = reader.read_each(question, &passages, config.sentences)?;
    let mixed: Vec<f64> = read
        .iter()
        .zip(head)
        .map(|(sentences, (_, reranked))| {
            let answerability = sentences
                .iter()
                .map(|s| s.answerability)
                .fold(0.0, f64::max);
            config.weight * answerability + (1.0 - config.weight) * reranked
        })
        .collect();
    let mut order: Vec<usize> = (0..mixed.len()).collect();
    // Stable: equal scores keep the reranked order.
    order.sort_by(|&a, &b| mixed[b].total_cmp(&mixed[a]));
    Ok(order)
}

/// Puts the first `order.len()` items of `ranked` in `order` (a permutation of their indices, as [`order`]
/// returns); the rest stay where they are.
pub fn apply_order<T>(ranked: &mut Vec<T>, order: &[usize]) {
    let head = order.len().min(ranked.len());
    let mut place = vec![0; head];
    for (rank, &index) in order.iter().take(head).enumerate() {
        place[index] = rank;
    }
    let mut placed: Vec<(usize, T)> = place.into_iter().zip(ranked.drain(..head)).collect();
    placed.sort_unstable_by_key(|(rank, _)| *rank);
    ranked.splice(..0, placed.into_iter().map(|(_, item)| item));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_by_default_and_bad_settings_refused() {
        let c: ReaderRerankConfig = serde_json::from_str("{}").expect("empty section");
        assert!(!c.enabled());
        assert!(c.validate().is_ok());
        let on: ReaderRerankConfig = serde_json::from_str(r#"{"depth": 20}"#).expect("depth alone");
        assert!(on.enabled());
        assert_eq!((on.weight, on.sentences), (0.5, 1));
        let heavy = ReaderRerankConfig { weight: 1.5, ..on };
        assert!(heavy.validate().unwrap_err().contains("weight"));
        let blind = ReaderRerankConfig { sentences: 0, ..on };
        assert!(blind.validate().unwrap_err().contains("sentences"));
    }

    #[test]
    fn an_order_moves_the_head_and_leaves_the_rest() {
        let mut ranked = vec!["a", "b", "c", "d", "e"];
        apply_order(&mut ranked, &[2, 0, 1]);
        assert_eq!(ranked, ["c", "a", "b", "d", "e"]);
        let mut short = vec!["a", "b"];
        apply_order(&mut short, &[1, 0]);
        assert_eq!(short, ["b", "a"]);
        apply_order(&mut short, &[]);
        assert_eq!(short, ["b", "a"]);
    }
}
