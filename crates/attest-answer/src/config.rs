//! Thresholds and limits of the answer pipeline (defaults from docs/SPEC.md "answer" and the seeds).

use attest_core::ConfigProblems;
use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use crate::compose::Composition;
use crate::gate::GateThresholds;
use crate::gguf_generator::GgufConfig;
use crate::out_of_corpus::OutOfCorpusConfig;
use crate::reader::rules::Rule;
use crate::reader::ReaderConfig;
use crate::rerank::RerankConfig;
use crate::verdict::{Cutoffs, PartialPolicy};
use crate::verifier::VerifierConfig;
use attest_models::chat::OpenAiChatConfig;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AnswerConfig {
    /// Candidates gathered per retrieval hop across all rewrites, deduplicated (SPEC: ~150).
    pub candidates: u32,
    /// Hits asked of the router per search (its largest k is 100).
    pub search_k: u32,
    /// Low noise pre-floor: a hit only the dense lane found, with a cosine below this, is dropped (seed: 0.18).
    pub noise_floor: f64,
    /// Sub-questions retrieved for a multi-hop question, at most.
    pub max_sub_questions: usize,
    /// Identifier forms (regular expressions) resolved exactly and forced into the pool (structural lookup).
    pub identifier_patterns: Vec<String>,
    /// BM25 hits asked of the router per identifier.
    pub identifier_k: u32,
    /// Metadata `kind`s of which at least `reserve_per_kind` passages survive the cut when the pool has them.
    pub reserve_kinds: Vec<String>,
    pub reserve_per_kind: usize,
    /// Glossary lookup for definition questions (timeout, cache).
    pub terminology: crate::terminology::TerminologyConfig,
    /// Curated memory, YAML or JSON (pins and notes per collection); unset: none.
    pub memory_file: Option<std::path::PathBuf>,
    /// Curated memory thresholds.
    pub memory: crate::memory::MemoryConfig,
    /// Passages kept for composing and citing (SPEC: 16–20).
    pub passages: usize,
    /// Coverage gate (CRAG): below this best relevance, give up at once.
    pub bail_threshold: f64,
    /// At or above this best relevance, ground the answer.
    pub ground_threshold: f64,
    /// ... or at or above this one with `min_supporting` passages over it.
    pub ground_with_support_threshold: f64,
    pub min_supporting: usize,
    /// Retrieval hops at most, the first included (SPEC: 3).
    pub max_hops: usize,
    /// Sentences the extractive composer may use.
    pub max_answer_sentences: usize,
    /// A further sentence joins the answer only when its relevance is this share of the best one's.
    pub companion_ratio: f64,
    /// The composer quotes only passages whose reranker score is at least this share of the best passage's
    /// (0: any footnoted passage). Off by default: on squad-sample, 0.5 cut answer accuracy from 0.81 to 0.74
    /// (the answer sentence is often in a passage ranked below the best one).
    pub composer_passage_ratio: f64,
    /// A claim is supported when the verifier scores it at least this (and no clause of it falls below
    /// `claim_partial_threshold`).
    pub claim_support_threshold: f64,
    /// From here up to `claim_support_threshold` a claim is `partial` (see `verdict`); below, `unsupported`.
    pub claim_partial_threshold: f64,
    /// What happens to a partial claim: `drop` (the revision pass removes it) or `mark` (kept and marked).
    pub partial_claims: PartialPolicy,
    /// The general-knowledge answer when the collection does not cover a question (off by default).
    pub out_of_corpus: OutOfCorpusConfig,
    /// Per-collection policies (out-of-corpus answers, partial claims), by collection name; a collection not
    /// named here follows the settings above.
    pub collections: BTreeMap<String, CollectionPolicy>,
    /// Earlier user turns of a conversation (`history`) read to make a follow-up standalone (seed: 5).
    pub history_window: usize,
    /// Most bytes of history text read (the window's), larger is a caller error.
    pub max_history_bytes: usize,
    /// Confidence is multiplied by this when the router answered from BM25 alone (SPEC: reduced by 20%).
    pub fallback_confidence_factor: f64,
    /// Longest question accepted, in bytes.
    pub max_question_bytes: usize,
    /// "Did you mean" titles offered with an abstention.
    pub max_suggestions: usize,
    /// An OpenAI-compatible chat endpoint tried before the extractive composer (unset: composer only).
    pub llm: OpenAiChatConfig,
    /// The local GGUF model (SmolLM2), tried after `llm` and before the extractive composer when enabled.
    pub gguf: GgufConfig,
    /// Which verifier scores claims: the reader's support head (default), the learned lexical one, or an LLM /
    /// local-model judge.
    pub verifier: VerifierConfig,
    /// Which reranker scores candidates: the learned one (default), a remote cross-encoder, or lexical.
    pub rerank: RerankConfig,
    /// The reader (answerability and support model) and how much of a turn it reads.
    pub reader: ReaderConfig,
    /// Answer only when the answer's confidence is at least this (0: the gates alone decide); a collection's
    /// thresholds in meta (written by `attest-lab eval --sweep` or `PUT /v1/collections/{name}/thresholds`)
    /// override it. 0.20 with the two readers passed the held-in choosing rule the readers alone missed by one
    /// post, but a floor abstains on every answer that keeps a marked partial claim (`partial_claims: mark`: its
    /// support is the answer's confidence), and on held-out sets it changed no count of answered unanswerable
    /// questions, only coverage (docs/decisions/two-readers.md).
    pub min_confidence: f64,
    /// Follow meta's cluster state (thresholds, API keys) by a watch: a change arrives as soon as meta applies
    /// it. Off: re-read the whole state every `meta_refresh_ms`.
    pub meta_watch: bool,
    /// How often the answer tier re-reads the whole cluster state when it does not watch (the watch off, or a
    /// meta older than the watch), and how long it waits after a failed read, in milliseconds.
    pub meta_refresh_ms: u64,
    /// Distinct collections, and distinct tenants, that get their own series in the per-collection metrics
    /// (`attest_collection_*`); the rest are counted under `other`, so callers cannot mint series without end.
    pub metrics_label_cap: usize,
}

impl Default for AnswerConfig {
    fn default() -> Self {
        AnswerConfig {
            candidates: 150,
            search_k: 100,
            noise_floor: 0.18,
            max_sub_questions: 3,
            identifier_patterns: vec![r"\b[A-Z]{2,6}[- ]?\d+(?:[.:]\d+)*\b".to_string()],
            identifier_k: 20,
            reserve_kinds: Vec::new(),
            reserve_per_kind: 2,
            terminology: crate::terminology::TerminologyConfig::default(),
            memory_file: None,
            memory: crate::memory::MemoryConfig::default(),
            passages: 16,
            bail_threshold: 0.40,
            ground_threshold: 0.65,
            ground_with_support_threshold: 0.55,
            min_supporting: 2,
            max_hops: 3,
            max_answer_sentences: 2,
            companion_ratio: 0.9,
            composer_passage_ratio: 0.0,
            claim_support_threshold: 0.5,
            claim_partial_threshold: 0.25,
            partial_claims: PartialPolicy::Drop,
            out_of_corpus: OutOfCorpusConfig::default(),
            collections: BTreeMap::new(),
            history_window: 5,
            max_history_bytes: 16 * 1024,
            fallback_confidence_factor: 0.8,
            max_question_bytes: 2048,
            max_suggestions: 3,
            llm: OpenAiChatConfig::default(),
            gguf: GgufConfig::default(),
            verifier: VerifierConfig::default(),
            rerank: RerankConfig::default(),
            reader: ReaderConfig::default(),
            min_confidence: 0.0,
            meta_watch: true,
            meta_refresh_ms: 1000,
            metrics_label_cap: attest_telemetry::collection_metrics::DEFAULT_LABEL_CAP,
        }
    }
}

impl AnswerConfig {
    /// The lexical coverage gate's thresholds.
    pub fn gate_thresholds(&self) -> GateThresholds {
        GateThresholds {
            bail: self.bail_threshold,
            ground: self.ground_threshold,
            ground_with_support: self.ground_with_support_threshold,
            min_supporting: self.min_supporting,
        }
    }

    /// How the extractive composer picks and joins sentences.
    pub fn composition(&self) -> Composition {
        Composition {
            passage_ratio: self.composer_passage_ratio,
            companion_ratio: self.companion_ratio,
            max_sentences: self.max_answer_sentences,
        }
    }

    /// Values that cannot be right, named as `answer.KEY` (checked at start-up and by `attest config check`).
    pub fn problems(&self) -> ConfigProblems {
        let mut p = ConfigProblems::new("answer");
        for (key, value) in [
            ("noise_floor", self.noise_floor),
            ("bail_threshold", self.bail_threshold),
            ("ground_threshold", self.ground_threshold),
            (
                "ground_with_support_threshold",
                self.ground_with_support_threshold,
            ),
            ("companion_ratio", self.companion_ratio),
            ("composer_passage_ratio", self.composer_passage_ratio),
            ("claim_support_threshold", self.claim_support_threshold),
            ("claim_partial_threshold", self.claim_partial_threshold),
            (
                "fallback_confidence_factor",
                self.fallback_confidence_factor,
            ),
            ("reader.bail_threshold", self.reader.bail_threshold),
            ("reader.ground_threshold", self.reader.ground_threshold),
            ("reader.veto_threshold", self.reader.veto_threshold),
        ] {
            p.unit_interval(key, value);
        }
        for (key, bar) in [
            ("reader.overrule_bar", self.reader.overrule_bar),
            ("reader.veto_overrule_bar", self.reader.veto_overrule_bar),
        ] {
            if let Some(value) = bar {
                p.unit_interval(key, value);
            }
        }
        if self.bail_threshold > self.ground_threshold {
            p.add(
                "bail_threshold",
                format!(
                    "must not exceed answer.ground_threshold ({}; got {})",
                    self.ground_threshold, self.bail_threshold
                ),
            );
        }
        if self.claim_partial_threshold > self.claim_support_threshold {
            p.add(
                "claim_partial_threshold",
                format!(
                    "must not exceed answer.claim_support_threshold ({}; got {})",
                    self.claim_support_threshold, self.claim_partial_threshold
                ),
            );
        }
        let no_llm = self.llm.url.trim().is_empty();
        if no_llm && self.out_of_corpus.enabled {
            p.add(
                "out_of_corpus.enabled",
                "needs an LLM: set answer.llm.url, or turn it off".to_string(),
            );
        }
        for (name, policy) in &self.collections {
            if no_llm && policy.out_of_corpus == Some(true) {
                p.add(
                    &format!("collections.{name}.out_of_corpus"),
                    "needs an LLM: set answer.llm.url, or turn it off".to_string(),
                );
            }
        }
        if self.reader.overrulable.contains(&Rule::SubjectsPassage) {
            p.add(
                "reader.overrulable",
                "subjects_passage refuses a whole passage before any sentence is read: no reader can overrule it"
                    .to_string(),
            );
        }
        p.positive("history_window", self.history_window);
        p.positive("max_history_bytes", self.max_history_bytes);
        p.positive("candidates", self.candidates);
        p.positive("meta_refresh_ms", self.meta_refresh_ms);
        p.positive("metrics_label_cap", self.metrics_label_cap);
        p.positive("search_k", self.search_k);
        p.positive("passages", self.passages);
        p.positive("max_hops", self.max_hops);
        p.positive("max_answer_sentences", self.max_answer_sentences);
        p.positive("max_question_bytes", self.max_question_bytes);
        p.positive("reader.passages", self.reader.passages);
        p.positive("reader.max_sentences", self.reader.max_sentences);
        p.positive("reader.batch", self.reader.batch);
        p
    }

    /// The policy `collection` answers under: its entry in `collections`, else the general settings.
    pub fn policy(&self, collection: &str) -> Policy {
        let own = self.collections.get(collection);
        Policy {
            out_of_corpus: own
                .and_then(|c| c.out_of_corpus)
                .unwrap_or(self.out_of_corpus.enabled),
            partial_claims: own
                .and_then(|c| c.partial_claims)
                .unwrap_or(self.partial_claims),
        }
    }

    /// The verdict cut-offs.
    pub fn cutoffs(&self) -> Cutoffs {
        Cutoffs {
            supported: self.claim_support_threshold,
            partial: self.claim_partial_threshold,
        }
    }
}

/// One collection's answer policy in `answer.collections` (unset fields follow the general settings).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CollectionPolicy {
    /// Whether a question the collection does not cover gets a general-knowledge answer.
    pub out_of_corpus: Option<bool>,
    /// What happens to its partial claims.
    pub partial_claims: Option<PartialPolicy>,
}

/// The policy a turn answers under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub out_of_corpus: bool,
    pub partial_claims: PartialPolicy,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_per_collection_and_the_problems_they_can_have() {
        let mut c = AnswerConfig::default();
        assert!(c.problems().is_empty());
        assert_eq!(
            c.policy("any"),
            Policy {
                out_of_corpus: false,
                partial_claims: PartialPolicy::Drop
            }
        );
        c.collections.insert(
            "trivia".into(),
            CollectionPolicy {
                out_of_corpus: Some(true),
                partial_claims: Some(PartialPolicy::Mark),
            },
        );
        c.out_of_corpus.enabled = true;
        c.claim_partial_threshold = 0.6;
        c.reader.veto_overrule_bar = Some(1.5);
        c.reader.overrulable.push(Rule::SubjectsPassage);
        let problems = c.problems().into_vec().join("\n");
        for key in [
            "answer.out_of_corpus.enabled",
            "answer.collections.trivia.out_of_corpus",
            "answer.claim_partial_threshold",
            "answer.reader.veto_overrule_bar",
            "answer.reader.overrulable",
        ] {
            assert!(problems.contains(key), "{key} not named in:\n{problems}");
        }
        c.llm.url = "http://127.0.0.1:9".into();
        c.claim_partial_threshold = 0.25;
        c.reader.veto_overrule_bar = None;
        c.reader.overrulable.pop();
        assert!(c.problems().is_empty(), "{:?}", c.problems().into_vec());
        assert!(c.policy("trivia").out_of_corpus && c.policy("docs").out_of_corpus);
        assert_eq!(c.policy("trivia").partial_claims, PartialPolicy::Mark);
        assert_eq!(c.policy("docs").partial_claims, PartialPolicy::Drop);
        let yaml: AnswerConfig = serde_yaml::from_str(
            "collections: {trivia: {out_of_corpus: true, partial_claims: mark}}\nhistory_window: 3",
        )
        .unwrap();
        assert_eq!(yaml.history_window, 3);
        assert_eq!(yaml.policy("trivia").partial_claims, PartialPolicy::Mark);
    }
}
