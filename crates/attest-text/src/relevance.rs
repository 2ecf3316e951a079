//! How well a passage covers a question, on a 0..1 scale the coverage gate can hold thresholds against: the
//! share of the question's content words found in the passage's best sentence together with its title.

use std::collections::HashSet;

use crate::text;

/// Relevance of one sentence (with its passage's title words) to the question's content words.
pub fn sentence_relevance(
    question_words: &HashSet<String>,
    title_words: &HashSet<String>,
    sentence: &str,
) -> f64 {
    if question_words.is_empty() {
        return 0.0;
    }
    let words = text::content_set(sentence);
    let covered = question_words
        .iter()
        .filter(|w| words.contains(*w) || title_words.contains(*w))
        .count();
    covered as f64 / question_words.len() as f64
}

/// Relevance of a passage: that of its best sentence.
pub fn passage_relevance(question: &str, title: &str, passage: &str) -> f64 {
    let q = text::content_set(question);
    let t = text::content_set(title);
    text::sentences(passage)
        .into_iter()
        .map(|s| sentence_relevance(&q, &t, s))
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coverage_of_question_words_by_the_best_sentence_and_title() {
        let p = "Tesla lived at the hotel. A do not disturb sign hung on the door of his room.";
        let r = passage_relevance("What hung on the door of Tesla's room?", "Nikola Tesla", p);
        // question words: hung, door, tesla, room → the second sentence has hung, door, room; the title tesla.
        assert_eq!(r, 1.0);
        assert_eq!(
            passage_relevance("Who won the 1990 World Cup?", "Nikola Tesla", p),
            0.0
        );
        assert_eq!(passage_relevance("the of and", "", p), 0.0);
    }
}
