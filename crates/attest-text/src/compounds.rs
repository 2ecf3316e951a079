//! Look-alike things written in lower case: "the sick leave" and "the bereavement leave", "the meal allowance"
//! and "the hotel allowance", "the maximum payload size" and "the maximum page size". A policy names its
//! allowances and leaves the way a catalogue names its products, but without capitals, so the name rules of
//! [`crate::subjects`] cannot see them, and the reader, meeting "leave" and a number of days, read the
//! neighbouring leave's figure as the answer (issue 68: most of the held-out policy near misses).
//!
//! A compound is a phrase of a determiner and two words written in lower case, neither a function word nor a
//! number, ended by a function word, a modal or punctuation: a modifier and a head ("the sick leave"). A sentence names another in the question's place when it has a compound with the same
//! head and another modifier ("bereavement leave") and not the question's own ("sick leave", whatever else it
//! names). A sentence naming the head alone ("the leave") is left to the reader.

use std::collections::{BTreeSet, HashSet};

use crate::text;

/// One compound, stemmed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Compound {
    modifier: String,
    head: String,
}

/// Words that open a noun phrase: a compound is read only right after one ("the sick leave", "a hotel
/// allowance", "entitled to as hotel allowance"), where two lower-case words are a name's modifier and head rather
/// than any adjacent pair ("stayed open", "long, slender tentacles").
const DETERMINERS: [&str; 12] = [
    "the", "a", "an", "its", "their", "this", "that", "each", "any", "our", "your", "as",
];

/// Verbs that end a phrase the function words do not ("the condition must hold").
const PHRASE_ENDS: [&str; 6] = ["must", "may", "might", "shall", "should", "need"];

/// Modifiers of degree or order, which say how much of a thing, not which thing ("the largest payload" is "the
/// maximum payload"): a pair they open is no compound.
const DEGREE: [&str; 14] = [
    "maximum", "minimum", "max", "min", "default", "total", "average", "typical", "usual",
    "current", "first", "last", "main", "standard",
];

/// A word of degree or order ([`DEGREE`], or a superlative: "largest", "longest").
fn of_degree(word: &str) -> bool {
    DEGREE.contains(&word) || word.ends_with("est") && word.len() > 5
}

/// The words of a compound.
const PHRASE_WORDS: usize = 2;

/// Prepositions that put a compound in the place of what a sentence speaks of: "the qualifying period *for* the
/// relocation allowance", "the deadline *of* the hotel allowance", "entitled *to* a hotel allowance".
const OF_WHAT: [&str; 3] = ["for", "of", "to"];

/// The compounds of `text_`: after a determiner, two words written in lower case (neither a function word nor a
/// number) that end the phrase, stemmed; `skip` holds words that are never part of one (the question's subjects'
/// names, lower-case).
fn compounds(text_: &str, skip: &BTreeSet<String>) -> BTreeSet<Compound> {
    compounds_after(text_, skip, None)
}

/// [`compounds`], or with `after` only those whose determiner follows one of these words.
fn compounds_after(
    text_: &str,
    skip: &BTreeSet<String>,
    after: Option<&[&str]>,
) -> BTreeSet<Compound> {
    let mut out = BTreeSet::new();
    for clause in text_.split([',', ';', ':', '.', '?', '!', '(', ')', '"']) {
        let tokens: Vec<String> = clause
            .split_whitespace()
            .map(|raw| {
                raw.trim_matches(|c: char| !c.is_alphanumeric() && c != '-')
                    .to_string()
            })
            .collect();
        let part = |t: &str| {
            !t.is_empty()
                && t.chars().all(|c| c.is_lowercase() || c == '-')
                && !text::is_function_word(t)
                && !PHRASE_ENDS.contains(&t)
                && !skip.contains(t)
        };
        for (i, w) in tokens.iter().enumerate() {
            if !DETERMINERS.contains(&w.to_lowercase().as_str()) {
                continue;
            }
            let placed = |words: &[&str]| {
                i.checked_sub(1)
                    .is_some_and(|j| words.contains(&tokens[j].to_lowercase().as_str()))
            };
            if after.is_some_and(|words| !placed(words)) {
                continue;
            }
            // Exactly two words, then the phrase ends (a function word, a modal, punctuation or the clause's
            // end): a longer run has usually run on into a verb ("the ticket stay open").
            // A word of degree opening the phrase says how much of the thing, not which ("the maximum payload
            // size" names the payload size).
            let start = i + 1 + usize::from(tokens.get(i + 1).is_some_and(|m| of_degree(m)));
            let run: Vec<&String> = tokens[start.min(tokens.len())..]
                .iter()
                .take(PHRASE_WORDS + 1)
                .take_while(|t| part(t))
                .collect();
            // Or an abbreviation for the modifier ("its GA launch" beside "the beta launch").
            let abbreviated = tokens.get(i + 1).is_some_and(|m| {
                (2..=4).contains(&m.len()) && m.chars().all(|c| c.is_ascii_uppercase())
            }) && tokens.get(i + 2).is_some_and(|h| part(h))
                && tokens.get(i + 3).is_none_or(|t| !part(t));
            let run: Vec<&String> = if abbreviated {
                tokens[i + 1..i + 3].iter().collect()
            } else {
                run
            };
            if let [modifier, head] = run[..] {
                if !of_degree(modifier) {
                    out.insert(Compound {
                        modifier: text::stem(&modifier.to_lowercase()),
                        head: text::stem(head),
                    });
                }
            }
        }
    }
    out
}

/// The question's compounds, read once per question.
#[derive(Debug, Clone, Default)]
pub struct Compounds {
    asked: BTreeSet<Compound>,
    /// The asked compounds that follow "for" or "of" ([`OF_WHAT`]): what the question asks something of.
    asked_of_what: BTreeSet<Compound>,
    skip: BTreeSet<String>,
}

impl Compounds {
    /// The compounds of `question`; `subject_words`: the words of its subjects' names, lower-case.
    pub fn of_question(question: &str, subject_words: impl IntoIterator<Item = String>) -> Self {
        let skip: BTreeSet<String> = subject_words.into_iter().collect();
        Compounds {
            asked: compounds(question, &skip),
            asked_of_what: compounds_after(question, &skip, Some(&OF_WHAT)),
            skip,
        }
    }

    /// What `question` asks of its compounds where it names no subject: its content words ([`text::content_set`],
    /// stemmed) that are no word of a compound ("What is the deadline for the sick leave?" → deadline). Empty
    /// when it has no compound.
    pub fn asked_of(&self, question: &str) -> HashSet<String> {
        if self.asked.is_empty() {
            return HashSet::new();
        }
        crate::subjects::attribute_words(question)
            .into_iter()
            .filter(|w| !self.asked.iter().any(|c| &c.modifier == w || &c.head == w))
            .collect()
    }

    /// Whether `sentence` names one of the question's compounds whole.
    pub fn named_in(&self, sentence: &str) -> bool {
        if self.asked.is_empty() {
            return false;
        }
        let stated = compounds(sentence, &self.skip);
        self.asked.iter().any(|c| stated.contains(c))
    }

    /// Whether `text` names one of the question's compounds or a look-alike of it (a compound with its head:
    /// "the bereavement leave" for "the sick leave"): the question's compound names a kind of thing these
    /// documents have.
    pub fn kind_named_in(&self, text: &str) -> bool {
        if self.asked.is_empty() {
            return false;
        }
        let stated = compounds(text, &self.skip);
        self.asked
            .iter()
            .any(|c| stated.iter().any(|s| s.head == c.head))
    }

    /// Whether `sentence` names a compound and no word of the question's ("Staff become eligible for the laptop
    /// budget after …" asked of the relocation allowance): what it says is said of something else, as
    /// [`crate::subjects::Subjects::another_in_place`] says of a name.
    pub fn another_in_place(&self, sentence: &str) -> bool {
        if self.asked.is_empty() {
            return false;
        }
        let stated = compounds(sentence, &self.skip);
        if stated.is_empty() {
            return false;
        }
        let written = text::content_set(sentence);
        !self
            .asked
            .iter()
            .any(|c| written.contains(&c.modifier) || written.contains(&c.head))
    }

    /// Whether `sentence` says its attribute *of* another thing than the question's: the question asks something
    /// for, of or to a compound ("the qualifying period for the relocation allowance") and the sentence, not naming
    /// it, has another compound there ("The qualifying period for the bereavement leave is 3 months"). Look-alikes
    /// need not share a head: a policy's allowances and leaves are things of one kind to its reader.
    pub fn another_of_what(&self, sentence: &str) -> bool {
        let asked = &self.asked_of_what;
        if asked.is_empty()
            || compounds(sentence, &self.skip)
                .iter()
                .any(|c| asked.contains(c))
        {
            return false;
        }
        compounds_after(sentence, &self.skip, Some(&OF_WHAT))
            .iter()
            .any(|s| !asked.contains(s))
    }

    /// Whether `sentence` names, in place of one of the question's compounds, another with its head.
    pub fn another_in(&self, sentence: &str) -> bool {
        if self.asked.is_empty() {
            return false;
        }
        let stated = compounds(sentence, &self.skip);
        self.asked.iter().any(|asked| {
            !stated.contains(asked)
                && stated
                    .iter()
                    .any(|s| s.head == asked.head && s.modifier != asked.modifier)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn another(question: &str, sentence: &str) -> bool {
        Compounds::of_question(question, []).another_in(sentence)
    }

    #[test]
    fn an_attribute_said_of_another_compound_is_said_of_another_thing() {
        let of_what = |q: &str, s: &str| Compounds::of_question(q, []).another_of_what(s);
        let q = "What is the qualifying period for the relocation allowance?";
        assert!(of_what(
            q,
            "The qualifying period for the bereavement leave is 3 months."
        ));
        assert!(!of_what(
            q,
            "The qualifying period for the relocation allowance is 6 months."
        ));
        assert!(
            !of_what(q, "Staff qualify after 6 months."),
            "nothing in its place"
        );
        assert!(
            !of_what(
                "What is the qualifying period?",
                "The qualifying period for the bereavement leave is 3 months."
            ),
            "the question names nothing there"
        );
    }

    #[test]
    fn a_compound_with_the_asked_head_and_another_modifier_names_another_thing() {
        let q = "What is the deadline for the sick leave?";
        assert!(another(
            q,
            "Requests for the bereavement leave must be submitted within 60 days."
        ));
        assert!(!another(
            q,
            "Requests for the sick leave must be submitted within 30 days."
        ));
        assert!(
            !another(
                q,
                "Paid sick leave and bereavement leave are requested alike."
            ),
            "the asked compound is named too"
        );
        assert!(
            !another(q, "Requests for leave must be submitted within 30 days."),
            "the head alone is the reader's to judge"
        );
        let q = "What is the payload size of the Labels API v2?";
        assert!(another(
            q,
            "The page size of the Labels API v2 is 100 items."
        ));
        assert!(!another(
            q,
            "Request bodies sent to the Labels API v2 may be at most 5 MB."
        ));
        let q = "Within how many days must requests for the home-office stipend be submitted?";
        assert!(another(
            q,
            "Requests for the travel stipend must be submitted within 60 days."
        ));
        assert!(
            !another(
                "What is the largest payload the Payouts API v3 accepts?",
                "The maximum payload size of the Payouts API v3 is 1 MB."
            ),
            "modifiers of degree name no other thing"
        );
        assert!(
            another(
                "What is the maximum payload size of the Invoices API v2?",
                "The maximum page size of the Invoices API v2 is 200 items."
            ),
            "a word of degree before the compound is passed over"
        );
        assert!(!another(
            "How long must the condition hold before DiskSpaceLow fires?",
            "The condition must hold for 5 minutes before DiskSpaceLow pages anyone."
        ));
        // Only in a phrase opened by a determiner.
        assert!(!another(
            "How long did the ticket stay open?",
            "The case stayed open for 18 hours."
        ));
        assert!(!another(
            "What are the long tentacles protected by?",
            "It has a pair of long, slender tentacles."
        ));
        // Names and numbers are no compound's words.
        assert!(!another(
            "What is the leave in Germany?",
            "In France the leave is 3 days."
        ));
    }

    #[test]
    fn a_sentence_naming_another_compound_and_no_word_of_the_asked_one_speaks_of_something_else() {
        let c = Compounds::of_question(
            "How long must staff work before they are eligible for the relocation allowance?",
            [],
        );
        assert!(c.another_in_place(
            "Staff become eligible for the laptop budget after 1 months of service."
        ));
        assert!(!c.another_in_place("Staff become eligible for it after 6 months of service."));
        assert!(!c.another_in_place(
            "Staff become eligible for the relocation allowance after 6 months of service."
        ));
    }
}
