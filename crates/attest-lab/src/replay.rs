//! `attest-lab replay`: the gate's bars and the readers' combination tried on what a run of `attest-lab eval
//! --per-question` read, in a second instead of a run per setting. Each question's record keeps what the coverage
//! gate saw at each retrieval ([`HopTrace`]: the reranked scores and every read sentence's readings before the
//! ensemble rule and the overrule bar); a replay decides the gate again under other settings, hop by hop, with
//! the pipeline's own gate ([`HopTrace::decide`]).
//!
//! What a replay cannot know is said, not guessed silently: where it grounds on the sentence the run grounded on,
//! the run's outcome stands (verification included); where it grounds elsewhere, the question counts as answered
//! from its best sentence (right when that sentence holds a gold answer; verification assumed to pass:
//! `approximate`); where it asks for a retrieval the run never made, the question counts as abstained
//! (`unseen`). At the run's own settings every question must come out as the run scored it: the first line says
//! how many did, and a trace that disagrees is a bug in the trace.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context};
use attest_answer::gate::{Gate, GateThresholds};
use attest_answer::gate_trace::HopTrace;
use attest_answer::reader::{EnsembleRule, ReaderConfig};
use clap::Args;
use serde::Serialize;

use crate::eval::data::read_jsonl;
use crate::eval::metrics::Rate;
use crate::eval::questions::{QuestionRecord, Scored};
use crate::eval::run::holds_gold;

#[derive(Args, Clone)]
pub struct ReplayArgs {
    /// A `--per-question` file of `attest-lab eval` (repeatable: each is reported on its own line).
    #[arg(long = "per-question", value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// The node configuration the run used (its `answer` section; `ATTEST__ANSWER__…` overrides apply): the
    /// settings a replay starts from and must reproduce.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Ensemble rules to try (`mean`, `geometric`).
    #[arg(long, value_delimiter = ',')]
    pub ensemble_rule: Vec<String>,
    /// `reader.ground_threshold` values to try.
    #[arg(long, value_delimiter = ',')]
    pub ground: Vec<f64>,
    /// `reader.bail_threshold` values to try.
    #[arg(long, value_delimiter = ',')]
    pub bail: Vec<f64>,
    /// `reader.veto_threshold` values to try.
    #[arg(long, value_delimiter = ',')]
    pub veto: Vec<f64>,
    /// `reader.veto_overrule_bar` values to try (`off`: unset).
    #[arg(long, value_delimiter = ',', value_parser = parse_bar)]
    pub veto_overrule: Vec<Bar>,
    /// `reader.overrule_bar` values to try (`off`: held sentences never count).
    #[arg(long, value_delimiter = ',', value_parser = parse_bar)]
    pub overrule_bar: Vec<Bar>,
    /// Write every setting's figures here as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// An optional bar on the command line: a number in 0..=1, or `off`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bar(pub Option<f64>);

fn parse_bar(s: &str) -> Result<Bar, String> {
    if s == "off" {
        return Ok(Bar(None));
    }
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(Bar(Some(v))),
        _ => Err(format!("{s:?}: a number in 0..1 or `off`")),
    }
}

/// How one question comes out under a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replayed {
    /// As the run scored it (the same decision on the same sentence, or no reader trace to decide on).
    AsRun(Scored),
    /// Abstained where the run answered, or at the same point: exact.
    Abstained,
    /// Answered from another sentence than the run's (or where the run abstained): `correct` when the sentence
    /// holds a gold answer; verification assumed to pass.
    Approximate { correct: bool },
    /// The setting asks for a retrieval the run never made: counted as abstained.
    Unseen,
}

impl Replayed {
    pub fn answered(self) -> bool {
        match self {
            Replayed::AsRun(s) => {
                matches!(s, Scored::Correct | Scored::Wrong | Scored::Hallucinated)
            }
            Replayed::Approximate { .. } => true,
            Replayed::Abstained | Replayed::Unseen => false,
        }
    }

    /// Whether it comes out as the run's `scored`: answered or not, right or not.
    pub fn agrees_with(self, scored: Scored) -> bool {
        self.answered() == Replayed::AsRun(scored).answered()
            && self.correct() == Replayed::AsRun(scored).correct()
    }

    fn correct(self) -> bool {
        match self {
            Replayed::AsRun(s) => s == Scored::Correct,
            Replayed::Approximate { correct } => correct,
            Replayed::Abstained | Replayed::Unseen => false,
        }
    }
}

/// The gate's settings a replay varies, beside the fixed ones.
pub struct Setting<'a> {
    pub reader: ReaderConfig,
    pub thresholds: &'a GateThresholds,
    pub max_hops: usize,
}

/// `record` replayed under `setting`; `run` is the reader configuration the record was made with.
pub fn replay(record: &QuestionRecord, run: &ReaderConfig, setting: &Setting) -> Replayed {
    let hops = &record.hops;
    if hops.is_empty() {
        return Replayed::AsRun(record.scored);
    }
    for (k, hop) in hops.iter().enumerate() {
        let gate = hop.decide(&setting.reader, setting.thresholds);
        let last = k + 1 == hops.len();
        let more_allowed = k + 1 < setting.max_hops.max(1);
        if gate == Gate::Refine && more_allowed {
            if !last {
                continue;
            }
            // The run stopped here for another reason than refining: the next retrieval was never made.
            if hop.gate != Gate::Refine {
                return Replayed::Unseen;
            }
        }
        if gate != Gate::Ground {
            return Replayed::Abstained;
        }
        return grounded(record, hop, last, run, &setting.reader);
    }
    unreachable!("the last hop returns")
}

fn grounded(
    record: &QuestionRecord,
    hop: &HopTrace,
    last: bool,
    run: &ReaderConfig,
    reader: &ReaderConfig,
) -> Replayed {
    let top = hop.top(reader);
    if last && hop.gate == Gate::Ground && top == hop.top(run) {
        return Replayed::AsRun(record.scored);
    }
    let sentence = top.map(|(p, s)| hop.passages[p].sentences[s].text.as_str());
    Replayed::Approximate {
        correct: record.answerable && sentence.is_some_and(|t| holds_gold(t, &record.gold_answers)),
    }
}

/// A set's figures under one setting.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub hallucination: Rate,
    pub coverage: Rate,
    /// Answered answerable questions holding a gold answer.
    pub accuracy: f64,
    /// Questions scored as the run scored them, or abstained at the same point.
    pub exact: usize,
    pub approximate: usize,
    pub unseen: usize,
    /// Hallucination and coverage per kind of text (the questions' `domain`), where they name one.
    pub by_domain: BTreeMap<String, Side>,
}

/// The two rates of a group of questions.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Side {
    pub hallucination: Rate,
    pub coverage: Rate,
}

/// Counts of a group of questions under one setting.
#[derive(Default)]
struct Tally {
    unanswerable: usize,
    hallucinated: usize,
    answerable: usize,
    answered: usize,
    correct: usize,
}

impl Tally {
    fn add(&mut self, answerable: bool, out: Replayed) {
        if answerable {
            self.answerable += 1;
            self.answered += usize::from(out.answered());
            self.correct += usize::from(out.correct());
        } else {
            self.unanswerable += 1;
            self.hallucinated += usize::from(out.answered());
        }
    }

    fn side(&self) -> Side {
        Side {
            hallucination: Rate::of(self.hallucinated, self.unanswerable),
            coverage: Rate::of(self.answered, self.answerable),
        }
    }
}

pub fn figures(records: &[QuestionRecord], run: &ReaderConfig, setting: &Setting) -> Figures {
    let mut all = Tally::default();
    let mut by_domain: BTreeMap<&str, Tally> = BTreeMap::new();
    let (mut exact, mut approximate, mut unseen) = (0, 0, 0);
    for r in records.iter().filter(|r| r.scored != Scored::OutOfCorpus) {
        let out = replay(r, run, setting);
        match out {
            Replayed::Approximate { .. } => approximate += 1,
            Replayed::Unseen => unseen += 1,
            _ => exact += 1,
        }
        all.add(r.answerable, out);
        if let Some(domain) = &r.domain {
            by_domain.entry(domain).or_default().add(r.answerable, out);
        }
    }
    let Side {
        hallucination,
        coverage,
    } = all.side();
    Figures {
        hallucination,
        coverage,
        accuracy: all.correct as f64 / all.answered.max(1) as f64,
        exact,
        approximate,
        unseen,
        by_domain: by_domain
            .into_iter()
            .map(|(d, t)| (d.to_string(), t.side()))
            .collect(),
    }
}

impl Figures {
    /// The kind of text with the highest hallucination rate, as `name rate%` (empty without kinds).
    fn worst_kind(&self) -> String {
        self.by_domain
            .iter()
            .filter(|(_, s)| s.hallucination.n > 0)
            .max_by(|a, b| a.1.hallucination.rate.total_cmp(&b.1.hallucination.rate))
            .map(|(d, s)| format!(" worst kind {d} {:.1}%", 100.0 * s.hallucination.rate))
            .unwrap_or_default()
    }
}

/// Every combination of the values tried (each list defaulting to the run's value).
fn settings(args: &ReplayArgs, run: &ReaderConfig) -> anyhow::Result<Vec<ReaderConfig>> {
    let rules = if args.ensemble_rule.is_empty() {
        vec![run.ensemble_rule]
    } else {
        args.ensemble_rule
            .iter()
            .map(|r| match r.as_str() {
                "mean" => Ok(EnsembleRule::Mean),
                "geometric" => Ok(EnsembleRule::Geometric),
                other => bail!("--ensemble-rule {other:?}: mean or geometric"),
            })
            .collect::<anyhow::Result<_>>()?
    };
    let or = |v: &[f64], d: f64| if v.is_empty() { vec![d] } else { v.to_vec() };
    let or_bar = |v: &[Bar], d: Option<f64>| {
        if v.is_empty() {
            vec![d]
        } else {
            v.iter().map(|b| b.0).collect()
        }
    };
    let mut out = Vec::new();
    for &ensemble_rule in &rules {
        for ground_threshold in or(&args.ground, run.ground_threshold) {
            for bail_threshold in or(&args.bail, run.bail_threshold) {
                for veto_threshold in or(&args.veto, run.veto_threshold) {
                    for veto_overrule_bar in or_bar(&args.veto_overrule, run.veto_overrule_bar) {
                        for overrule_bar in or_bar(&args.overrule_bar, run.overrule_bar) {
                            if bail_threshold > ground_threshold {
                                continue;
                            }
                            out.push(ReaderConfig {
                                ensemble_rule,
                                ground_threshold,
                                bail_threshold,
                                veto_threshold,
                                veto_overrule_bar,
                                overrule_bar,
                                ..run.clone()
                            });
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

fn describe(r: &ReaderConfig) -> String {
    let bar = |b: Option<f64>| b.map_or("off".to_string(), |v| format!("{v}"));
    format!(
        "rule {:?} ground {} bail {} veto {} veto-overrule {} overrule {}",
        r.ensemble_rule,
        r.ground_threshold,
        r.bail_threshold,
        r.veto_threshold,
        bar(r.veto_overrule_bar),
        bar(r.overrule_bar)
    )
    .to_lowercase()
}

pub fn run(args: ReplayArgs) -> anyhow::Result<()> {
    let cfg = attest_node::config::load(args.config.as_deref(), std::env::vars())?;
    let run_reader = &cfg.answer.reader;
    let thresholds = cfg.answer.gate_thresholds();
    let sets: Vec<(String, Vec<QuestionRecord>)> = args
        .files
        .iter()
        .map(|f| Ok((f.display().to_string(), read_jsonl(f)?)))
        .collect::<anyhow::Result<_>>()?;
    for (name, records) in &sets {
        if records.iter().all(|r| r.hops.is_empty()) {
            bail!("{name}: no question carries the gate's trace (a run with the reader, of this version?)");
        }
        let own = Setting {
            reader: run_reader.clone(),
            thresholds: &thresholds,
            max_hops: cfg.answer.max_hops,
        };
        let differ = records
            .iter()
            .filter(|r| !replay(r, run_reader, &own).agrees_with(r.scored))
            .count();
        println!(
            "{name}: {} of {} questions reproduced at the run's settings",
            records.len() - differ,
            records.len()
        );
    }
    let mut rows = Vec::new();
    for reader in settings(&args, run_reader)? {
        let setting = Setting {
            reader,
            thresholds: &thresholds,
            max_hops: cfg.answer.max_hops,
        };
        println!("{}", describe(&setting.reader));
        let mut per_set = Vec::new();
        for (name, records) in &sets {
            let f = figures(records, run_reader, &setting);
            println!(
                "  {name}: hallucination {:.1}% ({}/{}) coverage {:.1}% accuracy {:.3}{} [exact {}, approximate {}, unseen {}]",
                100.0 * f.hallucination.rate,
                f.hallucination.hits,
                f.hallucination.n,
                100.0 * f.coverage.rate,
                f.accuracy,
                f.worst_kind(),
                f.exact,
                f.approximate,
                f.unseen
            );
            per_set.push(serde_json::json!({ "file": name, "figures": f }));
        }
        rows.push(serde_json::json!({ "setting": describe(&setting.reader), "sets": per_set }));
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&rows)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use attest_answer::gate_trace::{ReadPassage, ReadSentence};
    use attest_answer::reader::Readings;
    use attest_answer::AnswerConfig;

    fn hop(n: usize, reranked: f64, sentences: &[(&str, [f64; 2])], gate: Gate) -> HopTrace {
        HopTrace {
            hop: n,
            reranked: vec![reranked],
            passages: vec![ReadPassage {
                doc_id: "d".into(),
                sentences: sentences
                    .iter()
                    .enumerate()
                    .map(|(index, (text, p))| ReadSentence {
                        index,
                        text: text.to_string(),
                        readings: Readings::of(p, false),
                    })
                    .collect(),
            }],
            gate,
        }
    }

    fn record(answerable: bool, scored: Scored, hops: Vec<HopTrace>) -> QuestionRecord {
        QuestionRecord {
            id: "q".into(),
            question: "When?".into(),
            domain: None,
            kind: None,
            answerable,
            status: String::new(),
            reason: None,
            scored,
            answer: String::new(),
            confidence: 0.0,
            citations: Vec::new(),
            gold_answers: vec!["1951".into()],
            gold_doc: None,
            suggestions: Vec::new(),
            near_miss: None,
            near_doc: None,
            near_answer: None,
            total_ms: None,
            hops,
        }
    }

    #[test]
    fn a_replay_follows_the_gate_and_says_what_it_could_not_see() {
        let thresholds = AnswerConfig::default().gate_thresholds();
        let run = ReaderConfig::default();
        let at = |reader: ReaderConfig| Setting {
            reader,
            thresholds: &thresholds,
            max_hops: 3,
        };
        // Grounded on "founded in 1951" (both readers 0.3): at the run's settings, the run's outcome stands.
        let right = record(
            true,
            Scored::Correct,
            vec![hop(
                1,
                0.6,
                &[
                    ("It was founded in 1951.", [0.3, 0.3]),
                    ("Other.", [0.1, 0.1]),
                ],
                Gate::Ground,
            )],
        );
        assert_eq!(
            replay(&right, &run, &at(run.clone())),
            Replayed::AsRun(Scored::Correct)
        );
        // A higher ground bar refines, and the run never made the second retrieval.
        let strict = ReaderConfig {
            ground_threshold: 0.5,
            ..run.clone()
        };
        assert_eq!(replay(&right, &run, &at(strict.clone())), Replayed::Unseen);
        // Where the run refined and retrieved again, the replay reads the second hop as the run did.
        let two_hops = record(
            false,
            Scored::Abstained,
            vec![
                hop(1, 0.6, &[("Nothing.", [0.1, 0.1])], Gate::Refine),
                hop(2, 0.6, &[("Founded in 1951.", [0.12, 0.12])], Gate::Refine),
            ],
        );
        assert!(replay(&two_hops, &run, &at(run.clone())).agrees_with(Scored::Abstained));
        let lenient = ReaderConfig {
            ground_threshold: 0.11,
            bail_threshold: 0.05,
            ..run.clone()
        };
        // Grounded at hop 2 where the run did not: answered (a hallucination), from another decision.
        let out = replay(&two_hops, &run, &at(lenient));
        assert_eq!(out, Replayed::Approximate { correct: false });
        assert!(out.answered());
        // Grounded on another sentence than the run's: answered from it, right when it holds a gold answer.
        let mean = ReaderConfig {
            ensemble_rule: EnsembleRule::Mean,
            ..run.clone()
        };
        let disagree = record(
            true,
            Scored::Wrong,
            vec![hop(
                1,
                0.6,
                &[
                    ("Opened in 1960.", [0.4, 0.4]),
                    ("Founded in 1951.", [0.95, 0.01]),
                ],
                Gate::Ground,
            )],
        );
        assert!(replay(&disagree, &run, &at(run.clone())).agrees_with(Scored::Wrong));
        assert_eq!(
            replay(&disagree, &run, &at(mean)),
            Replayed::Approximate { correct: true }
        );
        // The figures count each kind of outcome.
        let mut records = [right, two_hops, disagree];
        records[1].domain = Some("policy".into());
        let f = figures(&records, &run, &at(run.clone()));
        assert_eq!((f.exact, f.approximate, f.unseen), (3, 0, 0));
        assert_eq!(f.by_domain.len(), 1);
        assert_eq!(f.by_domain["policy"].hallucination.n, 1);
        assert!(f.worst_kind().contains("policy 0.0%"), "{}", f.worst_kind());
        assert_eq!(
            (f.coverage.hits, f.coverage.n, f.hallucination.hits),
            (2, 2, 0)
        );
        assert!((f.accuracy - 0.5).abs() < 1e-12);
        let f = figures(&records, &run, &at(strict));
        assert_eq!((f.unseen, f.coverage.hits), (2, 0));
    }

    #[test]
    fn bars_parse_as_numbers_or_off() {
        assert_eq!(parse_bar("off"), Ok(Bar(None)));
        assert_eq!(parse_bar("0.98"), Ok(Bar(Some(0.98))));
        assert!(parse_bar("1.5").is_err() && parse_bar("x").is_err());
    }
}
