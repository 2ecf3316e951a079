//! The stages of one turn, in their order (see the module header of [`super`]). Each records its latency; a
//! stage that ends the turn returns `ControlFlow::Break(response)`.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Instant;

use attest_proto::v1 as pb;

use super::{
    finish, on_a_blocking_thread, passage, AnswerService, Flow, Reads, Turn, LOW_CONFIDENCE,
    MODEL_ABSTAINED, NO_RESULTS, OUT_OF_CORPUS, ROUTED_NO_RETRIEVAL, STAGE_GAUNTLET,
    STAGE_GENERATE, STAGE_MEMORY, STAGE_READ, STAGE_RERANK, STAGE_RETRIEVE, STAGE_ROUTE,
    STAGE_STRUCTURAL, STAGE_TERMINOLOGY, STAGE_VERIFY, TERMINOLOGY_NOT_FOUND, UNRESOLVED_REFERENCE,
    UNSUPPORTED_CLAIMS,
};
use crate::cite::{citations, render, render_checked, CheckedClaim};
use crate::conversation;
use crate::error::AnswerError;
use crate::footnotes::{Footnotes, Passage};
use crate::gate::{self, Gate};
use crate::gate_trace::{self, HopTrace, ReadPassage};
use crate::gauntlet::Gauntlet;
use crate::generate::Generated;
use crate::memory;
use crate::out_of_corpus;
use crate::pool::{merge_round_robin, Candidate, Pool, Source};
use crate::reserves;
use crate::rewrite::{self, Rewrite};
use crate::route::{self, Route};
use crate::structural;
use crate::terminology::{self, Lookup, TerminologyReport};
use crate::verdict::{PartialPolicy, Verdict, VerdictCounts};

impl AnswerService {
    /// Steps 1–2: Route, and the rewrites the route asks for; a question that needs no retrieval abstains, and so
    /// does one that refers to a person it does not name (no earlier turn said who: retrieving for "he" would
    /// answer about whoever ranks first).
    pub(super) fn route_and_rewrite(&self, turn: &mut Turn) -> Flow {
        let t = Instant::now();
        turn.route = route::route(turn.question);
        turn.out.route = turn.route.as_str();
        turn.queries = rewrite::rewrites(turn.question, turn.route, self.config.max_sub_questions);
        turn.record(STAGE_ROUTE, t);
        if turn.route == Route::NoRetrieval {
            return ControlFlow::Break(self.abstain(turn, ROUTED_NO_RETRIEVAL, Vec::new()));
        }
        if conversation::unresolved_reference(turn.question).is_some() {
            return ControlFlow::Break(self.abstain(turn, UNRESOLVED_REFERENCE, Vec::new()));
        }
        ControlFlow::Continue(())
    }

    /// Step 4: Terminology first (before any retrieval): a hit or an ambiguous term is answered from the glossary, a
    /// miss abstains; no glossary, a timeout or an error goes on to retrieval.
    #[tracing::instrument(name = "terminology", skip_all)]
    pub(super) async fn terminology_first(&self, turn: &mut Turn<'_>) -> Flow {
        let Some(term) = self
            .config
            .terminology
            .enabled
            .then(|| {
                terminology::definition_term(turn.question, self.config.terminology.max_term_words)
            })
            .flatten()
        else {
            return ControlFlow::Continue(());
        };
        let t = Instant::now();
        let looked = self
            .terminology
            .lookup(
                &self.router,
                turn.collection,
                &term,
                turn.request_id,
                turn.caller,
            )
            .await;
        turn.record(STAGE_TERMINOLOGY, t);
        turn.out.terminology = Some(TerminologyReport::new(&term, &looked));
        turn.out.unverified_terminology = looked.lookup.unverified();
        match looked.lookup {
            Lookup::Miss { mut nearest } => {
                nearest.truncate(self.config.max_suggestions);
                ControlFlow::Break(self.abstain(turn, TERMINOLOGY_NOT_FOUND, nearest))
            }
            Lookup::Hit(_) | Lookup::Ambiguous(_) => {
                let entries = looked.lookup.matches();
                let text = terminology::definition_text(&entries, self.config.max_answer_sentences);
                let footnotes =
                    Footnotes::mint(entries.iter().map(|e| passage(&e.hit, 1.0)).collect());
                turn.out.generator = "glossary";
                ControlFlow::Break(self.check_and_answer(turn, &text, &footnotes).await)
            }
            Lookup::NoGlossary | Lookup::Timeout | Lookup::Unavailable(_) => {
                ControlFlow::Continue(())
            }
        }
    }

    /// Steps 3 and 5: Lookups that force passages in past the floor: identifiers resolved exactly (structural), and
    /// the refs of accepted curated pins (their notes frame the answer, never cited). Their searches and the first
    /// retrieval's go to the router together, one round trip per shard; the first retrieval's lists wait in the
    /// turn for [`Self::recall`].
    #[tracing::instrument(name = "lookups", skip_all)]
    pub(super) async fn lookups(&self, turn: &mut Turn<'_>) -> Result<(), AnswerError> {
        let t = Instant::now();
        let pins = self.recall_pins(turn).await;
        turn.record(STAGE_MEMORY, t);
        let t = Instant::now();
        let identifiers = self.identifiers.find(turn.question);
        let k = self.config.identifier_k.max(1);
        let mut searches: Vec<pb::SearchRequest> = identifiers
            .iter()
            .map(|id| structural::search_for(turn.collection, id, k))
            .collect();
        searches.extend(pins.iter().map(|pin| {
            search_request(
                turn.collection,
                &pin.question,
                self.config.search_k.max(1),
                &[],
            )
        }));
        searches.extend(self.hop_searches(turn.collection, &turn.queries));
        let mut answers = self.search_many(turn, searches).await?.into_iter();
        turn.record(STAGE_RETRIEVE, t);
        let t = Instant::now();
        for (id, resp) in identifiers.into_iter().zip(answers.by_ref()) {
            let hits = structural::matching(&id, resp.hits);
            if !hits.is_empty() {
                turn.out.identifiers.push(id);
                turn.forced
                    .extend(hits.into_iter().map(|h| (h, Source::Identifier)));
            }
        }
        turn.record(STAGE_STRUCTURAL, t);
        for (pin, resp) in pins.iter().zip(answers.by_ref()) {
            for hit in memory::ref_hits(pin, resp.hits) {
                if !turn.out.pinned.contains(&hit.doc_id) {
                    turn.out.pinned.push(hit.doc_id.clone());
                }
                turn.forced.push((hit, Source::Pin));
            }
        }
        turn.prefetched = Some(answers.map(|r| r.hits).collect());
        Ok(())
    }

    /// Steps 6–8: Retrieval over the rewrites, rerank, read, the coverage gate; refine the query and retrieve again,
    /// at most `max_hops` retrievals. Ends the turn when nothing was found or the gate does not ground.
    #[tracing::instrument(name = "recall", skip_all)]
    pub(super) async fn recall(&self, turn: &mut Turn<'_>) -> Result<Flow, AnswerError> {
        let mut pool = Pool::default();
        let t = Instant::now();
        let forced = std::mem::take(&mut turn.forced);
        for (hit, score, source) in self.score(turn.question, forced).await {
            pool.insert(Candidate { hit, score, source });
        }
        turn.record(STAGE_RERANK, t);
        let mut issued: HashSet<Rewrite> = turn.queries.iter().cloned().collect();
        let gate = loop {
            let t = Instant::now();
            let queries = std::mem::take(&mut turn.queries);
            let lists = match turn.prefetched.take() {
                Some(lists) => lists,
                None => {
                    let searches = self.hop_searches(turn.collection, &queries);
                    let answers = self.search_many(turn, searches).await?;
                    answers.into_iter().map(|r| r.hits).collect()
                }
            };
            turn.out.hops += 1;
            let hits = merge_round_robin(
                lists,
                self.config.candidates as usize,
                self.config.noise_floor,
                &pool.chunk_ids(),
            );
            turn.record(STAGE_RETRIEVE, t);
            let t = Instant::now();
            let retrieved = hits.into_iter().map(|h| (h, Source::Retrieved)).collect();
            for (hit, score, source) in self.score(turn.question, retrieved).await {
                pool.insert(Candidate { hit, score, source });
            }
            turn.ranked = self.reorder_by_readers(turn.question, pool.ranked()).await;
            turn.record(STAGE_RERANK, t);
            if let Some(to) = turn.sources_to.take() {
                // The client may be gone; the turn goes on regardless (its response is counted and logged).
                let _ = to.send(super::AskSources::of(&turn.ranked));
            }
            let t = Instant::now();
            let answerability = self.read(turn).await;
            turn.record(STAGE_READ, t);
            let reranked: Vec<f64> = turn.ranked.iter().map(|c| c.score).collect();
            let gate = match (&answerability, &self.reader) {
                // A curated pin is sufficient evidence by itself (the seed's `assess_sufficiency`).
                _ if !turn.out.pinned.is_empty() => Gate::Ground,
                (Some(scores), Some(reader)) => gate_trace::decide(
                    &reranked,
                    scores,
                    &self.config.gate_thresholds(),
                    reader.config(),
                ),
                _ => gate::decide(&reranked, &self.config.gate_thresholds()),
            };
            // What the gate saw, so an abstention can be read back to the score that made it.
            let finite = |best: f64| best.is_finite().then_some(best);
            tracing::debug!(
                event = "coverage_gate",
                request_id = %turn.request_id,
                hop = turn.out.hops,
                answerability = answerability.as_deref().map(gate::best).and_then(finite),
                reranked = finite(gate::best(&reranked)),
                gate = ?gate,
            );
            // A pinned turn grounds on its pin, not on what was read: nothing to replay.
            if answerability.is_some() && turn.out.pinned.is_empty() {
                let hop = HopTrace {
                    hop: turn.out.hops,
                    reranked,
                    passages: read_passages(&turn.ranked, &turn.reads),
                    gate,
                };
                turn.out.gate_trace.push(hop);
            }
            if gate != Gate::Refine || turn.out.hops >= self.config.max_hops.max(1) {
                break gate;
            }
            let titles = turn.ranked.iter().map(|c| c.hit.title.as_str());
            match rewrite::refine(turn.question, turn.out.hops, titles) {
                Some(query)
                    if issued.insert(Rewrite {
                        query: query.clone(),
                        lanes: Vec::new(),
                    }) =>
                {
                    turn.queries = vec![Rewrite {
                        query,
                        lanes: Vec::new(),
                    }];
                }
                // Nothing new to ask: another hop would retrieve the same pool.
                _ => break gate,
            }
        };
        if turn.ranked.is_empty() {
            if let Some(done) = self.out_of_corpus(turn).await {
                return Ok(ControlFlow::Break(done));
            }
            return Ok(ControlFlow::Break(self.abstain(
                turn,
                NO_RESULTS,
                Vec::new(),
            )));
        }
        turn.ranked =
            super::retrieval::answerable_first(std::mem::take(&mut turn.ranked), &turn.reads);
        if gate == Gate::Bail {
            if let Some(done) = self.out_of_corpus(turn).await {
                return Ok(ControlFlow::Break(done));
            }
        }
        if gate != Gate::Ground {
            let suggestions = self.titles(turn);
            return Ok(ControlFlow::Break(self.abstain(
                turn,
                LOW_CONFIDENCE,
                suggestions,
            )));
        }
        Ok(ControlFlow::Continue(()))
    }

    /// The collection does not cover the question: a general-knowledge answer from the configured LLM, when the
    /// collection opted in (see [`out_of_corpus`]); `None` leaves the abstention to the caller.
    async fn out_of_corpus(&self, turn: &mut Turn<'_>) -> Option<crate::AskResponse> {
        let chat = self.chat.as_ref()?;
        if !self.config.policy(turn.collection).out_of_corpus {
            return None;
        }
        let t = Instant::now();
        let (chat, q) = (Arc::clone(chat), turn.question.to_string());
        let max_tokens = self.config.out_of_corpus.max_tokens;
        let text = on_a_blocking_thread(turn.request_id, move || {
            out_of_corpus::answer(&chat, &q, max_tokens)
        })
        .await
        .ok()
        .flatten();
        turn.record(STAGE_GENERATE, t);
        let text = text?;
        self.count_abstention(turn, OUT_OF_CORPUS);
        let suggestions = self.titles(turn);
        let out = &mut turn.out;
        out.status = "out_of_corpus";
        out.reason = Some(OUT_OF_CORPUS);
        out.answer = out_of_corpus::with_disclaimer(&text);
        out.disclaimer = Some(out_of_corpus::DISCLAIMER);
        out.generator = "openai";
        out.citations.clear();
        out.claims.clear();
        out.confidence = 0.0;
        out.suggestions = suggestions;
        Some(finish(turn))
    }

    /// Step 7: The cut: the top `passages`, every forced passage, per-kind reserves; footnotes minted for this turn,
    /// each read passage with its sentences' answerability.
    pub(super) fn cut(&self, turn: &Turn) -> Footnotes {
        let ranked = &turn.ranked;
        let kinds: Vec<Option<String>> = ranked.iter().map(Candidate::kind).collect();
        let items: Vec<reserves::Item> = ranked
            .iter()
            .zip(&kinds)
            .map(|(c, k)| reserves::Item {
                kind: k.as_deref(),
                forced: c.source.is_forced(),
            })
            .collect();
        let kept = reserves::select(
            &items,
            self.config.passages,
            &self.config.reserve_kinds,
            self.config.reserve_per_kind,
        );
        Footnotes::mint(
            kept.iter()
                .map(|&i| {
                    let c = &ranked[i];
                    Passage {
                        sentence_reads: turn.reads.get(&c.hit.chunk_id).cloned(),
                        ..passage(&c.hit, c.score)
                    }
                })
                .collect(),
        )
    }

    /// Step 9: Generate from the footnoted passages (on a blocking thread). A back end that declines ends the turn.
    #[tracing::instrument(name = "generate", skip_all)]
    pub(super) async fn generate(
        &self,
        turn: &mut Turn<'_>,
        footnotes: &Footnotes,
    ) -> Result<Flow<String>, AnswerError> {
        let t = Instant::now();
        let chain = Arc::clone(&self.generators);
        let (q, f) = (turn.question.to_string(), footnotes.clone());
        let outcome = on_a_blocking_thread(turn.request_id, move || chain.generate(&q, &f))
            .await
            .map_err(|e| AnswerError::Unavailable(format!("generator task failed: {e}")))?;
        turn.record(STAGE_GENERATE, t);
        turn.out.generator = outcome.generator;
        let reason = match outcome.generated {
            Generated::Text(text) => return Ok(ControlFlow::Continue(text)),
            Generated::Declined if matches!(outcome.generator, "extractive" | "none") => {
                LOW_CONFIDENCE
            }
            Generated::Declined => MODEL_ABSTAINED,
        };
        let suggestions = self.titles(turn);
        Ok(ControlFlow::Break(self.abstain(turn, reason, suggestions)))
    }

    /// Steps 10–12: The gauntlet, verification, one revision pass (claims the collection's policy does not keep
    /// dropped: unsupported ones, and partial ones under `drop`) and verification again; then the decision: the
    /// answer (partial claims kept under `mark` are marked in it), or an abstention.
    ///
    /// Confidence = the weakest claim's support × the score of the best passage it cites (the reader's
    /// answerability when it read the passage: the claim is only as sure as its evidence), × 0.8 in fallback
    /// mode; below the collection's minimum confidence the turn abstains with `low_confidence`.
    #[tracing::instrument(name = "verify_and_answer", skip_all)]
    pub(super) async fn check_and_answer(
        &self,
        turn: &mut Turn<'_>,
        composed: &str,
        footnotes: &Footnotes,
    ) -> crate::AskResponse {
        let policy = self.config.policy(turn.collection);
        let keep = |c: &CheckedClaim| match c.verdict {
            Verdict::Supported => true,
            Verdict::Partial => policy.partial_claims == PartialPolicy::Mark,
            Verdict::Unsupported => false,
        };
        let t = Instant::now();
        let mut text_now = Gauntlet::run(composed, footnotes).text;
        turn.record(STAGE_GAUNTLET, t);
        let t = Instant::now();
        let mut checked = self.verify(turn.question, &text_now, footnotes).await;
        let mut dropped: Vec<CheckedClaim> = Vec::new();
        if checked.iter().any(|c| !keep(c)) {
            let (kept, gone): (Vec<CheckedClaim>, Vec<CheckedClaim>) =
                checked.into_iter().partition(|c| keep(c));
            dropped = gone;
            let kept: Vec<String> = kept.iter().map(|c| render(&c.text, &c.citations)).collect();
            text_now = Gauntlet::run(&kept.join(" "), footnotes).text;
            checked = self.verify(turn.question, &text_now, footnotes).await;
        }
        turn.record(STAGE_VERIFY, t);
        turn.out.verdicts = VerdictCounts::of(checked.iter().chain(&dropped).map(|c| &c.verdict));
        turn.out.dropped_claims = dropped;
        if checked.is_empty() || checked.iter().any(|c| !keep(c)) {
            turn.out.claims = checked;
            let suggestions = self.titles(turn);
            return self.abstain(turn, UNSUPPORTED_CLAIMS, suggestions);
        }
        if checked.iter().any(|c| c.verdict == Verdict::Partial) {
            text_now = checked
                .iter()
                .map(render_checked)
                .collect::<Vec<_>>()
                .join(" ");
        }
        let confidence = checked
            .iter()
            .map(|c| {
                let evidence = c
                    .citations
                    .iter()
                    .filter_map(|n| footnotes.get(*n))
                    .map(|p| p.score.clamp(0.0, 1.0))
                    .fold(0.0, f64::max);
                c.support * evidence
            })
            .fold(1.0, f64::min);
        turn.out.confidence = if turn.out.fallback_mode {
            confidence * self.config.fallback_confidence_factor
        } else {
            confidence
        };
        turn.out.claims = checked;
        if turn.out.confidence
            < self
                .thresholds
                .min_confidence(turn.collection, self.config.min_confidence)
        {
            let suggestions = self.titles(turn);
            return self.abstain(turn, LOW_CONFIDENCE, suggestions);
        }
        turn.out.citations = citations(&turn.out.claims, footnotes);
        turn.out.answer = text_now;
        turn.out.status = "answered";
        finish(turn)
    }

    /// "Did you mean" titles: the distinct titles of the best candidates that name something the question
    /// names (a title sharing no content word with the question is no suggestion, only noise).
    pub(super) fn titles(&self, turn: &Turn) -> Vec<String> {
        let asked = attest_text::text::content_set(turn.question);
        let mut titles: Vec<String> = Vec::new();
        for c in &turn.ranked {
            if titles.len() >= self.config.max_suggestions {
                break;
            }
            let near = attest_text::text::content_set(&attest_models::reader::input::title_text(
                &c.hit.title,
            ))
            .iter()
            .any(|w| asked.contains(w));
            if near && !titles.contains(&c.hit.title) {
                titles.push(c.hit.title.clone());
            }
        }
        titles
    }
}

/// The fusion the answer tier searches with: plain RRF, both lanes weight 1 — what its reranker, readers and
/// thresholds were chosen on. The router's default lane weights (`router.lane_weights`, dense 0.3) serve search
/// callers; under them the squad sample's answer-removed questions were answered 10 of 40 times against 8
/// (docs/decisions/embedders.md), so the answer tier keeps its own until it is re-chosen with them.
pub const ANSWER_LANE_WEIGHTS: [(&str, f64); 2] = [("dense", 1.0), ("bm25", 1.0)];

/// The hits of one search request (a helper for the stages above).
pub(super) fn search_request(
    collection: &str,
    query: &str,
    k: u32,
    lanes: &[String],
) -> pb::SearchRequest {
    pb::SearchRequest {
        collection: collection.to_string(),
        query: query.to_string(),
        k: Some(k),
        lanes: lanes.to_vec(),
        weights: ANSWER_LANE_WEIGHTS
            .iter()
            .map(|(lane, w)| (lane.to_string(), *w))
            .collect(),
        ..Default::default()
    }
}

/// The read passages of `ranked`, in ranked order, with the readings of their read sentences.
fn read_passages(ranked: &[Candidate], reads: &Reads) -> Vec<ReadPassage> {
    ranked
        .iter()
        .filter_map(|c| {
            let read = reads.get(&c.hit.chunk_id)?;
            let sentences = attest_text::text::sentences(crate::footnotes::body(&c.hit));
            Some(ReadPassage::of(&c.hit.doc_id, &sentences, read))
        })
        .collect()
}
