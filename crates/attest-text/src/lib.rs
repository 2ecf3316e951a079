//! The language of questions and passages (issue 72: apart from the answer pipeline that uses it): pure,
//! deterministic functions over text, with no model, no I/O and no configuration, so that the reader, the
//! verifier, the guards and `attest-lab` mean the same thing by a word, a sentence or a subject at training and at
//! serving time.
//!
//! - [`text`]: words, content words, sentences, numbers, names, negation.
//! - [`claims`]: splitting an answer into atomic claims, each with the footnotes it cites, for verification.
//! - [`relevance`]: the 0..1 question coverage the coverage gate holds its thresholds against.
//! - [`subjects`]: the question's names, model numbers and versions against a passage: a passage naming a
//!   look-alike ("Drift Mini" for "Drift Max", "v2" for "v1") and not the subject answers another question.
//! - [`compounds`]: look-alike things written in lower case ("the sick leave", "the bereavement leave").
//! - [`question_names`]: the names a question is about, held against a sentence's reading context.
//! - [`edition`]: a name the question qualifies with a number ("Super Bowl 50") against another edition.
//! - [`quantity`]: a "how many" question is read only against sentences stating a quantity, and [`measure`] one
//!   asking a time, a price, a mass or a data size only against sentences stating one of that kind.
//! - [`conditions`]: the conditions a question puts on its answer ("in production", "with the battery").
//! - [`withheld`]: sentences that say their value is not given.

pub mod claims;
pub mod compounds;
pub mod conditions;
pub mod edition;
pub mod measure;
pub mod quantity;
pub mod question_names;
pub mod relevance;
pub mod subjects;
pub mod text;
pub mod withheld;

pub use claims::{split_claims, Claim};
