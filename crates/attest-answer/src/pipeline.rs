//! `AnswerService::ask`: the pipeline of SPEC "answer" as far as it is built — retrieval through the router
//! with the coverage gate and a CRAG loop of at most `max_hops` retrievals, footnotes minted per turn, the
//! extractive composer, the gauntlet, claim verification with one revision pass, and abstention with a reason
//! and suggestions. Each step is its own module; this one only wires them and keeps the stage latencies.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use attest_proto::v1 as pb;
use attest_telemetry::metrics::{
    observe_stage, CLAIMS_CHECKED_TOTAL, CLAIMS_UNSUPPORTED_TOTAL, RAG_ABSTENTION_TOTAL,
};
use serde::Serialize;

use crate::claims::{split_claims, Claim};
use crate::client::RouterClient;
use crate::config::AnswerConfig;
use crate::error::AnswerError;
use crate::footnotes::{Footnotes, Passage};
use crate::gauntlet::Gauntlet;
use crate::generate::{Generated, GeneratorChain};
use crate::relevance::passage_relevance;
use crate::text;
use crate::verifier::Verifier;

/// Stage names of `stage_latency_seconds` and of the response's `latency_ms`.
pub const STAGE_RETRIEVE: &str = "retrieve";
pub const STAGE_GENERATE: &str = "generate";
pub const STAGE_VERIFY: &str = "verify";
pub const STAGE_ASK_TOTAL: &str = "ask_total";

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Citation {
    pub n: u32,
    pub chunk_id: String,
    pub doc_id: String,
    pub title: String,
    /// The passage sentence the answer relies on.
    pub quote: String,
    pub score: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CheckedClaim {
    pub text: String,
    pub citations: Vec<u32>,
    pub support: f64,
    pub supported: bool,
}

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
    /// The back end that wrote the answer (`extractive`, `openai`).
    pub generator: &'static str,
    pub latency_ms: BTreeMap<&'static str, f64>,
}

/// Abstention reason codes (SPEC step 12).
pub const NO_RESULTS: &str = "no_results";
pub const LOW_CONFIDENCE: &str = "low_confidence";
pub const UNSUPPORTED_CLAIMS: &str = "unsupported_claims";
pub const MODEL_ABSTAINED: &str = "model_abstained";

pub struct AnswerService {
    router: RouterClient,
    verifier: Arc<dyn Verifier>,
    generators: Arc<GeneratorChain>,
    config: AnswerConfig,
}

/// A retrieved passage with its relevance to the question.
#[derive(Clone)]
struct Candidate {
    hit: pb::Hit,
    relevance: f64,
}

/// What the coverage gate says about the pool.
#[derive(Debug, PartialEq)]
enum Gate {
    Ground,
    Bail,
    Refine,
}

impl AnswerService {
    pub fn new(router: RouterClient, verifier: Arc<dyn Verifier>, config: AnswerConfig) -> Self {
        AnswerService {
            router,
            verifier,
            generators: Arc::new(GeneratorChain::from_config(&config)),
            config,
        }
    }

    pub fn config(&self) -> &AnswerConfig {
        &self.config
    }

    fn gate(&self, ranked: &[Candidate]) -> Gate {
        let best = ranked.first().map_or(0.0, |c| c.relevance);
        let supporting = ranked
            .iter()
            .filter(|c| c.relevance >= self.config.ground_with_support_threshold)
            .count();
        if best >= self.config.ground_threshold
            || (best >= self.config.ground_with_support_threshold
                && supporting >= self.config.min_supporting)
        {
            Gate::Ground
        } else if best < self.config.bail_threshold && !ranked.is_empty() {
            Gate::Bail
        } else {
            Gate::Refine
        }
    }

    pub async fn ask(
        &self,
        collection: &str,
        question: &str,
        request_id: &str,
    ) -> Result<AskResponse, AnswerError> {
        let started = Instant::now();
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
        let mut latency: BTreeMap<&'static str, f64> = BTreeMap::new();
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
            latency_ms: BTreeMap::new(),
        };

        // Retrieval with the coverage gate: ground, bail, or refine the query and retrieve again.
        let retrieve_started = Instant::now();
        let mut pool: HashMap<String, Candidate> = HashMap::new();
        let mut ranked: Vec<Candidate> = Vec::new();
        let mut gate = Gate::Refine;
        while out.hops < self.config.max_hops.max(1) {
            let query = refine(question, out.hops, &ranked);
            let resp = self
                .router
                .search(
                    pb::SearchRequest {
                        collection: collection.to_string(),
                        query,
                        k: Some(self.config.candidates),
                        ..Default::default()
                    },
                    request_id,
                )
                .await
                .map_err(AnswerError::from_status)?;
            out.hops += 1;
            out.fallback_mode |= resp.fallback_mode;
            out.degraded |= resp.degraded;
            for hit in resp.hits {
                let relevance = passage_relevance(question, &hit.title, &hit.text);
                let keep = pool
                    .get(&hit.chunk_id)
                    .is_none_or(|c| c.relevance < relevance);
                if keep {
                    pool.insert(hit.chunk_id.clone(), Candidate { hit, relevance });
                }
            }
            ranked = pool.values().cloned().collect();
            ranked.sort_by(|a, b| {
                b.relevance
                    .total_cmp(&a.relevance)
                    .then(b.hit.score.total_cmp(&a.hit.score))
                    .then(a.hit.chunk_id.cmp(&b.hit.chunk_id))
            });
            gate = self.gate(&ranked);
            if gate != Gate::Refine {
                break;
            }
        }
        let retrieve_elapsed = retrieve_started.elapsed();
        observe_stage(STAGE_RETRIEVE, retrieve_elapsed);
        latency.insert(STAGE_RETRIEVE, ms(retrieve_elapsed));

        if ranked.is_empty() {
            return Ok(self.abstain(out, NO_RESULTS, &ranked, latency, started));
        }
        if gate != Gate::Ground {
            return Ok(self.abstain(out, LOW_CONFIDENCE, &ranked, latency, started));
        }

        // Generate from footnoted passages.
        let generate_started = Instant::now();
        let footnotes = Footnotes::mint(
            ranked
                .iter()
                .take(self.config.passages)
                .map(|c| Passage {
                    chunk_id: c.hit.chunk_id.clone(),
                    doc_id: c.hit.doc_id.clone(),
                    title: c.hit.title.clone(),
                    text: c.hit.text.clone(),
                    score: c.relevance,
                })
                .collect(),
        );
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
        let generate_elapsed = generate_started.elapsed();
        observe_stage(STAGE_GENERATE, generate_elapsed);
        latency.insert(STAGE_GENERATE, ms(generate_elapsed));
        out.generator = outcome.generator;
        let composed = match outcome.generated {
            Generated::Text(text) => text,
            Generated::Declined
                if outcome.generator == "extractive" || outcome.generator == "none" =>
            {
                return Ok(self.abstain(out, LOW_CONFIDENCE, &ranked, latency, started));
            }
            Generated::Declined => {
                return Ok(self.abstain(out, MODEL_ABSTAINED, &ranked, latency, started))
            }
        };

        // Gauntlet, verify, one revision pass, verify again.
        let verify_started = Instant::now();
        let mut text_now = Gauntlet::run(&composed, &footnotes).text;
        let mut checked = self.check(question, &split_claims(&text_now), &footnotes);
        if checked.iter().any(|c| !c.supported) {
            let kept: Vec<&CheckedClaim> = checked.iter().filter(|c| c.supported).collect();
            text_now = Gauntlet::run(
                &kept
                    .iter()
                    .map(|c| render(&c.text, &c.citations))
                    .collect::<Vec<_>>()
                    .join(" "),
                &footnotes,
            )
            .text;
            checked = self.check(question, &split_claims(&text_now), &footnotes);
        }
        let verify_elapsed = verify_started.elapsed();
        observe_stage(STAGE_VERIFY, verify_elapsed);
        latency.insert(STAGE_VERIFY, ms(verify_elapsed));
        if checked.is_empty() || checked.iter().any(|c| !c.supported) {
            out.claims = checked;
            return Ok(self.abstain(out, UNSUPPORTED_CLAIMS, &ranked, latency, started));
        }

        let weakest = checked.iter().map(|c| c.support).fold(1.0, f64::min);
        out.confidence = if out.fallback_mode {
            weakest * self.config.fallback_confidence_factor
        } else {
            weakest
        };
        out.citations = citations(&checked, &footnotes);
        out.claims = checked;
        out.answer = text_now;
        out.status = "answered";
        Ok(finish(out, latency, started))
    }

    /// Scores every claim against the passages it cites; the best cited passage counts.
    fn check(&self, question: &str, claims: &[Claim], footnotes: &Footnotes) -> Vec<CheckedClaim> {
        let checked: Vec<CheckedClaim> = claims
            .iter()
            .map(|c| {
                let support = c
                    .citations
                    .iter()
                    .filter_map(|n| footnotes.get(*n))
                    .map(|p| self.verifier.support(question, &c.text, &p.text))
                    .fold(0.0, f64::max);
                CheckedClaim {
                    text: c.text.clone(),
                    citations: c.citations.clone(),
                    support,
                    supported: support >= self.config.claim_support_threshold,
                }
            })
            .collect();
        metrics::counter!(CLAIMS_CHECKED_TOTAL).increment(checked.len() as u64);
        metrics::counter!(CLAIMS_UNSUPPORTED_TOTAL)
            .increment(checked.iter().filter(|c| !c.supported).count() as u64);
        checked
    }

    fn abstain(
        &self,
        mut out: AskResponse,
        reason: &'static str,
        ranked: &[Candidate],
        latency: BTreeMap<&'static str, f64>,
        started: Instant,
    ) -> AskResponse {
        metrics::counter!(RAG_ABSTENTION_TOTAL, "reason" => reason).increment(1);
        tracing::info!(reason, event = "abstained", "answer abstained");
        out.status = "abstained";
        out.reason = Some(reason);
        out.answer.clear();
        out.citations.clear();
        let mut titles: Vec<String> = Vec::new();
        for c in ranked {
            if titles.len() >= self.config.max_suggestions {
                break;
            }
            if !c.hit.title.is_empty() && !titles.contains(&c.hit.title) {
                titles.push(c.hit.title.clone());
            }
        }
        out.suggestions = titles;
        finish(out, latency, started)
    }
}

fn finish(
    mut out: AskResponse,
    mut latency: BTreeMap<&'static str, f64>,
    started: Instant,
) -> AskResponse {
    observe_stage(STAGE_ASK_TOTAL, started.elapsed());
    latency.insert("total", ms(started.elapsed()));
    out.latency_ms = latency;
    out
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The query of each hop: the question, then its content words alone (so BM25 weighs what matters), then those
/// with the best candidate's title (the entity the question is probably about).
fn refine(question: &str, hop: usize, ranked: &[Candidate]) -> String {
    match hop {
        0 => question.to_string(),
        1 => text::content_words(question).join(" "),
        _ => {
            let mut q = text::content_words(question).join(" ");
            if let Some(best) = ranked.first() {
                q.push(' ');
                q.push_str(&best.hit.title);
            }
            q
        }
    }
}

/// A claim with its markers before the final punctuation.
fn render(text: &str, citations: &[u32]) -> String {
    let markers: String = citations.iter().map(|n| format!(" [{n}]")).collect();
    let trimmed = text.trim_end();
    match trimmed.char_indices().last() {
        Some((i, c)) if matches!(c, '.' | '!' | '?') => format!("{}{markers}{c}", &trimmed[..i]),
        _ => format!("{trimmed}{markers}."),
    }
}

/// One citation per cited footnote, in first-use order, quoting the passage sentence closest to its claims.
fn citations(claims: &[CheckedClaim], footnotes: &Footnotes) -> Vec<Citation> {
    let mut out: Vec<Citation> = Vec::new();
    for claim in claims {
        for &n in &claim.citations {
            if out.iter().any(|c| c.n == n) {
                continue;
            }
            let Some(p) = footnotes.get(n) else { continue };
            let claim_words = text::content_set(&claim.text);
            let quote = text::sentences(&p.text)
                .into_iter()
                .max_by_key(|s| text::content_set(s).intersection(&claim_words).count())
                .unwrap_or(&p.text)
                .to_string();
            out.push(Citation {
                n,
                chunk_id: p.chunk_id.clone(),
                doc_id: p.doc_id.clone(),
                title: p.title.clone(),
                quote,
                score: p.score,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refinement_narrows_then_adds_the_best_title() {
        let hit = pb::Hit {
            title: "Nikola Tesla".into(),
            ..Default::default()
        };
        let ranked = vec![Candidate {
            hit,
            relevance: 0.5,
        }];
        assert_eq!(
            refine("Where did he live?", 0, &ranked),
            "Where did he live?"
        );
        assert_eq!(refine("Where did he live?", 1, &ranked), "live");
        assert_eq!(
            refine("Where did he live?", 2, &ranked),
            "live Nikola Tesla"
        );
    }

    #[test]
    fn render_puts_markers_before_punctuation() {
        assert_eq!(render("It rained.", &[1, 3]), "It rained [1] [3].");
    }
}
