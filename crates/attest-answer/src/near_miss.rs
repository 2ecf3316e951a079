//! What an abstention says was found instead (issue 68): when the best passages answer a neighbouring question
//! — the Drift Mini's charge time asked of the Drift Max, API v2's switch-off date asked of v1 — the abstention
//! names it, as a suggestion with its citation, never as an answer: "The documents give this for the Drift Mini,
//! not the Drift Max." When the best passage is about the asked subject but states nothing that answers, it says
//! that instead ("The documents mention the Drift Max, but no passage found states what was asked").

use std::collections::HashSet;

use serde::Serialize;

use crate::footnotes::body;
use crate::relevance::sentence_relevance;
use crate::subjects::Subjects;
use crate::text;
use attest_proto::v1 as pb;

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

/// The sentence of `passage` that covers most of the question (the first on ties), or the passage's start.
fn closest_sentence(question: &HashSet<String>, title: &str, passage: &str) -> String {
    let title_words = text::content_set(title);
    text::sentences(passage)
        .into_iter()
        .map(|s| (sentence_relevance(question, &title_words, s), s))
        .fold(None::<(f64, &str)>, |best, (score, s)| match best {
            Some((b, _)) if b >= score => best,
            _ => Some((score, s)),
        })
        .map(|(_, s)| s.to_string())
        .unwrap_or_default()
}

/// The near miss among the best `hits` (in rank order, `look_at` of them): the first that names a sibling of
/// the question's subject, else the best one if it carries the question's subjects. None when the question
/// names no subject or no passage names one like it.
pub fn find(question: &str, hits: &[&pb::Hit], look_at: usize) -> Option<NearMiss> {
    let subjects = Subjects::of_question(question);
    if subjects.is_empty() {
        return None;
    }
    let asked_words = text::content_set(question);
    let source = |hit: &pb::Hit| NearMissSource {
        chunk_id: hit.chunk_id.clone(),
        doc_id: hit.doc_id.clone(),
        title: hit.title.clone(),
        quote: closest_sentence(&asked_words, &hit.title, body(hit)),
    };
    let best = hits.iter().take(look_at);
    for hit in best.clone() {
        if let Some(sibling) = subjects.sibling_in(&hit.title, body(hit)) {
            return Some(NearMiss {
                kind: SIBLING,
                message: format!(
                    "The documents give this for the {}, not the {}.",
                    sibling.found, sibling.asked
                ),
                asked: sibling.asked,
                found: sibling.found,
                source: source(hit),
            });
        }
    }
    let hit = best.clone().next()?;
    let carried = subjects.carried_in(&hit.title, body(hit));
    let subject = carried.first()?.clone();
    Some(NearMiss {
        kind: NOT_STATED,
        message: format!(
            "The documents mention the {subject}, but no passage found states what was asked."
        ),
        asked: subject.clone(),
        found: subject,
        source: source(hit),
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
            "The documents give this for the Drift Mini, not the Drift Max."
        );
        assert_eq!(got.source.doc_id, "drift-mini");
        assert_eq!(got.source.quote, "The Drift Mini charges fully in 2 hours.");
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
