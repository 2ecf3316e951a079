//! Questions that ask for a quantity ("How many …", "How long …", "How much …") are answered only by a sentence
//! that states one. "When …" is not held to a number: times are said without one ("at night", "after the war"). Company text talks around numbers it never gives — "the budget depends on the security
//! review", "a range of its own that the shop does not publish", "after a delay set per team" — and the reader,
//! matching the subject and the attribute, read such sentences as answers (issue 68: 74% of the held-in
//! "number never given" near misses answered before this rule). A sentence with a digit or a number word states a
//! quantity; one without cannot answer "how many".

use crate::text;

/// The openings of a question asking for a quantity (lower-case, after "how").
const QUANTITY_AFTER_HOW: [&str; 11] = [
    "many", "much", "long", "large", "big", "far", "old", "often", "fast", "heavy", "tall",
];

/// Nouns that name a measure: "What is the escalation time / qualifying period / page size limit of …" asks for a
/// quantity as "how long" does ("after a delay set in the paging tool" answers neither). Measures only, not
/// words that may be answered by a name or a word ("the time period of the Jurassic", "the rate of a river").
const MEASURES: [&str; 17] = [
    "budget",
    "capacity",
    "cost",
    "deadline",
    "delay",
    "duration",
    "fee",
    "length",
    "limit",
    "load",
    "period",
    "price",
    "size",
    "threshold",
    "timeout",
    "time",
    "weight",
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

/// What a question asks for, of the kinds a sentence can be checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// "how" followed by one of [`QUANTITY_AFTER_HOW`] ("For how long …", "How many …").
    Quantity,
    Other,
}

/// "What is the <words> <measure>" (at most two words before it), the measure's phrase then ending ("What is the
/// escalation time of …", "What is the page size limit?"), and no "what" asking for a kind ("What is the time
/// zone …" ends at "zone", not a measure): the phrase's words (lower-case, its head last).
pub fn measure_phrase(words: &[String]) -> Option<&[String]> {
    let first = words.first()?;
    let rest = match (first.as_str(), words.get(1).map(String::as_str)) {
        // "What's the …" reads as "what the …" ([`text::words`] drops the "'s").
        ("what", Some("the")) => &words[1..],
        ("what", Some("is" | "was" | "are")) => &words[2..],
        _ => return None,
    };
    let ("the", phrase) = rest.split_first().map(|(d, p)| (d.as_str(), p))? else {
        return None;
    };
    // The noun phrase: its words up to the first function word.
    let len = phrase
        .iter()
        .take_while(|w| !text::is_function_word(w))
        .take(4)
        .count();
    let noun = &phrase[..len];
    (len <= 3
        && noun
            .last()
            .is_some_and(|head| MEASURES.contains(&text::stem(head).as_str())))
    .then_some(noun)
}

impl Asked {
    pub fn of_question(question: &str) -> Self {
        let words = text::words(question);
        if words
            .windows(2)
            .any(|w| w[0] == "how" && QUANTITY_AFTER_HOW.contains(&w[1].as_str()))
            || measure_phrase(&words).is_some()
        {
            Asked::Quantity
        } else {
            Asked::Other
        }
    }

    /// Whether `sentence` can answer `question`: a quantity needs a number or a number word, and not one the
    /// question gives itself ([`stated_numbers`]).
    pub fn answerable_by(self, question: &str, sentence: &str) -> bool {
        match self {
            Asked::Other => true,
            Asked::Quantity => {
                let given = stated_numbers(question);
                stated_numbers(sentence).iter().any(|n| !given.contains(n))
                    || text::words(sentence)
                        .iter()
                        .any(|w| NUMBER_WORDS.contains(&w.as_str()))
            }
        }
    }
}

/// The numbers a text states: tokens whose digits begin them or follow a sign ("90s", "€250", "A$700", "2.5"),
/// without thousands separators. A digit inside a name states nothing ("LatencyP99High", "Returns API v2",
/// "SEV4"): a sentence naming its subject so had passed for one answering "how large a burst does the Inventory
/// API v2 allow?" with "it tolerates short bursts".
pub fn stated_numbers(text: &str) -> Vec<String> {
    text::numbers(text)
        .into_iter()
        .filter_map(|token| {
            let first_digit = token.find(|c: char| c.is_ascii_digit())?;
            let prefix = &token[..first_digit];
            let after_a_sign = prefix.chars().last().is_none_or(|c| !c.is_alphanumeric());
            after_a_sign.then(|| token[first_digit..].to_string())
        })
        .collect()
}

/// The unit a rate question asks "per" ("How many requests per minute …" → "minute", stemmed), when it asks for
/// a quantity: a sentence without the unit states another rate or another measure ("Requests … time out after 90
/// seconds" for the requests per minute; issue 68's API references, whose sentences all say "requests").
pub fn rate_unit(question: &str) -> Option<String> {
    if Asked::of_question(question) != Asked::Quantity {
        return None;
    }
    let words = text::words(question);
    words
        .windows(2)
        .find(|w| w[0] == "per" && !text::is_function_word(&w[1]))
        .map(|w| text::stem(&w[1]))
}

/// Units of time and the adjectives that say "per" them ("annual precipitation" is rain per year).
const PER_UNIT_WORDS: [(&str, &[&str]); 5] = [
    ("year", &["annual", "annually", "yearly"]),
    ("month", &["monthly"]),
    ("week", &["weekly"]),
    ("day", &["daily"]),
    ("hour", &["hourly"]),
];

/// Whether `sentence` names the rate's `unit` (stemmed, as [`rate_unit`] gives it), or says "per" it in one word.
pub fn names_the_unit(sentence: &str, unit: &str) -> bool {
    let per_word = PER_UNIT_WORDS
        .iter()
        .find(|(u, _)| text::stem(u) == unit)
        .map_or(&[][..], |(_, words)| *words);
    text::words(sentence)
        .iter()
        .any(|w| text::stem(w) == unit || per_word.contains(&w.as_str()))
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
        let asked = "How long does the Drift Max take to charge?";
        assert!(q.answerable_by(asked, "The Drift Mini takes 2.5 hours to charge fully."));
        assert!(q.answerable_by(asked, "It lasted three years."));
        assert!(!q.answerable_by(
            asked,
            "The Arlo Lite has a range of its own that the shop does not publish."
        ));
        assert!(!q.answerable_by(
            asked,
            "Out of hours it escalates after a delay set per team."
        ));
    }

    #[test]
    fn what_is_the_measure_asks_for_a_quantity() {
        for q in [
            "What is the escalation time of LatencyP99High out of hours?",
            "What is the qualifying period for the conference allowance?",
            "What is the page size limit of the Labels API v3?",
            "What's the price of the Halo Plus?",
        ] {
            assert_eq!(Asked::of_question(q), Asked::Quantity, "{q}");
        }
        for q in [
            "What is the time zone of the office?",
            "What is the owning team of MemoryPressure?",
            "Which period did the museum's collection start in?",
        ] {
            assert_eq!(Asked::of_question(q), Asked::Other, "{q}");
        }
        let asked = "What is the escalation time of LatencyP99High out of hours?";
        let q = Asked::of_question(asked);
        assert!(!q.answerable_by(
            asked,
            "Out of hours, it escalates after a delay set in the paging tool."
        ));
        // The digits of a name state no quantity.
        assert!(!q.answerable_by(
            asked,
            "Out of hours, LatencyP99High escalates after a delay set in the paging tool."
        ));
        let burst = "How large a burst does the Inventory API v2 allow?";
        assert!(!Asked::of_question(burst).answerable_by(
            burst,
            "The Inventory API v2 tolerates short bursts, though their size is tuned by the platform team."
        ));
        assert!(Asked::of_question(burst).answerable_by(
            burst,
            "The Inventory API v2 allows a burst of 250 requests."
        ));
        let stipend = "How much is the home-office stipend in Australia?";
        assert!(Asked::of_question(stipend).answerable_by(
            stipend,
            "Employees based in Australia are entitled to a home-office stipend of A$700 per year."
        ));
        // Nor does a number the question gives itself.
        let census = "How many people lived in Paris in 1900?";
        assert!(
            !Asked::of_question(census).answerable_by(census, "In 1900 Paris was a large city.")
        );
        assert!(Asked::of_question(census)
            .answerable_by(census, "In 1900 Paris had 2,714,068 inhabitants."));
    }

    #[test]
    fn a_time_question_is_not_held_to_a_number() {
        // "When does the barn owl hunt?" — "at night": times are often said without a number.
        let q = Asked::of_question("When does the barn owl hunt?");
        assert_eq!(q, Asked::Other);
        assert!(q.answerable_by(
            "When does the barn owl hunt?",
            "The barn owl hunts at night."
        ));
        assert_eq!(
            Asked::of_question("How does the Drift Max charge?"),
            Asked::Other
        );
    }

    #[test]
    fn a_rate_is_stated_in_its_unit() {
        let unit =
            rate_unit("How many requests per minute does the Tracking API v1 allow by default?");
        assert_eq!(unit.as_deref(), Some(text::stem("minute").as_str()));
        let unit = unit.unwrap();
        assert!(!names_the_unit(
            "Requests to the Tracking API v1 time out after 90 seconds.",
            &unit
        ));
        assert!(names_the_unit("It allows 600 requests per minute.", &unit));
        assert!(names_the_unit("The limit is 600 requests a minute.", &unit));
        assert_eq!(rate_unit("Who wrote the per diem policy?"), None);
        let year = rate_unit("How much rain per year does Fresno get on average?").unwrap();
        assert!(names_the_unit(
            "Average annual precipitation is around 11.5 inches.",
            &year
        ));
    }
}
