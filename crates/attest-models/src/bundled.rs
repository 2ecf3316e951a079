//! The small models committed in the repository (`models/`), compiled into the binary so that the defaults answer
//! with no install step: the learned reranker's and the lexical verifier's logistic parameters (written by
//! `attest-lab train`), and the reader's support calibration (written with its weights by
//! `scripts/train-reader.sh`). Where they are parsed and what they mean is their stage's.

/// The learned reranker's parameters (`attest-lab train reranker`).
pub const RERANKER_JSON: &str = include_str!("../models/reranker.json");

/// The lexical verifier's parameters and their held-out record (`attest-lab train verifier`).
pub const VERIFIER_JSON: &str = include_str!("../models/verifier.json");

/// The calibration of the committed reader's support head against the lexical verifier's features.
pub const READER_SUPPORT_JSON: &str = include_str!("../models/reader/support.json");
