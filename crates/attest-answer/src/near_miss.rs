//! What an abstention says was found instead (issue 68): when the best passages answer a neighbouring question
//! — the Drift Mini's charge time asked of the Drift Max, API v2's switch-off date asked of v1 — the abstention
//! names it, as a suggestion with its source, never as an answer: "The closest passage is about Drift Mini, not
//! Drift Max.", quoting the passage's sentence that names the look-alike. When the best passage is about the asked
//! subject but states nothing that answers, it says that instead ("The documents mention Drift Max, but no passage
//! found states what was asked").

use std::collections::HashSet;

use serde::Serialize;

use crate::footnotes::body;
use attest_proto::v1 as pb;
use attest_text::relevance::sentence_relevance;
use attest_text::subjects::{Sibling, Subjects};
use attest_text::text;

/// A sibling: the passage names a look-alike of the question's subject and not the subject itself.
pub const SIBLING: &str = "sibling";
/// The passage names the question's subject, and no sentence of it answers.
pub const NOT_STATED: &str = "not_stated";

/// The passage an abstention points at.
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
pub struct NearMissSource {
    pub chunk_id: String,
    pub doc_id: String,
    pub title: String,
    /// The sentence of the passage closest to the question.
    pub quote: String,
}

/// "Not an answer, but this is what the documents say": part of an abstention.
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
pub struct NearMiss {
    /// `sibling` (the documents give it for a look-alike) or `not_stated` (they name the subject, not this).
    pub kind: &'static str,
    /// The question's subject ("Drift Max").
    pub asked: String,
    /// What the passage names instead (`sibling`), or the subject itself (`not_stated`).
    pub found: String,
    /// One sentence for a person: what was found, and that it is not the answer.
    pub message: String,
    pub source: NearMissSource,
}

/// The sentence of `passage` that covers most of the question (the first on ties) among those `pick` accepts,
/// with what `pick` made of it.
fn best_sentence<'a, T>(
    question: &HashSet<String>,
    title: &str,
    passage: &'a str,
    pick: impl Fn(&'a str) -> Option<T>,
) -> Option<(&'a str, T)> {
    let title_words = text::content_set(title);
    let mut best: Option<(f64, &str, T)> = None;
    for sentence in text::sentences(passage) {
        let Some(picked) = pick(sentence) else {
            continue;
        };
        let score = sentence_relevance(question, &title_words, sentence);
        if best.as_ref().is_none_or(|(b, _, _)| score > *b) {
            best = Some((score, sentence, picked));
        }
    }
    best.map(|(_, sentence, picked)| (sentence, picked))
}

/// The sentence of `passage` that covers most of the question, or nothing for an empty passage.
fn closest_sentence(question: &HashSet<String>, title: &str, passage: &str) -> String {
    best_sentence(question, title, passage, |_| Some(()))
        .map(|(s, ())| s.to_string())
        .unwrap_or_default()
}

/// The sentence of a sibling passage to quote, and the look-alike it names: the sentence closest to the question
/// among those naming a look-alike as close as the passage's closest (so the quote shows what the message names,
/// not a lone shared word: "per API key"), else the passage's closest sentence and the passage's look-alike.
fn sibling_quote(
    subjects: &Subjects,
    question: &HashSet<String>,
    hit: &pb::Hit,
    passage_sibling: Sibling,
) -> (Sibling, String) {
    let named = |sentence: &str| {
        subjects
            .sibling_in("", sentence)
            .filter(|s| s.shared >= passage_sibling.shared)
    };
    match best_sentence(question, &hit.title, body(hit), named) {
        Some((sentence, sibling)) => (sibling, sentence.to_string()),
        None => (
            passage_sibling,
            closest_sentence(question, &hit.title, body(hit)),
        ),
    }
}

/// The near miss among the best `hits` (in rank order, `look_at` of them): the first that names a sibling of
/// the question's subject, else the first that carries one of the question's subjects. None when the question
/// names no subject or no passage names one like it.
pub fn find(question: &str, hits: &[&pb::Hit], look_at: usize) -> Option<NearMiss> {
    let subjects = Subjects::of_question(question);
    if subjects.is_empty() {
        return None;
    }
    let asked_words = text::content_set(question);
    let source = |hit: &pb::Hit, quote: String| NearMissSource {
        chunk_id: hit.chunk_id.clone(),
        doc_id: hit.doc_id.clone(),
        title: hit.title.clone(),
        quote,
    };
    let best = hits.iter().take(look_at);
    // The closest look-alike among the best passages (most words shared with the subject, then rank).
    let mut closest: Option<(&pb::Hit, Sibling)> = None;
    for hit in best.clone() {
        if let Some(sibling) = subjects.sibling_in(&hit.title, body(hit)) {
            if closest
                .as_ref()
                .is_none_or(|(_, c)| sibling.shared > c.shared)
            {
                closest = Some((hit, sibling));
            }
        }
    }
    if let Some((hit, passage_sibling)) = closest {
        let (sibling, quote) = sibling_quote(&subjects, &asked_words, hit, passage_sibling);
        return Some(NearMiss {
            kind: SIBLING,
            message: format!(
                "The closest passage is about {}, not {}.",
                sibling.found, sibling.asked
            ),
            asked: sibling.asked,
            found: sibling.found,
            source: source(hit, quote),
        });
    }
    let (hit, subject) = best.clone().find_map(|hit| {
        let carried = subjects.carried_in(&hit.title, body(hit));
        carried.into_iter().next().map(|subject| (hit, subject))
    })?;
    Some(NearMiss {
        kind: NOT_STATED,
        message: format!(
            "The documents mention {subject}, but no passage found states what was asked."
        ),
        asked: subject.clone(),
        found: subject,
        source: source(hit, closest_sentence(&asked_words, &hit.title, body(hit))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(doc: &str, title: &str, text: &str) -> pb::Hit {
        pb::Hit {
            chunk_id: format!("{doc}#0"),
            doc_id: doc.into(),
            title: title.into(),
            text: text.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_sibling_passage_is_named_with_its_closest_sentence() {
        let mini = hit(
            "drift-mini",
            "Drift Mini review",
            "I bought it in May. The Drift Mini charges fully in 2 hours. Great colours.",
        );
        let got = find("How long does the Drift Max take to charge?", &[&mini], 3).unwrap();
        assert_eq!(got.kind, SIBLING);
        assert_eq!(
            (got.asked.as_str(), got.found.as_str()),
            ("Drift Max", "Drift Mini")
        );
        assert_eq!(
            got.message,
            "The closest passage is about Drift Mini, not Drift Max."
        );
        assert_eq!(got.source.doc_id, "drift-mini");
        assert_eq!(got.source.quote, "The Drift Mini charges fully in 2 hours.");
    }

    #[test]
    fn the_quote_names_the_lookalike_the_message_names() {
        let chat = hit(
            "chat",
            "#eng-leads chat",
            "Tariq: The beta launch of Project Robin is set for 24 September. Uma: Project Plover is on hold.",
        );
        let got = find("When is the beta launch of Project Swift?", &[&chat], 3).unwrap();
        assert_eq!(got.found, "Project Robin");
        assert!(got.source.quote.contains("Project Robin"), "{got:?}");
    }

    #[test]
    fn the_closest_lookalike_among_the_best_passages_is_named() {
        let orders = hit(
            "orders",
            "Orders API v2: endpoints and limits",
            "The default rate limit of the Orders API v2 is 1200 requests per minute per API key.",
        );
        let returns = hit(
            "returns-v2",
            "Returns API v2: endpoints and limits",
            "Each API key on the Returns API v2 has a default rate limit of 600 requests per minute.",
        );
        let q = "What is the default rate limit of the Returns API v1?";
        let got = find(q, &[&orders, &returns], 3).unwrap();
        assert_eq!(
            (got.found.as_str(), got.source.doc_id.as_str()),
            ("Returns API v2", "returns-v2")
        );
        let got = find(q, &[&orders], 3).unwrap();
        assert_eq!(
            got.found, "Orders API v2",
            "a lone shared word (\"per API key\") is no look-alike"
        );
    }

    #[test]
    fn a_passage_about_the_subject_that_does_not_answer_is_not_stated() {
        let max = hit(
            "drift-max",
            "Drift Max review",
            "The Drift Max weighs 1.2 kg.",
        );
        let got = find("How long does the Drift Max take to charge?", &[&max], 3).unwrap();
        assert_eq!(got.kind, NOT_STATED);
        assert_eq!(got.found, "Drift Max");
        assert!(got.message.contains("no passage found states"));
    }

    #[test]
    fn a_question_naming_nothing_or_an_unrelated_passage_gives_none() {
        let max = hit(
            "drift-max",
            "Drift Max review",
            "The Drift Max weighs 1.2 kg.",
        );
        assert_eq!(find("how long does it take to charge?", &[&max], 3), None);
        let other = hit(
            "policy",
            "Travel policy",
            "Economy class is booked for flights.",
        );
        assert_eq!(
            find("How long does the Drift Max take to charge?", &[&other], 3),
            None
        );
        assert_eq!(
            find("How long does the Drift Max take to charge?", &[], 3),
            None
        );
    }
}
