//! Grounding: whether a passage answers a question, and whether it supports a claim — the judgement every
//! answer of Attest rests on (SPEC "answer" steps 8 and 10–11). The answer tier (`attest-answer`) asks it and
//! re-exports its modules under the paths they always had (`attest_answer::reader`, `::verifier`, ...);
//! `attest-lab` trains and measures it.
//!
//! # Layout
//! - [`reader`]: the trained cross-encoder that reads: answerability of (question, sentence) for the coverage
//!   gate, the confidence and the composer; support of (claim, evidence) as the default verifier. The model
//!   itself (token layout, weights, ONNX Runtime) is `attest_models::reader`'s.
//! - [`verifier`]: the [`verifier::Verifier`] trait and its back ends (`answer.verifier.backend`): the reader's
//!   support head (the default), the learned lexical verifier, and LLM and local-model judges.
//! - [`cite`]: claims scored against the passages they cite, and the citations of a verified answer.
//! - [`verdict`]: each claim `supported`, `partial` or `unsupported`, and the per-collection partial policy.
//! - [`footnotes`]: integer footnotes `[1]..[n]` minted per turn for the passages a model may cite; real chunk
//!   and document ids never enter a model's context, only these numbers.

pub mod cite;
pub mod footnotes;
pub mod reader;
pub mod verdict;
pub mod verifier;
