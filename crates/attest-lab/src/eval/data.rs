//! A BEIR-layout evaluation set with answerable flags (like `data/squad-dev`): `corpus.jsonl`
//! (`_id`, `title`, `text`), `queries.jsonl` (`_id`, `text`, `answerable`, `answers`, `gold_doc`) and
//! `qrels/test.tsv` (query id, corpus id, score; without it, each query's `gold_doc`). Its hash goes into the report so figures name their data.
//! A query may name its kind of text (`domain`: runbook, api, ticket, …) and its near-miss `kind`
//! (`answerable`, `sibling_entity`, `attribute_absent`, …), as `data/company-nearmiss` does: the report then
//! breaks the hallucination rate and coverage down by each.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::Deserialize;
use sha2::{Digest, Sha256};

#[derive(Debug, Clone, Deserialize)]
pub struct CorpusDoc {
    #[serde(alias = "id", rename = "_id")]
    pub id: String,
    #[serde(default)]
    pub title: String,
    pub text: String,
    /// The tenant the document is ingested under (a set of several companies makes each one a tenant, so that
    /// one company's fact never answers another's question); the router's default tenant when absent.
    #[serde(default)]
    pub tenant: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Query {
    #[serde(alias = "id", rename = "_id")]
    pub id: String,
    pub text: String,
    /// Unanswerable questions have their whole source article removed from the corpus.
    #[serde(default = "answerable_by_default")]
    pub answerable: bool,
    #[serde(default)]
    pub answers: Vec<String>,
    /// The paragraph the question was written from (squad layout); used when there is no qrels file.
    #[serde(default)]
    pub gold_doc: Option<String>,
    /// For an unanswerable question, the paragraph it was written from (removed from the corpus).
    #[serde(default)]
    pub source_doc_removed: Option<String>,
    /// The tenant the question is asked (and searched) as: only that tenant's documents answer it.
    #[serde(default)]
    pub tenant: Option<String>,
    /// The kind of text the question is asked of (`runbook`, `api`, `ticket`, `policy`, `review`, `chat`).
    #[serde(default)]
    pub domain: Option<String>,
    /// What makes the question (un)answerable: `answerable`, or a near miss (`attribute_absent`,
    /// `sibling_entity`, `other_condition`, `number_never_given`, `false_premise`).
    #[serde(default)]
    pub kind: Option<String>,
    /// For a near miss, the document that states the neighbouring fact, and that fact.
    #[serde(default)]
    pub near_doc: Option<String>,
    #[serde(default)]
    pub near_answer: Option<String>,
}

/// Whether a paragraph id `…-aNNNN-pNNN` belongs to an article never trained on (the split of
/// `attest-lab train reranker` and `scripts/reader`, for squad-dev and any set with the same id layout).
pub fn heldout_article(doc_id: &str) -> bool {
    crate::train::reranker::article_of(doc_id).is_some_and(crate::train::reranker::held_out_article)
}

/// Which articles' questions a run asks (`--heldout`, `--heldin`, `--tuning-slice`; clap keeps them apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Articles {
    All,
    /// NNNN % 5 == 0: never trained on; to report, never to choose by.
    HeldOut,
    /// The complement of `HeldOut` (a paragraph id without an article number included): where thresholds and
    /// rules are chosen.
    HeldIn,
    /// NNNN % 5 == 1, held-in articles that readers trained with `--tuning-slice` never saw.
    TuningSlice,
}

impl Articles {
    pub fn from_flags(heldout: bool, heldin: bool, tuning_slice: bool) -> Self {
        match (heldout, heldin, tuning_slice) {
            (true, _, _) => Articles::HeldOut,
            (_, true, _) => Articles::HeldIn,
            (_, _, true) => Articles::TuningSlice,
            _ => Articles::All,
        }
    }

    /// Whether the paragraph `doc_id` (`…-aNNNN-pNNN`) is one of these articles'.
    pub fn holds(self, doc_id: &str) -> bool {
        use crate::train::reranker::{article_of, tuning_slice_article};
        match self {
            Articles::All => true,
            Articles::HeldOut => heldout_article(doc_id),
            Articles::HeldIn => !heldout_article(doc_id),
            Articles::TuningSlice => article_of(doc_id).is_some_and(tuning_slice_article),
        }
    }
}

fn answerable_by_default() -> bool {
    true
}

#[derive(Debug)]
pub struct EvalSet {
    pub dir: PathBuf,
    pub corpus: Vec<CorpusDoc>,
    pub queries: Vec<Query>,
    /// Query id → relevant corpus ids with their grade.
    pub qrels: HashMap<String, HashMap<String, u32>>,
    /// sha256 over the three files, hex.
    pub hash: String,
}

/// Every non-blank line of a JSON-lines file, an error naming the file and line where one does not parse.
pub fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> anyhow::Result<Vec<T>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).with_context(|| format!("{}:{}", path.display(), i + 1))
        })
        .collect()
}

/// Parses `query-id \t corpus-id \t score` lines (a header line is skipped).
pub fn parse_qrels(text: &str) -> anyhow::Result<HashMap<String, HashMap<String, u32>>> {
    let mut out: HashMap<String, HashMap<String, u32>> = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let fields: Vec<&str> = line.split('\t').map(str::trim).collect();
        if fields.len() < 3
            || (i == 0 && fields[2].parse::<u32>().is_err())
            || line.trim().is_empty()
        {
            continue;
        }
        let grade: u32 = fields[2]
            .parse()
            .with_context(|| format!("qrels line {}: score {:?}", i + 1, fields[2]))?;
        out.entry(fields[0].to_string())
            .or_default()
            .insert(fields[1].to_string(), grade);
    }
    Ok(out)
}

impl EvalSet {
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        let files = [
            dir.join("corpus.jsonl"),
            dir.join("queries.jsonl"),
            dir.join("qrels/test.tsv"),
        ];
        let has_qrels = files[2].is_file();
        let mut hasher = Sha256::new();
        for f in files.iter().take(if has_qrels { 3 } else { 2 }) {
            if !f.is_file() {
                bail!(
                    "{} is missing (expected a BEIR-layout data set)",
                    f.display()
                );
            }
            hasher.update(std::fs::read(f).with_context(|| format!("reading {}", f.display()))?);
        }
        let corpus: Vec<CorpusDoc> = read_jsonl(&files[0])?;
        let queries: Vec<Query> = read_jsonl(&files[1])?;
        // Without a qrels file, each question's `gold_doc` is its one relevant document.
        let qrels = if has_qrels {
            parse_qrels(&std::fs::read_to_string(&files[2])?)?
        } else {
            queries
                .iter()
                .filter_map(|q| {
                    let gold = q.gold_doc.clone()?;
                    Some((q.id.clone(), HashMap::from([(gold, 1)])))
                })
                .collect()
        };
        if corpus.is_empty() || queries.is_empty() {
            bail!("{}: empty corpus or query set", dir.display());
        }
        Ok(EvalSet {
            dir: dir.to_path_buf(),
            corpus,
            queries,
            qrels,
            hash: hex::encode(hasher.finalize()),
        })
    }

    /// Keeps the questions of `articles` (by `gold_doc`, or `source_doc_removed` when unanswerable): held-out
    /// ones report what was chosen on held-in ones (or on the tuning slice). A question with neither id is kept
    /// only by `Articles::All`.
    pub fn keep_articles(&mut self, articles: Articles) {
        if articles == Articles::All {
            return;
        }
        self.queries.retain(|q| {
            q.gold_doc
                .as_deref()
                .or(q.source_doc_removed.as_deref())
                .is_some_and(|d| articles.holds(d))
        });
    }

    /// Every `every`-th query, then at most `limit` of them: a fixed, reproducible sample.
    pub fn sample(&mut self, every: usize, limit: Option<usize>) {
        let every = every.max(1);
        let kept: Vec<Query> = self
            .queries
            .iter()
            .step_by(every)
            .take(limit.unwrap_or(usize::MAX))
            .cloned()
            .collect();
        self.queries = kept;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qrels_skip_the_header_and_group_by_query() {
        let q =
            parse_qrels("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t2\nq2\td3\t1\n").unwrap();
        assert_eq!(q["q1"]["d2"], 2);
        assert_eq!(q["q2"].len(), 1);
        assert!(parse_qrels("q1\td1\tx\nq1\td1\ty\n").is_err());
    }

    #[test]
    fn held_out_articles_are_every_fifth() {
        assert!(heldout_article("squad-dev-a0000-p003"));
        assert!(heldout_article("shift-new_wiki-a0045-p000"));
        assert!(!heldout_article("squad-dev-a0001-p000"));
        assert!(!heldout_article("doc-7"));
    }

    #[test]
    fn the_tuning_slice_is_held_in_articles_one_in_five() {
        let ids = [
            "squad-dev-a0000-p003",
            "squad-dev-a0001-p000",
            "shift-reddit-a0006-p000",
            "squad-dev-a0002-p001",
            "doc-7",
        ];
        let held = |a: Articles| -> Vec<&str> { ids.into_iter().filter(|d| a.holds(d)).collect() };
        assert_eq!(
            held(Articles::TuningSlice),
            ["squad-dev-a0001-p000", "shift-reddit-a0006-p000"]
        );
        assert_eq!(held(Articles::HeldOut), ["squad-dev-a0000-p003"]);
        assert_eq!(
            held(Articles::HeldIn),
            [
                "squad-dev-a0001-p000",
                "shift-reddit-a0006-p000",
                "squad-dev-a0002-p001",
                "doc-7"
            ]
        );
        assert_eq!(held(Articles::All).len(), ids.len());
        assert_eq!(
            Articles::from_flags(false, false, true),
            Articles::TuningSlice
        );
        assert_eq!(Articles::from_flags(false, false, false), Articles::All);
    }
}
