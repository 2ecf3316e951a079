//! Sentences that say their value is not given. Company text names the attribute asked and then withholds it:
//! "the shop does not publish the range", "no date has been announced yet", "Finance still has to confirm the
//! budget", "a delay set in the paging tool", "the warranty depends on where you bought it". Such a sentence
//! meets the question's subject and attribute word for word, so the reader, matching them, read it as the answer
//! (issue 68: most of the held-in "number never given" near misses answered under the three other rules). It says
//! the documents do not answer; quoting it as an answer is the hallucination Attest exists to refuse.
//!
//! A question in the text (a FAQ's "Q: …?") states nothing either.
//!
//! A phrase that the question itself uses is not held against a sentence ("What does the warranty depend on?" is
//! answered by "depends on where you bought it").

use crate::text;

/// Phrases (as word sequences) by which a sentence declines to give a value. Generic English, not the generator's
/// templates: the held-out companies and the hidden corpora word it their own way.
const WITHHOLDING: [&[&str]; 26] = [
    &["not", "publish"],
    &["not", "published"],
    &["unpublished"],
    &["not", "give"],
    &["not", "given"],
    &["not", "say"],
    &["not", "stated"],
    &["not", "specified"],
    &["unspecified"],
    &["not", "disclosed"],
    &["undisclosed"],
    &["not", "announced"],
    &["no", "date"],
    &["not", "been", "set"],
    &["not", "yet", "set"],
    &["yet", "to", "be"],
    &["to", "be", "confirmed"],
    &["to", "be", "decided"],
    &["has", "to", "confirm"],
    &["will", "decide"],
    &["on", "request"],
    &["depends", "on"],
    &["depend", "on"],
    &["not", "known"],
    &["not", "written"],
    &["change", "without", "notice"],
];

/// Words of a phrase too common to say the question is about withholding ("not", "on", "to", …).
fn is_key(word: &str) -> bool {
    !text::is_function_word(word) && !matches!(word, "yet" | "date" | "will" | "has")
}

/// Whether `sentence` declines to give a value, by a phrase whose key words `question` does not use, or asks
/// a question itself (a FAQ's "Q: How far can the Halo Lite go in eco mode?" states nothing).
pub fn withholds(question: &str, sentence: &str) -> bool {
    if sentence.trim_end().ends_with('?') {
        return true;
    }
    // "doesn't publish" as "not publish".
    let words: Vec<String> = text::words(sentence)
        .into_iter()
        .map(|w| {
            if w.ends_with("n't") {
                "not".to_string()
            } else {
                w
            }
        })
        .collect();
    let asked: Vec<String> = text::words(question)
        .iter()
        .map(|w| text::stem(w))
        .collect();
    WITHHOLDING.iter().any(|phrase| {
        let uses = phrase.iter().filter(|w| is_key(w)).any(|w| {
            let key = text::stem(w);
            asked
                .iter()
                .any(|a| a.starts_with(&key) || key.starts_with(a.as_str()))
        });
        !uses
            && words
                .windows(phrase.len())
                .any(|window| window.iter().zip(phrase.iter()).all(|(a, b)| a == b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentence_withholding_its_value_answers_nothing() {
        let q = "What is the range of the Halo Lite in eco mode?";
        assert!(withholds(
            q,
            "In eco mode, the Halo Lite has a range of its own that the shop does not publish."
        ));
        assert!(withholds(
            "When will the Tracking API v2 be switched off?",
            "The Tracking API v2 will be switched off eventually, but no date has been announced yet."
        ));
        assert!(withholds(
            "What is the budget for Project Merlin?",
            "Omar: Finance still has to confirm the budget for Project Merlin for the fourth quarter."
        ));
        assert!(withholds(
            "What is the mileage rate in Germany?",
            "In Germany, the mileage rate is set at a local figure that People Ops shares on request."
        ));
        assert!(withholds(
            "What is the range of the Halo Lite in eco mode?",
            "Q: How far can the Halo Lite go in eco mode?"
        ));
        assert!(!withholds(
            "What is the range of the Halo Max?",
            "The Halo Max has a range of 80 km in eco mode."
        ));
    }

    #[test]
    fn a_question_about_the_withholding_is_answered_by_it() {
        assert!(!withholds(
            "What does the warranty of the Arlo Lite depend on?",
            "The Arlo Lite has a warranty that depends on where you bought it."
        ));
        assert!(!withholds(
            "Is the range of the Halo Lite published?",
            "The shop does not publish the range of the Halo Lite."
        ));
        assert!(withholds(
            "How long is the warranty?",
            "The spec sheet doesn't give the warranty."
        ));
        // Words inside other words are not the phrase: "denotes" is not "not".
        assert!(!withholds(
            "What does the symbol mean?",
            "The symbol denotes a given range."
        ));
    }
}
