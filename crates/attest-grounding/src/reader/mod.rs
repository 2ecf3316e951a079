//! The reader: the answer tier's judgement of meaning (issue 13). Two questions decide whether Attest answers,
//! and both are asked of a cross-encoder that reads the question (or claim) and the passage together:
//! - *does this sentence answer the question?* ([`Reader::read`]) — the coverage gate, the answer's confidence
//!   and the sentences the extractive composer quotes come from it; with weights that carry a span head, the
//!   answerability blends the `answerable` head with the span margin (is there an answer span in this sentence
//!   at all, against "no answer here"), which is what tells "names the subject" from "answers the question";
//! - *does this passage support this claim?* ([`ReaderVerifier`]) — the local verifier, the head calibrated
//!   together with the lexical verifier's features ([`crate::verifier::calibration`]).
//!
//! Only what matters is read (inference is the expensive part of a turn): the sentences of the best
//! `reader.passages` candidates, at most `reader.max_sentences` of them, chosen by question coverage.
//! `reader.backend: lexical` turns the reader off (word-overlap gate, composer and verifier).
//!
//! The model itself — its token layout, weights, checksums and ONNX Runtime session — is
//! `attest_models::reader`'s; this module decides what it reads and what the scores mean.
//! - [`rules`]: what keeps a sentence from being read (it answers another question).
//!
//! Answerability is read by every model of `reader.ensemble` beside the main one and combined by
//! `reader.ensemble_rule` (the geometric mean of two backbones, MiniLM and bge-small, by default); support by the
//! main model alone.

pub mod rules;

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use self::rules::{SentenceRules, Verdict};
pub use crate::footnotes::{Readings, SentenceRead};
use crate::verifier::calibration::{is_quote, SupportCalibration, SupportInputs};
use crate::verifier::features::features;
use crate::verifier::Verifier;
use attest_models::reader::input;
pub use attest_models::reader::{
    Head, Judgement, ReaderError, ReaderModel, RELATIVE_READER_DIR, SECOND_READER_DIR,
};
use attest_text::relevance::sentence_relevance;
use attest_text::text;

/// Which judgement back end the answer tier uses.
///
/// The default is the reader (issue 41): trained on Wikipedia, forum posts and HaluEval's passages, its gate
/// combined with the lexical one (`reader.gate: veto`: the lexical gate can refuse), which hallucinated less than
/// the lexical default on every shared set (docs/bench/history.md "Reader round 7").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReaderBackend {
    /// The trained cross-encoder (`models/reader`).
    #[default]
    Model,
    /// No model: question coverage by word overlap, the learned lexical verifier.
    Lexical,
}

/// How the reader's gate and the lexical gate (reranked scores) combine, `answer.reader.gate`.
///
/// The reader tells "names the subject" from "answers the question" on Wikipedia, where the lexical gate cannot,
/// but alone on forum posts it grounded questions whose post was deleted (28.9% of them on shift-reddit's held-out
/// posts) that the lexical gate refuses (issue 41). `veto` (the default) lets the lexical gate refuse but not
/// demand: chosen on held-in squad-dev articles and shift-reddit posts as the mode with the most coverage that
/// hallucinated less than the lexical gate on both (docs/bench/history.md "Reader round 7").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GateMode {
    /// Ground when both gates ground; bail when either bails; else refine (the most cautious).
    Both,
    /// The reader's gate, unless the lexical gate bails (the lexical gate can veto, not demand).
    #[default]
    Veto,
    /// The reader's gate alone.
    Reader,
}

/// A sentence the reader may read: how much of the question it covers, where it is, and whether only overrulable
/// rules refused it (read, held to `reader.overrule_bar`).
struct Candidate {
    relevance: f64,
    passage: usize,
    sentence: usize,
    held: bool,
}

/// The `answer.reader` config section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReaderConfig {
    pub backend: ReaderBackend,
    /// The model directory (default: the nearest `crates/attest-models/models/reader` of the working
    /// directory, else the checkout this binary was built from).
    pub model_dir: Option<PathBuf>,
    /// Best candidates (by reranker score) whose sentences are read per retrieval hop.
    pub passages: usize,
    /// Sentences read per hop at most, those covering most of the question first. 8: ask p50 / p95 0.30 / 0.73 s
    /// on squad-dev held-out (12 gave ~1.3 s p95) at 0.7 points less coverage and the same hallucination, on
    /// squad-dev held-out and shift-new-wiki alike (docs/bench/history.md, "Eight windows").
    pub max_sentences: usize,
    /// Pairs per forward pass (small batches: a batch pads every pair to its longest).
    pub batch: usize,
    /// Threads one read spreads its batches over (a forward pass uses one core; 4 × 2 reads 20 sentences in
    /// half the time of 16 × 1, see docs/bench/history.md "Reader latency").
    pub threads: usize,
    /// The coverage gate on answerability (chosen on squad-dev held-out articles and unchanged on
    /// shift-new-wiki): bail below `bail_threshold`, ground at `ground_threshold` or above, else refine.
    /// 0.05 / 0.15 with the round-6 weights (span head): squad-dev held-out 1.9% hallucination at 77.6% coverage,
    /// shift-new-wiki 1.6% at 73.0% (0.25 gave 74.5% coverage on squad-dev; docs/bench/history.md "Reader rounds 5 and 6").
    pub bail_threshold: f64,
    pub ground_threshold: f64,
    /// How this gate combines with the lexical one (`veto`: this one, unless the lexical one bails; `both`: ground
    /// only when both do; `reader`: this one alone).
    pub gate: GateMode,
    /// Under `gate: veto`, the lexical gate refuses when the best reranked score is below this (see
    /// `attest_answer::gate::lexical_beside_reader`). 0.40, the lexical gate's own bail threshold: on held-in articles
    /// and posts, 0.30 covered 3.5 points more of squad-dev at the same hallucination (0.7%) but hallucinated
    /// 13.3% on shift-reddit against 10.2% (docs/bench/history.md "Verifier calibration, and the veto's own threshold"); a corpus of
    /// encyclopedic text may take the lower value. With `question_names` on, 0.35 passed on held-in posts (17 of 166
    /// answered, as 0.40 without it) but answered 5.9% of shift-reddit's held-out posts against 4.4%, over the 5%
    /// target (docs/bench/history.md "The question's names with a lower veto").
    pub veto_threshold: f64,
    /// Where set, the veto does not bail where a read sentence's answerability (the readers combined) is at
    /// least this: both readers that sure outweigh a low reranked score, which the reranker gives a long paragraph
    /// for the one sentence of it that answers. On Wikipedia and forum posts the veto refused many more answerable
    /// questions the readers were sure of than unanswerable ones; on company text it decided almost nothing
    /// (docs/decisions/near-misses.md "The readers overrule the veto, and one reader sure is not an answer").
    /// Unset: the veto bails on the reranked score alone.
    pub veto_overrule_bar: Option<f64>,
    /// Read only sentences whose context names one of the question's names ([`attest_text::question_names::QuestionNames`]). Off: on held-in
    /// squad-dev articles (1-in-8, round 7) it cut hallucination 0.7% → 0.0% and answer-removed 15.3% → 14.0%
    /// but cost 2.0 points of coverage (81.1% → 79.2%); on held-in shift-reddit posts 10.2% → 8.4% at 46.8% →
    /// 45.9% (docs/bench/history.md "The question's names"); with a lower veto it did not hold on held-out posts.
    pub question_names: bool,
    /// Read no passage that names a look-alike of the question's subject and not the subject itself
    /// ([`attest_text::subjects::Subjects::sibling_in`]: "Drift Mini" for "Drift Max", "Returns API v2" for "Returns API v1"): it answers
    /// another question (issue 68; measured in docs/decisions/near-misses.md).
    pub subjects: bool,
    /// Read no sentence whose context meets the question only in its subject's name
    /// ([`attest_text::subjects::meets_the_asked`]: "Battery life of the Drift Max is 10 hours" for "How long does the
    /// Drift Max take to charge?"): it states another attribute of the subject (issue 68). The subject is the
    /// question's names, else (with `compounds`) its lower-case compound ("the sick leave"); the context is the
    /// sentence, with the one before where it leans on it; and the rule holds only where the passages read write
    /// one of the asked words somewhere ([`rules::SentenceRules::seeing`]: else the question paraphrases them).
    pub asked_words: bool,
    /// The rules whose refusal the readers may overrule (`overrule_bar`): those of the question's wording
    /// (`asked_words`, `conditions`, `another_subject`, `compounds`), which an encyclopedia's paraphrases trip; not
    /// a quantity missing, a look-alike named or a value withheld (chosen held-in: docs/decisions/near-misses.md
    /// "Rules the readers may overrule").
    pub overrulable: Vec<rules::Rule>,
    /// Where set, a sentence refused only by `overrulable` rules is read all the same and kept only where every
    /// reader gives it at least this answerability (a paraphrase both readers are sure of: "was established in
    /// 1951" for "When was … founded?"); unset, it is refused.
    pub overrule_bar: Option<f64>,
    /// Read a "how many / how long / how much" or "what is the <measure> of" question only against sentences
    /// stating a quantity (a digit or a number word, [`attest_text::quantity::Asked`]): company text talks around numbers
    /// it never gives (issue 68).
    pub quantities: bool,
    /// Read no sentence that says its value is not given ([`attest_text::withheld::withholds`]: "a range of its own
    /// that the shop does not publish", "no date has been announced"): it names the asked attribute and
    /// declines to state it (issue 68).
    pub withheld: bool,
    /// Read no sentence that states another condition of the kind the question puts ([`attest_text::conditions`]:
    /// "in staging" for "in production", "out of hours" for "during business hours") (issue 68).
    pub conditions: bool,
    /// Under `subjects`, read no sentence naming something else where no word of the question's subjects is
    /// named, neither in it, the sentence before it nor the title ([`attest_text::subjects::Subjects::another_in_place`]:
    /// "QueueBacklogGrowing escalates after 30 minutes" for LatencyP99High) (issue 68).
    pub another_subject: bool,
    /// Read no sentence naming a look-alike of the question's lower-case compound and not the compound itself
    /// ([`attest_text::compounds`]: "bereavement leave" for "sick leave", "maximum page size" for "maximum payload
    /// size") (issue 68).
    pub compounds: bool,
    /// More reader model directories (relative ones found as `model_dir` is) whose answerability is combined with
    /// the main model's (`ensemble_rule`); the support head stays the main model's. Default: round 8
    /// (bge-small-en-v1.5, int8 ONNX, [`SECOND_READER_DIR`]) beside round 7 (MiniLM): two backbones err on different sentences, and the mean
    /// covered 3.8 points more of squad-dev held-out, 4.1 of shift-new-wiki and 2.3 of shift-reddit, answering the
    /// same number of unanswerable questions on the last two and one more on squad-dev, for ~1.5× the ask time
    /// of round 7 alone (both under candle then; with every reader under ONNX Runtime the two ask in half the time
    /// they took: docs/decisions/two-readers.md, docs/decisions/onnx-runtime-reader.md). Since issue 68 the pair
    /// is round 12 and round 13 (each taught the company near misses). `[]`: the main reader alone.
    pub ensemble: Vec<PathBuf>,
    /// How the ensemble's answerabilities combine ([`EnsembleRule`]); default `geometric` (since issue 68): one
    /// reader sure and the other not is not an answer. Under the mean such a sentence scored about a half and
    /// grounded, and held-in that was where most answer-removed questions answered and most company near misses
    /// left sat. Held out it trades Wikipedia coverage for them: the two readers disagree on right answers too on
    /// text neither was trained on (docs/decisions/near-misses.md "The readers overrule the veto, and one reader
    /// sure is not an answer"; docs/bench/history.md "The geometric mean of the two readers").
    pub ensemble_rule: EnsembleRule,
}

/// How the ensemble's answerability probabilities combine into one per sentence.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EnsembleRule {
    /// The arithmetic mean: one confident model can carry a sentence the other scores near 0.
    Mean,
    /// The geometric mean: a sentence passes only when every model gives it some weight.
    #[default]
    Geometric,
}

impl Readings {
    /// The readings of one sentence from each reader's probability (at least one).
    pub fn of(probabilities: &[f64], held: bool) -> Readings {
        Readings {
            mean: EnsembleRule::Mean.combine(probabilities),
            geometric: EnsembleRule::Geometric.combine(probabilities),
            weakest: probabilities
                .iter()
                .copied()
                .fold(f64::INFINITY, f64::min)
                .min(1.0),
            held,
        }
    }
}

impl EnsembleRule {
    /// The combination of `scores` (one per model, each in 0..=1).
    pub fn combine(self, scores: &[f64]) -> f64 {
        let n = scores.len().max(1) as f64;
        match self {
            EnsembleRule::Mean => scores.iter().sum::<f64>() / n,
            EnsembleRule::Geometric => scores.iter().map(|s| s.max(0.0).powf(1.0 / n)).product(),
        }
    }
}

impl Default for ReaderConfig {
    fn default() -> Self {
        ReaderConfig {
            backend: ReaderBackend::Model,
            model_dir: None,
            passages: 4,
            max_sentences: 8,
            batch: 4,
            threads: 2,
            bail_threshold: 0.05,
            ground_threshold: 0.15,
            gate: GateMode::Veto,
            veto_threshold: 0.40,
            veto_overrule_bar: Some(0.995),
            question_names: false,
            subjects: true,
            asked_words: true,
            overrulable: vec![
                rules::Rule::AskedWords,
                rules::Rule::Conditions,
                rules::Rule::AnotherSubject,
                rules::Rule::Compounds,
            ],
            overrule_bar: Some(0.98),
            quantities: true,
            withheld: true,
            conditions: true,
            another_subject: true,
            compounds: true,
            ensemble: vec![PathBuf::from(SECOND_READER_DIR)],
            ensemble_rule: EnsembleRule::Geometric,
        }
    }
}

impl ReaderConfig {
    /// A sentence's answerability under these settings: its readings combined by `ensemble_rule`, or 0 for a
    /// held sentence (only overrulable rules refused it) that not every reader clears `overrule_bar` for.
    pub fn answerability(&self, readings: &Readings) -> f64 {
        let cleared =
            !readings.held || self.overrule_bar.is_some_and(|bar| readings.weakest >= bar);
        if !cleared {
            return 0.0;
        }
        match self.ensemble_rule {
            EnsembleRule::Mean => readings.mean,
            EnsembleRule::Geometric => readings.geometric,
        }
    }

    pub fn model_dir(&self) -> PathBuf {
        self.model_dir
            .clone()
            .unwrap_or_else(|| attest_models::locate_repository_dir(RELATIVE_READER_DIR))
    }

    /// The ensemble's directories, relative ones found as the default `model_dir` is.
    pub fn ensemble_dirs(&self) -> Vec<PathBuf> {
        self.ensemble
            .iter()
            .map(|d| match d.to_str() {
                Some(relative) if d.is_relative() && !d.exists() => {
                    attest_models::locate_repository_dir(relative)
                }
                _ => d.clone(),
            })
            .collect()
    }
}

/// How many sentences one reading reads at most.
#[derive(Debug, Clone, Copy)]
enum Budget {
    /// This many over all the passages (the best-covering first).
    Total(usize),
    /// This many of each passage.
    PerPassage(usize),
}

/// A passage to read.
#[derive(Debug, Clone, Copy)]
pub struct ToRead<'a> {
    pub title: &'a str,
    pub text: &'a str,
}

fn load_model(
    dir: &std::path::Path,
    config: &ReaderConfig,
) -> Result<Arc<ReaderModel>, ReaderError> {
    Ok(Arc::new(ReaderModel::load(
        dir,
        config.batch,
        config.threads,
    )?))
}

/// The reader over a loaded model.
#[derive(Debug, Clone)]
pub struct Reader {
    model: Arc<ReaderModel>,
    /// The ensemble's other members (`reader.ensemble`): answerability combines every model's (`reader.ensemble_rule`).
    members: Vec<Arc<ReaderModel>>,
    config: ReaderConfig,
}

impl Reader {
    /// The reader `config` names, or None for the lexical back end. A model that is missing or does not match
    /// its checksum is an error (reported at start-up, not per question). Loads every member's weights: build it
    /// once (`attest_answer::AnswerModels`) and clone it (a clone shares the loaded models).
    pub fn from_config(config: &ReaderConfig) -> Result<Option<Self>, ReaderError> {
        if config.backend == ReaderBackend::Lexical {
            return Ok(None);
        }
        if config.passages == 0 || config.max_sentences == 0 {
            return Err(ReaderError::Model(
                "reader.passages and reader.max_sentences must be at least 1".into(),
            ));
        }
        let unit = 0.0..=1.0;
        if ![
            config.bail_threshold,
            config.ground_threshold,
            config.veto_threshold,
            config.overrule_bar.unwrap_or(0.0),
            config.veto_overrule_bar.unwrap_or(0.0),
        ]
        .iter()
        .all(|v| unit.contains(v))
            || config.bail_threshold > config.ground_threshold
        {
            return Err(ReaderError::Model(
                "reader thresholds must be in 0..1, bail_threshold ≤ ground_threshold".into(),
            ));
        }
        let members = config
            .ensemble_dirs()
            .iter()
            .map(|dir| load_model(dir, config))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(Reader {
            model: load_model(&config.model_dir(), config)?,
            members,
            config: config.clone(),
        }))
    }

    pub fn config(&self) -> &ReaderConfig {
        &self.config
    }

    pub fn model(&self) -> &ReaderModel {
        &self.model
    }

    /// The reading of the sentences of each passage (per passage, one per sentence of [`text::sentences`]);
    /// sentences not read score 0. At most `max_sentences` are read, those that cover most of the question first
    /// (ties: the better-ranked passage, the earlier sentence).
    pub fn read(
        &self,
        question: &str,
        passages: &[ToRead],
    ) -> Result<Vec<Vec<SentenceRead>>, ReaderError> {
        self.read_within(question, passages, Budget::Total(self.config.max_sentences))
    }

    /// As [`Self::read`], but at most `per_passage` sentences of each passage are read (those that cover most
    /// of the question), however many passages there are: every passage gets its own reading, as when the
    /// readers rank candidates (`attest_answer::rerank::readers`) rather than look for the answer.
    pub fn read_each(
        &self,
        question: &str,
        passages: &[ToRead],
        per_passage: usize,
    ) -> Result<Vec<Vec<SentenceRead>>, ReaderError> {
        self.read_within(question, passages, Budget::PerPassage(per_passage))
    }

    fn read_within(
        &self,
        question: &str,
        passages: &[ToRead],
        budget: Budget,
    ) -> Result<Vec<Vec<SentenceRead>>, ReaderError> {
        let q = text::content_set(question);
        let mut out: Vec<Vec<SentenceRead>> = Vec::with_capacity(passages.len());
        let mut candidates: Vec<Candidate> = Vec::new();
        let split: Vec<Vec<&str>> = passages.iter().map(|p| text::sentences(p.text)).collect();
        for (p, sentences) in split.iter().enumerate() {
            out.push(vec![SentenceRead::default(); sentences.len()]);
            let title = text::content_set(passages[p].title);
            for (i, s) in sentences.iter().enumerate() {
                candidates.push(Candidate {
                    relevance: sentence_relevance(&q, &title, s),
                    passage: p,
                    sentence: i,
                    held: false,
                });
            }
        }
        // A sentence sharing no word with the question, neither itself nor its passage's title, is not read: the
        // model matches answer types confidently ("how many …" → any sentence with a count) and must not be
        // given sentences off the question's topic to do it with.
        if !q.is_empty() {
            candidates.retain(|c| c.relevance > 0.0);
        }
        // Nor one a rule of [`rules`] refuses: it answers another question (another edition, a look-alike
        // subject, another attribute or condition, no quantity for "how many", a value withheld) — unless only
        // overrulable rules refuse it: then it is read, held to `overrule_bar`.
        let rules = SentenceRules::new(question, &self.config)
            .seeing(passages.iter().map(|p| (p.title, p.text)));
        let off: Vec<bool> = passages
            .iter()
            .map(|p| rules.passage_refusal(p.title, p.text).is_some())
            .collect();
        candidates.retain_mut(|c| {
            if off[c.passage] {
                return false;
            }
            let verdict = rules.sentence_verdict(
                passages[c.passage].title,
                &split[c.passage],
                c.sentence,
                &self.config.overrulable,
            );
            c.held = verdict == Verdict::Overrulable;
            verdict == Verdict::Read || c.held && self.config.overrule_bar.is_some()
        });
        // Sentences no rule refused first: an overrulable one only takes a reading slot left over, so it never
        // keeps a sentence from being read that would have been read without it.
        candidates.sort_by(|a, b| {
            (a.held.cmp(&b.held))
                .then(b.relevance.total_cmp(&a.relevance))
                .then(a.passage.cmp(&b.passage))
                .then(a.sentence.cmp(&b.sentence))
        });
        match budget {
            Budget::Total(n) => candidates.truncate(n),
            Budget::PerPassage(n) => {
                let mut taken = vec![0usize; passages.len()];
                candidates.retain(|c| {
                    taken[c.passage] += 1;
                    taken[c.passage] <= n
                });
            }
        }
        let free = candidates.iter().filter(|c| !c.held).count();
        let contexts: Vec<String> = candidates
            .iter()
            .map(|c| {
                input::answer_context(passages[c.passage].title, &split[c.passage], c.sentence)
            })
            .collect();
        let models = std::iter::once(&self.model).chain(&self.members);
        // Per candidate, each model's judgement, in model order (the main model's first).
        let mut per_model: Vec<Vec<Judgement>> =
            vec![Vec::with_capacity(1 + self.members.len()); candidates.len()];
        for model in models {
            let pairs = candidates
                .iter()
                .zip(&contexts)
                .map(|(c, context)| {
                    let sentence = split[c.passage][c.sentence];
                    input::pair_ids(model.tokenizer(), question, sentence, Some(context))
                })
                .collect::<Result<Vec<_>, _>>()?;
            // Judged apart: the int8 graph quantises each batch's activations together, so a batch-mate moves a
            // sentence's score, and the free sentences must score as they would with no overrulable one read.
            let (free_pairs, held_pairs) = pairs.split_at(free);
            let mut judgements = model.judge(Head::Answerable, free_pairs)?;
            judgements.extend(model.judge(Head::Answerable, held_pairs)?);
            for (judged, j) in per_model.iter_mut().zip(judgements) {
                judged.push(j);
            }
        }
        for (c, judged) in candidates.iter().zip(&per_model) {
            let probabilities: Vec<f64> = judged.iter().map(|j| j.probability).collect();
            let readings = Readings::of(&probabilities, c.held);
            out[c.passage][c.sentence] = SentenceRead {
                answerability: self.config.answerability(&readings),
                answer_part: judged.first().map_or(0, |j| j.part),
                readings,
            };
        }
        Ok(out)
    }

    /// Support of `claim` by a passage, from the sentences of it that share most words with the claim.
    pub fn support(&self, claim: &str, title: &str, passage: &str) -> Result<f64, ReaderError> {
        let evidence = input::evidence_window(title, passage, claim);
        let pair = input::pair_ids(self.model.tokenizer(), claim, &evidence, None)?;
        Ok(self.model.score(Head::Supported, &[pair])?[0])
    }
}

/// The support head as the answer tier's verifier, calibrated together with the lexical features
/// ([`SupportCalibration`]). A model error scores the head 0 (the claim is then judged on its words alone and
/// rarely passes, so the turn abstains rather than answering unchecked), logged.
#[derive(Debug, Clone)]
pub struct ReaderVerifier {
    reader: Reader,
    calibration: SupportCalibration,
}

impl ReaderVerifier {
    pub fn new(reader: Reader) -> Self {
        ReaderVerifier {
            reader,
            calibration: SupportCalibration::bundled(),
        }
    }

    /// What the calibration reads for a claim made in answer to `question` (empty for a bare claim).
    pub fn inputs_in(
        &self,
        question: &str,
        claim: &str,
        title: &str,
        passage: &str,
    ) -> SupportInputs {
        SupportInputs {
            head: self.head(claim, title, passage),
            lexical: features(question, claim, passage),
            quoted: is_quote(claim, passage),
        }
    }

    /// What the calibration reads for `answer` as the answer to `question` (the head reads both as one).
    pub fn inputs_answer(&self, question: &str, answer: &str, passage: &str) -> SupportInputs {
        SupportInputs {
            head: self.head(&format!("{question} {answer}"), "", passage),
            lexical: features(question, answer, passage),
            quoted: is_quote(answer, passage),
        }
    }

    /// The support head alone; a model error scores 0 (logged).
    fn head(&self, claim: &str, title: &str, passage: &str) -> f64 {
        self.reader
            .support(claim, title, passage)
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, event = "verifier_failed", "claim not verified");
                0.0
            })
    }
}

impl Verifier for ReaderVerifier {
    fn support(&self, question: &str, claim: &str, passage: &str) -> f64 {
        self.support_in(question, claim, "", passage)
    }

    fn support_answer(&self, question: &str, answer: &str, passage: &str) -> f64 {
        self.calibration
            .support(&self.inputs_answer(question, answer, passage))
    }

    fn support_in(&self, question: &str, claim: &str, title: &str, passage: &str) -> f64 {
        self.calibration
            .support(&self.inputs_in(question, claim, title, passage))
    }
}

#[cfg(test)]
mod tests {
    use super::{EnsembleRule, ReaderConfig, Readings};

    #[test]
    fn a_sentence_answerability_is_its_readings_under_the_rule_and_the_overrule_bar() {
        let free = Readings::of(&[0.9, 0.1], false);
        assert!((free.mean - 0.5).abs() < 1e-12 && (free.geometric - 0.3).abs() < 1e-12);
        assert_eq!(free.weakest, 0.1);
        let mut settings = ReaderConfig {
            ensemble_rule: EnsembleRule::Mean,
            overrule_bar: Some(0.95),
            ..ReaderConfig::default()
        };
        assert_eq!(settings.answerability(&free), free.mean);
        settings.ensemble_rule = EnsembleRule::Geometric;
        assert_eq!(settings.answerability(&free), free.geometric);
        // A held sentence counts only where every reader clears the bar; never without one.
        let sure = Readings::of(&[0.99, 0.96], true);
        let unsure = Readings::of(&[0.99, 0.90], true);
        assert_eq!(settings.answerability(&sure), sure.geometric);
        assert_eq!(settings.answerability(&unsure), 0.0);
        settings.overrule_bar = Some(0.9);
        assert_eq!(settings.answerability(&unsure), unsure.geometric);
        settings.overrule_bar = None;
        assert_eq!(settings.answerability(&sure), 0.0);
    }

    #[test]
    fn the_geometric_rule_lets_no_single_model_carry_a_sentence() {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(close(EnsembleRule::Mean.combine(&[0.9, 0.1]), 0.5));
        assert!(close(EnsembleRule::Geometric.combine(&[0.9, 0.1]), 0.3));
        // One model at 0 vetoes under the geometric rule; the mean still passes a 0.15 ground threshold.
        assert!(close(EnsembleRule::Geometric.combine(&[0.8, 0.0]), 0.0));
        assert!(EnsembleRule::Mean.combine(&[0.8, 0.0]) > 0.15);
        // Agreement is kept as it is, and one model alone is itself.
        assert!(close(EnsembleRule::Geometric.combine(&[0.6, 0.6]), 0.6));
        for rule in [EnsembleRule::Mean, EnsembleRule::Geometric] {
            assert!(close(rule.combine(&[0.42]), 0.42));
        }
    }
}
