//! `AnswerService::ask`: the pipeline of SPEC "answer" as an explicit sequence of stages over one [`Turn`]:
//!
//! route → rewrite → terminology → lookups (structural, curated memory) → recall (retrieve → rerank → read →
//! gate ↺, at most `max_hops` retrievals) → cut → generate → gauntlet → verify (one revision pass) → decide.
//!
//! Each stage is a method in [`stages`] that either hands the turn on or ends it with a response (an answer or
//! an abstention with its reason and suggestions), and records its latency, so that swapping a model touches
//! one stage. The steps themselves live in their own modules (`route`, `rewrite`, `terminology`, `structural`,
//! `memory`, `pool`, `reserves`, `gate`, `reader`, `generate`, `gauntlet`, `cite`); [`retrieval`] holds the
//! calls a stage makes to the router, the reranker, the reader and the verifier off the async workers.

mod retrieval;
mod stages;

use std::collections::{BTreeMap, HashMap};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use attest_auth::KeyRing;
use attest_embed::Embedder;
use attest_proto::meta_client::MetaClient;
use attest_proto::v1 as pb;
use attest_proto::{FollowMode, StateFollower};
use attest_telemetry::collection_metrics::{CollectionMetrics, CODE_OK, OP_ASK};
use attest_telemetry::metrics::{observe_stage, RAG_ABSTENTION_TOTAL};
use serde::Serialize;

pub use crate::cite::{CheckedClaim, Citation};
use crate::client::{Caller, RouterClient};
use crate::config::AnswerConfig;
use crate::conversation::{self, HistoryTurn};
use crate::error::AnswerError;
use crate::footnotes::{body, Passage};
use crate::generate::GeneratorChain;
use crate::memory::CuratedMemory;
use crate::models::AnswerModels;
use crate::pool::{Candidate, Source};
use crate::reader::Reader;
use crate::rerank::Reranker;
use crate::rewrite::Rewrite;
use crate::route::Route;
use crate::structural::IdentifierPatterns;
use crate::terminology::{Terminology, TerminologyReport};
use crate::thresholds::ThresholdsCache;
use crate::verdict::VerdictCounts;
use crate::verifier::Verifier;
use attest_models::chat::ChatClient;

/// Stage names of `stage_latency_seconds` and of the response's `latency_ms`.
pub const STAGE_ROUTE: &str = "route";
pub const STAGE_TERMINOLOGY: &str = "terminology";
pub const STAGE_STRUCTURAL: &str = "structural";
pub const STAGE_MEMORY: &str = "memory";
pub const STAGE_RETRIEVE: &str = "retrieve";
pub const STAGE_RERANK: &str = "rerank";
pub const STAGE_READ: &str = "read";
pub const STAGE_GENERATE: &str = "generate";
pub const STAGE_GAUNTLET: &str = "gauntlet";
pub const STAGE_VERIFY: &str = "verify";
pub const STAGE_ASK_TOTAL: &str = "ask_total";

/// The response of SPEC "HTTP API v1" for `ask`.
#[derive(Debug, Clone, Default, Serialize, utoipa::ToSchema)]
pub struct AskResponse {
    /// `answered`, `abstained`, or `out_of_corpus` (a general-knowledge answer, never grounded).
    pub status: &'static str,
    pub answer: String,
    pub citations: Vec<Citation>,
    pub claims: Vec<CheckedClaim>,
    /// Claims the revision pass removed (unsupported, or partial under the `drop` policy), with their verdicts.
    pub dropped_claims: Vec<CheckedClaim>,
    /// Verdicts of every claim checked (kept and dropped).
    pub verdicts: VerdictCounts,
    /// The standalone question retrieved for, when the turn came with history.
    pub rewritten_question: Option<String>,
    /// The fixed disclaimer of an out-of-corpus answer; absent otherwise.
    pub disclaimer: Option<&'static str>,
    pub confidence: f64,
    pub reason: Option<&'static str>,
    pub suggestions: Vec<String>,
    /// Of an abstention: what the best passages state instead (a look-alike's fact, or the subject without the
    /// fact asked), with its source — a suggestion, never an answer. Absent when answered.
    pub near_miss: Option<crate::near_miss::NearMiss>,
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
    /// What the coverage gate saw at each retrieval where the reader read (in process only, never serialised:
    /// `attest-lab eval --per-question` writes it so that `attest-lab replay` can try other bars on it).
    #[serde(skip)]
    pub gate_trace: Vec<crate::gate_trace::HopTrace>,
}

/// A passage the first retrieval found, as a streamed ask's first event shows it: ranked, not yet read.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Retrieved {
    pub chunk_id: String,
    pub doc_id: String,
    pub title: String,
    /// The reranker's score (not the reader's: the passage is not read yet).
    pub score: f64,
}

/// The data of a streamed ask's `sources` event: the passages of the first retrieval, best first, sent as soon
/// as they are ranked (before reading, generation and verification, which take most of a turn).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct AskSources {
    pub sources: Vec<Retrieved>,
}

impl AskSources {
    fn of(ranked: &[Candidate]) -> Self {
        AskSources {
            sources: ranked
                .iter()
                .map(|c| Retrieved {
                    chunk_id: c.hit.chunk_id.clone(),
                    doc_id: c.hit.doc_id.clone(),
                    title: c.hit.title.clone(),
                    score: c.score,
                })
                .collect(),
        }
    }
}

/// Where a streamed turn sends its [`AskSources`] (once, if it retrieves at all).
pub type SourcesSender = tokio::sync::mpsc::UnboundedSender<AskSources>;

/// Abstention reason codes (SPEC step 12).
pub const NO_RESULTS: &str = "no_results";
pub const LOW_CONFIDENCE: &str = "low_confidence";
pub const UNSUPPORTED_CLAIMS: &str = "unsupported_claims";
pub const MODEL_ABSTAINED: &str = "model_abstained";
pub const TERMINOLOGY_NOT_FOUND: &str = "terminology_not_found";
pub const ROUTED_NO_RETRIEVAL: &str = "routed_no_retrieval";
/// The question refers to a person it does not name, and no earlier turn says who.
pub const UNRESOLVED_REFERENCE: &str = "unresolved_reference";
/// Not an abstention a caller sees as one: the general-knowledge answer (status `out_of_corpus`).
pub const OUT_OF_CORPUS: &str = "out_of_corpus";

pub struct AnswerService {
    router: RouterClient,
    verifier: Arc<dyn Verifier>,
    reranker: Arc<dyn Reranker>,
    embedder: Arc<dyn Embedder>,
    generators: Arc<GeneratorChain>,
    identifiers: IdentifierPatterns,
    terminology: Terminology,
    memory: Arc<CuratedMemory>,
    /// Answerability of the best candidates' sentences (None: the lexical back end).
    reader: Option<Reader>,
    /// The configured LLM (`answer.llm`) for history rewrites and out-of-corpus answers; None without one.
    chat: Option<Arc<ChatClient>>,
    /// Per-collection thresholds, as meta last said (empty until `watch_meta`).
    thresholds: Arc<ThresholdsCache>,
    /// The API keys callers present (meta's, from the same polls; authentication off until enabled).
    keys: Arc<KeyRing>,
    /// Asks and abstentions by collection and tenant (capped by `answer.metrics_label_cap`).
    metrics: CollectionMetrics,
    config: AnswerConfig,
}

/// The reader's readings of the sentences of the candidates read so far in a turn, by chunk id.
pub(crate) type Reads = HashMap<String, Vec<crate::reader::SentenceRead>>;

/// What a stage hands on: the turn goes on, or it ends with this response.
type Flow<T = ()> = ControlFlow<AskResponse, T>;

/// One question on its way through the stages.
struct Turn<'a> {
    /// Whom the turn is for: every search it makes acts as this caller.
    caller: &'a Caller,
    collection: &'a str,
    question: &'a str,
    request_id: &'a str,
    started: Instant,
    /// The response being filled in.
    out: AskResponse,
    route: Route,
    /// The queries of the next retrieval.
    queries: Vec<Rewrite>,
    /// The first retrieval's hit lists, one per query, when the lookups searched for them in their batch.
    prefetched: Option<Vec<Vec<pb::Hit>>>,
    /// Passages every later stage must keep (identifiers, curated pins).
    forced: Vec<(pb::Hit, Source)>,
    /// The pool, best first, once recalled.
    ranked: Vec<Candidate>,
    reads: Reads,
    /// A streamed turn's: taken when the first retrieval is ranked (see [`AskSources`]).
    sources_to: Option<SourcesSender>,
}

impl Turn<'_> {
    fn record(&mut self, stage: &'static str, since: Instant) {
        let elapsed: Duration = since.elapsed();
        observe_stage(stage, elapsed);
        *self.out.latency_ms.entry(stage).or_default() += elapsed.as_secs_f64() * 1e3;
    }
}

impl AnswerService {
    /// The answer tier over `router`. `reranker` ranks candidates (and re-judges border pins); `embedder` embeds
    /// questions for curated memory; `models` are the reader and verifier loaded once ([`AnswerModels::load`]).
    /// Fails on an invalid identifier pattern or an unreadable memory file.
    pub fn new(
        router: RouterClient,
        models: AnswerModels,
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
        let AnswerModels { reader, verifier } = models;
        Ok(AnswerService {
            router,
            verifier,
            reranker,
            embedder,
            generators: Arc::new(GeneratorChain::configured(
                &config.llm,
                &config.gguf,
                config.composition(),
            )),
            identifiers,
            terminology: Terminology::new(config.terminology.clone()),
            memory: Arc::new(memory),
            reader,
            chat: (!config.llm.url.trim().is_empty())
                .then(|| Arc::new(ChatClient::new(config.llm.clone()))),
            thresholds: Arc::new(ThresholdsCache::default()),
            keys: KeyRing::open(),
            metrics: CollectionMetrics::new(config.metrics_label_cap),
            config,
        })
    }

    /// Keeps the collections' thresholds and the API keys in step with meta (a watch by version, or a poll every
    /// `answer.meta_refresh_ms`; see [`StateFollower`]); the task ends when the service is dropped.
    pub fn watch_meta(&self, meta: MetaClient) -> tokio::task::JoinHandle<()> {
        self.keys.refresh_from(&meta);
        let (thresholds, keys) = (Arc::downgrade(&self.thresholds), Arc::downgrade(&self.keys));
        let mut follower = StateFollower::new(
            meta,
            FollowMode::from_setting(self.config.meta_watch),
            Duration::from_millis(self.config.meta_refresh_ms),
        );
        tokio::spawn(async move {
            loop {
                let next = follower.next().await;
                let (Some(thresholds), Some(keys)) = (thresholds.upgrade(), keys.upgrade()) else {
                    return;
                };
                match next {
                    Ok(Some(state)) => {
                        thresholds.apply(&state);
                        keys.apply(&state);
                    }
                    Ok(None) => {}
                    Err(e) => tracing::warn!(error = %e, event = "meta_watch_failed",
                        "thresholds and keys not refreshed; keeping the last ones"),
                }
            }
        })
    }

    /// The API keys this service accepts (see [`AnswerService::watch_meta`]).
    pub fn keys(&self) -> &Arc<KeyRing> {
        &self.keys
    }

    /// The thresholds the service holds (what `watch_meta` refreshes).
    pub fn thresholds(&self) -> &Arc<ThresholdsCache> {
        &self.thresholds
    }

    pub fn config(&self) -> &AnswerConfig {
        &self.config
    }

    /// The readers the service reads with (None: the lexical back end); a clone shares the loaded models.
    pub fn reader(&self) -> Option<&Reader> {
        self.reader.as_ref()
    }

    /// The verifier the service checks claims with (loaded once with the reader, [`AnswerModels::load`]).
    pub fn verifier(&self) -> &Arc<dyn Verifier> {
        &self.verifier
    }

    /// Glossary lookups answered from the terminology cache so far.
    pub fn terminology_cache_hits(&self) -> u64 {
        self.terminology.cache_hits()
    }

    /// One turn for the open caller (the router's default tenant, no credential): what `attest-lab eval` and
    /// in-process callers use.
    pub async fn ask(
        &self,
        collection: &str,
        question: &str,
        request_id: &str,
    ) -> Result<AskResponse, AnswerError> {
        self.ask_as(&Caller::default(), collection, question, request_id)
            .await
    }

    /// One turn for `caller`: the stages in order; the first that ends the turn gives the response.
    pub async fn ask_as(
        &self,
        caller: &Caller,
        collection: &str,
        question: &str,
        request_id: &str,
    ) -> Result<AskResponse, AnswerError> {
        self.ask_in_conversation(caller, collection, question, &[], request_id)
            .await
    }

    /// One turn of a conversation: `history` (oldest first) makes the question standalone before the stages
    /// run (see [`conversation`]); only this turn's passages are cited. Counted and timed per collection and
    /// tenant (`attest_collection_requests_total{op="ask"}`), whichever front asked.
    pub async fn ask_in_conversation(
        &self,
        caller: &Caller,
        collection: &str,
        question: &str,
        history: &[HistoryTurn],
        request_id: &str,
    ) -> Result<AskResponse, AnswerError> {
        self.ask_counted(caller, collection, question, history, request_id, None)
            .await
    }

    /// [`AnswerService::ask_in_conversation`] for a streamed ask: the passages of the first retrieval go to
    /// `sources_to` as soon as they are ranked; the response comes when the turn ends, as before.
    pub async fn ask_streamed(
        &self,
        caller: &Caller,
        collection: &str,
        question: &str,
        history: &[HistoryTurn],
        request_id: &str,
        sources_to: SourcesSender,
    ) -> Result<AskResponse, AnswerError> {
        let sources_to = Some(sources_to);
        self.ask_counted(
            caller, collection, question, history, request_id, sources_to,
        )
        .await
    }

    async fn ask_counted(
        &self,
        caller: &Caller,
        collection: &str,
        question: &str,
        history: &[HistoryTurn],
        request_id: &str,
        sources_to: Option<SourcesSender>,
    ) -> Result<AskResponse, AnswerError> {
        let started = Instant::now();
        let outcome = self
            .turn_in_conversation(
                caller, collection, question, history, request_id, sources_to,
            )
            .await;
        let code = match &outcome {
            Ok(_) => CODE_OK,
            Err(e) => e.api().code.as_str(),
        };
        let tenant = tenant_label(caller);
        self.metrics
            .request(OP_ASK, collection, tenant, code, started.elapsed());
        outcome
    }

    /// The stages of one turn, in order; the first that ends the turn gives the response.
    async fn turn_in_conversation(
        &self,
        caller: &Caller,
        collection: &str,
        question: &str,
        history: &[HistoryTurn],
        request_id: &str,
        sources_to: Option<SourcesSender>,
    ) -> Result<AskResponse, AnswerError> {
        let question = self.check_question(question)?;
        let history = conversation::window(
            history,
            self.config.history_window,
            self.config.max_history_bytes,
        )?;
        let t = Instant::now();
        let standalone = self.standalone(question, history, request_id).await;
        let mut turn = self.begin(caller, collection, &standalone, request_id);
        turn.sources_to = sources_to;
        turn.record(STAGE_ROUTE, t);
        if !history.is_empty() {
            turn.out.rewritten_question = Some(standalone.clone());
        }
        if let ControlFlow::Break(done) = self.route_and_rewrite(&mut turn) {
            return Ok(done);
        }
        if let ControlFlow::Break(done) = self.terminology_first(&mut turn).await {
            return Ok(done);
        }
        self.lookups(&mut turn).await?;
        if let ControlFlow::Break(done) = self.recall(&mut turn).await? {
            return Ok(done);
        }
        let footnotes = self.cut(&turn);
        let composed = match self.generate(&mut turn, &footnotes).await? {
            ControlFlow::Break(done) => return Ok(done),
            ControlFlow::Continue(text) => text,
        };
        Ok(self
            .check_and_answer(&mut turn, &composed, &footnotes)
            .await)
    }

    /// The question, trimmed, when it is one the pipeline accepts.
    fn check_question<'q>(&self, question: &'q str) -> Result<&'q str, AnswerError> {
        let question = question.trim();
        // Blank as a search query is: nothing but whitespace or control characters.
        if question
            .chars()
            .all(|c| c.is_whitespace() || c.is_control())
        {
            return Err(AnswerError::invalid("question", "empty"));
        }
        if question.len() > self.config.max_question_bytes {
            return Err(AnswerError::invalid(
                "question",
                format!("longer than {} bytes", self.config.max_question_bytes),
            ));
        }
        Ok(question)
    }

    /// The standalone form of a follow-up: through the LLM when one is configured and the question leans on
    /// the conversation (on a blocking thread), else, or when the model fails, deterministically.
    async fn standalone(
        &self,
        question: &str,
        history: &[HistoryTurn],
        request_id: &str,
    ) -> String {
        if history.is_empty() {
            return question.to_string();
        }
        if let (Some(chat), true) = (&self.chat, conversation::needs_history(question)) {
            let (chat, q, h) = (Arc::clone(chat), question.to_string(), history.to_vec());
            let max = self.config.max_question_bytes;
            let rewritten = on_a_blocking_thread(request_id, move || {
                conversation::rewrite_with_llm(&chat, &q, &h, max)
            })
            .await
            .ok()
            .flatten();
            if let Some(rewritten) = rewritten {
                return rewritten;
            }
        }
        conversation::standalone(question, history)
    }

    /// Opens the turn for a checked question.
    fn begin<'a>(
        &self,
        caller: &'a Caller,
        collection: &'a str,
        question: &'a str,
        request_id: &'a str,
    ) -> Turn<'a> {
        Turn {
            caller,
            collection,
            question,
            request_id,
            started: Instant::now(),
            out: AskResponse {
                status: "abstained",
                request_id: request_id.to_string(),
                generator: "none",
                reranker: self.reranker.name(),
                ..Default::default()
            },
            route: Route::SingleHop,
            queries: Vec::new(),
            prefetched: None,
            forced: Vec::new(),
            ranked: Vec::new(),
            reads: Reads::new(),
            sources_to: None,
        }
    }

    /// Ends the turn with an abstention: its reason (counted), no answer, the suggestions.
    fn abstain(
        &self,
        turn: &mut Turn,
        reason: &'static str,
        suggestions: Vec<String>,
    ) -> AskResponse {
        self.count_abstention(turn, reason);
        let out = &mut turn.out;
        out.status = "abstained";
        out.reason = Some(reason);
        out.answer.clear();
        out.citations.clear();
        out.suggestions = suggestions;
        let hits: Vec<&pb::Hit> = turn.ranked.iter().map(|c| &c.hit).collect();
        turn.out.near_miss =
            crate::near_miss::find(turn.question, &hits, self.config.max_suggestions);
        finish(turn)
    }
}

impl AnswerService {
    /// Counts and logs a turn that ends without a grounded answer (`rag_abstention_total{reason}`, and per
    /// collection and tenant `attest_collection_abstentions_total`).
    fn count_abstention(&self, turn: &Turn, reason: &'static str) {
        metrics::counter!(RAG_ABSTENTION_TOTAL, "reason" => reason).increment(1);
        self.metrics
            .abstention(turn.collection, tenant_label(turn.caller), reason);
        tracing::info!(reason, event = "abstained", "answer abstained");
    }
}

/// The caller's tenant as the metrics name it: a caller that names none asks as the router's default tenant,
/// `default` unless `router.default_tenant` says otherwise (the answer tier does not know the router's config).
fn tenant_label(caller: &Caller) -> &str {
    if caller.tenant.is_empty() {
        "default"
    } else {
        &caller.tenant
    }
}

/// Runs `f` on a blocking thread (not the CPU pool: it waits on a remote model, which must not hold a core's
/// permit), with the turn's request id for the headers and logs of the calls it makes.
async fn on_a_blocking_thread<T: Send + 'static>(
    request_id: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, tokio::task::JoinError> {
    let rid = request_id.to_string();
    tokio::task::spawn_blocking(move || attest_telemetry::request_id::with_current(&rid, f)).await
}

fn passage(hit: &pb::Hit, score: f64) -> Passage {
    Passage {
        chunk_id: hit.chunk_id.clone(),
        doc_id: hit.doc_id.clone(),
        title: hit.title.clone(),
        text: body(hit).to_string(),
        score,
        sentence_reads: None,
    }
}

/// The response of a finished turn, with its total latency.
fn finish(turn: &mut Turn) -> AskResponse {
    let total = turn.started.elapsed();
    observe_stage(STAGE_ASK_TOTAL, total);
    let mut out = std::mem::take(&mut turn.out);
    out.latency_ms.insert("total", total.as_secs_f64() * 1e3);
    out
}
