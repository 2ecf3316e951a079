//! Questions that ask for a quantity ("How many …", "How long …", "How much …") are answered only by a sentence
//! that states one, and "When …" only by one that states a date or a time. Company text talks around numbers it never gives — "the budget depends on the security
//! review", "a range of its own that the shop does not publish", "after a delay set per team" — and the reader,
//! matching the subject and the attribute, read such sentences as answers (issue 68: 74% of the held-in
//! "number never given" near misses answered before this rule). A sentence with a digit or a number word states a
//! quantity; one without cannot answer "how many".

use crate::text;

/// The openings of a question asking for a quantity (lower-case, after "how").
const QUANTITY_AFTER_HOW: [&str; 11] = [
    "many", "much", "long", "large", "big", "far", "old", "often", "fast", "heavy", "tall",
];

/// Number words a sentence may state a quantity with.
const NUMBER_WORDS: [&str; 36] = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
    "thirty",
    "forty",
    "fifty",
    "sixty",
    "seventy",
    "eighty",
    "ninety",
    "hundred",
    "thousand",
    "million",
    "billion",
    "dozen",
    "half",
    "once",
    "twice",
];

/// Words that date a sentence without a digit ("in March", "in the ninth century").
const DATE_WORDS: [&str; 16] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "century",
    "centuries",
    "decade",
    "yesterday",
];

/// What a question asks for, of the kinds a sentence can be checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// "how" followed by one of [`QUANTITY_AFTER_HOW`] ("For how long …", "How many …").
    Quantity,
    /// "When …": a date or a time.
    Time,
    Other,
}

impl Asked {
    pub fn of_question(question: &str) -> Self {
        let words = text::words(question);
        if words
            .windows(2)
            .any(|w| w[0] == "how" && QUANTITY_AFTER_HOW.contains(&w[1].as_str()))
        {
            Asked::Quantity
        } else if words.first().is_some_and(|w| w == "when") {
            Asked::Time
        } else {
            Asked::Other
        }
    }

    /// Whether `sentence` can answer it: a quantity needs a digit or a number word, a time also takes a month
    /// or an era word.
    pub fn answerable_by(self, sentence: &str) -> bool {
        let digit = || sentence.chars().any(|c| c.is_ascii_digit());
        let words = || text::words(sentence);
        match self {
            Asked::Other => true,
            Asked::Quantity => {
                digit() || words().iter().any(|w| NUMBER_WORDS.contains(&w.as_str()))
            }
            Asked::Time => {
                digit()
                    || words().iter().any(|w| {
                        NUMBER_WORDS.contains(&w.as_str()) || DATE_WORDS.contains(&w.as_str())
                    })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quantity_question_needs_a_sentence_stating_one() {
        let q = Asked::of_question("How long does the Drift Max take to charge?");
        assert_eq!(q, Asked::Quantity);
        assert_eq!(
            Asked::of_question("For how many days is a certificate valid?"),
            Asked::Quantity
        );
        assert!(q.answerable_by("The Drift Mini takes 2.5 hours to charge fully."));
        assert!(q.answerable_by("It lasted three years."));
        assert!(!q
            .answerable_by("The Arlo Lite has a range of its own that the shop does not publish."));
        assert!(!q.answerable_by("Out of hours it escalates after a delay set per team."));
    }

    #[test]
    fn a_time_question_needs_a_date_and_other_questions_anything() {
        let q = Asked::of_question("When is the beta launch of Project Falcon?");
        assert_eq!(q, Asked::Time);
        assert!(!q.answerable_by(
            "The beta launch depends on the security review, so nobody names a day yet."
        ));
        assert!(q.answerable_by("The beta launch is set for 24 September 2025."));
        assert!(q.answerable_by("It was built in the ninth century."));
        let other = Asked::of_question("Who owns Project Falcon?");
        assert_eq!(other, Asked::Other);
        assert!(other.answerable_by("Ines Duarte owns it."));
        assert_eq!(
            Asked::of_question("How does the Drift Max charge?"),
            Asked::Other
        );
    }
}
