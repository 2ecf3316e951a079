//! `AnswerService::ask`: the pipeline of SPEC "answer" in its order — route (no retrieval → abstain),
//! terminology first, rewrites, structural lookup, curated memory, retrieval over the rewrites with the coverage
//! gate and a CRAG loop of at most `max_hops` retrievals, rerank, the cut with per-kind reserves, footnotes
//! minted per turn, generation, the gauntlet, claim verification with one revision pass, and abstention with a
//! reason and suggestions. Each step is its own module; this one only wires them and keeps the stage latencies.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use attest_embed::Embedder;
use attest_proto::v1 as pb;
use attest_telemetry::metrics::{observe_stage, RAG_ABSTENTION_TOTAL};
use serde::Serialize;

use crate::cite::check_claims;
use crate::cite::{citations, render};
pub use crate::cite::{CheckedClaim, Citation};
use crate::claims::split_claims;
use crate::client::RouterClient;
use crate::config::AnswerConfig;
use crate::error::AnswerError;
use crate::footnotes::{Footnotes, Passage};
use crate::gate::{self, Gate};
use crate::gauntlet::Gauntlet;
use crate::generate::{Generated, GeneratorChain};
use crate::memory::{self, CuratedMemory};
use crate::pool::{merge_round_robin, Candidate, Pool, Source};
use crate::rerank::{LexicalReranker, Reranker};
use crate::reserves;
use crate::rewrite::{self, Rewrite};
use crate::route::{self, Route};
use crate::structural::{self, IdentifierPatterns};
use crate::terminology::{self, Lookup, Terminology, TerminologyReport};
use crate::verifier::Verifier;

/// Stage names of `stage_latency_seconds` and of the response's `latency_ms`.
pub const STAGE_ROUTE: &str = "route";
pub const STAGE_TERMINOLOGY: &str = "terminology";
pub const STAGE_STRUCTURAL: &str = "structural";
pub const STAGE_MEMORY: &str = "memory";
pub const STAGE_RETRIEVE: &str = "retrieve";
pub const STAGE_RERANK: &str = "rerank";
pub const STAGE_GENERATE: &str = "generate";
pub const STAGE_VERIFY: &str = "verify";
pub const STAGE_ASK_TOTAL: &str = "ask_total";

/// The response of SPEC "HTTP API v1" for `ask`.
#[derive(Debug, Clone, Serialize)]
pub struct AskResponse {
    pub status: &'static str,
    pub answer: String,
    pub citations: Vec<Citation>,
    pub claims: Vec<CheckedClaim>,
    pub confidence: f64,
    pub reason: Option<&'static str>,
    pub suggestions: Vec<String>,
    pub fallback_mode: bool,
    pub degraded: bool,
    pub request_id: String,
    /// Retrievals made (the CRAG loop).
    pub hops: usize,
    /// The back end that wrote the answer (`extractive`, `openai`, `gguf`, `glossary`).
    pub generator: &'static str,
    /// `no_retrieval`, `single_hop` or `multi_hop`.
    pub route: &'static str,
    /// The glossary lookup of a definition question; absent for other questions.
    pub terminology: Option<TerminologyReport>,
    /// The glossary could not be consulted in time: any definition in the answer is not glossary-verified.
    pub unverified_terminology: bool,
    /// Curated framing notes for this question: advisory, never cited.
    pub notes: Vec<String>,
    /// Identifiers in the question resolved exactly to passages (structural lookup).
    pub identifiers: Vec<String>,
    /// Documents forced in as refs of a curated pinned question.
    pub pinned: Vec<String>,
    /// The reranker that ranked the candidates.
    pub reranker: &'static str,
    pub latency_ms: BTreeMap<&'static str, f64>,
}

/// Abstention reason codes (SPEC step 12).
pub const NO_RESULTS: &str = "no_results";
pub const LOW_CONFIDENCE: &str = "low_confidence";
pub const UNSUPPORTED_CLAIMS: &str = "unsupported_claims";
pub const MODEL_ABSTAINED: &str = "model_abstained";
pub const TERMINOLOGY_NOT_FOUND: &str = "terminology_not_found";
pub const ROUTED_NO_RETRIEVAL: &str = "routed_no_retrieval";

pub struct AnswerService {
    router: RouterClient,
    verifier: Arc<dyn Verifier>,
    reranker: Arc<dyn Reranker>,
    embedder: Arc<dyn Embedder>,
    generators: Arc<GeneratorChain>,
    identifiers: IdentifierPatterns,
    terminology: Terminology,
    memory: Arc<CuratedMemory>,
    config: AnswerConfig,
}

/// Per-stage latencies of one turn.
struct Clock {
    started: Instant,
    latency: BTreeMap<&'static str, f64>,
}

impl Clock {
    fn record(&mut self, stage: &'static str, elapsed: Duration) {
        observe_stage(stage, elapsed);
        *self.latency.entry(stage).or_default() += elapsed.as_secs_f64() * 1e3;
    }
}

impl AnswerService {
    /// The answer tier over `router`. `reranker` ranks candidates (and re-judges border pins); `embedder` embeds
    /// questions for curated memory. Fails on an invalid identifier pattern or an unreadable memory file.
    pub fn new(
        router: RouterClient,
        verifier: Arc<dyn Verifier>,
        reranker: Arc<dyn Reranker>,
        embedder: Arc<dyn Embedder>,
        config: AnswerConfig,
    ) -> Result<Self, AnswerError> {
        let identifiers = IdentifierPatterns::new(&config.identifier_patterns)
            .map_err(|e| AnswerError::invalid("identifier_patterns", e))?;
        let memory = match &config.memory_file {
            Some(path) => CuratedMemory::load(path, config.memory.clone())
                .map_err(|e| AnswerError::invalid("memory_file", e))?,
            None => CuratedMemory::default(),
        };
        Ok(AnswerService {
            router,
            verifier,
            reranker,
            embedder,
            generators: Arc::new(GeneratorChain::from_config(&config)),
            identifiers,
            terminology: Terminology::new(config.terminology.clone()),
            memory: Arc::new(memory),
            config,
        })
    }

    pub fn config(&self) -> &AnswerConfig {
        &self.config
    }

    /// Glossary lookups answered from the terminology cache so far.
    pub fn terminology_cache_hits(&self) -> u64 {
        self.terminology.cache_hits()
    }

    pub async fn ask(
        &self,
        collection: &str,
        question: &str,
        request_id: &str,
    ) -> Result<AskResponse, AnswerError> {
        let mut clock = Clock {
            started: Instant::now(),
            latency: BTreeMap::new(),
        };
        let question = question.trim();
        if question.is_empty() {
            return Err(AnswerError::invalid("question", "empty"));
        }
        if question.len() > self.config.max_question_bytes {
            return Err(AnswerError::invalid(
                "question",
                format!("longer than {} bytes", self.config.max_question_bytes),
            ));
        }
        let mut out = AskResponse {
            status: "abstained",
            answer: String::new(),
            citations: Vec::new(),
            claims: Vec::new(),
            confidence: 0.0,
            reason: None,
            suggestions: Vec::new(),
            fallback_mode: false,
            degraded: false,
            request_id: request_id.to_string(),
            hops: 0,
            generator: "none",
            route: "",
            terminology: None,
            unverified_terminology: false,
            notes: Vec::new(),
            identifiers: Vec::new(),
            pinned: Vec::new(),
            reranker: self.reranker.name(),
            latency_ms: BTreeMap::new(),
        };

        // 1–2. Route, and the rewrites the route asks for.
        let t = Instant::now();
        let route = route::route(question);
        out.route = route.as_str();
        let rewrites = rewrite::rewrites(question, route, self.config.max_sub_questions);
        clock.record(STAGE_ROUTE, t.elapsed());
        if route == Route::NoRetrieval {
            return Ok(self.abstain(out, ROUTED_NO_RETRIEVAL, Vec::new(), clock));
        }

        // 4. Terminology first (before any retrieval): hit / ambiguous answer from the glossary, miss abstains.
        let term = self
            .config
            .terminology
            .enabled
            .then(|| terminology::definition_term(question, self.config.terminology.max_term_words))
            .flatten();
        if let Some(term) = term {
            let t = Instant::now();
            let looked = self
                .terminology
                .lookup(&self.router, collection, &term, request_id)
                .await;
            clock.record(STAGE_TERMINOLOGY, t.elapsed());
            out.terminology = Some(TerminologyReport::new(&term, &looked));
            out.unverified_terminology = looked.lookup.unverified();
            match looked.lookup {
                Lookup::Miss { mut nearest } => {
                    nearest.truncate(self.config.max_suggestions);
                    return Ok(self.abstain(out, TERMINOLOGY_NOT_FOUND, nearest, clock));
                }
                Lookup::Hit(_) | Lookup::Ambiguous(_) => {
                    let entries = looked.lookup.matches();
                    let text =
                        terminology::definition_text(&entries, self.config.max_answer_sentences);
                    let footnotes =
                        Footnotes::mint(entries.iter().map(|e| passage(&e.hit, 1.0)).collect());
                    out.generator = "glossary";
                    return Ok(self
                        .check_and_answer(collection, out, question, &text, &footnotes, &[], clock)
                        .await);
                }
                Lookup::NoGlossary | Lookup::Timeout | Lookup::Unavailable(_) => {}
            }
        }

        // 3. Structural lookup: identifiers resolved exactly, forced in past the floor.
        let mut forced: Vec<(pb::Hit, Source)> = Vec::new();
        let t = Instant::now();
        for id in self.identifiers.find(question) {
            let hits = structural::resolve(
                &self.router,
                collection,
                &id,
                self.config.identifier_k.max(1),
                request_id,
            )
            .await
            .map_err(AnswerError::from_status)?;
            if !hits.is_empty() {
                out.identifiers.push(id);
                forced.extend(hits.into_iter().map(|h| (h, Source::Identifier)));
            }
        }
        clock.record(STAGE_STRUCTURAL, t.elapsed());

        // 5. Curated memory: accepted pins force their refs in; notes frame, never cited.
        let t = Instant::now();
        for hit in self
            .recall(collection, question, request_id, &mut out)
            .await?
        {
            forced.push((hit, Source::Pin));
        }
        clock.record(STAGE_MEMORY, t.elapsed());

        // 6–8. Retrieval over the rewrites, rerank, coverage gate; refine and retrieve again, ≤ max_hops.
        let mut pool = Pool::default();
        let t = Instant::now();
        for (hit, score, source) in self.score(question, forced).await {
            pool.insert(Candidate { hit, score, source });
        }
        clock.record(STAGE_RERANK, t.elapsed());
        let mut queries = rewrites;
        let mut issued: HashSet<Rewrite> = queries.iter().cloned().collect();
        let mut ranked: Vec<Candidate>;
        let mut gate;
        loop {
            let t = Instant::now();
            let lists = self
                .search_all(collection, &queries, request_id, &mut out)
                .await?;
            let hits = merge_round_robin(
                lists,
                self.config.candidates as usize,
                self.config.noise_floor,
                &pool.chunk_ids(),
            );
            clock.record(STAGE_RETRIEVE, t.elapsed());
            let t = Instant::now();
            for (hit, score, source) in self
                .score(
                    question,
                    hits.into_iter().map(|h| (h, Source::Retrieved)).collect(),
                )
                .await
            {
                pool.insert(Candidate { hit, score, source });
            }
            clock.record(STAGE_RERANK, t.elapsed());
            ranked = pool.ranked();
            gate = if !out.pinned.is_empty() {
                // A curated pin is sufficient evidence by itself (the seed's `assess_sufficiency`).
                Gate::Ground
            } else {
                gate::decide(
                    &ranked.iter().map(|c| c.score).collect::<Vec<_>>(),
                    &self.config,
                )
            };
            if gate != Gate::Refine || out.hops >= self.config.max_hops.max(1) {
                break;
            }
            let titles = ranked.iter().map(|c| c.hit.title.as_str());
            match rewrite::refine(question, out.hops, titles) {
                Some(q)
                    if issued.insert(Rewrite {
                        query: q.clone(),
                        lanes: Vec::new(),
                    }) =>
                {
                    queries = vec![Rewrite {
                        query: q,
                        lanes: Vec::new(),
                    }];
                }
                // Nothing new to ask: another hop would retrieve the same pool.
                _ => break,
            }
        }
        if ranked.is_empty() {
            return Ok(self.abstain(out, NO_RESULTS, Vec::new(), clock));
        }
        let suggestions = self.titles(&ranked);
        if gate != Gate::Ground {
            return Ok(self.abstain(out, LOW_CONFIDENCE, suggestions, clock));
        }

        // 7. The cut: top `passages`, every forced passage, per-kind reserves; then footnotes for this turn.
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
        let footnotes = Footnotes::mint(
            kept.iter()
                .map(|&i| passage(&ranked[i].hit, ranked[i].score))
                .collect(),
        );

        // 9. Generate from the footnoted passages.
        let t = Instant::now();
        let chain = Arc::clone(&self.generators);
        let (q, f, rid) = (
            question.to_string(),
            footnotes.clone(),
            request_id.to_string(),
        );
        let outcome = tokio::task::spawn_blocking(move || {
            attest_telemetry::request_id::with_current(&rid, || chain.generate(&q, &f))
        })
        .await
        .map_err(|e| AnswerError::Unavailable(format!("generator task failed: {e}")))?;
        clock.record(STAGE_GENERATE, t.elapsed());
        out.generator = outcome.generator;
        let composed = match outcome.generated {
            Generated::Text(text) => text,
            Generated::Declined
                if outcome.generator == "extractive" || outcome.generator == "none" =>
            {
                return Ok(self.abstain(out, LOW_CONFIDENCE, suggestions, clock));
            }
            Generated::Declined => {
                return Ok(self.abstain(out, MODEL_ABSTAINED, suggestions, clock))
            }
        };
        Ok(self
            .check_and_answer(
                collection, out, question, &composed, &footnotes, &ranked, clock,
            )
            .await)
    }

    /// Runs every query concurrently (k = `search_k`, at most `candidates`); one list of hits per query.
    async fn search_all(
        &self,
        collection: &str,
        queries: &[Rewrite],
        request_id: &str,
        out: &mut AskResponse,
    ) -> Result<Vec<Vec<pb::Hit>>, AnswerError> {
        let k = self.config.search_k.min(self.config.candidates).max(1);
        let searches = queries.iter().map(|r| {
            self.router.search(
                pb::SearchRequest {
                    collection: collection.to_string(),
                    query: r.query.clone(),
                    k: Some(k),
                    lanes: r.lanes.clone(),
                    ..Default::default()
                },
                request_id,
            )
        });
        let mut lists = Vec::with_capacity(queries.len());
        for resp in futures::future::join_all(searches).await {
            let resp = resp.map_err(AnswerError::from_status)?;
            out.fallback_mode |= resp.fallback_mode;
            out.degraded |= resp.degraded;
            lists.push(resp.hits);
        }
        out.hops += 1;
        Ok(lists)
    }

    /// Reranker scores for `hits` against the question (on a blocking thread: the reranker may run a model).
    /// A failing reranker falls back to the lexical one, so ranking never fails a turn.
    async fn score(
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
        let scored = tokio::task::spawn_blocking(move || {
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

    /// Curated memory for the question: notes into the response, and the hits of accepted pins' refs (found by a
    /// search with the pinned question, keeping the hits of the ref documents). A memory that cannot embed is
    /// skipped with a warning; a router error is the turn's error.
    async fn recall(
        &self,
        collection: &str,
        question: &str,
        request_id: &str,
        out: &mut AskResponse,
    ) -> Result<Vec<pb::Hit>, AnswerError> {
        if !self.memory.has(collection) {
            return Ok(Vec::new());
        }
        let (memory, embedder, judge) = (
            Arc::clone(&self.memory),
            Arc::clone(&self.embedder),
            Arc::clone(&self.reranker),
        );
        let (c, q) = (collection.to_string(), question.to_string());
        let recalled = tokio::task::spawn_blocking(move || {
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
        out.notes = recall.notes;
        let mut hits = Vec::new();
        for pin in &recall.pins {
            let resp = self
                .router
                .search(
                    pb::SearchRequest {
                        collection: collection.to_string(),
                        query: pin.question.clone(),
                        k: Some(self.config.search_k.max(1)),
                        ..Default::default()
                    },
                    request_id,
                )
                .await
                .map_err(AnswerError::from_status)?;
            for hit in memory::ref_hits(pin, resp.hits) {
                if !out.pinned.contains(&hit.doc_id) {
                    out.pinned.push(hit.doc_id.clone());
                }
                hits.push(hit);
            }
        }
        Ok(hits)
    }

    /// Claims of `text` scored against the passages they cite, on a blocking thread (a judge back end may call a
    /// model or an HTTP endpoint).
    async fn verify(&self, question: &str, text: &str, footnotes: &Footnotes) -> Vec<CheckedClaim> {
        let (verifier, threshold) = (
            Arc::clone(&self.verifier),
            self.config.claim_support_threshold,
        );
        let (q, claims, f) = (question.to_string(), split_claims(text), footnotes.clone());
        tokio::task::spawn_blocking(move || {
            check_claims(verifier.as_ref(), threshold, &q, &claims, &f)
        })
        .await
        .unwrap_or_default()
    }

    /// Gauntlet, verification, one revision pass, verification again; then the answer or an abstention.
    ///
    /// Confidence = the weakest claim's support × the reranker score of the best passage it cites (the claim
    /// is only as sure as its evidence), × 0.8 in fallback mode; below the collection's minimum confidence the
    /// turn abstains with `low_confidence`.
    #[allow(clippy::too_many_arguments)]
    async fn check_and_answer(
        &self,
        collection: &str,
        mut out: AskResponse,
        question: &str,
        composed: &str,
        footnotes: &Footnotes,
        ranked: &[Candidate],
        mut clock: Clock,
    ) -> AskResponse {
        let t = Instant::now();
        let mut text_now = Gauntlet::run(composed, footnotes).text;
        let mut checked = self.verify(question, &text_now, footnotes).await;
        if checked.iter().any(|c| !c.supported) {
            let kept: Vec<String> = checked
                .iter()
                .filter(|c| c.supported)
                .map(|c| render(&c.text, &c.citations))
                .collect();
            text_now = Gauntlet::run(&kept.join(" "), footnotes).text;
            checked = self.verify(question, &text_now, footnotes).await;
        }
        clock.record(STAGE_VERIFY, t.elapsed());
        if checked.is_empty() || checked.iter().any(|c| !c.supported) {
            out.claims = checked;
            let suggestions = self.titles(ranked);
            return self.abstain(out, UNSUPPORTED_CLAIMS, suggestions, clock);
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
        out.confidence = if out.fallback_mode {
            confidence * self.config.fallback_confidence_factor
        } else {
            confidence
        };
        out.claims = checked;
        if out.confidence < crate::thresholds::min_confidence(&self.config, collection) {
            let suggestions = self.titles(ranked);
            return self.abstain(out, LOW_CONFIDENCE, suggestions, clock);
        }
        out.citations = citations(&out.claims, footnotes);
        out.answer = text_now;
        out.status = "answered";
        finish(out, clock)
    }

    /// "Did you mean" titles: the distinct titles of the best candidates.
    fn titles(&self, ranked: &[Candidate]) -> Vec<String> {
        let mut titles: Vec<String> = Vec::new();
        for c in ranked {
            if titles.len() >= self.config.max_suggestions {
                break;
            }
            if !c.hit.title.is_empty() && !titles.contains(&c.hit.title) {
                titles.push(c.hit.title.clone());
            }
        }
        titles
    }

    fn abstain(
        &self,
        mut out: AskResponse,
        reason: &'static str,
        suggestions: Vec<String>,
        clock: Clock,
    ) -> AskResponse {
        metrics::counter!(RAG_ABSTENTION_TOTAL, "reason" => reason).increment(1);
        tracing::info!(reason, event = "abstained", "answer abstained");
        out.status = "abstained";
        out.reason = Some(reason);
        out.answer.clear();
        out.citations.clear();
        out.suggestions = suggestions;
        finish(out, clock)
    }
}

fn passage(hit: &pb::Hit, score: f64) -> Passage {
    Passage {
        chunk_id: hit.chunk_id.clone(),
        doc_id: hit.doc_id.clone(),
        title: hit.title.clone(),
        text: hit.text.clone(),
        score,
    }
}

fn finish(mut out: AskResponse, mut clock: Clock) -> AskResponse {
    let total = clock.started.elapsed();
    observe_stage(STAGE_ASK_TOTAL, total);
    clock.latency.insert("total", total.as_secs_f64() * 1e3);
    out.latency_ms = clock.latency;
    out
}
