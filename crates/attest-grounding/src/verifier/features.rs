//! Features of (question, claim, passage) for the learned verifier. Each says how much of what the claim adds
//! beyond the question the passage actually contains; all are fractions or flags, so they do not depend on how
//! long the claim is.

use std::collections::HashSet;

use attest_models::logistic::Sign;
use attest_text::text;

/// Names of the features, in vector order (written next to the weights in the model file).
pub const FEATURE_NAMES: [&str; 7] = [
    "new_word_coverage",
    "new_bigram_coverage",
    "best_sentence_coverage",
    "missing_numbers",
    "missing_names",
    "negation_mismatch",
    "no_new_content",
];

pub const FEATURE_COUNT: usize = FEATURE_NAMES.len();

/// The direction each feature may push the support score (see [`Sign`]).
pub const FEATURE_SIGNS: [Sign; FEATURE_COUNT] = [
    Sign::Positive,
    Sign::Positive,
    Sign::Positive,
    Sign::Negative,
    Sign::Negative,
    Sign::Negative,
    Sign::Free,
];

/// The feature vector of one (question, claim, passage).
pub fn features(question: &str, claim: &str, passage: &str) -> [f64; FEATURE_COUNT] {
    let question_words = text::content_set(question);
    let passage_words = text::content_set(passage);
    // What the claim says beyond restating the question.
    let claim_words = text::content_words(claim);
    let new_words: Vec<&String> = claim_words
        .iter()
        .filter(|w| !question_words.contains(*w))
        .collect();
    let new_word_coverage = fraction(
        new_words
            .iter()
            .filter(|w| passage_words.contains(**w))
            .count(),
        new_words.len(),
    );

    let passage_bigrams = bigrams(&text::content_words(passage));
    let claim_bigrams: Vec<(String, String)> = bigrams(&claim_words)
        .into_iter()
        .filter(|(a, b)| !(question_words.contains(a) && question_words.contains(b)))
        .collect();
    let new_bigram_coverage = fraction(
        claim_bigrams
            .iter()
            .filter(|b| passage_bigrams.contains(*b))
            .count(),
        claim_bigrams.len(),
    );

    let claim_set: HashSet<&String> = claim_words.iter().collect();
    let best_sentence_coverage = text::sentences(passage)
        .into_iter()
        .map(|s| {
            let words = text::content_set(s);
            fraction(
                claim_set.iter().filter(|w| words.contains(**w)).count(),
                claim_set.len(),
            )
        })
        .fold(0.0, f64::max);

    let passage_numbers: HashSet<String> = text::numbers(passage).into_iter().collect();
    let claim_numbers = text::numbers(claim);
    let missing_numbers = missing_fraction(
        claim_numbers
            .iter()
            .filter(|n| !passage_numbers.contains(*n))
            .count(),
        claim_numbers.len(),
    );
    let passage_lower: HashSet<String> =
        text::words(passage).iter().map(|w| text::stem(w)).collect();
    let claim_names = text::names(claim);
    let missing_names = missing_fraction(
        claim_names
            .iter()
            .filter(|n| !passage_lower.contains(*n))
            .count(),
        claim_names.len(),
    );

    // Negation of the claim against the passage sentence that shares most of its words.
    let best_sentence = text::sentences(passage).into_iter().max_by_key(|s| {
        let words = text::content_set(s);
        claim_set.iter().filter(|w| words.contains(**w)).count()
    });
    let negation_mismatch = match best_sentence {
        Some(s) => f64::from(u8::from(text::is_negated(claim) != text::is_negated(s))),
        None => 0.0,
    };
    let no_new_content = f64::from(u8::from(new_words.is_empty()));
    [
        new_word_coverage,
        new_bigram_coverage,
        best_sentence_coverage,
        missing_numbers,
        missing_names,
        negation_mismatch,
        no_new_content,
    ]
}

/// part / whole, or 1 when there is nothing to cover (nothing unsupported).
fn fraction(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        1.0
    } else {
        part as f64 / whole as f64
    }
}

/// missing / checked, or 0 when there is nothing to check (nothing is missing).
fn missing_fraction(missing: usize, checked: usize) -> f64 {
    if checked == 0 {
        0.0
    } else {
        missing as f64 / checked as f64
    }
}

fn bigrams(words: &[String]) -> HashSet<(String, String)> {
    words
        .windows(2)
        .map(|w| (w[0].clone(), w[1].clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSAGE: &str =
        "The Timbarra Gold Mine was located on the Timbarra Plateau. It is at the \
        intersection of the New England and Bruxner Highways, and it opened in 1998.";

    #[test]
    fn a_supported_claim_covers_its_new_words() {
        let f = features(
            "The mine is at the intersection of New England and what?",
            "Bruxner Highway",
            PASSAGE,
        );
        assert_eq!(f[0], 1.0, "{f:?}");
        assert_eq!(f[4], 0.0, "no name is missing: {f:?}");
    }

    #[test]
    fn invented_names_and_numbers_show() {
        let f = features(
            "When did the Timbarra Gold Mine open?",
            "The Timbarra Gold Mine opened in 2004 under Rio Tinto.",
            PASSAGE,
        );
        assert!(f[0] < 0.7, "{f:?}");
        assert_eq!(f[3], 1.0, "the year is missing: {f:?}");
        assert!(f[4] > 0.0, "Rio Tinto is not in the passage: {f:?}");
    }

    #[test]
    fn negation_against_the_closest_sentence() {
        let f = features(
            "Was the mine on a plateau?",
            "The mine was not located on the Timbarra Plateau.",
            PASSAGE,
        );
        assert_eq!(f[5], 1.0);
    }
}
