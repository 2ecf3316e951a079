//! The grounded answer tier (SPEC "answer"): the steps that turn retrieved passages into an answer whose every
//! citation points at a passage retrieved in the same turn, or into an abstention that says why.
//!
//! It reaches the cluster only through the router's proto ([`client`]). Every model it runs is local and checked
//! on load: the reader (a cross-encoder whose weights are committed in `models/reader/`), the learned reranker and
//! verifier (parameters committed in `models/*.json`) and, when configured, the SmolLM2 GGUF generator installed
//! by `scripts/install-llm.sh`; an OpenAI-compatible endpoint may generate or judge instead. Without any of the
//! optional ones the defaults (reader, learned reranker, extractive composer) answer end to end.
//!
//! # Layout
//! - [`pipeline`]: `AnswerService::ask` — retrieval through the router with the coverage gate and CRAG hops,
//!   composing, the gauntlet, verification with one revision pass, abstention with reasons and suggestions.
//! - [`models`]: the reader and the verifier, loaded once and handed to the stages that read with them.
//! - The judgement it rests on is `attest_grounding`'s, re-exported here under the paths it always had:
//!   [`reader`] (answerability of (question, sentence) for the gate, the confidence and the composer; support of
//!   (claim, evidence) as the default verifier), [`verifier`] (the [`Verifier`] trait and its back ends),
//!   [`cite`] (claims scored against the passages they cite), [`verdict`] (`supported` / `partial` /
//!   `unsupported`) and [`footnotes`] (the integer footnotes minted per turn; real ids never reach a model).
//! - Its fronts (`attest.v1.AnswerService/Ask` over gRPC, `POST /v1/collections/{name}/ask` over HTTP, their
//!   OpenAPI document) are `attest-api`'s.
//! - [`client`]: `RouterClient { Local, Grpc }`, the only way this tier reaches the router.
//! - [`compose`]: the built-in extractive composer (the default generator).
//! - [`generate`]: the `Generator` trait, the extractive and OpenAI-compatible chat back ends, and the
//!   fallback chain that ends in an abstention.
//! - [`config`]: thresholds and limits; [`error`]: errors and their HTTP form.
//! - [`gauntlet`]: the filter on generated text, batch and streaming: markers that were never minted,
//!   malformed or repeated markers and leaked internal ids are dropped (counted in
//!   `citation_dropped_total{why}`); surviving markers map back to real chunk ids.
//! - [`gguf_generator`]: the `gguf` generator, SmolLM2-135M run by `attest_models::gguf` over the top passages.
//! - [`thresholds`]: per-collection minimum confidence, read from meta (written there by `attest-lab eval --sweep`
//!   and the router's `PUT /v1/collections/{name}/thresholds`).
//! - Steps 1–8 of SPEC "answer", each its own module: [`route`] (no_retrieval / single_hop / multi_hop),
//!   [`rewrite`] (rewrites, sub-questions, CRAG refinement), [`structural`] (identifiers resolved exactly),
//!   [`terminology`] (glossary first, LRU + TTL cache), [`memory`] (curated pins and notes), [`pool`] (candidates,
//!   noise pre-floor), [`reserves`] (the cut to `passages` with per-kind reserves), [`gate`] (the coverage gate;
//!   [`gate_trace`]: what it saw at each hop, to replay other bars on).
//! - [`rerank`]: the [`rerank::Reranker`] back ends that score candidates 0..1 against the question: the learned
//!   local reranker (the default, trained by `attest-lab train reranker`), a remote cross-encoder, the lexical one.
//! - [`near_miss`]: what an abstention says was found instead of the answer, with its source, when the
//!   passages name a look-alike of the question's subject.
//! - The language of questions and passages the stages share (words, sentences, claims, subjects, quantities,
//!   conditions, editions; the coverage the gate holds) is `attest_text`'s.
//! - [`conversation`]: the history window of a follow-up, made standalone (deterministic, or through the LLM).
//! - [`out_of_corpus`]: the opt-in general-knowledge answer when the coverage gate bails, with its disclaimer.

pub mod client;
pub mod compose;
pub mod config;
pub mod conversation;
pub mod error;
pub mod gate;
pub mod gate_trace;
pub mod gauntlet;
pub mod generate;
pub mod gguf_generator;
pub mod memory;
pub mod models;
pub mod near_miss;
pub mod out_of_corpus;
pub mod pipeline;
pub mod pool;
pub mod rerank;
pub mod reserves;
pub mod rewrite;
pub mod route;
pub mod structural;
pub mod terminology;
pub mod thresholds;

pub use attest_grounding::{cite, footnotes, reader, verdict, verifier};
pub use attest_text::claims::{split_claims, Claim};
pub use client::RouterClient;
pub use config::AnswerConfig;
pub use error::AnswerError;
pub use footnotes::{Footnotes, Passage};
pub use gauntlet::{DropReason, Gauntlet, GauntletOutput, StreamingGauntlet};
pub use models::AnswerModels;
pub use pipeline::{AnswerService, AskResponse};
pub use verifier::{LearnedVerifier, Verifier};
