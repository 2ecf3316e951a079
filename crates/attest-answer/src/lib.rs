//! The grounded answer tier (SPEC "answer"): the steps that turn retrieved passages into an answer whose every
//! citation points at a passage retrieved in the same turn.
//!
//! This crate grows step by step (issue 3). Present now:
//!
//! # Layout
//! - [`footnotes`]: integer footnotes `[1]..[n]` minted per turn for the passages a model may cite; real chunk
//!   and document ids never enter a model's context, only these numbers.
//! - [`gauntlet`]: the filter on generated text, batch and streaming: markers that were never minted,
//!   malformed or repeated markers and leaked internal ids are dropped (counted in
//!   `citation_dropped_total{why}`); surviving markers map back to real chunk ids.
//! - [`claims`]: splitting an answer into atomic claims, each with the footnotes it cites, for verification.
//! - [`verifier`]: the [`Verifier`] trait and the learned local verifier (features, logistic regression,
//!   training and evaluation on HaluEval QA).
//! - [`text`]: words, content words, sentences, numbers, names, negation.

pub mod claims;
pub mod footnotes;
pub mod gauntlet;
pub mod text;
pub mod verifier;

pub use claims::{split_claims, Claim};
pub use footnotes::{Footnotes, Passage};
pub use gauntlet::{DropReason, Gauntlet, GauntletOutput, StreamingGauntlet};
pub use verifier::{LearnedVerifier, Verifier};
