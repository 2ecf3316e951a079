//! What the coverage gate saw at each retrieval of a turn, kept so that the gate's bars and the readers'
//! combination can be chosen by replaying a run instead of re-running it (`attest-lab replay`): per hop, the
//! reranked scores the lexical gate reads and, for every read passage in ranked order, the readings of its read
//! sentences ([`Readings`]: the readers' probabilities before the ensemble rule and the overrule bar).
//!
//! [`decide`] is the gate both the pipeline and a replay use; [`HopTrace::scores`] is what the pipeline's read
//! step hands the gate, recomputed under other settings.

use serde::{Deserialize, Serialize};

use crate::gate::{self, Gate, GateThresholds};
use crate::reader::{ReaderConfig, Readings, SentenceRead};

/// One retrieval of a turn as the gate saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HopTrace {
    /// 1 for the first retrieval.
    pub hop: usize,
    /// The ranked candidates' scores, best first: what the lexical gate reads.
    pub reranked: Vec<f64>,
    /// The candidates the reader has read (this hop or before), in ranked order.
    pub passages: Vec<ReadPassage>,
    /// What the gate decided.
    pub gate: Gate,
}

/// A read passage: its document and the sentences the readers read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadPassage {
    pub doc_id: String,
    pub sentences: Vec<ReadSentence>,
}

/// A sentence the readers read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadSentence {
    /// Its position among the passage's sentences (`attest_text::text::sentences`).
    pub index: usize,
    pub text: String,
    pub readings: Readings,
}

impl ReadPassage {
    /// The read sentences of `reads` (a passage's reading, one per sentence of `sentences`).
    pub fn of(doc_id: &str, sentences: &[&str], reads: &[SentenceRead]) -> ReadPassage {
        ReadPassage {
            doc_id: doc_id.to_string(),
            sentences: reads
                .iter()
                .zip(sentences)
                .enumerate()
                .filter(|(_, (r, _))| r.readings != Readings::default())
                .map(|(index, (r, text))| ReadSentence {
                    index,
                    text: text.to_string(),
                    readings: r.readings,
                })
                .collect(),
        }
    }

    /// The passage's best sentence under `reader` (0 when none is read).
    pub fn best(&self, reader: &ReaderConfig) -> f64 {
        self.sentences
            .iter()
            .map(|s| reader.answerability(&s.readings))
            .fold(0.0, f64::max)
    }
}

impl HopTrace {
    /// The answerability of each read passage under `reader`, as the read step hands them to the gate.
    pub fn scores(&self, reader: &ReaderConfig) -> Vec<f64> {
        self.passages.iter().map(|p| p.best(reader)).collect()
    }

    /// The gate of this hop under `reader` and `thresholds`.
    pub fn decide(&self, reader: &ReaderConfig, thresholds: &GateThresholds) -> Gate {
        decide(&self.reranked, &self.scores(reader), thresholds, reader)
    }

    /// The best sentence under `reader`: (passage, sentence) indices into this trace, the first of equals.
    pub fn top(&self, reader: &ReaderConfig) -> Option<(usize, usize)> {
        let mut top: Option<((usize, usize), f64)> = None;
        for (p, passage) in self.passages.iter().enumerate() {
            for (s, sentence) in passage.sentences.iter().enumerate() {
                let a = reader.answerability(&sentence.readings);
                if top.is_none_or(|(_, best)| a > best) {
                    top = Some(((p, s), a));
                }
            }
        }
        top.map(|(at, _)| at)
    }
}

/// The coverage gate with the reader on: the reader's gate on `answerability` (one per read passage) combined
/// with the lexical gate on `reranked` under `reader.gate`.
pub fn decide(
    reranked: &[f64],
    answerability: &[f64],
    thresholds: &GateThresholds,
    reader: &ReaderConfig,
) -> Gate {
    gate::combine(
        gate::decide_read(answerability, reader),
        gate::lexical_beside_reader(reranked, answerability, thresholds, reader),
        reader.gate,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AnswerConfig;
    use crate::reader::EnsembleRule;

    fn sentence(index: usize, probabilities: &[f64], held: bool) -> ReadSentence {
        ReadSentence {
            index,
            text: format!("sentence {index}"),
            readings: Readings::of(probabilities, held),
        }
    }

    fn hop(reranked: Vec<f64>, passages: Vec<Vec<ReadSentence>>) -> HopTrace {
        HopTrace {
            hop: 1,
            reranked,
            passages: passages
                .into_iter()
                .map(|sentences| ReadPassage {
                    doc_id: "d".into(),
                    sentences,
                })
                .collect(),
            gate: Gate::Refine,
        }
    }

    #[test]
    fn only_read_sentences_are_kept_and_scores_follow_the_settings() {
        let reads = [
            SentenceRead::default(),
            SentenceRead {
                answerability: 0.3,
                answer_part: 0,
                readings: Readings::of(&[0.9, 0.1], false),
            },
        ];
        let passage = ReadPassage::of("d1", &["not read.", "read."], &reads);
        assert_eq!(passage.sentences.len(), 1);
        assert_eq!(
            (
                passage.sentences[0].index,
                passage.sentences[0].text.as_str()
            ),
            (1, "read.")
        );
        let mut reader = ReaderConfig::default();
        assert!((passage.best(&reader) - 0.3).abs() < 1e-12);
        reader.ensemble_rule = EnsembleRule::Mean;
        assert!((passage.best(&reader) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn the_replayed_gate_moves_with_the_bars() {
        let thresholds = AnswerConfig::default().gate_thresholds();
        let mut reader = ReaderConfig::default();
        // The readers agree (0.7) on a passage the reranker scores above the veto: ground.
        let agreed = hop(vec![0.6, 0.2], vec![vec![sentence(0, &[0.7, 0.7], false)]]);
        assert_eq!(agreed.decide(&reader, &thresholds), Gate::Ground);
        reader.ground_threshold = 0.8;
        assert_eq!(agreed.decide(&reader, &thresholds), Gate::Refine);
        // A low reranked score is vetoed unless the readers are surer than the overrule bar.
        let reader = ReaderConfig::default();
        let low = hop(vec![0.1], vec![vec![sentence(2, &[0.999, 0.998], false)]]);
        assert_eq!(low.decide(&reader, &thresholds), Gate::Ground);
        let strict = ReaderConfig {
            veto_overrule_bar: None,
            ..ReaderConfig::default()
        };
        assert_eq!(low.decide(&strict, &thresholds), Gate::Bail);
        // The best sentence follows the settings: a held one counts only past the overrule bar.
        let two = hop(
            vec![0.9],
            vec![vec![
                sentence(0, &[0.5, 0.5], false),
                sentence(1, &[0.97, 0.97], true),
            ]],
        );
        assert_eq!(two.top(&reader), Some((0, 0)));
        let lenient = ReaderConfig {
            overrule_bar: Some(0.95),
            ..ReaderConfig::default()
        };
        assert_eq!(two.top(&lenient), Some((0, 1)));
    }
}
