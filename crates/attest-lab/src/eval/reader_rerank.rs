//! The readers as a second-stage reranker, measured (issue 70: "hybrid + rerank on shift-reddit ≥ 0.65"): the
//! lane `hybrid_rerank_reader` of `attest-lab eval --reader-rerank DEPTH`, the learned reranker's best `depth`
//! candidates reordered as the answer tier reorders them under `answer.rerank.readers`
//! ([`attest_answer::rerank::readers`]), with the readers the stack's answer tier loaded.

use attest_answer::reader::Reader;
use attest_answer::rerank::readers::{self, ReaderRerankConfig};
use attest_node::local::LocalStack;
use attest_proto::v1 as pb;

/// The answer tier's readers, and how they reorder.
pub struct ReaderRerank {
    reader: Reader,
    settings: ReaderRerankConfig,
}

impl ReaderRerank {
    /// The configured reordering with the flags' depth, and their weight and sentences where given; refused
    /// when out of range (before a cluster is started).
    pub fn settings(
        configured: &ReaderRerankConfig,
        depth: usize,
        weight: Option<f64>,
        sentences: Option<usize>,
    ) -> anyhow::Result<ReaderRerankConfig> {
        anyhow::ensure!(depth > 0, "--reader-rerank must be at least 1");
        let settings = ReaderRerankConfig {
            depth,
            weight: weight.unwrap_or(configured.weight),
            sentences: sentences.unwrap_or(configured.sentences),
        };
        settings.validate().map_err(anyhow::Error::msg)?;
        Ok(settings)
    }

    /// Reorders with the readers `stack`'s answer tier loaded (a clone shares their weights).
    pub fn new(stack: &LocalStack, settings: ReaderRerankConfig) -> anyhow::Result<Self> {
        let reader = stack.answer.reader().cloned().ok_or_else(|| {
            anyhow::anyhow!("--reader-rerank needs a reader (answer.reader.backend is lexical)")
        })?;
        Ok(ReaderRerank { reader, settings })
    }

    /// `ranked` (best first, with the learned reranker's scores), its first `depth` reordered. Blocking: the
    /// readers run here.
    pub fn reorder(
        &self,
        question: &str,
        mut ranked: Vec<(pb::Hit, f64)>,
    ) -> anyhow::Result<Vec<pb::Hit>> {
        readers::reorder(
            &self.reader,
            &self.settings,
            question,
            &mut ranked,
            |(hit, _)| hit,
            |(_, score)| *score,
        )?;
        Ok(ranked.into_iter().map(|(hit, _)| hit).collect())
    }
}
