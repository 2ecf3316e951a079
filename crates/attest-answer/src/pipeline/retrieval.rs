//! The calls the stages make outside the turn: searches through the router, the reranker, the reader and the
//! verifier (the last three on blocking threads: they may run a model), and curated memory's pins.

use std::sync::Arc;

use attest_proto::v1 as pb;

use super::stages::search_request;
use super::{AnswerService, Reads, Turn};
use crate::cite::{check_claims, CheckedClaim};
use crate::claims::split_claims;
use crate::error::AnswerError;
use crate::footnotes::{body, Footnotes};
use crate::memory;
use crate::pool::{Candidate, Source};
use crate::reader::{ReaderError, ToRead};
use crate::rerank::{LexicalReranker, Reranker};
use crate::rewrite::Rewrite;

impl AnswerService {
    /// Runs every query concurrently (k = `search_k`, at most `candidates`); one list of hits per query.
    pub(super) async fn search_all(
        &self,
        turn: &mut Turn<'_>,
        queries: &[Rewrite],
    ) -> Result<Vec<Vec<pb::Hit>>, AnswerError> {
        let k = self.config.search_k.min(self.config.candidates).max(1);
        let searches = queries.iter().map(|r| {
            self.router.search(
                search_request(turn.collection, &r.query, k, &r.lanes),
                turn.request_id,
                turn.caller,
            )
        });
        let mut lists = Vec::with_capacity(queries.len());
        for resp in futures::future::join_all(searches).await {
            let resp = resp.map_err(AnswerError::from_status)?;
            turn.out.fallback_mode |= resp.fallback_mode;
            turn.out.degraded |= resp.degraded;
            lists.push(resp.hits);
        }
        turn.out.hops += 1;
        Ok(lists)
    }

    /// Reranker scores for `hits` against the question. A failing reranker falls back to the lexical one, so
    /// ranking never fails a turn.
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

    /// The scores the coverage gate holds its thresholds against. With the reader: the answerability (best
    /// sentence) of every candidate read this turn, reading the best `reader.passages` not read yet. Without
    /// it, or if reading fails (logged): None, and the gate holds the reranker scores.
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

    /// Curated memory for the question: notes into the response, and the hits of accepted pins' refs (found by a
    /// search with the pinned question, keeping the hits of the ref documents). A memory that cannot embed is
    /// skipped with a warning; a router error is the turn's error.
    pub(super) async fn pins(&self, turn: &mut Turn<'_>) -> Result<Vec<pb::Hit>, AnswerError> {
        if !self.memory.has(turn.collection) {
            return Ok(Vec::new());
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
        let recall = match recalled {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, event = "memory_skipped", "curated memory not consulted");
                return Ok(Vec::new());
            }
        };
        turn.out.notes = recall.notes;
        let mut hits = Vec::new();
        for pin in &recall.pins {
            let request = search_request(
                turn.collection,
                &pin.question,
                self.config.search_k.max(1),
                &[],
            );
            let resp = self
                .router
                .search(request, turn.request_id, turn.caller)
                .await
                .map_err(AnswerError::from_status)?;
            for hit in memory::ref_hits(pin, resp.hits) {
                if !turn.out.pinned.contains(&hit.doc_id) {
                    turn.out.pinned.push(hit.doc_id.clone());
                }
                hits.push(hit);
            }
        }
        Ok(hits)
    }

    /// Claims of `text` scored against the passages they cite, on a blocking thread (a judge back end may call a
    /// model or an HTTP endpoint).
    pub(super) async fn verify(
        &self,
        question: &str,
        text: &str,
        footnotes: &Footnotes,
    ) -> Vec<CheckedClaim> {
        let (verifier, threshold) = (
            Arc::clone(&self.verifier),
            self.config.claim_support_threshold,
        );
        let (q, claims, f) = (question.to_string(), split_claims(text), footnotes.clone());
        attest_telemetry::cpu::run_cpu_intensive(move || {
            check_claims(verifier.as_ref(), threshold, &q, &claims, &f)
        })
        .await
        .unwrap_or_default()
    }
}

fn best(scores: &[f64]) -> f64 {
    scores.iter().copied().fold(0.0, f64::max)
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
