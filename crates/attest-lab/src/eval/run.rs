//! Running an evaluation against the in-process cluster: ingesting the corpus, retrieval per lane (and the
//! reranked hybrid lane), asking every question, and scoring the configured verifier on HaluEval-style items.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use attest_answer::rerank::Reranker;
use attest_answer::AnswerConfig;
use attest_proto::v1 as pb;
use attest_proto::v1::router_service_server::RouterService;
use attest_telemetry::request_id::grpc_request;
use indicatif::{ProgressBar, ProgressStyle};

use super::data::{CorpusDoc, EvalSet, Query};
use super::metrics::{
    dedup_docs, mrr_at, ndcg_at, percentile, recall_at, risk_coverage, CurvePoint, Outcome,
};
use super::questions::{breakdown, QuestionRecord};
use super::reader_rerank::ReaderRerank;
use super::report::{
    AdversarialScores, AnswerScores, AnsweredCase, InvalidCitation, LaneScores, Latency,
    VerifierScores,
};
use attest_node::local::LocalStack;

/// Candidates per search: recall@100 needs 100.
const DEPTH: u32 = 100;
/// Documents per ingest request.
const INGEST_BATCH: usize = 32;
/// Thresholds of the risk–coverage curve.
const CURVE_STEPS: usize = 50;

pub(crate) fn progress(len: usize, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template("{msg:>10} [{bar:30}] {pos}/{len} ({eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(what.to_string());
    bar
}

/// Ingests the corpus; returns the documents the router refused (near-duplicates of a document already in,
/// or an id given twice), each with its reason. A real corpus has some: they are reported, not fatal.
pub async fn ingest(
    stack: &LocalStack,
    collection: &str,
    corpus: &[CorpusDoc],
    shards: usize,
) -> anyhow::Result<Vec<(String, String)>> {
    let mut skipped = Vec::new();
    let router = &stack.router_service;
    router
        .create_collection(grpc_request(
            pb::CreateCollectionRequest {
                name: collection.to_string(),
                shards: Some(shards as u32),
                ..Default::default()
            },
            "eval-create",
        ))
        .await
        .context("creating the evaluation collection")?;
    let bar = progress(corpus.len(), "ingest");
    for (i, batch) in corpus.chunks(INGEST_BATCH).enumerate() {
        let resp = router
            .ingest(grpc_request(
                pb::IngestRequest {
                    collection: collection.to_string(),
                    documents: batch
                        .iter()
                        .map(|d| pb::Document {
                            id: d.id.clone(),
                            title: d.title.clone(),
                            text: d.text.clone(),
                            tenant: d.tenant.clone().unwrap_or_default(),
                            ..Default::default()
                        })
                        .collect(),
                },
                &format!("eval-ingest-{i}"),
            ))
            .await
            .context("ingesting the corpus")?
            .into_inner();
        for r in resp.rejected {
            let id = batch
                .get(r.index as usize)
                .map_or_else(|| format!("#{}", r.index), |d| d.id.clone());
            skipped.push((id, r.reason));
        }
        bar.inc(batch.len() as u64);
    }
    bar.finish_and_clear();
    Ok(skipped)
}

/// Who asks `q`: its tenant, when the set names one (no credential: the scratch cluster runs without keys).
fn caller(q: &Query) -> attest_answer::client::Caller {
    attest_answer::client::Caller {
        tenant: q.tenant.clone().unwrap_or_default(),
        credential: None,
    }
}

async fn search(
    stack: &LocalStack,
    collection: &str,
    tenant: Option<&str>,
    query: &str,
    lanes: &[&str],
    rid: &str,
) -> anyhow::Result<Vec<pb::Hit>> {
    Ok(stack
        .router_service
        .search(grpc_request(
            pb::SearchRequest {
                collection: collection.to_string(),
                query: query.to_string(),
                tenant: tenant.unwrap_or_default().to_string(),
                k: Some(DEPTH),
                lanes: lanes.iter().map(|l| l.to_string()).collect(),
                ..Default::default()
            },
            rid,
        ))
        .await
        .with_context(|| format!("searching {query:?}"))?
        .into_inner()
        .hits)
}

#[derive(Default)]
struct LaneSums {
    ndcg: f64,
    r10: f64,
    r100: f64,
    mrr: f64,
    n: usize,
}

impl LaneSums {
    fn add(&mut self, docs: &[String], relevant: &HashMap<String, u32>) {
        self.ndcg += ndcg_at(10, docs, relevant);
        self.r10 += recall_at(10, docs, relevant);
        self.r100 += recall_at(100, docs, relevant);
        self.mrr += mrr_at(10, docs, relevant);
        self.n += 1;
    }
    fn scores(&self) -> LaneScores {
        let n = self.n.max(1) as f64;
        LaneScores {
            ndcg_at_10: self.ndcg / n,
            recall_at_10: self.r10 / n,
            recall_at_100: self.r100 / n,
            mrr_at_10: self.mrr / n,
            queries: self.n,
        }
    }
}

/// nDCG@10, recall@10/@100 and MRR@10 of `bm25`, `dense`, `hybrid` and `hybrid_rerank` (the hybrid top 100
/// reordered by the configured reranker) over every query with relevance judgements; with `readers`, also
/// `hybrid_rerank_reader` (the reranked top reordered by the readers, [`ReaderRerank`]).
pub async fn retrieval(
    stack: &LocalStack,
    collection: &str,
    set: &EvalSet,
    readers: Option<Arc<ReaderRerank>>,
) -> anyhow::Result<BTreeMap<String, LaneScores>> {
    let judged: Vec<_> = set
        .queries
        .iter()
        .filter(|q| set.qrels.contains_key(&q.id))
        .collect();
    let mut sums: BTreeMap<&str, LaneSums> = BTreeMap::new();
    let bar = progress(judged.len(), "retrieval");
    for (i, q) in judged.iter().enumerate() {
        let relevant = &set.qrels[&q.id];
        let rid = format!("eval-search-{i}");
        for (lane, lanes) in [
            ("bm25", &["bm25"][..]),
            ("dense", &["dense"][..]),
            ("hybrid", &[][..]),
        ] {
            let hits = search(stack, collection, q.tenant.as_deref(), &q.text, lanes, &rid).await?;
            sums.entry(lane).or_default().add(
                &dedup_docs(hits.iter().map(|h| h.doc_id.as_str())),
                relevant,
            );
            if lane == "hybrid" {
                let reranked = rerank(&stack.reranker, &q.text, hits).await?;
                sums.entry("hybrid_rerank").or_default().add(
                    &dedup_docs(reranked.iter().map(|(h, _)| h.doc_id.as_str())),
                    relevant,
                );
                if let Some(readers) = &readers {
                    let readers = Arc::clone(readers);
                    let question = q.text.clone();
                    let reordered =
                        tokio::task::spawn_blocking(move || readers.reorder(&question, reranked))
                            .await??;
                    sums.entry("hybrid_rerank_reader").or_default().add(
                        &dedup_docs(reordered.iter().map(|h| h.doc_id.as_str())),
                        relevant,
                    );
                }
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(sums
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.scores()))
        .collect())
}

/// `hits` best first by `reranker`, each with its score.
async fn rerank(
    reranker: &Arc<dyn Reranker>,
    question: &str,
    hits: Vec<pb::Hit>,
) -> anyhow::Result<Vec<(pb::Hit, f64)>> {
    let reranker = Arc::clone(reranker);
    let question = question.to_string();
    tokio::task::spawn_blocking(move || {
        let scores = reranker.score(&question, &hits)?;
        let mut scored: Vec<(f64, usize, pb::Hit)> = hits
            .into_iter()
            .enumerate()
            .map(|(i, h)| (scores[i], i, h))
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        Ok(scored.into_iter().map(|(s, _, h)| (h, s)).collect())
    })
    .await?
}

/// SQuAD's answer normalisation: lower case, no punctuation, no articles, single spaces.
pub fn normalise_answer(text: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    let lowered: String = text.nfkc().collect::<String>().to_lowercase();
    let cleaned: String = lowered
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c.is_whitespace() {
                c
            } else {
                ' '
            }
        })
        .collect();
    cleaned
        .split_whitespace()
        .filter(|w| !matches!(*w, "a" | "an" | "the"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn squash(text: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    text.nfkc()
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

impl AnsweredCase {
    /// The answer `a` gave to `q`, with the documents it cited in citation order.
    fn of(q: &Query, a: &attest_answer::AskResponse) -> Self {
        AnsweredCase {
            question_id: q.id.clone(),
            question: q.text.clone(),
            answer: a.answer.clone(),
            confidence: a.confidence,
            doc_ids: a.citations.iter().map(|c| c.doc_id.clone()).collect(),
            elsewhere: false,
        }
    }
}

/// Asks the adversarial questions (all unanswerable) against their collection.
pub async fn adversarial(
    stack: &LocalStack,
    collection: &str,
    questions: &[Query],
) -> anyhow::Result<AdversarialScores> {
    let mut scores = AdversarialScores {
        questions: questions.len(),
        ..Default::default()
    };
    let mut answered = 0usize;
    let mut outcomes = Vec::with_capacity(questions.len());
    let bar = progress(questions.len(), "adversarial");
    for (i, q) in questions.iter().enumerate() {
        let a = stack
            .answer
            .ask_as(
                &caller(q),
                collection,
                &q.text,
                &format!("eval-adversarial-{i}"),
            )
            .await
            .with_context(|| format!("asking {:?}", q.text))?;
        let is_answered = a.status == "answered";
        scores.out_of_corpus += usize::from(a.status == "out_of_corpus");
        // Another paragraph of the article may state the answer too: quoting it is not a hallucination.
        let elsewhere = is_answered
            && super::adversarial::quotes_an_answer(
                a.citations.iter().map(|c| c.quote.as_str()),
                &q.answers,
            );
        answered += usize::from(is_answered);
        scores.answered_elsewhere += usize::from(elsewhere);
        if is_answered {
            scores.answers.push(AnsweredCase {
                elsewhere,
                ..AnsweredCase::of(q, &a)
            });
        }
        outcomes.push(Outcome {
            answerable: false,
            confidence: (is_answered && !elsewhere).then_some(a.confidence),
        });
        super::adversarial::count_reason(&mut scores.reasons, a.reason);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let n = questions.len().max(1) as f64;
    scores.answered_rate = answered as f64 / n;
    scores.hallucination_rate = (answered - scores.answered_elsewhere) as f64 / n;
    scores.by_threshold = risk_coverage(&outcomes, CURVE_STEPS);
    Ok(scores)
}

/// Whether `answer` holds one of the gold answers (both normalised like SQuAD): what accuracy counts.
pub fn holds_gold(answer: &str, gold: &[String]) -> bool {
    let text = normalise_answer(answer);
    gold.iter()
        .map(|g| normalise_answer(g))
        .any(|g| !g.is_empty() && text.contains(&g))
}

/// What asking every question measured.
#[derive(Default)]
pub struct Answers {
    pub scores: AnswerScores,
    pub latency_ms: BTreeMap<String, Latency>,
    pub risk_coverage: Vec<CurvePoint>,
    /// One record per question, in the order asked (the `--per-question` lines).
    pub questions: Vec<QuestionRecord>,
}

/// Asks every question: the 2×2, accuracy, citation validity, reasons, stage latencies, the risk–coverage
/// curve (an answer counts at threshold t when its confidence ≥ t), the breakdowns by the queries' `domain`
/// and `kind`, and each question's record.
pub async fn answers(
    stack: &LocalStack,
    collection: &str,
    set: &EvalSet,
) -> anyhow::Result<Answers> {
    let corpus: HashMap<&str, String> = set
        .corpus
        .iter()
        .map(|d| (d.id.as_str(), squash(&d.text)))
        .collect();
    let mut scores = AnswerScores::default();
    let (mut answered, mut accurate_count, mut hallucinated, mut citations, mut valid) =
        (0usize, 0usize, 0usize, 0usize, 0usize);
    let (mut claims, mut claims_on_point) = (0usize, 0usize);
    let mut stages: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut outcomes = Vec::new();
    let mut records = Vec::with_capacity(set.queries.len());
    let bar = progress(set.queries.len(), "ask");
    for (i, q) in set.queries.iter().enumerate() {
        let a = stack
            .answer
            .ask_as(&caller(q), collection, &q.text, &format!("eval-ask-{i}"))
            .await
            .with_context(|| format!("asking {:?}", q.text))?;
        for (stage, ms) in &a.latency_ms {
            stages.entry(stage.to_string()).or_default().push(*ms);
        }
        let is_answered = a.status == "answered";
        scores.out_of_corpus += usize::from(a.status == "out_of_corpus");
        outcomes.push(Outcome {
            answerable: q.answerable,
            confidence: is_answered.then_some(a.confidence),
        });
        super::adversarial::count_reason(&mut scores.reasons, a.reason);
        let accurate = q.answerable && is_answered && holds_gold(&a.answer, &q.answers);
        records.push(QuestionRecord::of(q, &a, accurate));
        if is_answered {
            for c in &a.citations {
                citations += 1;
                // Resolves: the marker is in the text, and the quote is a span of the cited document.
                let resolves = corpus
                    .get(c.doc_id.as_str())
                    .is_some_and(|doc| doc.contains(&squash(&c.quote)))
                    && a.answer.contains(&format!("[{}]", c.n));
                valid += usize::from(resolves);
                if !resolves {
                    scores.invalid_citations.push(InvalidCitation {
                        question_id: q.id.clone(),
                        n: c.n,
                        doc_id: c.doc_id.clone(),
                        quote: c.quote.clone(),
                    });
                }
            }
        }
        if q.answerable {
            scores.answerable += 1;
            if is_answered {
                answered += 1;
                // Answer precision: the kept claims that state a gold answer (bear on the question), of all kept.
                claims += a.claims.len();
                claims_on_point += a
                    .claims
                    .iter()
                    .filter(|c| super::adversarial::states_answer(&c.text, &q.answers))
                    .count();
                accurate_count += usize::from(accurate);
            }
        } else {
            scores.unanswerable += 1;
            hallucinated += usize::from(is_answered);
            if is_answered {
                scores.unanswerable_answered.push(AnsweredCase::of(q, &a));
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    scores.questions = set.queries.len();
    scores.coverage = answered as f64 / scores.answerable.max(1) as f64;
    scores.accuracy = accurate_count as f64 / answered.max(1) as f64;
    scores.answer_precision = claims_on_point as f64 / claims.max(1) as f64;
    scores.hallucination_rate = hallucinated as f64 / scores.unanswerable.max(1) as f64;
    scores.hallucination_ci95 = super::metrics::wilson_interval(hallucinated, scores.unanswerable);
    scores.by_domain = breakdown(&records, |r| r.domain.as_deref());
    scores.by_kind = breakdown(&records, |r| r.kind.as_deref());
    scores.citation_validity = if citations == 0 {
        1.0
    } else {
        valid as f64 / citations as f64
    };
    let latency = stages
        .into_iter()
        .map(|(k, v)| {
            (
                k,
                Latency {
                    p50: percentile(&v, 0.5).unwrap_or(0.0),
                    p95: percentile(&v, 0.95).unwrap_or(0.0),
                },
            )
        })
        .collect();
    Ok(Answers {
        scores,
        latency_ms: latency,
        risk_coverage: risk_coverage(&outcomes, CURVE_STEPS),
        questions: records,
    })
}

/// AUROC and balanced accuracy (threshold: the configured claim-support threshold) of the configured verifier
/// on the held-out items of a HaluEval-QA or claim/evidence (VitaminC) file or directory
/// ([`super::verifier_data`]): the answer service's own (`AnswerService::verifier`), loaded once with its reader.
pub fn verifier(
    config: &AnswerConfig,
    verifier: &dyn attest_answer::Verifier,
    path: &Path,
) -> anyhow::Result<VerifierScores> {
    use crate::train::logistic::{auroc, balanced_accuracy};
    let path = super::verifier_data::items_path(path);
    let heldout = super::verifier_data::load_heldout(&path)?;
    let bar = progress(heldout.len(), "verify");
    let scores: Vec<f64> = heldout
        .iter()
        .map(|it| {
            bar.inc(1);
            it.score(verifier)
        })
        .collect();
    bar.finish_and_clear();
    let labels: Vec<bool> = heldout.iter().map(|it| it.supported()).collect();
    Ok(VerifierScores {
        auroc: auroc(&scores, &labels),
        balanced_accuracy: balanced_accuracy(&scores, &labels, config.claim_support_threshold),
        heldout_items: heldout.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_normalised_like_squad() {
        assert_eq!(
            normalise_answer("The  \"Do not disturb\" sign!"),
            "do not disturb sign"
        );
        assert_eq!(normalise_answer("an Apple"), "apple");
    }
}
