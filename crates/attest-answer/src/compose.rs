//! The built-in extractive composer (SPEC "answer" step 9, the default generator): picks the passage sentences
//! that best answer the question and cites each with its footnote. It cannot invent: every sentence it writes
//! is a sentence of the passage it cites. When the reader has judged the passages' sentences
//! (`Passage::sentence_reads`), only judged sentences are quoted, best answerability first, and of a sentence
//! joined by `;` only the part where the reader's answer span starts (every claim should answer the question,
//! issue 41: `… was born in Smiljan; his father was a priest` for "Where was Tesla born?" quotes the first part);
//! otherwise the sentences that cover most of the question's words are.

use std::collections::HashSet;

use crate::footnotes::Footnotes;
use attest_text::relevance::sentence_relevance;
use attest_text::text;

struct Candidate {
    footnote: u32,
    position: usize,
    sentence: String,
    relevance: f64,
}

/// How the composer picks and joins sentences (`answer.composer_passage_ratio`, `answer.companion_ratio`,
/// `answer.max_answer_sentences`: `AnswerConfig::composition`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Composition {
    /// Only passages whose reranker score is at least this share of the best passage's are quoted.
    pub passage_ratio: f64,
    /// A further sentence joins only when its relevance is this share of the best one's.
    pub companion_ratio: f64,
    pub max_sentences: usize,
}

/// The answer text with `[n]` markers, or None when no sentence covers any of the question.
pub fn compose(question: &str, footnotes: &Footnotes, composition: &Composition) -> Option<String> {
    let q = text::content_set(question);
    // Answer from the strongest evidence: passages the reranker scored well below the best one are not quoted
    // (a lexically covering sentence of a weak passage is how a wrong paragraph gets cited).
    let best_passage = footnotes.iter().map(|(_, p)| p.score).fold(0.0, f64::max);
    let passage_floor = best_passage * composition.passage_ratio;
    let read = footnotes.iter().any(|(_, p)| p.sentence_reads.is_some());
    let mut candidates: Vec<Candidate> = Vec::new();
    for (n, p) in footnotes.iter().filter(|(_, p)| p.score >= passage_floor) {
        if read && p.sentence_reads.is_none() {
            continue;
        }
        let title = text::content_set(&p.title);
        for (position, s) in text::sentences(&p.text).into_iter().enumerate() {
            let (relevance, quoted) = match &p.sentence_reads {
                Some(reads) => {
                    let r = reads.get(position).copied().unwrap_or_default();
                    (r.answerability, answer_part(s, r.answer_part))
                }
                None => (sentence_relevance(&q, &title, s), s),
            };
            candidates.push(Candidate {
                footnote: n,
                position,
                sentence: quoted.to_string(),
                relevance,
            });
        }
    }
    // Best first; ties go to the better-ranked passage, then the earlier sentence.
    candidates.sort_by(|a, b| {
        b.relevance
            .total_cmp(&a.relevance)
            .then(a.footnote.cmp(&b.footnote))
            .then(a.position.cmp(&b.position))
    });
    let best = candidates.first().filter(|c| c.relevance > 0.0)?;
    let floor = best.relevance * composition.companion_ratio;
    let mut chosen: Vec<&Candidate> = Vec::new();
    for c in &candidates {
        if chosen.len() >= composition.max_sentences || c.relevance < floor {
            break;
        }
        let words: HashSet<String> = text::content_set(&c.sentence);
        let repeats = chosen
            .iter()
            .any(|o| jaccard(&words, &text::content_set(&o.sentence)) > 0.6);
        if !repeats {
            chosen.push(c);
        }
    }
    chosen.sort_by_key(|c| (c.footnote, c.position));
    Some(
        chosen
            .iter()
            .map(|c| with_marker(&c.sentence, c.footnote))
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// The `;` part `part` of `sentence` (the whole sentence when it has one part, or the reader pointed past its
/// last).
fn answer_part(sentence: &str, part: usize) -> &str {
    let parts = text::semicolon_parts(sentence);
    match parts.get(part) {
        Some(p) if parts.len() > 1 && !p.is_empty() => p,
        _ => sentence,
    }
}

/// `Tesla hung a sign.` + 2 → `Tesla hung a sign [2].`
fn with_marker(sentence: &str, n: u32) -> String {
    let trimmed = sentence.trim_end();
    match trimmed.char_indices().last() {
        Some((i, c)) if matches!(c, '.' | '!' | '?') => format!("{} [{n}]{c}", &trimmed[..i]),
        _ => format!("{trimmed} [{n}]."),
    }
}

fn jaccard(a: &HashSet<String>, b: &HashSet<String>) -> f64 {
    let union = a.union(b).count();
    if union == 0 {
        return 1.0;
    }
    a.intersection(b).count() as f64 / union as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::footnotes::Passage;

    /// The composition of the default configuration.
    fn defaults() -> Composition {
        crate::config::AnswerConfig::default().composition()
    }

    fn passage(id: &str, title: &str, text: &str) -> Passage {
        Passage {
            chunk_id: id.into(),
            doc_id: id.into(),
            title: title.into(),
            text: text.into(),
            score: 1.0,
            sentence_reads: None,
        }
    }

    #[test]
    fn picks_the_covering_sentence_and_cites_it() {
        let f = Footnotes::mint(vec![
            passage(
                "a",
                "Nikola Tesla",
                "Tesla lived in New York. He left a do not disturb sign on the door of his room.",
            ),
            passage("b", "Thomas Edison", "Edison invented the phonograph."),
        ]);
        let answer = compose(
            "What sign was on the door of Tesla's room?",
            &f,
            &defaults(),
        )
        .unwrap();
        assert_eq!(
            answer,
            "He left a do not disturb sign on the door of his room [1]."
        );
    }

    #[test]
    fn nothing_relevant_gives_none() {
        let f = Footnotes::mint(vec![passage(
            "a",
            "Edison",
            "Edison invented the phonograph.",
        )]);
        assert!(compose("Where is Lake Titicaca?", &f, &defaults()).is_none());
    }

    #[test]
    fn weak_passages_are_not_quoted_even_when_they_cover_the_question() {
        let mut strong = passage("a", "Nikola Tesla", "Tesla hung a sign on the door.");
        strong.score = 0.9;
        let mut weak = passage(
            "b",
            "Hotel",
            "A do not disturb sign was on the door of the room of Tesla.",
        );
        weak.score = 0.2;
        let f = Footnotes::mint(vec![strong, weak]);
        let question = "What sign was on the door of Tesla's room?";
        let strict = Composition {
            passage_ratio: 0.5,
            ..defaults()
        };
        assert_eq!(
            compose(question, &f, &strict).unwrap(),
            "Tesla hung a sign on the door [1]."
        );
        let any = compose(question, &f, &defaults()).unwrap();
        assert!(any.contains("[2]"), "{any}");
    }

    #[test]
    fn of_a_read_sentence_only_the_part_holding_the_answer_span_is_quoted() {
        use crate::reader::SentenceRead;
        let mut p = passage(
            "a",
            "Nikola Tesla",
            "Tesla (Serbian; 1856) was born in Smiljan; his father was a priest. He moved to Paris.",
        );
        let read = |answerability, answer_part| SentenceRead {
            answerability,
            answer_part,
            ..SentenceRead::default()
        };
        p.sentence_reads = Some(vec![read(0.9, 0), read(0.1, 0)]);
        let f = Footnotes::mint(vec![p.clone()]);
        let question = "Where was Tesla born?";
        assert_eq!(
            compose(question, &f, &defaults()).unwrap(),
            "Tesla (Serbian; 1856) was born in Smiljan [1]."
        );
        p.sentence_reads = Some(vec![read(0.9, 1), read(0.1, 0)]);
        let f = Footnotes::mint(vec![p.clone()]);
        assert_eq!(
            compose(question, &f, &defaults()).unwrap(),
            "his father was a priest [1]."
        );
        // A sentence without `;` parts is quoted whole whatever part the reader names.
        p.sentence_reads = Some(vec![read(0.1, 0), read(0.9, 3)]);
        let f = Footnotes::mint(vec![p]);
        assert_eq!(
            compose(question, &f, &defaults()).unwrap(),
            "He moved to Paris [1]."
        );
    }

    #[test]
    fn markers_sit_before_the_final_punctuation() {
        assert_eq!(with_marker("It rained!", 3), "It rained [3]!");
        assert_eq!(with_marker("No stop", 1), "No stop [1].");
    }
}
