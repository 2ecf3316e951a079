//! Training and evaluating the learned reranker on squad-dev (`data/squad-dev`) and any other set with the same
//! paragraph ids (`data/shift-reddit`), with candidates from the real router (`attest-lab train reranker`).
//!
//! Split (fixed, by article, so no article's paragraphs are both learned from and judged on): a query whose
//! gold paragraph is `<set>-aNNNN-pNNN` is held out when `NNNN % 5 == 0`, otherwise it trains — the split
//! `attest-lab eval --heldout` reports on.
//! Unanswerable queries (their article was removed from the corpus) are never trained on; they only measure how
//! low the top score stays when nothing in the collection answers.
//!
//! For each query the router runs a hybrid search (both lanes) with k = 100; every hit is a row labelled 1 when
//! its document is the query's gold paragraph. Held out, three orderings of the same candidates are compared:
//! the router's fused order, the learned reranker, and [`LexicalReranker`].

use std::path::Path;

use attest_proto::v1 as pb;
use futures::stream::{self, StreamExt, TryStreamExt};
use serde::Deserialize;

use crate::train::logistic::{auroc, fit, TrainSettings};
use attest_answer::client::{Caller, RouterClient};
use attest_answer::rerank::features::{pool_features, FEATURE_NAMES, FEATURE_SIGNS};
use attest_answer::rerank::learned::{HeldoutReport, RankMetrics, RerankerFile, TopScoreShares};
use attest_answer::rerank::{LexicalReranker, Reranker};
use attest_models::logistic::LogisticModel;

/// One article in this many is held out (articles whose number is a multiple of it).
pub const HELD_OUT_EVERY: u32 = 5;

/// How training retrieves and reports.
#[derive(Debug, Clone)]
pub struct TrainConfig {
    pub collection: String,
    /// Candidates per query (the answer tier asks the router for this many).
    pub k: u32,
    /// At most this many queries of each group (train, held-out answerable, unanswerable), evenly spread.
    pub limit: Option<usize>,
    /// Searches in flight at once.
    pub concurrency: usize,
    /// The coverage gate's thresholds (bail, ground with support, ground): the report gives the share of
    /// queries whose top score reaches each.
    pub gate_thresholds: Vec<f64>,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            collection: "squad".into(),
            k: 100,
            limit: None,
            concurrency: 4,
            gate_thresholds: vec![0.40, 0.55, 0.65],
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("router search for {query:?}: {status}")]
    Router {
        query: String,
        status: tonic::Status,
    },
    #[error("{0}")]
    Data(String),
}

#[derive(Debug, Clone, Deserialize)]
pub struct SquadQuery {
    #[serde(rename = "_id", alias = "id")]
    pub id: String,
    pub text: String,
    pub answerable: bool,
    #[serde(default)]
    pub gold_doc: Option<String>,
    #[serde(default)]
    pub source_doc_removed: Option<String>,
}

/// The article number of a paragraph id `<set>-aNNNN-pNNN` (`squad-dev-a0043-p033` → 43).
pub fn article_of(doc_id: &str) -> Option<u32> {
    let (rest, paragraph) = doc_id.rsplit_once("-p")?;
    let (_, number) = rest.rsplit_once("-a")?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(paragraph) || !digits(number) {
        return None;
    }
    number.parse().ok()
}

/// Whether an article belongs to the held-out split.
pub fn held_out_article(article: u32) -> bool {
    article.is_multiple_of(HELD_OUT_EVERY)
}

/// Whether a held-in article belongs to the tuning slice (NNNN % 5 == 1): the articles readers trained with
/// `scripts/reader/train.py --tuning-slice` never saw, where the answer tier's bars can be chosen on unseen text.
pub fn tuning_slice_article(article: u32) -> bool {
    article % HELD_OUT_EVERY == 1
}

/// The queries of each group.
#[derive(Debug, Clone, Default)]
pub struct Split {
    pub train: Vec<SquadQuery>,
    pub heldout: Vec<SquadQuery>,
    pub unanswerable: Vec<SquadQuery>,
}

/// Splits the queries by article; answerable queries without a parseable gold id are left out.
pub fn split_queries(queries: Vec<SquadQuery>, limit: Option<usize>) -> Split {
    let mut split = Split::default();
    for q in queries {
        if !q.answerable {
            split.unanswerable.push(q);
            continue;
        }
        match q.gold_doc.as_deref().and_then(article_of) {
            Some(a) if held_out_article(a) => split.heldout.push(q),
            Some(_) => split.train.push(q),
            None => {}
        }
    }
    if let Some(limit) = limit {
        for group in [
            &mut split.train,
            &mut split.heldout,
            &mut split.unanswerable,
        ] {
            *group = spread_sample(std::mem::take(group), limit);
        }
    }
    split
}

/// At most `limit` items evenly spread over `items` (the file's order mixes articles, so a prefix would not).
fn spread_sample<T>(items: Vec<T>, limit: usize) -> Vec<T> {
    if items.len() <= limit {
        return items;
    }
    let n = items.len();
    let mut wanted = (0..limit).map(|i| i * n / limit).peekable();
    items
        .into_iter()
        .enumerate()
        .filter_map(|(i, item)| {
            (wanted.peek() == Some(&i)).then(|| {
                wanted.next();
                item
            })
        })
        .collect()
}

pub fn load_queries(path: &Path) -> Result<Vec<SquadQuery>, TrainError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| TrainError::Data(format!("reading {}: {e}", path.display())))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map_err(|e| TrainError::Data(format!("{}:{}: {e}", path.display(), i + 1)))
        })
        .collect()
}

/// One query with the router's candidates, in the router's order.
#[derive(Debug, Clone)]
pub struct Pool {
    pub query: SquadQuery,
    pub hits: Vec<pb::Hit>,
}

impl Pool {
    fn labels(&self) -> Vec<bool> {
        let gold = self.query.gold_doc.as_deref();
        self.hits
            .iter()
            .map(|h| Some(h.doc_id.as_str()) == gold)
            .collect()
    }
}

/// Hybrid searches for `queries` through the router, `config.concurrency` at a time, in input order.
pub async fn retrieve(
    client: &RouterClient,
    queries: &[SquadQuery],
    config: &TrainConfig,
) -> Result<Vec<Pool>, TrainError> {
    stream::iter(queries.iter().cloned().enumerate())
        .map(|(i, query)| async move {
            let request = pb::SearchRequest {
                collection: config.collection.clone(),
                query: query.text.clone(),
                k: Some(config.k),
                ..Default::default()
            };
            let response = client
                .search(request, &format!("train-reranker-{i}"), &Caller::default())
                .await
                .map_err(|status| TrainError::Router {
                    query: query.text.clone(),
                    status,
                })?;
            Ok(Pool {
                query,
                hits: response.hits,
            })
        })
        .buffered(config.concurrency.max(1))
        .try_collect()
        .await
}

/// Fits the model on the train pools and evaluates it on the held-out and unanswerable pools.
pub fn train_reranker(
    train: &[Pool],
    heldout: &[Pool],
    unanswerable: &[Pool],
    config: &TrainConfig,
    trained_on: &str,
) -> Result<RerankerFile, TrainError> {
    let mut rows = Vec::new();
    let mut labels = Vec::new();
    for pool in train {
        rows.extend(
            pool_features(&pool.query.text, &pool.hits)
                .into_iter()
                .map(|r| r.to_vec()),
        );
        labels.extend(pool.labels());
    }
    if !labels.contains(&true) || !labels.contains(&false) {
        return Err(TrainError::Data(format!(
            "the train split needs gold and other candidates ({} rows, {} gold): is the collection `{}` ingested?",
            labels.len(),
            labels.iter().filter(|l| **l).count(),
            config.collection
        )));
    }
    let model = fit(&rows, &labels, &FEATURE_SIGNS, TrainSettings::default());
    let heldout_report = evaluate(&model, heldout, unanswerable, &config.gate_thresholds);
    Ok(RerankerFile {
        features: FEATURE_NAMES.iter().map(|s| s.to_string()).collect(),
        model,
        trained_on: trained_on.to_string(),
        split: format!(
            "by article: queries whose gold paragraph <set>-aNNNN-pNNN has NNNN % {HELD_OUT_EVERY} == 0 are held out; unanswerable queries are never trained on"
        ),
        candidates: format!(
            "router hybrid search (dense + bm25, RRF), k = {}, collection `{}`",
            config.k, config.collection
        ),
        train_queries: train.len(),
        train_rows: rows.len(),
        heldout: heldout_report,
        heldout_by_set: Default::default(),
    })
}

/// The held-out report of `model`.
pub fn evaluate(
    model: &LogisticModel,
    heldout: &[Pool],
    unanswerable: &[Pool],
    thresholds: &[f64],
) -> HeldoutReport {
    let learned = |pool: &Pool| -> Vec<f64> {
        pool_features(&pool.query.text, &pool.hits)
            .iter()
            .map(|r| model.predict(r))
            .collect()
    };
    let lexical = |pool: &Pool| -> Vec<f64> {
        // The lexical reranker cannot fail.
        LexicalReranker
            .score(&pool.query.text, &pool.hits)
            .unwrap_or_else(|_| vec![0.0; pool.hits.len()])
    };
    let mut sums = [RankMetrics::default(); 3];
    let (mut all_learned, mut all_lexical, mut all_labels) = (Vec::new(), Vec::new(), Vec::new());
    let (mut top_learned, mut top_lexical) = (Vec::new(), Vec::new());
    let mut with_gold = 0;
    for pool in heldout {
        let gold = pool.query.gold_doc.as_deref().unwrap_or_default();
        let labels = pool.labels();
        with_gold += usize::from(labels.contains(&true));
        let router_order: Vec<f64> = (0..pool.hits.len()).map(|i| -(i as f64)).collect();
        let (l, x) = (learned(pool), lexical(pool));
        for (sum, scores) in sums.iter_mut().zip([&router_order, &l, &x]) {
            let m = rank_metrics(&ranked_docs(&pool.hits, scores), gold);
            sum.ndcg_at_10 += m.ndcg_at_10;
            sum.mrr_at_10 += m.mrr_at_10;
            sum.recall_at_10 += m.recall_at_10;
        }
        top_learned.push(top(&l));
        top_lexical.push(top(&x));
        all_learned.extend(l);
        all_lexical.extend(x);
        all_labels.extend(labels);
    }
    let n = heldout.len().max(1) as f64;
    let mean = |m: RankMetrics| RankMetrics {
        ndcg_at_10: m.ndcg_at_10 / n,
        mrr_at_10: m.mrr_at_10 / n,
        recall_at_10: m.recall_at_10 / n,
    };
    let top_unanswerable_learned: Vec<f64> =
        unanswerable.iter().map(|p| top(&learned(p))).collect();
    let top_unanswerable_lexical: Vec<f64> =
        unanswerable.iter().map(|p| top(&lexical(p))).collect();
    HeldoutReport {
        queries: heldout.len(),
        queries_with_gold: with_gold,
        router: mean(sums[0]),
        learned: mean(sums[1]),
        lexical: mean(sums[2]),
        auroc_learned: auroc(&all_learned, &all_labels),
        auroc_lexical: auroc(&all_lexical, &all_labels),
        top_learned_answerable: shares(&top_learned, thresholds),
        top_learned_unanswerable: shares(&top_unanswerable_learned, thresholds),
        top_lexical_answerable: shares(&top_lexical, thresholds),
        top_lexical_unanswerable: shares(&top_unanswerable_lexical, thresholds),
    }
}

fn top(scores: &[f64]) -> f64 {
    scores.iter().copied().fold(0.0, f64::max)
}

/// Document ids best first by `scores` (ties keep the router's order), each document once (its best chunk).
pub fn ranked_docs<'a>(hits: &'a [pb::Hit], scores: &[f64]) -> Vec<&'a str> {
    let mut order: Vec<usize> = (0..hits.len()).collect();
    // A stable sort: equal scores keep the router's order.
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let mut docs: Vec<&str> = Vec::new();
    for i in order {
        let d = hits[i].doc_id.as_str();
        if !docs.contains(&d) {
            docs.push(d);
        }
    }
    docs
}

/// nDCG@10, MRR@10 and recall@10 of a ranking against one relevant document.
pub fn rank_metrics(ranked: &[&str], gold: &str) -> RankMetrics {
    match ranked.iter().take(10).position(|d| *d == gold) {
        Some(i) => RankMetrics {
            ndcg_at_10: 1.0 / ((i + 2) as f64).log2(),
            mrr_at_10: 1.0 / (i + 1) as f64,
            recall_at_10: 1.0,
        },
        None => RankMetrics::default(),
    }
}

/// The share of `tops` at or above each threshold, and their median.
pub fn shares(tops: &[f64], thresholds: &[f64]) -> TopScoreShares {
    let n = tops.len().max(1) as f64;
    let mut sorted = tops.to_vec();
    sorted.sort_by(f64::total_cmp);
    TopScoreShares {
        queries: tops.len(),
        at_least: thresholds
            .iter()
            .map(|&t| (t, tops.iter().filter(|s| **s >= t).count() as f64 / n))
            .collect(),
        median: sorted.get(sorted.len() / 2).copied().unwrap_or(0.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(id: &str, answerable: bool, gold: Option<&str>) -> SquadQuery {
        SquadQuery {
            id: id.into(),
            text: format!("question {id}"),
            answerable,
            gold_doc: gold.map(str::to_string),
            source_doc_removed: None,
        }
    }

    #[test]
    fn the_split_is_by_article() {
        assert_eq!(article_of("squad-dev-a0043-p033"), Some(43));
        assert_eq!(article_of("squad-dev-a0000-p000"), Some(0));
        assert_eq!(article_of("squad-dev-a0043"), None);
        assert_eq!(article_of("shift-reddit-a0679-p000"), Some(679));
        assert_eq!(article_of("shift-reddit-a0679-pintro"), None);
        assert_eq!(article_of("doc-7"), None);
        assert!(held_out_article(0) && held_out_article(45) && !held_out_article(43));

        let queries = vec![
            query("1", true, Some("squad-dev-a0005-p001")),
            query("2", true, Some("squad-dev-a0005-p002")),
            query("3", true, Some("squad-dev-a0006-p001")),
            query("4", false, None),
            query("5", true, Some("broken")),
        ];
        let s = split_queries(queries, None);
        let ids = |v: &[SquadQuery]| v.iter().map(|q| q.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&s.heldout), ["1", "2"]);
        assert_eq!(ids(&s.train), ["3"]);
        assert_eq!(ids(&s.unanswerable), ["4"]);
    }

    #[test]
    fn the_limit_spreads_the_sample() {
        assert_eq!(spread_sample((0..10).collect(), 5), vec![0, 2, 4, 6, 8]);
        assert_eq!(spread_sample((0..3).collect(), 5), vec![0, 1, 2]);
        assert_eq!(spread_sample((0..7).collect(), 3), vec![0, 2, 4]);
    }

    #[test]
    fn metrics_and_ranking() {
        let hit = |chunk: &str, doc: &str| pb::Hit {
            chunk_id: chunk.into(),
            doc_id: doc.into(),
            ..Default::default()
        };
        let hits = vec![
            hit("a1", "a"),
            hit("b1", "b"),
            hit("a2", "a"),
            hit("c1", "c"),
        ];
        assert_eq!(
            ranked_docs(&hits, &[0.1, 0.5, 0.9, 0.5]),
            vec!["a", "b", "c"]
        );
        let m = rank_metrics(&["x", "gold"], "gold");
        assert!((m.ndcg_at_10 - 1.0 / 3f64.log2()).abs() < 1e-12);
        assert_eq!((m.mrr_at_10, m.recall_at_10), (0.5, 1.0));
        assert_eq!(rank_metrics(&["x"], "gold"), RankMetrics::default());
        let s = shares(&[0.3, 0.5, 0.6, 0.9], &[0.40, 0.55, 0.65]);
        assert_eq!(s.at_least, vec![(0.40, 0.75), (0.55, 0.5), (0.65, 0.25)]);
        assert_eq!(s.median, 0.6);
    }
}
