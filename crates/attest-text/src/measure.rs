//! The kind of quantity a question asks for — a time, an amount of money, a mass, a data size — and whether a
//! sentence states one of that kind. A quantity of another kind answers another question: "€700 per event" is not
//! the conference allowance's qualifying period, "a burst of 250 requests" is not the largest request body, "retired
//! after 16 March 2026" is not how long a call waits before it times out (issue 68: the company set's near misses
//! the reader answered with the right subject's other number). Checking an answer's type against the question's
//! is the oldest guard of question answering; here it is kept to kinds whose units are unambiguous, and a question
//! whose kind is unclear ("How long is the river?" is a length, "How long did the war last?" a time) is held to
//! none.

use crate::text;

/// A kind of quantity with units that say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// How long something takes, lasts or waits: seconds to centuries (or a clock time).
    Time,
    /// A price, cost, fee or budget.
    Money,
    /// A weight or load.
    Mass,
    /// The size of a payload, body, file or upload.
    DataSize,
}

/// Nouns naming a span of time: "What is the qualifying period / the request timeout / the escalation delay …".
const TIME_NOUNS: &[&str] = &["period", "timeout", "delay", "duration"];

/// Words after "how long" that make it a time, not a length ("How long does it take to charge …", "How long
/// before a call … times out", "How long did the ticket stay open").
const TIME_AFTER_HOW_LONG: &[&str] = &[
    "take", "takes", "took", "last", "lasts", "lasted", "stay", "stayed", "wait", "before",
    "after", "until", "remain", "remained", "hold", "held", "ago", "must",
];

const TIME_UNITS: &[&str] = &[
    "ms",
    "hrs",
    "millisecond",
    "second",
    "sec",
    "s",
    "minute",
    "min",
    "hour",
    "hr",
    "h",
    "day",
    "night",
    "overnight",
    "week",
    "fortnight",
    "month",
    "year",
    "yr",
    "decade",
    "century",
];

const MONEY_NOUNS: &[&str] = &[
    "price",
    "cost",
    "fee",
    "budget",
    "allowance",
    "stipend",
    "salary",
    "wage",
    "fare",
    "rent",
    "bonus",
];

const CURRENCY_SYMBOLS: &[char] = &['$', '€', '£', '¥', '₹', '₩'];

const CURRENCY_WORDS: &[&str] = &[
    "dollar", "usd", "euro", "eur", "pound", "gbp", "sterling", "cent", "penny", "pence", "yen",
    "jpy", "franc", "chf", "mark", "rupee", "yuan", "rmb", "ruble", "rouble", "lira", "krona",
    "krone", "peso", "shilling", "free",
];

const MASS_NOUNS: &[&str] = &["weight", "load"];

const MASS_UNITS: &[&str] = &[
    "mg", "g", "gram", "gramme", "kg", "kilogram", "kilo", "lb", "lbs", "kgs", "pound", "oz",
    "ounce", "ton", "tonne", "t", "stone", "carat",
];

/// What a data size is of: "the maximum payload size", "How large can a request body … be".
const DATA_NOUNS: &[&str] = &["payload", "body", "file", "upload", "attachment"];

const DATA_UNITS: &[&str] = &[
    "byte", "b", "kb", "mb", "gb", "tb", "kib", "mib", "gib", "tib", "kilobyte", "megabyte",
    "gigabyte", "terabyte",
];

impl Measure {
    /// The kind a quantity question asks for, when its words say it unambiguously. `None` for a question that
    /// asks no quantity or one of another or an unclear kind.
    pub fn of_question(question: &str) -> Option<Measure> {
        let words = text::words(question);
        // "What is the <phrase> of …": the phrase's head says what is measured, its other words what of
        // ("the maximum payload size", "the qualifying period"); a noun after it does not ("the deadline for the
        // training budget" asks a time, not money).
        if let Some(phrase) = crate::quantity::measure_phrase(&words) {
            let stems: Vec<String> = phrase.iter().map(|w| text::stem(w)).collect();
            let head = stems.last().map(String::as_str).unwrap_or_default();
            return match head {
                h if TIME_NOUNS.contains(&h) => Some(Measure::Time),
                h if MONEY_NOUNS.contains(&h) => Some(Measure::Money),
                h if MASS_NOUNS.contains(&h) => Some(Measure::Mass),
                "size" if stems.iter().any(|s| DATA_NOUNS.contains(&s.as_str())) => {
                    Some(Measure::DataSize)
                }
                _ => None,
            };
        }
        let stems: Vec<String> = words.iter().map(|w| text::stem(w)).collect();
        let has = |set: &[&str]| stems.iter().any(|s| set.contains(&s.as_str()));
        // Each "how" with the word after it and the words after that ("how much load", "how long does it take").
        let hows: Vec<(&str, &[String])> = words
            .iter()
            .enumerate()
            .filter(|(_, w)| *w == "how")
            .filter_map(|(i, _)| Some((words.get(i + 1)?.as_str(), &words[i + 2..])))
            .collect();
        let how_is = |first: &[&str]| hows.iter().any(|(w, _)| first.contains(w));
        let how_much_of = |nouns: &[&str]| {
            hows.iter().any(|(w, rest)| {
                *w == "much"
                    && rest
                        .first()
                        .is_some_and(|next| nouns.contains(&text::stem(next).as_str()))
            })
        };
        if how_is(&["large", "big"]) && has(DATA_NOUNS) {
            return Some(Measure::DataSize);
        }
        if how_is(&["heavy"]) || how_much_of(MASS_NOUNS) || has(&["weigh"]) {
            return Some(Measure::Mass);
        }
        // "How much is the meal allowance …", "How much budget …", "How much does it cost".
        if how_is(&["much"]) && (has(MONEY_NOUNS) || has(&["cost", "pay"])) {
            return Some(Measure::Money);
        }
        let how_long_a_time = hows.iter().any(|(w, rest)| {
            *w == "long"
                && rest
                    .iter()
                    .any(|later| TIME_AFTER_HOW_LONG.contains(&later.as_str()))
        });
        let times_out = words
            .windows(2)
            .any(|w| matches!(w[0].as_str(), "time" | "times" | "timed") && w[1] == "out");
        (how_long_a_time || times_out).then_some(Measure::Time)
    }

    /// Whether `sentence` states a quantity of this kind: a unit of it, written as a word or after a number
    /// ("90 seconds", "90s", "€700", "2 MB", "1.2kg").
    pub fn stated_in(self, sentence: &str) -> bool {
        if self == Measure::Money && sentence.chars().any(|c| CURRENCY_SYMBOLS.contains(&c)) {
            return true;
        }
        if self == Measure::Time && clock_time(sentence) {
            return true;
        }
        let units: &[&str] = match self {
            Measure::Time => TIME_UNITS,
            Measure::Money => CURRENCY_WORDS,
            Measure::Mass => MASS_UNITS,
            Measure::DataSize => DATA_UNITS,
        };
        let words = text::words(sentence);
        words.iter().enumerate().any(|(i, word)| {
            let before = i.checked_sub(1).map(|j| words[j].as_str());
            // A unit glued to its number ("90s", "2mb") reads as the unit.
            let unit = word.trim_start_matches(|c: char| c.is_ascii_digit());
            let after_a_number = unit.len() < word.len()
                || before.is_some_and(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_digit()));
            // A one-letter unit ("s", "h", "g", "t", "b") only after a number: alone it is a letter, not a unit.
            let a_unit =
                (unit.len() > 1 || after_a_number) && units.contains(&text::stem(unit).as_str());
            // "€850 per year" states money by the year, not a span of time.
            let a_rate = self == Measure::Time && matches!(before, Some("per" | "each" | "every"));
            a_unit && !a_rate
        })
    }
}

/// "at 14:05", "by 9 pm", "at noon": a clock time answers a time question as a span does.
fn clock_time(sentence: &str) -> bool {
    let bytes = sentence.as_bytes();
    let colon = bytes
        .windows(3)
        .any(|w| w[0].is_ascii_digit() && w[1] == b':' && w[2].is_ascii_digit());
    let words = text::words(sentence);
    let number = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_digit());
    let meridiem = |w: &str| w == "am" || w == "pm";
    colon
        || words.iter().any(|w| w == "noon" || w == "midnight")
        || words.iter().any(|w| {
            let rest = w.trim_start_matches(|c: char| c.is_ascii_digit());
            rest.len() < w.len() && meridiem(rest)
        })
        || words.windows(2).any(|w| number(&w[0]) && meridiem(&w[1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_asks_for_the_kind_its_words_name() {
        for (question, kind) in [
            (
                "What is the qualifying period for the conference allowance?",
                Measure::Time,
            ),
            (
                "How long before a call to the Labels API v1 times out?",
                Measure::Time,
            ),
            (
                "What is the request timeout of the Labels API v3?",
                Measure::Time,
            ),
            (
                "How long does it take to charge the Pebble Ultra fully?",
                Measure::Time,
            ),
            (
                "What is the escalation delay of DiskSpaceLow?",
                Measure::Time,
            ),
            (
                "How large can a request body sent to the Returns API v2 be?",
                Measure::DataSize,
            ),
            (
                "What is the maximum payload size of the Tracking API v3?",
                Measure::DataSize,
            ),
            ("What is the list price of the Halo Plus?", Measure::Money),
            ("How much did the bridge cost to build?", Measure::Money),
            (
                "How much budget does Project Ibis get for the third quarter?",
                Measure::Money,
            ),
            ("How much load is the Halo Lite rated for?", Measure::Mass),
            ("What is the weight of the Zephyr Duo?", Measure::Mass),
            ("What does the Zephyr Sport weigh?", Measure::Mass),
            (
                "How much does the Arlo Lite weigh with the battery?",
                Measure::Mass,
            ),
            ("What is the maximum load of the Halo Max?", Measure::Mass),
        ] {
            assert_eq!(Measure::of_question(question), Some(kind), "{question}");
        }
        for question in [
            // A length or a time: unclear, so held to none.
            "How long is the Amazon river?",
            "How long is the warranty on the Orbit Sport?",
            "What is the page size limit of the Labels API v3?",
            "How many engineers will work on Project Swift?",
            "What is the time zone of the office?",
            "Who owns Project Heron?",
            "What is the body of water south of the city?",
            // The deadline is asked, not the budget.
            "What is the deadline for the training budget?",
            "Within how many days must requests for the laptop budget be submitted?",
        ] {
            assert_eq!(Measure::of_question(question), None, "{question}");
        }
    }

    #[test]
    fn a_sentence_states_a_kind_by_its_units() {
        let time = Measure::Time;
        assert!(time.stated_in("Requests time out after 90 seconds."));
        assert!(time.stated_in("It fires after 5m or 90s of errors."));
        assert!(time.stated_in("Staff are eligible after 6 months of service."));
        assert!(time.stated_in("The office opens at 9:30."));
        assert!(!time.stated_in(
            "After 16 March 2026 the Labels API v1 is retired and calls return HTTP 410."
        ));
        assert!(!time.stated_in("In France, the conference allowance is capped at €700 per event."));
        assert!(!time.stated_in("Request bodies may be at most 2 MB."));
        assert!(
            !time.stated_in("The home-office stipend in the Netherlands is set at €850 per year.")
        );

        assert!(Measure::DataSize.stated_in("Request bodies may be at most 2 MB."));
        assert!(Measure::DataSize.stated_in("Payloads up to 512KB are accepted."));
        assert!(!Measure::DataSize.stated_in(
            "The Returns API v2 allows a burst of 250 extra requests within ten seconds."
        ));

        assert!(Measure::Money.stated_in("The Halo Plus costs €199."));
        assert!(Measure::Money.stated_in("It cost 2 million dollars."));
        assert!(Measure::Money.stated_in("Entry is free."));
        assert!(!Measure::Money.stated_in("The Halo Plus comes with a warranty of 3 years."));

        assert!(Measure::Mass.stated_in("It weighs 1.2kg without the rain cover."));
        assert!(Measure::Mass.stated_in("The Halo Max is rated for 25 kg."));
        assert!(Measure::Mass.stated_in("The Zephyr Duo weighs 44 g."));
        assert!(!Measure::Mass.stated_in("The Halo Max runs for 4 hours in turbo mode."));
        // A lone letter is not a unit.
        assert!(!Measure::Mass.stated_in("Plan B was chosen in week t of the project."));
    }
}
