//! The readers as a second-stage reranker, measured (issue 70: "hybrid + rerank on shift-reddit ≥ 0.65"): the
//! learned reranker's best `depth` candidates reordered by how sure the configured readers are that one of a
//! candidate's sentences answers the question — the readers read the question and the passage together, as a
//! cross-encoder does, which the learned reranker's features cannot. An evaluation lane (`hybrid_rerank_reader`
//! of `attest-lab eval --reader-rerank DEPTH`), not a serving path: whether the answer tier should rank this way
//! is decided from what it measures.

use attest_answer::reader::{Reader, ToRead};
use attest_answer::AnswerConfig;
use attest_proto::v1 as pb;

/// The readers, and how their reading is mixed with the learned reranker's score.
pub struct ReaderRerank {
    reader: Reader,
    depth: usize,
    /// The readers' share of a candidate's score: `weight · answerability + (1 − weight) · reranked score`
    /// (both probabilities in 0..1).
    weight: f64,
}

impl ReaderRerank {
    /// The readers `config` names (the answer tier's own, ensemble included). Blocking: weights are loaded.
    pub fn load(config: &AnswerConfig, depth: usize, weight: f64) -> anyhow::Result<Self> {
        anyhow::ensure!(depth > 0, "--reader-rerank must be at least 1");
        anyhow::ensure!(
            (0.0..=1.0).contains(&weight),
            "--reader-rerank-weight must be in 0..1, not {weight}"
        );
        let reader = Reader::from_config(&config.reader)?.ok_or_else(|| {
            anyhow::anyhow!("--reader-rerank needs a reader (answer.reader.backend is lexical)")
        })?;
        Ok(ReaderRerank {
            reader,
            depth,
            weight,
        })
    }

    /// `ranked` (best first, with the learned reranker's scores) with its first `depth` reordered by the mixed
    /// score; ties keep the reranked order, and the rest follow unchanged. Blocking: the readers run here.
    pub fn reorder(
        &self,
        question: &str,
        ranked: Vec<(pb::Hit, f64)>,
    ) -> anyhow::Result<Vec<pb::Hit>> {
        let head = ranked.len().min(self.depth);
        let mut scored: Vec<(f64, usize, pb::Hit)> = Vec::with_capacity(ranked.len());
        for (i, (hit, reranked)) in ranked.into_iter().enumerate() {
            let score = if i < head {
                let answerability = self.answerability(question, &hit)?;
                self.weight * answerability + (1.0 - self.weight) * reranked
            } else {
                // Below every reordered candidate, in their reranked order.
                f64::NEG_INFINITY
            };
            scored.push((score, i, hit));
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        Ok(scored.into_iter().map(|(_, _, h)| h).collect())
    }

    /// The best answerability of a passage's sentences, the passage read alone (so that each candidate gets
    /// the answer tier's whole reading budget, `reader.max_sentences`, and its rules).
    fn answerability(&self, question: &str, hit: &pb::Hit) -> anyhow::Result<f64> {
        let read = self.reader.read(
            question,
            &[ToRead {
                title: &hit.title,
                text: &hit.text,
            }],
        )?;
        Ok(read
            .iter()
            .flatten()
            .map(|s| s.answerability)
            .fold(0.0, f64::max))
    }
}
