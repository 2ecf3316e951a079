//! `attest-lab rules`: what each reader rule ([`attest_answer::reader::rules`]) costs and what it catches, with
//! no model and no cluster, in seconds. For each answerable question the rules are asked of its gold sentence
//! (the gold document's sentence holding a gold answer): a refusal there is coverage lost. For each near miss
//! that names its neighbouring fact (`near_doc`, `near_answer`, as `data/company-nearmiss` does) they are asked
//! of the sentence stating that fact: a refusal there is a hallucination the model is never given the chance
//! of. Every rule is asked on its own, so a rule's figure does not depend on the rules before it; `any` is what
//! the configured rules do together. End-to-end figures still come from `attest-lab eval`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use attest_answer::reader::rules::{Rule, SentenceRules};
use attest_answer::reader::ReaderConfig;
use attest_text::text;
use clap::Args;

use crate::eval::data::{Articles, CorpusDoc, EvalSet, Query};

#[derive(Args, Clone)]
pub struct RulesArgs {
    /// A BEIR-layout data set (as `attest-lab eval --data`).
    #[arg(long)]
    pub data: PathBuf,
    /// Only the questions of held-in articles (squad-dev layout): where rules are chosen.
    #[arg(long, conflicts_with = "heldout")]
    pub heldin: bool,
    /// Only the questions of held-out articles: to report, never to choose by.
    #[arg(long)]
    pub heldout: bool,
    /// Only the questions of the tuning slice (held-in articles NNNN % 5 == 1, which readers trained with
    /// `scripts/reader/train.py --tuning-slice` never saw).
    #[arg(long, conflicts_with_all = ["heldin", "heldout"])]
    pub tuning_slice: bool,
    /// Keep every N-th question (a fixed sample).
    #[arg(long, default_value_t = 1)]
    pub every: usize,
    /// Print up to N refused sentences of each rule (question, title, sentence; `[rule*]` where it alone refused).
    #[arg(long, default_value_t = 0)]
    pub examples: usize,
    /// With --examples, print the sentences no rule refused instead (for near misses: what the model is left with).
    #[arg(long)]
    pub passed: bool,
    /// Node configuration file (its `answer.reader` switches; `ATTEST__ANSWER__READER__…` overrides apply).
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// One sentence the rules were asked of.
struct Asked<'a> {
    query: &'a Query,
    title: &'a str,
    sentence: &'a str,
    refused_by: Vec<Rule>,
}

/// Per rule, the sentences it refused, of one group (gold sentences, or neighbouring facts).
#[derive(Default)]
struct Tally<'a> {
    asked: usize,
    not_found: usize,
    any: usize,
    by_rule: BTreeMap<Rule, Vec<Asked<'a>>>,
    /// Per rule, the sentences it alone refused: what turning only it off would give back.
    alone: BTreeMap<Rule, usize>,
    /// The sentences no rule refused.
    passed: Vec<Asked<'a>>,
}

impl<'a> Tally<'a> {
    fn add(&mut self, found: Option<Asked<'a>>) {
        let Some(a) = found else {
            self.not_found += 1;
            return;
        };
        self.asked += 1;
        if !a.refused_by.is_empty() {
            self.any += 1;
        }
        if let [only] = a.refused_by[..] {
            *self.alone.entry(only).or_default() += 1;
        }
        if a.refused_by.is_empty() {
            self.passed.push(a);
            return;
        }
        for &rule in &a.refused_by {
            self.by_rule.entry(rule).or_default().push(Asked {
                refused_by: a.refused_by.clone(),
                ..a
            });
        }
    }

    fn print(&self, heading: &str, examples: usize, passed: bool) {
        let pct = |n: usize| 100.0 * n as f64 / self.asked.max(1) as f64;
        println!(
            "{heading}: {} sentences asked ({} whose sentence was not found)\n  {:<22} {:>5}  {:>6}  {:>5}",
            self.asked, self.not_found, "rule", "n", "%", "alone"
        );
        for rule in Rule::ALL {
            let refused = self.by_rule.get(&rule).map_or(0, Vec::len);
            if refused > 0 {
                let alone = self.alone.get(&rule).copied().unwrap_or(0);
                println!(
                    "  {:<22} {:>5}  {:>5.1}%  {:>5}",
                    rule.name(),
                    refused,
                    pct(refused),
                    alone
                );
            }
        }
        println!("  {:<22} {:>5}  {:>5.1}%", "any", self.any, pct(self.any));
        if passed {
            for a in self.passed.iter().take(examples) {
                println!(
                    "    [passed] {} | {} | {}",
                    a.query.text, a.title, a.sentence
                );
            }
            return;
        }
        for (rule, refused) in &self.by_rule {
            for a in refused.iter().take(examples) {
                // `*`: this rule alone refused it.
                let alone = if a.refused_by.len() == 1 { "*" } else { "" };
                println!(
                    "    [{}{alone}] {} | {} | {}",
                    rule.name(),
                    a.query.text,
                    a.title,
                    a.sentence
                );
            }
        }
    }
}

/// The sentence of `doc` holding one of `answers` (the first found, in order), with every rule refusing it;
/// `seen`: the documents standing in for what retrieval would bring beside it (see [`neighbourhood`]).
fn ask<'a>(
    query: &'a Query,
    doc: &'a CorpusDoc,
    answers: &[String],
    seen: &[&CorpusDoc],
    config: &ReaderConfig,
) -> Option<Asked<'a>> {
    let sentences = text::sentences(&doc.text);
    let i = answers
        .iter()
        .filter(|a| !a.trim().is_empty())
        .find_map(|a| sentences.iter().position(|s| s.contains(a.as_str())))?;
    let rules = SentenceRules::new(&query.text, config).seeing(
        std::iter::once(doc)
            .chain(seen.iter().copied())
            .map(|d| (d.title.as_str(), d.text.as_str())),
    );
    Some(Asked {
        query,
        title: &doc.title,
        sentence: sentences[i],
        refused_by: rules.all_refusals(&doc.title, &doc.text, &sentences, i),
    })
}

/// What a question's retrieval might bring beside its document, without retrieving: the [`RETRIEVED`] documents of
/// its company (tenant) where the set has tenants, else of its article (title), that share most content words with
/// the question. A stand-in for the reranked passages the reader is given.
fn neighbourhood<'a>(
    question: &str,
    doc: &CorpusDoc,
    by_key: &'a BTreeMap<&str, Vec<&'a CorpusDoc>>,
) -> Vec<&'a CorpusDoc> {
    let asked = text::content_set(question);
    let mut near: Vec<(usize, &CorpusDoc)> = by_key
        .get(doc.tenant.as_deref().unwrap_or(&doc.title))
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .map(|d| {
            let words = text::content_set(&format!("{} {}", d.title, d.text));
            (asked.intersection(&words).count(), *d)
        })
        .collect();
    near.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.id.cmp(&b.1.id)));
    near.into_iter().take(RETRIEVED).map(|(_, d)| d).collect()
}

/// Documents a question's retrieval stands in for (the reader reads the best `reader.passages`, 4 by default).
const RETRIEVED: usize = 4;

pub fn run(args: RulesArgs) -> anyhow::Result<()> {
    let cfg = attest_node::config::load(args.config.as_deref(), std::env::vars())?;
    let reader = &cfg.answer.reader;
    let mut set = EvalSet::load(&args.data)?;
    set.keep_articles(Articles::from_flags(
        args.heldout,
        args.heldin,
        args.tuning_slice,
    ));
    set.sample(args.every, None);
    let docs: BTreeMap<&str, &CorpusDoc> = set.corpus.iter().map(|d| (d.id.as_str(), d)).collect();
    let gold_doc = |q: &Query| -> Option<&CorpusDoc> {
        let id = q.gold_doc.as_deref().or_else(|| {
            set.qrels
                .get(&q.id)?
                .iter()
                .max_by_key(|(id, grade)| (**grade, std::cmp::Reverse(id.as_str())))
                .map(|(id, _)| id.as_str())
        })?;
        docs.get(id).copied()
    };
    let mut by_key: BTreeMap<&str, Vec<&CorpusDoc>> = BTreeMap::new();
    for d in &set.corpus {
        by_key
            .entry(d.tenant.as_deref().unwrap_or(&d.title))
            .or_default()
            .push(d);
    }
    let (mut gold, mut near) = (Tally::default(), Tally::default());
    for q in &set.queries {
        if q.answerable {
            gold.add(gold_doc(q).and_then(|d| {
                let seen = neighbourhood(&q.text, d, &by_key);
                ask(q, d, &q.answers, &seen, reader)
            }));
        } else if let (Some(doc), Some(fact)) = (q.near_doc.as_deref(), &q.near_answer) {
            let doc = docs.get(doc).copied();
            near.add(doc.and_then(|d| {
                let seen = neighbourhood(&q.text, d, &by_key);
                ask(q, d, std::slice::from_ref(fact), &seen, reader)
            }));
        }
    }
    println!("{} ({} questions)", args.data.display(), set.queries.len());
    gold.print(
        "answerable, gold sentence refused (coverage lost)",
        args.examples,
        args.passed,
    );
    if near.asked + near.not_found > 0 {
        near.print(
            "near miss, neighbouring fact refused (caught)",
            args.examples,
            args.passed,
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(text: &str, answers: &[&str]) -> Query {
        serde_json::from_value(serde_json::json!({
            "_id": "q", "text": text, "answers": answers,
        }))
        .unwrap()
    }

    #[test]
    fn the_gold_sentence_is_the_one_holding_the_answer_and_each_refusal_is_counted() {
        let doc = CorpusDoc {
            id: "d".into(),
            title: "Drift Max".into(),
            text: "The Drift Max is a speaker. It takes 3 hours to charge.".into(),
            tenant: None,
        };
        let config = ReaderConfig::default();
        let q = query("How long does the Drift Max take to charge?", &["3 hours"]);
        let found = ask(&q, &doc, &q.answers, &[], &config).unwrap();
        assert_eq!(found.sentence, "It takes 3 hours to charge.");
        assert!(found.refused_by.is_empty(), "{:?}", found.refused_by);
        let mut tally = Tally::default();
        tally.add(Some(found));
        let absent = query("How long does the Drift Max take to charge?", &["2 hours"]);
        tally.add(ask(&absent, &doc, &absent.answers, &[], &config));
        assert_eq!((tally.asked, tally.not_found, tally.any), (1, 1, 0));

        let mini = CorpusDoc {
            id: "m".into(),
            title: "Drift Mini".into(),
            text: "The Drift Mini takes 2 hours to charge.".into(),
            tenant: None,
        };
        tally.add(ask(&q, &mini, &["2 hours".to_string()], &[], &config));
        assert_eq!(tally.any, 1);
        assert_eq!(tally.by_rule[&Rule::SubjectsPassage].len(), 1);
        assert!(
            tally.alone.is_empty(),
            "the passage and the sentence rule both refuse it"
        );
    }
}
