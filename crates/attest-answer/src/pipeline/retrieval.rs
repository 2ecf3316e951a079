//! The calls the stages make outside the turn: searches through the router (batched: one round trip per shard),
//! the reranker, the reader and the verifier (the last three on blocking threads: they may run a model), and
//! curated memory's pins.

use std::sync::Arc;

use attest_core::limits::MAX_BATCH_SEARCHES;
use attest_proto::v1 as pb;

use super::stages::search_request;
use super::{AnswerService, Reads, Turn};
use crate::cite::{check_claims, CheckedClaim};
use crate::error::AnswerError;
use crate::footnotes::{body, Footnotes};
use crate::memory;
use crate::pool::{Candidate, Source};
use crate::reader::{ReaderError, SentenceRead, ToRead};
use crate::rerank::{readers, LexicalReranker, Reranker};
use crate::rewrite::Rewrite;
use attest_text::claims::split_claims;

impl AnswerService {
    /// The searches of one retrieval hop: one per query (k = `search_k`, at most `candidates`).
    pub(super) fn hop_searches(
        &self,
        collection: &str,
        queries: &[Rewrite],
    ) -> Vec<pb::SearchRequest> {
        let k = self.config.search_k.min(self.config.candidates).max(1);
        queries
            .iter()
            .map(|r| search_request(collection, &r.query, k, &r.lanes))
            .collect()
    }

    /// Runs `searches` for the turn's caller: the searches of a hop (rewrites, identifier lookups, curated pins'
    /// refs) go to the router as one `SearchBatch` per `MAX_BATCH_SEARCHES`, one round trip per shard. One answer
    /// per search, in order; any that fell back to BM25 or missed a shard marks the turn.
    #[tracing::instrument(name = "retrieve", skip_all)]
    pub(super) async fn search_many(
        &self,
        turn: &mut Turn<'_>,
        searches: Vec<pb::SearchRequest>,
    ) -> Result<Vec<pb::SearchResponse>, AnswerError> {
        let (router, request_id, caller) = (&self.router, turn.request_id, turn.caller);
        let batches = searches
            .chunks(MAX_BATCH_SEARCHES)
            .map(|batch| router.search_batch(batch.to_vec(), request_id, caller));
        let answers: Vec<pb::SearchResponse> = futures::future::try_join_all(batches)
            .await
            .map_err(AnswerError::from_status)?
            .into_iter()
            .flatten()
            .collect();
        for resp in &answers {
            turn.out.fallback_mode |= resp.fallback_mode;
            turn.out.degraded |= resp.degraded;
        }
        Ok(answers)
    }

    /// Reranker scores for `hits` against the question. A failing reranker falls back to the lexical one, so
    /// ranking never fails a turn.
    #[tracing::instrument(name = "rerank", skip_all)]
    pub(super) async fn score(
        &self,
        question: &str,
        hits: Vec<(pb::Hit, Source)>,
    ) -> Vec<(pb::Hit, f64, Source)> {
        if hits.is_empty() {
            return Vec::new();
        }
        let reranker = Arc::clone(&self.reranker);
        let q = question.to_string();
        let (hits, sources): (Vec<pb::Hit>, Vec<Source>) = hits.into_iter().unzip();
        let scored = attest_telemetry::cpu::run_cpu_intensive(move || {
            let scores = match reranker.score(&q, &hits) {
                Ok(s) if s.len() == hits.len() => s,
                failed => {
                    let why = failed.err().map_or("wrong number of scores".into(), |e| e.to_string());
                    tracing::warn!(reranker = reranker.name(), error = %why, event = "rerank_failed", "ranking lexically");
                    LexicalReranker.score(&q, &hits).unwrap_or_else(|_| vec![0.0; hits.len()])
                }
            };
            hits.into_iter().zip(scores).collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        scored
            .into_iter()
            .zip(sources)
            .map(|((h, s), src)| (h, s, src))
            .collect()
    }

    /// `ranked` with its best `rerank.readers.depth` reordered by the readers ([`readers`]); as it was when
    /// that is off, without a reader, or if reading fails (logged). The scores stay the reranker's.
    #[tracing::instrument(name = "rerank_readers", skip_all)]
    pub(super) async fn reorder_by_readers(
        &self,
        question: &str,
        ranked: Vec<Candidate>,
    ) -> Vec<Candidate> {
        let settings = self.config.rerank.readers;
        let Some(reader) = self.reader.clone().filter(|_| settings.enabled()) else {
            return ranked;
        };
        let q = question.to_string();
        // The blocking task gets copies of the head's texts, not the candidates: a reading that fails (or a task
        // that dies) leaves `ranked` here as it was, since ranking never fails a turn.
        let head: Vec<(String, String, f64)> = ranked
            .iter()
            .take(settings.depth)
            .map(|c| (c.hit.title.clone(), c.hit.text.clone(), c.score))
            .collect();
        let done = attest_telemetry::cpu::run_cpu_intensive(move || {
            let head: Vec<(ToRead, f64)> = head
                .iter()
                .map(|(title, text, score)| (ToRead { title, text }, *score))
                .collect();
            readers::order(&reader, &settings, &q, &head)
        })
        .await;
        match done {
            Ok(Ok(order)) => {
                let mut ranked = ranked;
                readers::apply_order(&mut ranked, &order);
                ranked
            }
            failed => {
                let why = failed.map_or_else(
                    |e| e.to_string(),
                    |r| r.err().map(|e| e.to_string()).unwrap_or_default(),
                );
                tracing::warn!(error = %why, event = "rerank_readers_failed", "keeping the reranker's order");
                ranked
            }
        }
    }

    /// The scores the coverage gate holds its thresholds against. With the reader: the answerability (best
    /// sentence) of every candidate read this turn, reading the best `reader.passages` not read yet. Without
    /// it, or if reading fails (logged): None, and the gate holds the reranker scores.
    #[tracing::instrument(name = "read", skip_all)]
    pub(super) async fn read(&self, turn: &mut Turn<'_>) -> Option<Vec<f64>> {
        let reader = self.reader.clone()?;
        let todo: Vec<(String, String, String)> = turn
            .ranked
            .iter()
            .filter(|c| !turn.reads.contains_key(&c.hit.chunk_id))
            .take(reader.config().passages)
            .map(|c| {
                let text = body(&c.hit).to_string();
                (c.hit.chunk_id.clone(), c.hit.title.clone(), text)
            })
            .collect();
        if !todo.is_empty() {
            let q = turn.question.to_string();
            let read = attest_telemetry::cpu::run_cpu_intensive(move || {
                let passages: Vec<ToRead> = todo
                    .iter()
                    .map(|(_, title, text)| ToRead { title, text })
                    .collect();
                let scores = reader.read(&q, &passages)?;
                Ok::<_, ReaderError>(
                    todo.into_iter()
                        .map(|(id, _, _)| id)
                        .zip(scores)
                        .collect::<Vec<_>>(),
                )
            })
            .await
            .map_err(|e| ReaderError::Model(e.to_string()))
            .and_then(|r| r);
            match read {
                Ok(scored) => turn.reads.extend(scored),
                Err(e) => {
                    tracing::warn!(error = %e, event = "read_failed", "gating on reranker scores");
                    return None;
                }
            }
        }
        Some(
            turn.ranked
                .iter()
                .filter_map(|c| turn.reads.get(&c.hit.chunk_id).map(|s| best(s)))
                .collect(),
        )
    }

    /// Curated memory for the question: its notes into the response, and the accepted pins (whose refs the
    /// lookups search for). A memory that cannot embed is skipped with a warning.
    pub(super) async fn recall_pins(&self, turn: &mut Turn<'_>) -> Vec<memory::Pin> {
        if !self.memory.has(turn.collection) {
            return Vec::new();
        }
        let (memory, embedder, judge) = (
            Arc::clone(&self.memory),
            Arc::clone(&self.embedder),
            Arc::clone(&self.reranker),
        );
        let (c, q) = (turn.collection.to_string(), turn.question.to_string());
        let recalled = attest_telemetry::cpu::run_cpu_intensive(move || {
            memory.recall(&c, &q, embedder.as_ref(), Some(judge.as_ref()))
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r);
        match recalled {
            Ok(recall) => {
                turn.out.notes = recall.notes;
                recall.pins
            }
            Err(e) => {
                tracing::warn!(error = %e, event = "memory_skipped", "curated memory not consulted");
                Vec::new()
            }
        }
    }

    /// Claims of `text` scored against the passages they cite, on a blocking thread (a judge back end may call a
    /// model or an HTTP endpoint).
    #[tracing::instrument(name = "verify", skip_all)]
    pub(super) async fn verify(
        &self,
        question: &str,
        text: &str,
        footnotes: &Footnotes,
    ) -> Vec<CheckedClaim> {
        let (verifier, cutoffs) = (Arc::clone(&self.verifier), self.config.cutoffs());
        let (q, claims, f) = (question.to_string(), split_claims(text), footnotes.clone());
        attest_telemetry::cpu::run_cpu_intensive(move || {
            check_claims(verifier.as_ref(), cutoffs, &q, &claims, &f)
        })
        .await
        .unwrap_or_default()
    }
}

fn best(reads: &[SentenceRead]) -> f64 {
    reads.iter().map(|r| r.answerability).fold(0.0, f64::max)
}

/// The candidates the reader read first, by answerability (their score becomes it), then the others in
/// reranker order.
pub(super) fn answerable_first(ranked: Vec<Candidate>, reads: &Reads) -> Vec<Candidate> {
    if reads.is_empty() {
        return ranked;
    }
    let (mut read, rest): (Vec<Candidate>, Vec<Candidate>) = ranked
        .into_iter()
        .partition(|c| reads.contains_key(&c.hit.chunk_id));
    for c in &mut read {
        c.score = best(&reads[&c.hit.chunk_id]);
    }
    read.sort_by(|a, b| b.score.total_cmp(&a.score));
    read.extend(rest);
    read
}
