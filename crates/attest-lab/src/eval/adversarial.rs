//! The adversarial check of `attest-lab eval --adversarial N`: unanswerable questions whose topic IS in the corpus.
//! For up to N answerable questions (one per gold paragraph, in the sample's order), the gold paragraph is kept
//! with every sentence holding a gold answer removed; the collection holds those paragraphs and every other
//! paragraph of their articles. A question that is answered there is a hallucination unless one of its quotes
//! states a gold answer (another paragraph of the article states it too: "Who won Super Bowl 50?" is answered
//! all over its article), which is counted apart (`answered_elsewhere`). Reported apart from the
//! article-removed unanswerable questions, which are the easy kind.

use std::collections::{BTreeMap, HashMap, HashSet};

use attest_text::text;

use super::data::{CorpusDoc, EvalSet, Query};
use super::run::normalise_answer;

/// The collection and the questions of the check.
#[derive(Debug, Default)]
pub struct AdversarialSet {
    pub corpus: Vec<CorpusDoc>,
    pub questions: Vec<Query>,
}

/// The article part of a paragraph id (`squad-dev-a0003-p012` → `squad-dev-a0003`), or the id itself.
pub fn article(doc_id: &str) -> &str {
    doc_id.rsplit_once("-p").map_or(doc_id, |(a, _)| a)
}

/// Whether `sentence` states one of `answers` (SQuAD-normalised, on word boundaries).
pub fn states_answer(sentence: &str, answers: &[String]) -> bool {
    let s = format!(" {} ", normalise_answer(sentence));
    answers
        .iter()
        .map(|a| normalise_answer(a))
        .any(|a| !a.is_empty() && s.contains(&format!(" {a} ")))
}

/// Whether an answer to an adversarial question quotes one of its gold answers (from a paragraph that still
/// states it): such an answer is grounded, not a hallucination.
pub fn quotes_an_answer<'a>(quotes: impl IntoIterator<Item = &'a str>, answers: &[String]) -> bool {
    quotes.into_iter().any(|q| states_answer(q, answers))
}

/// `text` without its sentences that state an answer; None when nothing (or everything) would be removed.
pub fn without_answer(text: &str, answers: &[String]) -> Option<String> {
    let sentences = text::sentences(text);
    let kept: Vec<&str> = sentences
        .iter()
        .copied()
        .filter(|s| !states_answer(s, answers))
        .collect();
    (kept.len() < sentences.len() && !kept.is_empty()).then(|| kept.join(" "))
}

/// Builds the check from the sample's answerable questions.
pub fn build(set: &EvalSet, limit: usize) -> AdversarialSet {
    let by_id: HashMap<&str, &CorpusDoc> = set.corpus.iter().map(|d| (d.id.as_str(), d)).collect();
    let mut edited: HashMap<String, String> = HashMap::new();
    let mut questions = Vec::new();
    for q in set.queries.iter().filter(|q| q.answerable) {
        if questions.len() >= limit {
            break;
        }
        let Some(gold) = q.gold_doc.as_deref().and_then(|g| by_id.get(g)) else {
            continue;
        };
        if edited.contains_key(&gold.id) {
            continue;
        }
        if let Some(text) = without_answer(&gold.text, &q.answers) {
            edited.insert(gold.id.clone(), text);
            questions.push(Query {
                answerable: false,
                ..q.clone()
            });
        }
    }
    let articles: HashSet<&str> = edited.keys().map(|id| article(id)).collect();
    let corpus = set
        .corpus
        .iter()
        .filter(|d| articles.contains(article(&d.id)))
        .map(|d| CorpusDoc {
            text: edited.get(&d.id).cloned().unwrap_or_else(|| d.text.clone()),
            ..d.clone()
        })
        .collect();
    AdversarialSet { corpus, questions }
}

/// Counts an abstention reason (none for an answer) in a histogram.
pub fn count_reason(reasons: &mut BTreeMap<String, usize>, reason: Option<&str>) {
    if let Some(r) = reason {
        *reasons.entry(r.to_string()).or_default() += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_quoting_the_gold_answer_from_elsewhere_is_grounded() {
        let answers = vec!["Denver Broncos".to_string()];
        assert!(quotes_an_answer(
            ["The Denver Broncos defeated the Carolina Panthers 24–10."],
            &answers
        ));
        assert!(!quotes_an_answer(
            ["The game was played at Levi's Stadium.", "The Broncos won."],
            &answers
        ));
        assert!(!quotes_an_answer(std::iter::empty(), &answers));
    }

    fn doc(id: &str, text: &str) -> CorpusDoc {
        CorpusDoc {
            id: id.into(),
            title: "T".into(),
            text: text.into(),
            tenant: None,
        }
    }

    fn query(id: &str, gold: &str, answer: &str) -> Query {
        Query {
            id: id.into(),
            text: format!("question {id}?"),
            answerable: true,
            answers: vec![answer.into()],
            gold_doc: Some(gold.into()),
            source_doc_removed: None,
            tenant: None,
            domain: None,
            kind: None,
            near_doc: None,
            near_answer: None,
        }
    }

    #[test]
    fn the_answer_sentence_goes_and_the_article_stays() {
        let set = EvalSet {
            dir: ".".into(),
            corpus: vec![
                doc(
                    "x-a0001-p000",
                    "Denver won the game. It was played in 2016.",
                ),
                doc("x-a0001-p001", "The halftime show was loud."),
                doc("x-a0002-p000", "Another article entirely."),
            ],
            queries: vec![
                query("q1", "x-a0001-p000", "Denver"),
                query("q2", "x-a0001-p000", "2016"),
                query("q3", "x-a0002-p000", "nowhere"),
            ],
            qrels: HashMap::new(),
            hash: String::new(),
        };
        let adv = build(&set, 10);
        // One question per paragraph; q3's answer is in no sentence.
        assert_eq!(adv.questions.len(), 1);
        assert_eq!(adv.questions[0].id, "q1");
        assert!(!adv.questions[0].answerable);
        let texts: Vec<&str> = adv.corpus.iter().map(|d| d.text.as_str()).collect();
        assert_eq!(
            texts,
            ["It was played in 2016.", "The halftime show was loud."]
        );
        assert!(states_answer(
            "The Broncos (Denver) won.",
            &["denver".into()]
        ));
        assert!(!states_answer("Denverite food.", &["Denver".into()]));
        assert_eq!(without_answer("Only Denver.", &["Denver".into()]), None);
        assert_eq!(article("squad-dev-a0003-p012"), "squad-dev-a0003");
    }
}
